// SPDX-License-Identifier: MIT
/*
 * Walk-ahead across directories (walk.h): the order a tree's walker
 * follows, and the directories it goes to next, fetched before it gets
 * there.  The walks' table and their FETCHes are walk.c's.
 */
#include <pthread.h>
#include <stdio.h>

#include "fs/dircache.h"
#include "fs/fs.h"
#include "fs/node.h"
#include "fs/walk.h"
#include "fs/walk_int.h"
#include "log.h"
#include "protocol.h"

/* Lock held: the orders (bits) with the most votes: where they tie, the
 * walker may follow any of them. */
static unsigned tree_orders(const struct qc_walk *w)
{
	unsigned most = 0, set = 0;

	for (unsigned o = 0; o < ORDERS; o++)
		most = w->votes[o] > most ? w->votes[o] : most;
	for (unsigned o = 0; o < ORDERS; o++)
		if (w->votes[o] == most)
			set |= 1u << o;
	return set;
}

/* Lock held: the order the walkers follow in a tree, by their votes:
 * wd's own if none has more, else the first of those that have most
 * (cp -r in a tree made in name order gives names and inode numbers as
 * many, and either foretells it better than its directory's listing). */
static enum order tree_order(const struct qc_walk *w, const struct wdir *wd)
{
	unsigned most = tree_orders(w);

	if (most & (1u << wd->order))
		return wd->order;
	return (enum order)__builtin_ctz(most);
}

/* The cache's name (QC_DIR_WALK_*) of an order. */
static int dir_order(enum order o)
{
	return o == BY_NAME ? QC_DIR_WALK_NAME :
	       o == BY_INO ? QC_DIR_WALK_INO : QC_DIR_WALK_LISTING;
}

void qc_walk_votes_add(struct qc_walk *w, const bool for_order[ORDERS])
{
	bool halve = false;

	for (unsigned o = 0; o < ORDERS; o++)
		if (for_order[o] && ++w->votes[o] >= QC_WALK_VOTES)
			halve = true;
	for (unsigned o = 0; halve && o < ORDERS; o++)
		w->votes[o] /= 2;
}

/*
 * The walker entered directory `dir` (its first file there is opened or
 * read).  Where it comes from in dir's parent tells apart orders that
 * the opens of files cannot: in a tree made in name order, names and
 * inode numbers agree file by file, but cp -r, which follows inode
 * numbers, takes a directory's files made before its subdirectories
 * first, which by name it would not.  A vote for each order in which the
 * file it opened last in the parent comes before `dir`.  No lock held.
 */
void qc_walk_vote_entry(struct qc_fs *fs, struct qn_node *dir)
{
	char name[QFT_MAX_NAME + 1], last[QFT_MAX_NAME + 1] = "";
	struct qc_walk *w = fs->walk;
	struct grave g = { .n = 0 };
	bool before[ORDERS], files_done = false;
	struct qn_node *parent;
	struct wdir *pw;

	if (qn_parent_ref(&fs->nodes, dir, &parent, name) < 0)
		return;
	pthread_mutex_lock(&w->lock);
	pw = qc_walk_find(fs, parent, qc_now_ns(), &g);
	if (pw && pw->pos > 0 && qc_walk_same_caller(pw)) {
		snprintf(last, sizeof(last), "%s", pw->ents[pw->last].name);
		files_done = qc_walk_place_in(pw, BY_NAME, pw->last) ==
			     pw->n - 1;
	}
	pthread_mutex_unlock(&w->lock);
	qc_walk_bury(fs, &g);
	if (!last[0])
		goto out_unref;
	for (unsigned o = 0; o < ORDERS; o++)
		before[o] = qc_dir_walk_cmp(fs, parent, last, name,
					    dir_order(o)) == 1;
	/* A walker in names' order takes a directory's files before its
	 * subdirectories (rsync): it enters each from the last of them. */
	before[BY_NAME] = before[BY_NAME] || files_done;
	pthread_mutex_lock(&w->lock);
	qc_walk_votes_add(w, before);
	pthread_mutex_unlock(&w->lock);
out_unref:
	qn_unref(&fs->nodes, parent);
}

/* Lock held: whether the walk of wd's directory is all asked for, so the
 * directories after it may be (once).  Takes a reference on its node
 * into *dir. */
bool qc_walk_next_due(struct qc_fs *fs, struct wdir *wd, struct next_step *ns)
{
	enum order o;

	if (wd->next_done || wd->gone || wd->probing || wd->ask < wd->n ||
	    !qc_walk_same_caller(wd))
		return false;
	wd->next_done = true;
	qn_ref(&fs->nodes, wd->dir);
	ns->dir = wd->dir;
	o = tree_order(fs->walk, wd);
	ns->order = dir_order(o);
	ns->after[0] = '\0';
	/* cp -r, tar and grep -r take a directory's files and directories
	 * as they come in their order; rsync, in names' order, takes its
	 * files first and its directories after (incremental recursion). */
	if (wd->pos > 0 && o != BY_NAME)
		snprintf(ns->after, sizeof(ns->after), "%s",
			 wd->ents[wd->last].name);
	return true;
}

/* Lock held: walks fetched ahead of the walker not reached yet, and
 * whether the table has a free place or one whose walk holds nothing
 * (the walker passed it: the least recently used goes, into g). */
static unsigned ahead_count(struct qc_fs *fs, bool *room, struct grave *g)
{
	struct wdir *old = NULL;
	unsigned c = 0;

	*room = false;
	for (unsigned k = 0; k < QC_WALK_DIRS; k++) {
		struct wdir *wd = fs->walk->dirs[k];

		if (!wd)
			*room = true;
		else if (wd->ahead)
			c++;
		else if (!wd->held && (!old || wd->used_ns < old->used_ns))
			old = wd;
	}
	if (!*room && old && g && c < QC_WALK_NEXT_DIRS) {
		qc_walk_retire(fs, old, g);
		*room = true;
	}
	return c;
}

/*
 * Walks fetched ahead that the walker, now in `cur` and following
 * `order`, has passed for good (qc_dir_walk_passed) are given up: their
 * places are the next directories'.  (A prediction names directories
 * from where the walker is: cp -r enters subdirectories in the middle
 * of its directory, so some it named may be behind the walker by the
 * next, and kept, those would hold the places until they idled out.)
 * No lock held.
 */
static void ahead_prune(struct qc_fs *fs, struct qn_node *cur, int order)
{
	struct wdir *ahead[QC_WALK_DIRS];
	bool behind[QC_WALK_DIRS];
	struct qc_walk *w = fs->walk;
	struct grave g = { .n = 0 };
	unsigned n = 0;

	pthread_mutex_lock(&w->lock);
	for (unsigned k = 0; k < QC_WALK_DIRS; k++)
		if (w->dirs[k] && w->dirs[k]->ahead) {
			ahead[n++] = w->dirs[k];
			w->dirs[k]->refs++;
		}
	pthread_mutex_unlock(&w->lock);
	for (unsigned k = 0; k < n; k++)
		behind[k] = qc_dir_walk_passed(fs, ahead[k]->dir, cur, order);
	pthread_mutex_lock(&w->lock);
	for (unsigned k = 0; k < n; k++) {
		if (behind[k] && ahead[k]->ahead && !ahead[k]->gone) {
			qft_debug("walk: a directory fetched ahead was passed");
			qc_walk_retire(fs, ahead[k], &g);
		}
		if (qc_walk_put(ahead[k]))
			g.w[g.n++] = ahead[k];
	}
	pthread_mutex_unlock(&w->lock);
	qc_walk_bury(fs, &g);
}

/*
 * Lock held: whether a place is free for the walk of the directory a
 * prediction names after `nearer` (n directories, in the order the
 * walker will go to them).  When as many directories as may be are
 * fetched ahead, one that is not among those nearer ones gives its place
 * up, the least recently used: the walker gets to this directory before
 * it (it comes later, or the walker left it behind); likewise while the
 * budget lacks the `need` bytes it would ask for.  False when all are
 * nearer.
 */
static bool ahead_room(struct qc_fs *fs, struct qn_node *const *nearer,
		       size_t n, uint64_t need, struct grave *g)
{
	struct qc_walk *w = fs->walk;
	bool room;

	while (ahead_count(fs, &room, NULL) >= QC_WALK_NEXT_DIRS ||
	       w->held + need + QC_WALK_HEADROOM > fs->walkahead) {
		struct wdir *old = NULL;

		for (unsigned k = 0; k < QC_WALK_DIRS; k++) {
			struct wdir *wd = w->dirs[k];
			bool near = false;

			if (!wd || !wd->ahead)
				continue;
			for (size_t q = 0; q < n && !near; q++)
				near = nearer[q] == wd->dir;
			if (!near && (!old || wd->used_ns < old->used_ns))
				old = wd;
		}
		if (!old)
			return false;
		qc_walk_retire(fs, old, g);
	}
	return true;
}

/* Lock held: puts the walk of a directory the walker has not reached in
 * the table and asks for all its small files, or its first ones when
 * they are too many, when the budget and the table have room; false if
 * not. */
static bool ahead_insert(struct qc_fs *fs, struct wdir *wd,
			 struct batch **out, struct grave *g)
{
	struct qc_walk *w = fs->walk;
	unsigned c;
	bool room;

	if (qc_walk_find(fs, wd->dir, qc_now_ns(), g))
		return false;
	c = ahead_count(fs, &room, g);
	if (c >= QC_WALK_NEXT_DIRS || !room ||
	    (!qc_walk_fetch_whole(fs, wd, QC_WALK_AHEAD_BYTES,
				  QC_WALK_HEADROOM, out) &&
	     !qc_walk_fetch_head(fs, wd, QC_WALK_AHEAD_BYTES,
				 QC_WALK_HEADROOM, out))) {
		qft_debug("walk: not ahead: %u ahead, room %d, held %llu",
			  c, room, (unsigned long long)w->held);
		return false;
	}
	for (unsigned k = 0; k < QC_WALK_DIRS; k++)
		if (!w->dirs[k]) {
			w->dirs[k] = wd;
			break;
		}
	wd->ahead = true;
	wd->probing = false;
	wd->used_ns = qc_now_ns();
	return true;
}

/*
 * The walker's files of `dir` are all asked for: the next directories it
 * goes to (dir's subdirectories, then its parent's after it) have their
 * small files asked for now, so that the walk does not wait a round
 * trip or two at each directory.  No lock held; drops the reference on
 * dir.
 */
void qc_walk_next(struct qc_fs *fs, struct next_step *ns)
{
	struct qn_node *next[2 * QC_WALK_NEXT_DIRS];
	struct qn_node *dir = ns->dir;
	struct qc_walk *w = fs->walk;
	int order = ns->order;
	size_t n = qc_dir_walk_next(fs, dir, order,
				    ns->after[0] ? ns->after : NULL, next,
				    2 * QC_WALK_NEXT_DIRS);

	ahead_prune(fs, dir, order);
	for (size_t k = 0; k < n; k++) {
		struct grave g = { .n = 0 };
		struct batch *list = NULL;
		struct wdir *fresh;
		uint64_t need;
		bool taken;

		pthread_mutex_lock(&w->lock);
		taken = qc_walk_find(fs, next[k], qc_now_ns(), &g) != NULL;
		pthread_mutex_unlock(&w->lock);
		fresh = taken ? NULL : qc_walk_new(fs, next[k]);
		if (!fresh) {
			qc_walk_bury(fs, &g);
			continue;
		}
		pthread_mutex_lock(&w->lock);
		/* One too big to be fetched whole has its first files
		 * fetched, in the order the walker follows (in each, while
		 * orders tie: cp -r in a tree whose names and inode numbers
		 * agreed so far may meet one where they do not).  None
		 * takes the place of one the walker reaches first. */
		fresh->order = tree_order(w, fresh);
		fresh->heads = tree_orders(w);
		need = qc_walk_whole_bytes(fs, fresh, QC_WALK_AHEAD_BYTES);
		if (!need)
			need = qc_walk_head_bytes(fs, fresh,
						  QC_WALK_AHEAD_BYTES);
		taken = need && ahead_room(fs, next, k + 1, need, &g) &&
			ahead_insert(fs, fresh, &list, &g);
		pthread_mutex_unlock(&w->lock);
		qc_walk_send(fs, list);
		if (!taken)
			qc_walk_free(fs, fresh);
		qc_walk_bury(fs, &g);
	}
	for (size_t k = 0; k < n; k++)
		qn_unref(&fs->nodes, next[k]);
	qn_unref(&fs->nodes, dir);
}

