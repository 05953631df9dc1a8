/* SPDX-License-Identifier: MIT */
/*
 * The FUSE low-level operations: each one turns a kernel request into
 * protocol requests on the connection and the reply into a kernel reply.
 * Every failure reaches the kernel as the errno the server reported (or
 * EIO when the connection is gone); nothing answers ENOSYS that a program
 * would see as a failed close() or fsync().
 */
#ifndef QC_OPS_H
#define QC_OPS_H

#include <stdbool.h>

#include <fuse_lowlevel.h>

#include "conn.h"
#include "node.h"

/* The mounted filesystem; fuse_req_userdata() of every request. */
struct qc_fs {
	struct fuse_session *se; /* for cache invalidation notices */
	struct qc_conn *conn;
	struct qn_table nodes;
	double entry_timeout;    /* seconds the kernel may cache a name */
	double attr_timeout;     /* ... attributes */
	double negative_timeout; /* ... a missing name; 0: not cached */
	bool commit_none;        /* -o commit=none: FLUSH without fdatasync */
};

extern const struct fuse_lowlevel_ops qc_ops;

/* Frees the node table and what the kernel left open, once the session
 * has ended. */
void qc_fs_destroy(struct qc_fs *fs);

#endif /* QC_OPS_H */
