# SPDX-License-Identifier: MIT
"""A small, independent driver for the qftfs wire protocol (version 2).

It speaks to `qftfs-server --stdio --root DIR` directly over a socketpair,
so tests can send what no well-behaved client would: paths through
symlinks, invalid names, truncated frames, unknown opcodes.

Written from docs/protocol.md and common/msg.c's field table, on purpose not
from the C code's structs: if the two sides drift apart, these tests notice.
Frame header: u32 payload length, u16 opcode, u16 flags, u64 id, all
big-endian.  Strings are u32 length + bytes + NUL; blobs u32 length + bytes.
"""

import os
import socket
import struct
import subprocess
import time

MAGIC = 0x51465446
VERSION = 2
HDR = struct.Struct('>IHHQ')
F_REPLY = 0x0001
F_CRED = 0x0010        # the request acts for a caller (FEAT_CRED)
MAX_PAYLOAD = (1 << 20) + 16384

OPS = {
    # name: (opcode, request fields, reply fields)
    'HELLO': (1, ('magic', 'version', 'features'),
              ('magic', 'version', 'features', 'uid', 'gid')),
    'LSTAT': (2, ('path',), ('attr',)),
    'FSTAT': (3, ('handle',), ('attr',)),
    'SETATTR': (4, ('handle', 'path', 'valid', 'mode', 'uid', 'gid', 'size',
                    'atime', 'mtime'), ('attr',)),
    'OPENDIR': (5, ('handle', 'path'), ()),
    'READDIR': (6, ('handle', 'offset', 'length', 'opflags'), ('opflags', 'data')),
    'MKDIR': (7, ('path', 'name', 'mode'), ('attr',)),
    'RMDIR': (8, ('path', 'name'), ()),
    'UNLINK': (9, ('path', 'name'), ()),
    'CREATE': (10, ('handle', 'path', 'name', 'opflags', 'mode'), ('attr',)),
    'OPEN': (11, ('handle', 'path', 'opflags', 'length'),
             ('attr', 'opflags', 'data')),
    'READ': (12, ('handle', 'offset', 'length'), ('data',)),
    'WRITE': (13, ('handle', 'offset', 'data'), ('count',)),
    'FLUSH': (14, ('handle', 'opflags'), ('attr',)),
    'FSYNC': (15, ('handle', 'opflags'), ()),
    'CLOSE': (16, ('handle',), ()),
    'RENAME': (17, ('path', 'name', 'path2', 'name2', 'opflags'), ()),
    'SYMLINK': (18, ('path', 'name', 'target'), ('attr',)),
    'READLINK': (19, ('path',), ('target',)),
    'LINK': (20, ('path', 'path2', 'name2'), ('attr',)),
    'STATFS': (21, ('path',), ('statfs',)),
    'FALLOCATE': (22, ('handle', 'opflags', 'offset', 'length'), ()),
    'GETXATTR': (23, ('path', 'xname', 'length'), ('count', 'data')),
    'SETXATTR': (24, ('path', 'xname', 'opflags', 'data'), ()),
    'LISTXATTR': (25, ('path', 'length'), ('count', 'data')),
    'REMOVEXATTR': (26, ('path', 'xname'), ()),
    'MKNOD': (27, ('path', 'name', 'mode', 'rdev'), ('attr',)),
    'PING': (28, (), ()),
    'SCAN': (29, ('handle', 'length', 'opflags'), ('opflags', 'data')),
    'SYNCFS': (32, (), ()),
    'UNWATCH': (31, ('ino',), ()),
    'RESUME': (34, ('magic', 'version', 'features', 'opflags', 'seq'),
               ('magic', 'version', 'features', 'uid', 'gid', 'opflags',
                'seq')),
    'BYE': (35, (), ()),
    'COPY': (39, ('handle', 'offset', 'handle2', 'offset2', 'length',
                  'opflags'), ('count', 'attr')),
    'SEEK': (40, ('handle', 'offset', 'opflags'), ('offset', 'offset2')),
    'LOCK': (36, ('handle', 'opflags', 'lock'), ()),
    'GETLK': (37, ('handle', 'lock'), ('lock',)),
    # Walk-ahead (FEAT_FETCH); the names and records: enc_fetch_names,
    # parse_fetch.
    'FETCH': (41, ('path', 'length', 'data'), ('data',)),
    # Striping (FEAT_STRIPES): count 0 joins, 1..7 on bulk takes.
    'STRIPE': (43, ('count', 'opflags'), ('count',)),
}
OP_NAMES = {v[0]: k for k, v in OPS.items()}

U32 = {'magic', 'version', 'features', 'opflags', 'mode', 'uid', 'gid', 'valid'}
U64 = {'handle', 'rdev', 'size', 'offset', 'length', 'count', 'seq', 'ino',
       'handle2', 'offset2'}
STR = {'path', 'name', 'path2', 'name2', 'target', 'xname'}
TIME = {'atime', 'mtime'}
BLOB = {'data'}

STATUS = ['OK', 'EPERM', 'ENOENT', 'EIO', 'EBADF', 'ENOMEM', 'EACCES', 'EBUSY',
          'EEXIST', 'EXDEV', 'ENOTDIR', 'EISDIR', 'EINVAL', 'ENFILE', 'EMFILE',
          'ETXTBSY', 'EFBIG', 'ENOSPC', 'ESPIPE', 'EROFS', 'EMLINK', 'ERANGE',
          'ENAMETOOLONG', 'ENOSYS', 'ENOTEMPTY', 'ELOOP', 'ENODATA',
          'EOVERFLOW', 'EPROTO', 'EOPNOTSUPP', 'EDQUOT', 'ESTALE', 'ETIMEDOUT',
          'EAGAIN', 'EINTR', 'E2BIG', 'ENXIO', 'ENODEV', 'ECANCELED']

O_RDONLY, O_WRONLY, O_RDWR = 0, 1, 2
O_APPEND, O_TRUNC, O_EXCL = 0x8, 0x10, 0x20
S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO = 0o100000, 0o040000, 0o120000, 0o010000
SET_MODE, SET_UID, SET_GID, SET_SIZE = 0x1, 0x2, 0x4, 0x8
OPEN_DATA, OPEN_EOF = 0x1, 0x2            # OPEN reply flags
SCAN_WATCH = 0x1                          # SCAN request flag: watch (leases)
SCAN_EOF, SCAN_TRUNCATED = 0x1, 0x2       # SCAN reply flags
SCAN_REC_ENTRY, SCAN_REC_DIR_END, SCAN_REC_WATCHED = 1, 2, 3  # SCAN record kinds
MAX_DATA = 1 << 20                        # QFT_MAX_DATA, QFT_MAX_SCAN
FEAT_LZ4, FEAT_NOTIFY, FEAT_RESUME = 0x1, 0x4, 0x40   # HELLO features
FEAT_BOOTID = 0x80
FEAT_FOLLOW, FEAT_CRED = 0x10, 0x100
S_IFCHR, S_IFBLK = 0o020000, 0o060000
MAX_GROUPS = 64                           # QFT_MAX_GROUPS
RESUME_META = 0x1                         # RESUME request flag
RESUME_LOST_NOTIFY = 0x1                  # RESUME reply flag
RESUME_WINDOW = 1024
FEAT_COPY, FEAT_HOLES = 0x400, 0x800      # COPY and SEEK (issue 19)
SEEK_DATA, SEEK_HOLE = 0x1, 0x2           # SEEK request flags
FEAT_LOCKS = 0x200                        # LOCK, GETLK
LOCK_FMT = struct.Struct('>QQQII')        # owner, start, end, type, pid
LK_UNLCK, LK_RDLCK, LK_WRLCK = 0, 1, 2
LOCK_FLOCK, LOCK_CLOSE = 0x1, 0x2         # LOCK request flags
INT64_MAX = (1 << 63) - 1


def _b(v):
    return v if isinstance(v, (bytes, bytearray)) else str(v).encode()


def enc_str(v):
    v = _b(v)
    return struct.pack('>I', len(v)) + v + b'\0'


def enc_field(name, v):
    if name in U32:
        return struct.pack('>I', v)
    if name in U64:
        return struct.pack('>Q', v)
    if name in STR:
        return enc_str(v)
    if name in TIME:
        sec, nsec = v if v else (0, 0)
        return struct.pack('>qI', sec, nsec)
    if name in BLOB:
        v = _b(v)
        return struct.pack('>I', len(v)) + v
    if name == 'lock':
        # (owner, start, end, type, pid): QFT_LK_* types, end inclusive
        return LOCK_FMT.pack(*v)
    raise ValueError(name)


def frame(op, payload, flags=0, rid=1, length=None):
    """A raw frame; `length` overrides the header's payload length."""
    code = OPS[op][0] if isinstance(op, str) else op
    return HDR.pack(len(payload) if length is None else length, code, flags,
                    rid) + payload


def enc_cred(uid, gid, groups=()):
    """The QFT_F_CRED prefix: u32 uid, u32 gid, u32 count, the groups."""
    return struct.pack('>III', uid, gid, len(groups)) + b''.join(
        struct.pack('>I', g) for g in groups)


def encode_request(op, rid, cred=None, **fields):
    """`cred`: (uid, gid, groups) the request acts for, or None."""
    code, req, _ = OPS[op]
    defaults = {'path': '', 'mode': 0, 'opflags': 0}
    payload = b''.join(enc_field(f, fields.get(f, defaults.get(f, 0)))
                       for f in req)
    if cred is None:
        return frame(code, payload, 0, rid)
    return frame(code, enc_cred(*cred) + payload, F_CRED, rid)


class Attr:
    FMT = struct.Struct('>QIIIIQQQIqIqIqII')
    SIZE = FMT.size   # 92: QFT_ATTR_WIRE_SIZE
    NOXATTR = 0x1     # QFT_ATTR_NOXATTR
    __slots__ = ('ino', 'mode', 'nlink', 'uid', 'gid', 'rdev', 'size',
                 'blocks', 'blksize', 'atime', 'mtime', 'ctime', 'flags')

    def __init__(self, raw):
        v = self.FMT.unpack(raw)
        (self.ino, self.mode, self.nlink, self.uid, self.gid, self.rdev,
         self.size, self.blocks, self.blksize) = v[:9]
        self.atime, self.mtime, self.ctime = (v[9], v[10]), (v[11], v[12]), (v[13], v[14])
        self.flags = v[15]


class Reply:
    def __init__(self, op, flags, rid, payload):
        self.op, self.flags, self.id = op, flags, rid
        self.opname = OP_NAMES.get(op, '?')
        self.fields = {}
        (self.status,) = struct.unpack_from('>I', payload, 0)
        self.errmsg = None
        pos = 4
        if self.status != 0:
            self.errmsg, pos = self._str(payload, pos)
        else:
            for f in OPS[self.opname][2] if self.opname in OPS else ():
                v, pos = self._field(f, payload, pos)
                self.fields[f] = v
            # The HELLO reply's boot id, only where its features say so.
            if self.opname == 'HELLO' and \
                    self.fields.get('features', 0) & FEAT_BOOTID:
                self.fields['boot_id'], pos = self._str(payload, pos)
        if pos != len(payload):
            raise ValueError('%d trailing bytes in %s reply' %
                             (len(payload) - pos, self.opname))

    @property
    def err(self):
        return STATUS[self.status] if self.status < len(STATUS) else self.status

    @staticmethod
    def _str(p, pos):
        (n,) = struct.unpack_from('>I', p, pos)
        s = p[pos + 4:pos + 4 + n]
        if p[pos + 4 + n:pos + 5 + n] != b'\0':
            raise ValueError('string without terminator')
        return s, pos + 5 + n

    def _field(self, f, p, pos):
        if f in U32:
            return struct.unpack_from('>I', p, pos)[0], pos + 4
        if f in U64:
            return struct.unpack_from('>Q', p, pos)[0], pos + 8
        if f in STR:
            return self._str(p, pos)
        if f in BLOB:
            (n,) = struct.unpack_from('>I', p, pos)
            return p[pos + 4:pos + 4 + n], pos + 4 + n
        if f == 'attr':
            return Attr(p[pos:pos + Attr.SIZE]), pos + Attr.SIZE
        if f == 'statfs':
            return struct.unpack_from('>9Q', p, pos), pos + 72
        if f == 'lock':
            return LOCK_FMT.unpack_from(p, pos), pos + LOCK_FMT.size
        raise ValueError(f)

    def __getitem__(self, k):
        return self.fields[k]

    def __repr__(self):
        return '<%s reply id=%d %s%s>' % (self.opname, self.id, self.err,
                                          ' %r' % self.errmsg if self.errmsg else '')


def parse_dirents(data):
    """Entries of a READDIR reply blob: list of (name, type, off)."""
    out, pos = [], 0
    while pos < len(data):
        ino, off, typ = struct.unpack_from('>QQI', data, pos)
        pos += 20
        name, pos = Reply._str(data, pos)
        has_attr = data[pos]
        pos += 1 + (Attr.SIZE if has_attr else 0)
        out.append((name, typ, off))
    return out


def parse_scan(data):
    """A SCAN reply blob: (base, records).  Records are
    ('entry', parent, name, Attr), ('end', index, status) or ('watched',
    index); a directory
    entry's index is implied (the next one), as the protocol says."""
    (base,) = struct.unpack_from('>I', data, 0)
    out, pos = [], 4
    while pos < len(data):
        kind, index = struct.unpack_from('>BI', data, pos)
        pos += 5
        if kind == SCAN_REC_ENTRY:
            name, pos = Reply._str(data, pos)
            a = Attr(data[pos:pos + Attr.SIZE])
            pos += Attr.SIZE
            out.append(('entry', index, name, a))
        elif kind == SCAN_REC_DIR_END:
            (status,) = struct.unpack_from('>I', data, pos)
            pos += 4
            out.append(('end', index, status))
        elif kind == SCAN_REC_WATCHED:
            out.append(('watched', index))
        else:
            raise ValueError('unknown SCAN record kind %d' % kind)
    return base, out


def enc_scan(base, records):
    """The inverse of parse_scan (records as it returns them, with an
    attr given as encoded bytes)."""
    out = struct.pack('>I', base)
    for r in records:
        if r[0] == 'entry':
            out += struct.pack('>BI', SCAN_REC_ENTRY, r[1]) + enc_str(r[2]) + r[3]
        elif r[0] == 'watched':
            out += struct.pack('>BI', SCAN_REC_WATCHED, r[1])
        else:
            out += struct.pack('>BII', SCAN_REC_DIR_END, r[1], r[2])
    return out


def closed_by_peer(sock, timeout=10):
    """True if the peer closes the stream (EOF or reset) within `timeout`,
    ignoring any replies sent before it did."""
    end = time.monotonic() + timeout
    sock.settimeout(timeout)
    try:
        while time.monotonic() < end:
            if sock.recv(65536) == b'':
                return True
    except (socket.timeout, TimeoutError):
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False


class Server:
    """qftfs-server on a socketpair (stdin and stdout are one socket)."""

    def __init__(self, server_bin, root, log_path, env=None, wrapper=(),
                 timeout=10, args=()):
        self.sock, child = socket.socketpair()
        self.log_path = log_path
        self.logf = open(log_path, 'ab')
        self.proc = subprocess.Popen(list(wrapper) + [server_bin, '--stdio',
                                                      '--root', root] +
                                     list(args),
                                     stdin=child, stdout=child,
                                     stderr=self.logf, env=env)
        child.close()
        self.sock.settimeout(timeout)
        self.next_id = 1

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, op, cred=None, **fields):
        rid = self.next_id
        self.next_id += 1
        self.send_raw(encode_request(op, rid, cred=cred, **fields))
        return rid

    def _recv_exact(self, n):
        buf = b''
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None if not buf else buf
            buf += chunk
        return buf

    def recv(self):
        """The next reply, or None at end of stream."""
        h = self._recv_exact(HDR.size)
        if h is None:
            return None
        if len(h) < HDR.size:
            raise ValueError('stream cut inside a header')
        n, op, flags, rid = HDR.unpack(h)
        if n > MAX_PAYLOAD:
            raise ValueError('oversized frame from the server: %d' % n)
        p = self._recv_exact(n) if n else b''
        if p is None or len(p) < n:
            raise ValueError('stream cut inside a payload')
        if not flags & F_REPLY:
            raise ValueError('server sent a request (op %d)' % op)
        return Reply(op, flags, rid, p)

    def call(self, op, cred=None, **fields):
        rid = self.send(op, cred=cred, **fields)
        r = self.recv()
        assert r is not None, '%s: server closed the connection' % op
        assert r.id == rid and r.opname == op, \
            'reply %r does not match request %s id %d' % (r, op, rid)
        return r

    def hello(self, version=VERSION, features=0):
        r = self.call('HELLO', magic=MAGIC, version=version,
                      features=features)
        return r

    def closed_by_peer(self, timeout=10):
        return closed_by_peer(self.sock, timeout)

    def finish(self, timeout=10):
        """Closes our end and returns the server's exit status."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self.sock.close()
        self.logf.close()
        return rc

    def log(self):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read().decode(errors='replace')
        except OSError:
            return ''


def alive(srv):
    """A cheap request that must succeed on a working connection."""
    r = srv.call('LSTAT', path='')
    return r.status == 0 and (r['attr'].mode & 0o170000) == S_IFDIR


def exists_outside(path):
    return os.path.lexists(path)


# ---------------------------------------------------------------------------
# The data plane of `qftfs-server --session` (docs/security.md): the
# handshake and sealed records, written from the document with Python's
# own cryptography, not the C code's.

AUTH_MAGIC, AUTH_VERSION = 0x51465444, 1
CIPHER_NONE, CIPHER_AES, CIPHER_CHACHA = 0, 1, 2


def hkdf(ikm, info, salt=None):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt,
                info=info.encode()).derive(ikm)


def resume_key(secret):
    """K_r = HKDF-SHA256(ikm S, no salt, info "qftfs v1 resume")."""
    return hkdf(secret, 'qftfs v1 resume')


class AuthFailed(Exception):
    pass


class Sealed:
    """One authenticated TCP connection to a session's port, carrying
    plain frames as records.  `key` is S for the first connections, K_r
    for resumed ones; `record` collects every byte sent (for replays).
    `sock`: a stream already connected (an --attach's channel) instead."""

    def __init__(self, port, key, cipher=CIPHER_AES, host='127.0.0.1',
                 timeout=10, record=None, sock=None):
        import hmac
        import hashlib
        self.sock = sock or socket.create_connection((host, port),
                                                     timeout=timeout)
        self.sock.settimeout(timeout)
        self.record = record
        self.next_id = 1
        nc = os.urandom(32)
        m1 = struct.pack('>IIII', AUTH_MAGIC, AUTH_VERSION, cipher, 0) + nc
        self._send(m1)
        m2 = self._recv_exact(72)
        if m2 is None or len(m2) < 72:
            raise AuthFailed('closed before message 2')
        t = m1 + m2[:40]
        k_auth = hkdf(key, 'qftfs v1 auth')
        mac = lambda label: hmac.new(k_auth, label + t,
                                     hashlib.sha256).digest()
        # Like tests/tools/qftfs-testpeer, it proves itself even to a
        # server whose proof is wrong, so that the server's check is what
        # a test exercises (and the server fails at once, not at 5 s).
        self._send(mac(b'qftfs-client'))
        if not hmac.compare_digest(mac(b'qftfs-server'), m2[40:]):
            self.sock.close()
            raise AuthFailed('server proof wrong')
        salt = nc + m2[8:40]
        self._tx = self._aead(cipher, hkdf(key, 'qftfs v1 c2s', salt))
        self._rx = self._aead(cipher, hkdf(key, 'qftfs v1 s2c', salt))
        self.cipher = cipher
        self._txn = self._rxn = 0

    @staticmethod
    def _aead(cipher, key):
        from cryptography.hazmat.primitives.ciphers import aead
        if cipher == CIPHER_CHACHA:
            return aead.ChaCha20Poly1305(key)
        return aead.AESGCM(key)

    def _send(self, data):
        if self.record is not None:
            self.record.append(data)
        self.sock.sendall(data)

    def _recv_exact(self, n):
        buf = b''
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                chunk = b''
            if not chunk:
                return None if not buf else buf
            buf += chunk
        return buf

    def send_frame(self, fr):
        nonce = b'\0' * 4 + struct.pack('>Q', self._txn)
        self._txn += 1
        hdr = struct.pack('>I', len(fr) + 16)
        if self.cipher == CIPHER_NONE:
            body = fr + self._tx.encrypt(nonce, b'', hdr + fr)
        else:
            body = self._tx.encrypt(nonce, fr, hdr)
        self._send(hdr + body)

    def recv_frame(self):
        """The next frame in clear, or None at end of stream."""
        h = self._recv_exact(4)
        if h is None:
            return None
        if len(h) < 4:
            raise ValueError('stream cut inside a record length')
        (n,) = struct.unpack('>I', h)
        if n < 16 or n > MAX_PAYLOAD + HDR.size + 16:
            raise ValueError('bad record length %d' % n)
        body = self._recv_exact(n)
        if body is None or len(body) < n:
            raise ValueError('stream cut inside a record')
        nonce = b'\0' * 4 + struct.pack('>Q', self._rxn)
        self._rxn += 1
        if self.cipher == CIPHER_NONE:
            fr = body[:-16]
            self._rx.decrypt(nonce, body[-16:], h + fr)
        else:
            fr = self._rx.decrypt(nonce, body, h)
        return fr

    def send(self, op, rid=None, **fields):
        if rid is None:
            rid = self.next_id
            self.next_id += 1
        self.send_frame(encode_request(op, rid, **fields))
        return rid

    def recv(self):
        """The next reply, or None at end of stream (or a reset)."""
        fr = self.recv_frame()
        if fr is None:
            return None
        n, op, flags, rid = HDR.unpack(fr[:HDR.size])
        if n != len(fr) - HDR.size:
            raise ValueError('frame length %d in a record of %d' %
                             (n, len(fr) - HDR.size))
        if not flags & F_REPLY:
            raise ValueError('server sent a non-reply (op %d flags %#x)' %
                             (op, flags))
        return Reply(op, flags, rid, fr[HDR.size:])

    def call(self, op, rid=None, **fields):
        rid = self.send(op, rid=rid, **fields)
        r = self.recv()
        assert r is not None, '%s: server closed the connection' % op
        assert r.id == rid and r.opname == op, \
            'reply %r does not match request %s id %d' % (r, op, rid)
        return r

    def hello(self, features=0):
        """HELLO with id 0; the numbered requests then start at 1."""
        return self.call('HELLO', rid=0, magic=MAGIC, version=VERSION,
                         features=features)

    def resume(self, seq, meta=False, version=VERSION, features=FEAT_RESUME):
        """RESUME as the first frame; the next request id becomes the
        server's seq when it answers."""
        r = self.call('RESUME', rid=0, magic=MAGIC, version=version,
                      features=features, opflags=RESUME_META if meta else 0,
                      seq=seq)
        return r

    def closed_by_peer(self, timeout=10):
        return closed_by_peer(self.sock, timeout)

    def reset(self):
        """Ends the connection with a TCP reset, as a NAT that forgot it."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 struct.pack('ii', 1, 0))
        except OSError:
            pass
        self.sock.close()

    def close(self):
        self.sock.close()


class SessionServer:
    """`qftfs-server --session` run by hand, as sshd would run it."""

    def __init__(self, server_bin, root, log_path, resume=None, env=None,
                 resume_env=None, args=()):
        self.secret = os.urandom(32)
        self.log_path = log_path
        self.logf = open(log_path, 'ab')
        env = dict(env if env is not None else os.environ)
        env['SSH_CONNECTION'] = '127.0.0.1 40000 127.0.0.1 22'
        if resume_env is not None:
            env['QFTFS_RESUME'] = str(resume_env)
        cmd = [server_bin, '--session', '--root', root] + list(args)
        if resume is not None:
            cmd.append('--resume=%d' % resume)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=self.logf, env=env)
        self.proc.stdin.write(self.secret.hex().encode() + b'\n')
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        parts = line.split()
        if len(parts) != 3 or parts[0] != b'QFTFS':
            raise RuntimeError('bad greeting %r; log:\n%s' %
                               (line, self.log()))
        self.port = int(parts[2])
        self.key_r = resume_key(self.secret)

    def connect(self, key=None, **kw):
        return Sealed(self.port, key or self.secret, **kw)

    def close_channel(self):
        """Ends the ssh channel: stdin closes."""
        self.proc.stdin.close()

    def wait(self, timeout=10):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        self.logf.close()

    def log(self):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read().decode(errors='replace')
        except OSError:
            return ''


# ---------------------------------------------------------------------------
# FETCH (walk-ahead, docs/protocol.md "Walk-ahead: FETCH")

FEAT_FETCH = 0x1000
FETCH_EOF = 0x1


def enc_fetch_names(names):
    """A FETCH request's data: each name a string."""
    return b''.join(enc_str(n) for n in names)


def parse_fetch(data):
    """A FETCH reply's records: list of (status name, Attr or None, flags,
    bytes)."""
    out, pos = [], 0
    while pos < len(data):
        (st,) = struct.unpack_from('>I', data, pos)
        pos += 4
        if st:
            out.append((STATUS[st], None, 0, b''))
            continue
        a = Attr(data[pos:pos + Attr.SIZE])
        pos += Attr.SIZE
        flags, n = struct.unpack_from('>II', data, pos)
        pos += 8
        out.append(('OK', a, flags, data[pos:pos + n]))
        pos += n
    return out
