# SPDX-License-Identifier: MIT
"""Trees of small files: round trips per file, and the error rule.

Round trips are counted, not timed: the client's `user.qftfs.stats`
attribute of the mount root says how many requests a FUSE thread waited
for (`requests_waited`, one round trip on the application's path each).
A tree copied onto the mount must cost about one wait per file in the
default mode (the durable close), not one per system call.

Whatever the client answers before the server did, an error of that step
must still reach the application with its real errno, at the latest at
that file's close(), and nothing may be reported as done that is not.
"""

import errno
import os
import shutil
import signal
import stat
import subprocess
import threading
import time

import pytest

import util

P = os.path.join
SETPRIV = 'setpriv --reuid=65534 --regid=65534 --clear-groups'


def stats(mnt):
    """The mount's counters as a dict."""
    text = os.getxattr(mnt, 'user.qftfs.stats').decode()
    out = {}
    for line in text.splitlines():
        name, value = line.split()
        out[name] = int(value)
    return out


def delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after}


def make_tree(root, dirs=3, files=20, size=300):
    """dirs directories of `files` small files each, plus a symlink each."""
    os.makedirs(root)
    n = 0
    for d in range(dirs):
        sub = P(root, 'd%02d' % d)
        os.mkdir(sub)
        for i in range(files):
            with open(P(sub, 'f%03d.h' % i), 'wb') as f:
                f.write(os.urandom(size + i))
            n += 1
        os.symlink('f000.h', P(sub, 'link'))
    return n


def first_error(path, flags, data):
    """open(path, flags), write data, close: the first OSError any of
    them raised (a pipelined step may fail any of them), or None."""
    err = None
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        return e
    try:
        os.write(fd, data)
    except OSError as e:
        err = e
    finally:
        try:
            os.close(fd)
        except OSError as e:
            err = err or e
    return err


def _diff(a, b):
    r = util.run(['diff', '-r', '--no-dereference', a, b], timeout=300)
    assert r.returncode == 0, 'diff -r %s %s:\n%s%s' % (
        a, b, r.stdout[-3000:], r.stderr[-2000:])


def _same_metadata(a, b):
    r = util.run(['rsync', '-a', '--dry-run', '--itemize-changes', '--delete',
                  a.rstrip('/') + '/', b.rstrip('/') + '/'], timeout=300)
    assert r.returncode == 0, r.stderr
    changes = [l for l in r.stdout.splitlines() if l.strip()]
    assert not changes, 'metadata differs between %s and %s:\n%s' % (
        a, b, '\n'.join(changes[:40]))


def test_stats_attribute_is_not_listed(mount):
    src, mnt = mount
    s = stats(mnt)
    assert 'requests_waited' in s and 'creates_pipelined' in s
    # Copying the mount root with its xattrs must not copy the counters.
    assert 'user.qftfs.stats' not in os.listxattr(mnt)
    with pytest.raises(OSError) as e:
        os.setxattr(mnt, 'user.qftfs.stats', b'1')
    assert e.value.errno in (errno.EPERM, errno.EACCES, errno.ENOTSUP)
    assert not os.listxattr(src)


def test_cp_r_waits_about_once_per_file(mount, tmp_path):
    src, mnt = mount
    tree = str(tmp_path / 'tree')
    nfiles = make_tree(tree, dirs=3, files=30)
    ndirs = 4
    before = stats(mnt)
    util.run(['cp', '-r', tree, P(mnt, 'copy')], check=True, timeout=120)
    d = delta(before, stats(mnt))
    _diff(tree, P(src, 'copy'))
    # One wait per file, the durable close: cp's fstat of the file it
    # created is answered with a provisional inode number (fuse/fs/node.h);
    # a few per directory.  (Before pipelining: 4.2.)
    budget = nfiles + 4 * ndirs + 10
    waited = d['requests_waited'] + d['stats_waited_for_create']
    assert waited <= budget, \
        'cp -r of %d files waited %d times (budget %d): %r' % (
            nfiles, waited, budget, d)
    # Every new directory's lease comes before its first create, so every
    # create is pipelined (O_EXCL, as cp creates).
    assert d['creates_pipelined'] == nfiles, d


def test_new_directory_needs_no_default_acl_question(mount):
    """A file made with a mode the umask cuts (0666, as compilers and
    editors make theirs) takes the umask unless its directory has a
    default ACL, which the client then asks the server about once per
    directory.  A directory the mount made inherits its parent's default
    ACL: none where the parent has none, known without a question."""
    src, mnt = mount
    old = os.umask(0o022)
    try:
        os.close(os.open(P(mnt, 'first'), os.O_WRONLY | os.O_CREAT, 0o666))
        before = stats(mnt)
        for i in range(10):
            d = P(mnt, 'd%d' % i)
            os.mkdir(d)
            os.close(os.open(P(d, 'f'), os.O_WRONLY | os.O_CREAT, 0o666))
        d = delta(before, stats(mnt))
    finally:
        os.umask(old)
    # One wait per MKDIR; the creates are pipelined (before: 20).
    assert d['requests_waited'] <= 10 + 2, d
    for i in range(10):
        assert stat.S_IMODE(os.stat(P(src, 'd%d' % i, 'f')).st_mode) == 0o644


def test_rsync_waits_few_times_per_file(mount, tmp_path):
    src, mnt = mount
    tree = str(tmp_path / 'tree')
    nfiles = make_tree(tree, dirs=2, files=30)
    before = stats(mnt)
    util.run(['rsync', '-a', tree + '/', P(mnt, 'copy') + '/'], check=True,
             timeout=120)
    d = delta(before, stats(mnt))
    _diff(tree, P(src, 'copy'))
    _same_metadata(tree, P(src, 'copy'))
    # Per file: the durable close, utimensat by path, the read-only open
    # (pipelined) with its fchmod answered at its close, and the rename
    # -- and here, on loopback, sometimes the fchmod: the open's answer
    # can be in before it, which then goes by path.  (Before pipelining:
    # 13.6.)
    budget = 5 * nfiles + 20
    assert d['requests_waited'] <= budget, \
        'rsync of %d files waited %d times (budget %d): %r' % (
            nfiles, d['requests_waited'], budget, d)
    assert d['opens_pipelined'] >= nfiles // 2, d


def test_cp_r_off_the_mount_waits_once_per_file(mount, tmp_path):
    """Reading a tree: names and attributes come in a few listings, and
    each small file's data with its OPEN."""
    src, mnt = mount
    nfiles = make_tree(P(src, 'tree'), dirs=3, files=30)
    ndirs = 4
    before = stats(mnt)
    util.run(['cp', '-r', P(mnt, 'tree'), str(tmp_path / 'off')], check=True,
             timeout=120)
    d = delta(before, stats(mnt))
    _diff(P(src, 'tree'), str(tmp_path / 'off'))
    budget = nfiles + 4 * ndirs + 10
    assert d['requests_waited'] <= budget, \
        'cp -r off the mount of %d files waited %d times (budget %d): %r' % (
            nfiles, d['requests_waited'], budget, d)


def test_written_file_reads_back_with_its_attributes(mount):
    """Attributes answered before the CREATE's reply are replaced by the
    server's own: owner and size are the backing file's."""
    src, mnt = mount
    for i in range(20):
        p = P(mnt, 'n%02d' % i)
        with open(p, 'wb') as f:
            f.write(b'x' * i)
            st = os.fstat(f.fileno())
            assert st.st_mode & 0o170000 == 0o100000
        a, b = os.stat(p), os.stat(P(src, 'n%02d' % i))
        assert util.same_stat(a, b, ('st_mode', 'st_uid', 'st_gid',
                                     'st_size', 'st_nlink')) == {}
        with open(p, 'rb') as f:
            assert f.read() == b'x' * i


def test_new_file_keeps_its_inode_number(mount):
    """A created file's inode number is known before the server answers
    (cp fstats at once) and never changes while the mount remembers the
    file: not when the CREATE is answered, not in a listing, and a hard
    link shares it."""
    src, top = mount
    # In a directory the mount made, so that even O_EXCL is pipelined.
    os.mkdir(P(top, 'd'))
    src, mnt = P(src, 'd'), P(top, 'd')
    before = stats(top)
    seen = {}
    for i in range(20):
        p = P(mnt, 'n%02d' % i)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            first = os.fstat(fd).st_ino
            os.write(fd, b'y' * i)
            assert os.fstat(fd).st_ino == first
        finally:
            os.close(fd)
        assert os.stat(p).st_ino == first
        seen['n%02d' % i] = first
    assert len(set(seen.values())) == len(seen), 'inode numbers collide'
    assert delta(before, stats(top))['creates_pipelined'] == len(seen)
    os.link(P(mnt, 'n00'), P(mnt, 'hard'))
    assert os.stat(P(mnt, 'hard')).st_ino == seen['n00']
    assert os.stat(P(mnt, 'n00')).st_nlink == 2
    listed = {e.name: e.inode() for e in os.scandir(mnt)}
    assert listed['hard'] == seen['n00']
    for name, ino in seen.items():
        assert listed[name] == ino, name
        assert os.stat(P(mnt, name)).st_ino == ino
    # Link counts are right at once after link, unlink and a rename over
    # a name (each name is its own inode to the kernel).
    assert os.stat(P(mnt, 'hard')).st_nlink == 2
    os.unlink(P(mnt, 'hard'))
    assert os.stat(P(mnt, 'n00')).st_nlink == 1
    os.link(P(mnt, 'n00'), P(mnt, 'hard2'))
    assert os.stat(P(mnt, 'n00')).st_nlink == 2
    os.rename(P(mnt, 'n01'), P(mnt, 'hard2'))
    assert os.stat(P(mnt, 'n00')).st_nlink == 1
    assert os.stat(P(mnt, 'hard2')).st_ino == seen['n01']
    # The server's own files keep the server's numbers.
    with open(P(src, 'theirs'), 'w'):
        pass
    deadline = time.monotonic() + 10
    while not os.path.exists(P(mnt, 'theirs')):
        assert time.monotonic() < deadline, 'a file made on the server ' \
            'did not appear on the mount'
        time.sleep(0.05)
    assert os.stat(P(mnt, 'theirs')).st_ino == \
        os.stat(P(src, 'theirs')).st_ino

def test_create_in_unwritable_dir_fails_by_close(mounter, wtmp, need_root):
    """The server runs as nobody and may not write in `ro`: the EACCES of
    the pipelined CREATE reaches open() or, at the latest, close(); the
    file never appears."""
    if not os.path.exists('/usr/bin/setpriv'):
        pytest.skip('setpriv (util-linux) is missing')
    src = P(wtmp, 'src')
    os.mkdir(src)
    os.chmod(src, 0o777)
    os.mkdir(P(src, 'ro'))
    os.chmod(P(src, 'ro'), 0o555)
    m = mounter(src=src, mnt=P(wtmp, 'mnt'), server_wrapper=SETPRIV)
    mnt = m.mnt
    for flags in (os.O_WRONLY | os.O_CREAT,
                  os.O_WRONLY | os.O_CREAT | os.O_EXCL):
        err = first_error(P(mnt, 'ro', 'f'), flags, b'data')
        assert err is not None, 'create in an unwritable directory succeeded'
        assert err.errno == errno.EACCES, err
        assert not os.path.exists(P(src, 'ro', 'f'))
        assert not os.path.exists(P(mnt, 'ro', 'f'))


def test_fchown_refused_fails_by_close(mounter, wtmp, need_root):
    """A pipelined fchown that the server refuses (it runs as nobody)
    fails fchown() or close() with EPERM, never silently."""
    if not os.path.exists('/usr/bin/setpriv'):
        pytest.skip('setpriv (util-linux) is missing')
    src = P(wtmp, 'src')
    os.mkdir(src)
    os.chmod(src, 0o777)
    m = mounter(src=src, mnt=P(wtmp, 'mnt'), server_wrapper=SETPRIV)
    err = None
    fd = os.open(P(m.mnt, 'f'), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b'x' * 100)
        os.fchown(fd, 0, 0)
    except OSError as e:
        err = e
    finally:
        try:
            os.close(fd)
        except OSError as e:
            err = err or e
    assert err is not None and err.errno == errno.EPERM, err
    st = os.stat(P(src, 'f'))
    assert st.st_uid == 65534


def test_excl_create_of_name_made_behind_the_clients_back(mount):
    """The name appears on the server after the client listed the
    directory: O_EXCL must not succeed -- open() or close() fails with
    EEXIST, and the server's file is untouched."""
    src, mnt = mount
    os.mkdir(P(mnt, 'd'))
    os.listdir(P(mnt, 'd'))
    with open(P(src, 'd', 'lock'), 'wb') as f:
        f.write(b'theirs')
    err = first_error(P(mnt, 'd', 'lock'),
                      os.O_WRONLY | os.O_CREAT | os.O_EXCL, b'mine')
    assert err is not None and err.errno == errno.EEXIST, err
    with open(P(src, 'd', 'lock'), 'rb') as f:
        assert f.read() == b'theirs'


def test_enospc_in_the_middle_of_a_tree(mounter, tmp_path, need_root):
    """cp -r onto a small tmpfs: the copy fails with "No space left on
    device" and every file that cp reported as done is complete."""
    src = str(tmp_path / 'small')
    os.mkdir(src)
    r = util.run(['mount', '-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', src])
    if r.returncode != 0:
        pytest.skip('cannot mount a tmpfs: ' + r.stderr.strip())
    try:
        m = mounter(src=src)
        tree = str(tmp_path / 'tree')
        os.makedirs(tree)
        for i in range(40):
            with open(P(tree, 'f%02d' % i), 'wb') as f:
                f.write(os.urandom(100 * 1024))
        r = util.run(['cp', '-r', tree, P(m.mnt, 'copy')], timeout=120)
        assert r.returncode != 0, 'cp onto a full disk succeeded'
        assert 'No space left on device' in r.stderr, r.stderr
        # cp stops at the first failed file; those before it are whole.
        failed = [l for l in r.stderr.splitlines() if 'No space' in l]
        for name in sorted(os.listdir(P(src, 'copy'))):
            if any(name in l for l in failed):
                continue
            with open(P(src, 'copy', name), 'rb') as a, \
                    open(P(tree, name), 'rb') as b:
                if a.read() != b.read():
                    # Only the file cp was writing when it failed may be
                    # short, and cp must have said so.
                    assert any(name in l for l in r.stderr.splitlines()), \
                        '%s is incomplete but cp did not report it' % name
        m.stop()
    finally:
        util.run(['umount', '-l', src])


def test_rename_onto_nonempty_directory(mount):
    src, mnt = mount
    os.makedirs(P(mnt, 'a'))
    os.makedirs(P(mnt, 'b', 'x'))
    with pytest.raises(OSError) as e:
        os.rename(P(mnt, 'a'), P(mnt, 'b'))
    assert e.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
    assert os.path.isdir(P(src, 'a')) and os.path.isdir(P(src, 'b', 'x'))


MODES = [pytest.param([], id='commit=close'),
         pytest.param(['commit=async'], id='commit=async')]


def settle_mode(m, opts):
    """With commit=async the data is safe once `qftfs --sync` says so."""
    if opts:
        r = util.run([util.client_bin(m.build), '--sync', m.mnt], timeout=120)
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize('opts', MODES)
@pytest.mark.parametrize('tool', ['cp -a', 'rsync -a', 'tar'])
def test_tools_copy_tree_exactly(mounter, tmp_path, tool, opts):
    m = mounter(opts=opts)
    src, mnt = m
    tree = str(tmp_path / 'tree')
    make_tree(tree, dirs=4, files=25)
    dst = P(mnt, 'copy')
    if tool == 'cp -a':
        util.run(['cp', '-a', tree, dst], check=True, timeout=120)
    elif tool == 'rsync -a':
        util.run(['rsync', '-a', tree + '/', dst + '/'], check=True,
                 timeout=120)
    else:
        os.mkdir(dst)
        util.sh('tar -C %s -cf - . | tar -C %s -xpf -' % (tree, dst),
                check=True, timeout=120)
    settle_mode(m, opts)
    _diff(tree, dst)
    _diff(tree, P(src, 'copy'))
    _same_metadata(tree, P(src, 'copy'))


@pytest.mark.parametrize('opts', MODES)
def test_git_clone_and_status(mounter, tmp_path, opts):
    if shutil.which('git') is None:
        pytest.skip('git is missing')
    m = mounter(opts=opts)
    src, mnt = m
    repo = str(tmp_path / 'repo')
    make_tree(repo, dirs=3, files=10)
    env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@t',
               GIT_COMMITTER_NAME='t', GIT_COMMITTER_EMAIL='t@t')
    for cmd in (['git', 'init', '-q'], ['git', 'add', '-A'],
                ['git', 'commit', '-qm', 'tree']):
        util.run(cmd, cwd=repo, env=env, check=True)
    util.run(['git', 'clone', '-q', repo, P(mnt, 'clone')], check=True,
             timeout=120, env=env)
    r = util.run(['git', 'status', '--porcelain'], cwd=P(mnt, 'clone'),
                 check=True, env=env)
    assert r.stdout == '', r.stdout
    settle_mode(m, opts)
    r = util.run(['git', 'fsck', '--no-progress'], cwd=P(src, 'clone'),
                 env=env)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------
# -o commit=async: close() returns at once; `qftfs --sync` and the unmount
# wait for everything and report what failed.

def qftfs_sync(m):
    return util.run([util.client_bin(m.build), '--sync', m.mnt], timeout=120)


def test_async_cp_r_then_sync(mounter, tmp_path):
    m = mounter(opts=['commit=async'])
    src, mnt = m
    tree = str(tmp_path / 'tree')
    nfiles = make_tree(tree, dirs=3, files=30)
    before = stats(mnt)
    util.run(['cp', '-r', tree, P(mnt, 'copy')], check=True, timeout=120)
    d = delta(before, stats(mnt))
    r = qftfs_sync(m)
    assert r.returncode == 0, r.stderr
    _diff(tree, P(src, 'copy'))
    # Closes do not wait, nor do cp's fstats of the files it creates:
    # what is left is per directory, not per file.
    assert d['closes_waited'] == 0, d
    assert d['requests_waited'] + d['stats_waited_for_create'] <= \
        4 * 4 + 10, d


def test_async_rsync_keeps_times_and_modes(mounter, tmp_path):
    """rsync sets times and modes right after close(): behind the file's
    data on the server, never before it (a WRITE executed after the
    utimes would change the mtime)."""
    m = mounter(opts=['commit=async'])
    src, mnt = m
    tree = str(tmp_path / 'tree')
    make_tree(tree, dirs=2, files=25, size=200 * 1024)
    util.run(['rsync', '-a', tree + '/', P(mnt, 'copy') + '/'], check=True,
             timeout=300)
    r = qftfs_sync(m)
    assert r.returncode == 0, r.stderr
    _diff(tree, P(src, 'copy'))
    _same_metadata(tree, P(src, 'copy'))


def test_async_rsync_waits_per_directory_only(mounter, tmp_path):
    """commit=async: what rsync does after each close -- utimensat by
    path, a read-only open and fchmod, the rename of its temporary file
    over the target -- is answered without waiting, in order behind the
    file's data."""
    m = mounter(opts=['commit=async'])
    src, mnt = m
    tree = str(tmp_path / 'tree')
    nfiles = make_tree(tree, dirs=2, files=30)
    before = stats(mnt)
    util.run(['rsync', '-a', tree + '/', P(mnt, 'copy') + '/'], check=True,
             timeout=120)
    d = delta(before, stats(mnt))
    r = qftfs_sync(m)
    assert r.returncode == 0, r.stderr
    _diff(tree, P(src, 'copy'))
    _same_metadata(tree, P(src, 'copy'))
    assert d['renames_pipelined'] == nfiles, d
    assert d['opens_pipelined'] >= nfiles // 2, d
    assert d['closes_waited'] == 0, d
    # Left: per directory (3), its MKDIR, its times and mode (a
    # directory's attributes are never predicted), its symlink and the
    # symlink's times; a few lookups.  Per file it would be 60 and more.
    assert d['requests_waited'] <= 8 * 3 + 10, d


def test_open_after_release_before_setattr_answer_does_not_wait(
        mounter, tmp_path):
    """commit=async: rsync closes the file it wrote, sets its times by
    path and opens it again.  With the file's WRITEs unanswered the
    SETATTR goes out through its handle, behind them (attrs.c,
    target_of), and the prediction of what it makes the file went with
    that handle: once the handle was released, an open before the
    SETATTR's answer waited for it -- under load 1 to 14 of rsync's 60
    opens in test_async_rsync_waits_per_directory_only did, and one CI
    run failed on it.  The server's fault hook stops it before the
    WRITE's reply, then before the SETATTR's: an open that waited would
    hang."""
    wrap, _ = util.fault_server(tmp_path, util.build_dir(),
                                'QFTFS_FAULT_STOP_REPLY', 'WRITE,SETATTR')
    m = mounter(opts=['commit=async'], server=wrap)
    src, mnt = m
    srv = m.server_pids[0]
    os.mkdir(P(mnt, 'x'))
    path = P(mnt, 'x', 'f')
    failures, seen = [], []

    def stopped():
        deadline = time.monotonic() + 30 * util.timeout_scale()
        while not util.proc_stopped(srv):
            assert time.monotonic() < deadline, 'the server never stopped'
            time.sleep(0.01)

    def reopen():
        try:
            fd = os.open(path, os.O_RDONLY)
            seen.append(os.fstat(fd).st_mtime_ns)
            os.close(fd)
        except BaseException as e:  # reported by the test's thread
            failures.append(e)

    try:
        before = stats(mnt)['requests_noreply']
        with open(path, 'wb') as f:
            f.write(b'data' * 100)
        stopped()               # the WRITE done, its reply held
        os.utime(path, ns=(1_000_000_000, 2_000_000_000))
        os.kill(srv, signal.SIGCONT)
        stopped()               # the WRITE answered, the SETATTR's held
        # The handle released once its WRITEs were answered (its CLOSE
        # goes out, unanswered by design).
        deadline = time.monotonic() + 30 * util.timeout_scale()
        while stats(mnt)['requests_noreply'] == before:
            assert time.monotonic() < deadline, 'the handle stays'
            time.sleep(0.01)
        t = threading.Thread(target=reopen)
        t.start()
        t.join(10 * util.timeout_scale())
        hung = t.is_alive()
    finally:
        os.kill(srv, signal.SIGCONT)
    t.join(60)
    assert not hung, 'the open waited for the SETATTR\'s answer'
    assert not failures, failures
    assert seen == [2_000_000_000], seen
    r = qftfs_sync(m)
    assert r.returncode == 0, r.stderr
    st = os.stat(P(src, 'x', 'f'))
    assert (st.st_size, st.st_mtime_ns) == (400, 2_000_000_000), st


@pytest.mark.parametrize('opts', MODES)
def test_tar_pattern_fchown_after_futimens_does_not_wait(mounter, opts):
    """tar x restores a file's times, owner and mode through its handle
    after writing it: futimens, fchown, fchmod, close.  The kernel asks
    for the attributes before a chown (to clear set-id bits); with the
    WRITEs still in flight they are known all the same, since the mtime
    was set behind them.  So none of these steps waits for the server
    (shown with the server stopped: a step that waited would hang), and
    what the server ends with is exact."""
    m = mounter(opts=opts)
    src, mnt = m
    assert len(m.server_pids) == 1, m.server_pids
    pid = m.server_pids[0]
    os.mkdir(P(mnt, 'x'))
    nfiles = 5
    uid, gid = os.getuid(), os.getgid()

    def steps(fd, i, failures):
        try:
            for k in range(3):
                os.write(fd, bytes([65 + i]) * (10240 + k))
            os.utime(fd, ns=(1_000_000_000 + i, 2_000_000_000 + i))
            st = os.fstat(fd)
            assert st.st_mtime_ns == 2_000_000_000 + i, st
            assert st.st_size == 3 * 10240 + 3, st
            os.fchown(fd, uid, gid)
            os.fchmod(fd, 0o640)
        except BaseException as e:  # reported by the test's thread
            failures.append(e)

    for i in range(nfiles):
        fd = os.open(P(mnt, 'x', 'f%d' % i),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        failures = []
        try:
            os.kill(pid, signal.SIGSTOP)
            try:
                t = threading.Thread(target=steps, args=(fd, i, failures))
                t.start()
                t.join(20)
                hung = t.is_alive()
            finally:
                os.kill(pid, signal.SIGCONT)
            t.join(60)
            assert not hung, \
                'file %d: a step waited for the stopped server' % i
            assert not failures, failures
            # Lets the server take in what it was sent while stopped
            # before the next file's steps: neither the next create nor
            # a close under commit=async waits for it, so without this
            # a server starved of CPU holds every file's bytes unread,
            # and by the fifth the socket's buffer is full and a step
            # blocks sending (the wait is the socket's, not a step's).
            os.fsync(fd)
        finally:
            os.close(fd)
    if 'commit=async' in opts:
        r = qftfs_sync(m)
        assert r.returncode == 0, r.stderr
    for i in range(nfiles):
        st = os.stat(P(src, 'x', 'f%d' % i))
        assert (st.st_size, st.st_mtime_ns, st.st_mode & 0o7777,
                st.st_uid, st.st_gid) == \
            (3 * 10240 + 3, 2_000_000_000 + i, 0o640, uid, gid), i
        with open(P(src, 'x', 'f%d' % i), 'rb') as f:
            assert f.read() == b''.join(bytes([65 + i]) * (10240 + k)
                                        for k in range(3)), i


def _write_new(path, data):
    """Creates path with O_EXCL, as cp and rsync do: in a directory the
    mount made, that waits for its lease (a plain create racing with the
    lease's request would cost it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _fault_mount(mounter, build, fault, opts=()):
    why = util.fault_injection_reason(build)
    if why:
        pytest.skip('SKIPPED: ' + why)
    return mounter(opts=list(opts), env=dict(os.environ, QFTFS_FAULT=fault))


def test_async_rename_failure_is_reported(mounter, build):
    """A rename answered before the server did and then refused is never
    reported as done: `qftfs --sync` fails with its errno and names it,
    and the mount shows the names as the server has them."""
    m = _fault_mount(mounter, build, 'name_eio=target', ['commit=async'])
    src, mnt = m
    os.mkdir(P(mnt, 'd'))
    _write_new(P(mnt, 'd', 'tmp'), b'data')
    before = stats(mnt)
    os.rename(P(mnt, 'd', 'tmp'), P(mnt, 'd', 'target'))
    assert delta(before, stats(mnt))['renames_pipelined'] == 1
    r = qftfs_sync(m)
    assert r.returncode != 0, 'a failed rename was reported as done'
    assert 'Input/output error' in r.stdout + r.stderr, r
    assert 'd/tmp' in r.stdout + r.stderr, r
    assert sorted(os.listdir(P(src, 'd'))) == ['tmp']
    # The kernel's own dentries expire with entry_timeout (1 s).
    deadline = time.monotonic() + 10
    while sorted(os.listdir(P(mnt, 'd'))) != ['tmp']:
        assert time.monotonic() < deadline, os.listdir(P(mnt, 'd'))
        time.sleep(0.1)
    # Reported once: the next sync is clean.
    assert qftfs_sync(m).returncode == 0


def test_async_setattr_failure_is_reported(mounter, build):
    m = _fault_mount(mounter, build, 'name_eio=victim', ['commit=async'])
    src, mnt = m
    os.mkdir(P(mnt, 'd'))
    _write_new(P(mnt, 'd', 'victim'), b'data')
    # Its close is done and the file let go: the change goes by path.
    assert qftfs_sync(m).returncode == 0
    before = stats(mnt)
    os.utime(P(mnt, 'd', 'victim'), (5, 5))
    assert delta(before, stats(mnt))['setattrs_pipelined'] == 1
    r = qftfs_sync(m)
    assert r.returncode != 0, 'a failed utimensat was reported as done'
    assert 'Input/output error' in r.stdout + r.stderr, r
    assert os.stat(P(src, 'd', 'victim')).st_mtime != 5
    assert os.stat(P(mnt, 'd', 'victim')).st_mtime != 5


def test_pipelined_open_failure_reaches_read_and_close(mounter, build):
    """A read-only open answered before the server did (a file this
    mount wrote, in a directory it made) and then refused: the read and
    the close fail with its errno."""
    m = _fault_mount(mounter, build, 'name_eio=victim')
    src, mnt = m
    os.mkdir(P(mnt, 'd'))
    _write_new(P(mnt, 'd', 'victim'), b'data')
    before = stats(mnt)
    fd = os.open(P(mnt, 'd', 'victim'), os.O_RDONLY)
    assert delta(before, stats(mnt))['opens_pipelined'] == 1
    try:
        util.expect_errno(errno.EIO, os.read, fd, 4)
    finally:
        util.expect_errno(errno.EIO, os.close, fd)


def test_async_enospc_is_reported(mounter, tmp_path, need_root):
    """Data that does not fit is never reported as done: the write, the
    close, or `qftfs --sync` fails with ENOSPC, and --sync names the
    file."""
    src = str(tmp_path / 'small')
    os.mkdir(src)
    r = util.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', src])
    if r.returncode != 0:
        pytest.skip('cannot mount a tmpfs: ' + r.stderr.strip())
    try:
        m = mounter(src=src, opts=['commit=async'])
        err = None
        try:
            with open(P(m.mnt, 'big'), 'wb') as f:
                for _ in range(4):
                    f.write(os.urandom(512 * 1024))
        except OSError as e:
            err = e
        r = qftfs_sync(m)
        if err is None:
            assert r.returncode == 1, 'ENOSPC was lost: ' + r.stderr
            assert 'No space left on device' in r.stderr, r.stderr
            assert '/big' in r.stderr, r.stderr
        else:
            assert err.errno == errno.ENOSPC, err
        # Reported once: the next --sync has nothing new to say.
        assert qftfs_sync(m).returncode == 0
        m.stop()
    finally:
        util.run(['umount', '-l', src])


def test_sync_on_default_mount_and_usage(mount):
    src, mnt = mount
    with open(P(mnt, 'f'), 'wb') as f:
        f.write(b'x')
    r = qftfs_sync(mount)
    assert r.returncode == 0, r.stderr
    r = util.run([util.client_bin(mount.build), '--sync'])
    assert r.returncode == 2 and 'usage' in r.stderr
    r = util.run([util.client_bin(mount.build), '--sync', src])
    assert r.returncode == 1 and 'not the root of a qftfs mount' in r.stderr


def test_mode_set_through_an_acl_is_seen_at_once(mount):
    """cp -a sets a directory's mode last, through its POSIX ACL (an
    xattr), after utimensat and chown were answered with the old mode:
    a stat right after must see the new one."""
    src, mnt = mount
    d = P(mnt, 'd')
    os.mkdir(d, 0o700)
    os.utime(d, (100, 100))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    r = util.run(['setfacl', '-m', 'u::rwx,g::r-x,o::r-x', d])
    if r.returncode != 0:
        pytest.skip('setfacl on the mount: %s' % r.stderr.strip())
    assert stat.S_IMODE(os.stat(P(src, 'd')).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o755
