# SPDX-License-Identifier: MIT
"""The server acts as the caller (QFT_FEAT_CRED), spoken to in raw frames.

A root `qftfs-server --stdio` driven by tests/wire.py, as a client of a
mount other users share would drive it, and as an attacker holding such a
connection might: every request that names a caller must be checked by the
server's kernel as that caller, make what it makes as that caller, and
never reach a device node, a FIFO or a file behind a swapped symlink with
the server's own rights.  Each test of a finding of issue 18 is named for
it and fails on a server that does everything as root (the state before
the feature), which `QFTFS_SERVER_CRED=off` or an older server shows.

The layout (all under a 0755 temp dir, the root owned by root):

  secret       root 0600       a file nobody may read
  grp          root:4242 0640  readable through group 4242 only
  pub/         root 1777       world-writable and sticky, like /tmp
  pub/mine     65534 0644      nobody's own file
  priv/        1001 0700       another user's private directory
  priv/x       1001 0644
  sgid/        root:4242 2777  a set-group-ID directory
"""

import errno
import os
import stat

import pytest

import util
import wire

P = os.path.join
NOBODY = (65534, 65534, [])
OTHER = (1001, 1001, [])
GROUP = 4242


@pytest.fixture
def tree(need_root, wtmp):
    root = P(wtmp, 'root')
    outside = P(wtmp, 'outside')
    os.mkdir(root, 0o755)
    os.mkdir(outside, 0o755)
    with open(P(outside, 'secret'), 'wb') as f:
        f.write(b'outside secret')
    os.chmod(P(outside, 'secret'), 0o600)
    with open(P(root, 'secret'), 'wb') as f:
        f.write(b'top secret')
    os.chmod(P(root, 'secret'), 0o600)
    with open(P(root, 'grp'), 'wb') as f:
        f.write(b'group data')
    os.chown(P(root, 'grp'), 0, GROUP)
    os.chmod(P(root, 'grp'), 0o640)
    os.mkdir(P(root, 'pub'))
    os.chmod(P(root, 'pub'), 0o1777)
    with open(P(root, 'pub', 'mine'), 'wb') as f:
        f.write(b'mine')
    os.chown(P(root, 'pub', 'mine'), 65534, 65534)
    os.mkdir(P(root, 'priv'))
    with open(P(root, 'priv', 'x'), 'wb') as f:
        f.write(b'private')
    os.chown(P(root, 'priv', 'x'), 1001, 1001)
    os.chown(P(root, 'priv'), 1001, 1001)
    os.chmod(P(root, 'priv'), 0o700)
    os.mkdir(P(root, 'sgid'))
    os.chown(P(root, 'sgid'), 0, GROUP)
    os.chmod(P(root, 'sgid'), 0o2777)
    return root, outside


@pytest.fixture
def server(tmp_path):
    """Factory: server(root, features=FEAT_CRED, args=(), env=None,
    wrapper=()) -> wire.Server with HELLO done; the reply is s.hello_rep."""
    exe = util.server_bin(util.build_dir())
    if not os.access(exe, os.X_OK):
        pytest.fail('not built: %s' % exe, pytrace=False)
    servers = []

    def make(root, features=wire.FEAT_CRED, args=(), env=None, wrapper=()):
        e = dict(os.environ)
        if util.is_asan_build(util.build_dir()):
            e = util.sanitizer_env(e)
        e.update(env or {})
        log = str(tmp_path / ('server%d.log' % len(servers)))
        s = wire.Server(exe, root, log, env=e, wrapper=wrapper, timeout=30,
                        args=args)
        servers.append(s)
        r = s.hello(features=features)
        assert r.status == 0, 'HELLO failed: %r\n%s' % (r, s.log())
        s.hello_rep = r
        return s

    yield make
    problems = util.wire_server_problems(servers, check_exit=True)
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)


def granted(s):
    return bool(s.hello_rep['features'] & wire.FEAT_CRED)


def owner(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def test_granted_only_where_the_server_can_act_as_others(server, tree):
    root, _ = tree
    s = server(root)
    assert granted(s), 'a root server did not offer to act as its callers'
    assert s.hello_rep['uid'] == 0
    # Not asked: not granted, and a marked frame is then a protocol
    # violation that closes the connection.
    s = server(root, features=0)
    assert not granted(s)
    s.send_raw(wire.encode_request('LSTAT', 99, cred=NOBODY, path=''))
    assert s.closed_by_peer(), 'a CRED frame without the feature was taken'
    s.refused = True
    # A root server that cannot switch (here: told so) does not grant it.
    s = server(root, env={'QFTFS_SERVER_CRED': 'off'})
    assert not granted(s)
    # A server that is not root acts as its own user: nothing to grant.
    s = server(root, wrapper=('setpriv', '--reuid=65534', '--regid=65534',
                              '--clear-groups'))
    assert not granted(s)
    assert s.hello_rep['uid'] == 65534


def test_requests_run_as_the_caller(server, tree):
    root, _ = tree
    s = server(root)
    # The kernel checks as the caller: nobody reads neither root's secret
    # nor another user's private directory.
    assert s.call('OPEN', cred=NOBODY, handle=1, path='secret',
                  opflags=wire.O_RDONLY).err == 'EACCES'
    assert s.call('LSTAT', cred=NOBODY, path='priv/x').err == 'EACCES'
    assert s.call('OPENDIR', cred=NOBODY, handle=2, path='priv').err == 'EACCES'
    assert s.call('LSTAT', cred=OTHER, path='priv/x').status == 0
    # Supplementary groups count, exactly as given.
    assert s.call('OPEN', cred=NOBODY, handle=3, path='grp',
                  opflags=wire.O_RDONLY).err == 'EACCES'
    r = s.call('OPEN', cred=(65534, 65534, [GROUP]), handle=3, path='grp',
               opflags=wire.O_RDONLY, length=100)
    assert r.status == 0 and r['data'] == b'group data', r
    assert s.call('CLOSE', handle=3).status == 0
    # What the caller makes is theirs from the start (no chown after).
    assert s.call('CREATE', cred=NOBODY, handle=4, path='pub', name='f',
                  opflags=wire.O_WRONLY | wire.O_EXCL, mode=0o644).status == 0
    assert s.call('CLOSE', handle=4).status == 0
    assert s.call('MKDIR', cred=NOBODY, path='pub', name='d',
                  mode=0o755).status == 0
    assert s.call('SYMLINK', cred=NOBODY, path='pub', name='l',
                  target='f').status == 0
    assert s.call('MKNOD', cred=NOBODY, path='pub', name='p',
                  mode=wire.S_IFIFO | 0o644).status == 0
    for n in ('f', 'd', 'l', 'p'):
        assert owner(P(root, 'pub', n)) == (65534, 65534), n
    # A set-group-ID directory's group, as on a local file system.
    assert s.call('MKDIR', cred=NOBODY, path='sgid', name='d',
                  mode=0o755).status == 0
    assert owner(P(root, 'sgid', 'd')) == (65534, GROUP)
    # The sticky bit: nobody may not remove another user's file in pub.
    with open(P(root, 'pub', 'roots'), 'w'):
        pass
    assert s.call('UNLINK', cred=NOBODY, path='pub', name='roots').err == 'EPERM'
    assert s.call('RENAME', cred=NOBODY, path='pub', name='roots',
                  path2='pub', name2='x', opflags=0).err == 'EPERM'
    # Root on the client is root on the server (no root squash).
    r = s.call('OPEN', cred=(0, 0, []), handle=5, path='secret',
               opflags=wire.O_RDONLY, length=100)
    assert r.status == 0 and r['data'] == b'top secret'
    assert s.call('CLOSE', handle=5).status == 0


def test_only_requests_that_name_a_caller_are_served(server, tree):
    root, _ = tree
    s = server(root)
    # A path request without a caller is refused, not run as root...
    for op, kw in (('LSTAT', dict(path='secret')),
                   ('OPEN', dict(handle=1, path='secret', opflags=0)),
                   ('UNLINK', dict(path='', name='secret')),
                   ('MKDIR', dict(path='', name='x', mode=0o755)),
                   ('SETATTR', dict(handle=0, path='secret', valid=wire.SET_MODE,
                                    mode=0o666))):
        r = s.call(op, **kw)
        assert r.err == 'EACCES', '%s without a caller: %r' % (op, r)
    assert stat.S_IMODE(os.stat(P(root, 'secret')).st_mode) == 0o600
    assert sorted(os.listdir(root)) == ['grp', 'priv', 'pub', 'secret', 'sgid']
    # ... while those that need no one still work.
    assert s.call('PING').status == 0
    assert s.call('SYNCFS').status == 0
    # Handles act as whoever opened them; one nobody never opened is
    # EBADF.
    assert s.call('READ', handle=9, offset=0, length=1).err == 'EBADF'
    # Ids the decoder refuses: (uint32_t)-1 is EINVAL, the connection goes
    # on; more groups than the limit is malformed and closes it.
    r = s.call('LSTAT', cred=(0xffffffff, 0, []), path='')
    assert r.err == 'EINVAL', r
    r = s.call('LSTAT', cred=(0, 0, [0xffffffff]), path='')
    assert r.err == 'EINVAL', r
    assert s.call('LSTAT', cred=NOBODY, path='').status == 0
    s.send_raw(wire.encode_request('LSTAT', 77, cred=(1, 1, [1] * 65),
                                   path=''))
    assert s.closed_by_peer(), 'a credential of 65 groups was taken'
    s.refused = True


def test_handles_act_as_their_opener(server, tree):
    """WRITE carries no caller (the kernel sends writes without one):
    it runs as whoever opened the handle, whose lack of CAP_FSETID makes
    the kernel clear a set-user-ID bit, as a local write would."""
    root, _ = tree
    with open(P(root, 'pub', 'suid'), 'wb') as f:
        f.write(b'#!/bin/sh\n')
    os.chmod(P(root, 'pub', 'suid'), 0o4777)
    s = server(root)
    assert s.call('OPEN', cred=NOBODY, handle=1, path='pub/suid',
                  opflags=wire.O_WRONLY).status == 0
    assert s.call('WRITE', handle=1, offset=0, data=b'#!/bin/bash\n').status == 0
    assert s.call('FLUSH', handle=1, opflags=0).status == 0
    assert s.call('CLOSE', handle=1).status == 0
    mode = stat.S_IMODE(os.stat(P(root, 'pub', 'suid')).st_mode)
    assert not mode & stat.S_ISUID, \
        'a write by nobody left root\'s file set-user-ID (%o)' % mode


def test_capabilities_are_dropped(server, tree):
    """setfsuid drops the file system capabilities only: CAP_SYS_ADMIN
    (trusted.*) and CAP_SETFCAP (security.capability) must go too."""
    root, _ = tree
    s = server(root)
    for name in ('trusted.qftfs', 'security.capability'):
        r = s.call('SETXATTR', cred=NOBODY, path='pub/mine', xname=name,
                   opflags=0, data=b'\x01\x00\x00\x02' + b'\0' * 16)
        assert r.err == 'EPERM', 'nobody set %s: %r' % (name, r)
    # Root (a caller mapped to uid 0) keeps them.
    r = s.call('SETXATTR', cred=(0, 0, []), path='pub/mine',
               xname='trusted.qftfs', opflags=0, data=b'x')
    assert r.status == 0, r


def test_finding2_create_never_opens_what_the_caller_may_not(server, tree):
    """CREATE without O_EXCL of a name that exists (a negative dentry gone
    stale): opened as the caller, who may not open root's 0600 file, and
    never given to them."""
    root, _ = tree
    with open(P(root, 'pub', 'late'), 'wb') as f:
        f.write(b'just created by root')
    os.chmod(P(root, 'pub', 'late'), 0o600)
    s = server(root)
    for flags in (wire.O_RDWR, wire.O_RDONLY, wire.O_WRONLY | wire.O_TRUNC):
        r = s.call('CREATE', cred=NOBODY, handle=1, path='pub', name='late',
                   opflags=flags, mode=0o644)
        assert r.err == 'EACCES', 'CREATE %#x of root\'s file: %r' % (flags, r)
    with open(P(root, 'pub', 'late'), 'rb') as f:
        assert f.read() == b'just created by root'
    assert owner(P(root, 'pub', 'late')) == (0, 0)
    # Its own existing file it opens, as open(O_CREAT) would.
    r = s.call('CREATE', cred=NOBODY, handle=2, path='pub', name='mine',
               opflags=wire.O_RDWR, mode=0o600)
    assert r.status == 0 and r['attr'].size == 4, r
    assert s.call('CLOSE', handle=2).status == 0
    # O_EXCL still means it.
    r = s.call('CREATE', cred=NOBODY, handle=3, path='pub', name='mine',
               opflags=wire.O_RDWR | wire.O_EXCL, mode=0o600)
    assert r.err == 'EEXIST', r


def _fifo_unopened(path):
    """True if nobody holds the FIFO open for reading."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        return e.errno == errno.ENXIO
    os.close(fd)
    return False


def test_finding3_devices_and_fifos_are_never_opened(server, tree):
    root, _ = tree
    os.mknod(P(root, 'zero'), 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    os.mkfifo(P(root, 'fifo'), 0o666)
    for cred in (None, NOBODY):
        s = server(root, features=wire.FEAT_CRED if cred else 0)
        for name in ('zero', 'fifo'):
            for flags in (wire.O_RDONLY, wire.O_RDWR):
                r = s.call('OPEN', cred=cred, handle=1, path=name,
                           opflags=flags, length=16)
                assert r.err == 'ENXIO', 'OPEN %s: %r' % (name, r)
            # CREATE of the existing name, without O_EXCL, as an OPEN.
            r = s.call('CREATE', cred=cred, handle=1, path='', name=name,
                       opflags=wire.O_RDWR, mode=0o644)
            assert r.err in ('ENXIO', 'EACCES'), 'CREATE %s: %r' % (name, r)
        assert s.call('READ', handle=1, offset=0, length=16).err == 'EBADF'
        assert _fifo_unopened(P(root, 'fifo'))
        # No device nodes, not even for root (the forced-command case).
        for typ in (wire.S_IFCHR, wire.S_IFBLK):
            r = s.call('MKNOD', cred=cred if cred else None, path='pub',
                       name='dev', mode=typ | 0o666, rdev=os.makedev(7, 0))
            assert r.err == 'EPERM', r
            assert not os.path.lexists(P(root, 'pub', 'dev'))
        # FIFOs and sockets are fine.
        r = s.call('MKNOD', cred=cred, path='pub', name='p%d' % bool(cred),
                   mode=wire.S_IFIFO | 0o644)
        assert r.status == 0, r


def test_finding3_devices_only_where_allowed(server, tree):
    root, _ = tree
    s = server(root, features=0, args=('--allow-devices',))
    r = s.call('MKNOD', path='pub', name='null', mode=wire.S_IFCHR | 0o666,
               rdev=os.makedev(1, 3))
    assert r.status == 0, r
    assert stat.S_ISCHR(os.lstat(P(root, 'pub', 'null')).st_mode)
    # Made, but never opened for data.
    r = s.call('OPEN', handle=1, path='pub/null', opflags=wire.O_RDWR)
    assert r.err == 'ENXIO', r
    # Allowed for the server; a caller still needs CAP_MKNOD.
    s = server(root, args=('--allow-devices',))
    r = s.call('MKNOD', cred=NOBODY, path='pub', name='n2',
               mode=wire.S_IFCHR | 0o666, rdev=os.makedev(1, 3))
    assert r.err == 'EPERM', r


def test_finding3_set_id_bits_as_on_a_local_disk(server, tree):
    root, _ = tree
    with open(P(root, 'pub', 'rootsuid'), 'wb') as f:
        f.write(b'x')
    os.chmod(P(root, 'pub', 'rootsuid'), 0o4777)
    with open(P(root, 'pub', 'rootfile'), 'wb') as f:
        f.write(b'x')
    os.chmod(P(root, 'pub', 'rootfile'), 0o666)
    s = server(root)
    # Set-id bits on what the caller does not own: never.
    for name in ('rootfile', 'secret'):
        path = 'pub/' + name if name != 'secret' else name
        r = s.call('SETATTR', cred=NOBODY, handle=0, path=path,
                   valid=wire.SET_MODE, mode=0o4777)
        assert r.err == 'EPERM', 'chmod u+s of %s: %r' % (path, r)
    assert stat.S_IMODE(os.stat(P(root, 'pub', 'rootfile')).st_mode) == 0o666
    # A file made set-user-ID by nobody is nobody's.
    r = s.call('CREATE', cred=NOBODY, handle=1, path='pub', name='s',
               opflags=wire.O_WRONLY | wire.O_EXCL, mode=0o4755)
    assert r.status == 0
    assert s.call('CLOSE', handle=1).status == 0
    st = os.lstat(P(root, 'pub', 's'))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (65534, 0o4755)
    # Set-group-ID to a group the caller is not in: the kernel drops it.
    r = s.call('CREATE', cred=NOBODY, handle=2, path='sgid', name='g',
               opflags=wire.O_WRONLY | wire.O_EXCL, mode=0o2755)
    assert r.status == 0
    assert s.call('CLOSE', handle=2).status == 0
    st = os.lstat(P(root, 'sgid', 'g'))
    assert st.st_gid == GROUP and not st.st_mode & stat.S_ISGID, oct(st.st_mode)
    # Giving a file away: not for nobody.
    r = s.call('SETATTR', cred=NOBODY, handle=0, path='pub/s',
               valid=wire.SET_UID, uid=0)
    assert r.err == 'EPERM', r
    # Clearing the set-user-ID bit of a file one may write (what the
    # kernel does before a write or truncate by a non-owner, sent by FUSE
    # as a chmod) is allowed; changing anything else, or setting, is not.
    r = s.call('SETATTR', cred=NOBODY, handle=0, path='pub/rootsuid',
               valid=wire.SET_MODE, mode=0o6777)
    assert r.err == 'EPERM', r
    r = s.call('SETATTR', cred=NOBODY, handle=0, path='pub/rootsuid',
               valid=wire.SET_MODE, mode=0o0776)
    assert r.err == 'EPERM', r
    r = s.call('SETATTR', cred=NOBODY, handle=0, path='pub/rootsuid',
               valid=wire.SET_MODE | wire.SET_SIZE, mode=0o0777, size=0)
    assert r.status == 0, r
    st = os.lstat(P(root, 'pub', 'rootsuid'))
    assert (st.st_uid, stat.S_IMODE(st.st_mode), st.st_size) == (0, 0o777, 0)
    # Not for a file one may not write.
    os.chmod(P(root, 'pub', 'rootsuid'), 0o4755)
    r = s.call('SETATTR', cred=NOBODY, handle=0, path='pub/rootsuid',
               valid=wire.SET_MODE, mode=0o0755)
    assert r.err == 'EPERM', r
    assert stat.S_IMODE(os.stat(P(root, 'pub', 'rootsuid')).st_mode) == 0o4755


def test_finding1_follow_mode_opens_as_the_caller(server, tree):
    """--follow-symlinks: a symlink nobody planted toward root's file
    outside the root is followed, but opened as nobody."""
    root, outside = tree
    os.symlink(P(outside, 'secret'), P(root, 'pub', 'S'))
    os.lchown(P(root, 'pub', 'S'), 65534, 65534)
    s = server(root, args=('--follow-symlinks',),
               features=wire.FEAT_CRED | wire.FEAT_FOLLOW)
    for flags in (wire.O_RDONLY, wire.O_WRONLY, wire.O_RDWR | wire.O_TRUNC):
        r = s.call('OPEN', cred=NOBODY, handle=1, path='pub/S', opflags=flags,
                   length=100)
        assert r.err == 'EACCES', 'OPEN %#x through the link: %r' % (flags, r)
        r = s.call('CREATE', cred=NOBODY, handle=1, path='pub', name='S',
                   opflags=flags, mode=0o644)
        assert r.err == 'EACCES', 'CREATE %#x through the link: %r' % (flags, r)
    with open(P(outside, 'secret'), 'rb') as f:
        assert f.read() == b'outside secret'


def test_finding7_owner_changes_never_reach_a_link_target(server, tree):
    root, outside = tree
    os.symlink(P(outside, 'secret'), P(root, 'pub', 'S'))
    os.lchown(P(root, 'pub', 'S'), 65534, 65534)
    for follow in (False, True):
        args = ('--follow-symlinks',) if follow else ()
        feats = wire.FEAT_CRED | (wire.FEAT_FOLLOW if follow else 0)
        s = server(root, args=args, features=feats)
        r = s.call('SETATTR', cred=NOBODY, handle=0, path='pub/S',
                   valid=wire.SET_UID | wire.SET_GID, uid=65534, gid=65534)
        if follow:
            assert r.err == 'EPERM', r
        else:
            # The link's own owner, which nobody already is.
            assert r.status == 0, r
        assert owner(P(outside, 'secret')) == (0, 0)


def test_finding8_symlinks_on_the_way_refused_by_both_resolvers(server, tree):
    """openat2 (RESOLVE_BENEATH) used to follow a symlink on the way that
    stays inside the root, the walk refused it: one rule now, refusing,
    with one errno.  No caller needed: the rule is the resolvers'."""
    root, _ = tree
    os.symlink('pub', P(root, 'inner'))
    for resolve in ('auto', 'walk'):
        s = server(root, features=0, env={'QFTFS_SERVER_RESOLVE': resolve})
        # On the way: ELOOP from either.
        r = s.call('OPEN', handle=1, path='inner/mine', opflags=wire.O_RDONLY)
        assert r.err == 'ELOOP', '%s: %r' % (resolve, r)
        r = s.call('OPENDIR', handle=2, path='inner')
        assert r.err == 'ENOTDIR', '%s: %r' % (resolve, r)
        # As the directory of an entry: what O_DIRECTORY says of a link.
        r = s.call('LSTAT', path='inner/mine')
        assert r.err == 'ENOTDIR', '%s: %r' % (resolve, r)
        r = s.call('CREATE', handle=1, path='inner', name='n',
                   opflags=wire.O_WRONLY, mode=0o644)
        assert r.err == 'ENOTDIR', '%s: %r' % (resolve, r)
        assert s.call('LSTAT', path='pub/mine').status == 0
    assert os.listdir(P(root, 'pub')) == ['mine']
