// SPDX-License-Identifier: MIT
/*
 * -o commit=async: closes that do not wait, and where their errors go
 * (see commit.h).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/commit.h"
#include "net/conn.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/handle.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "fs/steps.h"
#include "thread.h"

int qc_commit_init(struct qc_commit *cm, bool on)
{
	memset(cm, 0, sizeof(*cm));
	cm->on = on;
	pthread_mutex_init(&cm->lock, NULL);
	pthread_cond_init(&cm->cond, NULL);
	return 0;
}

void qc_commit_destroy(struct qc_commit *cm)
{
	pthread_cond_destroy(&cm->cond);
	pthread_mutex_destroy(&cm->lock);
}

/* A failure nobody's close() will report: log, count, keep the first. */
static void record_path(struct qc_fs *fs, const char *what,
			const char *path, int err)
{
	struct qc_commit *cm = &fs->commit;

	qft_err("/%s: %s, after %s returned (commit=async); `qftfs --sync` "
		"and the unmount report it", path, strerror(-err), what);
	pthread_mutex_lock(&cm->lock);
	if (cm->errors++ == 0) {
		cm->first = err;
		snprintf(cm->first_path, sizeof(cm->first_path), "/%s", path);
	}
	cm->errors_total++;
	pthread_mutex_unlock(&cm->lock);
}

static void record(struct qc_fs *fs, struct qc_file *f, int err)
{
	struct qn_node *n = qn_file_node(&fs->nodes, &f->nf);
	char path[QFT_MAX_PATH + 1];

	/* Still attached: its CLOSE waits for this (qc_commit_release). */
	if (!n || qn_path(&fs->nodes, n, NULL, path) < 0)
		snprintf(path, sizeof(path), "(a removed file)");
	record_path(fs, "close()", path, err);
}

/* Waits for room in the backlog and takes it. */
static void backlog_enter(struct qc_commit *cm)
{
	pthread_mutex_lock(&cm->lock);
	while (cm->files >= QC_COMMIT_MAX_FILES)
		pthread_cond_wait(&cm->cond, &cm->lock);
	cm->files++;
	pthread_mutex_unlock(&cm->lock);
}

static void backlog_leave(struct qc_commit *cm)
{
	pthread_mutex_lock(&cm->lock);
	cm->files--;
	pthread_cond_broadcast(&cm->cond);
	pthread_mutex_unlock(&cm->lock);
}

struct path_op {
	struct qc_fs *fs;
	qc_commit_fix_fn *fix;
	void *ctx;
	uint16_t op;
	char path[QFT_MAX_PATH + 1];
};

static void path_op_done(void *ctx, int err, struct qc_reply *rep)
{
	struct path_op *po = ctx;
	struct qc_fs *fs = po->fs;

	/* Lost with its link: whether it was executed nobody knows, and
	 * the caches' predictions are dropped as for a failure. */
	err = qc_conn_user_err(err);
	po->fix(fs, po->ctx, err, err == 0 ? rep : NULL);
	if (err)
		record_path(fs, qft_op_name(po->op), po->path, err);
	backlog_leave(&fs->commit);
	free(po);
}

int qc_commit_path_op(struct qc_fs *fs, struct qft_msg *m, const char *path,
		      qc_commit_fix_fn *fix, void *ctx)
{
	struct path_op *po;
	uint64_t gen;

	po = malloc(sizeof(*po));
	if (!po)
		return -ENOMEM;
	po->fs = fs;
	po->fix = fix;
	po->ctx = ctx;
	po->op = m->op;
	snprintf(po->path, sizeof(po->path), "%s", path);
	backlog_enter(&fs->commit);
	gen = qc_conn_gen(fs->conn);
	if (!gen) {
		backlog_leave(&fs->commit);
		free(po);
		return -ENOTCONN;
	}
	/* A failure to send completes it: recorded like any other. */
	(void)qc_call_ordered(fs->conn, gen, m, path_op_done, po);
	return 0;
}

static void flush_done(void *ctx, int err, struct qc_reply *rep)
{
	struct qc_file *f = ctx;
	struct qc_fs *fs = f->fs;
	struct qc_commit *cm = &fs->commit;
	uint64_t agen;
	bool queue, only;
	int first, werr;

	/* Lost with its link: whether the data got there nobody knows. */
	err = qc_conn_user_err(err);
	pthread_mutex_lock(&f->lock);
	agen = f->cm.flush_agen;
	/* With another FLUSH behind it, this answer is not the last word
	 * (and the generation is the other's). */
	only = qc_step_flushes(f) == 1;
	pthread_mutex_unlock(&f->lock);
	/* The file as it is now, as a synchronous close would note it: a
	 * stat, or a prediction starting from it, must not see the size
	 * the CREATE predicted (table lock before the file's). */
	if (err == 0 && only && fs->attr_timeout > 0)
		qn_file_note_fresh(&fs->nodes, &f->nf, &rep->msg.attr, agen,
				   qc_fs_attr_until(fs));
	pthread_mutex_lock(&f->lock);
	/* The FLUSH is answered after every WRITE and step before it, so
	 * their first error is final now; it is reported here, not by a
	 * close() that returned long ago. */
	werr = qc_file_take_err(f);
	first = werr ? werr : err;
	if (first == 0)
		qc_file_note_durable(f, f->mods);
	qc_step_flush_done(f);
	queue = qc_step_flushes(f) == 0 && f->cm.deferred;
	if (queue) {
		/* The closer thread's reference until it has released f. */
		f->cm.deferred = false;
		qc_file_hold(f);
	}
	pthread_mutex_unlock(&f->lock);
	if (first)
		record(fs, f, first);

	pthread_mutex_lock(&cm->lock);
	cm->files--;
	if (queue) {
		f->cm.next = cm->queue;
		cm->queue = f;
	}
	pthread_cond_broadcast(&cm->cond);
	pthread_mutex_unlock(&cm->lock);

	pthread_mutex_lock(&f->lock);
	qc_file_async_done(f);
}

int qc_commit_close(struct qc_fs *fs, struct qc_file *f)
{
	struct qc_commit *cm = &fs->commit;
	struct qn_node *n = qn_file_node(&fs->nodes, &f->nf);
	struct qft_attr last;
	uint64_t gen, handle, agen;
	struct qft_msg m;
	bool known;
	int r;

	assert(cm->on);
	/* Table lock before the file's (file.h). */
	known = qn_get_attr(&fs->nodes, n, &last);
	agen = qn_attr_gen(&fs->nodes, n);
	pthread_mutex_lock(&f->lock);
	r = qc_file_take_err(f);
	if (f->failed)
		r = f->failed;
	pthread_mutex_unlock(&f->lock);
	if (r < 0)
		return r;

	backlog_enter(cm);
	r = qc_file_handle(fs, f, &gen, &handle);
	if (r < 0)
		goto out_unqueue;
	pthread_mutex_lock(&f->lock);
	qc_file_hold(f);
	f->cm.flush_agen = agen;
	/* Until the FLUSH is answered the kernel is told the size the
	 * WRITEs make (steps.h), not asked to wait. */
	qc_step_flush_begin(f, known ? &last : NULL);
	qc_file_clear_written(f);
	pthread_mutex_unlock(&f->lock);
	qft_msg_init(&m, QFT_OP_FLUSH, 0);
	m.handle = handle;
	/* Durability comes with the SYNCFS of `qftfs --sync` and the
	 * unmount: one for everything rather than one per file. */
	m.opflags = QFT_FLUSH_NOSYNC;
	(void)qc_call_async(fs->conn, gen, &m, flush_done, f);
	return 0;

out_unqueue:
	backlog_leave(cm);
	return r;
}

bool qc_commit_release(struct qc_fs *fs, struct qc_file *f)
{
	struct qc_commit *cm = &fs->commit;
	bool defer = false, queue = false;
	/*
	 * Before the file's lock: the connection's is never taken inside
	 * it.  A link that dies between this look and the CLOSE holds this
	 * thread until the resume or its grace ends: a window of a lock's
	 * length, which a CLOSE the connection queued without a link would
	 * close (net/ cannot do that yet).
	 */
	bool down = cm->started && qc_conn_lost(fs->conn);

	pthread_mutex_lock(&f->lock);
	if (cm->on && qc_step_flushes(f) > 0) {
		defer = true;
		f->cm.deferred = true;
	} else if (down) {
		/* The closer thread's reference until it has released f. */
		queue = true;
		qc_file_hold(f);
	}
	pthread_mutex_unlock(&f->lock);
	if (queue) {
		pthread_mutex_lock(&cm->lock);
		f->cm.next = cm->queue;
		cm->queue = f;
		pthread_cond_broadcast(&cm->cond);
		pthread_mutex_unlock(&cm->lock);
	}
	return defer || queue;
}

/* Sends the CLOSEs the reader thread, and the kernel's release while the
 * link is down, may not send themselves. */
static void *closer_main(void *arg)
{
	struct qc_fs *fs = arg;
	struct qc_commit *cm = &fs->commit;

	pthread_mutex_lock(&cm->lock);
	for (;;) {
		struct qc_file *f = cm->queue;

		if (!f) {
			if (cm->stop)
				break;
			pthread_cond_wait(&cm->cond, &cm->lock);
			continue;
		}
		cm->queue = f->cm.next;
		pthread_mutex_unlock(&cm->lock);
		qc_step_release(fs, f);
		qc_file_release_now(fs, f);
		pthread_mutex_lock(&f->lock);
		qc_file_async_done(f);
		pthread_mutex_lock(&cm->lock);
	}
	pthread_mutex_unlock(&cm->lock);
	return NULL;
}

int qc_commit_start(struct qc_fs *fs)
{
	struct qc_commit *cm = &fs->commit;
	int r;

	/* With commit=close too: releases while the link is down. */
	r = qft_thread_start(&cm->closer, closer_main, fs);
	if (r < 0)
		return r;
	cm->started = true;
	return 0;
}

void qc_commit_stop(struct qc_fs *fs)
{
	struct qc_commit *cm = &fs->commit;

	if (!cm->started)
		return;
	pthread_mutex_lock(&cm->lock);
	cm->stop = true;
	pthread_cond_broadcast(&cm->cond);
	pthread_mutex_unlock(&cm->lock);
	pthread_join(cm->closer, NULL);
	cm->started = false;
}

int qc_commit_sync(struct qc_fs *fs, char *text, size_t size)
{
	struct qc_commit *cm = &fs->commit;
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t errors;
	int r, first;

	/* Completions always come: an answer, or the link's failure
	 * within the request deadline. */
	pthread_mutex_lock(&cm->lock);
	while (cm->files)
		pthread_cond_wait(&cm->cond, &cm->lock);
	pthread_mutex_unlock(&cm->lock);

	qft_msg_init(&m, QFT_OP_SYNCFS, 0);
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);

	pthread_mutex_lock(&cm->lock);
	errors = cm->errors;
	first = cm->first;
	if (errors)
		snprintf(text, size, "errors %llu\nfirst %s: %s\n",
			 (unsigned long long)errors, cm->first_path,
			 strerror(-first));
	else if (r < 0)
		snprintf(text, size, "errors 1\nfirst (sync of the server's "
			 "file system): %s\n", strerror(-r));
	else
		snprintf(text, size, "errors 0\n");
	cm->errors = 0;
	cm->first = 0;
	cm->first_path[0] = '\0';
	pthread_mutex_unlock(&cm->lock);
	return errors ? first : r;
}

uint64_t qc_commit_backlog(struct qc_fs *fs)
{
	struct qc_commit *cm = &fs->commit;
	uint64_t n = 0;

	if (!cm->on)
		return 0;
	pthread_mutex_lock(&cm->lock);
	n = cm->files;
	for (struct qc_file *f = cm->queue; f; f = f->cm.next)
		n++;
	pthread_mutex_unlock(&cm->lock);
	return n;
}

uint64_t qc_commit_errors(struct qc_fs *fs)
{
	uint64_t n;

	pthread_mutex_lock(&fs->commit.lock);
	n = fs->commit.errors_total;
	pthread_mutex_unlock(&fs->commit.lock);
	return n;
}
