# SPDX-License-Identifier: MIT
"""Deadlines, keepalives and reconnecting, on real local mounts.

What must hold (docs/architecture.md, "Faults and reconnect"):

- with the server stopped, operations fail with EIO within the request
  deadline (-o timeout=), never hang; unmounting works meanwhile;
- once a server answers again the same mount works again by itself,
  without remounting (-o reconnect=yes, the default); with reconnect=no
  everything after the loss fails with EIO and keeps failing;
- an open file with written data that was not made durable (FLUSH or
  FSYNC) when the server was lost fails with EIO at its next write or
  close -- never success; a read-only or clean file goes on transparently,
  unless the file changed meanwhile (ESTALE).

A "stopped host" is simulated with SIGSTOP on the server and a wrapper
that stops every server started while a hold file exists, so reconnect
attempts meet the same silence.  Timing is asserted only as generous upper
bounds (deadline plus slack), never as speed.
"""

import errno
import os
import signal
import subprocess
import time

import pytest

import util
from util import MiB

P = os.path.join

TIMEOUT = 3          # -o timeout= for the tests that wait for it
SLACK = 7            # scheduling, a loaded machine, the watchdog's tick
RECONNECT_WAIT = 45  # backoff reaches 30 s between attempts

WRAPPER = '''#!/bin/sh
# A server that stops itself before starting while %(hold)s exists: to the
# client it looks like a host that accepts connections and never answers.
if [ -e '%(hold)s' ]; then kill -STOP $$; fi
exec "$@"
'''


def _servers(m):
    """The client's server processes now alive (they change on reconnect)."""
    return [p for p in util.proc_children(m.proc.pid)
            if util.proc_alive(p, '--root')]


def _signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except OSError:
            pass


def _kill_servers(m):
    pids = _servers(m)
    assert pids, 'no server child found'
    _signal_all(pids, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(util.proc_alive(p) for p in pids):
        assert time.monotonic() < deadline, 'server did not die'
        time.sleep(0.01)


def _errno_of(fn):
    """Runs fn; returns the errno it failed with, or None."""
    try:
        fn()
    except OSError as e:
        return e.errno
    return None


def _timed_errno(fn):
    t0 = time.monotonic()
    e = _errno_of(fn)
    return e, time.monotonic() - t0


def _wait_working(mnt, seconds=RECONNECT_WAIT):
    """Polls `ls` on the mount until it works; returns how long it took."""
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < seconds:
        try:
            os.listdir(mnt)
            return time.monotonic() - t0
        except OSError as e:
            last = e
        time.sleep(0.2)
    raise AssertionError('the mount did not work again within %d s (last '
                         'error %r)' % (seconds, last))


def _put(path, data):
    with open(path, 'wb') as f:
        f.write(data)


@pytest.fixture
def hold(tmp_path):
    """(wrapper command, hold file path): servers started while the hold
    file exists stop themselves."""
    h = str(tmp_path / 'hold')
    w = str(tmp_path / 'server-wrapper.sh')
    with open(w, 'w') as f:
        f.write(WRAPPER % {'hold': h})
    os.chmod(w, 0o755)
    return w, h


def _release(m, h):
    """Lets every server run again: no more self-stopping, SIGCONT all."""
    try:
        os.unlink(h)
    except FileNotFoundError:
        pass
    _signal_all(util.proc_children(m.proc.pid), signal.SIGCONT)


# ---------------------------------------------------------------------------
# Deadlines

@pytest.mark.deadline(150)
def test_stopped_server_eio_then_recovers(mounter, hold):
    """SIGSTOP: stat and cat fail with EIO within the deadline; after
    SIGCONT the same mount works again."""
    wrapper, h = hold
    m = mounter(server_wrapper=wrapper, expect_rc=None,
                opts=['timeout=%d' % TIMEOUT, 'attr_timeout=0',
                      'entry_timeout=0'])
    src, mnt = m
    _put(P(src, 'f'), b'contents')
    assert os.stat(P(mnt, 'f')).st_size == 8
    open(h, 'w').close()
    _signal_all(_servers(m), signal.SIGSTOP)
    try:
        e, took = _timed_errno(lambda: os.stat(P(mnt, 'f')))
        assert e == errno.EIO, 'stat with the server stopped: %r' % e
        assert took < TIMEOUT + SLACK, 'stat took %.1f s to fail' % took
        # By now the connection is declared dead and reconnect attempts
        # meet stopped servers too: new calls wait out their deadline.
        r = util.run(['cat', P(mnt, 'f')], timeout=TIMEOUT + 60)
        assert r.returncode != 0, 'cat succeeded with the server stopped'
        assert 'Input/output error' in r.stderr, r.stderr
        assert 'connection lost' in m.log(), m.log()
    finally:
        _release(m, h)
    took = _wait_working(mnt)
    assert open(P(mnt, 'f'), 'rb').read() == b'contents'
    assert 'reconnected to' in m.log(), m.log()
    print('working again %.1f s after SIGCONT' % took)


@pytest.mark.deadline(120)
def test_idle_stopped_server_detected_by_keepalive(mounter, hold):
    """An idle mount notices a stopped server by itself (keepalive PING
    unanswered): the loss is logged without any operation."""
    wrapper, h = hold
    m = mounter(server_wrapper=wrapper, expect_rc=None,
                opts=['timeout=%d' % TIMEOUT, 'keepalive=1'])
    src, mnt = m
    os.listdir(mnt)
    open(h, 'w').close()
    _signal_all(_servers(m), signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 1 + TIMEOUT + SLACK
        while 'connection lost' not in m.log():
            assert time.monotonic() < deadline, \
                'idle loss not noticed; log:\n' + util.tail(m.log())
            time.sleep(0.1)
        assert 'no reply from server for %d s' % TIMEOUT in m.log()
    finally:
        _release(m, h)
    _wait_working(mnt)


@pytest.mark.deadline(120)
def test_unmount_while_server_stopped(mounter, hold):
    """fusermount3 -u returns promptly with the server stopped (default
    deadline of 30 s not involved), and the client exits soon after."""
    wrapper, h = hold
    m = mounter(server_wrapper=wrapper, expect_rc=None)
    src, mnt = m
    _put(P(mnt, 'f'), b'x')
    open(h, 'w').close()
    stopped = _servers(m)
    _signal_all(stopped, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        r = util.run(['fusermount3', '-u', mnt], timeout=60)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert took < 10, 'fusermount3 -u took %.1f s' % took
        m.proc.wait(timeout=20 * util.timeout_scale())
        took = time.monotonic() - t0
        assert took < 20, 'qftfs exited %.1f s after the unmount' % took
        # The stopped server was not left behind either.
        for p in stopped:
            assert not util.proc_alive(p), 'server %d left running' % p
    finally:
        _release(m, h)


@pytest.mark.deadline(120)
def test_unmount_with_caller_blocked(mounter, hold):
    """A process blocked on the stopped server holds the mount only until
    its deadline; then the unmount goes through."""
    wrapper, h = hold
    m = mounter(server_wrapper=wrapper, expect_rc=None,
                opts=['timeout=%d' % TIMEOUT, 'attr_timeout=0',
                      'entry_timeout=0'])
    src, mnt = m
    _put(P(src, 'f'), b'x')
    open(h, 'w').close()
    _signal_all(_servers(m), signal.SIGSTOP)
    try:
        blocked = subprocess.Popen(['stat', P(mnt, 'f')],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        t0 = time.monotonic()
        while True:
            r = util.run(['fusermount3', '-u', mnt], timeout=60)
            if r.returncode == 0:
                break
            assert 'busy' in r.stderr, r.stderr
            assert time.monotonic() - t0 < TIMEOUT + SLACK, \
                'mount still busy %.1f s later' % (time.monotonic() - t0)
            time.sleep(0.2)
        assert blocked.wait(timeout=30) != 0
        m.proc.wait(timeout=30 * util.timeout_scale())
    finally:
        _release(m, h)


# ---------------------------------------------------------------------------
# Reconnecting

@pytest.mark.deadline(120)
def test_killed_server_idle_mount_reconnects(mounter):
    """kill -9 on an idle mount: the next ls works after a reconnect within
    a few seconds; the exit status stays 0 (nothing was lost)."""
    m = mounter()
    src, mnt = m
    _put(P(src, 'a'), b'1')
    assert os.listdir(mnt) == ['a']
    _kill_servers(m)
    took = _wait_working(mnt, 15)
    assert took < 10, 'ls worked again only after %.1f s' % took
    _put(P(src, 'b'), b'2')
    # Made behind the mount's back: the directory cache's lease on the
    # listing just read ends when the server's notification arrives.
    deadline = time.monotonic() + 2
    while sorted(os.listdir(mnt)) != ['a', 'b'] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(os.listdir(mnt)) == ['a', 'b']
    _put(P(mnt, 'c'), b'3')
    assert open(P(src, 'c'), 'rb').read() == b'3'
    log = m.log()
    assert 'connection to server lost' in log, log
    assert 'reconnected to the local server after' in log, log


@pytest.mark.deadline(120)
def test_reconnect_no_stays_eio(mounter):
    m = mounter(expect_rc=None, opts=['reconnect=no'])
    src, mnt = m
    os.listdir(mnt)
    _kill_servers(m)
    for _ in range(3):
        e, took = _timed_errno(lambda: os.listdir(mnt))
        assert e == errno.EIO, 'ls after the loss: %r' % e
        assert took < 5, 'failing took %.1f s' % took
        time.sleep(1)
    assert 'reconnecting to' not in m.log(), m.log()


@pytest.mark.deadline(120)
@pytest.mark.parametrize('then', ['write', 'close', 'fsync'])
def test_unflushed_writes_fail_eio(mounter, then):
    """Written data not made durable when the server dies: the next write,
    fsync or close fails with EIO, even after the mount reconnected."""
    m = mounter(expect_rc=None)
    src, mnt = m
    fd = os.open(P(mnt, 'w'), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b'a' * MiB)
        _kill_servers(m)
        _wait_working(mnt, 15)
        if then == 'write':
            e = _errno_of(lambda: os.write(fd, b'b' * 4096))
            assert e == errno.EIO, 'write after the loss: %r' % e
        elif then == 'fsync':
            e = _errno_of(lambda: os.fsync(fd))
            assert e == errno.EIO, 'fsync after the loss: %r' % e
    finally:
        e = _errno_of(lambda: os.close(fd))
    assert e == errno.EIO, 'close after the loss: %r' % e
    assert 'may not have reached the server' in m.log(), m.log()
    # Other files are fine.
    _put(P(mnt, 'other'), b'ok')
    assert open(P(src, 'other'), 'rb').read() == b'ok'


@pytest.mark.deadline(120)
def test_synced_handle_goes_on(mounter):
    """A handle whose writes were fsync'd before the loss is re-opened
    (without truncating) and keeps writing."""
    m = mounter()
    src, mnt = m
    fd = os.open(P(mnt, 'w'), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b'a' * 1000)
        os.fsync(fd)
        _kill_servers(m)
        _wait_working(mnt, 15)
        os.pwrite(fd, b'b' * 1000, 1000)
    finally:
        os.close(fd)
    assert open(P(src, 'w'), 'rb').read() == b'a' * 1000 + b'b' * 1000


@pytest.mark.deadline(120)
def test_read_only_handle_survives(mounter):
    """A file open for reading goes on after the server is killed, with
    the right data, through the read-ahead stream and plain reads."""
    m = mounter()
    src, mnt = m
    data = os.urandom(6 * MiB)
    _put(P(src, 'r'), data)
    fd = os.open(P(mnt, 'r'), os.O_RDONLY | os.O_DIRECT)
    try:
        n = 256 * 1024
        got = b''.join(os.pread(fd, n, off) for off in range(0, 2 * MiB, n))
        _kill_servers(m)
        got += b''.join(os.pread(fd, n, off)
                        for off in range(2 * MiB, len(data), n))
        assert got == data, 'wrong data after the reconnect'
        # A random read too (no stream).
        assert os.pread(fd, 100, 12345) == data[12345:12445]
    finally:
        os.close(fd)
    assert 'reconnected to' in m.log()


@pytest.mark.deadline(120)
def test_changed_file_is_stale(mounter):
    """A file changed on the server while the connection was down is not
    read on as if nothing happened: ESTALE."""
    m = mounter(expect_rc=None)
    src, mnt = m
    _put(P(src, 'r'), b'old contents')
    fd = os.open(P(mnt, 'r'), os.O_RDONLY | os.O_DIRECT)
    try:
        assert os.pread(fd, 3, 0) == b'old'
        _kill_servers(m)
        _put(P(src, 'r'), b'new contents, longer')
        # A read that races the client noticing the loss fails with EIO
        # like any request in flight on a dead link; the case here is a
        # read once the link has been replaced.
        deadline = time.monotonic() + 30
        while 'reconnected to' not in m.log():
            assert time.monotonic() < deadline, 'no reconnect:\n' + m.log()
            time.sleep(0.05)
        e = _errno_of(lambda: os.pread(fd, 4, 4))
        assert e == errno.ESTALE, 'read of a changed file: %r' % e
    finally:
        os.close(fd)
    assert 'changed on the server' in m.log(), m.log()
    # A fresh open sees the new file.
    assert open(P(mnt, 'r'), 'rb').read() == b'new contents, longer'


@pytest.mark.deadline(120)
def test_directory_handle_survives(mounter):
    m = mounter()
    src, mnt = m
    for i in range(5):
        _put(P(src, 'e%d' % i), b'')
    fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _kill_servers(m)
        _wait_working(mnt, 15)
        # listdir on the old descriptor starts over at cookie 0.
        assert sorted(os.listdir(fd)) == ['e%d' % i for i in range(5)]
    finally:
        os.close(fd)


def test_bad_options(tmp_path):
    build = util.build_dir()
    src = tmp_path / 's'
    src.mkdir()
    for opt in ('timeout=0', 'timeout=-1', 'timeout=x', 'keepalive=-1',
                'reconnect=maybe'):
        r = util.run([util.client_bin(build), '-f', '-o', opt, str(src),
                      str(tmp_path / 'mnt')], timeout=30)
        assert r.returncode == 2, (opt, r.returncode, r.stderr)
        assert 'invalid' in r.stderr, (opt, r.stderr)


# ---------------------------------------------------------------------------
# Over ssh: the whole bootstrap again (login with the test key, the
# server's start, direct or tunnel, handshake)

from test_ssh import home, served, server_processes, ssh_mount, sshd  # noqa: E402,F401


def _kill_remote(served):
    pids = server_processes(served)
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while util.proc_alive(pids[0]):
        assert time.monotonic() < deadline, 'server did not die'
        time.sleep(0.01)
    return pids[0]


@pytest.mark.deadline(150)
@pytest.mark.parametrize('transport', ['direct', 'ssh'])
def test_ssh_reconnect_after_server_killed(sshd, mounter, home, served,
                                           transport):
    m = ssh_mount(mounter, sshd, home, served,
                  opts=['transport=' + transport, 'timeout=10',
                        'keepalive=1'])
    data = os.urandom(3 * MiB)
    _put(P(served, 'r'), data)
    fd = os.open(P(m.mnt, 'r'), os.O_RDONLY | os.O_DIRECT)
    try:
        assert os.pread(fd, MiB, 0) == data[:MiB]
        # Idle for a few keepalives (PINGs, and ssh keepalives from the
        # pump): nothing may break.
        time.sleep(3.5)
        assert 'lost' not in m.log(), m.log()
        old = _kill_remote(served)
        took = _wait_working(m.mnt, 30)
        assert took < 20, 'ls worked again only after %.1f s' % took
        rest = b''.join(os.pread(fd, MiB, off)
                        for off in range(MiB, len(data), MiB))
        assert rest == data[MiB:], 'wrong data after the reconnect'
    finally:
        os.close(fd)
    _put(P(m.mnt, 'w'), b'after')
    assert open(P(served, 'w'), 'rb').read() == b'after'
    now = server_processes(served)
    assert len(now) == 1 and now[0] != old, now
    # Resumable (the default): the session carried over to the new
    # server; otherwise a new session on it.
    log = m.log()
    assert 'session carried over to a new server' in log or \
        'reconnected to' in log, log


# ---------------------------------------------------------------------------
# A name replaced on the server behind the kernel's cached lookup: the open
# is ESTALE inside the client, so the VFS looks the name up again

@pytest.mark.parametrize('kind', ['symlink', 'dir'])
def test_open_of_replaced_name_retries(mounter, kind):
    m = mounter(opts=['entry_timeout=60', 'attr_timeout=60'])
    src, mnt = m
    _put(P(src, 'other'), b'other file')
    _put(P(src, 'n'), b'old')
    assert os.stat(P(mnt, 'n')).st_size == 3     # cached as a file now
    os.unlink(P(src, 'n'))
    if kind == 'symlink':
        os.symlink('other', P(src, 'n'))
        # The server refuses to follow the symlink (ELOOP); the retried
        # lookup sees it and the kernel follows it.
        assert open(P(mnt, 'n'), 'rb').read() == b'other file'
    else:
        os.mkdir(P(src, 'n'))
        fd = os.open(P(mnt, 'n'), os.O_RDONLY)
        try:
            assert os.path.stat.S_ISDIR(os.fstat(fd).st_mode)
        finally:
            os.close(fd)
