// SPDX-License-Identifier: MIT
/*
 * Replacing a lost link (conn.h, "Links"): one attempt through the
 * transport's open(), installing the new link under a new generation, and
 * the backoff between attempts.  Run by the watchdog thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "net/conn_internal.h"
#include "protocol.h"

#define BACKOFF_MAX_S   30
/* With -o resume=, a mount whose session was given up serves again soon
 * after the host answers. */
#define BACKOFF_RESUME_MAX_S 4

/*
 * One attempt at a new link: a fresh endpoint from the transport and the
 * handshake; not reading yet.  No lock held.
 */
static int link_make(struct qc_conn *c, struct link **out)
{
	char msg[QFT_MAX_ERRMSG + 128];
	struct qc_endpoint ep;
	struct link *l;
	int r;

	memset(&ep, 0, sizeof(ep));
	ep.fd = -1;
	ep.meta_fd = -1;
	r = c->o.ops->open(c->o.ops_ctx, &ep);
	if (r < 0)
		return r;
	r = qc_link_new(c, &ep, &l);
	if (r < 0) {
		qft_err("cannot set up the new connection: %s", strerror(-r));
		c->o.ops->close(c->o.ops_ctx, &ep, FAULT_REAP_MS, false);
		return r;
	}
	pthread_mutex_lock(&c->lock);
	c->attempt = c->closing ? NULL : l;
	r = c->closing ? -ECANCELED : 0;
	pthread_mutex_unlock(&c->lock);
	if (r == 0)
		r = qc_link_hello(l, c->o.timeout_s, msg, sizeof(msg));
	if (r == 0 && (r = qc_stripe_setup(c, l)) < 0)
		snprintf(msg, sizeof(msg), "cannot stripe the data connection "
			 "(%s)", strerror(-r));
	pthread_mutex_lock(&c->lock);
	c->attempt = NULL;
	if (c->closing && r < 0)
		r = -ECANCELED;
	pthread_mutex_unlock(&c->lock);
	if (r == -EPIPE)
		snprintf(msg, sizeof(msg), "the server closed the connection "
			 "during the handshake");
	if (r < 0) {
		if (r != -ECANCELED)
			qft_err("cannot reconnect to %s: %s",
				c->o.host ? c->o.host : "the server", msg);
		qc_link_shutdown(l);
		qc_link_free(c, l, FAULT_REAP_MS);
		return r;
	}
	*out = l;
	return 0;
}

/* Makes `l` the live link: new generation, fresh handle numbers.  Conn
 * lock held. */
static void link_install(struct qc_conn *c, struct link *l)
{
	qc_conn_assert_locked(c);
	l->gen = ++c->last_gen;
	qc_handle_reset(c, l->gen);
	qc_link_go_live(c, l);
}

/*
 * After a loss: new links with backoff until one works or the connection
 * is shut down.  A session whose server died (c->restarting) is carried
 * over to the new server when its host did not boot since (carry.c),
 * within the session's grace; past it, or when it cannot be, the session
 * is given up and the new link starts a new one.  Conn lock held
 * (dropped during attempts and waits).
 */
void qc_reconnect(struct qc_conn *c)
{
	int64_t delay = NS_PER_S, start = c->lost_at, until;
	int64_t max = (c->o.resume_s > 0 ? BACKOFF_RESUME_MAX_S :
		       BACKOFF_MAX_S) * NS_PER_S;
	const char *host = c->o.host ? c->o.host : "the server";
	unsigned attempt = 0;

	qc_conn_assert_locked(c);
	/* A new server is wanted at once; the backoff is for failures. */
	if (c->restarting)
		delay = NS_PER_S / 2;
	while (!c->closing) {
		struct link *l = NULL;
		int r;

		if (c->restarting && now_ns() >= c->resume_until) {
			char why[64];

			snprintf(why, sizeof(why), "no new server within "
				 "%d s (-o resume=)", c->o.resume_s);
			qc_resume_abandon(c, why);
			continue;
		}
		attempt++;
		qft_info("%s %s (attempt %u)", c->restarting ?
			 "starting a new server on" : "reconnecting to",
			 host, attempt);
		pthread_mutex_unlock(&c->lock);
		r = link_make(c, &l);
		pthread_mutex_lock(&c->lock);
		if (r == 0 && c->restarting && !c->closing) {
			/* 0: carried over (or resuming on the new server);
			 * 1: not carriable, the session was given up and l
			 * is ours to install; < 0: l failed, try again. */
			r = qc_carry_run(c, l);
			if (r == 0)
				return;
			if (r < 0) {
				l = NULL;
				if (r == -ECANCELED)
					return;
			} else {
				r = 0;
			}
		}
		/* Its reader starts under the lock, so that whatever it
		 * does first happens to the installed link. */
		if (r == 0 && !c->closing && (r = qc_reader_start(l)) < 0)
			qft_err("cannot start the reader thread: %s",
				strerror(-r));
		if (r == 0 && !c->closing) {
			link_install(c, l);
			qft_info("reconnected to %s after %.0f s", host,
				 (double)(now_ns() - start) / NS_PER_S);
			return;
		}
		if (l) {
			/* Unmounting meanwhile, or no thread: not wanted. */
			pthread_mutex_unlock(&c->lock);
			qc_link_free(c, l, FAULT_REAP_MS);
			pthread_mutex_lock(&c->lock);
			l = NULL;
		}
		if (c->closing)
			return;
		/* Woken early only by closing. */
		until = now_ns() + delay;
		while (!c->closing && !wait_until(&c->cond, &c->lock, until))
			;
		delay = delay * 2 > max ? max : delay * 2;
	}
}
