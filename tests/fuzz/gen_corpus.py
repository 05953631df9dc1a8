#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/.

Each target gets a few dozen small inputs in its own input format (see the
comment at the top of tests/fuzz/fuzz_<target>.c): real frames encoded with
tests/wire.py, so that the fuzzers start from messages the code accepts,
plus the classic malformed ones (truncated, oversized, unknown opcode,
invalid names) that a corpus replay must survive.

Seeds are named seed-*; the generator replaces only those, so minimized
inputs found while fuzzing (found-*) stay.  Deterministic: running it twice
gives the same files.  Usage: gen_corpus.py [OUTDIR]
"""

import ctypes
import ctypes.util
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import wire  # noqa: E402  (tests/wire.py)

F_LZ4 = 0x0002
FEAT_LZ4, FEAT_LZ4_AUTO = 0x1, 0x2
OP_PING = 28
RENAME_NOREPLACE, RENAME_EXCHANGE = 0x1, 0x2
READDIR_PLUS, READDIR_EOF = 0x1, 0x1
OPEN_DATA, OPEN_EOF = wire.OPEN_DATA, wire.OPEN_EOF
# Lazy handles: the open flag and its HELLO feature.
O_LAZY, FEAT_LAZY = 0x200, 0x20
SCAN_WATCH, SCAN_EOF, SCAN_TRUNCATED = (wire.SCAN_WATCH, wire.SCAN_EOF,
                                        wire.SCAN_TRUNCATED)
S_IFCHR = 0o020000
SET_ATIME, SET_MTIME, SET_ATIME_NOW, SET_MTIME_NOW = 0x10, 0x20, 0x40, 0x80
MAX_DATA = 1 << 20

# ---------------------------------------------------------------------------
# Encoding helpers on top of wire.py


def req(op, rid, **fields):
    return wire.encode_request(op, rid, **fields)


def attr(mode=wire.S_IFREG | 0o644, size=13, ino=42, flags=0):
    n = len(wire.Attr.FMT.unpack(bytes(wire.Attr.SIZE)))
    v = [ino, mode, 1, 0, 0, 0, size, 8, 4096,
         1700000000, 1, 1700000000, 2, 1700000000, 3]
    v += [flags] + [0] * (n - len(v) - 1)
    return wire.Attr.FMT.pack(*v[:n])


def statfs():
    return struct.pack('>9Q', 4096, 4096, 1000, 500, 400, 100, 50, 40, 255)


def rep(op, rid, status=0, errmsg=None, **fields):
    """A reply frame; attr and statfs fields take their encoded bytes."""
    code, _, rfields = wire.OPS[op]
    p = struct.pack('>I', status)
    if status:
        p += wire.enc_str(errmsg or b'')
    else:
        for f in rfields:
            v = fields.get(f, b'' if f in wire.STR | wire.BLOB else 0)
            p += v if f in ('attr', 'statfs') else wire.enc_field(f, v)
    return wire.frame(code, p, wire.F_REPLY, rid)


def dirent(name, ino=1, off=1, typ=wire.S_IFREG, a=None):
    d = struct.pack('>QQI', ino, off, typ) + wire.enc_str(name)
    return d + (b'\x01' + a if a is not None else b'\x00')


def hello(rid=0, version=wire.VERSION, features=0, magic=wire.MAGIC):
    return req('HELLO', rid, magic=magic, version=version, features=features)


def hello_v1_rep(rid, version=1, features=0):
    """A HELLO reply as version 1 sent it: no uid, no gid."""
    return wire.frame('HELLO', struct.pack('>IIII', 0, wire.MAGIC, version,
                                           features), wire.F_REPLY, rid)


def scan_blob(base=1):
    """SCAN records: two directories below the scanned one, every kind."""
    return wire.enc_scan(base, [
        ('entry', 0, 'file', attr()),
        ('entry', 0, 'sub', attr(wire.S_IFDIR | 0o755)),
        ('end', 0, 0),
        ('entry', base, 'deeper', attr(wire.S_IFDIR | 0o700)),
        ('entry', base, 'link', attr(wire.S_IFLNK | 0o777)),
        ('end', base, 6),
        ('end', base + 1, 0)])


def ping(rid, reply=False):
    if reply:
        return wire.frame(OP_PING, struct.pack('>I', 0), wire.F_REPLY, rid)
    return wire.frame(OP_PING, b'', 0, rid)


_lz4 = None


def lz4_block(data):
    """A raw LZ4 block made by the system's liblz4 (deterministic)."""
    global _lz4
    if _lz4 is None:
        _lz4 = ctypes.CDLL(ctypes.util.find_library('lz4') or 'liblz4.so.1')
    cap = _lz4.LZ4_compressBound(len(data))
    out = ctypes.create_string_buffer(cap)
    n = _lz4.LZ4_compress_default(data, out, len(data), cap)
    assert n > 0
    return out.raw[:n]


def lz4_chunk(data, raw=False):
    """An lz4chunk; RAW when asked or when LZ4 would not be shorter."""
    z = None if raw else lz4_block(data)
    if z is None or len(z) >= len(data):
        return b'\x00' + struct.pack('>I', len(data)) + data
    return b'\x01' + struct.pack('>I', len(data)) + z


def lz4_frame(frame, raw=False):
    """The QFT_F_LZ4 form of an encoded frame."""
    n, op, flags, rid = wire.HDR.unpack(frame[:wire.HDR.size])
    z = lz4_chunk(frame[wire.HDR.size:], raw)
    return wire.HDR.pack(len(z), op, flags | F_LZ4, rid) + z


def record(body, tag=b'\xaa' * 16):
    """A sealed record's shape with a tag that cannot be right."""
    return struct.pack('>I', len(body) + len(tag)) + body + tag


def pieces(*frames):
    """fuzz_frame mode 4: [u16 length][bytes] per record to seal."""
    return b''.join(struct.pack('>H', len(f)) + f for f in frames)


# ---------------------------------------------------------------------------
# fuzz_frame: mode byte, then the subject


# Change notification: NOTIFY frames (opcode 30, flag 0x4, id 0).
OP_NOTIFY, OP_UNWATCH, F_NOTIFY, FEAT_NOTIFY = 30, 31, 0x0004, 0x4
CHANGED, GONE, ALL = 1, 2, 3
# Progress: PROGRESS frames (opcode 33, flag 0x8, the request's id).
OP_PROGRESS, F_PROGRESS = 33, 0x0008


def notify(ino, kind, name=b'', flags=F_NOTIFY, rid=0, op=OP_NOTIFY):
    return wire.frame(op, struct.pack('>QI', ino, kind) + wire.enc_str(name),
                      flags, rid)


def frame_seeds():
    s = {}
    text = b'qftfs ' * 700  # compressible, > QFT_CHAN_LZ4_MIN
    # Mode 0: one frame.
    one = {
        'hello-req': hello(1, features=FEAT_LZ4),
        'hello-rep': rep('HELLO', 1, magic=wire.MAGIC, version=wire.VERSION,
                         features=FEAT_LZ4, uid=1000, gid=1000),
        'hello-rep-v1': hello_v1_rep(1, features=FEAT_LZ4),
        'open-req': req('OPEN', 30, handle=3, path='d/f', opflags=0,
                        length=65536),
        'open-rep-data': rep('OPEN', 30, attr=attr(), opflags=OPEN_DATA |
                             OPEN_EOF, data=b'first bytes'),
        'flush-rep': rep('FLUSH', 31, attr=attr(size=4096)),
        'scan-req': req('SCAN', 32, handle=2, length=MAX_DATA,
                        opflags=SCAN_WATCH),
        'scan-rep': rep('SCAN', 32, opflags=SCAN_EOF, data=scan_blob()),
        'scan-rep-later': rep('SCAN', 33, opflags=SCAN_EOF | SCAN_TRUNCATED,
                              data=scan_blob(base=40)),
        'lstat-req': req('LSTAT', 2, path='d/f'),
        'lstat-rep': rep('LSTAT', 2, attr=attr()),
        'setattr-req': req('SETATTR', 3, handle=0, path='a',
                           valid=wire.SET_MODE | SET_MTIME, mode=0o600,
                           mtime=(5, 6)),
        'create-req': req('CREATE', 4, handle=7, path='d', name='n',
                          opflags=wire.O_RDWR | wire.O_EXCL, mode=0o644),
        'create-req-lazy': req('CREATE', 4, handle=7, path='d', name='n',
                               opflags=wire.O_WRONLY | O_LAZY, mode=0o644),
        'open-req-lazy': req('OPEN', 30, handle=3, path='d/f',
                             opflags=wire.O_RDWR | wire.O_TRUNC | O_LAZY),
        'bad-open-flag': req('OPEN', 30, handle=3, path='d/f',
                             opflags=O_LAZY << 1),
        'rename-req': req('RENAME', 5, path='a', name='b', path2='c',
                          name2='d', opflags=RENAME_NOREPLACE),
        'read-rep': rep('READ', 6, data=b'file data'),
        'write-req': req('WRITE', 7, handle=1, offset=4096, data=b'xyz'),
        'write-rep': rep('WRITE', 7, count=3),
        'readdir-req': req('READDIR', 8, handle=2, offset=0, length=4096,
                           opflags=READDIR_PLUS),
        'readdir-rep': rep('READDIR', 8, opflags=READDIR_EOF,
                           data=dirent('.', typ=wire.S_IFDIR) +
                           dirent('..', off=2, typ=wire.S_IFDIR) +
                           dirent('file', off=3, a=attr()) +
                           dirent('sub', off=4, typ=wire.S_IFDIR,
                                  a=attr(wire.S_IFDIR | 0o755))),
        'readlink-rep': rep('READLINK', 9, target='../x/y'),
        'symlink-req': req('SYMLINK', 10, path='', name='s', target='/abs'),
        'statfs-rep': rep('STATFS', 11, statfs=statfs()),
        'getxattr-rep': rep('GETXATTR', 12, count=5, data=b'value'),
        'error-rep': rep('OPEN', 13, status=2, errmsg=b'no such file'),
        'ping-req': ping(14),
        # Malformed: each must be refused, none may crash.
        'bad-truncated': req('LSTAT', 20, path='abc')[:-3],
        'bad-oversized': wire.frame('READ', b'', 0, 21, length=0xffffffff),
        'bad-unknown-op': wire.frame(999, b'', 0, 22),
        'bad-flags': wire.frame('LSTAT', wire.enc_str(''), 0x8000, 23),
        'bad-name-slash': req('MKDIR', 24, path='', name='a/b', mode=0o755),
        'bad-path-dotdot': req('LSTAT', 25, path='a/../b'),
        'bad-dirent-slash': rep('READDIR', 26, opflags=0,
                                data=dirent('a/b')),
        'bad-attr-mode': rep('LSTAT', 27, attr=attr(mode=0o777)),
        'bad-hello-magic': hello(28, magic=0x12345678),
        'bad-trailing': req('CLOSE', 29, handle=1) + b'\0',
        'bad-open-eof': rep('OPEN', 34, attr=attr(), opflags=OPEN_EOF),
        'bad-scan-index': rep('SCAN', 35, opflags=0, data=wire.enc_scan(
            1, [('entry', 1, 'x', attr())])),
        'bad-scan-name': rep('SCAN', 36, opflags=0, data=wire.enc_scan(
            1, [('entry', 0, 'a/b', attr())])),
        'bad-scan-tail': rep('SCAN', 37, opflags=0,
                             data=scan_blob() + b'\x02\0\0'),
        # Change notification.
        'notify-changed': notify(5, CHANGED, b'entry'),
        'notify-dir': notify(5, CHANGED),
        'notify-gone': notify(6, GONE),
        'notify-all': notify(0, ALL),
        'syncfs-req': req('SYNCFS', 38),
        'syncfs-rep': rep('SYNCFS', 39),
        'bad-syncfs-tail': wire.frame(32, b'\0', 0, 40),
        'unwatch-req': wire.frame(OP_UNWATCH, struct.pack('>Q', 5), 0, 30),
        'unwatch-rep': wire.frame(OP_UNWATCH, struct.pack('>I', 0),
                                  wire.F_REPLY, 30),
        'bad-notify-kind': notify(5, 9),
        'bad-notify-gone-name': notify(6, GONE, b'x'),
        'bad-notify-id': notify(5, CHANGED, rid=3),
        'bad-notify-reply': notify(5, CHANGED, flags=F_NOTIFY | 1),
        'bad-notify-op': notify(5, CHANGED, op=28),
        'bad-notify-name': notify(5, CHANGED, b'a/b'),
        # PROGRESS (opcode 33, flag 0x8): the id of a request still
        # being worked on, no fields.
        'progress': wire.frame(OP_PROGRESS, b'', F_PROGRESS, 41),
        'bad-progress-id': wire.frame(OP_PROGRESS, b'', F_PROGRESS, 0),
        'bad-progress-field': wire.frame(OP_PROGRESS, b'\0', F_PROGRESS, 41),
        'bad-progress-flag': wire.frame(OP_PROGRESS, b'', 0, 41),
        'bad-progress-op': wire.frame(28, b'', F_PROGRESS, 41),
        'bad-progress-reply': wire.frame(OP_PROGRESS, b'',
                                         F_PROGRESS | wire.F_REPLY, 41),
    }
    for k, v in one.items():
        s['0-' + k] = b'\x00' + v
    # Mode 1: lz4 chunks.
    s['1-raw'] = b'\x01' + lz4_chunk(b'raw bytes', raw=True)
    s['1-lz4'] = b'\x01' + lz4_chunk(text)
    s['1-lz4-short'] = b'\x01' + lz4_chunk(text)[:-7]
    s['1-bad-kind'] = b'\x01' + b'\x07' + lz4_chunk(b'x', raw=True)[1:]
    s['1-bad-length'] = b'\x01' + b'\x01\xff\xff\xff\xff' + b'\x00' * 8
    # Mode 2: plain streams (bit 7: compressed frames were agreed on).
    stream = (hello(1) + req('LSTAT', 2, path='') +
              req('READ', 3, handle=1, offset=0, length=65536) +
              rep('READ', 3, data=text) + ping(4))
    s['2-stream'] = b'\x02' + stream
    s['2-stream-cut'] = b'\x02' + stream[:-5]
    s['2-lz4-refused'] = b'\x02' + lz4_frame(rep('READ', 5, data=text))
    s['2-lz4'] = b'\x82' + lz4_frame(rep('READ', 5, data=text)) + \
        lz4_frame(req('WRITE', 6, handle=1, offset=0, data=text), raw=True)
    s['2-lz4-bad'] = b'\x82' + lz4_frame(rep('READ', 5, data=text))[:-4]
    # Mode 3: sealed streams as they arrive (cipher byte: 0 none, 1 aes,
    # 2 chacha); no tag can be right, so these reach the failure paths.
    s['3-none'] = b'\x03\x00' + record(hello(1))
    s['3-aes'] = b'\x03\x01' + record(req('LSTAT', 2, path='a'))
    s['3-chacha'] = b'\x03\x02' + record(b'\x00' * 40)
    s['3-short-len'] = b'\x03\x01' + struct.pack('>I', 3) + b'abc'
    s['3-huge-len'] = b'\x03\x01' + struct.pack('>I', 0x7fffffff)
    s['3-cut'] = b'\x03\x00' + record(hello(1))[:-9]
    # Mode 4: the harness seals each piece with the test key.
    s['4-none'] = b'\x04\x00' + pieces(hello(1), req('LSTAT', 2, path='a'))
    s['4-aes'] = b'\x04\x01' + pieces(req('OPEN', 3, handle=1, path='a',
                                          opflags=0),
                                      rep('OPEN', 3, attr=attr()))
    s['4-chacha'] = b'\x04\x02' + pieces(rep('READDIR', 4, opflags=1,
                                             data=dirent('x', a=attr())))
    s['4-lz4'] = b'\x84\x01' + pieces(lz4_frame(rep('READ', 5, data=text)))
    s['4-runt'] = b'\x04\x01' + pieces(b'\x00' * 5, hello(1))
    s['4-len-mismatch'] = b'\x04\x02' + pieces(req('LSTAT', 2, path='a') +
                                               b'junk')
    return s


# ---------------------------------------------------------------------------
# fuzz_server: option byte, then the client's stream (ids from 1; the
# harness's own HELLO is id 0).  The served tree (fuzz_server.c, populate):
#   a  big  d/  d/f  d/e/  d/hard  ln->a  dl->d  up->../outside/secret
#   updir->../outside  abs->JAIL/outside/secret  absdir->JAIL/outside
#   dangling->nowhere  loop->loop  fifo

HELLO, WALK, URING, LZ4, LZ4_AUTO = 0x02, 0x01, 0x04, 0x08, 0x10
FOLLOW, NOTIFY, META = 0x20, 0x40, 0x80


class Stream:
    def __init__(self):
        self.rid = 0
        self.out = b''

    def __call__(self, op, **fields):
        self.rid += 1
        self.out += req(op, self.rid, **fields)
        return self

    def raw(self, b):
        self.rid += 1
        self.out += b
        return self


def server_seeds():
    s = {}

    def add(name, opts, st):
        s[name] = bytes([opts]) + (st.out if isinstance(st, Stream) else st)

    t = Stream()
    for p in ('', 'a', 'd/f', 'ln', 'up', 'abs', 'dl/f', 'nope', 'fifo'):
        t('LSTAT', path=p)
    add('lstat', HELLO, t)
    add('lstat-walk', HELLO | WALK, t)

    t = Stream()
    for p in ('ln', 'up', 'abs', 'a', 'loop', 'dangling'):
        t('READLINK', path=p)
    add('readlink', HELLO, t)

    t = (Stream()('OPEN', handle=1, path='a', opflags=wire.O_RDONLY)
         ('READ', handle=1, offset=0, length=4096)
         ('READ', handle=1, offset=5, length=3)
         ('OPEN', handle=2, path='big', opflags=wire.O_RDONLY)
         ('READ', handle=2, offset=0, length=65536)
         ('READ', handle=2, offset=1 << 62, length=10)
         ('FSTAT', handle=1)('CLOSE', handle=1)('CLOSE', handle=2)
         ('READ', handle=1, offset=0, length=1))
    add('read', HELLO, t)
    add('read-uring', HELLO | URING, t)

    t = (Stream()('CREATE', handle=1, path='', name='new',
                  opflags=wire.O_RDWR | wire.O_TRUNC, mode=0o644)
         ('WRITE', handle=1, offset=0, data=b'some data')
         ('WRITE', handle=1, offset=1 << 20, data=b'x' * 100)
         ('WRITE', handle=1, offset=8 << 20, data=b'past the size cap')
         ('READ', handle=1, offset=0, length=100)
         ('FLUSH', handle=1, opflags=0)('FSYNC', handle=1, opflags=1)
         ('SETATTR', handle=1, valid=wire.SET_SIZE, size=10)
         ('FALLOCATE', handle=1, opflags=0, offset=0, length=4096)
         ('FALLOCATE', handle=1, opflags=3, offset=0, length=4096)
         ('CLOSE', handle=1)('LSTAT', path='new'))
    add('write', HELLO, t)
    add('write-uring', HELLO | URING, t)

    # Lazy handles: with the feature agreed (the stream's own HELLO), a
    # lazy stream of WRITEs and its explicit syncs; without it (the
    # harness's HELLO asks for nothing), the bit is refused.
    def lazy(t):
        return (t('CREATE', handle=1, path='', name='lazy',
                  opflags=wire.O_WRONLY | wire.O_TRUNC | O_LAZY, mode=0o644)
                ('WRITE', handle=1, offset=0, data=b'x' * 4096)
                ('WRITE', handle=1, offset=4096, data=b'y' * 4096)
                ('FSYNC', handle=1, opflags=1)('FLUSH', handle=1, opflags=0)
                ('OPEN', handle=2, path='a', opflags=wire.O_RDWR | O_LAZY,
                 length=10)
                ('WRITE', handle=2, offset=0, data=b'z')('CLOSE', handle=2)
                ('OPEN', handle=3, path='a', opflags=O_LAZY << 1)
                ('CLOSE', handle=1))
    add('lazy', 0, lazy(Stream()('HELLO', magic=wire.MAGIC,
                                 version=wire.VERSION, features=FEAT_LAZY)))
    add('lazy-unagreed', HELLO, lazy(Stream()))

    # Locks: with LOCKS agreed (the harness's HELLO in NOTIFY mode) the
    # record, flock and GETLK paths, their refusals, a handle closed with
    # locks held; without it, ENOSYS.
    def locks(t):
        whole = wire.INT64_MAX
        return (t('OPEN', handle=1, path='a', opflags=wire.O_RDWR)
                ('OPEN', handle=2, path='d/f', opflags=wire.O_RDONLY)
                ('LOCK', handle=1, opflags=0, lock=(1, 0, 9, 2, 1))
                ('LOCK', handle=1, opflags=0, lock=(2, 5, 5, 1, 2))
                ('LOCK', handle=1, opflags=0, lock=(1, 3, 4, 0, 1))
                ('GETLK', handle=1, lock=(2, 0, whole, 2, 2))
                ('LOCK', handle=1, opflags=1, lock=(3, 0, whole, 2, 3))
                ('LOCK', handle=2, opflags=1, lock=(4, 0, whole, 1, 3))
                ('LOCK', handle=2, opflags=0, lock=(4, 0, whole, 2, 3))
                ('LOCK', handle=1, opflags=1, lock=(3, 0, 5, 2, 3))
                ('LOCK', handle=1, opflags=2, lock=(1, 0, whole, 0, 1))
                ('LOCK', handle=1, opflags=2, lock=(1, 0, whole, 2, 1))
                ('LOCK', handle=9, opflags=0, lock=(1, 0, whole, 2, 1))
                ('GETLK', handle=1, lock=(1, 0, whole, 0, 1))
                ('CLOSE', handle=1)('CLOSE', handle=2))
    add('locks', HELLO | NOTIFY, locks(Stream()))
    add('locks-unagreed', HELLO, locks(Stream()))

    t = (Stream()('OPENDIR', handle=3, path='')
         ('READDIR', handle=3, offset=0, length=4096, opflags=0)
         ('READDIR', handle=3, offset=0, length=4096, opflags=READDIR_PLUS)
         ('READDIR', handle=3, offset=0, length=30, opflags=0)
         ('READDIR', handle=3, offset=0x7fffffffffffffff, length=4096,
          opflags=0)
         ('CLOSE', handle=3)('OPENDIR', handle=4, path='d')
         ('READDIR', handle=4, offset=0, length=200, opflags=READDIR_PLUS)
         ('READDIR', handle=4, offset=2, length=4096, opflags=0)
         ('READ', handle=4, offset=0, length=1)('CLOSE', handle=4))
    add('readdir', HELLO, t)

    # SCAN: whole tree (symlinks out of the root included, never
    # followed), budgets from none to many replies, misuse, CLOSE midway.
    t = (Stream()('OPENDIR', handle=3, path='')
         ('SCAN', handle=3, length=MAX_DATA, opflags=0)
         ('SCAN', handle=3, length=4096, opflags=0)
         ('CLOSE', handle=3)('OPENDIR', handle=4, path='')
         ('SCAN', handle=4, length=4, opflags=0)
         ('SCAN', handle=4, length=150, opflags=SCAN_WATCH)
         ('SCAN', handle=4, length=150, opflags=0)
         ('SCAN', handle=4, length=300, opflags=0)
         ('CLOSE', handle=4)
         ('OPENDIR', handle=5, path='d')('UNLINK', path='d', name='f')
         ('SCAN', handle=5, length=1000, opflags=0)
         ('RMDIR', path='d', name='e')
         ('SCAN', handle=5, length=1000, opflags=0)
         ('OPEN', handle=6, path='a', opflags=0)
         ('SCAN', handle=6, length=4096, opflags=0)
         ('SCAN', handle=9, length=4096, opflags=0)
         ('SCAN', handle=5, length=4096, opflags=0x8000)
         ('OPENDIR', handle=7, path='updir')('SCAN', handle=7, length=4096,
                                             opflags=0))
    add('scan', HELLO, t)
    add('scan-walk', HELLO | WALK, t)

    # OPEN with first data, FLUSH with attributes.
    t = (Stream()('OPEN', handle=1, path='a', opflags=wire.O_RDONLY,
                  length=4096)
         ('OPEN', handle=2, path='big', opflags=wire.O_RDWR, length=65536)
         ('OPEN', handle=3, path='d', opflags=wire.O_RDONLY, length=100)
         ('OPEN', handle=4, path='fifo', opflags=wire.O_RDONLY, length=10)
         ('OPEN', handle=5, path='a', opflags=wire.O_WRONLY, length=10)
         ('WRITE', handle=2, offset=0, data=b'rewritten')
         ('OPEN', handle=6, path='big', opflags=wire.O_RDONLY, length=20)
         ('FLUSH', handle=2, opflags=0)('FLUSH', handle=5, opflags=1)
         ('OPEN', handle=7, path='ln', opflags=wire.O_RDONLY, length=10)
         ('OPEN', handle=8, path='big', opflags=wire.O_RDONLY,
          length=MAX_DATA))
    add('open-data', HELLO, t)
    add('open-data-uring', HELLO | URING, t)

    t = (Stream()('MKDIR', path='', name='m', mode=0o755)
         ('MKDIR', path='m', name='n', mode=0o700)
         ('RMDIR', path='m', name='n')('UNLINK', path='', name='a')
         ('SYMLINK', path='', name='s', target='../../etc/passwd')
         ('LINK', path='d/f', path2='', name2='f2')
         ('RENAME', path='', name='f2', path2='d', name2='moved', opflags=0)
         ('RENAME', path='', name='ln', path2='', name2='dl',
          opflags=RENAME_EXCHANGE)
         ('RENAME', path='', name='big', path2='d', name2='f',
          opflags=RENAME_NOREPLACE)
         ('MKNOD', path='', name='p2', mode=wire.S_IFIFO | 0o644, rdev=0)
         ('MKNOD', path='', name='null', mode=S_IFCHR | 0o666,
          rdev=(1 << 8) | 3)
         ('OPEN', handle=1, path='null', opflags=wire.O_RDWR)
         ('RMDIR', path='', name='d'))
    add('entries', HELLO, t)

    t = (Stream()('SETXATTR', path='a', xname='user.k', opflags=0,
                  data=b'value')
         ('GETXATTR', path='a', xname='user.k', length=0)
         ('GETXATTR', path='a', xname='user.k', length=64)
         ('GETXATTR', path='a', xname='user.k', length=2)
         ('LISTXATTR', path='a', length=0)('LISTXATTR', path='', length=1024)
         ('REMOVEXATTR', path='a', xname='user.k')
         ('GETXATTR', path='ln', xname='user.none', length=64)
         ('STATFS', path='')('STATFS', path='d'))
    add('xattr-statfs', HELLO, t)

    t = (Stream()('SETATTR', handle=0, path='a',
                  valid=wire.SET_MODE | wire.SET_UID | wire.SET_GID |
                  wire.SET_SIZE | SET_ATIME | SET_MTIME, mode=0o600, uid=1,
                  gid=1, size=3, atime=(1, 2), mtime=(3, 4))
         ('SETATTR', handle=0, path='d',
          valid=SET_ATIME_NOW | SET_MTIME_NOW)
         ('SETATTR', handle=0, path='ln', valid=wire.SET_MODE, mode=0o777)
         ('SETATTR', handle=0, path='', valid=wire.SET_MODE, mode=0))
    add('setattr', HELLO, t)

    # Ways out of the root that must all fail.
    t = (Stream()('OPEN', handle=1, path='up', opflags=wire.O_RDWR)
         ('OPEN', handle=2, path='updir/secret', opflags=wire.O_RDWR)
         ('OPEN', handle=3, path='absdir/secret', opflags=wire.O_RDWR)
         ('OPEN', handle=4, path='dl/f', opflags=wire.O_RDONLY)
         ('CREATE', handle=5, path='updir', name='x', opflags=wire.O_WRONLY,
          mode=0o644)
         ('CREATE', handle=6, path='absdir', name='x',
          opflags=wire.O_WRONLY, mode=0o644)
         ('MKDIR', path='updir', name='x', mode=0o755)
         ('RENAME', path='', name='a', path2='updir', name2='stolen',
          opflags=0)
         ('LINK', path='updir/secret', path2='', name2='mine')
         ('SETATTR', handle=0, path='updir/secret', valid=wire.SET_SIZE,
          size=0)
         ('SETATTR', handle=0, path='up', valid=wire.SET_SIZE, size=0)
         ('SETXATTR', path='up', xname='user.x', opflags=0, data=b'v')
         ('SETXATTR', path='updir', xname='user.x', opflags=0, data=b'v')
         ('OPENDIR', handle=7, path='updir')
         ('UNLINK', path='updir', name='secret')
         ('LSTAT', path='absdir/secret'))
    add('escape', HELLO, t)
    add('escape-walk', HELLO | WALK, t)

    # Protocol abuse.
    add('no-hello', 0, Stream()('LSTAT', path=''))
    add('hello-only', 0, hello(1))
    add('hello-twice', 0, hello(1) + hello(2) + req('LSTAT', 3, path=''))
    add('hello-version', 0, hello(1, version=1) + req('LSTAT', 2, path=''))
    add('hello-future', 0, wire.frame('HELLO', struct.pack(
        '>IIIQ', wire.MAGIC, 3, 0, 7), 0, 1) + req('LSTAT', 2, path=''))
    add('hello-magic', 0, hello(1, magic=0))
    add('invalid-then-ok', HELLO,
        req('LSTAT', 1, path='a/../b') + req('MKDIR', 2, path='',
                                             name='a/b', mode=0o755) +
        req('OPEN', 3, handle=0, path='a', opflags=0) +
        req('LSTAT', 4, path=''))
    add('unknown-op', HELLO, wire.frame(999, b'', 0, 1))
    add('oversized', HELLO, wire.frame('READ', b'', 0, 1,
                                       length=0x7fffffff))
    add('truncated', HELLO, req('LSTAT', 1, path='abcdef')[:-4])
    add('reply-flag', HELLO, wire.frame('LSTAT', wire.enc_str(''),
                                        wire.F_REPLY, 1))
    add('handles', HELLO,
        Stream()('OPEN', handle=65536, path='a', opflags=0)
        ('OPEN', handle=65536, path='a', opflags=0)
        ('OPENDIR', handle=1, path='')('OPEN', handle=1, path='a',
                                       opflags=0)
        ('CLOSE', handle=65536)('CLOSE', handle=9)('FSTAT', handle=1)
        .raw(ping(9)))
    # Compression (HELLO options ask for it).
    text = b'compressible ' * 800
    add('lz4-write', HELLO | LZ4,
        req('CREATE', 1, handle=1, path='', name='z', opflags=wire.O_RDWR,
            mode=0o644) +
        lz4_frame(req('WRITE', 2, handle=1, offset=0, data=text)) +
        lz4_frame(req('WRITE', 3, handle=1, offset=len(text), data=text),
                  raw=True) +
        req('READ', 4, handle=1, offset=0, length=65536) +
        req('CLOSE', 5, handle=1))
    add('lz4-read-auto', HELLO | LZ4 | LZ4_AUTO,
        req('OPEN', 1, handle=1, path='big', opflags=0) +
        req('READ', 2, handle=1, offset=0, length=65536) +
        lz4_frame(req('LSTAT', 3, path='a'), raw=True))
    add('lz4-bad', HELLO | LZ4,
        lz4_frame(req('LSTAT', 1, path='a'))[:-2] + b'\0\0')
    add('lz4-unagreed', HELLO, lz4_frame(req('LSTAT', 1, path='a')))
    add('lz4-own-hello', 0, hello(1, features=FEAT_LZ4) +
        lz4_frame(req('LSTAT', 2, path='a')))
    # Change notification: UNWATCH is answered; a NOTIFY frame (the
    # server's own kind) closes the connection.
    add('unwatch', HELLO,
        wire.frame(OP_UNWATCH, struct.pack('>Q', 5), 0, 1) +
        wire.frame(OP_UNWATCH, struct.pack('>Q', 0), 0, 2) +
        req('OPENDIR', 3, handle=1, path='d') +
        req('READDIR', 4, handle=1, offset=0, length=4096, opflags=0x3))
    add('notify-to-server', HELLO, notify(5, CHANGED, b'f') +
        req('LSTAT', 1, path='a'))

    # Follow mode (bit 5): symlinks out of the root, to "/" and up, are
    # followed -- inside the jail, the server thread's root.
    t = (Stream()('LSTAT', path='up')('LSTAT', path='updir')
         ('LSTAT', path='absdir')('READLINK', path='abs')
         ('OPEN', handle=1, path='up', opflags=wire.O_RDWR)
         ('WRITE', handle=1, offset=0, data=b'followed')
         ('CLOSE', handle=1)
         ('SYMLINK', path='', name='top', target='/')
         ('OPENDIR', handle=2, path='top')
         ('READDIR', handle=2, offset=0, length=4096, opflags=READDIR_PLUS)
         ('SCAN', handle=2, length=4096, opflags=0)('CLOSE', handle=2)
         ('LSTAT', path='top/outside/secret')
         ('SETATTR', handle=0, path='up', valid=wire.SET_MODE, mode=0o600)
         ('SETXATTR', path='up', xname='user.f', opflags=0, data=b'v')
         ('MKDIR', path='updir', name='made', mode=0o755)
         ('UNLINK', path='top/outside', name='secret')
         ('LSTAT', path='dangling')('LSTAT', path='loop')
         ('OPEN', handle=3, path='dl/f', opflags=wire.O_RDONLY, length=64))
    add('follow', HELLO | FOLLOW, t)
    add('follow-walk', HELLO | FOLLOW | WALK, t)
    add('follow-notify', HELLO | FOLLOW | NOTIFY, t)

    # Notification (bit 6): watched listings and scans, changes the
    # client makes (its own, not told), UNWATCH, syncs with PROGRESS,
    # lazy opens -- all granted by the harness's HELLO.
    t = (Stream()('OPENDIR', handle=1, path='d')
         ('READDIR', handle=1, offset=0, length=4096, opflags=0x3)
         ('OPENDIR', handle=2, path='')
         ('SCAN', handle=2, length=MAX_DATA, opflags=SCAN_WATCH)
         ('CREATE', handle=3, path='d', name='n',
          opflags=wire.O_WRONLY | O_LAZY, mode=0o644)
         ('WRITE', handle=3, offset=0, data=b'lazy')
         ('FSYNC', handle=3, opflags=0)('CLOSE', handle=3)
         ('MKDIR', path='d', name='m', mode=0o755)
         ('RENAME', path='d', name='m', path2='', name2='m2', opflags=0)
         ('UNLINK', path='d', name='f')('SYNCFS')
         .raw(wire.frame(OP_UNWATCH, struct.pack('>Q', 5), 0, 15))
         ('READDIR', handle=1, offset=0, length=4096, opflags=0x2)
         ('CLOSE', handle=1)('CLOSE', handle=2))
    add('notify', HELLO | NOTIFY, t)
    add('notify-walk-uring', HELLO | NOTIFY | WALK | URING, t)
    add('notify-meta', HELLO | NOTIFY | META, t)
    add('meta', HELLO | META, t)
    return s


# ---------------------------------------------------------------------------
# fuzz_client: options, number of calls, one selector per call, then the
# server's stream.  The client's ids: HELLO 1, the calls 2, 3, ...

C = {'LSTAT': 0, 'FSTAT': 1, 'READDIR': 2, 'READDIRPLUS': 3, 'READ': 4,
     'READBIG': 5, 'WRITE': 6, 'READLINK': 7, 'GETXATTR0': 8,
     'GETXATTR': 9, 'LISTXATTR': 10, 'OPEN': 11, 'CREATE': 12,
     'STATFS': 13, 'SYMLINK': 14, 'OPENDIR': 15, 'SETATTR': 16,
     'MKDIR': 17, 'FLUSH': 18, 'PING': 19, 'CLOSE': 20, 'UNLINK': 21,
     'SCAN': 22, 'SYNCFS': 23}
C_HELLO_IN_INPUT, C_LZ4, C_NOTIFY = 0x01, 0x02, 0x04
C_PROGRESS, C_MORE = 0x08, 0x10


def client(opts, calls, stream):
    return bytes([opts, len(calls)] + [C[k] for k in calls]) + stream


def client_seeds():
    s = {}
    entries = (dirent('.', typ=wire.S_IFDIR) +
               dirent('..', off=2, typ=wire.S_IFDIR) +
               dirent('f', off=3, a=attr()))
    calls = ['LSTAT', 'READDIR', 'READDIRPLUS', 'READ', 'READLINK']
    replies = [rep('LSTAT', 2, attr=attr()),
               rep('READDIR', 3, opflags=READDIR_EOF,
                   data=dirent('.', typ=wire.S_IFDIR) + dirent('f', off=2)),
               rep('READDIR', 4, opflags=READDIR_EOF, data=entries),
               rep('READ', 5, data=b'0123456789'),
               rep('READLINK', 6, target='d/f')]
    s['basic'] = client(0, calls, b''.join(replies))
    s['reordered'] = client(0, calls, b''.join(reversed(replies)))
    s['errors'] = client(0, calls, b''.join(
        rep(op, 2 + i, status=st, errmsg=msg) for i, (op, st, msg) in
        enumerate([('LSTAT', 2, b'no such file'), ('READDIR', 4, b''),
                   ('READDIR', 38, b'x' * 100), ('READ', 3, b'disk'),
                   ('READLINK', 999, b'unknown status')])))
    s['wrong-op'] = client(0, ['LSTAT', 'READ'],
                           rep('READ', 2, data=b'x') + rep('READ', 3,
                                                           data=b'y'))
    s['stray-and-twice'] = client(0, ['LSTAT', 'FSTAT'],
                                  rep('LSTAT', 99, attr=attr()) +
                                  rep('LSTAT', 2, attr=attr()) +
                                  rep('LSTAT', 2, attr=attr()) +
                                  rep('FSTAT', 3, attr=attr()))
    s['big-read'] = client(0, ['READBIG', 'READ'],
                           rep('READ', 2, data=b'r' * 66000) +
                           rep('READ', 3, data=b'small'))
    s['readdir-bad'] = client(0, ['READDIR', 'READDIRPLUS', 'READDIRPLUS'],
                              rep('READDIR', 2, opflags=0,
                                  data=dirent('a/b')) +
                              rep('READDIR', 3, opflags=0,
                                  data=dirent('x', a=attr(mode=0o644))) +
                              rep('READDIR', 4, opflags=0,
                                  data=entries + b'\0\0\0'))
    s['readdir-plain-attr'] = client(0, ['READDIR'],
                                     rep('READDIR', 2, opflags=1,
                                         data=dirent('x', a=attr())))
    s['xattr-statfs'] = client(0, ['GETXATTR0', 'GETXATTR', 'LISTXATTR',
                                   'STATFS', 'PING'],
                               rep('GETXATTR', 2, count=5) +
                               rep('GETXATTR', 3, count=5, data=b'value') +
                               rep('LISTXATTR', 4, count=14,
                                   data=b'user.a\0user.b\0') +
                               rep('STATFS', 5, statfs=statfs()) +
                               ping(6, reply=True))
    s['open-data'] = client(0, ['OPEN', 'OPEN', 'FLUSH'],
                            rep('OPEN', 2, attr=attr(), opflags=OPEN_DATA,
                                data=b'0123456789') +
                            rep('OPEN', 3, attr=attr(), opflags=OPEN_EOF) +
                            rep('FLUSH', 4, attr=attr(mode=0o644)))
    s['entries'] = client(0, ['OPEN', 'CREATE', 'SYMLINK', 'OPENDIR',
                              'SETATTR', 'MKDIR', 'UNLINK', 'WRITE',
                              'FLUSH'],
                          rep('OPEN', 2, attr=attr()) +
                          rep('CREATE', 3, attr=attr()) +
                          rep('SYMLINK', 4,
                              attr=attr(mode=wire.S_IFLNK | 0o777)) +
                          rep('OPENDIR', 5) +
                          rep('SETATTR', 6, attr=attr(mode=wire.S_IFREG)) +
                          rep('MKDIR', 7, attr=attr(mode=wire.S_IFDIR |
                                                    0o755)) +
                          rep('UNLINK', 8) + rep('WRITE', 9, count=5) +
                          rep('FLUSH', 10, attr=attr(size=5)))
    s['close-noreply'] = client(0, ['CLOSE', 'LSTAT', 'CLOSE'],
                                rep('CLOSE', 2, status=4, errmsg=b'') +
                                rep('LSTAT', 3, attr=attr()) +
                                rep('CLOSE', 4))
    s['request-frame'] = client(0, ['LSTAT'], req('LSTAT', 2, path='a'))
    s['truncated'] = client(0, ['LSTAT', 'READ'],
                            rep('LSTAT', 2, attr=attr()) +
                            rep('READ', 3, data=b'abc')[:-2])
    s['oversized'] = client(0, ['READ'], wire.frame('READ', b'',
                                                    wire.F_REPLY, 2,
                                                    length=0x7fffffff))
    s['unknown-op'] = client(0, ['LSTAT'], wire.frame(999, b'', wire.F_REPLY,
                                                      2))
    text = b'compressible reply data ' * 400
    s['lz4'] = client(C_LZ4, ['READBIG', 'READ', 'LSTAT'],
                      lz4_frame(rep('READ', 2, data=text * 8)) +
                      lz4_frame(rep('READ', 3, data=text[:5000]),
                                raw=True) +
                      lz4_frame(rep('LSTAT', 4, attr=attr())))
    s['lz4-unagreed'] = client(0, ['READ'],
                               lz4_frame(rep('READ', 2, data=text)))
    s['lz4-bad'] = client(C_LZ4, ['READ'],
                          lz4_frame(rep('READ', 2, data=text))[:-3] +
                          b'\0\0\0')
    hello_ok = rep('HELLO', 1, magic=wire.MAGIC, version=wire.VERSION,
                   features=0, uid=1000, gid=1000)
    s['hello-in-input'] = client(C_HELLO_IN_INPUT, ['LSTAT'],
                                 hello_ok + rep('LSTAT', 2, attr=attr()))
    s['hello-lz4'] = client(C_HELLO_IN_INPUT | C_LZ4, ['READBIG'],
                            rep('HELLO', 1, magic=wire.MAGIC,
                                version=wire.VERSION, features=FEAT_LZ4) +
                            lz4_frame(rep('READ', 2, data=text)))
    s['hello-version'] = client(C_HELLO_IN_INPUT, ['LSTAT'],
                                hello_v1_rep(1))
    s['hello-refused'] = client(C_HELLO_IN_INPUT, [],
                                rep('HELLO', 1, status=28,
                                    errmsg=b'protocol version mismatch'))
    s['hello-wrong-id'] = client(C_HELLO_IN_INPUT, [],
                                 rep('HELLO', 7, magic=wire.MAGIC,
                                     version=wire.VERSION))
    s['hello-cut'] = client(C_HELLO_IN_INPUT, [], hello_ok[:-3])
    # Change notification: frames between replies, where granted.
    s['notify'] = client(C_NOTIFY, ['LSTAT', 'READDIR'],
                         notify(5, CHANGED, b'file') +
                         rep('LSTAT', 2, attr=attr()) +
                         notify(5, CHANGED) + notify(6, GONE) +
                         notify(0, ALL) +
                         rep('READDIR', 3, opflags=READDIR_EOF | 0x2,
                             data=dirent('f')))
    s['notify-unagreed'] = client(0, ['LSTAT'], notify(5, CHANGED, b'f') +
                                  rep('LSTAT', 2, attr=attr()))
    s['notify-bad'] = client(C_NOTIFY, ['LSTAT', 'LSTAT', 'LSTAT'],
                             notify(5, 4) + notify(0, CHANGED) +
                             notify(5, GONE, b'x') + notify(5, ALL) +
                             notify(5, CHANGED, b'a/b') +
                             notify(5, CHANGED, rid=9) +
                             notify(5, CHANGED, flags=F_NOTIFY | 1) +
                             notify(5, CHANGED, op=28))
    s['notify-hello'] = client(C_HELLO_IN_INPUT | C_NOTIFY, ['LSTAT'],
                               rep('HELLO', 1, magic=wire.MAGIC, version=1,
                                   features=FEAT_NOTIFY) +
                               notify(7, CHANGED, b'n') +
                               rep('LSTAT', 2, attr=attr()))
    # PROGRESS frames (granted with bit 3) between replies, for waiting
    # requests, finished ones and unknown ids; SCAN and SYNCFS (bit 4).
    progress = [wire.frame(OP_PROGRESS, b'', F_PROGRESS, i)
                for i in (2, 3, 9, 2)]
    s['progress'] = client(C_PROGRESS, ['LSTAT', 'FLUSH'],
                           progress[0] + progress[1] +
                           rep('LSTAT', 2, attr=attr()) + progress[3] +
                           progress[2] + rep('FLUSH', 3, attr=attr()))
    s['progress-unagreed'] = client(0, ['LSTAT'], progress[0] +
                                    rep('LSTAT', 2, attr=attr()))
    s['progress-bad'] = client(C_PROGRESS, ['LSTAT', 'LSTAT'],
                               wire.frame(OP_PROGRESS, b'', F_PROGRESS, 0) +
                               wire.frame(OP_PROGRESS, b'\0', F_PROGRESS,
                                          2) +
                               wire.frame(28, b'', F_PROGRESS, 3))
    s['scan-syncfs'] = client(C_MORE | C_PROGRESS, ['SCAN', 'SCAN', 'SYNCFS'],
                              rep('SCAN', 2, opflags=0, data=scan_blob()) +
                              wire.frame(OP_PROGRESS, b'', F_PROGRESS, 4) +
                              rep('SCAN', 3, opflags=SCAN_EOF,
                                  data=scan_blob(base=4)) +
                              rep('SYNCFS', 4))
    s['scan-bad'] = client(C_MORE, ['SCAN', 'SCAN'],
                           rep('SCAN', 2, opflags=0, data=b'\0\0') +
                           rep('SCAN', 3, status=38, errmsg=b''))
    return s


# ---------------------------------------------------------------------------
# fuzz_auth: mode byte, then the peer's bytes (tests/fuzz/fuzz_auth.c)

AUTH_MAGIC = 0x51465444


def auth_msg1(cipher=1, magic=AUTH_MAGIC, version=1, reserved=0):
    return struct.pack('>IIII', magic, version, cipher, reserved) + \
        bytes(range(32))


def auth_seeds():
    s = {}
    msg2 = struct.pack('>II', AUTH_MAGIC, 1) + bytes(range(32, 64)) + \
        b'\xaa' * 32
    s['server-msg1-msg3'] = b'\x00' + auth_msg1() + b'\x55' * 32
    s['server-msg1-only'] = b'\x00' + auth_msg1(cipher=2)
    s['server-bad-magic'] = b'\x00' + auth_msg1(magic=0x51465458)
    s['server-bad-version'] = b'\x00' + auth_msg1(version=2)
    s['server-bad-cipher'] = b'\x00' + auth_msg1(cipher=7)
    s['server-reserved'] = b'\x00' + auth_msg1(reserved=1)
    s['server-short'] = b'\x00' + auth_msg1()[:20]
    s['server-http'] = b'\x00' + b'GET / HTTP/1.0\r\n\r\n' * 4
    s['client-msg2'] = b'\x01\x01' + msg2
    s['client-msg2-more'] = b'\x01\x00' + msg2 + b'\0' * 40
    s['client-bad-magic'] = b'\x01\x02' + b'QFTX' + msg2[4:]
    s['client-short'] = b'\x01\x01' + msg2[:50]
    for c in range(3):
        s['pair-clean-%d' % c] = bytes([2, c])
    s['pair-cipher'] = b'\x02\x01' + bytes([8 + 3, 0x01])   # cipher field
    s['pair-nonce'] = b'\x02\x02' + bytes([20, 0x80])
    s['pair-msg2'] = b'\x02\x00' + bytes([48 + 50, 0x01])
    s['pair-msg3'] = b'\x02\x01' + bytes([48 + 72 + 5, 0x10])
    s['pair-noop-mask'] = b'\x02\x01' + bytes([10, 0x00])
    s['pair-twice'] = b'\x02\x00' + bytes([10, 0x0f, 10, 0x0f])
    line = bytes(range(32)).hex().encode()
    s['secret-ok'] = b'\x03' + line + b'\n'
    s['secret-upper'] = b'\x03' + line.upper() + b'\n'
    s['secret-and-more'] = b'\x03' + line + b'\n' + auth_msg1()
    s['secret-short'] = b'\x03' + line[:20] + b'\n'
    s['secret-no-newline'] = b'\x03' + line
    s['secret-not-hex'] = b'\x03' + b'g' + line[1:] + b'\n'
    s['secret-crlf'] = b'\x03' + line + b'\r\n'
    s['secret-empty'] = b'\x03'
    return s


# ---------------------------------------------------------------------------
# fuzz_login: mode byte, then the subject (tests/fuzz/fuzz_login.c)

def login_seeds():
    s = {}
    sha = 'ab' * 32
    s['install-run'] = b'\x00QFTFS-RUN /usr/bin/qftfs-server\n'
    s['install-send'] = (b'\x00QFTFS-ARCH x86_64 7f454c46 - sha256\n'
                         b'QFTFS-SEND /home/u/.cache/qftfs/3-x86_64\n'
                         b'QFTFS-INSTALLED /home/u/.cache/qftfs/3-x86_64/'
                         b'qftfs-server\n')
    s['install-cached'] = (b'\x00QFTFS-ARCH aarch64 - - cksum\n'
                           b'QFTFS-RUN /tmp/qftfs-1000/3-aarch64/'
                           b'qftfs-server\n')
    s['install-armhf'] = (b'\x00QFTFS-ARCH armv7l 00040005 hf none\n'
                          b'QFTFS-SEND /dev/shm/qftfs-1000/3-armhf\n'
                          b'QFTFS-FAIL the upload arrived damaged\n')
    s['install-armv6'] = (b'\x00QFTFS-ARCH armv6l 00020005 el sha256\n'
                          b'QFTFS-FAIL no writable directory\n')
    s['install-unknown-arch'] = b'\x00QFTFS-ARCH mips - - sha256\n'
    s['install-motd'] = b'\x00Welcome to the board!\nQFTFS-RUN /x\n'
    s['install-long'] = b'\x00QFTFS-ARCH ' + b'x' * 2000 + b'\n'
    s['install-ctl'] = b'\x00QFTFS-FAIL \x1b[31mred\x07\n'
    s['install-bad-arch'] = b'\x00QFTFS-ARCH x86_64\n'
    s['install-cut'] = b'\x00QFTFS-ARCH x86_64 - - ' + sha[:3].encode()
    s['greeting'] = b'\x01QFTFS 3 40000'
    s['greeting-wrap'] = b'\x01QFTFS 4294967299 22'
    s['greeting-port'] = b'\x01QFTFS 3 65536'
    s['greeting-sign'] = b'\x01QFTFS +3 -1'
    s['greeting-zeros'] = b'\x01QFTFS 0003 0022'
    s['greeting-tail'] = b'\x01QFTFS 3 22 '
    s['sshconf'] = (b'\x02\x00# comment\nHost board b?ard *.example\n'
                    b'  HostName 192.0.2.7\n  User pi\n  Port 2222\n'
                    b'  IdentityFile ~/.ssh/id_%r@%h\n'
                    b'  UserKnownHostsFile ~/.ssh/kh %d/kh2\n'
                    b'  StrictHostKeyChecking accept-new\n'
                    b'Host !board *\n  User other\n'
                    b'Match host a.example\n  ProxyJump jump\n'
                    b'Match exec "true"\n  User never\n')
    s['sshconf-include'] = (b'\x02\x01Include inc2 ~/.ssh/inc*\n'
                            b'Host a.*\n  ProxyCommand ssh -W %h:%p j\n'
                            b'  CertificateFile %d/c\n'
                            b'  IdentitiesOnly yes\n')
    s['sshconf-equals'] = (b'\x02\x02Host=10.0.0.*\nPort=22\n'
                           b'HostName="quoted name"\nUser %%u\n')
    s['sshconf-bad'] = (b'\x02\x00Host\nPort 99999\nUser "open\n'
                        b'IdentityFile %z\nInclude /nonexistent/*\n')
    s['sshconf-self'] = b'\x02\x00Include /cfg\n'
    s['idmap'] = (b'\x03\x1froot:0\nnobody:65534\n\0root:0\n\0'
                  b'1000\0' b'0\0' b'022')
    s['idmap-user'] = b'\x03\x9c\0\0' b'1\0' b'2\0' b'077'
    s['idmap-bad'] = (b'\x03\x23nosuchuser:5\nroot\n:7\nroot:x\n\0'
                      b'\0' b'-1\0' b'4294967296\0' b'888')
    s['idmap-ignore'] = b'\x03\x21root:4294967295\n# c\n\nroot:1\n'
    return s


# ---------------------------------------------------------------------------
# fuzz_scan: the cap byte, then [u16 length][SCAN data] per reply

def scan_seeds():
    s = {}

    def replies(*blobs):
        return b''.join(struct.pack('>H', len(b)) + b for b in blobs)

    s['one'] = b'\x40' + replies(scan_blob())
    s['two'] = b'\x40' + replies(scan_blob(), scan_blob(base=4))
    s['watched'] = b'\x40' + replies(wire.enc_scan(1, [
        ('watched', 0), ('entry', 0, 'sub', attr(wire.S_IFDIR | 0o755)),
        ('watched', 1), ('end', 1, 0), ('end', 0, 0)]))
    s['cap'] = b'\x00' + replies(scan_blob(), scan_blob(base=4))
    s['gap'] = b'\x40' + replies(scan_blob(), scan_blob(base=9))
    s['bad-index'] = b'\x40' + replies(wire.enc_scan(1, [
        ('entry', 3, 'x', attr())]))
    s['bad-name'] = b'\x40' + replies(scan_blob(), wire.enc_scan(4, [
        ('entry', 0, '..', attr())]))
    s['bad-tail'] = b'\x40' + replies(scan_blob() + b'\x02\0')
    s['bad-after-dirs'] = b'\x40' + replies(scan_blob(), b'\0\0\0\4\x07')
    s['empty'] = b'\x40' + replies(b'\0\0\0\1')
    s['dir-end-fail'] = b'\x40' + replies(wire.enc_scan(1, [
        ('entry', 0, 'a', attr()), ('end', 0, 13)]))
    return s


# ---------------------------------------------------------------------------

def write(outdir, target, seeds):
    d = os.path.join(outdir, target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith('seed-'):
            os.unlink(os.path.join(d, f))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, 'seed-' + name), 'wb') as f:
            f.write(data)
    return len(seeds), sum(len(v) for v in seeds.values())


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE,
                                                                'corpus')
    for target, seeds in (('fuzz_frame', frame_seeds()),
                          ('fuzz_server', server_seeds()),
                          ('fuzz_client', client_seeds()),
                          ('fuzz_auth', auth_seeds()),
                          ('fuzz_login', login_seeds()),
                          ('fuzz_scan', scan_seeds())):
        n, size = write(outdir, target, seeds)
        print('%s: %d seeds, %d bytes' % (target, n, size))


if __name__ == '__main__':
    main()
