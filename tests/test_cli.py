# SPDX-License-Identifier: MIT
"""The command lines of qftfs and qftfs-server as context.md fixes them:
exit codes, messages a user can act on, daemon mode, SOURCE parsing."""

import json
import os
import select
import shutil
import subprocess
import time

import pytest

import util
import wire

P = os.path.join


def _built(path):
    if not os.access(path, os.X_OK):
        pytest.fail('not built: %s' % path, pytrace=False)
    return path


@pytest.fixture
def client(build):
    return _built(util.client_bin(build))


@pytest.fixture
def server(build):
    return _built(util.server_bin(build))


@pytest.fixture
def bins(client, server):
    return client, server


def test_version_and_help(bins, build):
    c, s = bins
    with open(os.path.join(build, 'meson-info', 'intro-projectinfo.json')) as f:
        version = json.load(f)['version']
    for exe in (c, s):
        r = util.run([exe, '-V'], timeout=30)
        assert r.returncode == 0, (exe, r.stderr)
        assert version in r.stdout + r.stderr, \
            'version %s not in %r' % (version, r.stdout + r.stderr)
        r = util.run([exe, '--version'], timeout=30)
        assert r.returncode == 0
        r = util.run([exe, '-h'], timeout=30)
        assert r.returncode == 0
        assert 'usage' in (r.stdout + r.stderr).lower()


def test_remote_source_unknown_host(client, tmp_path):
    """A remote source whose host does not resolve fails before mounting,
    with a message that names the host (no ssh config or agent needed)."""
    c = client
    os.mkdir(tmp_path / 'mnt')
    env = dict(os.environ, HOME=str(tmp_path))
    env.pop('SSH_AUTH_SOCK', None)
    for source in ('qftfs-test.invalid:dir', 'user@qftfs-test.invalid:'):
        r = util.run([c, '-f', source, str(tmp_path / 'mnt')], timeout=60,
                     env=env)
        assert r.returncode == 1, (source, r.returncode, r.stderr)
        assert 'qftfs-test.invalid' in r.stderr, r.stderr
    assert util.find_mount(str(tmp_path / 'mnt')) is None


def test_server_root_missing(server, tmp_path):
    s = server
    r = util.run([s, '--stdio', '--root', str(tmp_path / 'nope')], input='',
                 timeout=30)
    assert r.returncode != 0
    assert r.stderr.startswith('qftfs-server: '), r.stderr
    assert 'nope' in r.stderr, 'message should name the directory: %r' % r.stderr


def test_server_exits_0_on_eof(server, tmp_path):
    s = server
    srv = wire.Server(s, str(tmp_path), str(tmp_path / 'server.log'))
    assert srv.hello().status == 0
    assert srv.finish() == 0, srv.log()
    # And with nothing at all on stdin.
    r = util.run([s, '--stdio', '--root', str(tmp_path)], input='', timeout=30)
    assert r.returncode == 0, r.stderr


def test_bad_server_command(client, tmp_path, need_fuse):
    c = client
    src, mnt = tmp_path / 'src', tmp_path / 'mnt'
    src.mkdir()
    mnt.mkdir()
    for server in ('/nonexistent/qftfs-server', '/bin/false', '/bin/true'):
        # Without -f: qftfs must not report success before the mount works.
        r = util.run([c, '-o', 'server=' + server, str(src), str(mnt)], timeout=60)
        left = util.find_mount(str(mnt))
        if left:
            util.run(['fusermount3', '-u', '-z', str(mnt)], timeout=30)
        assert r.returncode != 0, 'qftfs succeeded with server=%s' % server
        assert r.stderr.strip(), 'no message for server=%s' % server
        assert left is None, 'a mount was left behind with server=%s' % server


def test_bad_mountpoint(client, tmp_path, need_fuse):
    c = client
    (tmp_path / 'src').mkdir()
    r = util.run([c, str(tmp_path / 'src'), str(tmp_path / 'nonexistent')],
                 timeout=60)
    assert r.returncode != 0 and r.stderr.strip()
    r = util.run([c, str(tmp_path / 'nonexistent-src'), str(tmp_path / 'src')],
                 timeout=60)
    assert r.returncode != 0 and r.stderr.strip()
    assert util.find_mount(str(tmp_path / 'src')) is None


def _pipe_holders(ino):
    """Pids holding pipe `ino` open."""
    link = 'pipe:[%d]' % ino
    pids = []
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            fds = os.listdir('/proc/%s/fd' % d)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink('/proc/%s/fd/%s' % (d, fd)) == link:
                    pids.append(int(d))
                    break
            except OSError:
                pass
    return pids


def test_daemon_mode(bins, tmp_path, need_fuse):
    """Without -f the client returns once the mount is ready, lets go of the
    caller's stdout/stderr (or `out=$(qftfs ...)` would hang), and goes away
    with its server after fusermount3 -u."""
    c, s = bins
    src, mnt = tmp_path / 'src', tmp_path / 'mnt'
    src.mkdir()
    mnt.mkdir()
    (src / 'hello').write_bytes(b'hi')
    rfd, wfd = os.pipe()
    try:
        p = subprocess.Popen([c, '-o', 'server=' + s, str(src), str(mnt)],
                             stdin=subprocess.DEVNULL, stdout=wfd, stderr=wfd)
        os.close(wfd)
        wfd = None
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail('qftfs (daemon mode) did not return within 60s')
        output = b''
        deadline = time.monotonic() + 5
        eof = False
        while time.monotonic() < deadline:
            r, _, _ = select.select([rfd], [], [], 0.2)
            if r:
                chunk = os.read(rfd, 65536)
                if not chunk:
                    eof = True
                    break
                output += chunk
        holders = [] if eof else _pipe_holders(os.fstat(rfd).st_ino)
        assert rc == 0, 'qftfs exited %d: %s' % (rc, output)
        m = util.find_mount(str(mnt))
        assert m and m['fstype'] == 'fuse.qftfs', 'not mounted when qftfs returned'
        with open(mnt / 'hello', 'rb') as f:
            assert f.read() == b'hi'
        assert util.find_processes(str(mnt)), 'no daemon process found'
        assert util.find_processes('--root ' + str(src)), 'no server process found'
        assert eof, ('after qftfs returned, processes still hold its stdout/'
                     'stderr: %s' % ['%d %s' % (h, open('/proc/%d/cmdline' % h).read()
                                                .replace('\0', ' ')) for h in holders])
    finally:
        if wfd is not None:
            os.close(wfd)
        os.close(rfd)
        if util.find_mount(str(mnt)):
            util.run(['fusermount3', '-u', str(mnt)], timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (util.find_processes(str(mnt)) or
                                          util.find_processes('--root ' + str(src))):
        time.sleep(0.1)
    left = util.find_processes(str(mnt)) + util.find_processes('--root ' + str(src))
    assert not left, 'processes left behind after unmount: %s' % left


def test_relative_and_colon_sources(mounter, tmp_path):
    """SOURCE without ':' before the first '/' is local, like scp."""
    (tmp_path / 'we:ird').mkdir()
    (tmp_path / 'we:ird' / 'f').write_bytes(b'colon')
    (tmp_path / 'rel').mkdir()
    (tmp_path / 'rel' / 'f').write_bytes(b'relative')
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        m1 = mounter(src='./we:ird', mnt=str(tmp_path / 'm1'))
        m2 = mounter(src='rel', mnt=str(tmp_path / 'm2'))
    finally:
        os.chdir(cwd)
    assert (tmp_path / 'm1' / 'f').read_bytes() == b'colon'
    assert (tmp_path / 'm2' / 'f').read_bytes() == b'relative'
    assert util.find_mount(m1.mnt)['source'] == './we:ird'
    assert util.find_mount(m2.mnt)['source'] == 'rel'


def test_default_server_next_to_client(mounter, tmp_path, build):
    """Without -o server= the client runs the qftfs-server installed beside
    it (as in /usr/bin); the build tree keeps them in separate dirs, so
    install both into one."""
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    for b in (util.client_bin(build), util.server_bin(build)):
        shutil.copy2(b, bindir)
    m = mounter(client=str(bindir / 'qftfs'), server='')
    assert m.server_pids, 'no server child found'
    exe = os.readlink('/proc/%d/exe' % m.server_pids[0])
    assert exe == str(bindir / 'qftfs-server')
    with open(os.path.join(m.src, 'x'), 'wb') as f:
        f.write(b'1')
    assert os.listdir(m.mnt) == ['x']
