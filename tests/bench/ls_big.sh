#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `ls -l` of a big directory, cold and warm, on qftfs (local mode, no
# network: what is left is the kernel's requests and the client) and on
# sshfs (its sftp-server run directly as its "ssh" command, so neither
# pays for a link).  Issue 20's "big directories answer like a local
# disk".  Root (drop_caches).
#
#   bash tests/bench/ls_big.sh [BUILD] [ENTRIES] [ROUNDS]
#
# Prints one line per mount and round: cold seconds (a new mount after
# dropping the page cache), then three warm runs; for qftfs also the
# kernel requests the warm runs cost (qftfs --stats).
set -eu
BUILD=$(realpath "${1:-build}")
N=${2:-10000}
ROUNDS=${3:-3}
SFTP=/usr/lib/openssh/sftp-server
W=$(mktemp -d /tmp/qftfs-lsbig-XXXXXX)
trap 'fusermount3 -u "$W/mnt" 2>/dev/null || true; rm -rf "$W"' EXIT
mkdir -p "$W/src/d" "$W/mnt"
(cd "$W/src/d" && seq 1 "$N" | xargs touch)
printf '#!/bin/sh\nexec %s\n' "$SFTP" > "$W/ssh"
chmod +x "$W/ssh"

secs() { local s e; s=$(date +%s.%N); ls -l "$W/mnt/d" > /dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
reqs() { "$BUILD/fuse/qftfs" --stats --json "$W/mnt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

one() {
	local label=$1; shift
	sync; echo 3 > /proc/sys/vm/drop_caches
	"$@" "$W/mnt"
	local cold w1 w2 w3 r0 r1 extra=
	cold=$(secs)
	[ "$label" = qftfs ] && r0=$(reqs)
	w1=$(secs); w2=$(secs); w3=$(secs)
	if [ "$label" = qftfs ]; then
		r1=$(reqs)
		extra=" requests/warm run $(( (r1 - r0) / 3 ))"
	fi
	echo "$label cold $cold warm $w1 $w2 $w3$extra"
	fusermount3 -u "$W/mnt"
}

for _ in $(seq "$ROUNDS"); do
	one sshfs sshfs -o ssh_command="$W/ssh" localhost:"$W/src"
	one qftfs "$BUILD/fuse/qftfs" -o server="$BUILD/server/qftfs-server" "$W/src"
done
