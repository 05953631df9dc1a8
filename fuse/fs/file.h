/* SPDX-License-Identifier: MIT */
/*
 * One open file or directory: the client's state for a protocol handle,
 * from open to the last completion after release, and re-opening it on a
 * new link after a reconnect.
 *
 * Lifetime.  qc_file_begin makes it with a handle number; the open
 * callback attaches it to its node (qn_file_attach) and gives it to the
 * kernel.  Borrowers (path operations on a node with no name, or with
 * WRITEs in flight) take references through qn_file_borrow and give them
 * back with qc_file_put; the kernel's release drops its own with
 * qc_file_release.  After the last reference the handle is closed
 * (qc_file_close), but the file lives on until the asynchronous calls
 * that refer to it have completed: `async` counts the calls not
 * completed yet (and readers that still use read-ahead chunks after
 * answering the kernel, which may release the file as soon as it has the
 * answer), and a released file is freed by whoever brings it to zero
 * (qc_file_async_done).
 *
 * Reconnects (conn.h): nf.handle is a number on link `gen`, and both
 * change (under lock) when qc_file_handle re-opens the file on a new link
 * -- which it does only when nothing written through it can have been
 * lost; otherwise the file fails for good (`failed`).  mods counts
 * changes sent through the handle (WRITE, FALLOCATE, truncation); durable
 * is the count that a successful FLUSH or FSYNC covered.
 *
 * Lock order: the node table's lock (node.c), then a file's lock.
 *
 * Error convention: 0 or a negative errno, already turned into what a
 * user should see (qc_conn_user_err) unless said otherwise.
 */
#ifndef QC_FILE_H
#define QC_FILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "msg.h"
#include "fs/node.h"
#include "fs/stream.h"

struct qc_fs;

struct qc_file {
	struct qn_file nf;      /* first: node link and protocol handle */
	struct qc_fs *fs;       /* immutable */
	bool dir;               /* immutable */
	/* only qc_dir_readdir, without `lock` (see dircache.h) */
	struct qc_dir_ahead ahead;
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* lock: an async call completed */
	bool written;           /* lock: written since the last FLUSH */
	struct qc_wb wb;        /* lock: write-behind (stream.h) */
	unsigned async;         /* lock: async calls not completed, and
				 * reads still unpinning after their reply */
	bool closing;           /* lock: released; the last completion frees */
	struct qc_ra ra;        /* lock: read-ahead (stream.h) */
	uint64_t nocap_until;   /* lock: CLOCK_MONOTONIC ns until which the
				 * node is known to have no file capability
				 * (hints.c) */
	uint64_t gen;           /* lock */
	int oflags;             /* immutable: the open(2) flags */
	int failed;             /* lock: -errno for every later use, or 0 */
	bool reopening;         /* lock: a thread re-opens it; others wait */
	uint64_t mods;          /* lock */
	uint64_t durable;       /* lock */
	/*
	 * Pipelined steps (qc_file_step): a CREATE or SETATTR sent through
	 * the handle and answered to the kernel before the server did.
	 * They count in wb.issued/answered like WRITEs, so the next flush
	 * or fsync waits for them and reports their first error, which is
	 * sticky in wb.err (a refused CREATE also fails the file).  While
	 * any is unanswered the kernel gets `attr`, the attributes the
	 * client predicts, with a validity of 0 so that it asks again.
	 */
	unsigned steps;         /* lock: steps not answered yet */
	bool creating;          /* lock: a pipelined CREATE not answered yet */
	atomic_bool paged_noted; /* qn_note_paged done for this file */
	uint64_t wend;          /* lock: furthest end of a WRITE through f */
	/* commit=async (commit.h): closes whose FLUSH is in flight, and
	 * whether the kernel released f meanwhile (its CLOSE then waits) */
	unsigned flushing;      /* lock */
	bool deferred;          /* lock */
	uint64_t flush_agen;    /* lock: the node's attr_gen when the last
				 * such FLUSH went out */
	struct qc_file *cnext;  /* commit lock: the closer's queue */
	bool predicted;         /* lock: `attr` is what the kernel is told */
	struct qft_attr attr;   /* lock: valid while `predicted` */
	/* lock: a pipelined SETATTR set the mtime after f's last WRITE, so
	 * `attr` holds with WRITEs in flight too: they execute before it,
	 * and their sizes are counted in `attr` already */
	bool mtime_set;
};

/* A file of `fs` that has no handle yet; NULL when out of memory. */
struct qc_file *qc_file_new(struct qc_fs *fs, bool dir);
/* Once no request can refer to f any more (f->async == 0). */
void qc_file_free(struct qc_file *f);

/*
 * The start of every open: the client's state for the new handle and a
 * handle number on the current link (waiting for one within the deadline
 * while reconnecting).  0, or the user's errno with nothing left to undo.
 */
int qc_file_begin(struct qc_fs *fs, bool dir, int oflags,
		  struct qc_file **fp, uint64_t *gen, uint64_t *handle);

/*
 * The OPEN or CREATE flags for host open flags `oflags` (from which the
 * caller removed what the request must not carry): with QFT_O_LAZY when
 * the file is opened for writing and close() will not wait for its data
 * to be durable (commit=async, commit=none), so that the server does not
 * pace its WRITEs to its disk.  fsync() still syncs (FSYNC).
 */
uint32_t qc_file_oflags(const struct qc_fs *fs, int oflags);

/*
 * Completes one async call of f: wakes whoever waits for it, releases the
 * lock (held on entry), and frees f if it was released and this was its
 * last call.  f must not be touched after this.
 */
void qc_file_async_done(struct qc_file *f);

/* After the last reference: CLOSE the handle, free f once its calls are
 * done. */
void qc_file_close(struct qc_fs *fs, struct qc_file *f);
/* Drops a borrower's reference (f may be NULL), or the kernel's. */
void qc_file_put(struct qc_fs *fs, struct qc_file *f);
void qc_file_release(struct qc_fs *fs, struct qc_file *f);
/* The kernel's reference now, whatever commit=async would defer. */
void qc_file_release_now(struct qc_fs *fs, struct qc_file *f);

/*
 * The handle (and its link) to send a request of f on, re-opening f on a
 * new link after its own is gone, when nothing written through it can
 * have been lost (else f fails for good with EIO).
 */
int qc_file_handle(struct qc_fs *fs, struct qc_file *f, uint64_t *gen,
		   uint64_t *handle);
/* qc_call on the handle of f, re-opened first if its link was replaced. */
int qc_file_call(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
		 struct qc_reply *rep);

/*
 * After a failed OPEN or OPENDIR of `path` for node `n` with error `r`:
 * ESTALE when the name now leads to another type of object, else `r` as
 * a user sees it.
 */
int qc_file_open_error(struct qc_fs *fs, struct qn_node *n,
		       const char *path, int r);

/* Whether WRITEs sent through f on the live link are still unanswered. */
bool qc_file_writes_in_flight(struct qc_fs *fs, struct qc_file *f);
/*
 * An open file of `n` with WRITEs or steps in flight, borrowed (give it
 * back with qc_file_put), or NULL: what a request about n must queue
 * behind on the bulk stream to see their effects (conn.h, "Two
 * streams").
 */
struct qc_file *qc_file_borrow_busy(struct qc_fs *fs, struct qn_node *n);

/*
 * The attributes of `n` as an FSTAT through an open handle of it with
 * WRITEs in flight sees them (false when there is none, or it fails or
 * names another object than `a`).
 */
bool qc_file_attr_behind_writes(struct qc_fs *fs, struct qn_node *n,
				const struct qft_attr *a,
				struct qft_attr *out);

/*
 * What a request of f that failed with `r` reports: the error of a
 * pipelined OPEN or CREATE that failed f, if one did (the request was
 * sent behind it and met a handle the server never bound), else `r`.
 */
int qc_file_error(struct qc_file *f, int r);

/* A change through f (truncation; with `written`, data) that the next
 * FLUSH must make durable. */
void qc_file_changed(struct qc_file *f, bool written);

/*
 * Sends `m` (a CREATE that binds f's handle, or a SETATTR) through f
 * without waiting, with `a` as the attributes f has once the server
 * executed it; the kernel is answered with `a` (validity 0) until every
 * step is answered.  0, or the -errno it failed with at once (f is then
 * unchanged, or for a CREATE failed).
 */
int qc_file_step(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
		 const struct qft_attr *a);

/*
 * Waits until every pipelined CREATE of the mount is answered.  Requests
 * on the meta stream that name a path (unlink, rename, link, xattrs)
 * call it first: the server might otherwise run them before a CREATE
 * queued on the bulk stream and not find the name.  Free when none is
 * in flight, which is the rule: creates are answered within a round
 * trip, and a tree copy closes each file before the next rename.
 * A fetch that feeds the directory cache (qc_dir_fetch_begin) begins
 * before it settles, never after: a create counted after the settle
 * then spoils the fetch, which may overtake that CREATE.
 */
void qc_file_settle(struct qc_fs *fs);

/*
 * The attributes the client predicts for `n` through one of its open
 * files with pipelined steps unanswered and no WRITE in flight (or only
 * WRITEs before a SETATTR of the mtime: tar's futimens, then the fchown
 * whose suid check makes the kernel ask); false when there is none (ask
 * the server).
 */
bool qc_file_predicted(struct qc_fs *fs, struct qn_node *n,
		       struct qft_attr *out);

/*
 * The attributes `n` will have once SETATTR `m` is executed, predicted
 * from f: its pipelined attributes, else the node's last known ones when
 * nothing is in flight through f.  False when they cannot be known (a
 * truncation, or nothing known): the SETATTR must wait for the server.
 */
bool qc_file_predict_setattr(struct qc_fs *fs, struct qc_file *f,
			     const struct qft_msg *m, struct qft_attr *out);

/* What SETATTR `m` (no size) makes of attributes `a`. */
void qc_file_apply_setattr(const struct qft_msg *m, struct qft_attr *a);

/* FLUSH (close) and FSYNC: 0 or the errno to answer with, including a
 * sticky write error. */
int qc_file_flush(struct qc_fs *fs, struct qc_file *f);
int qc_file_fsync(struct qc_fs *fs, struct qc_file *f, int datasync);

#endif /* QC_FILE_H */
