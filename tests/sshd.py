# SPDX-License-Identifier: MIT
"""A private OpenSSH server for the ssh-mount tests.

Sshd runs Debian's /usr/sbin/sshd in the foreground (-D) on 127.0.0.1 and
a free port, with everything in a temp dir of its own: host keys made with
ssh-keygen, sshd_config, authorized_keys, pid file and log.  Nothing of the
machine's ssh set-up is read or changed, except that /run/sshd (the
privilege separation directory Debian's service would create) is created
when missing.

A client never sees the user's real ~/.ssh: client_home() builds a HOME
with .ssh/id_ed25519 (authorized), known_hosts (holding the server's keys)
and an empty config, and client_env() points HOME at it and drops
SSH_AUTH_SOCK, so an agent is used only when a test starts one.

The remote command runs with sshd's environment, not the test's: the
sanitizer options reach a sanitizer-built qftfs-server through SetEnv.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import util

SSHD = '/usr/sbin/sshd'


def unavailable_reason():
    """Why a private sshd cannot run here, or None."""
    if not os.access(SSHD, os.X_OK):
        return '%s is missing (install openssh-server)' % SSHD
    if shutil.which('ssh-keygen') is None:
        return 'ssh-keygen is missing (install openssh-client)'
    if os.geteuid() != 0:
        return 'sshd needs root for its privilege separation'
    return None


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def keygen(path, kind='ed25519', comment='qftfs-test'):
    util.run(['ssh-keygen', '-q', '-t', kind, '-N', '', '-C', comment,
              '-f', path], timeout=60, check=True)
    with open(path + '.pub') as f:
        return f.read().strip()


class Sshd:
    """One sshd; start() it, stop() it (also on failure)."""

    def __init__(self, base, user='root', addr='127.0.0.1', wrapper=(),
                 env=None):
        self.base = base
        # More of the remote command's environment (SetEnv), e.g. PATH
        # or XDG_CACHE_HOME for the install tests.
        self.extra_env = dict(env or {})
        self.user = user
        # The address to listen on, and a command prefix that runs sshd
        # elsewhere (tests/netns.py: inside a network namespace).
        self.addr = addr
        self.wrapper = list(wrapper)
        self.port = None
        self.proc = None
        self.log_path = os.path.join(base, 'sshd.log')
        self.host_keys = {}      # 'ssh-ed25519' -> public key line
        self.client_key = os.path.join(base, 'client', 'id_ed25519')

    # -- set-up ------------------------------------------------------------

    def _config(self, env):
        lines = [
            'Port %d' % self.port,
            'ListenAddress %s' % self.addr,
            'HostKey %s/host_ed25519' % self.base,
            'HostKey %s/host_ecdsa' % self.base,
            'PidFile %s/sshd.pid' % self.base,
            'AuthorizedKeysFile %s/authorized_keys' % self.base,
            'StrictModes no',
            'UsePAM no',
            'PermitRootLogin prohibit-password',
            'PasswordAuthentication no',
            'KbdInteractiveAuthentication no',
            'PubkeyAuthentication yes',
            'AllowTcpForwarding no',
            'X11Forwarding no',
            'PrintMotd no',
            'PrintLastLog no',
            'MaxStartups 50',
            'LogLevel VERBOSE',
        ]
        if env:
            lines.append('SetEnv ' + ' '.join('"%s=%s"' % kv
                                              for kv in sorted(env.items())))
        return '\n'.join(lines) + '\n'

    def remote_env(self):
        """Sanitizer settings for a sanitizer-built server, and the
        test's own `env`, and nothing else: the remote side must not
        depend on the test's environment."""
        env = {k: v for k, v in util.sanitizer_env({}).items()
               if k.endswith('SAN_OPTIONS')}
        for k in ('ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'):
            if os.environ.get(k):
                env[k] = os.environ[k]
        env.update(self.extra_env)
        return env

    def start(self, timeout=20):
        os.makedirs(self.base, exist_ok=True)
        os.makedirs(os.path.dirname(self.client_key), exist_ok=True)
        # Debian's unit creates it; a bare container may lack it.
        os.makedirs('/run/sshd', mode=0o755, exist_ok=True)
        for kind in ('ed25519', 'ecdsa'):
            pub = keygen(os.path.join(self.base, 'host_' + kind), kind,
                         'qftfs-test-host')
            self.host_keys[pub.split()[0]] = pub
        client_pub = keygen(self.client_key)
        with open(os.path.join(self.base, 'authorized_keys'), 'w') as f:
            f.write(client_pub + '\n')
        env = self.remote_env()
        last = None
        for _ in range(3):
            self.port = free_port()
            cfg = os.path.join(self.base, 'sshd_config')
            with open(cfg, 'w') as f:
                f.write(self._config(env))
            util.run(self.wrapper + [SSHD, '-t', '-f', cfg], timeout=30,
                     check=True)
            logf = open(self.log_path, 'ab')
            self.proc = subprocess.Popen(
                self.wrapper + [SSHD, '-D', '-f', cfg, '-E', self.log_path],
                stdin=subprocess.DEVNULL, stdout=logf,
                stderr=subprocess.STDOUT)
            logf.close()
            if self._wait_listening(timeout):
                return self
            last = util.read_log(self.log_path)
            self.stop()
        raise RuntimeError('sshd did not start; log:\n%s' % util.tail(last))

    def _wait_listening(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((self.addr, self.port),
                                              timeout=1) as s:
                    if s.recv(4).startswith(b'SSH-'):
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    # -- the client side ---------------------------------------------------

    def known_hosts_lines(self):
        """known_hosts lines for every host key, as ssh would write them."""
        name = '[%s]:%d' % (self.addr, self.port)
        return ['%s %s' % (name, ' '.join(k.split()[:2]))
                for k in self.host_keys.values()]

    def client_home(self, path, known=True, key=True):
        """A HOME for the client: .ssh/ with the key and known_hosts."""
        ssh = os.path.join(path, '.ssh')
        os.makedirs(ssh, mode=0o700, exist_ok=True)
        if key:
            for suffix in ('', '.pub'):
                shutil.copyfile(self.client_key + suffix,
                                os.path.join(ssh, 'id_ed25519' + suffix))
            os.chmod(os.path.join(ssh, 'id_ed25519'), 0o600)
        with open(os.path.join(ssh, 'known_hosts'), 'w') as f:
            if known:
                f.write('\n'.join(self.known_hosts_lines()) + '\n')
        with open(os.path.join(ssh, 'config'), 'w') as f:
            f.write('# written by tests/sshd.py\n')
        return path

    def client_env(self, home, extra=None, build=None):
        env = os.environ.copy()
        if build and util.is_asan_build(build):
            env = util.sanitizer_env(env)
        env['HOME'] = home
        env.pop('SSH_AUTH_SOCK', None)
        env.pop('SSH_AGENT_PID', None)
        env.update(extra or {})
        return env

    def source(self, path):
        return '%s@%s:%s' % (self.user, self.addr, path)

    def log(self):
        return util.read_log(self.log_path)


class Agent:
    """An ssh-agent on a socket of our own; stop() kills it."""

    def __init__(self, sock):
        self.sock = sock
        self.pid = None

    def start(self):
        r = util.run(['ssh-agent', '-s', '-a', self.sock], timeout=30,
                     check=True)
        for part in r.stdout.replace('\n', ';').split(';'):
            part = part.strip()
            if part.startswith('SSH_AGENT_PID='):
                self.pid = int(part.split('=', 1)[1])
        if not self.pid:
            raise RuntimeError('ssh-agent printed no pid: %r' % r.stdout)
        return self

    def add(self, key):
        util.run(['ssh-add', '-q', key], timeout=30, check=True,
                 env=dict(os.environ, SSH_AUTH_SOCK=self.sock))

    def stop(self):
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.pid = None


# ---------------------------------------------------------------------------
# dropbear: the sshd of small boards (Debian's dropbear-bin)

DROPBEAR = '/usr/sbin/dropbear'


def dropbear_unavailable_reason():
    """Why a private dropbear cannot run here, or None."""
    for prog, pkg in ((DROPBEAR, 'dropbear-bin'),
                      ('/usr/bin/dropbearkey', 'dropbear-bin'),
                      ('/usr/bin/unshare', 'util-linux')):
        if not os.access(prog, os.X_OK):
            return '%s is missing (install %s)' % (prog, pkg)
    if shutil.which('ssh-keygen') is None:
        return 'ssh-keygen is missing (install openssh-client)'
    if os.geteuid() != 0:
        return 'dropbear needs root to log in as root'
    return None


class Dropbear(Sshd):
    """One dropbear on 127.0.0.1, with the same API as Sshd.

    dropbear has no AuthorizedKeysFile and no SetEnv: it runs in a mount
    namespace of its own where a temp dir (self.remote_home) is bind-mounted
    over the user's home, holding .ssh/authorized_keys; the remote
    commands see that home (and only they: the machine's is untouched).
    `env` (and the sanitizer options) reach them through a .bashrc there,
    which Debian's bash reads for commands run by an ssh server; `-e`
    passes dropbear's own environment on too (it resets PATH itself).
    """

    def __init__(self, base, user='root', addr='127.0.0.1', env=None):
        super().__init__(base, user=user, addr=addr, env=env)
        self.remote_home = os.path.join(base, 'remote-home')

    def _dropbear_key(self, path, kind):
        args = ['-t', kind] + (['-s', '256'] if kind == 'ecdsa' else [])
        util.run(['dropbearkey'] + args + ['-f', path], timeout=60,
                 check=True)
        out = util.run(['dropbearkey', '-y', '-f', path], timeout=60,
                       check=True).stdout
        for line in out.splitlines():
            if line.startswith(('ssh-', 'ecdsa-')):
                return line.strip()
        raise RuntimeError('dropbearkey -y printed no key: %r' % out)

    def start(self, timeout=20):
        import pwd
        os.makedirs(self.base, exist_ok=True)
        os.makedirs(os.path.dirname(self.client_key), exist_ok=True)
        ssh = os.path.join(self.remote_home, '.ssh')
        os.makedirs(ssh, mode=0o700, exist_ok=True)
        os.chmod(self.remote_home, 0o700)
        keys = []
        for kind in ('ed25519', 'ecdsa'):
            path = os.path.join(self.base, 'host_' + kind)
            pub = self._dropbear_key(path, kind)
            self.host_keys[pub.split()[0]] = pub
            keys += ['-r', path]
        client_pub = keygen(self.client_key)
        with open(os.path.join(ssh, 'authorized_keys'), 'w') as f:
            f.write(client_pub + '\n')
        env = self.remote_env()
        with open(os.path.join(self.remote_home, '.bashrc'), 'w') as f:
            f.write('# written by tests/sshd.py\n')
            for k, v in sorted(env.items()):
                f.write("export %s='%s'\n" % (k, v.replace("'", "'\\''")))
        real_home = pwd.getpwnam(self.user).pw_dir
        last = None
        for _ in range(3):
            self.port = free_port()
            logf = open(self.log_path, 'ab')
            self.proc = subprocess.Popen(
                ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
                 'mount --bind "$0" "$1" && shift && exec "$@"', self.remote_home,
                 real_home, DROPBEAR, '-F', '-E', '-e', '-s', '-j', '-k',
                 '-p', '%s:%d' % (self.addr, self.port),
                 '-P', os.path.join(self.base, 'dropbear.pid')] + keys,
                stdin=subprocess.DEVNULL, stdout=logf,
                stderr=subprocess.STDOUT, env=dict(os.environ, **env))
            logf.close()
            if self._wait_listening(timeout):
                return self
            last = util.read_log(self.log_path)
            self.stop()
        raise RuntimeError('dropbear did not start; log:\n%s'
                           % util.tail(last))
