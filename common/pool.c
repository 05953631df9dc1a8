// SPDX-License-Identifier: MIT
/* Reused data-path buffers with back-pressure (see pool.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "pool.h"

/* A free buffer's first bytes link it into the free list. */
struct idle {
	struct idle *next;
};

struct qft_pool {
	size_t size;             /* immutable */
	unsigned keep, max;      /* immutable */
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* lock: a buffer came back */
	struct idle *free;       /* lock: kept buffers */
	unsigned nfree;          /* lock */
	unsigned out;            /* lock: buffers held by callers */
	bool owned;              /* lock: the owner has not released it */
	struct qft_pool_stats st; /* lock */
};

int qft_pool_new(struct qft_pool **out, size_t size, unsigned keep,
		 unsigned max)
{
	struct qft_pool *p;

	*out = NULL;
	if (size < sizeof(struct idle) || keep == 0 || keep > max)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->size = size;
	p->keep = keep;
	p->max = max;
	p->owned = true;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	*out = p;
	return 0;
}

/* Frees the pool itself once nobody refers to it; lock held, dropped. */
static void unlock_maybe_free(struct qft_pool *p)
{
	bool gone = !p->owned && p->out == 0;

	pthread_mutex_unlock(&p->lock);
	if (!gone)
		return;
	while (p->free) {
		struct idle *i = p->free;

		p->free = i->next;
		free(i);
	}
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void qft_pool_release(struct qft_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->owned = false;
	/* Nobody reuses what is idle now. */
	while (p->free) {
		struct idle *i = p->free;

		p->free = i->next;
		free(i);
	}
	p->nfree = 0;
	pthread_cond_broadcast(&p->cond);
	unlock_maybe_free(p);
}

size_t qft_pool_size(const struct qft_pool *p)
{
	return p->size;
}

uint8_t *qft_pool_get(struct qft_pool *p, qft_pool_stop_fn *stop, void *arg,
		      int poll_ms)
{
	struct idle *i;
	bool waited = false;

	pthread_mutex_lock(&p->lock);
	while (p->out >= p->max) {
		struct timespec ts;
		bool end;

		/* Called unlocked: it may take its owner's locks, and those
		 * may be held by someone returning a buffer. */
		if (stop) {
			pthread_mutex_unlock(&p->lock);
			end = stop(arg);
			pthread_mutex_lock(&p->lock);
			if (end) {
				pthread_mutex_unlock(&p->lock);
				return NULL;
			}
			if (p->out < p->max)
				break;
		}
		waited = true;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += poll_ms / 1000;
		ts.tv_nsec += (long)(poll_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	p->out++;
	p->st.gets++;
	p->st.waits += waited;
	i = p->free;
	if (i) {
		p->free = i->next;
		p->nfree--;
		pthread_mutex_unlock(&p->lock);
		return (uint8_t *)i;
	}
	p->st.allocs++;
	pthread_mutex_unlock(&p->lock);
	i = malloc(p->size);
	if (!i) {
		pthread_mutex_lock(&p->lock);
		p->out--;
		pthread_cond_signal(&p->cond);
		unlock_maybe_free(p);
	}
	return (uint8_t *)i;
}

void qft_pool_put(struct qft_pool *p, uint8_t *buf)
{
	struct idle *i = (struct idle *)(void *)buf;

	if (!buf)
		return;
	pthread_mutex_lock(&p->lock);
	p->out--;
	if (p->owned && p->nfree < p->keep) {
		i->next = p->free;
		p->free = i;
		p->nfree++;
		i = NULL;
	}
	pthread_cond_signal(&p->cond);
	unlock_maybe_free(p);
	free(i);
}

void qft_pool_stats(struct qft_pool *p, struct qft_pool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->st;
	st->out = p->out;
	st->idle = p->nfree;
	pthread_mutex_unlock(&p->lock);
}
