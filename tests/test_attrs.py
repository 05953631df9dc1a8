# SPDX-License-Identifier: MIT
"""Attributes exact at once, and where the mount behaves as ext4 does with
modes, ACLs and mount options (issue 19).

Each test does the same thing on a local directory of this machine and
through a mount, and requires the same outcome, as test_multiuser.py's
pjdfstest-style check does: the local directory is the reference, not a
list of expected values written here.

  * every tool that copies a tree with its modes (cp -a, rsync -a, tar xp,
    install -m): stat right after it returns says what the source says,
    in both commit modes (cp -a writes the final mode as an access ACL,
    which the mount used to leave out of what it answered for ~2 s)
  * default ACLs without the umask, set-group-ID directories, ACL entries
    after chmod and setfacl; ACLs checked on a shared mount
  * set-ID bits cleared by writes, truncation, fallocate and punching,
    and by chmod or setfacl of an owner outside the group
  * fstat of a directory renamed over while open
  * -o noatime on the server too; remount ro and back
  * ls -l of a big directory asks for SELinux labels once (issue 20)
  * a late answer to a chown does not undo the chmod predicted after it
    (commit=async; the server held before each reply by its fault hook)

Each test was checked to fail on the code before its fix.
"""
import os
import shutil
import stat
import signal
import time

import pytest

import util

P = os.path.join

# Every permission value in each of the three classes (the other two
# held), and the special bits alone and together: what a caller may set.
FILE_MODES = sorted(set(
    [b << 6 | 0o54 for b in range(8)] +
    [0o700 | b << 3 | 0o5 for b in range(8)] +
    [0o640 | b for b in range(8)] +
    [0o4755, 0o2755, 0o1755, 0o6755, 0o7777, 0o2644, 0o4644, 0o2604,
     0o1600, 0o7000, 0o000]))
DIR_MODES = [0o755, 0o700, 0o750, 0o711, 0o555, 0o1777, 0o2775, 0o2750,
             0o3770, 0o7755]
OWNERS = [(0, 0), (1234, 0), (65534, 65534), (1234, 4321)]


def make_source(base):
    """A tree with every mode above, owners changed and not, and
    sub-second times (distinct per file), files and directories."""
    os.makedirs(base)
    for i, mode in enumerate(FILE_MODES):
        p = P(base, 'f%04o' % mode)
        with open(p, 'wb') as f:
            f.write(b'x' * (i % 3))
        uid, gid = OWNERS[i % len(OWNERS)]
        os.chown(p, uid, gid)
        os.chmod(p, mode)
        os.utime(p, ns=(1500000000_123456789 + i * 1000003,
                        1600000000_987654321 + i * 1000033))
    for i, mode in enumerate(DIR_MODES):
        d = P(base, 'd%04o' % mode)
        os.mkdir(d)
        with open(P(d, 'in'), 'wb') as f:
            f.write(b'y')
        os.utime(P(d, 'in'), ns=(1400000000_000000001, 1400000000_000000002))
        uid, gid = OWNERS[i % len(OWNERS)]
        os.chown(d, uid, gid)
        os.chmod(d, mode)
        os.utime(d, ns=(1300000000_111111111 + i, 1300000000_222222222 + i))


def snapshot(root):
    """What stat(1) says of every name below root: mode, owner and mtime.
    Through coreutils' stat on purpose: it asks statx for those fields
    only, which the kernel answers from its cache unless the mount made
    it drop what it had (the ctime alone is marked stale by a setxattr)."""
    names = []
    for dirpath, dirnames, filenames in os.walk(root):
        names += [P(dirpath, n) for n in dirnames + filenames]
    out = {}
    if not names:
        return out
    r = util.run(['stat', '--printf=%n\\t%f %u %g %.9Y\\n', '--'] + names,
                 check=True)
    for line in r.stdout.splitlines():
        name, row = line.split('\t')
        out[os.path.relpath(name, root)] = row
    return out


def diff(want, got):
    bad = ['%s: source %s, copy %s' % (k, want.get(k), got.get(k))
           for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
    return bad


def copy_cmds(src, dst, tarball):
    return {
        'cp -a': ['cp', '-a', src, dst],
        'rsync -a': ['rsync', '-a', src + '/', dst],
        'tar xp': ['tar', 'xpf', tarball, '-C', dst],
    }


@pytest.mark.parametrize('commit', ['close', 'async'])
def test_copied_tree_stat_right_at_once(mounter, tmp_path, need_root,
                                        commit):
    for tool in ('rsync', 'tar', 'install'):
        if not shutil.which(tool):
            pytest.skip('%s is missing' % tool)
    src = str(tmp_path / 'source')
    make_source(src)
    tarball = str(tmp_path / 'source.tar')
    util.run(['tar', '--format=posix', '-cpf', tarball, '-C', src, '.'], check=True)
    want = snapshot(src)
    m = mounter(opts=['commit=' + commit])
    bad = []
    for tool, cmd in copy_cmds(src, P(m.mnt, 'x'), tarball).items():
        dst = P(m.mnt, tool.split()[0])
        cmd = [dst if w == P(m.mnt, 'x') else w for w in cmd]
        if tool == 'tar xp':
            os.mkdir(dst)
        r = util.run(cmd, timeout=120)
        assert r.returncode == 0, '%s: %s' % (tool, r.stderr)
        # Right after the tool returns: no sleep, no sync.
        got = snapshot(dst)
        bad += ['%s: %s' % (tool, b) for b in diff(want, got)]
    # install -m of each file mode, stat at once.
    os.mkdir(P(m.mnt, 'install'))
    for mode in FILE_MODES:
        dst = P(m.mnt, 'install', 'f%04o' % mode)
        r = util.run(['install', '-m', '%o' % mode, '/dev/null', dst])
        assert r.returncode == 0, r.stderr
        got = stat.S_IMODE(os.lstat(dst).st_mode)
        if got != mode:
            bad.append('install -m %04o: stat says %04o' % (mode, got))
    assert not bad, '\n'.join(bad[:40])


# --- the same script on a local directory and through a mount -----------

USER = ['setpriv', '--reuid=1234', '--regid=1234', '--clear-groups']


def both(mounter, wtmp, script, opts=()):
    """Runs bash `script` in a fresh directory T of a local directory and
    of a mount of another (with `opts`), as root with umask 022; $U runs
    a command as uid 1234, in none of the groups the script uses.  The
    two outputs, local first."""
    for tool in ('setfacl', 'getfacl', 'setpriv', 'fallocate'):
        if not shutil.which(tool):
            pytest.skip('%s is missing' % tool)
    local = P(wtmp, 'local')
    src, mnt = P(wtmp, 'src'), P(wtmp, 'mnt')
    for d in (local, src, mnt):
        os.mkdir(d)
        os.chmod(d, 0o777)
    mounter(src=src, mnt=mnt, opts=list(opts))
    out = []
    for base in (local, mnt):
        t = P(base, 'T')
        os.mkdir(t)
        os.chmod(t, 0o777)
        r = util.run(['bash', '-c', 'umask 022; set -u; cd "$1"; ' + script,
                      'bash', t], timeout=60,
                     env=dict(os.environ, U=' '.join(USER), LC_ALL='C'))
        out.append(r.stdout + r.stderr.replace(base, 'BASE'))
    return out


ACL_SCRIPT = r'''
show() { for f in "$@"; do echo "$f $(stat -c '%a %u %g' "$f")";
         getfacl -cp "$f" | sort | tr '\n' ' '; echo; done; }
# A default ACL decides a new object's mode alone: no umask.
mkdir dd; setfacl -d -m u::rwx,g::rwx,o::rx,u:1234:rwx dd
mkdir dd/sub; touch dd/f; mkfifo dd/p; python3 -c "import os; os.close(os.open('dd/o', os.O_CREAT|os.O_WRONLY, 0o777))"
show dd/sub dd/f dd/p dd/o
# Without one, the umask.
mkdir plain plain/sub; touch plain/f; show plain/sub plain/f
# A set-group-ID directory with a default ACL: its subdirectory inherits
# both.
mkdir -m 2775 sgd; chown :4321 sgd; setfacl -d -m g::rwx sgd
mkdir sgd/sub; touch sgd/f; show sgd/sub sgd/f
# The access ACL's entries and the mode agree after chmod and setfacl.
touch a1; setfacl -m u:1234:rw,g::r a1; chmod 400 a1; show a1
chmod 751 a1; show a1; setfacl -m m::rw a1; show a1
touch a2; chmod 640 a2; setfacl -m u::r,o::rw a2; show a2
mkdir a3; setfacl -m u:1234:rx a3; chmod 700 a3; show a3
setfacl -b a1; show a1
'''


def test_acls_as_on_a_local_disk(mounter, wtmp, need_root):
    local, mount = both(mounter, wtmp, ACL_SCRIPT)
    assert mount == local


SETID_SCRIPT = r'''
# Files of uid 1234 in group 4321, which 1234 is not in.
mk() { install -m "$2" /dev/null "$1"; echo data > "$1"; chown 1234:4321 "$1"; chmod "$2" "$1"; }
for m in 2666 2676 6777 4755 6755; do
  mk fa$m $m; $U fallocate -l 8192 fa$m
  mk fk$m $m; $U fallocate -n -o 0 -l 16384 fk$m
  mk ph$m $m; $U fallocate -p -o 0 -l 2 ph$m
  mk wr$m $m; $U sh -c "echo x >> wr$m"
  mk tr$m $m; $U truncate -s 1 tr$m
  echo "$m: $(stat -c %a fa$m fk$m ph$m wr$m tr$m | tr '\n' ' ')"
done
# chmod and setfacl by the owner, not in the group, drop set-group-ID.
mk c1 644; $U chmod 2755 c1; echo "chmod: $(stat -c %a c1)"
mk c2 2755; $U setfacl -m u::rwx,g::r-x,o::r-x c2; echo "setfacl equiv: $(stat -c %a c2)"
mk c3 2755; $U setfacl -m u:1234:rwx c3; echo "setfacl extended: $(stat -c %a c3)"
mk c4 2775; $U chmod g-w c4; echo "chmod g-w: $(stat -c %a c4)"
'''


def test_setid_cleared_as_on_a_local_disk(mounter, wtmp, need_root):
    """A shared mount (the server, root, acts as each caller): fallocate,
    a hole punched, a write and a truncation by another user clear
    set-user-ID and set-group-ID as ext4 does; chmod and setfacl by an
    owner who is not in the file's group drop set-group-ID."""
    local, mount = both(mounter, wtmp, SETID_SCRIPT, opts=['allow_other'])
    assert mount == local


RENAME_OVER_OPEN_DIR = r'''
import os, sys
os.mkdir('a'); os.mkdir('b'); os.chmod('b', 0o751)
fd = os.open('b', os.O_RDONLY | os.O_DIRECTORY)
os.rename('a', 'b')
try:
    st = os.fstat(fd)
    print('fstat', oct(st.st_mode), st.st_uid, st.st_gid, st.st_nlink)
except OSError as e:
    print('fstat', e.errno)
'''


def test_fstat_of_a_directory_renamed_over(mounter, wtmp, need_root):
    """A descriptor open on a directory that a rename replaced: fstat
    answers the removed directory (no links), as ext4 does, not ENOENT."""
    local, mount = both(mounter, wtmp, 'python3 -c "$0"; true'
                        .replace('$0', RENAME_OVER_OPEN_DIR.replace('"', '\\"')))
    assert 'fstat 0o40751 0 0 0' in local
    assert mount == local


def test_remount_read_only_and_back(mounter, tmp_path, need_root):
    """`mount -o remount,ro` of a qftfs mount: mount(8) runs the helper,
    which has the kernel change the flags (ro, back to rw); an option of
    qftfs's own is refused with a message that says why."""
    helper = P(util.build_dir(), 'fuse', 'mount.qftfs')
    m = mounter()
    with open(P(m.mnt, 'f'), 'w') as f:
        f.write('x')
    r = util.run(['sh', helper, m.src, m.mnt, '-o', 'remount,ro'])
    assert r.returncode == 0, r.stderr
    assert 'ro' in util.find_mount(m.mnt)['options'].split(',')
    util.expect_errno(30, open, P(m.mnt, 'g'), 'w')      # EROFS
    assert open(P(m.mnt, 'f')).read() == 'x'
    r = util.run(['sh', helper, m.src, m.mnt, '-o', 'remount,rw'])
    assert r.returncode == 0, r.stderr
    with open(P(m.mnt, 'g'), 'w') as f:
        f.write('y')
    r = util.run(['sh', helper, m.src, m.mnt, '-o', 'remount,commit=async'])
    assert r.returncode != 0
    assert 'commit=async cannot change on a mounted qftfs' in r.stderr
    assert 'rw' in util.find_mount(m.mnt)['options'].split(',')
    # qftfs itself, given -o remount (a helper that is not ours), says
    # how it is done instead of "unknown option".
    r = util.run([util.client_bin(util.build_dir()), '-o', 'remount,ro',
                  m.src, m.mnt])
    assert r.returncode == 2
    assert 'mount -o remount,ro MOUNTPOINT' in r.stderr


def test_noatime_reads_and_execs_leave_atime(mounter, tmp_path):
    """-o noatime: reading or executing a file through the mount leaves
    its access time on the server as a noatime ext4 mount would; without
    it the server's relatime rules apply (the same steps move it)."""
    results = {}
    for opt in ('noatime', 'atime'):
        src = tmp_path / ('src-' + opt)
        src.mkdir()
        prog, data = src / 'prog', src / 'data'
        prog.write_text('#!/bin/sh\necho hi\n')
        prog.chmod(0o755)
        data.write_text('some data\n')
        old = 978307200_000000000       # 2001-01-01: relatime updates it
        for p in (prog, data):
            os.utime(p, ns=(old, 1600000000_000000000))
        m = mounter(src=str(src), opts=[opt])
        assert util.run([P(m.mnt, 'prog')]).stdout == 'hi\n'
        with open(P(m.mnt, 'data')) as f:
            assert f.read() == 'some data\n'
        m.stop()
        results[opt] = [os.stat(p).st_atime_ns != old for p in (prog, data)]
    assert results['noatime'] == [False, False]
    assert results['atime'] == [True, True]


SHARED_ACL_SCRIPT = r'''
# What an ACL entry grants a user the mode bits do not, and what it
# denies that they would grant: this kernel checks both on a shared mount.
echo secret > r; chmod 640 r; setfacl -m u:1234:r r
echo open > n; chmod 644 n; setfacl -m u:1234:- n
mkdir d; chmod 750 d; setfacl -m u:1234:rx d; echo in > d/f
echo w > w; chmod 644 w; setfacl -m u:1234:rw w
$U cat r; echo "read r: $?"
$U cat n; echo "read n: $?"
$U ls d; echo "list d: $?"
$U sh -c 'echo more >> w'; echo "append w: $?"; cat w
setfacl -x u:1234 r; $U cat r; echo "read r after -x: $?"
'''


def test_acls_checked_on_a_shared_mount(mounter, wtmp, need_root):
    """A shared mount (allow_other, default_permissions): the kernel
    checks access ACLs as ext4 does (FUSE_CAP_POSIX_ACL), including right
    after an entry is removed."""
    local, mount = both(mounter, wtmp, SHARED_ACL_SCRIPT,
                        opts=['allow_other'])
    assert 'read r: 0' in local and 'read n: 1' in local
    assert mount == local


def stats_json(mnt):
    import json
    r = util.run([util.client_bin(util.build_dir()), '--stats', '--json',
                  mnt], timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_ls_l_of_a_big_directory_asks_for_labels_once(mounter, tmp_path):
    """Issue 20: `ls -l` asks for every entry's SELinux label and access
    ACL.  Where the server labels nothing, the mount answers the label
    "not supported" without asking, ls stops asking for the mount, and the
    kernel requests fall from two per entry to one; a label set through
    the mount, or listed on an object, is served again."""
    n = 600
    m = mounter()
    d = P(m.src, 'd')
    os.mkdir(d)
    for i in range(n):
        open(P(d, 'f%d' % i), 'w').close()
    util.run(['ls', '-l', P(m.mnt, 'd')], check=True)      # cold
    before = stats_json(m.mnt)['requests']
    util.run(['ls', '-l', P(m.mnt, 'd')], check=True)      # warm
    asked = stats_json(m.mnt)['requests'] - before
    assert asked < 1.3 * n, '%d kernel requests for ls -l of %d' % (asked, n)
    util.expect_errno(95, os.getxattr, P(m.mnt, 'd', 'f1'),
                      'security.selinux')
    # A label on the server, seen in a listing of that file's xattrs
    # (as cp -a and getfattr -d read them): asked for from then on.
    open(P(d, 'g'), 'w').close()
    os.setxattr(P(d, 'g'), 'security.selinux', b'lab\0')
    util.until_visible(P(m.mnt, 'd', 'g'))
    assert 'security.selinux' in os.listxattr(P(m.mnt, 'd', 'g'))
    assert os.getxattr(P(m.mnt, 'd', 'g'), 'security.selinux') == b'lab\0'
    util.expect_errno(61, os.getxattr, P(m.mnt, 'd', 'f1'),
                      'security.selinux')
    # Set through the mount: likewise.
    m2 = mounter()
    open(P(m2.mnt, 'h'), 'w').close()
    util.expect_errno(95, os.getxattr, P(m2.mnt, 'h'), 'security.selinux')
    os.setxattr(P(m2.mnt, 'h'), 'security.selinux', b'lab2\0')
    assert os.getxattr(P(m2.mnt, 'h'), 'security.selinux') == b'lab2\0'


def test_setgid_dir_filled_before_its_chmod_is_answered(mounter, tmp_path,
                                                       need_root):
    """rsync -a's order for a set-group-ID directory on a commit=async
    mount: mkdir, chown, chmod, then a file made in it at once.  Here the
    chown's reply reaches the client after the chmod was answered, and
    the chmod's is held back (the server's fault hook stops it before
    each SETATTR reply): the late reply must not put back the mode from
    before the chmod.  It did (1 CI run in 7 of the copy test above):
    the file's group was then predicted as the caller's, not the
    directory's, and rsync, seeing the group it wanted, never chowned
    it."""
    wrap, _ = util.fault_server(tmp_path, util.build_dir(),
                                'QFTFS_FAULT_STOP_REPLY', 'SETATTR,SETATTR')
    m = mounter(opts=['commit=async'], server=wrap)
    srv = m.server_pids[0]
    # A directory this mount made, whose listing it knows (as rsync's).
    d = P(m.mnt, 'top', 'd')
    os.makedirs(d)

    def stopped():
        deadline = time.monotonic() + 30 * util.timeout_scale()
        while not util.proc_stopped(srv):
            assert time.monotonic() < deadline, 'the server never stopped'
            time.sleep(0.01)

    try:
        os.chown(d, 65534, 65534)
        stopped()               # the chown done, its reply held
        os.chmod(d, 0o2775)     # answered by the client
        os.kill(srv, signal.SIGCONT)
        stopped()               # the chown answered, the chmod's held
        os.close(os.open(P(d, 'in'), os.O_WRONLY | os.O_CREAT, 0o644))
        seen = os.stat(P(d, 'in')).st_gid
    finally:
        os.kill(srv, signal.SIGCONT)
    assert seen == 65534, 'a file made in the set-group-ID directory ' \
        'is said to have group %d' % seen
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o2775
    os.sync()
    assert os.stat(P(m.src, 'top', 'd', 'in')).st_gid == 65534
