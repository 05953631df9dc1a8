# SPDX-License-Identifier: MIT
"""A mount other local users share (-o allow_other,default_permissions)
with the server running as root, the usual way a board is reached: what a
user makes is theirs on the server (a set-group-ID directory's group
wins), they chmod and chown within POSIX rules, and link counts are right
at once after link, unlink and rename.  The user is uid/gid 65534, run
with setpriv; the directories live outside the test's private temp dir so
that it can reach them."""
import json
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

import util

P = os.path.join
NOBODY = 65534
SGID_GROUP = 4242

# Runs as the other user; prints what it saw as JSON.
AS_USER = r'''
import errno, json, os, sys
mnt = sys.argv[1]
out = {}
def try_(name, fn, *a):
    try:
        fn(*a)
        out[name] = 0
    except OSError as e:
        out[name] = e.errno
fd = os.open(os.path.join(mnt, 'pub', 'f'), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b'mine')
st = os.fstat(fd)
out['fstat'] = [st.st_uid, st.st_gid]
os.close(fd)
os.mkdir(os.path.join(mnt, 'pub', 'd'), 0o755)
os.symlink('f', os.path.join(mnt, 'pub', 's'))
os.mkfifo(os.path.join(mnt, 'pub', 'p'), 0o600)
with open(os.path.join(mnt, 'sg', 'g'), 'w') as f:
    f.write('x')
for n in ('f', 'd', 's', 'p'):
    st = os.lstat(os.path.join(mnt, 'pub', n))
    out['mount_' + n] = [st.st_uid, st.st_gid]
st = os.lstat(os.path.join(mnt, 'sg', 'g'))
out['mount_g'] = [st.st_uid, st.st_gid]
try_('chmod_own', os.chmod, os.path.join(mnt, 'pub', 'f'), 0o600)
try_('chown_own_to_root', os.chown, os.path.join(mnt, 'pub', 'f'), 0, -1)
try_('chmod_roots', os.chmod, os.path.join(mnt, 'pub', 'roots'), 0o666)
try_('write_roots', lambda: open(os.path.join(mnt, 'pub', 'roots'), 'w').close())
f = os.path.join(mnt, 'pub', 'f')
os.link(f, os.path.join(mnt, 'pub', 'h'))
out['nlink_after_link'] = os.stat(f).st_nlink
os.unlink(os.path.join(mnt, 'pub', 'h'))
out['nlink_after_unlink'] = os.stat(f).st_nlink
os.link(f, os.path.join(mnt, 'pub', 'h2'))
with open(os.path.join(mnt, 'pub', 'other'), 'w'):
    pass
os.rename(os.path.join(mnt, 'pub', 'other'), os.path.join(mnt, 'pub', 'h2'))
out['nlink_after_rename_over'] = os.stat(f).st_nlink
print(json.dumps(out))
'''


@pytest.fixture
def shared_dirs(need_root):
    """A served directory and a mount point any user can reach."""
    top = tempfile.mkdtemp(prefix='qftfs-multiuser-', dir='/tmp')
    os.chmod(top, 0o755)
    src, mnt = P(top, 'src'), P(top, 'mnt')
    for d in (src, mnt):
        os.mkdir(d)
        os.chmod(d, 0o755)
    yield src, mnt
    shutil.rmtree(top, ignore_errors=True)


def test_what_a_user_makes_is_theirs(mounter, shared_dirs):
    if not shutil.which('setpriv'):
        pytest.skip('setpriv (util-linux) is missing')
    src, mnt = shared_dirs
    os.mkdir(P(src, 'pub'))
    os.chmod(P(src, 'pub'), 0o777)
    os.mkdir(P(src, 'sg'))
    os.chown(P(src, 'sg'), 0, SGID_GROUP)
    os.chmod(P(src, 'sg'), 0o2777)
    with open(P(src, 'pub', 'roots'), 'w') as f:
        f.write('root')
    os.chmod(P(src, 'pub', 'roots'), 0o644)
    m = mounter(src=src, mnt=mnt, opts=['allow_other', 'default_permissions'])
    r = util.run(['setpriv', '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY,
                  '--clear-groups', '/usr/bin/python3', '-c', AS_USER, m.mnt],
                 timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    mine = [NOBODY, NOBODY]
    # On the server, and through the mount, at once (fstat too).
    for n in ('f', 'd', 's', 'p'):
        st = os.lstat(P(src, 'pub', n))
        assert [st.st_uid, st.st_gid] == mine, n
        assert got['mount_' + n] == mine, (n, got)
    assert got['fstat'] == mine, got
    st = os.lstat(P(src, 'sg', 'g'))
    assert [st.st_uid, st.st_gid] == [NOBODY, SGID_GROUP]
    assert got['mount_g'] == [NOBODY, SGID_GROUP], got
    # POSIX rules: the owner may chmod, not give a file away; nobody may
    # chmod or write root's file.
    assert got['chmod_own'] == 0, got
    assert stat.S_IMODE(os.stat(P(src, 'pub', 'f')).st_mode) == 0o600
    assert got['chown_own_to_root'] == 1, got          # EPERM
    assert got['chmod_roots'] == 1, got                # EPERM
    assert got['write_roots'] == 13, got               # EACCES
    assert os.stat(P(src, 'pub', 'roots')).st_uid == 0
    assert got['nlink_after_link'] == 2, got
    assert got['nlink_after_unlink'] == 1, got
    assert got['nlink_after_rename_over'] == 1, got


def test_without_allow_other_the_servers_user_owns(mounter, shared_dirs):
    """A mount only its own user uses keeps sshfs's rule: what is made
    belongs to the user the server runs as."""
    src, mnt = shared_dirs
    m = mounter(src=src, mnt=mnt)
    os.mkdir(P(m.mnt, 'd'))
    with open(P(m.mnt, 'd', 'f'), 'w'):
        pass
    assert os.lstat(P(src, 'd', 'f')).st_uid == os.geteuid()
