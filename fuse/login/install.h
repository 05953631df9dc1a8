/* SPDX-License-Identifier: MIT */
/*
 * The client brings its server: when the remote host has no qftfs-server
 * of this protocol version, upload the one for its architecture through
 * the ssh session that is already open (no sftp or scp: dropbear and
 * busybox boards often have neither) into a per-user cache there, check
 * its digest, and run it.  docs/boards.md has the user's view.
 *
 * Everything happens on the one exec channel the mount runs its server
 * on, before the session secret: the remote command is a POSIX sh script
 * (qc_install_script(), busybox ash is enough) that speaks a few lines
 * with qc_install_run() and then execs the server:
 *
 *   script                                client
 *   QFTFS-RUN <path>                      (a qftfs-server of our protocol
 *                                          in PATH: nothing to do)
 *   QFTFS-ARCH <uname -m> <e_flags> <ld> <hash>
 *                                     ←   <arch> <size> <digest>, or "- 0 -"
 *   QFTFS-RUN <path>                      (the cache has that very binary)
 *   QFTFS-SEND <dir>                  ←   exactly <size> bytes
 *   QFTFS-INSTALLED <path>                (checked, renamed into place)
 *   QFTFS-FAIL <reason>                   (anywhere: the script exits)
 *   QFTFS-NOTE <text>                     (before RUN or SEND: shown as a
 *                                          warning; the exchange goes on)
 *
 * <e_flags> is the hex of bytes 36..39 of /bin/sh (an ARM ELF's float
 * ABI), <ld> which ARM dynamic linker exists ("hf", "el" or "-"), <hash>
 * the digest tool the board has: sha256 (sha256sum), cksum (POSIX CRC and
 * size) or none (the size alone).  The upload is read with dd in pieces
 * of at most the bytes still due, so the script never reads past the file
 * into what belongs to the server.  Every line from the remote is checked
 * for length and form before use.
 *
 * The cache is ~/.cache/qftfs/<version>-<arch>/qftfs-server
 * ($XDG_CACHE_HOME), else $TMPDIR/qftfs-<uid>, /var/tmp/qftfs-<uid> or
 * /dev/shm/qftfs-<uid>.  A cache directory is trusted only when nobody
 * but the user and root can change what is in it (issue 18, finding 5):
 * it is the user's, and neither it, nor its <version>-<arch>
 * subdirectory, nor any directory above it up to / is writable by group
 * or others, or has an ACL (a directory above may be root's and sticky,
 * as /tmp), checked on its physical path (no symlink on the way); the
 * binary is the user's regular file, writable by nobody else.  What is
 * checked is then what runs, by that path: no one else can swap it in
 * between.  A home cache that fails (HOME owned by someone else, an
 * unset HOME making it /.cache, a group-writable home) is passed over
 * with a NOTE saying why, and the temp directories are tried; with none
 * trusted the script fails with every reason.  A cached binary runs only
 * when its digest is the one of the binary the client would send;
 * anything else there (corrupt, another build) is replaced.  Uploads go
 * to a temp name and are renamed into place, so concurrent first mounts
 * of one board each install a whole binary and run it.
 *
 * Error convention: 0 or a negative errno, with the reason already on
 * stderr ("qftfs: ...").
 */
#ifndef QC_INSTALL_H
#define QC_INSTALL_H

#include <stdbool.h>
#include <stddef.h>

struct qc_install_opts {
	bool enabled;                /* -o install=yes (the default) */
	const char *server_binaries; /* -o server_binaries=DIR, or NULL */
};

/* "yes" or "no": 0, or -EINVAL. */
int qc_install_parse(const char *s, bool *enabled);

/* The architecture this client was built for, in qftfs's names
 * ("x86_64", "aarch64", "armhf", "armel"), or NULL for another. */
const char *qc_install_native_arch(void);

/*
 * Which build runs on a host that reported `machine` (uname -m), the hex
 * of its /bin/sh's e_flags bytes (or "-") and its ARM dynamic linker
 * ("hf", "el", "-"): one of the names above, or NULL when qftfs has no
 * build for it.  armv6 and older take armel (Debian's armhf needs ARMv7);
 * ARMv7 and later in 32-bit mode take armel only with a soft-float
 * userland, since a static binary does not depend on the board's ABI
 * otherwise.
 */
const char *qc_install_pick_arch(const char *machine, const char *eflags,
				 const char *ld);

/*
 * The binary to upload for `arch`, malloc'd: -o server_binaries=DIR
 * (DIR/<arch>/qftfs-server or DIR/qftfs-server-<arch>), for the client's
 * own architecture the server beside it (installed, or in its build
 * tree), <libexecdir>/qftfs/servers/<arch>/qftfs-server, and, for a
 * client run from its build tree, the output of scripts/cross-server.sh
 * in its source tree (build-cross/servers/<arch>/).  NULL
 * with -ENOENT when none exists; `looked` gets the places tried, for the
 * message.
 */
char *qc_install_find(const struct qc_install_opts *o, const char *arch,
		      char *looked, size_t looked_size, int *err);

/* The remote script (see above); its arguments are the protocol version,
 * the client's version, the directory to serve and, optionally, "follow"
 * (-o follow_symlinks: the server runs with --follow-symlinks). */
const char *qc_install_script(void);

/*
 * Runs the client's side of the exchange on `fd` (the exec channel), up to
 * the point where the script has exec'd the server.  0 then (the caller
 * goes on with the secret and the greeting), with the path of the server
 * it runs in `ran` (NUL-terminated; empty when it does not fit), which
 * runs it again later (qftfs-server --attach); -EPIPE when the channel
 * ended without a word (the caller explains from the exit status); any
 * other negative errno after a message.
 */
int qc_install_run(int fd, const char *host, const struct qc_install_opts *o,
		   char *ran, size_t ran_size);

#endif /* QC_INSTALL_H */
