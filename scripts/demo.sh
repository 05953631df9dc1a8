#!/usr/bin/env bash
# The quick start: builds qftfs, mounts a temporary directory through a local
# qftfs-server, copies a file onto the mount and reads it back twice (cold,
# then warm), and prints the throughput of each pass.  Nothing to configure;
# QFTFS_DEMO_MB sets the file size (default 256).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
mb=${QFTFS_DEMO_MB:-256}

bash scripts/install-deps.sh build
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null

work=$(mktemp -d /tmp/qftfs-demo.XXXXXX)
mnt=$work/mnt
mkdir -p "$work/served" "$mnt"
cleanup() {
	if mountpoint -q "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "demo: making a ${mb} MiB file of random data"
head -c "$((mb << 20))" /dev/urandom >"$work/file"
want=$(sha256sum <"$work/file" | cut -d' ' -f1)

build/fuse/qftfs -o server="$top/build/server/qftfs-server" "$work/served" "$mnt"
echo "demo: mounted $work/served on $mnt ($(grep " $mnt " /proc/mounts | cut -d' ' -f3))"

now() { date +%s.%N; }
rate() { python3 -c "import sys; mb,t=float(sys.argv[1]),float(sys.argv[2]); print(f'{mb/t:8.1f} MB/s  ({t:.2f} s)')" "$1" "$2"; }
mbytes=$(python3 -c "print($mb * 1048576 / 1e6)")

t0=$(now)
cp "$work/file" "$mnt/file"     # close() returns once the data is durable
t1=$(now)
printf 'demo: copy onto the mount   %s\n' "$(rate "$mbytes" "$(python3 -c "print($t1-$t0)")")"

# Cold: a fresh mount has nothing cached on the client.
fusermount3 -u "$mnt"
build/fuse/qftfs -o server="$top/build/server/qftfs-server" "$work/served" "$mnt"
for pass in cold warm; do
	t0=$(now)
	cat "$mnt/file" >/dev/null
	t1=$(now)
	printf 'demo: read back (%s)       %s\n' "$pass" "$(rate "$mbytes" "$(python3 -c "print($t1-$t0)")")"
done
[ "$(sha256sum <"$mnt/file" | cut -d' ' -f1)" = "$want" ] ||
	{ echo "demo: the copy read through the mount differs from the source" >&2; exit 1; }
[ "$(sha256sum <"$work/served/file" | cut -d' ' -f1)" = "$want" ] ||
	{ echo "demo: the served copy differs from the source" >&2; exit 1; }
echo "demo: checksums match (source, mount, served directory)"
