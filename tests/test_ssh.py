# SPDX-License-Identifier: MIT
"""Remote mounts over ssh (issue 3), against a private sshd (tests/sshd.py).

1. Mounts: by key file and by ssh-agent, a ~/.ssh/config alias, the remote
   home as default directory, background mode; a tree copied onto and off
   the mount compares byte for byte, over the direct data plane and
   through the ssh channel (-o transport=ssh); after the unmount no
   qftfs-server is left, and the secret was never in its argv or
   environment.
2. Host keys: unknown host refused with a message saying how to accept it,
   accept-new records it (hashed known_hosts match too), a changed key is
   refused loudly.
3. Failures a user can act on: qftfs-server missing on the remote host, a
   missing directory, sources that try to pass for options or inject shell.
4. The data plane against a live `qftfs-server --session` driven by
   tests/tools/qftfs-testpeer: a wrong secret, a wrong proof, a replayed
   handshake, a flipped ciphertext byte and a replayed record are each
   rejected with nothing applied; the server keeps waiting for the right
   client after a failed handshake, and exits when the ssh channel (its
   stdin) ends.
5. A capture of the data port (tcpdump on lo) never shows a known byte
   pattern written through the mount unless -o cipher=none.
6. The sanitizer builds of client and server through one ssh mount.

Everything skips loudly when sshd, root or FUSE is missing.
"""

import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import time

import pytest

import sshd as sshd_mod
import util

P = os.path.join


# ---------------------------------------------------------------------------
# Fixtures and helpers

@pytest.fixture(scope='module')
def sshd(tmp_path_factory):
    why = sshd_mod.unavailable_reason()
    if why:
        pytest.skip('ssh tests SKIPPED: ' + why)
    s = sshd_mod.Sshd(str(tmp_path_factory.mktemp('sshd')))
    try:
        s.start()
    except Exception as e:  # noqa: BLE001 - report why, then skip nothing
        s.stop()
        pytest.fail('cannot start sshd: %s' % e, pytrace=False)
    yield s
    s.stop()


@pytest.fixture
def home(sshd, tmp_path):
    return sshd.client_home(str(tmp_path / 'home'))


@pytest.fixture
def served(tmp_path):
    d = tmp_path / 'served'
    d.mkdir()
    return str(d)


def server_processes(root):
    """qftfs-server processes serving `root` (a unique temp path)."""
    return [p for p in util.find_processes('--root ' + root)
            if 'qftfs-server' in open('/proc/%d/cmdline' % p, 'rb')
            .read().decode(errors='replace')]


def wait_no_server(root, timeout=5):
    deadline = time.monotonic() + timeout * util.timeout_scale()
    left = server_processes(root)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = server_processes(root)
    assert not left, ('qftfs-server still running after the unmount: %s'
                      % left)


def ssh_mount(mounter, sshd, home, served, opts=(), build=None, env=None,
              port=True, source=None, server=None):
    b = os.path.realpath(build) if build else util.build_dir()
    return mounter(src=source or sshd.source(served),
                   mnt=P(os.path.dirname(served), 'mnt'), build=b,
                   opts=list(opts), server=server,
                   env=sshd.client_env(home, env, b),
                   extra_args=['-p', str(sshd.port)] if port else [])


def stop_clean(m):
    problems = m.stop()
    assert not problems, '\n'.join(problems)


def run_client(sshd, home, source, mnt, opts=(), env=None, server=True,
               timeout=60, port=True, input=None):
    """Runs qftfs in the background mode (it exits once the mount is up or
    failed), for the cases expected to fail."""
    b = util.build_dir()
    cmd = [util.client_bin(b)]
    if port:
        cmd += ['-p', str(sshd.port)]
    if server is True:
        cmd += ['-o', 'server=' + util.server_bin(b)]
    elif server:
        cmd += ['-o', 'server=' + server]
    for o in opts:
        cmd += ['-o', o]
    cmd += [source, mnt]
    os.makedirs(mnt, exist_ok=True)
    try:
        return util.run(cmd, timeout=timeout, env=sshd.client_env(home, env),
                        input=input)
    finally:
        if util.find_mount(mnt):
            subprocess.run(['fusermount3', '-u', '-z', mnt], timeout=30,
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


def tree_for_copy():
    # A real tree of many small files; a smaller part of it in fast mode.
    if util.fast_mode():
        return '/usr/include/linux/netfilter'
    return '/usr/include/linux'


def need_fuse():
    why = util.fuse_unavailable_reason()
    if why:
        pytest.skip('FUSE unavailable: ' + why)


# ---------------------------------------------------------------------------
# 1. Mounts

@pytest.mark.deadline(600)
@pytest.mark.parametrize('transport', ['direct', 'ssh'])
def test_copy_tree(sshd, mounter, home, served, tmp_path, transport):
    tree = tree_for_copy()
    if not os.path.isdir(tree):
        pytest.skip('%s is missing (linux-libc-dev)' % tree)
    m = ssh_mount(mounter, sshd, home, served,
                  opts=['transport=' + transport])
    mnt = m.mnt
    util.run(['cp', '-a', tree, P(mnt, 'tree')], timeout=600, check=True)
    # Byte for byte where it landed, and read back through the mount.
    util.run(['diff', '-r', tree, P(served, 'tree')], timeout=300,
             check=True)
    back = str(tmp_path / 'back')
    util.run(['cp', '-a', P(mnt, 'tree'), back], timeout=600, check=True)
    util.run(['diff', '-r', tree, back], timeout=300, check=True)

    # The secret travelled on stdin only.
    pids = server_processes(served)
    assert len(pids) == 1, 'expected one server, found %s' % pids
    for f in ('cmdline', 'environ'):
        with open('/proc/%d/%s' % (pids[0], f), 'rb') as fh:
            text = fh.read().decode(errors='replace')
        assert not re.search(r'[0-9a-fA-F]{64}', text), \
            'a 256-bit hex string in the server\'s %s: %r' % (f, text)
    log = m.log()
    if transport == 'ssh':
        assert 'tunnelling' not in log    # asked for, not a fallback
    stop_clean(m)
    wait_no_server(served)


@pytest.mark.deadline(300)
@pytest.mark.parametrize('transport', ['direct', 'ssh'])
def test_bulk_both_ways(sshd, mounter, home, served, transport):
    """Big writes and reads at once: the tunnel's pump must neither lose
    nor sit on data (libssh2 queues what it reads during any call)."""
    size = (8 if util.fast_mode() else 32) * util.MiB
    m = ssh_mount(mounter, sshd, home, served,
                  opts=['transport=' + transport])
    a = util.write_random_file(P(served, 'a'), size, seed=1)
    want = util.write_random_file(P(os.path.dirname(served), 'b'), size,
                                  seed=2)
    writer = subprocess.Popen(['cp', P(os.path.dirname(served), 'b'),
                               P(m.mnt, 'b')])
    try:
        assert util.sha256_file(P(m.mnt, 'a')) == a
    finally:
        assert writer.wait(timeout=240) == 0
    assert util.sha256_file(P(served, 'b')) == want
    assert util.sha256_file(P(m.mnt, 'b')) == want
    stop_clean(m)
    wait_no_server(served)


def test_fallback_to_tunnel(sshd, mounter, home, served, tmp_path):
    """When the data port cannot be reached, the mount goes through the
    ssh channel after a one-line notice; -o transport=direct refuses."""
    # The server is told it was reached on 127.0.0.3 (sshd itself sets
    # SSH_CONNECTION, so a wrapper changes it): it listens there, where
    # the client, connected to 127.0.0.1, cannot reach it.
    wrapper = str(tmp_path / 'server-elsewhere')
    with open(wrapper, 'w') as f:
        f.write('#!/bin/sh\n'
                'SSH_CONNECTION="127.0.0.1 1 127.0.0.3 22" exec %s "$@"\n'
                % util.server_bin(util.build_dir()))
    os.chmod(wrapper, 0o755)
    m = ssh_mount(mounter, sshd, home, served, server=wrapper)
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(b'through the tunnel')
    assert open(P(served, 'f'), 'rb').read() == b'through the tunnel'
    log = m.log()
    notes = [l for l in log.splitlines() if 'tunnelling through ssh' in l]
    assert len(notes) == 1, log
    assert 'direct connection to 127.0.0.1:' in notes[0]
    stop_clean(m)
    wait_no_server(served)
    mnt = str(tmp_path / 'mnt2')
    r = run_client(sshd, home, sshd.source(served), mnt, server=wrapper,
                   opts=['transport=direct'])
    assert r.returncode == 1, r.stderr
    assert 'not tunnelling' in r.stderr, r.stderr
    assert util.find_mount(mnt) is None
    wait_no_server(served)


@pytest.mark.parametrize('transport', ['direct', 'ssh'])
def test_client_killed(sshd, mounter, home, served, transport):
    """A client that dies without unmounting still leaves no server: its
    ssh connection closes, and with it the server's stdin -- or, where
    the session is resumable (direct), its grace passes (-o resume=2
    here; the server cannot tell a dead client from a lost link)."""
    m = ssh_mount(mounter, sshd, home, served,
                  opts=['transport=' + transport, 'resume=2'])
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(b'x')
    assert len(server_processes(served)) == 1
    m.proc.kill()
    m.proc.wait(timeout=30)
    wait_no_server(served, timeout=5 + 2)
    # The dead mount goes too; the client was killed on purpose.
    subprocess.run(['fusermount3', '-u', '-z', m.mnt], timeout=30)
    m.expect_rc = None
    m.stop()


def test_identity_file_option(sshd, mounter, tmp_path, served):
    home = sshd.client_home(str(tmp_path / 'home'), key=False)
    keydir = tmp_path / 'keys'
    keydir.mkdir()
    key = str(keydir / 'mykey')
    shutil.copyfile(sshd.client_key, key)
    os.chmod(key, 0o600)
    m = ssh_mount(mounter, sshd, home, served, opts=['IdentityFile=' + key])
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(b'by key file')
    with open(P(served, 'f'), 'rb') as f:
        assert f.read() == b'by key file'
    stop_clean(m)
    wait_no_server(served)


def test_agent(sshd, mounter, tmp_path, served):
    if shutil.which('ssh-agent') is None or shutil.which('ssh-add') is None:
        pytest.skip('ssh-agent/ssh-add missing (openssh-client)')
    # No key file anywhere: only the agent can log in.
    home = sshd.client_home(str(tmp_path / 'home'), key=False)
    agent = sshd_mod.Agent(str(tmp_path / 'agent.sock')).start()
    try:
        agent.add(sshd.client_key)
        m = ssh_mount(mounter, sshd, home, served,
                      env={'SSH_AUTH_SOCK': agent.sock})
        os.mkdir(P(m.mnt, 'via-agent'))
        assert os.path.isdir(P(served, 'via-agent'))
        stop_clean(m)
    finally:
        agent.stop()
    wait_no_server(served)


def test_config_alias(sshd, mounter, tmp_path, served):
    """HostName, Port, User and IdentityFile come from ~/.ssh/config for a
    Host alias, first match winning as in ssh."""
    home = sshd.client_home(str(tmp_path / 'home'), key=False)
    key = P(home, '.ssh', 'alias_key')
    shutil.copyfile(sshd.client_key, key)
    os.chmod(key, 0o600)
    with open(P(home, '.ssh', 'config'), 'w') as f:
        f.write('Host other-host\n'
                '    Port 1\n'
                'Host qft-*  !qft-never\n'
                '    HostName 127.0.0.1\n'
                '    Port %d\n'
                '    User %s\n'
                '    IdentityFile ~/.ssh/alias_key\n'
                'Host *\n'
                '    Port 2\n'
                '    User nobody\n' % (sshd.port, sshd.user))
    m = ssh_mount(mounter, sshd, home, served, port=False,
                  source='qft-test:' + served)
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(b'alias')
    assert open(P(served, 'f'), 'rb').read() == b'alias'
    stop_clean(m)
    wait_no_server(served)


def test_default_dir_is_remote_home(sshd, mounter, home, served):
    m = ssh_mount(mounter, sshd, home, served, source=sshd.source(''))
    remote_home = pwd.getpwnam(sshd.user).pw_dir
    assert sorted(os.listdir(m.mnt)) == sorted(os.listdir(remote_home))
    stop_clean(m)


@pytest.mark.deadline(120)
def test_background_mount(sshd, home, served, tmp_path):
    need_fuse()
    mnt = str(tmp_path / 'mnt')
    os.makedirs(mnt)
    b = util.build_dir()
    cmd = [util.client_bin(b), '-p', str(sshd.port),
           '-o', 'server=' + util.server_bin(b), sshd.source(served), mnt]
    try:
        # qftfs returns once the mount is ready and the daemon holds it.
        r = util.run(cmd, timeout=60, env=sshd.client_env(home))
        assert r.returncode == 0, r.stderr
        m = util.find_mount(mnt)
        assert m and m['fstype'] == 'fuse.qftfs', r.stderr
        assert m['source'] == sshd.source(served)
        with open(P(mnt, 'bg'), 'wb') as f:
            f.write(b'background')
        assert open(P(served, 'bg'), 'rb').read() == b'background'
        assert len(server_processes(served)) == 1
    finally:
        subprocess.run(['fusermount3', '-u', mnt], timeout=30)
    wait_no_server(served)
    deadline = time.monotonic() + 10
    while util.find_processes(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not util.find_processes(mnt), 'the qftfs daemon did not exit'


# ---------------------------------------------------------------------------
# 2. Host keys

def test_unknown_host_refused(sshd, tmp_path, served):
    need_fuse()
    home = sshd.client_home(str(tmp_path / 'home'), known=False)
    mnt = str(tmp_path / 'mnt')
    r = run_client(sshd, home, sshd.source(served), mnt)
    assert r.returncode != 0
    assert 'host key of [127.0.0.1]:%d is not known' % sshd.port in r.stderr
    assert 'StrictHostKeyChecking=accept-new' in r.stderr
    assert 'SHA256:' in r.stderr
    assert util.find_mount(mnt) is None
    assert open(P(home, '.ssh', 'known_hosts')).read() == ''
    assert not server_processes(served)


def test_accept_new(sshd, mounter, tmp_path, served):
    home = sshd.client_home(str(tmp_path / 'home'), known=False)
    kh = P(home, '.ssh', 'known_hosts')
    m = ssh_mount(mounter, sshd, home, served,
                  opts=['StrictHostKeyChecking=accept-new'])
    stop_clean(m)
    r = util.run(['ssh-keygen', '-F', '[127.0.0.1]:%d' % sshd.port,
                  '-f', kh], timeout=30)
    assert r.returncode == 0, 'not recorded in known_hosts: %r' % \
        open(kh).read()
    recorded = [l.split()[1:3] for l in open(kh) if l.strip()]
    assert len(recorded) == 1
    assert recorded[0] in [k.split()[:2] for k in sshd.host_keys.values()]
    # Known now: the default (yes) mounts too, and nothing is added.
    m = ssh_mount(mounter, sshd, home, served)
    stop_clean(m)
    assert len([l for l in open(kh) if l.strip()]) == 1
    # Hashed entries (HashKnownHosts, ssh-keygen -H) match as well.
    util.run(['ssh-keygen', '-H', '-f', kh], timeout=30, check=True)
    assert open(kh).read().startswith('|1|')
    m = ssh_mount(mounter, sshd, home, served)
    stop_clean(m)
    wait_no_server(served)


def test_changed_host_key_refused(sshd, tmp_path, served):
    need_fuse()
    home = sshd.client_home(str(tmp_path / 'home'), known=False)
    other = sshd_mod.keygen(str(tmp_path / 'impostor'), 'ed25519')
    with open(P(home, '.ssh', 'known_hosts'), 'w') as f:
        f.write('[127.0.0.1]:%d %s\n' % (sshd.port,
                                          ' '.join(other.split()[:2])))
    mnt = str(tmp_path / 'mnt')
    for strict in ('StrictHostKeyChecking=yes',
                   'StrictHostKeyChecking=accept-new'):
        r = run_client(sshd, home, sshd.source(served), mnt, opts=[strict])
        assert r.returncode != 0
        assert 'has CHANGED' in r.stderr, r.stderr
        assert 'man-in-the-middle' in r.stderr
        assert 'ssh-keygen -R' in r.stderr
        assert util.find_mount(mnt) is None
    assert not server_processes(served)


# ---------------------------------------------------------------------------
# 3. Failures a user can act on

def test_missing_server(sshd, home, tmp_path, served):
    need_fuse()
    mnt = str(tmp_path / 'mnt')
    r = run_client(sshd, home, sshd.source(served), mnt,
                   server='/nonexistent/qftfs-server')
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert 'is not installed on 127.0.0.1' in r.stderr, r.stderr
    assert '-o server=PATH' in r.stderr
    assert util.find_mount(mnt) is None


def test_missing_directory(sshd, home, tmp_path):
    need_fuse()
    mnt = str(tmp_path / 'mnt')
    missing = str(tmp_path / 'no-such-dir')
    r = run_client(sshd, home, sshd.source(missing), mnt)
    assert r.returncode == 1, r.stderr
    assert 'qftfs-server@127.0.0.1: cannot open root directory' in r.stderr
    assert util.find_mount(mnt) is None


def test_sources_cannot_inject(sshd, home, tmp_path):
    need_fuse()
    mnt = str(tmp_path / 'mnt')
    # Options: refused before anything connects (usage error).
    for source in ('-oProxyCommand=x:dir', 'root@-p:dir',
                   '-root@127.0.0.1:/x', 'root@127.0.0.1:-x'):
        r = run_client(sshd, home, source, mnt)
        assert r.returncode == 2, (source, r.returncode, r.stderr)
    # Shell: the directory reaches the server as one argument, quotes and
    # all, and nothing of it runs.
    marker = str(tmp_path / 'injected')
    for d in ("/nonexistent'; touch %s; '" % marker,
              '/nonexistent$(touch %s)' % marker,
              '/nonexistent`touch %s`' % marker,
              '/nonexistent\n touch %s' % marker):
        r = run_client(sshd, home, sshd.source(d), mnt)
        assert r.returncode == 1, (d, r.stderr)
        assert 'cannot open root directory' in r.stderr, r.stderr
        assert not os.path.exists(marker), 'injected via %r' % d


def test_bad_options(sshd, home, tmp_path):
    need_fuse()
    mnt = str(tmp_path / 'mnt')
    for o in ('cipher=rot13', 'transport=carrier-pigeon',
              'StrictHostKeyChecking=maybe', 'port=0'):
        r = run_client(sshd, home, sshd.source('/tmp'), mnt, opts=[o])
        assert r.returncode == 2, (o, r.returncode, r.stderr)


# ---------------------------------------------------------------------------
# 4. The data plane against a live server

def peer_bin(build):
    p = P(build, 'tests', 'tools', 'qftfs-testpeer')
    if not os.access(p, os.X_OK):
        pytest.fail('not built: %s' % p, pytrace=False)
    return p


class Session:
    """`qftfs-server --session` run by hand, as sshd would run it."""

    def __init__(self, build, root, errlog, secret=None):
        self.build = build
        self.root = root
        self.secret = secret or os.urandom(32).hex()
        self.errlog = errlog
        env = dict(util.sanitizer_env() if util.is_asan_build(build)
                   else os.environ)
        env['SSH_CONNECTION'] = '127.0.0.1 40000 127.0.0.1 22'
        self.err = open(errlog, 'wb')
        self.proc = subprocess.Popen(
            [util.server_bin(build), '--session', '--root', root],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
            env=env)
        self.port = None

    def send_secret(self, line=None):
        self.proc.stdin.write(((line if line is not None else self.secret)
                               + '\n').encode())
        self.proc.stdin.flush()

    def greeting(self, timeout=10):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert r, 'no greeting from the server; stderr:\n' + self.stderr()
        line = self.proc.stdout.readline()
        m = re.fullmatch(rb'QFTFS (\d+) (\d+)\n', line)
        assert m, 'bad greeting %r' % line
        self.port = int(m.group(2))
        assert self.port > 0
        return self

    def start(self):
        self.send_secret()
        return self.greeting()

    def peer(self, *args, secret=None):
        return util.run([peer_bin(self.build), '--port', str(self.port),
                         '--secret', secret or self.secret] + list(args),
                        timeout=60)

    def wait(self, timeout=5):
        try:
            return self.proc.wait(timeout=timeout * util.timeout_scale())
        except subprocess.TimeoutExpired:
            return None

    def stderr(self):
        return util.read_log(self.errlog)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.err.close()
        bad = util.log_problems(self.stderr())
        assert not bad, 'sanitizer report or crash:\n' + '\n'.join(bad)


@pytest.fixture(params=['build', 'asan'])
def session(request, build, tmp_path):
    """Factory of sessions of the normal server and of the sanitizer one,
    so that every rejection path also runs under ASan and UBSan."""
    if request.param == 'asan':
        build = util.asan_build_dir()
        if not os.path.isdir(build):
            if os.environ.get('CI'):
                pytest.fail('sanitizer build %s is missing' % build,
                            pytrace=False)
            pytest.skip('sanitizer build %s is missing' % build)
    made = []

    def make(name='root', secret=None, start=True):
        root = tmp_path / name
        root.mkdir()
        s = Session(build, str(root), str(tmp_path / (name + '.err')),
                    secret)
        made.append(s)
        return s.start() if start else s

    yield make
    for s in made:
        s.close()


@pytest.mark.parametrize('attack', ['wrong-secret', 'wrong-proof'])
def test_session_rejects_wrong_proof(session, attack):
    s = session()
    r = s.peer('--auth', attack, '--mkdir', 'evil')
    assert r.returncode == 1, r.stdout
    assert 'closed after 0 bytes' in r.stdout, r.stdout
    assert not os.path.exists(P(s.root, 'evil'))
    assert s.proc.poll() is None, 'a failed handshake ended the server'
    assert 'rejected a data connection' in s.stderr()
    # The real client is still welcome, and served.
    r = s.peer('--mkdir', 'good')
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'reply MKDIR status 0' in r.stdout
    assert os.path.isdir(P(s.root, 'good'))
    assert s.wait() == 0, s.stderr()


def test_session_rejects_replayed_handshake(session, tmp_path):
    rec = str(tmp_path / 'session.bin')
    a = session('a')
    r = a.peer('--mkdir', 'first', '--record', rec)
    assert r.returncode == 0, r.stdout
    assert a.wait() == 0
    # The same secret, a new server: the recording is worthless, because
    # the server's nonce is fresh.
    b = session('b', secret=a.secret)
    r = util.run([peer_bin(b.build), '--port', str(b.port), '--replay', rec],
                 timeout=60)
    assert 'closed after 72 bytes' in r.stdout, r.stdout   # message 2 only
    assert os.listdir(b.root) == []
    assert 'wrong proof' in b.stderr()
    r = b.peer('--mkdir', 'second')
    assert r.returncode == 0, r.stdout
    assert os.listdir(b.root) == ['second']
    assert b.wait() == 0


@pytest.mark.parametrize('cipher', ['aes256-gcm', 'chacha20-poly1305',
                                    'none'])
def test_session_rejects_flipped_byte(session, cipher):
    s = session()
    r = s.peer('--cipher', cipher, '--mkdir', 'tampered', '--corrupt', '1')
    assert 'reply HELLO status 0' in r.stdout, r.stdout
    assert 'closed after' in r.stdout
    assert r.returncode == 1
    assert not os.path.exists(P(s.root, 'tampered'))
    assert s.wait() == 1, 'server still running or exited 0'
    assert 'failed authentication' in s.stderr()


def test_session_rejects_replayed_record(session):
    s = session()
    r = s.peer('--mkdir', 'after-replay', '--duplicate', '0')
    assert 'closed after' in r.stdout, r.stdout
    assert not os.path.exists(P(s.root, 'after-replay'))
    assert s.wait() == 1
    assert 'failed authentication' in s.stderr()


def test_session_exits_when_channel_closes(session):
    """Over TCP the ssh channel is the client's lifeline: its end ends the
    server, even with the data connection still open."""
    s = session()
    peer = subprocess.Popen([peer_bin(s.build), '--port', str(s.port),
                             '--secret', s.secret, '--hold'],
                            stdout=subprocess.PIPE, bufsize=0)
    try:
        # Serving: the peer's HELLO was answered.  Raw reads: a buffered
        # reader would hide lines from select().
        seen = b''
        while b'reply HELLO status 0' not in seen:
            r, _, _ = select.select([peer.stdout], [], [], 20)
            assert r, 'the peer got no HELLO reply: %r' % seen
            chunk = os.read(peer.stdout.fileno(), 4096)
            assert chunk, 'the peer ended: %r' % seen
            seen += chunk
        s.proc.stdin.close()
        assert s.wait() == 0, s.stderr()
        out, _ = peer.communicate(timeout=30)
        assert (seen + out).strip().endswith(b'closed'), seen + out
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait()


def test_session_bad_secret_line(session):
    s = session(start=False)
    s.send_secret('this is not a secret')
    assert s.wait() == 2, s.stderr()
    assert 'malformed session secret' in s.stderr()
    assert s.proc.stdout.read() == b''


def test_session_channel_closed_before_client(session):
    s = session()
    s.proc.stdin.close()
    assert s.wait() == 1
    assert 'closed before a client connected' in s.stderr()


@pytest.mark.deadline(120)
def test_session_no_client(request, session):
    if util.fast_mode():
        pytest.skip('waits 30 s (QFTFS_TEST_FAST)')
    if request.node.callspec.params.get('session') == 'asan':
        pytest.skip('a timer, nothing for the sanitizers: once is enough')
    s = session()
    assert s.wait(timeout=45) == 1
    assert 'no client connected within 30 s' in s.stderr()


# ---------------------------------------------------------------------------
# 5. What the network sees

@pytest.mark.deadline(300)
@pytest.mark.parametrize('cipher,visible', [('aes256-gcm', False),
                                            ('chacha20', False),
                                            ('none', True)])
def test_capture(sshd, mounter, home, served, tmp_path, cipher, visible):
    tcpdump = shutil.which('tcpdump')
    if not tcpdump:
        pytest.skip('tcpdump is missing (tests/run.sh installs it)')
    pcap = str(tmp_path / 'data.pcap')
    # Everything on lo except the ssh connection: that is the data plane.
    # --immediate-mode: a packet is written when it is seen, not when a
    # ring-buffer block fills, so stopping tcpdump loses nothing.
    cap = subprocess.Popen([tcpdump, '-i', 'lo', '-n', '-U',
                            '--immediate-mode', '-s', '0',
                            '-Z', 'root', '-w', pcap,
                            'tcp and not port %d' % sshd.port],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        r, _, _ = select.select([cap.stderr], [], [], 20)
        assert r, 'tcpdump did not start'
        line = cap.stderr.readline().decode(errors='replace')
        assert 'listening on' in line, line
        marker = b'qftfs-capture-marker-%s|' % os.urandom(8).hex().encode()
        data = marker * (256 * 1024 // len(marker))
        opts = ['transport=direct']
        if cipher != 'aes256-gcm':      # the default, left implicit
            opts.append('cipher=' + cipher)
        m = ssh_mount(mounter, sshd, home, served, opts=opts)
        with open(P(m.mnt, 'pattern'), 'wb') as f:
            f.write(data)
        with open(P(served, 'pattern'), 'rb') as f:
            assert f.read() == data
        stop_clean(m)
        time.sleep(0.2)
    finally:
        cap.send_signal(signal.SIGINT)
        try:
            cap.wait(timeout=20)
        except subprocess.TimeoutExpired:
            cap.kill()
            cap.wait()
    with open(pcap, 'rb') as f:
        captured = f.read()
    assert len(captured) > len(data), \
        'the capture holds %d bytes: the data plane was not seen' % \
        len(captured)
    if visible:
        assert marker in captured, 'cipher=none, yet the pattern is missing'
    else:
        assert marker not in captured, \
            'the pattern written through the mount is readable on the wire'


# ---------------------------------------------------------------------------
# 6. Sanitizers

@pytest.mark.deadline(600)
@pytest.mark.parametrize('transport', ['direct', 'ssh'])
def test_asan_ssh_mount(sshd, mounter, home, served, tmp_path, transport):
    b = util.asan_build_dir()
    if not os.path.isdir(b):
        if os.environ.get('CI'):
            pytest.fail('sanitizer build %s is missing' % b, pytrace=False)
        pytest.skip('sanitizer build %s is missing' % b)
    tree = '/usr/include/linux/netfilter'
    if not os.path.isdir(tree):
        pytest.skip('%s is missing (linux-libc-dev)' % tree)
    m = ssh_mount(mounter, sshd, home, served, build=b,
                  opts=['transport=' + transport])
    util.run(['cp', '-a', tree, P(m.mnt, 'tree')], timeout=600, check=True)
    util.run(['diff', '-r', tree, P(served, 'tree')], timeout=300,
             check=True)
    util.run(['diff', '-r', tree, P(m.mnt, 'tree')], timeout=300,
             check=True)
    # The teardown checks the client's log, which carries the server's
    # stderr too, for sanitizer reports.
    stop_clean(m)
    wait_no_server(served)
