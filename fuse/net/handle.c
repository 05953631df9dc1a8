// SPDX-License-Identifier: MIT
/*
 * Handle numbers (handle.h, qc_handle_alloc): a bitmap per link, reset
 * when a new link is installed (reconnect.c).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

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

/*
 * Makes the numbers those of link `gen`, all free: for the first link
 * (conn.c) and each one a reconnect installs (reconnect.c).
 */
void qc_handle_reset(struct qc_conn *c, uint64_t gen)
{
	pthread_mutex_lock(&c->hlock);
	c->hgen = gen;
	memset(c->hmap, 0, sizeof(c->hmap));
	memset(c->hdir, 0, sizeof(c->hdir));
	c->hnext = 0;
	pthread_mutex_unlock(&c->hlock);
}

/*
 * Whether `handle` (1..QFT_MAX_HANDLES) of link `gen` was bound by an
 * OPENDIR, so lives on the meta lane (call.c, route).  `opendir`: this
 * request is that OPENDIR, which marks it until qc_handle_free.  False on
 * a link whose numbers are gone.
 */
bool qc_handle_is_dir(struct qc_conn *c, uint64_t gen, uint64_t handle,
		      bool opendir)
{
	uint64_t n = handle - 1, mask = (uint64_t)1 << (n % 64);
	bool dir = false;

	assert(handle >= 1 && handle <= QFT_MAX_HANDLES);
	pthread_mutex_lock(&c->hlock);
	if (gen == c->hgen) {
		if (opendir)
			c->hdir[n / 64] |= mask;
		dir = c->hdir[n / 64] & mask;
	}
	pthread_mutex_unlock(&c->hlock);
	return dir;
}
