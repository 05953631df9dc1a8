# SPDX-License-Identifier: MIT
"""Lazy handles (QFT_O_LAZY, HELLO feature LAZY): who sends the flag, who
accepts it, and that old and new programs still work together.

What must hold (docs/protocol.md, "Open flags"):

- a server grants LAZY to a client that asks, and then accepts
  QFT_O_LAZY on OPEN and CREATE; without the feature it refuses the bit
  with EINVAL, as an older server (which does not know the bit) does, so
  an older client that never asks is served as before;
- the client marks the files it opens for writing lazy when close()
  does not wait for their data to be durable (commit=async, commit=none),
  and no others (commit=close, files opened read-only);
- against a server that does not grant LAZY (an older one) the client
  never sends the bit: every open still works.  The older server is this
  one behind a relay that clears the LAZY bit in the HELLO replies, so
  that the server then refuses the bit exactly as an older one would.

How the data is paced to the disk is counted in test_slowdisk.py.
"""

import os

import pytest

import util
import wire

P = os.path.join

FEAT_LAZY = 0x20
O_LAZY = 0x200
# The server's debug line for a lazy handle (server/ops.c finish_open).
LAZY_LOG = 'lazy handle: no write-out behind its WRITEs'

# A server command wrapper: runs the server with its two streams (stdin
# and stdout, and --meta-fd 3) through a relay that clears the bits
# `mask` in the features of the first frame each stream sends back (the
# HELLO reply) and copies everything else as it is.
RELAY = r'''#!/usr/bin/python3
import os, socket, struct, sys, threading

mask = int(sys.argv[1], 0)
argv = sys.argv[2:]
HDR = struct.Struct('>IHHQ')

def read_exact(fd, n):
    buf = b''
    while len(buf) < n:
        b = os.read(fd, n - len(buf))
        if not b:
            return None
        buf += b
    return buf

def write_all(fd, b):
    while b:
        b = b[os.write(fd, b):]

def down(src, dst):
    """Server to client: edits the HELLO reply, then copies."""
    try:
        h = read_exact(src, HDR.size)
        if h is None:
            return
        n, op, flags, rid = HDR.unpack(h)
        p = read_exact(src, n) if n else b''
        if p is None:
            return
        if op == 1 and len(p) >= 16 and p[:4] == b'\0\0\0\0':
            (feat,) = struct.unpack_from('>I', p, 12)
            p = p[:12] + struct.pack('>I', feat & ~mask) + p[16:]
        write_all(dst, h + p)
        up(src, dst)
    except OSError:
        pass
    finally:
        done(dst)

def up(src, dst):
    while True:
        b = os.read(src, 1 << 20)
        if not b:
            return
        write_all(dst, b)

def done(fd):
    try:
        socket.socket(fileno=os.dup(fd)).shutdown(socket.SHUT_WR)
    except OSError:
        pass

def pump_up(src, dst):
    try:
        up(src, dst)
    except OSError:
        pass
    finally:
        done(dst)

bulk = socket.socketpair()
meta = socket.socketpair()
pid = os.fork()
if pid == 0:
    os.dup2(bulk[1].fileno(), 0)
    os.dup2(bulk[1].fileno(), 1)
    os.dup2(meta[1].fileno(), 3)
    os.closerange(4, 1024)
    os.execv(argv[0], argv)
bulk[1].close()
meta[1].close()
ts = [threading.Thread(target=pump_up, args=(0, bulk[0].fileno())),
      threading.Thread(target=down, args=(bulk[0].fileno(), 1)),
      threading.Thread(target=pump_up, args=(3, meta[0].fileno())),
      threading.Thread(target=down, args=(meta[0].fileno(), 3))]
for t in ts:
    t.daemon = True
    t.start()
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
'''


# ---------------------------------------------------------------------------
# 1. The server, on the wire


@pytest.fixture
def start(wire_server):
    def make(root, features):
        srv = wire_server(root, hello=False)
        r = srv.call('HELLO', magic=wire.MAGIC, version=wire.VERSION,
                     features=features)
        assert r.status == 0, r
        return srv, r['features']
    return make


def test_wire_lazy_granted_and_accepted(start, tmp_path):
    (tmp_path / 'f').write_bytes(b'old')
    srv, granted = start(tmp_path, FEAT_LAZY)
    assert granted & FEAT_LAZY
    r = srv.call('CREATE', handle=1, path='', name='new',
                 opflags=wire.O_WRONLY | O_LAZY, mode=0o644)
    assert r.status == 0, r
    r = srv.call('WRITE', handle=1, offset=0, data=b'lazy')
    assert r.status == 0 and r['count'] == 4, r
    # An explicit sync of a lazy handle is still a sync.
    r = srv.call('FSYNC', handle=1, opflags=0)
    assert r.status == 0, r
    assert srv.call('CLOSE', handle=1).status == 0
    r = srv.call('OPEN', handle=2, path='f', opflags=wire.O_RDWR | O_LAZY)
    assert r.status == 0, r
    assert srv.call('CLOSE', handle=2).status == 0
    assert (tmp_path / 'new').read_bytes() == b'lazy'


@pytest.mark.parametrize('features', [0, 0x10], ids=['none', 'others'])
def test_wire_lazy_refused_unless_agreed(start, tmp_path, features):
    """An older client never asks and never sends the bit: it is served
    as before.  A client that sends it unasked is refused, as an older
    server would refuse it: nothing is created or opened."""
    (tmp_path / 'f').write_bytes(b'old')
    srv, granted = start(tmp_path, features)
    assert not granted & FEAT_LAZY
    r = srv.call('CREATE', handle=1, path='', name='new',
                 opflags=wire.O_WRONLY | O_LAZY, mode=0o644)
    assert r.err == 'EINVAL', r
    assert not (tmp_path / 'new').exists()
    r = srv.call('OPEN', handle=1, path='f',
                 opflags=wire.O_WRONLY | wire.O_TRUNC | O_LAZY)
    assert r.err == 'EINVAL', r
    assert (tmp_path / 'f').read_bytes() == b'old'
    # The same requests without the bit: as always.
    r = srv.call('CREATE', handle=1, path='', name='new',
                 opflags=wire.O_WRONLY, mode=0o644)
    assert r.status == 0, r
    r = srv.call('OPEN', handle=2, path='f', opflags=wire.O_RDWR)
    assert r.status == 0, r


def test_wire_unknown_open_bits_still_refused(start, tmp_path):
    """The bit above LAZY is still unknown: the decoder refuses it."""
    (tmp_path / 'f').write_bytes(b'old')
    srv, _ = start(tmp_path, FEAT_LAZY)
    r = srv.call('OPEN', handle=1, path='f', opflags=0x400)
    assert r.err == 'EINVAL', r


# ---------------------------------------------------------------------------
# 2. The client: which handles it marks, and against which server


def _debug_server(build=None):
    return util.server_bin(build or util.build_dir()) + ' -d'


def _mount(mounter, tmp_path, server, commit):
    """A mount whose root holds `old` (b'old') and `ro` (b'r')."""
    src = tmp_path / 'src'
    src.mkdir()
    (src / 'old').write_bytes(b'old')
    (src / 'ro').write_bytes(b'r')
    return mounter(src=str(src), server=server, opts=['commit=' + commit])


def _write_files(mnt):
    """CREATE (new files) and OPEN for writing (an existing one)."""
    for i in range(3):
        with open(P(mnt, 'n%d' % i), 'wb') as f:
            f.write(b'x' * 100000)
    with open(P(mnt, 'old'), 'r+b') as f:
        f.seek(0, 2)
        f.write(b'+more')
    with open(P(mnt, 'old'), 'rb') as f:
        assert f.read() == b'old+more'


def _check_files(mnt, src):
    os.sync()
    for i in range(3):
        assert os.path.getsize(P(src, 'n%d' % i)) == 100000
    with open(P(src, 'old'), 'rb') as f:
        assert f.read() == b'old+more'


@pytest.mark.parametrize('commit,lazy', [('close', False), ('none', True),
                                         ('async', True)])
def test_mount_marks_handles_by_commit_mode(mounter, tmp_path, commit,
                                            lazy):
    m = _mount(mounter, tmp_path, _debug_server(), commit)
    src, mnt = m
    # Read-only first: never lazy, whatever the mode.
    with open(P(mnt, 'ro'), 'rb') as f:
        assert f.read() == b'r'
    assert LAZY_LOG not in m.log(), util.tail(m.log())
    _write_files(mnt)
    if commit == 'async':
        assert util.run([m.client, '--sync', mnt], timeout=60).returncode == 0
    _check_files(mnt, src)
    assert (LAZY_LOG in m.log()) == lazy, util.tail(m.log())


def test_mount_old_server_gets_no_lazy_bit(mounter, tmp_path):
    """commit=async against a server that does not grant LAZY: opens for
    writing work (the server would refuse the bit) and none is lazy."""
    relay = tmp_path / 'old-server-relay'
    relay.write_text(RELAY)
    relay.chmod(0o755)
    m = _mount(mounter, tmp_path,
               '%s %#x %s' % (relay, FEAT_LAZY, _debug_server()), 'async')
    src, mnt = m
    _write_files(mnt)
    r = util.run([m.client, '--sync', mnt], timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr, util.tail(m.log()))
    _check_files(mnt, src)
    log = m.log()
    assert LAZY_LOG not in log, util.tail(log)
    opens = [l for l in log.splitlines()
             if 'CREATE id' in l or 'OPEN id' in l]
    assert opens and all(l.endswith(': ok') for l in opens), util.tail(log)
