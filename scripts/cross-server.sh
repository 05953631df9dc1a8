#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds a self-contained qftfs-server for a board:
#
#   bash scripts/cross-server.sh ARCH        (aarch64, armhf, armel, x86_64)
#
# and prints the path of the binary as its last line.  The binary is
# linked statically (glibc, libcrypto, liblz4, liburing), so the board needs
# nothing but a Linux kernel (3.2 or later: Debian's glibc; docs/boards.md).
#
# What it needs, it installs on Debian (as root, only what is missing):
#   - the cross compiler, gcc-<triplet> (its C library comes with it);
#   - the target's liblz4-dev, libssl-dev and liburing-dev, fetched with
#     `apt-get download` for that Debian architecture (dpkg
#     --add-architecture) and unpacked into a sysroot of our own.  They are
#     never installed with dpkg: multiarch installation needs the exact
#     version of the host's own libssl-dev, which a foreign architecture of
#     the security archive does not always have yet.
#
# Output (QFTFS_CROSS_OUT, default <repo>/build-cross):
#   debs/ARCH/, sysroot/ARCH/   the fetched packages, unpacked (cached)
#   ARCH/                       the meson build tree
#   servers/ARCH/qftfs-server   the stripped binary, where qftfs looks
#                               for it (docs/boards.md); plus .sha256
#
# A second run rebuilds only what changed.  Exit status: 0, 1 (failed to
# build), 2 (usage), 77 (the toolchain cannot be installed here: not
# Debian, not root, or apt-get failed), always with the reason on stderr.
set -euo pipefail

say() { printf 'cross-server: %s\n' "$*" >&2; }
die() { say "$2"; exit "$1"; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${QFTFS_CROSS_OUT:-$REPO/build-cross}

# meson install (fuse/meson.build): the servers built so far go to
# <libexecdir>/qftfs/servers/ARCH/, where qftfs looks for them.
if [ "${1:-}" = --install ]; then
	case ${2:?} in
	/*) dest=${DESTDIR:-}$2 ;;
	*) dest=${MESON_INSTALL_DESTDIR_PREFIX:?}/$2 ;;
	esac
	n=0
	for f in "$OUT"/servers/*/qftfs-server; do
		[ -f "$f" ] || continue
		a=$(basename "$(dirname "$f")")
		install -D -m 0755 "$f" "$dest/$a/qftfs-server"
		say "installed $dest/$a/qftfs-server"
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || say "no servers for other boards to install (bash scripts/cross-server.sh ARCH builds them)"
	exit 0
fi

ARCH=${1:-}
case $ARCH in
aarch64) triplet=aarch64-linux-gnu debarch=arm64 ;;
armhf) triplet=arm-linux-gnueabihf debarch=armhf ;;
armel) triplet=arm-linux-gnueabi debarch=armel ;;
x86_64) triplet=x86_64-linux-gnu debarch=amd64 ;;
*) die 2 "usage: cross-server.sh aarch64|armhf|armel|x86_64" ;;
esac
# The target's libraries, linked in statically.
LIBS=(liblz4-dev libssl-dev liburing-dev)

command -v dpkg >/dev/null && command -v apt-get >/dev/null ||
	die 77 "not a Debian system: cannot install the $ARCH toolchain"

# --- the compiler ------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

need=()
host=$(dpkg --print-architecture)
if [ "$debarch" = "$host" ]; then
	# The native compiler is the target's; the triplet names it too.
	installed gcc || need+=(gcc)
	installed libc6-dev || need+=(libc6-dev)
else
	installed "gcc-$triplet" || need+=("gcc-$triplet")
	# Only recommended by the compiler: its C library and kernel headers.
	installed "libc6-dev-$debarch-cross" || need+=("libc6-dev-$debarch-cross")
fi
installed pkg-config || need+=(pkg-config)
installed meson || need+=(meson)
installed ninja-build || need+=(ninja-build)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] ||
		die 77 "missing ${need[*]} and not root; run: sudo apt-get install ${need[*]}"
	say "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${need[@]}" >&2 ||
		{ apt-get update -qq >&2 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends "${need[@]}" >&2; } ||
		die 77 "apt-get could not install ${need[*]}"
fi

# --- the target's libraries, in a sysroot of our own ----------------------------
SYSROOT=$OUT/sysroot/$ARCH
DEBS=$OUT/debs/$ARCH
if [ ! -f "$SYSROOT/.complete" ]; then
	if [ "$debarch" != "$host" ] &&
		! dpkg --print-foreign-architectures | grep -qx "$debarch"; then
		[ "$(id -u)" -eq 0 ] ||
			die 77 "the $debarch architecture is not enabled and not root; run: sudo dpkg --add-architecture $debarch && sudo apt-get update"
		say "enabling the $debarch architecture for apt-get download"
		dpkg --add-architecture "$debarch"
		apt-get update -qq >&2 || die 77 "apt-get update failed"
	fi
	rm -rf "$DEBS" "$SYSROOT"
	mkdir -p "$DEBS" "$SYSROOT"
	pkgs=("${LIBS[@]/%/:$debarch}")
	# apt-get download runs as _apt where it can; a directory it may
	# write into keeps it from complaining.
	chmod 0777 "$DEBS" 2>/dev/null || true
	if ! (cd "$DEBS" && apt-get download -qq "${pkgs[@]}" >&2); then
		[ "$(id -u)" -eq 0 ] || die 77 "apt-get download ${pkgs[*]} failed (not root: cannot update the package lists)"
		apt-get update -qq >&2 || die 77 "apt-get update failed"
		(cd "$DEBS" && apt-get download -qq "${pkgs[@]}" >&2) ||
			die 77 "apt-get download ${pkgs[*]} failed"
	fi
	for d in "$DEBS"/*.deb; do
		dpkg-deb -x "$d" "$SYSROOT"
	done
	for lib in liblz4 libcrypto liburing; do
		[ -f "$SYSROOT/usr/lib/$triplet/$lib.a" ] ||
			die 1 "$lib.a is not in the $debarch packages ($DEBS)"
	done
	ls "$DEBS" >"$SYSROOT/.complete"
fi

# --- build ---------------------------------------------------------------------
BUILD=$OUT/$ARCH
mkdir -p "$BUILD"
# The sysroot's place, for the cross file in the repo (cross/ARCH.ini).
printf "[constants]\nsysroot = '%s'\n" "$SYSROOT" >"$OUT/$ARCH.sysroot.ini.new"
if ! cmp -s "$OUT/$ARCH.sysroot.ini.new" "$OUT/$ARCH.sysroot.ini" 2>/dev/null; then
	mv "$OUT/$ARCH.sysroot.ini.new" "$OUT/$ARCH.sysroot.ini"
	rm -rf "$BUILD"
else
	rm -f "$OUT/$ARCH.sysroot.ini.new"
fi
if [ ! -f "$BUILD/build.ninja" ]; then
	say "configuring $BUILD"
	meson setup "$BUILD" "$REPO" \
		--cross-file "$OUT/$ARCH.sysroot.ini" \
		--cross-file "$REPO/cross/$ARCH.ini" \
		-Dclient=false -Dprefer_static=true -Dbuildtype=minsize \
		-Db_ndebug=true -Dwerror=true >"$OUT/$ARCH.setup.log" 2>&1 || {
		cat "$OUT/$ARCH.setup.log" >&2
		rm -rf "$BUILD"
		die 1 "meson setup for $ARCH failed"
	}
fi
say "building qftfs-server for $ARCH"
ninja -C "$BUILD" server/qftfs-server >&2 || die 1 "the $ARCH build failed"

DEST=$OUT/servers/$ARCH
mkdir -p "$DEST"
# Temp name and rename: a client looking for the binary never sees half.
"$triplet-strip" -o "$DEST/.qftfs-server.tmp" "$BUILD/server/qftfs-server"
mv -f "$DEST/.qftfs-server.tmp" "$DEST/qftfs-server"
(cd "$DEST" && sha256sum qftfs-server >qftfs-server.sha256)
say "$ARCH: $(stat -c %s "$DEST/qftfs-server") bytes"
echo "$DEST/qftfs-server"
