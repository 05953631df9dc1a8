// SPDX-License-Identifier: MIT
/* Walk-ahead: a tree walker's next small files fetched ahead (walk.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
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

/* What a slot holds once its file was opened or passed: never asked
 * again. */
static struct slot passed;

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


/* The ents index of the file at place p of order o. */
static size_t at_in(const struct wdir *wd, enum order o, size_t p)
{
	return wd->perm[o] ? wd->perm[o][p] : p;
}

/* The place of ents index i in order o. */
static size_t place_in(const struct wdir *wd, enum order o, size_t i)
{
	return wd->rank[o] ? wd->rank[o][i] : i;
}

static size_t at(const struct wdir *wd, size_t p)
{
	return at_in(wd, wd->order, p);
}

static size_t place(const struct wdir *wd, size_t i)
{
	return place_in(wd, wd->order, i);
}

/* Lock held: slot s of wd no longer counts against the budgets. */
static void uncharge(struct qc_fs *fs, struct wdir *wd, struct slot *s)
{
	fs->walk->held -= s->charge;
	wd->held -= s->charge;
}

/* Lock held: gives slot i up; its bytes, if any, were never read. */
static void slot_drop(struct qc_fs *fs, struct wdir *wd, size_t i)
{
	struct slot *s = wd->slots[i];

	if (!s || s == &passed)
		return;
	if (!s->ready) {
		/* The FETCH's completion frees it. */
		s->unwanted = true;
		return;
	}
	uncharge(fs, wd, s);
	qft_debug("walk: %s given up unread", wd->ents[i].name);
	qc_stat_add(&fs->stats, QC_STAT_WALK_WASTE, s->len);
	free(s->data);
	free(s);
	wd->slots[i] = NULL;
}

/*
 * Lock held: takes wd out of the table, giving up what it holds; into
 * the grave when nothing refers to it any more.
 */
static void wdir_retire(struct qc_fs *fs, struct wdir *wd, struct grave *g)
{
	struct qc_walk *w = fs->walk;

	for (unsigned k = 0; k < QC_WALK_DIRS; k++)
		if (w->dirs[k] == wd)
			w->dirs[k] = NULL;
	wd->gone = true;
	for (size_t i = 0; i < wd->n; i++)
		slot_drop(fs, wd, i);
	if (--wd->refs == 0)
		g->w[g->n++] = wd;
}

static void grave_empty(struct qc_fs *fs, struct grave *g)
{
	for (unsigned k = 0; k < g->n; k++)
		qc_walk_free(fs, g->w[k]);
	g->n = 0;
}

/* Lock held: drops a reference; true when the caller must free wd. */
static bool wdir_put(struct wdir *wd)
{
	return --wd->refs == 0;
}

/*
 * Lock held: the walk of `dir`, or NULL.  Walks left untouched too long
 * are retired on the way.
 */
static struct wdir *wdir_find(struct qc_fs *fs, struct qn_node *dir,
			      uint64_t now, struct grave *g)
{
	struct qc_walk *w = fs->walk;
	struct wdir *found = NULL;

	for (unsigned k = 0; k < QC_WALK_DIRS; k++) {
		struct wdir *wd = w->dirs[k];

		if (!wd)
			continue;
		if (wd->dir == dir) {
			found = wd;
		} else if (now - wd->used_ns > QC_WALK_IDLE_NS) {
			wdir_retire(fs, wd, g);
		}
	}
	return found;
}

/* Lock held: puts a new walk in the table, retiring the least recently
 * used when full. */
static void wdir_insert(struct qc_fs *fs, struct wdir *wd, struct grave *g)
{
	struct qc_walk *w = fs->walk;
	unsigned k, victim = 0;

	/* Walks fetched ahead go last: the walker is on its way there. */
	for (k = 0; k < QC_WALK_DIRS && w->dirs[k]; k++)
		if (w->dirs[victim]->ahead != w->dirs[k]->ahead ?
		    w->dirs[victim]->ahead :
		    w->dirs[k]->used_ns < w->dirs[victim]->used_ns)
			victim = k;
	if (k == QC_WALK_DIRS) {
		wdir_retire(fs, w->dirs[victim], g);
		k = victim;
	}
	w->dirs[k] = wd;
}





/* Whether the calling thread acts for the caller wd's FETCHes read as. */
static bool same_caller(const struct wdir *wd)
{
	const struct qft_cred *c = qc_call_caller();

	if (!c || !wd->has_cred)
		return !c && !wd->has_cred;
	return c->uid == wd->cred.uid && c->gid == wd->cred.gid &&
	       c->ngroups == wd->cred.ngroups &&
	       memcmp(c->groups, wd->cred.groups,
		      c->ngroups * sizeof(c->groups[0])) == 0;
}

/* Lock held: file i opened after wd->last: a vote for each order in
 * which it comes right after it. */
static void vote(struct qc_walk *w, const struct wdir *wd, size_t i)
{
	bool halve = false;

	for (unsigned o = 0; o < ORDERS; o++)
		if (place_in(wd, o, i) == place_in(wd, o, wd->last) + 1 &&
		    ++w->votes[o] >= QC_WALK_VOTES)
			halve = true;
	for (unsigned o = 0; halve && o < ORDERS; o++)
		w->votes[o] /= 2;
}

/* Lock held: the order the walkers follow in a tree, by their votes:
 * one that has more than every other, else wd's own. */
static enum order tree_order(const struct qc_walk *w, const struct wdir *wd)
{
	enum order best = wd->order;
	bool alone = false;

	for (unsigned o = 0; o < ORDERS; o++) {
		if (w->votes[o] > w->votes[best]) {
			best = o;
			alone = true;
		} else if (o != best && w->votes[o] == w->votes[best]) {
			alone = false;
		}
	}
	return alone ? best : wd->order;
}

/* The cache's name (QC_DIR_WALK_*) of an order. */
static int dir_order(enum order o)
{
	return o == BY_NAME ? QC_DIR_WALK_NAME :
	       o == BY_INO ? QC_DIR_WALK_INO : QC_DIR_WALK_LISTING;
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
static void vote_entry(struct qc_fs *fs, struct qn_node *dir)
{
	char name[QFT_MAX_NAME + 1], last[QFT_MAX_NAME + 1] = "";
	struct qc_walk *w = fs->walk;
	struct grave g = { .n = 0 };
	bool before[ORDERS], halve = false;
	struct qn_node *parent;
	struct wdir *pw;

	if (qn_parent_ref(&fs->nodes, dir, &parent, name) < 0)
		return;
	pthread_mutex_lock(&w->lock);
	pw = wdir_find(fs, parent, qc_now_ns(), &g);
	if (pw && pw->pos > 0 && same_caller(pw))
		snprintf(last, sizeof(last), "%s", pw->ents[pw->last].name);
	pthread_mutex_unlock(&w->lock);
	grave_empty(fs, &g);
	if (!last[0])
		goto out_unref;
	for (unsigned o = 0; o < ORDERS; o++)
		before[o] = qc_dir_walk_cmp(fs, parent, last, name,
					    dir_order(o)) == 1;
	pthread_mutex_lock(&w->lock);
	for (unsigned o = 0; o < ORDERS; o++)
		if (before[o] && ++w->votes[o] >= QC_WALK_VOTES)
			halve = true;
	for (unsigned o = 0; halve && o < ORDERS; o++)
		w->votes[o] /= 2;
	pthread_mutex_unlock(&w->lock);
out_unref:
	qn_unref(&fs->nodes, parent);
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
		/* The walker's first file here: the order it follows is
		 * one in which that file comes first. */
		wd->ahead = false;
		for (unsigned o = 0; o < ORDERS; o++)
			if (place_in(wd, o, i) == 0) {
				wd->order = o;
				break;
			}
		wd->pos = place(wd, i);
	}
	if (!first && !was_ahead)
		vote(fs->walk, wd, i);
	if (!first && !was_ahead &&
	    place(wd, i) != place(wd, wd->last) + 1) {
		for (unsigned o = 0; o < ORDERS; o++) {
			if (place_in(wd, o, i) !=
			    place_in(wd, o, wd->last) + 1)
				continue;
			qft_debug("walk: %s: now in %s order",
				  wd->ents[i].name, order_names[o]);
			wd->order = o;
			/* What was asked for is kept only where it lies
			 * ahead in this order. */
			for (size_t k = 0; k < wd->n; k++) {
				size_t q = place(wd, k);

				if (q <= place(wd, i) ||
				    q > place(wd, i) + QC_WALK_AHEAD)
					slot_drop(fs, wd, k);
			}
			wd->pos = place(wd, i);
			wd->ask = wd->pos;
			break;
		}
	}
	p = place(wd, i);
	/* In order: the walker reads the directory through, and may have
	 * more of it fetched ahead. */
	if (!first && p == wd->pos && wd->credit < fs->walkahead)
		wd->credit *= 2;
	/* Passed without being opened: a walker does not come back. */
	for (size_t q = wd->pos; q < p && q < wd->ask; q++)
		slot_drop(fs, wd, at(wd, q));
	if (wd->slots[i] != &passed) {
		slot_drop(fs, wd, i);
		if (!wd->slots[i])
			wd->slots[i] = &passed;
	}
	wd->last = i;
	wd->pos = p + 1;
	if (wd->ask < wd->pos)
		wd->ask = wd->pos;
	wd->used_ns = qc_now_ns();
}

/* Lock held: whether file i may be asked for now; charges it if so. */
static bool may_ask(struct qc_fs *fs, struct wdir *wd, size_t i)
{
	const struct qc_dir_walk_ent *e = &wd->ents[i];

	return !wd->slots[i] && e->trusted &&
	       e->attr.size <= QC_WALK_FILE_MAX;
}

/* Lock held: a new FETCH of wd, prepended to *out; NULL when out of
 * memory. */
static struct batch *batch_new(struct qc_fs *fs, struct wdir *wd,
			       struct batch **out)
{
	struct batch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	wd->batches++;
	b->fs = fs;
	b->wd = wd;
	wd->refs++;
	b->next = *out;
	*out = b;
	return b;
}

/* Lock held: file i goes into FETCH b; false when out of memory. */
static bool batch_add(struct qc_fs *fs, struct wdir *wd, struct batch *b,
		      size_t i)
{
	uint64_t cost = wd->ents[i].attr.size + 1;
	struct slot *s = calloc(1, sizeof(*s));

	if (!s)
		return false;
	s->charge = cost;
	fs->walk->held += cost;
	wd->held += cost;
	wd->slots[i] = s;
	b->idx[b->n++] = (uint32_t)i;
	return true;
}

/*
 * Lock held: the first FETCH of a walk, begun by one file read: the next
 * PROBE files in each order, since one file does not tell which the
 * walker follows.
 */
/* Lock held: what asking for all of wd's small files would hold, or 0
 * when they are too many, more than `limit` bytes, or none. */
static uint64_t whole_bytes(struct qc_fs *fs, struct wdir *wd,
			    uint64_t limit)
{
	uint64_t bytes = 0;
	size_t count = 0;

	for (size_t i = 0; i < wd->n && count <= QC_WALK_WHOLE_FILES; i++)
		if (may_ask(fs, wd, i)) {
			count++;
			bytes += wd->ents[i].attr.size + 1;
		}
	if (!count || count > QC_WALK_WHOLE_FILES || bytes > limit)
		return 0;
	return bytes;
}

/* Lock held: asks for all of wd's small files, when they are few and
 * small and the budget has room for them and `slack` more; false if
 * not. */
static bool fetch_whole(struct qc_fs *fs, struct wdir *wd, uint64_t limit,
			uint64_t slack, struct batch **out)
{
	struct batch *b;
	uint64_t bytes = whole_bytes(fs, wd, limit);

	if (!bytes || fs->walk->held + bytes + slack > fs->walkahead)
		return false;
	if (wd->credit < bytes)
		wd->credit = bytes;
	wd->ask = wd->n;
	if (!(b = batch_new(fs, wd, out)))
		return true;
	for (size_t i = 0; i < wd->n; i++)
		if (may_ask(fs, wd, i) && !batch_add(fs, wd, b, i))
			break;
	return true;
}

static void probe(struct qc_fs *fs, struct wdir *wd, struct batch **out)
{
	struct batch *b = NULL;

	wd->probing = false;
	/* A small directory is fetched whole: whatever the order, the
	 * walker finds its files here. */
	if (fetch_whole(fs, wd, QC_WALK_WHOLE_BYTES, 0, out))
		return;
	for (unsigned o = 0; o < ORDERS; o++) {
		size_t q = place_in(wd, o, wd->last) + 1;

		for (unsigned k = 0; k < PROBE && q < wd->n; q++) {
			size_t i = at_in(wd, o, q);

			if (!may_ask(fs, wd, i))
				continue;
			if (fs->walk->held + wd->ents[i].attr.size + 1 >
			    fs->walkahead)
				return;
			if ((!b && !(b = batch_new(fs, wd, out))) ||
			    !batch_add(fs, wd, b, i))
				return;
			k++;
		}
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

	/* When the budget is spent, what walks of other directories hold is
	 * given up, least recently used first: the walker moved on (and
	 * may come back to one: cp -r goes down into a subdirectory in the
	 * middle of its directory; what it gave up is then asked again). */
	while (w->held + QC_WALK_HEADROOM > fs->walkahead) {
		struct wdir *old = NULL;

		for (unsigned k = 0; k < QC_WALK_DIRS; k++)
			if (w->dirs[k] && w->dirs[k] != wd &&
			    w->dirs[k]->held && !w->dirs[k]->ahead &&
			    (!old || w->dirs[k]->used_ns < old->used_ns))
				old = w->dirs[k];
		if (!old)
			break;
		for (size_t i = 0; i < old->n; i++)
			slot_drop(fs, old, i);
		old->ask = old->pos;
		if (old->held)
			break; /* its FETCHes in flight: their answers go */
	}
	if (wd->probing) {
		probe(fs, wd, out);
		return;
	}
	while (wd->ask < wd->n && wd->ask < wd->pos + QC_WALK_AHEAD) {
		size_t i = at(wd, wd->ask);
		uint64_t cost = wd->ents[i].attr.size + 1;

		if (!may_ask(fs, wd, i)) {
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
			b = batch_new(fs, wd, out);
			if (!b)
				break;
			bytes = 0;
		}
		if (!batch_add(fs, wd, b, i))
			break;
		bytes += cost;
		wd->ask++;
	}
}

/* Lock held: frees the slots of a batch that was never answered. */
static void batch_fail(struct qc_fs *fs, struct batch *b, size_t from)
{
	for (size_t k = from; k < b->n; k++) {
		struct slot *s = b->wd->slots[b->idx[k]];

		uncharge(fs, b->wd, s);
		free(s);
		b->wd->slots[b->idx[k]] = NULL;
	}
}

/* One record's bytes, kept when they are current (no lock held). */
static uint8_t *record_keep(struct qc_fs *fs, struct batch *b, size_t k,
			    const struct qft_fetch_rec *rec)
{
	const struct qc_dir_walk_ent *e = &b->wd->ents[b->idx[k]];
	uint8_t *p;

	if (rec->status != QFT_OK || !(rec->flags & QFT_FETCH_EOF) ||
	    rec->data.len != rec->attr.size || rec->attr.ino != e->attr.ino ||
	    !qc_dir_walk_fresh(fs, b->wd->dir, e->name, &rec->attr, &b->seq)) {
		qft_debug("walk: %s not kept (status %u)", e->name,
			  rec->status);
		return NULL;
	}
	p = malloc(rec->data.len ? rec->data.len : 1);
	if (p)
		memcpy(p, rec->data.p, rec->data.len);
	return p;
}

static void batch_done(void *ctx, int err, struct qc_reply *rep)
{
	struct batch *b = ctx;
	struct qc_fs *fs = b->fs;
	struct qc_walk *w = fs->walk;
	struct qft_fetch_rec recs[QC_WALK_NAMES];
	uint8_t *data[QC_WALK_NAMES];
	size_t got = 0;
	bool dead;
	struct qcur c;

	if (err == 0) {
		qcur_init(&c, rep->msg.data.p, rep->msg.data.len);
		while (got < b->n && c.left &&
		       qft_fetch_rec_decode(&c, &recs[got],
					    QC_WALK_FILE_MAX + 1) == 0) {
			qc_stat_add(&fs->stats, QC_STAT_WALK_FETCHED,
				    recs[got].data.len);
			data[got] = record_keep(fs, b, got, &recs[got]);
			got++;
		}
		if (c.left)
			qft_warn("malformed FETCH reply from the server; "
				 "those files are read the usual way");
	} else if (err != -EOPNOTSUPP) {
		qft_debug("FETCH: %s", strerror(-err));
	}
	pthread_mutex_lock(&w->lock);
	for (size_t k = 0; k < got; k++) {
		struct slot *s = b->wd->slots[b->idx[k]];

		if (!data[k] || s->unwanted || b->wd->gone) {
			if (data[k] || (recs[k].status == QFT_OK &&
					recs[k].data.len))
				qc_stat_add(&fs->stats, QC_STAT_WALK_WASTE,
					    recs[k].data.len);
			free(data[k]);
			uncharge(fs, b->wd, s);
			free(s);
			b->wd->slots[b->idx[k]] = NULL;
			continue;
		}
		s->ready = true;
		s->attr = recs[k].attr;
		s->data = data[k];
		s->len = recs[k].data.len;
	}
	batch_fail(fs, b, got);
	pthread_cond_broadcast(&w->cond);
	dead = wdir_put(b->wd);
	pthread_mutex_unlock(&w->lock);
	if (dead)
		qc_walk_free(fs, b->wd);
	free(b);
}

/* Sends the FETCHes of `list` (no lock held). */
static void send_batches(struct qc_fs *fs, struct batch *list)
{
	char path[QFT_MAX_PATH + 1];

	while (list) {
		struct batch *b = list;
		struct qft_msg m;
		struct qbuf names;
		uint64_t gen;
		int r;

		list = b->next;
		qbuf_init(&names, QFT_MAX_PAYLOAD);
		r = qn_path(&fs->nodes, b->wd->dir, NULL, path);
		for (size_t k = 0; r >= 0 && k < b->n; k++) {
			const char *name = b->wd->ents[b->idx[k]].name;

			r = qbuf_put_str(&names, name, strlen(name));
		}
		gen = qc_conn_gen(fs->conn);
		if (r < 0 || !gen) {
			qbuf_free(&names);
			batch_done(b, r < 0 ? r : -ENOTCONN, NULL);
			continue;
		}
		qft_msg_init(&m, QFT_OP_FETCH, 0);
		qc_set_str(&m.path, path);
		m.length = QC_WALK_FILE_MAX + 1;
		m.data.p = names.data;
		m.data.len = (uint32_t)names.len;
		b->seq = qc_dir_walk_seq(fs);
		/* Completed exactly once, here or on the reader thread. */
		(void)qc_call_async(fs->conn, gen, &m, batch_done, b);
		qbuf_free(&names);
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
		    same_caller(wd))
			return true;
	}
	return false;
}

/* Where the walker goes on from: the directory whose files are all
 * asked for, the order it follows, and the file it is at ("" if none). */
struct next_step {
	struct qn_node *dir;    /* holds a reference */
	int order;              /* QC_DIR_WALK_* */
	char after[QFT_MAX_NAME + 1];
};

/* Lock held: whether the walk of wd's directory is all asked for, so the
 * directories after it may be (once).  Takes a reference on its node
 * into *dir. */
static bool next_due(struct qc_fs *fs, struct wdir *wd, struct next_step *ns)
{
	enum order o;

	if (wd->next_done || wd->gone || wd->probing || wd->ask < wd->n ||
	    !same_caller(wd))
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
		wdir_retire(fs, old, g);
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
			wdir_retire(fs, ahead[k], &g);
		}
		if (wdir_put(ahead[k]))
			g.w[g.n++] = ahead[k];
	}
	pthread_mutex_unlock(&w->lock);
	grave_empty(fs, &g);
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
		wdir_retire(fs, old, g);
	}
	return true;
}

/* Lock held: puts the walk of a directory the walker has not reached in
 * the table and asks for all its files, when it is small enough to be
 * fetched whole and the budget and the table have room; false if not. */
static bool ahead_insert(struct qc_fs *fs, struct wdir *wd,
			 struct batch **out, struct grave *g)
{
	struct qc_walk *w = fs->walk;
	unsigned c;
	bool room;

	if (wdir_find(fs, wd->dir, qc_now_ns(), g))
		return false;
	c = ahead_count(fs, &room, g);
	if (c >= QC_WALK_NEXT_DIRS || !room ||
	    !fetch_whole(fs, wd, QC_WALK_AHEAD_BYTES, QC_WALK_HEADROOM, out)) {
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
static void walk_next(struct qc_fs *fs, struct next_step *ns)
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
		taken = wdir_find(fs, next[k], qc_now_ns(), &g) != NULL;
		pthread_mutex_unlock(&w->lock);
		fresh = taken ? NULL : qc_walk_new(fs, next[k]);
		if (!fresh) {
			grave_empty(fs, &g);
			continue;
		}
		pthread_mutex_lock(&w->lock);
		/* One too big to be fetched whole costs no other its place;
		 * nor does it take one from itself, or from one the walker
		 * reaches first. */
		need = whole_bytes(fs, fresh, QC_WALK_AHEAD_BYTES);
		taken = need && ahead_room(fs, next, k + 1, need, &g) &&
			ahead_insert(fs, fresh, &list, &g);
		pthread_mutex_unlock(&w->lock);
		send_batches(fs, list);
		if (!taken)
			qc_walk_free(fs, fresh);
		grave_empty(fs, &g);
	}
	for (size_t k = 0; k < n; k++)
		qn_unref(&fs->nodes, next[k]);
	qn_unref(&fs->nodes, dir);
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
	wd = wdir_find(fs, parent, qc_now_ns(), &g);
	if (wd) {
		/* Its open advanced the walk already. */
		if (same_caller(wd) && !at_open) {
			top_up(fs, wd, &list);
			next = next_due(fs, wd, &ns);
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
	vote_entry(fs, parent);
	pthread_mutex_lock(&w->lock);
	if (i == SIZE_MAX || wdir_find(fs, parent, qc_now_ns(), &g))
		goto out_unlock;
	wdir_insert(fs, fresh, &g);
	wd = fresh;
	fresh = NULL;
	advance(fs, wd, i);
	top_up(fs, wd, &list);
	next = next_due(fs, wd, &ns);
out_unlock:
	pthread_mutex_unlock(&w->lock);
	send_batches(fs, list);
	if (fresh)
		qc_walk_free(fs, fresh);
	if (next)
		walk_next(fs, &ns);
out_unref:
	grave_empty(fs, &g);
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
	wd = wdir_find(fs, parent, qc_now_ns(), &g);
	begin = !wd;
	if (!wd || (i = qc_walk_find_name(wd, name)) == SIZE_MAX)
		goto out_unlock;
	if (wd->slots[i] == &passed) {
		/* Opened again: a new pass over the directory, which the
		 * next read starts from its listing as it is now. */
		wdir_retire(fs, wd, &g);
		goto out_unlock;
	}
	wd->refs++;
	entered = wd->ahead;
	if (wd->slots[i] && wd->slots[i] != &passed && !wd->slots[i]->ready)
		/* A round trip on the walker's path, as a request's wait. */
		qc_stat_inc(&fs->stats, QC_STAT_WALK_WAITS);
	while (wd->slots[i] && wd->slots[i] != &passed &&
	       !wd->slots[i]->ready && !wd->gone)
		pthread_cond_wait(&w->cond, &w->lock);
	if (!wd->gone) {
		struct slot *s = wd->slots[i];

		if (s && s != &passed && s->ready) {
			took = true;
			a = s->attr;
			data = s->data;
			len = s->len;
			uncharge(fs, wd, s);
			free(s);
			wd->slots[i] = &passed;
		}
		advance(fs, wd, i);
		caller = same_caller(wd);
		if (caller) {
			top_up(fs, wd, &list);
			next = next_due(fs, wd, &ns);
		}
	}
	if (wdir_put(wd))
		g.w[g.n++] = wd;
out_unlock:
	pthread_mutex_unlock(&w->lock);
	send_batches(fs, list);
	if (entered)
		vote_entry(fs, parent);
	if (next)
		walk_next(fs, &ns);
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
	grave_empty(fs, &g);
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
			wdir_retire(fs, w->dirs[k], &g);
	grave_empty(fs, &g);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
	fs->walk = NULL;
}
