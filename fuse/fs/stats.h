/* SPDX-License-Identifier: MIT */
/*
 * What a mount has done, in counters a user (and a test) can read:
 * `getfattr -n user.qftfs.stats MOUNTPOINT` prints them as "name value"
 * lines (every value an integer), and `qftfs --stats MOUNTPOINT` prints
 * them for people (--json: one JSON object).  The name is answered by the
 * client (ops/xattrs.c) for the mount's root only, to the mounting user
 * (and root) only, and never listed, so `cp -a` or `rsync -X` of the
 * mount do not copy it.
 *
 * Round trips are what the design counts, so the first lines say how
 * many requests a FUSE thread waited for (each one a round trip on the
 * application's critical path) and how many went out without waiting.
 * Then come what applications did (bytes and files read and written,
 * errors by errno: fuse/ops/reqlog.c counts them where the answers go back to
 * the kernel), and the link's state (round trip, reconnects,
 * compression).
 *
 * Counters are atomics, bumped from any thread without a lock.
 */
#ifndef QC_STATS_H
#define QC_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "net/conn.h"

#define QC_STATS_XATTR "user.qftfs.stats"
/* Files being read or written: "read written age_ms path" lines. */
#define QC_TRANSFERS_XATTR "user.qftfs.transfers"

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
	QC_STAT_STAT_WAIT,      /* kept for readers of the name; 0 since a
				 * stat of a pipelined create is answered
				 * with its provisional inode (node.h) */
	/* What applications did (reqlog.c). */
	QC_STAT_BYTES_READ,     /* bytes read(2) returned */
	QC_STAT_BYTES_WRITTEN,  /* bytes write(2) accepted */
	QC_STAT_READS,          /* read requests answered with data */
	QC_STAT_WRITES,         /* write requests answered */
	QC_STAT_FILES_READ,     /* opened files read from (counted once per
				 * open) */
	QC_STAT_FILES_WRITTEN,  /* ... written to */
	QC_STAT_FILES_CREATED,  /* creat/O_CREAT that made a file */
	QC_STAT_REQUESTS,       /* kernel requests answered */
	/* Server-side copy and holes (copy.c). */
	QC_STAT_COPIES,         /* copy_file_range calls the server ran */
	QC_STAT_COPIED,         /* ... and the bytes it copied */
	QC_STAT_SEEKS,          /* SEEK_DATA/SEEK_HOLE the server answered */
	QC_STAT_SEEKS_LOCAL,    /* ... the client answered from its replies */
	QC_STAT_GETXATTR_LOCAL, /* getxattrs answered without the server
				 * (no xattrs, no labels: xattrs.c) */
	/* Walk-ahead (walk.h): */
	QC_STAT_WALK_FILES,     /* opens answered with fetched contents */
	QC_STAT_WALK_BYTES,     /* ... their bytes */
	QC_STAT_WALK_FETCHED,   /* bytes of contents FETCH brought */
	QC_STAT_WALK_WASTE,     /* ... never read (dropped, stale, passed) */
	QC_STAT_WALK_WAITS,     /* opens that waited for a FETCH's answer */
	QC_STAT__COUNT
};

/* errno values counted one by one; larger ones count as the last. */
#define QC_STATS_ERRNO_MAX 134

/* Values only a look at the moment can give (reqlog.c provides them). */
struct qc_stats_live {
	uint64_t in_flight;     /* kernel requests not answered yet */
	uint64_t oldest_ms;     /* ... the oldest one's age */
	uint64_t read_rate;     /* bytes per second, last seconds */
	uint64_t write_rate;
	uint64_t transfers;     /* files being read or written now */
	uint64_t transfers_closed; /* closed files the request log keeps
				    * to show (at most 64) */
};

struct qc_stats {
	atomic_uint_fast64_t v[QC_STAT__COUNT];
	/* Error answers by errno (not the expected ones: ENOENT of a
	 * lookup, ENODATA of an xattr). */
	atomic_uint_fast64_t err[QC_STATS_ERRNO_MAX + 1];
	/* Round trip of the last probe answered, microseconds; 0: none
	 * yet. */
	atomic_uint_fast64_t rtt_us;
	/* Probes sent by the stats themselves: not the application's
	 * requests, so requests_async leaves them out. */
	atomic_uint_fast64_t probes;
	/* When the probe in flight was sent (CLOCK_MONOTONIC us), 0 when
	 * none is: one at a time. */
	atomic_uint_fast64_t probe_sent_us;
	/* Set once before the session starts; NULL: no live values. */
	void (*live)(struct qc_stats_live *out);
	/* Async backlog (commit=async): files queued (commit.h), read
	 * through this pointer; NULL when off. */
	uint64_t (*backlog)(const struct qc_stats *st);
};

static inline void qc_stat_inc(struct qc_stats *st, enum qc_stat which)
{
	atomic_fetch_add_explicit(&st->v[which], 1, memory_order_relaxed);
}

static inline void qc_stat_add(struct qc_stats *st, enum qc_stat which,
			       uint64_t n)
{
	atomic_fetch_add_explicit(&st->v[which], n, memory_order_relaxed);
}

static inline void qc_stat_error(struct qc_stats *st, int err)
{
	if (err < 0)
		err = -err;
	if (err > QC_STATS_ERRNO_MAX)
		err = QC_STATS_ERRNO_MAX;
	atomic_fetch_add_explicit(&st->err[err], 1, memory_order_relaxed);
}

/*
 * Writes every counter, the connection's first, as "name value\n" lines
 * into buf and returns the length written (whole lines, at most `size`
 * bytes, no NUL).  With size 0 nothing is written and the full length is
 * returned.  Never waits for the server: the round trip shown is the
 * last probe's (qc_stats_probe).
 */
size_t qc_stats_format(struct qc_stats *st, struct qc_conn *conn,
		       char *buf, size_t size);

/*
 * Measures the round trip for the next reading of the counters: one PING
 * on the live link, not waited for, and at most one at a time; none while
 * the link is known to be down.  A probe waited for would hold `qftfs
 * --stats` (and --watch) for a whole deadline when the link has just gone
 * and nobody knows it yet, and for the grace of a resume after that.
 */
void qc_stats_probe(struct qc_stats *st, struct qc_conn *conn);

#endif /* QC_STATS_H */
