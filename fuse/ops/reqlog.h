/* SPDX-License-Identifier: MIT */
/*
 * Every request the kernel sends, from its arrival to its answer: the
 * mount's statistics about what applications did (bytes and files read
 * and written, errors by errno, rates, requests in flight, the files
 * being transferred), the -d log of each request with its size and
 * latency, and the summary at exit.
 *
 * It sits between libfuse and the operations (fuse/ops/) without them
 * knowing: qc_reqlog_ops() wraps each callback to note the request's
 * start, and the client is linked with `-Wl,--wrap=fuse_reply_*` so that
 * every answer passes through here on its way to the kernel, whichever
 * thread gives it (writes and creates are answered early, from other
 * threads than the one the request came in on).
 *
 * It only observes: it answers no request and refuses none.  The mount's
 * own attributes, and who may read them, are the xattr callbacks'
 * (fuse/ops/xattrs.c); one of them shows what is observed here
 * (qc_reqlog_transfers).
 */
#ifndef QC_REQLOG_H
#define QC_REQLOG_H

#include <fuse_lowlevel.h>

#include "fs/fs.h"

/* The operations to give fuse_session_new: `real`, wrapped.  Once. */
const struct fuse_lowlevel_ops *qc_reqlog_ops(
	const struct fuse_lowlevel_ops *real, struct qc_fs *fs);

/*
 * The files being read or written now or closed a moment ago, the value
 * of QC_TRANSFERS_XATTR (stats.h): "read written age_ms open path" lines,
 * newest activity first, *len bytes without a NUL.  NULL without memory;
 * the caller frees.
 */
char *qc_reqlog_transfers(size_t *len);

/* Logs, per operation, how many, errors, bytes, mean and worst latency
 * (at the end of a -d session). */
void qc_reqlog_summary(void);

/* Logs the mount's counters in one line (SIGUSR1). */
void qc_reqlog_log_stats(void);

#endif /* QC_REQLOG_H */
