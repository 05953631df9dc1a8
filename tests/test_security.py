# SPDX-License-Identifier: MIT
"""The server's confinement and its handling of hostile input.

1. Permissions are the server user's: a server run as nobody (65534) denies
   root on the client what nobody may not do, and creates files as nobody.
2. The server never creates, changes or reveals anything outside its root,
   whatever symlinks the root contains.  Through a mount the CLIENT kernel
   follows symlinks (that is ordinary client-side resolution), so the
   decisive checks speak the wire protocol to `qftfs-server --stdio`
   directly (tests/wire.py) and ask it to act through the links itself.
3. Malformed input: an invalid name gets EINVAL and the connection goes on;
   a framing error or an unknown opcode closes the connection.
"""

import errno
import os
import socket
import stat
import struct
import subprocess

import pytest

import util
import wire
from util import expect_errno

P = os.path.join
SETPRIV = 'setpriv --reuid=65534 --regid=65534 --clear-groups'


# ---------------------------------------------------------------------------
# 1. Permissions as the server user sees them

@pytest.fixture
def nobody_mount(mounter, wtmp, need_root):
    if not os.path.exists('/usr/bin/setpriv'):
        pytest.skip('setpriv (util-linux) is missing')
    served = P(wtmp, 'served')
    os.mkdir(served)
    os.chown(served, 65534, 65534)
    with open(P(served, 'secret'), 'wb') as f:
        f.write(b'top secret')
    os.chmod(P(served, 'secret'), 0o000)
    with open(P(served, 'own'), 'wb') as f:
        f.write(b'mine')
    os.chown(P(served, 'own'), 65534, 65534)
    os.chmod(P(served, 'own'), 0o600)
    os.mkdir(P(served, 'rootdir'), 0o755)
    return mounter(src=served, mnt=P(wtmp, 'mnt'), server_wrapper=SETPRIV)


def test_server_runs_as_its_user(nobody_mount):
    m = nobody_mount
    for pid in m.server_pids:
        with open('/proc/%d/status' % pid) as f:
            uids = [l for l in f if l.startswith('Uid:')][0].split()[1:]
        assert set(uids) == {'65534'}, 'server runs with uids %s' % uids


def test_permissions_are_the_servers(nobody_mount):
    src, mnt = nobody_mount
    # Root on the client is nobody on the server.
    expect_errno(errno.EACCES, os.open, P(mnt, 'secret'), os.O_RDONLY)
    expect_errno(errno.EACCES, os.open, P(mnt, 'secret'), os.O_WRONLY)
    expect_errno(errno.EPERM, os.chmod, P(mnt, 'secret'), 0o644)
    assert stat.S_IMODE(os.stat(P(src, 'secret')).st_mode) == 0
    with open(P(mnt, 'own'), 'rb') as f:
        assert f.read() == b'mine'
    expect_errno(errno.EACCES, os.open, P(mnt, 'rootdir', 'x'),
                 os.O_CREAT | os.O_WRONLY, 0o644)
    assert os.listdir(P(src, 'rootdir')) == []
    # New files and directories belong to the server's user.
    with open(P(mnt, 'new'), 'wb') as f:
        f.write(b'n')
    os.mkdir(P(mnt, 'newdir'))
    for name in ('new', 'newdir'):
        st = os.stat(P(src, name))
        assert (st.st_uid, st.st_gid) == (65534, 65534), \
            '%s owned by %d:%d' % (name, st.st_uid, st.st_gid)
    expect_errno(errno.EPERM, os.chown, P(mnt, 'new'), 0, 0)
    assert os.stat(P(src, 'new')).st_uid == 65534


# ---------------------------------------------------------------------------
# 2. Symlinks leading out of the root

def _layout(tmp_path):
    """tmp/a/served is the root; tmp/outside is what it must never touch."""
    base = tmp_path / 'a'
    served = base / 'served'
    outside = tmp_path / 'outside'
    os.makedirs(served / 'sub')
    os.makedirs(outside / 'dir')
    (outside / 'victim').write_bytes(b'victim data')
    os.chmod(outside / 'victim', 0o640)
    os.utime(outside / 'victim', ns=(1_000_000_000, 1_000_000_000))
    os.chmod(outside / 'dir', 0o750)
    (served / 'sub' / 'file').write_bytes(b'inside')
    os.symlink('/etc', served / 'esc')
    os.symlink('../..', served / 'up')
    os.symlink('/tmp', served / 'abs')
    os.symlink(str(outside), served / 'esc2')
    os.symlink(str(outside / 'victim'), served / 'esc3')
    os.symlink(str(outside / 'dir'), served / 'esc4')
    os.symlink('sub', served / 'inner')
    try:
        os.setxattr(outside / 'victim', 'user.secret', b's3cret')
    except OSError:
        pass
    return str(served), str(outside)


def _outside_state(tmp_path, outside, unique):
    def st(p):
        s = os.lstat(p)
        return (s.st_mode, s.st_uid, s.st_gid, s.st_size, s.st_mtime_ns,
                s.st_nlink, s.st_ino)
    victim = P(outside, 'victim')
    try:
        xattrs = sorted(os.listxattr(victim))
    except OSError:
        xattrs = None
    return {
        'tmp': sorted(os.listdir(tmp_path)),
        'a': sorted(os.listdir(tmp_path / 'a')),
        'outside': sorted(os.listdir(outside)),
        'outside/dir': sorted(os.listdir(P(outside, 'dir'))),
        'victim': st(victim),
        'victim data': util.read_log(victim),
        'victim xattrs': xattrs,
        'dir': st(P(outside, 'dir')),
        'etc escape': os.path.lexists('/etc/qftfs-escape-test'),
        'tmp escape': os.path.lexists(P('/tmp', unique)),
    }


def test_symlink_escape_through_mount(mounter, tmp_path):
    served, outside = _layout(tmp_path)
    mnt = str(tmp_path / 'c' / 'm' / 'mnt')
    os.makedirs(mnt)
    unique = 'qftfs-escape-%d' % os.getpid()
    before = _outside_state(tmp_path, outside, unique)
    mounter(src=served, mnt=mnt)
    # Links show as links, with their targets, and are never followed by the
    # server: opening one without following fails.
    for name, target in (('esc', '/etc'), ('up', '../..'), ('abs', '/tmp'),
                         ('esc3', P(outside, 'victim'))):
        assert stat.S_ISLNK(os.lstat(P(mnt, name)).st_mode)
        assert os.readlink(P(mnt, name)) == target
        expect_errno(errno.ELOOP, os.open, P(mnt, name), os.O_RDONLY | os.O_NOFOLLOW)
    # The client kernel resolves up -> ../.. from the mount point: mnt/up/x
    # is <tmp>/c/x on the client.  Had the server followed the link itself,
    # x would appear in <tmp>, beside served's parent.
    with open(P(mnt, 'up', 'x'), 'wb') as f:
        f.write(b'client side')
    assert os.path.exists(tmp_path / 'c' / 'x')
    os.unlink(tmp_path / 'c' / 'x')
    # Changing a link's own metadata must not reach its target.
    os.chown(P(mnt, 'esc3'), 1234, 1234, follow_symlinks=False)
    os.utime(P(mnt, 'esc3'), ns=(5, 5), follow_symlinks=False)
    assert not os.path.exists(P(served, 'x'))
    after = _outside_state(tmp_path, outside, unique)
    assert after == before, 'something changed outside the root'
    assert os.lstat(P(served, 'esc3')).st_uid == 1234


@pytest.fixture(params=['build', 'asan'])
def server(request, tmp_path):
    """Factory: wire.Server on a fresh qftfs-server (normal or ASan build).
    At teardown each server must have exited and logged no sanitizer
    report."""
    if request.param == 'asan':
        b = util.asan_build_dir()
        if not os.path.isdir(b):
            pytest.skip('sanitizer build %s is missing' % b)
    else:
        b = util.build_dir()
    exe = util.server_bin(b)
    if not os.access(exe, os.X_OK):
        pytest.fail('not built: %s' % exe, pytrace=False)
    env = util.sanitizer_env() if util.is_asan_build(b) else None
    servers = []
    logs = tmp_path / 'logs'
    logs.mkdir(exist_ok=True)

    def make(root, hello=True):
        log = str(logs / ('server%d.log' % len(servers)))
        s = wire.Server(exe, root, log, env=env)
        servers.append(s)
        if hello:
            r = s.hello()
            assert r.status == 0, 'HELLO failed: %r\n%s' % (r, s.log())
        return s

    yield make
    problems = util.wire_server_problems(servers)
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)


def _fail(r, what):
    assert r.status != 0, '%s succeeded (%r); it must fail' % (what, r)


def test_wire_escapes(server, tmp_path):
    served, outside = _layout(tmp_path)
    unique = 'qftfs-escape-%d' % os.getpid()
    before = _outside_state(tmp_path, outside, unique)
    s = server(served)
    O = wire
    # Lookups through links that lead out.
    for path in ('esc/passwd', 'up/x', 'up/a/served', 'abs', 'esc2/victim',
                 'esc4', 'esc2'):
        r = s.call('LSTAT', path=path)
        if path in ('abs', 'esc4', 'esc2'):
            # The link itself may be examined, never its target.
            assert r.status == 0 and (r['attr'].mode & 0o170000) == O.S_IFLNK, \
                'LSTAT %s: %r' % (path, r)
        else:
            _fail(r, 'LSTAT %s' % path)
    # Creating through them.
    h = iter(range(1, 1000))
    for path, name in (('esc', 'qftfs-escape-test'), ('up', 'x'), ('abs', unique),
                       ('esc2', 'new'), ('esc4', 'new')):
        _fail(s.call('CREATE', handle=next(h), path=path, name=name,
                     opflags=O.O_WRONLY | O.O_EXCL, mode=0o644),
              'CREATE %s/%s' % (path, name))
        _fail(s.call('MKDIR', path=path, name=name, mode=0o755), 'MKDIR %s/%s' % (path, name))
        _fail(s.call('MKNOD', path=path, name=name, mode=O.S_IFIFO | 0o644, rdev=0),
              'MKNOD %s/%s' % (path, name))
        _fail(s.call('SYMLINK', path=path, name=name, target='t'),
              'SYMLINK %s/%s' % (path, name))
    # Opening, reading and changing what lies outside.
    for path, flags in (('esc/passwd', O.O_RDONLY), ('esc2/victim', O.O_RDWR | O.O_TRUNC),
                        ('esc3', O.O_RDONLY), ('esc3', O.O_WRONLY | O.O_TRUNC)):
        _fail(s.call('OPEN', handle=next(h), path=path, opflags=flags),
              'OPEN %s' % path)
    for path in ('esc', 'up', 'esc2', 'esc4'):
        _fail(s.call('OPENDIR', handle=next(h), path=path), 'OPENDIR %s' % path)
    _fail(s.call('UNLINK', path='esc2', name='victim'), 'UNLINK esc2/victim')
    _fail(s.call('RMDIR', path='esc2', name='dir'), 'RMDIR esc2/dir')
    _fail(s.call('RENAME', path='esc2', name='victim', path2='', name2='stolen'),
          'RENAME esc2/victim -> stolen')
    _fail(s.call('RENAME', path='', name='sub', path2='up', name2='moved'),
          'RENAME sub -> up/moved')
    _fail(s.call('RENAME', path='', name='sub', path2='esc2', name2='moved'),
          'RENAME sub -> esc2/moved')
    _fail(s.call('LINK', path='esc2/victim', path2='', name2='hl'), 'LINK esc2/victim')
    _fail(s.call('LINK', path='sub/file', path2='esc2', name2='hl'), 'LINK into esc2')
    for valid, kw in ((O.SET_MODE, {'mode': 0o777}), (O.SET_SIZE, {'size': 0}),
                      (O.SET_UID | O.SET_GID, {'uid': 1234, 'gid': 1234})):
        _fail(s.call('SETATTR', handle=0, path='esc2/victim', valid=valid, **kw),
              'SETATTR esc2/victim')
    # SETATTR on the link itself acts on the link (or fails), never on the
    # target: truncate(2) and chmod(2) follow links, the server must not.
    for path in ('esc3', 'esc4'):
        s.call('SETATTR', handle=0, path=path, valid=O.SET_MODE, mode=0o777)
        s.call('SETATTR', handle=0, path=path, valid=O.SET_SIZE, size=0)
        s.call('SETATTR', handle=0, path=path, valid=0x20,
               mtime=(7, 7), atime=(7, 7))
    r = s.call('GETXATTR', path='esc3', xname='user.secret', length=100)
    assert r.status != 0 or r['data'] != b's3cret', 'GETXATTR read through a link'
    s.call('SETXATTR', path='esc3', xname='user.evil', opflags=0, data=b'x')
    s.call('REMOVEXATTR', path='esc3', xname='user.secret')
    r = s.call('READLINK', path='esc')
    assert r.status == 0 and r['target'] == b'/etc'
    assert wire.alive(s), 'connection died'
    assert s.finish() == 0
    after = _outside_state(tmp_path, outside, unique)
    for k in before:
        assert after[k] == before[k], 'outside the root, %s changed: %r -> %r' % (
            k, before[k], after[k])
    assert sorted(os.listdir(served)) == sorted(['sub', 'esc', 'up', 'abs', 'esc2',
                                                 'esc3', 'esc4', 'inner']), \
        'unexpected entries in the root: %s' % os.listdir(served)


def test_wire_invalid_names_get_einval(server, tmp_path):
    root = tmp_path / 'root'
    (root / 'sub').mkdir(parents=True)
    s = server(str(root))
    bad_names = [b'a/b', b'a\0b', b'n' * 256, b'.', b'..', b'', b'/']
    bad_paths = [b'/sub', b'sub/', b'sub//x', b'../x', b'sub/../sub', b'.',
                 b'sub/.', b'a\0b', b'x' * 4096]
    h = 1
    for name in bad_names:
        for op, kw in (('CREATE', dict(handle=h, path='', opflags=wire.O_WRONLY, mode=0o644)),
                       ('MKDIR', dict(path='sub', mode=0o755)),
                       ('UNLINK', dict(path='')),
                       ('SYMLINK', dict(path='', target='t'))):
            r = s.call(op, name=name, **kw)
            assert r.err == 'EINVAL', '%s name=%r: %r' % (op, name, r)
            assert wire.alive(s), 'connection died after %s name=%r' % (op, name)
        r = s.call('RENAME', path='', name='sub', path2='', name2=name, opflags=0)
        assert r.err == 'EINVAL', 'RENAME to %r: %r' % (name, r)
    for path in bad_paths:
        for op, kw in (('LSTAT', {}), ('OPENDIR', dict(handle=h)),
                       ('MKDIR', dict(name='x', mode=0o755))):
            r = s.call(op, path=path, **kw)
            assert r.err == 'EINVAL', '%s path=%r: %r' % (op, path, r)
    # Unknown flag bits, out-of-range handles and lengths.
    for op, kw in (('CREATE', dict(handle=1, path='', name='f', opflags=0x8000, mode=0o644)),
                   ('RENAME', dict(path='', name='sub', path2='', name2='s2', opflags=4)),
                   ('READ', dict(handle=0, offset=0, length=1)),
                   ('READ', dict(handle=65537, offset=0, length=1)),
                   ('READ', dict(handle=1, offset=0, length=(1 << 20) + 1)),
                   ('SETATTR', dict(handle=0, path='sub', valid=0x100)),
                   ('MKDIR', dict(path='', name='x', mode=0o170000 | 0o755))):
        r = s.call(op, **kw)
        assert r.err == 'EINVAL', '%s %r: %r' % (op, kw, r)
    assert wire.alive(s)
    assert sorted(os.listdir(root)) == ['sub'] and os.listdir(root / 'sub') == []
    assert s.finish() == 0


def test_wire_handles(server, tmp_path):
    root = tmp_path / 'root'
    root.mkdir()
    s = server(str(root))
    assert s.call('WRITE', handle=5, offset=0, data=b'x').err == 'EBADF'
    assert s.call('CLOSE', handle=5).err == 'EBADF'
    # Pipelined: CREATE, WRITEs, FLUSH, CLOSE sent back to back.
    ids = [s.send('CREATE', handle=1, path='', name='f', opflags=wire.O_RDWR, mode=0o640)]
    for i in range(20):
        ids.append(s.send('WRITE', handle=1, offset=i * 1000, data=bytes([i]) * 1000))
    ids.append(s.send('FLUSH', handle=1, opflags=0))
    ids.append(s.send('READ', handle=1, offset=19000, length=5000))
    ids.append(s.send('CLOSE', handle=1))
    replies = {}
    for _ in ids:
        r = s.recv()
        replies[r.id] = r
    assert all(replies[i].status == 0 for i in ids), [replies[i] for i in ids]
    assert replies[ids[0]]['attr'].mode == wire.S_IFREG | 0o640
    assert replies[ids[-2]]['data'] == bytes([19]) * 1000
    assert all(replies[i]['count'] == 1000 for i in ids[1:21])
    assert (root / 'f').read_bytes() == b''.join(bytes([i]) * 1000 for i in range(20))
    # Binding a bound handle, or using a directory handle for READ: EBADF.
    assert s.call('OPEN', handle=2, path='f', opflags=wire.O_RDONLY).status == 0
    assert s.call('OPEN', handle=2, path='f', opflags=wire.O_RDONLY).err == 'EBADF'
    assert s.call('OPENDIR', handle=3, path='').status == 0
    assert s.call('READ', handle=3, offset=0, length=10).err == 'EBADF'
    assert s.call('CLOSE', handle=2).status == 0
    assert s.call('CLOSE', handle=3).status == 0
    assert s.call('OPEN', handle=2, path='f', opflags=wire.O_RDONLY).status == 0
    assert s.call('READ', handle=2, offset=0, length=3)['data'] == b'\0\0\0'
    assert s.finish() == 0


def test_wire_readdir_cookies(server, tmp_path):
    root = tmp_path / 'root'
    root.mkdir()
    names = {'n%04d' % i for i in range(300)}
    for n in names:
        (root / n).write_bytes(b'')
    s = server(str(root))
    assert s.call('OPENDIR', handle=1, path='').status == 0
    seen, cookie, rounds = [], 0, 0
    while True:
        r = s.call('READDIR', handle=1, offset=cookie, length=1024, opflags=0)
        assert r.status == 0, r
        ents = wire.parse_dirents(r['data'])
        seen += [e[0].decode() for e in ents]
        rounds += 1
        if r['opflags'] & 1:
            break
        assert ents, 'READDIR returned nothing without EOF'
        cookie = ents[-1][2]
        assert rounds < 1000
    got = [n for n in seen if n not in ('.', '..')]
    assert sorted(got) == sorted(names), 'entries lost or repeated across cookies'
    assert rounds > 3, 'a 1 KiB budget must split 300 entries'
    assert s.finish() == 0


def test_wire_version_mismatch(server, tmp_path):
    s = server(str(tmp_path), hello=False)
    r = s.hello(version=99)
    assert r.err == 'EPROTO', r
    assert b'v99' in r.errmsg and b'v%d' % wire.VERSION in r.errmsg, \
        'message must name both versions'
    assert s.closed_by_peer(), 'server kept the connection after a version mismatch'
    rc = s.finish()
    assert rc not in (0, None), 'server must exit non-zero on a version mismatch'
    assert 'qftfs-server: ' in s.log()


def _frame_cases():
    lstat_ok = wire.enc_str('')
    hello = struct.pack('>III', wire.MAGIC, wire.VERSION, 0)
    return {
        # name: (bytes after a good HELLO, shut our write side afterwards)
        'cut-inside-payload': (wire.frame('LSTAT', b'\0\0\0\x05ab', length=100), True),
        'cut-inside-header': (wire.frame('LSTAT', lstat_ok)[:9], True),
        'short-payload': (wire.frame('LSTAT', b'\0\0'), False),
        'trailing-bytes': (wire.frame('LSTAT', lstat_ok + b'xyz'), False),
        'string-without-nul': (wire.frame('LSTAT', b'\0\0\0\x03abcd'), False),
        'string-longer-than-frame': (wire.frame('LSTAT', b'\xff\xff\xff\xf0ab'), False),
        'unknown-opcode': (wire.frame(999, b''), False),
        'opcode-zero': (wire.frame(0, lstat_ok), False),
        'unknown-frame-flag': (wire.frame('LSTAT', lstat_ok, flags=0x8000), False),
        'oversized-length': (wire.frame('LSTAT', b'', length=0xffffffff), False),
        'just-over-max': (wire.frame('WRITE', b'', length=wire.MAX_PAYLOAD + 1), False),
        'second-hello-bad-magic': (wire.frame('HELLO', struct.pack('>III', 1, 1, 0)), False),
        'garbage': (b'\x00\x00\x00\x10GET / HTTP/1.0\r\n\r\n', False),
        'hello-truncated': (wire.frame('HELLO', hello[:6]), False),
    }


@pytest.mark.parametrize('case', sorted(_frame_cases()))
def test_wire_malformed_frame_closes(server, tmp_path, case):
    data, shut = _frame_cases()[case]
    s = server(str(tmp_path))
    assert wire.alive(s)
    s.send_raw(data)
    if shut:
        s.sock.shutdown(socket.SHUT_WR)
    assert s.closed_by_peer(), 'server kept the connection open after %s' % case
    try:
        s.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail('server did not exit after closing the connection')
    if not shut:
        # A protocol violation is logged (one line); a stream that merely
        # ends early need not be.
        assert 'qftfs-server: ' in s.log(), 'the server logged nothing about %s' % case


def test_wire_frame_before_hello_closes(server, tmp_path):
    s = server(str(tmp_path), hello=False)
    s.send('LSTAT', path='')
    assert s.closed_by_peer(), 'server answered a request sent before HELLO'
    s.proc.wait(timeout=10)
