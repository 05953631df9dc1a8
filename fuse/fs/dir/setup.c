// SPDX-License-Identifier: MIT
/*
 * The directory cache set up and torn down: -o dircache=N, the cache,
 * its worker thread (see dircache.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/dircache.h"
#include "fs/dir/internal.h"
#include "fs/fs.h"
#include "log.h"

/* ---- setup ---- */

int qc_dir_parse_max(const char *s, size_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *end || *s == '-' || *s == '+' || errno ||
	    v > QC_DIRCACHE_MAX) {
		fprintf(stderr, "qftfs: invalid dircache '%s': expected a "
			"number of entries from 0 (off) to %u\n", s,
			QC_DIRCACHE_MAX);
		return -EINVAL;
	}
	*out = (size_t)v;
	return 0;
}

int qc_dir_init(struct qc_fs *fs, size_t max_entries)
{
	struct qc_dircache *dc;
	pthread_condattr_t ca;
	size_t nb = 256;

	fs->dirs = NULL;
	if (max_entries == 0)
		return 0;
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return -ENOMEM;
	while (nb < max_entries / 8 && nb < ((size_t)1 << 20))
		nb *= 2;
	dc->nbuckets = nb;
	dc->by_node = calloc(nb, sizeof(*dc->by_node));
	dc->by_ino = calloc(nb, sizeof(*dc->by_ino));
	if (!dc->by_node || !dc->by_ino) {
		free(dc->by_node);
		free(dc->by_ino);
		free(dc);
		return -ENOMEM;
	}
	dc->max_entries = max_entries;
	dc->lru.next = dc->lru.prev = &dc->lru;
	dc->work_tail = &dc->work_head;
	dc->held_tail = &dc->held_head;
	pthread_mutex_init(&dc->lock, NULL);
	/* The worker looks at the link now and then while invalidations
	 * are put off (notify.c): on a clock the wall clock cannot move. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&dc->work_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&dc->lease_cond, NULL);
	fs->dirs = dc;
	return 0;
}

int qc_dir_start(struct qc_fs *fs)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	int r;

	if (!dc)
		return 0;
	r = pthread_create(&dc->worker, NULL, qc_dir_worker_main, fs);
	if (r)
		return -r;
	dc->worker_running = true;
	return 0;
}

void qc_dir_stop(struct qc_fs *fs)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	if (!dc)
		return;
	pthread_mutex_lock(&dc->lock);
	dc->work_stop = true;
	pthread_cond_signal(&dc->work_cond);
	pthread_mutex_unlock(&dc->lock);
	if (dc->worker_running)
		pthread_join(dc->worker, NULL);
	dc->worker_running = false;
	qc_dir_work_clear(fs);
}

void qc_dir_destroy(struct qc_fs *fs)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	if (!dc)
		return;
	qc_dir_stop(fs);
	qft_debug("dircache: %llu lookups and %llu absent names answered "
		  "locally, %llu readdirs, %llu scans, %llu evictions, "
		  "%llu notifications",
		  (unsigned long long)atomic_load(&dc->lookups_local),
		  (unsigned long long)atomic_load(&dc->negatives_local),
		  (unsigned long long)atomic_load(&dc->readdirs_local),
		  (unsigned long long)atomic_load(&dc->scans),
		  (unsigned long long)atomic_load(&dc->evictions),
		  (unsigned long long)atomic_load(&dc->notices));
	pthread_mutex_lock(&dc->lock);
	while (dc->lru.next != &dc->lru)
		qc_dir_listing_drop(fs, dc->lru.next);
	pthread_mutex_unlock(&dc->lock);
	pthread_cond_destroy(&dc->work_cond);
	pthread_cond_destroy(&dc->lease_cond);
	pthread_mutex_destroy(&dc->lock);
	free(dc->by_node);
	free(dc->by_ino);
	free(dc);
	fs->dirs = NULL;
}
