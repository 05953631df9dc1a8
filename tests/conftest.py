# SPDX-License-Identifier: MIT
"""pytest configuration and fixtures for the qftfs integration tests.

Per-test deadline without plugins: a watchdog thread per test phase.  When
it fires it first aborts every FUSE connection the test owns (a process
blocked in a FUSE request ignores ordinary signals) and lazily unmounts,
then sends SIGALRM to the main thread, whose handler raises TestTimeout.
Mark slow tests with @pytest.mark.deadline(seconds).

Fixtures:
  build, asan_build   build trees (QFTFS_BUILD, default <repo>/build;
                      QFTFS_BUILD_ASAN, default <repo>/build-asan)
  need_root           skips the test, loudly, when not running as root
  need_fuse           skips the test when /dev/fuse or fusermount3 is missing
                      (mounter does this by itself)
  mounter             factory: mounter(build=..., opts=[...], ...) -> Mount
  mount               one mount; indirect params: dict(build=, opts=, ...)
  wtmp                a temp dir that other users can traverse (pytest's
                      own tmp dirs are mode 0700)
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import util  # noqa: E402
import wire  # noqa: E402

DEFAULT_DEADLINE = 180      # seconds for a test's call phase
FIXTURE_DEADLINE = 120      # setup and teardown phases


class TestTimeout(Exception):
    __test__ = False


class _Watch:
    """State shared between the watchdog thread and the SIGALRM handler."""
    lock = threading.Lock()
    armed = False
    fired = None        # description of the phase that timed out


def _on_alarm(signum, frame):
    with _Watch.lock:
        armed, fired = _Watch.armed, _Watch.fired
    if armed and fired:
        raise TestTimeout(fired)


def pytest_configure(config):
    # Modes asserted in the backing dir must not depend on the caller's
    # umask; the client and server inherit this one.
    os.umask(0o022)
    config.addinivalue_line('markers',
                            'deadline(seconds): per-test time limit '
                            '(default %ds)' % DEFAULT_DEADLINE)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGALRM, _on_alarm)


def _fire(item, when, seconds):
    with _Watch.lock:
        if not _Watch.armed:
            return
        _Watch.fired = ('%s: %s phase exceeded its deadline of %.0fs; FUSE '
                        'connections aborted' % (item.nodeid, when, seconds))
    item._qftfs_timed_out = (when, _Watch.fired)
    util.abort_all_mounts()
    signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)


def _phase(item, when):
    if when == 'call':
        m = item.get_closest_marker('deadline')
        seconds = m.args[0] if m else DEFAULT_DEADLINE
    else:
        seconds = FIXTURE_DEADLINE
    seconds *= util.timeout_scale()
    t = threading.Timer(seconds, _fire, args=(item, when, seconds))
    t.daemon = True
    with _Watch.lock:
        _Watch.armed = True
        _Watch.fired = None
    t.start()
    return t


def _end_phase(t):
    with _Watch.lock:
        _Watch.armed = False
    t.cancel()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    t = _phase(item, 'setup')
    try:
        yield
    finally:
        _end_phase(t)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    t = _phase(item, 'call')
    try:
        yield
    finally:
        _end_phase(t)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    t = _phase(item, 'teardown')
    try:
        yield
    finally:
        _end_phase(t)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    timed_out = getattr(item, '_qftfs_timed_out', None)
    if timed_out and timed_out[0] == rep.when:
        rep.sections.append(('watchdog', timed_out[1]))
        if rep.passed:
            rep.outcome = 'failed'
            rep.longrepr = timed_out[1]
    # On failure show what the daemons said: most bugs are explained there.
    if rep.failed:
        for m in getattr(item, '_qftfs_mounts', []):
            text = m.log()
            if text:
                rep.sections.append(('qftfs log %s' % m.log_path,
                                     util.tail(text, 80)))


# ---------------------------------------------------------------------------
# Fixtures

@pytest.fixture(scope='session')
def build():
    b = util.build_dir()
    if not os.path.isdir(b):
        pytest.fail('build tree %s does not exist: run `bash tests/run.sh` '
                    'or `meson setup build && ninja -C build`' % b,
                    pytrace=False)
    return b


@pytest.fixture(scope='session')
def asan_build():
    b = util.asan_build_dir()
    if not os.path.isdir(b):
        if os.environ.get('CI'):
            pytest.fail('sanitizer build %s is missing' % b, pytrace=False)
        pytest.skip('sanitizer build %s is missing (tests/run.sh builds it)' % b)
    return b


@pytest.fixture
def need_root():
    if os.geteuid() != 0:
        pytest.skip('needs root (runs as uid %d)' % os.geteuid())


@pytest.fixture
def need_fuse():
    why = util.fuse_unavailable_reason()
    if why:
        pytest.skip('FUSE unavailable: ' + why)


def _need_binaries(b):
    missing = [p for p in (util.client_bin(b), util.server_bin(b))
               if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail('not built: %s' % ', '.join(missing), pytrace=False)


@pytest.fixture
def mounter(request, tmp_path):
    """Factory for mounts owned by the test; all of them are unmounted and
    checked at teardown (unmount, client exit status, no server left
    behind, no sanitizer report or crash in the logs)."""
    mounts = []
    request.node._qftfs_mounts = mounts
    logs = tmp_path / 'logs'
    logs.mkdir(exist_ok=True)

    def make(src=None, mnt=None, build=None, opts=(), server=None,
             server_wrapper=None, start=True, **kw):
        why = util.fuse_unavailable_reason()
        if why:
            pytest.skip('FUSE unavailable: ' + why)
        b = os.path.realpath(build) if build else util.build_dir()
        _need_binaries(b)
        n = len(mounts)
        if src is None:
            src = str(tmp_path / ('src%d' % n if n else 'src'))
            os.makedirs(src, exist_ok=True)
        if mnt is None:
            mnt = str(tmp_path / ('mnt%d' % n if n else 'mnt'))
        if server is None:
            server = util.server_bin(b)
        if server_wrapper:
            server = server_wrapper + ' ' + server
        m = util.Mount(str(src), str(mnt), build=b, opts=opts, server=server,
                       log_path=str(logs / ('qftfs%d.log' % n)), **kw)
        mounts.append(m)
        if start:
            err = None
            try:
                m.start()
            except util.MountError as e:
                err = str(e)
            if err:
                pytest.fail(err, pytrace=False)
        return m

    yield make

    problems = []
    for m in reversed(mounts):
        try:
            problems += m.stop()
        except Exception as e:  # noqa: BLE001 - report, then keep cleaning
            problems.append('cleanup of %s failed: %r' % (m.mnt, e))
            m.abort()
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)


@pytest.fixture
def mount(request, mounter):
    """One mount, yielding a util.Mount that unpacks as (src, mnt).

    Parametrize indirectly with a dict: build ('asan' or a path), opts
    (list of -o options), server_wrapper (command prefixed to the server).
    """
    p = dict(getattr(request, 'param', None) or {})
    if p.get('build') == 'asan':
        b = util.asan_build_dir()
        if not os.path.isdir(b):
            pytest.skip('sanitizer build %s is missing' % b)
        p['build'] = b
    yield mounter(**p)


@pytest.fixture
def wtmp():
    """A temp dir under /tmp with mode 0755, for tests where the server runs
    as another user and must reach the served directory."""
    base = os.environ.get('QFTFS_TEST_TMP', tempfile.gettempdir())
    d = tempfile.mkdtemp(prefix='qftfs-test-', dir=base)
    os.chmod(d, 0o755)
    yield d
    for m in sorted(util.mounts_under(d), key=lambda m: -len(m['mountpoint'])):
        subprocess.run(['umount', '-l', m['mountpoint']],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def wire_server(tmp_path):
    """Factory: wire_server(root, hello=True, wrapper=(), extra_env=None)
    -> wire.Server: qftfs-server --stdio of the build tree, driven by
    tests/wire.py (`wrapper` words go before its command line).  At
    teardown every server must exit cleanly and log no crash."""
    exe = util.server_bin(util.build_dir())
    if not os.access(exe, os.X_OK):
        pytest.fail('not built: %s' % exe, pytrace=False)
    servers = []

    def make(root, hello=True, wrapper=(), extra_env=None):
        env = dict(os.environ)
        if util.is_asan_build(util.build_dir()):
            env = util.sanitizer_env(env)
        env.pop('QFTFS_SCAN_LIMITS', None)
        env.update(extra_env or {})
        log = str(tmp_path / ('server%d.log' % len(servers)))
        s = wire.Server(exe, str(root), log, env=env, wrapper=wrapper,
                        timeout=30)
        servers.append(s)
        if hello:
            r = s.hello()
            assert r.status == 0, 'HELLO failed: %r\n%s' % (r, s.log())
        return s

    yield make
    # A server that refused the HELLO exits 1, as it should (s.refused).
    problems = util.wire_server_problems(servers, check_exit=True)
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)
