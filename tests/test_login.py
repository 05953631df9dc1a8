# SPDX-License-Identifier: MIT
"""OpenSSH-compatible login (ssh.h, "When OpenSSH"; fuse/login/sshproc.c).

1. An RSA-only user against OpenSSH's defaults: libssh2 1.10 signs with
   SHA-1 and is refused; qftfs says so in one line and logs in with the
   OpenSSH client, which signs with rsa-sha2-512.
2. An ssh certificate (CertificateFile in ~/.ssh/config, the key itself
   not authorized): the OpenSSH client from the start.
3. ProxyJump and ProxyCommand: the target sshd listens on 127.0.0.1 inside
   a network namespace of its own, so only the jump host (an sshd in the
   same namespace, reachable over a veth pair) can reach it; the data
   plane then runs through the ssh channel.
4. -o ssh_command=ssh forces the OpenSSH client; a login it cannot make
   fails before mounting with ssh's reason and what to change.
"""

import os
import shutil
import socket
import subprocess
import time

import pytest

import netns
import sshd as sshd_mod
import util

P = os.path.join


def _need_ssh():
    if not shutil.which('ssh'):
        pytest.skip('login tests SKIPPED: the OpenSSH client (ssh) is not '
                    'installed')


class Sshd(sshd_mod.Sshd):
    """tests/sshd.py's sshd with extra config lines, TCP forwarding for a
    jump host, and a readiness check from inside its namespace."""

    def __init__(self, base, extra=(), forwarding=False, **kw):
        super().__init__(base, **kw)
        self.extra = list(extra)
        self.forwarding = forwarding

    def _config(self, env):
        text = super()._config(env)
        if self.forwarding:
            text = text.replace('AllowTcpForwarding no',
                                'AllowTcpForwarding yes')
        return text + ''.join(line + '\n' for line in self.extra)

    def _wait_listening(self, timeout):
        if not self.wrapper:
            return super()._wait_listening(timeout)
        probe = ('import socket,sys\n'
                 's=socket.create_connection((sys.argv[1],int(sys.argv[2])),'
                 '1)\nprint(s.recv(4))\n')
        for _ in range(int(timeout * 10)):
            if self.proc.poll() is not None:
                return False
            r = util.run(self.wrapper + ['/usr/bin/python3', '-c', probe,
                                         self.addr, str(self.port)],
                         timeout=30)
            if 'SSH-' in r.stdout:
                return True
            time.sleep(0.1)
        return False


def _start(s):
    try:
        s.start()
    except Exception as e:  # noqa: BLE001
        s.stop()
        pytest.fail('cannot start sshd: %s' % e, pytrace=False)
    return s


@pytest.fixture(scope='module')
def sshd(tmp_path_factory):
    why = sshd_mod.unavailable_reason()
    if why:
        pytest.skip('login tests SKIPPED: ' + why)
    _need_ssh()
    s = _start(Sshd(str(tmp_path_factory.mktemp('sshd'))))
    yield s
    s.stop()


def served_dir(tmp_path):
    d = tmp_path / 'served'
    d.mkdir()
    (d / 'hello').write_text('remote\n')
    return str(d)


def mount_and_check(mounter, source, home, served, opts=(), extra=()):
    m = mounter(src=source, mnt=P(os.path.dirname(served), 'mnt'),
                opts=list(opts), env=_env(home), extra_args=list(extra))
    with open(P(m.mnt, 'hello')) as f:
        assert f.read() == 'remote\n'
    with open(P(m.mnt, 'written'), 'w') as f:
        f.write('through the mount\n')
    with open(P(served, 'written')) as f:
        assert f.read() == 'through the mount\n'
    return m


def _env(home):
    env = dict(os.environ, HOME=home)
    env.pop('SSH_AUTH_SOCK', None)
    return env


def test_rsa_only_key(sshd, mounter, tmp_path):
    home = sshd.client_home(str(tmp_path / 'home'), key=False)
    key = P(home, '.ssh', 'id_rsa')
    pub = sshd_mod.keygen(key, 'rsa')
    with open(P(sshd.base, 'authorized_keys'), 'a') as f:
        f.write(pub + '\n')
    served = served_dir(tmp_path)
    m = mount_and_check(mounter, sshd.source(served), home, served,
                        extra=['-p', str(sshd.port)])
    assert 'with the OpenSSH client' in m.log() and 'SHA-1' in m.log(), \
        util.tail(m.log())
    assert 'rsa-sha2' in sshd.log() or 'RSA' in sshd.log()


def test_ssh_certificate(tmp_path_factory, mounter, tmp_path):
    why = sshd_mod.unavailable_reason()
    if why:
        pytest.skip('login tests SKIPPED: ' + why)
    _need_ssh()
    base = str(tmp_path_factory.mktemp('certsshd'))
    os.makedirs(base, exist_ok=True)
    ca = P(base, 'user_ca')
    sshd_mod.keygen(ca, 'ed25519', 'qftfs-test-ca')
    s = _start(Sshd(base, extra=['TrustedUserCAKeys %s.pub' % ca]))
    try:
        # Only the certificate may let the key in.
        open(P(base, 'authorized_keys'), 'w').close()
        home = s.client_home(str(tmp_path / 'home'))
        key = P(home, '.ssh', 'id_ed25519')
        util.run(['ssh-keygen', '-q', '-s', ca, '-I', 'qftfs-test',
                  '-n', 'root', '-V', '-5m:+1h', key + '.pub'], timeout=60,
                 check=True)
        assert os.path.exists(key + '-cert.pub')
        with open(P(home, '.ssh', 'config'), 'w') as f:
            f.write('Host *\n    CertificateFile %s-cert.pub\n'
                    '    IdentityFile %s\n' % (key, key))
        served = served_dir(tmp_path)
        mount_and_check(mounter, s.source(served), home, served,
                        extra=['-p', str(s.port), '-d'])
        assert 'Accepted publickey' in s.log() and 'CERT' in s.log(), \
            util.tail(s.log())
    finally:
        s.stop()


@pytest.fixture(scope='module')
def jumplab(tmp_path_factory):
    """A jump sshd on the namespace's veth address and a target sshd on the
    namespace's own 127.0.0.1, which the root namespace cannot reach."""
    why = netns.unavailable_reason()
    if why:
        pytest.skip('proxy tests SKIPPED: ' + why)
    _need_ssh()
    ns = netns.NetNs()
    try:
        try:
            ns.create()
        except netns.Unavailable as e:
            pytest.skip('proxy tests SKIPPED: %s' % e)
        jump = _start(Sshd(str(tmp_path_factory.mktemp('jump')),
                           addr=ns.ns_addr, wrapper=ns.nsenter(),
                           forwarding=True))
        target = _start(Sshd(str(tmp_path_factory.mktemp('target')),
                             addr='127.0.0.1', wrapper=ns.nsenter()))
        # One client key for both.
        with open(jump.client_key + '.pub') as f, \
                open(P(target.base, 'authorized_keys'), 'a') as g:
            g.write(f.read())
        yield ns, jump, target
        jump.stop()
        target.stop()
    finally:
        ns.destroy()


def proxy_home(path, jump, target, how):
    home = jump.client_home(path)
    ssh = P(home, '.ssh')
    with open(P(ssh, 'known_hosts'), 'a') as f:
        f.write('\n'.join(target.known_hosts_lines()) + '\n')
    cfg = P(ssh, 'config')
    hop = ('ProxyJump jump' if how == 'jump' else
           'ProxyCommand ssh -F %s -W %%h:%%p jump' % cfg)
    with open(cfg, 'w') as f:
        f.write('Host jump\n    HostName %s\n    Port %d\n'
                'Host target\n    HostName 127.0.0.1\n    Port %d\n'
                '    %s\n'
                'Host *\n    User root\n    IdentityFile %s/id_ed25519\n'
                '    UserKnownHostsFile %s/known_hosts\n'
                % (jump.addr, jump.port, target.port, hop, ssh, ssh))
    return home


@pytest.mark.parametrize('how', ['jump', 'command'])
def test_proxy(jumplab, mounter, tmp_path, how):
    ns, jump, target = jumplab
    # The target is not reachable from here: only through the jump host.
    with pytest.raises(OSError):
        socket.create_connection(('127.0.0.1', target.port), 1).close()
    home = proxy_home(str(tmp_path / 'home'), jump, target, how)
    served = served_dir(tmp_path)
    m = mount_and_check(mounter, 'target:' + served, home, served,
                        opts=['server=' + util.server_bin(util.build_dir())],
                        extra=['-d'])
    assert 'through the ssh channel' in m.log(), util.tail(m.log())
    # The jump host forwarded the target's connection.
    log = jump.log()
    assert 'Accepted publickey' in log, util.tail(log)


def test_ssh_command_failure_is_explained(sshd, tmp_path):
    """-o ssh_command=ssh with no usable key: exit 1 before mounting, with
    ssh's own reason and what to change."""
    home = sshd.client_home(str(tmp_path / 'home'), key=False)
    served = served_dir(tmp_path)
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    b = util.build_dir()
    r = util.run([util.client_bin(b), '-p', str(sshd.port), '-o',
                  'ssh_command=ssh', '-o', 'server=' + util.server_bin(b),
                  '-o', 'BatchMode=yes', sshd.source(served), str(mnt)],
                 timeout=120, env=_env(home))
    try:
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert 'Permission denied' in r.stderr, r.stderr
        assert 'IdentityFile' in r.stderr, r.stderr
        assert not util.find_mount(str(mnt))
    finally:
        if util.find_mount(str(mnt)):
            subprocess.run(['fusermount3', '-uz', str(mnt)], timeout=30)


def test_ssh_command_mount(sshd, mounter, tmp_path):
    """-o ssh_command=ssh with the usual key: the direct data plane."""
    home = sshd.client_home(str(tmp_path / 'home'))
    served = served_dir(tmp_path)
    m = mount_and_check(mounter, sshd.source(served), home, served,
                        opts=['ssh_command=ssh'],
                        extra=['-p', str(sshd.port), '-d'])
    assert 'OpenSSH client' in m.log()
    assert 'data plane: direct' in m.log(), util.tail(m.log())


def test_identities_only(sshd, mounter, tmp_path):
    """IdentitiesOnly=yes: the agent's keys are not offered, only the key
    named.  The agent holds the authorized key and the named one is not
    authorized, so the login must fail and say why; without the option
    the agent's key logs in."""
    home = sshd.client_home(str(tmp_path / 'home'), key=False)
    other = P(home, '.ssh', 'other')
    sshd_mod.keygen(other)
    agent = sshd_mod.Agent(str(tmp_path / 'agent.sock')).start()
    try:
        agent.add(sshd.client_key)
        env = dict(_env(home), SSH_AUTH_SOCK=agent.sock)
        served = served_dir(tmp_path)
        mnt = tmp_path / 'mnt'
        mnt.mkdir()
        b = util.build_dir()
        cmd = [util.client_bin(b), '-p', str(sshd.port), '-o',
               'server=' + util.server_bin(b), '-o', 'IdentityFile=' + other,
               '-o', 'BatchMode=yes']
        r = util.run(cmd + ['-o', 'IdentitiesOnly=yes', sshd.source(served),
                            str(mnt)], timeout=120, env=env)
        assert r.returncode == 1, r.stderr
        assert 'not used: IdentitiesOnly' in r.stderr, r.stderr
        assert not util.find_mount(str(mnt))
        r = util.run(cmd + [sshd.source(served), str(mnt)], timeout=120,
                     env=env)
        assert r.returncode == 0, r.stderr
        assert util.find_mount(str(mnt))
    finally:
        if util.find_mount(str(tmp_path / 'mnt')):
            subprocess.run(['fusermount3', '-u', str(tmp_path / 'mnt')],
                           timeout=30)
        agent.stop()


def test_rsa_key_in_agent(sshd, mounter, tmp_path):
    """An RSA key held by ssh-agent only (as a FIDO key would be): libssh2
    offers it and is refused, the OpenSSH client signs with the agent's
    rsa-sha2-512."""
    home = sshd.client_home(str(tmp_path / 'home'), key=False)
    key = str(tmp_path / 'agent_rsa')
    pub = sshd_mod.keygen(key, 'rsa')
    with open(P(sshd.base, 'authorized_keys'), 'a') as f:
        f.write(pub + '\n')
    agent = sshd_mod.Agent(str(tmp_path / 'agent.sock')).start()
    try:
        agent.add(key)
        os.unlink(key)          # only the agent has it now
        served = served_dir(tmp_path)
        m = mounter(src=sshd.source(served), mnt=str(tmp_path / 'mnt'),
                    env=dict(_env(home), SSH_AUTH_SOCK=agent.sock),
                    extra_args=['-p', str(sshd.port)])
        with open(P(m.mnt, 'hello')) as f:
            assert f.read() == 'remote\n'
        assert 'with the OpenSSH client' in m.log(), util.tail(m.log())
    finally:
        agent.stop()
