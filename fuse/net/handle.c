// SPDX-License-Identifier: MIT
/*
 * Handle numbers (conn.h, qc_handle_alloc): a bitmap per link, reset
 * when a new link is installed (reconnect.c).
 */
#include <errno.h>
#include <pthread.h>

#include "log.h"
#include "net/conn_internal.h"

/* -------------------------------------------------------------------------
 * Handles
 */

int qc_handle_alloc(struct qc_conn *c, uint64_t gen, uint64_t *handle)
{
	pthread_mutex_lock(&c->hlock);
	if (gen != c->hgen) {
		pthread_mutex_unlock(&c->hlock);
		return -ENOTCONN;
	}
	for (uint32_t i = 0; i < HANDLE_WORDS; i++) {
		uint32_t w = (c->hnext + i) % HANDLE_WORDS;
		unsigned bit;

		if (c->hmap[w] == ~(uint64_t)0)
			continue;
		bit = (unsigned)__builtin_ctzll(~c->hmap[w]);
		c->hmap[w] |= (uint64_t)1 << bit;
		c->hnext = w;
		pthread_mutex_unlock(&c->hlock);
		*handle = (uint64_t)w * 64 + bit + 1;
		return 0;
	}
	pthread_mutex_unlock(&c->hlock);
	return -EMFILE;
}

void qc_handle_free(struct qc_conn *c, uint64_t gen, uint64_t handle)
{
	uint64_t n = handle - 1, mask;

	if (handle == 0 || handle > QFT_MAX_HANDLES) {
		qft_err("freeing invalid handle %llu",
			(unsigned long long)handle);
		return;
	}
	mask = (uint64_t)1 << (n % 64);
	pthread_mutex_lock(&c->hlock);
	if (gen != c->hgen) {
		pthread_mutex_unlock(&c->hlock);
		return;
	}
	if (!(c->hmap[n / 64] & mask))
		qft_err("handle %llu freed twice", (unsigned long long)handle);
	c->hmap[n / 64] &= ~mask;
	c->hdir[n / 64] &= ~mask;
	pthread_mutex_unlock(&c->hlock);
}
