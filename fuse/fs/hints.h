/* SPDX-License-Identifier: MIT */
/*
 * What the client answers about extended attributes without asking the
 * server, for attr_timeout seconds:
 *
 * - NOXATTR: the server marks attributes of objects that have no extended
 *   attributes (QFT_ATTR_NOXATTR); GETXATTR is then ENODATA and LISTXATTR
 *   empty.  Kept on the node (qn_node.noxattr_until).
 * - No capability: a GETXATTR of security.capability that found none, kept
 *   on the node's open files (qc_file.hint), so that the kernel's
 *   check before every write(2) costs no round trip.
 *
 * Both are forgotten as soon as an attribute is set or removed through
 * the mount; generation counters (struct qc_hints, in qc_fs) discard a
 * hint read around such a change.  Every function takes only the node
 * table's lock (through node.c) and then a file's lock.
 */
#ifndef QC_HINTS_H
#define QC_HINTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

struct qc_fs;
struct qn_node;

/* An open file's part (struct qc_file.hint); every field: its lock. */
struct qc_hints_file {
	/* CLOCK_MONOTONIC ns until which the node is known to have no file
	 * capability */
	uint64_t nocap_until;
};

struct qc_hints {
	/* Bumped by every change of security.capability through the mount,
	 * so that a GETXATTR answered meanwhile is not remembered. */
	atomic_uint_fast64_t caps_gen;
	/* Bumped by every SETXATTR and REMOVEXATTR sent, so that a NOXATTR
	 * hint in attributes the server read around it is not remembered. */
	atomic_uint_fast64_t xattr_gen;
};

/* xattr_gen now: taken before sending a request whose reply carries
 * attributes, and handed back to qc_hint_noxattr_note. */
uint64_t qc_hint_xattr_gen(struct qc_fs *fs);

/* Remembers the NOXATTR hint of `a` for node `n`, or forgets it when `a`
 * does not carry it or xattrs changed since `xgen`. */
void qc_hint_noxattr_note(struct qc_fs *fs, struct qn_node *n,
			  const struct qft_attr *a, uint64_t xgen);

/* Whether `n` is known to have no extended attributes right now. */
bool qc_hint_noxattr(struct qc_fs *fs, struct qn_node *n);

/*
 * Whether directory `n` is known to have no default ACL, so that a create
 * in it takes the caller's umask (its NOXATTR hint, or a GETXATTR that
 * found none, remembered by qc_hint_nodefacl_note).  A default ACL is
 * set on a directory about never after it is made, and a stale "none"
 * costs only the umask the kernel applied before FUSE_CAP_DONT_MASK, so
 * the answer holds QC_HINT_NODEFACL_S seconds (not attr_timeout: a tree
 * copy would ask again every second, and wait a deadline per file while
 * the link is down); a SETXATTR or REMOVEXATTR through the mount forgets
 * it at once.  attr_timeout=0 turns it off.
 */
#define QC_HINT_NODEFACL_S 60
bool qc_hint_nodefacl(struct qc_fs *fs, struct qn_node *n);
/* A GETXATTR of n's default ACL sent with xattr_gen `xgen` found none. */
void qc_hint_nodefacl_note(struct qc_fs *fs, struct qn_node *n,
			   uint64_t xgen);

/* Whether `name` is the file capability attribute. */
bool qc_hint_is_caps(const char *name);

/* Whether `n` is known to have no file capability right now. */
bool qc_hint_nocap(struct qc_fs *fs, struct qn_node *n);

/* caps_gen now: taken before a GETXATTR of the capability. */
uint64_t qc_hint_caps_gen(struct qc_fs *fs);

/* A GETXATTR of the capability sent at `start` (qc_now_ns) with caps_gen
 * `gen` found none: remembered unless the capability changed meanwhile. */
void qc_hint_nocap_note(struct qc_fs *fs, struct qn_node *n, uint64_t gen,
			uint64_t start);

/*
 * Around a SETXATTR or REMOVEXATTR of `name` on `n`: begin before sending
 * (returns whether it is the capability, for end), end after the reply,
 * whatever it was (even a failed call may have changed them).
 */
bool qc_hint_xattr_begin(struct qc_fs *fs, const char *name);
void qc_hint_xattr_end(struct qc_fs *fs, struct qn_node *n, bool caps);

#endif /* QC_HINTS_H */
