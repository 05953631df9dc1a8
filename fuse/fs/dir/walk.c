// SPDX-License-Identifier: MIT
/*
 * What walk-ahead (fs/walk.h) may take from the cache: the files of a
 * leased listing, and whether contents fetched for one of them still
 * belong to the file its name holds now.
 */
#include <errno.h>
#include <pthread.h>
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
};

/*
 * Names in the order of the walkers that sort them (rsync, git): a
 * directory's as if it ended in '/', so that of "14" and "14.0.6", both
 * directories, "14.0.6" comes first.  Negative, zero or positive as
 * strcmp.
 */
static int name_cmp(const char *a, bool a_dir, const char *b, bool b_dir)
{
	unsigned char ca, cb;
	size_t i = 0;

	while (a[i] && a[i] == b[i])
		i++;
	ca = a[i] ? (unsigned char)a[i] : a_dir ? '/' : 0;
	cb = b[i] ? (unsigned char)b[i] : b_dir ? '/' : 0;
	/* Equal here only where both ended, alike: a name holds no '/'. */
	return ca - cb;
}

static bool is_dir(const struct dent *d)
{
	return (d->attr.mode & QFT_S_IFMT) == QFT_S_IFDIR;
}

/* Where names x and y of one listing come in `order`: negative, zero or
 * positive as strcmp. */
static int dent_cmp(const struct dent *x, const struct dent *y, int order)
{
	if (order == QC_DIR_WALK_NAME)
		return name_cmp(x->name, is_dir(x), y->name, is_dir(y));
	if (order == QC_DIR_WALK_INO)
		return x->attr.ino < y->attr.ino ? -1 : x->attr.ino > y->attr.ino;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* The listing and order the sort below compares in (qsort has no
 * context argument everywhere): set and used under the listing lock. */
static const struct listing *sort_listing;
static int sort_order;

static int by_order(const void *a, const void *b)
{
	const struct dent *x = sort_listing->slots[*(const uint32_t *)a];
	const struct dent *y = sort_listing->slots[*(const uint32_t *)b];

	return dent_cmp(x, y, sort_order);
}

/*
 * Listing lock held: the slots of l's subdirectories in `order`, sorted
 * again only once the listing changed (l->subs): a walk through a
 * directory of thousands of subdirectories asks for its order at each
 * of them.  Their number in *n; NULL without memory.
 */
static const uint32_t *sorted_subs(struct listing *l, int order, size_t *n)
{
	uint32_t *slot;
	size_t k = 0;

	if (l->subs.slot && l->subs.order == order &&
	    l->subs.at == l->changes) {
		*n = l->subs.n;
		return l->subs.slot;
	}
	free(l->subs.slot);
	l->subs.slot = NULL;
	slot = malloc((l->live ? l->live : 1) * sizeof(*slot));
	if (!slot)
		return NULL;
	for (size_t i = 0; i < l->nslots; i++)
		if (l->slots[i] && is_dir(l->slots[i]))
			slot[k++] = (uint32_t)i;
	if (k > 1 && order != QC_DIR_WALK_LISTING) {
		sort_listing = l;
		sort_order = order;
		qsort(slot, k, sizeof(*slot), by_order);
	}
	l->subs.slot = slot;
	l->subs.n = k;
	l->subs.order = order;
	l->subs.at = l->changes;
	*n = k;
	return slot;
}

/* Listing lock held: the place in sorted[] (n subdirectories of l in
 * `order`) of the first that comes after name `at`. */
static size_t after_place(const struct listing *l, const uint32_t *sorted,
			  size_t n, const struct dent *at, int order)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (dent_cmp(l->slots[sorted[mid]], at, order) > 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* At most `limit` subdirectories of dir's leased listing in `order`
 * (malloc'd in *out), only those after `after` in it when that is not
 * NULL (the file the walker is at); their number, or 0. */
static size_t subdirs(struct qc_fs *fs, struct qn_node *dir, int order,
		      const char *after, size_t limit, struct sub **out)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	const struct dent *at = NULL;
	const uint32_t *sorted;
	struct sub *s = NULL;
	struct listing *l;
	size_t n = 0, k = 0, from = 0;

	*out = NULL;
	if (limit == 0)
		return 0;
	pthread_mutex_lock(&dc->lock);
	l = leased(fs, dir, qc_now_ns());
	if (!l || l->live > QC_DIR_WALK_SUBDIRS ||
	    !(sorted = sorted_subs(l, order, &n)) || n == 0)
		goto out_unlock;
	/* The walker goes into the directories after the file it is at,
	 * having been in those before it (cp -r takes the files and the
	 * directories of a directory in one order). */
	if (after && (at = qc_dir_dent_find(l, after, qc_dir_name_hash(after))))
		from = after_place(l, sorted, n, at, order);
	s = calloc(limit < n - from ? limit : n - from + 1, sizeof(*s));
	if (!s)
		goto out_unlock;
	for (size_t i = from; i < n && k < limit; i++) {
		const struct dent *d = l->slots[sorted[i]];

		if (qc_dir_is_stale(l, d->name))
			continue;
		snprintf(s[k].name, sizeof(s[k].name), "%s", d->name);
		k++;
	}
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	*out = s;
	return k;
}

/*
 * Appends to out[] (from k, up to max) the directories a depth-first
 * walker visits below `dir` once it is past `after` there (NULL: all of
 * them): each leased subdirectory in `order`, followed by its own.  The
 * new k.
 */
static size_t take_below(struct qc_fs *fs, struct qn_node *dir, int order,
			 const char *after, struct qn_node **out, size_t k,
			 size_t max)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct sub *s;
	size_t n;

	if (k >= max)
		return k;
	/* A few more than there is room for: some may not be leased. */
	n = subdirs(fs, dir, order, after, 2 * (max - k) + 8, &s);
	for (size_t i = 0; i < n && k < max; i++) {
		struct qn_node *c = qn_find_ref(&fs->nodes, dir, s[i].name);
		bool ok;

		if (!c)
			continue;
		pthread_mutex_lock(&dc->lock);
		ok = leased(fs, c, qc_now_ns()) != NULL;
		pthread_mutex_unlock(&dc->lock);
		if (!ok) {
			/* Its own subdirectories are not known either. */
			qn_unref(&fs->nodes, c);
			continue;
		}
		out[k++] = c;
		/* Bounded: every level down adds one to out[]. */
		k = take_below(fs, c, order, NULL, out, k, max);
	}
	free(s);
	return k;
}

size_t qc_dir_walk_next(struct qc_fs *fs, struct qn_node *dir, int order,
			const char *after, struct qn_node **out, size_t max)
{
	char name[QFT_MAX_NAME + 1];
	struct qn_node *cur, *parent;
	size_t k;

	if (!qc_dir_cache_on(fs) || max == 0)
		return 0;
	k = take_below(fs, dir, order, after, out, 0, max);
	/* Then the directories after it, and after its parent's, and so
	 * on up: where a depth-first walker goes once it is done here. */
	qn_ref(&fs->nodes, dir);
	cur = dir;
	for (unsigned up = 0; up < QC_DIR_WALK_UP && k < max; up++) {
		if (qn_parent_ref(&fs->nodes, cur, &parent, name) < 0)
			break;
		k = take_below(fs, parent, order, name, out, k, max);
		qn_unref(&fs->nodes, cur);
		cur = parent;
	}
	qn_unref(&fs->nodes, cur);
	return k;
}

/* Directories qc_dir_walk_passed follows up to the root, at most. */
#define QC_DIR_WALK_DEPTH 64u

/* `n` and its ancestors up to the root, each with a reference, into
 * out[]; their number, or 0 when deeper than `max` or cut off. */
static size_t chain(struct qc_fs *fs, struct qn_node *n,
		    struct qn_node **out, size_t max)
{
	char name[QFT_MAX_NAME + 1];
	size_t k = 0;

	qn_ref(&fs->nodes, n);
	out[k++] = n;
	while (out[k - 1] != &fs->nodes.root) {
		if (k == max ||
		    qn_parent_ref(&fs->nodes, out[k - 1], &out[k], name) < 0) {
			while (k > 0)
				qn_unref(&fs->nodes, out[--k]);
			return 0;
		}
		k++;
	}
	return k;
}

/* Where `name` comes in listing `l` in `order` (listing lock held):
 * false when it is not there. */
static bool rank_of(const struct listing *l, const char *name, int order,
		    uint64_t *rank)
{
	struct dent *e = qc_dir_dent_find(l, name, qc_dir_name_hash(name));

	if (!e)
		return false;
	*rank = order == QC_DIR_WALK_INO ? e->attr.ino : e->slot;
	return true;
}

bool qc_dir_walk_passed(struct qc_fs *fs, struct qn_node *a,
			struct qn_node *cur, int order)
{
	struct qn_node *ca[QC_DIR_WALK_DEPTH], *cc[QC_DIR_WALK_DEPTH];
	char na[QFT_MAX_NAME + 1], nc[QFT_MAX_NAME + 1];
	size_t la, lc, i, j;
	struct qn_node *p;
	bool passed = false;

	if (!qc_dir_cache_on(fs))
		return false;
	la = chain(fs, a, ca, QC_DIR_WALK_DEPTH);
	if (!la)
		return false;
	lc = chain(fs, cur, cc, QC_DIR_WALK_DEPTH);
	if (!lc)
		goto out_unref_a;
	/* Down from the root while both paths agree. */
	i = la - 1;
	j = lc - 1;
	while (i > 0 && j > 0 && ca[i - 1] == cc[j - 1]) {
		i--;
		j--;
	}
	/* One is the other's ancestor: a walker in `cur` comes back to
	 * `a`'s files, or goes down to them. */
	if (i == 0 || j == 0)
		goto out_unref;
	/* Their branches under the common ancestor ca[i]: which the
	 * walker takes first. */
	if (qn_parent_ref(&fs->nodes, ca[i - 1], &p, na) < 0)
		goto out_unref;
	qn_unref(&fs->nodes, p);
	if (qn_parent_ref(&fs->nodes, cc[j - 1], &p, nc) < 0)
		goto out_unref;
	qn_unref(&fs->nodes, p);
	passed = qc_dir_walk_cmp(fs, ca[i], na, nc, order) == 1;
out_unref:
	while (lc > 0)
		qn_unref(&fs->nodes, cc[--lc]);
out_unref_a:
	while (la > 0)
		qn_unref(&fs->nodes, ca[--la]);
	return passed;
}

int qc_dir_walk_cmp(struct qc_fs *fs, struct qn_node *dir, const char *a,
		    const char *b, int order)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	const struct dent *da, *db;
	struct listing *l;
	uint64_t ra, rb;
	int r = -ENOENT;

	if (!qc_dir_cache_on(fs))
		return -EAGAIN;
	pthread_mutex_lock(&dc->lock);
	l = leased(fs, dir, qc_now_ns());
	if (!l) {
		r = -EAGAIN;
	} else if (!(da = qc_dir_dent_find(l, a, qc_dir_name_hash(a))) ||
		   !(db = qc_dir_dent_find(l, b, qc_dir_name_hash(b)))) {
		r = -ENOENT;
	} else if (order == QC_DIR_WALK_NAME) {
		r = name_cmp(a, (da->attr.mode & QFT_S_IFMT) == QFT_S_IFDIR,
			     b, (db->attr.mode & QFT_S_IFMT) == QFT_S_IFDIR) < 0;
	} else if (rank_of(l, a, order, &ra) && rank_of(l, b, order, &rb)) {
		r = ra < rb ? 1 : 0;
	}
	pthread_mutex_unlock(&dc->lock);
	return r;
}
