/* SPDX-License-Identifier: MIT */
/*
 * -o commit=async: close() returns once a written file's data is queued.
 *
 * The default (commit=close) makes close() wait for the server's FLUSH,
 * so every error reaches the application at that file's close() at the
 * latest.  With commit=async the FLUSH goes out behind the file's WRITEs
 * without waiting, and the file stays open on the server -- and attached
 * to its node, so that a getattr or setattr of it keeps going through its
 * handle, behind its data -- until that FLUSH is answered; then a thread
 * of this module sends its CLOSE.  What such a file's WRITEs and FLUSH
 * report is no longer anyone's close(): every failure is logged with the
 * path, counted, and reported to whoever asks next: `qftfs --sync
 * MOUNTPOINT` (the QC_COMMIT_SYNC_XATTR of the mount root) and the
 * unmount, which both wait for everything queued first and make it
 * durable on the server (SYNCFS).  A lost connection fails what was
 * queued on it, which is reported the same way: never dropped silently.
 *
 * Path requests that follow a close in a tree copy -- utimensat and
 * chmod by path, rename of a temporary file over its target (rsync) --
 * are answered the same way when the client can predict their outcome
 * (qc_commit_path_op): they go out on the bulk stream, in order behind
 * the files' data, and ahead of any request on the meta stream sent
 * after them (qc_call_ordered); a failure is reported like a close's.
 *
 * The closer thread has a second job, in either commit mode: the CLOSE of
 * a file the kernel releases while the link is down (qc_commit_release).
 * A CLOSE sent then waits for the link -- for as long as the grace of a
 * session being resumed (conn.h) -- and the kernel's release must not:
 * it holds one of the FUSE threads, and the unmount waits for those.
 *
 * The backlog is bounded: at most QC_COMMIT_MAX_FILES closed files and
 * path requests with work in flight; one beyond that waits for room, so
 * memory and the server's queue stay bounded whatever the writer does.
 *
 * Locking: `lock` guards the fields so marked; it is taken after a
 * file's lock is dropped, never around sending or waiting for a reply.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_COMMIT_H
#define QC_COMMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

struct qc_fs;
struct qc_file;
struct qc_reply;
struct qft_msg;

#define QC_COMMIT_MAX_FILES  1024
#define QC_COMMIT_SYNC_XATTR "user.qftfs.sync"

/* A file's part (struct qc_file.cm): whether the kernel released the file
 * while a close's FLUSH was in flight (its CLOSE then waits; the FLUSHes
 * in flight are counted once, by the steps: qc_step_flushes). */
struct qc_commit_file {
	bool deferred;           /* file lock */
	uint64_t flush_agen;     /* file lock: the node's attr_gen when the
				  * last such FLUSH went out */
	/* commit lock, not the file's: the next file in the closer's
	 * queue (struct qc_commit.queue) */
	struct qc_file *next;
};

struct qc_commit {
	bool on;                 /* immutable once mounted */
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* lock: files fell, queue grew, stop set */
	uint64_t files;          /* lock: closes whose FLUSH is in flight,
				  * and path requests (qc_commit_path_op) */
	struct qc_file *queue;   /* lock: files to CLOSE (through cm.next) */
	bool stop;               /* lock: the closer thread is to end */
	bool started;            /* written by the owner only, before and
				  * after the FUSE threads run */
	pthread_t closer;        /* owner only */
	uint64_t errors;         /* lock: failures not reported yet */
	uint64_t errors_total;   /* lock: failures since the mount */
	int first;               /* lock: -errno of the first not reported */
	char first_path[QFT_MAX_PATH + 2]; /* lock: ... and its file */
};

int qc_commit_init(struct qc_commit *cm, bool on);
void qc_commit_destroy(struct qc_commit *cm);

/* Starts the closer thread (after fuse_daemonize, like the connection's). */
int qc_commit_start(struct qc_fs *fs);
/* Ends it, after qc_commit_sync: closes what is still queued first,
 * which waits for the link unless the connection is shut down. */
void qc_commit_stop(struct qc_fs *fs);

/*
 * close() of written file f in commit=async: reports an error already
 * known (a failed WRITE, a refused CREATE), else waits for room in the
 * backlog, sends FLUSH behind the file's data and returns 0.
 */
int qc_commit_close(struct qc_fs *fs, struct qc_file *f);

/*
 * The kernel released f: true when its CLOSE is deferred until its
 * FLUSH is answered, or to the closer thread because the link is down
 * (the closer thread then releases it), false when the caller releases
 * it now.
 */
bool qc_commit_release(struct qc_fs *fs, struct qc_file *f);

/*
 * Waits until every queued close is answered, asks the server to make
 * everything durable (SYNCFS), and reports the failures since the last
 * report into `text` ("errors N" and the first one with its path) and
 * as the return value: 0 when there were none and the sync succeeded,
 * else the first failure's -errno.  The count starts again from 0.
 */
int qc_commit_sync(struct qc_fs *fs, char *text, size_t size);

/*
 * What the caches must learn from the outcome of a path request sent by
 * qc_commit_path_op: err 0 with the server's reply, or the failure.  Runs
 * on a reader thread (conn.h, qc_done_fn: short, never waiting).
 */
typedef void qc_commit_fix_fn(struct qc_fs *fs, void *ctx, int err,
			      const struct qc_reply *rep);

/*
 * commit=async: sends path request `m` (naming `path` for the log)
 * without waiting, after waiting for room in the backlog; the caller
 * answers the application with what it predicts.  `fix` runs once with
 * the outcome; a failure is also logged, counted and reported by `qftfs
 * --sync` and the unmount.  -ENOTCONN, with nothing sent, while there is
 * no link: the caller then does the request the usual way (which waits
 * for the reconnect).
 */
int qc_commit_path_op(struct qc_fs *fs, struct qft_msg *m, const char *path,
		      qc_commit_fix_fn *fix, void *ctx);

/* Closes and path requests in flight plus closes queued: the backlog, for
 * the statistics (0 unless commit=async). */
uint64_t qc_commit_backlog(struct qc_fs *fs);

/* Failures since the mount, for the statistics. */
uint64_t qc_commit_errors(struct qc_fs *fs);

#endif /* QC_COMMIT_H */
