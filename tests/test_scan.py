# SPDX-License-Identifier: MIT
"""Protocol version 2 at the wire: SCAN, OPEN with first data, FLUSH
attributes, HELLO's uid and gid, and the refusal of a version 1 HELLO.

Everything speaks to `qftfs-server --stdio` directly (tests/wire.py), so
each case can send exactly the requests it needs and check every byte of
the answers against the files as os.lstat sees them:

- a SCAN of a tree of directories, files, symlinks and a FIFO names every
  object once, under the right parent, with os.lstat's attributes and the
  NOXATTR hint as READDIR PLUS computes it, and ends every directory with
  a DIR_END of status 0; a small budget splits it over many replies with
  nothing lost or sent twice, and a budget that holds no record is EINVAL
  without losing it; a 9,000-entry directory takes a handful of replies;
- a directory that cannot be listed (mode 000 for a server that is not
  root; as root the server runs as nobody for that case), one without
  search permission, and ones removed or replaced by a symlink between
  being announced and being listed end with a DIR_END that says why;
- symlinks, also to directories inside and outside the root, are entries,
  never descended;
- with the limits lowered (QFTFS_SCAN_LIMITS, fault-injection builds), a
  scan cut short by its entry cap or its queue's memory says TRUNCATED,
  and exactly the directories it listed in full have a DIR_END;
- SCAN on a file handle, an unbound handle, with unknown flags or an
  oversized budget is an error and the connection goes on; the reserved
  WATCH flag is accepted; CLOSE in the middle of a scan frees its
  descriptors, and the handle number then starts a fresh scan;
- OPEN with a length returns the file's first bytes for regular files
  opened for reading, and nothing for directories, FIFOs, write-only
  opens or length 0;
- FLUSH's attributes are os.stat's after the writes.
"""

import os
import shutil
import stat
import struct
import tempfile

import pytest

import util
import wire

MiB = 1 << 20
NOBODY = ('setpriv', '--reuid=65534', '--regid=65534', '--clear-groups')


def _server_exe():
    exe = util.server_bin(util.build_dir())
    if not os.access(exe, os.X_OK):
        pytest.fail('not built: %s' % exe, pytrace=False)
    return exe


@pytest.fixture
def start(wire_server):
    """wire_server (conftest.py): start(root, hello=True, wrapper=(),
    extra_env=None) -> wire.Server."""
    return wire_server


# ---------------------------------------------------------------------------
# A SCAN client, written from docs/protocol.md


class Scan:
    """The state a client keeps across the replies of one scan: every
    index announced (index -> path below the scanned directory), every
    entry (path -> Attr) and every DIR_END (index -> status)."""

    def __init__(self):
        self.paths = {0: ''}
        self.entries = {}
        self.ends = {}
        self.watched = set()
        self.replies = 0
        self.flags = 0

    def feed(self, data, budget):
        assert len(data) <= budget, 'reply of %d bytes over a budget of %d' \
            % (len(data), budget)
        base, recs = wire.parse_scan(data)
        assert base == len(self.paths), \
            'reply starts at index %d, %d were announced' % (
                base, len(self.paths))
        for r in recs:
            if r[0] == 'entry':
                _, parent, name, a = r
                name = name.decode()
                assert parent in self.paths, 'parent %d unknown' % parent
                assert parent not in self.ends, \
                    'entry %r after its directory ended' % name
                assert '/' not in name and name not in ('', '.', '..')
                path = os.path.join(self.paths[parent], name)
                assert path not in self.entries, '%r sent twice' % path
                self.entries[path] = a
                if stat.S_ISDIR(a.mode):
                    self.paths[len(self.paths)] = path
            elif r[0] == 'watched':
                _, index = r
                assert index in self.paths, 'WATCHED of unknown %d' % index
                assert index not in self.ends, \
                    'WATCHED of %d after its DIR_END' % index
                self.watched.add(index)
            else:
                _, index, status = r
                assert index in self.paths, 'DIR_END of unknown %d' % index
                assert index not in self.ends, 'two DIR_ENDs for %d' % index
                self.ends[index] = status
        self.replies += 1

    def end_of(self, path):
        """The DIR_END status name of directory `path`, or None."""
        for i, p in self.paths.items():
            if p == path:
                st = self.ends.get(i)
                return None if st is None else wire.STATUS[st]
        raise KeyError(path)


def scan(srv, handle, budget=wire.MAX_DATA, opflags=0, limit=100000, s=None):
    """SCANs until EOF; `s` continues a scan already under way."""
    s = s or Scan()
    while True:
        r = srv.call('SCAN', handle=handle, length=budget, opflags=opflags)
        assert r.status == 0, r
        s.feed(r['data'], budget)
        if r['opflags'] & wire.SCAN_EOF:
            s.flags = r['opflags']
            return s
        assert s.replies < limit, 'scan does not end'


def scan_path(srv, path, handle=1, **kw):
    r = srv.call('OPENDIR', handle=handle, path=path)
    assert r.status == 0, r
    s = scan(srv, handle, **kw)
    assert srv.call('CLOSE', handle=handle).status == 0
    return s


def walk_tree(top):
    """path below `top` -> os.lstat, never following symlinks."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, top)] = os.lstat(p)
    return out


def noxattr(path):
    st = os.lstat(path)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return False
    return os.listxattr(path, follow_symlinks=False) == []


def check_attr(a, st, path, what):
    got = (a.ino, a.mode, a.nlink, a.uid, a.gid, a.rdev, a.size, a.blocks,
           a.mtime, a.ctime)
    want = (st.st_ino, st.st_mode, st.st_nlink, st.st_uid, st.st_gid,
            st.st_rdev, st.st_size, st.st_blocks,
            (st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9),
            (st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9))
    assert got == want, '%s: %s differs:\n got %r\nwant %r' % (
        what, path, got, want)
    if not stat.S_ISDIR(st.st_mode):   # listing a directory may touch it
        assert a.atime == (st.st_atime_ns // 10**9, st.st_atime_ns % 10**9)


def make_tree(top, dirs=40, files=400, seed=3):
    """A tree of `dirs` directories (up to 6 deep) and `files` files of a
    few sizes, with symlinks, a hard link, a FIFO and an xattr."""
    import random
    rng = random.Random(seed)
    made = ['']
    for i in range(dirs):
        parent = rng.choice([d for d in made if d.count('/') < 5])
        d = os.path.join(parent, 'd%02d' % i)
        os.mkdir(os.path.join(top, d))
        made.append(d)
    for i in range(files):
        d = rng.choice(made)
        with open(os.path.join(top, d, 'f%03d.txt' % i), 'wb') as f:
            f.write(b'x' * rng.choice([0, 1, 100, 4096, 70000]))
    os.symlink('d00', os.path.join(top, 'link-to-dir'))
    os.symlink('nowhere', os.path.join(top, made[-1], 'dangling'))
    with open(os.path.join(top, 'hard-src'), 'wb') as f:
        f.write(b'linked')
    os.link(os.path.join(top, 'hard-src'), os.path.join(top, made[2], 'hl'))
    os.mkfifo(os.path.join(top, made[3], 'fifo'))
    try:
        os.setxattr(os.path.join(top, made[4]), 'user.qftfs', b'1')
        os.setxattr(os.path.join(top, 'hard-src'), 'user.qftfs', b'1')
    except OSError:
        pass   # no user xattrs here: NOXATTR is then set everywhere
    return made


def _unprivileged_tree():
    """A directory nobody (65534) can reach, owned by it; removed by the
    caller."""
    top = tempfile.mkdtemp(prefix='qftfs-scan-')
    os.chmod(top, 0o755)
    return top



# ---------------------------------------------------------------------------
# HELLO


def test_hello_carries_server_ids(start, tmp_path):
    srv = start(tmp_path, hello=False)
    r = srv.hello()
    assert r.status == 0, r
    assert r['version'] == wire.VERSION == 2
    assert (r['uid'], r['gid']) == (os.geteuid(), os.getegid())


def test_hello_ids_of_another_user(start, tmp_path, need_root):
    """The ids are the server's, not a constant: run it as nobody."""
    if not shutil.which('setpriv'):
        pytest.skip('setpriv is not installed')
    top = _unprivileged_tree()
    try:
        srv = start(top, hello=False, wrapper=NOBODY)
        r = srv.hello()
        assert r.status == 0, '%r\n%s' % (r, srv.log())
        assert (r['uid'], r['gid']) == (65534, 65534)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_version_1_hello_is_refused(start, tmp_path):
    srv = start(tmp_path, hello=False)
    srv.refused = True
    r = srv.hello(version=1)
    assert r.err == 'EPROTO', r
    msg = r.errmsg.decode()
    assert 'client speaks v1' in msg and 'speaks v2' in msg, msg
    assert srv.closed_by_peer(), 'the server kept a v1 connection open'


def test_future_hello_is_refused_not_misparsed(start, tmp_path):
    """A HELLO of a later version with more fields still gets the version
    message, not a dropped connection for a malformed frame."""
    srv = start(tmp_path, hello=False)
    srv.refused = True
    srv.send_raw(wire.frame('HELLO', struct.pack('>IIIQ', wire.MAGIC, 3, 0,
                                                 0x1234), rid=7))
    r = srv.recv()
    assert r is not None and r.id == 7 and r.err == 'EPROTO', r
    assert 'client speaks v3' in r.errmsg.decode(), r
    assert srv.closed_by_peer()


# ---------------------------------------------------------------------------
# SCAN: what it returns


def test_scan_matches_lstat(start, tmp_path):
    root = tmp_path / 'root'
    root.mkdir()
    made = make_tree(str(root))
    want = walk_tree(str(root))
    srv = start(root)
    s = scan_path(srv, '')
    assert s.flags == wire.SCAN_EOF, 'flags %#x' % s.flags
    assert set(s.entries) == set(want), \
        'missing %r, extra %r' % (sorted(set(want) - set(s.entries))[:10],
                                  sorted(set(s.entries) - set(want))[:10])
    for p, st in want.items():
        check_attr(s.entries[p], st, p, 'SCAN entry')
        hint = bool(s.entries[p].flags & wire.Attr.NOXATTR)
        assert hint == noxattr(os.path.join(root, p)), \
            '%s: NOXATTR %r' % (p, hint)
    # Every directory announced once, each listing complete.
    dirs = sorted(p for p, st in want.items() if stat.S_ISDIR(st.st_mode))
    assert sorted(p for i, p in s.paths.items() if i) == dirs
    assert len(dirs) == len(made) - 1
    assert s.ends == {i: 0 for i in s.paths}, s.ends
    # Breadth-first: indexes never go back up the tree.
    depth = [s.paths[i].count('/') + bool(s.paths[i]) for i in
             sorted(s.paths)]
    assert depth == sorted(depth), 'not breadth-first: %r' % depth

    # The same, below a subdirectory, and with the reserved WATCH bit.
    sub = made[1]
    s2 = scan_path(srv, sub, opflags=wire.SCAN_WATCH)
    below = {p[len(sub) + 1:] for p in want if p.startswith(sub + '/')}
    assert set(s2.entries) == below


@pytest.mark.parametrize('notify', [True, False], ids=['notify', 'no-notify'])
def test_scan_watch_leases_every_directory(start, tmp_path, notify):
    """SCAN with WATCH, once HELLO granted change notification: every
    directory listed completely is WATCHED (right before its DIR_END),
    even over many small replies; without the feature, none is."""
    root = tmp_path / 'root'
    root.mkdir()
    make_tree(str(root), dirs=30, files=200)
    srv = start(root, hello=False)
    r = srv.call('HELLO', magic=wire.MAGIC, version=wire.VERSION,
                 features=0x4 if notify else 0)
    assert r.status == 0, r
    assert bool(r['features'] & 0x4) == notify, r
    srv.call('OPENDIR', handle=1, path='')
    s = scan(srv, 1, budget=2048, opflags=wire.SCAN_WATCH)
    srv.call('CLOSE', handle=1)
    assert s.replies > 5
    complete = {i for i, st in s.ends.items() if st == 0}
    assert complete == set(s.paths), 'not every directory was listed'
    if notify:
        assert s.watched == complete, sorted(complete - s.watched)
    else:
        assert not s.watched


def test_scan_small_budget_loses_nothing(start, tmp_path):
    root = tmp_path / 'root'
    root.mkdir()
    make_tree(str(root), dirs=30, files=200, seed=9)
    srv = start(root)
    whole = scan_path(srv, '')
    assert whole.replies == 1
    for budget in (250, 333, 1000, 4096):
        part = scan_path(srv, '', budget=budget)
        assert part.replies > len(whole.entries) * 110 // budget // 2, \
            'budget %d: only %d replies' % (budget, part.replies)
        assert part.paths == whole.paths, 'budget %d' % budget
        assert {p: a.ino for p, a in part.entries.items()} == \
            {p: a.ino for p, a in whole.entries.items()}, 'budget %d' % budget
        assert part.ends == whole.ends


def test_scan_budget_too_small_loses_nothing(start, tmp_path):
    root = tmp_path / 'root'
    (root / 'sub').mkdir(parents=True)
    (root / ('n' * 200)).write_bytes(b'')
    srv = start(root)
    assert srv.call('OPENDIR', handle=1, path='').status == 0
    s = Scan()
    for budget in (0, 3, 4, 100, 200):
        r = srv.call('SCAN', handle=1, length=budget, opflags=0)
        assert r.err == 'EINVAL', (budget, r)
        assert 'holds no record' in r.errmsg.decode()
    while not s.flags:
        r = srv.call('SCAN', handle=1, length=320, opflags=0)
        assert r.status == 0, r
        s.feed(r['data'], 320)
        s.flags = r['opflags'] & wire.SCAN_EOF
    assert set(s.entries) == {'sub', 'n' * 200}
    assert s.ends == {0: 0, 1: 0}
    # After the end: empty replies with EOF, for ever.
    for _ in range(2):
        r = srv.call('SCAN', handle=1, length=4096, opflags=0)
        assert r.status == 0 and r['opflags'] == wire.SCAN_EOF, r
        assert wire.parse_scan(r['data']) == (2, [])


def test_scan_9000_entries_in_a_few_replies(start, tmp_path):
    root = tmp_path / 'root'
    (root / 'many').mkdir(parents=True)
    for i in range(9000):
        open(root / 'many' / ('file-%05d.h' % i), 'wb').close()
    srv = start(root)
    s = scan_path(srv, '')
    assert len(s.entries) == 9001
    assert s.replies <= 3, '%d replies for 9,000 entries' % s.replies
    assert s.ends == {0: 0, 1: 0}


def test_scan_does_not_follow_symlinks(start, tmp_path):
    root = tmp_path / 'root'
    outside = tmp_path / 'outside'
    (root / 'real').mkdir(parents=True)
    (root / 'real' / 'inner').write_bytes(b'in')
    outside.mkdir()
    (outside / 'secret').write_bytes(b'out')
    os.symlink('real', root / 'in-link')
    os.symlink(str(outside), root / 'out-link')
    os.symlink('../outside', root / 'rel-out')
    srv = start(root)
    s = scan_path(srv, '')
    assert set(s.entries) == {'real', 'real/inner', 'in-link', 'out-link',
                              'rel-out'}
    for n in ('in-link', 'out-link', 'rel-out'):
        assert stat.S_ISLNK(s.entries[n].mode), n
    assert sorted(s.paths.values()) == ['', 'real']


# ---------------------------------------------------------------------------
# SCAN: listings that are not complete


def test_unreadable_directories_are_not_complete(start, tmp_path):
    """Mode 000 (cannot be listed) and 0644 (listed, but its entries
    cannot be stat'ed): neither is complete; the rest is."""
    as_root = os.geteuid() == 0
    if as_root and not shutil.which('setpriv'):
        pytest.skip('SKIPPING: as root, mode 000 means nothing to the '
                    'server unless it runs as another user, and setpriv '
                    'is not installed')
    top = _unprivileged_tree() if as_root else str(tmp_path)
    try:
        root = os.path.join(top, 'root')
        for d in ('ok', 'closed', 'noexec'):
            os.makedirs(os.path.join(root, d))
            with open(os.path.join(root, d, 'f'), 'wb') as f:
                f.write(b'data')
        os.mkdir(os.path.join(root, 'closed', 'below'))
        if as_root:
            for d, _, fs in os.walk(root):
                for p in [d] + [os.path.join(d, n) for n in fs]:
                    os.chown(p, 65534, 65534)
        os.chmod(os.path.join(root, 'closed'), 0)
        os.chmod(os.path.join(root, 'noexec'), 0o644)
        wrapper = NOBODY if as_root else ()
        srv = start(root, wrapper=wrapper)
        s = scan_path(srv, '')
        assert s.end_of('') == 'OK'
        assert s.end_of('ok') == 'OK'
        assert s.end_of('closed') == 'EACCES'
        assert s.end_of('noexec') == 'EACCES'
        assert 'ok/f' in s.entries
        assert not any(p.startswith('closed/') or p.startswith('noexec/')
                       for p in s.entries), sorted(s.entries)
        assert s.flags == wire.SCAN_EOF
    finally:
        for d in ('closed', 'noexec'):
            p = os.path.join(top, 'root', d)
            if os.path.exists(p):
                os.chmod(p, 0o755)
        if as_root:
            shutil.rmtree(top, ignore_errors=True)


def test_directories_changed_mid_scan(start, tmp_path):
    """Announced, then removed, replaced by a symlink or by a file before
    the scan reaches them: a DIR_END with the error, never a listing of
    what the symlink points at."""
    root = tmp_path / 'root'
    names = ['a', 'b', 'c', 'd', 'e']
    for n in names:
        (root / n).mkdir(parents=True)
        (root / n / 'f').write_bytes(b'x')
    (tmp_path / 'elsewhere').mkdir()
    (tmp_path / 'elsewhere' / 'secret').write_bytes(b's')
    srv = start(root)
    assert srv.call('OPENDIR', handle=1, path='').status == 0
    s = Scan()
    # One record per reply, until the root's DIR_END.
    while 0 not in s.ends:
        r = srv.call('SCAN', handle=1, length=150, opflags=0)
        assert r.status == 0 and not r['opflags'], r
        s.feed(r['data'], 150)
    # The server may already hold index 1 open; 3, 4 and 5 it has not
    # touched yet.
    victims = [s.paths[i] for i in (3, 4, 5)]
    shutil.rmtree(root / victims[0])
    shutil.rmtree(root / victims[1])
    os.symlink(str(tmp_path / 'elsewhere'), root / victims[1])
    shutil.rmtree(root / victims[2])
    (root / victims[2]).write_bytes(b'now a file')
    scan(srv, 1, budget=150, s=s)
    assert s.flags == wire.SCAN_EOF
    assert s.end_of(victims[0]) == 'ENOENT'
    assert s.end_of(victims[1]) in ('ELOOP', 'ENOTDIR')
    assert s.end_of(victims[2]) in ('ENOTDIR', 'ELOOP')
    assert not any(p.endswith('secret') for p in s.entries)
    for i in (1, 2):
        assert s.end_of(s.paths[i]) == 'OK'


@pytest.fixture
def test_limits():
    r = util.run([_server_exe(), '--version'], timeout=30)
    if 'fault-injection' not in r.stdout + r.stderr:
        pytest.skip('SKIPPING SCAN LIMIT CASES: %s was built without '
                    '-Dfault_injection=true, so QFTFS_SCAN_LIMITS cannot '
                    'lower the limits' % _server_exe())


def _check_listed(s, root):
    """Every directory with a DIR_END of status 0 was listed in full."""
    for i, st in s.ends.items():
        assert st == 0, (s.paths[i], st)
        d = s.paths[i]
        got = {p for p in s.entries if os.path.dirname(p) == d}
        want = {os.path.join(d, n) for n in os.listdir(os.path.join(root, d))}
        assert got == want, d


def test_scan_entry_cap_truncates(start, tmp_path, test_limits):
    root = tmp_path / 'root'
    root.mkdir()
    make_tree(str(root), dirs=20, files=100, seed=11)
    srv = start(root, extra_env={'QFTFS_SCAN_LIMITS': '50,100000000'})
    s = scan_path(srv, '', budget=700)
    assert s.flags == wire.SCAN_EOF | wire.SCAN_TRUNCATED, hex(s.flags)
    assert len(s.entries) == 50
    assert len(s.ends) < len(s.paths), 'every directory claims to be complete'
    _check_listed(s, str(root))
    assert 'test scan limits armed' in srv.log()


def test_scan_queue_memory_truncates(start, tmp_path, test_limits):
    root = tmp_path / 'root'
    root.mkdir()
    for i in range(100):
        (root / ('dir%03d' % i)).mkdir()
        (root / ('dir%03d' % i) / 'f').write_bytes(b'')
    srv = start(root, extra_env={'QFTFS_SCAN_LIMITS': '1000000,2000'})
    s = scan_path(srv, '')
    assert s.flags == wire.SCAN_EOF | wire.SCAN_TRUNCATED, hex(s.flags)
    # Every directory announced, some never listed.
    assert len(s.paths) == 101
    assert 1 < len(s.ends) < 101, len(s.ends)
    _check_listed(s, str(root))
    # The budget is the connection's: the next scan has it all again.
    s2 = scan_path(srv, 'dir000')
    assert s2.flags == wire.SCAN_EOF and set(s2.entries) == {'f'}


# ---------------------------------------------------------------------------
# SCAN: misuse and lifetime


def test_scan_misuse_is_an_error_not_a_crash(start, tmp_path):
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'f').write_bytes(b'x')
    srv = start(root)
    assert srv.call('OPEN', handle=1, path='f', opflags=0).status == 0
    assert srv.call('SCAN', handle=1, length=4096).err == 'EBADF'
    assert srv.call('SCAN', handle=2, length=4096).err == 'EBADF'
    assert srv.call('SCAN', handle=60000, length=4096).err == 'EBADF'
    assert srv.call('SCAN', handle=0, length=4096).err == 'EINVAL'
    assert srv.call('OPENDIR', handle=3, path='').status == 0
    assert srv.call('SCAN', handle=3, length=4096, opflags=0x2).err == 'EINVAL'
    assert srv.call('SCAN', handle=3, length=MiB + 1).err == 'EINVAL'
    # READ on the directory handle is still refused, and the scan works.
    assert srv.call('READ', handle=3, offset=0, length=1).err == 'EBADF'
    s = scan(srv, 3)
    assert set(s.entries) == {'f'}
    assert wire.alive(srv)


def _fds(srv):
    return len(os.listdir('/proc/%d/fd' % srv.proc.pid))


def test_close_mid_scan_frees_it(start, tmp_path):
    root = tmp_path / 'root'
    root.mkdir()
    make_tree(str(root), dirs=20, files=100, seed=5)
    srv = start(root)
    assert wire.alive(srv)
    before = _fds(srv)
    for h in range(1, 21):
        assert srv.call('OPENDIR', handle=h, path='').status == 0
        r = srv.call('SCAN', handle=h, length=600, opflags=0)
        assert r.status == 0 and not r['opflags'], r
    assert _fds(srv) > before + 20
    for h in range(1, 21):
        assert srv.call('CLOSE', handle=h).status == 0
    assert _fds(srv) == before, 'descriptors left behind by closed scans'
    assert srv.call('SCAN', handle=1, length=4096).err == 'EBADF'
    # The number starts a fresh scan once bound again.
    assert srv.call('OPENDIR', handle=1, path='').status == 0
    r = srv.call('SCAN', handle=1, length=4096, opflags=0)
    assert r.status == 0 and wire.parse_scan(r['data'])[0] == 1
    # READDIR on the same handle is not disturbed by the scan.
    r = srv.call('READDIR', handle=1, offset=0, length=65536, opflags=0)
    assert r.status == 0 and r['opflags'] == 0x1, r
    names = {n.decode() for n, _, _ in wire.parse_dirents(r['data'])}
    assert names == set(os.listdir(root)) | {'.', '..'}


# ---------------------------------------------------------------------------
# OPEN with first data, FLUSH attributes


def test_open_returns_first_data(start, tmp_path):
    (tmp_path / 'small').write_bytes(b'hello, world\n')
    big = os.urandom(300000)
    (tmp_path / 'big').write_bytes(big)
    (tmp_path / 'empty').write_bytes(b'')
    (tmp_path / 'd').mkdir()
    os.mkfifo(tmp_path / 'fifo')
    srv = start(tmp_path)
    h = iter(range(1, 100))

    def op(path, flags, length):
        r = srv.call('OPEN', handle=next(h), path=path, opflags=flags,
                     length=length)
        assert r.status == 0, (path, r)
        return r['opflags'], r['data'], r['attr']

    fl, data, a = op('small', wire.O_RDONLY, 4096)
    assert (fl, data) == (wire.OPEN_DATA | wire.OPEN_EOF, b'hello, world\n')
    assert a.size == 13
    assert op('small', wire.O_RDONLY, 13)[:2] == (wire.OPEN_DATA,
                                                  b'hello, world\n')
    assert op('small', wire.O_RDONLY, 5)[:2] == (wire.OPEN_DATA, b'hello')
    assert op('big', wire.O_RDONLY, 65536)[:2] == (wire.OPEN_DATA, big[:65536])
    assert op('big', wire.O_RDWR, MiB)[:2] == (wire.OPEN_DATA | wire.OPEN_EOF,
                                               big)
    assert op('empty', wire.O_RDONLY, 100)[:2] == (
        wire.OPEN_DATA | wire.OPEN_EOF, b'')
    assert op('big', wire.O_RDWR | wire.O_TRUNC, 100)[:2] == (
        wire.OPEN_DATA | wire.OPEN_EOF, b'')
    (tmp_path / 'big').write_bytes(big)
    # Nothing read: length 0, write-only, not a regular file.
    assert op('small', wire.O_RDONLY, 0)[:2] == (0, b'')
    assert op('small', wire.O_WRONLY, 4096)[:2] == (0, b'')
    assert op('d', wire.O_RDONLY, 4096)[:2] == (0, b'')
    assert op('', wire.O_RDONLY, 4096)[:2] == (0, b'')
    # A FIFO (or device) is never opened at all (issue 18, finding 3).
    assert srv.call('OPEN', handle=next(h), path='fifo', opflags=0,
                    length=4096).err == 'ENXIO'
    # The handle works as any other.
    r = srv.call('READ', handle=3, offset=5, length=3)
    assert r.status == 0 and r['data'] == b', w'
    # Errors are still errors, and the length is bounded.
    assert srv.call('OPEN', handle=50, path='nope', opflags=0,
                    length=10).err == 'ENOENT'
    assert srv.call('OPEN', handle=51, path='small', opflags=0,
                    length=MiB + 1).err == 'EINVAL'


def test_flush_reply_has_attributes(start, tmp_path):
    srv = start(tmp_path)
    r = srv.call('CREATE', handle=1, path='', name='w', opflags=wire.O_RDWR,
                 mode=0o640)
    assert r.status == 0, r
    for off in range(0, 5 * 70000, 70000):
        assert srv.call('WRITE', handle=1, offset=off,
                        data=b'z' * 70000).status == 0
    for flags in (0, 0x1):
        r = srv.call('FLUSH', handle=1, opflags=flags)
        assert r.status == 0, r
        st = os.stat(tmp_path / 'w')
        check_attr(r['attr'], st, 'w', 'FLUSH')
        assert r['attr'].size == 5 * 70000
    assert srv.call('FLUSH', handle=7).err == 'EBADF'
    assert srv.call('OPENDIR', handle=2, path='').status == 0
    assert srv.call('FLUSH', handle=2).err == 'EBADF'
