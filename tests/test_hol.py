# SPDX-License-Identifier: MIT
"""No head-of-line blocking: the bulk and meta connections (issue 4).

A mount uses two connections per link generation (docs/protocol.md,
"Connections"): file handles and their data on bulk, paths and directory
handles on meta, so that `ls -l` never waits behind queued file data.
These tests check correctness, not speed:

1. a large write-behind copy in one thread while another lists, stats,
   creates and renames on the same mount: every answer right, the copy
   verified by checksum; stat and lookup of a file with writes in flight
   see all of them;
2. two connections are really used: the server serves the second one on
   a thread named qftfs-meta;
3. a server that does not serve the meta connection (descriptor closed
   by a wrapper, or QFTFS_SERVER_META=off) still works, on one;
4. after the server is killed the mount reconnects, with two again;
5. over ssh with the direct data plane the client holds two TCP data
   connections besides the ssh one; through the tunnel, none.
"""

import hashlib
import os
import signal
import subprocess
import threading
import time

import pytest

import test_ssh
import util
from test_ssh import sshd  # noqa: F401 - the module's sshd fixture
from util import MiB

P = os.path.join

DROP_META_WRAPPER = '''#!/bin/sh
# A server without meta support, as the client sees it: the option is
# dropped and the descriptor closed before the real server starts.
for a in "$@"; do
    shift
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    if [ "$a" = --meta-fd ]; then skip=1; continue; fi
    set -- "$@" "$a"
done
exec 3>&-
exec "$@"
'''


def _servers(m):
    """The local mount's server processes now alive."""
    return [p for p in util.proc_children(m.proc.pid)
            if util.proc_alive(p, '--root')]


def _thread_names(pid):
    names = []
    try:
        tasks = os.listdir('/proc/%d/task' % pid)
    except OSError:
        return names
    for t in tasks:
        try:
            with open('/proc/%d/task/%s/comm' % (pid, t)) as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


def _meta_served(pid, wait=5.0):
    """Whether server `pid` has its meta thread (it may still be starting
    or, in session mode, accepting)."""
    deadline = time.monotonic() + wait
    while True:
        if 'qftfs-meta' in _thread_names(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _one_server(m):
    deadline = time.monotonic() + 10
    while True:
        s = _servers(m)
        if len(s) == 1:
            return s[0]
        assert time.monotonic() < deadline, 'servers: %r' % s
        time.sleep(0.05)


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _copy(src, dst, chunk=1 * MiB):
    """A cp-like copy in big writes, so write-behind keeps many in flight."""
    with open(src, 'rb') as fi, open(dst, 'wb') as fo:
        while True:
            b = fi.read(chunk)
            if not b:
                break
            fo.write(b)


def _meta_loop(mnt, names, stop, errors, rounds):
    """ls -l, stat, mkdir, rename, rmdir on the mount until `stop`."""
    d = P(mnt, 'tree')
    i = 0
    try:
        while not stop.is_set() or i < 3:
            got = sorted(os.listdir(d))
            if got != names:
                errors.append('listing %d: %d entries, want %d'
                              % (i, len(got), len(names)))
                return
            for n in names[::37]:
                st = os.lstat(P(d, n))
                if st.st_size != len(n):
                    errors.append('stat of %s: size %d' % (n, st.st_size))
                    return
            a, b = P(mnt, 'dir-a%d' % i), P(mnt, 'dir-b%d' % i)
            os.mkdir(a)
            os.rename(a, b)
            if not os.path.isdir(b) or os.path.exists(a):
                errors.append('rename %d not visible' % i)
                return
            os.rmdir(b)
            i += 1
    except OSError as e:
        errors.append('metadata loop failed at round %d: %r' % (i, e))
    rounds.append(i)


def _tree(src, n=300):
    names = sorted('f%04d' % i for i in range(n))
    os.makedirs(P(src, 'tree'), exist_ok=True)
    for name in names:
        with open(P(src, 'tree', name), 'w') as f:
            f.write(name)
    return names


def _copy_with_metadata(m, tmp_path, size):
    src, mnt = m
    names = _tree(src)
    data = os.urandom(size)
    local = str(tmp_path / 'big')
    with open(local, 'wb') as f:
        f.write(data)
    stop = threading.Event()
    errors, rounds = [], []
    meta = threading.Thread(target=_meta_loop,
                            args=(mnt, names, stop, errors, rounds))
    meta.start()
    try:
        _copy(local, P(mnt, 'big'))
    finally:
        stop.set()
        meta.join(timeout=120)
    assert not meta.is_alive(), 'the metadata loop hangs'
    assert not errors, errors
    assert rounds and rounds[0] >= 3, rounds
    assert os.stat(P(mnt, 'big')).st_size == size
    with open(P(src, 'big'), 'rb') as f:
        assert _sha(f.read()) == _sha(data), 'the copy differs on the server'
    with open(P(mnt, 'big'), 'rb') as f:
        assert _sha(f.read()) == _sha(data), 'the copy differs on the mount'
    return rounds[0]


# ---------------------------------------------------------------------------
# Local mounts

@pytest.mark.deadline(300)
def test_metadata_during_copy(mounter, tmp_path):
    """Write-behind copy and namespace operations at once: all correct,
    and the server serves a meta connection."""
    m = mounter(opts=['attr_timeout=0', 'entry_timeout=0'])
    rounds = _copy_with_metadata(m, tmp_path,
                                 (16 if util.fast_mode() else 48) * MiB)
    assert _meta_served(_one_server(m)), \
        'no qftfs-meta thread in the server'
    print('metadata rounds during the copy: %d' % rounds)


@pytest.mark.deadline(120)
def test_stat_sees_writes_in_flight(mounter):
    """Path getattr and lookup of a file with write-behind data in flight
    on bulk go behind it, not past it on meta: the size is what was
    written, at every step."""
    m = mounter(opts=['attr_timeout=0', 'entry_timeout=0'])
    src, mnt = m
    chunk = os.urandom(8 * MiB)
    with open(P(mnt, 'f'), 'wb', buffering=0) as f:
        for i in range(1, 7):
            f.write(chunk)
            assert os.stat(P(mnt, 'f')).st_size == i * len(chunk), i
            f.write(chunk[:MiB])
            assert os.lstat(P(mnt, 'f')).st_size == i * len(chunk) + MiB
            f.truncate(i * len(chunk))
            f.seek(i * len(chunk))
    assert os.stat(P(src, 'f')).st_size == 6 * len(chunk)


def test_two_connections(mounter):
    """The server has a thread named qftfs-meta and one more socket than
    the stdio one; the client logs nothing about one stream."""
    m = mounter()
    src, mnt = m
    os.mkdir(P(mnt, 'd'))
    with open(P(mnt, 'd', 'f'), 'w') as f:
        f.write('x')
    assert os.listdir(P(mnt, 'd')) == ['f']
    pid = _one_server(m)
    assert _meta_served(pid), _thread_names(pid)
    socks = set()
    for fd in os.listdir('/proc/%d/fd' % pid):
        try:
            t = os.readlink('/proc/%d/fd/%s' % (pid, fd))
        except OSError:
            continue
        if t.startswith('socket:'):
            socks.add(t)
    assert len(socks) == 2, socks
    assert 'serves one stream' not in m.log(), m.log()


@pytest.mark.deadline(300)
@pytest.mark.parametrize('how', ['wrapper', 'env'])
def test_fallback_one_connection(mounter, tmp_path, how):
    """A server that does not serve the meta connection: the client says
    so once and runs everything on one connection, correctly."""
    kw = {}
    if how == 'wrapper':
        w = str(tmp_path / 'drop-meta.sh')
        with open(w, 'w') as f:
            f.write(DROP_META_WRAPPER)
        os.chmod(w, 0o755)
        kw['server_wrapper'] = w
    else:
        kw['env'] = dict(os.environ, QFTFS_SERVER_META='off')
    m = mounter(opts=['attr_timeout=0', 'entry_timeout=0'], **kw)
    pid = _one_server(m)
    assert 'serves one stream' in m.log(), m.log()
    assert not _meta_served(pid, wait=0.5), _thread_names(pid)
    _copy_with_metadata(m, tmp_path, 8 * MiB)


@pytest.mark.deadline(180)
def test_reconnect_two_connections(mounter, tmp_path):
    """SIGKILL of the server: the mount reconnects by itself, with both
    connections again, and both kinds of requests work."""
    m = mounter(opts=['timeout=5'], expect_rc=None)
    src, mnt = m
    with open(P(src, 'f'), 'wb') as f:
        f.write(b'contents')
    os.mkdir(P(src, 'd'))
    assert sorted(os.listdir(mnt)) == ['d', 'f']
    old = _one_server(m)
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        try:
            if sorted(os.listdir(mnt)) == ['d', 'f']:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, util.tail(m.log())
        time.sleep(0.2)
    with open(P(mnt, 'f'), 'rb') as f:
        assert f.read() == b'contents'
    with open(P(mnt, 'd', 'g'), 'wb') as f:
        f.write(b'new')
    assert os.listdir(P(mnt, 'd')) == ['g']
    new = _one_server(m)
    assert new != old
    assert _meta_served(new), _thread_names(new)
    assert 'reconnected to' in m.log(), m.log()


# ---------------------------------------------------------------------------
# Over ssh

def _tcp_established(pid):
    """ESTABLISHED TCP sockets among the descriptors of process `pid`."""
    inodes = set()
    for fd in os.listdir('/proc/%d/fd' % pid):
        try:
            t = os.readlink('/proc/%d/fd/%s' % (pid, fd))
        except OSError:
            continue
        if t.startswith('socket:['):
            inodes.add(t[len('socket:['):-1])
    n = 0
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == '01' and cols[9] in inodes:
                n += 1
    return n


@pytest.mark.deadline(300)
@pytest.mark.parametrize('transport', ['direct', 'ssh'])
def test_ssh_connections(sshd, mounter, tmp_path, transport):  # noqa: F811
    """Direct: ssh + bulk + meta TCP connections, and the remote server's
    meta thread; the tunnel: the ssh connection alone."""
    home = sshd.client_home(str(tmp_path / 'home'))
    served = str(tmp_path / 'served')
    os.makedirs(served)
    m = test_ssh.ssh_mount(mounter, sshd, home, served,
                           opts=['transport=' + transport])
    os.mkdir(P(m.mnt, 'd'))
    data = os.urandom(4 * MiB)
    with open(P(m.mnt, 'd', 'f'), 'wb') as f:
        f.write(data)
    assert os.listdir(P(m.mnt, 'd')) == ['f']
    with open(P(served, 'd', 'f'), 'rb') as f:
        assert f.read() == data
    n = _tcp_established(m.proc.pid)
    servers = test_ssh.server_processes(served)
    assert len(servers) == 1, servers
    if transport == 'direct':
        assert n == 3, 'client TCP connections: %d, want ssh + 2' % n
        assert _meta_served(servers[0]), _thread_names(servers[0])
    else:
        assert n == 1, 'client TCP connections: %d, want ssh alone' % n
        assert not _meta_served(servers[0], wait=0.5)
    test_ssh.stop_clean(m)
    test_ssh.wait_no_server(served)
