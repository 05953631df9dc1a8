/* SPDX-License-Identifier: MIT */
/*
 * What a mount has done, in counters a user (and a test) can read:
 * `getfattr -n user.qftfs.stats MOUNTPOINT` prints them as "name value"
 * lines.  The name is answered by the client for the mount's root only
 * and never listed, so `cp -a` or `rsync -X` of the mount do not copy it.
 *
 * Round trips are what the design counts, so the first lines say how
 * many requests a FUSE thread waited for (each one a round trip on the
 * application's critical path) and how many went out without waiting.
 *
 * Counters are atomics, bumped from any thread without a lock.
 */
#ifndef QC_STATS_H
#define QC_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"

#define QC_STATS_XATTR "user.qftfs.stats"

enum qc_stat {
	QC_STAT_LOOKUP_LOCAL,   /* lookups answered from the client's cache */
	QC_STAT_GETATTR_LOCAL,  /* getattrs answered from the client's cache */
	QC_STAT_CREATE_ASYNC,   /* creates answered before the server's reply */
	QC_STAT_SETATTR_ASYNC,  /* attribute changes likewise */
	QC_STAT_RENAME_ASYNC,   /* renames likewise (commit=async) */
	QC_STAT_OPEN_ASYNC,     /* opens likewise */
	QC_STAT_CLOSE_WAIT,     /* close()s that waited for the server */
	QC_STAT_PIPE_ERROR,     /* pipelined steps that failed (reported at
				 * close or the next write/fsync) */
	QC_STAT_STAT_WAIT,      /* stats that waited for a pipelined CREATE's
				 * answer (its inode number): a round trip
				 * like requests_waited */
	QC_STAT__COUNT
};

struct qc_stats {
	atomic_uint_fast64_t v[QC_STAT__COUNT];
};

static inline void qc_stat_inc(struct qc_stats *st, enum qc_stat which)
{
	atomic_fetch_add_explicit(&st->v[which], 1, memory_order_relaxed);
}

/*
 * Writes every counter, the connection's first, as "name value\n" lines
 * into buf; returns the length (the text is cut at `size`, never beyond;
 * with size 0 nothing is written and the full length is returned).
 */
size_t qc_stats_format(const struct qc_stats *st, struct qc_conn *conn,
		       char *buf, size_t size);

#endif /* QC_STATS_H */
