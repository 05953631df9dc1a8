#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The qftfs test command:  bash tests/run.sh [pytest arguments...]
#
#  1. installs missing build/test packages with apt-get (root only);
#  2. builds build/ (-Dwerror=true) and build-asan/ (ASan + UBSan);
#  3. runs the whole suite with the system Python's pytest: C unit tests,
#     protocol tests against qftfs-server, and real FUSE mounts;
#  4. ends with one line "N passed, N failed, N skipped".
#
# Exit status: 0 all passed, 1 something failed (or did not build),
# 77 nothing failed but FUSE is unavailable here (/dev/fuse or fusermount3
# missing), so the mount tests were skipped.
#
# Environment: QFTFS_TEST_FAST=1 skips the slowest cases (local iteration
# only; CI runs everything).  QFTFS_BUILD / QFTFS_BUILD_ASAN move the build
# trees.  Extra arguments go to pytest, e.g. `bash tests/run.sh -k sizes`.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
REPO=$PWD
BUILD=${QFTFS_BUILD:-$REPO/build}
ASAN=${QFTFS_BUILD_ASAN:-$REPO/build-asan}
BASETEMP=${QFTFS_TEST_BASETEMP:-${TMPDIR:-/tmp}/qftfs-pytest-$(id -u)}
PY=/usr/bin/python3     # the Debian python3-pytest, whatever PATH says
START=$SECONDS

say() { printf 'run.sh: %s\n' "$*"; }

# The closing line; always the last thing printed.
finish() {
	say "finished in $((SECONDS - START))s"
	printf '%d passed, %d failed, %d skipped\n' "$1" "$2" "$3"
	exit "$4"
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# --- 1. packages -----------------------------------------------------------
# One list for the demo and the tests: scripts/install-deps.sh.
install_packages() {
	if ! command -v dpkg-query >/dev/null; then
		say "not a Debian system: cannot check packages, assuming they are installed"
		return 0
	fi
	if ! is_root; then
		bash scripts/install-deps.sh test || say "not root: NOT installing missing packages"
		return 0
	fi
	bash scripts/install-deps.sh test
}

if ! install_packages </dev/null; then
	say "package installation failed"
	finish 0 1 0 1
fi

# --- 2. build ----------------------------------------------------------------
build_tree() {
	local dir=$1
	shift
	say "building $dir ($*)"
	if [ -f "$dir/meson-private/coredata.dat" ]; then
		meson setup --reconfigure "$dir" "$@" ||
			meson setup --wipe "$dir" "$@" || return 1
	else
		meson setup "$dir" "$@" || return 1
	fi
	ninja -C "$dir" || return 1
}

# The test tree has the server's fault injection (QFTFS_FAULT) built in, so
# the fault tests can make its file I/O fail; release builds do not.
if ! build_tree "$BUILD" -Dwerror=true -Dfault_injection=true </dev/null; then
	say "BUILD FAILED: $BUILD"
	finish 0 1 0 1
fi
if ! build_tree "$ASAN" -Db_sanitize=address,undefined -Db_lundef=false </dev/null; then
	say "BUILD FAILED: $ASAN (sanitizer build)"
	finish 0 1 0 1
fi

# LeakSanitizer stops the process with ptrace; where that is forbidden (some
# containers) it reports a fatal error for every process, which would fail
# every sanitizer test for a reason that is not ours.  Say so and go on
# without leak checking rather than hide it.
if [ -z "${ASAN_OPTIONS:-}" ] &&
	"$ASAN/server/qftfs-server" --version 2>&1 </dev/null |
	grep -q 'LeakSanitizer has encountered a fatal error'; then
	say "LeakSanitizer cannot run here (ptrace restricted?): leak checks are OFF"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1
fi

# --- 3. FUSE -------------------------------------------------------------------
if [ ! -e /dev/fuse ] && is_root; then
	modprobe fuse 2>/dev/null || true
fi
fuse_missing=""
[ -e /dev/fuse ] || fuse_missing="/dev/fuse is missing"
command -v fusermount3 >/dev/null ||
	fuse_missing="${fuse_missing:+$fuse_missing; }fusermount3 is missing"
if [ -n "$fuse_missing" ]; then
	say "FUSE UNAVAILABLE ($fuse_missing): every mount test will be SKIPPED"
fi
is_root || say "not root: tests that need root (chown, setpriv, tmpfs) will be SKIPPED"
# The per-test watchdog aborts a hung mount through fusectl; systemd mounts
# it on ordinary machines, containers often do not.
if is_root && [ -d /sys/fs/fuse/connections ] &&
	! grep -q ' /sys/fs/fuse/connections ' /proc/self/mountinfo; then
	mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null ||
		say "could not mount fusectl: a hung mount is only killed, not aborted"
fi

# Mounts left by an interrupted earlier run would make pytest's cleanup of
# its temp dir walk into them.
if [ -d "$BASETEMP" ]; then
	awk -v base="$BASETEMP" '$5 == base || index($5, base "/") == 1 { print $5 }' \
		/proc/self/mountinfo | sort -r | while read -r m; do
		m=$(printf '%b' "${m//\\/\\0}")
		say "removing stale mount $m"
		fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
fi

# --- 4. tests ------------------------------------------------------------------
# Two passes: the whole suite with the server's default file I/O engine,
# then the mount-level integration tests again with the other one
# (io_uring and pread/pwrite must both serve everything), on the plain
# build only and in fast mode (same operations, smaller trees).  Each pass writes its own JUnit report; the closing line
# counts them all.
mkdir -p "$BUILD/meson-logs"
rm -f "$BUILD"/meson-logs/pytest-junit*.xml
export QFTFS_BUILD=$BUILD QFTFS_BUILD_ASAN=$ASAN PYTHONDONTWRITEBYTECODE=1
# Arguments naming tests (tests/test_ops.py::test_chmod) replace the
# default of running the whole tests/ directory, and the second pass.
targets=(tests)
for a in "$@"; do
	if [[ $a != -* && -e ${a%%::*} ]]; then
		targets=()
		break
	fi
done
default_io=$("$BUILD/server/qftfs-server" --version 2>/dev/null |
	sed -n 's/.*default io: *\([a-z]*\).*/\1/p')
case $default_io in
uring) other_io=posix ;;
*) other_io=uring ;;
esac
INTEGRATION=(tests/test_ops.py tests/test_tools.py tests/test_streams.py
	tests/test_cache.py)

rc=0
run_pass() {
	local name=$1 junit=$BUILD/meson-logs/pytest-junit-$1.xml
	shift
	say "pass $name: running pytest ($PY), temp dir $BASETEMP/$name"
	# The suite has per-test deadlines; this outer one only guards
	# against a wedged interpreter (SIGINT lets pytest write its report
	# first).
	timeout -s INT -k 60 "${QFTFS_TEST_TOTAL_TIMEOUT:-2400}" \
		"$PY" -m pytest -ra -v -p no:cacheprovider --durations=15 \
		--basetemp="$BASETEMP/$name" --junitxml="$junit" \
		-o junit_family=xunit1 "$@" </dev/null
	local r=$?
	[ "$r" -gt "$rc" ] && rc=$r
	[ -s "$junit" ] || say "pass $name: pytest wrote no report (exit $r)"
}
mkdir -p "$BASETEMP"
run_pass main "$@" "${targets[@]}"
if [ ${#targets[@]} -gt 0 ] && [ -z "${QFTFS_TEST_ONE_PASS:-}" ]; then
	# In fast mode: every operation and tool, with the smaller trees.
	QFTFS_SERVER_IO=$other_io QFTFS_TEST_FAST=1 \
		run_pass "io-$other_io" -k 'not asan' "$@" "${INTEGRATION[@]}"
fi

reports=("$BUILD"/meson-logs/pytest-junit-*.xml)
if [ ! -s "${reports[0]}" ]; then
	say "pytest wrote no report (exit $rc)"
	finish 0 1 0 1
fi
read -r passed failed skipped < <("$PY" - "${reports[@]}" <<'EOF'
import sys
import xml.etree.ElementTree as ET

# One outcome per test and pass, even when its call and its teardown both
# report.
outcome = {}
rank = {'passed': 0, 'skipped': 1, 'failed': 2}
for path in sys.argv[1:]:
    for tc in ET.parse(path).getroot().iter('testcase'):
        key = (path, tc.get('classname'), tc.get('name'))
        tags = {child.tag for child in tc}
        o = 'failed' if tags & {'failure', 'error'} else \
            'skipped' if 'skipped' in tags else 'passed'
        if rank[o] >= rank[outcome.get(key, 'passed')]:
            outcome[key] = o
v = list(outcome.values())
print(v.count('passed'), v.count('failed'), v.count('skipped'))
EOF
)
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
	say "pytest exited with status $rc (2 interrupted, 3 internal error, 4 usage error, 5 no test collected)"
	[ "${failed:-0}" -gt 0 ] || failed=1
fi
if [ "${failed:-0}" -gt 0 ]; then
	say "test temp dir with the daemons' logs kept: $BASETEMP"
	finish "${passed:-0}" "$failed" "${skipped:-0}" 1
fi
# All passed: the temp dir holds only copies of test data (hundreds of
# MB); after a failure it is kept, with the daemons' logs, for a look.
rm -rf --one-file-system "$BASETEMP"
if [ -n "$fuse_missing" ]; then
	finish "${passed:-0}" 0 "${skipped:-0}" 77
fi
finish "${passed:-0}" 0 "${skipped:-0}" 0
