# SPDX-License-Identifier: MIT
"""A full disk on the server: errors must reach cp and rsync as ENOSPC
("No space left on device"), never as EIO or as success, and rsync's
write-to-temp-then-rename must keep an existing target intact.

The backing directory is a 16 MiB tmpfs mounted for the test (root only).
"""

import errno
import os

import pytest

import util
from util import MiB

P = os.path.join


@pytest.fixture
def full_mount(mounter, tmp_path, need_root):
    served = str(tmp_path / 'served')
    os.mkdir(served)
    r = util.run(['mount', '-t', 'tmpfs', '-o', 'size=16m,mode=0755',
                  'qftfs-test-tmpfs', served])
    if r.returncode != 0:
        pytest.skip('cannot mount a tmpfs: %s' % r.stderr.strip())
    try:
        m = mounter(src=served)
        yield m
        # Unmount FUSE before the tmpfs under it; mounter's own teardown
        # then finds the mount already stopped.
        problems = m.stop()
    finally:
        r = util.run(['umount', served], timeout=60)
        if r.returncode != 0:
            util.run(['umount', '-l', served], timeout=60)
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)


def test_statfs_shows_the_small_disk(full_mount):
    src, mnt = full_mount
    v = os.statvfs(mnt)
    assert v.f_blocks * v.f_frsize == 16 * MiB


def test_cp_reports_enospc(full_mount, tmp_path):
    src, mnt = full_mount
    source = str(tmp_path / 'big')
    util.write_random_file(source, 32 * MiB)
    r = util.run(['cp', source, P(mnt, 'big')], timeout=300)
    assert r.returncode != 0, 'cp of 32 MiB onto a 16 MiB disk succeeded'
    assert 'No space left on device' in r.stderr, \
        'cp did not see ENOSPC; stderr: %r' % r.stderr
    # What is left is a partial file: shorter than the source, and the
    # bytes it has are the source's first bytes.
    size = os.stat(P(src, 'big')).st_size
    assert 0 < size < 32 * MiB
    with open(source, 'rb') as a, open(P(src, 'big'), 'rb') as b:
        assert a.read(size) == b.read(), 'the partial file has wrong data'
    assert os.stat(P(mnt, 'big')).st_size == size
    # Space comes back after unlink through the mount.
    os.unlink(P(mnt, 'big'))
    with open(P(mnt, 'small'), 'wb') as f:
        f.write(b'x' * MiB)
    assert os.stat(P(src, 'small')).st_size == MiB


def test_write_and_close_report_enospc(full_mount):
    """Without cp in between: the error surfaces from write() or close()
    with errno ENOSPC, never success."""
    src, mnt = full_mount
    fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_WRONLY, 0o644)
    err = None
    try:
        for _ in range(32):
            os.write(fd, b'z' * MiB)
    except OSError as e:
        err = e
    try:
        os.close(fd)
    except OSError as e:
        err = err or e
    assert err is not None, 'writing 32 MiB onto a 16 MiB disk reported no error'
    assert err.errno == errno.ENOSPC, 'expected ENOSPC, got %r' % err


def test_rsync_enospc_keeps_old_target(full_mount, tmp_path):
    src, mnt = full_mount
    if not os.path.exists('/usr/bin/rsync'):
        pytest.skip('rsync is missing')
    old = b'old content\n' * 1000
    with open(P(mnt, 'target'), 'wb') as f:
        f.write(old)
    source_dir = tmp_path / 'from'
    source_dir.mkdir()
    util.write_random_file(str(source_dir / 'target'), 32 * MiB)
    r = util.run(['rsync', '-a', str(source_dir / 'target'), P(mnt, 'target')],
                 timeout=300)
    assert r.returncode == 11, 'rsync exit %d (want 11, error in file IO):\n%s' % (
        r.returncode, r.stderr)
    assert 'No space left on device' in r.stderr, r.stderr
    with open(P(src, 'target'), 'rb') as f:
        assert f.read() == old, 'the old target was damaged'
    with open(P(mnt, 'target'), 'rb') as f:
        assert f.read() == old
    assert os.listdir(src) == ['target'], 'rsync left temp files: %s' % os.listdir(src)
    # And a fresh target: rsync fails the same way and leaves nothing.
    r = util.run(['rsync', '-a', str(source_dir / 'target'), P(mnt, 'fresh')],
                 timeout=300)
    assert r.returncode == 11, r.stderr
    assert sorted(os.listdir(src)) == ['target']
