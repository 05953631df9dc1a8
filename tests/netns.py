# SPDX-License-Identifier: MIT
"""A private link for the fault tests: a network namespace joined to the
test's own by a veth pair, with an sshd (tests/sshd.py) inside it.

    root namespace                      namespace qftfs-ft-PID-XXXX
    qftfs client ── qfXXXXh 10.78.N.1 ═══ qfXXXXn 10.78.N.2 ── sshd,
                                                    qftfs-server --session

Two more faults, for the resumable sessions of issue 17: reset_tcp() resets
every TCP connection of the namespace (`ss -K`: both ends see a reset; the
listeners stay), and move_client() gives the client's end another address
of the /24 and drops the old one, as a laptop that changed networks: the
connections from the old address stall (their packets go nowhere) while
new ones work at once.

cut() makes the link drop every packet in both directions without a word
to either end, as a pulled cable does: each veth's root qdisc becomes a
pfifo with room for no packet, so every packet is dropped at the sender.
Nothing else changes: the interfaces stay up, no route goes away, no ICMP
error and no carrier event reaches a socket, so TCP learns of the cut only
from its own timers (and qftfs from its keepalives and deadlines).  heal()
puts the default qdisc back.  This needs only `ip`, `tc` and the pfifo
qdisc, all in every kernel; sch_netem, act_gact and cls_matchall, which
are often missing, are not used.  The lab checks once that a cut really
drops (a connect times out rather than being refused) and that a heal
really restores the link.

sshd and everything it starts run through `nsenter --net`, which changes
the network namespace only: unlike `ip netns exec` it does not make a
mount namespace of its own, so a tmpfs mounted by a test after the lab is
up is seen by the server.

Names and the /24 are unique per lab (pid and random tag; a subnet of
10.78.0.0/16 not in use on this machine; 10.77.* belongs to another tool),
so labs of runs in parallel do not collide.  destroy() runs on every exit
path: it heals, stops sshd, kills whatever still runs in the namespace
(ssh sessions, servers: all started by this lab) and deletes the pair and
the namespace.

Everything skips with its reason when root, `ip`, `tc`, `nsenter`, sshd
or network namespaces are unavailable.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import time

import pytest

import sshd as sshd_mod
import util

SUBNET = '10.78.%d.%d'


class Unavailable(Exception):
    """Network namespaces cannot be made here; the message says why."""


def unavailable_reason():
    """Why a lab cannot run here, or None."""
    if os.geteuid() != 0:
        return 'needs root for network namespaces (runs as uid %d)' % \
            os.geteuid()
    for tool, pkg in (('ip', 'iproute2'), ('tc', 'iproute2'),
                      ('nsenter', 'util-linux')):
        if shutil.which(tool) is None:
            return '`%s` is missing (install %s)' % (tool, pkg)
    return sshd_mod.unavailable_reason()


def _run(cmd, check=True):
    r = util.run(cmd, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError('%s failed (exit %d): %s'
                           % (' '.join(cmd), r.returncode,
                              (r.stderr or r.stdout).strip()))
    return r


def _used_subnets():
    r = _run(['ip', '-4', '-o', 'addr', 'show'], check=False)
    r2 = _run(['ip', '-4', 'route', 'show', 'table', 'all'], check=False)
    used = set()
    for word in (r.stdout + ' ' + r2.stdout).split():
        parts = word.split('/')[0].split('.')
        if len(parts) == 4 and parts[:2] == ['10', '78']:
            try:
                used.add(int(parts[2]))
            except ValueError:
                pass
    return used


class NetNs:
    """One namespace and its veth pair; create(), then cut()/heal()."""

    def __init__(self):
        tag = '%04x' % random.SystemRandom().randrange(1 << 16)
        self.name = 'qftfs-ft-%d-%s' % (os.getpid(), tag)
        # Interface names: at most 15 bytes.
        short = '%05x%s' % (os.getpid() & 0xfffff, tag[:2])
        self.host_if = 'qf%sh' % short
        self.ns_if = 'qf%sn' % short
        self.host_addr = None
        self.ns_addr = None
        self.created = False
        self.linked = False
        self.is_cut = False
        self.sshd = None

    # -- set-up and tear-down ----------------------------------------------

    def nsenter(self):
        """Command prefix that runs a program inside the namespace."""
        return ['nsenter', '--net=/run/netns/' + self.name, '--']

    def _add_ns(self):
        r = _run(['ip', 'netns', 'add', self.name], check=False)
        if r.returncode != 0:
            raise Unavailable('cannot create a network namespace: %s'
                              % r.stderr.strip())
        self.created = True

    def create(self):
        self._add_ns()
        r = _run(['ip', 'link', 'add', self.host_if, 'type', 'veth', 'peer',
                  'name', self.ns_if, 'netns', self.name], check=False)
        if r.returncode != 0:
            raise Unavailable('cannot create a veth pair: %s'
                              % r.stderr.strip())
        self.linked = True
        used = _used_subnets()
        free = [n for n in range(1, 255) if n not in used]
        if not free:
            raise RuntimeError('no free /24 left in 10.78.0.0/16')
        n = random.SystemRandom().choice(free)
        self.subnet = n
        self.host_addr = SUBNET % (n, 1)
        self.ns_addr = SUBNET % (n, 2)
        _run(['ip', 'addr', 'add', self.host_addr + '/24', 'dev',
              self.host_if])
        _run(['ip', 'link', 'set', self.host_if, 'up'])
        ns = ['ip', '-n', self.name]
        _run(ns + ['addr', 'add', self.ns_addr + '/24', 'dev', self.ns_if])
        _run(ns + ['link', 'set', self.ns_if, 'up'])
        _run(ns + ['link', 'set', 'lo', 'up'])
        return self

    def pids(self):
        """Processes inside the namespace (all started by this lab)."""
        if not self.created:
            return []
        r = _run(['ip', 'netns', 'pids', self.name], check=False)
        return [int(p) for p in r.stdout.split() if p.isdigit()]

    def destroy(self):
        """Heals, stops everything in the namespace and removes it; safe
        to call on a half-built lab and more than once."""
        try:
            self.heal()
        except Exception:  # noqa: BLE001 - the pair goes away below anyway
            pass
        if self.sshd:
            self.sshd.stop()
            self.sshd = None
        for _ in range(50):
            left = self.pids()
            if not left:
                break
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.1)
        if self.linked:
            _run(['ip', 'link', 'del', self.host_if], check=False)
            self.linked = False
        if self.created:
            _run(['ip', 'netns', 'del', self.name], check=False)
            self.created = False

    # -- the fault ----------------------------------------------------------

    def _set_qdisc(self, drop):
        """A pfifo with room for no packet on both ends of the link, or
        back to the default qdisc."""
        for prefix, dev in (([], self.host_if), (self.nsenter(), self.ns_if)):
            if drop:
                _run(prefix + ['tc', 'qdisc', 'replace', 'dev', dev, 'root',
                               'pfifo', 'limit', '0'])
            else:
                # Fails harmlessly when the link was never cut.
                _run(prefix + ['tc', 'qdisc', 'del', 'dev', dev, 'root'],
                     check=False)

    def cut(self):
        """From now on every packet on the link is silently dropped."""
        self._set_qdisc(True)
        self.is_cut = True

    def heal(self):
        """The link passes packets again."""
        if self.linked:
            self._set_qdisc(False)
        self.is_cut = False

    def reset_tcp(self):
        """Resets every TCP connection of the namespace (the sshd's and
        the servers'), at both ends; the listening sockets stay.  Returns
        the lines `ss -K` printed for them (one per socket it reset, as
        far as it reports them)."""
        r = _run(self.nsenter() + ['ss', '-K', '-t', 'state', 'connected'])
        return r.stdout.splitlines()[1:]

    def move_client(self):
        """The client's end of the link gets the next address of the /24
        and loses the one it had; returns the new address."""
        host = int(self.host_addr.rsplit('.', 1)[1]) + 1
        if host == 2:
            host = 3
        new = SUBNET % (self.subnet, host)
        _run(['ip', 'addr', 'del', self.host_addr + '/24', 'dev',
              self.host_if])
        _run(['ip', 'addr', 'add', new + '/24', 'dev', self.host_if])
        self.host_addr = new
        return new

    def verify_cut(self, port):
        """Checks that cut() drops silently and heal() restores, against
        the sshd's port: an error here means the fault is not the one the
        tests claim to inject."""
        with socket.create_connection((self.ns_addr, port), timeout=5):
            pass
        self.cut()
        try:
            t0 = time.monotonic()
            try:
                socket.create_connection((self.ns_addr, port), timeout=1.5)
            except socket.timeout:
                pass
            except OSError as e:
                raise RuntimeError('a connect across the cut link failed '
                                   'at once (%s), so the cut is not silent'
                                   % e) from None
            else:
                raise RuntimeError('a connect across the cut link worked')
            assert time.monotonic() - t0 >= 1.0
        finally:
            self.heal()
        with socket.create_connection((self.ns_addr, port), timeout=5):
            pass


class RoutedNetNs(NetNs):
    """The namespace behind a router: a second namespace that forwards
    between two veth pairs, so that a queue on the way -- not a sender's
    own, which pushes back on the sender instead of dropping -- can
    overflow and lose packets (squeeze()).

        root ── qfXXXXh 10.78.N.1 ═ r 10.78.N.2 ┐ router namespace
                                  (forwarding)  ┤
        server namespace ── qfXXXXn 10.78.M.2 ═ r 10.78.M.1 ┘
    """

    def __init__(self):
        super().__init__()
        self.router = self.name + '-r'
        short = self.host_if[2:-1]
        self.r_host_if = 'qf%sa' % short
        self.r_ns_if = 'qf%sb' % short
        self.router_made = False

    def _router(self):
        return ['nsenter', '--net=/run/netns/' + self.router, '--']

    def create(self):
        self._add_ns()
        _run(['ip', 'netns', 'add', self.router])
        self.router_made = True
        _run(['ip', 'link', 'add', self.host_if, 'type', 'veth', 'peer',
              'name', self.r_host_if, 'netns', self.router])
        self.linked = True
        _run(['ip', '-n', self.router, 'link', 'add', self.r_ns_if, 'type',
              'veth', 'peer', 'name', self.ns_if, 'netns', self.name])
        used = _used_subnets()
        free = [n for n in range(1, 255) if n not in used]
        if len(free) < 2:
            raise RuntimeError('no two free /24s left in 10.78.0.0/16')
        n, m = random.SystemRandom().sample(free, 2)
        self.subnet = n
        self.host_addr = SUBNET % (n, 1)
        self.ns_addr = SUBNET % (m, 2)
        rt = ['ip', '-n', self.router]
        ns = ['ip', '-n', self.name]
        _run(['ip', 'addr', 'add', self.host_addr + '/24', 'dev',
              self.host_if])
        _run(['ip', 'link', 'set', self.host_if, 'up'])
        _run(['ip', 'route', 'add', SUBNET % (m, 0) + '/24', 'via',
              SUBNET % (n, 2)])
        _run(rt + ['addr', 'add', SUBNET % (n, 2) + '/24', 'dev',
                   self.r_host_if])
        _run(rt + ['addr', 'add', SUBNET % (m, 1) + '/24', 'dev',
                   self.r_ns_if])
        for dev in (self.r_host_if, self.r_ns_if, 'lo'):
            _run(rt + ['link', 'set', dev, 'up'])
        _run(self._router() + ['sysctl', '-q', '-w',
                               'net.ipv4.ip_forward=1'])
        _run(ns + ['addr', 'add', self.ns_addr + '/24', 'dev', self.ns_if])
        _run(ns + ['link', 'set', self.ns_if, 'up'])
        _run(ns + ['link', 'set', 'lo', 'up'])
        _run(ns + ['route', 'add', 'default', 'via', SUBNET % (m, 1)])
        return self

    def move_client(self):
        raise NotImplementedError('a routed lab keeps its addresses')

    def squeeze(self, rate_mbit, queue_bytes):
        """The router forwards each way at `rate_mbit` through a queue of
        `queue_bytes` (tbf), dropping what does not fit: real losses to
        both ends' TCP.  heal() takes it away."""
        for dev in (self.r_host_if, self.r_ns_if):
            _run(self._router() + ['tc', 'qdisc', 'replace', 'dev', dev,
                                   'root', 'tbf', 'rate',
                                   '%dmbit' % rate_mbit, 'burst', '16kb',
                                   'limit', str(queue_bytes)])

    def heal(self):
        super().heal()
        if self.router_made:
            for dev in (self.r_host_if, self.r_ns_if):
                _run(self._router() + ['tc', 'qdisc', 'del', 'dev', dev,
                                       'root'], check=False)

    def destroy(self):
        super().destroy()
        if self.router_made:
            _run(['ip', 'netns', 'del', self.router], check=False)
            self.router_made = False


class Lab:
    """The namespace with its sshd; what the `lab` fixture yields."""

    def __init__(self, ns, sshd):
        self.ns = ns
        self.sshd = sshd

    def cut(self):
        self.ns.cut()

    def heal(self):
        self.ns.heal()

    def squeeze(self, rate_mbit, queue_bytes):
        self.ns.squeeze(rate_mbit, queue_bytes)

    def reset_tcp(self):
        return self.ns.reset_tcp()

    def move_client(self):
        return self.ns.move_client()

    @property
    def is_cut(self):
        return self.ns.is_cut


def _labs(cls, tmp_path_factory):
    why = unavailable_reason()
    if why:
        pytest.skip('network fault tests SKIPPED: ' + why)
    ns = cls()
    try:
        try:
            ns.create()
        except Unavailable as e:
            pytest.skip('network fault tests SKIPPED: %s' % e)
        s = sshd_mod.Sshd(str(tmp_path_factory.mktemp('netns-sshd')),
                          addr=ns.ns_addr, wrapper=ns.nsenter())
        ns.sshd = s
        s.start()
        ns.verify_cut(s.port)
        yield Lab(ns, s)
    finally:
        ns.destroy()


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    yield from _labs(NetNs, tmp_path_factory)


@pytest.fixture(scope='module')
def routed_lab(tmp_path_factory):
    """A lab whose link runs through a router (RoutedNetNs), which can
    squeeze() it."""
    yield from _labs(RoutedNetNs, tmp_path_factory)


@pytest.fixture
def link(lab, mounter):
    """The lab for one test; healed at the end of the test, before its
    mounts (set up earlier by `mounter`) are unmounted."""
    yield lab
    lab.heal()


@pytest.fixture
def routed_link(routed_lab, mounter):
    """As `link`, for the routed lab."""
    yield routed_lab
    routed_lab.heal()
