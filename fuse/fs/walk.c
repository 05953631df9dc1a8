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
#include "log.h"
#include "protocol.h"

/*
 * Orders of a walker's opens: the directory's (find, tar, grep -r), its
 * names' (rsync, ls), its inode numbers' (cp, which sorts by inode on
 * file systems where that reads faster).
 */
enum order { BY_LISTING, BY_NAME, BY_INO, ORDERS };

static const char *const order_names[ORDERS] = { "listing", "name", "inode" };

/* Files of each order the first FETCH of a walk asks for. */
#define PROBE 2u

/* A file of a followed directory the walk asked for.  Walk lock. */
struct slot {
	bool ready;             /* the contents are in (else asked) */
	bool unwanted;          /* asked, then given up: dropped on arrival */
	uint64_t charge;        /* its part of qc_walk.held */
	struct qft_attr attr;   /* ready: what the bytes came with */
	uint8_t *data;          /* ready: the whole file (malloc, or NULL) */
	uint32_t len;
};

/* What a slot holds once its file was opened or passed: never asked
 * again. */
static struct slot passed;

/* A directory being walked. */
struct wdir {
	/* Immutable once in the table. */
	struct qn_node *dir;    /* holds a node reference */
	struct qc_dir_walk_ent *ents; /* listing order */
	size_t n;
	/* The orders a walker may follow: ents indexes in that order, and
	 * rank[o][i] the place of ents index i in it (NULL for listing
	 * order, where both are i). */
	uint32_t *perm[ORDERS];
	uint32_t *rank[ORDERS];
	bool has_cred;          /* the caller the FETCHes read as */
	struct qft_cred cred;
	/* Walk lock. */
	enum order order;       /* the order followed */
	bool probing;           /* the first FETCH asks for the next files in
				 * every order; the next open tells which */
	size_t last;            /* ents index of the file opened last */
	size_t pos;             /* place (in the order followed) after it */
	size_t ask;             /* place of the next file to ask for */
	struct slot **slots;    /* by ents index: NULL, &passed, or one */
	uint64_t used_ns;
	uint64_t held;          /* its part of qc_walk.held */
	uint64_t credit;        /* how much it may hold: grows as the walker
				 * opens files in the order followed */
	unsigned batches;       /* FETCHes sent: each may ask for more */
	unsigned refs;          /* the table's, FETCHes', waiters' */
	bool gone;              /* out of the table */
};

struct qc_walk {
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* with the lock: a FETCH was answered */
	struct wdir *dirs[QC_WALK_DIRS];  /* lock */
	uint64_t held;          /* lock: bytes asked for or held, all dirs */
};

/* Walks retired under the lock, freed after it (wdir_free). */
struct grave {
	struct wdir *w[QC_WALK_DIRS + 2];
	unsigned n;
};

/* One FETCH in flight; the completion's. */
struct batch {
	struct qc_fs *fs;
	struct wdir *wd;        /* holds a reference */
	struct batch *next;     /* the sender's list, until sent */
	uint64_t seq;           /* the cache's event count before sending */
	size_t n;
	uint32_t idx[QC_WALK_NAMES];
};

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

static void wdir_free(struct qc_fs *fs, struct wdir *wd)
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
		wdir_free(fs, g->w[k]);
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

	for (k = 0; k < QC_WALK_DIRS && w->dirs[k]; k++)
		if (w->dirs[k]->used_ns < w->dirs[victim]->used_ns)
			victim = k;
	if (k == QC_WALK_DIRS) {
		wdir_retire(fs, w->dirs[victim], g);
		k = victim;
	}
	w->dirs[k] = wd;
}

/* The ents index of `name` in wd, or SIZE_MAX. */
static size_t find_name(const struct wdir *wd, const char *name)
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

static const struct qc_dir_walk_ent *sort_base;

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
static struct wdir *wdir_new(struct qc_fs *fs, struct qn_node *dir)
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

/*
 * Lock held: file i (ents index) is opened or read now.  Follows the
 * order the walker shows (the one followed while i comes next in it,
 * else one in which i does), gives up the files it passed, and marks i
 * passed.
 */
static void advance(struct qc_fs *fs, struct wdir *wd, size_t i)
{
	bool first = wd->pos == 0 && wd->ask == 0;
	size_t p;

	if (!first && place(wd, i) != place(wd, wd->last) + 1) {
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
static void probe(struct qc_fs *fs, struct wdir *wd, struct batch **out)
{
	struct batch *b = NULL;
	uint64_t bytes = 0;
	size_t count = 0;

	wd->probing = false;
	/* A small directory is fetched whole: whatever the order, the
	 * walker finds its files here. */
	for (size_t i = 0; i < wd->n && count <= QC_WALK_WHOLE_FILES; i++)
		if (may_ask(fs, wd, i)) {
			count++;
			bytes += wd->ents[i].attr.size + 1;
		}
	if (count && count <= QC_WALK_WHOLE_FILES &&
	    bytes <= QC_WALK_WHOLE_BYTES &&
	    fs->walk->held + bytes <= fs->walkahead) {
		if (!(b = batch_new(fs, wd, out)))
			return;
		for (size_t i = 0; i < wd->n; i++)
			if (may_ask(fs, wd, i) && !batch_add(fs, wd, b, i))
				return;
		if (wd->credit < bytes)
			wd->credit = bytes;
		wd->ask = wd->n;
		return;
	}
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
			    w->dirs[k]->held &&
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
		wdir_free(fs, b->wd);
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
	size_t i;

	if (!w || qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return;
	pthread_mutex_lock(&w->lock);
	wd = wdir_find(fs, parent, qc_now_ns(), &g);
	if (wd) {
		/* Its open advanced the walk already. */
		if (same_caller(wd) && !at_open)
			top_up(fs, wd, &list);
		goto out_unlock;
	}
	if (at_open && !walking_elsewhere(fs, parent, qc_now_ns()))
		goto out_unlock;
	pthread_mutex_unlock(&w->lock);
	fresh = wdir_new(fs, parent);
	if (!fresh)
		goto out_unref;
	i = find_name(fresh, name);
	pthread_mutex_lock(&w->lock);
	if (i == SIZE_MAX || wdir_find(fs, parent, qc_now_ns(), &g))
		goto out_unlock;
	wdir_insert(fs, fresh, &g);
	wd = fresh;
	fresh = NULL;
	advance(fs, wd, i);
	top_up(fs, wd, &list);
out_unlock:
	pthread_mutex_unlock(&w->lock);
	send_batches(fs, list);
	if (fresh)
		wdir_free(fs, fresh);
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
	struct qft_attr a;
	struct wdir *wd;
	uint8_t *data = NULL;
	uint32_t len = 0;
	bool took = false, caller = false, ok = false, begin = false;
	size_t i;

	if (!w || (flags & O_ACCMODE) != O_RDONLY ||
	    (flags & (O_TRUNC | O_DIRECT)) ||
	    qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return false;
	pthread_mutex_lock(&w->lock);
	wd = wdir_find(fs, parent, qc_now_ns(), &g);
	begin = !wd;
	if (!wd || (i = find_name(wd, name)) == SIZE_MAX)
		goto out_unlock;
	if (wd->slots[i] == &passed) {
		/* Opened again: a new pass over the directory, which the
		 * next read starts from its listing as it is now. */
		wdir_retire(fs, wd, &g);
		goto out_unlock;
	}
	wd->refs++;
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
		if (caller)
			top_up(fs, wd, &list);
	}
	if (wdir_put(wd))
		g.w[g.n++] = wd;
out_unlock:
	pthread_mutex_unlock(&w->lock);
	send_batches(fs, list);
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
