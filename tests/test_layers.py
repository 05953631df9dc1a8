# SPDX-License-Identifier: MIT
"""The shape of the code, read from the build's object files with nm(1).

docs/architecture.md promises two things a reader can rely on:

- **No link-time cycles.**  Among the client's objects (and among the
  server's and common/'s), no file calls a function that another file
  defines while that file, directly or through others, calls back into it.
  A cycle is a set of files that can only be read, tested or replaced
  together; the check finds every strongly connected set of more than one
  object and names the calls that tie it.
- **Calls go down the layers.**  The client's layers, bottom up, are
  login, net, fs, ops, cli (fuse/meson.build), and main.c sits on top.  An
  object may use what its own layer or a lower one defines, never a higher
  one; fuse/meson.build also makes such a call a link error.

The static libraries are archives of the very objects the programs link, so
this reads them rather than trusting the source lists.
"""

import collections
import glob
import os
import subprocess

import pytest

import util

LAYERS = ['login', 'net', 'fs', 'ops', 'cli', 'main']


def _symbols(paths):
    """{object: (defined, undefined)} for every object in the archives or
    object files `paths`, keyed 'layer/name.c'-like."""
    objs = {}
    for path in paths:
        r = subprocess.run(['nm', '-A', path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, check=True)
        for line in r.stdout.splitlines():
            # "archive.a:member.o:ADDR T name", "file.o:ADDR T name", or
            # with blanks for ADDR on undefined symbols.
            parts = line.split()
            if len(parts) < 2:
                continue
            head = parts[0]
            kind, sym = parts[-2], parts[-1]
            fields = head.split(':')
            member = fields[1] if len(fields) >= 3 else fields[0]
            key = (path, os.path.basename(member))
            d, u = objs.setdefault(key, (set(), set()))
            if kind in 'TDBRCGVW' and len(kind) == 1:
                d.add(sym)
            elif kind == 'U':
                u.add(sym)
    return objs


def _graph(objs):
    """{a: {b: [symbols a takes from b]}} over `objs`."""
    where = {}
    for key, (defs, _) in objs.items():
        for s in defs:
            where.setdefault(s, key)
    edges = collections.defaultdict(lambda: collections.defaultdict(list))
    for key, (_, undef) in objs.items():
        for s in undef:
            other = where.get(s)
            if other is not None and other != key:
                edges[key][other].append(s)
    return edges


def _cycles(nodes, edges):
    """The strongly connected sets of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def _describe(comp, edges, label):
    ties = []
    for a in comp:
        for b in comp:
            if b in edges.get(a, {}):
                ties.append('%s -> %s (%s)' % (label(a), label(b),
                                               ', '.join(sorted(edges[a][b])[:4])))
    return '{%s}: %s' % (', '.join(label(c) for c in comp), '; '.join(ties))


def _client_archives(b):
    libs = {}
    for layer in LAYERS[:-1]:
        path = os.path.join(b, 'fuse', layer, 'libqc_%s.a' % layer)
        if os.path.exists(path):
            libs[layer] = path
    return libs


@pytest.fixture(scope='module')
def build():
    b = util.build_dir()
    if not _client_archives(b):
        pytest.skip('no client libraries in %s (not built?)' % b)
    return b


def _client_objects(b):
    libs = _client_archives(b)
    paths = [libs[layer] for layer in LAYERS[:-1] if layer in libs]
    paths += glob.glob(os.path.join(b, 'fuse', 'qftfs.p', '*.o'))
    objs = _symbols(paths)
    layer_of = {}
    for key in objs:
        path, name = key
        if path.endswith('.a'):
            layer_of[key] = os.path.basename(os.path.dirname(path))
        else:
            layer_of[key] = 'main'
    return objs, layer_of


def test_every_layer_is_built(build):
    assert sorted(_client_archives(build)) == sorted(LAYERS[:-1])


def test_client_has_no_link_cycles(build):
    objs, layer_of = _client_objects(build)
    edges = _graph(objs)
    label = lambda k: '%s/%s' % (layer_of[k], k[1].replace('.c.o', '.c'))
    found = _cycles(objs.keys(), edges)
    assert not found, 'link-time cycles among the client objects:\n' + \
        '\n'.join(_describe(c, edges, label) for c in found)


def test_client_calls_go_down_the_layers(build):
    objs, layer_of = _client_objects(build)
    edges = _graph(objs)
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    wrong = []
    for a, outs in edges.items():
        for b, syms in outs.items():
            if rank[layer_of[b]] > rank[layer_of[a]]:
                wrong.append('%s/%s -> %s/%s (%s)' % (
                    layer_of[a], a[1], layer_of[b], b[1],
                    ', '.join(sorted(syms)[:4])))
    assert not wrong, 'calls up the layers:\n' + '\n'.join(sorted(wrong))


@pytest.mark.parametrize('program', ['server/qftfs-server.p', 'common'])
def test_server_and_common_have_no_link_cycles(build, program):
    if program == 'common':
        paths = glob.glob(os.path.join(build, 'common', '*.a'))
    else:
        paths = glob.glob(os.path.join(build, program, '*.o'))
    assert paths, 'no objects for %s in %s' % (program, build)
    objs = _symbols(paths)
    edges = _graph(objs)
    label = lambda k: k[1]
    found = _cycles(objs.keys(), edges)
    assert not found, 'link-time cycles in %s:\n' % program + \
        '\n'.join(_describe(c, edges, label) for c in found)


def test_no_client_file_is_over_1000_lines():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fuse')
    long = []
    for path in sorted(glob.glob(os.path.join(root, '**', '*.c'), recursive=True)):
        with open(path) as f:
            n = sum(1 for _ in f)
        if n > 1000:
            long.append('%s: %d lines' % (os.path.relpath(path, root), n))
    assert not long, 'client files over 1,000 lines:\n' + '\n'.join(long)
