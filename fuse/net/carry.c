// SPDX-License-Identifier: MIT
/*
 * Carrying a session over to a new server (conn.h, "Carrying a session
 * over"; docs/protocol.md, "Carrying a session over to a new server").
 *
 * The session's server died, but when the new server's HELLO names the
 * same boot of the host, whatever the old one acknowledged is in the
 * host's page cache.  The session then keeps its generation, and so
 * every handle number the layer above holds: each is bound again on the
 * new server (the rebind hook, qc_carry_open), and the requests the old
 * server left unanswered are numbered again on the new server's lanes
 * and sent where running them twice changes nothing.  The rest fails
 * with -EIO: a namespace change or a create may or may not have been
 * made, and nobody can tell.
 *
 * Run by the watchdog (qc_reconnect) with the new link's HELLO done; it
 * holds every lane's send lock throughout, so nothing else reaches the
 * new server before the session is whole on it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"

/* How often a rebind's wait looks whether its link died. */
#define POLL_MS         100

/* What the carry knows of a handle number (qc_carry.hs). */
enum hstate {
	H_FREE = 0,     /* no unanswered request binds or closes it */
	H_KEPT,         /* an unanswered OPEN, OPENDIR, CREATE or CLOSE does:
			 * left to that request */
	H_BOUND,        /* bound on the new server */
	H_DROPPED,      /* not carried over: its requests fail */
};

/* The old server's unanswered requests of one lane, in id order. */
struct old_lane {
	struct pending *head, *tail;
	uint64_t next;
};

struct qc_carry {
	struct qc_conn *c;
	struct link *l;         /* the new server's; its readers run */
	uint64_t gen;
	uint8_t *hs;            /* enum hstate by handle number */
	struct old_lane old[LANES];
	bool lost;              /* l failed: the hook should stop */
	unsigned rebound, dropped;
};

static bool names_handle(uint16_t op)
{
	switch (op) {
	case QFT_OP_FSTAT: case QFT_OP_SETATTR: case QFT_OP_OPENDIR:
	case QFT_OP_READDIR: case QFT_OP_CREATE: case QFT_OP_OPEN:
	case QFT_OP_READ: case QFT_OP_WRITE: case QFT_OP_FLUSH:
	case QFT_OP_FSYNC: case QFT_OP_CLOSE: case QFT_OP_FALLOCATE:
	case QFT_OP_SCAN:
		return true;
	default:
		return false;
	}
}

/* The handle a kept request names (its first field; msg.c's table), or
 * 0 for none (SETATTR by path too). */
static uint64_t kept_handle(const struct pending *p)
{
	uint64_t h;

	if (!names_handle(p->op) || !p->kept ||
	    p->kept_len < QFT_HDR_SIZE + 8)
		return 0;
	h = qft_load64(p->kept + QFT_HDR_SIZE);
	return h <= QFT_MAX_HANDLES ? h : 0;
}

/*
 * What the old server's unanswered requests do to each handle, in the
 * order it would have run them: the rebind hook must leave alone a
 * handle that one of them binds (it is sent again) or closes.
 */
static void scan_history(struct qc_carry *cy)
{
	for (unsigned i = 0; i < LANES; i++)
		for (struct pending *p = cy->old[i].head; p; p = p->rnext) {
			uint64_t h = kept_handle(p);

			if (h && (p->op == QFT_OP_OPEN ||
				  p->op == QFT_OP_OPENDIR ||
				  p->op == QFT_OP_CREATE ||
				  p->op == QFT_OP_CLOSE))
				cy->hs[h] = H_KEPT;
		}
}

/*
 * Whether kept request p goes to the new server (true) or is completed
 * here (false, with *err: -EIO, or 0 for an answer with no fields that
 * the new server would give as well).  `bound` says, per handle, what
 * the new server has bound at this point of the replay (in id order),
 * and is updated.  Conn lock held.
 */
static bool replayable(struct qc_carry *cy, struct pending *p, int *err)
{
	uint64_t h = kept_handle(p);
	uint8_t *st = h ? &cy->hs[h] : NULL;
	struct qft_msg m;

	*err = -EIO;
	/* Only SETATTR may name no handle (by path); a frame of ours that
	 * lost its handle is not sent anywhere. */
	if (names_handle(p->op) && !h && p->op != QFT_OP_SETATTR)
		return false;
	switch (p->op) {
	case QFT_OP_OPEN:
	case QFT_OP_OPENDIR:
		/* Never creates: opening again binds the handle. */
		*st = H_BOUND;
		return true;
	case QFT_OP_CREATE:
		*st = H_DROPPED;
		return false;
	case QFT_OP_CLOSE:
		if (*st == H_BOUND) {
			*st = H_FREE;
			return true;
		}
		/* The new server never had it: closed already. */
		*err = 0;
		return false;
	case QFT_OP_READDIR:
		/* A cookie is the old server's; from the start it is not. */
		if (qft_msg_decode(&m, p->kept, p->kept_len) < 0 || m.offset)
			return false;
		return *st == H_BOUND;
	case QFT_OP_SCAN:
		/* A walk in progress lived in the old server's handle. */
		return false;
	case QFT_OP_SETATTR:
		/* Absolute values: the same result twice.  By handle only
		 * where it is bound. */
		return !st || *st == H_BOUND;
	case QFT_OP_FSTAT: case QFT_OP_READ: case QFT_OP_WRITE:
	case QFT_OP_FLUSH: case QFT_OP_FSYNC: case QFT_OP_FALLOCATE:
		/* A WRITE names its offset: again, the same bytes land in
		 * the same place (the layer above fails append handles). */
		return *st == H_BOUND;
	case QFT_OP_LSTAT: case QFT_OP_READLINK: case QFT_OP_STATFS:
	case QFT_OP_GETXATTR: case QFT_OP_LISTXATTR: case QFT_OP_SYNCFS:
		return true;
	case QFT_OP_SETXATTR:
		/* Setting a value again is harmless; "create only" and
		 * "replace only" may now fail where they did not. */
		return qft_msg_decode(&m, p->kept, p->kept_len) == 0 &&
		       m.opflags == 0;
	case QFT_OP_PING:
	case QFT_OP_UNWATCH:    /* the old server's watches died with it */
	case QFT_OP_BYE:
		*err = 0;
		return false;
	default:
		/* MKDIR, RMDIR, UNLINK, RENAME, SYMLINK, LINK, MKNOD,
		 * REMOVEXATTR: made or not, nobody can tell. */
		return false;
	}
}

/* Removes p from the table without touching its lane's list (carried
 * requests are renumbered, and their keys change).  Conn lock held. */
static void table_unlink(struct qc_conn *c, struct pending *p)
{
	struct pending **pp = &c->pending[p->id % PENDING_BUCKETS];

	for (; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			p->next = NULL;
			return;
		}
}

static void table_put(struct qc_conn *c, struct pending *p)
{
	p->next = c->pending[p->id % PENDING_BUCKETS];
	c->pending[p->id % PENDING_BUCKETS] = p;
}

/*
 * Takes the old server's unanswered requests out of the table and the
 * lanes' lists into cy->old, and starts the new server's numbering at 1.
 * Conn lock held.
 */
static void take_old(struct qc_conn *c, struct qc_carry *cy)
{
	for (unsigned i = 0; i < LANES; i++) {
		struct qc_rlane *rl = &c->rl[i];

		cy->old[i] = (struct old_lane){ rl->head, rl->tail, rl->next };
		for (struct pending *p = rl->head; p; p = p->rnext)
			table_unlink(c, p);
		rl->head = rl->tail = NULL;
		rl->next = 1;
	}
}

/* The carry failed before the replay: everything back as it was, for
 * the next attempt.  Conn lock held; the new server's lanes hold no
 * request (the rebinds were all answered or taken out). */
static void restore_old(struct qc_conn *c, struct qc_carry *cy)
{
	for (unsigned i = 0; i < LANES; i++) {
		struct qc_rlane *rl = &c->rl[i];

		assert(!rl->head);
		rl->head = cy->old[i].head;
		rl->tail = cy->old[i].tail;
		rl->next = cy->old[i].next;
		for (struct pending *p = rl->head; p; p = p->rnext)
			table_put(c, p);
	}
}

/*
 * Completes a kept request here, with `err` or (0) an empty successful
 * reply; conn lock held.  Synchronous waiters are woken now, callbacks
 * are queued on *async (through `next`) to run once the lock is gone.
 */
static void complete_here(struct pending *p, int err, struct pending **async)
{
	struct qft_msg rep;

	free(p->kept);
	p->kept = NULL;
	p->rprev = p->rnext = NULL;
	p->err = err;
	if (err == 0) {
		qft_msg_init(&rep, p->op, p->id);
		rep.flags = QFT_F_REPLY;
		if (qft_msg_encode(&p->frame, &rep) < 0)
			p->err = -EIO;
	}
	if (p->cb) {
		if (p->err == -EIO)
			p->err = -ENOTCONN;     /* "its link is gone" */
		p->next = *async;
		*async = p;
		return;
	}
	p->done = true;
	pthread_cond_signal(&p->cond);
}

/*
 * One request on the new link, before it is installed, and its reply:
 * numbered on the new server's session, kept like any other until
 * answered, and waited for within the deadline.  Conn lock not held.
 * 0, an error from the server, or -ENOTCONN when the link failed.
 */
static int carry_call(struct qc_carry *cy, unsigned lane, struct qft_msg *m,
		      struct qc_reply *rep)
{
	struct qc_conn *c = cy->c;
	struct link *l = cy->l;
	pthread_condattr_t ca;
	struct pending p;
	struct iovec iov;
	int64_t until;
	uint8_t *frame;
	size_t len;
	int r;

	memset(rep, 0, sizeof(*rep));
	if (lane >= l->nlanes)
		lane = LANE_BULK;
	if (m->op == QFT_OP_OPEN && !l->lane[lane].lazy)
		m->opflags &= ~QFT_O_LAZY;
	/* The caller named (the file's opener) goes where the link acts
	 * on callers, and nowhere else. */
	m->flags &= l->lane[lane].cred ? QFT_F_CRED : 0;
	m->id = 0;
	r = qc_resume_frame(m, &frame, &len);
	if (r < 0)
		return r;

	memset(&p, 0, sizeof(p));
	p.op = m->op;
	p.kept = frame;
	p.kept_len = len;
	qbuf_init(&p.frame, FRAME_LIMIT);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p.cond, &ca);
	pthread_condattr_destroy(&ca);

	pthread_mutex_lock(&c->lock);
	if (l->dead || c->closing) {
		pthread_mutex_unlock(&c->lock);
		free(frame);
		r = -ENOTCONN;
		goto out_destroy;
	}
	c->kept_n++;
	c->kept_bytes += len;
	qc_resume_number(c, l, lane, &p);
	pthread_mutex_unlock(&c->lock);

	/* The reply cannot free the copy before the server has it all. */
	iov = (struct iovec){ frame, len };
	r = qft_chan_sendv(&l->lane[lane].chan, &iov, 1);
	if (r < 0)
		qc_link_fail(c, l, r, NULL);

	pthread_mutex_lock(&c->lock);
	p.sent_ns = now_ns();
	until = now_ns() + deadline_ns(c);
	while (!p.done && !l->dead && !c->closing && now_ns() < until) {
		int64_t tick = now_ns() + POLL_MS * NS_PER_MS;

		wait_until(&p.cond, &c->lock, tick < until ? tick : until);
	}
	if (!p.done) {
		bool late = !l->dead && !c->closing;

		/* Still ours to take out (the reader takes it only from a
		 * live link's table, under this lock). */
		if (qc_pending_take(c, p.id))
			l->npending--;
		pthread_mutex_unlock(&c->lock);
		if (late)
			qc_link_fail(c, l, -ETIMEDOUT, "the new server did "
				     "not answer");
		qc_reply_frame_free(&p.frame, &p.pool);
		r = -ENOTCONN;
		goto out_destroy;
	}
	pthread_mutex_unlock(&c->lock);
	r = p.err;
	if (r < 0) {
		qc_reply_frame_free(&p.frame, &p.pool);
		r = r == -EIO ? -ENOTCONN : r;
		goto out_destroy;
	}
	rep->frame = p.frame;
	rep->pool = p.pool;
	r = qc_reply_check(m->op, rep);
	if (r < 0) {
		qc_reply_free(rep);
		memset(rep, 0, sizeof(*rep));
	}
out_destroy:
	pthread_cond_destroy(&p.cond);
	if (r == -ENOTCONN)
		cy->lost = true;
	return r;
}

int qc_carry_open(struct qc_carry *cy, struct qft_msg *m,
		  struct qc_reply *rep)
{
	uint64_t h = m->handle;
	bool dir = m->op == QFT_OP_OPENDIR;
	int r;

	assert(m->op == QFT_OP_OPEN || m->op == QFT_OP_OPENDIR);
	memset(rep, 0, sizeof(*rep));
	if (h == 0 || h > QFT_MAX_HANDLES)
		return -EINVAL;
	if (cy->lost)
		return -ENOTCONN;
	if (cy->hs[h] != H_FREE)
		return -EALREADY;
	r = carry_call(cy, dir ? LANE_META : LANE_BULK, m, rep);
	if (r == 0) {
		cy->hs[h] = H_BOUND;
		cy->rebound++;
	} else if (r != -ENOTCONN) {
		cy->hs[h] = H_DROPPED;
		cy->dropped++;
	}
	return r;
}

void qc_carry_drop(struct qc_carry *cy, uint64_t handle)
{
	struct qc_reply rep;
	struct qft_msg m;

	if (handle == 0 || handle > QFT_MAX_HANDLES)
		return;
	if (cy->hs[handle] == H_BOUND && !cy->lost) {
		qft_msg_init(&m, QFT_OP_CLOSE, 0);
		m.handle = handle;
		if (carry_call(cy, qc_handle_is_dir(cy->c, cy->gen, handle,
						    false) ?
			       LANE_META : LANE_BULK, &m, &rep) == 0)
			qc_reply_free(&rep);
		cy->rebound--;
	}
	cy->hs[handle] = H_DROPPED;
	cy->dropped++;
}

/*
 * Why the session cannot be carried over to the server of l, or NULL.
 * Conn lock held.
 */
static const char *not_carriable(struct qc_conn *c, struct link *l)
{
	if (!l->boot_id[0])
		return "the new server does not tell its host's boot";
	if (strcmp(l->boot_id, c->rs.boot_id) != 0)
		return "the server's host was restarted (its boot id "
		       "changed), so data the old server had not synced may "
		       "be lost";
	if (!l->resume)
		return "the new server cannot resume sessions";
	if (l->nlanes != c->rs.nlanes)
		return "the new server serves another number of streams";
	/* The kept requests name their callers, or do not: the new server
	 * must take them the same way (QFT_F_CRED). */
	for (unsigned i = 0; i < l->nlanes; i++)
		if ((l->lane[i].features ^ c->rs.features[i]) & QFT_FEAT_CRED)
			return "the new server does not act as the callers "
			       "the way the old one did";
	return NULL;
}

/*
 * Sends the replayed requests and makes l the session's live link.
 * Conn lock held on entry and exit, the send locks throughout; 0, or
 * -errno when l failed meanwhile (the session then resumes on the new
 * server, whose transport it now holds).
 */
static int install(struct qc_conn *c, struct link *l)
{
	int r = qc_resume_resend_all(c, l);

	c->attempt = NULL;
	/* From now on the session is the new server's. */
	c->rs.ep = l->ep;
	c->rs.ep.keys = (struct qft_session_keys){ { 0 }, { 0 } };
	c->rs.held = true;
	c->rs.nlanes = l->nlanes;
	for (unsigned i = 0; i < l->nlanes; i++)
		c->rs.features[i] = l->lane[i].features;
	memcpy(c->rs.boot_id, l->boot_id, sizeof(c->rs.boot_id));
	memcpy(c->rs.cc_down, l->cc_down, sizeof(c->rs.cc_down));
	c->restarting = false;
	if (r < 0)
		return r;
	c->restarts++;
	qc_resume_go_live(c, l);
	return 0;
}

/*
 * The replay: each old request in id order, lane by lane, numbered on
 * the new server's session or completed here.  Conn lock held.
 */
static void replay(struct qc_conn *c, struct qc_carry *cy,
		   struct pending **async, unsigned *sent, unsigned *failed)
{
	for (unsigned i = 0; i < LANES; i++) {
		struct pending *p = cy->old[i].head;

		while (p) {
			struct pending *next = p->rnext;
			int err;

			if (replayable(cy, p, &err)) {
				p->sent_ns = 0;
				qc_resume_number(c, cy->l, i < cy->l->nlanes ?
						 i : LANE_BULK, p);
				(*sent)++;
			} else {
				c->kept_n--;
				c->kept_bytes -= p->kept_len;
				complete_here(p, err, async);
				*failed += err != 0;
			}
			p = next;
		}
		cy->old[i] = (struct old_lane){ 0 };
	}
}

int qc_carry_run(struct qc_conn *c, struct link *l)
{
	struct qc_carry cy = { .c = c, .l = l };
	unsigned nlanes = l->nlanes, sent = 0, failed = 0;
	struct pending *async = NULL;
	const char *why;
	int64_t start = c->lost_at;
	int r;

	qc_conn_assert_locked(c);
	why = not_carriable(c, l);
	if (why) {
		qc_resume_abandon(c, why);
		return 1;
	}
	cy.gen = c->rs.gen;
	cy.hs = calloc(QFT_MAX_HANDLES + 1, 1);
	if (!cy.hs) {
		qc_resume_abandon(c, "out of memory");
		return 1;
	}
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < nlanes; i++)
		pthread_mutex_lock(&c->slock[i]);
	pthread_mutex_lock(&c->lock);
	/* Cut short, not waited for, by an unmount meanwhile. */
	c->attempt = l;
	l->gen = cy.gen;
	take_old(c, &cy);
	r = c->closing ? -ECANCELED : qc_reader_start(l);
	pthread_mutex_unlock(&c->lock);

	if (r == 0) {
		scan_history(&cy);
		c->o.rebind(c->o.rebind_ctx, cy.gen, &cy);
	}
	pthread_mutex_lock(&c->lock);
	if (r == 0 && (cy.lost || l->dead || c->closing))
		r = -EIO;
	if (r < 0) {
		c->attempt = NULL;
		restore_old(c, &cy);
		pthread_mutex_unlock(&c->lock);
		for (unsigned i = nlanes; i-- > 0;)
			pthread_mutex_unlock(&c->slock[i]);
		free(cy.hs);
		qc_link_fail(c, l, -EIO, NULL);
		qc_link_shutdown(l);
		qc_link_join(l);
		qc_link_free(c, l, FAULT_REAP_MS);
		pthread_mutex_lock(&c->lock);
		return r;
	}
	replay(c, &cy, &async, &sent, &failed);
	r = install(c, l);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = nlanes; i-- > 0;)
		pthread_mutex_unlock(&c->slock[i]);
	free(cy.hs);
	while (async) {
		struct pending *next = async->next;

		qc_pending_complete(async);
		async = next;
	}
	/* The old server's watches died with it: no lease holds. */
	if (c->o.notify)
		c->o.notify(c->o.notify_ctx, 0, QFT_NOTIFY_ALL, "", 0);
	if (r < 0) {
		/* The session is the new server's now: resume it there. */
		qc_link_fail(c, l, -EIO, NULL);
		qc_link_shutdown(l);
		qc_link_join(l);
		qc_link_free(c, l, -1);
		pthread_mutex_lock(&c->lock);
		return r == -ECANCELED ? r : 0;
	}
	qft_warn("session carried over to a new server after %.1f s: %u "
		 "open handle%s bound again, %u request%s sent again, %u "
		 "failed (their outcome on the old server is unknown)",
		 (double)(now_ns() - start) / NS_PER_S, cy.rebound,
		 cy.rebound == 1 ? "" : "s", sent, sent == 1 ? "" : "s",
		 failed);
	pthread_mutex_lock(&c->lock);
	return 0;
}
