# SPDX-License-Identifier: MIT
"""The client's directory cache (fuse/fs/dir/, fuse/fs/dircache.h): what it answers
locally, and that what it answers is right.

- A tree walk (find, du, ls -lR) costs far fewer round trips than the
  tree has directories: a readdir of a directory whose parent was listed
  moments ago fetches the parent's whole subtree with SCAN, and lookups,
  getattrs and readdirs below it are then answered from the listings.
- Lookups of names missing from a listed directory are answered locally.
- Coherence: what changes on the server directly (not through the mount)
  is seen within entry_timeout/attr_timeout; two mounts of one directory
  see each other's creates and unlinks; the mount's own namespace changes
  keep the listings exact; eviction under a small cap keeps answers right.

Round trips are counted from the server's debug log (one line per
request), not timed.
"""

import os
import re
import shutil
import signal
import time

import pytest

import util

P = os.path.join

# Requests a walk may cost: everything that reads names or attributes.
WALK_OPS = ('LSTAT', 'OPENDIR', 'READDIR', 'SCAN', 'FSTAT', 'GETXATTR',
            'LISTXATTR', 'READLINK')
# ... of which these are per directory; ls -l also reads each symlink's
# target and asks for its xattrs (the server gives no NOXATTR hint for
# symlinks), once per symlink, whatever the directory cache does.
DIR_OPS = ('LSTAT', 'OPENDIR', 'READDIR', 'SCAN', 'FSTAT')


def _debug_mount(mounter, opts=(), **kw):
    b = util.build_dir()
    return mounter(build=b, server=util.server_bin(b) + ' -d', opts=opts,
                   **kw)


def _counts(m):
    """Requests per opcode the server has logged so far."""
    c = {}
    for op in re.findall(r'qftfs-server: ([A-Z_]+) id \d+', m.log()):
        c[op] = c.get(op, 0) + 1
    return c


def _settle(m, timeout=5.0, quiet=0.3):
    """Request counts reach the log a moment after the reply; wait until
    they stop moving."""
    last, since = None, time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = _counts(m)
        if c != last:
            last, since = c, time.monotonic()
        elif time.monotonic() - since > quiet:
            break
        time.sleep(0.05)
    return last


def _delta(before, after, ops=WALK_OPS):
    return {op: after.get(op, 0) - before.get(op, 0) for op in ops
            if after.get(op, 0) != before.get(op, 0)}


def _make_tree(root, ndirs=6, nsub=5, nfiles=4):
    """A two-level tree: ndirs * (1 + nsub) directories with files; returns
    the number of directories (the root included)."""
    count = 1
    for i in range(ndirs):
        d = P(root, 'dir%02d' % i)
        os.mkdir(d)
        count += 1
        for k in range(nfiles):
            with open(P(d, 'f%d.txt' % k), 'w') as f:
                f.write('x' * (k * 100 + i))
        for j in range(nsub):
            s = P(d, 'sub%02d' % j)
            os.mkdir(s)
            count += 1
            for k in range(nfiles):
                with open(P(s, 'g%d.c' % k), 'w') as f:
                    f.write('y' * (k * 10 + j))
            os.symlink('g0.c', P(s, 'link'))
    return count


def _find(root):
    out = util.run(['find', root], check=True).stdout
    return sorted(os.path.relpath(p, root) for p in out.splitlines())


def _ls_lR(root):
    out = util.run(['ls', '-lR', '--time-style=full-iso', root],
                   check=True, cwd=root).stdout
    # The header of each directory names it with the root's path.
    return out.replace(root, 'ROOT')


# Inode numbers from here on are provisional ones (fuse/fs/node.h).
VINO_BASE = 1 << 63


def _listing(path):
    """Names and the stat fields a listing carries, by name."""
    out = {}
    for name in os.listdir(path):
        st = os.lstat(P(path, name))
        out[name] = (st.st_mode, st.st_size, st.st_nlink, st.st_ino,
                     st.st_mtime_ns)
    return out


def _same_listing(mnt_dir, src_dir):
    got, want = _listing(mnt_dir), _listing(src_dir)
    assert set(got) == set(want), (sorted(got), sorted(want))
    provisional = [g[3] for g in got.values() if g[3] >= VINO_BASE]
    assert len(set(provisional)) == len(provisional), got
    for name in want:
        g, w = got[name], want[name]
        if g[3] >= VINO_BASE:
            # A file this mount created shows the number it was given
            # before the server answered (fuse/fs/node.h).
            g = g[:3] + (w[3],) + g[4:]
        # mode, size, nlink and inode exactly; mtime exactly too: the
        # server reports what the backing filesystem says.
        assert g == w, '%s: mount %r, backing %r' % (name, g, w)


def _wait_for(pred, bound, step=0.05):
    deadline = time.monotonic() + bound
    while True:
        if pred():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


# ---- a walk costs a few round trips ----

def test_find_costs_few_round_trips(mounter):
    m = _debug_mount(mounter, opts=['entry_timeout=30', 'attr_timeout=30'])
    src, mnt = m
    ndirs = _make_tree(src, ndirs=8, nsub=6)
    assert ndirs >= 50
    before = _settle(m)
    assert _find(mnt) == _find(src)
    d = _delta(before, _settle(m))
    total = sum(d.values())
    print('find over %d directories: %r' % (ndirs, d))
    assert d.get('SCAN', 0) >= 1, 'no SCAN: %r' % d
    # root: OPENDIR + READDIR; its first child: OPENDIR + READDIR-less
    # SCAN (OPENDIR + SCAN); everything else local.
    assert total <= 8, 'find over %d directories sent %d requests: %r' % (
        ndirs, total, d)


def test_du_costs_few_round_trips(mounter):
    m = _debug_mount(mounter, opts=['entry_timeout=30', 'attr_timeout=30'])
    src, mnt = m
    ndirs = _make_tree(src, ndirs=8, nsub=6)
    before = _settle(m)
    got = util.run(['du', '-s', '--apparent-size', '-B1', mnt],
                   check=True).stdout.split()[0]
    want = util.run(['du', '-s', '--apparent-size', '-B1', src],
                    check=True).stdout.split()[0]
    assert got == want
    d = _delta(before, _settle(m))
    print('du over %d directories: %r' % (ndirs, d))
    assert sum(d.values()) <= 8, d
    # And du's block counts agree too (st_blocks from the listings).
    got = util.run(['du', '-s', '-B1', mnt], check=True).stdout.split()[0]
    want = util.run(['du', '-s', '-B1', src], check=True).stdout.split()[0]
    assert got == want


def test_ls_lR_equals_backing_tree(mounter):
    m = _debug_mount(mounter, opts=['entry_timeout=30', 'attr_timeout=30'])
    src, mnt = m
    ndirs = _make_tree(src, ndirs=5, nsub=4)
    os.chmod(P(src, 'dir01', 'f1.txt'), 0o600)
    os.utime(P(src, 'dir02', 'sub01'), ns=(10**9, 2 * 10**9))
    before = _settle(m)
    assert _ls_lR(mnt) == _ls_lR(src)
    after = _settle(m)
    print('ls -lR over %d directories: %r' % (ndirs, _delta(before, after)))
    d = _delta(before, after, DIR_OPS)
    assert sum(d.values()) <= 8, d
    # Twice: all local now.
    before = _settle(m)
    assert _ls_lR(mnt) == _ls_lR(src)
    d = _delta(before, _settle(m), DIR_OPS)
    assert sum(d.values()) <= 2, d


def test_walk_without_cache_is_per_directory(mounter):
    """-o dircache=0 turns it off: the same find costs requests per
    directory, which is what the tests above would catch if the cache
    stopped answering."""
    m = _debug_mount(mounter, opts=['dircache=0', 'entry_timeout=30',
                                    'attr_timeout=30'])
    src, mnt = m
    ndirs = _make_tree(src, ndirs=4, nsub=4)
    before = _settle(m)
    assert _find(mnt) == _find(src)
    d = _delta(before, _settle(m))
    assert d.get('SCAN', 0) == 0
    assert d.get('READDIR', 0) >= ndirs, d


# ---- local answers ----

def test_missing_names_answered_locally(mounter):
    m = _debug_mount(mounter, opts=['entry_timeout=30', 'attr_timeout=30'])
    src, mnt = m
    for i in range(20):
        open(P(src, 'here%d' % i), 'w').close()
    os.listdir(mnt)
    before = _settle(m)
    for i in range(50):
        assert not os.path.exists(P(mnt, 'missing%d' % i))
        # The kernel does not keep the negative entry: asked again, the
        # cache answers again.
        assert not os.path.exists(P(mnt, 'missing%d' % i))
    for i in range(20):
        assert os.stat(P(mnt, 'here%d' % i)).st_size == 0
    d = _delta(before, _settle(m))
    assert d.get('LSTAT', 0) == 0, 'lookups went to the server: %r' % d


def test_many_lookups_read_the_directory(mounter):
    """Lookups of many names in a directory never listed (stat of many
    files, git status, make) read it whole at the second miss."""
    m = _debug_mount(mounter, opts=['entry_timeout=30', 'attr_timeout=30'])
    src, mnt = m
    os.mkdir(P(src, 'd'))
    for i in range(100):
        with open(P(src, 'd', 'f%03d' % i), 'w') as f:
            f.write('x' * i)
    before = _settle(m)
    for i in range(100):
        assert os.stat(P(mnt, 'd', 'f%03d' % i)).st_size == i
    for i in range(20):
        assert not os.path.exists(P(mnt, 'd', 'nope%d' % i))
    d = _delta(before, _settle(m))
    print('100 stats and 20 misses: %r' % d)
    assert d.get('LSTAT', 0) <= 4, d
    assert d.get('READDIR', 0) <= 2, d


def test_stale_listing_not_trusted_after_timeout(mounter):
    """Without a lease, names are trusted for entry_timeout only: a name
    created on the server is seen (and looked up from the server) after
    it."""
    m = _debug_mount(mounter, opts=['entry_timeout=0.5', 'attr_timeout=0.5'])
    src, mnt = m
    open(P(src, 'a'), 'w').close()
    assert os.listdir(mnt) == ['a']
    open(P(src, 'b'), 'w').close()
    time.sleep(0.7)
    assert sorted(os.listdir(mnt)) == ['a', 'b']
    assert os.path.exists(P(mnt, 'b'))


# ---- coherence with changes made on the server ----

TIMEOUT = 0.5


@pytest.mark.parametrize('change', ['create', 'remove', 'size', 'mode',
                                    'rename', 'mkdir', 'rmdir'])
def test_server_change_seen_within_timeout(mounter, change):
    m = _debug_mount(mounter, opts=['entry_timeout=%s' % TIMEOUT,
                                    'attr_timeout=%s' % TIMEOUT])
    src, mnt = m
    _make_tree(src, ndirs=2, nsub=2, nfiles=2)
    os.mkdir(P(src, 'gone'))
    util.run(['ls', '-lR', mnt], check=True)
    target = P(src, 'dir00')
    if change == 'create':
        with open(P(target, 'new'), 'w') as f:
            f.write('new')
    elif change == 'remove':
        os.unlink(P(target, 'f0.txt'))
    elif change == 'size':
        with open(P(target, 'f1.txt'), 'a') as f:
            f.write('more data')
    elif change == 'mode':
        os.chmod(P(target, 'f1.txt'), 0o751)
    elif change == 'rename':
        os.rename(P(target, 'f1.txt'), P(target, 'renamed'))
    elif change == 'mkdir':
        os.mkdir(P(target, 'newdir'))
        open(P(target, 'newdir', 'inside'), 'w').close()
    elif change == 'rmdir':
        os.rmdir(P(src, 'gone'))
        target = src
    time.sleep(TIMEOUT + 0.3)
    _same_listing(P(mnt, os.path.relpath(target, src)), target)
    assert _find(mnt) == _find(src)


def test_two_mounts_see_each_other(mounter, tmp_path):
    src = str(tmp_path / 'shared')
    os.mkdir(src)
    opts = ['entry_timeout=%s' % TIMEOUT, 'attr_timeout=%s' % TIMEOUT]
    a = _debug_mount(mounter, src=src, opts=opts)
    b = _debug_mount(mounter, src=src, opts=opts)
    for i in range(5):
        open(P(src, 'pre%d' % i), 'w').close()
    os.listdir(a.mnt)
    os.listdir(b.mnt)
    with open(P(a.mnt, 'from_a'), 'w') as f:
        f.write('a')
    assert 'from_a' in os.listdir(a.mnt)
    assert _wait_for(lambda: 'from_a' in os.listdir(b.mnt), TIMEOUT + 0.5)
    with open(P(b.mnt, 'from_a')) as f:
        assert f.read() == 'a'
    os.unlink(P(b.mnt, 'pre0'))
    assert 'pre0' not in os.listdir(b.mnt)
    assert not os.path.exists(P(b.mnt, 'pre0'))
    assert _wait_for(lambda: 'pre0' not in os.listdir(a.mnt) and
                     not os.path.exists(P(a.mnt, 'pre0')), TIMEOUT + 0.5)
    os.mkdir(P(a.mnt, 'd'))
    assert _wait_for(lambda: os.path.isdir(P(b.mnt, 'd')), TIMEOUT + 0.5)
    _same_listing(a.mnt, src)
    _same_listing(b.mnt, src)


# ---- the mount's own changes keep the listings exact ----

def test_own_changes_keep_listings_exact(mounter):
    # Long timeouts: only the cache's own bookkeeping keeps it right.
    m = _debug_mount(mounter, opts=['entry_timeout=60', 'attr_timeout=60'])
    src, mnt = m
    _make_tree(src, ndirs=2, nsub=2, nfiles=3)
    util.run(['ls', '-lR', mnt], check=True)
    d0, d1 = P(mnt, 'dir00'), P(mnt, 'dir01')
    s0, s1 = P(src, 'dir00'), P(src, 'dir01')

    def check():
        _same_listing(d0, s0)
        _same_listing(d1, s1)
        _same_listing(mnt, src)
        assert _find(mnt) == _find(src)

    os.mkdir(P(d0, 'made'))
    assert os.listdir(P(d0, 'made')) == []
    check()
    with open(P(d0, 'made', 'inner'), 'w') as f:
        f.write('12345')
    assert os.listdir(P(d0, 'made')) == ['inner']
    assert os.stat(P(d0, 'made', 'inner')).st_size == 5
    check()
    os.rename(P(d0, 'f0.txt'), P(d1, 'moved.txt'))
    check()
    os.rename(P(d0, 'f1.txt'), P(d0, 'f2.txt'))         # over a file
    check()
    os.rename(P(d0, 'made'), P(d1, 'made2'))            # a directory
    assert os.listdir(P(d1, 'made2')) == ['inner']
    check()
    util.renameat2(P(d1, 'moved.txt'), P(d1, 'f0.txt'), 2)   # EXCHANGE
    check()
    with pytest.raises(FileExistsError):
        util.renameat2(P(d1, 'f0.txt'), P(d1, 'f1.txt'), 1)  # NOREPLACE
    check()
    os.unlink(P(d1, 'f1.txt'))
    check()
    os.link(P(d1, 'f2.txt'), P(d0, 'hard'))
    check()
    os.symlink('target', P(d0, 'sym'))
    check()
    os.mkfifo(P(d0, 'fifo'))
    check()
    os.unlink(P(d1, 'made2', 'inner'))
    os.rmdir(P(d1, 'made2'))
    check()
    # A file written through the mount: size and mtime from the server.
    # (Not through a hard link: the kernel keeps attributes per name for
    # attr_timeout, cache or not.)
    with open(P(d0, 'f2.txt'), 'a') as f:
        f.write('appended')
    check()
    os.chmod(P(d0, 'f2.txt'), 0o640)
    os.truncate(P(d1, 'f0.txt'), 3)
    check()
    # Failures leave nothing wrong behind.
    with pytest.raises(FileExistsError):
        os.mkdir(P(d0, 'sym'))
    with pytest.raises(OSError):
        os.rmdir(P(mnt, 'dir01'))                        # not empty
    check()


def test_created_on_server_after_listing_eexist(mounter):
    """A listing that says a name is absent must not make a create of it
    succeed when the server has it meanwhile (O_EXCL semantics)."""
    m = _debug_mount(mounter, opts=['entry_timeout=60', 'attr_timeout=60'])
    src, mnt = m
    os.listdir(mnt)
    with open(P(src, 'lock'), 'w') as f:
        f.write('held')
    with pytest.raises(FileExistsError):
        os.open(P(mnt, 'lock'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    assert os.listdir(mnt) == ['lock']


# ---- bounded memory ----

def test_eviction_under_small_cap(mounter):
    m = _debug_mount(mounter, opts=['dircache=40', 'entry_timeout=30',
                                    'attr_timeout=30'],
                     extra_args=['-d'])
    src, mnt = m
    _make_tree(src, ndirs=6, nsub=4, nfiles=4)
    for _ in range(2):
        assert _find(mnt) == _find(src)
        assert _ls_lR(mnt) == _ls_lR(src)
    os.mkdir(P(mnt, 'dir03', 'x'))
    os.unlink(P(mnt, 'dir04', 'sub01', 'g1.c'))
    assert _ls_lR(mnt) == _ls_lR(src)
    assert 'dircache: evicting' in m.log()


def test_scan_of_a_tree_bigger_than_the_cap(mounter):
    m = _debug_mount(mounter, opts=['dircache=60', 'entry_timeout=30',
                                    'attr_timeout=30'])
    src, mnt = m
    _make_tree(src, ndirs=10, nsub=6, nfiles=3)
    assert _find(mnt) == _find(src)
    assert _ls_lR(mnt) == _ls_lR(src)


# ---- leases: the server says when a cached directory changed ----

LEASE_BOUND = 2.0       # seconds a notified change may take to show
LONG = ['entry_timeout=60', 'attr_timeout=60']


def _converges(mnt_dir, src_dir, bound=LEASE_BOUND):
    """Whether the mount's listing of mnt_dir comes to equal the backing
    one within `bound` seconds."""
    def same():
        try:
            _same_listing(mnt_dir, src_dir)
            return True
        except (AssertionError, OSError):
            return False
    return _wait_for(same, bound)


def _change(kind, src):
    target = P(src, 'dir00')
    if kind == 'create':
        with open(P(target, 'new'), 'w') as f:
            f.write('new')
    elif kind == 'remove':
        os.unlink(P(target, 'f0.txt'))
    elif kind == 'size':
        with open(P(target, 'f1.txt'), 'a') as f:
            f.write('more data')
    elif kind == 'mode':
        os.chmod(P(target, 'f1.txt'), 0o751)
    elif kind == 'rename':
        os.rename(P(target, 'f1.txt'), P(target, 'renamed'))
    elif kind == 'mkdir':
        os.mkdir(P(target, 'newdir'))
    elif kind == 'rmdir':
        os.rmdir(P(target, 'sub00'))
    return target


@pytest.mark.parametrize('change', ['create', 'remove', 'size', 'mode',
                                    'rename', 'mkdir', 'rmdir'])
def test_lease_change_seen_promptly(mounter, change):
    """With a lease, a change made on the server is seen within a couple
    of seconds however long the timeouts (60 s here)."""
    m = _debug_mount(mounter, opts=LONG)
    src, mnt = m
    os.mkdir(P(src, 'dir00'))
    for k in range(3):
        with open(P(src, 'dir00', 'f%d.txt' % k), 'w') as f:
            f.write('x' * k)
    os.mkdir(P(src, 'dir00', 'sub00'))
    mdir = P(mnt, 'dir00')
    # Both listed, so leased: the kernel may forget dir00's dentry, and
    # its lookup is then answered from the root's listing.  (The root
    # second: the other way round looks like a walk, whose SCAN listings
    # hold for entry_timeout, without a lease.)
    _same_listing(mdir, P(src, 'dir00'))
    os.listdir(mnt)
    before = _settle(m)
    _same_listing(mdir, P(src, 'dir00'))
    d = _delta(before, _settle(m), DIR_OPS)
    # The directory's own GETATTR (the kernel drops its attributes after
    # a readdir, for atime) is not the listing's; the entries are.
    assert d.get('READDIR', 0) == d.get('OPENDIR', 0) == 0, d
    assert d.get('LSTAT', 0) <= 1, 'a leased listing went to the server: %r' % d
    target = _change(change, src)
    assert _converges(mdir, target), (
        'the mount still shows %r, the server has %r' % (
            sorted(os.listdir(mdir)), sorted(os.listdir(target))))
    assert 'NOTIFY' in m.log()


def test_lease_on_a_directory_made_through_the_mount(mounter):
    m = _debug_mount(mounter, opts=LONG)
    src, mnt = m
    os.mkdir(P(mnt, 'made'))
    assert os.listdir(P(mnt, 'made')) == []
    # Its lease comes without waiting; give it a moment, then a file made
    # on the server behind the mount's back must show despite 60 s.
    time.sleep(0.3)
    open(P(src, 'made', 'foreign'), 'w').close()
    assert _converges(P(mnt, 'made'), P(src, 'made'))


def test_lease_two_mounts(mounter, tmp_path):
    src = str(tmp_path / 'shared')
    os.mkdir(src)
    a = _debug_mount(mounter, src=src, opts=LONG)
    b = _debug_mount(mounter, src=src, opts=LONG)
    for i in range(5):
        open(P(src, 'pre%d' % i), 'w').close()
    _same_listing(a.mnt, src)
    _same_listing(b.mnt, src)
    with open(P(a.mnt, 'from_a'), 'w') as f:
        f.write('a')
    assert _converges(b.mnt, src)
    assert os.path.exists(P(b.mnt, 'from_a'))
    os.unlink(P(b.mnt, 'pre0'))
    assert _converges(a.mnt, src)
    assert not os.path.exists(P(a.mnt, 'pre0'))
    os.rename(P(a.mnt, 'pre1'), P(a.mnt, 'moved'))
    assert _converges(b.mnt, src)
    os.mkdir(P(b.mnt, 'dir'))
    with open(P(b.mnt, 'dir', 'inner'), 'w') as f:
        f.write('inner')
    assert _converges(a.mnt, src)
    assert _wait_for(lambda: os.listdir(P(a.mnt, 'dir')) == ['inner'],
                     LEASE_BOUND)


def test_reconnect_drops_leases(mounter):
    """Leases are the link's: after the server is killed and the mount
    reconnects, nothing cached before is trusted (a change made while the
    link was down is seen)."""
    m = _debug_mount(mounter, opts=LONG)
    src, mnt = m
    for i in range(5):
        open(P(src, 'f%d' % i), 'w').close()
    _same_listing(mnt, src)
    assert m.server_pids, 'no server child found'
    for pid in m.server_pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.unlink(P(src, 'f0'))
    open(P(src, 'while_down'), 'w').close()

    def seen():
        try:
            return (os.path.exists(P(mnt, 'while_down')) and
                    not os.path.exists(P(mnt, 'f0')) and
                    sorted(os.listdir(mnt)) == sorted(os.listdir(src)))
        except OSError:
            return False
    assert _wait_for(seen, 30, step=0.2), sorted(os.listdir(mnt))
    _same_listing(mnt, src)


def test_pipelined_creates_enter_the_listing(mounter):
    """Files created through the mount (pipelined CREATEs answered before
    the server) are in the directory's listing at once, with the server's
    attributes once it answered; O_EXCL holds."""
    m = _debug_mount(mounter, opts=LONG)
    src, mnt = m
    os.mkdir(P(mnt, 'd'))
    assert os.listdir(P(mnt, 'd')) == []
    time.sleep(0.2)                     # its lease
    names = ['f%02d' % i for i in range(20)]
    for i, n in enumerate(names):
        with open(P(mnt, 'd', n), 'w') as f:
            f.write('z' * i)
    assert sorted(os.listdir(P(mnt, 'd'))) == names
    _same_listing(P(mnt, 'd'), P(src, 'd'))
    fd = os.open(P(mnt, 'd', 'excl'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.close(fd)
    with pytest.raises(FileExistsError):
        os.open(P(mnt, 'd', 'excl'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    with pytest.raises(FileExistsError):
        os.open(P(mnt, 'd', 'f00'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    _same_listing(P(mnt, 'd'), P(src, 'd'))
    # A refused create leaves no name behind.
    os.chmod(P(src, 'd'), 0o500)
    try:
        if os.geteuid() != 0:
            with pytest.raises(PermissionError):
                with open(P(mnt, 'd', 'denied'), 'w') as f:
                    f.write('x')
            assert 'denied' not in os.listdir(P(mnt, 'd'))
    finally:
        os.chmod(P(src, 'd'), 0o755)
    _same_listing(P(mnt, 'd'), P(src, 'd'))
