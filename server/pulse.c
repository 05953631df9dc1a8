// SPDX-License-Identifier: MIT
/* PROGRESS frames while a long request runs (see pulse.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "log.h"
#include "msg.h"
#include "protocol.h"
#include "pulse.h"
#include "thread.h"

#define NS_PER_MS 1000000LL
#define NS_PER_S  1000000000LL

struct srv_pulse {
	struct qft_chan *chan;  /* immutable */
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* lock (CLOCK_MONOTONIC): fn, done or stop
				 * changed */
	srv_pulse_fn *fn;       /* lock: the job for the worker, or NULL */
	void *arg;              /* lock */
	int res;                /* lock: fn's result, once done */
	bool done;              /* lock */
	bool stop;              /* lock */
	bool started;           /* connection thread only */
	bool failed;            /* connection thread only: did not start */
	pthread_t worker;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* One PROGRESS frame for `id`: 0, or the send's error. */
static int send_progress(struct srv_pulse *p, uint64_t id)
{
	uint8_t frame[QFT_HDR_SIZE];
	struct qbuf b = { .data = frame, .len = 0, .cap = sizeof(frame),
			  .limit = sizeof(frame) };
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_PROGRESS, id);
	m.flags = QFT_F_PROGRESS;
	r = qft_msg_encode(&b, &m);
	if (r == 0)
		r = qft_chan_send(p->chan, b.data, b.len);
	qft_debug("PROGRESS id %llu: %s", (unsigned long long)id,
		  r < 0 ? strerror(-r) : "sent");
	return r;
}

static void *worker_main(void *arg)
{
	struct srv_pulse *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		srv_pulse_fn *fn = p->fn;
		int r;

		if (!fn) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		r = fn(p->arg);
		pthread_mutex_lock(&p->lock);
		p->fn = NULL;
		p->res = r;
		p->done = true;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int srv_pulse_new(struct srv_pulse **pp, struct qft_chan *chan)
{
	struct srv_pulse *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;
	int r;

	if (!p)
		return -ENOMEM;
	p->chan = chan;
	if ((r = pthread_condattr_init(&ca)) != 0)
		goto out_free;
	r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (r == 0)
		r = pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (r != 0)
		goto out_free;
	if ((r = pthread_mutex_init(&p->lock, NULL)) != 0)
		goto out_destroy_cond;
	*pp = p;
	return 0;

out_destroy_cond:
	pthread_cond_destroy(&p->cond);
out_free:
	free(p);
	return -r;
}

void srv_pulse_free(struct srv_pulse *p)
{
	if (!p)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->worker, NULL);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

int srv_pulse_run(struct srv_pulse *p, uint64_t id, srv_pulse_fn *fn,
		  void *arg)
{
	int64_t next;
	bool sending = true;
	int r;

	if (!p || p->failed)
		return fn(arg);
	if (!p->started) {
		r = -qft_thread_start(&p->worker, worker_main, p);
		if (r) {
			p->failed = true;
			qft_warn("no PROGRESS frames on this connection: "
				 "cannot start a thread: %s", strerror(r));
			return fn(arg);
		}
		p->started = true;
	}
	pthread_mutex_lock(&p->lock);
	p->fn = fn;
	p->arg = arg;
	p->done = false;
	pthread_cond_broadcast(&p->cond);
	next = now_ns() + QFT_PROGRESS_INTERVAL_MS * NS_PER_MS;
	while (!p->done) {
		struct timespec ts = { .tv_sec = next / NS_PER_S,
				       .tv_nsec = next % NS_PER_S };

		if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) !=
		    ETIMEDOUT || p->done || now_ns() < next)
			continue;
		if (sending) {
			pthread_mutex_unlock(&p->lock);
			sending = send_progress(p, id) == 0;
			pthread_mutex_lock(&p->lock);
		}
		next = now_ns() + QFT_PROGRESS_INTERVAL_MS * NS_PER_MS;
	}
	r = p->res;
	pthread_mutex_unlock(&p->lock);
	return r;
}
