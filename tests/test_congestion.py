# SPDX-License-Identifier: MIT
"""The TCP congestion control of the data plane (issue 21; -o congestion=
in docs/qftfs.1, docs/architecture.md "Congestion control").

On a far link that drops packets one connection running cubic, the
default of most distributions, collapses to a few per cent of the link;
BBR keeps its rate.  Each side chooses for what it sends: the client for
uploads, the server for downloads, BBR where the process may (root, or
bbr listed in net.ipv4.tcp_allowed_congestion_control), else the host's
default.  These tests mount through the lab of tests/netns.py, whose
namespace -- the server's host -- gets a loss-based default other than
bbr (reno: a namespace other than the first may only take an algorithm
of the allowed list as its default, and reno is always in it), and
check the choice three ways: the mount's statistics, the kernel's own
view of the server's sockets (`ss -ti` in the namespace), and after a
resume, whose connections are new sockets.

The one test that forbids BBR to the server changes the host-wide
allowed list (it is not per namespace) for its own duration, and runs
the server without CAP_NET_ADMIN (setpriv), as an ordinary user's server
would be.
"""

import json
import os
import re
import time

import pytest

import util

from netns import lab, link  # noqa: F401
from test_faults import home, served, ssh_mount  # noqa: F401

P = os.path.join
SYSCTL = '/proc/sys/net/ipv4/'
NO_NET_ADMIN = 'setpriv --bounding-set=-net_admin --inh-caps=-net_admin'
# The lab host's default: loss-based, not bbr, settable in a namespace.
LAB_DEFAULT = 'reno'


def sysctl(name, ns=None):
    cmd = (ns.nsenter() if ns else []) + ['cat', SYSCTL + name]
    return util.run(cmd, timeout=10).stdout.strip()


def available():
    return sysctl('tcp_available_congestion_control').split()


def need_bbr():
    if 'bbr' not in available():
        # as root's setsockopt would: load it where it is a module
        util.run(['modprobe', 'tcp_bbr'], timeout=30)
    if 'bbr' not in available():
        pytest.skip('congestion tests SKIPPED: bbr is not available here '
                    '(%s)' % ' '.join(available()))


def lab_default(ns, cc=LAB_DEFAULT):
    r = util.run(ns.nsenter() + ['sysctl', '-q', '-w',
                                 'net.ipv4.tcp_congestion_control=' + cc],
                 timeout=10)
    assert r.returncode == 0, r.stderr
    assert sysctl('tcp_congestion_control', ns) == cc


@pytest.fixture(scope='module')
def reno_lab(lab):  # noqa: F811 - the fixture of netns.py
    """The lab with reno as its host's default (per namespace)."""
    need_bbr()
    lab_default(lab.ns)
    return lab


def stats(m):
    r = util.run([util.client_bin(m.build), '--stats', '--json', m.mnt],
                 timeout=10)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def text_stats(m):
    r = util.run([util.client_bin(m.build), '--stats', m.mnt], timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def chosen(st):
    """(up, down) as the statistics name them; None where absent."""
    up = [k[len('congestion_up_'):] for k, v in st.items()
          if k.startswith('congestion_up_') and v == 1]
    down = [k[len('congestion_down_'):] for k, v in st.items()
            if k.startswith('congestion_down_') and v == 1]
    assert len(up) <= 1 and len(down) <= 1, st
    return (up[0] if up else None, down[0] if down else None)


def server_sockets(ns, served):
    """The established TCP sockets of the qftfs-server serving `served`
    (a unique temp path), as `ss -ti` in its namespace shows them: a list
    of (client-side port, the details line)."""
    pids = {str(p) for p in util.find_processes('--root ' + served)}
    r = util.run(ns.nsenter() + ['ss', '-t', '-i', '-n', '-p', '-H',
                                 'state', 'established'], timeout=10)
    assert r.returncode == 0, r.stderr
    found = []
    lines = r.stdout.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r'"qftfs-server",pid=(\d+)', line)
        if not m or m.group(1) not in pids:
            continue
        # ss prints the details on the next, indented line (or, with
        # -H, sometimes on the same one)
        info = line + ' ' + (lines[i + 1] if i + 1 < len(lines) else '')
        found.append((line.split()[-2].rsplit(':', 1)[1], info))
    return found


def server_socket_cc(ns, served):
    """The congestion control of each of those sockets."""
    found = []
    for _, info in server_sockets(ns, served):
        names = [w for w in info.split() if w in available()]
        assert names, 'no algorithm in: %r' % info
        found.append(names[0])
    return found


def wait_connections(ns, served, n, timeout=10):
    deadline = time.monotonic() + timeout * util.timeout_scale()
    got = server_socket_cc(ns, served)
    while len(got) < n and time.monotonic() < deadline:
        time.sleep(0.1)
        got = server_socket_cc(ns, served)
    return got


def client_default():
    return sysctl('tcp_congestion_control')


@pytest.mark.deadline(120)
def test_auto_takes_bbr_both_ways(reno_lab, mounter, served, home):
    """The default (auto) on a host whose default is reno: a root server sends with bbr,
    and so does the client; the kernel agrees for each of the server's
    sockets (bulk and meta), and the text statistics say it."""
    m = ssh_mount(mounter, reno_lab, home, served)
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(b'x' * 4096)
    assert chosen(stats(m)) == ('bbr', 'bbr')
    got = wait_connections(reno_lab.ns, served, 2)
    assert got and set(got) == {'bbr'}, got
    assert 'TCP bbr up, bbr down' in text_stats(m)


@pytest.mark.deadline(120)
def test_system_keeps_each_hosts_default(reno_lab, mounter, served, home):
    """-o congestion=system: each side sends with its own host's default
    -- reno from the server's namespace, whatever this host has."""
    m = ssh_mount(mounter, reno_lab, home, served,
                  opts=['congestion=system'])
    assert chosen(stats(m)) == (client_default(), LAB_DEFAULT)
    got = wait_connections(reno_lab.ns, served, 2)
    assert got and set(got) == {LAB_DEFAULT}, got


@pytest.mark.deadline(120)
def test_named_algorithm_both_ways(reno_lab, mounter, served, home):
    """-o congestion=bbr: both sides use exactly that (and reno, the
    namespace's default, on this host too)."""
    m = ssh_mount(mounter, reno_lab, home, served, opts=['congestion=bbr'])
    assert chosen(stats(m)) == ('bbr', 'bbr')
    got = wait_connections(reno_lab.ns, served, 2)
    assert got and set(got) == {'bbr'}, got
    m.stop()
    m = ssh_mount(mounter, reno_lab, home, served, opts=['congestion=reno'])
    assert chosen(stats(m)) == ('reno', 'reno')


@pytest.mark.deadline(120)
def test_unknown_algorithm_fails_the_mount(reno_lab, tmp_path, served,
                                           home):
    """An algorithm this host does not have: the mount fails at once,
    saying which ones it has, rather than quietly sending without it."""
    from test_ssh import run_client
    r = run_client(reno_lab.sshd, home, reno_lab.sshd.source(served),
                   str(tmp_path / 'mnt'), opts=['congestion=nonesuch'])
    assert r.returncode != 0, r
    assert 'congestion=nonesuch' in r.stderr, r.stderr
    assert 'not available on this host (available: ' in r.stderr, r.stderr
    assert not util.find_mount(str(tmp_path / 'mnt'))


@pytest.mark.parametrize('value', ['BBR', 'bbr cubic', 'a' * 16, '../x'])
def test_bad_value_is_a_usage_error(tmp_path, value):
    """A value that cannot name an algorithm is refused before anything
    is started, with the choices."""
    b = util.build_dir()
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    r = util.run([util.client_bin(b), '-o', 'congestion=' + value,
                  'root@127.0.0.1:/', str(mnt)], timeout=30)
    assert r.returncode != 0, r
    assert "invalid congestion '%s'" % value in r.stderr, r.stderr
    assert 'expected auto, system' in r.stderr, r.stderr


@pytest.mark.deadline(120)
def test_server_without_bbr_keeps_the_default(reno_lab, mounter, served,
                                              home):
    """A host that forbids bbr to the server's user (not in the allowed
    list, no CAP_NET_ADMIN): the mount works, the server sends with the
    host's default and the statistics say so; with bbr in the allowed
    list the same unprivileged server takes it."""
    if os.geteuid() != 0:
        pytest.skip('needs root: changes net.ipv4.tcp_allowed_'
                    'congestion_control')
    def unprivileged_mount(name):
        # the server without CAP_NET_ADMIN, as an ordinary user's is
        return mounter(src=reno_lab.sshd.source(served),
                       mnt=P(os.path.dirname(served), name),
                       server_wrapper=NO_NET_ADMIN,
                       env=reno_lab.sshd.client_env(home),
                       extra_args=['-p', str(reno_lab.sshd.port)])

    path = SYSCTL + 'tcp_allowed_congestion_control'
    with open(path) as f:
        saved = f.read().strip()
    try:
        with open(path, 'w') as f:
            f.write('reno')
        m = unprivileged_mount('mnt')
        st = stats(m)
        assert chosen(st)[1] == LAB_DEFAULT, st
        got = wait_connections(reno_lab.ns, served, 2)
        assert got and set(got) == {LAB_DEFAULT}, got
        m.stop()

        with open(path, 'w') as f:
            f.write('reno bbr')
        m = unprivileged_mount('mnt2')
        assert chosen(stats(m))[1] == 'bbr'
    finally:
        with open(path, 'w') as f:
            f.write(saved)


@pytest.mark.deadline(180)
def test_resumed_connections_keep_the_choice(link, mounter, served, home):
    """Every TCP connection of the server's host reset: the session
    resumes on new sockets, which get the same choice (the server's
    resumed connections, this host's reconnected ones)."""
    need_bbr()
    lab_default(link.ns)
    m = ssh_mount(mounter, link, home, served,
                  opts=['timeout=5', 'keepalive=2', 'resume=60'])
    before = wait_connections(link.ns, served, 2)
    assert before and set(before) == {'bbr'}, before
    ports = set(data_ports(link.ns, served))
    link.reset_tcp()
    deadline = time.monotonic() + 60 * util.timeout_scale()
    while time.monotonic() < deadline:
        with open(P(m.mnt, 'after'), 'wb') as f:
            f.write(b'y')
        st = stats(m)
        now = set(data_ports(link.ns, served))
        if st['resumes'] >= 1 and now and not now & ports:
            break
        time.sleep(0.2)
    assert st['resumes'] >= 1, st
    assert chosen(st) == ('bbr', 'bbr'), st
    after = wait_connections(link.ns, served, 2)
    assert after and set(after) == {'bbr'}, after


def data_ports(ns, served):
    """The client-side ports of the server's established connections."""
    return [port for port, _ in server_sockets(ns, served)]


def test_local_mount_has_no_congestion_keys(mounter):
    """A local mount runs on socketpairs: nothing to choose, nothing
    shown."""
    m = mounter()
    st = stats(m)
    assert chosen(st) == (None, None), st
    assert 'TCP ' not in text_stats(m)
