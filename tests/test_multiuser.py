# SPDX-License-Identifier: MIT
"""A mount other local users share (-o allow_other) with the server
running as root, the usual way a team reaches a board: the server acts as
each caller (QFT_FEAT_CRED), so its kernel checks every access and makes
every object with its owner, and this kernel checks too
(default_permissions, added by qftfs).

Users: A (uid 1001, in group 4242) and B (uid 1002) on the client, run
with setpriv; C (uid 1003) works on the served directory directly, as a
user logged in on the server.  The directories live outside the test's
private temp dir so that all of them can reach them.

The pjdfstest-style check runs the same operations as the same user on
a local directory and through the mount, on two identical trees, and
requires the same outcome of each (errno, and the owner and mode of what
it made) and the same trees after.  The attack tests reproduce the
findings of issue 18 and fail on a client and server without the
feature (a root server that acts as root for everyone).
"""
import json
import os
import shutil
import stat
import tempfile
import time

import pytest

import util

P = os.path.join
NOBODY = 65534
A, B, C = 1001, 1002, 1003
G = 4242          # A's supplementary group
SGID_GROUP = 4242


def as_user(uid, gid, groups=()):
    return ['setpriv', '--reuid=%d' % uid, '--regid=%d' % gid] + (
        ['--groups=' + ','.join(str(g) for g in groups)] if groups
        else ['--clear-groups'])


USER_A = as_user(A, A, [G])
USER_B = as_user(B, B)
USER_C = as_user(C, C)


def run_as(user, script, *args, timeout=60):
    r = util.run(user + ['/usr/bin/python3', '-c', script] + list(args),
                 timeout=timeout)
    assert r.returncode == 0, 'as %s: %s' % (user[1], r.stderr)
    return json.loads(r.stdout) if r.stdout.strip() else None


@pytest.fixture
def shared_dirs(need_root):
    """A served directory and a mount point any user can reach."""
    if not shutil.which('setpriv'):
        pytest.skip('setpriv (util-linux) is missing')
    top = tempfile.mkdtemp(prefix='qftfs-multiuser-', dir='/tmp')
    os.chmod(top, 0o755)
    src, mnt = P(top, 'src'), P(top, 'mnt')
    for d in (src, mnt):
        os.mkdir(d)
        os.chmod(d, 0o755)
    yield src, mnt
    shutil.rmtree(top, ignore_errors=True)


def shared_mount(mounter, src, mnt, opts=(), env=None, **kw):
    return mounter(src=src, mnt=mnt, opts=['allow_other'] + list(opts),
                   env=env, **kw)


# ---------------------------------------------------------------------------
# What a user makes is theirs, and POSIX rules hold

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


def test_what_a_user_makes_is_theirs(mounter, shared_dirs):
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
    got = run_as(as_user(NOBODY, NOBODY), AS_USER, m.mnt)
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


def test_shared_mount_gets_default_permissions(mounter, shared_dirs):
    """The kernel's check stays beside the server's: qftfs adds
    default_permissions to a shared mount of a root server."""
    src, mnt = shared_dirs
    m = shared_mount(mounter, src, mnt)
    with open('/proc/mounts') as f:
        opts = [l.split()[3].split(',') for l in f
                if l.split()[1] == os.path.realpath(m.mnt)][-1]
    assert 'default_permissions' in opts and 'allow_other' in opts, opts
    assert 'added default_permissions' in m.log()


# ---------------------------------------------------------------------------
# pjdfstest-style: each operation as on a local disk

def build_tree(base):
    """The same starting tree for the local run and the mount's."""
    def d(name, mode, uid=0, gid=0):
        os.mkdir(P(base, name))
        os.chown(P(base, name), uid, gid)
        os.chmod(P(base, name), mode)

    def f(name, mode, uid=0, gid=0, data=b'data\n'):
        with open(P(base, name), 'wb') as fh:
            fh.write(data)
        os.chown(P(base, name), uid, gid)
        os.chmod(P(base, name), mode)

    d('pub', 0o1777)
    d('open', 0o777)
    d('a_dir', 0o755, A, A)
    d('a_priv', 0o700, A, A)
    d('g_dir', 0o770, 0, G)
    d('sg', 0o2777, 0, G)
    d('ro', 0o755)
    f('open/a_600', 0o600, A, A, b'a secret\n')
    f('open/a_644', 0o644, A, A)
    f('open/a_666', 0o666, A, A)
    f('open/b_600', 0o600, B, B, b'b secret\n')
    f('open/g_640', 0o640, 0, G)
    f('open/g_660', 0o660, 0, G)
    f('open/g_604', 0o604, 0, G)      # the group is shut out
    f('open/r_4777', 0o4777)          # set-user-ID and world-writable
    f('open/r_2777', 0o2777)          # set-group-ID and world-writable
    f('open/a_4755', 0o4755, A, A)
    f('a_priv/x', 0o644, A, A)
    f('pub/b_file', 0o644, B, B)
    f('pub/a_file', 0o666, A, A)
    f('ro/f', 0o644)


# Runs the operations of argv[2] (JSON) below argv[1], one result each:
# the errno (0 for success) and, for what succeeded, what it shows.
PJD = r'''
import json, os, stat, sys
base = sys.argv[1]
ops = json.loads(sys.argv[2])
P = lambda p: os.path.join(base, p)
def show(p):
    st = os.lstat(P(p))
    return [oct(st.st_mode), st.st_uid, st.st_gid, st.st_nlink]
def read(p):
    with open(P(p), 'rb') as f:
        return f.read().decode()
def write(p, data, flags):
    fd = os.open(P(p), os.O_WRONLY | flags)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)
def creat(p, mode, flags):
    os.close(os.open(P(p), os.O_WRONLY | os.O_CREAT | flags, mode))
out = []
for op in ops:
    name, a = op[0], op[1:]
    try:
        if name == 'read':
            res = read(a[0])
        elif name == 'write':
            write(a[0], a[1], os.O_TRUNC if a[2] else os.O_APPEND); res = show(a[0])
        elif name == 'creat':
            creat(a[0], a[1], os.O_EXCL if a[2] else 0); res = show(a[0])
        elif name == 'mkdir':
            os.mkdir(P(a[0]), a[1]); res = show(a[0])
        elif name == 'rmdir':
            os.rmdir(P(a[0])); res = None
        elif name == 'unlink':
            os.unlink(P(a[0])); res = None
        elif name == 'rename':
            os.rename(P(a[0]), P(a[1])); res = show(a[1])
        elif name == 'link':
            os.link(P(a[0]), P(a[1])); res = show(a[1])
        elif name == 'symlink':
            os.symlink(a[0], P(a[1])); res = show(a[1])
        elif name == 'mkfifo':
            os.mkfifo(P(a[0]), a[1]); res = show(a[0])
        elif name == 'mknod':
            os.mknod(P(a[0]), 0o666 | stat.S_IFCHR, os.makedev(1, 3)); res = show(a[0])
        elif name == 'chmod':
            os.chmod(P(a[0]), a[1]); res = show(a[0])
        elif name == 'chown':
            os.chown(P(a[0]), a[1], a[2]); res = show(a[0])
        elif name == 'truncate':
            os.truncate(P(a[0]), a[1]); res = show(a[0])
        elif name == 'utime':
            os.utime(P(a[0]), None if a[1] is None else (a[1], a[1])); res = None
        elif name == 'stat':
            res = show(a[0])
        elif name == 'listdir':
            res = sorted(os.listdir(P(a[0])))
        else:
            raise ValueError(name)
        out.append([0, res])
    except OSError as e:
        out.append([e.errno, None])
print(json.dumps(out))
'''

# What A and then B do; each entry is one operation.
OPS_A = [
    # Reading and writing others' files by their modes, groups included.
    ['read', 'open/a_600'], ['read', 'open/b_600'], ['read', 'open/g_640'],
    ['read', 'open/g_604'], ['read', 'a_priv/x'],
    ['write', 'open/g_660', 'by a\n', False], ['write', 'open/b_600', 'x', True],
    ['write', 'ro/f', 'x', False],
    # Creating, in directories that allow it and ones that do not.
    ['creat', 'open/new_a', 0o640, True], ['creat', 'ro/new', 0o644, False],
    ['creat', 'g_dir/new', 0o644, True], ['creat', 'sg/new_a', 0o2755, True],
    ['creat', 'open/a_644', 0o600, False], ['creat', 'open/b_600', 0o600, False],
    ['creat', 'open/b_600', 0o600, True],
    ['mkdir', 'sg/dir_a', 0o755], ['mkdir', 'a_dir/sub', 0o700],
    ['mkdir', 'ro/sub', 0o755], ['mkfifo', 'pub/fifo_a', 0o600],
    ['symlink', 'a_644', 'open/link_a'], ['mknod', 'pub/dev_a'],
    # Modes, owners and set-id bits.
    ['chmod', 'open/a_644', 0o4755], ['chmod', 'open/new_a', 0o2755],
    ['chmod', 'open/b_600', 0o644], ['chmod', 'open/r_4777', 0o777],
    ['chown', 'open/new_a', -1, G], ['chown', 'open/new_a', -1, B],
    ['chown', 'open/new_a', B, -1], ['chown', 'open/a_644', A, A],
    # A write, or a truncate, by a non-owner clears set-id bits.
    ['write', 'open/r_4777', 'a wrote\n', False], ['stat', 'open/r_4777'],
    ['truncate', 'open/r_2777', 0], ['stat', 'open/r_2777'],
    ['utime', 'open/g_660', None], ['utime', 'open/g_660', 1000000],
    ['truncate', 'open/b_600', 0],
    # Links, renames and removals, the sticky bit included.
    ['link', 'open/a_600', 'open/hl_a'], ['link', 'open/b_600', 'open/hl_b'],
    ['rename', 'pub/b_file', 'pub/stolen'], ['unlink', 'pub/b_file'],
    ['rename', 'pub/a_file', 'pub/a_moved'], ['rename', 'open/new_a', 'pub/moved'],
    ['unlink', 'ro/f'], ['rmdir', 'a_dir/sub'], ['rmdir', 'ro'],
    ['listdir', 'a_priv'], ['listdir', 'g_dir'], ['stat', 'a_priv/x'],
]
OPS_B = [
    ['read', 'open/a_600'], ['read', 'open/hl_a'], ['read', 'a_priv/x'],
    ['stat', 'a_priv/x'], ['listdir', 'a_priv'], ['listdir', 'g_dir'],
    ['read', 'g_dir/new'], ['read', 'open/g_604'],
    ['write', 'open/a_666', 'by b\n', False], ['write', 'sg/new_a', 'x', False],
    ['creat', 'pub/moved', 0o644, False], ['creat', 'open/a_600', 0o600, False],
    ['unlink', 'pub/moved'], ['unlink', 'pub/a_moved'], ['unlink', 'pub/stolen'],
    ['rename', 'pub/fifo_a', 'pub/fifo_b'], ['chmod', 'pub/fifo_a', 0o666],
    ['chmod', 'sg/dir_a', 0o777], ['chown', 'open/link_a', B, B],
    ['mkdir', 'sg/dir_a/b', 0o755], ['mkdir', 'open/dir_b', 0o755],
    ['creat', 'sg/new_b', 0o2755, True], ['chmod', 'sg/new_b', 0o2755],
    ['truncate', 'open/a_4755', 0], ['write', 'open/a_4755', 'x', False],
    ['link', 'open/a_666', 'open/hl_b2'], ['utime', 'open/a_666', None],
    ['utime', 'open/a_666', 5], ['mknod', 'open/dev_b'],
]


def tree_state(base):
    """Every entry's mode, owner, link count and content: what must be
    the same on the server as on the local disk after the runs."""
    out = {}
    for dirpath, dirs, files in os.walk(base):
        for n in dirs + files:
            p = P(dirpath, n)
            st = os.lstat(p)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(p, 'rb') as f:
                    data = f.read()
            elif stat.S_ISLNK(st.st_mode):
                data = os.readlink(p)
            out[os.path.relpath(p, base)] = (oct(st.st_mode), st.st_uid,
                                             st.st_gid, st.st_nlink, data)
    return out


def test_permissions_as_on_a_local_disk(mounter, shared_dirs):
    src, mnt = shared_dirs
    local = P(os.path.dirname(src), 'local')
    os.mkdir(local)
    os.chmod(local, 0o755)
    build_tree(local)
    build_tree(src)
    m = shared_mount(mounter, src, mnt)
    for user, ops in ((USER_A, OPS_A), (USER_B, OPS_B)):
        want = run_as(user, PJD, local, json.dumps(ops))
        got = run_as(user, PJD, m.mnt, json.dumps(ops))
        diffs = ['%-40s local %-28s mount %s' % (json.dumps(op), w, g)
                 for op, w, g in zip(ops, want, got) if w != g]
        assert not diffs, 'as uid %s, through the mount unlike a local ' \
            'disk:\n%s' % (user[1], '\n'.join(diffs))
    # Every outcome was checked by the server's kernel as the user: the
    # trees are the same, owners and set-id bits included.
    want, got = tree_state(local), tree_state(src)
    diffs = ['%s: local %s, server %s' % (k, want.get(k), got.get(k))
             for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
    assert not diffs, '\n'.join(diffs)


# ---------------------------------------------------------------------------
# The findings of issue 18, as attacks

# finding 1, as the issue gives it: cached attributes of a link's old
# target let the kernel allow what the server then did as root.
FINDING1 = r'''
import os, subprocess, sys
e = sys.argv[1]
secret = sys.argv[2]
os.mkdir(e)
with open(os.path.join(e, 'x'), 'wb') as f:
    f.write(b'\0' * 4096)
os.symlink('x', os.path.join(e, 'S'))
os.stat(os.path.join(e, 'S'))
os.symlink(secret, os.path.join(e, 'Y'))
os.rename(os.path.join(e, 'Y'), os.path.join(e, 'x'))
res = []
try:
    with open(os.path.join(e, 'S'), 'rb') as f:
        res.append(f.read(100).decode(errors='replace'))
except OSError as err:
    res.append(err.errno)
try:
    with open(os.path.join(e, 'S'), 'w') as f:
        f.write('X\n')
    res.append(0)
except OSError as err:
    res.append(err.errno)
print(res)
'''


def _secret_beside(src):
    """A root-only file outside the served root, and a world-writable
    directory `w` in it for the swaps; returns the secret's path."""
    secret = P(os.path.dirname(src), 'secret')
    with open(secret, 'w') as f:
        f.write('root only\n')
    os.chmod(secret, 0o600)
    os.mkdir(P(src, 'w'))
    os.chmod(P(src, 'w'), 0o777)
    return secret


def test_finding1_follow_symlinks_swapped_target(mounter, shared_dirs):
    src, mnt = shared_dirs
    secret = _secret_beside(src)
    m = shared_mount(mounter, src, mnt, opts=['follow_symlinks'])
    r = util.run(USER_B + ['/usr/bin/python3', '-c', FINDING1,
                           P(m.mnt, 'w', 'e'), secret], timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == '[13, 13]', \
        'read or wrote root\'s file through a swapped link: %s' % r.stdout
    with open(secret) as f:
        assert f.read() == 'root only\n'
    assert os.stat(secret).st_uid == 0


def test_finding2_create_of_a_name_that_appeared(mounter, shared_dirs):
    """B's kernel caches 'late' as missing; C makes it on the server,
    mode 0600; B's open(O_CREAT) must neither read it nor own it."""
    src, mnt = shared_dirs
    os.mkdir(P(src, 'w'))
    os.chmod(P(src, 'w'), 0o1777)
    env = util.sanitizer_env() if util.is_asan_build(util.build_dir()) \
        else dict(os.environ)
    env['QFTFS_SERVER_NOTIFY'] = 'off'       # no word of C's create
    m = shared_mount(mounter, src, mnt, opts=['negative_timeout=60'],
                     env=env)
    late = P(m.mnt, 'w', 'late')
    r = util.run(USER_B + ['stat', late], timeout=30)
    assert r.returncode != 0          # looked up: missing, and cached
    util.run(USER_C + ['sh', '-c', 'umask 077; echo C secret > %s'
                       % P(src, 'w', 'late')], check=True, timeout=30)
    script = r'''
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    print(os.read(fd, 100))
except OSError as e:
    print(e.errno)
'''
    r = util.run(USER_B + ['/usr/bin/python3', '-c', script, late],
                 timeout=30)
    assert r.stdout.strip() == '13', 'B opened C\'s new file: %s %s' % (
        r.stdout, r.stderr)
    st = os.stat(P(src, 'w', 'late'))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (C, 0o600)
    with open(P(src, 'w', 'late')) as f:
        assert f.read() == 'C secret\n'
    # B's own create of a name that does not exist still works, and a
    # name C made that B may open is opened (the kernel looked it up).
    util.run(USER_C + ['sh', '-c', 'umask 000; echo shared > %s'
                       % P(src, 'w', 'open')], check=True, timeout=30)
    script = r'''
import os, sys
d = sys.argv[1]
os.close(os.open(os.path.join(d, 'mine'), os.O_RDWR | os.O_CREAT, 0o600))
fd = os.open(os.path.join(d, 'open'), os.O_RDWR | os.O_CREAT, 0o644)
print(os.read(fd, 100).decode().strip())
'''
    r = util.run(USER_B + ['/usr/bin/python3', '-c', script,
                           P(m.mnt, 'w')], timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == 'shared', r
    assert os.stat(P(src, 'w', 'mine')).st_uid == B
    assert os.stat(P(src, 'w', 'open')).st_uid == C


def test_finding3_devices_and_set_id(mounter, shared_dirs):
    src, mnt = shared_dirs
    os.mkdir(P(src, 'w'))
    os.chmod(P(src, 'w'), 0o777)
    with open(P(src, 'w', 'b_file'), 'w') as f:
        f.write('b\n')
    os.chown(P(src, 'w', 'b_file'), B, B)
    m = shared_mount(mounter, src, mnt)
    # Not even root makes a device node through the mount: the server
    # was not started with --allow-devices.
    with pytest.raises(PermissionError):
        os.mknod(P(m.mnt, 'w', 'sda'), 0o666 | stat.S_IFBLK,
                 os.makedev(8, 0))
    assert not os.path.lexists(P(src, 'w', 'sda'))
    script = r'''
import os, sys
w = sys.argv[1]
res = []
for fn in (lambda: os.chmod(os.path.join(w, 'b_file'), 0o4777),
           lambda: os.chown(os.path.join(w, 'b_file'), 1001, -1)):
    try:
        fn(); res.append(0)
    except OSError as e:
        res.append(e.errno)
fd = os.open(os.path.join(w, 'a_suid'), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o4755)
os.close(fd)
print(res)
'''
    r = util.run(USER_A + ['/usr/bin/python3', '-c', script, P(m.mnt, 'w')],
                 timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == '[1, 1]', r
    st = os.stat(P(src, 'w', 'b_file'))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (B, 0o644)
    # A's set-user-ID file is A's: nothing more than A could make.
    st = os.stat(P(src, 'w', 'a_suid'))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (A, 0o4755)


def test_finding4_root_server_that_cannot_act_as_callers_is_refused(
        mounter, shared_dirs):
    src, mnt = shared_dirs
    env = util.sanitizer_env() if util.is_asan_build(util.build_dir()) \
        else dict(os.environ)
    env['QFTFS_SERVER_CRED'] = 'off'
    m = shared_mount(mounter, src, mnt, env=env, start=False, expect_rc=1)
    with pytest.raises(util.MountError):
        m.start()
    log = m.log()
    assert 'cannot act as each user of this shared mount' in log, log
    assert 'allow_other' in log
    # The same server without allow_other mounts: one user, who holds
    # the root login anyway.
    m = mounter(src=src, mnt=mnt, env=env)
    os.mkdir(P(m.mnt, 'd'))


def test_finding7_owner_change_never_follows_a_swapped_link(mounter,
                                                            shared_dirs):
    """follow_symlinks: a name C swaps for a link to root's file outside
    the root; A's chown through it is A's, refused, and what A makes is
    A's without any chown at all."""
    src, mnt = shared_dirs
    secret = _secret_beside(src)
    m = shared_mount(mounter, src, mnt, opts=['follow_symlinks'])
    util.run(USER_A + ['mkdir', P(m.mnt, 'w', 'd')], check=True, timeout=30)
    assert os.stat(P(src, 'w', 'd')).st_uid == A
    os.rmdir(P(src, 'w', 'd'))
    util.run(USER_C + ['ln', '-s', secret, P(src, 'w', 'd')], check=True,
             timeout=30)
    time.sleep(1.2)       # the kernel's cached entry for d expires
    r = util.run(USER_A + ['chown', '%d:%d' % (A, A), P(m.mnt, 'w', 'd')],
                 timeout=30)
    assert r.returncode != 0, 'chown through the link succeeded'
    st = os.stat(secret)
    assert (st.st_uid, st.st_gid) == (0, 0)


def test_symlink_swap_under_a_cached_directory(mounter, shared_dirs):
    """C swaps a directory A looked into for a symlink to C's private
    directory: A's create below it must not land there (the server
    refuses a symlink on the way, and A may not enter C's directory)."""
    src, mnt = shared_dirs
    w = P(src, 'w')
    os.mkdir(w)
    os.chmod(w, 0o777)
    util.run(USER_C + ['mkdir', '-m', '777', '-p', P(w, 'd', 'sub')],
             check=True, timeout=30)
    m = shared_mount(mounter, src, mnt, opts=['entry_timeout=60',
                                              'attr_timeout=60'])
    util.run(USER_A + ['ls', P(m.mnt, 'w', 'd', 'sub')], check=True,
             timeout=30)
    util.run(USER_C + ['sh', '-c', 'mv %s %s && mkdir -m 700 %s && '
                       'mkdir -m 777 %s && ln -s priv %s' % (
                           P(w, 'd'), P(w, 'old'), P(w, 'priv'),
                           P(w, 'priv', 'sub'), P(w, 'd'))],
             check=True, timeout=30)
    util.run(USER_A + ['touch', P(m.mnt, 'w', 'd', 'sub', 'planted')],
             timeout=30)
    assert os.listdir(P(w, 'priv', 'sub')) == [], \
        'A created a file in C\'s private directory'
    assert os.listdir(P(w, 'old', 'sub')) == []


def test_reopen_after_reconnect_acts_as_the_opener(mounter, shared_dirs):
    """A's open file outlives a killed server: the client opens it again
    on the new one, from whichever thread needs it, as A (a request that
    names a path and no caller would be refused)."""
    import signal
    import subprocess
    src, mnt = shared_dirs
    os.mkdir(P(src, 'w'))
    os.chmod(P(src, 'w'), 0o755)
    far = 60 << 20              # beyond any read-ahead of the first read
    with open(P(src, 'w', 'a_file'), 'wb') as f:
        f.write(b'first line\n')
        f.seek(far)
        f.write(b'far line\n')
    os.chown(P(src, 'w', 'a_file'), A, A)
    os.chmod(P(src, 'w', 'a_file'), 0o600)
    m = shared_mount(mounter, src, mnt)
    script = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(os.pread(fd, 11, 0).decode().strip(), flush=True)
sys.stdin.readline()
try:
    print(os.pread(fd, 9, int(sys.argv[2])).decode().strip(), flush=True)
except OSError as e:
    print('errno', e.errno, flush=True)
"""
    p = subprocess.Popen(USER_A + ['/usr/bin/python3', '-c', script,
                                   P(m.mnt, 'w', 'a_file'), str(far)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == 'first line'
        for pid in list(m.server_pids):
            os.kill(pid, signal.SIGKILL)
        p.stdin.write('\n')
        p.stdin.flush()
        line = p.stdout.readline().strip()
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    assert line == 'far line', 'after the reconnect: %r\n%s' % (
        line, util.tail(m.log()))


# ---------------------------------------------------------------------------
# The same over ssh: the session's two sealed TCP connections each agree
# on acting as the caller.

def test_shared_mount_over_ssh(mounter, shared_dirs, tmp_path):
    import sshd as sshd_mod
    why = sshd_mod.unavailable_reason()
    if why:
        pytest.skip('ssh tests SKIPPED: ' + why)
    src, mnt = shared_dirs
    os.mkdir(P(src, 'pub'))
    os.chmod(P(src, 'pub'), 0o1777)
    with open(P(src, 'secret'), 'w') as f:
        f.write('root only\n')
    os.chmod(P(src, 'secret'), 0o600)
    s = sshd_mod.Sshd(str(tmp_path / 'sshd'))
    try:
        s.start()
        home = s.client_home(str(tmp_path / 'home'))
        b = util.build_dir()
        m = mounter(src=s.source(src), mnt=mnt, build=b,
                    opts=['allow_other', 'server=' + util.server_bin(b)],
                    env=s.client_env(home, None, b),
                    extra_args=['-p', str(s.port)])
        script = r'''
import os, sys
d = sys.argv[1]
res = []
try:
    open(os.path.join(d, 'secret')).read(); res.append(0)
except OSError as e:
    res.append(e.errno)
with open(os.path.join(d, 'pub', 'mine'), 'w') as f:
    f.write('a\n')
os.mkdir(os.path.join(d, 'pub', 'dir'))
print(res)
'''
        r = util.run(USER_A + ['/usr/bin/python3', '-c', script, m.mnt],
                     timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == '[13]', r
        for n in ('mine', 'dir'):
            assert os.lstat(P(src, 'pub', n)).st_uid == A, n
        r = util.run(USER_B + ['rm', '-rf', P(m.mnt, 'pub', 'mine')],
                     timeout=30)
        assert r.returncode != 0 and os.path.exists(P(src, 'pub', 'mine'))
    finally:
        s.stop()
