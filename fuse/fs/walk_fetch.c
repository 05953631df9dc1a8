// SPDX-License-Identifier: MIT
/*
 * Walk-ahead's table of walks and their FETCHes (walk.h): what the
 * walks of walk.c and walk_ahead.c hold, and asking the server for it.
 */
#include <errno.h>
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

struct slot qc_walk_passed;

/* Lock held: slot s of wd no longer counts against the budgets. */
void qc_walk_uncharge(struct qc_fs *fs, struct wdir *wd, struct slot *s)
{
	fs->walk->held -= s->charge;
	wd->held -= s->charge;
}

/* Lock held: gives slot i up; its bytes, if any, were never read. */
void qc_walk_slot_drop(struct qc_fs *fs, struct wdir *wd, size_t i)
{
	struct slot *s = wd->slots[i];

	if (!s || s == &qc_walk_passed)
		return;
	if (!s->ready) {
		/* The FETCH's completion frees it. */
		s->unwanted = true;
		return;
	}
	qc_walk_uncharge(fs, wd, s);
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
void qc_walk_retire(struct qc_fs *fs, struct wdir *wd, struct grave *g)
{
	struct qc_walk *w = fs->walk;

	for (unsigned k = 0; k < QC_WALK_DIRS; k++)
		if (w->dirs[k] == wd)
			w->dirs[k] = NULL;
	wd->gone = true;
	for (size_t i = 0; i < wd->n; i++)
		qc_walk_slot_drop(fs, wd, i);
	if (--wd->refs == 0)
		g->w[g->n++] = wd;
}

void qc_walk_bury(struct qc_fs *fs, struct grave *g)
{
	for (unsigned k = 0; k < g->n; k++)
		qc_walk_free(fs, g->w[k]);
	g->n = 0;
}

/* Lock held: drops a reference; true when the caller must free wd. */
bool qc_walk_put(struct wdir *wd)
{
	return --wd->refs == 0;
}

/*
 * Lock held: the walk of `dir`, or NULL.  Walks left untouched too long
 * are retired on the way.
 */
struct wdir *qc_walk_find(struct qc_fs *fs, struct qn_node *dir,
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
			qc_walk_retire(fs, wd, g);
		}
	}
	return found;
}

/* Lock held: puts a new walk in the table, retiring the least recently
 * used when full. */
void qc_walk_insert(struct qc_fs *fs, struct wdir *wd, struct grave *g)
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
		qc_walk_retire(fs, w->dirs[victim], g);
		k = victim;
	}
	w->dirs[k] = wd;
}

/* Whether the calling thread acts for the caller wd's FETCHes read as. */
bool qc_walk_same_caller(const struct wdir *wd)
{
	const struct qft_cred *c = qc_call_caller();

	if (!c || !wd->has_cred)
		return !c && !wd->has_cred;
	return c->uid == wd->cred.uid && c->gid == wd->cred.gid &&
	       c->ngroups == wd->cred.ngroups &&
	       memcmp(c->groups, wd->cred.groups,
		      c->ngroups * sizeof(c->groups[0])) == 0;
}

/* Lock held: whether file i may be asked for now; charges it if so. */
bool qc_walk_may_ask(struct qc_fs *fs, struct wdir *wd, size_t i)
{
	const struct qc_dir_walk_ent *e = &wd->ents[i];

	return !wd->slots[i] && e->trusted &&
	       e->attr.size <= QC_WALK_FILE_MAX;
}

/* Lock held: a new FETCH of wd, prepended to *out; NULL when out of
 * memory. */
struct batch *qc_walk_batch_new(struct qc_fs *fs, struct wdir *wd,
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
bool qc_walk_batch_add(struct qc_fs *fs, struct wdir *wd, struct batch *b,
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

/* Lock held: what asking for all of wd's small files would hold, or 0
 * when they are too many, more than `limit` bytes, or none. */
uint64_t qc_walk_whole_bytes(struct qc_fs *fs, struct wdir *wd,
			    uint64_t limit)
{
	uint64_t bytes = 0;
	size_t count = 0;

	for (size_t i = 0; i < wd->n && count <= QC_WALK_WHOLE_FILES; i++)
		if (qc_walk_may_ask(fs, wd, i)) {
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
bool qc_walk_fetch_whole(struct qc_fs *fs, struct wdir *wd, uint64_t limit,
			uint64_t slack, struct batch **out)
{
	struct batch *b;
	uint64_t bytes = qc_walk_whole_bytes(fs, wd, limit);

	if (!bytes || fs->walk->held + bytes + slack > fs->walkahead)
		return false;
	if (wd->credit < bytes)
		wd->credit = bytes;
	wd->ask = wd->n;
	if (!(b = qc_walk_batch_new(fs, wd, out)))
		return true;
	for (size_t i = 0; i < wd->n; i++)
		if (qc_walk_may_ask(fs, wd, i) && !qc_walk_batch_add(fs, wd, b, i))
			break;
	return true;
}

/* Lock held: whether file i, met at place p of order o, is met before
 * in another order of wd->heads (at a nearer place, or at the same one
 * in an order taken before o): it is counted once. */
static bool met_before(const struct wdir *wd, unsigned o, size_t p, size_t i)
{
	for (unsigned q = 0; q < ORDERS; q++) {
		size_t pq;

		if (q == o || !(wd->heads & (1u << q)))
			continue;
		pq = qc_walk_place_in(wd, q, i);
		if (pq < p || (pq == p && q < o))
			return true;
	}
	return false;
}

/*
 * Lock held: wd's first small files in each order of wd->heads, place by
 * place in turn, as many as a FETCH names up to `limit` bytes: their
 * bytes; with b, each goes into it (until memory runs out).
 */
static uint64_t head(struct qc_fs *fs, struct wdir *wd, uint64_t limit,
		     struct batch *b)
{
	uint64_t bytes = 0;
	size_t count = 0;

	for (size_t p = 0; p < wd->n; p++) {
		for (unsigned o = 0; o < ORDERS; o++) {
			size_t i = qc_walk_at_in(wd, o, p);
			uint64_t cost = wd->ents[i].attr.size + 1;

			if (!(wd->heads & (1u << o)) ||
			    met_before(wd, o, p, i) ||
			    !qc_walk_may_ask(fs, wd, i))
				continue;
			if (count == QC_WALK_NAMES || bytes + cost > limit ||
			    (b && !qc_walk_batch_add(fs, wd, b, i)))
				return bytes;
			bytes += cost;
			count++;
		}
	}
	return bytes;
}

uint64_t qc_walk_head_bytes(struct qc_fs *fs, struct wdir *wd,
			    uint64_t limit)
{
	return head(fs, wd, limit, NULL);
}

bool qc_walk_fetch_head(struct qc_fs *fs, struct wdir *wd, uint64_t limit,
			uint64_t slack, struct batch **out)
{
	uint64_t bytes = head(fs, wd, limit, NULL);
	struct batch *b;

	if (!bytes || fs->walk->held + bytes + slack > fs->walkahead)
		return false;
	if (wd->credit < bytes)
		wd->credit = bytes;
	/* Asked for in more orders than the walker follows: the rest is
	 * asked for from its first file on, passing over these. */
	wd->ask = 0;
	if (!(b = qc_walk_batch_new(fs, wd, out)))
		return true;
	head(fs, wd, limit, b);
	return true;
}

/* Lock held: frees the slots of a batch that was never answered. */
static void batch_fail(struct qc_fs *fs, struct batch *b, size_t from)
{
	for (size_t k = from; k < b->n; k++) {
		struct slot *s = b->wd->slots[b->idx[k]];

		qc_walk_uncharge(fs, b->wd, s);
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
			qc_walk_uncharge(fs, b->wd, s);
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
	dead = qc_walk_put(b->wd);
	pthread_mutex_unlock(&w->lock);
	if (dead)
		qc_walk_free(fs, b->wd);
	free(b);
}

/* Sends the FETCHes of `list` (no lock held). */
void qc_walk_send(struct qc_fs *fs, struct batch *list)
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
