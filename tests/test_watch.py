# SPDX-License-Identifier: MIT
"""Change notification (docs/protocol.md, "Change notification"), on the
wire: qftfs-server driven directly through tests/wire.py.

- HELLO grants NOTIFY when asked; READDIR with WATCH answers WATCHED;
- a change made in the served tree behind the client's back (by this
  test, directly: create, remove, rename, chmod, write, mkdir) comes as a
  NOTIFY CHANGED for that directory's inode within NOTE_BOUND_S;
- the same changes made through the protocol by the client itself come
  back as nothing (create + write + flush + close, mkdir, unlink, rename
  within and across watched directories, setattr by path and by handle,
  symlink, link, xattrs); each such test ends with a foreign change that
  must be heard, so that silence is not mistaken for success;
- a watched directory removed from outside gives GONE; the watch cap
  (--max-watches) evicts the least recently listed with GONE; UNWATCH
  stops notifications;
- without the feature asked (or with QFTFS_SERVER_NOTIFY=off, which the
  server treats as inotify missing, saying so once) no NOTIFY frame is
  ever sent and READDIR never answers WATCHED;
- with two connections (bulk + meta, --meta-fd) notifications go on meta,
  and a CREATE/WRITE/CLOSE on bulk in a directory watched from meta is
  not reported;
- a client that sends a NOTIFY frame to the server loses the connection;
- a client that does not read its notifications gets one ALL once the
  server's queue is full, and the server keeps answering;
- a directory on a file system whose changes inotify cannot all see (here
  a FUSE mount: a qftfs mount served again) is never WATCHED.
"""

import os
import socket
import struct
import subprocess
import time

import pytest

import util
import wire

F_NOTIFY = 0x0004
OP_NOTIFY, OP_UNWATCH = 30, 31
FEAT_NOTIFY = 0x4
READDIR_WATCH = 0x2
READDIR_WATCHED = 0x2
CHANGED, GONE, ALL = 1, 2, 3
KIND_NAMES = {CHANGED: 'CHANGED', GONE: 'GONE', ALL: 'ALL'}
# How long a foreign change may take to be told: the server reads inotify
# as events come, so this is generous.
NOTE_BOUND_S = 3.0
# How long silence is listened for where none must come.
QUIET_S = 1.0


class Note:
    def __init__(self, ino, kind, name):
        self.ino, self.kind, self.name = ino, kind, name

    def __repr__(self):
        return '<NOTIFY %s ino=%d %r>' % (KIND_NAMES.get(self.kind, self.kind),
                                          self.ino, self.name)


def parse_notify(flags, rid, p):
    """A NOTIFY frame's payload, checked as strictly as the client does."""
    assert flags == F_NOTIFY and rid == 0, 'bad NOTIFY header'
    ino, kind, n = struct.unpack_from('>QII', p, 0)
    name = p[16:16 + n]
    assert p[16 + n:17 + n] == b'\0' and len(p) == 17 + n, 'bad NOTIFY'
    assert kind in KIND_NAMES, 'unknown kind %d' % kind
    if kind != CHANGED:
        assert name == b''
    if kind == ALL:
        assert ino == 0
    return Note(ino, kind, name.decode())


class Conn:
    """One protocol connection over a socket; NOTIFY frames are kept in
    `notes` as they arrive, between replies or while waiting for them."""

    def __init__(self, sock, timeout=10):
        self.sock = sock
        self.sock.settimeout(timeout)
        self.next_id = 1
        self.notes = []

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, op, **fields):
        rid = self.next_id
        self.next_id += 1
        self.send_raw(wire.encode_request(op, rid, **fields))
        return rid

    def _exact(self, n):
        buf = b''
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def frame(self):
        """The next frame as (op, flags, id, payload); None at EOF."""
        h = self._exact(wire.HDR.size)
        if h is None:
            return None
        n, op, flags, rid = wire.HDR.unpack(h)
        p = self._exact(n) if n else b''
        assert p is not None, 'stream cut inside a payload'
        return op, flags, rid, p

    def recv(self):
        """The next reply; NOTIFY frames on the way are kept."""
        while True:
            f = self.frame()
            if f is None:
                return None
            op, flags, rid, p = f
            if flags & F_NOTIFY:
                assert op == OP_NOTIFY, 'NOTIFY flag on op %d' % op
                self.notes.append(parse_notify(flags, rid, p))
                continue
            assert flags & wire.F_REPLY, 'server sent a request (op %d)' % op
            return wire.Reply(op, flags, rid, p)

    def call(self, op, **fields):
        rid = self.send(op, **fields)
        r = self.recv()
        assert r is not None, '%s: server closed the connection' % op
        assert r.id == rid and r.opname == op, '%r is not %s %d' % (r, op, rid)
        return r

    def unwatch(self, ino):
        rid = self.next_id
        self.next_id += 1
        self.send_raw(wire.frame(OP_UNWATCH, struct.pack('>Q', ino), 0, rid))
        r = self.recv()
        assert r is not None and r.id == rid and r.op == OP_UNWATCH
        return r

    def hello(self, features=FEAT_NOTIFY):
        r = self.call('HELLO', magic=wire.MAGIC, version=wire.VERSION,
                      features=features)
        assert r.status == 0, r
        return r['features']

    def listen(self, until, stop=None):
        """Collects NOTIFY frames until `stop(notes)` or the deadline."""
        while time.monotonic() < until:
            if stop and stop(self.notes):
                return True
            self.sock.settimeout(max(0.01, until - time.monotonic()))
            try:
                f = self.frame()
            except (socket.timeout, TimeoutError):
                break
            finally:
                self.sock.settimeout(10)
            if f is None:
                break
            op, flags, rid, p = f
            assert flags & F_NOTIFY, 'unexpected frame op %d flags %#x' % (op, flags)
            self.notes.append(parse_notify(flags, rid, p))
        return bool(stop and stop(self.notes))

    def wait_note(self, ino, kind=CHANGED, bound=NOTE_BOUND_S):
        """Waits for a notification of `kind` about `ino`; returns it."""
        def hit(notes):
            return any(n.ino == ino and n.kind == kind for n in notes)
        ok = self.listen(time.monotonic() + bound, hit)
        assert ok, 'no %s for ino %d within %.1f s; got %r' % (
            KIND_NAMES[kind], ino, bound, self.notes)
        return [n for n in self.notes if n.ino == ino and n.kind == kind][0]

    def quiet(self, seconds=QUIET_S):
        """Listens for `seconds`; returns and clears what came."""
        self.listen(time.monotonic() + seconds)
        got, self.notes = self.notes, []
        return got

    def watch(self, handle, path):
        """OPENDIR + READDIR(WATCH) of `path`; returns the reply's flags."""
        r = self.call('OPENDIR', handle=handle, path=path)
        assert r.status == 0, r
        flags = 0
        off = 0
        while True:
            r = self.call('READDIR', handle=handle, offset=off,
                          length=65536, opflags=READDIR_WATCH)
            assert r.status == 0, r
            flags |= r['opflags'] & READDIR_WATCHED
            ents = wire.parse_dirents(r['data'])
            if r['opflags'] & 1 or not ents:
                break
            off = ents[-1][2]
        return flags


class WatchServer:
    """qftfs-server --stdio on a socketpair, optionally with --meta-fd."""

    def __init__(self, exe, root, log_path, env=None, meta=False, args=()):
        bulk, child = socket.socketpair()
        self.log_path = log_path
        self.logf = open(log_path, 'ab')
        argv = [exe, '--stdio', '--root', root] + list(args)
        fds = ()
        mchild = None
        self.meta = None
        if meta:
            msock, mchild = socket.socketpair()
            argv += ['--meta-fd', str(mchild.fileno())]
            fds = (mchild.fileno(),)
        self.proc = subprocess.Popen(argv, stdin=child, stdout=child,
                                     stderr=self.logf, env=env, pass_fds=fds)
        child.close()
        self.bulk = Conn(bulk)
        if meta:
            mchild.close()
            self.meta = Conn(msock)

    def finish(self, timeout=10):
        for c in (self.bulk, self.meta):
            if c:
                try:
                    c.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        for c in (self.bulk, self.meta):
            if c:
                c.sock.close()
        self.logf.close()
        return rc

    def log(self):
        with open(self.log_path, 'rb') as f:
            return f.read().decode(errors='replace')


@pytest.fixture(params=['build', 'asan'])
def start(request, tmp_path):
    """Factory: start(meta=False, args=(), env=None, features=NOTIFY) ->
    WatchServer after HELLO (on each connection).  At teardown every
    server must exit 0 and log no sanitizer report."""
    if request.param == 'asan':
        b = util.asan_build_dir()
        if not os.path.isdir(b):
            pytest.skip('sanitizer build %s is missing' % b)
    else:
        b = util.build_dir()
    exe = util.server_bin(b)
    if not os.access(exe, os.X_OK):
        pytest.fail('not built: %s' % exe, pytrace=False)
    root = tmp_path / 'root'
    root.mkdir()
    servers = []

    def make(meta=False, args=(), env=None, features=FEAT_NOTIFY,
             served=None):
        e = dict(os.environ)
        if util.is_asan_build(b):
            e = util.sanitizer_env(e)
        e.pop('QFTFS_SERVER_NOTIFY', None)
        e.update(env or {})
        served = str(served or root)
        s = WatchServer(exe, served, str(tmp_path / ('server%d.log' %
                                                     len(servers))),
                        env=e, meta=meta, args=args)
        servers.append(s)
        s.expect_rc = 0
        s.granted = s.bulk.hello(features)
        if meta:
            s.meta_granted = s.meta.hello(features)
        s.root = served
        return s

    yield make
    problems = []
    for s in servers:
        rc = s.finish()
        bad = util.log_problems(s.log())
        if bad:
            problems.append('%s:\n%s' % (s.log_path, '\n'.join(bad[:20])))
        if rc != s.expect_rc:
            problems.append('server exited %r\n%s' % (rc, util.tail(s.log())))
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)


def P(*a):
    return os.path.join(*a)


def ino(path):
    return os.lstat(path).st_ino


def test_hello_grants_and_readdir_watches(start):
    s = start()
    assert s.granted & FEAT_NOTIFY
    os.mkdir(P(s.root, 'd'))
    assert s.bulk.watch(1, 'd') == READDIR_WATCHED
    # The root can be watched too.
    assert s.bulk.watch(2, '') == READDIR_WATCHED
    assert s.bulk.quiet(0.3) == []


def _write(path, data):
    with open(path, 'ab') as f:
        f.write(data)


FOREIGN = {
    # name: (setup(d), change(d), name the notification may carry)
    'create': (None, lambda d: open(P(d, 'new'), 'w').close(), 'new'),
    'remove': (lambda d: open(P(d, 'f'), 'w').close(),
               lambda d: os.unlink(P(d, 'f')), 'f'),
    'rename': (lambda d: open(P(d, 'f'), 'w').close(),
               lambda d: os.rename(P(d, 'f'), P(d, 'g')), None),
    'chmod': (lambda d: open(P(d, 'f'), 'w').close(),
              lambda d: os.chmod(P(d, 'f'), 0o600), 'f'),
    'write': (lambda d: open(P(d, 'f'), 'w').close(),
              lambda d: _write(P(d, 'f'), b'x' * 100), 'f'),
    'mkdir': (None, lambda d: os.mkdir(P(d, 'sub')), 'sub'),
    'utime': (lambda d: open(P(d, 'f'), 'w').close(),
              lambda d: os.utime(P(d, 'f'), (1, 1)), 'f'),
}


@pytest.mark.parametrize('what', sorted(FOREIGN))
def test_foreign_change_is_notified(start, what):
    s = start()
    d = P(s.root, 'd')
    os.mkdir(d)
    setup, change, name = FOREIGN[what]
    if setup:
        setup(d)
    assert s.bulk.watch(1, 'd') == READDIR_WATCHED
    assert s.bulk.quiet(0.3) == []
    t0 = time.monotonic()
    change(d)
    n = s.bulk.wait_note(ino(d))
    took = time.monotonic() - t0
    assert n.name in ('', name) or name is None, n
    assert took < NOTE_BOUND_S


def _own_changes(c, base='d', other='d2', h=10):
    """Every kind of change through the protocol, in watched `base` (and
    `other`).  Asserts each succeeded."""
    def ok(r):
        assert r.status == 0, r
        return r
    ok(c.call('CREATE', handle=h, path=base, name='a',
              opflags=wire.O_RDWR, mode=0o644))
    ok(c.call('WRITE', handle=h, offset=0, data=b'hello' * 1000))
    ok(c.call('WRITE', handle=h, offset=5000, data=b'more'))
    ok(c.call('FLUSH', handle=h, opflags=0))
    ok(c.call('SETATTR', handle=h, path='', valid=wire.SET_SIZE, size=10))
    ok(c.call('SETATTR', handle=h, path='', valid=wire.SET_MODE,
              mode=0o640))
    ok(c.call('CLOSE', handle=h))
    ok(c.call('SETATTR', handle=0, path=base + '/a', valid=wire.SET_MODE,
              mode=0o600))
    ok(c.call('SETATTR', handle=0, path=base + '/a',
              valid=0x10 | 0x20, atime=(5, 0), mtime=(6, 0)))
    ok(c.call('SETATTR', handle=0, path=base + '/a', valid=wire.SET_SIZE,
              size=3))
    ok(c.call('OPEN', handle=h, path=base + '/a',
              opflags=wire.O_WRONLY | wire.O_TRUNC))
    ok(c.call('WRITE', handle=h, offset=0, data=b'again'))
    ok(c.call('FLUSH', handle=h, opflags=0))
    ok(c.call('CLOSE', handle=h))
    ok(c.call('MKDIR', path=base, name='m', mode=0o755))
    ok(c.call('SETATTR', handle=0, path=base + '/m', valid=wire.SET_MODE,
              mode=0o700))
    ok(c.call('SYMLINK', path=base, name='s', target='a'))
    ok(c.call('LINK', path=base + '/a', path2=base, name2='hard'))
    ok(c.call('SETXATTR', path=base + '/a', xname='user.k', opflags=0,
              data=b'v'))
    ok(c.call('REMOVEXATTR', path=base + '/a', xname='user.k'))
    ok(c.call('RENAME', path=base, name='a', path2=base, name2='b'))
    ok(c.call('RENAME', path=base, name='b', path2=other, name2='c'))
    ok(c.call('RENAME', path=other, name='c', path2=base, name2='hard'))
    ok(c.call('UNLINK', path=base, name='hard'))
    ok(c.call('UNLINK', path=base, name='s'))
    ok(c.call('RMDIR', path=base, name='m'))
    # A file renamed while open for writing stays the client's own.
    ok(c.call('CREATE', handle=h, path=base, name='w',
              opflags=wire.O_WRONLY, mode=0o644))
    ok(c.call('RENAME', path=base, name='w', path2=other, name2='w2'))
    ok(c.call('WRITE', handle=h, offset=0, data=b'z' * 4096))
    ok(c.call('FLUSH', handle=h, opflags=0))
    ok(c.call('CLOSE', handle=h))
    ok(c.call('UNLINK', path=other, name='w2'))


def _xattrs_work(root):
    try:
        os.setxattr(root, 'user.probe', b'1')
        os.removexattr(root, 'user.probe')
        return True
    except OSError:
        return False


def test_own_changes_are_not_notified(start):
    s = start()
    for d in ('d', 'd2'):
        os.mkdir(P(s.root, d))
    assert s.bulk.watch(1, 'd') == READDIR_WATCHED
    assert s.bulk.watch(2, 'd2') == READDIR_WATCHED
    if not _xattrs_work(s.root):
        pytest.skip('user xattrs are not supported under %s' % s.root)
    _own_changes(s.bulk)
    got = s.bulk.quiet()
    assert got == [], 'own changes came back: %r' % got
    # The channel works: a foreign change right after is heard.
    open(P(s.root, 'd2', 'foreign'), 'w').close()
    n = s.bulk.wait_note(ino(P(s.root, 'd2')))
    assert n.name in ('', 'foreign')


def test_own_changes_over_two_connections(start):
    """Bulk and meta, as the client uses them: the directory is watched
    from meta, files are created and written on bulk, the namespace is
    changed on meta.  Nothing comes back, on either connection."""
    s = start(meta=True)
    assert s.granted & FEAT_NOTIFY and s.meta_granted & FEAT_NOTIFY
    for d in ('d', 'd2'):
        os.mkdir(P(s.root, d))
    assert s.meta.watch(1, 'd') == READDIR_WATCHED
    assert s.meta.watch(2, 'd2') == READDIR_WATCHED
    b, m = s.bulk, s.meta

    def ok(r):
        assert r.status == 0, r
    ok(b.call('CREATE', handle=5, path='d', name='f', opflags=wire.O_RDWR,
              mode=0o644))
    ok(b.call('WRITE', handle=5, offset=0, data=b'x' * 65536))
    ok(b.call('FLUSH', handle=5, opflags=0))
    ok(b.call('CLOSE', handle=5))
    ok(m.call('SETATTR', handle=0, path='d/f', valid=wire.SET_MODE,
              mode=0o600))
    ok(m.call('RENAME', path='d', name='f', path2='d2', name2='g'))
    ok(m.call('MKDIR', path='d', name='sub', mode=0o755))
    ok(m.call('UNLINK', path='d2', name='g'))
    got = m.quiet() + b.quiet(0.1)
    assert got == [], 'own changes came back: %r' % got
    # Foreign changes go on meta, never on bulk.
    open(P(s.root, 'd', 'foreign'), 'w').close()
    m.wait_note(ino(P(s.root, 'd')))
    assert b.quiet(0.3) == []


def test_removed_directory_is_gone(start):
    s = start()
    d = P(s.root, 'd')
    os.makedirs(P(d, 'sub'))
    sub_ino = ino(P(d, 'sub'))
    assert s.bulk.watch(1, 'd') == READDIR_WATCHED
    assert s.bulk.watch(2, 'd/sub') == READDIR_WATCHED
    assert s.bulk.call('CLOSE', handle=2).status == 0
    os.rmdir(P(d, 'sub'))
    s.bulk.wait_note(sub_ino, GONE)
    s.bulk.wait_note(ino(d), CHANGED)


def test_moved_directory_is_gone(start):
    s = start()
    os.makedirs(P(s.root, 'd', 'sub'))
    sub_ino = ino(P(s.root, 'd', 'sub'))
    assert s.bulk.watch(1, 'd/sub') == READDIR_WATCHED
    os.rename(P(s.root, 'd', 'sub'), P(s.root, 'moved'))
    s.bulk.wait_note(sub_ino, GONE)
    # The watch ended: what happens in it now is not told.
    open(P(s.root, 'moved', 'x'), 'w').close()
    got = s.bulk.quiet()
    assert [n for n in got if n.ino == sub_ino and n.kind == CHANGED] == []


def test_watch_cap_evicts_least_recent(start):
    s = start(args=('--max-watches', '2'))
    for d in ('a', 'b', 'c'):
        os.mkdir(P(s.root, d))
    assert s.bulk.watch(1, 'a') == READDIR_WATCHED
    assert s.bulk.watch(2, 'b') == READDIR_WATCHED
    # Listing `a` again makes `b` the least recent.
    assert s.bulk.call('CLOSE', handle=1).status == 0
    assert s.bulk.watch(1, 'a') == READDIR_WATCHED
    assert s.bulk.watch(3, 'c') == READDIR_WATCHED
    s.bulk.wait_note(ino(P(s.root, 'b')), GONE)
    open(P(s.root, 'b', 'x'), 'w').close()
    open(P(s.root, 'a', 'x'), 'w').close()
    open(P(s.root, 'c', 'x'), 'w').close()
    s.bulk.wait_note(ino(P(s.root, 'a')))
    s.bulk.wait_note(ino(P(s.root, 'c')))
    got = s.bulk.quiet(0.3)
    assert not [n for n in s.bulk.notes + got
                if n.ino == ino(P(s.root, 'b')) and n.kind == CHANGED]


def test_unwatch_stops_notifications(start):
    s = start()
    for d in ('d', 'e'):
        os.mkdir(P(s.root, d))
    assert s.bulk.watch(1, 'd') == READDIR_WATCHED
    assert s.bulk.watch(2, 'e') == READDIR_WATCHED
    assert s.bulk.unwatch(ino(P(s.root, 'd'))).status == 0
    # Unwatching what is not watched is no error.
    assert s.bulk.unwatch(ino(P(s.root, 'd'))).status == 0
    open(P(s.root, 'd', 'x'), 'w').close()
    open(P(s.root, 'e', 'x'), 'w').close()
    s.bulk.wait_note(ino(P(s.root, 'e')))
    got = s.bulk.notes + s.bulk.quiet(0.3)
    assert not [n for n in got if n.ino == ino(P(s.root, 'd'))], got


def _no_frames(conn, seconds=QUIET_S):
    """Nothing at all arrives on `conn` for `seconds`."""
    conn.sock.settimeout(seconds)
    try:
        data = conn.sock.recv(65536)
    except (socket.timeout, TimeoutError):
        data = b''
    finally:
        conn.sock.settimeout(10)
    assert data == b'', 'the server sent %d unasked bytes' % len(data)


def test_no_feature_no_notify(start):
    s = start(features=0)
    assert not s.granted & FEAT_NOTIFY
    os.mkdir(P(s.root, 'd'))
    # The flag asks for nothing without the feature.
    assert s.bulk.watch(1, 'd') == 0
    open(P(s.root, 'd', 'x'), 'w').close()
    os.unlink(P(s.root, 'd', 'x'))
    _no_frames(s.bulk)
    assert s.bulk.notes == []


def test_unavailable_inotify_is_said_once(start):
    s = start(meta=True, env={'QFTFS_SERVER_NOTIFY': 'off'})
    assert not s.granted & FEAT_NOTIFY
    assert not s.meta_granted & FEAT_NOTIFY
    os.mkdir(P(s.root, 'd'))
    assert s.meta.watch(1, 'd') == 0
    open(P(s.root, 'd', 'x'), 'w').close()
    _no_frames(s.meta, 0.5)
    s.finish()
    lines = [l for l in s.log().splitlines()
             if 'change notification is not available' in l]
    assert len(lines) == 1, s.log()


def test_notify_frame_from_client_closes(start):
    s = start()
    s.expect_rc = 1     # closed for cause
    payload = struct.pack('>QI', 1, CHANGED) + wire.enc_str('')
    s.bulk.send_raw(wire.frame(OP_NOTIFY, payload, F_NOTIFY, 0))
    assert s.bulk.recv() is None
    s.finish()
    assert 'closing connection: malformed frame (op NOTIFY' in s.log()


def test_slow_reader_gets_all(start):
    """A client that does not read its notifications does not make the
    server queue them without bound: past the GONE queue's limit it gets
    one ALL.  Listings on bulk, with a cap of one watch, evict a watch
    each; the notifications go on meta, which this client does not read
    until the end."""
    s = start(meta=True, args=('--max-watches', '1'))
    for d in ('a', 'b'):
        os.mkdir(P(s.root, d))
    b = s.bulk
    for h, d in ((1, 'a'), (2, 'b')):
        assert b.call('OPENDIR', handle=h, path=d).status == 0
    for i in range(3000):
        r = b.call('READDIR', handle=1 + i % 2, offset=0, length=4096,
                   opflags=READDIR_WATCH)
        assert r.status == 0, r
    # The server still answers at once.
    assert wire.alive(b)
    s.meta.listen(time.monotonic() + NOTE_BOUND_S,
                  lambda notes: any(n.kind == ALL for n in notes))
    kinds = [n.kind for n in s.meta.notes]
    assert ALL in kinds, 'no ALL after %d notifications' % len(kinds)
    # Fewer than were made: the rest was folded into the ALL.
    assert len(kinds) < 2999
    assert b.notes == []


def test_fuse_directory_is_not_watched(start, mount):
    """inotify sees only what passes through this kernel: on a FUSE (or
    network) file system the server must not promise a watch."""
    src, mnt = mount
    os.mkdir(os.path.join(mnt, 'd'))
    s = start(served=mnt)
    assert s.granted & FEAT_NOTIFY
    assert s.bulk.watch(1, 'd') == 0
    assert s.bulk.watch(2, '') == 0
    assert s.bulk.call('CLOSE', handle=1).status == 0
    assert s.bulk.call('CLOSE', handle=2).status == 0
    s.finish()
