# SPDX-License-Identifier: MIT
"""Direct I/O on the server (qftfs-server --direct=auto, the default).

Large aligned READs and WRITEs go through a second descriptor of the file
opened O_DIRECT, everything else through the page cache.  What must hold,
on both I/O engines:

- files of awkward sizes (0, 1, 4095, 4096, 4097, 1 MiB - 1, 1 MiB,
  1 MiB + 1, 5 MiB + 123) written through the mount are on the server
  byte for byte, and read back through a fresh mount with the server's
  page cache dropped for them (so the READs are cold and go direct);
- one file written through two handles at once, one with large aligned
  writes (direct) and one with small unaligned ones (buffered) over the
  same ranges, truncated in between, then read back: the last write wins
  everywhere, as the model says;
- the direct path was really taken: the server's debug log counts the
  READs and WRITEs that went direct ("direct I/O: N reads, M writes" at
  the end of each connection), above zero with --direct=auto (READs on
  io_uring only: with pread they stay buffered) and zero with
  --direct=off, which is also checked for the same data.

The served directory lives under the test's temp dir; where its file
system has no direct I/O (statx STATX_DIOALIGN), the test skips, loudly.
"""

import ctypes
import os
import random
import re

import pytest

import util
from util import MiB

SIZES = [0, 1, 4095, 4096, 4097, MiB - 1, MiB, MiB + 1, 5 * MiB + 123]
BACKENDS = ['uring', 'posix']

STATX_DIOALIGN = 0x2000
AT_EMPTY_PATH = 0x1000


def _dio_align(path):
    """(mem, offset) alignment of direct I/O on the file system of the
    directory `path`, or None when it has none (statx tells it for
    regular files only: a probe file)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(256)
    probe = os.path.join(path, '.dio-probe')
    fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.unlink(probe)
    try:
        if libc.statx(fd, b'', AT_EMPTY_PATH, STATX_DIOALIGN, buf) != 0:
            return None
    finally:
        os.close(fd)
    mask = int.from_bytes(buf.raw[0:4], 'little')
    # struct statx: stx_dio_mem_align at 0x98, stx_dio_offset_align at 0x9c
    mem = int.from_bytes(buf.raw[0x98:0x9c], 'little')
    off = int.from_bytes(buf.raw[0x9c:0xa0], 'little')
    if not mask & STATX_DIOALIGN or not mem or not off:
        return None
    return mem, off


def _drop_cached(path):
    """Makes the server's next reads of `path` cold: written back and out
    of the page cache (the server's, not the whole machine's)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _server(io, direct):
    return '%s --io=%s --direct=%s --debug' % (
        util.server_bin(util.build_dir()), io, direct)


def _direct_counts(log):
    """Sums the server's per-connection direct I/O counts."""
    found = re.findall(r'direct I/O: (\d+) reads, (\d+) writes', log)
    assert found, 'no direct I/O counts in the server log:\n' + util.tail(log)
    return (sum(int(r) for r, _ in found), sum(int(w) for _, w in found))


def _content(seed, size):
    return random.Random(seed).randbytes(size)


def _run_sizes(mounter, src, io, direct):
    """Writes every size through one mount and reads it back through
    another: returns the direct (reads, writes) of both."""
    m = mounter(src=src, server=_server(io, direct))
    for size in SIZES:
        with open(os.path.join(m.mnt, 'f%d' % size), 'wb') as f:
            f.write(_content(size, size))
    m.stop()
    reads, writes = _direct_counts(m.log())
    for size in SIZES:
        p = os.path.join(src, 'f%d' % size)
        with open(p, 'rb') as f:
            assert f.read() == _content(size, size), 'size %d on the server' % size
        _drop_cached(p)
    m = mounter(src=src, server=_server(io, direct))
    for size in SIZES:
        with open(os.path.join(m.mnt, 'f%d' % size), 'rb') as f:
            got = f.read()
        assert got == _content(size, size), 'size %d read back' % size
    m.stop()
    r, w = _direct_counts(m.log())
    return reads + r, writes + w


@pytest.fixture
def src(tmp_path):
    """The served directory, on a file system with direct I/O."""
    d = tmp_path / 'src'
    d.mkdir()
    if not _dio_align(str(d)):
        pytest.skip('no direct I/O on %s (statx STATX_DIOALIGN): the '
                    'direct path cannot be tested here' % d)
    return d


@pytest.mark.parametrize('io', BACKENDS)
def test_awkward_sizes(mounter, src, io):
    reads, writes = _run_sizes(mounter, str(src), io, 'auto')
    # How the client cuts a file into WRITEs and READs is its own
    # business; 5 MiB + 123 has whole aligned MiB in it either way.
    assert writes > 0, 'no WRITE went direct'
    if io == 'uring':
        assert reads > 0, 'no READ went direct'
    else:
        assert reads == 0, 'READs went direct with pread'
    for p in src.iterdir():
        p.unlink()
    reads, writes = _run_sizes(mounter, str(src), io, 'off')
    assert (reads, writes) == (0, 0)


@pytest.mark.parametrize('io', BACKENDS)
def test_mixed_handles_and_truncate(mounter, src, io):
    rnd = random.Random(12)
    size = 6 * MiB + 321
    model = bytearray(size)
    m = mounter(src=str(src), server=_server(io, 'auto'))
    path = os.path.join(m.mnt, 'mixed')
    big = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    small = os.open(path, os.O_RDWR)
    try:
        def put(fd, off, data):
            os.pwrite(fd, data, off)
            end = off + len(data)
            if end > len(model):
                model.extend(bytes(end - len(model)))
            model[off:end] = data

        for rnd_pass in range(2):
            for i in range(6):
                put(big, i * MiB, rnd.randbytes(MiB))
                # Small unaligned writes into the same MiB, buffered,
                # through the other handle, sent behind the big one.
                for _ in range(3):
                    off = i * MiB + rnd.randrange(MiB - 5000)
                    put(small, off, rnd.randbytes(rnd.randrange(1, 5000)))
            os.fsync(big)
            os.fsync(small)
            # Truncate in the middle of a MiB, then grow again past it.
            cut = 3 * MiB + 777 if rnd_pass == 0 else 5 * MiB + 1
            os.ftruncate(small, cut)
            del model[cut:]
            put(big, 4 * MiB, rnd.randbytes(MiB))
            put(small, size - 321, rnd.randbytes(321))
            os.fsync(small)
    finally:
        os.close(big)
        os.close(small)
    m.stop()
    _, writes = _direct_counts(m.log())
    assert writes > 0, 'no WRITE went direct'
    with open(os.path.join(str(src), 'mixed'), 'rb') as f:
        assert f.read() == bytes(model), 'the server file differs'
    _drop_cached(os.path.join(str(src), 'mixed'))
    m = mounter(src=str(src), server=_server(io, 'auto'))
    with open(os.path.join(m.mnt, 'mixed'), 'rb') as f:
        assert f.read() == bytes(model), 'read back through the mount'
    m.stop()
    reads, _ = _direct_counts(m.log())
    assert (reads > 0) == (io == 'uring'), 'direct READs: %d' % reads
