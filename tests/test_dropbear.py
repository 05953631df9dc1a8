# SPDX-License-Identifier: MIT
"""The ssh test group against dropbear (issue 11): small boards run
dropbear (Debian's dropbear-bin here) instead of OpenSSH.

1. Every test of tests/test_ssh.py that talks to an ssh server -- login by
   key file, agent and config alias, host key checking (unknown, accept-new,
   changed), mounts and copies over the direct data plane and the tunnel,
   background mode, no server left after the unmount, the errors a user
   can act on, the capture of the data port, the sanitizer builds -- runs
   again here with the `sshd` fixture a loopback dropbear
   (tests/sshd.py Dropbear).
2. The client installs its server through dropbear (the remote home is
   the test's, bind-mounted over root's in dropbear's mount namespace),
   with the system's sh and with busybox's sh and tools alone.

Skips loudly when dropbear, unshare or root is missing.
"""

import inspect
import os

import pytest

import sshd as sshd_mod
import test_ssh
import util

P = os.path.join

# The ssh group: test_ssh's tests that take the sshd fixture, and the
# fixtures they build on.  Defined here, they use this module's `sshd`.
home = test_ssh.home
served = test_ssh.served
for _name, _fn in vars(test_ssh).items():
    if (_name.startswith('test_') and callable(_fn) and
            'sshd' in inspect.signature(_fn).parameters):
        globals()[_name] = _fn
del _name, _fn


def start_dropbear(base, env=None):
    why = sshd_mod.dropbear_unavailable_reason()
    if why:
        pytest.skip('dropbear tests SKIPPED: ' + why)
    s = sshd_mod.Dropbear(base, env=env)
    try:
        s.start()
    except Exception as e:  # noqa: BLE001 - report why
        s.stop()
        pytest.fail('cannot start dropbear: %s' % e, pytrace=False)
    return s


@pytest.fixture(scope='module')
def sshd(tmp_path_factory):
    s = start_dropbear(str(tmp_path_factory.mktemp('dropbear')))
    yield s
    s.stop()


def test_default_dir_is_remote_home(sshd, mounter, home, served):
    """test_ssh's, with dropbear's remote home (bind-mounted over the
    user's own in its namespace)."""
    m = test_ssh.ssh_mount(mounter, sshd, home, served,
                           source=sshd.source(''))
    assert sorted(os.listdir(m.mnt)) == sorted(os.listdir(sshd.remote_home))
    test_ssh.stop_clean(m)


def test_is_dropbear(sshd):
    """The group above really talks to dropbear."""
    import socket
    with socket.create_connection((sshd.addr, sshd.port), timeout=10) as c:
        banner = c.recv(256)
    assert banner.startswith(b'SSH-2.0-dropbear'), banner


# ---------------------------------------------------------------------------
# 2. Installing the server through dropbear

@pytest.mark.parametrize('shell', ['system', 'busybox'])
def test_install_through_dropbear(tmp_path, mounter, shell):
    if os.uname().machine != 'x86_64':
        pytest.skip('the install tests name the x86_64 cache directory')
    env = {}
    if shell == 'busybox':
        bbdir = util.busybox_dir(str(tmp_path / 'bb'))
        if not bbdir:
            pytest.skip('busybox is missing (install busybox)')
        env['PATH'] = bbdir
    s = start_dropbear(str(tmp_path / 'dropbear'), env=env)
    try:
        chome = s.client_home(str(tmp_path / 'home'))
        served_dir = str(tmp_path / 'served')
        os.makedirs(served_dir)
        mnts = []
        for i in range(2):
            m = mounter(src=s.source(served_dir),
                        mnt=str(tmp_path / ('mnt%d' % i)), server='',
                        env=s.client_env(chome),
                        extra_args=['-p', str(s.port)])
            data = os.urandom(1 << 20)
            with open(P(m.mnt, 'f%d' % i), 'wb') as f:
                f.write(data)
            with open(P(served_dir, 'f%d' % i), 'rb') as f:
                assert f.read() == data
            problems = m.stop()
            assert not problems, '\n'.join(problems)
            mnts.append(m)
        assert not util.find_processes('--root ' + served_dir)
    finally:
        s.stop()
    version = util.run([util.server_bin(util.build_dir()), '--version'],
                       timeout=30, check=True).stdout.split()[1]
    cached = P(s.remote_home, '.cache', 'qftfs', version + '-x86_64',
               'qftfs-server')
    own = os.path.realpath(util.server_bin(util.build_dir()))
    assert util.sha256_file(cached) == util.sha256_file(own)
    # Installed by the first mount, reused by the second.
    assert 'installed qftfs-server' in mnts[0].log(), mnts[0].log()
    assert 'installed qftfs-server' not in mnts[1].log(), mnts[1].log()


@pytest.mark.parametrize('how', ['install', 'server-option'])
def test_home_relative_dir(tmp_path, mounter, how):
    """`host:~/dir` and `host:dir` reach the remote home's dir, through
    the install script and with -o server= (the ~/ stays unquoted for the
    remote shell)."""
    server = '' if how == 'install' else util.server_bin(util.build_dir())
    s = start_dropbear(str(tmp_path / 'dropbear'))
    try:
        chome = s.client_home(str(tmp_path / 'home'))
        for i, src in enumerate(('~/sub', 'sub')):
            os.makedirs(P(s.remote_home, 'sub'), exist_ok=True)
            m = mounter(src='%s@%s:%s' % (s.user, s.addr, src),
                        mnt=str(tmp_path / ('mnt%d' % i)), server=server,
                        env=s.client_env(chome),
                        extra_args=['-p', str(s.port)])
            with open(P(m.mnt, 'f%d' % i), 'w') as f:
                f.write('hello')
            problems = m.stop()
            assert not problems, '\n'.join(problems)
            assert open(P(s.remote_home, 'sub', 'f%d' % i)).read() == 'hello'
    finally:
        s.stop()
