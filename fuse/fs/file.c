// SPDX-License-Identifier: MIT
/* Open files: lifecycle, handles and re-opening after a reconnect (see
 * file.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/commit.h"
#include "net/conn.h"
#include "fs/dircache.h"
#include "errmap.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"
#include "fs/stream.h"

struct qc_file *qc_file_new(struct qc_fs *fs, bool dir)
{
	struct qc_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fs = fs;
	f->dir = dir;
	qc_ra_init(&f->ra);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	return f;
}

/* Once no request can refer to f any more (f->async == 0). */
void qc_file_free(struct qc_file *f)
{
	/* Written through a mapping after the last close(), say: nobody is
	 * left to be told, so at least the log is. */
	if (f->wb.err)
		qft_warn("a write to a released file failed: %s",
			 strerror(-f->wb.err));
	qc_ra_stop(f);
	qc_dir_ahead_drop(&f->ahead);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/*
 * Completes one async call of f: wakes whoever waits for it, releases the
 * lock (held on entry), and frees f if it was released and this was its
 * last call.  f must not be touched after this.
 */
void qc_file_async_done(struct qc_file *f)
{
	bool last;

	f->async--;
	last = f->closing && f->async == 0;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	if (last)
		qc_file_free(f);
}

/*
 * After the last reference: the handle goes back to the server.  CLOSE
 * needs no waiting (the server runs it after the WRITEs before it), but
 * the file lives on until the completions that refer to it have run.
 */
void qc_file_close(struct qc_fs *fs, struct qc_file *f)
{
	struct qft_msg m;
	uint64_t gen;
	bool last;

	pthread_mutex_lock(&f->lock);
	gen = f->gen;
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = f->nf.handle;
	pthread_mutex_unlock(&f->lock);
	/* A handle of a link that is gone went with it: nothing to close. */
	(void)qc_send_noreply(fs->conn, gen, &m);
	/* Reusable now: the server sees this CLOSE before any later bind. */
	qc_handle_free(fs->conn, gen, m.handle);
	pthread_mutex_lock(&f->lock);
	qc_ra_stop(f);
	f->closing = true;
	last = f->async == 0;
	pthread_mutex_unlock(&f->lock);
	if (last)
		qc_file_free(f);
}

void qc_file_put(struct qc_fs *fs, struct qc_file *f)
{
	if (f && qn_file_put(&fs->nodes, &f->nf))
		qc_file_close(fs, f);
}

void qc_file_release_now(struct qc_fs *fs, struct qc_file *f)
{
	if (qn_file_detach(&fs->nodes, &f->nf))
		qc_file_close(fs, f);
}

void qc_file_release(struct qc_fs *fs, struct qc_file *f)
{
	if (!qc_commit_release(fs, f))
		qc_file_release_now(fs, f);
}

/* Whether WRITEs sent through f on the live link are still unanswered. */
bool qc_file_writes_in_flight(struct qc_fs *fs, struct qc_file *f)
{
	bool busy;

	if (f->dir)
		return false;
	pthread_mutex_lock(&f->lock);
	busy = !f->failed && f->gen == qc_conn_gen(fs->conn) &&
	       f->wb.issued != f->wb.answered;
	pthread_mutex_unlock(&f->lock);
	return busy;
}

struct qc_file *qc_file_borrow_busy(struct qc_fs *fs, struct qn_node *n)
{
	struct qc_file *f = (struct qc_file *)qn_file_borrow(&fs->nodes, n);

	if (f && !qc_file_writes_in_flight(fs, f)) {
		qc_file_put(fs, f);
		f = NULL;
	}
	return f;
}

/*
 * After a failed OPEN or OPENDIR of `path` for node `n`: the name may now
 * lead to another type of object than the kernel looked up (replaced
 * behind its back), which the server reports as ELOOP (a symlink it will
 * not follow), EISDIR, ENOTDIR, ENXIO or EINVAL.  Then the answer is
 * ESTALE, on which the VFS looks the name up again and retries the open.
 */
int qc_file_open_error(struct qc_fs *fs, struct qn_node *n,
		       const char *path, int r)
{
	struct qc_reply rep;
	struct qft_msg m;

	if (r != -ELOOP && r != -EINVAL && r != -EISDIR && r != -ENOTDIR &&
	    r != -ENXIO)
		return qc_conn_user_err(r);
	qft_msg_init(&m, QFT_OP_LSTAT, 0);
	qc_set_str(&m.path, path);
	if (qc_call(fs->conn, &m, &rep) < 0)
		return r;
	if (qn_replaced(&fs->nodes, n, &rep.msg.attr, false))
		r = -ESTALE;
	qc_reply_free(&rep);
	return r;
}

/* For messages: the file's path, or a description when it has none. */
static const char *file_name(struct qc_fs *fs, struct qc_file *f, char *buf)
{
	struct qn_node *n = qn_file_node(&fs->nodes, &f->nf);

	if (qn_path(&fs->nodes, n, NULL, buf) < 0)
		return "(a removed file)";
	return buf[0] ? buf : "/";
}

/*
 * Opens f again on link `gen`, by path, with its flags less those that
 * create or truncate, and checks that the file is the one it was: same
 * type and inode and, for a handle that changed nothing, the size and
 * mtime the client last saw.  Returns 0 with the new handle in *handle,
 * -ENOTCONN when the link went away meanwhile (try again), or the error
 * the file is failed with (ESTALE when it changed).  No lock held.
 */
static int file_reopen(struct qc_fs *fs, struct qc_file *f, uint64_t gen,
		       bool changed_it, uint64_t *handle)
{
	char path[QFT_MAX_PATH + 1];
	struct qn_node *n = qn_file_node(&fs->nodes, &f->nf);
	struct qc_reply rep;
	struct qft_msg m;
	bool same = true;
	uint64_t h;
	int r;

	r = qn_path(&fs->nodes, n, NULL, path);
	if (r < 0) {
		qft_warn("an open file that was removed cannot be re-opened "
			 "after reconnecting; it fails with ESTALE");
		return -ESTALE;
	}
	r = qc_handle_alloc(fs->conn, gen, &h);
	if (r < 0)
		return r == -ENOTCONN ? r : qc_conn_user_err(r);
	qft_msg_init(&m, f->dir ? QFT_OP_OPENDIR : QFT_OP_OPEN, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	if (!f->dir)
		m.opflags = qc_file_oflags(fs, f->oflags &
					   ~(O_CREAT | O_EXCL | O_TRUNC));
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, h);
		/* Lost again, or nothing to tell apart from that. */
		if (r == -ENOTCONN || r == -EIO)
			return -ENOTCONN;
		if (r == -ENOENT ||
		    qc_file_open_error(fs, n, path, r) == -ESTALE)
			r = -ESTALE;
		qft_warn("%s: cannot re-open after reconnecting: %s",
			 path[0] ? path : "/", strerror(-r));
		return r;
	}
	/* OPENDIR answers no attributes: a directory just re-opens. */
	if (!f->dir && qn_replaced(&fs->nodes, n, &rep.msg.attr, true)) {
		same = false;
	} else if (!f->dir) {
		/* A handle that wrote changed size and mtime itself. */
		if (changed_it)
			qn_note_attr(&fs->nodes, n, &rep.msg.attr, NULL);
		else
			qn_note_attr(&fs->nodes, n, &rep.msg.attr, &same);
	}
	qc_reply_free(&rep);
	if (!same) {
		qft_msg_init(&m, QFT_OP_CLOSE, 0);
		m.handle = h;
		(void)qc_send_noreply(fs->conn, gen, &m);
		qc_handle_free(fs->conn, gen, h);
		qft_warn("%s changed on the server while the connection was "
			 "down; its open file fails with ESTALE",
			 path[0] ? path : "/");
		return -ESTALE;
	}
	qft_debug("%s: re-opened after reconnecting", path[0] ? path : "/");
	*handle = h;
	return 0;
}

/*
 * The handle (and its link) to send a request of f on.  After the link it
 * was opened on is gone, waits for a new one (at most the deadline) and
 * re-opens f there -- unless something written through f may not have
 * reached the server's disk: data answered to the kernel but not made
 * durable by a FLUSH or FSYNC since, or WRITEs that were in flight.  Such
 * a file fails for good with EIO, never silently.  Returns 0 or the
 * -errno to answer with.
 */
int qc_file_handle(struct qc_fs *fs, struct qc_file *f, uint64_t *gen,
		   uint64_t *handle)
{
	int r = 0, tries = 0;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		char name[QFT_MAX_PATH + 1];
		uint64_t h, live;
		bool changed_it;

		while (f->reopening)
			pthread_cond_wait(&f->cond, &f->lock);
		/* Read after f->gen settled, so an older value cannot make
		 * a handle just re-opened look lost. */
		live = qc_conn_gen(fs->conn);
		if (f->failed) {
			r = f->failed;
			break;
		}
		if (live && f->gen == live) {
			*gen = f->gen;
			*handle = f->nf.handle;
			r = 0;
			break;
		}
		if (tries++ == 3) {
			r = -EIO;
			break;
		}
		/* Generations only grow: f's link is dead.  A file that
		 * lost data with it fails now, without waiting for a new
		 * link that could not help. */
		if (f->mods != f->durable || f->wb.bytes || f->wb.err ||
		    f->wb.issued != f->wb.answered) {
			f->failed = -EIO;
			pthread_mutex_unlock(&f->lock);
			qft_err("%s: data written before the connection was "
				"lost may not have reached the server; the "
				"open file fails with EIO",
				file_name(fs, f, name));
			pthread_mutex_lock(&f->lock);
			continue;
		}
		pthread_mutex_unlock(&f->lock);
		r = qc_conn_wait(fs->conn, &live);
		pthread_mutex_lock(&f->lock);
		if (r < 0)
			break;
		if (f->reopening || f->failed || f->gen == live)
			continue;
		/* Written meanwhile?  Then it is not clean any more. */
		if (f->mods != f->durable || f->wb.bytes || f->wb.err ||
		    f->wb.issued != f->wb.answered)
			continue;
		changed_it = f->mods != 0;
		f->reopening = true;
		pthread_mutex_unlock(&f->lock);
		r = file_reopen(fs, f, live, changed_it, &h);
		pthread_mutex_lock(&f->lock);
		f->reopening = false;
		pthread_cond_broadcast(&f->cond);
		if (r == -ENOTCONN)
			continue;
		if (r < 0) {
			f->failed = r;
			continue;
		}
		/* Read-ahead of the old handle is gone with its link. */
		qc_ra_stop(f);
		f->gen = live;
		f->nf.handle = h;
	}
	pthread_mutex_unlock(&f->lock);
	return qc_conn_user_err(r);
}

/* qc_call on the handle of f, re-opened first if its link was replaced. */
int qc_file_call(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
		 struct qc_reply *rep)
{
	uint64_t gen;
	int r;

	for (int tries = 0; tries < 3; tries++) {
		r = qc_file_handle(fs, f, &gen, &m->handle);
		if (r < 0)
			return r;
		r = qc_call_gen(fs->conn, gen, m, rep);
		/* Not sent: the link changed since; once more. */
		if (r != -ENOTCONN)
			return r;
	}
	return -EIO;
}

/*
 * The attributes of `n` as an FSTAT through an open handle of it with
 * WRITEs in flight sees them: queued behind those WRITEs on the bulk
 * stream, where a path LSTAT on meta could overtake them and report the
 * size from before (conn.h, "Two streams").  False when there is no such
 * handle, the FSTAT fails, or it names another inode than `a`.
 */
bool qc_file_attr_behind_writes(struct qc_fs *fs, struct qn_node *n,
				const struct qft_attr *a, struct qft_attr *out)
{
	struct qc_file *f;
	struct qc_reply rep;
	struct qft_msg m;
	bool ok = false;

	f = qc_file_borrow_busy(fs, n);
	if (f) {
		qft_msg_init(&m, QFT_OP_FSTAT, 0);
		if (qc_file_call(fs, f, &m, &rep) == 0) {
			ok = rep.msg.attr.ino == a->ino &&
			     (rep.msg.attr.mode & QFT_S_IFMT) ==
			     (a->mode & QFT_S_IFMT);
			if (ok)
				*out = rep.msg.attr;
			qc_reply_free(&rep);
		}
	}
	qc_file_put(fs, f);
	return ok;
}

uint32_t qc_file_oflags(const struct qc_fs *fs, int oflags)
{
	uint32_t q = qft_oflags_from_host(oflags);

	/* The server's pacing is there so that the fdatasync of a durable
	 * close waits only for the tail; without that close it only slows
	 * the copy to the disk's speed (conn.c drops the bit for a server
	 * that does not know it). */
	if ((q & QFT_O_ACCMODE) != QFT_O_RDONLY &&
	    (fs->commit.on || fs->commit_none))
		q |= QFT_O_LAZY;
	return q;
}

/*
 * The start of every open: the client's state for the new handle and a
 * handle number on the current link (waiting for one within the deadline
 * while reconnecting).  0, or the user's errno with nothing left to undo.
 */
int qc_file_begin(struct qc_fs *fs, bool dir, int oflags,
		  struct qc_file **fp, uint64_t *gen, uint64_t *handle)
{
	struct qc_file *f = qc_file_new(fs, dir);
	int r;

	if (!f)
		return -ENOMEM;
	f->oflags = oflags;
	r = qc_conn_wait(fs->conn, gen);
	if (r == 0)
		r = qc_handle_alloc(fs->conn, *gen, handle);
	if (r < 0) {
		qc_file_free(f);
		return qc_conn_user_err(r);
	}
	*fp = f;
	return 0;
}

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
		f->attr.ino = rep->msg.attr.ino;
		f->attr.uid = rep->msg.attr.uid;
		f->attr.gid = rep->msg.attr.gid;
		f->attr.blksize = rep->msg.attr.blksize;
	}
	if (err < 0 && binds && f->failed == 0)
		f->failed = err;
	if (create)
		f->creating = false;
	if (--f->steps == 0 && f->flushing == 0)
		f->predicted = false;
	qc_wb_complete(f, 0, err);
	qc_file_async_done(f);
	/* Last: whoever settles (qc_file_settle) finds the node and the
	 * file as this answer left them. */
	if (create) {
		pthread_mutex_lock(&fs->creates_lock);
		if (--fs->creates == 0)
			pthread_cond_broadcast(&fs->creates_cond);
		pthread_mutex_unlock(&fs->creates_lock);
	}
}

int qc_file_step(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
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
	r = f->wb.err;
	if (r == 0) {
		f->wb.issued++;
		f->async++;
		f->steps++;
		f->predicted = true;
		if (m->op == QFT_OP_CREATE)
			f->creating = true;
		f->attr = *a;
		f->mtime_set = m->op == QFT_OP_SETATTR &&
			       (m->valid & QFT_SET_MTIME);
	}
	pthread_mutex_unlock(&f->lock);
	if (r < 0) {
		free(st);
		return r;
	}
	m->handle = handle;
	if (m->op == QFT_OP_CREATE) {
		pthread_mutex_lock(&fs->creates_lock);
		fs->creates++;
		pthread_mutex_unlock(&fs->creates_lock);
	}
	/* On failure step_done has run and made the error sticky. */
	return qc_conn_user_err(qc_call_async(fs->conn, gen, m, step_done,
					      st));
}

void qc_file_settle(struct qc_fs *fs)
{
	pthread_mutex_lock(&fs->creates_lock);
	while (fs->creates)
		pthread_cond_wait(&fs->creates_cond, &fs->creates_lock);
	pthread_mutex_unlock(&fs->creates_lock);
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
	if (f->predicted && (f->wb.bytes == 0 || f->flushing ||
			     f->mtime_set) && !f->failed) {
		*p->out = f->attr;
		p->found = true;
	}
	pthread_mutex_unlock(&f->lock);
	return p->found;
}

bool qc_file_predicted(struct qc_fs *fs, struct qn_node *n,
		       struct qft_attr *out)
{
	struct predicted p = { .out = out };

	/* Even with a CREATE unanswered: the inode number shown is the
	 * node's provisional one (node.h). */
	qn_for_each_file(&fs->nodes, n, file_predicted, &p);
	return p.found;
}

static void now_time(struct qft_time *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	t->sec = ts.tv_sec;
	t->nsec = (uint32_t)ts.tv_nsec;
}

bool qc_file_predict_setattr(struct qc_fs *fs, struct qc_file *f,
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
	if (f->failed || f->wb.err) {
		known = false;
	} else if (f->predicted) {
		*out = f->attr;
		known = true;
	} else if (known) {
		/*
		 * What the server said last, and WRITEs of ours since can
		 * only have made the file longer: the single-writer view
		 * that attr_timeout already takes.
		 */
		*out = last;
		if (f->wend > out->size)
			out->size = f->wend;
	}
	pthread_mutex_unlock(&f->lock);
	if (!known)
		return false;
	qc_file_apply_setattr(m, out);
	return true;
}

void qc_file_apply_setattr(const struct qft_msg *m, struct qft_attr *a)
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

/* A FLUSH or FSYNC sent when f had made `mods` changes succeeded. */
static void file_durable(struct qc_file *f, uint64_t mods)
{
	pthread_mutex_lock(&f->lock);
	if (mods > f->durable)
		f->durable = mods;
	pthread_mutex_unlock(&f->lock);
}

int qc_file_error(struct qc_file *f, int r)
{
	pthread_mutex_lock(&f->lock);
	if (f->failed)
		r = f->failed;
	pthread_mutex_unlock(&f->lock);
	return r;
}

void qc_file_changed(struct qc_file *f, bool written)
{
	pthread_mutex_lock(&f->lock);
	if (written)
		f->written = true;
	f->mods++;
	pthread_mutex_unlock(&f->lock);
}

int qc_file_flush(struct qc_fs *fs, struct qc_file *f)
{
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t issued, mods, agen;
	bool written, steps;
	struct qn_node *n;
	int r, werr, failed;

	pthread_mutex_lock(&f->lock);
	written = f->written || f->mods != f->durable;
	werr = f->wb.err;
	issued = f->wb.issued;
	mods = f->mods;
	failed = f->failed;
	steps = f->wb.issued != f->wb.answered;
	f->written = false;
	pthread_mutex_unlock(&f->lock);
	/* close() of a file that was only read costs no round trip (and
	 * does not fail, even when the file went stale). */
	if (!written && werr == 0 && !steps)
		return 0;
	if (failed) {
		/* Reported here (and by every later use): not a write error
		 * left for nobody when the file is freed. */
		pthread_mutex_lock(&f->lock);
		f->wb.err = 0;
		pthread_mutex_unlock(&f->lock);
		return failed;
	}
	if (fs->commit.on)
		return qc_commit_close(fs, f);
	if (!written) {
		/* Pipelined steps only (a file created, or its mode changed,
		 * and no data): their answers are the outcome. */
		qc_stat_inc(&fs->stats, QC_STAT_CLOSE_WAIT);
		werr = qc_wb_collect(f, issued, true);
		pthread_mutex_lock(&f->lock);
		failed = f->failed;
		pthread_mutex_unlock(&f->lock);
		return failed ? failed : werr;
	}
	qc_stat_inc(&fs->stats, QC_STAT_CLOSE_WAIT);
	n = qn_file_node(&fs->nodes, &f->nf);
	agen = qn_attr_gen(&fs->nodes, n);
	qft_msg_init(&m, QFT_OP_FLUSH, 0);
	m.opflags = fs->commit_none ? QFT_FLUSH_NOSYNC : 0;
	r = qc_file_call(fs, f, &m, &rep);
	if (r == 0) {
		/* The kernel drops the attributes of a file it wrote; this
		 * answer has them as they are now (rsync asks right after
		 * close). */
		if (fs->attr_timeout > 0)
			qn_note_fresh(&fs->nodes, n, &rep.msg.attr, agen,
				      qc_fs_attr_until(fs));
		qc_reply_free(&rep);
	}
	/* Reported here, so cleared, as the server's FLUSH clears its own. */
	werr = qc_wb_collect(f, issued, true);
	if (r == 0 && werr == 0)
		file_durable(f, mods);
	return werr ? werr : r;
}

int qc_file_fsync(struct qc_fs *fs, struct qc_file *f, int datasync)
{
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t issued, mods;
	int r, werr;

	pthread_mutex_lock(&f->lock);
	issued = f->wb.issued;
	mods = f->mods;
	pthread_mutex_unlock(&f->lock);
	qft_msg_init(&m, QFT_OP_FSYNC, 0);
	m.opflags = datasync ? QFT_FSYNC_DATASYNC : 0;
	r = qc_file_call(fs, f, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Kept for the flush at close as well. */
	werr = qc_wb_collect(f, issued, false);
	if (r == 0 && werr == 0)
		file_durable(f, mods);
	return werr ? werr : r;
}
