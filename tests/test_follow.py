# SPDX-License-Identifier: MIT
"""-o follow_symlinks (sshfs's option): the server follows symlinks.

1. At the wire, against `qftfs-server --stdio --follow-symlinks`: LSTAT,
   READDIR (PLUS and plain) and SCAN show a symlink as what it leads to,
   os.stat's attributes and inode number included, through relative and
   absolute targets (an absolute one is the server's /); a dangling link
   and a loop stay symlinks; SCAN announces a directory reached through a
   link and ends it at once with EXDEV, so no scan follows a loop;
   SETATTR, CREATE, LINK and xattrs act on what a link leads to, UNLINK,
   RENAME and READLINK on the link itself.  The same server without the
   option still refuses to leave its root.
2. Through real mounts (local mode): ls -l, stat, reading and writing,
   chmod, truncate, utimes, a file created in a linked directory, rename,
   unlink and ln of links, a link made through the mount; find, du and
   cp -r over a tree with a loop back to an ancestor end (the real inode
   numbers let them see the loop) and rsync -a copies what the links lead
   to; the default mode still shows links as links.
3. A server that does not know --follow-symlinks fails the mount with a
   message that says what to do, instead of mounting without following.
4. One mount through the loopback sshd (tests/sshd.py), where an absolute
   target is resolved on the server's side.

FUSE, root and sshd are needed where used; a missing one skips loudly.
"""

import errno
import os
import shutil
import stat
import struct
import time

import pytest

import util
import wire
from test_scan import scan_path

P = os.path.join

# The server is told with its command line; wire.Server has none, so a
# shell appends the option to the words it is given.
FOLLOW = ('sh', '-c', 'exec "$@" --follow-symlinks', 'sh')


@pytest.fixture
def start(wire_server):
    """start(root, follow=True) -> wire.Server after HELLO (conftest.py's
    wire_server: every server must exit cleanly and log no crash)."""
    def make(root, follow=True):
        return wire_server(root, wrapper=FOLLOW if follow else ())
    return make


def make_tree(tmp_path, loop_dir=False):
    """root/ with real/f, real/sub/g and links to them; outside/ next to
    it, reached by an absolute link.  With loop_dir, real/up -> .. (a
    directory loop through a link)."""
    root = tmp_path / 'root'
    outside = tmp_path / 'outside'
    (root / 'real' / 'sub').mkdir(parents=True)
    (root / 'real' / 'f').write_bytes(b'hello\n')
    (root / 'real' / 'sub' / 'g').write_bytes(b'g' * 5000)
    outside.mkdir()
    (outside / 'o').write_bytes(b'outside\n')
    os.symlink('real/f', root / 'lf')
    os.symlink('real', root / 'ld')
    os.symlink('nowhere', root / 'dangle')
    os.symlink('loop', root / 'loop')
    os.symlink(str(outside), root / 'abs')
    os.symlink('../f', root / 'real' / 'sub' / 'lf2')
    if loop_dir:
        os.symlink('..', root / 'real' / 'up')
    return str(root), str(outside)


def same(a, st, what):
    """Wire attributes `a` are os.stat's `st` (what a link leads to)."""
    assert (a.ino, a.mode, a.size, a.nlink) == \
        (st.st_ino, st.st_mode, st.st_size, st.st_nlink), what


def readdir_plus(srv, path, handle=7):
    """name -> (type, Attr or None) of one READDIR PLUS."""
    assert srv.call('OPENDIR', handle=handle, path=path).status == 0
    r = srv.call('READDIR', handle=handle, offset=0, length=256 * 1024,
                 opflags=0x1)
    assert r.status == 0, r
    out, data, pos = {}, r['data'], 0
    while pos < len(data):
        _, _, typ = struct.unpack_from('>QQI', data, pos)
        pos += 20
        name, pos = wire.Reply._str(data, pos)
        a = None
        if data[pos]:
            a = wire.Attr(data[pos + 1:pos + 1 + wire.Attr.SIZE])
            pos += wire.Attr.SIZE
        pos += 1
        out[name.decode()] = (typ, a)
    assert srv.call('CLOSE', handle=handle).status == 0
    return out


def readdir_types(srv, path, handle=8):
    assert srv.call('OPENDIR', handle=handle, path=path).status == 0
    r = srv.call('READDIR', handle=handle, offset=0, length=256 * 1024,
                 opflags=0)
    assert r.status == 0, r
    ents = {n.decode(): t for n, t, _ in wire.parse_dirents(r['data'])}
    assert srv.call('CLOSE', handle=handle).status == 0
    return ents


# ---------------------------------------------------------------------------
# 1. The server


def test_wire_attributes_follow(start, tmp_path):
    root, outside = make_tree(tmp_path)
    srv = start(root)
    f = os.stat(P(root, 'real', 'f'))
    d = os.stat(P(root, 'real'))
    o = os.stat(outside)
    for path, st in (('lf', f), ('ld', d), ('abs', o), ('ld/f', f),
                     ('real/sub/lf2', f), ('ld/sub/lf2', f),
                     ('abs/o', os.stat(P(outside, 'o')))):
        r = srv.call('LSTAT', path=path)
        assert r.status == 0, (path, r)
        same(r['attr'], st, path)
    for path in ('dangle', 'loop'):
        r = srv.call('LSTAT', path=path)
        assert r.status == 0, (path, r)
        assert stat.S_ISLNK(r['attr'].mode), path
        assert r['attr'].ino == os.lstat(P(root, path)).st_ino
        assert srv.call('READLINK', path=path)['target'] == \
            os.readlink(P(root, path)).encode()
    # Through a dangling link or a loop, resolving fails as it would here.
    assert srv.call('LSTAT', path='loop/x').err == 'ELOOP'
    assert srv.call('OPEN', handle=3, path='loop', opflags=0,
                    length=0).err == 'ELOOP'
    assert srv.call('OPEN', handle=3, path='dangle', opflags=0,
                    length=0).err == 'ENOENT'
    # Reading through an absolute link: the server's own /.
    r = srv.call('OPEN', handle=3, path='abs/o', opflags=0, length=100)
    assert r.status == 0 and r['data'] == b'outside\n', r
    assert srv.call('CLOSE', handle=3).status == 0

    plus = readdir_plus(srv, '')
    for name, st in (('lf', f), ('ld', d), ('abs', o)):
        typ, a = plus[name]
        assert typ == stat.S_IFMT(st.st_mode), name
        same(a, st, 'READDIR PLUS ' + name)
    for name in ('dangle', 'loop'):
        typ, a = plus[name]
        assert typ == stat.S_IFLNK and stat.S_ISLNK(a.mode), name
    types = readdir_types(srv, '')
    assert types['lf'] == stat.S_IFREG and types['ld'] == stat.S_IFDIR
    assert types['abs'] == stat.S_IFDIR
    assert types['dangle'] == types['loop'] == stat.S_IFLNK
    # A directory listed through a link is the directory.
    assert set(readdir_types(srv, 'ld')) >= {'f', 'sub'}


def test_wire_scan_announces_linked_directories_but_never_lists_them(
        start, tmp_path):
    root, outside = make_tree(tmp_path, loop_dir=True)
    srv = start(root)
    s = scan_path(srv, '')
    assert s.flags & wire.SCAN_EOF and not s.flags & 0x2, s.flags
    f = os.stat(P(root, 'real', 'f'))
    same(s.entries['lf'], f, 'SCAN lf')
    same(s.entries['real/sub/lf2'], f, 'SCAN real/sub/lf2')
    same(s.entries['ld'], os.stat(P(root, 'real')), 'SCAN ld')
    same(s.entries['real/up'], os.stat(root), 'SCAN real/up')
    assert stat.S_ISLNK(s.entries['dangle'].mode)
    assert stat.S_ISLNK(s.entries['loop'].mode)
    # Real directories listed in full; linked ones announced and ended
    # with EXDEV, nothing below them sent (no loop through real/up).
    assert s.end_of('') == s.end_of('real') == s.end_of('real/sub') == 'OK'
    for p in ('ld', 'abs', 'real/up'):
        assert s.end_of(p) == 'EXDEV', p
    assert not [p for p in s.entries
                if p.startswith(('ld/', 'abs/', 'real/up/'))]
    assert set(s.entries) == {'real', 'real/f', 'real/sub', 'real/sub/g',
                              'real/sub/lf2', 'real/up', 'lf', 'ld',
                              'dangle', 'loop', 'abs'}


def test_wire_entry_operations(start, tmp_path):
    root, _ = make_tree(tmp_path)
    target = P(root, 'real', 'f')
    srv = start(root)
    # SETATTR by path: the target's mode, size and times; the link keeps.
    r = srv.call('SETATTR', handle=0, path='lf', valid=0x1 | 0x8 | 0x20,
                 mode=0o600, uid=0, gid=0, size=3, atime=(0, 0),
                 mtime=(1000000000, 0))
    assert r.status == 0, r
    st = os.stat(target)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 3
    assert st.st_mtime == 1000000000
    same(r['attr'], st, 'SETATTR reply')
    assert os.path.islink(P(root, 'lf'))
    # CREATE of an existing link's name (no O_EXCL) opens the target.
    r = srv.call('CREATE', handle=4, path='', name='lf', opflags=0x1,
                 mode=0o644)
    assert r.status == 0 and r['attr'].ino == st.st_ino, r
    assert srv.call('CLOSE', handle=4).status == 0
    # ... with O_EXCL it is EEXIST, as locally.
    assert srv.call('CREATE', handle=4, path='', name='lf',
                    opflags=0x1 | 0x20, mode=0o644).err == 'EEXIST'
    # LINK of a link links what it leads to (ln -L).
    r = srv.call('LINK', path='lf', path2='ld', name2='hard')
    assert r.status == 0, r
    assert os.lstat(P(root, 'real', 'hard')).st_ino == st.st_ino
    assert os.stat(target).st_nlink == 2
    # xattrs: of the target; of a dangling link, of the link itself.
    if os.geteuid() == 0 or os.access(target, os.W_OK):
        r = srv.call('SETXATTR', path='lf', xname='user.qftfs', opflags=0,
                     data=b'v')
        if r.err != 'EOPNOTSUPP':
            assert r.status == 0, r
            assert os.getxattr(target, 'user.qftfs') == b'v'
    r = srv.call('GETXATTR', path='dangle', xname='user.qftfs', length=64)
    assert r.err in ('ENODATA', 'EOPNOTSUPP', 'EPERM'), r
    # UNLINK and RENAME act on the link itself.
    assert srv.call('RENAME', path='', name='lf', path2='', name2='lf3',
                    opflags=0).status == 0
    assert os.readlink(P(root, 'lf3')) == 'real/f'
    assert srv.call('UNLINK', path='', name='lf3').status == 0
    assert not os.path.lexists(P(root, 'lf3')) and os.path.exists(target)
    assert srv.call('RMDIR', path='', name='ld').err == 'ENOTDIR'
    assert os.path.isdir(P(root, 'real'))


def test_wire_default_mode_still_confined(start, tmp_path):
    root, _ = make_tree(tmp_path)
    srv = start(root, follow=False)
    for path in ('lf', 'ld', 'abs', 'dangle'):
        r = srv.call('LSTAT', path=path)
        assert r.status == 0 and stat.S_ISLNK(r['attr'].mode), path
    assert srv.call('LSTAT', path='abs/o').err in ('EXDEV', 'ELOOP',
                                                    'ENOTDIR')
    assert srv.call('OPEN', handle=3, path='lf', opflags=0,
                    length=0).err == 'ELOOP'
    assert readdir_types(srv, '')['abs'] == stat.S_IFLNK
    s = scan_path(srv, '')
    assert stat.S_ISLNK(s.entries['ld'].mode)
    assert sorted(s.paths.values()) == ['', 'real', 'real/sub']


# ---------------------------------------------------------------------------
# 2. Mounts


def test_mount_shows_and_uses_what_links_lead_to(mounter, tmp_path):
    root, outside = make_tree(tmp_path)
    m = mounter(src=root, opts=['follow_symlinks'])
    mnt = m.mnt
    f = os.stat(P(root, 'real', 'f'))

    names = sorted(os.listdir(mnt))
    assert names == ['abs', 'dangle', 'ld', 'lf', 'loop', 'real'], names
    lf = os.lstat(P(mnt, 'lf'))
    assert stat.S_ISREG(lf.st_mode) and lf.st_size == f.st_size
    assert lf.st_ino == os.stat(P(mnt, 'real', 'f')).st_ino
    assert stat.S_ISDIR(os.lstat(P(mnt, 'ld')).st_mode)
    assert os.lstat(P(mnt, 'ld')).st_ino == \
        os.lstat(P(mnt, 'real')).st_ino
    assert sorted(os.listdir(P(mnt, 'ld'))) == ['f', 'sub']
    assert sorted(os.listdir(P(mnt, 'abs'))) == ['o']
    assert open(P(mnt, 'abs', 'o'), 'rb').read() == b'outside\n'
    assert stat.S_ISREG(os.lstat(P(mnt, 'ld', 'sub', 'lf2')).st_mode)
    # ls -l: one line per entry, no error for the dangling link or loop.
    r = util.run(['ls', '-l', mnt], timeout=30)
    assert r.returncode == 0 and not r.stderr, r.stderr
    kinds = {ln.split()[-1] if '->' not in ln else ln.split()[-3]:
             ln[0] for ln in r.stdout.splitlines()[1:]}
    assert kinds == {'abs': 'd', 'dangle': 'l', 'ld': 'd', 'lf': '-',
                     'loop': 'l', 'real': 'd'}, r.stdout
    # Dangling link and loop: visible as links, failing as locally.
    assert os.readlink(P(mnt, 'dangle')) == 'nowhere'
    with pytest.raises(FileNotFoundError):
        open(P(mnt, 'dangle'))
    with pytest.raises(OSError) as e:
        open(P(mnt, 'loop'))
    assert e.value.errno == errno.ELOOP

    # Writes, chmod, truncate, utimes through the link reach the target.
    with open(P(mnt, 'lf'), 'ab') as w:
        w.write(b'more\n')
    assert open(P(root, 'real', 'f'), 'rb').read() == b'hello\nmore\n'
    os.chmod(P(mnt, 'lf'), 0o640)
    assert stat.S_IMODE(os.stat(P(root, 'real', 'f')).st_mode) == 0o640
    assert os.path.islink(P(root, 'lf'))
    os.truncate(P(mnt, 'lf'), 2)
    os.utime(P(mnt, 'lf'), ns=(10**18, 10**18))
    st = os.stat(P(root, 'real', 'f'))
    assert st.st_size == 2 and st.st_mtime_ns == 10**18
    assert os.stat(P(mnt, 'lf')).st_size == 2
    # A file made in a linked directory is in the real one.
    with open(P(mnt, 'ld', 'new'), 'wb') as w:
        w.write(b'new')
    assert open(P(root, 'real', 'new'), 'rb').read() == b'new'
    assert 'new' in os.listdir(P(mnt, 'real'))

    # rename and unlink act on the link; ln links what it leads to.
    os.rename(P(mnt, 'lf'), P(mnt, 'lf2'))
    assert os.readlink(P(root, 'lf2')) == 'real/f'
    os.link(P(mnt, 'lf2'), P(mnt, 'hard'))
    assert os.lstat(P(root, 'hard')).st_ino == st.st_ino
    assert os.stat(P(mnt, 'hard')).st_nlink == 2
    os.unlink(P(mnt, 'lf2'))
    assert not os.path.lexists(P(root, 'lf2'))
    assert os.path.isfile(P(root, 'real', 'f'))
    # A link made through the mount reads back as what it leads to.
    os.symlink('real', P(mnt, 'made'))
    assert os.readlink(P(root, 'made')) == 'real'
    assert stat.S_ISDIR(os.lstat(P(mnt, 'made')).st_mode)
    assert sorted(os.listdir(P(mnt, 'made'))) == ['f', 'new', 'sub']
    os.symlink('real/new', P(mnt, 'made2'))
    assert stat.S_ISREG(os.lstat(P(mnt, 'made2')).st_mode)
    assert 'made' in os.listdir(mnt)


def test_mount_sees_changes_to_targets_made_elsewhere(mounter, tmp_path):
    """A directory lease covers a link's name, not what it leads to (in
    another directory, or outside the root, where no watch looks): a
    change made on the server side shows through the link within the
    attribute timeout, as it does through the target's own name."""
    root, outside = make_tree(tmp_path)
    m = mounter(src=root, opts=['follow_symlinks', 'attr_timeout=1'])
    mnt = m.mnt
    util.run(['ls', '-lR', mnt], timeout=30)   # listings, leases
    assert os.stat(P(mnt, 'lf')).st_size == 6
    assert os.stat(P(mnt, 'abs', 'o')).st_size == 8
    with open(P(root, 'real', 'f'), 'ab') as w:
        w.write(b'appended\n')
    os.symlink(str(outside), P(outside, 'self'))
    with open(P(outside, 'o'), 'ab') as w:
        w.write(b'more\n')
    deadline = time.monotonic() + 15 * util.timeout_scale()
    while True:
        sizes = (os.stat(P(mnt, 'lf')).st_size,
                 os.stat(P(mnt, 'abs', 'o')).st_size)
        if sizes == (15, 13) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sizes == (15, 13), sizes
    assert open(P(mnt, 'lf'), 'rb').read() == b'hello\nappended\n'
    assert 'self' in os.listdir(P(mnt, 'abs'))
    # A dangling link whose target appears, and a link whose target
    # changes type, show the new object (no EIO from a stale inode type).
    assert stat.S_ISLNK(os.lstat(P(mnt, 'dangle')).st_mode)
    with open(P(root, 'nowhere'), 'wb') as w:
        w.write(b'now here')
    os.unlink(P(root, 'real', 'f'))
    os.mkdir(P(root, 'real', 'f'))
    deadline = time.monotonic() + 15 * util.timeout_scale()
    while True:
        kinds = (stat.S_IFMT(os.lstat(P(mnt, 'dangle')).st_mode),
                 stat.S_IFMT(os.lstat(P(mnt, 'lf')).st_mode))
        if kinds == (stat.S_IFREG, stat.S_IFDIR) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert kinds == (stat.S_IFREG, stat.S_IFDIR), kinds
    assert open(P(mnt, 'dangle'), 'rb').read() == b'now here'
    assert os.listdir(P(mnt, 'lf')) == []


@pytest.mark.deadline(240)
def test_mount_tree_tools_end_on_loops(mounter, tmp_path):
    """find, du and cp -r see a link back to an ancestor by its inode
    number and end; the copy holds what the links lead to."""
    root, outside = make_tree(tmp_path, loop_dir=True)
    m = mounter(src=root, opts=['follow_symlinks'])
    mnt = m.mnt
    r = util.run(['find', mnt], timeout=60)
    found = {os.path.relpath(p, mnt) for p in r.stdout.split()}
    assert {'ld/f', 'ld/sub/g', 'abs/o', 'real/sub/lf2', 'lf'} <= found, \
        r.stdout
    assert 'File system loop detected' in r.stderr and 'real/up' in \
        r.stderr, r.stderr
    assert not [p for p in found if '/up/' in p], r.stdout
    r = util.run(['du', '-s', mnt], timeout=60)
    assert r.stdout.split()[0].isdigit(), (r.stdout, r.stderr)
    dst = str(tmp_path / 'copy')
    r = util.run(['cp', '-r', mnt, dst], timeout=60)
    for p in ('lf', 'ld/f', 'ld/sub/g', 'abs/o', 'real/sub/lf2'):
        assert os.path.isfile(P(dst, p)) and not os.path.islink(P(dst, p)), \
            (p, r.stderr)
    assert open(P(dst, 'ld', 'sub', 'g'), 'rb').read() == b'g' * 5000
    assert os.path.islink(P(dst, 'dangle'))
    assert not os.path.exists(P(dst, 'real', 'up', 'real'))


def test_mount_rsync_copies_what_links_lead_to(mounter, tmp_path):
    if not shutil.which('rsync'):
        pytest.skip('SKIPPED: rsync is not installed')
    root, _ = make_tree(tmp_path)
    os.unlink(P(root, 'loop'))
    m = mounter(src=root, opts=['follow_symlinks'])
    dst = str(tmp_path / 'rs')
    r = util.run(['rsync', '-a', m.mnt + '/', dst + '/'], timeout=60)
    assert r.returncode == 0, r.stderr
    for p in ('lf', 'ld/f', 'abs/o'):
        assert os.path.isfile(P(dst, p)) and not os.path.islink(P(dst, p))
    assert os.readlink(P(dst, 'dangle')) == 'nowhere'


def test_mount_default_mode_unchanged(mounter, tmp_path):
    root, _ = make_tree(tmp_path)
    m = mounter(src=root)
    for n in ('lf', 'ld', 'abs', 'dangle', 'loop'):
        assert stat.S_ISLNK(os.lstat(P(m.mnt, n)).st_mode), n
        assert os.readlink(P(m.mnt, n)) == os.readlink(P(root, n))
    # Resolved by the kernel on this side, inside the mount.
    assert os.lstat(P(m.mnt, 'ld', 'f')).st_ino == \
        os.lstat(P(m.mnt, 'real', 'f')).st_ino


def mount_following_through(build, tmp_path, name, edit):
    """Mounts make_tree's root with -o follow_symlinks through a server
    wrapper whose shell loop runs `edit` for each argument `a` (it
    appends what the real server gets with `set -- "$@" ...`), and
    expects the mount to fail: returns util.run's result."""
    root, _ = make_tree(tmp_path)
    wrapper = tmp_path / name
    wrapper.write_text('#!/bin/sh\n'
                       'for a; do shift; %s; done\n'
                       'exec %s "$@"\n' % (edit, util.server_bin(build)))
    wrapper.chmod(0o755)
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    r = util.run([util.client_bin(build), '-o', 'follow_symlinks',
                  '-o', 'server=' + str(wrapper), root, str(mnt)], timeout=60)
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert not util.find_mount(str(mnt))
    return r


def test_old_server_fails_the_mount_with_a_reason(build, need_fuse,
                                                   tmp_path):
    """An older server's getopt refuses --follow-symlinks; emulated by
    renaming the option to one this server's getopt does not know."""
    r = mount_following_through(
        build, tmp_path, 'old-qftfs-server',
        '[ "$a" = --follow-symlinks ] && a=--follow-symlinkz; '
        'set -- "$@" "$a"')
    assert 'unrecognized option' in r.stderr, r.stderr
    assert 'follow_symlinks needs a qftfs-server that knows ' \
        '--follow-symlinks' in r.stderr, r.stderr


def test_server_started_without_follow_fails_the_mount(build, need_fuse,
                                                       tmp_path):
    """A server command that drops --follow-symlinks (a forced command
    does: whoever starts the server decides) must not leave the mount
    showing links as links without a word: the handshake says why."""
    r = mount_following_through(
        build, tmp_path, 'forced-qftfs-server',
        '[ "$a" = --follow-symlinks ] || set -- "$@" "$a"')
    assert 'the server does not follow symlinks' in r.stderr, r.stderr


# ---------------------------------------------------------------------------
# 4. Through ssh


@pytest.mark.parametrize('how', ['server', 'install'])
def test_ssh_mount_follows_on_the_server(mounter, tmp_path, how):
    """`server`: -o server=PATH (the remote command); `install`: no
    qftfs-server on the remote PATH, so the install script uploads and
    runs it (the option travels as its fourth argument)."""
    import sshd as sshd_mod
    why = sshd_mod.unavailable_reason()
    if why:
        pytest.skip('ssh test SKIPPED: ' + why)
    env = None
    if how == 'install':
        env = {'PATH': '/usr/bin:/bin',
               'XDG_CACHE_HOME': str(tmp_path / 'cache')}
    sshd = sshd_mod.Sshd(str(tmp_path / 'sshd'), env=env)
    try:
        sshd.start()
    except Exception as e:  # noqa: BLE001 - report why
        sshd.stop()
        pytest.fail('cannot start sshd: %s' % e, pytrace=False)
    try:
        root, outside = make_tree(tmp_path)
        home = sshd.client_home(str(tmp_path / 'home'))
        b = util.build_dir()
        m = mounter(src=sshd.source(root), mnt=str(tmp_path / 'mnt'),
                    build=b, opts=['follow_symlinks'],
                    server=None if how == 'server' else '',
                    env=sshd.client_env(home, None, b),
                    extra_args=['-p', str(sshd.port)])
        if how == 'install':
            assert 'installed qftfs-server' in m.log(), m.log()
        assert stat.S_ISREG(os.lstat(P(m.mnt, 'lf')).st_mode)
        assert sorted(os.listdir(P(m.mnt, 'abs'))) == ['o']
        assert open(P(m.mnt, 'abs', 'o'), 'rb').read() == b'outside\n'
        assert stat.S_ISLNK(os.lstat(P(m.mnt, 'dangle')).st_mode)
        r = util.run(['find', m.mnt], timeout=60)
        assert r.returncode == 0, r.stderr
        assert P(m.mnt, 'ld', 'sub', 'g') in r.stdout.split()
        problems = m.stop()
        assert not problems, '\n'.join(problems)
    finally:
        sshd.stop()
