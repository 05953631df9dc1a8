// SPDX-License-Identifier: MIT
/*
 * getlk, setlk, flock, and the close steps of locks (flush, release),
 * forwarded to the server (-o locks=server; docs/architecture.md,
 * "Locks").  The server never waits for a lock (server/lock.h): a blocking
 * wait (F_SETLKW, flock without LOCK_NB) asks again here, on this
 * callback's thread, with a growing pause, until the lock is granted, the
 * request is interrupted (a signal: EINTR, and nothing is left behind on
 * the server, which only ever grants within one LOCK) or the open file
 * fails.  fs/lock.h remembers which owners took locks through which open
 * files.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/lock.h"
#include "fs/node.h"
#include "fs/readahead.h"
#include "msg.h"
#include "net/conn.h"
#include "ops/internal.h"
#include "protocol.h"

/* The pause between attempts of a blocking wait: from the first to the
 * last, doubling.  The last bounds how late a wait sees a release. */
#define RETRY_FIRST_MS 2
#define RETRY_LAST_MS  100

/* The range of a libfuse lock (l_whence SEEK_SET, l_len 0: to the end). */
static int to_wire(const struct flock *fl, struct qft_lock *lk)
{
	if (fl->l_start < 0 || fl->l_len < 0 ||
	    (fl->l_len > 0 && fl->l_len - 1 > INT64_MAX - fl->l_start))
		return -EINVAL;
	lk->start = (uint64_t)fl->l_start;
	lk->end = fl->l_len == 0 ? INT64_MAX :
		  (uint64_t)fl->l_start + (uint64_t)fl->l_len - 1;
	lk->type = fl->l_type == F_RDLCK ? QFT_LK_RDLCK :
		   fl->l_type == F_WRLCK ? QFT_LK_WRLCK : QFT_LK_UNLCK;
	lk->pid = fl->l_pid > 0 ? (uint32_t)fl->l_pid : 0;
	return 0;
}

/* The server holds our locks on this link: else ENOLCK, never a request
 * a server that does not know it would close the connection on. */
static bool forwarded(struct qc_fs *fs)
{
	return qc_conn_locks(fs->conn);
}

/*
 * One LOCK of `lk` through f (no waiting).  A lock granted means data
 * others wrote under their locks may now be read: the kernel's pages and
 * attributes of the file and our read-ahead are dropped, as NFS does.
 */
static int lock_once(struct qc_fs *fs, fuse_ino_t ino, struct qc_file *f,
		     uint32_t opflags, const struct qft_lock *lk)
{
	unsigned kind = (opflags & QFT_LOCK_FLOCK) ? QC_LOCK_FLOCK :
			QC_LOCK_RECORD;
	bool all = (opflags & QFT_LOCK_FLOCK) ||
		   (lk->start == 0 && lk->end == INT64_MAX);
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen;
	int r;

	if (!forwarded(fs))
		return -ENOLCK;
	/* Noted before it is asked for: should the session be lost with
	 * the request in flight, f must fail (fs/lock.h). */
	if (lk->type != QFT_LK_UNLCK &&
	    qc_lock_note(&fs->locks, ino, lk->owner, f, kind, &gen) < 0)
		return -ENOLCK;
	if (lk->type == QFT_LK_UNLCK)
		gen = qc_lock_gen(&fs->locks);
	qft_msg_init(&m, QFT_OP_LOCK, 0);
	m.opflags = opflags;
	m.lk = *lk;
	r = qc_file_call(fs, f, &m, &rep);
	if (r < 0) {
		if (lk->type != QFT_LK_UNLCK)
			qc_lock_undo(&fs->locks, ino, lk->owner, f, kind, gen);
		return r;
	}
	qc_reply_free(&rep);
	if (lk->type == QFT_LK_UNLCK && all)
		qc_lock_forget(&fs->locks, ino, lk->owner, kind, gen);
	if (lk->type != QFT_LK_UNLCK) {
		struct qn_node *n = qc_fs_node(fs, ino), *parent;
		char name[QFT_MAX_NAME + 1];

		qn_attr_stale(&fs->nodes, n);
		qc_ra_invalidate(fs, n);
		(void)fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
		/*
		 * The names beside it too: a lock often guards files around
		 * it (sqlite's journal), which the holder before us may have
		 * made or removed, and the notice of that may still be on its
		 * way.  The listing goes; a kernel entry that is stale meets
		 * ESTALE at its open (handle.c, qc_file_open_error).
		 */
		if (qn_parent_ref(&fs->nodes, n, &parent, name) == 0) {
			qc_dir_drop(fs, parent);
			qn_unref(&fs->nodes, parent);
		}
	}
	return 0;
}

/* A blocking wait's interruption (libfuse calls it on its own thread). */
struct wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool interrupted;       /* lock */
};

static void interrupted(fuse_req_t req, void *data)
{
	struct wait *w = data;

	(void)req;
	pthread_mutex_lock(&w->lock);
	w->interrupted = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Sleeps `ms` unless interrupted: whether it was. */
static bool pause_ms(struct wait *w, unsigned ms)
{
	struct timespec until;
	bool intr;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->lock);
	while (!w->interrupted &&
	       pthread_cond_timedwait(&w->cond, &w->lock, &until) == 0)
		;
	intr = w->interrupted;
	pthread_mutex_unlock(&w->lock);
	return intr;
}

/* LOCK, waiting for it when `sleep`: 0, -EAGAIN (not waiting), -EINTR. */
static int lock_wait(fuse_req_t req, struct qc_fs *fs, fuse_ino_t ino,
		     struct qc_file *f, uint32_t opflags,
		     const struct qft_lock *lk, bool sleep)
{
	struct wait w = { .interrupted = false };
	pthread_condattr_t ca;
	unsigned ms = RETRY_FIRST_MS;
	int r;

	r = lock_once(fs, ino, f, opflags, lk);
	if (r != -EAGAIN || !sleep)
		return r;
	if (!qc_lock_wait_begin(&fs->locks))
		return -ENOLCK;
	pthread_mutex_init(&w.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w.cond, &ca);
	pthread_condattr_destroy(&ca);
	fuse_req_interrupt_func(req, interrupted, &w);
	for (;;) {
		if (pause_ms(&w, ms)) {
			r = -EINTR;
			break;
		}
		/* Granted is granted, even if a signal came meanwhile: the
		 * caller has the lock, as with a local wait. */
		r = lock_once(fs, ino, f, opflags, lk);
		if (r != -EAGAIN)
			break;
		if (ms < RETRY_LAST_MS)
			ms = ms * 2 < RETRY_LAST_MS ? ms * 2 : RETRY_LAST_MS;
	}
	/* After this no callback runs (libfuse takes the request's lock). */
	fuse_req_interrupt_func(req, NULL, NULL);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	qc_lock_wait_end(&fs->locks);
	return r;
}

void qc_locks_getlk(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct flock *lock)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_GETLK, 0);
	if ((r = to_wire(lock, &m.lk)) < 0)
		goto out_err;
	if (m.lk.type == QFT_LK_UNLCK) {
		r = -EINVAL;
		goto out_err;
	}
	if (!forwarded(fs)) {
		r = -ENOLCK;
		goto out_err;
	}
	m.lk.owner = fi->lock_owner;
	r = qc_file_call(fs, file_of(fi), &m, &rep);
	if (r < 0)
		goto out_err;
	if (rep.msg.lk.type == QFT_LK_UNLCK) {
		lock->l_type = F_UNLCK;
	} else {
		lock->l_type = rep.msg.lk.type == QFT_LK_RDLCK ? F_RDLCK :
			       F_WRLCK;
		lock->l_whence = SEEK_SET;
		lock->l_start = (off_t)rep.msg.lk.start;
		lock->l_len = rep.msg.lk.end == INT64_MAX ? 0 :
			      (off_t)(rep.msg.lk.end - rep.msg.lk.start + 1);
		/* The holder may be on another host: no local pid. */
		lock->l_pid = 0;
	}
	qc_reply_free(&rep);
	fuse_reply_lock(req, lock);
	return;
out_err:
	fuse_reply_err(req, -r);
}

void qc_locks_setlk(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct flock *lock, int sleep)
{
	struct qft_lock lk;
	int r;

	if ((r = to_wire(lock, &lk)) == 0) {
		lk.owner = fi->lock_owner;
		r = lock_wait(req, fs_of(req), ino, file_of(fi), 0, &lk,
			      sleep && lk.type != QFT_LK_UNLCK);
	}
	fuse_reply_err(req, -r);
}

void qc_locks_flock(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, int op)
{
	struct qft_lock lk = { .owner = fi->lock_owner, .end = INT64_MAX };
	int r;

	switch (op & ~LOCK_NB) {
	case LOCK_SH: lk.type = QFT_LK_RDLCK; break;
	case LOCK_EX: lk.type = QFT_LK_WRLCK; break;
	case LOCK_UN: lk.type = QFT_LK_UNLCK; break;
	default:
		fuse_reply_err(req, EINVAL);
		return;
	}
	r = lock_wait(req, fs_of(req), ino, file_of(fi), QFT_LOCK_FLOCK, &lk,
		      !(op & LOCK_NB) && lk.type != QFT_LK_UNLCK);
	fuse_reply_err(req, -r);
}

/* Drops every lock of `owner` on the file of f (QFT_LOCK_CLOSE), when it
 * took any.  A failure leaves nothing to do: the server drops them when
 * the handle closes or the session ends. */
static void close_owner(struct qc_fs *fs, fuse_ino_t ino, struct qc_file *f,
			uint64_t owner)
{
	struct qc_reply rep;
	struct qft_msg m;

	if (!qc_lock_take_owner(&fs->locks, ino, owner) || !forwarded(fs))
		return;
	qft_msg_init(&m, QFT_OP_LOCK, 0);
	m.opflags = QFT_LOCK_CLOSE;
	m.lk.owner = owner;
	m.lk.end = INT64_MAX;
	if (qc_file_call(fs, f, &m, &rep) == 0)
		qc_reply_free(&rep);
}

void qc_locks_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	int r;

	/* The data first: whoever takes the lock next reads it. */
	r = qc_file_flush(fs, file_of(fi));
	/* Any close by a POSIX owner drops its locks on the file. */
	close_owner(fs, ino, file_of(fi), fi->lock_owner);
	fuse_reply_err(req, -r);
}

void qc_locks_release(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);

	/* The open file's flock and OFD locks end with it, now rather
	 * than whenever its CLOSE goes out (commit=async). */
	if (fi->flock_release)
		close_owner(fs, ino, f, fi->lock_owner);
	qc_lock_file_gone(&fs->locks, f);
	qc_file_release(fs, f);
	fuse_reply_err(req, 0);
}
