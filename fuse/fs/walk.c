// SPDX-License-Identifier: MIT
/* Walk-ahead: a tree walker's next small files fetched ahead (walk.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs/dircache.h"
#include "fs/fs.h"
#include "fs/node.h"
#include "fs/stats.h"
#include "fs/walk.h"
#include "fs/walk_int.h"
#include "log.h"
#include "protocol.h"

static const char *const order_names[ORDERS] = { "listing", "name", "inode" };

/* Files of each order the first FETCH of a walk asks for. */
#define PROBE 2u


int qc_walk_init(struct qc_fs *fs)
{
	struct qc_walk *w;

	if (fs->walkahead == 0)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	fs->walk = w;
	return 0;
}



/* Lock held: file i opened after wd->last: a vote for each order in
 * which it comes right after it. */
static void vote(struct qc_walk *w, const struct wdir *wd, size_t i)
{
	bool next[ORDERS];

	for (unsigned o = 0; o < ORDERS; o++)
		next[o] = qc_walk_place_in(wd, o, i) ==
			  qc_walk_place_in(wd, o, wd->last) + 1;
	qc_walk_votes_add(w, next);
}

/* Lock held: the order a walker whose first file in wd's directory is
 * file i follows: one in which i comes first -- wd's own, else one its
 * first files were fetched in, else any -- or wd's own if none. */
static enum order first_in(const struct wdir *wd, size_t i)
{
	int any = -1;

	if (qc_walk_place(wd, i) == 0)
		return wd->order;
	for (unsigned o = 0; o < ORDERS; o++) {
		if (qc_walk_place_in(wd, o, i) != 0)
			continue;
		if (wd->heads & (1u << o))
			return (enum order)o;
		if (any < 0)
			any = (int)o;
	}
	return any < 0 ? wd->order : (enum order)any;
}

/*
 * Lock held: file i (ents index) is opened or read now.  Follows the
 * order the walker shows (the one followed while i comes next in it,
 * else one in which i does), gives up the files it passed, and marks i
 * passed.
 */
static void advance(struct qc_fs *fs, struct wdir *wd, size_t i)
{
	bool first = wd->pos == 0 && wd->ask == 0, was_ahead = wd->ahead;
	size_t p;

	if (wd->ahead) {
		enum order fetched = wd->order;

		wd->ahead = false;
		wd->order = first_in(wd, i);
		wd->pos = qc_walk_place(wd, i);
		/* What was asked for lies scattered in another order: the
		 * rest is asked for from here (top_up passes over what
		 * was). */
		if (wd->order != fetched)
			wd->ask = wd->pos;
	}
	if (!first && !was_ahead)
		vote(fs->walk, wd, i);
	if (!first && !was_ahead &&
	    qc_walk_place(wd, i) != qc_walk_place(wd, wd->last) + 1) {
		for (unsigned o = 0; o < ORDERS; o++) {
			if (qc_walk_place_in(wd, o, i) !=
			    qc_walk_place_in(wd, o, wd->last) + 1)
				continue;
			qft_debug("walk: %s: now in %s order",
				  wd->ents[i].name, order_names[o]);
			wd->order = o;
			/* What was asked for is kept only where it lies
			 * ahead in this order. */
			for (size_t k = 0; k < wd->n; k++) {
				size_t q = qc_walk_place(wd, k);

				if (q <= qc_walk_place(wd, i) ||
				    q > qc_walk_place(wd, i) + QC_WALK_AHEAD)
					qc_walk_slot_drop(fs, wd, k);
			}
			wd->pos = qc_walk_place(wd, i);
			wd->ask = wd->pos;
			break;
		}
	}
	p = qc_walk_place(wd, i);
	/* In order: the walker reads the directory through, and may have
	 * more of it fetched ahead. */
	if (!first && p == wd->pos && wd->credit < fs->walkahead / 4)
		wd->credit *= 2;
	/* Passed without being opened: a walker does not come back. */
	for (size_t q = wd->pos; q < p && q < wd->ask; q++)
		qc_walk_slot_drop(fs, wd, qc_walk_at(wd, q));
	if (wd->slots[i] != &qc_walk_passed) {
		qc_walk_slot_drop(fs, wd, i);
		if (!wd->slots[i])
			wd->slots[i] = &qc_walk_passed;
	}
	wd->last = i;
	wd->pos = p + 1;
	if (wd->ask < wd->pos)
		wd->ask = wd->pos;
	wd->used_ns = qc_now_ns();
}

/*
 * Lock held: the first FETCH of a walk, begun by one file read: the next
 * PROBE files in each order, since one file does not tell which the
 * walker follows.
 */
static void probe(struct qc_fs *fs, struct wdir *wd, struct batch **out)
{
	struct batch *b = NULL;

	wd->probing = false;
	/* A small directory is fetched whole: whatever the order, the
	 * walker finds its files here. */
	if (qc_walk_fetch_whole(fs, wd, QC_WALK_WHOLE_BYTES, 0, out))
		return;
	for (unsigned o = 0; o < ORDERS; o++) {
		size_t q = qc_walk_place_in(wd, o, wd->last) + 1;

		for (unsigned k = 0; k < PROBE && q < wd->n; q++) {
			size_t i = qc_walk_at_in(wd, o, q);

			if (!qc_walk_may_ask(fs, wd, i))
				continue;
			if (fs->walk->held + wd->ents[i].attr.size + 1 >
			    fs->walkahead)
				return;
			if ((!b && !(b = qc_walk_batch_new(fs, wd, out))) ||
			    !qc_walk_batch_add(fs, wd, b, i))
				return;
			k++;
		}
	}
}

/* Lock held: whether the walker, in wd's directory, comes back to old's:
 * a depth-first walker returns to the directories above it. */
static bool returns_to(const struct wdir *wd, const struct wdir *old)
{
	for (unsigned k = 0; k < wd->nup; k++)
		if (wd->up[k] == old->dir)
			return true;
	return false;
}

/*
 * Lock held: gives up old's files from the farthest in the order it
 * follows back, until the walks other than wd's hold at most `others`
 * bytes; files still in flight count until their answers come.
 */
static void trim(struct qc_fs *fs, struct wdir *old, const struct wdir *wd,
		 uint64_t others)
{
	struct qc_walk *w = fs->walk;

	while (old->ask > old->pos && w->held - wd->held > others) {
		old->ask--;
		qc_walk_slot_drop(fs, old, qc_walk_at(old, old->ask));
	}
}

/*
 * Lock held: when the budget is spent, walks of other directories give
 * up what they hold, least recently used first: the walker moved on.  A
 * directory it left for good gives up all of it.  One above wd's, which
 * it comes back to (tar and cp -r go down into a subdirectory in the
 * middle of theirs), gives up only its farthest files, so that the
 * others hold at most half the budget: what it keeps is read when the
 * walker is back, where given up it would cross the link twice.
 */
static void make_room(struct qc_fs *fs, struct wdir *wd)
{
	struct qc_walk *w = fs->walk;
	bool tried[QC_WALK_DIRS] = { false };

	while (w->held + QC_WALK_HEADROOM > fs->walkahead) {
		unsigned old = QC_WALK_DIRS;

		for (unsigned k = 0; k < QC_WALK_DIRS; k++) {
			const struct wdir *c = w->dirs[k];

			if (!c || c == wd || !c->held || c->ahead || tried[k])
				continue;
			/* Those left for good first. */
			if (old == QC_WALK_DIRS ||
			    (returns_to(wd, w->dirs[old]) != returns_to(wd, c) ?
			     returns_to(wd, w->dirs[old]) :
			     c->used_ns < w->dirs[old]->used_ns))
				old = k;
		}
		if (old == QC_WALK_DIRS)
			break;
		tried[old] = true;
		if (returns_to(wd, w->dirs[old])) {
			trim(fs, w->dirs[old], wd, fs->walkahead / 2);
			continue;
		}
		for (size_t i = 0; i < w->dirs[old]->n; i++)
			qc_walk_slot_drop(fs, w->dirs[old], i);
		w->dirs[old]->ask = w->dirs[old]->pos;
	}
}

/*
 * Lock held: the FETCHes that keep the walk ahead of the walker, within
 * the budget, prepended to *out (sent by the caller without the lock).
 * When the budget is full, walks of other directories give theirs up:
 * the walker has moved on.
 */
static void top_up(struct qc_fs *fs, struct wdir *wd, struct batch **out)
{
	struct qc_walk *w = fs->walk;
	struct batch *b = NULL;
	uint64_t bytes = 0, limit = QC_WALK_BATCH;

	make_room(fs, wd);
	if (wd->probing) {
		probe(fs, wd, out);
		return;
	}
	while (wd->ask < wd->n && wd->ask < wd->pos + QC_WALK_AHEAD) {
		size_t i = qc_walk_at(wd, wd->ask);
		uint64_t cost = wd->ents[i].attr.size + 1;

		if (!qc_walk_may_ask(fs, wd, i)) {
			wd->ask++;
			continue;
		}
		if (w->held + cost > fs->walkahead ||
		    wd->held + cost > wd->credit)
			break;
		if (b && (b->n == QC_WALK_NAMES || bytes + cost > limit))
			b = NULL;
		if (!b) {
			/* The first FETCHes small, so that the walker's next
			 * file is not behind a big one on the link. */
			limit = wd->batches < 5 ?
				(QC_WALK_BATCH >> (5 - wd->batches)) :
				QC_WALK_BATCH;
			b = qc_walk_batch_new(fs, wd, out);
			if (!b)
				break;
			bytes = 0;
		}
		if (!qc_walk_batch_add(fs, wd, b, i))
			break;
		bytes += cost;
		wd->ask++;
	}
}

/* Lock held: whether the calling thread's caller read files of another
 * directory moments ago (a walk it follows). */
static bool walking_elsewhere(struct qc_fs *fs, struct qn_node *dir,
			      uint64_t now)
{
	for (unsigned k = 0; k < QC_WALK_DIRS; k++) {
		struct wdir *wd = fs->walk->dirs[k];

		if (wd && wd->dir != dir && now - wd->used_ns < QC_WALK_NEXT_NS &&
		    qc_walk_same_caller(wd))
			return true;
	}
	return false;
}

/*
 * The walk of n's directory begins (or goes on): at the first read of a
 * file of it, or with `at_open` already at the read-only open of one,
 * when the caller was reading another directory's files moments ago --
 * a tree walker moving on, whose first file's OPEN and the first FETCH
 * then share a round trip.
 */
static void walk_begin(struct qc_fs *fs, struct qn_node *n, bool at_open)
{
	char name[QFT_MAX_NAME + 1];
	struct qc_walk *w = fs->walk;
	struct wdir *wd, *fresh = NULL;
	struct batch *list = NULL;
	struct grave g = { .n = 0 };
	struct qn_node *parent;
	struct next_step ns;
	bool next = false;
	size_t i;

	if (!w || qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return;
	pthread_mutex_lock(&w->lock);
	wd = qc_walk_find(fs, parent, qc_now_ns(), &g);
	if (wd) {
		/* Its open advanced the walk already. */
		if (qc_walk_same_caller(wd) && !at_open) {
			top_up(fs, wd, &list);
			next = qc_walk_next_due(fs, wd, &ns);
		}
		goto out_unlock;
	}
	if (at_open && !walking_elsewhere(fs, parent, qc_now_ns()))
		goto out_unlock;
	pthread_mutex_unlock(&w->lock);
	fresh = qc_walk_new(fs, parent);
	if (!fresh)
		goto out_unref;
	i = qc_walk_find_name(fresh, name);
	/* Before the walk's first prediction. */
	qc_walk_vote_entry(fs, parent);
	pthread_mutex_lock(&w->lock);
	if (i == SIZE_MAX || qc_walk_find(fs, parent, qc_now_ns(), &g))
		goto out_unlock;
	qc_walk_insert(fs, fresh, &g);
	wd = fresh;
	fresh = NULL;
	advance(fs, wd, i);
	top_up(fs, wd, &list);
	next = qc_walk_next_due(fs, wd, &ns);
out_unlock:
	pthread_mutex_unlock(&w->lock);
	qc_walk_send(fs, list);
	if (fresh)
		qc_walk_free(fs, fresh);
	if (next)
		qc_walk_next(fs, &ns);
out_unref:
	qc_walk_bury(fs, &g);
	qn_unref(&fs->nodes, parent);
}

void qc_walk_note_read(struct qc_fs *fs, struct qn_node *n)
{
	walk_begin(fs, n, false);
}

/* hit->rep made to own `data` (malloc) as a reply's data. */
static void hit_set(struct qc_walk_hit *hit, const struct qft_attr *a,
		    uint8_t *data, uint32_t len)
{
	memset(hit, 0, sizeof(*hit));
	hit->attr = *a;
	hit->rep.frame.data = data;
	hit->rep.frame.len = len;
	hit->rep.frame.cap = len;
	hit->rep.frame.limit = len;
	hit->rep.msg.data.p = data;
	hit->rep.msg.data.len = len;
}

bool qc_walk_open(struct qc_fs *fs, struct qn_node *n, int flags,
		  struct qc_walk_hit *hit)
{
	char name[QFT_MAX_NAME + 1];
	struct qc_walk *w = fs->walk;
	struct grave g = { .n = 0 };
	struct batch *list = NULL;
	struct qn_node *parent;
	struct next_step ns;
	struct qft_attr a;
	struct wdir *wd;
	uint8_t *data = NULL;
	uint32_t len = 0;
	bool took = false, caller = false, ok = false, begin = false;
	bool next = false, entered = false;
	size_t i;

	if (!w || (flags & O_ACCMODE) != O_RDONLY ||
	    (flags & (O_TRUNC | O_DIRECT)) ||
	    qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return false;
	pthread_mutex_lock(&w->lock);
	wd = qc_walk_find(fs, parent, qc_now_ns(), &g);
	begin = !wd;
	if (!wd || (i = qc_walk_find_name(wd, name)) == SIZE_MAX)
		goto out_unlock;
	if (wd->slots[i] == &qc_walk_passed) {
		/* Opened again: a new pass over the directory, which the
		 * next read starts from its listing as it is now. */
		qc_walk_retire(fs, wd, &g);
		goto out_unlock;
	}
	wd->refs++;
	entered = wd->ahead;
	if (wd->slots[i] && wd->slots[i] != &qc_walk_passed && !wd->slots[i]->ready)
		/* A round trip on the walker's path, as a request's wait. */
		qc_stat_inc(&fs->stats, QC_STAT_WALK_WAITS);
	while (wd->slots[i] && wd->slots[i] != &qc_walk_passed &&
	       !wd->slots[i]->ready && !wd->gone)
		pthread_cond_wait(&w->cond, &w->lock);
	if (!wd->gone) {
		struct slot *s = wd->slots[i];

		if (s && s != &qc_walk_passed && s->ready) {
			took = true;
			a = s->attr;
			data = s->data;
			len = s->len;
			qc_walk_uncharge(fs, wd, s);
			free(s);
			wd->slots[i] = &qc_walk_passed;
		}
		advance(fs, wd, i);
		caller = qc_walk_same_caller(wd);
		if (caller) {
			top_up(fs, wd, &list);
			next = qc_walk_next_due(fs, wd, &ns);
		}
	}
	if (qc_walk_put(wd))
		g.w[g.n++] = wd;
out_unlock:
	pthread_mutex_unlock(&w->lock);
	qc_walk_send(fs, list);
	if (entered)
		qc_walk_vote_entry(fs, parent);
	if (next)
		qc_walk_next(fs, &ns);
	if (took) {
		uint64_t rino = qn_rino(&fs->nodes, n);

		/* The kernel holds pages it would not read again, and only
		 * current bytes of the file this node is may be shown. */
		ok = caller && !qn_paged(&fs->nodes, n) &&
		     (!rino || rino == a.ino) &&
		     qc_dir_walk_fresh(fs, parent, name, &a, NULL);
		if (ok) {
			hit_set(hit, &a, data, len);
			qc_stat_inc(&fs->stats, QC_STAT_WALK_FILES);
			qc_stat_add(&fs->stats, QC_STAT_WALK_BYTES, len);
		} else {
			qft_debug("walk: %s fetched, not current at its open "
				  "(caller %d paged %d rino %d)", name, caller,
				  qn_paged(&fs->nodes, n),
				  (!rino || rino == a.ino));
			qc_stat_add(&fs->stats, QC_STAT_WALK_WASTE, len);
			free(data);
		}
	}
	qc_walk_bury(fs, &g);
	qn_unref(&fs->nodes, parent);
	if (begin)
		walk_begin(fs, n, true);
	return ok;
}

void qc_walk_destroy(struct qc_fs *fs)
{
	struct qc_walk *w = fs->walk;
	struct grave g = { .n = 0 };

	if (!w)
		return;
	for (unsigned k = 0; k < QC_WALK_DIRS; k++)
		if (w->dirs[k])
			qc_walk_retire(fs, w->dirs[k], &g);
	qc_walk_bury(fs, &g);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
	fs->walk = NULL;
}
