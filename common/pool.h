/* SPDX-License-Identifier: MIT */
/*
 * A pool of equal-sized buffers for the data path, so that a large frame
 * (a READ reply of up to a MiB) costs no malloc, no free and no page
 * faults once the pool is warm.
 *
 * At most `max` buffers are out at a time: qft_pool_get waits while that
 * many are held (back-pressure: the receiver stops reading, the peer's
 * sends block on a full socket) instead of failing, and wakes when a
 * buffer comes back or its `stop` callback says the wait is pointless
 * (the connection is going).  Up to `keep` returned buffers are kept for
 * reuse; beyond that they are freed, so an idle pool holds at most
 * keep * size bytes.
 *
 * Lifetime: the pool is reference counted by its owner and by each buffer
 * out, so a buffer may be returned after the owner called
 * qft_pool_release (a reply kept past the end of its connection); the
 * last return frees it.  All functions are thread-safe.
 *
 * Error convention: 0 or a negative errno; qft_pool_get returns NULL.
 */
#ifndef QFT_POOL_H
#define QFT_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct qft_pool;

/* Checked while qft_pool_get waits: true ends the wait (NULL). */
typedef bool qft_pool_stop_fn(void *arg);

struct qft_pool_stats {
	uint64_t gets;     /* buffers handed out */
	uint64_t allocs;   /* ... of which newly allocated */
	uint64_t waits;    /* gets that had to wait for a buffer */
	unsigned out;      /* buffers held right now */
	unsigned idle;     /* buffers kept for reuse right now */
};

/* size > 0, 1 <= keep <= max.  -EINVAL, -ENOMEM. */
int qft_pool_new(struct qft_pool **out, size_t size, unsigned keep,
		 unsigned max);
/* The owner's reference: the pool goes once every buffer is back. */
void qft_pool_release(struct qft_pool *p);
size_t qft_pool_size(const struct qft_pool *p);
/*
 * A buffer of qft_pool_size bytes (contents undefined).  Waits while
 * `max` are out; stop(arg) (may be NULL: wait for as long as it takes)
 * is checked at least every `poll_ms` ms and on every return, and ends
 * the wait with NULL.  NULL also when no memory.
 */
uint8_t *qft_pool_get(struct qft_pool *p, qft_pool_stop_fn *stop, void *arg,
		      int poll_ms);
/* Returns a buffer from qft_pool_get of this pool; NULL is ignored. */
void qft_pool_put(struct qft_pool *p, uint8_t *buf);
void qft_pool_stats(struct qft_pool *p, struct qft_pool_stats *st);

#endif /* QFT_POOL_H */
