# SPDX-License-Identifier: MIT
"""Helpers shared by the qftfs integration tests.

Nothing here is a pytest fixture (those live in conftest.py); this module
knows how to find the binaries, start and stop a mount, run a command with a
deadline, and read what the daemons wrote to their logs.

Every subprocess gets a timeout, and every mount is registered in
ACTIVE_MOUNTS so that the per-test watchdog (conftest.py) can abort a hung
FUSE connection: a process blocked on a FUSE request does not see ordinary
signals, so an alarm alone cannot unstick a test.
"""

import ctypes
import ctypes.util
import errno
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import threading
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), '..'))

MiB = 1 << 20
GiB = 1 << 30

# Markers of a sanitizer report or a crash in a daemon's log.  Any of them
# fails the test that owned the daemon, whatever the test itself saw.
BAD_LOG_PATTERNS = (
    'ERROR: AddressSanitizer',
    'runtime error:',
    'LeakSanitizer',
    'UndefinedBehaviorSanitizer',
    'AddressSanitizer:DEADLYSIGNAL',
    'Segmentation fault',
    'stack smashing detected',
    'double free',
    'malloc(): ',
    'free(): ',
)


def fast_mode():
    """QFTFS_TEST_FAST=1 skips the slowest cases; CI runs everything."""
    return os.environ.get('QFTFS_TEST_FAST', '') not in ('', '0', 'no')


def timeout_scale():
    try:
        return max(1.0, float(os.environ.get('QFTFS_TEST_TIMEOUT_SCALE', '1')))
    except ValueError:
        return 1.0


def build_dir():
    return os.path.realpath(os.environ.get('QFTFS_BUILD',
                                           os.path.join(REPO, 'build')))


def asan_build_dir():
    return os.path.realpath(os.environ.get('QFTFS_BUILD_ASAN',
                                           os.path.join(REPO, 'build-asan')))


def client_bin(build):
    return os.path.join(build, 'fuse', 'qftfs')


def server_bin(build):
    return os.path.join(build, 'server', 'qftfs-server')


def is_asan_build(build):
    """True if the build tree was configured with a sanitizer."""
    try:
        with open(os.path.join(build, 'meson-info', 'intro-buildoptions.json')) as f:
            text = f.read()
    except OSError:
        return False
    m = re.search(r'"name":\s*"b_sanitize".*?"value":\s*"([^"]*)"', text, re.S)
    return bool(m and m.group(1) not in ('', 'none'))


def sanitizer_env(env=None):
    """Environment for sanitizer builds: report, do not abort silently."""
    env = dict(os.environ if env is None else env)
    env.setdefault('ASAN_OPTIONS',
                   'detect_leaks=1:abort_on_error=0:halt_on_error=1:'
                   'detect_stack_use_after_return=1:strict_string_checks=1')
    env.setdefault('UBSAN_OPTIONS', 'print_stacktrace=1:halt_on_error=0')
    env.setdefault('LSAN_OPTIONS', 'exitcode=23')
    return env


def fuse_unavailable_reason():
    """Why FUSE mounts cannot run here, or None if they can."""
    if not os.path.exists('/dev/fuse'):
        return '/dev/fuse is missing (FUSE kernel module not loaded?)'
    if shutil.which('fusermount3') is None:
        return 'fusermount3 is missing (install fuse3)'
    if os.geteuid() != 0:
        fm = shutil.which('fusermount3')
        if not os.stat(fm).st_mode & stat.S_ISUID:
            return 'not root and fusermount3 is not setuid'
        try:
            os.close(os.open('/dev/fuse', os.O_RDWR))
        except OSError as e:
            return 'cannot open /dev/fuse: %s' % e.strerror
    return None


# ---------------------------------------------------------------------------
# Running commands

class CommandTimeout(AssertionError):
    pass


def run(cmd, timeout=300, check=False, input=None, cwd=None, env=None,
        text=True):
    """subprocess.run with a mandatory deadline; output captured.

    On timeout the child is killed and the test fails with its command line,
    rather than hanging the whole suite.
    """
    timeout *= timeout_scale()
    try:
        r = subprocess.run(cmd, input=input, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, cwd=cwd, env=env,
                           timeout=timeout, text=text,
                           stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise CommandTimeout('command timed out after %.0fs: %r\nstdout: %s\nstderr: %s'
                             % (timeout, cmd, e.stdout, e.stderr)) from None
    if check and r.returncode != 0:
        raise AssertionError('command failed (exit %d): %r\nstdout: %s\nstderr: %s'
                             % (r.returncode, cmd, r.stdout[-4000:],
                                r.stderr[-4000:]))
    return r


def sh(script, **kw):
    """Runs a bash script (set -e) with run()."""
    return run(['bash', '-euo', 'pipefail', '-c', script], **kw)


# ---------------------------------------------------------------------------
# /proc helpers

def _unescape_mount_field(s):
    # /proc/*/mountinfo escapes space, tab, newline and backslash as \ooo.
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), s)


def mountinfo():
    """Parsed /proc/self/mountinfo: list of dicts."""
    out = []
    with open('/proc/self/mountinfo') as f:
        for line in f:
            left, _, right = line.rstrip('\n').partition(' - ')
            lf = left.split(' ')
            rf = right.split(' ')
            if len(lf) < 6 or len(rf) < 2:
                continue
            major, minor = lf[2].split(':')
            out.append({
                'dev': (int(major), int(minor)),
                'mountpoint': _unescape_mount_field(lf[4]),
                'fstype': rf[0],
                'source': _unescape_mount_field(rf[1]),
                'options': lf[5],
            })
    return out


def find_mount(path):
    """The last (topmost) mount entry at exactly `path`, or None."""
    path = os.path.realpath(path)
    hit = None
    for m in mountinfo():
        if m['mountpoint'] == path:
            hit = m
    return hit


def mounts_under(path):
    path = os.path.realpath(path)
    return [m for m in mountinfo()
            if m['mountpoint'] == path or m['mountpoint'].startswith(path + '/')]


def proc_children(pid):
    """Pids whose parent is `pid` (scans /proc; no CONFIG_PROC_CHILDREN)."""
    kids = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % d) as f:
                st = f.read()
        except OSError:
            continue
        # comm may contain spaces and parentheses: split after the last ')'.
        fields = st[st.rfind(')') + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            kids.append(int(d))
    return kids


def proc_stopped(pid):
    """Whether process `pid` is stopped (a fault hook's SIGSTOP)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'T'
    except OSError:
        return False


def proc_alive(pid, cmd_hint=None):
    """True if `pid` exists, is not a zombie and (optionally) still runs
    a command line containing cmd_hint."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            st = f.read()
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            cmdline = f.read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:
        return False
    if st[st.rfind(')') + 2:].split()[0] in ('Z', 'X'):
        return False
    return cmd_hint is None or cmd_hint in cmdline


def find_processes(substring):
    """Pids whose command line contains `substring`."""
    pids = []
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open('/proc/%s/cmdline' % d, 'rb') as f:
                cmdline = f.read().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
            continue
        if substring in cmdline and proc_alive(int(d)):
            pids.append(int(d))
    return pids


def fuse_abort(dev):
    """Aborts the FUSE connection of device `dev` (major, minor): every
    request in flight fails with ENOTCONN, which unsticks blocked callers."""
    major, minor = dev
    conn = '/sys/fs/fuse/connections/%d' % ((major << 20) | minor)
    try:
        with open(os.path.join(conn, 'abort'), 'w') as f:
            f.write('1')
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# Mounts

ACTIVE_MOUNTS = set()
_active_lock = threading.Lock()


class MountError(AssertionError):
    pass


def read_log(path):
    try:
        with open(path, 'rb') as f:
            return f.read().decode('utf-8', errors='replace')
    except OSError:
        return ''


def log_problems(text):
    """Lines of `text` that show a sanitizer report or a crash."""
    hits = []
    for line in text.splitlines():
        if any(p in line for p in BAD_LOG_PATTERNS):
            hits.append(line)
    return hits


def tail(text, n=60):
    lines = text.splitlines()
    return '\n'.join(lines[-n:])


def wire_server_problems(servers, check_exit=False):
    """What went wrong with wire.Servers (tests/wire.py) at a fixture's
    teardown, as lines for pytest.fail: each one still running is finished
    (with check_exit, a non-zero exit is a problem unless it refused the
    HELLO on purpose, s.refused); none may log a crash or die of a
    signal."""
    problems = []
    for s in servers:
        if s.proc.poll() is None:
            rc = s.finish()
            if (check_exit and rc not in (0, None)
                    and not getattr(s, 'refused', False)):
                problems.append('%s exited %r' % (s.log_path, rc))
        else:
            s.sock.close()
            s.logf.close()
        bad = log_problems(s.log())
        if bad:
            problems.append('%s:\n%s' % (s.log_path, '\n'.join(bad[:20])))
        if s.proc.returncode is not None and s.proc.returncode < 0:
            problems.append('server killed by signal %d\n%s'
                            % (-s.proc.returncode, tail(s.log())))
    return problems


def thread_stacks(pid):
    """Every thread's stack of a stuck process, for the failure report
    (gdb from Debian's package; a note when it cannot attach)."""
    if not shutil.which('gdb'):
        return 'no gdb: no stacks of the stuck process'
    try:
        r = subprocess.run(['gdb', '-p', str(pid), '-batch', '-nx',
                            '-ex', 'thread apply all bt'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 'gdb failed on %d: %s' % (pid, e)
    lines = [l for l in r.stdout.splitlines()
             if l.startswith(('Thread ', '#'))]
    return 'stacks of %d:\n  ' % pid + '\n  '.join(lines[:200])


class Mount:
    """One running `qftfs -f` and its mount.

    Unpacks as (src, mnt).  stop() always unmounts, waits for the client and
    its server to exit, and raises MountError if anything went wrong: a
    failed unmount, a client that did not exit or exited non-zero, a server
    left behind, or a sanitizer/crash report in the log.
    """

    def __init__(self, src, mnt, build=None, opts=(), server=None,
                 log_path=None, env=None, client=None, extra_args=(),
                 expect_rc=0):
        self.src = src
        self.mnt = mnt
        self.build = build or build_dir()
        self.client = client or client_bin(self.build)
        if server is None:
            server = server_bin(self.build)
        self.server = server
        self.opts = list(opts)
        self.extra_args = list(extra_args)
        self.log_path = log_path or (os.path.realpath(mnt) + '.log')
        self.env = env
        self.expect_rc = expect_rc
        self.proc = None
        self.dev = None
        self.server_pids = []
        self.stopped = False
        self.aborted = False
        self.logf = None

    def __iter__(self):
        return iter((self.src, self.mnt))

    def cmdline(self):
        cmd = [self.client, '-f']
        if self.server:
            cmd += ['-o', 'server=' + self.server]
        for o in self.opts:
            cmd += ['-o', o]
        cmd += self.extra_args
        cmd += [self.src, self.mnt]
        return cmd

    def log(self):
        return read_log(self.log_path)

    def start(self, timeout=30):
        for b in (self.client,):
            if not os.access(b, os.X_OK):
                raise MountError('client binary %s is missing (not built?)' % b)
        # The server command may carry a wrapper before it and options
        # after it: the binary is the word naming qftfs-server.
        words = self.server.split(' ') if self.server else []
        server_exe = next((w for w in words if os.path.basename(w) == 'qftfs-server'),
                          words[-1] if words else None)
        if server_exe and not os.access(server_exe, os.X_OK):
            raise MountError('server binary %s is missing (not built?)' % server_exe)
        os.makedirs(self.mnt, exist_ok=True)
        env = self.env
        if env is None:
            env = sanitizer_env() if is_asan_build(self.build) else dict(os.environ)
        self.logf = open(self.log_path, 'ab')
        self.logf.write(('$ %s\n' % ' '.join(self.cmdline())).encode())
        self.logf.flush()
        self.proc = subprocess.Popen(self.cmdline(), stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=env)
        with _active_lock:
            ACTIVE_MOUNTS.add(self)
        deadline = time.monotonic() + timeout * timeout_scale()
        while True:
            m = find_mount(self.mnt)
            if m and m['fstype'] == 'fuse.qftfs':
                self.dev = m['dev']
                break
            if self.proc.poll() is not None:
                self._forget()
                self.stopped = True
                raise MountError('qftfs exited with %s before the mount was '
                                 'ready; log:\n%s'
                                 % (self.proc.returncode, tail(self.log())))
            if time.monotonic() > deadline:
                self.abort()
                self._forget()
                self.stopped = True
                raise MountError('mount of %s did not appear within %ds; '
                                 'log:\n%s' % (self.mnt, timeout, tail(self.log())))
            time.sleep(0.02)
        # The server is the client's child (setpriv execs into it).
        self.server_pids = [p for p in proc_children(self.proc.pid)
                            if proc_alive(p)]
        return self

    def _forget(self):
        with _active_lock:
            ACTIVE_MOUNTS.discard(self)
        if self.logf:
            self.logf.close()
            self.logf = None

    def abort(self):
        """Last resort, safe from any thread: kill the connection and the
        client so nothing stays blocked on this mount."""
        self.aborted = True
        if self.dev:
            fuse_abort(self.dev)
        subprocess.run(['fusermount3', '-u', '-z', self.mnt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        for p in self.server_pids:
            if proc_alive(p, '--root'):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass

    def is_mounted(self):
        m = find_mount(self.mnt)
        return bool(m and m['fstype'] == 'fuse.qftfs' and m['dev'] == self.dev)

    def stop(self):
        """Unmounts and checks the aftermath; returns the list of problems
        (empty when clean).  Never raises before cleanup is complete."""
        if self.stopped or self.proc is None:
            return []
        self.stopped = True
        problems = []
        try:
            if self.is_mounted():
                r = None
                for _ in range(20):
                    r = subprocess.run(['fusermount3', '-u', self.mnt],
                                       stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True,
                                       timeout=30)
                    if r.returncode == 0 or 'busy' not in r.stdout:
                        break
                    time.sleep(0.25)
                if r.returncode != 0:
                    problems.append('fusermount3 -u failed: %s' % r.stdout.strip())
                    subprocess.run(['fusermount3', '-u', '-z', self.mnt],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=30)
            try:
                rc = self.proc.wait(timeout=30 * timeout_scale())
            except subprocess.TimeoutExpired:
                problems.append('qftfs did not exit within 30s of the unmount')
                problems.append(thread_stacks(self.proc.pid))
                self.abort()
                rc = self.proc.wait(timeout=30)
            if rc < 0 and self.aborted:
                problems.append('qftfs was killed after the mount was aborted')
            elif rc < 0:
                problems.append('qftfs was killed by signal %d' % -rc)
            elif self.expect_rc is not None and rc != self.expect_rc:
                problems.append('qftfs exited with status %d' % rc)
            deadline = time.monotonic() + 10 * timeout_scale()
            left = [p for p in self.server_pids if proc_alive(p)]
            while left and time.monotonic() < deadline:
                time.sleep(0.05)
                left = [p for p in left if proc_alive(p)]
            if left:
                problems.append('server process(es) %s still running after '
                                'the client exited' % left)
                for p in left:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
        finally:
            self._forget()
        bad = log_problems(self.log())
        if bad:
            problems.append('sanitizer report or crash in the daemon log:\n  '
                            + '\n  '.join(bad[:20]))
        if problems:
            problems.append('log %s (tail):\n%s' % (self.log_path, tail(self.log())))
        return problems


def abort_all_mounts():
    with _active_lock:
        mounts = list(ACTIVE_MOUNTS)
    for m in mounts:
        try:
            m.abort()
        except Exception:  # noqa: BLE001 - best effort from the watchdog
            pass


# ---------------------------------------------------------------------------
# Files and comparisons

def fault_server(folder, build, var, first=''):
    """A server command for `-o server=` (a script in `folder`) that sets
    the fault hook `var` (QFTFS_FAULT_...) to what the file it returns
    holds when the server starts (`first` to begin with), or leaves it
    unset while the file is empty; so a test can change what the next
    server does, and pass values -o server= could not (commas).  Skips
    the test where the server was built without fault injection.
    Returns (command, file)."""
    import pytest

    why = fault_injection_reason(build)
    if why:
        pytest.skip(why)
    name = var.lower()
    value = os.path.join(str(folder), name)
    with open(value, 'w') as f:
        f.write(first)
    wrap = os.path.join(str(folder), name + '-server')
    with open(wrap, 'w') as f:
        f.write('#!/bin/sh\nv=$(cat %s)\nif [ -n "$v" ]; then %s=$v; '
                'export %s; fi\nexec %s "$@"\n'
                % (value, var, var, server_bin(build)))
    os.chmod(wrap, 0o755)
    return wrap, value


def until_visible(path, timeout=5.0):
    """Waits until `path` on a mount exists.  A name made on the server
    behind the mount's back is seen through the mount once the server's
    change notification ends the directory's lease (docs/architecture.md,
    the directory cache): within moments, not at once.  Fails the test
    after `timeout` seconds (scaled for a slow build)."""
    deadline = time.monotonic() + timeout * timeout_scale()
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError('%s not visible through the mount after '
                                 '%.0f s' % (path, timeout))
        time.sleep(0.01)


def sha256_file(path, bufsize=4 * MiB):
    h = hashlib.sha256()
    with open(path, 'rb', buffering=0) as f:
        while True:
            b = f.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def write_random_file(path, size, seed=None):
    """Writes `size` pseudo-random bytes, every MiB different, and returns
    the sha256 of the content."""
    import random
    rnd = random.Random(seed if seed is not None else size)
    h = hashlib.sha256()
    with open(path, 'wb') as f:
        left = size
        while left:
            n = min(left, 4 * MiB)
            b = rnd.randbytes(n)
            f.write(b)
            h.update(b)
            left -= n
    return h.hexdigest()


def same_stat(a, b, fields=('st_mode', 'st_nlink', 'st_uid', 'st_gid',
                            'st_size', 'st_mtime_ns')):
    """Differences between two stat results in the given fields."""
    return {f: (getattr(a, f), getattr(b, f)) for f in fields
            if getattr(a, f) != getattr(b, f)}


def tree_snapshot(root):
    """Names directly under root (for 'nothing new appeared' checks)."""
    try:
        return sorted(os.listdir(root))
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------------------
# libc calls Python does not wrap

_libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                            ctypes.c_char_p, ctypes.c_uint]
_libc.renameat2.restype = ctypes.c_int
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_int64]
_libc.fallocate.restype = ctypes.c_int
_libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                           ctypes.c_size_t]
_libc.getxattr.restype = ctypes.c_ssize_t
_libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
_libc.listxattr.restype = ctypes.c_ssize_t

AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10


def _check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, '%s: %s' % (what, os.strerror(e)))
    return ret


def renameat2(old, new, flags):
    return _check(_libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD,
                                  os.fsencode(new), flags), 'renameat2')


def fallocate(fd, mode, offset, length):
    return _check(_libc.fallocate(fd, mode, offset, length), 'fallocate')


def getxattr_raw(path, name, size):
    """getxattr(2) with a caller-chosen buffer size; returns bytes."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(_libc.getxattr(os.fsencode(path), os.fsencode(name),
                              buf if size else None, size), 'getxattr')
    return buf.raw[:n] if size else n


def listxattr_raw(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(_libc.listxattr(os.fsencode(path), buf if size else None, size),
               'listxattr')
    return buf.raw[:n] if size else n


class _Dirent(ctypes.Structure):
    _fields_ = [('d_ino', ctypes.c_uint64), ('d_off', ctypes.c_int64),
                ('d_reclen', ctypes.c_ushort), ('d_type', ctypes.c_ubyte),
                ('d_name', ctypes.c_char * 256)]


_libc.opendir.argtypes = [ctypes.c_char_p]
_libc.opendir.restype = ctypes.c_void_p
_libc.readdir64.argtypes = [ctypes.c_void_p]
_libc.readdir64.restype = ctypes.POINTER(_Dirent)
_libc.closedir.argtypes = [ctypes.c_void_p]

DT_UNKNOWN, DT_FIFO, DT_CHR, DT_DIR, DT_BLK, DT_REG, DT_LNK, DT_SOCK = \
    0, 1, 2, 4, 6, 8, 10, 12


def raw_dirents(path):
    """{name: d_type} exactly as readdir(3) returns them (os.scandir hides
    whether d_type was filled in, because it falls back to lstat)."""
    d = _libc.opendir(os.fsencode(path))
    if not d:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    out = {}
    try:
        while True:
            ctypes.set_errno(0)
            ent = _libc.readdir64(d)
            if not ent:
                e = ctypes.get_errno()
                if e:
                    raise OSError(e, os.strerror(e), path)
                break
            out[os.fsdecode(ent.contents.d_name)] = ent.contents.d_type
    finally:
        _libc.closedir(d)
    return out


def expect_errno(err, fn, *args, **kw):
    """Calls fn and asserts it fails with OSError `err` (exactly)."""
    try:
        fn(*args, **kw)
    except OSError as e:
        assert e.errno == err, ('%s%r: expected %s, got %s (%s)'
                                % (getattr(fn, '__name__', fn), args,
                                   errno.errorcode[err],
                                   errno.errorcode.get(e.errno, e.errno), e))
        return e
    raise AssertionError('%s%r: expected %s, but it succeeded'
                         % (getattr(fn, '__name__', fn), args,
                            errno.errorcode[err]))


def fault_injection_reason(build):
    """None if the server was built with fault injection, else why not."""
    r = run([server_bin(build), '--version'], timeout=30)
    if 'fault-injection' in r.stdout + r.stderr:
        return None
    return ('qftfs-server in %s was built without fault injection (its '
            '--version does not say "fault-injection"); configure with '
            'meson -Dfault_injection=true' % build)


# ---------------------------------------------------------------------------
# Cross-built servers (scripts/cross-server.sh; tests/test_cross.py,
# tests/test_install.py)

CROSS_ARCHES = ('aarch64', 'armhf', 'armel', 'x86_64')
# The qemu-user emulator and a CPU of the boards each build is for: armel
# runs on the ARMv6 of a Raspberry Pi Zero, armhf on a Cortex-A7.
CROSS_QEMU = {
    'aarch64': ('qemu-aarch64-static', 'cortex-a53'),
    'armhf': ('qemu-arm-static', 'cortex-a7'),
    'armel': ('qemu-arm-static', 'arm1176'),
}


def cross_out():
    return os.environ.get('QFTFS_CROSS_OUT') or os.path.join(REPO, 'build-cross')


_cross_built = {}


def cross_server(arch):
    """Builds (or finds up to date) the self-contained server for `arch`
    with scripts/cross-server.sh: (path, None), or (None, reason) when the
    toolchain cannot be installed here (its exit status 77).  A failed
    build raises."""
    if arch not in _cross_built:
        r = run(['bash', os.path.join(REPO, 'scripts', 'cross-server.sh'), arch],
                timeout=1800, env=dict(os.environ, QFTFS_CROSS_OUT=cross_out()))
        if r.returncode == 77:
            _cross_built[arch] = (None, tail(r.stderr, 5).strip())
        elif r.returncode != 0:
            raise AssertionError('cross-server.sh %s failed (%d):\n%s'
                                 % (arch, r.returncode, tail(r.stderr)))
        else:
            _cross_built[arch] = (r.stdout.strip().splitlines()[-1], None)
    return _cross_built[arch]


def qemu_command(arch):
    """The words that run an `arch` binary here: [] for the machine's own,
    else qemu-user with a board's CPU; None when qemu-user is missing."""
    if arch == os.uname().machine:
        return []
    emu, cpu = CROSS_QEMU[arch]
    path = shutil.which(emu)
    return [path, '-cpu', cpu] if path else None


def busybox_dir(path):
    """A directory of links to every busybox applet (sh, dd, od, ...), for
    a PATH with busybox's tools alone: `path`, or None when busybox is
    missing."""
    bb = shutil.which('busybox')
    if not bb:
        return None
    os.makedirs(path)
    run([bb, '--install', '-s', path], timeout=60, check=True)
    return path
