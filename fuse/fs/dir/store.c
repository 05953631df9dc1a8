// SPDX-License-Identifier: MIT
/*
 * The directory cache's store: listings and their entries by node and by
 * inode, the ring of events that tells a fetch from a change that raced
 * with it, the LRU and eviction under the cap, and the queue of work for
 * the worker (notify.c).  See dircache.h and internal.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/dir/internal.h"
#include "fs/fs.h"
#include "fs/hints.h"
#include "log.h"
#include "fs/node.h"
#include "protocol.h"

uint32_t qc_dir_name_hash(const char *name)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	return h;
}

size_t qc_dir_ptr_bucket(const struct qc_dircache *dc, const void *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (dc->nbuckets - 1);
}

size_t qc_dir_ino_bucket(const struct qc_dircache *dc, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (dc->nbuckets - 1);
}

/* Completion of a request sent without waiting whose outcome the next
 * request on the same handle shows (an OPENDIR before a READDIR). */
void qc_dir_ignore_reply(void *ctx, int err, struct qc_reply *rep)
{
}

/* ---- events ---- */

void qc_dir_record(struct qc_dircache *dc, struct qn_node *dir, uint64_t dino,
		   bool all)
{
	struct event *ev = &dc->ring[++dc->seq % RING];

	ev->seq = dc->seq;
	ev->dir = dir;
	ev->dino = dino;
	ev->all = all;
}

/*
 * Whether an answer about directory `dir` (server inode `dino`, 0 when
 * unknown) fetched since event `seq` may miss a change: an event about
 * it since, or too many events to tell.  With `any_local`, every change
 * the client made counts (a SCAN covers more directories than it can
 * name).
 */
bool qc_dir_spoiled(const struct qc_dircache *dc, uint64_t seq,
		    const struct qn_node *dir, uint64_t dino, bool any_local)
{
	if (dc->seq - seq >= RING)
		return dc->seq != seq;
	for (uint64_t s = seq + 1; s <= dc->seq; s++) {
		const struct event *ev = &dc->ring[s % RING];

		if (ev->all || (ev->dir && (any_local || ev->dir == dir)) ||
		    (dino && ev->dino == dino))
			return true;
	}
	return false;
}

/* The live link's generation; 0 when there is none, or no connection at
 * all (the unit test drives the cache without one). */
uint64_t qc_dir_link_gen(struct qc_fs *fs)
{
	return fs->conn ? qc_conn_gen(fs->conn) : 0;
}

void qc_dir_fetch_begin(struct qc_fs *fs, struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	fb->xgen = qc_hint_xattr_gen(fs);
	fb->start_ns = qc_now_ns();
	fb->gen = qc_dir_link_gen(fs);
	fb->seq = 0;
	if (!dc)
		return;
	pthread_mutex_lock(&dc->lock);
	fb->seq = dc->seq;
	pthread_mutex_unlock(&dc->lock);
}

/* ---- listings (listing lock held) ---- */

struct dent *qc_dir_dent_find(const struct listing *l, const char *name,
			      uint32_t h)
{
	if (!l->tabsize)
		return NULL;
	for (struct dent *e = l->tab[h & (l->tabsize - 1)]; e; e = e->hnext)
		if (e->hash == h && strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

/* Grows the name hash to at least the number of names; 0 or -ENOMEM. */
static int tab_grow(struct listing *l)
{
	size_t ns = l->tabsize ? l->tabsize : 16;
	struct dent **nt;

	while (ns < l->live + 1)
		ns *= 2;
	if (ns == l->tabsize)
		return 0;
	nt = calloc(ns, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	for (size_t i = 0; i < l->nslots; i++) {
		struct dent *e = l->slots[i];

		if (!e)
			continue;
		e->hnext = nt[e->hash & (ns - 1)];
		nt[e->hash & (ns - 1)] = e;
	}
	free(l->tab);
	l->tab = nt;
	l->tabsize = ns;
	return 0;
}

/* Drops the holes removals left, once they outnumber the names. */
static void compact(struct listing *l)
{
	size_t j = 0;

	if (l->nslots - l->live <= l->live + 16)
		return;
	for (size_t i = 0; i < l->nslots; i++) {
		if (!l->slots[i])
			continue;
		l->slots[j] = l->slots[i];
		l->slots[j]->slot = j;
		j++;
	}
	l->nslots = j;
}

void qc_dir_unstale(struct listing *l, const char *name)
{
	for (unsigned i = 0; i < l->nstale; i++) {
		if (strcmp(l->stale[i], name) == 0) {
			free(l->stale[i]);
			l->stale[i] = l->stale[--l->nstale];
			return;
		}
	}
}

bool qc_dir_is_stale(const struct listing *l, const char *name)
{
	for (unsigned i = 0; i < l->nstale; i++)
		if (strcmp(l->stale[i], name) == 0)
			return true;
	return false;
}

/* Adds or replaces `name`; 0 or -ENOMEM (the listing is then unchanged
 * and the caller must drop it: it would be missing a name). */
int qc_dir_dent_put(struct qc_dircache *dc, struct listing *l,
		    const char *name, const struct qft_attr *a,
		    uint64_t fetched_ns)
{
	uint32_t h = qc_dir_name_hash(name);
	struct dent *e = qc_dir_dent_find(l, name, h);
	size_t len;

	if (e) {
		if (e->attr.ino != a->ino ||
		    ((e->attr.mode ^ a->mode) & QFT_S_IFMT))
			l->changes++;
		e->attr = *a;
		e->fetched_ns = fetched_ns;
		return 0;
	}
	if (l->nslots == l->slots_cap) {
		size_t nc = l->slots_cap ? l->slots_cap * 2 : 16;
		struct dent **ns = realloc(l->slots, nc * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		l->slots = ns;
		l->slots_cap = nc;
	}
	len = strlen(name);
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	memcpy(e->name, name, len + 1);
	e->hash = h;
	e->attr = *a;
	e->fetched_ns = fetched_ns;
	e->slot = l->nslots;
	l->live++;
	if (tab_grow(l) < 0) {
		l->live--;
		free(e);
		return -ENOMEM;
	}
	l->slots[l->nslots++] = e;
	l->changes++;
	e->hnext = l->tab[h & (l->tabsize - 1)];
	l->tab[h & (l->tabsize - 1)] = e;
	dc->nentries++;
	return 0;
}

void qc_dir_dent_del(struct qc_dircache *dc, struct listing *l,
		     const char *name)
{
	uint32_t h = qc_dir_name_hash(name);
	struct dent **pp;

	if (!l->tabsize)
		return;
	for (pp = &l->tab[h & (l->tabsize - 1)]; *pp; pp = &(*pp)->hnext) {
		struct dent *e = *pp;

		if (e->hash != h || strcmp(e->name, name) != 0)
			continue;
		*pp = e->hnext;
		l->slots[e->slot] = NULL;
		free(e);
		l->live--;
		l->changes++;
		dc->nentries--;
		compact(l);
		return;
	}
}

struct listing *qc_dir_find_listing(const struct qc_dircache *dc,
				    const struct qn_node *dir)
{
	struct listing *l = dc->by_node[qc_dir_ptr_bucket(dc, dir)];

	for (; l; l = l->nnext)
		if (l->dir == dir)
			return l;
	return NULL;
}

static void lru_unlink(struct listing *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
}

static void lru_front(struct qc_dircache *dc, struct listing *l)
{
	l->next = dc->lru.next;
	l->prev = &dc->lru;
	dc->lru.next->prev = l;
	dc->lru.next = l;
}

void qc_dir_touch(struct qc_dircache *dc, struct listing *l)
{
	if (dc->lru.next == l)
		return;
	lru_unlink(l);
	lru_front(dc, l);
}

static void ino_unlink(struct qc_dircache *dc, struct listing *l)
{
	struct listing **pp = &dc->by_ino[qc_dir_ino_bucket(dc, l->dino)];

	for (; *pp; pp = &(*pp)->inext) {
		if (*pp == l) {
			*pp = l->inext;
			return;
		}
	}
}

static void ino_link(struct qc_dircache *dc, struct listing *l)
{
	struct listing **b = &dc->by_ino[qc_dir_ino_bucket(dc, l->dino)];

	l->inext = *b;
	*b = l;
}

/*
 * Work for the worker, counted but not queued yet (listing lock held).
 * Past WORK_MAX it is dropped (NULL): the kernel's caches then expire by
 * their timeouts, and a watch not given back ends when the server evicts
 * it.
 */
static struct work *work_new(struct qc_fs *fs, enum work_kind kind,
			     struct qn_node *dir, uint64_t ino,
			     const char *name)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	size_t len = name ? strlen(name) : 0;
	struct work *w;

	if (dc->nwork >= WORK_MAX || dc->work_stop ||
	    (kind != WORK_UNWATCH && !fs->se))
		return NULL;
	w = malloc(sizeof(*w) + len + 1);
	if (!w)
		return NULL;
	w->next = NULL;
	w->kind = kind;
	w->dir = dir;
	w->ino = ino;
	w->names = NULL;
	w->nnames = 0;
	memcpy(w->name, name ? name : "", len + 1);
	if (dir)
		qn_ref(&fs->nodes, dir);
	dc->nwork++;
	return w;
}

/* Queues work for the worker (listing lock held) and returns it. */
struct work *qc_dir_work_add(struct qc_fs *fs, enum work_kind kind,
			     struct qn_node *dir, uint64_t ino,
			     const char *name)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct work *w = work_new(fs, kind, dir, ino, name);

	if (!w)
		return NULL;
	*dc->work_tail = w;
	dc->work_tail = &w->next;
	pthread_cond_signal(&dc->work_cond);
	return w;
}

/*
 * A leased listing goes without the client knowing what changed (its
 * watch ended, the server lost track, the link died): the kernel was told
 * it may keep those names for entry_timeout, so they are invalidated, all
 * of them, by the worker.  When the link died, not before a new one is
 * up: until then what the kernel was told was true when the lease held,
 * nothing better can be asked for, and it answers as long as it was told
 * (docs/reliability.md, "With the link down"); once there is a server to
 * ask, a change made meanwhile must be seen.  Listing lock held.
 */
void qc_dir_work_add_names(struct qc_fs *fs, const struct listing *l)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	size_t size = 0, pos = 0;
	struct work *w;
	char *names;

	if (!l->leased || !l->live)
		return;
	for (size_t i = 0; i < l->nslots; i++)
		if (l->slots[i])
			size += strlen(l->slots[i]->name) + 1;
	names = malloc(size);
	if (!names)
		return;
	for (size_t i = 0; i < l->nslots; i++) {
		size_t len;

		if (!l->slots[i])
			continue;
		len = strlen(l->slots[i]->name) + 1;
		memcpy(names + pos, l->slots[i]->name, len);
		pos += len;
	}
	w = work_new(fs, WORK_INVAL_NAMES, l->dir, 0, NULL);
	if (!w) {
		free(names);
		return;
	}
	w->names = names;
	w->nnames = l->live;
	if (qc_dir_link_gen(fs)) {
		/* The worker takes the lock before it looks at a new item. */
		*dc->work_tail = w;
		dc->work_tail = &w->next;
	} else {
		*dc->held_tail = w;
		dc->held_tail = &w->next;
	}
	pthread_cond_signal(&dc->work_cond);
}

/* Frees a listing's contents (not the node reference). */
static void listing_free(struct listing *l)
{
	for (size_t i = 0; i < l->nslots; i++)
		free(l->slots[i]);
	for (unsigned i = 0; i < l->nstale; i++)
		free(l->stale[i]);
	free(l->slots);
	free(l->tab);
	free(l->subs.slot);
	free(l);
}

/*
 * Takes `l` out of the cache and frees it.  A lease it held is given back
 * by the caller (UNWATCH) where the server still holds it.
 */
void qc_dir_listing_drop(struct qc_fs *fs, struct listing *l)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing **pp = &dc->by_node[qc_dir_ptr_bucket(dc, l->dir)];

	for (; *pp; pp = &(*pp)->nnext) {
		if (*pp == l) {
			*pp = l->nnext;
			break;
		}
	}
	ino_unlink(dc, l);
	lru_unlink(l);
	dc->nentries -= l->live;
	/* Listing lock, then the table lock: the one order. */
	qn_unref(&fs->nodes, l->dir);
	listing_free(l);
}

/* Drops `l` and gives its lease back: the server still watches it. */
void qc_dir_listing_drop_unwatch(struct qc_fs *fs, struct listing *l)
{
	if (l->leased)
		qc_dir_work_add(fs, WORK_UNWATCH, NULL, l->dino, NULL);
	qc_dir_listing_drop(fs, l);
}

/* The listing of `dir` while its names are trusted; an expired one is
 * dropped on the way. */
struct listing *qc_dir_valid_listing(struct qc_fs *fs, struct qn_node *dir,
				     uint64_t now)
{
	struct listing *l = qc_dir_find_listing(qc_dir_of(fs), dir);

	if (!l)
		return NULL;
	if (l->gen != qc_dir_link_gen(fs)) {
		/* Another link, or none: its lease, if any, ended with its
		 * link, and the ALL that says so may still be on its way. */
		qc_dir_work_add_names(fs, l);
		qc_dir_listing_drop(fs, l);
		return NULL;
	}
	if (!l->leased && now >= l->names_until) {
		struct qc_dircache *dc = qc_dir_of(fs);
		size_t i = qc_dir_ptr_bucket(dc, dir) & (PROBES - 1);

		/* In use after it expired: the next miss reads it again
		 * (qc_dir_busy) rather than looking names up one by one. */
		dc->probes[i].dir = dir;
		dc->probes[i].misses = 1;
		dc->probes[i].since = now;
		qc_dir_listing_drop(fs, l);
		return NULL;
	}
	return l;
}

/* Makes room for `l` (already counted): least recently used first. */
void qc_dir_evict(struct qc_fs *fs, struct listing *keep)
{
	struct qc_dircache *dc = qc_dir_of(fs);

	while (dc->nentries > dc->max_entries && dc->lru.prev != &dc->lru) {
		struct listing *victim = dc->lru.prev;

		if (victim == keep) {
			if (victim->prev == &dc->lru)
				break;
			victim = victim->prev;
		}
		qft_debug("dircache: evicting the listing of inode %llu "
			  "(%zu names; %zu cached, at most %zu)",
			  (unsigned long long)victim->dino, victim->live,
			  dc->nentries, dc->max_entries);
		atomic_fetch_add(&dc->evictions, 1);
		qc_dir_listing_drop_unwatch(fs, victim);
	}
}

/* A new, empty listing of `dir` in the cache (replacing any), holding a
 * node reference; NULL when out of memory. */
struct listing *qc_dir_listing_new(struct qc_fs *fs, struct qn_node *dir,
				   uint64_t dino, uint64_t pino,
				   uint64_t names_until, uint64_t gen)
{
	struct qc_dircache *dc = qc_dir_of(fs);
	struct listing *l, *old = qc_dir_find_listing(dc, dir);
	struct listing **b;

	if (old)
		qc_dir_listing_drop(fs, old);
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	qn_ref(&fs->nodes, dir);
	l->dir = dir;
	l->dino = dino;
	l->pino = pino;
	l->names_until = names_until;
	l->gen = gen;
	l->id = ++dc->next_id;
	b = &dc->by_node[qc_dir_ptr_bucket(dc, dir)];
	l->nnext = *b;
	*b = l;
	ino_link(dc, l);
	lru_front(dc, l);
	return l;
}
/* Every other name of inode `ino` has another link count now. */
void qc_dir_forget_ino_attrs(struct qc_dircache *dc, uint64_t ino)
{
	for (struct listing *l = dc->lru.next; l != &dc->lru; l = l->next)
		for (size_t i = 0; i < l->nslots; i++)
			if (l->slots[i] && l->slots[i]->attr.ino == ino)
				l->slots[i]->fetched_ns = 0;
}


/* A name of listing `l` changed on the server (or is no longer known):
 * asked for again.  -1 when `l` was dropped instead (too many). */
int qc_dir_mark_stale(struct qc_fs *fs, struct listing *l, const char *name)
{
	char *dup;

	if (qc_dir_is_stale(l, name))
		return 0;
	dup = l->nstale < STALE_MAX ? strdup(name) : NULL;
	if (!dup) {
		qc_dir_listing_drop_unwatch(fs, l);
		return -1;
	}
	l->stale[l->nstale++] = dup;
	return 0;
}

/*
 * Entries this client made with predicted attributes (inode 0: a
 * pipelined CREATE, qc_dir_note_entry) take what their node knows once
 * the server answered: its inode and type, with the attributes asked
 * for again (writes may have followed).  A name without a node any more
 * was refused by the server (the node was unlinked) or answered and
 * forgotten by the kernel: it is asked for again (stale).  Returns the
 * number still waiting for the server's answer, or -1 when `l` was
 * dropped (too many stale names).  Listing lock held.
 */
int qc_dir_resolve_predicted(struct qc_fs *fs, struct listing *l)
{
	struct dent **pending = NULL;
	size_t n = 0, cap = 0;
	int waiting = 0;

	for (size_t i = 0; i < l->nslots; i++) {
		struct dent **np;

		if (!l->slots[i] || l->slots[i]->attr.ino)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			np = realloc(pending, cap * sizeof(*np));
			if (!np) {
				free(pending);
				qc_dir_listing_drop_unwatch(fs, l);
				return -1;
			}
			pending = np;
		}
		pending[n++] = l->slots[i];
	}
	for (size_t i = 0; i < n; i++) {
		struct dent *e = pending[i];
		struct qn_node *node = qn_find_ref(&fs->nodes, l->dir, e->name);
		struct qft_attr a;

		if (node && qn_get_attr(&fs->nodes, node, &a) && a.ino &&
		    (a.mode & QFT_S_IFMT) == (e->attr.mode & QFT_S_IFMT)) {
			if (e->attr.ino != a.ino)
				l->changes++;
			e->attr = a;
			e->fetched_ns = 0;
		} else if (node) {
			waiting++;
		} else {
			char name[QFT_MAX_NAME + 1];

			memcpy(name, e->name, strlen(e->name) + 1);
			qc_dir_dent_del(qc_dir_of(fs), l, name);
			if (qc_dir_mark_stale(fs, l, name) < 0) {
				free(pending);
				return -1;
			}
		}
		if (node)
			qn_unref(&fs->nodes, node);
	}
	free(pending);
	return waiting;
}
