// SPDX-License-Identifier: MIT
/*
 * What walk-ahead (fs/walk.h) may take from the cache: the files of a
 * leased listing, and whether contents fetched for one of them still
 * belong to the file its name holds now.
 */
#include <errno.h>
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
