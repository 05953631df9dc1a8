# SPDX-License-Identifier: MIT
"""The fuzz targets' checked-in corpora, replayed as ordinary tests.

Each target of tests/fuzz/ (fuzz_frame, fuzz_server, fuzz_client,
fuzz_auth, fuzz_login, fuzz_scan) is built
in the normal trees with tests/fuzz/driver.c instead of libFuzzer; here
each one runs once over every file of tests/fuzz/corpus/<target>/ in
build/ and build-asan/ (QFTFS_BUILD, QFTFS_BUILD_ASAN), so an input that
once crashed a decoder keeps being checked, with the sanitizers in the
ASan tree.  The long fuzzing runs themselves are not part of the suite:
docs/reliability.md ("Fuzzing") says how to run them.
"""

import filecmp
import json
import os
import sys
import tempfile

import pytest

import util

TARGETS = ('fuzz_frame', 'fuzz_server', 'fuzz_client', 'fuzz_auth',
           'fuzz_login', 'fuzz_scan')
FUZZ_DIR = os.path.join(util.REPO, 'tests', 'fuzz')
CORPUS = os.path.join(FUZZ_DIR, 'corpus')
CORPUS_MAX_BYTES = 1 << 20


def _trees():
    return [('build', util.build_dir()), ('asan', util.asan_build_dir())]


def _is_libfuzzer_tree(tree):
    """True for a tree set up with -Dfuzz=true: its binaries would fuzz
    forever instead of replaying the corpus."""
    try:
        with open(os.path.join(tree, 'meson-info',
                               'intro-buildoptions.json')) as f:
            opts = json.load(f)
    except (OSError, ValueError):
        return False
    return any(o.get('name') == 'fuzz' and o.get('value') is True
               for o in opts)


def _configured_targets(tree):
    """Names of the targets meson configured in `tree`, or None."""
    try:
        with open(os.path.join(tree, 'meson-info',
                               'intro-targets.json')) as f:
            return {t.get('name') for t in json.load(f)}
    except (OSError, ValueError):
        return None


def _corpus_files(target):
    d = os.path.join(CORPUS, target)
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if not f.startswith('.'))


@pytest.mark.parametrize('target', TARGETS)
def test_corpus_is_present_and_small(target):
    files = _corpus_files(target)
    assert len(files) >= 10, '%s: only %d corpus files' % (target,
                                                           len(files))
    total = sum(os.path.getsize(os.path.join(CORPUS, t, f))
                for t in TARGETS for f in os.listdir(os.path.join(CORPUS, t)))
    assert total < CORPUS_MAX_BYTES, \
        'tests/fuzz/corpus holds %d bytes; keep it under %d' % (
            total, CORPUS_MAX_BYTES)


def test_seeds_match_generator():
    """The seeds are what gen_corpus.py writes from tests/wire.py today, so
    a protocol change cannot leave them silently stale."""
    with tempfile.TemporaryDirectory() as tmp:
        r = util.run([sys.executable, os.path.join(FUZZ_DIR, 'gen_corpus.py'),
                      tmp], timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        for target in TARGETS:
            fresh = sorted(f for f in os.listdir(os.path.join(tmp, target)))
            kept = sorted(f for f in os.listdir(os.path.join(CORPUS, target))
                          if f.startswith('seed-'))
            assert fresh == kept, \
                ('%s: seed files differ from gen_corpus.py\'s; run '
                 'python3 tests/fuzz/gen_corpus.py' % target)
            _, diff, errs = filecmp.cmpfiles(os.path.join(tmp, target),
                                             os.path.join(CORPUS, target),
                                             fresh, shallow=False)
            assert not diff and not errs, \
                ('%s: stale seeds %s; run python3 tests/fuzz/gen_corpus.py'
                 % (target, diff + errs))


@pytest.mark.deadline(900)
@pytest.mark.parametrize('tree_tag', ['build', 'asan'])
@pytest.mark.parametrize('target', TARGETS)
def test_corpus_replay(tree_tag, target):
    tree = dict(_trees())[tree_tag]
    if not os.path.isdir(tree):
        pytest.skip('no build tree at %s' % tree)
    if _is_libfuzzer_tree(tree):
        pytest.skip('%s is a libFuzzer tree (-Dfuzz=true); the replay runs '
                    'in the normal trees' % tree)
    known = _configured_targets(tree)
    if known is None or target not in known:
        pytest.skip('%s was configured before tests/fuzz existed; '
                    '"ninja -C %s" reconfigures and builds it' % (tree, tree))
    exe = os.path.join(tree, 'tests', 'fuzz', target)
    assert os.access(exe, os.X_OK), \
        '%s is not built (ninja -C %s tests/fuzz/%s)' % (exe, tree, target)
    env = os.environ.copy()
    env.pop('QFTFS_FUZZ_DEBUG', None)
    asan = util.is_asan_build(tree)
    if asan:
        env = util.sanitizer_env(env)
    r = util.run([exe, os.path.join(CORPUS, target)], env=env,
                 timeout=600 if asan else 120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, '%s exited %d:\n%s' % (target, r.returncode,
                                                     util.tail(out))
    bad = util.log_problems(out) + [l for l in out.splitlines()
                                    if 'fuzz invariant failed' in l]
    assert not bad, 'sanitizer report or broken invariant:\n' + \
        '\n'.join(bad)
    ran = [l for l in r.stdout.splitlines()
           if l.startswith('fuzz driver: ran')]
    assert ran and int(ran[-1].split()[3]) == len(_corpus_files(target)), \
        'the driver did not run every corpus file: %r' % ran
