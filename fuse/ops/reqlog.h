/* SPDX-License-Identifier: MIT */
/*
 * Every request the kernel sends, from its arrival to its answer: the
 * mount's statistics about what applications did (bytes and files read
 * and written, errors by errno, rates, requests in flight, the files
 * being transferred), the -d log of each request with its size and
 * latency, and the summary at exit.
 *
 * It sits between libfuse and the operations (fuse/ops.c) without them
 * knowing: qc_reqlog_ops() wraps each callback to note the request's
 * start, and the client is linked with `-Wl,--wrap=fuse_reply_*` so that
 * every answer passes through here on its way to the kernel, whichever
 * thread gives it (writes and creates are answered early, from other
 * threads than the one the request came in on).
 *
 * The getxattr wrapper also answers QC_TRANSFERS_XATTR and keeps the
 * mount's own attributes (stats, transfers, sync) to the mounting user
 * and root: with allow_other, other users must not read what this user
 * does.
 */
#ifndef QC_REQLOG_H
#define QC_REQLOG_H

#include <fuse_lowlevel.h>

#include "fs/fs.h"

/* The operations to give fuse_session_new: `real`, wrapped.  Once. */
const struct fuse_lowlevel_ops *qc_reqlog_ops(
	const struct fuse_lowlevel_ops *real, struct qc_fs *fs);

/* Logs, per operation, how many, errors, bytes, mean and worst latency
 * (at the end of a -d session). */
void qc_reqlog_summary(void);

/* Logs the mount's counters in one line (SIGUSR1). */
void qc_reqlog_log_stats(void);

#endif /* QC_REQLOG_H */
