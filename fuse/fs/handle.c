// SPDX-License-Identifier: MIT
/* The open-handle base of every open file or directory: lifetime, the
 * handle and re-opening it after a reconnect (see handle.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "errmap.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/handle.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"

void qc_file_reg_init(struct qc_file_reg *reg)
{
	pthread_mutex_init(&reg->lock, NULL);
	reg->head = NULL;
	reg->n = 0;
}

void qc_file_reg_destroy(struct qc_file_reg *reg)
{
	/* Every file was freed with the node table. */
	assert(!reg->head);
	pthread_mutex_destroy(&reg->lock);
}

void qc_file_init(struct qc_file *f, struct qc_fs *fs, bool dir, int oflags,
		  const struct qc_file_hooks *hooks)
{
	struct qc_file_reg *reg = &fs->files;
	const struct qft_cred *opener = qc_call_caller();

	f->fs = fs;
	f->dir = dir;
	f->oflags = oflags;
	f->nf.rdonly = (oflags & O_ACCMODE) == O_RDONLY &&
		       !(oflags & (O_TRUNC | O_CREAT));
	f->hooks = hooks;
	if (opener) {
		f->has_opener = true;
		f->opener = *opener;
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	pthread_mutex_lock(&reg->lock);
	f->reg_prev = NULL;
	f->reg_next = reg->head;
	if (reg->head)
		reg->head->reg_prev = f;
	reg->head = f;
	reg->n++;
	pthread_mutex_unlock(&reg->lock);
}

void qc_file_bind(struct qc_file *f, uint64_t gen, uint64_t handle)
{
	pthread_mutex_lock(&f->lock);
	f->gen = gen;
	f->nf.handle = handle;
	pthread_mutex_unlock(&f->lock);
}

/* Once no request can refer to f any more (f->async == 0). */
void qc_file_free(struct qc_file *f)
{
	/* Written through a mapping after the last close(), say: nobody is
	 * left to be told, so at least the log is. */
	struct qc_file_reg *reg = &f->fs->files;

	if (f->err)
		qft_warn("a write to a released file failed: %s",
			 strerror(-f->err));
	pthread_mutex_lock(&reg->lock);
	if (f->reg_prev)
		f->reg_prev->reg_next = f->reg_next;
	else
		reg->head = f->reg_next;
	if (f->reg_next)
		f->reg_next->reg_prev = f->reg_prev;
	reg->n--;
	pthread_mutex_unlock(&reg->lock);
	f->hooks->fini(f);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

void qc_file_hold(struct qc_file *f)
{
	qc_file_assert_locked(f);
	f->async++;
}

/*
 * Completes one async call of f: wakes whoever waits for it, releases the
 * lock (held on entry), and frees f if it was released and this was its
 * last call.  f must not be touched after this.
 */
void qc_file_async_done(struct qc_file *f)
{
	bool last;

	qc_file_assert_locked(f);
	assert(f->async > 0);
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
	/* Once: after the last reference nobody can close it again. */
	assert(!f->closing);
	gen = f->gen;
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = f->nf.handle;
	pthread_mutex_unlock(&f->lock);
	/* A handle of a link that is gone went with it: nothing to close. */
	(void)qc_send_noreply(fs->conn, gen, &m);
	/* Reusable now: the server sees this CLOSE before any later bind. */
	qc_handle_free(fs->conn, gen, m.handle);
	pthread_mutex_lock(&f->lock);
	f->hooks->handle_gone(f);
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

/* Whether f has a handle on the live link and has not failed. */
static bool qc_file_live(struct qc_fs *fs, struct qc_file *f)
{
	bool live;

	pthread_mutex_lock(&f->lock);
	live = !f->failed && f->gen == qc_conn_gen(fs->conn);
	pthread_mutex_unlock(&f->lock);
	return live;
}

/* Whether WRITEs sent through f on the live link are still unanswered. */
bool qc_file_writes_in_flight(struct qc_fs *fs, struct qc_file *f)
{
	bool busy;

	if (f->dir)
		return false;
	pthread_mutex_lock(&f->lock);
	busy = !f->failed && f->gen == qc_conn_gen(fs->conn) &&
	       f->issued != f->answered;
	pthread_mutex_unlock(&f->lock);
	return busy;
}

struct busy_scan {
	struct qc_fs *fs;
	bool busy;
};

static bool file_busy(struct qn_file *nf, void *ctx)
{
	struct busy_scan *b = ctx;

	b->busy = qc_file_writes_in_flight(b->fs, (struct qc_file *)nf);
	return b->busy;
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

struct qc_file *qc_file_borrow_behind(struct qc_fs *fs, struct qn_node *n)
{
	struct busy_scan b = { .fs = fs };
	struct qc_file *f;

	/*
	 * Any open file of n with WRITEs in flight, not only the one the
	 * node lists first: with a second descriptor open (a reader, or the
	 * same file opened again) a stat after write(2) went by path on
	 * meta and overtook the writer's WRITEs still on bulk, and showed
	 * the size from before them.  An FSTAT may go through any handle of
	 * n on the live link: on bulk it is behind all of them.
	 */
	qn_for_each_file(&fs->nodes, n, file_busy, &b);
	if (!b.busy)
		return NULL;
	f = (struct qc_file *)qn_file_borrow(&fs->nodes, n);
	if (f && (f->dir || !qc_file_live(fs, f))) {
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
 * So it is when the name is gone (ENOENT): someone else removed it and
 * the kernel's entry is stale (the notice of it may still be on its
 * way; or a lock was just granted, ops/locks.c) -- the retry then fails
 * with ENOENT, or creates the file for O_CREAT, instead of an open with
 * O_CREAT failing with ENOENT.
 */
int qc_file_open_error(struct qc_fs *fs, struct qn_node *n,
		       const char *path, int r)
{
	struct qc_reply rep;
	struct qft_msg m;

	if (r == -ENOENT)
		return -ESTALE;
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
static int reopen_by_path(struct qc_fs *fs, struct qc_file *f, uint64_t gen,
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

/* reopen_by_path as whoever opened f (on a mount that names its
 * callers), whichever thread needs the file again. */
static int file_reopen(struct qc_fs *fs, struct qc_file *f, uint64_t gen,
		       bool changed_it, uint64_t *handle)
{
	const struct qft_cred *was = qc_call_caller();
	int r;

	if (f->has_opener)
		qc_call_act_as(&f->opener);
	r = reopen_by_path(fs, f, gen, changed_it, handle);
	qc_call_act_as(was);
	return r;
}

/*
 * Whether something written through f may not have reached the server's
 * disk: data not covered by a FLUSH or FSYNC since, changes in flight or
 * a sticky error (WRITE bytes in flight are changes in flight too).
 * Lock held.
 */
static bool unsynced(struct qc_file *f)
{
	return f->mods != f->durable || f->err || f->issued != f->answered;
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
		 * link that could not help; so does one through which
		 * locks were taken: they are gone with the session
		 * (lock.h), and its holder must not go on unprotected. */
		if (qc_lock_file_held(&fs->locks, f)) {
			f->failed = -EIO;
			pthread_mutex_unlock(&f->lock);
			qft_err("%s: the locks taken through it were lost with "
				"the server's session; the open file fails "
				"with EIO", file_name(fs, f, name));
			pthread_mutex_lock(&f->lock);
			continue;
		}
		if (unsynced(f)) {
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
		if (unsynced(f))
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
		f->hooks->handle_gone(f);
		f->gen = live;
		f->nf.handle = h;
	}
	pthread_mutex_unlock(&f->lock);
	return qc_conn_user_err(r);
}

/*
 * The files of link `gen` that are not closing, each held (qc_file_hold)
 * so that none is freed while the caller uses it: an array the caller
 * frees after giving every hold back (qc_file_async_done).  NULL when
 * out of memory: every such file is then failed with EIO instead.
 */
struct qc_file **qc_file_hold_gen(struct qc_fs *fs, uint64_t gen, size_t *n)
{
	struct qc_file_reg *reg = &fs->files;
	struct qc_file **all, *f;

	*n = 0;
	pthread_mutex_lock(&reg->lock);
	all = calloc(reg->n ? reg->n : 1, sizeof(*all));
	for (f = reg->head; f; f = f->reg_next) {
		pthread_mutex_lock(&f->lock);
		if (f->gen == gen && !f->closing && all) {
			qc_file_hold(f);
			all[(*n)++] = f;
		} else if (f->gen == gen && !f->closing) {
			/* Nobody will bind it again: nothing may use it. */
			qc_file_fail(f, -EIO);
		}
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&reg->lock);
	return all;
}

bool qc_file_unsynced(struct qc_file *f)
{
	qc_file_assert_locked(f);
	return unsynced(f);
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

	f = qc_file_borrow_behind(fs, n);
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


int qc_file_error(struct qc_file *f, int r)
{
	pthread_mutex_lock(&f->lock);
	if (f->failed)
		r = f->failed;
	pthread_mutex_unlock(&f->lock);
	return r;
}

void qc_file_fail(struct qc_file *f, int err)
{
	qc_file_assert_locked(f);
	assert(err < 0);
	if (f->failed == 0)
		f->failed = err;
}

void qc_file_changed(struct qc_file *f, bool written)
{
	pthread_mutex_lock(&f->lock);
	if (written)
		f->written = true;
	f->mods++;
	pthread_mutex_unlock(&f->lock);
}

int qc_file_change_begin(struct qc_file *f, bool data)
{
	int r = f->err;

	qc_file_assert_locked(f);
	if (r == 0) {
		/* Flagged before sending, so a FLUSH that races with this
		 * write is never skipped. */
		if (data) {
			f->written = true;
			f->mods++;
		}
		f->issued++;
		f->async++;
	}
	return r;
}

void qc_file_change_done(struct qc_file *f, int err)
{
	qc_file_assert_locked(f);
	assert(f->answered < f->issued);
	f->answered++;
	if (err < 0 && f->err == 0)
		f->err = err;
}

int qc_file_take_err(struct qc_file *f)
{
	int r = f->err;

	qc_file_assert_locked(f);
	f->err = 0;
	return r;
}

void qc_file_clear_written(struct qc_file *f)
{
	qc_file_assert_locked(f);
	f->written = false;
}

void qc_file_note_durable(struct qc_file *f, uint64_t mods)
{
	qc_file_assert_locked(f);
	if (mods > f->durable)
		f->durable = mods;
}

void qc_file_mark(struct qc_file *f, bool flush, struct qc_file_mark *mk)
{
	pthread_mutex_lock(&f->lock);
	/*
	 * Only what no FLUSH or FSYNC covered yet: a close() after fsync()
	 * has nothing to commit, so it costs no round trip, and returns at
	 * once with the link down rather than after a deadline.
	 */
	mk->written = f->mods != f->durable;
	mk->err = f->err;
	mk->issued = f->issued;
	mk->mods = f->mods;
	mk->failed = f->failed;
	mk->pending = f->issued != f->answered;
	if (flush)
		f->written = false;
	pthread_mutex_unlock(&f->lock);
}

/*
 * FLUSH and FSYNC are sent at once, behind the WRITEs in flight, not after
 * draining them: the server executes them after those WRITEs, so their
 * success covers them, and a drain would cost a round trip per close().
 * Their reply is then matched up with the answers to every change issued
 * before them (today those arrived first, replies being in order; the wait
 * keeps that true if the server ever answers out of order), so a WRITE's
 * error is in `err` when the result is decided.
 */
int qc_file_collect(struct qc_file *f, uint64_t issued, bool clear)
{
	int werr;

	pthread_mutex_lock(&f->lock);
	while (f->answered < issued)
		pthread_cond_wait(&f->cond, &f->lock);
	werr = f->err;
	if (clear)
		f->err = 0;
	pthread_mutex_unlock(&f->lock);
	return werr;
}
