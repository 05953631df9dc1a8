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
#include "fs/handle.h"
#include "fs/steps.h"

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

/*
 * The start of every open: the client's state for the new handle and a
 * handle number on the current link (waiting for one within the deadline
 * while reconnecting).  0, or the user's errno with nothing left to undo.
 */
int qc_file_begin(struct qc_fs *fs, bool dir, int oflags,
		  struct qc_file **fp, uint64_t *gen, uint64_t *handle);

void qc_file_release(struct qc_fs *fs, struct qc_file *f);

/* FLUSH (close) and FSYNC: 0 or the errno to answer with, including a
 * sticky write error. */
int qc_file_flush(struct qc_fs *fs, struct qc_file *f);
int qc_file_fsync(struct qc_fs *fs, struct qc_file *f, int datasync);

#endif /* QC_FILE_H */
