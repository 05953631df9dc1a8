// SPDX-License-Identifier: MIT
/*
 * Walk-ahead: the walk of one directory made from its leased listing,
 * with the orders a walker may follow (walk_int.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/dircache.h"
#include "fs/fs.h"
#include "fs/node.h"
#include "fs/walk.h"
#include "fs/walk_int.h"

static const struct qc_dir_walk_ent *sort_base;

void qc_walk_free(struct qc_fs *fs, struct wdir *wd)
{
	qn_unref(&fs->nodes, wd->dir);
	qc_dir_walk_free(wd->ents, wd->n);
	for (unsigned o = 0; o < ORDERS; o++) {
		free(wd->perm[o]);
		free(wd->rank[o]);
	}
	free(wd->slots);
	free(wd);
}

/* The ents index of `name` in wd, or SIZE_MAX. */
size_t qc_walk_find_name(const struct wdir *wd, const char *name)
{
	size_t lo = 0, hi = wd->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(wd->ents[wd->perm[BY_NAME][mid]].name, name);

		if (c == 0)
			return wd->perm[BY_NAME][mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return SIZE_MAX;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(sort_base[*(const uint32_t *)a].name,
		      sort_base[*(const uint32_t *)b].name);
}

static int by_ino(const void *a, const void *b)
{
	uint64_t x = sort_base[*(const uint32_t *)a].attr.ino;
	uint64_t y = sort_base[*(const uint32_t *)b].attr.ino;

	return x < y ? -1 : x > y;
}

/* A walk of `dir` from its leased listing, or NULL. */
struct wdir *qc_walk_new(struct qc_fs *fs, struct qn_node *dir)
{
	static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;
	const struct qft_cred *cred = qc_call_caller();
	struct qc_dir_walk_ent *ents;
	struct wdir *wd;
	ssize_t n;

	n = qc_dir_walk_list(fs, dir, QC_WALK_LIST_MAX, &ents);
	if (n <= 0) {
		qc_dir_walk_free(ents, 0);
		return NULL;
	}
	wd = calloc(1, sizeof(*wd));
	if (!wd)
		goto out_free_ents;
	wd->slots = calloc((size_t)n, sizeof(*wd->slots));
	if (!wd->slots)
		goto out_free_wd;
	for (unsigned o = BY_NAME; o < ORDERS; o++) {
		wd->perm[o] = calloc((size_t)n, sizeof(uint32_t));
		wd->rank[o] = calloc((size_t)n, sizeof(uint32_t));
		if (!wd->perm[o] || !wd->rank[o])
			goto out_free_wd;
		for (size_t i = 0; i < (size_t)n; i++)
			wd->perm[o][i] = (uint32_t)i;
		/* qsort has no context argument everywhere; sorting is
		 * rare. */
		pthread_mutex_lock(&sort_lock);
		sort_base = ents;
		qsort(wd->perm[o], (size_t)n, sizeof(uint32_t),
		      o == BY_NAME ? by_name : by_ino);
		pthread_mutex_unlock(&sort_lock);
		for (size_t p = 0; p < (size_t)n; p++)
			wd->rank[o][wd->perm[o][p]] = (uint32_t)p;
	}
	wd->ents = ents;
	wd->n = (size_t)n;
	if (cred) {
		wd->has_cred = true;
		wd->cred = *cred;
	}
	qn_ref(&fs->nodes, dir);
	wd->dir = dir;
	qn_ref(&fs->nodes, dir);
	for (struct qn_node *cur = dir, *p;; cur = p) {
		char name[QFT_MAX_NAME + 1];
		int err = wd->nup == QC_WALK_UP ? -ERANGE :
			  qn_parent_ref(&fs->nodes, cur, &p, name);

		qn_unref(&fs->nodes, cur);
		if (err < 0)
			break;
		wd->up[wd->nup++] = p;
	}
	wd->refs = 1;
	wd->credit = QC_WALK_CREDIT;
	wd->probing = true;
	return wd;
out_free_wd:
	for (unsigned o = 0; o < ORDERS; o++) {
		free(wd->perm[o]);
		free(wd->rank[o]);
	}
	free(wd->slots);
	free(wd);
out_free_ents:
	qc_dir_walk_free(ents, (size_t)n);
	return NULL;
}
