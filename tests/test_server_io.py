# SPDX-License-Identifier: MIT
"""The server's file I/O paths: io_uring and pread/pwrite (--io=).

Most cases run on both backends, speaking the wire protocol to
`qftfs-server --stdio` directly (tests/wire.py), so that requests can be
pipelined exactly as a test needs:

- pipelined WRITEs (overlapping ones too), then pipelined READs, return the
  exact bytes; requests take effect in the order received, across handles
  of one file and where a WRITE beyond a READ moves end of file;
- with a fault-injection build (-Dfault_injection=true), a write error
  reaches the WRITE's reply and the next FLUSH as EIO, a read error is an
  EIO reply (never a short read), and a failing fdatasync fails FLUSH;
- an OPEN with a length, sent right behind pipelined WRITEs through another
  handle, returns the data as those WRITEs left it; a FLUSH's attributes
  are the file's after every WRITE before it; with fault injection, a
  read error during an OPEN leaves the open done and the first data out;
- a client that stops reading replies while it floods the server with
  requests does not make the server's memory grow; open directories are
  capped;
- io_uring refused (a seccomp filter, as in containers): --io=auto falls
  back with exactly one log line, --io=uring exits with a clear error;
- a --session server whose client's host vanished exits after ~60 s
  (keepalive, TCP_USER_TIMEOUT) with one log line;
- --io=bogus is a usage error; --io wins over QFTFS_SERVER_IO, which wins
  over the default.

The uring cases skip when this kernel refuses io_uring (the server says so
on --io=uring); the fault cases skip, loudly, when the server was built
without fault injection.
"""

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

import pytest

import util
import wire

MiB = 1 << 20
BACKENDS = ['uring', 'posix']
# The server's own RSS while it serves a flood from a client that reads no
# replies: its buffer pool (8 x 1 MiB), a reply, the binary and libc.  A
# server that queued replies or requests would pass this at once.
RSS_BOUND_KIB = 48 * 1024


def _server_exe():
    exe = util.server_bin(util.build_dir())
    if not os.access(exe, os.X_OK):
        pytest.fail('not built: %s' % exe, pytrace=False)
    return exe


_uring_refused = {}


def _uring_refusal(exe, tmp):
    """Why this kernel refuses io_uring to the server, or None."""
    if exe not in _uring_refused:
        r = subprocess.run([exe, '--stdio', '--root', str(tmp), '--io=uring'],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        err = r.stderr.strip()
        _uring_refused[exe] = err if 'io_uring is not available' in err else None
    return _uring_refused[exe]


def _fault_support(exe):
    r = subprocess.run([exe, '--version'], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    return 'fault-injection' in r.stdout


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    if request.param == 'uring':
        why = _uring_refusal(_server_exe(), tmp_path)
        if why:
            pytest.skip('io_uring refused by this kernel: %s' % why)
    return request.param


@pytest.fixture
def start(tmp_path, backend):
    """Factory: start(root, fault=None) -> wire.Server after HELLO, on the
    backend under test.  At teardown every server must exit cleanly and
    log no crash."""
    exe = _server_exe()
    servers = []

    def make(root, fault=None, extra_env=None):
        env = dict(os.environ)
        if util.is_asan_build(util.build_dir()):
            env = util.sanitizer_env(env)
        env.pop('QFTFS_SERVER_IO', None)
        env.pop('QFTFS_FAULT', None)
        if fault:
            env['QFTFS_FAULT'] = fault
        env.update(extra_env or {})
        log = str(tmp_path / ('server%d.log' % len(servers)))
        s = _IoServer(exe, str(root), log, env, backend)
        servers.append(s)
        r = s.hello()
        assert r.status == 0, 'HELLO failed: %r\n%s' % (r, s.log())
        return s

    yield make
    problems = util.wire_server_problems(servers)
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)


class _IoServer(wire.Server):
    """wire.Server with --io=BACKEND on the server's command line."""

    def __init__(self, exe, root, log_path, env, io):
        self.sock, child = socket.socketpair()
        self.log_path = log_path
        self.logf = open(log_path, 'ab')
        self.proc = subprocess.Popen([exe, '--stdio', '--root', root,
                                      '--io=' + io],
                                     stdin=child, stdout=child,
                                     stderr=self.logf, env=env)
        child.close()
        self.sock.settimeout(30)
        self.next_id = 1


def _pattern(seed, n):
    return random.Random(seed).randbytes(n)


def _collect(srv, ids):
    """Replies to `ids` (sent already), in any order: {id: Reply}."""
    want, got = set(ids), {}
    while want:
        r = srv.recv()
        assert r is not None, 'server closed the connection\n%s' % srv.log()
        assert r.id in want, 'unexpected reply %r' % r
        want.discard(r.id)
        got[r.id] = r
    return got


def _pipeline(srv, reqs):
    """Sends every (op, fields) of `reqs` back to back from a thread while
    this one reads the replies, as a real client does (a client that
    stops reading would deadlock against the server's blocking sends).
    Returns the replies in request order."""
    ids = list(range(srv.next_id, srv.next_id + len(reqs)))
    srv.next_id += len(reqs)
    frames = [wire.encode_request(op, rid, **f)
              for rid, (op, f) in zip(ids, reqs)]
    err = []

    def sender():
        try:
            for fr in frames:
                srv.sock.sendall(fr)
        except OSError as e:
            err.append(e)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        got = _collect(srv, ids)
    finally:
        t.join(60)
    assert not err, 'sending failed: %r' % err
    for rid, (op, _) in zip(ids, reqs):
        assert got[rid].opname == op, got[rid]
    return [got[i] for i in ids]


def _create(srv, handle, name, flags=wire.O_RDWR):
    r = srv.call('CREATE', handle=handle, path='', name=name,
                 opflags=flags, mode=0o644)
    assert r.status == 0, r
    return r


# ---------------------------------------------------------------------------
# Data integrity with pipelining

def test_pipelined_writes_read_back(start, tmp_path):
    """24 WRITEs of random sizes and overlaps sent back to back, then READs
    sent back to back: every byte as the last writer left it, and an
    FSTAT sent right after the WRITEs sees the final size."""
    root = tmp_path / 'root'
    root.mkdir()
    srv = start(root)
    _create(srv, 1, 'f')
    rng = random.Random(7)
    model = bytearray()
    reqs = []
    for i in range(24):
        size = rng.choice([1, 4096, 65536, MiB - 1, MiB, rng.randrange(1, MiB)])
        # Mostly sequential, sometimes back over what is there.
        off = len(model) if rng.random() < 0.7 or not model else \
            rng.randrange(0, len(model))
        data = _pattern(i, size)
        if off + size > len(model):
            model.extend(b'\0' * (off + size - len(model)))
        model[off:off + size] = data
        reqs.append(('WRITE', dict(handle=1, offset=off, data=data)))
    reqs.append(('FSTAT', dict(handle=1)))
    got = _pipeline(srv, reqs)
    assert all(r.status == 0 for r in got), [r for r in got if r.status]
    assert got[-1]['attr'].size == len(model)
    got = _pipeline(srv, [('READ', dict(handle=1, offset=o, length=MiB))
                          for o in range(0, len(model) + MiB, MiB)])
    back = b''.join(r['data'] for r in got)
    assert len(back) == len(model)
    assert back == bytes(model), 'data read back differs'
    r = srv.call('FLUSH', handle=1)
    assert r.status == 0, r
    srv.call('CLOSE', handle=1)
    with open(root / 'f', 'rb') as f:
        assert f.read() == bytes(model)


def test_syncfs_after_pipelined_writes(start, tmp_path):
    """SYNCFS (qftfs --sync, a commit=async unmount) is answered in order,
    after the WRITEs and the FLUSH without fdatasync sent before it."""
    root = tmp_path / 'root'
    root.mkdir()
    srv = start(root)
    _create(srv, 1, 'f')
    data = _pattern(3, 3 * MiB // 2)
    got = _pipeline(srv, [('WRITE', dict(handle=1, offset=0, data=data[:MiB])),
                          ('WRITE', dict(handle=1, offset=MiB,
                                         data=data[MiB:])),
                          ('FLUSH', dict(handle=1, opflags=1)),
                          ('SYNCFS', {})])
    assert [r.status for r in got] == [0, 0, 0, 0], got
    srv.call('CLOSE', handle=1)
    with open(root / 'f', 'rb') as f:
        assert f.read() == data


def test_order_across_handles(start, tmp_path):
    """A READ through a second handle of the same file, sent right after a
    WRITE through the first, sees that write; a WRITE after a READ does
    not change what the READ returns."""
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'g').write_bytes(b'A' * (2 * MiB))
    srv = start(root)
    assert srv.call('OPEN', handle=1, path='g', opflags=wire.O_RDWR).status == 0
    assert srv.call('OPEN', handle=2, path='g', opflags=wire.O_RDONLY).status == 0
    for rnd in range(5):
        fill = bytes([ord('B') + rnd]) * MiB
        before = bytes([ord('B') + rnd - 1]) * MiB if rnd else b'A' * MiB
        r1, w, r2 = _pipeline(srv, [
            ('READ', dict(handle=2, offset=MiB, length=MiB)),
            ('WRITE', dict(handle=1, offset=MiB, data=fill)),
            ('READ', dict(handle=2, offset=MiB, length=MiB))])
        assert w.status == 0, w
        assert r1['data'] == before, 'READ saw a later WRITE'
        assert r2['data'] == fill, 'READ missed an earlier WRITE'
    for h in (1, 2):
        srv.call('CLOSE', handle=h)


def test_end_of_file_moves_in_order(start, tmp_path):
    """A WRITE past a READ's range still decides what the READ returns,
    since it moves end of file: a READ of a hole after a WRITE beyond it
    gets zeros, a READ past end of file before a WRITE beyond it gets
    nothing, however the engine overlaps them."""
    root = tmp_path / 'root'
    root.mkdir()
    srv = start(root)
    _create(srv, 1, 'h')
    for rnd in range(8):
        base = rnd * 8 * MiB
        got = _pipeline(srv, [
            ('READ', dict(handle=1, offset=base + 4 * MiB, length=MiB)),
            ('WRITE', dict(handle=1, offset=base + 6 * MiB,
                           data=b'w' * MiB)),
            ('READ', dict(handle=1, offset=base + MiB, length=MiB)),
            ('READ', dict(handle=1, offset=base + 7 * MiB, length=MiB))])
        assert all(r.status == 0 for r in got), got
        assert got[0]['data'] == b'', 'READ saw a later WRITE move EOF'
        assert got[2]['data'] == b'\0' * MiB, \
            'READ of a hole missed an earlier WRITE beyond it'
        assert got[3]['data'] == b'', 'READ past the end'


def test_read_past_end_and_handle_reuse(start, tmp_path):
    """Short READs only at end of file; a handle number closed and reused
    for another file while pipelined reads the new file."""
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'a').write_bytes(b'a' * 1000)
    (root / 'b').write_bytes(b'b' * 3000)
    srv = start(root)
    got = _pipeline(srv, [
        ('OPEN', dict(handle=5, path='a', opflags=wire.O_RDONLY)),
        ('READ', dict(handle=5, offset=0, length=MiB)),
        ('READ', dict(handle=5, offset=1000, length=10)),
        ('CLOSE', dict(handle=5)),
        ('OPEN', dict(handle=5, path='b', opflags=wire.O_RDONLY)),
        ('READ', dict(handle=5, offset=0, length=MiB)),
        ('CLOSE', dict(handle=5))])
    assert all(r.status == 0 for r in got), got
    assert got[1]['data'] == b'a' * 1000
    assert got[2]['data'] == b''
    assert got[5]['data'] == b'b' * 3000


def test_open_first_data_sees_earlier_writes(start, tmp_path):
    """OPEN is not queued in the engine: its first data is read after
    every WRITE received before it (another handle's, still in flight),
    and before every WRITE after it."""
    root = tmp_path / 'root'
    root.mkdir()
    srv = start(root)
    _create(srv, 1, 'o')
    for rnd in range(4):
        a, b = _pattern(2 * rnd, MiB), _pattern(2 * rnd + 1, MiB)
        got = _pipeline(srv, [
            ('WRITE', dict(handle=1, offset=0, data=a)),
            ('WRITE', dict(handle=1, offset=MiB, data=a)),
            ('OPEN', dict(handle=2, path='o', opflags=wire.O_RDONLY,
                          length=MiB)),
            ('WRITE', dict(handle=1, offset=0, data=b)),
            ('READ', dict(handle=2, offset=0, length=MiB)),
            ('FLUSH', dict(handle=1)),
            ('CLOSE', dict(handle=2))])
        assert all(r.status == 0 for r in got), got
        op = got[2]
        assert op['opflags'] == wire.OPEN_DATA, op
        assert op['data'] == a, 'OPEN data is not what the WRITEs before it left'
        assert op['attr'].size == 2 * MiB
        assert got[4]['data'] == b, 'READ missed the WRITE after the OPEN'
        st = os.stat(root / 'o')
        fa = got[5]['attr']
        assert (fa.size, fa.ino, fa.mtime) == (
            st.st_size, st.st_ino,
            (st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9)), \
            'FLUSH attributes are not the file\'s after its writes'
    srv.call('CLOSE', handle=1)


# ---------------------------------------------------------------------------
# Injected faults

@pytest.fixture
def faults():
    if not _fault_support(_server_exe()):
        pytest.skip('SKIPPING FAULT CASES: %s was built without '
                    '-Dfault_injection=true (its --version has no '
                    '"fault-injection" line)' % _server_exe())


FAULT_AT = 3 * MiB + 12345


def test_write_error_reaches_write_and_flush(start, tmp_path, faults):
    root = tmp_path / 'root'
    root.mkdir()
    srv = start(root, fault='write_eio_at=%d' % FAULT_AT)
    _create(srv, 1, 'w')
    got = _pipeline(srv, [('WRITE', dict(handle=1, offset=o,
                                         data=_pattern(o, MiB)))
                          for o in range(0, 6 * MiB, MiB)] +
                    [('FLUSH', dict(handle=1))])
    writes, fl = got[:-1], got[-1]
    assert [r.err for r in writes] == ['OK'] * 3 + ['EIO'] + ['OK'] * 2, \
        'only the WRITE over the fault must fail: %r' % writes
    assert fl.err == 'EIO', 'FLUSH did not report the failed WRITE: %r' % fl
    # Reported once; the next FLUSH is clean again.
    assert srv.call('FLUSH', handle=1).status == 0
    assert 'fault injection armed' in srv.log()


def test_read_error_is_eio_not_short(start, tmp_path, faults):
    root = tmp_path / 'root'
    root.mkdir()
    data = _pattern(1, 6 * MiB)
    (root / 'r').write_bytes(data)
    srv = start(root, fault='read_eio_at=%d' % FAULT_AT)
    assert srv.call('OPEN', handle=1, path='r', opflags=wire.O_RDONLY).status == 0
    got = _pipeline(srv, [('READ', dict(handle=1, offset=o, length=MiB))
                          for o in range(0, 6 * MiB, MiB)])
    for n, r in enumerate(got):
        if n == 3:
            assert r.err == 'EIO', 'READ over the fault: %r' % r
        else:
            assert r.status == 0, r
            assert r['data'] == data[n * MiB:(n + 1) * MiB]
    # A READ that ends just before the fault is untouched.
    r = srv.call('READ', handle=1, offset=FAULT_AT - 10, length=10)
    assert r.status == 0 and r['data'] == data[FAULT_AT - 10:FAULT_AT]


def test_open_read_error_is_no_data_not_a_failure(start, tmp_path, faults):
    """A read error while fetching OPEN's first data fails nothing: the
    handle is open, the reply carries no data, and READ meets the error."""
    root = tmp_path / 'root'
    root.mkdir()
    data = _pattern(5, 8192)
    (root / 'r').write_bytes(data)
    srv = start(root, fault='read_eio_at=100')
    r = srv.call('OPEN', handle=1, path='r', opflags=wire.O_RDONLY,
                 length=4096)
    assert r.status == 0, r
    assert (r['opflags'], r['data']) == (0, b''), r
    assert r['attr'].size == 8192
    assert srv.call('READ', handle=1, offset=0, length=4096).err == 'EIO'
    # First data that ends before the fault is still sent.
    r = srv.call('OPEN', handle=2, path='r', opflags=wire.O_RDONLY,
                 length=100)
    assert r.status == 0 and r['opflags'] == wire.OPEN_DATA, r
    assert r['data'] == data[:100]


def test_fsync_error_fails_flush(start, tmp_path, faults):
    root = tmp_path / 'root'
    root.mkdir()
    srv = start(root, fault='fsync_eio')
    _create(srv, 1, 's')
    assert srv.call('WRITE', handle=1, offset=0, data=b'x' * 100).status == 0
    assert srv.call('FLUSH', handle=1).err == 'EIO'
    # NOSYNC reports write errors only: there are none.
    assert srv.call('FLUSH', handle=1, opflags=0x1).status == 0


def test_bad_fault_spec_is_refused(tmp_path, faults):
    r = subprocess.run([_server_exe(), '--stdio', '--root', str(tmp_path)],
                       env=dict(os.environ, QFTFS_FAULT='read_eio_at=oops'),
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 2, r
    assert 'QFTFS_FAULT' in r.stderr


# ---------------------------------------------------------------------------
# Memory under a flood from a client that reads no replies

def _rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1])
    return 0


def _flood(srv, make_batch, seconds):
    """Sends batches of frames without reading a reply until the server
    stops taking them for a while (or `seconds` pass).  Returns how many
    frames went out whole, and the unsent rest of the batch that did not
    (make_batch(n) returns (bytes, frames in it))."""
    srv.sock.setblocking(False)
    sent, pending, in_pending = 0, b'', 0
    deadline = time.monotonic() + seconds
    stalled_since = None
    while time.monotonic() < deadline:
        if not pending:
            pending, in_pending = make_batch(sent)
        try:
            n = srv.sock.send(pending)
        except BlockingIOError:
            n = 0
        if n:
            pending = pending[n:]
            if not pending:
                sent += in_pending
            stalled_since = None
        else:
            if stalled_since is None:
                stalled_since = time.monotonic()
            elif time.monotonic() - stalled_since > 1.0:
                break
            time.sleep(0.01)
    srv.sock.setblocking(True)
    srv.sock.settimeout(30)
    return sent, pending, in_pending


@pytest.mark.deadline(120)
def test_flood_without_reading_replies(start, tmp_path):
    """READs of 1 MiB and WRITEs of 1 MiB, pipelined by a client that never
    reads a reply: the server must block on its sends and stop reading,
    not buffer replies or requests.  Then the client reads everything and
    all replies are there."""
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'big').write_bytes(_pattern(3, 8 * MiB))
    srv = start(root)
    assert srv.call('OPEN', handle=1, path='big', opflags=wire.O_RDONLY).status == 0
    _create(srv, 2, 'sink')
    base = srv.next_id
    payload = _pattern(4, 64 * 1024)
    batch = 64

    def make_batch(n):
        # Small requests with big replies (each READ's reply alone fills
        # the socket's buffer), and some data to write; many per send, so
        # that the socket could hand the server thousands.
        frames = []
        for i in range(n, n + batch):
            rid = base + i
            if i % batch == batch - 1:
                frames.append(wire.encode_request(
                    'WRITE', rid, handle=2, offset=(i // batch % 64) *
                    len(payload), data=payload))
            else:
                frames.append(wire.encode_request(
                    'READ', rid, handle=1, offset=(i % 8) * MiB, length=MiB))
        return b''.join(frames), batch

    sent, rest, in_rest = _flood(srv, make_batch, 20)
    time.sleep(0.5)
    rss = _rss_kib(srv.proc.pid)
    assert srv.proc.poll() is None, 'server died:\n%s' % srv.log()
    # The server took requests until its sends blocked, then stopped (the
    # rest waits in the socket's buffer, not in the server).
    print('flood: %d requests, server VmHWM %d KiB' % (sent, rss))
    assert sent >= 4, 'the server took almost no requests'
    assert rss < RSS_BOUND_KIB, \
        'server peak RSS %d KiB under a flood of %d requests' % (rss, sent)
    # Now read: the server must go on and answer every request.
    if rest:
        t = threading.Thread(target=srv.sock.sendall, args=(rest,),
                             daemon=True)
        t.start()
        sent += in_rest
    got = _collect(srv, range(base, base + sent))
    if rest:
        t.join(30)
    srv.next_id = base + sent
    assert all(r.status == 0 for r in got.values()), \
        [r for r in got.values() if r.status][:3]
    assert srv.call('FSTAT', handle=2).status == 0


def test_directory_handles_capped(tmp_path):
    """Each open directory costs the server a libc stream buffer, so their
    number is capped (SRV_MAX_DIRS = 1024): the next OPENDIR is EMFILE, and
    closing one makes room again."""
    exe = _server_exe()
    s = wire.Server(exe, str(tmp_path), str(tmp_path / 'dirs.log'))
    try:
        assert s.hello().status == 0
        got = _pipeline(s, [('OPENDIR', dict(handle=h, path=''))
                            for h in range(1, 1026)])
        assert all(r.status == 0 for r in got[:1024]), \
            [r for r in got[:1024] if r.status][:3]
        assert got[1024].err == 'EMFILE', got[1024]
        assert s.call('CLOSE', handle=1).status == 0
        assert s.call('OPENDIR', handle=1, path='').status == 0
    finally:
        assert s.finish() == 0


# ---------------------------------------------------------------------------
# io_uring refused, as in a container or with kernel.io_uring_disabled

def _refuse_io_uring():
    """preexec_fn: a seccomp filter that fails io_uring_setup(2) with
    EPERM, as container runtimes' default policies do."""
    import ctypes
    import struct as st
    libc = ctypes.CDLL(None, use_errno=True)
    nr_io_uring_setup = 425      # the same on every architecture
    eperm = 1
    ret_errno, ret_allow = 0x00050000, 0x7fff0000
    # BPF: A = seccomp_data.nr; A == 425 ? ERRNO|EPERM : ALLOW
    prog = [(0x20, 0, 0, 0),                          # ld  [0]
            (0x15, 0, 1, nr_io_uring_setup),          # jeq #425, 0, 1
            (0x06, 0, 0, ret_errno | eperm),          # ret ERRNO(EPERM)
            (0x06, 0, 0, ret_allow)]                  # ret ALLOW
    raw = b''.join(st.pack('HBBI', *i) for i in prog)
    buf = ctypes.create_string_buffer(raw)

    class Fprog(ctypes.Structure):
        _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]

    fprog = Fprog(len(prog), ctypes.addressof(buf))
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0 or \
            libc.prctl(pr_set_seccomp, seccomp_mode_filter,
                       ctypes.byref(fprog), 0, 0) != 0:
        os._exit(99)


def _start_refused(tmp_path, args, name):
    sock, child = socket.socketpair()
    logp = tmp_path / (name + '.log')
    logf = open(logp, 'wb')
    env = dict(os.environ)
    env.pop('QFTFS_SERVER_IO', None)
    proc = subprocess.Popen([_server_exe(), '--stdio', '--root',
                             str(tmp_path)] + args,
                            stdin=child, stdout=child, stderr=logf, env=env,
                            preexec_fn=_refuse_io_uring)
    child.close()
    return sock, proc, logf, logp


def test_refused_io_uring_falls_back_once(tmp_path):
    """--io=auto where io_uring_setup fails with EPERM: exactly one line
    says so, and the server serves through pread/pwrite."""
    srv = wire.Server.__new__(wire.Server)
    srv.sock, srv.proc, srv.logf, logp = _start_refused(tmp_path,
                                                        ['--io=auto'], 'auto')
    srv.log_path = str(logp)
    srv.sock.settimeout(30)
    srv.next_id = 1
    try:
        assert srv.hello().status == 0, srv.log()
        _create(srv, 1, 'f')
        data = _pattern(9, 3 * MiB)
        got = _pipeline(srv, [('WRITE', dict(handle=1, offset=o,
                                             data=data[o:o + MiB]))
                              for o in range(0, 3 * MiB, MiB)] +
                        [('READ', dict(handle=1, offset=0, length=MiB)),
                         ('FLUSH', dict(handle=1))])
        assert all(r.status == 0 for r in got), got
        assert got[3]['data'] == data[:MiB]
    finally:
        rc = srv.finish()
    if rc == 99:
        pytest.skip('cannot install a seccomp filter here')
    assert rc == 0, srv.log()
    lines = [l for l in srv.log().splitlines() if 'io_uring' in l]
    assert len(lines) == 1, lines
    assert 'unavailable' in lines[0] and 'Operation not permitted' in \
        lines[0] and 'pread/pwrite' in lines[0], lines[0]


def test_refused_io_uring_with_io_uring_is_an_error(tmp_path):
    """--io=uring insists: it exits 1 with a line that names the cause and
    the way out, instead of silently measuring the other backend."""
    sock, proc, logf, logp = _start_refused(tmp_path, ['--io=uring'], 'uring')
    try:
        rc = proc.wait(30)
    finally:
        sock.close()
        logf.close()
    if rc == 99:
        pytest.skip('cannot install a seccomp filter here')
    text = logp.read_text()
    assert rc == 1, text
    assert 'io_uring is not available (Operation not permitted)' in text
    assert '--io=posix' in text


# ---------------------------------------------------------------------------
# A session whose client vanished

_VANISH = r"""
import json, os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
import test_hostile as th
root, build = sys.argv[2], sys.argv[3]
s = th.Session(build, root, os.path.join(root, '..', 'session.err'))
p = s.peer().handshake().hello()
assert p.call('LSTAT', path='').status == 0
# The client's host is gone: nothing it sent or would send arrives, and
# no FIN or RST ever comes (packets to it vanish, like a cut cable).
subprocess.run(['ip', 'link', 'set', 'lo', 'down'], check=True)
t0 = time.monotonic()
rc = s.wait(200)
print(json.dumps({'rc': rc, 'elapsed': time.monotonic() - t0,
                  'err': s.stderr()}))
if rc is None:
    s.proc.kill()
"""


@pytest.mark.deadline(300)
def test_session_exits_when_client_vanishes(tmp_path, need_root):
    """--session over TCP: with the client's host unreachable and the
    connection idle, keepalive probes and TCP_USER_TIMEOUT end it after
    about 60 s; the server logs one line and exits (no process left
    behind on the device).  Runs in a private network namespace."""
    if util.fast_mode():
        pytest.skip('QFTFS_TEST_FAST: takes a minute')
    root = tmp_path / 'root'
    root.mkdir()
    r = subprocess.run(['unshare', '-n', sys.executable, '-c', _VANISH,
                        os.path.dirname(os.path.abspath(__file__)),
                        str(root), util.build_dir()],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=280)
    if r.returncode != 0 and 'unshare' in r.stderr:
        pytest.skip('cannot make a network namespace: %s' % r.stderr[-300:])
    if 'cryptography' in r.stderr and 'SKIPPED' in r.stderr:
        pytest.skip('the Python cryptography package is missing')
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res['rc'] is not None, 'the server still runs after 200 s'
    assert res['rc'] == 1, res
    assert 45 < res['elapsed'] < 120, res
    lines = res['err'].strip().splitlines()
    assert len(lines) == 1 and 'client stopped answering' in lines[0], lines


# ---------------------------------------------------------------------------
# Command line

def test_io_option_bogus_is_usage_error(tmp_path):
    r = subprocess.run([_server_exe(), '--stdio', '--root', str(tmp_path),
                        '--io=bogus'],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 2, r
    assert '--io=bogus' in r.stderr and 'posix' in r.stderr, r.stderr
    assert r.stdout == ''


def _backend_used(tmp_path, args, env_io):
    """The backend a server reports (debug log) for --io args and
    QFTFS_SERVER_IO=env_io (None: unset)."""
    env = dict(os.environ)
    env.pop('QFTFS_SERVER_IO', None)
    if env_io is not None:
        env['QFTFS_SERVER_IO'] = env_io
    logp = tmp_path / ('used%d.log' % len(os.listdir(tmp_path)))
    s = _IoServer.__new__(_IoServer)
    s.sock, child = socket.socketpair()
    s.log_path = str(logp)
    s.logf = open(logp, 'ab')
    s.proc = subprocess.Popen([_server_exe(), '--stdio', '--root',
                               str(tmp_path), '-d'] + args,
                              stdin=child, stdout=child, stderr=s.logf,
                              env=env)
    child.close()
    s.sock.settimeout(30)
    s.next_id = 1
    try:
        assert s.hello().status == 0
    finally:
        assert s.finish() == 0, s.log()
    line = [l for l in s.log().splitlines() if 'file I/O:' in l]
    assert len(line) == 1, s.log()
    return 'uring' if 'io_uring' in line[0] else 'posix'


def test_io_choice_precedence(tmp_path, backend):
    """--io wins over QFTFS_SERVER_IO, which wins over the default."""
    other = 'posix' if backend == 'uring' else 'uring'
    if _uring_refusal(_server_exe(), tmp_path):
        pytest.skip('io_uring refused by this kernel')
    assert _backend_used(tmp_path, ['--io=' + backend], other) == backend
    assert _backend_used(tmp_path, [], backend) == backend
    assert _backend_used(tmp_path, ['--io=auto'], 'posix') == 'uring'
    # The default, by measurement (server/main.c): pread/pwrite.
    assert _backend_used(tmp_path, [], None) == 'posix'


def test_io_option_in_help_and_env(tmp_path):
    exe = _server_exe()
    r = subprocess.run([exe, '--help'], stdout=subprocess.PIPE, text=True,
                       timeout=30)
    assert '--io=' in r.stdout
    # The environment variable still chooses when --io is not given; a
    # bad value is a warning, not a failure.
    env = dict(os.environ, QFTFS_SERVER_IO='nonsense')
    s = wire.Server(exe, str(tmp_path), str(tmp_path / 'env.log'), env=env)
    try:
        assert s.hello().status == 0
        assert wire.alive(s)
    finally:
        assert s.finish() == 0
    assert 'QFTFS_SERVER_IO=nonsense' in s.log()
