// SPDX-License-Identifier: MIT
/*
 * The watchdog thread (deadlines on the live link, and tearing a dead one
 * down and reconnecting) and the pinger thread (conn.h, "Keepalive").
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"

/* How often the watchdog looks at deadlines while requests are out, and
 * at most how long it sleeps while none are. */
#define WATCH_TICK_MS   250
#define IDLE_TICK_MS    1000

/*
 * Why the live link `l` must be given up, or NULL.  Conn lock held.
 * Replies come in the order the server executes requests, so silence
 * while anything is outstanding, or one request unanswered for longer than
 * the deadline, means the link or the server is stuck.
 */
static const char *link_overdue(struct qc_conn *c, struct link *l,
				int64_t now, char *buf, size_t size)
{
	int64_t limit = deadline_ns(c), quiet, oldest = 0;
	uint16_t op = 0;

	qc_conn_assert_locked(c);
	if (!l->npending)
		return NULL;
	quiet = atomic_load(&l->last_rx);
	if (quiet < l->busy_since)
		quiet = l->busy_since;
	if (now - quiet >= limit) {
		snprintf(buf, size, "no reply from server for %d s",
			 c->o.timeout_s);
		return buf;
	}
	for (unsigned b = 0; b < PENDING_BUCKETS; b++)
		for (struct pending *p = c->pending[b]; p; p = p->next)
			if (p->sent_ns && (!oldest || p->sent_ns < oldest)) {
				oldest = p->sent_ns;
				op = p->op;
			}
	if (oldest && now - oldest >= limit) {
		snprintf(buf, size, "no reply to a %s request within %d s",
			 qft_op_name(op), c->o.timeout_s);
		return buf;
	}
	return NULL;
}

/*
 * The watchdog: deadlines and keepalives on the live link, and after a
 * loss, tearing the dead link down and making a new one.
 */
void *qc_watchdog_main(void *arg)
{
	struct qc_conn *c = arg;
	int64_t keep = (int64_t)c->o.keepalive_s * NS_PER_S;
	char why[128];

	pthread_mutex_lock(&c->lock);
	while (!c->closing) {
		struct link *l = c->cur;
		int64_t now = now_ns(), next;

		if (l && !l->dead) {
			const char *reason = link_overdue(c, l, now, why,
							  sizeof(why));
			int64_t rx = atomic_load(&l->last_rx);
			int64_t tx = atomic_load(&l->last_tx);

			if (reason) {
				l->users++;
				pthread_mutex_unlock(&c->lock);
				qc_link_fail(c, l, -ETIMEDOUT, reason);
				pthread_mutex_lock(&c->lock);
				l->users--;
				continue;
			}
			next = now + WATCH_TICK_MS * NS_PER_MS;
			if (!l->npending) {
				int64_t quiet = rx > tx ? rx : tx;

				if (keep && now - quiet >= keep) {
					c->ping_wanted = true;
					pthread_cond_signal(&c->ping_cond);
				}
				/* Idle: a request made meanwhile is looked
				 * at within a second. */
				next = now + IDLE_TICK_MS * NS_PER_MS;
				if (keep && quiet + keep > now &&
				    quiet + keep < next)
					next = quiet + keep;
			}
			wait_until(&c->cond, &c->lock, next);
			continue;
		}
		if (l) {
			/* Dead: nobody can reach it once cur moves on. */
			c->cur = NULL;
			if (c->resuming)
				qc_resume_retire(c, l);
			else
				qc_link_retire(c, l, FAULT_REAP_MS);
			continue;
		}
		if (c->resuming && !c->restarting) {
			qc_resume_run(c);
			continue;
		}
		/* Also the new server a restarting session is carried over
		 * to (carriable: reconnect is on). */
		if (c->o.reconnect && c->o.ops) {
			qc_reconnect(c);
			continue;
		}
		/* Lost for good: calls fail at once; wait for the end. */
		pthread_cond_wait(&c->cond, &c->lock);
	}
	c->watchdog_done = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void ping_done(void *ctx, int err, struct qc_reply *rep)
{
	/* An answer is all a PING asks for; a loss is reported by the
	 * link's failure. */
	(void)ctx;
	(void)err;
	(void)rep;
}

/*
 * Sends the PINGs the watchdog asks for.  A thread of its own: a send can
 * block on a full socket, and the watchdog must keep watching meanwhile
 * (it unblocks the send by shutting the link down).
 */
void *qc_watchdog_pinger_main(void *arg)
{
	struct qc_conn *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->closing) {
		struct qft_msg m;
		unsigned lanes;
		uint64_t gen;

		if (!c->ping_wanted) {
			pthread_cond_wait(&c->ping_cond, &c->lock);
			continue;
		}
		c->ping_wanted = false;
		if (!c->cur || c->cur->dead || c->cur->npending)
			continue;
		gen = c->cur->gen;
		lanes = c->cur->nlanes;
		pthread_mutex_unlock(&c->lock);
		/* Each lane can die on its own: each is probed. */
		for (unsigned i = 0; i < lanes; i++) {
			qft_msg_init(&m, QFT_OP_PING, 0);
			(void)qc_call_async_lane(c, gen, i, &m, ping_done, NULL,
						 false);
		}
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}
