# SPDX-License-Identifier: MIT
"""The C unit tests (tests/unit/, meson suite 'unit'), one pytest case per
program and build tree, so a failure names the program and the tree.

The programs are found through meson's introspection of each build tree,
falling back to a glob of build*/tests/unit/test_*.  Exit status 77 is a
skip, as meson and automake define it.
"""

import glob
import json
import os
import subprocess

import pytest

import util


def _trees():
    return [('build', util.build_dir()), ('asan', util.asan_build_dir())]


def _introspect(b):
    try:
        r = subprocess.run(['meson', 'introspect', '--tests', b],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, timeout=60)
        if r.returncode != 0:
            return None
        return [t for t in json.loads(r.stdout)
                if any(s == 'unit' or s.endswith(':unit') for s in t.get('suite', []))]
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _collect():
    cases = []
    for tag, b in _trees():
        if not os.path.isdir(b):
            continue
        tests = _introspect(b)
        if tests is None:
            tests = [{'name': os.path.basename(p), 'cmd': [p], 'env': {},
                      'timeout': 120, 'workdir': None}
                     for p in sorted(glob.glob(os.path.join(b, 'tests', 'unit', 'test_*')))
                     if os.access(p, os.X_OK) and os.path.isfile(p)]
        for t in tests:
            cases.append(pytest.param(b, t, id='%s-%s' % (tag, t['name'])))
    return cases


CASES = _collect()


def test_unit_tests_are_registered():
    """tests/unit/ exists, so its programs must be built in build/."""
    if not os.path.isfile(os.path.join(util.REPO, 'tests', 'unit', 'meson.build')):
        pytest.skip('tests/unit/meson.build does not exist yet')
    assert any(c.values[0] == util.build_dir() for c in CASES), \
        'no unit test registered in %s (is it configured?)' % util.build_dir()


@pytest.mark.deadline(600)
@pytest.mark.parametrize('tree,test', CASES or [pytest.param(None, None, id='none')])
def test_unit(tree, test):
    if tree is None:
        pytest.skip('no unit test programs found in any build tree')
    env = dict(os.environ)
    env.update(test.get('env') or {})
    if util.is_asan_build(tree):
        env = util.sanitizer_env(env)
    timeout = test.get('timeout') or 120
    if timeout <= 0:
        timeout = 600
    r = util.run(test['cmd'], cwd=test.get('workdir') or tree, env=env,
                 timeout=timeout * 2 if util.is_asan_build(tree) else timeout)
    out = (r.stdout + r.stderr)[-6000:]
    if r.returncode == 77:
        pytest.skip('%s skipped itself: %s' % (test['name'], out.strip()[-300:]))
    assert r.returncode == 0, '%s exited %d:\n%s' % (test['name'], r.returncode, out)
    bad = util.log_problems(r.stdout + r.stderr)
    assert not bad, 'sanitizer report:\n' + '\n'.join(bad)
