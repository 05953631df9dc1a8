# SPDX-License-Identifier: MIT
"""A served tree that spans file systems.

Two tmpfs mounted below the served root number their inodes alike (each
from its own counter), so without the device in the inode numbers the
client shows, `b/x` would look like a hard link of `a/x` to tar, and the
two tmpfs roots like a loop to find.  The server mixes the device into
the numbers of objects off the root's device (docs/protocol.md, "attr").
"""
import os
import subprocess

import pytest

import util

P = os.path.join


@pytest.fixture
def spanning_tree(need_root, tmp_path):
    """A source directory with two tmpfs below it, `a` and `b`, each with
    a file `x` and its hard link `x2` of different content."""
    src = tmp_path / 'src'
    src.mkdir()
    mounted = []
    try:
        for name in ('a', 'b'):
            d = src / name
            d.mkdir()
            r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m',
                                'qftfs-test', str(d)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip('cannot mount a tmpfs: ' + r.stderr.strip())
            mounted.append(str(d))
            with open(d / 'x', 'w') as f:
                f.write('content of %s\n' % name)
            os.link(d / 'x', d / 'x2')
        yield str(src)
    finally:
        for d in mounted:
            subprocess.run(['umount', '-l', d], check=False)


def test_inode_numbers_apart_across_devices(spanning_tree, mounter,
                                            tmp_path):
    src = spanning_tree
    raw = [os.stat(P(src, n, 'x')).st_ino for n in ('a', 'b')]
    if raw[0] != raw[1]:
        pytest.skip('this kernel gave the two tmpfs distinct inode numbers '
                    '(%d, %d): no collision to show' % tuple(raw))
    m = mounter(src=src)
    st = {n: os.stat(P(m.mnt, n)) for n in ('a', 'a/x', 'a/x2', 'b', 'b/x',
                                           'b/x2')}
    assert st['a/x'].st_ino != st['b/x'].st_ino, \
        'two files on two devices are shown one inode number'
    assert st['a'].st_ino != st['b'].st_ino, \
        'the roots of two tmpfs are shown one inode number'
    assert st['a/x'].st_ino == st['a/x2'].st_ino, 'hard links split'
    assert st['b/x'].st_ino == st['b/x2'].st_ino, 'hard links split'
    # Objects on the root's own device keep their number.
    assert os.stat(m.mnt).st_ino == os.stat(src).st_ino
    # READDIR's numbers are the same as the attributes'.
    for name in ('a', 'b'):
        for e in os.scandir(P(m.mnt, name)):
            assert e.inode() == os.stat(e.path).st_ino, e.path

    # find sees no loop and lists everything.
    r = subprocess.run(['find', m.mnt], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and 'loop' not in r.stderr, r.stderr
    assert len(r.stdout.split()) == 7, r.stdout

    # tar keeps the hard links and stores b/x as itself, not as a link to
    # a/x.
    out = tmp_path / 'out'
    out.mkdir()
    util.run(['bash', '-c', 'set -o pipefail; tar -C %s -cf - . | '
              'tar -C %s -xf -' % (m.mnt, out)], check=True, timeout=60)
    for name in ('a', 'b'):
        for f in ('x', 'x2'):
            with open(out / name / f) as fh:
                assert fh.read() == 'content of %s\n' % name, (name, f)
    assert os.stat(out / 'a' / 'x').st_ino == os.stat(out / 'a' / 'x2').st_ino
    assert os.stat(out / 'a' / 'x').st_ino != os.stat(out / 'b' / 'x').st_ino
