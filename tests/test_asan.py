# SPDX-License-Identifier: MIT
"""Sanitizer tier: the client and server built with
-Db_sanitize=address,undefined, mounted and driven through a smoke
workload.  Any AddressSanitizer, LeakSanitizer or UBSan report in either
daemon's log fails the test (the mount fixture checks at teardown, after
the client has exited, so leaks at exit count too).

The wire-level tests in test_security.py and the unit tests also run
against this build.
"""

import errno
import os
import random
import stat

import pytest

import util
from util import MiB, expect_errno

P = os.path.join


@pytest.fixture
def amount(mounter, asan_build):
    if not util.is_asan_build(asan_build):
        pytest.fail('%s is not configured with b_sanitize' % asan_build,
                    pytrace=False)
    return mounter(build=asan_build)


@pytest.mark.deadline(600)
def test_asan_smoke(amount, tmp_path):
    src, mnt = amount
    # create, write and read 8 MiB in odd-sized pieces
    data = random.Random(8).randbytes(8 * MiB)
    with open(P(mnt, 'f'), 'wb') as f:
        pos = 0
        for n in (1, 4095, 4097, 65536, 1 << 20, 3 * (1 << 20) + 7):
            f.write(data[pos:pos + n])
            pos += n
        f.write(data[pos:])
    with open(P(src, 'f'), 'rb') as f:
        assert f.read() == data
    with open(P(mnt, 'f'), 'rb') as f:
        assert f.read() == data
    fd = os.open(P(mnt, 'f'), os.O_RDWR)
    try:
        assert os.pread(fd, 100, 8 * MiB - 50) == data[-50:]
        os.pwrite(fd, b'hello', 12345)
        os.ftruncate(fd, 5 * MiB)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert os.stat(P(src, 'f')).st_size == 5 * MiB
    # directories and readdir
    os.makedirs(P(mnt, 'd', 'e'))
    for i in range(300):
        with open(P(mnt, 'd', 'n%03d-%s' % (i, 'ü' * (i % 50))), 'wb') as f:
            f.write(b'x' * i)
    assert len(os.listdir(P(mnt, 'd'))) == 301
    util.run(['ls', '-laR', mnt], check=True)
    # rename, with and without flags
    os.rename(P(mnt, 'f'), P(mnt, 'd', 'e', 'g'))
    util.renameat2(P(mnt, 'd', 'e'), P(mnt, 'd', 'n000-'), util.RENAME_EXCHANGE)
    assert stat.S_ISDIR(os.stat(P(src, 'd', 'n000-')).st_mode)
    expect_errno(errno.EEXIST, util.renameat2, P(mnt, 'd', 'n001-ü'),
                 P(mnt, 'd', 'n002-üü'), util.RENAME_NOREPLACE)
    # symlinks, links, attributes
    os.symlink('d/n000-/g', P(mnt, 'sl'))
    assert os.readlink(P(mnt, 'sl')) == 'd/n000-/g'
    os.link(P(mnt, 'd', 'n003-üüü'), P(mnt, 'hl'))
    os.chmod(P(mnt, 'hl'), 0o600)
    os.utime(P(mnt, 'hl'), ns=(1, 2))
    os.mkfifo(P(mnt, 'fifo'))
    os.statvfs(mnt)
    # xattrs (when the backing fs has them)
    try:
        os.setxattr(P(src, 'hl'), 'user.probe', b'1')
        have_xattr = True
    except OSError:
        have_xattr = False
    if have_xattr:
        os.setxattr(P(mnt, 'hl'), 'user.a', b'A' * 3000)
        assert os.getxattr(P(mnt, 'hl'), 'user.a') == b'A' * 3000
        assert sorted(os.listxattr(P(mnt, 'hl'))) == ['user.a', 'user.probe']
        expect_errno(errno.ERANGE, util.getxattr_raw, P(mnt, 'hl'), 'user.a', 10)
        os.removexattr(P(mnt, 'hl'), 'user.a')
        expect_errno(errno.ENODATA, os.getxattr, P(mnt, 'hl'), 'user.a')
    # errors travel too
    expect_errno(errno.ENOENT, os.stat, P(mnt, 'nope'))
    expect_errno(errno.ENOTEMPTY, os.rmdir, P(mnt, 'd'))
    expect_errno(errno.ENAMETOOLONG, os.stat, P(mnt, 'n' * 256))
    # unlink everything
    for name in os.listdir(P(mnt, 'd')):
        p = P(mnt, 'd', name)
        if os.path.isdir(p) and not os.path.islink(p):
            util.run(['rm', '-rf', p], check=True)
        else:
            os.unlink(p)
    os.rmdir(P(mnt, 'd'))
    for name in ('sl', 'hl', 'fifo'):
        os.unlink(P(mnt, name))
    assert os.listdir(src) == []
    # cp -a of a small tree, onto the mount and back
    tree = '/usr/include/linux' if os.path.isdir('/usr/include/linux') else '/etc'
    util.run(['cp', '-a', tree, P(mnt, 'tree')], check=True, timeout=300)
    util.run(['diff', '-r', '--no-dereference', tree, P(src, 'tree')], check=True,
             timeout=300)
    util.run(['cp', '-a', P(mnt, 'tree'), str(tmp_path / 'back')], check=True,
             timeout=300)
    util.run(['diff', '-r', '--no-dereference', tree, str(tmp_path / 'back')],
             check=True, timeout=300)
    util.run(['rm', '-rf', P(mnt, 'tree')], check=True, timeout=300)
    assert os.listdir(src) == []


def test_asan_error_paths(amount):
    """Failing operations exercise the cleanup paths that leak most often."""
    src, mnt = amount
    for _ in range(50):
        expect_errno(errno.ENOENT, os.open, P(mnt, 'missing'), os.O_RDONLY)
        expect_errno(errno.ENOENT, os.listdir, P(mnt, 'missing'))
    os.mkdir(P(mnt, 'd'))
    with open(P(mnt, 'd', 'x'), 'wb'):
        pass
    for _ in range(20):
        expect_errno(errno.EEXIST, os.mkdir, P(mnt, 'd'))
        expect_errno(errno.ENOTEMPTY, os.rmdir, P(mnt, 'd'))
        expect_errno(errno.EISDIR, os.open, P(mnt, 'd'), os.O_WRONLY)
    # Open handles left open when the mount goes away must be released.
    fds = [os.open(P(mnt, 'd', 'x'), os.O_RDONLY) for _ in range(20)]
    dfd = os.open(P(mnt, 'd'), os.O_RDONLY | os.O_DIRECTORY)
    for fd in fds:
        os.close(fd)
    os.close(dfd)


def test_asan_parallel_metadata(amount):
    from test_ops import metadata_storm
    src, mnt = amount
    bad = metadata_storm(mnt, seconds=5.0)
    assert not bad, 'unexpected errors:\n' + '\n'.join(bad[:20])
    util.run(['rm', '-rf', P(mnt, 'storm')], check=True)
