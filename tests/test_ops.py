# SPDX-License-Identifier: MIT
"""Every filesystem operation through a real mount, checked against the
BACKING directory (what the server actually did), not only through the
mount (what the kernel may have cached).

Also: exact errno values, sizes around the 1 MiB message boundary and
1 GiB, sparse files, a 10,000-entry directory, non-ASCII names, and what
close() guarantees.
"""

import concurrent.futures
import errno
import os
import stat
import time

import pytest

import util
from util import MiB, GiB, expect_errno

P = os.path.join


def _write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _read(path):
    with open(path, 'rb') as f:
        return f.read()


# ---------------------------------------------------------------------------
# The mount itself

def test_mount_appears_as_fuse_qftfs(mount):
    src, mnt = mount
    m = util.find_mount(mnt)
    assert m['fstype'] == 'fuse.qftfs'
    assert m['source'] == src, 'fsname should be the SOURCE as given'
    assert os.path.ismount(mnt)
    st = os.stat(mnt)
    assert stat.S_ISDIR(st.st_mode)


# ---------------------------------------------------------------------------
# lookup / getattr

def test_getattr_matches_backing(mount, need_root):
    src, mnt = mount
    # The root of the mount is the served directory itself (checked first:
    # the kernel may cache the root's attributes for attr_timeout).
    assert not util.same_stat(os.stat(src), os.stat(mnt),
                              ('st_mode', 'st_uid', 'st_gid', 'st_nlink'))
    _write(P(src, 'f'), b'hello world', 0o640)
    os.chown(P(src, 'f'), 1234, 4321)
    os.utime(P(src, 'f'), ns=(1_600_000_000_111_111_111, 1_500_000_000_123_456_789))
    os.mkdir(P(src, 'd'), 0o751)
    os.mkdir(P(src, 'd', 'sub'))
    os.symlink('some/target', P(src, 'l'))
    os.link(P(src, 'f'), P(src, 'f2'))
    for name in ('f', 'd', 'd/sub', 'l', 'f2'):
        b = os.lstat(P(src, name))
        m = os.lstat(P(mnt, name))
        diff = util.same_stat(b, m)
        assert not diff, '%s: mount differs from backing: %r' % (name, diff)
    m = os.stat(P(mnt, 'f'))
    assert m.st_mtime_ns == 1_500_000_000_123_456_789
    assert (m.st_uid, m.st_gid, m.st_nlink, m.st_size) == (1234, 4321, 2, 11)
    assert stat.S_IMODE(m.st_mode) == 0o640
    assert m.st_blocks == os.stat(P(src, 'f')).st_blocks


def test_lookup_missing(mount):
    src, mnt = mount
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'nope'))
    expect_errno(errno.ENOENT, os.lstat, P(mnt, 'nope', 'deeper'))
    expect_errno(errno.ENOENT, os.open, P(mnt, 'nope'), os.O_RDONLY)


@pytest.mark.parametrize('mount', [{'opts': ['entry_timeout=0', 'attr_timeout=0',
                                             'negative_timeout=0']}],
                         indirect=True, ids=['timeouts0'])
def test_zero_timeouts_see_backing_changes(mount):
    """With entry/attr caching off, changes made on the server side show
    through at once (and the options are accepted)."""
    src, mnt = mount
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'late'))
    _write(P(src, 'late'), b'12345')
    assert os.stat(P(mnt, 'late')).st_size == 5
    with open(P(src, 'late'), 'ab') as f:
        f.write(b'678')
    assert os.stat(P(mnt, 'late')).st_size == 8
    os.unlink(P(src, 'late'))
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'late'))


# ---------------------------------------------------------------------------
# setattr

def test_chmod(mount):
    src, mnt = mount
    _write(P(mnt, 'f'), b'x')
    for mode in (0o600, 0o4750, 0o644, 0o000, 0o777):
        os.chmod(P(mnt, 'f'), mode)
        assert stat.S_IMODE(os.stat(P(src, 'f')).st_mode) == mode
        assert stat.S_IMODE(os.stat(P(mnt, 'f')).st_mode) == mode
    os.mkdir(P(mnt, 'd'))
    os.chmod(P(mnt, 'd'), 0o1777)
    assert stat.S_IMODE(os.stat(P(src, 'd')).st_mode) == 0o1777


def test_chown(mount, need_root):
    src, mnt = mount
    _write(P(mnt, 'f'), b'x')
    st = os.stat(P(src, 'f'))
    assert (st.st_uid, st.st_gid) == (0, 0), 'files created by root belong to root'
    os.chown(P(mnt, 'f'), 1234, 4321)
    st = os.stat(P(src, 'f'))
    assert (st.st_uid, st.st_gid) == (1234, 4321)
    os.chown(P(mnt, 'f'), -1, 999)
    st = os.stat(P(src, 'f'))
    assert (st.st_uid, st.st_gid) == (1234, 999)
    os.chown(P(mnt, 'f'), 65534, -1)
    st = os.stat(P(src, 'f'))
    assert (st.st_uid, st.st_gid) == (65534, 999)
    m = os.stat(P(mnt, 'f'))
    assert (m.st_uid, m.st_gid) == (65534, 999)
    os.symlink('t', P(mnt, 'l'))
    os.lchown(P(mnt, 'l'), 4242, 4243)
    st = os.lstat(P(src, 'l'))
    assert (st.st_uid, st.st_gid) == (4242, 4243), 'lchown must not follow'


def test_truncate(mount):
    src, mnt = mount
    _write(P(mnt, 'f'), b'abcdef')
    os.truncate(P(mnt, 'f'), 10000)
    assert os.stat(P(src, 'f')).st_size == 10000
    assert _read(P(src, 'f')) == b'abcdef' + bytes(9994)
    os.truncate(P(mnt, 'f'), 3)
    assert _read(P(src, 'f')) == b'abc'
    assert _read(P(mnt, 'f')) == b'abc'
    fd = os.open(P(mnt, 'f'), os.O_RDWR)
    try:
        os.ftruncate(fd, 2 * MiB + 7)
        assert os.fstat(fd).st_size == 2 * MiB + 7
        assert os.stat(P(src, 'f')).st_size == 2 * MiB + 7
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    assert os.stat(P(src, 'f')).st_size == 0
    _write(P(mnt, 'g'), b'0123456789')
    fd = os.open(P(mnt, 'g'), os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    assert os.stat(P(src, 'g')).st_size == 0


def test_utime_ns(mount):
    src, mnt = mount
    _write(P(mnt, 'f'), b'x')
    atime, mtime = 1_000_000_000_123_456_789, 1_100_000_000_987_654_321
    os.utime(P(mnt, 'f'), ns=(atime, mtime))
    st = os.stat(P(src, 'f'))
    assert st.st_mtime_ns == mtime
    assert st.st_atime_ns == atime
    assert os.stat(P(mnt, 'f')).st_mtime_ns == mtime
    # Times before the epoch are legal too.
    os.utime(P(mnt, 'f'), ns=(atime, -1_000_000_001))
    assert os.stat(P(src, 'f')).st_mtime_ns == -1_000_000_001
    before = time.time_ns()
    os.utime(P(mnt, 'f'))           # "now" (UTIME_NOW)
    st = os.stat(P(src, 'f'))
    assert before - 2_000_000_000 <= st.st_mtime_ns <= time.time_ns() + 2_000_000_000
    os.mkdir(P(mnt, 'd'))
    os.utime(P(mnt, 'd'), ns=(atime, mtime))
    assert os.stat(P(src, 'd')).st_mtime_ns == mtime
    os.symlink('t', P(mnt, 'l'))
    os.utime(P(mnt, 'l'), ns=(atime, mtime), follow_symlinks=False)
    assert os.lstat(P(src, 'l')).st_mtime_ns == mtime


# ---------------------------------------------------------------------------
# readdir

def test_readdir_and_dtype(mount):
    src, mnt = mount
    _write(P(src, 'file'), b'x')
    os.mkdir(P(src, 'dir'))
    os.symlink('file', P(src, 'link'))
    os.symlink('/nonexistent/dangling', P(src, 'dangling'))
    os.mkfifo(P(src, 'fifo'))
    names = {'file', 'dir', 'link', 'dangling', 'fifo'}
    assert set(os.listdir(mnt)) == names
    want = {'file': util.DT_REG, 'dir': util.DT_DIR, 'link': util.DT_LNK,
            'dangling': util.DT_LNK, 'fifo': util.DT_FIFO}
    got = {k: v for k, v in util.raw_dirents(mnt).items() if k not in ('.', '..')}
    assert got == want, 'd_type per name (8=REG 4=DIR 10=LNK 1=FIFO 0=UNKNOWN)'
    for e in os.scandir(mnt):
        assert e.is_dir(follow_symlinks=False) == (e.name == 'dir')
        assert e.is_file(follow_symlinks=False) == (e.name == 'file')
        assert e.is_symlink() == (e.name in ('link', 'dangling'))
        assert e.inode() != 0
    r = util.run(['ls', '-la', mnt], check=True)
    for n in names:
        assert n in r.stdout
    assert os.listdir(P(mnt, 'dir')) == []


def test_readdir_sees_new_entries(mount):
    src, mnt = mount
    assert os.listdir(mnt) == []
    _write(P(mnt, 'a'), b'')
    assert os.listdir(mnt) == ['a']
    _write(P(src, 'b'), b'')
    # Made behind the mount's back: seen within entry_timeout (1 s here;
    # the directory cache may answer until then), at once with a lease.
    deadline = time.monotonic() + 1.5
    while sorted(os.listdir(mnt)) != ['a', 'b'] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(os.listdir(mnt)) == ['a', 'b']
    os.unlink(P(mnt, 'a'))
    assert os.listdir(mnt) == ['b']


# ---------------------------------------------------------------------------
# mkdir / rmdir / create / read / write / unlink

def test_mkdir_rmdir(mount):
    src, mnt = mount
    os.mkdir(P(mnt, 'd'), 0o750)
    st = os.stat(P(src, 'd'))
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o750
    os.makedirs(P(mnt, 'd', 'a', 'b', 'c'))
    assert os.path.isdir(P(src, 'd', 'a', 'b', 'c'))
    assert os.stat(P(mnt, 'd')).st_nlink == os.stat(P(src, 'd')).st_nlink == 3
    os.rmdir(P(mnt, 'd', 'a', 'b', 'c'))
    assert not os.path.exists(P(src, 'd', 'a', 'b', 'c'))
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'd', 'a', 'b', 'c'))


def test_create_write_read(mount):
    src, mnt = mount
    fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        assert os.write(fd, b'hello ') == 6
        assert os.write(fd, b'world') == 5
        assert os.pwrite(fd, b'W', 6) == 1
        assert os.pread(fd, 100, 0) == b'hello World'
        assert os.fstat(fd).st_size == 11
    finally:
        os.close(fd)
    st = os.stat(P(src, 'f'))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert _read(P(src, 'f')) == b'hello World'
    _write(P(src, 'g'), b'from the server side')
    assert _read(P(mnt, 'g')) == b'from the server side'
    # Read-only and write-only opens of an existing file.
    with open(P(mnt, 'g'), 'rb') as f:
        f.seek(5)
        assert f.read(3) == b'the'
    fd = os.open(P(mnt, 'g'), os.O_WRONLY)
    os.pwrite(fd, b'FROM', 0)
    os.close(fd)
    assert _read(P(src, 'g')) == b'FROM the server side'


def test_append(mount):
    src, mnt = mount
    _write(P(src, 'f'), b'abc')
    fd = os.open(P(mnt, 'f'), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b'def')
        os.write(fd, b'ghi')
    finally:
        os.close(fd)
    assert _read(P(src, 'f')) == b'abcdefghi'


def test_flush_fsync(mount):
    src, mnt = mount
    fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b'x' * 100000)
        os.fsync(fd)
        assert os.stat(P(src, 'f')).st_size == 100000
        os.write(fd, b'y')
        os.fdatasync(fd)
        assert os.stat(P(src, 'f')).st_size == 100001
    finally:
        os.close(fd)
    # fsync of a directory and of a read-only handle must not fail.
    dfd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    fd = os.open(P(mnt, 'f'), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    util.run(['sync', '-f', P(mnt, 'f')], check=True)


def test_unlink(mount):
    src, mnt = mount
    _write(P(mnt, 'f'), b'x')
    os.unlink(P(mnt, 'f'))
    assert not os.path.lexists(P(src, 'f'))
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'f'))
    os.symlink('/etc/passwd', P(mnt, 'l'))
    os.unlink(P(mnt, 'l'))
    assert not os.path.lexists(P(src, 'l'))
    assert os.path.exists('/etc/passwd'), 'unlink of a symlink removed its target'


def test_unlinked_open_file_stays_usable(mount):
    """POSIX: an open file outlives its name (temp-file idiom)."""
    src, mnt = mount
    fd = os.open(P(mnt, 'tmp'), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.write(fd, b'before')
        os.unlink(P(mnt, 'tmp'))
        assert not os.path.lexists(P(src, 'tmp'))
        os.write(fd, b' after')
        assert os.pread(fd, 100, 0) == b'before after'
        assert os.fstat(fd).st_size == 12
    finally:
        os.close(fd)
    assert os.listdir(src) == []


# ---------------------------------------------------------------------------
# rename

def test_rename(mount):
    src, mnt = mount
    _write(P(mnt, 'a'), b'A')
    os.rename(P(mnt, 'a'), P(mnt, 'b'))
    assert not os.path.exists(P(src, 'a')) and _read(P(src, 'b')) == b'A'
    _write(P(mnt, 'c'), b'C')
    os.rename(P(mnt, 'c'), P(mnt, 'b'))          # replaces b
    assert os.listdir(src) == ['b'] and _read(P(src, 'b')) == b'C'
    os.makedirs(P(mnt, 'd1', 'inner'))
    _write(P(mnt, 'd1', 'inner', 'f'), b'F')
    os.mkdir(P(mnt, 'd2'))
    os.rename(P(mnt, 'd1'), P(mnt, 'd2', 'moved'))
    assert _read(P(src, 'd2', 'moved', 'inner', 'f')) == b'F'
    assert _read(P(mnt, 'd2', 'moved', 'inner', 'f')) == b'F'
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'd1'))
    # Renaming over an empty directory is allowed.
    os.mkdir(P(mnt, 'empty'))
    os.rename(P(mnt, 'd2'), P(mnt, 'empty'))
    assert _read(P(src, 'empty', 'moved', 'inner', 'f')) == b'F'
    # A file moved out of a directory and back.
    os.rename(P(mnt, 'b'), P(mnt, 'empty', 'moved', 'b'))
    os.rename(P(mnt, 'empty', 'moved', 'b'), P(mnt, 'b2'))
    assert _read(P(src, 'b2')) == b'C'


def test_rename_noreplace(mount):
    src, mnt = mount
    _write(P(mnt, 'a'), b'A')
    _write(P(mnt, 'b'), b'B')
    expect_errno(errno.EEXIST, util.renameat2, P(mnt, 'a'), P(mnt, 'b'),
                 util.RENAME_NOREPLACE)
    assert _read(P(src, 'a')) == b'A' and _read(P(src, 'b')) == b'B'
    util.renameat2(P(mnt, 'a'), P(mnt, 'c'), util.RENAME_NOREPLACE)
    assert sorted(os.listdir(src)) == ['b', 'c']
    # The target exists on the server but the client has never seen it.
    _write(P(src, 'hidden'), b'H')
    expect_errno(errno.EEXIST, util.renameat2, P(mnt, 'c'), P(mnt, 'hidden'),
                 util.RENAME_NOREPLACE)
    assert _read(P(src, 'hidden')) == b'H'


def test_rename_exchange(mount):
    src, mnt = mount
    _write(P(mnt, 'a'), b'A')
    os.mkdir(P(mnt, 'd'))
    _write(P(mnt, 'd', 'inside'), b'I')
    util.renameat2(P(mnt, 'a'), P(mnt, 'd'), util.RENAME_EXCHANGE)
    assert stat.S_ISDIR(os.stat(P(src, 'a')).st_mode)
    assert _read(P(src, 'd')) == b'A'
    assert _read(P(src, 'a', 'inside')) == b'I'
    assert _read(P(mnt, 'a', 'inside')) == b'I'
    assert _read(P(mnt, 'd')) == b'A'
    expect_errno(errno.ENOENT, util.renameat2, P(mnt, 'd'), P(mnt, 'nope'),
                 util.RENAME_EXCHANGE)


# ---------------------------------------------------------------------------
# symlink, readlink, link

def test_symlink_readlink(mount):
    src, mnt = mount
    for i, target in enumerate(('plain', '../up/and/away', '/absolute/path',
                                'ünï ✓', 'x' * 1000)):
        name = 'l%d' % i
        os.symlink(target, P(mnt, name))
        assert os.readlink(P(src, name)) == target
        assert os.readlink(P(mnt, name)) == target
        st = os.lstat(P(mnt, name))
        assert stat.S_ISLNK(st.st_mode)
        assert st.st_size == len(target.encode())
    os.symlink('l4', P(src, 'srv'))
    # Made behind the mount's back: seen once the server's notification
    # (or entry_timeout) ends what the directory cache knew.
    deadline = time.monotonic() + 1.5
    while not os.path.lexists(P(mnt, 'srv')) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.readlink(P(mnt, 'srv')) == 'l4'
    # Following a link inside the mount works (the kernel resolves it).
    _write(P(mnt, 'real'), b'R')
    os.symlink('real', P(mnt, 'torreal'))
    assert _read(P(mnt, 'torreal')) == b'R'
    expect_errno(errno.EINVAL, os.readlink, P(mnt, 'real'))


def test_hardlink(mount):
    src, mnt = mount
    _write(P(mnt, 'a'), b'shared')
    os.link(P(mnt, 'a'), P(mnt, 'b'))
    ma, mb = os.stat(P(mnt, 'a')), os.stat(P(mnt, 'b'))
    assert ma.st_ino == mb.st_ino
    assert ma.st_nlink == mb.st_nlink == 2
    sa, sb = os.stat(P(src, 'a')), os.stat(P(src, 'b'))
    assert sa.st_ino == sb.st_ino and sa.st_nlink == 2
    with open(P(mnt, 'b'), 'r+b') as f:
        f.write(b'SHARED')
    assert _read(P(src, 'a')) == b'SHARED'
    os.unlink(P(mnt, 'a'))
    assert os.stat(P(mnt, 'b')).st_nlink == 1
    assert os.stat(P(src, 'b')).st_nlink == 1
    # link() does not follow a symlink (the protocol's LINK links it).
    os.symlink('b', P(mnt, 'sl'))
    os.link(P(mnt, 'sl'), P(mnt, 'sl2'), follow_symlinks=False)
    assert stat.S_ISLNK(os.lstat(P(src, 'sl2')).st_mode)


@pytest.mark.parametrize('where', ['made_here', 'on_server'])
def test_rename_onto_own_hard_link(mount, where):
    """rename(2) of one link of an inode onto another does nothing: both
    names stay (POSIX), though the kernel sees two inodes and moves its
    dentry.  A directory made by the mount is listed from its lease,
    which must not lose the first name (found by the metadata storm)."""
    src, mnt = mount
    if where == 'made_here':
        os.mkdir(P(mnt, 'd'))
        _write(P(mnt, 'd', 'a'), b'one')
        os.link(P(mnt, 'd', 'a'), P(mnt, 'd', 'b'))
    else:
        os.mkdir(P(src, 'd'))
        _write(P(src, 'd', 'a'), b'one')
        os.link(P(src, 'd', 'a'), P(src, 'd', 'b'))
        assert sorted(os.listdir(P(mnt, 'd'))) == ['a', 'b']
    os.rename(P(mnt, 'd', 'a'), P(mnt, 'd', 'b'))
    assert sorted(os.listdir(P(src, 'd'))) == ['a', 'b']
    assert sorted(os.listdir(P(mnt, 'd'))) == ['a', 'b']
    assert os.stat(P(mnt, 'd', 'a')).st_nlink == 2
    assert _read(P(mnt, 'd', 'b')) == b'one'
    # Each name still works on its own.
    os.unlink(P(mnt, 'd', 'a'))
    assert os.listdir(P(src, 'd')) == ['b']
    assert os.listdir(P(mnt, 'd')) == ['b']
    assert os.stat(P(mnt, 'd', 'b')).st_nlink == 1


# ---------------------------------------------------------------------------
# statfs, fallocate, xattrs, mknod

def test_statfs(mount):
    src, mnt = mount
    b, m = os.statvfs(src), os.statvfs(mnt)
    assert m.f_namemax == b.f_namemax == 255
    total_b, total_m = b.f_blocks * b.f_frsize, m.f_blocks * m.f_frsize
    assert abs(total_b - total_m) <= total_b // 100, (total_b, total_m)
    avail_b, avail_m = b.f_bavail * b.f_frsize, m.f_bavail * m.f_frsize
    assert abs(avail_b - avail_m) <= total_b // 50 + 256 * MiB, (avail_b, avail_m)
    assert abs(b.f_files - m.f_files) <= b.f_files // 100 + 1
    assert m.f_bsize > 0 and m.f_frsize > 0


def test_fallocate(mount):
    src, mnt = mount
    fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        util.fallocate(fd, 0, 0, 4 * MiB)
        st = os.stat(P(src, 'f'))
        assert st.st_size == 4 * MiB
        assert st.st_blocks * 512 >= 4 * MiB, 'space was not allocated'
        util.fallocate(fd, util.FALLOC_FL_KEEP_SIZE, 4 * MiB, 4 * MiB)
        st = os.stat(P(src, 'f'))
        assert st.st_size == 4 * MiB and st.st_blocks * 512 >= 8 * MiB
        assert os.fstat(fd).st_size == 4 * MiB
        os.posix_fallocate(fd, 0, 6 * MiB)
        assert os.stat(P(src, 'f')).st_size == 6 * MiB
    finally:
        os.close(fd)


def test_fallocate_punch_hole(mount):
    src, mnt = mount
    fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b'\xab' * MiB)
        os.fsync(fd)
        util.fallocate(fd, util.FALLOC_FL_PUNCH_HOLE | util.FALLOC_FL_KEEP_SIZE,
                       256 * 1024, 512 * 1024)
        assert os.pread(fd, 512 * 1024, 256 * 1024) == bytes(512 * 1024)
        assert os.pread(fd, 16, 0) == b'\xab' * 16
    finally:
        os.close(fd)
    st = os.stat(P(src, 'f'))
    assert st.st_size == MiB
    assert st.st_blocks * 512 <= MiB - 512 * 1024 + 64 * 1024, \
        'backing file still has %d bytes allocated' % (st.st_blocks * 512)
    with open(P(src, 'f'), 'rb') as f:
        assert os.lseek(f.fileno(), 0, os.SEEK_HOLE) == 256 * 1024, \
            'no hole in the backing file where one was punched'
        data = os.pread(f.fileno(), 2 * MiB, 0)
    assert data == b'\xab' * (256 * 1024) + bytes(512 * 1024) + b'\xab' * (256 * 1024)
    with open(P(mnt, 'f'), 'rb') as f:
        assert f.read() == data


def _need_user_xattr(path):
    if not _has_user_xattr(path):
        pytest.skip('the backing filesystem has no user xattrs')


def test_xattr(mount):
    src, mnt = mount
    _need_user_xattr(src)
    _write(P(mnt, 'f'), b'x')
    os.setxattr(P(mnt, 'f'), 'user.qftfs', b'value\0with nul')
    assert os.getxattr(P(src, 'f'), 'user.qftfs') == b'value\0with nul'
    assert os.getxattr(P(mnt, 'f'), 'user.qftfs') == b'value\0with nul'
    big = bytes(range(256)) * 12
    os.setxattr(P(mnt, 'f'), 'user.big', big)
    assert os.getxattr(P(src, 'f'), 'user.big') == big
    assert os.getxattr(P(mnt, 'f'), 'user.big') == big
    os.setxattr(P(mnt, 'f'), 'user.empty', b'')
    assert os.getxattr(P(mnt, 'f'), 'user.empty') == b''
    assert sorted(os.listxattr(P(mnt, 'f'))) == ['user.big', 'user.empty', 'user.qftfs']
    # Replace, and the flags.
    os.setxattr(P(mnt, 'f'), 'user.qftfs', b'v2')
    assert os.getxattr(P(src, 'f'), 'user.qftfs') == b'v2'
    expect_errno(errno.EEXIST, os.setxattr, P(mnt, 'f'), 'user.qftfs', b'v3',
                 os.XATTR_CREATE)
    expect_errno(errno.ENODATA, os.setxattr, P(mnt, 'f'), 'user.new', b'v',
                 os.XATTR_REPLACE)
    os.setxattr(P(mnt, 'f'), 'user.new', b'v', os.XATTR_CREATE)
    os.removexattr(P(mnt, 'f'), 'user.new')
    assert 'user.new' not in os.listxattr(P(src, 'f'))
    os.removexattr(P(mnt, 'f'), 'user.qftfs')
    expect_errno(errno.ENODATA, os.getxattr, P(src, 'f'), 'user.qftfs')
    expect_errno(errno.ENODATA, os.getxattr, P(mnt, 'f'), 'user.qftfs')
    # Set on the server side, read through the mount; on a directory.
    os.mkdir(P(src, 'd'))
    os.setxattr(P(src, 'd'), 'user.dir', b'D')
    assert os.getxattr(P(mnt, 'd'), 'user.dir') == b'D'
    assert os.listxattr(P(mnt, 'd')) == ['user.dir']
    # Size queries (buffer size 0) return the length.
    assert util.getxattr_raw(P(mnt, 'f'), 'user.big', 0) == len(big)
    assert util.listxattr_raw(P(mnt, 'f'), 0) == len(b'user.big\0user.empty\0')


def test_xattr_errors(mount):
    src, mnt = mount
    _need_user_xattr(src)
    _write(P(mnt, 'f'), b'x')
    expect_errno(errno.ENODATA, os.getxattr, P(mnt, 'f'), 'user.missing')
    expect_errno(errno.ENODATA, os.removexattr, P(mnt, 'f'), 'user.missing')
    os.setxattr(P(mnt, 'f'), 'user.ten', b'0123456789')
    expect_errno(errno.ERANGE, util.getxattr_raw, P(mnt, 'f'), 'user.ten', 4)
    assert util.getxattr_raw(P(mnt, 'f'), 'user.ten', 10) == b'0123456789'
    expect_errno(errno.ERANGE, util.listxattr_raw, P(mnt, 'f'), 3)
    expect_errno(errno.ENOENT, os.getxattr, P(mnt, 'missing'), 'user.ten')


def test_mkfifo(mount):
    src, mnt = mount
    os.mkfifo(P(mnt, 'fifo'), 0o640)
    st = os.lstat(P(src, 'fifo'))
    assert stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640
    assert stat.S_ISFIFO(os.lstat(P(mnt, 'fifo')).st_mode)
    os.mknod(P(mnt, 'reg'), 0o600 | stat.S_IFREG)
    assert stat.S_ISREG(os.lstat(P(src, 'reg')).st_mode)
    expect_errno(errno.EEXIST, os.mkfifo, P(mnt, 'fifo'))


# ---------------------------------------------------------------------------
# errno values

def test_errors_eexist(mount):
    src, mnt = mount
    os.mkdir(P(mnt, 'd'))
    _write(P(mnt, 'f'), b'')
    expect_errno(errno.EEXIST, os.mkdir, P(mnt, 'd'))
    expect_errno(errno.EEXIST, os.mkdir, P(mnt, 'f'))
    expect_errno(errno.EEXIST, os.open, P(mnt, 'f'),
                 os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    _write(P(src, 'unseen'), b'')      # exists only on the server so far
    expect_errno(errno.EEXIST, os.open, P(mnt, 'unseen'),
                 os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    expect_errno(errno.EEXIST, os.symlink, 'x', P(mnt, 'f'))
    expect_errno(errno.EEXIST, os.link, P(mnt, 'f'), P(mnt, 'unseen'))
    expect_errno(errno.EEXIST, util.renameat2, P(mnt, 'f'), P(mnt, 'd'),
                 util.RENAME_NOREPLACE)


def test_errors_enotempty(mount):
    src, mnt = mount
    os.makedirs(P(mnt, 'd', 'sub'))
    expect_errno(errno.ENOTEMPTY, os.rmdir, P(mnt, 'd'))
    assert os.path.isdir(P(src, 'd', 'sub'))
    os.mkdir(P(mnt, 'other'))
    # Replacing a non-empty directory is decided by the server.
    expect_errno(errno.ENOTEMPTY, os.rename, P(mnt, 'other'), P(mnt, 'd'))
    os.rmdir(P(mnt, 'd', 'sub'))
    os.rmdir(P(mnt, 'd'))
    assert not os.path.exists(P(src, 'd'))


def test_errors_eisdir_enotdir(mount):
    src, mnt = mount
    os.mkdir(P(mnt, 'd'))
    _write(P(mnt, 'f'), b'x')
    expect_errno(errno.EISDIR, os.open, P(mnt, 'd'), os.O_WRONLY)
    expect_errno(errno.EISDIR, os.open, P(mnt, 'd'), os.O_RDWR)
    expect_errno(errno.EISDIR, os.unlink, P(mnt, 'd'))
    expect_errno(errno.EISDIR, os.rename, P(mnt, 'f'), P(mnt, 'd'))
    expect_errno(errno.ENOTDIR, os.stat, P(mnt, 'f', 'x'))
    expect_errno(errno.ENOTDIR, os.mkdir, P(mnt, 'f', 'x'))
    expect_errno(errno.ENOTDIR, os.open, P(mnt, 'f', 'x'), os.O_CREAT | os.O_WRONLY)
    expect_errno(errno.ENOTDIR, os.rmdir, P(mnt, 'f'))
    expect_errno(errno.ENOTDIR, os.rename, P(mnt, 'd'), P(mnt, 'f'))
    expect_errno(errno.ENOTDIR, os.listdir, P(mnt, 'f'))
    assert os.path.isdir(P(src, 'd')) and os.path.isfile(P(src, 'f'))


def test_errors_enoent(mount):
    src, mnt = mount
    expect_errno(errno.ENOENT, os.unlink, P(mnt, 'nope'))
    expect_errno(errno.ENOENT, os.rmdir, P(mnt, 'nope'))
    expect_errno(errno.ENOENT, os.rename, P(mnt, 'nope'), P(mnt, 'x'))
    expect_errno(errno.ENOENT, os.readlink, P(mnt, 'nope'))
    expect_errno(errno.ENOENT, os.chmod, P(mnt, 'nope'), 0o644)
    expect_errno(errno.ENOENT, os.mkdir, P(mnt, 'nope', 'x'))
    expect_errno(errno.ENOENT, os.link, P(mnt, 'nope'), P(mnt, 'x'))
    assert os.listdir(src) == []


def test_errors_exdev_einval(mount, tmp_path):
    src, mnt = mount
    _write(P(mnt, 'f'), b'x')
    expect_errno(errno.EXDEV, os.rename, P(mnt, 'f'), str(tmp_path / 'outside'))
    expect_errno(errno.EXDEV, os.link, P(mnt, 'f'), str(tmp_path / 'outside'))
    (tmp_path / 'out2').write_bytes(b'o')
    expect_errno(errno.EXDEV, os.rename, str(tmp_path / 'out2'), P(mnt, 'g'))
    assert os.path.isfile(P(src, 'f')) and not os.path.exists(P(src, 'g'))
    os.makedirs(P(mnt, 'd', 'sub'))
    expect_errno(errno.EINVAL, os.rename, P(mnt, 'd'), P(mnt, 'd', 'sub', 'x'))
    expect_errno(errno.EINVAL, os.rename, P(mnt, 'd'), P(mnt, 'd', 'x'))
    assert os.path.isdir(P(src, 'd', 'sub'))


def test_errors_enametoolong(mount):
    src, mnt = mount
    long = 'n' * 256
    expect_errno(errno.ENAMETOOLONG, os.open, P(mnt, long),
                 os.O_CREAT | os.O_WRONLY, 0o644)
    expect_errno(errno.ENAMETOOLONG, os.mkdir, P(mnt, long))
    expect_errno(errno.ENAMETOOLONG, os.stat, P(mnt, long))
    _write(P(mnt, 'f'), b'')
    expect_errno(errno.ENAMETOOLONG, os.rename, P(mnt, 'f'), P(mnt, long))
    assert os.listdir(src) == ['f']


def test_readonly_mount(mounter):
    m = mounter(opts=['ro'])
    _write(P(m.src, 'f'), b'x')
    assert _read(P(m.mnt, 'f')) == b'x'
    expect_errno(errno.EROFS, os.open, P(m.mnt, 'g'), os.O_CREAT | os.O_WRONLY)
    expect_errno(errno.EROFS, os.open, P(m.mnt, 'f'), os.O_WRONLY)
    expect_errno(errno.EROFS, os.mkdir, P(m.mnt, 'd'))
    expect_errno(errno.EROFS, os.unlink, P(m.mnt, 'f'))
    assert os.listdir(m.src) == ['f']


# ---------------------------------------------------------------------------
# Names

NAMES = ['a b', 'ünïcødé ✓', '日本語.txt', ' leading space', 'trailing space ',
         'new\nline', 'tab\there', 'back\\slash', '-dash', '%s%n', "quo'te\"s",
         '...', '.hidden', 'x' * 255, 'é' * 127]


def test_names(mount):
    src, mnt = mount
    for i, n in enumerate(NAMES):
        _write(P(mnt, n), n.encode())
    os.mkdir(P(mnt, 'dir ünï ✓'))
    for n in NAMES[:3]:
        os.rename(P(mnt, n), P(mnt, 'dir ünï ✓', n))
    want = set(NAMES[3:]) | {'dir ünï ✓'}
    assert set(os.listdir(mnt)) == want
    assert set(os.listdir(src)) == want
    assert set(os.listdir(P(src, 'dir ünï ✓'))) == set(NAMES[:3])
    for n in NAMES[3:]:
        assert _read(P(src, n)) == n.encode()
        assert _read(P(mnt, n)) == n.encode()
    for n in NAMES[:3]:
        assert _read(P(mnt, 'dir ünï ✓', n)) == n.encode()
    # Names that are not valid UTF-8 are just bytes.
    raw = b'latin1-\xe9\xff'
    with open(os.path.join(os.fsencode(mnt), raw), 'wb') as f:
        f.write(b'raw')
    assert raw in os.listdir(os.fsencode(src))
    assert raw in os.listdir(os.fsencode(mnt))


# ---------------------------------------------------------------------------
# Sizes

SIZES = [0, 1, MiB - 1, MiB, MiB + 1, 3 * MiB + 12345,
         pytest.param(GiB, marks=[pytest.mark.deadline(900)], id='1GiB')]


@pytest.mark.parametrize('size', SIZES)
def test_sizes(mounter, tmp_path, size):
    if size >= GiB and util.fast_mode():
        pytest.skip('QFTFS_TEST_FAST=1 skips the 1 GiB copy')
    source = str(tmp_path / 'source')
    digest = util.write_random_file(source, size)
    m = mounter()
    try:
        util.run(['cp', source, P(m.mnt, 'file')], check=True, timeout=600)
        st = os.stat(P(m.src, 'file'))
        assert st.st_size == size
        assert util.sha256_file(P(m.src, 'file')) == digest, \
            'backing file differs from the source'
        assert os.stat(P(m.mnt, 'file')).st_size == size
        # Read back through a second, fresh mount so the data comes from the
        # server and not from the first mount's page cache.
        m2 = mounter(src=m.src)
        assert util.sha256_file(P(m2.mnt, 'file')) == digest, \
            'file read back through the mount differs from the source'
        if size < GiB:
            assert util.sha256_file(P(m.mnt, 'file')) == digest
            util.run(['cp', P(m2.mnt, 'file'), str(tmp_path / 'back')],
                     check=True)
            assert util.sha256_file(str(tmp_path / 'back')) == digest
    finally:
        for p in (source, P(m.src, 'file'), str(tmp_path / 'back')):
            try:
                os.unlink(p)
            except OSError:
                pass


def test_sparse_file(mount):
    src, mnt = mount
    hole = 100 * MiB
    fd = os.open(P(mnt, 'sparse'), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        assert os.pwrite(fd, b'x', hole) == 1
    finally:
        os.close(fd)
    st = os.stat(P(src, 'sparse'))
    assert st.st_size == hole + 1
    assert st.st_blocks * 512 <= MiB, \
        'backing file is not sparse: %d bytes allocated' % (st.st_blocks * 512)
    assert os.stat(P(mnt, 'sparse')).st_size == hole + 1
    zero = bytes(4 * MiB)
    with open(P(mnt, 'sparse'), 'rb') as f:
        for off in range(0, hole, 4 * MiB):
            assert f.read(4 * MiB) == zero, 'non-zero data in the hole at %d' % off
        assert f.read() == b'x'


@pytest.mark.deadline(420)
def test_large_directory(mount):
    src, mnt = mount
    n = 10000
    os.mkdir(P(mnt, 'big'))
    names = {'entry-%05d-%s' % (i, 'x' * (i % 40)) for i in range(n)}
    for name in names:
        os.close(os.open(P(mnt, 'big', name), os.O_CREAT | os.O_WRONLY, 0o644))
    listed = os.listdir(P(mnt, 'big'))
    assert len(listed) == n, 'readdir returned %d entries, not %d' % (len(listed), n)
    assert set(listed) == names
    assert set(os.listdir(P(src, 'big'))) == names
    r = util.run(['ls', '-l', P(mnt, 'big')], check=True, timeout=300)
    lines = r.stdout.splitlines()
    assert lines[0].startswith('total') and len(lines) == n + 1
    assert sum(1 for e in util.raw_dirents(P(mnt, 'big')) if e not in ('.', '..')) == n
    # rm -rf reads the directory while it unlinks: cookies must stay valid.
    util.run(['rm', '-rf', P(mnt, 'big')], check=True, timeout=300)
    assert not os.path.exists(P(src, 'big'))


# ---------------------------------------------------------------------------
# close() and concurrency

@pytest.mark.parametrize('mount', [{}, {'opts': ['commit=none']}],
                         indirect=True, ids=['commit=close', 'commit=none'])
def test_close_means_present(mount):
    """After close() returns, the whole file is in the backing dir."""
    src, mnt = mount
    import random
    chunk = random.Random(64).randbytes(MiB)
    import hashlib
    h = hashlib.sha256()
    fd = os.open(P(mnt, 'big'), os.O_CREAT | os.O_WRONLY, 0o644)
    for i in range(64):
        block = bytes([i]) + chunk[1:]
        os.write(fd, block)
        h.update(block)
    os.close(fd)
    st = os.stat(P(src, 'big'))
    assert st.st_size == 64 * MiB, 'only %d bytes in the backing file at close' % st.st_size
    assert util.sha256_file(P(src, 'big')) == h.hexdigest()


def test_parallel_writers(mount):
    src, mnt = mount
    import random

    def work(i):
        data = random.Random(i).randbytes(4 * MiB + i)
        _write(P(mnt, 'p%d' % i), data)
        assert _read(P(mnt, 'p%d' % i)) == data
        os.mkdir(P(mnt, 'd%d' % i))
        os.rename(P(mnt, 'p%d' % i), P(mnt, 'd%d' % i, 'f'))
        return data

    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        results = list(ex.map(work, range(6)))
    for i, data in enumerate(results):
        assert _read(P(src, 'd%d' % i, 'f')) == data


# ---------------------------------------------------------------------------
# Open handles across renames (a path-based protocol must not lose them)

def test_open_file_follows_rename(mount):
    src, mnt = mount
    os.makedirs(P(mnt, 'dir', 'sub'))
    fd = os.open(P(mnt, 'dir', 'sub', 'f'), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b'one ')
        os.rename(P(mnt, 'dir', 'sub', 'f'), P(mnt, 'dir', 'sub', 'g'))
        os.write(fd, b'two ')
        os.rename(P(mnt, 'dir'), P(mnt, 'moved'))      # the parent, too
        os.write(fd, b'three')
        os.fsync(fd)
        os.ftruncate(fd, 12)
        assert os.fstat(fd).st_size == 12
        os.fchmod(fd, 0o600)
        assert os.pread(fd, 100, 0) == b'one two thre'
    finally:
        os.close(fd)
    assert _read(P(src, 'moved', 'sub', 'g')) == b'one two thre'
    assert stat.S_IMODE(os.stat(P(src, 'moved', 'sub', 'g')).st_mode) == 0o600
    assert sorted(os.listdir(src)) == ['moved']


def test_children_follow_directory_rename(mount):
    src, mnt = mount
    os.makedirs(P(mnt, 'a', 'b'))
    _write(P(mnt, 'a', 'b', 'f'), b'x')
    os.stat(P(mnt, 'a', 'b', 'f'))           # the client now knows the nodes
    os.rename(P(mnt, 'a'), P(mnt, 'z'))
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'a', 'b', 'f'))
    os.chmod(P(mnt, 'z', 'b', 'f'), 0o604)
    with open(P(mnt, 'z', 'b', 'f'), 'ab') as f:
        f.write(b'y')
    if _has_user_xattr(src):
        os.setxattr(P(mnt, 'z', 'b'), 'user.t', b'1')
        assert os.getxattr(P(src, 'z', 'b'), 'user.t') == b'1'
    os.rename(P(mnt, 'z', 'b', 'f'), P(mnt, 'z', 'f2'))
    os.rmdir(P(mnt, 'z', 'b'))
    assert _read(P(src, 'z', 'f2')) == b'xy'
    assert stat.S_IMODE(os.stat(P(src, 'z', 'f2')).st_mode) == 0o604
    assert os.listdir(P(src, 'z')) == ['f2']
    # A name reused after the rename is a new, independent file.
    os.mkdir(P(mnt, 'a'))
    _write(P(mnt, 'a', 'f2'), b'new')
    assert _read(P(src, 'z', 'f2')) == b'xy'


def _has_user_xattr(path):
    try:
        os.setxattr(path, 'user.qftfs.probe', b'1')
        os.removexattr(path, 'user.qftfs.probe')
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# Access patterns: random, mmap, exec

def test_random_access(mount):
    src, mnt = mount
    import random
    rnd = random.Random(1234)
    size = 8 * MiB
    model = bytearray(size)
    fd = os.open(P(mnt, 'r'), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.ftruncate(fd, size)
        for _ in range(300):
            off = rnd.randrange(size)
            n = min(rnd.choice((1, 7, 512, 4096, 65537, 300000)), size - off)
            data = rnd.randbytes(n)
            assert os.pwrite(fd, data, off) == n
            model[off:off + n] = data
            if rnd.random() < 0.2:
                roff = rnd.randrange(size)
                rn = rnd.randrange(1, 200000)
                assert os.pread(fd, rn, roff) == bytes(model[roff:roff + rn])
    finally:
        os.close(fd)
    assert _read(P(src, 'r')) == bytes(model)


def test_mmap_shared_write(mount):
    src, mnt = mount
    import mmap
    size = 3 * MiB + 100
    fd = os.open(P(mnt, 'm'), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size, mmap.MAP_SHARED) as mm:
            for i in range(0, size, 4096):
                mm[i:i + 4] = b'%04d' % (i // 4096 % 10000)
            mm[-5:] = b'tail!'
            mm.flush()
    finally:
        os.close(fd)
    data = _read(P(src, 'm'))
    assert len(data) == size and data[-5:] == b'tail!'
    assert all(data[i:i + 4] == b'%04d' % (i // 4096 % 10000)
               for i in range(0, size - 5, 4096))
    # And mmap for reading sees what the server has.
    with open(P(mnt, 'm'), 'rb') as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
        assert mm[:4] == b'0000' and mm[-5:] == b'tail!'


def test_exec_from_mount(mount):
    src, mnt = mount
    util.run(['cp', '/bin/echo', P(mnt, 'echo')], check=True)
    r = util.run([P(mnt, 'echo'), 'ran', 'from', 'qftfs'], check=True)
    assert r.stdout == 'ran from qftfs\n'
    with open(P(mnt, 'script.sh'), 'w') as f:
        f.write('#!/bin/sh\necho "$0 ok"\n')
    os.chmod(P(mnt, 'script.sh'), 0o755)
    assert util.run([P(mnt, 'script.sh')], check=True).stdout.endswith(' ok\n')


# ---------------------------------------------------------------------------
# The server going away: errors, not hangs, and the unmount still works

@pytest.mark.deadline(120)
def test_server_killed_fails_fast(mounter):
    # reconnect=no: everything after the loss fails (test_deadline.py
    # covers the mount coming back by itself).
    m = mounter(expect_rc=None, opts=['reconnect=no'])
    src, mnt = m
    _write(P(mnt, 'f'), b'before')
    fd = os.open(P(mnt, 'g'), os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b'unsynced')
    assert m.server_pids, 'no server child found'
    for pid in m.server_pids:
        os.kill(pid, 9)
    t0 = time.monotonic()
    err = None
    try:
        os.write(fd, b'more')
        os.fsync(fd)
    except OSError as e:
        err = e
    try:
        os.close(fd)
    except OSError as e:
        err = err or e
    assert err is not None, 'writes and close succeeded with the server dead'
    assert err.errno in (errno.EIO, errno.ENOTCONN), \
        'expected EIO, got %r' % err
    for op in (lambda: os.stat(P(mnt, 'new-name')), lambda: os.listdir(mnt),
               lambda: _write(P(mnt, 'h'), b'x')):
        with pytest.raises(OSError) as e:
            op()
        assert e.value.errno in (errno.EIO, errno.ENOTCONN), e.value
    assert time.monotonic() - t0 < 60, 'operations took too long to fail'
    assert _read(P(src, 'f')) == b'before'


def metadata_storm(mnt, seconds=4.0, workers=6, stop_on_error=True):
    """Threads create, rename, link and remove overlapping names in one
    directory while others list it.  Races may fail individual calls with
    ENOENT/EEXIST/ENOTEMPTY, nothing else; returns the errors seen."""
    import random
    import threading
    base = P(mnt, 'storm')
    os.makedirs(base, exist_ok=True)
    allowed = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR,
               errno.EISDIR}
    # Known weakness of a path-based protocol, seen about once a minute of
    # storm: a name resolved by the kernel is replaced by another thread
    # before the OPEN reaches the server, which then finds a symlink (ELOOP)
    # or another type (EINVAL) at that path.  A local filesystem would open
    # the old inode; the client could answer ESTALE so the VFS retries the
    # lookup.  Tolerated here so this test stays deterministic; it still
    # catches hangs, crashes, sanitizer reports and any other errno.
    race = {errno.ELOOP, errno.EINVAL, errno.ESTALE}
    bad = []
    stop = time.monotonic() + seconds

    def work(i):
        rnd = random.Random(i)
        while time.monotonic() < stop and not (bad and stop_on_error):
            a = P(base, 'n%d' % rnd.randrange(20))
            b = P(base, 'n%d' % rnd.randrange(20))
            op = rnd.randrange(9)
            try:
                if op == 0:
                    _write(a, b'%d' % i)
                elif op == 1:
                    os.rename(a, b)
                elif op == 2:
                    os.unlink(a)
                elif op == 3:
                    os.mkdir(a)
                elif op == 4:
                    os.rmdir(a)
                elif op == 5:
                    os.link(a, b)
                elif op == 6:
                    os.symlink('target', a)
                elif op == 7:
                    os.stat(a, follow_symlinks=False)
                else:
                    os.listdir(base)
            except OSError as e:
                # link(2) of a directory is EPERM.
                if e.errno in race and op == 0:
                    continue
                if e.errno not in allowed and not (op == 5 and e.errno == errno.EPERM):
                    bad.append('worker %d op %d: %r' % (i, op, e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    assert not any(t.is_alive() for t in threads), 'a worker hung'
    return bad


def test_parallel_metadata(mount):
    src, mnt = mount
    bad = metadata_storm(mnt)
    assert not bad, 'unexpected errors:\n' + '\n'.join(bad[:20])
    # After the storm, the mount and the server agree.
    time.sleep(1.1)       # let entry/attr caches (1 s) expire
    assert sorted(os.listdir(P(mnt, 'storm'))) == sorted(os.listdir(P(src, 'storm')))
    for name in os.listdir(P(src, 'storm')):
        b, m = os.lstat(P(src, 'storm', name)), os.lstat(P(mnt, 'storm', name))
        assert stat.S_IFMT(b.st_mode) == stat.S_IFMT(m.st_mode), name
    util.run(['rm', '-rf', P(mnt, 'storm')], check=True)
    assert os.listdir(src) == []


@pytest.mark.parametrize('kind', ['symlink', 'dir', 'fifo', 'file'])
def test_name_replaced_on_server(mount, kind):
    """A name the client has cached is replaced on the server by another
    type of object.  Once the entry and attribute timeouts (1 s) expire the
    mount shows the new object, and handles opened before still read the
    old one."""
    src, mnt = mount
    _write(P(src, 'n'), b'old')
    assert stat.S_ISREG(os.stat(P(mnt, 'n')).st_mode)
    fd = os.open(P(mnt, 'n'), os.O_RDONLY)
    try:
        os.unlink(P(src, 'n'))
        if kind == 'symlink':
            os.symlink('elsewhere', P(src, 'n'))
        elif kind == 'dir':
            os.mkdir(P(src, 'n'))
            _write(P(src, 'n', 'inner'), b'in')
        elif kind == 'fifo':
            os.mkfifo(P(src, 'n'))
        else:
            _write(P(src, 'n'), b'new content')
        time.sleep(1.3)
        want = {'symlink': stat.S_IFLNK, 'dir': stat.S_IFDIR,
                'fifo': stat.S_IFIFO, 'file': stat.S_IFREG}[kind]
        st = os.lstat(P(mnt, 'n'))
        assert stat.S_IFMT(st.st_mode) == want
        assert st.st_ino == os.lstat(P(src, 'n')).st_ino
        os.chown(P(mnt, 'n'), 4321, 4321, follow_symlinks=False)
        assert os.lstat(P(src, 'n')).st_uid == 4321
        if kind == 'symlink':
            assert os.readlink(P(mnt, 'n')) == 'elsewhere'
        elif kind == 'dir':
            assert os.listdir(P(mnt, 'n')) == ['inner']
        elif kind == 'file':
            assert _read(P(mnt, 'n')) == b'new content'
        assert os.pread(fd, 10, 0) == b'old'
    finally:
        os.close(fd)


@pytest.mark.parametrize('commit', ['close', 'none'])
def test_commit_mode_syncs(mounter, tmp_path, commit):
    """commit=close: close() of a written file returns after the server
    fdatasync'd it; commit=none skips that; fsync() always syncs; closing a
    file that was not written never syncs.  Observed with strace on the
    server."""
    if not os.path.exists('/usr/bin/strace'):
        pytest.skip('strace is not installed')
    trace = str(tmp_path / 'trace')
    m = mounter(opts=['commit=' + commit],
                server_wrapper='/usr/bin/strace -f -qq -e trace=/sync -o ' + trace)

    def syncs():
        return [l for l in util.read_log(trace).splitlines()
                if 'sync' in l and '= 0' in l]

    _write(P(m.mnt, 'w'), b'written')
    after_write = len(syncs())
    with open(P(m.mnt, 'w'), 'rb') as f:
        f.read()
    after_read = len(syncs())
    fd = os.open(P(m.mnt, 'w'), os.O_WRONLY)
    os.write(fd, b'W')
    os.fsync(fd)
    after_fsync = len(syncs())
    os.close(fd)
    if commit == 'close':
        assert after_write >= 1, 'close() of a written file did not fdatasync'
    else:
        assert after_write == 0, 'commit=none synced on close: %s' % syncs()
    assert after_read == after_write, 'closing a read-only handle synced'
    assert after_fsync > after_read, 'fsync() did not reach the server'
    assert _read(P(m.src, 'w')) == b'Written'
