# SPDX-License-Identifier: MIT
"""lz4 on the wire: -o compress=lz4|auto (issue 4).

What must hold:

- whatever the data (random, zeros, JSON-like text) and size (empty, one
  byte, around a page, past a frame, many frames), a file copied onto the
  mount and one copied off it arrive byte for byte;
- compression really happens, and only where it pays: counted on the
  server's side of the socket (its /proc/PID/io: `rchar` while files go
  up, `wchar` while they come down; the server's file I/O never adds to
  those in that direction), zeros and text cross the link in a fraction
  of their size and random data in at least its size (so the count is
  real) and hardly more; both programs' own "lz4: sent X bytes as Y"
  lines agree that frames went compressed;
- without compression (the default, or a server that refuses it as an
  older one would) every byte crosses as it is and nothing says "lz4";
- over an ssh mount, the sealed records carry compressed frames;
- a bad -o compress= value is a usage error.
"""

import os
import random
import re

import pytest

import util
from util import MiB

# The sshd fixtures, for the sealed case at the end.
from test_ssh import home, served, sshd, ssh_mount  # noqa: F401

P = os.path.join

# Random last: with compress=auto it makes the sender back off, which the
# files after it would pay for (checked on its own below).
KINDS = ['zero', 'json', 'random']
SIZES = [0, 1, 4095, 4096, MiB + 1, 20 * MiB]
# Sizes large enough for the wire counts to mean something: requests
# other than READ/WRITE add a few hundred bytes per file.
MEASURED = [s for s in SIZES if s > MiB]

_data = {}


def json_like(size, seed=4):
    """Text like a telemetry export: repeated keys, a few hosts and
    messages, low-entropy numbers."""
    rng = random.Random(seed)
    hosts = ['node-%03d.lab.example' % i for i in range(32)]
    levels = ['DEBUG', 'INFO', 'INFO', 'WARN', 'ERROR']
    words = ('bundle slot rootfs verify mount update install checksum image '
             'firmware sensor reading voltage link timeout retry write read '
             'block device queue flush sync complete failed ready').split()
    msgs = [' '.join(rng.choice(words) for _ in range(rng.randrange(3, 8)))
            for _ in range(40)]
    out, n, seq, ts = [], 0, 0, 1700000000000
    while n < size:
        seq += 1
        ts += rng.randrange(1, 200)
        rec = ('{"seq":%d,"ts":%d,"host":"%s","level":"%s","msg":"%s",'
               '"value":%d.%d}\n' % (seq, ts, rng.choice(hosts),
                                     rng.choice(levels), rng.choice(msgs),
                                     rng.randrange(200, 260),
                                     rng.randrange(10)))
        out.append(rec)
        n += len(rec)
    return ''.join(out).encode()[:size]


def content(kind, size):
    """The test data, generated once per process (largest size first: the
    smaller ones are its prefixes)."""
    if kind not in _data:
        big = max(SIZES)
        if kind == 'zero':
            _data[kind] = bytes(big)
        elif kind == 'random':
            _data[kind] = random.Random(7).randbytes(big)
        else:
            _data[kind] = json_like(big)
    return _data[kind][:size]


def server_io(pid):
    """(rchar, wchar) of a process: bytes it read and wrote by system
    call, sockets included."""
    with open('/proc/%d/io' % pid) as f:
        fields = dict(line.split(': ', 1) for line in f.read().splitlines())
    return int(fields['rchar']), int(fields['wchar'])


def the_server(m):
    assert len(m.server_pids) == 1, \
        'expected one server child, found %s' % m.server_pids
    return m.server_pids[0]


def upload(mnt_path, data):
    with open(mnt_path, 'wb') as f:
        for off in range(0, len(data), MiB):
            f.write(data[off:off + MiB])


def download(mnt_path):
    util.until_visible(mnt_path)
    with open(mnt_path, 'rb') as f:
        return f.read()


def copy_both_ways(src, mnt, pid, kind, size, name):
    """Copies `size` bytes of `kind` onto the mount at `mnt` and another
    file off it (`src` is the served directory); checks both and returns
    the wire bytes (up, down) counted at the server `pid`."""
    data = content(kind, size)
    r0, _ = server_io(pid)
    upload(P(mnt, name + '.up'), data)
    r1, _ = server_io(pid)
    with open(P(src, name + '.up'), 'rb') as f:
        assert f.read() == data, '%s: the file copied onto the mount differs' % name
    # Written in a directory of its own, made on the server, which the
    # mount has never listed and so does not watch: no change notification
    # names the file.  One that did (its writes', or a rename's into a
    # watched directory) could reach the client while it reads the file
    # and drop the pages the kernel had read, which the kernel then reads
    # again and the count would measure.
    down = name + '.dir'
    os.mkdir(P(src, down))
    with open(P(src, down, name), 'wb') as f:
        f.write(data)
    _, w0 = server_io(pid)
    got = download(P(mnt, down, name))
    _, w1 = server_io(pid)
    assert len(got) == len(data), ('%s: read %d bytes off the mount, want %d'
                                   % (name, len(got), len(data)))
    assert got == data, '%s: the file copied off the mount differs' % name
    return r1 - r0, w1 - w0


LZ4_LINE = re.compile(
    r'(qftfs(?:-server)?): lz4: sent (\d+) bytes as (\d+) \([^,]*, (\d+) of '
    r'(\d+) frames compressed\); received (\d+) bytes as (\d+) \([^,]*, '
    r'(\d+) of (\d+) frames compressed\)')


def lz4_lines(log):
    """{program: (sent, sent_wire, sent_lz4, received, received_wire,
    received_lz4)} from the lines the channels log when they close."""
    out = {}
    for mt in LZ4_LINE.finditer(log):
        g = mt.groups()
        out[g[0]] = (int(g[1]), int(g[2]), int(g[3]), int(g[5]), int(g[6]),
                     int(g[7]))
    return out


def check_ratio(kind, size, wire, what):
    """The wire bytes of one file are what its kind allows."""
    if kind == 'random':
        # Never compressed, never grown by more than the frame overhead;
        # at least its size, or the count is not counting the socket.
        assert size <= wire <= size * 1.01 + 64 * 1024, \
            '%s: %d random bytes took %d bytes on the wire' % (what, size, wire)
    elif kind == 'zero':
        assert wire < size / 50, \
            '%s: %d zero bytes took %d bytes on the wire' % (what, size, wire)
    else:
        assert wire < size * 0.6, \
            '%s: %d bytes of text took %d bytes on the wire' % (what, size, wire)


# ---------------------------------------------------------------------------

MODES = [
    ({'opts': ['compress=lz4']}, 'lz4'),
    ({'opts': ['compress=auto']}, 'auto'),
    ({'opts': ['compress=lz4'], 'build': 'asan'}, 'lz4-asan'),
]


@pytest.mark.deadline(600)
@pytest.mark.parametrize('mount', [p for p, _ in MODES], indirect=True,
                         ids=[i for _, i in MODES])
def test_copy_compressed(mount):
    pid = the_server(mount)
    wire = {}
    for kind in KINDS:
        for size in SIZES:
            name = '%s-%d' % (kind, size)
            wire[name] = copy_both_ways(mount.src, mount.mnt, pid, kind,
                                        size, name)
    for kind in KINDS:
        for size in MEASURED:
            up, down = wire['%s-%d' % (kind, size)]
            check_ratio(kind, size, up, '%s-%d onto the mount' % (kind, size))
            check_ratio(kind, size, down, '%s-%d off the mount' % (kind, size))
    # Text right after random data: auto may send the first chunks untried
    # (QFT_CHAN_LZ4_REPROBE of them), then compresses again.
    size = max(SIZES)
    up, down = copy_both_ways(mount.src, mount.mnt, pid, 'json', size,
                              'json-after-random')
    for what, n in (('onto', up), ('off', down)):
        assert n < size / 2, ('text after random data copied %s the mount '
                              'took %d of %d bytes' % (what, n, size))

    problems = mount.stop()
    assert not problems, '\n'.join(problems)
    lines = lz4_lines(mount.log())
    assert set(lines) == {'qftfs', 'qftfs-server'}, \
        'expected an lz4 line from both programs:\n' + util.tail(mount.log())
    c, s = lines['qftfs'], lines['qftfs-server']
    # What one side sent is what the other received, byte for byte.
    assert (c[0], c[1], c[2]) == (s[3], s[4], s[5])
    assert (s[0], s[1], s[2]) == (c[3], c[4], c[5])
    total = sum(len(content(k, n)) for k in KINDS for n in SIZES) + size
    for who, (sent, wire_b, nlz4) in (('client', c[:3]), ('server', s[:3])):
        assert sent >= total, '%s sent %d payload bytes, the data is %d' % (
            who, sent, total)
        assert nlz4 > 0 and wire_b < sent * 0.6, \
            '%s: %d frames compressed, %d bytes as %d' % (who, nlz4, sent, wire_b)


def write_server_wrapper(path, server, *args):
    """A server command that adds arguments (the exec keeps the pid)."""
    with open(path, 'w') as f:
        f.write('#!/bin/sh\nexec %s %s "$@"\n' % (server, ' '.join(args)))
    os.chmod(path, 0o755)
    return path


@pytest.mark.deadline(300)
@pytest.mark.parametrize('case', ['client-none', 'server-refuses'])
def test_uncompressed(mounter, build, tmp_path, case):
    """The default sends everything as it is; so does compress=lz4 against
    a server that does not accept it (as one that predates it)."""
    if case == 'client-none':
        m = mounter(opts=[])
    else:
        wrapper = write_server_wrapper(str(tmp_path / 'server-no-lz4'),
                                       util.server_bin(build),
                                       '--no-compress')
        m = mounter(opts=['compress=lz4'], server=wrapper)
    pid = the_server(m)
    size = 4 * MiB + 3
    for kind in ('zero', 'json'):
        up, down = copy_both_ways(m.src, m.mnt, pid, kind, size, kind)
        # The slack is for frame headers: OPEN's 128 KiB fetched again
        # (the kernel's second read overtaking its first; fixed, see
        # test_streams.py's test_overtaken_first_read_fetches_nothing_twice),
        # compression applied or the data sent twice is far outside it.
        for what, n in (('onto', up), ('off', down)):
            assert size <= n <= size * 1.01 + 64 * 1024, \
                ('%s: %d bytes of %s copied %s the mount took %d bytes '
                 'on the wire' % (case, size, kind, what, n))
    problems = m.stop()
    assert not problems, '\n'.join(problems)
    log = m.log()
    assert 'lz4:' not in log, log
    if case == 'server-refuses':
        assert 'does not accept compression' in log, log
    else:
        assert 'compression' not in log, log


def test_bad_compress_option(build, tmp_path):
    src, mnt = tmp_path / 'src', tmp_path / 'mnt'
    src.mkdir()
    mnt.mkdir()
    r = util.run([util.client_bin(build), '-f', '-o', 'compress=zstd',
                  str(src), str(mnt)], timeout=30)
    assert r.returncode == 2, r
    assert "compress" in r.stderr and 'zstd' in r.stderr, r.stderr
    assert not util.find_mount(str(mnt))


@pytest.mark.deadline(300)
def test_sealed_ssh_mount(sshd, mounter, home, served):  # noqa: F811
    """Over the authenticated, encrypted data plane the records carry the
    compressed frames: counted at the remote server's socket."""
    m = ssh_mount(mounter, sshd, home, served, opts=['compress=auto'])
    pids = [p for p in util.find_processes('--root ' + served)
            if 'qftfs-server' in open('/proc/%d/cmdline' % p, 'rb')
            .read().decode(errors='replace')]
    assert len(pids) == 1, 'expected one server, found %s' % pids
    size = 8 * MiB
    for kind in ('json', 'random'):
        up, down = copy_both_ways(served, m.mnt, pids[0], kind, size, kind)
        check_ratio(kind, size, up, '%s onto the ssh mount' % kind)
        check_ratio(kind, size, down, '%s off the ssh mount' % kind)
    problems = m.stop()
    assert not problems, '\n'.join(problems)
    lines = lz4_lines(m.log())
    assert 'qftfs' in lines and lines['qftfs'][2] > 0, m.log()
