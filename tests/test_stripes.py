# SPDX-License-Identifier: MIT
"""Striping the bulk data over several TCP connections (issue 21; -o
streams= in docs/qftfs.1, docs/architecture.md "Striping").

Where a side cannot send with bbr, one lossy far connection keeps a few
per cent of the link; several share the loss.  The stripes are joined
like resumed connections and taken by a STRIPE on bulk; each side then
spreads what it sends over them and the receiver puts the records back
in order.  These tests run on the lab of tests/netns.py (a network
namespace with an sshd): copies of awkward sizes both ways, lz4 on and
off, commit=close and commit=async, byte for byte; one stripe reset in
the middle of a copy (`ss -K` on that one connection: the session
resumes and stripes again, the copy completes); a full disk behind
striped WRITEs (close reports ENOSPC); and the choice itself: a far link
(the test knob makes the lab's near one count as far) whose server may
not use bbr gets stripes, one where both sides use bbr does not, and
streams=1 keeps one connection.
"""

import os
import random
import re
import subprocess

import pytest

import util
from util import MiB

from netns import lab, link, routed_lab, routed_link  # noqa: F401
from test_faults import (COPY_SIZE, DrainCopy, FeedCopy,  # noqa: F401
                         home, served, small_disk, ssh_mount,
                         wait_for)
from test_congestion import server_sockets, stats
from test_resume import digest, fed_digest

P = os.path.join
SIZES = [0, 1, 4095, 65537, MiB + 1, 13 * MiB + 7]
NO_NET_ADMIN = 'setpriv --bounding-set=-net_admin --inh-caps=-net_admin'
RTT_KNOB = 'QFTFS_FAULT_STRIPE_RTT_US'


def write_random(path, size, seed):
    rnd = random.Random(seed)
    with open(path, 'wb') as f:
        left = size
        while left:
            n = min(left, MiB)
            f.write(rnd.randbytes(n))
            left -= n


def server_conns(ns, served):
    """The server's established connections: (client-side port, bytes
    the client acknowledged, bytes received from it)."""
    out = []
    for port, info in server_sockets(ns, served):
        acked = re.search(r'bytes_acked:(\d+)', info)
        rcvd = re.search(r'bytes_received:(\d+)', info)
        out.append((port, int(acked.group(1)) if acked else 0,
                    int(rcvd.group(1)) if rcvd else 0))
    return out


def striped_mount(mounter, lab_, home_, served_, opts=(), server=None):
    return ssh_mount(mounter, lab_, home_, served_,
                     opts=['streams=4', 'timeout=10', 'keepalive=2'] +
                     list(opts), server=server)


@pytest.mark.deadline(240)
@pytest.mark.parametrize('compress', ['none', 'lz4'])
@pytest.mark.parametrize('commit', ['close', 'async'])
def test_striped_copies_both_ways(link, mounter, tmp_path, served, home,
                                  compress, commit):
    """-o streams=4: four connections carry the data both ways; files of
    awkward sizes go up and come down byte for byte, and every stripe
    carried some of it."""
    m = striped_mount(mounter, link, home, served,
                      opts=['compress=' + compress, 'commit=' + commit])
    st = stats(m)
    assert (st['streams'], st['streams_up'], st['streams_down']) == \
        (4, 4, 4), st
    src = tmp_path / 'src'
    src.mkdir()
    for i, size in enumerate(SIZES):
        write_random(str(src / ('up%d' % i)), size, i)
        write_random(P(served, 'down%d' % i), size, 100 + i)
    r = subprocess.run(['cp', '-r', str(src), P(m.mnt, 'tree')],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    if commit == 'async':
        r = util.run([util.client_bin(m.build), '--sync', m.mnt],
                     timeout=120)
        assert r.returncode == 0, r.stderr
    got = tmp_path / 'got'
    got.mkdir()
    for i, size in enumerate(SIZES):
        assert os.path.getsize(P(served, 'tree', 'up%d' % i)) == size
        assert digest(P(served, 'tree', 'up%d' % i)) == \
            digest(str(src / ('up%d' % i)))
        r = subprocess.run(['cp', P(m.mnt, 'down%d' % i), str(got)],
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        assert digest(str(got / ('down%d' % i))) == \
            digest(P(served, 'down%d' % i))
    conns = server_conns(link.ns, served)
    # bulk and its three stripes each moved a share both ways; meta
    # moved next to nothing
    busy_up = [c for c in conns if c[2] > 1 * MiB]
    busy_down = [c for c in conns if c[1] > 1 * MiB]
    assert len(busy_up) == 4 and len(busy_down) == 4, conns


def reset_one_stripe(lab_, served_, busy):
    """`ss -K` of one of the server's connections that `busy` picks
    (a stripe that carried data), by its client-side port."""
    conns = [c for c in server_conns(lab_.ns, served_) if busy(c)]
    assert len(conns) >= 2, conns
    port = conns[-1][0]
    r = util.run(lab_.ns.nsenter() + ['ss', '-K', '-t', 'state',
                                      'established', 'dport', '=',
                                      ':' + port], timeout=10)
    assert r.returncode == 0, r.stderr
    return port


@pytest.mark.deadline(240)
@pytest.mark.parametrize('compress', ['none', 'lz4'])
@pytest.mark.parametrize('mode', ['up', 'up-async', 'down'])
def test_one_stripe_reset_mid_copy(link, mounter, tmp_path, served, home,
                                   mode, compress):
    """`ss -K` of one stripe's connection 16 MiB into a 64 MiB striped
    copy (up with commit=close or async, down): the session resumes,
    the new link is striped again, and the copy completes byte for
    byte."""
    opts = ['resume=60', 'compress=' + compress]
    if mode == 'up-async':
        opts.append('commit=async')
    m = striped_mount(mounter, link, home, served, opts=opts)
    if mode.startswith('up'):
        target = P(served, 'big')
        copy = FeedCopy(tmp_path, P(m.mnt, 'big'), m)
        try:
            assert copy.feed(24 * MiB), 'cp stopped reading before any fault'
            wait_for(lambda: os.path.exists(target) and
                     os.path.getsize(target) >= 16 * MiB, 60,
                     'the server to write 16 MiB')
            reset_one_stripe(link, served, lambda c: c[2] > MiB)
            copy.done()
            rc = copy.cp.wait(120 * util.timeout_scale())
        finally:
            copy.finish()
        assert rc == 0, 'cp failed across a stripe reset: %s' % \
            copy.cp.output
        if mode == 'up-async':
            r = util.run([util.client_bin(m.build), '--sync', m.mnt],
                         timeout=120)
            assert r.returncode == 0, r.stderr
        assert digest(target) == fed_digest(COPY_SIZE)
    else:
        src = P(served, 'big')
        write_random(src, COPY_SIZE, 5)
        want = digest(src)
        cp = DrainCopy(tmp_path, P(m.mnt, 'big'), m, 16 * MiB)
        try:
            cp.paused()
            reset_one_stripe(link, served, lambda c: c[1] > MiB)
            cp.go()
            rc = cp.wait(120 * util.timeout_scale())
        finally:
            cp.finish()
        assert rc == 0, 'cp failed across a stripe reset: %s' % \
            cp.cp.output
        assert cp.err is None, cp.err
        assert cp.n == COPY_SIZE and cp.digest() == want
    st = stats(m)
    assert st['resumes'] >= 1, st
    assert st['streams'] == 4, 'the resumed link was not striped ' \
        'again: %s' % st


@pytest.mark.deadline(180)
def test_late_reply_ahead_of_restripe(link, mounter, tmp_path, served, home):
    """The server answers a request of the dead link on the resumed one
    before it answers the client's STRIPE (its fault hook holds the first
    WRITE reply, cuts the connection and sends the reply right after
    RESUME's): the reply reaches its writer, the new link is striped
    again, and the upload is whole.  The client once read that reply as
    the STRIPE's and left the session unstriped."""
    wrap, _ = util.fault_server(tmp_path, util.build_dir(),
                                'QFTFS_FAULT_LATE_REPLY', 'WRITE')
    m = striped_mount(mounter, link, home, served, server=wrap)
    assert stats(m)['streams'] == 4
    source = str(tmp_path / 'src')
    write_random(source, 8 * MiB + 3, 7)
    r = util.run(['cp', source, P(m.mnt, 'f')], timeout=120)
    assert r.returncode == 0, r.stderr
    assert digest(P(served, 'f')) == digest(source)
    st = stats(m)
    assert st['resumes'] >= 1, st
    assert st['streams'] == 4, 'the resumed link was not striped ' \
        'again: %s' % st
    problems = m.stop()
    assert not problems, '\n'.join(problems)


@pytest.mark.deadline(240)
def test_striped_write_error_reaches_close(link, mounter, tmp_path, home,
                                           need_root):
    """A 32 MiB striped upload onto a 16 MiB disk: WRITEs on every
    stripe, one of them the first to fail; cp's close reports ENOSPC and
    what landed is the source's beginning."""
    with small_disk(tmp_path) as served_:
        m = striped_mount(mounter, link, home, served_)
        assert stats(m)['streams'] == 4
        source = str(tmp_path / 'big')
        util.write_random_file(source, 32 * MiB)
        r = util.run(['cp', source, P(m.mnt, 'big')], timeout=300)
        assert r.returncode != 0, 'cp of 32 MiB onto 16 MiB succeeded'
        assert 'No space left on device' in r.stderr, r.stderr
        size = os.stat(P(served_, 'big')).st_size
        assert 0 < size < 32 * MiB
        with open(source, 'rb') as a, open(P(served_, 'big'), 'rb') as b:
            assert a.read(size) == b.read(size)
        problems = m.stop()
    assert not problems, problems


def lab_reno(ns):
    r = util.run(ns.nsenter() + ['sysctl', '-q', '-w',
                                 'net.ipv4.tcp_congestion_control=reno'],
                 timeout=10)
    assert r.returncode == 0, r.stderr


@pytest.mark.deadline(180)
def test_auto_stripes_where_bbr_is_forbidden(link, mounter, served, home,
                                             need_root):
    """The choice, each side for what it sends.  A server whose host
    keeps bbr from it (not in the allowed list, no CAP_NET_ADMIN; the
    namespace's default reno) on a far link (the knob makes the lab's
    count as far): eight connections, the server sends on four of them
    to begin with, this side -- root, with bbr -- on one.  The same with bbr allowed:
    no stripes.  streams=1: one connection whatever the link."""
    lab_reno(link.ns)
    path = '/proc/sys/net/ipv4/tcp_allowed_congestion_control'
    with open(path) as f:
        saved = f.read().strip()

    def mount(name, opts=()):
        return mounter(src=link.sshd.source(served),
                       mnt=P(os.path.dirname(served), name),
                       opts=list(opts), server_wrapper=NO_NET_ADMIN,
                       env=link.sshd.client_env(home, {RTT_KNOB: '0'}),
                       extra_args=['-p', str(link.sshd.port)])
    try:
        with open(path, 'w') as f:
            f.write('reno')
        m = mount('mnt')
        st = stats(m)
        assert st.get('congestion_down_reno') == 1, st
        assert (st['streams'], st['streams_up'], st['streams_down']) == \
            (8, 1, 4), st
        with open(P(m.mnt, 'f'), 'wb') as f:
            f.write(os.urandom(3 * MiB))
        with open(P(m.mnt, 'f'), 'rb') as f:
            assert len(f.read()) == 3 * MiB
        m.stop()
        m = mount('mnt1', ['streams=1'])
        st = stats(m)
        assert st['streams'] == 1, st
        # bulk and meta only (the last mount's server may still be on
        # its way out)
        wait_for(lambda: len(server_conns(link.ns, served)) == 2, 10,
                 'the server to have exactly two connections')
        m.stop()
        with open(path, 'w') as f:
            f.write('reno bbr')
        m = mount('mnt2')
        st = stats(m)
        assert st.get('congestion_down_bbr') == 1, st
        assert st['streams'] == 1, st
    finally:
        with open(path, 'w') as f:
            f.write(saved)


@pytest.mark.deadline(300)
def test_stripes_grow_where_the_link_loses(routed_link, mounter, tmp_path,
                                           served):
    """Both sides with reno (-o congestion=reno), on a link the knob makes
    far: eight connections, each side sending on four.  A clean link
    keeps it so through a copy each way; behind a bottleneck whose queue
    overflows (tbf: packets really dropped) each side sees its
    connections lose packets and sends on all eight, and the copies are
    whole."""
    home = routed_link.sshd.client_home(str(tmp_path / 'home'))
    m = mounter(src=routed_link.sshd.source(served),
                mnt=P(os.path.dirname(served), 'mnt'),
                opts=['congestion=reno', 'timeout=10', 'keepalive=2'],
                env=routed_link.sshd.client_env(home, {RTT_KNOB: '0'}),
                extra_args=['-p', str(routed_link.sshd.port)])

    def streams():
        st = stats(m)
        return st['streams'], st['streams_up'], st['streams_down']

    assert streams() == (8, 4, 4)
    source = str(tmp_path / 'src')
    write_random(source, 16 * MiB + 5, 11)
    write_random(P(served, 'down'), 16 * MiB + 9, 12)
    write_random(P(served, 'down2'), 16 * MiB + 7, 13)
    r = util.run(['cp', source, P(m.mnt, 'clean')], timeout=120)
    assert r.returncode == 0, r.stderr
    assert digest(P(m.mnt, 'down')) == digest(P(served, 'down'))
    assert streams() == (8, 4, 4), 'a clean link grew the stripes'
    routed_link.squeeze(50, 6000)
    r = util.run(['cp', source, P(m.mnt, 'lossy')], timeout=240)
    assert r.returncode == 0, r.stderr
    assert digest(P(served, 'lossy')) == digest(source)
    assert streams()[1] == 8, stats(m)
    r = util.run(['cp', P(m.mnt, 'down2'), str(tmp_path / 'back')],
                 timeout=240)
    assert r.returncode == 0, r.stderr
    assert digest(str(tmp_path / 'back')) == digest(P(served, 'down2'))
    assert streams() == (8, 8, 8), stats(m)
    routed_link.heal()
    problems = m.stop()
    assert not problems, '\n'.join(problems)
