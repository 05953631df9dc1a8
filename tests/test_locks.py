# SPDX-License-Identifier: MIT
"""Locks forwarded to the server (issue 19; docs/architecture.md, "Locks";
docs/protocol.md, "Locks"; -o locks= in docs/qftfs.1).

Two mounts of one directory and processes on the server host (here the
same machine: the served directory is a local path) take flock(2), POSIX
record and OFD locks, which must conflict every way:
- conflicts both ways between the mounts and the host, F_GETLK reporting
  the holder, a POSIX owner's close dropping its locks, OFD locks per open
  file, a split of a held range;
- waits (F_SETLKW, flock without LOCK_NB) that end when the holder
  releases, on the other mount or on the host;
- a signal ending a wait with EINTR, after which the lock is not granted
  behind the caller's back;
- a killed holder's locks freed;
- -o locks=local keeping today's mount-local locks;
- sqlite with a writer on each mount: every row, integrity_check ok;
- the session lost (local mode: the server killed, a new one spawned): the
  holder's next operation fails with EIO, never a silently lost lock;
- over the lab of tests/netns.py: a lock held across a reset of every TCP
  connection (`ss -K`; the session resumes) still conflicts and its
  holder goes on; and one held when the server is killed (the session
  carried over to a new server) fails its holder with EIO.
"""

import errno
import fcntl
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

import util

from netns import lab, link  # noqa: F401
from test_faults import home, kill_servers, ssh_mount, until_works  # noqa: F401

P = os.path.join

# A process that takes a lock and holds it until killed or told (a line
# on stdin) to let go; it says "held" once it has it, or the error.
HOLDER = r'''
import fcntl, os, struct, sys
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
try:
    if kind == 'flock':
        fcntl.flock(fd, fcntl.LOCK_EX)
    elif kind == 'posix':
        fcntl.lockf(fd, fcntl.LOCK_EX, 0, 0)
    elif kind == 'ofd':
        fcntl.fcntl(fd, 38, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))
    print('held', flush=True)
except OSError as e:
    print('error %d' % e.errno, flush=True)
    sys.exit(1)
sys.stdin.readline()
'''

# A process that waits for a lock (blocking) and says what happened; with
# an alarm, the signal's handler raises, so an EINTR is seen as such.
WAITER = r'''
import fcntl, os, signal, struct, sys, time
path, kind, alarm = sys.argv[1], sys.argv[2], float(sys.argv[3])
class Alarm(Exception):
    pass
def on_alarm(*_):
    raise Alarm()
signal.signal(signal.SIGALRM, on_alarm)
fd = os.open(path, os.O_RDWR)
print('waiting', flush=True)
if alarm:
    signal.setitimer(signal.ITIMER_REAL, alarm)
try:
    if kind == 'flock':
        fcntl.flock(fd, fcntl.LOCK_EX)
    elif kind == 'posix':
        fcntl.lockf(fd, fcntl.LOCK_EX, 0, 0)
    elif kind == 'ofd':
        fcntl.fcntl(fd, 38, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))
    print('granted', flush=True)
except Alarm:
    print('interrupted', flush=True)
# Keeps the descriptor open: a wait that went on would get the lock now.
sys.stdin.readline()
'''

F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
FLOCK_FMT = 'hhqqi'


class Proc:
    """A helper process speaking lines; killed at the end of the test."""

    def __init__(self, script, *args):
        self.p = subprocess.Popen([sys.executable, '-c', script] +
                                  [str(a) for a in args],
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def line(self, timeout=20):
        # A line within the (generous) bound, or the test fails.
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout * util.timeout_scale())
        sel.close()
        assert ready, 'helper said nothing within %ds' % timeout
        return self.p.stdout.readline().strip()

    def quiet_for(self, seconds):
        """True when it says nothing for `seconds` (still waiting)."""
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        ready = sel.select(seconds)
        sel.close()
        return not ready

    def release(self):
        self.p.stdin.write('\n')
        self.p.stdin.flush()
        assert self.p.wait(20 * util.timeout_scale()) == 0

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


@pytest.fixture
def procs():
    made = []

    def make(script, *args):
        p = Proc(script, *args)
        made.append(p)
        return p
    yield make
    for p in made:
        p.kill()


@pytest.fixture
def two(mounter, tmp_path):
    """Two mounts of one served directory: (served, mnt1, mnt2)."""
    src = str(tmp_path / 'served')
    os.makedirs(src)
    a = mounter(src=src, mnt=str(tmp_path / 'm1'))
    b = mounter(src=src, mnt=str(tmp_path / 'm2'))
    return src, a, b


def would_block(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        assert e.errno in (errno.EAGAIN, errno.EACCES), e
        return True
    return False


def flock_nb(fd, kind=fcntl.LOCK_EX):
    return not would_block(fcntl.flock, fd, kind | fcntl.LOCK_NB)


def posix_nb(fd, start=0, length=0, kind=fcntl.LOCK_EX):
    return not would_block(fcntl.lockf, fd, kind | fcntl.LOCK_NB, length,
                           start)


def ofd(fd, cmd, ltype, start=0, length=0):
    r = fcntl.fcntl(fd, cmd, struct.pack(FLOCK_FMT, ltype, 0, start,
                                         length, 0))
    return struct.unpack(FLOCK_FMT, r)


def ofd_nb(fd, ltype=fcntl.F_WRLCK, start=0, length=0):
    return not would_block(ofd, fd, F_OFD_SETLK, ltype, start, length)


def opened(path):
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def eventually(fn, what, within=10):
    """A RELEASE reaches the daemon after close(2) has returned: what it
    frees is free a moment later."""
    deadline = time.monotonic() + within * util.timeout_scale()
    while not fn():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_flock_conflicts_every_way(two):
    src, a, b = two
    with open(P(src, 'f'), 'w'):
        pass
    fa, fb = opened(P(a.mnt, 'f')), opened(P(b.mnt, 'f'))
    fh = opened(P(src, 'f'))
    try:
        assert flock_nb(fa)
        assert not flock_nb(fb), 'mount 2 took a flock mount 1 holds'
        assert not flock_nb(fh), 'the host took a flock mount 1 holds'
        fcntl.flock(fa, fcntl.LOCK_UN)
        assert flock_nb(fh)
        assert not flock_nb(fa), 'mount 1 took a flock the host holds'
        assert not flock_nb(fb, fcntl.LOCK_SH)
        fcntl.flock(fh, fcntl.LOCK_UN)
        # Shared with shared: both mounts; the host cannot go exclusive.
        assert flock_nb(fa, fcntl.LOCK_SH) and flock_nb(fb, fcntl.LOCK_SH)
        assert not flock_nb(fh)
        # The close of the open file drops its flock.
        os.close(fa)
        fa = None
        fcntl.flock(fb, fcntl.LOCK_UN)
        eventually(lambda: flock_nb(fh), 'a closed file kept its flock')
    finally:
        for fd in (fa, fb, fh):
            if fd is not None:
                os.close(fd)


def test_fcntl_conflicts_every_way(two):
    src, a, b = two
    with open(P(src, 'f'), 'wb') as f:
        f.write(b'x' * 100)
    fa, fb = opened(P(a.mnt, 'f')), opened(P(b.mnt, 'f'))
    fh = opened(P(src, 'f'))
    try:
        assert posix_nb(fa, 0, 10)
        assert not posix_nb(fb, 5, 1), 'mount 2 overlapped mount 1'
        assert not posix_nb(fh, 9, 1), 'the host overlapped mount 1'
        assert posix_nb(fb, 20, 10), 'a range nobody holds was refused'
        # F_GETLK reports the holder's range and type; its pid is 0 (it
        # may be on another host), never some unrelated local process.
        t, _, start, length, pid = ofd(fb, fcntl.F_GETLK, fcntl.F_WRLCK,
                                       0, 5)
        assert (t, start, length, pid) == (fcntl.F_WRLCK, 0, 10, 0)
        fcntl.lockf(fb, fcntl.LOCK_UN, 10, 20)
        # The host's lock stops the mounts too.
        assert posix_nb(fh, 50, 10)
        assert not posix_nb(fa, 55, 1) and not posix_nb(fb, 59, 1)
        t, _, start, length, _ = ofd(fa, fcntl.F_GETLK, fcntl.F_RDLCK,
                                     40, 30)
        assert (t, start, length) == (fcntl.F_WRLCK, 50, 10)
        fcntl.lockf(fh, fcntl.LOCK_UN, 10, 50)
        # A split: unlocking the middle of a held range frees only it.
        assert posix_nb(fa, 0, 100)
        fcntl.lockf(fa, fcntl.LOCK_UN, 20, 40)
        assert posix_nb(fh, 45, 5) and not posix_nb(fh, 10, 1) and \
            not posix_nb(fh, 70, 1)
        fcntl.lockf(fh, fcntl.LOCK_UN, 5, 45)
        # POSIX: any close by the owner drops its locks on the file, even
        # through another descriptor.
        other = os.open(P(a.mnt, 'f'), os.O_RDONLY)
        os.close(other)
        assert posix_nb(fh, 0, 100), 'a close did not drop the locks'
        fcntl.lockf(fh, fcntl.LOCK_UN, 0, 0)
        # OFD locks belong to the open file: two of one process conflict,
        # and a close of another descriptor leaves them.
        fa2 = opened(P(a.mnt, 'f'))
        try:
            assert ofd_nb(fa, fcntl.F_WRLCK, 0, 10)
            assert not ofd_nb(fa2, fcntl.F_WRLCK, 5, 1)
            other = os.open(P(a.mnt, 'f'), os.O_RDONLY)
            os.close(other)
            assert not posix_nb(fh, 0, 1), 'a close dropped an OFD lock'
            assert not ofd_nb(fb, fcntl.F_RDLCK, 0, 1)
        finally:
            os.close(fa2)
        os.close(fa)
        fa = None
        eventually(lambda: posix_nb(fh, 0, 1),
                   'the OFD lock outlived its open file')
    finally:
        for fd in (fa, fb, fh):
            if fd is not None:
                os.close(fd)


@pytest.mark.parametrize('kind', ['flock', 'posix', 'ofd'])
def test_wait_ends_when_holder_releases(two, procs, kind):
    src, a, b = two
    with open(P(src, 'f'), 'w'):
        pass
    holder = procs(HOLDER, P(a.mnt, 'f'), kind)
    assert holder.line() == 'held'
    waiter = procs(WAITER, P(b.mnt, 'f'), kind, 0)
    assert waiter.line() == 'waiting'
    assert waiter.quiet_for(0.3), 'granted while mount 1 held the lock'
    holder.release()
    assert waiter.line() == 'granted'
    # Now the host waits for the mount's holder.
    host = procs(WAITER, P(src, 'f'), kind, 0)
    assert host.line() == 'waiting'
    assert host.quiet_for(0.3), 'the host got a lock mount 2 holds'
    waiter.release()
    assert host.line() == 'granted'
    host.release()


@pytest.mark.parametrize('kind', ['flock', 'posix'])
def test_signal_ends_wait(two, procs, kind):
    src, a, b = two
    with open(P(src, 'f'), 'w'):
        pass
    holder = procs(HOLDER, P(src, 'f'), kind)
    assert holder.line() == 'held'
    waiter = procs(WAITER, P(b.mnt, 'f'), kind, 0.3)
    assert waiter.line() == 'waiting'
    assert waiter.line() == 'interrupted'
    holder.release()
    # The interrupted wait left nothing on the server: nobody takes the
    # lock behind its back, however long we give it (the waiter keeps its
    # descriptor open).
    time.sleep(0.5)
    fh = os.open(P(src, 'f'), os.O_RDWR)
    try:
        ok = flock_nb(fh) if kind == 'flock' else posix_nb(fh)
        assert ok, 'the interrupted wait got the lock later'
    finally:
        os.close(fh)
    waiter.release()


def test_killed_holder_freed(two, procs):
    src, a, b = two
    with open(P(src, 'f'), 'w'):
        pass
    with open(P(src, 'g'), 'w'):
        pass
    h1 = procs(HOLDER, P(a.mnt, 'f'), 'posix')
    h2 = procs(HOLDER, P(a.mnt, 'g'), 'flock')
    assert h1.line() == 'held' and h2.line() == 'held'
    fb, gb = opened(P(b.mnt, 'f')), opened(P(b.mnt, 'g'))
    try:
        assert not posix_nb(fb) and not flock_nb(gb)
        h1.p.send_signal(signal.SIGKILL)
        h2.p.send_signal(signal.SIGKILL)
        h1.p.wait()
        h2.p.wait()
        # The kernel closes the dead process's files (FLUSH, RELEASE);
        # the release may come a moment after the exit.
        deadline = time.monotonic() + 10 * util.timeout_scale()
        while not (posix_nb(fb) and flock_nb(gb)):
            assert time.monotonic() < deadline, 'a killed holder kept its lock'
            time.sleep(0.05)
    finally:
        os.close(fb)
        os.close(gb)


def test_locks_local_option(mounter, tmp_path):
    src = str(tmp_path / 'served')
    os.makedirs(src)
    m = mounter(src=src, opts=['locks=local'])
    with open(P(src, 'f'), 'w'):
        pass
    fm, fh = opened(P(m.mnt, 'f')), opened(P(src, 'f'))
    try:
        assert flock_nb(fm)
        # Kept among the mount's processes, as before: not on the server.
        assert flock_nb(fh)
        fm2 = opened(P(m.mnt, 'f'))
        assert not flock_nb(fm2)
        os.close(fm2)
    finally:
        os.close(fm)
        os.close(fh)


def test_locks_option_checked(build, tmp_path):
    r = util.run([util.client_bin(build), '-o', 'locks=maybe', str(tmp_path),
                  str(tmp_path)], timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "invalid locks 'maybe'" in r.stderr


SQL_WRITER = r'''
import sqlite3, sys
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = sqlite3.connect(path, timeout=120)
for i in range(n):
    with db:
        db.execute('insert into t(tag, i) values (?, ?)', (tag, i))
db.close()
'''


@pytest.mark.deadline(240)
def test_sqlite_writer_on_each_mount(two):
    src, a, b = two
    n = 150
    db = sqlite3_connect(P(a.mnt, 'db'))
    db.execute('create table t(id integer primary key, tag text, i int)')
    db.commit()
    db.close()
    ws = [subprocess.Popen([sys.executable, '-c', SQL_WRITER, P(m.mnt, 'db'),
                            tag, str(n)], stderr=subprocess.PIPE, text=True)
          for m, tag in ((a, 'a'), (b, 'b'))]
    for w in ws:
        _, err = w.communicate(timeout=200 * util.timeout_scale())
        assert w.returncode == 0, err
    r = util.run(['sqlite3', P(src, 'db'),
                  'select tag, count(*), count(distinct i) from t '
                  'group by tag order by tag; pragma integrity_check;'])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ['a|%d|%d' % (n, n), 'b|%d|%d' % (n, n),
                                'ok'], r.stdout


def sqlite3_connect(path):
    import sqlite3
    return sqlite3.connect(path)


def test_lost_session_fails_holder(mounter, tmp_path):
    """Local mode: kill -9 of the server; the client spawns a new one (a
    new session).  The holder's locks died with the old one: its next
    operations through that open file fail with EIO, another open works
    and the lock is free on the server."""
    src = str(tmp_path / 'served')
    os.makedirs(src)
    m = mounter(src=src, expect_rc=None)
    with open(P(src, 'f'), 'wb') as f:
        f.write(b'data')
    fd = os.open(P(m.mnt, 'f'), os.O_RDWR)
    # A file whose locks were all given back goes on: it holds nothing
    # that could be lost.
    was = os.open(P(m.mnt, 'f'), os.O_RDWR)
    try:
        assert ofd_nb(was, fcntl.F_WRLCK, 50, 10)
        fcntl.flock(was, fcntl.LOCK_SH)
        ofd(was, F_OFD_SETLK, fcntl.F_UNLCK, 0, 0)
        fcntl.flock(was, fcntl.LOCK_UN)
        fcntl.lockf(fd, fcntl.LOCK_EX, 0, 0)
        fh = os.open(P(src, 'f'), os.O_RDWR)
        assert not posix_nb(fh)
        kill_servers(src)
        until_works(['ls', m.mnt], m, 30, 'the mount after the kill')
        assert os.pwrite(was, b'D', 0) == 1
        with pytest.raises(OSError) as e:
            os.pread(fd, 4, 0)
        assert e.value.errno == errno.EIO
        with pytest.raises(OSError) as e:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0)
        assert e.value.errno == errno.EIO
        assert posix_nb(fh), 'the old session still holds the lock'
        fcntl.lockf(fh, fcntl.LOCK_UN, 0, 0)
        os.close(fh)
        fd2 = os.open(P(m.mnt, 'f'), os.O_RDWR)
        try:
            assert posix_nb(fd2)
            assert os.pread(fd2, 4, 0) == b'Data'
        finally:
            os.close(fd2)
        assert 'locks taken through it were lost' in m.log(), \
            util.tail(m.log())
    finally:
        os.close(fd)
        os.close(was)


RESUME_OPTS = ['timeout=5', 'keepalive=2', 'resume=60']


@pytest.mark.deadline(120)
def test_lock_survives_resume(link, mounter, tmp_path, home):
    served = str(tmp_path / 'served')
    os.makedirs(served)
    with open(P(served, 'f'), 'wb') as f:
        f.write(b'data')
    m = ssh_mount(mounter, link, home, served, opts=RESUME_OPTS)
    fd = os.open(P(m.mnt, 'f'), os.O_RDWR)
    fh = os.open(P(served, 'f'), os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX, 0, 0)
        fcntl.flock(fd, fcntl.LOCK_EX)
        killed = link.reset_tcp()
        assert killed, 'ss -K reset nothing'
        # The holder goes on through the resumed session.
        assert os.pwrite(fd, b'DATA', 0) == 4
        deadline = time.monotonic() + 30 * util.timeout_scale()
        while 'session resumed after' not in m.log():
            assert time.monotonic() < deadline, util.tail(m.log())
            time.sleep(0.1)
        assert not posix_nb(fh), 'the lock was lost across the resume'
        assert not flock_nb(fh), 'the flock was lost across the resume'
        fcntl.lockf(fd, fcntl.LOCK_UN, 0, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert posix_nb(fh) and flock_nb(fh)
        with open(P(served, 'f'), 'rb') as f:
            assert f.read() == b'DATA'
    finally:
        os.close(fd)
        os.close(fh)


@pytest.mark.deadline(120)
def test_carried_session_fails_holder(link, mounter, tmp_path, home):
    """The server killed under a resumable session: it is carried over to
    a new server on the same host, but its locks died with the old one --
    the holder's next operation fails with EIO."""
    served = str(tmp_path / 'served')
    os.makedirs(served)
    with open(P(served, 'f'), 'wb') as f:
        f.write(b'data')
    m = ssh_mount(mounter, link, home, served, opts=RESUME_OPTS)
    fd = os.open(P(m.mnt, 'f'), os.O_RDWR)
    plain = os.open(P(m.mnt, 'f'), os.O_RDONLY)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX, 0, 0)
        kill_servers(served)
        # A file with no lock is carried over and reads on.
        assert os.pread(plain, 4, 0) == b'data'
        # (A write, which reaches the client: a read may be answered
        # from the kernel's page cache.)
        with pytest.raises(OSError) as e:
            os.pwrite(fd, b'DATA', 0)
        assert e.value.errno == errno.EIO
        with pytest.raises(OSError) as e:
            fcntl.lockf(fd, fcntl.LOCK_UN, 0, 0)
        assert e.value.errno == errno.EIO
        fh = os.open(P(served, 'f'), os.O_RDWR)
        try:
            assert posix_nb(fh)
        finally:
            os.close(fh)
    finally:
        os.close(fd)
        os.close(plain)


# ---------------------------------------------------------------------------
# The wire: what the server does with LOCK and GETLK (tests/wire.py)

import wire  # noqa: E402

WHOLE = wire.INT64_MAX


def lk(owner, start=0, end=WHOLE, typ=wire.LK_WRLCK, pid=0):
    return (owner, start, end, typ, pid)


def test_wire_lock_needs_the_feature(wire_server, tmp_path):
    """A server asked without LOCKS answers ENOSYS and keeps the
    connection (an older server would close it: the client never sends
    LOCK unless the feature was granted)."""
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'f').write_bytes(b'x')
    s = wire_server(root)
    assert s.call('OPEN', handle=1, path='f', opflags=wire.O_RDWR,
                  length=0).status == 0
    assert s.call('LOCK', handle=1, opflags=0, lock=lk(1)).err == 'ENOSYS'
    assert s.call('PING').status == 0


def test_wire_lock_fields_checked(wire_server, tmp_path):
    """Every field from the network is checked: a bad range or type, a
    flock that is not the whole file, CLOSE with a lock, unknown flags, a
    handle that is not open -- each refused with its errno, nothing held,
    and the connection serves on."""
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'f').write_bytes(b'x')
    s = wire_server(root, hello=False)
    r = s.hello(features=wire.FEAT_LOCKS)
    assert r.status == 0 and r['features'] & wire.FEAT_LOCKS
    assert s.call('OPEN', handle=1, path='f', opflags=wire.O_RDWR,
                  length=0).status == 0
    bad = [
        (0, lk(1, 10, 5)),                 # start after end
        (0, lk(1, 0, WHOLE + 1)),          # beyond off_t
        (0, lk(1, typ=3)),                 # no such type
        (0x4, lk(1)),                      # unknown flag
        (wire.LOCK_FLOCK, lk(1, 0, 10)),   # flock of a range
        (wire.LOCK_CLOSE, lk(1)),          # CLOSE that takes a lock
    ]
    for flags, lock in bad:
        r = s.call('LOCK', handle=1, opflags=flags, lock=lock)
        assert r.err == 'EINVAL', (flags, lock, r)
    assert s.call('LOCK', handle=2, opflags=0, lock=lk(1)).err == 'EBADF'
    assert s.call('GETLK', handle=1,
                  lock=lk(1, typ=wire.LK_UNLCK)).err == 'EINVAL'
    # Nothing of the refused ones is held.
    fh = os.open(str(root / 'f'), os.O_RDWR)
    try:
        assert posix_nb(fh) and flock_nb(fh)
        fcntl.lockf(fh, fcntl.LOCK_UN, 0, 0)
        fcntl.flock(fh, fcntl.LOCK_UN)
        # Owners are distinct, one owner's locks merge; CLOSE drops them.
        assert s.call('LOCK', handle=1, opflags=0,
                      lock=lk(7, 0, 9)).status == 0
        assert s.call('LOCK', handle=1, opflags=0,
                      lock=lk(8, 5, 5)).err == 'EAGAIN'
        assert s.call('LOCK', handle=1, opflags=0,
                      lock=lk(7, 5, 19, wire.LK_RDLCK)).status == 0
        r = s.call('GETLK', handle=1, lock=lk(8, 0, WHOLE))
        assert r['lock'][1:4] == (0, 4, wire.LK_WRLCK), r['lock']
        r = s.call('GETLK', handle=1, lock=lk(7, 0, WHOLE))
        assert r['lock'][3] == wire.LK_UNLCK, 'an owner conflicts with itself'
        assert not posix_nb(fh, 0, 1)
        assert s.call('LOCK', handle=1, opflags=wire.LOCK_CLOSE,
                      lock=lk(7, typ=wire.LK_UNLCK)).status == 0
        assert posix_nb(fh, 0, 20)
        fcntl.lockf(fh, fcntl.LOCK_UN, 0, 0)
        # The handle's CLOSE drops what its owners hold; so does the end
        # of the connection.
        assert s.call('LOCK', handle=1, opflags=wire.LOCK_FLOCK,
                      lock=lk(9)).status == 0
        assert not flock_nb(fh)
        assert s.call('CLOSE', handle=1).status == 0
        assert flock_nb(fh)
        fcntl.flock(fh, fcntl.LOCK_UN)
        assert s.call('OPEN', handle=3, path='f', opflags=wire.O_RDONLY,
                      length=0).status == 0
        assert s.call('LOCK', handle=3, opflags=0,
                      lock=lk(10, typ=wire.LK_RDLCK)).status == 0
        assert not posix_nb(fh)
        assert s.finish() == 0
        assert posix_nb(fh), 'the session ended with a lock held'
    finally:
        os.close(fh)


def test_wait_longer_than_the_deadline(mounter, tmp_path, procs):
    """A wait far longer than -o timeout= is no lost link: each attempt is
    a short request, so nothing times out and nothing reconnects."""
    src = str(tmp_path / 'served')
    os.makedirs(src)
    m = mounter(src=src, opts=['timeout=2', 'keepalive=1'])
    with open(P(src, 'f'), 'w'):
        pass
    holder = procs(HOLDER, P(src, 'f'), 'posix')
    assert holder.line() == 'held'
    waiter = procs(WAITER, P(m.mnt, 'f'), 'posix', 0)
    assert waiter.line() == 'waiting'
    assert waiter.quiet_for(5), 'granted while the host held the lock'
    holder.release()
    assert waiter.line() == 'granted'
    waiter.release()
    log = m.log()
    assert 'lost' not in log and 'reconnect' not in log, util.tail(log)
