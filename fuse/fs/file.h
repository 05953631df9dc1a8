/* SPDX-License-Identifier: MIT */
/*
 * One open file or directory: the client's state for a protocol handle,
 * from open to the last completion after release, and re-opening it on a
 * new link after a reconnect.
 *
 * struct qc_file is the handle base (handle.h: lifetime, the handle and
 * its link, the changes sent through it and their sticky error) plus one
 * part per feature, each written only by the module that owns it and
 * read by others under the file's lock at most:
 *
 *   wb        writebehind.c  write-behind window
 *   ra        readahead.c    read-ahead stream
 *   step      steps.c        pipelined steps and the attributes predicted
 *   cm        commit.c       commit=async: closes whose FLUSH is in flight
 *   hint      hints.c        what the client knows about xattrs of the file
 *   ahead     dircache.c     readdir-ahead of an open directory
 *
 * This file (file.c) is the orchestration above them all: it makes a file
 * with the features' teardown (qc_file_new), begins every open, and runs
 * flush, fsync and release through commit.c.
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
#include "fs/commit.h"
#include "fs/dircache.h"
#include "fs/handle.h"
#include "fs/hints.h"
#include "msg.h"
#include "fs/node.h"
#include "fs/steps.h"
#include "fs/readahead.h"
#include "fs/writebehind.h"

struct qc_fs;

struct qc_file {
	/* The handle base: written by handle.c only (handle.h). */
	struct qn_file nf;      /* first: node link and protocol handle */
	struct qc_fs *fs;       /* immutable */
	/* fs->files.lock: the mount's list of files (handle.h) */
	struct qc_file *reg_next, *reg_prev;
	const struct qc_file_hooks *hooks; /* immutable: the features' */
	bool dir;               /* immutable */
	int oflags;             /* immutable: the open(2) flags */
	/* immutable: the caller who opened it, on a mount that names its
	 * callers (the thread's at qc_file_init: net/call.h), for the
	 * reopen after a reconnect, which may run on any thread */
	bool has_opener;
	struct qft_cred opener;
	/* immutable once the open is answered: the attributes it was
	 * answered with, when it read any (opened_known), for the pages
	 * its reads give the kernel (qn_note_paged) */
	bool opened_known;
	struct qft_attr opened;
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* lock: an async call completed */
	unsigned async;         /* lock: async calls not completed, and
				 * reads still unpinning after their reply */
	bool closing;           /* lock: released; the last completion frees */
	uint64_t gen;           /* lock: the link nf.handle is a number of */
	int failed;             /* lock: -errno for every later use, or 0 */
	bool reopening;         /* lock: a thread re-opens it; others wait */
	/*
	 * Changes sent through the handle (WRITEs and pipelined steps),
	 * which the next flush or fsync waits for: the first one's error
	 * is sticky in `err`, returned by every later write, flush and
	 * fsync until a flush reports it.
	 */
	bool written;           /* lock: written since the last FLUSH */
	uint64_t mods;          /* lock: data changes sent */
	uint64_t durable;       /* lock: ... covered by a FLUSH or FSYNC */
	uint64_t issued;        /* lock: changes sent (or about to be) */
	uint64_t answered;      /* lock: ... and completed */
	int err;                /* lock: sticky error, -errno or 0 */

	/* The features, each written by its owner only. */
	struct qc_wb wb;        /* lock: write-behind (writebehind.c) */
	struct qc_ra ra;        /* lock: read-ahead (readahead.c) */
	struct qc_steps_file step; /* lock: pipelined steps (steps.c) */
	struct qc_commit_file cm;  /* commit=async (commit.c) */
	struct qc_hints_file hint; /* lock: xattr hints (hints.c) */
	/* only qc_dir_readdir, without `lock` (see dircache.h) */
	struct qc_dir_ahead ahead;
	/* the read callback (ops.c): qn_note_paged done for this file */
	atomic_bool paged_noted;
};

/*
 * A file of `fs` that has no handle yet (gen 0), with the features'
 * teardown as its hooks; NULL when out of memory.  Freed with
 * qc_file_free (handle.h) until it is shared.
 */
struct qc_file *qc_file_new(struct qc_fs *fs, bool dir, int oflags);

/*
 * The start of every open: the client's state for the new handle and a
 * handle number on the current link (waiting for one within the deadline
 * while reconnecting), which f is bound to (gen, nf.handle) already.  0,
 * or the user's errno with nothing left to undo.
 */
int qc_file_begin(struct qc_fs *fs, bool dir, int oflags,
		  struct qc_file **fp, uint64_t *gen, uint64_t *handle);

/* The kernel released f: now, or once commit=async's FLUSH is answered
 * (commit.h). */
void qc_file_release(struct qc_fs *fs, struct qc_file *f);

/* FLUSH (close) and FSYNC: 0 or the errno to answer with, including a
 * sticky write error. */
int qc_file_flush(struct qc_fs *fs, struct qc_file *f);
int qc_file_fsync(struct qc_fs *fs, struct qc_file *f, int datasync);

#endif /* QC_FILE_H */
