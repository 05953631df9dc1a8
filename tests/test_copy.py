# SPDX-License-Identifier: MIT
"""Server-side copy and holes (issue 19).

What must hold:

- `cp` of a file within the mount runs on the server (COPY, the server's
  copy_file_range): no file data crosses the link (the mount's own wire
  counters), and the copy is byte for byte;
- copy_file_range with offsets and lengths that are not page-aligned,
  into a file whose old bytes the kernel has cached, past the
  destination's end and past the source's end, gives what a local copy
  gives, and reads and stat through the mount see it at once;
- writes made just before the copy (still in write-behind) are copied;
- a server whose copy_file_range fails (EXDEV, EOPNOTSUPP: a test fault)
  copies with its own reads and writes, still without the link;
- an old server without the feature: the copy still works (the kernel
  copies through reads and writes) and SEEK_DATA/SEEK_HOLE answer as a
  file system without holes does;
- SEEK_DATA/SEEK_HOLE through the mount equal the server's own answers,
  data far beyond a large hole included, and after a write through the
  mount;
- `cp --sparse=always` of a sparse file off the mount sends only about
  its data over the link;
- `cp --reflink=always` fails with a clear EOPNOTSUPP (FUSE has no
  FICLONE: the kernel answers it).
"""

import errno
import os
import random
import subprocess
import time

import pytest

import util
from util import MiB

P = os.path.join
GiB = 1024 * MiB


def stats(mnt):
    text = os.getxattr(mnt, 'user.qftfs.stats').decode()
    return {k: int(v) for k, v in (l.split() for l in text.splitlines())}


def wire(mnt):
    s = stats(mnt)
    return s['wire_sent'] + s['wire_received']


def sha(path):
    return util.sha256_file(path)


def fault_mount(mounter, tmp_path, build, value):
    """A mount whose server runs with QFTFS_FAULT_COPY=value."""
    wrap, _ = util.fault_server(tmp_path, build, 'QFTFS_FAULT_COPY', value)
    return mounter(server=wrap)


def extents(path):
    """[(data, hole), ...] of a file, by SEEK_DATA/SEEK_HOLE."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        while True:
            try:
                d = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:
                assert e.errno == errno.ENXIO, e
                return out
            h = os.lseek(fd, d, os.SEEK_HOLE)
            out.append((d, h))
            off = h
    finally:
        os.close(fd)


def seek_answers(path, offsets):
    """What SEEK_DATA and SEEK_HOLE say from each offset (an errno name
    where they fail)."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in offsets:
            for whence in (os.SEEK_DATA, os.SEEK_HOLE):
                try:
                    out.append(os.lseek(fd, off, whence))
                except OSError as e:
                    out.append(errno.errorcode[e.errno])
    finally:
        os.close(fd)
    return out


def make_sparse(path, size, pieces):
    """A sparse file of `size` with random data at (offset, length)."""
    rng = random.Random(19)
    with open(path, 'wb') as f:
        f.truncate(size)
        for off, n in pieces:
            f.seek(off)
            f.write(rng.randbytes(n))


def holes_supported(path):
    """Whether the file system under the test's files tracks holes."""
    probe = path + '.probe'
    make_sparse(probe, 8 * MiB, [(4 * MiB, 4096)])
    try:
        return extents(probe) and extents(probe)[0][0] > 0
    finally:
        os.unlink(probe)


# --- copy --------------------------------------------------------------

def test_cp_within_mount_moves_no_data(mount):
    src, mnt = mount
    size = 256 * MiB
    util.write_random_file(P(src, 'big.img'), size, seed=1)
    before, s0 = wire(mnt), stats(mnt)
    subprocess.run(['cp', P(mnt, 'big.img'), P(mnt, 'backup.img')],
                   check=True, timeout=300)
    moved = wire(mnt) - before
    s1 = stats(mnt)
    # The OPEN of the source brings its first 128 KiB with the answer
    # (for a reader); nothing else of the file may cross.
    assert moved < 1 * MiB, (moved, s1)
    assert s1['copies_on_server'] > s0['copies_on_server']
    assert s1['bytes_copied_on_server'] - s0['bytes_copied_on_server'] \
        == size
    assert os.stat(P(mnt, 'backup.img')).st_size == size
    assert sha(P(src, 'backup.img')) == sha(P(src, 'big.img'))
    assert sha(P(mnt, 'backup.img')) == sha(P(src, 'big.img'))


def test_copy_file_range_unaligned(mount):
    src, mnt = mount
    rng = random.Random(5)
    a = rng.randbytes(3 * MiB + 777)
    b = rng.randbytes(MiB + 5)
    with open(P(src, 'a'), 'wb') as f:
        f.write(a)
    with open(P(src, 'b'), 'wb') as f:
        f.write(b)
    expect = bytearray(b)
    # The kernel caches b's old bytes first: the copy must replace them.
    with open(P(mnt, 'b'), 'rb') as f:
        assert f.read() == b
    cases = [(1, 4097, 12345), (4095, 3, 65537), (123457, MiB - 11, 999),
             # past the destination's end: it grows, with a hole between
             (MiB + 99, 2 * MiB + 1, 70001)]
    fi = os.open(P(mnt, 'a'), os.O_RDONLY)
    fo = os.open(P(mnt, 'b'), os.O_WRONLY)
    try:
        for off_in, off_out, n in cases:
            got = os.copy_file_range(fi, fo, n, off_in, off_out)
            assert got == n, (off_in, off_out, n, got)
            if off_out > len(expect):
                expect += bytes(off_out - len(expect))
            expect[off_out:off_out + n] = a[off_in:off_in + n]
            # Read and size through the mount at once, file still open.
            assert os.stat(P(mnt, 'b')).st_size == len(expect)
            with open(P(mnt, 'b'), 'rb') as f:
                assert f.read() == bytes(expect), (off_in, off_out, n)
        # Past the source's end: short, then nothing.
        assert os.copy_file_range(fi, fo, 5000, len(a) - 100, 0) == 100
        expect[0:100] = a[-100:]
        assert os.copy_file_range(fi, fo, 5000, len(a) + 1, 0) == 0
    finally:
        os.close(fi)
        os.close(fo)
    with open(P(mnt, 'b'), 'rb') as f:
        assert f.read() == bytes(expect)
    with open(P(src, 'b'), 'rb') as f:
        assert f.read() == bytes(expect)
    # Every byte was copied by the server.
    assert stats(mnt)['bytes_copied_on_server'] == \
        sum(n for _, _, n in cases) + 100


def test_copy_includes_pending_writes(mount):
    src, mnt = mount
    rng = random.Random(6)
    data = rng.randbytes(8 * MiB + 3)
    patch = rng.randbytes(5000)
    before = wire(mnt)
    with open(P(mnt, 'fresh'), 'wb') as w, open(P(mnt, 'dst'), 'wb') as d:
        # Written through the mount just now: behind the write-behind
        # window, maybe not on the server yet.
        w.write(data)
        w.flush()
        d.write(bytes(100))
        d.flush()
        with open(P(mnt, 'fresh'), 'rb') as r:
            n = os.copy_file_range(r.fileno(), d.fileno(), len(data), 0, 10)
            assert n == len(data)
        # A write just before a copy over it: the copy comes after.
        w.seek(7)
        w.write(patch)
        w.flush()
        with open(P(mnt, 'fresh'), 'rb') as r:
            assert os.copy_file_range(r.fileno(), d.fileno(), 6000, 0,
                                      20) == 6000
    # The 8 MiB went up once (the write), never down nor up again.
    assert wire(mnt) - before < len(data) + 2 * MiB
    expect = bytearray(bytes(10) + data)
    fresh = bytearray(data)
    fresh[7:7 + len(patch)] = patch
    expect[20:6020] = fresh[:6000]
    for root in (src, mnt):
        with open(P(root, 'dst'), 'rb') as f:
            assert f.read() == bytes(expect), root


@pytest.mark.parametrize('fault', ['EXDEV', 'EOPNOTSUPP'])
def test_copy_falls_back_on_the_server(mounter, tmp_path, build, fault):
    m = fault_mount(mounter, tmp_path, build, fault)
    src, mnt = m
    size = 32 * MiB + 4321
    util.write_random_file(P(src, 'f'), size, seed=2)
    before = wire(mnt)
    subprocess.run(['cp', P(mnt, 'f'), P(mnt, 'g')], check=True,
                   timeout=120)
    assert wire(mnt) - before < 1 * MiB
    assert stats(mnt)['bytes_copied_on_server'] == size
    assert sha(P(src, 'g')) == sha(P(src, 'f'))
    assert sha(P(mnt, 'g')) == sha(P(src, 'f'))
    assert 'QFTFS_FAULT_COPY=' + fault in m.log(), util.tail(m.log())


def test_old_server_copies_and_seeks_without_the_feature(mounter, tmp_path,
                                                         build):
    m = fault_mount(mounter, tmp_path, build, 'old')
    src, mnt = m
    size = 8 * MiB + 1
    util.write_random_file(P(src, 'f'), size, seed=3)
    before = wire(mnt)
    subprocess.run(['cp', P(mnt, 'f'), P(mnt, 'g')], check=True,
                   timeout=120)
    # The kernel's copy: down and up again.
    assert wire(mnt) - before > 2 * size
    assert stats(mnt)['copies_on_server'] == 0
    assert sha(P(src, 'g')) == sha(P(src, 'f'))
    with open(P(mnt, 'g'), 'rb') as f, open(P(mnt, 'h'), 'wb') as h:
        assert os.copy_file_range(f.fileno(), h.fileno(), 10) == 10
    with open(P(src, 'h'), 'rb') as f:
        assert f.read() == open(P(src, 'f'), 'rb').read(10)
    # No holes known: data from anywhere before the end, one hole there.
    make_sparse(P(src, 's'), 64 * MiB, [(32 * MiB, 4096)])
    util.until_visible(P(mnt, 's'))
    assert seek_answers(P(mnt, 's'), [0, 5, 64 * MiB - 1, 64 * MiB]) == \
        [0, 64 * MiB, 5, 64 * MiB, 64 * MiB - 1, 64 * MiB, 'ENXIO',
         'ENXIO']
    assert stats(mnt)['seeks_on_server'] == 0
    assert 'closing connection' not in m.log(), util.tail(m.log())


def test_reflink_always_is_a_clear_error(mount):
    """FICLONE never reaches a FUSE file system (the kernel has no
    remap_file_range for it): cp says so, and --reflink=auto (cp's
    default) copies on the server instead."""
    src, mnt = mount
    util.write_random_file(P(src, 'f'), MiB, seed=4)
    r = util.run(['cp', '--reflink=always', P(mnt, 'f'), P(mnt, 'g')],
                 timeout=60)
    assert r.returncode != 0
    assert 'Operation not supported' in r.stderr, r.stderr
    before = wire(mnt)
    subprocess.run(['cp', '--reflink=auto', P(mnt, 'f'), P(mnt, 'h')],
                   check=True, timeout=60)
    assert wire(mnt) - before < 512 * 1024
    assert sha(P(src, 'h')) == sha(P(src, 'f'))


# --- holes -------------------------------------------------------------

def test_seek_data_and_hole_equal_the_servers(mount):
    src, mnt = mount
    if not holes_supported(P(src, 'x')):
        pytest.skip('the file system under %s does not track holes' % src)
    size = 8 * GiB
    pieces = [(0, 4096), (3 * MiB + 5, 70000), (100 * MiB, 1),
              # far beyond a large hole
              (6 * GiB + 12345, 2 * MiB)]
    make_sparse(P(src, 's'), size, pieces)
    offsets = sorted({0, 1, 4095, 4096, 5 * MiB, 100 * MiB - 1,
                      100 * MiB + 4096, 2 * GiB, 6 * GiB, 6 * GiB + 12345,
                      6 * GiB + 3 * MiB, size - 1, size, size + 1})
    assert extents(P(mnt, 's')) == extents(P(src, 's'))
    assert seek_answers(P(mnt, 's'), offsets) == \
        seek_answers(P(src, 's'), offsets)
    # SEEK_DATA from far before the data far beyond the hole finds it.
    fd = os.open(P(mnt, 's'), os.O_RDONLY)
    try:
        assert os.lseek(fd, 200 * MiB, os.SEEK_DATA) == \
            extents(P(src, 's'))[-1][0]
    finally:
        os.close(fd)
    s = stats(mnt)
    # SEEK_HOLE from the data a SEEK_DATA found is answered from its
    # reply (which says where that data ends).
    assert s['seeks_on_server'] > 0 and s['seeks_local'] > 0, s

    # A write through the mount, not closed yet: the next seek sees it.
    with open(P(mnt, 's'), 'r+b') as f:
        f.seek(4 * GiB)
        f.write(b'z' * 8192)
        f.flush()
        fd = f.fileno()
        at = os.lseek(fd, 3 * GiB, os.SEEK_DATA)
        assert 4 * GiB - 4096 < at <= 4 * GiB, at
        seen = seek_answers(P(mnt, 's'), offsets + [4 * GiB - 1])
    assert seen == seek_answers(P(src, 's'), offsets + [4 * GiB - 1])


def test_seek_in_a_file_without_holes_asks_nobody(mount):
    """grep asks SEEK_HOLE of every file it reads, to skip holes: where
    the file's attributes show blocks for every byte, there is no hole to
    find, and the client answers (the size) without a round trip -- equal
    to the server's own answers; a sparse file is still asked about."""
    src, mnt = mount
    sizes = {'one': 1, 'page': 4096, 'odd': 100003, 'big': 3 * MiB + 17}
    for name, size in sizes.items():
        with open(P(src, name), 'wb') as f:
            f.write(os.urandom(size))
    sparse = holes_supported(P(src, 'x'))
    if sparse:
        make_sparse(P(src, 's'), 64 * MiB, [(MiB, 4096)])
    # Made before the mount lists them: a name made on the server
    # behind a leased listing shows only once its notification came.
    os.listdir(mnt)
    before = stats(mnt)
    for name, size in sizes.items():
        offsets = [0, 1, size // 2, size - 1, size, size + 1, size + 4096]
        assert seek_answers(P(mnt, name), offsets) == \
            seek_answers(P(src, name), offsets), name
    s = stats(mnt)
    assert s['seeks_on_server'] == before['seeks_on_server'], s
    assert s['seeks_local'] > before['seeks_local'], s
    if sparse:
        offsets = [0, MiB, MiB + 4096, 64 * MiB - 1]
        assert seek_answers(P(mnt, 's'), offsets) == \
            seek_answers(P(src, 's'), offsets)
        assert stats(mnt)['seeks_on_server'] > s['seeks_on_server']


def test_seek_data_far_beyond_a_large_hole(mount):
    """The ext4 difference of issue 19: SEEK_DATA from the start of a
    file whose only data lies 12 GiB in finds it (FUSE's default answer
    said "data here" before the end and ENXIO after it)."""
    src, mnt = mount
    if not holes_supported(P(src, 'x')):
        pytest.skip('the file system under %s does not track holes' % src)
    make_sparse(P(src, 'far'), 16 * GiB, [(12 * GiB + 4096, 4096)])
    fd = os.open(P(mnt, 'far'), os.O_RDONLY)
    try:
        assert os.lseek(fd, 0, os.SEEK_DATA) == 12 * GiB + 4096
        assert os.lseek(fd, 0, os.SEEK_HOLE) == 0
        assert os.lseek(fd, 12 * GiB + 4096, os.SEEK_HOLE) == \
            12 * GiB + 8192
        with pytest.raises(OSError) as e:
            os.lseek(fd, 12 * GiB + 8192, os.SEEK_DATA)
        assert e.value.errno == errno.ENXIO
    finally:
        os.close(fd)


def test_sparse_cp_sends_only_the_data(mount, tmp_path):
    src, mnt = mount
    if not holes_supported(P(src, 'x')):
        pytest.skip('the file system under %s does not track holes' % src)
    size = GiB
    data = 10 * MiB
    # Five 2 MiB pieces spread over the gigabyte.  Besides the data, what
    # may cross: the 128 KiB the OPEN brings, and the kernel's read-ahead
    # past each piece into the hole (a few hundred KiB each; less once
    # the client heard where that hole ends, which on a loaded machine
    # may come too late).  Measured here: 10 % above the data.
    pieces = [(i * 200 * MiB + 7 * MiB + 4096, 2 * MiB) for i in range(5)]
    make_sparse(P(src, 'image'), size, pieces)
    out = str(tmp_path / 'out.img')
    before = wire(mnt)
    subprocess.run(['cp', '--sparse=always', P(mnt, 'image'), out],
                   check=True, timeout=300)
    moved = wire(mnt) - before
    print('sparse cp: %d bytes on the wire for %d of data' % (moved, data))
    assert moved < data * 1.5, moved
    assert os.stat(out).st_size == size
    assert sha(out) == sha(P(src, 'image'))
    assert os.stat(out).st_blocks * 512 < 2 * data


# --- the server's checks, in raw frames ---------------------------------

def wire_start(wire_server, root, features=None):
    import wire
    s = wire_server(str(root), hello=False)
    r = s.hello(features=wire.FEAT_COPY | wire.FEAT_HOLES
                if features is None else features)
    assert r.status == 0, r
    return s, r['features']


def wire_open(s, h, path, flags):
    r = s.call('OPEN', handle=h, path=path, opflags=flags, length=0)
    assert r.status == 0, (path, r)


def test_server_checks_copy_and_seek(wire_server, tmp_path):
    """Every field from the network is checked before the server acts:
    handles that are not open files of the right mode, overlapping
    ranges in one file, lengths and offsets out of range, unknown flags;
    and a refused request changes nothing."""
    import wire
    root = tmp_path / 'root'
    (root / 'd').mkdir(parents=True)
    (root / 'a').write_bytes(b'A' * 10000)
    (root / 'b').write_bytes(b'B' * 100)
    s, feat = wire_start(wire_server, root)
    assert feat & wire.FEAT_COPY and feat & wire.FEAT_HOLES, hex(feat)
    wire_open(s, 1, 'a', wire.O_RDONLY)
    wire_open(s, 2, 'b', wire.O_RDWR)
    wire_open(s, 3, 'b', wire.O_WRONLY | wire.O_APPEND)
    wire_open(s, 4, 'b', wire.O_WRONLY)
    assert s.call('OPENDIR', handle=5, path='d').status == 0
    wire_open(s, 6, 'a', wire.O_WRONLY)

    def copy(hin, hout, off=0, off2=0, n=10, flags=0):
        return s.call('COPY', handle=hin, offset=off, handle2=hout,
                      offset2=off2, length=n, opflags=flags)

    assert copy(1, 2, 0, 50, 20).err == 'OK'
    assert copy(1, 2, 0, 50, 20)['count'] == 20
    assert copy(1, 9).err == 'EBADF'            # not open
    assert copy(1, 5).err == 'EBADF'            # a directory handle
    assert copy(5, 2).err == 'EBADF'
    assert copy(6, 2).err == 'EBADF'            # source not readable
    assert copy(2, 1).err == 'EBADF'            # destination read-only
    assert copy(1, 3).err == 'EBADF'            # appending destination
    assert copy(2, 2, 0, 5, 10).err == 'EINVAL'  # overlap in one file
    assert copy(2, 4, 0, 5, 10).err == 'EINVAL'  # the same file, another
    assert copy(1, 2, flags=1).err == 'EINVAL'  # no flag is defined
    assert copy(1, 0).err == 'EINVAL'           # handle2 0
    assert copy(1, 2, n=(1 << 30) + 1).err == 'EINVAL'
    assert copy(1, 2, off=(1 << 63) - 5).err == 'EINVAL'
    assert copy(1, 2, off2=(1 << 63) - 5).err == 'EINVAL'
    assert copy(1, 2, off=1 << 63).err == 'EINVAL'
    assert copy(1, 2, 20000, 0, 10)['count'] == 0   # past the source's end
    assert (root / 'b').read_bytes() == b'B' * 50 + b'A' * 20 + b'B' * 30

    def seek(h, off, flags):
        return s.call('SEEK', handle=h, offset=off, opflags=flags)

    r = seek(1, 0, wire.SEEK_DATA)
    assert (r['offset'], r['offset2']) == (0, 10000)    # the hole after
    r = seek(1, 5, wire.SEEK_HOLE)
    assert (r['offset'], r['offset2']) == (10000, 0)    # no data after
    assert seek(1, 10000, wire.SEEK_DATA).err == 'ENXIO'
    assert seek(1, 0, 0).err == 'EINVAL'
    assert seek(1, 0, 3).err == 'EINVAL'
    assert seek(1, 0, 4).err == 'EINVAL'
    assert seek(5, 0, wire.SEEK_DATA).err == 'EBADF'
    assert seek(9, 0, wire.SEEK_DATA).err == 'EBADF'
    assert s.call('PING').status == 0


@pytest.mark.parametrize('op', ['COPY', 'SEEK'])
def test_server_closes_on_an_ungranted_op(wire_server, tmp_path, op):
    """A COPY or SEEK where HELLO did not grant the feature closes the
    connection, as a server before the feature does (unknown opcode)."""
    import wire
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'a').write_bytes(b'a')
    s, feat = wire_start(wire_server, root, features=0)
    assert not feat & (wire.FEAT_COPY | wire.FEAT_HOLES)
    wire_open(s, 1, 'a', wire.O_RDWR)
    fields = dict(handle=1, offset=0, opflags=wire.SEEK_DATA) if op == 'SEEK' \
        else dict(handle=1, offset=0, handle2=1, offset2=5, length=1,
                  opflags=0)
    s.refused = True        # it exits non-zero, on purpose
    s.send(op, **fields)
    r = s.recv()
    assert r is None or r.err == 'EPROTO', r
    assert s.closed_by_peer()
    assert 'without the HELLO feature' in s.log(), s.log()


def test_zeros_known_for_a_hole_give_way_to_writes(mount):
    """The client answers reads inside a hole the server just reported
    with zeros (the kernel's read-ahead past an extent); a write through
    the mount into that hole, by another descriptor, is read back at
    once, and one made on the server is seen once attr_timeout (1 s by
    default) has passed."""
    src, mnt = mount
    if not holes_supported(P(src, 'x')):
        pytest.skip('the file system under %s does not track holes' % src)
    make_sparse(P(src, 'h'), 64 * MiB, [(0, MiB), (48 * MiB, MiB)])
    fd = os.open(P(mnt, 'h'), os.O_RDONLY)
    try:
        assert os.lseek(fd, 0, os.SEEK_HOLE) == MiB
        # The hole's end, asked behind the SEEK_HOLE, is known soon.
        assert os.lseek(fd, MiB, os.SEEK_DATA) == 48 * MiB
        assert os.pread(fd, 4096, 2 * MiB) == bytes(4096)
        with open(P(mnt, 'h'), 'r+b') as w:
            w.seek(4 * MiB)
            w.write(b'w' * 4096)
        assert os.pread(fd, 4096, 4 * MiB) == b'w' * 4096
        assert os.lseek(fd, MiB, os.SEEK_DATA) == 4 * MiB
        # Behind the client's back, where the kernel has no page yet,
        # in the hole after the new data, which the client learns of.
        assert os.lseek(fd, 4 * MiB, os.SEEK_HOLE) == 4 * MiB + 4096
        time.sleep(0.2)
        with open(P(src, 'h'), 'r+b') as w:
            w.seek(20 * MiB)
            w.write(b's' * 4096)
        time.sleep(1.2)
        assert os.pread(fd, 4096, 20 * MiB) == b's' * 4096
    finally:
        os.close(fd)


def test_long_copy_is_not_a_lost_link(mounter, tmp_path, build):
    """A COPY the server's storage takes over twice the request deadline
    for succeeds: the server sends PROGRESS frames while it copies, as
    for a long fdatasync (QFTFS_FAULT_COPY=slow: 1.5 s per MiB)."""
    wrap, _ = util.fault_server(tmp_path, build, 'QFTFS_FAULT_COPY', 'slow')
    m = mounter(server=wrap, opts=['timeout=3'])
    src, mnt = m
    util.write_random_file(P(src, 'f'), 5 * MiB, seed=8)
    with open(P(mnt, 'f'), 'rb') as r, open(P(mnt, 'g'), 'wb') as w:
        t0 = time.monotonic()
        assert os.copy_file_range(r.fileno(), w.fileno(), 5 * MiB) == \
            5 * MiB
        took = time.monotonic() - t0
    assert took > 2 * 3, 'the copy took %.1f s: not slow enough to test' \
        % took
    assert sha(P(src, 'g')) == sha(P(src, 'f'))
    s = stats(mnt)
    assert s['reconnects'] == 0 and s['copies_on_server'] == 1, s
    assert 'no reply' not in m.log(), util.tail(m.log())
