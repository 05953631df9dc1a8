// SPDX-License-Identifier: MIT
/* Pipelined steps: CREATE, OPEN and SETATTR answered to the kernel before
 * the server did, and the attributes predicted meanwhile (see steps.h). */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/conn.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/handle.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"
#include "fs/steps.h"
#include "fs/writebehind.h"

/* One pipelined step in flight, for its completion. */
struct step {
	struct qc_file *f;
	uint16_t op;
	uint64_t agen;          /* qn_attr_gen when it was sent */
};

static void step_done(void *ctx, int err, struct qc_reply *rep)
{
	struct step *st = ctx;
	struct qc_file *f = st->f;
	struct qc_fs *fs = f->fs;
	bool create = st->op == QFT_OP_CREATE;
	/* A CREATE or OPEN binds the handle: without it, f is useless. */
	bool binds = create || st->op == QFT_OP_OPEN;
	uint16_t op = st->op;
	uint64_t agen = st->agen;

	free(st);
	/* Lost with its link: whether it was executed nobody knows. */
	err = qc_conn_user_err(err);
	if (err == 0 && op == QFT_OP_OPEN &&
	    qn_file_replaced(&fs->nodes, &f->nf, &rep->msg.attr)) {
		/* Opened something else than the kernel looked up; the
		 * handle is closed with the file. */
		err = -ESTALE;
	}
	if (err == 0) {
		qn_file_note_attr(&fs->nodes, &f->nf, &rep->msg.attr, create);
		/* The server's own attributes: a stat right after (cp's
		 * fstat) is answered from them, unless a WRITE went out. */
		if (fs->attr_timeout > 0)
			qn_file_note_fresh(&fs->nodes, &f->nf, &rep->msg.attr,
					   agen, qc_fs_attr_until(fs));
	} else {
		qc_stat_inc(&fs->stats, QC_STAT_PIPE_ERROR);
		qft_debug("a pipelined %s failed: %s; reported at close",
			  qft_op_name(op), strerror(-err));
		/* The name the kernel was given does not exist. */
		if (create)
			qn_file_unlink_node(&fs->nodes, &f->nf);
	}
	pthread_mutex_lock(&f->lock);
	if (err == 0 && create) {
		/* The object is known now; what the kernel is told until the
		 * last step is answered keeps the predicted rest. */
		f->step.attr.ino = rep->msg.attr.ino;
		f->step.attr.uid = rep->msg.attr.uid;
		f->step.attr.gid = rep->msg.attr.gid;
		f->step.attr.blksize = rep->msg.attr.blksize;
	}
	if (err < 0 && binds)
		qc_file_fail(f, err);
	if (create)
		f->step.creating = false;
	if (--f->step.steps == 0 && f->step.flushes == 0)
		f->step.predicted = false;
	qc_file_change_done(f, err);
	qc_file_async_done(f);
	/* Last: whoever settles (qc_step_settle) finds the node and the
	 * file as this answer left them. */
	if (create) {
		pthread_mutex_lock(&fs->steps.lock);
		if (--fs->steps.creates == 0)
			pthread_cond_broadcast(&fs->steps.cond);
		pthread_mutex_unlock(&fs->steps.lock);
	}
}

int qc_step_send(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
		 const struct qft_attr *a)
{
	uint64_t gen, handle;
	struct step *st;
	int r;

	r = qc_file_handle(fs, f, &gen, &handle);
	if (r < 0)
		return r;
	st = malloc(sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->f = f;
	st->op = m->op;
	/* Table lock before the file's (file.h). */
	st->agen = qn_attr_gen(&fs->nodes, qn_file_node(&fs->nodes, &f->nf));
	pthread_mutex_lock(&f->lock);
	/* Counted like a WRITE, so flush and fsync collect it, but it is
	 * no data: nothing to make durable, no window to wait for. */
	r = qc_file_change_begin(f, false);
	if (r == 0) {
		f->step.steps++;
		f->step.predicted = true;
		if (m->op == QFT_OP_CREATE)
			f->step.creating = true;
		f->step.attr = *a;
		f->step.mtime_set = m->op == QFT_OP_SETATTR &&
				    (m->valid & QFT_SET_MTIME);
	}
	pthread_mutex_unlock(&f->lock);
	if (r < 0) {
		free(st);
		return r;
	}
	m->handle = handle;
	if (m->op == QFT_OP_CREATE) {
		pthread_mutex_lock(&fs->steps.lock);
		fs->steps.creates++;
		pthread_mutex_unlock(&fs->steps.lock);
	}
	/* On failure step_done has run and made the error sticky. */
	return qc_conn_user_err(qc_call_async(fs->conn, gen, m, step_done,
					      st));
}

void qc_step_settle(struct qc_fs *fs)
{
	pthread_mutex_lock(&fs->steps.lock);
	while (fs->steps.creates)
		pthread_cond_wait(&fs->steps.cond, &fs->steps.lock);
	pthread_mutex_unlock(&fs->steps.lock);
}

struct predicted {
	struct qft_attr *out;
	bool found;
};

static bool file_predicted(struct qn_file *nf, void *ctx)
{
	struct qc_file *f = (struct qc_file *)nf;
	struct predicted *p = ctx;

	pthread_mutex_lock(&f->lock);
	/* With WRITEs in flight the size and times are the server's to
	 * say: an FSTAT behind them asks (qc_file_attr_behind_writes);
	 * unless a SETATTR behind them sets the mtime, the one time a
	 * WRITE changes that is not the server's clock. */
	if (f->step.predicted && (qc_wb_idle(&f->wb) || f->step.flushes ||
				  f->step.mtime_set) && !f->failed) {
		*p->out = f->step.attr;
		p->found = true;
	}
	pthread_mutex_unlock(&f->lock);
	return p->found;
}

bool qc_step_predicted(struct qc_fs *fs, struct qn_node *n,
		       struct qft_attr *out)
{
	struct predicted p = { .out = out };
	struct qft_attr known;
	bool have = qn_get_attr(&fs->nodes, n, &known);

	/* Even with a CREATE unanswered: the inode number shown is the
	 * node's provisional one (node.h). */
	qn_for_each_file(&fs->nodes, n, file_predicted, &p);
	/* No step changes the link count: LINK, UNLINK and RENAME do, and
	 * the node holds what they made it, through every name (node.h),
	 * with their ctime when it is the later one. */
	if (p.found && have && known.mode) {
		out->nlink = known.nlink;
		if (known.ctime.sec > out->ctime.sec ||
		    (known.ctime.sec == out->ctime.sec &&
		     known.ctime.nsec > out->ctime.nsec))
			out->ctime = known.ctime;
	}
	return p.found;
}

void qc_step_release(struct qc_fs *fs, struct qc_file *f)
{
	struct qn_node *n = qn_file_node(&fs->nodes, &f->nf);
	struct qft_attr a;
	uint64_t gen;

	if (!n || fs->attr_timeout <= 0)
		return;
	/* Taken first: a change after it keeps the prediction out. */
	gen = qn_attr_gen(&fs->nodes, n);
	if (qc_step_predicted(fs, n, &a))
		qn_note_fresh(&fs->nodes, n, &a, gen, qc_fs_attr_until(fs));
}

static bool file_owner_mode(struct qn_file *nf, void *ctx)
{
	struct qc_file *f = (struct qc_file *)nf;
	const struct qft_attr *a = ctx;

	pthread_mutex_lock(&f->lock);
	if (f->step.predicted) {
		f->step.attr.mode = a->mode;
		f->step.attr.uid = a->uid;
		f->step.attr.gid = a->gid;
		f->step.attr.ctime = a->ctime;
	}
	pthread_mutex_unlock(&f->lock);
	return false;
}

void qc_step_note_owner_mode(struct qc_fs *fs, struct qn_node *n,
			     const struct qft_attr *a)
{
	qn_for_each_file(&fs->nodes, n, file_owner_mode, (void *)a);
}

static void now_time(struct qft_time *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	t->sec = ts.tv_sec;
	t->nsec = (uint32_t)ts.tv_nsec;
}

bool qc_step_predict_setattr(struct qc_fs *fs, struct qc_file *f,
			     const struct qft_msg *m, struct qft_attr *out)
{
	struct qft_attr last;
	bool known;

	if (m->valid & QFT_SET_SIZE)
		return false;
	/* Table lock before the file's (file.h). */
	known = qn_get_attr(&fs->nodes, qn_file_node(&fs->nodes, &f->nf),
			    &last);
	pthread_mutex_lock(&f->lock);
	if (f->failed || f->err) {
		known = false;
	} else if (f->step.predicted) {
		*out = f->step.attr;
		known = true;
	} else if (known) {
		/*
		 * What the server said last, and WRITEs of ours since can
		 * only have made the file longer: the single-writer view
		 * that attr_timeout already takes.
		 */
		*out = last;
		if (f->step.wend > out->size)
			out->size = f->step.wend;
	}
	pthread_mutex_unlock(&f->lock);
	if (!known)
		return false;
	qc_step_apply_setattr(m, out);
	return true;
}

void qc_step_apply_setattr(const struct qft_msg *m, struct qft_attr *a)
{
	if (m->valid & QFT_SET_MODE)
		a->mode = (a->mode & QFT_S_IFMT) | (m->mode & 07777);
	if (m->valid & QFT_SET_UID)
		a->uid = m->uid;
	if (m->valid & QFT_SET_GID)
		a->gid = m->gid;
	if (m->valid & QFT_SET_ATIME)
		a->atime = m->atime;
	if (m->valid & QFT_SET_MTIME)
		a->mtime = m->mtime;
	if (m->valid & QFT_SET_ATIME_NOW)
		now_time(&a->atime);
	if (m->valid & QFT_SET_MTIME_NOW)
		now_time(&a->mtime);
	/* Every change of attributes sets ctime. */
	now_time(&a->ctime);
}

void qc_step_init(struct qc_steps *sm)
{
	pthread_mutex_init(&sm->lock, NULL);
	pthread_cond_init(&sm->cond, NULL);
	sm->creates = 0;
}

void qc_step_destroy(struct qc_steps *sm)
{
	pthread_cond_destroy(&sm->cond);
	pthread_mutex_destroy(&sm->lock);
}

uint64_t qc_step_size_bound(struct qc_file *f)
{
	uint64_t n = f->step.wend;

	qc_file_assert_locked(f);
	if (f->step.predicted && f->step.attr.size > n)
		n = f->step.attr.size;
	return n;
}

void qc_step_note_write(struct qc_file *f, uint64_t end)
{
	struct timespec ts;

	qc_file_assert_locked(f);
	if (end > f->step.wend)
		f->step.wend = end;
	if (!f->step.predicted)
		return;
	/* What the kernel is told once these WRITEs are answered and
	 * pipelined steps are still out (steps.h). */
	if (end > f->step.attr.size)
		f->step.attr.size = end;
	clock_gettime(CLOCK_REALTIME, &ts);
	f->step.attr.mtime.sec = f->step.attr.ctime.sec = ts.tv_sec;
	f->step.attr.mtime.nsec = f->step.attr.ctime.nsec =
		(uint32_t)ts.tv_nsec;
	f->step.mtime_set = false;
}

void qc_step_flush_begin(struct qc_file *f, const struct qft_attr *last)
{
	qc_file_assert_locked(f);
	f->step.flushes++;
	/* Until the FLUSH is answered the kernel is told the size the
	 * WRITEs make, not asked to wait. */
	if (!f->step.predicted && last) {
		f->step.attr = *last;
		f->step.predicted = true;
	}
	if (f->step.predicted && f->step.wend > f->step.attr.size)
		f->step.attr.size = f->step.wend;
}

unsigned qc_step_flushes(struct qc_file *f)
{
	qc_file_assert_locked(f);
	return f->step.flushes;
}

void qc_step_flush_done(struct qc_file *f)
{
	qc_file_assert_locked(f);
	assert(f->step.flushes > 0);
	if (--f->step.flushes == 0 && f->step.steps == 0)
		f->step.predicted = false;
}
