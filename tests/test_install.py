# SPDX-License-Identifier: MIT
"""The client installs its server on the remote host (issue 11;
fuse/login/install.h), against the loopback sshd (tests/sshd.py) with a remote
environment of the test's own (SetEnv: PATH, XDG_CACHE_HOME, TMPDIR), so
the remote user's PATH has no qftfs-server and the cache is the test's.

1. Without -o server the client uploads the server beside it into
   $XDG_CACHE_HOME/qftfs/<version>-<arch>/ and mounts; the cached file has
   the right digest; one stderr line says what went where; a second mount
   reuses it; a corrupt entry or another build there is replaced; a
   qftfs-server in PATH of another protocol is passed over, one of ours is
   used as it is; two simultaneous first mounts both succeed and leave one
   whole binary; a read-only home falls back to $TMPDIR/qftfs-<uid>.
   A cache directory anyone but the user (and root) could change is never
   trusted (issue 18, finding 5): one owned by another user holding a
   planted same-size fake, on a host without digest tools; one of the
   user's own under a directory others may write to (the swap).
2. -o install=no fails with a message that says what to do; a machine
   qftfs has no build for is named in the error.
3. busybox: the script runs with busybox's sh and tools alone, checking
   the upload with cksum when there is no sha256sum, and by size when
   there is neither (with a warning).
4. Foreign boards: with `uname -m` saying aarch64, armv7l or armv6l, the
   client installs the aarch64, armhf or armel build of
   scripts/cross-server.sh and the mount works, run by qemu-user through
   binfmt_misc (with the CPU of a board of that kind).
"""

import contextlib
import os
import shutil
import subprocess
import threading
import time

import pytest

import sshd as sshd_mod
import util

P = os.path.join
VERSION = None


def version():
    global VERSION
    if VERSION is None:
        out = util.run([util.server_bin(util.build_dir()), '--version'],
                       timeout=30, check=True).stdout
        VERSION = out.split()[1]
    return VERSION


@pytest.fixture
def remote(tmp_path):
    """start(env) -> an Sshd whose remote commands see `env`; PATH gets
    a directory of the test's own (fake/) first."""
    why = sshd_mod.unavailable_reason()
    if why:
        pytest.skip('install tests SKIPPED: ' + why)
    started = []
    fake = tmp_path / 'fake'
    fake.mkdir()

    def start(env=None, path=None):
        e = {'PATH': path or '%s:/usr/bin:/bin' % fake,
             'XDG_CACHE_HOME': str(tmp_path / 'cache')}
        e.update(env or {})
        s = sshd_mod.Sshd(str(tmp_path / ('sshd%d' % len(started))), env=e)
        started.append(s)
        try:
            s.start()
        except Exception as ex:  # noqa: BLE001 - report why
            pytest.fail('cannot start sshd: %s' % ex, pytrace=False)
        s.fake = str(fake)
        s.home_dir = s.client_home(str(tmp_path / 'home'))
        return s

    yield start
    for s in started:
        s.stop()


def mount(mounter, s, served, opts=(), mnt=None, start=True):
    return mounter(src=s.source(served), mnt=mnt or served + '.mnt',
                   server='', opts=list(opts), env=s.client_env(s.home_dir),
                   extra_args=['-p', str(s.port)], start=start)


def served_dir(tmp_path, name='served'):
    d = str(tmp_path / name)
    os.makedirs(d)
    return d


def cache_file(tmp_path, arch='x86_64'):
    return str(tmp_path / 'cache' / 'qftfs' / ('%s-%s' % (version(), arch))
               / 'qftfs-server')


def installed_lines(log):
    return [line for line in log.splitlines()
            if 'installed qftfs-server' in line]


def own_server():
    return os.path.realpath(util.server_bin(util.build_dir()))


def check_copy(m, served):
    data = os.urandom(300000)
    with open(P(m.mnt, 'f'), 'wb') as f:
        f.write(data)
    with open(P(served, 'f'), 'rb') as f:
        assert f.read() == data
    with open(P(served, 'g'), 'wb') as f:
        f.write(data[::-1])
    with open(P(m.mnt, 'g'), 'rb') as f:
        assert f.read() == data[::-1]


def stop(m, served):
    problems = m.stop()
    assert not problems, '\n'.join(problems)
    assert not util.find_processes('--root ' + served)


def need_native():
    if os.uname().machine != 'x86_64':
        pytest.skip('the install tests name the x86_64 cache directory')


# ---------------------------------------------------------------------------
# 1. Installing, reusing, replacing

def test_installs_when_missing_then_reuses(remote, mounter, tmp_path):
    need_native()
    s = remote()
    assert not shutil.which('qftfs-server', path=s.fake + ':/usr/bin:/bin')
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    cached = cache_file(tmp_path)
    lines = installed_lines(m.log())
    assert len(lines) == 1, m.log()
    assert cached in lines[0] and 'x86_64' in lines[0], lines[0]
    assert own_server() in lines[0], lines[0]
    assert util.sha256_file(cached) == util.sha256_file(own_server())
    assert os.access(cached, os.X_OK)
    st = os.stat(cached)
    # The second mount runs what is there.
    m2 = mount(mounter, s, served, mnt=served + '.mnt2')
    check_copy(m2, served)
    stop(m2, served)
    assert not installed_lines(m2.log()), m2.log()
    st2 = os.stat(cached)
    assert (st.st_ino, st.st_mtime_ns) == (st2.st_ino, st2.st_mtime_ns)
    # Nothing but the binary in the cache.
    assert os.listdir(os.path.dirname(cached)) == ['qftfs-server']


def test_reconnect_runs_the_cached_server(remote, mounter, tmp_path):
    """kill -9 of the installed server: the mount reconnects through the
    same script, which finds the cache and installs nothing again."""
    need_native()
    s = remote()
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    cached = cache_file(tmp_path)
    pids = [p for p in util.find_processes('--root ' + served)
            if cached in open('/proc/%d/cmdline' % p, 'rb').read()
            .replace(b'\0', b' ').decode(errors='replace')]
    assert pids, 'the cached server is not what runs'
    for p in pids:
        os.kill(p, 9)
    deadline = time.monotonic() + 30
    while True:
        try:
            with open(P(m.mnt, 'after'), 'w') as f:
                f.write('back')
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert open(P(served, 'after')).read() == 'back'
    stop(m, served)
    # A new server, from the cache: the session carried over to it (a
    # resumable mount), or a new one (reconnect).
    log = m.log()
    assert 'session carried over to a new server' in log or \
        'reconnected to' in log, log
    assert len(installed_lines(log)) == 1, log


@pytest.mark.parametrize('what', ['corrupt', 'other-build'])
def test_replaces_bad_cache_entry(remote, mounter, tmp_path, what):
    need_native()
    s = remote()
    cached = cache_file(tmp_path)
    os.makedirs(os.path.dirname(cached))
    if what == 'corrupt':
        shutil.copyfile(own_server(), cached)
        with open(cached, 'r+b') as f:
            f.seek(4096)
            f.write(b'\xde\xad\xbe\xef')
    else:
        # Another build that speaks our protocol: not the one we bring.
        with open(cached, 'w') as f:
            f.write('#!/bin/sh\necho "qftfs-server 0.0.0 (protocol v%s)"\n'
                    'exit 1\n' % version())
    os.chmod(cached, 0o755)
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    assert len(installed_lines(m.log())) == 1, m.log()
    assert util.sha256_file(cached) == util.sha256_file(own_server())


def test_path_server_of_other_protocol_passed_over(remote, mounter, tmp_path):
    need_native()
    s = remote()
    fake = P(s.fake, 'qftfs-server')
    with open(fake, 'w') as f:
        f.write('#!/bin/sh\necho "qftfs-server 0.0.1 (protocol v1)"\n'
                'echo "old server ran" >&2\nexit 2\n')
    os.chmod(fake, 0o755)
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    assert len(installed_lines(m.log())) == 1, m.log()
    assert 'old server ran' not in m.log()


def test_path_server_of_our_protocol_is_used(remote, mounter, tmp_path):
    need_native()
    s = remote()
    os.symlink(own_server(), P(s.fake, 'qftfs-server'))
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    assert not installed_lines(m.log()), m.log()
    assert not os.path.exists(cache_file(tmp_path))


def test_concurrent_first_mounts(remote, mounter, tmp_path):
    need_native()
    s = remote()
    served = [served_dir(tmp_path, 'served%d' % i) for i in range(2)]
    ms = [mount(mounter, s, d, start=False) for d in served]
    errors = []

    def start(m):
        try:
            m.start(timeout=90)
        except util.MountError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=start, args=(m,)) for m in ms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, '\n'.join(errors)
    for m, d in zip(ms, served):
        check_copy(m, d)
    for m, d in zip(ms, served):
        stop(m, d)
    cached = cache_file(tmp_path)
    assert util.sha256_file(cached) == util.sha256_file(own_server())
    # Both may have uploaded; neither left its temp file behind.
    assert os.listdir(os.path.dirname(cached)) == ['qftfs-server']
    assert sum(len(installed_lines(m.log())) for m in ms) >= 1


def test_readonly_home_falls_back_to_tmp(remote, mounter, tmp_path):
    need_native()
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    # /proc refuses mkdir even to root: a cache that cannot be made.
    s = remote({'XDG_CACHE_HOME': '/proc/qftfs-no-cache',
                'TMPDIR': str(tmp)})
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    base = P(str(tmp), 'qftfs-%d' % os.getuid())
    cached = P(base, '%s-x86_64' % version(), 'qftfs-server')
    assert util.sha256_file(cached) == util.sha256_file(own_server())
    assert os.stat(base).st_mode & 0o777 == 0o700
    assert cached in installed_lines(m.log())[0]


def test_foreign_tmp_dir_not_used(remote, mounter, tmp_path):
    """A shared temp directory someone else could write to is never
    used: with nothing else writable the mount fails and says why."""
    need_native()
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    base = tmp / ('qftfs-%d' % os.getuid())
    base.mkdir()
    os.chmod(str(base), 0o777)
    s = remote({'XDG_CACHE_HOME': '/proc/qftfs-no-cache',
                'TMPDIR': str(tmp)})
    # /var/tmp and /dev/shm would still do: make them unusable by name.
    with _no_fallback_caches():
        r = run_client(s, served_dir(tmp_path), tmp_path)
    assert r.returncode != 0
    assert 'no writable directory of your own for the cache' in r.stderr, \
        r.stderr
    assert os.listdir(str(base)) == []


@contextlib.contextmanager
def _no_fallback_caches():
    """/var/tmp/qftfs-UID and /dev/shm/qftfs-UID made unusable (plain
    files in their place) while the block runs: the installer's last
    candidates, out of the way of a test of the ones before them."""
    paths = [P(d, 'qftfs-%d' % os.getuid()) for d in ('/var/tmp', '/dev/shm')]
    for p in paths:
        if os.path.exists(p):
            pytest.skip('%s exists already' % p)
    for p in paths:
        open(p, 'w').close()
    try:
        yield
    finally:
        for p in paths:
            os.unlink(p)


def _size_only_path(tmp_path):
    """A PATH of busybox's tools without sha256sum or cksum: the script
    can check a cached binary by its size alone, which is what made a
    planted fake run (issue 18, finding 5)."""
    bbdir = util.busybox_dir(str(tmp_path / 'bb'))
    if not bbdir:
        pytest.skip('busybox is missing (install busybox)')
    for tool in ('sha256sum', 'cksum'):
        if os.path.lexists(P(bbdir, tool)):
            os.unlink(P(bbdir, tool))
    return '%s:%s' % (tmp_path / 'fake', bbdir)


def _plant_fake(path, marker, size):
    """A shell script of exactly `size` bytes that leaves `marker` and
    then runs the real server, so that a mount through it would work."""
    head = '#!/bin/sh\ntouch %s\nexec %s "$@"\n#' % (marker, own_server())
    body = head.encode() + b'#' * (size - len(head) - 1) + b'\n'
    assert len(body) == size
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(body)
    os.chmod(path, 0o755)


def _chown_tree(top, uid):
    for d, dirs, files in os.walk(top):
        os.chown(d, uid, uid)
        for f in files:
            os.chown(P(d, f), uid, uid)


@pytest.mark.parametrize('via', ['XDG_CACHE_HOME', 'HOME'])
def test_cache_of_another_user_not_trusted(remote, mounter, tmp_path, via):
    """Issue 18, finding 5: with the cache in a directory another user
    owns (HOME=/tmp, a shared service home) and no digest tool on the
    host, a same-size fake planted there by that user ran as the mounting
    user.  Now the directory is passed over with a note saying why, the
    server is installed into a temp directory of the user's own, and the
    fake never runs.  The other user's directory is the cache's parent
    ($XDG_CACHE_HOME) or the home above ~/.cache ($HOME)."""
    need_native()
    if os.geteuid() != 0:
        pytest.skip('planting files owned by another user needs root')
    other = 65534
    evil = tmp_path / 'evil-home'
    cache = evil if via == 'XDG_CACHE_HOME' else evil / '.cache'
    size = os.path.getsize(own_server())
    marker = str(tmp_path / 'fake-ran')
    fake = P(str(cache), 'qftfs', '%s-x86_64' % version(), 'qftfs-server')
    _plant_fake(fake, marker, size)
    _chown_tree(str(evil), other)
    os.chmod(str(evil), 0o755)
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    env = {'TMPDIR': str(tmp)}
    if via == 'HOME':
        env.update({'HOME': str(evil), 'XDG_CACHE_HOME': ''})
    else:
        env['XDG_CACHE_HOME'] = str(evil)
    s = remote(env, path=_size_only_path(tmp_path))
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    assert not os.path.exists(marker), 'the planted fake ran'
    log = m.log()
    assert 'not using %s/qftfs for the server cache' % cache in log, log
    assert 'belongs to uid %d' % other in log, log
    cached = P(str(tmp), 'qftfs-%d' % os.getuid(), '%s-x86_64' % version(),
               'qftfs-server')
    assert cached in installed_lines(log)[0], log
    assert util.sha256_file(cached) == util.sha256_file(own_server())
    # The other user's files are as they were.
    assert os.stat(fake).st_uid == other
    assert os.path.getsize(fake) == size


def test_cache_under_writable_parent_not_trusted(remote, mounter, tmp_path):
    """The swap: a cache that is the user's own but sits in a directory
    others may write to (mode 777, not sticky) can be renamed away and
    replaced by them between the digest check and the exec.  Such a cache
    is not used even when it holds the right binary: the server is
    installed into a directory nobody else can change, and runs from
    there."""
    need_native()
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(str(shared), 0o777)
    good = P(str(shared), 'qftfs', '%s-x86_64' % version(), 'qftfs-server')
    os.makedirs(os.path.dirname(good))
    os.chmod(P(str(shared), 'qftfs'), 0o700)
    shutil.copyfile(own_server(), good)
    os.chmod(good, 0o755)
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    s = remote({'XDG_CACHE_HOME': str(shared), 'TMPDIR': str(tmp)})
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    log = m.log()
    assert 'is writable by others' in log, log
    cached = P(str(tmp), 'qftfs-%d' % os.getuid(), '%s-x86_64' % version(),
               'qftfs-server')
    lines = installed_lines(log)
    assert len(lines) == 1 and cached in lines[0], log


def test_no_trusted_cache_says_why(remote, tmp_path):
    """Every candidate fails the check: the mount fails, and the message
    names each directory and what is wrong with it."""
    need_native()
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(str(shared), 0o777)
    s = remote({'XDG_CACHE_HOME': str(shared), 'TMPDIR': str(shared)})
    with _no_fallback_caches():
        r = run_client(s, served_dir(tmp_path), tmp_path)
    assert r.returncode != 0
    assert 'no writable directory of your own for the cache' in r.stderr, \
        r.stderr
    assert '%s is writable by others' % shared in r.stderr, r.stderr


# ---------------------------------------------------------------------------
# 2. Errors

def run_client(s, served, tmp_path, opts=()):
    mnt = str(tmp_path / 'mnt-fail')
    os.makedirs(mnt, exist_ok=True)
    cmd = [util.client_bin(util.build_dir()), '-p', str(s.port)]
    for o in opts:
        cmd += ['-o', o]
    cmd += [s.source(served), mnt]
    try:
        return util.run(cmd, timeout=90, env=s.client_env(s.home_dir))
    finally:
        if util.find_mount(mnt):
            subprocess.run(['fusermount3', '-u', '-z', mnt], timeout=30)


def test_install_no(remote, tmp_path):
    s = remote()
    r = run_client(s, served_dir(tmp_path), tmp_path, ['install=no'])
    assert r.returncode == 1, r.stderr
    assert ('qftfs-server is not installed on 127.0.0.1 (or not in PATH)'
            in r.stderr), r.stderr
    assert 'drop -o install=no' in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / 'cache')


def test_install_option_checked(remote, tmp_path):
    s = remote()
    r = run_client(s, served_dir(tmp_path), tmp_path, ['install=maybe'])
    assert r.returncode == 2, r.stderr
    assert "invalid install 'maybe'" in r.stderr


def fake_uname(s, machine):
    with open(P(s.fake, 'uname'), 'w') as f:
        f.write('#!/bin/sh\necho %s\n' % machine)
    os.chmod(P(s.fake, 'uname'), 0o755)


def test_unknown_machine(remote, tmp_path):
    s = remote()
    fake_uname(s, 'mips')
    r = run_client(s, served_dir(tmp_path), tmp_path)
    assert r.returncode == 1
    assert 'is a mips machine, for which qftfs has no server build' in \
        r.stderr, r.stderr
    assert not os.path.exists(tmp_path / 'cache' / 'qftfs')


def test_no_build_for_arch(remote, tmp_path):
    """No armhf binary anywhere the client looks: the error says where it
    looked and how to make one.  A copy of the client outside its build
    tree does not look into build-cross/."""
    s = remote()
    fake_uname(s, 'armv7l')
    empty = tmp_path / 'empty'
    empty.mkdir()
    client = str(tmp_path / 'qftfs')
    shutil.copy2(util.client_bin(util.build_dir()), client)
    served = served_dir(tmp_path)
    mnt = str(tmp_path / 'mnt-fail')
    os.makedirs(mnt)
    r = util.run([client, '-p', str(s.port), '-o',
                  'server_binaries=' + str(empty), s.source(served), mnt],
                 timeout=90, env=s.client_env(s.home_dir))
    assert r.returncode == 1, r.stderr
    assert 'no armhf build was found here to install' in r.stderr, r.stderr
    assert str(empty / 'armhf' / 'qftfs-server') in r.stderr
    assert 'build-cross' not in r.stderr
    assert 'scripts/cross-server.sh armhf' in r.stderr
    assert not util.find_mount(mnt)
    assert not os.path.exists(tmp_path / 'cache' / 'qftfs')


# ---------------------------------------------------------------------------
# 3. busybox

@pytest.mark.parametrize('check', ['sha256', 'cksum', 'size'])
def test_busybox_tools(remote, mounter, tmp_path, check):
    """busybox's sh, dd, od, ls, ... alone; the digest the board can make:
    busybox sha256sum, else POSIX cksum (coreutils': Debian's busybox has
    none), else the size."""
    need_native()
    bbdir = util.busybox_dir(str(tmp_path / 'bb'))
    if not bbdir:
        pytest.skip('busybox is missing (install busybox)')
    bb = shutil.which('busybox')
    for tool in ('sha256sum', 'cksum'):
        if check != 'sha256' and os.path.lexists(P(bbdir, tool)):
            os.unlink(P(bbdir, tool))
    if check == 'cksum':
        os.symlink(shutil.which('cksum'), P(bbdir, 'cksum'))
    assert os.path.realpath(P(bbdir, 'sh')) == os.path.realpath(bb)
    assert os.path.realpath(P(bbdir, 'dd')) == os.path.realpath(bb)
    # busybox first, and nothing of the system's own in PATH.
    s = remote(path='%s:%s' % (tmp_path / 'fake', bbdir))
    served = served_dir(tmp_path)
    m = mount(mounter, s, served)
    check_copy(m, served)
    stop(m, served)
    assert len(installed_lines(m.log())) == 1, m.log()
    cached = cache_file(tmp_path)
    assert util.sha256_file(cached) == util.sha256_file(own_server())
    size_only = 'checked by its size only' in m.log()
    assert size_only == (check == 'size'), m.log()
    # The cached copy is found again by the same digest.
    m2 = mount(mounter, s, served, mnt=served + '.mnt2')
    stop(m2, served)
    assert not installed_lines(m2.log()), m2.log()
    if check != 'size':
        # A damaged copy is not: its digest differs.
        with open(cached, 'r+b') as f:
            f.seek(100)
            f.write(b'\x00\x01')
        m3 = mount(mounter, s, served, mnt=served + '.mnt3')
        stop(m3, served)
        assert len(installed_lines(m3.log())) == 1, m3.log()
        assert util.sha256_file(cached) == util.sha256_file(own_server())


def test_board_without_dd(remote, tmp_path):
    """A board whose busybox lacks dd cannot take the upload: the mount
    fails with the script's own reason, and no temp file is left."""
    need_native()
    bbdir = util.busybox_dir(str(tmp_path / 'bb'))
    if not bbdir:
        pytest.skip('busybox is missing (install busybox)')
    os.unlink(P(bbdir, 'dd'))
    s = remote(path='%s:%s' % (tmp_path / 'fake', bbdir))
    r = run_client(s, served_dir(tmp_path), tmp_path)
    assert r.returncode == 1, r.stderr
    assert 'cannot install qftfs-server on 127.0.0.1' in r.stderr, r.stderr
    assert 'is dd missing?' in r.stderr, r.stderr
    d = os.path.dirname(cache_file(tmp_path))
    assert os.listdir(d) == [], os.listdir(d)


# ---------------------------------------------------------------------------
# 4. Foreign boards under qemu-user (binfmt_misc)

BINFMT = '/proc/sys/fs/binfmt_misc'
MAGIC = {
    'aarch64': (r'\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00'
                r'\x02\x00\xb7\x00',
                r'\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff'
                r'\xff\xff\xfe\xff\xff\xff'),
    'arm': (r'\x7fELF\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00'
            r'\x02\x00\x28\x00',
            r'\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff'
            r'\xff\xff\xfe\xff\xff\xff'),
}


@pytest.fixture
def binfmt():
    """register(arch) makes the kernel run `arch` binaries with
    qemu-user (flag F: the emulator is opened now, so it works in any
    mount namespace); undone at teardown."""
    if os.geteuid() != 0:
        pytest.skip('binfmt_misc needs root: foreign-board install SKIPPED')
    mounted = False
    if not os.path.exists(P(BINFMT, 'register')):
        r = util.run(['mount', '-t', 'binfmt_misc', 'binfmt_misc', BINFMT],
                     timeout=30)
        if r.returncode != 0:
            pytest.skip('cannot mount binfmt_misc (%s): foreign-board '
                        'install SKIPPED' % r.stderr.strip())
        mounted = True
    names = []

    def register(arch):
        kind = 'aarch64' if arch == 'aarch64' else 'arm'
        emu = shutil.which('qemu-%s-static' % kind)
        if not emu:
            pytest.skip('qemu-%s-static is missing (install '
                        'qemu-user-static)' % kind)
        name = 'qftfs-test-%s' % kind
        if os.path.exists(P(BINFMT, name)):
            return
        magic, mask = MAGIC[kind]
        with open(P(BINFMT, 'register'), 'w') as f:
            f.write(':%s:M::%s:%s:%s:F' % (name, magic, mask, emu))
        names.append(name)

    yield register
    for name in names:
        with open(P(BINFMT, name), 'w') as f:
            f.write('-1')
    if mounted:
        subprocess.run(['umount', BINFMT], timeout=30)


@pytest.mark.deadline(1800)
@pytest.mark.parametrize('machine,arch', [('aarch64', 'aarch64'),
                                          ('armv7l', 'armhf'),
                                          ('armv6l', 'armel')])
def test_foreign_board(remote, mounter, tmp_path, binfmt, machine, arch):
    path, why = util.cross_server(arch)
    if why:
        pytest.skip('cross build for %s SKIPPED: %s' % (arch, why))
    binfmt(arch)
    # qemu-user takes its CPU from the environment: a board of that kind.
    s = remote({'QEMU_CPU': util.CROSS_QEMU[arch][1]})
    fake_uname(s, machine)
    served = served_dir(tmp_path)
    m = mount(mounter, s, served,
              opts=['server_binaries=' + os.path.dirname(
                  os.path.dirname(path))])
    check_copy(m, served)
    big = P(str(tmp_path), 'big')
    util.write_random_file(big, 16 * 1024 * 1024, seed=11)
    util.run(['cp', big, P(m.mnt, 'big')], timeout=600, check=True)
    util.run(['cp', P(m.mnt, 'big'), big + '.back'], timeout=600, check=True)
    stop(m, served)
    assert util.sha256_file(P(served, 'big')) == util.sha256_file(big)
    assert util.sha256_file(big + '.back') == util.sha256_file(big)
    cached = cache_file(tmp_path, arch)
    assert util.sha256_file(cached) == util.sha256_file(path)
    line = installed_lines(m.log())
    assert len(line) == 1 and ('for %s on' % arch) in line[0], m.log()
