// SPDX-License-Identifier: MIT
/* Locks held for the client (see lock.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>

#include "handle.h"
#include "lock.h"
#include "log.h"
#include "path.h"
#include "srv.h"

struct srv_lock_rec {
	struct srv_lock_rec *next;
	uint64_t owner, dev, ino;
	int fd;                 /* the owner's open file description */
	uint64_t *handles;      /* the handles it was used through */
	unsigned nh, cap;
};

__attribute__((format(printf, 3, 4)))
static void fail(struct qft_msg *rep, struct srv *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
	rep->errmsg.s = s->errmsg;
	rep->errmsg.len = (uint32_t)strlen(s->errmsg);
}

static struct srv_lock_rec *find(struct srv_locks *t, uint64_t owner,
				 const struct srv_handle *h)
{
	for (struct srv_lock_rec *r = t->head; r; r = r->next)
		if (r->owner == owner && r->dev == h->dev && r->ino == h->ino)
			return r;
	return NULL;
}

/* Unlinks and closes `rec`: every lock on its descriptor goes with it. */
static void rec_close(struct srv_locks *t, struct srv_lock_rec *rec)
{
	for (struct srv_lock_rec **p = &t->head; *p; p = &(*p)->next)
		if (*p == rec) {
			*p = rec->next;
			break;
		}
	t->n--;
	/* The descriptor is gone even when close() reports an error. */
	(void)close(rec->fd);
	free(rec->handles);
	free(rec);
}

/*
 * A descriptor of its own on the file handle `h` has open: read-write
 * where the caller may (a write lock needs it), else as the handle could
 * be opened.  The kernel of the client already checked that the file the
 * lock is taken through allows its type.
 */
static int open_own(const struct srv_handle *h)
{
	static const int modes[] = { O_RDWR, O_RDONLY, O_WRONLY };
	int fd = -EACCES;

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		fd = srv_path_reopen(h->fd, modes[i] | O_NONBLOCK);
		if (fd >= 0 || (fd != -EACCES && fd != -EROFS &&
				fd != -ETXTBSY && fd != -EPERM))
			break;
	}
	return fd;
}

static int rec_new(struct srv_locks *t, const struct srv_handle *h,
		   uint64_t owner, struct srv_lock_rec **out)
{
	struct srv_lock_rec *rec;
	int fd;

	if (t->n >= SRV_LOCK_MAX_RECS)
		return -ENOLCK;
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	fd = open_own(h);
	if (fd < 0) {
		free(rec);
		return fd;
	}
	rec->fd = fd;
	rec->owner = owner;
	rec->dev = h->dev;
	rec->ino = h->ino;
	rec->next = t->head;
	t->head = rec;
	t->n++;
	*out = rec;
	return 0;
}

static int rec_use(struct srv_lock_rec *rec, uint64_t handle)
{
	uint64_t *p;

	for (unsigned i = 0; i < rec->nh; i++)
		if (rec->handles[i] == handle)
			return 0;
	if (rec->nh == rec->cap) {
		unsigned cap = rec->cap ? rec->cap * 2 : 2;

		p = realloc(rec->handles, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		rec->handles = p;
		rec->cap = cap;
	}
	rec->handles[rec->nh++] = handle;
	return 0;
}

static void to_flock(const struct qft_lock *lk, struct flock *fl)
{
	memset(fl, 0, sizeof(*fl));
	fl->l_type = lk->type == QFT_LK_RDLCK ? F_RDLCK :
		     lk->type == QFT_LK_WRLCK ? F_WRLCK : F_UNLCK;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t)lk->start;
	/* The decoder checked start <= end <= INT64_MAX. */
	fl->l_len = lk->end == INT64_MAX ? 0 : (off_t)(lk->end - lk->start + 1);
}

static int apply(struct srv_lock_rec *rec, const struct qft_msg *req)
{
	const struct qft_lock *lk = &req->lk;
	struct flock fl;

	if (req->opflags & QFT_LOCK_FLOCK) {
		int op = lk->type == QFT_LK_RDLCK ? LOCK_SH :
			 lk->type == QFT_LK_WRLCK ? LOCK_EX : LOCK_UN;

		if (flock(rec->fd, op | LOCK_NB) < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return 0;
	}
	to_flock(lk, &fl);
	if (fcntl(rec->fd, F_OFD_SETLK, &fl) < 0)
		return errno == EACCES ? -EAGAIN : -errno;
	return 0;
}

int srv_lock_set(struct srv *s, const struct qft_msg *req,
		 struct qft_msg *rep)
{
	const struct qft_lock *lk = &req->lk;
	struct srv_lock_rec *rec;
	struct srv_handle *h;
	bool made = false;
	int r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h)) < 0)
		return r;
	if ((req->opflags & QFT_LOCK_CLOSE) && lk->type != QFT_LK_UNLCK) {
		fail(rep, s, "LOCK: closing an owner's locks takes no lock");
		return -EINVAL;
	}
	if ((req->opflags & QFT_LOCK_FLOCK) &&
	    (lk->start != 0 || lk->end != INT64_MAX)) {
		fail(rep, s, "LOCK: a flock lock covers the whole file");
		return -EINVAL;
	}
	rec = find(&s->locks, lk->owner, h);
	if (req->opflags & QFT_LOCK_CLOSE) {
		if (rec)
			rec_close(&s->locks, rec);
		return 0;
	}
	if (!rec) {
		/* Nothing held, nothing to drop. */
		if (lk->type == QFT_LK_UNLCK)
			return 0;
		r = rec_new(&s->locks, h, lk->owner, &rec);
		if (r == -ENOLCK) {
			fail(rep, s, "the server holds locks for %u lock owners "
			     "of this connection already, its most",
			     SRV_LOCK_MAX_RECS);
			return r;
		}
		if (r == -EOPNOTSUPP) {
			fail(rep, s, "the server cannot open the file again to "
			     "hold the lock (/proc is not procfs there)");
			return -ENOLCK;
		}
		if (r < 0)
			return r;
		made = true;
	}
	if ((r = rec_use(rec, req->handle)) < 0 || (r = apply(rec, req)) < 0) {
		/* A waiter asks again and again: a record that holds
		 * nothing does not stay for each attempt. */
		if (made)
			rec_close(&s->locks, rec);
		return r;
	}
	return 0;
}

int srv_lock_get(struct srv *s, const struct qft_msg *req,
		 struct qft_msg *rep)
{
	struct srv_lock_rec *rec;
	struct srv_handle *h;
	struct flock fl;
	int r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h)) < 0)
		return r;
	if (req->lk.type == QFT_LK_UNLCK) {
		fail(rep, s, "GETLK: a test needs a lock type");
		return -EINVAL;
	}
	/* Through the owner's own description its own locks do not
	 * conflict; without one, the handle's holds none of ours. */
	rec = find(&s->locks, req->lk.owner, h);
	to_flock(&req->lk, &fl);
	if (fcntl(rec ? rec->fd : h->fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	memset(&rep->lk, 0, sizeof(rep->lk));
	rep->lk.owner = req->lk.owner;
	if (fl.l_type == F_UNLCK) {
		rep->lk.type = QFT_LK_UNLCK;
		return 0;
	}
	rep->lk.type = fl.l_type == F_RDLCK ? QFT_LK_RDLCK : QFT_LK_WRLCK;
	if (fl.l_start < 0 || fl.l_len < 0)
		return -EIO;
	rep->lk.start = (uint64_t)fl.l_start;
	rep->lk.end = fl.l_len == 0 ||
		      (uint64_t)fl.l_len - 1 > INT64_MAX - rep->lk.start ?
		      INT64_MAX : rep->lk.start + (uint64_t)fl.l_len - 1;
	/* The holder's pid means nothing to the client: it may be another
	 * client's, or a process of this host (the client's kernel would
	 * read it as one of its own). */
	rep->lk.pid = 0;
	return 0;
}

void srv_lock_handle_closed(struct srv_locks *t, uint64_t h)
{
	struct srv_lock_rec *rec = t->head, *next;

	for (; rec; rec = next) {
		next = rec->next;
		for (unsigned i = 0; i < rec->nh; i++)
			if (rec->handles[i] == h) {
				rec->handles[i] = rec->handles[--rec->nh];
				break;
			}
		if (rec->nh == 0)
			rec_close(t, rec);
	}
}

void srv_lock_destroy(struct srv_locks *t)
{
	while (t->head)
		rec_close(t, t->head);
}
