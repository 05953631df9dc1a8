/* SPDX-License-Identifier: MIT */
/*
 * The FUSE low-level operations: each one turns a kernel request into
 * protocol requests on the connection and the reply into a kernel reply.
 * Every failure reaches the kernel as the errno the server reported (or
 * EIO when the connection is gone); nothing answers ENOSYS that a program
 * would see as a failed close() or fsync().
 *
 * Bulk data moves in streams (ops.c, struct qc_file): writes are answered
 * once their WRITE is sent, within a window of unacknowledged bytes, and
 * their errors are kept for the next write, fsync or close; sequential
 * reads are served from READs sent ahead of the reader.
 */
#ifndef QC_OPS_H
#define QC_OPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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
	/*
	 * Bulk streams.  window: most bytes of WRITEs per handle sent and
	 * not yet acknowledged (-o window=SIZE; 0 = every write waits for
	 * its answer).  readahead: most bytes a sequential reader's
	 * read-ahead may ask for ahead of it (-o readahead=SIZE; 0 = off).
	 * Until sizes_set (qc_fs_set_sizes), init applies the defaults.
	 */
	uint64_t window;
	uint64_t readahead;
	bool sizes_set;
	/* Read-ahead bytes asked for and not yet consumed, all handles:
	 * bounds the client's memory whatever the number of readers. */
	atomic_uint_fast64_t ra_bytes;
};

#define QC_WINDOW_DEFAULT    ((uint64_t)16 << 20)
#define QC_READAHEAD_DEFAULT ((uint64_t)16 << 20)
#define QC_STREAM_SIZE_MAX   ((uint64_t)1 << 30)

/*
 * Parses -o window= and -o readahead= (either may be NULL for the
 * default): a byte count with an optional K, M or G suffix (powers of
 * 1024), at most QC_STREAM_SIZE_MAX.  Prints the reason and returns
 * -EINVAL on a bad value.
 */
int qc_fs_set_sizes(struct qc_fs *fs, const char *window,
		    const char *readahead);

extern const struct fuse_lowlevel_ops qc_ops;

/* Frees the node table and what the kernel left open, once the session
 * has ended. */
void qc_fs_destroy(struct qc_fs *fs);

#endif /* QC_OPS_H */
