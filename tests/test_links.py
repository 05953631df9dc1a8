# SPDX-License-Identifier: MIT
"""Hard links through a real mount behave as on a local disk: every name of
a linked file is one inode of the kernel (one node of the client, one page
cache), so data written through one name is read through every other at
once, and st_ino and st_nlink are equal through every name after each
link, unlink and rename -- the sequence 1, 2, 3, 2, 1 that ext4 gives.

The mounts cache names and attributes for a long time (attr_timeout and
entry_timeout 60 s), so that a stale answer kept by the kernel or the
client shows as a failure rather than healing within a second; the right
answers must not depend on the caches expiring.  Each assertion compares
with the served directory (what the server's file system says).
"""

import os
import time

import pytest

import util

P = os.path.join

LONG = ['attr_timeout=60', 'entry_timeout=60']


def _write(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _read(path):
    with open(path, 'rb') as f:
        return f.read()


def _check_names(m, names, nlink):
    """Every name, through the mount, shows one inode number and the
    link count the served directory has (which is `nlink`); with commit=
    sync the server's ctime too (commit=async shows a predicted one until
    the server answered the steps it pipelined)."""
    src, mnt = m
    _served(m)
    inos = set()
    for name in names:
        b = os.lstat(P(src, name))
        m = os.lstat(P(mnt, name))
        assert b.st_nlink == nlink, '%s: served nlink %d' % (name, b.st_nlink)
        assert m.st_nlink == nlink, \
            '%s: nlink %d through the mount, %d on the server' % (
                name, m.st_nlink, nlink)
        assert ASYNC.get(mnt) or m.st_ctime_ns == b.st_ctime_ns, \
            '%s: ctime through the mount differs from the server' % name
        inos.add(m.st_ino)
    assert len(inos) == 1, 'names of one file show inodes %r' % sorted(inos)
    return inos.pop()


# Mount points of the commit=async mounts.
ASYNC = {}


def _served(m, *path):
    """lstat of a path in the served directory once what the mount `m`
    pipelined has reached the server (commit=async: qftfs --sync)."""
    if ASYNC.get(m.mnt):
        assert util.run([m.client, '--sync', m.mnt],
                        timeout=60).returncode == 0
    return os.lstat(P(m.src, *path))


@pytest.fixture(params=[[], ['commit=async']], ids=['sync', 'async'])
def lmount(request, mounter):
    m = mounter(opts=LONG + request.param)
    ASYNC[m.mnt] = bool(request.param)
    return m


def test_data_through_every_name(lmount):
    """printf hl > a && ln a b && ln a c; printf + >> c; cat a; cat b."""
    src, mnt = lmount
    a, b, c = P(mnt, 'a'), P(mnt, 'b'), P(mnt, 'c')
    _write(a, b'hl')
    os.link(a, b)
    os.link(a, c)
    # Each name read once: the kernel has pages for whatever inode each
    # name leads to.
    assert [_read(x) for x in (a, b, c)] == [b'hl'] * 3
    _write(c, b'+', os.O_WRONLY | os.O_APPEND)
    assert _read(a) == b'hl+'
    assert _read(b) == b'hl+'
    assert _read(c) == b'hl+'
    # Through descriptors open on the other names, without reopening.
    fa = os.open(a, os.O_RDONLY)
    fb = os.open(b, os.O_RDWR)
    try:
        assert os.pread(fa, 100, 0) == b'hl+'
        os.pwrite(fb, b'XY', 1)
        assert os.pread(fa, 100, 0) == b'hXY'
        assert os.fstat(fa).st_size == 3
        os.pwrite(fb, b'tail', 3)
        assert os.pread(fa, 100, 0) == b'hXYtail'
        assert os.fstat(fa).st_size == 7
        assert os.stat(c).st_size == 7
    finally:
        os.close(fa)
        os.close(fb)
    assert _read(P(src, 'a')) == b'hXYtail'


def test_nlink_sequence_like_ext4(lmount):
    """1, 2, 3, 2, 1 through every name, one st_ino throughout."""
    src, mnt = lmount

    def nlinks(*names):
        # Through the mount at once, before anything waits for the
        # server (commit=async: the first close may still be pending).
        return [os.stat(P(mnt, n)).st_nlink for n in names]

    _write(P(mnt, 'a'), b'x')
    os.link(P(mnt, 'a'), P(mnt, 'b'))
    assert nlinks('a', 'b') == [2, 2]
    os.link(P(mnt, 'a'), P(mnt, 'c'))
    assert nlinks('a', 'b', 'c') == [3, 3, 3]
    os.unlink(P(mnt, 'c'))
    assert nlinks('a', 'b') == [2, 2]
    ino = _check_names(lmount, ['a', 'b'], 2)
    os.unlink(P(mnt, 'b'))
    assert _check_names(lmount, ['a'], 1) == ino
    os.link(P(mnt, 'a'), P(mnt, 'b'))
    assert _check_names(lmount, ['a', 'b'], 2) == ino
    os.link(P(mnt, 'a'), P(mnt, 'c'))
    assert _check_names(lmount, ['a', 'b', 'c'], 3) == ino
    os.unlink(P(mnt, 'c'))
    assert _check_names(lmount, ['a', 'b'], 2) == ino
    os.unlink(P(mnt, 'a'))
    assert _check_names(lmount, ['b'], 1) == ino
    # What is left works by path: its name for requests is the live one.
    os.chmod(P(mnt, 'b'), 0o600)
    assert _served(lmount, 'b').st_mode & 0o777 == 0o600
    assert os.stat(P(mnt, 'b')).st_mode & 0o777 == 0o600


def test_twenty_links_unlinked_one_by_one(lmount):
    src, mnt = lmount
    names = ['l%02d' % i for i in range(20)]
    _write(P(mnt, names[0]), b'twenty')
    for n in names[1:]:
        os.link(P(mnt, names[0]), P(mnt, n))
    ino = _check_names(lmount, names, 20)
    while names:
        os.unlink(P(mnt, names.pop(0)))
        if names:
            assert _check_names(lmount, names, len(names)) == ino
    assert os.listdir(mnt) == []


def test_links_across_directories(lmount):
    src, mnt = lmount
    for d in ('d1', 'd2', 'd3'):
        os.mkdir(P(mnt, d))
    _write(P(mnt, 'd1', 'f'), b'one')
    os.link(P(mnt, 'd1', 'f'), P(mnt, 'd2', 'g'))
    os.link(P(mnt, 'd2', 'g'), P(mnt, 'd3', 'h'))
    names = ['d1/f', 'd2/g', 'd3/h']
    ino = _check_names(lmount, names, 3)
    assert sorted(os.listdir(P(mnt, 'd2'))) == ['g']
    _write(P(mnt, 'd3', 'h'), b'three', os.O_WRONLY | os.O_TRUNC)
    assert _read(P(mnt, 'd1', 'f')) == b'three'
    assert _read(P(mnt, 'd2', 'g')) == b'three'
    # The name the client used last for paths goes; requests by path
    # (chmod, xattrs) go through another.
    os.unlink(P(mnt, 'd3', 'h'))
    assert _check_names(lmount, names[:2], 2) == ino
    os.chmod(P(mnt, 'd1', 'f'), 0o640)
    os.setxattr(P(mnt, 'd2', 'g'), 'user.k', b'v')
    assert _served(lmount, 'd1', 'f').st_mode & 0o777 == 0o640
    assert os.getxattr(P(src, 'd1', 'f'), 'user.k') == b'v'
    assert os.stat(P(mnt, 'd2', 'g')).st_mode & 0o777 == 0o640
    # Moved to another directory, a link is still the same file.
    os.rename(P(mnt, 'd2', 'g'), P(mnt, 'd3', 'moved'))
    assert _check_names(lmount, ['d1/f', 'd3/moved'], 2) == ino
    assert sorted(os.listdir(P(mnt, 'd3'))) == ['moved']
    os.unlink(P(mnt, 'd1', 'f'))
    assert _check_names(lmount, ['d3/moved'], 1) == ino
    assert os.listdir(P(mnt, 'd1')) == []
    os.chmod(P(mnt, 'd3', 'moved'), 0o604)
    assert _served(lmount, 'd3', 'moved').st_mode & 0o777 == 0o604


def test_rename_link_onto_link(lmount):
    """POSIX: rename of a name onto another link of the same file does
    nothing; both names stay."""
    src, mnt = lmount
    os.mkdir(P(mnt, 'd'))
    _write(P(mnt, 'a'), b'same')
    os.link(P(mnt, 'a'), P(mnt, 'b'))
    os.link(P(mnt, 'a'), P(mnt, 'd', 'c'))
    ino = _check_names(lmount, ['a', 'b', 'd/c'], 3)
    os.rename(P(mnt, 'a'), P(mnt, 'b'))
    os.rename(P(mnt, 'd', 'c'), P(mnt, 'a'))
    assert sorted(os.listdir(src)) == ['a', 'b', 'd']
    assert sorted(os.listdir(mnt)) == ['a', 'b', 'd']
    assert os.listdir(P(mnt, 'd')) == ['c']
    assert _check_names(lmount, ['a', 'b', 'd/c'], 3) == ino
    # Over another file: that file goes, the link count stays.
    _write(P(mnt, 'other'), b'other')
    os.rename(P(mnt, 'other'), P(mnt, 'b'))
    assert _read(P(mnt, 'b')) == b'other'
    assert _check_names(lmount, ['a', 'd/c'], 2) == ino
    # A link renamed over the name of another link of another file.
    os.link(P(mnt, 'b'), P(mnt, 'b2'))
    os.rename(P(mnt, 'a'), P(mnt, 'b2'))
    assert _check_names(lmount, ['b2', 'd/c'], 2) == ino
    assert _check_names(lmount, ['b'], 1) != ino
    assert _read(P(mnt, 'b2')) == b'same'


def test_exchange_and_open_files(lmount):
    """RENAME_EXCHANGE of a link with another file, and a descriptor open
    on a name that goes keeps reading and writing the file."""
    src, mnt = lmount
    _write(P(mnt, 'a'), b'linked')
    os.link(P(mnt, 'a'), P(mnt, 'b'))
    _write(P(mnt, 'c'), b'single')
    ino = _check_names(lmount, ['a', 'b'], 2)
    util.renameat2(P(mnt, 'a'), P(mnt, 'c'), util.RENAME_EXCHANGE)
    assert _check_names(lmount, ['c', 'b'], 2) == ino
    assert _check_names(lmount, ['a'], 1) != ino
    assert _read(P(mnt, 'a')) == b'single'
    assert _read(P(mnt, 'c')) == b'linked'
    fd = os.open(P(mnt, 'b'), os.O_RDWR)
    try:
        os.unlink(P(mnt, 'b'))
        assert os.fstat(fd).st_nlink == 1
        os.pwrite(fd, b'L', 0)
        assert _read(P(mnt, 'c')) == b'Linked'
        os.unlink(P(mnt, 'c'))
        assert os.fstat(fd).st_nlink == 0
        assert os.pread(fd, 10, 0) == b'Linked'
    finally:
        os.close(fd)
    assert sorted(os.listdir(mnt)) == ['a']


def test_link_made_on_the_server(lmount):
    """A link made behind the mount's back leads to the inode the mount
    has: same st_ino, same pages, the new link count through both."""
    src, mnt = lmount
    _write(P(mnt, 'a'), b'first')
    assert _read(P(mnt, 'a')) == b'first'
    # Listed: the directory is leased, and the server tells of changes.
    assert os.listdir(mnt) == ['a']
    st = os.stat(P(mnt, 'a'))
    os.link(P(src, 'a'), P(src, 'b'))
    util.until_visible(P(mnt, 'b'))
    ino = _check_names(lmount, ['b', 'a'], 2)
    assert ino == st.st_ino
    _write(P(mnt, 'b'), b'second', os.O_WRONLY | os.O_TRUNC)
    assert _read(P(mnt, 'a')) == b'second'
    os.unlink(P(src, 'b'))
    # The server's unlink reaches the mount by notification: the name
    # goes within moments, and the link count with it.
    deadline = time.monotonic() + 5 * util.timeout_scale()
    while os.path.exists(P(mnt, 'b')):
        assert time.monotonic() < deadline, \
            'the server-side unlink not seen through the mount'
        time.sleep(0.01)
    assert _check_names(lmount, ['a'], 1) == ino
    assert _read(P(mnt, 'a')) == b'second'


def test_pjdfstest_link_00(lmount):
    """pjdfstest link/00.t: link counts, attributes changed through one
    name seen through the others, ctime of the file and of the
    directories changed by link and unlink."""
    src, mnt = lmount
    n0, n1, n2 = P(mnt, 'n0'), P(mnt, 'n1'), P(mnt, 'n2')
    _write(n0, b'')
    assert os.lstat(n0).st_nlink == 1
    os.link(n0, n1)
    assert os.lstat(n0).st_nlink == 2 and os.lstat(n1).st_nlink == 2
    os.link(n1, n2)
    assert [os.lstat(x).st_nlink for x in (n0, n1, n2)] == [3, 3, 3]
    os.chmod(n1, 0o201)
    if os.geteuid() == 0:
        os.chown(n1, 65534, 65533)
    # commit=async: n0's close may still be on its way, and what the
    # mount predicts for the file until then is not this test's subject.
    _served(lmount)
    want = os.lstat(n1)
    assert want.st_mode & 0o7777 == 0o201
    assert os.geteuid() != 0 or (want.st_uid, want.st_gid) == (65534, 65533)
    for x in (n0, n1, n2):
        st = os.lstat(x)
        assert (st.st_mode, st.st_uid, st.st_gid, st.st_nlink) == \
            (want.st_mode, want.st_uid, want.st_gid, 3)
    os.unlink(n0)
    assert [os.lstat(x).st_nlink for x in (n1, n2)] == [2, 2]
    os.unlink(n2)
    assert os.lstat(n1).st_nlink == 1
    os.unlink(n1)

    # ctimes: the file's on link and on unlink of another name, the
    # directory's ctime and mtime on both (sleeps make the clock tick
    # past the file system's timestamp granularity).
    _write(n0, b'')
    os.mkdir(P(mnt, 'dir'))
    c0 = os.lstat(n0).st_ctime_ns
    d0 = os.lstat(P(mnt, 'dir'))
    time.sleep(0.05)
    os.link(n0, P(mnt, 'dir', 'n1'))
    c1 = os.lstat(n0).st_ctime_ns
    d1 = os.lstat(P(mnt, 'dir'))
    assert c1 > c0, 'link did not change the ctime'
    assert os.lstat(P(mnt, 'dir', 'n1')).st_ctime_ns == c1
    assert d1.st_ctime_ns > d0.st_ctime_ns and d1.st_mtime_ns > d0.st_mtime_ns
    time.sleep(0.05)
    os.unlink(n0)
    c2 = os.lstat(P(mnt, 'dir', 'n1')).st_ctime_ns
    assert c2 > c1, 'unlink did not change the ctime of the other name'
    assert c2 == os.lstat(P(src, 'dir', 'n1')).st_ctime_ns
    time.sleep(0.05)
    os.unlink(P(mnt, 'dir', 'n1'))
    d2 = os.lstat(P(mnt, 'dir'))
    assert d2.st_ctime_ns > d1.st_ctime_ns and d2.st_mtime_ns > d1.st_mtime_ns
