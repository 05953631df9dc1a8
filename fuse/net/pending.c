// SPDX-License-Identifier: MIT
/*
 * The table of requests in flight, keyed by request id, and completing
 * an asynchronous one taken out of it (conn_internal.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn_internal.h"

/*
 * Completes an asynchronous call taken out of the table (or never put in
 * it): decodes the reply unless p->err says there is none, hands it to the
 * callback and frees what the callback did not take.  No lock held.
 */
void qc_pending_complete(struct pending *p)
{
	struct qc_reply rep;
	int r = p->err;

	assert(p->cb);
	memset(&rep, 0, sizeof(rep));
	rep.frame = p->frame;
	rep.pool = p->pool;
	if (r == 0) {
		r = qc_reply_check(p->op, &rep);
		if (r < 0) {
			qc_reply_free(&rep);
			memset(&rep, 0, sizeof(rep));
		}
	} else {
		qc_reply_free(&rep);
	}
	p->cb(p->cb_ctx, r, r == 0 ? &rep : NULL);
	qc_reply_free(&rep);
	if (p->oc) {
		pthread_mutex_lock(&p->oc->olock);
		if (--p->oc->ordered == 0)
			pthread_cond_broadcast(&p->oc->ocond);
		pthread_mutex_unlock(&p->oc->olock);
	}
	free(p);
}

/* Removes and returns the waiter for `id`; conn lock held. */
struct pending *qc_pending_take(struct qc_conn *c, uint64_t id)
{
	struct pending **pp = &c->pending[id % PENDING_BUCKETS];

	qc_conn_assert_locked(c);
	for (; *pp; pp = &(*pp)->next) {
		struct pending *p = *pp;

		if (p->id == id) {
			*pp = p->next;
			if (p->seq)
				qc_seq_unkeep(c, p);
			return p;
		}
	}
	return NULL;
}

struct pending *qc_pending_find(struct qc_conn *c, uint64_t id)
{
	qc_conn_assert_locked(c);
	for (struct pending *p = c->pending[id % PENDING_BUCKETS]; p;
	     p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

/* Puts p in the table for link l; conn lock held. */
void qc_pending_add(struct qc_conn *c, struct link *l, struct pending *p)
{
	qc_conn_assert_locked(c);
	p->next = c->pending[p->id % PENDING_BUCKETS];
	c->pending[p->id % PENDING_BUCKETS] = p;
	if (l->npending++ == 0)
		l->busy_since = now_ns();
}

/*
 * Empties the table (conn lock held): synchronous waiters are woken with
 * -EIO, asynchronous ones returned as a list (through `next`) for the
 * caller to complete with -ENOTCONN once it dropped the lock, since the
 * callbacks take their owners' locks.  A resumable session's copies and
 * numbering go with them (qc_seq_forget).
 */
struct pending *qc_pending_fail_all(struct qc_conn *c)
{
	struct pending *async = NULL;

	qc_conn_assert_locked(c);
	qc_seq_forget(c);
	for (unsigned b = 0; b < PENDING_BUCKETS; b++) {
		struct pending *p = c->pending[b];

		while (p) {
			struct pending *next = p->next;

			if (p->cb) {
				p->err = -ENOTCONN;
				p->next = async;
				async = p;
			} else {
				p->err = -EIO;
				p->done = true;
				pthread_cond_signal(&p->cond);
			}
			p = next;
		}
		c->pending[b] = NULL;
	}
	return async;
}
