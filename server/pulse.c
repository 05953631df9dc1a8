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
	pthread_cond_t cond;    /* lock (CLOCK_MONOTONIC): id, sending or
				 * stop changed */
	uint64_t id;            /* lock: the request running, 0 = none */
	int64_t next_ns;        /* lock: when its next frame is due */
	bool sending;           /* lock: the thread is sending a frame */
	bool stop;              /* lock */
	bool started;           /* connection thread only */
	bool failed;            /* connection thread only: did not start */
	pthread_t thread;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* Sends one PROGRESS frame for `id`; lock not held. */
static void send_progress(struct srv_pulse *p, uint64_t id)
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
	/* A broken connection is the connection thread's to report, with
	 * its next reply; the frames only stop. */
	qft_debug("PROGRESS id %llu: %s", (unsigned long long)id,
		  r < 0 ? strerror(-r) : "sent");
}

static void *pulse_main(void *arg)
{
	struct srv_pulse *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;
		uint64_t id = p->id;

		if (!id) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		if (now_ns() < p->next_ns) {
			ts.tv_sec = p->next_ns / NS_PER_S;
			ts.tv_nsec = p->next_ns % NS_PER_S;
			pthread_cond_timedwait(&p->cond, &p->lock, &ts);
			continue;
		}
		p->sending = true;
		pthread_mutex_unlock(&p->lock);
		send_progress(p, id);
		pthread_mutex_lock(&p->lock);
		p->sending = false;
		p->next_ns = now_ns() + QFT_PROGRESS_INTERVAL_MS * NS_PER_MS;
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
		pthread_join(p->thread, NULL);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

void srv_pulse_begin(struct srv_pulse *p, uint64_t id)
{
	int r;

	if (!p || p->failed)
		return;
	if (!p->started) {
		r = -qft_thread_start(&p->thread, pulse_main, p);
		if (r) {
			p->failed = true;
			qft_warn("no PROGRESS frames on this connection: "
				 "cannot start a thread: %s", strerror(r));
			return;
		}
		p->started = true;
	}
	pthread_mutex_lock(&p->lock);
	p->id = id;
	p->next_ns = now_ns() + QFT_PROGRESS_INTERVAL_MS * NS_PER_MS;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void srv_pulse_end(struct srv_pulse *p)
{
	if (!p || !p->started)
		return;
	pthread_mutex_lock(&p->lock);
	p->id = 0;
	/* A frame on its way could otherwise follow the reply. */
	while (p->sending)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
}
