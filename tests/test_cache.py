# SPDX-License-Identifier: MIT
"""Caching on the client: what it saves, and that it never serves stale
answers to changes made through the mount.

- ls -l asks every entry for two extended attributes (security.selinux and
  system.posix_acl_access).  The server marks attributes of objects that
  have none (QFT_ATTR_NOXATTR), so a listing of N plain files costs no
  GETXATTR at all, while objects that do have xattrs or ACLs are still
  asked and shown as such.
- A file reopened unchanged keeps its page cache (keep_cache): the second
  read sends no READ.  A file changed on the server is read afresh once
  the attributes expire.

Round trips are counted from the server's debug log (one line per request),
not timed.
"""

import errno
import hashlib
import mmap
import os
import re
import shutil
import subprocess
import time

import pytest

import util
from util import MiB

P = os.path.join


def _debug_mount(mounter, opts=()):
    b = util.build_dir()
    return mounter(build=b, server=util.server_bin(b) + ' -d', opts=opts)


def _ops(m, op):
    """Requests of type `op` the server has logged so far."""
    return len(re.findall(r'qftfs-server: %s id \d+' % op, m.log()))


def _settle(m, op, timeout=5.0, quiet=0.3):
    """Request counts reach the log a moment after the reply; wait until
    the count of `op` has not moved for `quiet` seconds."""
    last, stable_since = -1, time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = _ops(m, op)
        if n != last:
            last, stable_since = n, time.monotonic()
        elif time.monotonic() - stable_since > quiet:
            break
        time.sleep(0.05)
    return last


def test_ls_l_sends_no_getxattr_for_plain_files(mounter):
    m = _debug_mount(mounter)
    src, mnt = m
    for i in range(200):
        with open(P(src, 'f%03d' % i), 'w') as f:
            f.write('x' * i)
    os.mkdir(P(src, 'd'))
    os.symlink('f001', P(src, 'link'))
    before = _settle(m, 'GETXATTR'), _settle(m, 'LISTXATTR')
    out = util.run(['ls', '-l', mnt], check=True).stdout
    assert len(out.splitlines()) == 200 + 2 + 1, out[-500:]
    after = _settle(m, 'GETXATTR'), _settle(m, 'LISTXATTR')
    # The symlink has no hint (xattrs of symlinks are the server's
    # business); everything else is answered locally.
    assert after[0] - before[0] <= 2, \
        'ls -l sent %d GETXATTR for 202 plain entries' % (after[0] - before[0])
    assert after[1] == before[1]


@pytest.mark.skipif(shutil.which('setfacl') is None,
                    reason='setfacl (package acl) is not installed')
def test_ls_l_still_shows_acls_and_xattrs(mounter):
    m = _debug_mount(mounter)
    src, mnt = m
    for name in ('plain', 'acl', 'xattr'):
        open(P(src, name), 'w').close()
    r = util.run(['setfacl', '-m', 'u:nobody:r', P(src, 'acl')])
    if r.returncode != 0:
        pytest.skip('the backing filesystem refuses ACLs: %s' % r.stderr.strip())
    os.setxattr(P(src, 'xattr'), 'user.k', b'v')
    out = util.run(['ls', '-l', mnt], check=True).stdout
    modes = {line.split()[-1]: line.split()[0] for line in out.splitlines()[1:]}
    assert modes['acl'].endswith('+'), out
    assert not modes['plain'].endswith('+'), out
    assert os.getxattr(P(mnt, 'xattr'), 'user.k') == b'v'
    assert os.listxattr(P(mnt, 'plain')) == []


def test_xattr_set_through_mount_is_seen_at_once(mounter):
    # A long attr_timeout: only the mount's own changes may end the hint.
    m = _debug_mount(mounter, opts=['attr_timeout=60', 'entry_timeout=60'])
    src, mnt = m
    open(P(src, 'f'), 'w').close()
    os.mkdir(P(src, 'd'))
    util.run(['ls', '-l', mnt], check=True)
    for name in ('f', 'd'):
        p = P(mnt, name)
        util.expect_errno(errno.ENODATA, os.getxattr, p, 'user.k')
        assert os.listxattr(p) == []
        os.setxattr(p, 'user.k', b'v1')
        assert os.getxattr(p, 'user.k') == b'v1'
        assert os.listxattr(p) == ['user.k']
        os.removexattr(p, 'user.k')
        util.expect_errno(errno.ENODATA, os.getxattr, p, 'user.k')
        # The hint comes back with fresh attributes, and goes again.
        os.stat(p)
        os.setxattr(p, 'user.j', b'v2')
        assert os.getxattr(p, 'user.j') == b'v2'
        assert os.getxattr(P(src, name), 'user.j') == b'v2'


def test_xattr_set_on_server_seen_after_attr_timeout(mounter):
    m = _debug_mount(mounter, opts=['attr_timeout=0.5', 'entry_timeout=0.5'])
    src, mnt = m
    open(P(src, 'f'), 'w').close()
    util.run(['ls', '-l', mnt], check=True)
    util.expect_errno(errno.ENODATA, os.getxattr, P(mnt, 'f'), 'user.k')
    os.setxattr(P(src, 'f'), 'user.k', b'v')
    time.sleep(0.7)
    os.stat(P(mnt, 'f'))
    assert os.getxattr(P(mnt, 'f'), 'user.k') == b'v'


def test_no_hint_with_attr_timeout_zero(mounter):
    m = _debug_mount(mounter, opts=['attr_timeout=0'])
    src, mnt = m
    for i in range(20):
        open(P(src, 'f%d' % i), 'w').close()
    before = _settle(m, 'GETXATTR')
    util.run(['ls', '-l', mnt], check=True)
    assert _settle(m, 'GETXATTR') - before >= 20, \
        'attr_timeout=0 must not trust any cached answer'


def test_warm_reread_sends_no_read(mounter):
    m = _debug_mount(mounter)
    src, mnt = m
    util.write_random_file(P(src, 'f'), 8 * MiB, seed=5)
    want = util.sha256_file(P(src, 'f'))
    # The cold read goes through a mapping that stays for the whole test:
    # some kernels (this VM's DAMON pageout scheme) evict unmapped page
    # cache they think idle, and those pages would be read again for a
    # reason that is not ours.  Mapped pages they leave alone.
    with open(P(mnt, 'f'), 'rb') as f, \
            mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        assert hashlib.sha256(mapped).hexdigest() == want
        # Read-ahead past the end may still be on its way: let it land.
        reads = _settle(m, 'READ', timeout=15, quiet=1.5)
        assert reads > 0
        for _ in range(3):
            assert util.sha256_file(P(mnt, 'f')) == want
        again = _settle(m, 'READ', timeout=15, quiet=1.5)
    assert again == reads, \
        'an unchanged file was read again (%d READs, then %d)' % (reads, again)


def test_reread_after_change_on_server(mounter):
    m = _debug_mount(mounter, opts=['attr_timeout=0.5', 'entry_timeout=0.5'])
    src, mnt = m
    util.write_random_file(P(src, 'f'), 4 * MiB, seed=6)
    assert util.sha256_file(P(mnt, 'f')) == util.sha256_file(P(src, 'f'))
    # Same size, new bytes, new mtime: only the mtime tells.
    util.write_random_file(P(src, 'f'), 4 * MiB, seed=7)
    os.utime(P(src, 'f'), ns=(0, time.time_ns() + 10**9))
    time.sleep(0.7)
    assert util.sha256_file(P(mnt, 'f')) == util.sha256_file(P(src, 'f'))


def test_reread_after_write_through_mount(mounter):
    m = _debug_mount(mounter, opts=['attr_timeout=60', 'entry_timeout=60'])
    src, mnt = m
    util.write_random_file(P(src, 'f'), 2 * MiB, seed=8)
    util.sha256_file(P(mnt, 'f'))
    with open(P(mnt, 'f'), 'r+b') as f:
        f.seek(MiB)
        f.write(b'new bytes')
    with open(P(mnt, 'f'), 'rb') as f:
        f.seek(MiB)
        assert f.read(9) == b'new bytes'
    assert util.sha256_file(P(mnt, 'f')) == util.sha256_file(P(src, 'f'))


def test_listing_costs_one_readdir(mounter):
    """The client asks the server for a whole reply's worth of entries and
    serves the kernel's page-sized readdirs from it (and the end of the
    directory too, when the server said so)."""
    m = _debug_mount(mounter)
    src, mnt = m
    names = {'file-with-a-longish-name-%04d' % i for i in range(1000)}
    for n in names:
        open(P(src, n), 'w').close()
    # The second listing may come from the directory cache (dircache.h)
    # without any READDIR.
    for cmd, least in ((['ls', '-l', mnt], 1), (['ls', '-a', mnt], 0)):
        before = _settle(m, 'READDIR')
        out = util.run(cmd, check=True).stdout.split('\n')
        got = {line.split()[-1] for line in out if 'longish' in line}
        assert got == names, cmd
        sent = _settle(m, 'READDIR') - before
        assert least <= sent <= 2, '%s sent %d READDIR for 1,000 entries' % (cmd, sent)
    # A listing read bit by bit, rewound half way, is whole both times.
    fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with os.scandir(fd) as it:
            first = {e.name for e in it}
        with os.scandir(fd) as it:
            again = {e.name for e in it}
    finally:
        os.close(fd)
    assert first == names and again == names


def test_listing_is_not_reused_across_opens(mounter):
    """Without a lease a listing is trusted for entry_timeout (the
    directory cache, docs/architecture.md "Consistency model"); a new
    opendir after that lists afresh."""
    m = _debug_mount(mounter, opts=['attr_timeout=0.5', 'entry_timeout=0.5'])
    src, mnt = m
    for i in range(10):
        open(P(src, 'a%d' % i), 'w').close()
    assert len(os.listdir(mnt)) == 10
    open(P(src, 'late'), 'w').close()
    time.sleep(0.7)
    assert 'late' in os.listdir(mnt), 'a new opendir must list afresh'
