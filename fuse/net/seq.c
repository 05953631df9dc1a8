// SPDX-License-Identifier: MIT
/*
 * The numbering of a resumable session's lanes (conn_internal.h, struct
 * qc_rlane): each lane's list of requests kept until their replies came,
 * the bytes they hold, and the mark that the session is resuming.  State
 * only, calling nothing above it, so that the table (pending.c) and the
 * link (link.c) can keep it up to date while resume.c, which sends and
 * reconnects, builds on them.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "net/conn_internal.h"

int qc_seq_init(struct qc_conn *c)
{
	pthread_condattr_t ca;

	for (unsigned i = 0; i < LANES; i++) {
		pthread_mutex_init(&c->slock[i], NULL);
		c->rl[i].next = 1;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->rcond, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

void qc_seq_destroy(struct qc_conn *c)
{
	for (unsigned i = 0; i < LANES; i++)
		pthread_mutex_destroy(&c->slock[i]);
	pthread_cond_destroy(&c->rcond);
}

static void kept_free(struct qc_conn *c, struct pending *p)
{
	if (!p->kept)
		return;
	free(p->kept);
	p->kept = NULL;
	c->kept_n--;
	c->kept_bytes -= p->kept_len;
}

/* Takes p off its lane's list (it was answered, or it goes); conn lock
 * held. */
void qc_seq_unkeep(struct qc_conn *c, struct pending *p)
{
	struct qc_rlane *rl = &c->rl[p->lane];

	qc_conn_assert_locked(c);
	if (p->rprev)
		p->rprev->rnext = p->rnext;
	else if (rl->head == p)
		rl->head = p->rnext;
	if (p->rnext)
		p->rnext->rprev = p->rprev;
	else if (rl->tail == p)
		rl->tail = p->rprev;
	p->rprev = p->rnext = NULL;
	kept_free(c, p);
	if (c->rwaiters)
		pthread_cond_broadcast(&c->rcond);
}

/* The session's numbering starts over (it was given up, or is about to
 * fail every request): conn lock held. */
void qc_seq_forget(struct qc_conn *c)
{
	qc_conn_assert_locked(c);
	for (unsigned i = 0; i < LANES; i++) {
		struct qc_rlane *rl = &c->rl[i];

		while (rl->head)
			qc_seq_unkeep(c, rl->head);
		rl->next = 1;
	}
}

/*
 * The resumable link l dies (conn lock held, l not dead yet): 0 when its
 * session is not resumed (not resumable, or unmounting); otherwise marks
 * it dead, keeps every waiter and the generation, and returns 2 when
 * this starts the resume (the caller says so, once), 1 when one was
 * under way (the link was the resume's own attempt).
 */
int qc_seq_lost(struct qc_conn *c, struct link *l)
{
	int64_t now = now_ns();
	int r = 1;

	qc_conn_assert_locked(c);
	if (!l->resume || c->closing || c->o.resume_s <= 0)
		return 0;
	l->dead = true;
	if (!c->resuming) {
		c->resuming = true;
		c->resume_until = now + (int64_t)c->o.resume_s * NS_PER_S;
		c->lost = true;
		c->lost_at = now;
		r = 2;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_cond_broadcast(&c->rcond);
	return r;
}
