# SPDX-License-Identifier: MIT
"""mount(8) and /etc/fstab: the mount.qftfs and mount.fuse.qftfs helpers
from an installed tree (`meson install --destdir`).

Each case runs in a private mount namespace (unshare -m) where the
installed tree is laid over the system: its helpers over /usr/sbin
(overlayfs), its /usr/local over /usr/local, a test fstab over
/etc/fstab, and, for the normal user, a /dev/fuse it may open.  Nothing
outside the namespace changes; every mount made in it goes away with it.

1. The typical sshfs fstab line, type changed to fuse.qftfs
   (reconnect,ServerAliveInterval=15,ServerAliveCountMax=3,idmap=user,
   IdentityFile=...,_netdev,allow_other), mounted over ssh by
   `mount MOUNTPOINT` as root; the same with `mount -t qftfs` on the
   command line.
2. A `noauto,user` line mounted and unmounted by a created normal user
   with root's HOME left in the environment (as mount(8) leaves it): the
   ssh keys must come from the home directory in the password database.
"""

import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

import sshd as sshd_mod
import util

P = os.path.join
# Unique per run: two suites on one machine must not share the user.
USER = 'qftfs-fstab-%d' % os.getpid()


def _need(tools):
    for t in tools:
        if not shutil.which(t):
            pytest.skip('fstab tests SKIPPED: %s is not installed' % t)


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """`meson install --destdir` of the build tree under test."""
    if os.geteuid() != 0:
        pytest.skip('fstab tests SKIPPED: need root (mount namespaces, '
                    'a test user)')
    why = util.fuse_unavailable_reason()
    if why:
        pytest.skip('fstab tests SKIPPED: FUSE unavailable: ' + why)
    _need(['unshare', 'meson', 'useradd', 'setpriv'])
    # Open to all along its path: the normal user's ssh session runs
    # qftfs-server from here (pytest's temp dirs are 0700).
    dest = tempfile.mkdtemp(prefix='qftfs-fstab-dest-', dir='/tmp')
    os.chmod(dest, 0o755)
    r = util.run(['meson', 'install', '-C', util.build_dir(), '--no-rebuild',
                  '--destdir', dest], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for helper in ('mount.qftfs', 'mount.fuse.qftfs'):
        assert os.access(P(dest, 'sbin', helper), os.X_OK), \
            '%s not installed under the mount_helper_dir' % helper
    bindir = util.run(['meson', 'introspect', '--buildoptions',
                       util.build_dir()], timeout=60).stdout
    assert '"prefix"' in bindir
    yield dest
    shutil.rmtree(dest, ignore_errors=True)


@pytest.fixture(scope='module')
def sshd(tmp_path_factory, installed):
    why = sshd_mod.unavailable_reason()
    if why:
        pytest.skip('fstab ssh tests SKIPPED: ' + why)
    # sshd reads authorized_keys as the user logging in: the whole path
    # must be open to the normal user, unlike pytest's 0700 temp dirs.
    base = tempfile.mkdtemp(prefix='qftfs-fstab-sshd-', dir='/tmp')
    os.chmod(base, 0o755)
    s = sshd_mod.Sshd(base)
    try:
        s.start()
    except Exception as e:  # noqa: BLE001
        s.stop()
        pytest.fail('cannot start sshd: %s' % e, pytrace=False)
    yield s
    s.stop()
    shutil.rmtree(base, ignore_errors=True)


def prefix_of_install(dest):
    """The prefix the tree was configured with: where qftfs is under
    `dest` (the helper names qftfs by its installed path)."""
    for root, _, files in os.walk(dest):
        if 'qftfs' in files and root.endswith('/bin'):
            return os.path.dirname(root[len(dest):])
    pytest.fail('no bin/qftfs under %s' % dest)


def namespace_script(dest, fstab, body, user_dev=False):
    """A shell script that lays the installed tree over the system in the
    current (private) mount namespace, then runs `body`."""
    prefix = prefix_of_install(dest)
    # Where mount(8) finds helpers: /sbin, which merged-/usr systems make
    # a link to /usr/sbin.
    sbin = os.path.realpath('/sbin')
    lines = [
        'set -eu',
        'mount -t overlay overlay -o lowerdir=%s/sbin:%s %s'
        % (dest, sbin, sbin),
        'mount --bind %s%s %s' % (dest, prefix, prefix),
        'mount --bind %s /etc/fstab' % fstab,
    ]
    if user_dev:
        # /dev/fuse may be root-only (0600) in a container; a node of our
        # own, in a tmpfs of the namespace, lets the normal user open it.
        devdir = os.path.dirname(fstab) + '/dev'
        lines += ['mkdir -p %s' % devdir,
                  'mount -t tmpfs -o mode=755 tmpfs %s' % devdir,
                  'mknod -m 666 %s/fuse c 10 229' % devdir,
                  'mount --bind %s/fuse /dev/fuse' % devdir]
    return '\n'.join(lines + [body]) + '\n'


def run_in_namespace(script, timeout=120):
    return util.run(['unshare', '--mount', '--propagation', 'private',
                     'sh', '-c', script], timeout=timeout)


def kill_leftovers(mnt):
    """A failed script may leave the client in the namespace: end it."""
    for pid in util.find_processes(mnt):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_sshfs_fstab_line(installed, sshd, wtmp):
    """The typical sshfs fstab line with the type fuse.qftfs, and the same
    mount with `mount -t qftfs`."""
    home = sshd.client_home(P(wtmp, 'home'))
    served = P(wtmp, 'served')
    os.mkdir(served)
    with open(P(served, 'hello'), 'w') as f:
        f.write('from the server\n')
    mnt = P(wtmp, 'mnt')
    os.mkdir(mnt)
    prefix = prefix_of_install(installed)
    server = '%s%s/bin/qftfs-server' % (installed, prefix)
    opts = ('reconnect,ServerAliveInterval=15,ServerAliveCountMax=3,'
            'idmap=user,IdentityFile=%s/.ssh/id_ed25519,'
            'UserKnownHostsFile=%s/.ssh/known_hosts,_netdev,allow_other,'
            'port=%d,server=%s' % (home, home, sshd.port, server))
    fstab = P(wtmp, 'fstab')
    with open(fstab, 'w') as f:
        f.write('# sshfs line, type changed\n'
                '%s %s fuse.qftfs %s 0 0\n' % (sshd.source(served), mnt, opts))
    body = '\n'.join([
        'trap "umount -l %s 2>/dev/null || true" EXIT' % mnt,
        'mount %s' % mnt,
        'grep " %s fuse.qftfs " /proc/mounts' % mnt,
        'cat %s/hello' % mnt,
        'echo written > %s/new' % mnt,
        'umount %s' % mnt,
        'echo UNMOUNTED-1',
        'mount -t qftfs -o port=%d,server=%s,IdentityFile=%s/.ssh/id_ed25519'
        ',UserKnownHostsFile=%s/.ssh/known_hosts,reconnect %s %s'
        % (sshd.port, server, home, home, sshd.source(served), mnt),
        'grep " %s fuse.qftfs " /proc/mounts' % mnt,
        'cat %s/new' % mnt,
        'umount %s' % mnt,
        'echo UNMOUNTED-2',
    ])
    try:
        r = run_in_namespace(namespace_script(installed, fstab, body))
    finally:
        kill_leftovers(mnt)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert 'from the server' in r.stdout
    assert 'allow_other' in r.stdout          # reached the kernel
    assert 'UNMOUNTED-2' in r.stdout, out
    assert 'written' in r.stdout
    with open(P(served, 'new')) as f:
        assert f.read() == 'written\n'
    # Nothing was mounted outside the namespace.
    assert not util.find_mount(mnt)


@pytest.fixture
def normal_user(wtmp):
    """A created user whose home (in the password database) is under
    wtmp; removed afterwards."""
    home = P(wtmp, 'userhome')
    try:
        pwd.getpwnam(USER)
        util.run(['userdel', USER], timeout=60)
    except KeyError:
        pass
    # Password '*': no password, but not locked (sshd refuses locked
    # accounts even to keys).
    r = util.run(['useradd', '-M', '-d', home, '-s', '/bin/sh', '-p', '*',
                  USER], timeout=60)
    assert r.returncode == 0, r.stderr
    os.mkdir(home)
    pw = pwd.getpwnam(USER)
    yield pw
    util.run(['pkill', '-KILL', '-u', USER], timeout=30)
    util.run(['userdel', USER], timeout=60)


def test_user_noauto_line(installed, sshd, wtmp, normal_user):
    """`noauto,user` fstab line: a normal user mounts and unmounts it with
    plain mount/umount.  HOME is left at /root, as mount(8) would leave
    it: the keys must come from the user's home in the password
    database."""
    pw = normal_user
    sshd.client_home(pw.pw_dir)
    for root, dirs, files in os.walk(pw.pw_dir):
        for n in dirs + files:
            os.chown(P(root, n), pw.pw_uid, pw.pw_gid)
    os.chown(pw.pw_dir, pw.pw_uid, pw.pw_gid)
    served = P(wtmp, 'userserved')
    os.mkdir(served)
    os.chown(served, pw.pw_uid, pw.pw_gid)
    mnt = P(wtmp, 'usermnt')
    os.mkdir(mnt)
    os.chown(mnt, pw.pw_uid, pw.pw_gid)
    prefix = prefix_of_install(installed)
    server = '%s%s/bin/qftfs-server' % (installed, prefix)
    src = '%s@%s:%s' % (USER, sshd.addr, served)
    fstab = P(wtmp, 'fstab')
    with open(fstab, 'w') as f:
        f.write('%s %s fuse.qftfs noauto,user,_netdev,nofail,'
                'x-systemd.automount,reconnect,idmap=user,port=%d,server=%s'
                ' 0 0\n' % (src, mnt, sshd.port, server))
    as_user = ('env HOME=/root setpriv --reuid=%d --regid=%d --init-groups'
               % (pw.pw_uid, pw.pw_gid))
    body = '\n'.join([
        'trap "umount -l %s 2>/dev/null || true" EXIT' % mnt,
        '%s mount %s' % (as_user, mnt),
        'grep " %s fuse.qftfs " /proc/mounts' % mnt,
        '%s sh -c "echo mine > %s/f && stat -c %%u %s/f"' % (as_user, mnt,
                                                           mnt),
        '%s umount %s' % (as_user, mnt),
        'if grep -q " %s " /proc/mounts; then echo STILL-MOUNTED; fi' % mnt,
        'echo DONE',
    ])
    try:
        r = run_in_namespace(namespace_script(installed, fstab, body,
                                              user_dev=True))
    finally:
        kill_leftovers(mnt)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert 'user_id=%d' % pw.pw_uid in r.stdout, out
    assert 'DONE' in r.stdout and 'STILL-MOUNTED' not in r.stdout, out
    # idmap=user: the remote user is the same one, shown as itself.
    assert '\n%d\n' % pw.pw_uid in r.stdout, out
    st = os.stat(P(served, 'f'))
    assert st.st_uid == pw.pw_uid
