// SPDX-License-Identifier: MIT
/*
 * What walk-ahead (fs/walk.h) may take from the cache: the files of a
 * leased listing, and whether contents fetched for one of them still
 * belong to the file its name holds now.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/dir/internal.h"
#include "fs/node.h"

/* The listing of `dir` if it is under a lease on the live link (listing
 * lock held). */
static struct listing *leased(struct qc_fs *fs, struct qn_node *dir,
			      uint64_t now)
{
	struct listing *l = qc_dir_valid_listing(fs, dir, now);

	return l && l->leased && !l->lease_asked ? l : NULL;
}

void qc_dir_walk_free(struct qc_dir_walk_ent *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++)
		free(e[i].name);
	free(e);
}

ssize_t qc_dir_walk_list(struct qc_fs *fs, struct qn_node *dir, size_t max,
			 struct qc_dir_walk_ent **out)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct qc_dir_walk_ent *e = NULL;
	uint64_t now = qc_now_ns();
	struct listing *l;
	ssize_t r = -EAGAIN;
	size_t n = 0;

	*out = NULL;
	if (!qc_dir_cache_on(fs))
		return -EAGAIN;
	pthread_mutex_lock(&dc->lock);
	l = leased(fs, dir, now);
	if (!l || l->live > max)
		goto out_unlock;
	e = calloc(l->live ? l->live : 1, sizeof(*e));
	if (!e) {
		r = -ENOMEM;
		goto out_unlock;
	}
	for (size_t i = 0; i < l->nslots; i++) {
		struct dent *d = l->slots[i];

		if (!d || (d->attr.mode & QFT_S_IFMT) != QFT_S_IFREG)
			continue;
		e[n].trusted = d->attr.ino && !qc_dir_is_stale(l, d->name) &&
			       qc_dir_attr_ok(fs, l, d, now);
		e[n].name = strdup(d->name);
		if (!e[n].name) {
			qc_dir_walk_free(e, n);
			e = NULL;
			r = -ENOMEM;
			goto out_unlock;
		}
		e[n].attr = d->attr;
		n++;
	}
	*out = e;
	r = (ssize_t)n;
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	return r;
}

uint64_t qc_dir_walk_seq(struct qc_fs *fs)
{
	struct qc_dir_fetch fb;

	qc_dir_fetch_begin(fs, &fb);
	return fb.seq;
}

bool qc_dir_walk_fresh(struct qc_fs *fs, struct qn_node *dir,
		       const char *name, const struct qft_attr *a,
		       const uint64_t *since)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	uint64_t now = qc_now_ns();
	struct listing *l;
	struct dent *e;
	bool ok = false;

	if (!qc_dir_cache_on(fs) || strlen(name) > QFT_MAX_NAME)
		return false;
	pthread_mutex_lock(&dc->lock);
	l = leased(fs, dir, now);
	if (!l || qc_dir_is_stale(l, name) ||
	    (since && qc_dir_spoiled(dc, *since, dir, l->dino, false)))
		goto out_unlock;
	e = qc_dir_dent_find(l, name, qc_dir_name_hash(name));
	ok = e && qc_dir_attr_ok(fs, l, e, now) && e->attr.ino == a->ino &&
	     e->attr.size == a->size &&
	     e->attr.mtime.sec == a->mtime.sec &&
	     e->attr.mtime.nsec == a->mtime.nsec &&
	     e->attr.ctime.sec == a->ctime.sec &&
	     e->attr.ctime.nsec == a->ctime.nsec;
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	return ok;
}

/* Levels qc_dir_walk_next climbs, and the biggest listing it reads. */
#define QC_DIR_WALK_UP      4u
#define QC_DIR_WALK_SUBDIRS 100000u

/* A subdirectory of a listing, for qc_dir_walk_next. */
struct sub {
	char name[QFT_MAX_NAME + 1];
	uint64_t ino;
	size_t slot;
};

static int sub_by_name(const void *a, const void *b)
{
	return strcmp(((const struct sub *)a)->name,
		      ((const struct sub *)b)->name);
}

static int sub_by_ino(const void *a, const void *b)
{
	uint64_t x = ((const struct sub *)a)->ino;
	uint64_t y = ((const struct sub *)b)->ino;

	return x < y ? -1 : x > y;
}

/* The subdirectories of dir's leased listing in `order`, at most `max`
 * (malloc'd in *out); their number, or 0. */
static size_t subdirs(struct qc_fs *fs, struct qn_node *dir, int order,
		      size_t max, struct sub **out)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct sub *s = NULL;
	struct listing *l;
	size_t n = 0;

	*out = NULL;
	pthread_mutex_lock(&dc->lock);
	l = leased(fs, dir, qc_now_ns());
	if (!l || l->live > max)
		goto out_unlock;
	s = calloc(l->live ? l->live : 1, sizeof(*s));
	if (!s)
		goto out_unlock;
	for (size_t i = 0; i < l->nslots; i++) {
		struct dent *d = l->slots[i];

		if (!d || (d->attr.mode & QFT_S_IFMT) != QFT_S_IFDIR ||
		    qc_dir_is_stale(l, d->name))
			continue;
		snprintf(s[n].name, sizeof(s[n].name), "%s", d->name);
		s[n].ino = d->attr.ino;
		s[n].slot = i;
		n++;
	}
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	if (order == QC_DIR_WALK_NAME)
		qsort(s, n, sizeof(*s), sub_by_name);
	else if (order == QC_DIR_WALK_INO)
		qsort(s, n, sizeof(*s), sub_by_ino);
	*out = s;
	return n;
}

/* Appends the nodes of s[from..n) whose listings are leased to out. */
static size_t take_leased(struct qc_fs *fs, struct qn_node *dir,
			  const struct sub *s, size_t from, size_t n,
			  struct qn_node **out, size_t k, size_t max)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	for (size_t i = from; i < n && k < max; i++) {
		struct qn_node *c = qn_find_ref(&fs->nodes, dir, s[i].name);
		bool ok;

		if (!c)
			continue;
		pthread_mutex_lock(&dc->lock);
		ok = leased(fs, c, qc_now_ns()) != NULL;
		pthread_mutex_unlock(&dc->lock);
		if (ok)
			out[k++] = c;
		else
			qn_unref(&fs->nodes, c);
	}
	return k;
}

size_t qc_dir_walk_next(struct qc_fs *fs, struct qn_node *dir, int order,
			struct qn_node **out, size_t max)
{
	char name[QFT_MAX_NAME + 1];
	struct qn_node *cur, *parent;
	struct sub *s;
	size_t n, k = 0, i;

	if (!qc_dir_cache_on(fs) || max == 0)
		return 0;
	n = subdirs(fs, dir, order, QC_DIR_WALK_SUBDIRS, &s);
	k = take_leased(fs, dir, s, 0, n, out, k, max);
	free(s);
	/* Then the directories after it, and after its parent's, and so
	 * on up: where a depth-first walker goes once it is done here. */
	qn_ref(&fs->nodes, dir);
	cur = dir;
	for (unsigned up = 0; up < QC_DIR_WALK_UP && k < max; up++) {
		if (qn_parent_ref(&fs->nodes, cur, &parent, name) < 0)
			break;
		n = subdirs(fs, parent, order, QC_DIR_WALK_SUBDIRS, &s);
		for (i = 0; i < n && strcmp(s[i].name, name) != 0; i++)
			;
		if (i < n)
			k = take_leased(fs, parent, s, i + 1, n, out, k, max);
		free(s);
		qn_unref(&fs->nodes, cur);
		cur = parent;
	}
	qn_unref(&fs->nodes, cur);
	return k;
}
