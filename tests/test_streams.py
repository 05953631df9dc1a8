# SPDX-License-Identifier: MIT
"""Bulk streams: write-behind and read-ahead, checked for correctness under
stress, not for speed.

Write-behind answers a write as soon as its WRITE is sent; read-ahead keeps
READs for the chunks ahead of a sequential reader in flight and serves the
reader from their replies.  What must hold whatever the timing:

- data read back is what was written, through any handle, in any order;
- a write or truncation through the mount is seen by every later read,
  also by a handle whose read-ahead had fetched the old bytes;
- a change made on the server is seen after a reopen, and by an open
  stream once its window has passed;
- a write error (ENOSPC) surfaces with its errno at a write or at close,
  never as success; a lost server is EIO at close, never success, and a
  lost server under a reader is EIO, never a short read that looks like
  the end of the file.

Reads meant to reach the client rather than the kernel's page cache use
O_DIRECT: FUSE then forwards the caller's own offsets and sizes.
"""

import concurrent.futures
import errno
import hashlib
import os
import random
import signal
import threading
import time

import pytest

import util
from util import MiB

# The 16 MiB tmpfs fixture; imported so pytest finds it here too.
from test_enospc import full_mount  # noqa: F401

P = os.path.join

# Stream tests run on the normal and the sanitizer build.
BUILDS = [{}, {'build': 'asan'}]
BUILD_IDS = ['plain', 'asan']

# Read-ahead an open stream may still hold from before a change made on
# the server: the largest credit (16 MiB) plus the chunk being read and
# one behind it.
WINDOW_LIFETIME = 16 * MiB + 2 * MiB


def _content(seed, size):
    return random.Random(seed).randbytes(size)


def _put(path, data):
    with open(path, 'wb') as f:
        f.write(data)


def _read_all(path):
    with open(path, 'rb') as f:
        return f.read()


def _dread(fd, n, off):
    """pread through O_DIRECT: exactly what the client answered."""
    return os.pread(fd, n, off)


def _kill_servers(m):
    assert m.server_pids, 'no server child found'
    for pid in m.server_pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(util.proc_alive(p) for p in m.server_pids):
        assert time.monotonic() < deadline, 'server did not die'
        time.sleep(0.01)


# ---------------------------------------------------------------------------
# One handle: writes, reads and truncations interleaved

@pytest.mark.deadline(300)
@pytest.mark.parametrize('mount', BUILDS, indirect=True, ids=BUILD_IDS)
@pytest.mark.parametrize('direct', [True, False], ids=['direct', 'cached'])
def test_interleaved_writes_and_reads(mount, direct):
    """Runs of sequential reads (which start read-ahead streams), single
    reads, writes and truncations at random offsets on one O_RDWR handle,
    checked against a model of the file after every read."""
    src, mnt = mount
    rnd = random.Random(20240 + direct)
    shadow = bytearray(_content(1, 6 * MiB + 12345))
    _put(P(src, 'f'), shadow)
    fd = os.open(P(mnt, 'f'), os.O_RDWR | (os.O_DIRECT if direct else 0))

    def check_read(off, n, what):
        got = os.pread(fd, n, off)
        want = bytes(shadow[off:off + n])
        assert got == want, ('%s: read of %d at %d: got %d bytes, want %d%s'
                             % (what, n, off, len(got), len(want),
                                '' if len(got) != len(want) else
                                ' (same length, different data)'))
        return len(got)

    try:
        for step in range(500):
            op = rnd.random()
            size = len(shadow)
            if op < 0.3:
                # A sequential run: the second read starts a stream.
                off = rnd.randrange(size)
                n = rnd.choice((4096, 65536, 131072, 300000, MiB))
                for _ in range(rnd.randrange(2, 16)):
                    got = check_read(off, n, 'step %d run' % step)
                    off += got
                    if got < n:
                        break
            elif op < 0.6:
                off = rnd.randrange(size + MiB)
                data = rnd.randbytes(rnd.choice((1, 100, 4096, 65537, MiB)))
                assert os.pwrite(fd, data, off) == len(data)
                if off > size:
                    shadow.extend(bytes(off - size))
                shadow[off:off + len(data)] = data
            elif op < 0.67:
                n = rnd.randrange(size + MiB)
                os.ftruncate(fd, n)
                if n < size:
                    del shadow[n:]
                else:
                    shadow.extend(bytes(n - size))
            elif op < 0.9:
                check_read(rnd.randrange(size + 1000),
                           rnd.choice((1, 512, 4096, 70000, MiB)),
                           'step %d single' % step)
            else:
                # Write into what a stream just fetched, then read it.
                off = rnd.randrange(size)
                check_read(off, 131072, 'step %d before' % step)
                check_read(off + 131072, 131072, 'step %d before' % step)
                woff = off + rnd.randrange(2 * MiB)
                data = rnd.randbytes(rnd.randrange(1, 200000))
                os.pwrite(fd, data, woff)
                if woff > len(shadow):
                    shadow.extend(bytes(woff - len(shadow)))
                shadow[woff:woff + len(data)] = data
                check_read(off + 262144, 2 * MiB, 'step %d after' % step)
                check_read(woff, len(data), 'step %d after' % step)
            if not direct and rnd.random() < 0.3:
                # Make the kernel ask the client again.
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert os.fstat(fd).st_size == len(shadow)
    finally:
        os.close(fd)
    assert _read_all(P(src, 'f')) == bytes(shadow)
    assert _read_all(P(mnt, 'f')) == bytes(shadow)


# ---------------------------------------------------------------------------
# Several streams at once

@pytest.mark.deadline(300)
@pytest.mark.parametrize('mount', BUILDS, indirect=True, ids=BUILD_IDS)
def test_parallel_streams(mount):
    """Threads write files with write-behind and read them back with
    read-ahead at the same time, while others stream one shared file."""
    src, mnt = mount
    shared = _content(99, 20 * MiB + 77)
    _put(P(src, 'shared'), shared)
    shared_sum = hashlib.sha256(shared).hexdigest()

    def writer(i):
        data = _content(i, 12 * MiB + i * 4097)
        fd = os.open(P(mnt, 'w%d' % i), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            for off in range(0, len(data), 256 * 1024 + i):
                os.pwrite(fd, data[off:off + 256 * 1024 + i], off)
        finally:
            os.close(fd)
        fd = os.open(P(mnt, 'w%d' % i), os.O_RDONLY | os.O_DIRECT)
        try:
            h = hashlib.sha256()
            off = 0
            while True:
                b = _dread(fd, 131072, off)
                if not b:
                    break
                h.update(b)
                off += len(b)
        finally:
            os.close(fd)
        assert off == len(data), 'w%d: read back %d of %d bytes' % (i, off, len(data))
        assert h.hexdigest() == hashlib.sha256(data).hexdigest(), 'w%d differs' % i
        return i

    def reader(i):
        for _ in range(2):
            fd = os.open(P(mnt, 'shared'),
                         os.O_RDONLY | (os.O_DIRECT if i % 2 else 0))
            try:
                h = hashlib.sha256()
                n = (128 * 1024, MiB, 65536 + 3)[i % 3]
                while True:
                    b = os.read(fd, n)
                    if not b:
                        break
                    h.update(b)
            finally:
                os.close(fd)
            assert h.hexdigest() == shared_sum, 'reader %d saw other data' % i
        return i

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(writer, i) for i in range(4)]
        futs += [ex.submit(reader, i) for i in range(4)]
        for f in futs:
            f.result()
    for i in range(4):
        assert _read_all(P(src, 'w%d' % i)) == _content(i, 12 * MiB + i * 4097)


# ---------------------------------------------------------------------------
# Random readers inside streamed files

@pytest.mark.deadline(300)
def test_random_reader_inside_read_stream(mount):
    """One handle streams a file from start to end again and again while
    another reads it at random offsets."""
    src, mnt = mount
    data = _content(7, 24 * MiB + 999)
    _put(P(src, 'f'), data)
    stop = threading.Event()
    errors = []

    def streamer():
        try:
            for _ in range(3):
                fd = os.open(P(mnt, 'f'), os.O_RDONLY | os.O_DIRECT)
                try:
                    off = 0
                    while True:
                        b = _dread(fd, 262144, off)
                        if b != data[off:off + 262144]:
                            errors.append('stream: bad data at %d' % off)
                            return
                        if not b:
                            break
                        off += len(b)
                finally:
                    os.close(fd)
        finally:
            stop.set()

    def random_reader():
        rnd = random.Random(3)
        fd = os.open(P(mnt, 'f'), os.O_RDONLY | os.O_DIRECT)
        try:
            while not stop.is_set():
                off = rnd.randrange(len(data))
                n = rnd.choice((1, 4096, 100000, MiB))
                if os.pread(fd, n, off) != data[off:off + n]:
                    errors.append('random: bad data at %d+%d' % (off, n))
                    return
                # Sometimes a short sequential run on this handle too.
                if rnd.random() < 0.2:
                    for _ in range(3):
                        off += n
                        if os.pread(fd, n, off) != data[off:off + n]:
                            errors.append('random run: bad data at %d' % off)
                            return
        finally:
            os.close(fd)

    ts = [threading.Thread(target=streamer), threading.Thread(target=random_reader)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(240)
    assert not any(t.is_alive() for t in ts), 'a reader hung'
    assert not errors, errors


@pytest.mark.deadline(300)
def test_random_reader_inside_write_stream(mount):
    """A writer streams a file with write-behind; another handle reads at
    random offsets below what the writer's write() calls have returned:
    those bytes are sent, and the server executes in order, so the reads
    must see them although their WRITEs may not be acknowledged yet."""
    src, mnt = mount
    size = 48 * MiB
    data = _content(11, size)
    written = [0]
    done = threading.Event()
    errors = []

    def writer():
        fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            for off in range(0, size, MiB):
                os.pwrite(fd, data[off:off + MiB], off)
                written[0] = off + MiB
        finally:
            os.close(fd)
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    rnd = random.Random(5)
    while not os.path.exists(P(src, 'f')):
        time.sleep(0.001)
    fd = os.open(P(mnt, 'f'), os.O_RDONLY | os.O_DIRECT)
    reads = 0
    try:
        while not done.is_set() or reads < 50:
            limit = written[0]
            if limit == 0:
                continue
            off = rnd.randrange(limit)
            n = min(rnd.choice((1, 4096, 65536, MiB)), limit - off)
            got = os.pread(fd, n, off)
            if got != data[off:off + n]:
                errors.append('read of %d at %d (written up to %d): %s'
                              % (n, off, limit, 'short' if len(got) < n else 'wrong data'))
                break
            reads += 1
    finally:
        os.close(fd)
        t.join(120)
    assert not errors, errors
    assert _read_all(P(src, 'f')) == data


# ---------------------------------------------------------------------------
# Changes under an open read-ahead stream

def _stream_some(fd, upto, step=131072):
    """Reads [0, upto) sequentially through O_DIRECT: starts a stream."""
    out = bytearray()
    while len(out) < upto:
        b = _dread(fd, step, len(out))
        if not b:
            break
        out += b
    return bytes(out)


@pytest.mark.deadline(300)
@pytest.mark.parametrize('mount', BUILDS, indirect=True, ids=BUILD_IDS)
def test_rewritten_on_server_during_stream(mount):
    """The file is truncated and rewritten in the backing directory while a
    stream is open on it: the open handle may still return old data from
    its window, never beyond it; a reopen sees only the new content."""
    src, mnt = mount
    old = _content(1, 32 * MiB)
    new = _content(2, 28 * MiB)
    _put(P(src, 'f'), old)
    fd = os.open(P(mnt, 'f'), os.O_RDONLY | os.O_DIRECT)
    try:
        head = _stream_some(fd, 4 * MiB)
        assert head == old[:4 * MiB]
        # Let the chunks in flight arrive, so none straddles the rewrite.
        time.sleep(0.5)
        with open(P(src, 'f'), 'r+b') as g:
            g.truncate(0)
            g.write(new)
        off = len(head)
        page = 4096
        while True:
            b = _dread(fd, 131072, off)
            if not b:
                break
            for i in range(0, len(b), page):
                p = b[i:i + page]
                o = off + i
                if o >= 4 * MiB + WINDOW_LIFETIME:
                    assert p == new[o:o + page], 'stale data at %d, past the window' % o
                else:
                    assert p in (old[o:o + page], new[o:o + page]), \
                        'data at %d is neither old nor new' % o
            off += len(b)
        assert off == len(new), 'the open stream ended at %d, not %d' % (off, len(new))
    finally:
        os.close(fd)
    for flags in (os.O_RDONLY | os.O_DIRECT, os.O_RDONLY):
        fd = os.open(P(mnt, 'f'), flags)
        try:
            assert _stream_some(fd, 64 * MiB) == new, 'a reopen saw old data'
        finally:
            os.close(fd)


@pytest.mark.deadline(300)
@pytest.mark.parametrize('mount', BUILDS, indirect=True, ids=BUILD_IDS)
def test_changed_through_mount_during_stream(mount):
    """Writes and truncations through the mount, by another handle, by the
    streaming handle itself and by path, are seen by the very next read of
    a handle whose read-ahead had fetched the old bytes."""
    src, mnt = mount
    model = bytearray(_content(3, 32 * MiB))
    _put(P(src, 'f'), model)
    r = os.open(P(mnt, 'f'), os.O_RDWR | os.O_DIRECT)
    w = os.open(P(mnt, 'f'), os.O_WRONLY)
    rnd = random.Random(8)

    def expect(off, n, what):
        got = _dread(r, n, off)
        assert got == bytes(model[off:off + n]), '%s: read of %d at %d is stale or short (%d bytes)' % (
            what, n, off, len(got))

    try:
        pos = len(_stream_some(r, 4 * MiB))
        # Another handle writes inside the window the stream fetched.
        for i in range(20):
            woff = pos + rnd.randrange(6 * MiB)
            data = rnd.randbytes(rnd.choice((1, 4096, 70000, MiB)))
            os.pwrite(w, data, woff)
            model[woff:woff + len(data)] = data
            expect(pos, 131072, 'after write %d by another handle' % i)
            expect(woff, len(data), 'after write %d by another handle' % i)
            pos += 131072
            expect(pos, 131072, 'sequential after write %d' % i)
            pos += 131072
        # The streaming handle writes ahead of itself.
        for i in range(10):
            expect(pos, 131072, 'before own write %d' % i)
            woff = pos + 131072 + rnd.randrange(3 * MiB)
            data = rnd.randbytes(100000)
            os.pwrite(r, data, woff)
            model[woff:woff + len(data)] = data
            for _ in range(8):
                pos += 131072
                expect(pos, 131072, 'after own write %d' % i)
        # Truncation by another handle, then by path, then regrowth.
        for cut in (pos + 3 * MiB, pos + MiB + 12345):
            expect(pos, 131072, 'before truncation')
            os.ftruncate(w, cut)
            del model[cut:]
            pos += 131072
            expect(pos, 4 * MiB, 'after ftruncate to %d' % cut)
            assert _dread(r, 131072, cut) == b'', 'read past the new end'
        os.truncate(P(mnt, 'f'), pos)
        del model[pos:]
        assert _dread(r, 131072, pos - 4096) == bytes(model[pos - 4096:])
        grow = rnd.randbytes(3 * MiB)
        os.pwrite(w, grow, pos)
        model += grow
        expect(pos, 3 * MiB, 'after regrowth')
    finally:
        os.close(w)
        os.close(r)
    assert _read_all(P(src, 'f')) == bytes(model)


# ---------------------------------------------------------------------------
# Reads out of order

def _server_wchar(pid):
    """Bytes the server process wrote by system call (its sockets)."""
    with open('/proc/%d/io' % pid) as f:
        for line in f:
            if line.startswith('wchar: '):
                return int(line.split()[1])
    raise AssertionError('no wchar in /proc/%d/io' % pid)


@pytest.mark.deadline(120)
def test_overtaken_first_read_fetches_nothing_twice(mounter):
    """The kernel's parallel reads overtake each other: the read of the
    second MiB may come before the first one, part of which came with the
    OPEN.  That is the start of a stream, not random access: every byte
    crosses the link once."""
    m = mounter()
    size = 6 * MiB
    data = _content(11, size)
    _put(P(m.src, 'f'), data)
    assert len(m.server_pids) == 1, m.server_pids
    pid = m.server_pids[0]
    before = _server_wchar(pid)
    fd = os.open(P(m.mnt, 'f'), os.O_RDONLY | os.O_DIRECT)
    try:
        assert _dread(fd, MiB, MiB) == data[MiB:2 * MiB]
        assert _dread(fd, MiB, 0) == data[:MiB]
        for off in range(2 * MiB, size, MiB):
            assert _dread(fd, MiB, off) == data[off:off + MiB]
    finally:
        os.close(fd)
    sent = _server_wchar(pid) - before
    # Frame headers and the OPEN and CLOSE replies are a few hundred
    # bytes; OPEN's 128 KiB fetched again would be far over.
    assert size <= sent <= size + 16 * 1024, \
        'the server sent %d bytes for a file of %d' % (sent, size)


# ---------------------------------------------------------------------------
# A big sequential copy in both directions

@pytest.mark.deadline(600)
def test_copy_256mib_onto_and_off(mounter, tmp_path):
    size = 256 * MiB
    source = str(tmp_path / 'source')
    digest = util.write_random_file(source, size, seed=256)
    m = mounter()
    try:
        util.run(['cp', source, P(m.mnt, 'big')], check=True, timeout=600)
        assert os.stat(P(m.src, 'big')).st_size == size
        assert util.sha256_file(P(m.src, 'big')) == digest, 'backing copy differs'
        # Off a fresh mount, so nothing comes from the first one's cache.
        m2 = mounter(src=m.src)
        back = str(tmp_path / 'back')
        util.run(['cp', P(m2.mnt, 'big'), back], check=True, timeout=600)
        assert util.sha256_file(back) == digest, 'copy off the mount differs'
    finally:
        for p in (source, P(m.src, 'big'), str(tmp_path / 'back')):
            try:
                os.unlink(p)
            except OSError:
                pass


# ---------------------------------------------------------------------------
# Errors in the middle of a stream

@pytest.mark.deadline(300)
def test_enospc_mid_stream_cp(full_mount, tmp_path):
    """A 48 MiB cp onto the 16 MiB disk: the WRITEs in flight when the disk
    fills fail, and cp hears ENOSPC from a write or from close."""
    src, mnt = full_mount
    source = str(tmp_path / 'big')
    util.write_random_file(source, 48 * MiB, seed=48)
    r = util.run(['cp', source, P(mnt, 'big')], timeout=300)
    assert r.returncode != 0, 'cp of 48 MiB onto a 16 MiB disk succeeded'
    assert 'No space left on device' in r.stderr, r.stderr
    size = os.stat(P(src, 'big')).st_size
    assert 0 < size < 48 * MiB
    with open(source, 'rb') as a, open(P(src, 'big'), 'rb') as b:
        assert a.read(size) == b.read(), 'the partial file has wrong data'
    os.unlink(P(mnt, 'big'))


@pytest.mark.deadline(300)
@pytest.mark.parametrize('total', [16 * MiB, 40 * MiB],
                         ids=['just-over', 'far-over'])
def test_enospc_mid_stream_write_or_close(full_mount, total):
    """Writes with write-behind past the free space: ENOSPC at a write or,
    when every write was answered before the failure came back, at
    close(); never success, never another errno."""
    src, mnt = full_mount
    # Fill most of the disk first so that the stream itself overflows.
    with open(P(mnt, 'filler'), 'wb') as f:
        f.write(b'\0' * (MiB // 2))
    fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_WRONLY, 0o644)
    errs = []
    block = b'q' * (256 * 1024)
    try:
        for off in range(0, total, len(block)):
            os.write(fd, block)
    except OSError as e:
        errs.append(('write', e))
    try:
        os.close(fd)
    except OSError as e:
        errs.append(('close', e))
    assert errs, 'writing %d bytes onto a 16 MiB disk reported no error' % total
    for where, e in errs:
        assert e.errno == errno.ENOSPC, '%s failed with %r, not ENOSPC' % (where, e)
    # The handle's error was reported; the mount still works.
    os.unlink(P(mnt, 'f'))
    os.unlink(P(mnt, 'filler'))
    _put(P(mnt, 'after'), b'x' * MiB)
    assert os.stat(P(src, 'after')).st_size == MiB


@pytest.mark.deadline(120)
@pytest.mark.parametrize('when', ['mid-stream', 'before-close'])
def test_server_killed_during_stream_write(mounter, when):
    """kill -9 of the server while a 64 MiB write streams: the writer's
    close() fails with EIO, never succeeds."""
    m = mounter(expect_rc=None)
    src, mnt = m
    block = _content(64, MiB)
    fd = os.open(P(mnt, 'big'), os.O_CREAT | os.O_WRONLY, 0o644)
    write_err = None
    try:
        for i in range(64):
            if when == 'mid-stream' and i == 16:
                _kill_servers(m)
            os.write(fd, block)
    except OSError as e:
        write_err = e
    if when == 'before-close':
        _kill_servers(m)
    try:
        os.close(fd)
    except OSError as e:
        close_err = e
    else:
        close_err = None
    assert close_err is not None, \
        'close() succeeded although the server died (write error: %r)' % write_err
    for e in (write_err, close_err):
        if e is not None:
            assert e.errno in (errno.EIO, errno.ENOTCONN), 'expected EIO, got %r' % e


@pytest.mark.deadline(120)
def test_server_killed_during_read_stream(mounter):
    """kill -9 of the server under a sequential reader: reads fail with EIO;
    none is short (which would look like the end of the file)."""
    # reconnect=no: with it, a read-only handle may go on transparently.
    m = mounter(expect_rc=None, opts=['reconnect=no'])
    src, mnt = m
    data = _content(5, 64 * MiB)
    _put(P(src, 'f'), data)
    fd = os.open(P(mnt, 'f'), os.O_RDONLY | os.O_DIRECT)
    err = None
    off = 0
    # Odd-sized reads straddle the read-ahead chunks (1 MiB), so that one
    # can end in a chunk that arrived and go on into one that failed.
    n = 300001
    killed = False
    try:
        while off < len(data):
            if off >= 8 * MiB and not killed:
                _kill_servers(m)
                killed = True
            b = _dread(fd, n, off)
            assert len(b) == min(n, len(data) - off), \
                'short read of %d bytes at %d with the server dead' % (len(b), off)
            assert b == data[off:off + n], 'wrong data at %d' % off
            off += len(b)
    except OSError as e:
        err = e
    finally:
        os.close(fd)
    assert err is not None, 'read the whole file although the server died'
    assert err.errno in (errno.EIO, errno.ENOTCONN), 'expected EIO, got %r' % err


# ---------------------------------------------------------------------------
# The kernel's check before each write

CAPS = 'security.capability'
# vfs_cap_data revision 2, effective, permitting CAP_NET_RAW.
CAP_NET_RAW = (b'\x01\x00\x00\x02' + (1 << 13).to_bytes(4, 'little')
               + bytes(12))


@pytest.mark.parametrize('mount,where',
                         [({}, 'mount'),
                          ({'opts': ['attr_timeout=0']}, 'server')],
                         indirect=['mount'], ids=['set-via-mount',
                                                  'set-on-server-attr0'])
def test_write_still_drops_file_capability(mount, need_root, where):
    """The kernel asks for security.capability before every write, and the
    client answers "none" from memory for a while (attr_timeout) so that
    writes can stream.  A capability set through the mount, or on the
    server with attribute caching off, must be seen at once through the
    mount, and the next write must remove it (the server's own write on the
    backing file would too, so that part holds with or without the
    client)."""
    src, mnt = mount
    fd = os.open(P(mnt, 'bin'), os.O_CREAT | os.O_RDWR, 0o755)
    try:
        for _ in range(4):      # "no capability" is now remembered
            os.write(fd, b'x' * 4096)
        # Those writes are behind: one still executing on the server would
        # strip a capability set there now (the backing fs does that).
        os.fsync(fd)
        target = P(mnt if where == 'mount' else src, 'bin')
        try:
            os.setxattr(target, CAPS, CAP_NET_RAW)
        except OSError as e:
            pytest.skip('cannot set a file capability here: %s' % e)
        assert os.getxattr(P(src, 'bin'), CAPS) == CAP_NET_RAW
        assert os.getxattr(P(mnt, 'bin'), CAPS) == CAP_NET_RAW, \
            'the mount still says there is no capability'
        os.write(fd, b'y')
    finally:
        os.close(fd)
    with pytest.raises(OSError) as e:
        os.getxattr(P(src, 'bin'), CAPS)
    assert e.value.errno == errno.ENODATA, \
        'a write left the file capability in place: %r' % e.value


@pytest.mark.deadline(120)
@pytest.mark.parametrize('opts', [[], ['commit=async']],
                         ids=['commit=close', 'commit=async'])
def test_capability_set_behind_writes_in_flight_is_kept(mounter, need_root,
                                                        opts):
    """cp -a, tar --xattrs and rsync -X set a file capability right after
    the data, while its WRITEs are still on their way (with commit=async,
    so does a setcap after close()).  The server must set it after them:
    a WRITE executed later strips it.  The server is stopped while the
    WRITEs and the SETXATTR are issued, so they are all in flight."""
    m = mounter(opts=opts)
    src, mnt = m
    assert len(m.server_pids) == 1, m.server_pids
    pid = m.server_pids[0]
    # Little enough for the socket's buffer, which the stopped server
    # does not empty.
    data = _content(5, 96 * 1024)
    # In a directory made here, whose names and xattrs the client knows:
    # nothing of the writes waits for the server.
    os.mkdir(P(mnt, 'd'))
    fd = os.open(P(mnt, 'd', 'bin'), os.O_CREAT | os.O_WRONLY | os.O_EXCL,
                 0o755)
    closed = False
    errors = []
    try:
        os.kill(pid, signal.SIGSTOP)
        try:
            for off in range(0, len(data), 24 * 1024):
                os.write(fd, data[off:off + 24 * 1024])
            if opts:
                os.close(fd)
                closed = True
            target = P(mnt, 'd', 'bin') if closed else fd

            def set_cap():
                try:
                    os.setxattr(target, CAPS, CAP_NET_RAW)
                except OSError as e:
                    errors.append(e)

            t = threading.Thread(target=set_cap)
            t.start()
            # Time for it to be sent; were it not yet, the test could
            # only pass, never fail, for that reason.
            time.sleep(0.5)
        finally:
            os.kill(pid, signal.SIGCONT)
        t.join(60)
        assert not t.is_alive(), 'setxattr hung'
    finally:
        if not closed:
            os.close(fd)
    if errors:
        pytest.skip('cannot set a file capability here: %s' % errors[0])
    if opts:
        r = util.run([util.client_bin(m.build), '--sync', m.mnt],
                     timeout=60)
        assert r.returncode == 0, r.stderr
    assert _read_all(P(src, 'd', 'bin')) == data
    assert os.getxattr(P(src, 'd', 'bin'), CAPS) == CAP_NET_RAW, \
        'a WRITE executed after the SETXATTR stripped the capability'
