# SPDX-License-Identifier: MIT
"""Real programs on the mount: cp -a, rsync -a, tar, git, sqlite3.

Each copy is compared byte for byte (diff -r, symlinks compared as links)
both through the mount and in the backing directory, and its metadata
(modes, owners, mtimes, symlinks) with an rsync dry run that must find
nothing to do.
"""

import os
import shutil

import pytest

import util

P = os.path.join
# A real tree: ~9,000 entries, 130 MB, symlinks, deep paths.  Fast mode
# (local iteration only) takes a 7 MB part of it.
TREE = '/usr/include/linux' if util.fast_mode() else '/usr/include'


def _tree():
    if not os.path.isdir(TREE):
        pytest.skip('%s is missing' % TREE)
    return TREE


def _diff(a, b):
    r = util.run(['diff', '-r', '--no-dereference', a, b], timeout=600)
    assert r.returncode == 0, 'diff -r %s %s:\n%s%s' % (a, b, r.stdout[-3000:],
                                                       r.stderr[-2000:])


def _same_metadata(a, b):
    """rsync finds nothing to change: types, modes, owners, mtimes, links."""
    r = util.run(['rsync', '-a', '--dry-run', '--itemize-changes', '--delete',
                  a.rstrip('/') + '/', b.rstrip('/') + '/'], timeout=600)
    assert r.returncode == 0, r.stderr
    changes = [l for l in r.stdout.splitlines() if l.strip()]
    assert not changes, 'metadata differs between %s and %s:\n%s' % (
        a, b, '\n'.join(changes[:40]))


@pytest.mark.deadline(900)
def test_cp_a(mount, tmp_path):
    src, mnt = mount
    tree = _tree()
    util.run(['cp', '-a', tree, P(mnt, 'inc')], check=True, timeout=900)
    _diff(tree, P(mnt, 'inc'))
    _diff(tree, P(src, 'inc'))
    _same_metadata(tree, P(src, 'inc'))
    off = str(tmp_path / 'off')
    util.run(['cp', '-a', P(mnt, 'inc'), off], check=True, timeout=900)
    _diff(tree, off)
    _same_metadata(tree, off)
    shutil.rmtree(off)


@pytest.mark.deadline(900)
def test_rsync_a(mount, tmp_path):
    src, mnt = mount
    tree = _tree()
    util.run(['rsync', '-a', tree + '/', P(mnt, 'inc') + '/'], check=True,
             timeout=900)
    _diff(tree, P(src, 'inc'))
    _diff(tree, P(mnt, 'inc'))
    _same_metadata(tree, P(mnt, 'inc'))
    # A second run has nothing to transfer.
    r = util.run(['rsync', '-a', '--itemize-changes', tree + '/', P(mnt, 'inc') + '/'],
                 check=True, timeout=600)
    assert r.stdout.strip() == '', 'rsync found changes on a second run:\n' + r.stdout[:2000]
    off = str(tmp_path / 'off')
    util.run(['rsync', '-a', P(mnt, 'inc') + '/', off + '/'], check=True,
             timeout=900)
    _diff(tree, off)
    _same_metadata(tree, off)
    shutil.rmtree(off)


@pytest.mark.deadline(900)
def test_tar_x(mount, tmp_path):
    src, mnt = mount
    tree = _tree()
    tarball = str(tmp_path / 'inc.tar')
    util.run(['tar', 'cf', tarball, '-C', os.path.dirname(tree),
              os.path.basename(tree)], check=True, timeout=600)
    os.mkdir(P(mnt, 't'))
    util.run(['tar', 'xf', tarball, '-C', P(mnt, 't')], check=True, timeout=900)
    _diff(tree, P(mnt, 't', os.path.basename(tree)))
    _diff(tree, P(src, 't', os.path.basename(tree)))
    # And back: a tarball made from the mount has the same content.
    util.run(['tar', 'cf', str(tmp_path / 'again.tar'), '-C', P(mnt, 't'),
              os.path.basename(tree)], check=True, timeout=600)
    util.run(['tar', 'df', str(tmp_path / 'again.tar'), '-C',
              os.path.dirname(tree)], check=True, timeout=600)
    os.unlink(tarball)


def test_git(mount, tmp_path):
    src, mnt = mount
    repo = P(mnt, 'repo')
    os.mkdir(repo)
    for i in range(50):
        d = P(repo, 'dir%d' % (i % 5))
        os.makedirs(d, exist_ok=True)
        with open(P(d, 'file%d.txt' % i), 'w') as f:
            f.write('line %d\n' % i * (i + 1))
    os.symlink('dir0/file0.txt', P(repo, 'link'))
    git = ['git', '-c', 'user.name=qftfs test', '-c', 'user.email=test@qftfs.invalid',
           '-c', 'init.defaultBranch=main', '-c', 'safe.directory=*',
           '-c', 'gc.auto=0']
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM='1', HOME=str(tmp_path))
    util.run(git + ['init', '-q'], cwd=repo, env=env, check=True)
    util.run(git + ['add', '-A'], cwd=repo, env=env, check=True)
    util.run(git + ['commit', '-q', '-m', 'first'], cwd=repo, env=env, check=True)
    with open(P(repo, 'dir1', 'file1.txt'), 'a') as f:
        f.write('changed\n')
    util.run(git + ['commit', '-q', '-a', '-m', 'second'], cwd=repo, env=env,
             check=True)
    util.run(git + ['gc', '-q'], cwd=repo, env=env, check=True)
    r = util.run(git + ['fsck', '--full', '--strict'], cwd=repo, env=env)
    assert r.returncode == 0, 'git fsck: %s %s' % (r.stdout, r.stderr)
    r = util.run(git + ['log', '--format=%s'], cwd=repo, env=env, check=True)
    assert r.stdout.split() == ['second', 'first']
    r = util.run(git + ['status', '--porcelain'], cwd=repo, env=env, check=True)
    assert r.stdout == ''
    # The repository is intact on the server side too.
    r = util.run(git + ['fsck', '--full'], cwd=P(src, 'repo'), env=env)
    assert r.returncode == 0, r.stderr
    util.run(git + ['clone', '-q', P(src, 'repo'), str(tmp_path / 'clone')],
             env=env, check=True)
    _diff(P(mnt, 'repo', 'dir1'), str(tmp_path / 'clone' / 'dir1'))


@pytest.mark.parametrize('journal', ['delete', 'wal'])
def test_sqlite(mount, journal):
    """sqlite must work on the mount, its locks taken on the server
    (tests/test_locks.py: two writers on two mounts)."""
    src, mnt = mount
    if not shutil.which('sqlite3'):
        pytest.skip('sqlite3 is not installed')
    db = P(mnt, 'test.db')
    script = ('PRAGMA journal_mode=%s;\n'
              'CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, blob BLOB);\n'
              'BEGIN;\n' % journal)
    script += ''.join("INSERT INTO t (name, blob) VALUES ('row %d', randomblob(%d));\n"
                      % (i, 100 + i * 7) for i in range(2000))
    script += 'COMMIT;\n'
    r = util.run(['sqlite3', '-bail', db], input=script, timeout=300)
    assert r.returncode == 0, 'sqlite3 failed: %s' % r.stderr
    r = util.run(['sqlite3', '-bail', db,
                  'SELECT count(*), sum(length(blob)) FROM t; PRAGMA integrity_check;'],
                 check=True)
    want_bytes = sum(100 + i * 7 for i in range(2000))
    assert r.stdout.split() == ['2000|%d' % want_bytes, 'ok']
    # An update in a second transaction, then read back.
    util.run(['sqlite3', '-bail', db,
              "BEGIN; UPDATE t SET name = 'x' WHERE id <= 10; COMMIT;"], check=True)
    r = util.run(['sqlite3', db, "SELECT count(*) FROM t WHERE name = 'x';"], check=True)
    assert r.stdout.strip() == '10'
    if journal == 'wal':
        util.run(['sqlite3', db, 'PRAGMA wal_checkpoint(TRUNCATE);'], check=True)
    # The backing file is a valid database with the same content.
    r = util.run(['sqlite3', '-readonly', P(src, 'test.db'),
                  'PRAGMA integrity_check; SELECT count(*) FROM t;'], check=True)
    assert r.stdout.split() == ['ok', '2000']
