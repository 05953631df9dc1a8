// SPDX-License-Identifier: MIT
/* The directory cache (see dircache.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/hints.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"
#include "ops/stats.h"

/* Events remembered to tell whether a fetch raced with a change. */
#define RING            1024u
/* Names of one listing changed on the server and not read again; past
 * this the listing is dropped. */
#define STALE_MAX       16u
/* A readdir of a directory whose parent was listed this recently is a
 * tree walk (find, du, ls -R, cp -r, tar, rsync). */
#define WALK_NS         (2ull * 1000000000u)
#define NEVER           UINT64_MAX
/* Directories whose lookups missed recently (see busy_dir). */
#define PROBES          256u

/* One name of a listing. */
struct dent {
	struct dent *hnext;     /* listing's name hash chain */
	size_t slot;            /* index in the listing's slots */
	uint32_t hash;
	struct qft_attr attr;
	/* CLOCK_MONOTONIC ns when the request that brought `attr` was sent;
	 * 0 = the attributes are not known (a rename changed the ctime) */
	uint64_t fetched_ns;
	char name[];
};

/* A complete listing of one directory.  Every field: listing lock. */
struct listing {
	struct qn_node *dir;    /* the key; holds a node reference */
	uint64_t dino;          /* the directory's server inode; 0 unknown */
	uint64_t pino;          /* its parent's, for ".." */
	struct dent **slots;    /* in listing order; NULL where removed */
	size_t nslots, slots_cap;
	size_t live;            /* names present */
	struct dent **tab;      /* name hash buckets */
	size_t tabsize;         /* a power of two */
	uint64_t names_until;   /* CLOCK_MONOTONIC ns; NEVER under a lease */
	bool leased;
	bool made_here;         /* by this client's MKDIR (qc_dir_leased_absent) */
	bool lease_asked;       /* its READDIR WATCH is not answered yet */
	char *stale[STALE_MAX]; /* names changed on the server since */
	unsigned nstale;
	uint64_t walked_ns;     /* last served to a readdir (0 = never) */
	bool scanned;           /* came from a SCAN */
	uint64_t id;            /* tells a listing from its successor */
	/* The link it was read on: a listing is not trusted on another (a
	 * lost link ended its lease, and nothing is known of what happened
	 * meanwhile), nor while there is none. */
	uint64_t gen;
	struct listing *nnext;  /* by-node hash chain */
	struct listing *inext;  /* by-inode hash chain */
	struct listing *prev, *next; /* LRU, most recent first */
};

/* Work for the worker thread: what must not be done on the thread that
 * found it (the connection's reader, or a holder of the listing lock). */
enum work_kind {
	WORK_INVAL_ENTRY,       /* the kernel's dentry `name` in `dir`, and
				 * what it caches of the object it named */
	WORK_INVAL_INODE,       /* the kernel's attributes and pages of dir */
	WORK_INVAL_NAMES,       /* the kernel's dentries of every name in
				 * `names` (nnames of them) in dir */
	WORK_UNWATCH,           /* give the server's watch on `ino` back */
};

struct work {
	struct work *next;
	enum work_kind kind;
	struct qn_node *dir;    /* holds a node reference */
	uint64_t ino;
	char *names;            /* WORK_INVAL_NAMES: NUL-separated, owned */
	size_t nnames;
	char name[];
};

#define WORK_MAX 4096u

/* A change that may have raced with a fetch: the client's own change of
 * a directory (dir), or the server's notice about one (dino), or all. */
struct event {
	uint64_t seq;
	struct qn_node *dir;
	uint64_t dino;
	bool all;
};

struct qc_dircache {
	pthread_mutex_t lock;   /* the listing lock: every field below */
	size_t max_entries;
	size_t nentries;        /* names over all listings */
	struct listing **by_node, **by_ino;
	size_t nbuckets;        /* of both, a power of two */
	struct listing lru;     /* sentinel: lru.next most recent */
	uint64_t seq;           /* events so far */
	struct event ring[RING];
	bool scan_broken;       /* the server refused a SCAN: stop trying */
	/* Lookups that found no listing, by directory (only compared,
	 * never dereferenced: a node may be gone) */
	struct {
		const struct qn_node *dir;
		unsigned misses;
		uint64_t since;
	} probes[PROBES];
	uint64_t next_id;       /* of listings */
	/* The worker: its queue (listing lock), cond and thread. */
	struct work *work_head, **work_tail;
	unsigned nwork;
	bool work_stop;
	bool worker_running;    /* only the threads that start and stop it */
	pthread_cond_t work_cond;
	pthread_cond_t lease_cond; /* a new directory's lease was answered */
	pthread_t worker;
	/* atomics, read by tests through the debug log */
	atomic_uint_fast64_t lookups_local, negatives_local, readdirs_local,
			     scans, evictions, notices;
};

/* What a readdir served from the cache hands out: a copy of a listing
 * (with "." and ".." first), so later changes do not move its cookies. */
struct snap_ent {
	const char *name;
	uint64_t ino;
	uint32_t type;
	bool attr_ok;           /* attr trusted until attr_until */
	struct qft_attr attr;
	uint64_t attr_until;
	uint64_t name_until;    /* of the name itself (name_until()) */
};

struct qc_dir_snap {
	size_t n;
	uint64_t names_until;
	uint64_t xgen;
	struct snap_ent *e;
	char *pool;             /* the names */
};

/* A listing collected from READDIR PLUS replies of one open directory. */
struct bent {
	struct qft_attr attr;
	char *name;
};

struct qc_dir_build {
	struct qc_dir_fetch fb;
	uint64_t next;          /* the cookie the next reply must start at */
	uint64_t dino, pino;
	struct bent *e;
	size_t n, cap;
	bool failed;            /* too big, or out of memory: not cached */
	bool watched;           /* every reply said WATCHED: a lease */
};

static struct qc_dircache *dc_of(struct qc_fs *fs)
{
	return fs->dirs;
}

/* Whether names may be answered from the cache at all. */
static bool cache_on(struct qc_fs *fs)
{
	return fs->dirs && fs->entry_timeout > 0;
}

static uint64_t secs_ns(double s)
{
	return s > 0 ? (uint64_t)(s * 1e9) : 0;
}

static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	return h;
}

static size_t ptr_bucket(const struct qc_dircache *dc, const void *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (dc->nbuckets - 1);
}

static size_t ino_bucket(const struct qc_dircache *dc, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (dc->nbuckets - 1);
}

static bool is_dot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* Completion of a request sent without waiting whose outcome the next
 * request on the same handle shows (an OPENDIR before a READDIR). */
static void ignore_reply(void *ctx, int err, struct qc_reply *rep)
{
}

/* ---- events ---- */

static void record(struct qc_dircache *dc, struct qn_node *dir, uint64_t dino,
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
static bool spoiled(const struct qc_dircache *dc, uint64_t seq,
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
static uint64_t link_gen(struct qc_fs *fs)
{
	return fs->conn ? qc_conn_gen(fs->conn) : 0;
}

void qc_dir_fetch_begin(struct qc_fs *fs, struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = dc_of(fs);

	fb->xgen = qc_hint_xattr_gen(fs);
	fb->start_ns = qc_now_ns();
	fb->gen = link_gen(fs);
	fb->seq = 0;
	if (!dc)
		return;
	pthread_mutex_lock(&dc->lock);
	fb->seq = dc->seq;
	pthread_mutex_unlock(&dc->lock);
}

/* ---- listings (listing lock held) ---- */

static struct dent *dent_find(const struct listing *l, const char *name,
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

static void unstale(struct listing *l, const char *name)
{
	for (unsigned i = 0; i < l->nstale; i++) {
		if (strcmp(l->stale[i], name) == 0) {
			free(l->stale[i]);
			l->stale[i] = l->stale[--l->nstale];
			return;
		}
	}
}

static bool is_stale(const struct listing *l, const char *name)
{
	for (unsigned i = 0; i < l->nstale; i++)
		if (strcmp(l->stale[i], name) == 0)
			return true;
	return false;
}

/* Adds or replaces `name`; 0 or -ENOMEM (the listing is then unchanged
 * and the caller must drop it: it would be missing a name). */
static int dent_put(struct qc_dircache *dc, struct listing *l,
		    const char *name, const struct qft_attr *a,
		    uint64_t fetched_ns)
{
	uint32_t h = name_hash(name);
	struct dent *e = dent_find(l, name, h);
	size_t len;

	if (e) {
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
	e->hnext = l->tab[h & (l->tabsize - 1)];
	l->tab[h & (l->tabsize - 1)] = e;
	dc->nentries++;
	return 0;
}

static void dent_del(struct qc_dircache *dc, struct listing *l,
		     const char *name)
{
	uint32_t h = name_hash(name);
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
		dc->nentries--;
		compact(l);
		return;
	}
}

static struct listing *find_listing(const struct qc_dircache *dc,
				    const struct qn_node *dir)
{
	struct listing *l = dc->by_node[ptr_bucket(dc, dir)];

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

static void touch(struct qc_dircache *dc, struct listing *l)
{
	if (dc->lru.next == l)
		return;
	lru_unlink(l);
	lru_front(dc, l);
}

static void ino_unlink(struct qc_dircache *dc, struct listing *l)
{
	struct listing **pp = &dc->by_ino[ino_bucket(dc, l->dino)];

	for (; *pp; pp = &(*pp)->inext) {
		if (*pp == l) {
			*pp = l->inext;
			return;
		}
	}
}

static void ino_link(struct qc_dircache *dc, struct listing *l)
{
	struct listing **b = &dc->by_ino[ino_bucket(dc, l->dino)];

	l->inext = *b;
	*b = l;
}

/*
 * Queues work for the worker (listing lock held) and returns it.  Past
 * WORK_MAX it is dropped (NULL): the kernel's caches then expire by their
 * timeouts, and a watch not given back ends when the server evicts it.
 */
static struct work *work_add(struct qc_fs *fs, enum work_kind kind,
			     struct qn_node *dir, uint64_t ino,
			     const char *name)
{
	struct qc_dircache *dc = dc_of(fs);
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
	*dc->work_tail = w;
	dc->work_tail = &w->next;
	dc->nwork++;
	pthread_cond_signal(&dc->work_cond);
	return w;
}

/*
 * A leased listing goes without the client knowing what changed (its
 * watch ended, the server lost track, the link died): the kernel was told
 * it may keep those names for entry_timeout, so they are invalidated, all
 * of them, by the worker.  Listing lock held.
 */
static void work_add_names(struct qc_fs *fs, const struct listing *l)
{
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
	/* The worker takes the lock before it looks at a new item. */
	w = work_add(fs, WORK_INVAL_NAMES, l->dir, 0, NULL);
	if (!w) {
		free(names);
		return;
	}
	w->names = names;
	w->nnames = l->live;
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
	free(l);
}

/*
 * Takes `l` out of the cache and frees it.  A lease it held is given back
 * by the caller (UNWATCH) where the server still holds it.
 */
static void listing_drop(struct qc_fs *fs, struct listing *l)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing **pp = &dc->by_node[ptr_bucket(dc, l->dir)];

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
static void listing_drop_unwatch(struct qc_fs *fs, struct listing *l)
{
	if (l->leased)
		work_add(fs, WORK_UNWATCH, NULL, l->dino, NULL);
	listing_drop(fs, l);
}

/* The listing of `dir` while its names are trusted; an expired one is
 * dropped on the way. */
static struct listing *valid_listing(struct qc_fs *fs, struct qn_node *dir,
				     uint64_t now)
{
	struct listing *l = find_listing(dc_of(fs), dir);

	if (!l)
		return NULL;
	if (l->gen != link_gen(fs)) {
		/* Another link, or none: its lease, if any, ended with its
		 * link, and the ALL that says so may still be on its way. */
		work_add_names(fs, l);
		listing_drop(fs, l);
		return NULL;
	}
	if (!l->leased && now >= l->names_until) {
		struct qc_dircache *dc = dc_of(fs);
		size_t i = ptr_bucket(dc, dir) & (PROBES - 1);

		/* In use after it expired: the next miss reads it again
		 * (busy_dir) rather than looking names up one by one. */
		dc->probes[i].dir = dir;
		dc->probes[i].misses = 1;
		dc->probes[i].since = now;
		listing_drop(fs, l);
		return NULL;
	}
	return l;
}

/* Makes room for `l` (already counted): least recently used first. */
static void evict(struct qc_fs *fs, struct listing *keep)
{
	struct qc_dircache *dc = dc_of(fs);

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
		listing_drop_unwatch(fs, victim);
	}
}

/* A new, empty listing of `dir` in the cache (replacing any), holding a
 * node reference; NULL when out of memory. */
static struct listing *listing_new(struct qc_fs *fs, struct qn_node *dir,
				   uint64_t dino, uint64_t pino,
				   uint64_t names_until, uint64_t gen)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l, *old = find_listing(dc, dir);
	struct listing **b;

	if (old)
		listing_drop(fs, old);
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
	b = &dc->by_node[ptr_bucket(dc, dir)];
	l->nnext = *b;
	*b = l;
	ino_link(dc, l);
	lru_front(dc, l);
	return l;
}

/*
 * Whether directory inode `ino` has a leased listing on the live link
 * (listing lock held).  Its own watch then reports what changes its
 * attributes -- entries made or removed, chmod, utimes -- and that notice
 * drops the listing, which ends the trust attr_until gives.
 */
static bool dir_leased(struct qc_fs *fs, uint64_t ino)
{
	struct qc_dircache *dc = dc_of(fs);
	uint64_t gen = qc_conn_gen(fs->conn);

	for (struct listing *l = dc->by_ino[ino_bucket(dc, ino)]; l;
	     l = l->inext)
		if (l->dino == ino && l->leased && l->gen == gen)
			return true;
	return false;
}

/*
 * Until when the attributes of entry `e` of `l` are fresh (attr_ok).  A
 * subdirectory's mtime and link count change without a notice to the
 * parent's watch, so under the parent's lease they hold only while the
 * subdirectory is leased itself (a SCAN leases every directory it
 * lists); the residual window is a change to it between the parent's
 * listing and its own watch, within one scan.
 */
static uint64_t attr_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e)
{
	bool dir = (e->attr.mode & QFT_S_IFMT) == QFT_S_IFDIR;

	/* What a followed symlink leads to (protocol.h) lives elsewhere:
	 * the lease covers its name only, and a directory by its own. */
	if (l->leased && (dir ? dir_leased(fs, e->attr.ino) :
			  !(e->attr.flags & QFT_ATTR_FOLLOWED)))
		return NEVER;
	return e->fetched_ns + secs_ns(fs->attr_timeout);
}

/*
 * Whether the attributes of entry `e` of `l` can be answered now: fresh
 * enough (attr_timeout, or a lease), not changed by this client since (a
 * file opened or released, other attributes seen: node.c stamps), and
 * not a file with other names.
 */
static bool attr_ok(struct qc_fs *fs, const struct listing *l,
		    const struct dent *e, uint64_t now)
{
	if (fs->attr_timeout <= 0 || e->fetched_ns == 0)
		return false;
	/* A write through another name of it would not show here (nodes
	 * are names): only the server knows a hard-linked file's size. */
	if ((e->attr.mode & QFT_S_IFMT) != QFT_S_IFDIR && e->attr.nlink > 1)
		return false;
	/* A directory's mtime and link count change with what is made
	 * inside it, which its parent's watch does not report: under a
	 * lease too, only for attr_timeout. */
	if (now >= attr_until(fs, l, e))
		return false;
	return qn_attr_trusted(&fs->nodes, l->dir, e->name, e->fetched_ns);
}

/*
 * Until when the name of entry `e` of `l` may be answered: a followed
 * symlink's type can change without a notice (its target replaced or
 * made), and a kernel that finds a known inode's type changed marks it
 * bad; so its name holds no longer than its attributes.
 */
static uint64_t name_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e)
{
	uint64_t a;

	if (!(e->attr.flags & QFT_ATTR_FOLLOWED))
		return l->names_until;
	a = attr_until(fs, l, e);
	return a < l->names_until ? a : l->names_until;
}

/* Seconds the kernel may keep what is valid until `until`, at most `max`. */
static double remaining(uint64_t until, uint64_t now, double max)
{
	double left;

	if (until == NEVER)
		return max;
	left = until > now ? (double)(until - now) / 1e9 : 0;
	return left < max ? left : max;
}

/* Every other name of inode `ino` has another link count now. */
static void forget_ino_attrs(struct qc_dircache *dc, uint64_t ino)
{
	for (struct listing *l = dc->lru.next; l != &dc->lru; l = l->next)
		for (size_t i = 0; i < l->nslots; i++)
			if (l->slots[i] && l->slots[i]->attr.ino == ino)
				l->slots[i]->fetched_ns = 0;
}


/* A name of listing `l` changed on the server (or is no longer known):
 * asked for again.  -1 when `l` was dropped instead (too many). */
static int mark_stale(struct qc_fs *fs, struct listing *l, const char *name)
{
	char *dup;

	if (is_stale(l, name))
		return 0;
	dup = l->nstale < STALE_MAX ? strdup(name) : NULL;
	if (!dup) {
		listing_drop_unwatch(fs, l);
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
static int resolve_predicted(struct qc_fs *fs, struct listing *l)
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
				listing_drop_unwatch(fs, l);
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
			e->attr = a;
			e->fetched_ns = 0;
		} else if (node) {
			waiting++;
		} else {
			char name[QFT_MAX_NAME + 1];

			memcpy(name, e->name, strlen(e->name) + 1);
			dent_del(dc_of(fs), l, name);
			if (mark_stale(fs, l, name) < 0) {
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

/* ---- leases: notifications, the worker ---- */

/*
 * After an UNWATCH of `ino` was sent: a READDIR WATCH sent before it may
 * have put a watch in place that the UNWATCH then removed, so no listing
 * of that directory may count as leased, and no fetch begun before now
 * may install one (the event).
 */
static void unwatched(struct qc_fs *fs, uint64_t ino)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l, *next;

	pthread_mutex_lock(&dc->lock);
	record(dc, NULL, ino, false);
	for (l = dc->by_ino[ino_bucket(dc, ino)]; l; l = next) {
		next = l->inext;
		if (l->dino == ino && l->leased)
			listing_drop(fs, l);
	}
	pthread_mutex_unlock(&dc->lock);
}

static void work_do(struct qc_fs *fs, struct work *w)
{
	struct qft_msg m;
	struct qn_node *n;

	switch (w->kind) {
	case WORK_INVAL_ENTRY:
		/* -ENOENT: the kernel had nothing of it cached, fine. */
		(void)fuse_lowlevel_notify_inval_entry(fs->se,
			qn_to_ino(&fs->nodes, w->dir), w->name,
			strlen(w->name));
		n = qn_find_ref(&fs->nodes, w->dir, w->name);
		if (n) {
			(void)fuse_lowlevel_notify_inval_inode(fs->se,
				qn_to_ino(&fs->nodes, n), 0, 0);
			qn_unref(&fs->nodes, n);
		}
		break;
	case WORK_INVAL_INODE:
		(void)fuse_lowlevel_notify_inval_inode(fs->se,
			qn_to_ino(&fs->nodes, w->dir), -1, 0);
		break;
	case WORK_INVAL_NAMES:
		for (const char *p = w->names; w->names && w->nnames--;
		     p += strlen(p) + 1)
			(void)fuse_lowlevel_notify_inval_entry(fs->se,
				qn_to_ino(&fs->nodes, w->dir), p, strlen(p));
		(void)fuse_lowlevel_notify_inval_inode(fs->se,
			qn_to_ino(&fs->nodes, w->dir), -1, 0);
		break;
	case WORK_UNWATCH:
		qft_msg_init(&m, QFT_OP_UNWATCH, 0);
		m.ino = w->ino;
		/* No link: its watches went with it. */
		(void)qc_send_noreply(fs->conn, qc_conn_gen(fs->conn), &m);
		unwatched(fs, w->ino);
		break;
	}
}

/*
 * The worker: invalidates the kernel's caches and gives watches back.
 * fuse_lowlevel_notify_inval_* may wait for the kernel, which may be
 * waiting for a reply only the connection's reader delivers; so this is
 * never done on the reader, nor with the listing lock held.
 */
static void *worker_main(void *arg)
{
	struct qc_fs *fs = arg;
	struct qc_dircache *dc = dc_of(fs);
	struct work *w;

	pthread_mutex_lock(&dc->lock);
	for (;;) {
		while (!dc->work_head && !dc->work_stop)
			pthread_cond_wait(&dc->work_cond, &dc->lock);
		if (dc->work_stop)
			break;
		w = dc->work_head;
		dc->work_head = w->next;
		if (!dc->work_head)
			dc->work_tail = &dc->work_head;
		dc->nwork--;
		pthread_mutex_unlock(&dc->lock);
		work_do(fs, w);
		if (w->dir)
			qn_unref(&fs->nodes, w->dir);
		free(w->names);
		free(w);
		pthread_mutex_lock(&dc->lock);
	}
	pthread_mutex_unlock(&dc->lock);
	return NULL;
}

/* Drops the work left (worker stopped or never started). */
static void work_clear(struct qc_fs *fs)
{
	struct qc_dircache *dc = dc_of(fs);
	struct work *w;

	pthread_mutex_lock(&dc->lock);
	while ((w = dc->work_head)) {
		dc->work_head = w->next;
		if (w->dir)
			qn_unref(&fs->nodes, w->dir);
		free(w->names);
		free(w);
	}
	dc->work_tail = &dc->work_head;
	dc->nwork = 0;
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_notify(void *ctx, uint64_t dir_ino, uint32_t kind,
		   const char *name, size_t namelen)
{
	struct qc_fs *fs = ctx;
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l, *next;

	if (!dc)
		return;
	atomic_fetch_add(&dc->notices, 1);
	pthread_mutex_lock(&dc->lock);
	if (kind == QFT_NOTIFY_ALL) {
		/* The link died or the server lost track: no lease holds. */
		record(dc, NULL, 0, true);
		for (l = dc->lru.next; l != &dc->lru; l = next) {
			next = l->next;
			work_add_names(fs, l);
			listing_drop(fs, l);
		}
		goto out_unlock;
	}
	record(dc, NULL, dir_ino, false);
	for (l = dc->by_ino[ino_bucket(dc, dir_ino)]; l; l = next) {
		next = l->inext;
		if (l->dino != dir_ino)
			continue;
		/* Its own mtime changed: its entry in its parent's listing
		 * is asked for again. */
		qn_touch(&fs->nodes, l->dir);
		if (kind == QFT_NOTIFY_CHANGED && namelen) {
			work_add(fs, WORK_INVAL_ENTRY, l->dir, 0, name);
			(void)mark_stale(fs, l, name);
		} else {
			if (l->leased)
				work_add_names(fs, l);
			else
				work_add(fs, WORK_INVAL_INODE, l->dir, 0,
					 NULL);
			/* GONE: the server holds no watch any more. */
			if (kind == QFT_NOTIFY_GONE)
				listing_drop(fs, l);
			else
				listing_drop_unwatch(fs, l);
		}
	}
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}

/* ---- setup ---- */

int qc_dir_parse_max(const char *s, size_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *end || *s == '-' || *s == '+' || errno ||
	    v > QC_DIRCACHE_MAX) {
		fprintf(stderr, "qftfs: invalid dircache '%s': expected a "
			"number of entries from 0 (off) to %u\n", s,
			QC_DIRCACHE_MAX);
		return -EINVAL;
	}
	*out = (size_t)v;
	return 0;
}

int qc_dir_init(struct qc_fs *fs, size_t max_entries)
{
	struct qc_dircache *dc;
	size_t nb = 256;

	fs->dirs = NULL;
	if (max_entries == 0)
		return 0;
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return -ENOMEM;
	while (nb < max_entries / 8 && nb < ((size_t)1 << 20))
		nb *= 2;
	dc->nbuckets = nb;
	dc->by_node = calloc(nb, sizeof(*dc->by_node));
	dc->by_ino = calloc(nb, sizeof(*dc->by_ino));
	if (!dc->by_node || !dc->by_ino) {
		free(dc->by_node);
		free(dc->by_ino);
		free(dc);
		return -ENOMEM;
	}
	dc->max_entries = max_entries;
	dc->lru.next = dc->lru.prev = &dc->lru;
	dc->work_tail = &dc->work_head;
	pthread_mutex_init(&dc->lock, NULL);
	pthread_cond_init(&dc->work_cond, NULL);
	pthread_cond_init(&dc->lease_cond, NULL);
	fs->dirs = dc;
	return 0;
}

int qc_dir_start(struct qc_fs *fs)
{
	struct qc_dircache *dc = dc_of(fs);
	int r;

	if (!dc)
		return 0;
	r = pthread_create(&dc->worker, NULL, worker_main, fs);
	if (r)
		return -r;
	dc->worker_running = true;
	return 0;
}

void qc_dir_stop(struct qc_fs *fs)
{
	struct qc_dircache *dc = dc_of(fs);

	if (!dc)
		return;
	pthread_mutex_lock(&dc->lock);
	dc->work_stop = true;
	pthread_cond_signal(&dc->work_cond);
	pthread_mutex_unlock(&dc->lock);
	if (dc->worker_running)
		pthread_join(dc->worker, NULL);
	dc->worker_running = false;
	work_clear(fs);
}

void qc_dir_destroy(struct qc_fs *fs)
{
	struct qc_dircache *dc = dc_of(fs);

	if (!dc)
		return;
	qc_dir_stop(fs);
	qft_debug("dircache: %llu lookups and %llu absent names answered "
		  "locally, %llu readdirs, %llu scans, %llu evictions, "
		  "%llu notifications",
		  (unsigned long long)atomic_load(&dc->lookups_local),
		  (unsigned long long)atomic_load(&dc->negatives_local),
		  (unsigned long long)atomic_load(&dc->readdirs_local),
		  (unsigned long long)atomic_load(&dc->scans),
		  (unsigned long long)atomic_load(&dc->evictions),
		  (unsigned long long)atomic_load(&dc->notices));
	pthread_mutex_lock(&dc->lock);
	while (dc->lru.next != &dc->lru)
		listing_drop(fs, dc->lru.next);
	pthread_mutex_unlock(&dc->lock);
	pthread_cond_destroy(&dc->work_cond);
	pthread_cond_destroy(&dc->lease_cond);
	pthread_mutex_destroy(&dc->lock);
	free(dc->by_node);
	free(dc->by_ino);
	free(dc);
	fs->dirs = NULL;
}

/* ---- answers ---- */

/*
 * What the cache knows of `name` in `parent` now: 1 with *a (and the
 * kernel's timeouts) when it exists with trusted attributes, 0 when it is
 * known absent, -EAGAIN otherwise.  With `need_attr` false, 1 also for a
 * name whose attributes are not trusted (*a then unset).
 */
static int answer(struct qc_fs *fs, struct qn_node *parent, const char *name,
		  bool need_attr, struct qft_attr *a, double *entry_to,
		  double *attr_to, uint64_t *xgen)
{
	struct qc_dircache *dc = dc_of(fs);
	uint64_t now = qc_now_ns();
	struct listing *l;
	struct dent *e;
	int r = -EAGAIN;

	/* ".." (asked by exportfs) is not an entry of a listing. */
	if (!cache_on(fs) || strlen(name) > QFT_MAX_NAME || is_dot(name))
		return -EAGAIN;
	pthread_mutex_lock(&dc->lock);
	l = valid_listing(fs, parent, now);
	if (!l || is_stale(l, name))
		goto out_unlock;
	e = dent_find(l, name, name_hash(name));
	if (e && !e->attr.ino) {
		/* Made by a pipelined CREATE: answered since? */
		if (resolve_predicted(fs, l) < 0)
			goto out_unlock;
		if (is_stale(l, name))
			goto out_unlock;
		e = dent_find(l, name, name_hash(name));
	}
	if (e && !e->attr.ino) {
		/* Not answered yet: it exists, attributes unknown. */
		if (!need_attr)
			r = 1;
		goto out_unlock;
	}
	if (!e) {
		r = 0;
	} else if (attr_ok(fs, l, e, now)) {
		r = 1;
		if (a)
			*a = e->attr;
		if (entry_to)
			*entry_to = remaining(name_until(fs, l, e), now,
					      fs->entry_timeout);
		if (attr_to)
			*attr_to = remaining(attr_until(fs, l, e), now,
					     fs->attr_timeout);
		/* Read with the attributes: a SETXATTR after this point
		 * changes it, and the hint is then not taken. */
		if (xgen)
			*xgen = qc_hint_xattr_gen(fs);
	} else if (!need_attr) {
		r = 1;
	}
	if (r >= 0)
		touch(dc, l);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	return r;
}

int qc_dir_lookup(struct qc_fs *fs, struct qn_node *parent, const char *name,
		  struct qft_attr *out)
{
	return answer(fs, parent, name, true, out, NULL, NULL, NULL);
}

bool qc_dir_cached_attr(struct qc_fs *fs, struct qn_node *n,
			struct qft_attr *out)
{
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	struct qft_attr a;
	uint64_t ino;
	bool ok;

	if (!cache_on(fs) || qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return false;
	ok = answer(fs, parent, name, true, &a, NULL, NULL, NULL) == 1;
	qn_unref(&fs->nodes, parent);
	ino = qn_rino(&fs->nodes, n);
	/* The name may lead to another object than the node knew. */
	if (!ok || (ino && ino != a.ino) ||
	    qn_replaced(&fs->nodes, n, &a, false))
		return false;
	*out = a;
	return true;
}

/*
 * The listing of `parent` when it is under a lease and this client made
 * the directory (qc_dir_leased_absent says why both); NULL otherwise.
 * Listing lock held.
 */
static struct listing *leased_here(struct qc_fs *fs, struct qn_node *parent)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;

	/*
	 * A lease says a foreign change will be told, not that it has been
	 * by now: the notification of a name made on the server a moment ago
	 * may still be on its way.  So only in a directory this client made
	 * itself, which nobody else is likely to fill within that moment
	 * (the directories of a tree copy, where O_EXCL temporary files are
	 * made), is what the listing says good enough to answer without the
	 * server.
	 */
	l = valid_listing(fs, parent, qc_now_ns());
	/*
	 * The lease of a directory made a moment ago is asked for right
	 * after its MKDIR and answered within a round trip: wait for it
	 * rather than send this create on its own, so that a tree copy's
	 * first create in each new directory costs what a synchronous one
	 * would, and its own creates do not race with the lease's READDIR.
	 * The answer always comes: a reply, or the link's failure.
	 */
	while (l && l->made_here && l->lease_asked) {
		uint64_t id = l->id;

		pthread_cond_wait(&dc->lease_cond, &dc->lock);
		l = valid_listing(fs, parent, qc_now_ns());
		if (l && l->id != id)
			l = NULL;
	}
	return l && l->leased && l->made_here ? l : NULL;
}

bool qc_dir_leased_absent(struct qc_fs *fs, struct qn_node *parent,
			  const char *name)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;
	bool absent = false;

	if (!cache_on(fs) || strlen(name) > QFT_MAX_NAME)
		return false;
	pthread_mutex_lock(&dc->lock);
	l = leased_here(fs, parent);
	if (l && !is_stale(l, name))
		absent = !dent_find(l, name, name_hash(name));
	pthread_mutex_unlock(&dc->lock);
	return absent;
}

int qc_dir_leased_name(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, uint32_t *type)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;
	struct dent *e;
	int r = -EAGAIN;

	if (!cache_on(fs) || strlen(name) > QFT_MAX_NAME)
		return -EAGAIN;
	pthread_mutex_lock(&dc->lock);
	l = leased_here(fs, parent);
	if (l && !is_stale(l, name)) {
		e = dent_find(l, name, name_hash(name));
		r = e != NULL;
		if (e)
			*type = e->attr.mode & QFT_S_IFMT;
	}
	pthread_mutex_unlock(&dc->lock);
	return r;
}

/* ---- what the client learns or changes ---- */

void qc_dir_note_fetched(struct qc_fs *fs, struct qn_node *parent,
			 const char *name, const struct qft_attr *a,
			 const struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;
	struct qft_attr b;

	if (!cache_on(fs) || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	l = valid_listing(fs, parent, qc_now_ns());
	if (!l || spoiled(dc, fb->seq, parent, l->dino, false))
		goto out_unlock;
	if (a) {
		b = *a;
		if (qc_hint_xattr_gen(fs) != fb->xgen)
			b.flags &= ~QFT_ATTR_NOXATTR;
		if (dent_put(dc, l, name, &b, fb->start_ns) < 0) {
			listing_drop_unwatch(fs, l);
			goto out_unlock;
		}
		evict(fs, l);
	} else {
		dent_del(dc, l, name);
	}
	unstale(l, name);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}

/*
 * The client changed `dir`: fetches in flight may miss it, and its own
 * attributes (mtime, link count) in its parent's listing are stale.
 * Listing lock held.
 */
static void changed_dir(struct qc_fs *fs, struct qn_node *dir)
{
	struct listing *l = find_listing(dc_of(fs), dir);

	record(dc_of(fs), dir, l ? l->dino : 0, false);
	qn_touch(&fs->nodes, dir);
}

/* Drops the listing of the directory `name` in `parent` named, if any. */
static void drop_child_listing(struct qc_fs *fs, struct qn_node *parent,
			       const char *name)
{
	struct qn_node *child = qn_find_ref(&fs->nodes, parent, name);
	struct listing *l;

	if (!child)
		return;
	l = find_listing(dc_of(fs), child);
	if (l)
		listing_drop_unwatch(fs, l);
	qn_unref(&fs->nodes, child);
}

void qc_dir_note_entry(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, const struct qft_attr *a)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;

	if (!dc || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	changed_dir(fs, parent);
	l = valid_listing(fs, parent, qc_now_ns());
	if (l) {
		unstale(l, name);
		if (dent_put(dc, l, name, a, qc_now_ns()) < 0)
			listing_drop_unwatch(fs, l);
		else
			evict(fs, l);
	}
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_note_attr(struct qc_fs *fs, struct qn_node *parent,
		      const char *name, const struct qft_attr *a)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;
	struct dent *e;

	if (!dc || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	l = valid_listing(fs, parent, qc_now_ns());
	e = l && !is_stale(l, name) ? dent_find(l, name, name_hash(name)) : NULL;
	/* The same object only: a name may be another's by now. */
	if (e && (!e->attr.ino || e->attr.ino == a->ino) &&
	    (e->attr.mode & QFT_S_IFMT) == (a->mode & QFT_S_IFMT)) {
		struct qft_attr na = *a;

		/* Attributes from a handle (fstat) cannot say the name is a
		 * followed symlink; the name still is. */
		na.flags |= e->attr.flags & QFT_ATTR_FOLLOWED;
		changed_dir(fs, parent);
		if (dent_put(dc, l, name, &na, qc_now_ns()) < 0)
			listing_drop_unwatch(fs, l);
	}
	pthread_mutex_unlock(&dc->lock);
}

/* A lease on a directory this client just made (see watch_new_dir). */
struct mkwatch {
	struct qc_fs *fs;
	struct qn_node *dir;    /* holds a node reference */
	uint64_t id;            /* of the listing the MKDIR made */
	uint64_t dino;
	struct qc_dir_fetch fb;
};

/* Whether every entry of a checked READDIR PLUS reply is in `l`. */
static bool reply_within(const struct listing *l, const struct qft_blob *data)
{
	struct qft_dirent d;
	struct qcur c;

	qcur_init(&c, data->p, data->len);
	while (c.left && qft_dirent_decode(&c, &d, true) == 0)
		if (!is_dot(d.name.s) &&
		    !dent_find(l, d.name.s, name_hash(d.name.s)))
			return false;
	return true;
}

/*
 * The READDIR WATCH of a new directory answered (on the reader thread:
 * short, no waiting).  The listing becomes leased when the watch is in
 * place and the server saw nothing the client does not know of: every
 * name it listed is one the client made since (foreign ones made before
 * the watch would never be told).
 */
static void mkdir_watch_done(void *ctx, int err, struct qc_reply *rep)
{
	struct mkwatch *w = ctx;
	struct qc_fs *fs = w->fs;
	struct qc_dircache *dc = dc_of(fs);
	bool watched, ok;
	struct listing *l;

	watched = err == 0 && (rep->msg.opflags & QFT_READDIR_WATCHED);
	pthread_mutex_lock(&dc->lock);
	l = find_listing(dc, w->dir);
	ok = watched && l && l->id == w->id && !l->nstale &&
	     (rep->msg.opflags & QFT_READDIR_EOF) &&
	     qc_readdir_check(&rep->msg.data, true) >= 0 &&
	     !spoiled(dc, w->fb.seq, NULL, w->dino, false) &&
	     reply_within(l, &rep->msg.data);
	if (ok) {
		l->leased = true;
		l->names_until = NEVER;
	} else if (watched) {
		work_add(fs, WORK_UNWATCH, NULL, w->dino, NULL);
	}
	if (l && l->id == w->id)
		l->lease_asked = false;
	pthread_cond_broadcast(&dc->lease_cond);
	pthread_mutex_unlock(&dc->lock);
	qn_unref(&fs->nodes, w->dir);
	free(w);
}

/* No lease will be asked for listing `id` of `dir` after all: creates
 * waiting for one (qc_dir_leased_absent) go on without. */
static void lease_not_asked(struct qc_fs *fs, struct qn_node *dir,
			    uint64_t id)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;

	pthread_mutex_lock(&dc->lock);
	l = find_listing(dc, dir);
	if (l && l->id == id)
		l->lease_asked = false;
	pthread_cond_broadcast(&dc->lease_cond);
	pthread_mutex_unlock(&dc->lock);
}

/*
 * Asks for a lease on the directory `dir` just made: OPENDIR, READDIR
 * WATCH and CLOSE sent back to back, nothing waited for (the server runs
 * them in order).  Until the answer the listing holds for entry_timeout.
 */
static void watch_new_dir(struct qc_fs *fs, struct qn_node *dir,
			  uint64_t id, uint64_t dino)
{
	char path[QFT_MAX_PATH + 1];
	struct mkwatch *w;
	struct qft_msg m;
	uint64_t gen, h;

	gen = link_gen(fs);
	if (!gen || qn_path(&fs->nodes, dir, NULL, path) < 0 ||
	    qc_handle_alloc(fs->conn, gen, &h) < 0) {
		lease_not_asked(fs, dir, id);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		lease_not_asked(fs, dir, id);
		goto out_free_handle;
	}
	w->fs = fs;
	w->dir = dir;
	w->id = id;
	w->dino = dino;
	qc_dir_fetch_begin(fs, &w->fb);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	if (qc_call_async(fs->conn, gen, &m, ignore_reply, NULL) < 0) {
		free(w);
		lease_not_asked(fs, dir, id);
		goto out_free_handle;
	}
	qft_msg_init(&m, QFT_OP_READDIR, 0);
	m.handle = h;
	m.length = 4096;
	m.opflags = QFT_READDIR_PLUS | QFT_READDIR_WATCH;
	qn_ref(&fs->nodes, dir);
	/* On failure mkdir_watch_done has run, and freed w. */
	(void)qc_call_async(fs->conn, gen, &m, mkdir_watch_done, w);
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = h;
	(void)qc_send_noreply(fs->conn, gen, &m);
out_free_handle:
	qc_handle_free(fs->conn, gen, h);
}

void qc_dir_note_mkdir(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, const struct qft_attr *a,
		       const struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *pl, *l;
	struct qn_node *child;
	uint64_t pino, id;

	qc_dir_note_entry(fs, parent, name, a);
	if (!cache_on(fs))
		return;
	child = qn_child_ref(&fs->nodes, parent, name, a);
	if (!child)
		return;
	pthread_mutex_lock(&dc->lock);
	pl = find_listing(dc, parent);
	pino = pl && pl->dino ? pl->dino : qn_rino(&fs->nodes, parent);
	/* Empty when made: nobody could have put anything in it before the
	 * MKDIR's reply, as far as the client can know without a lease. */
	l = listing_new(fs, child, a->ino, pino,
			fb->start_ns + secs_ns(fs->entry_timeout), fb->gen);
	if (l) {
		l->made_here = true;
		/* Cleared by mkdir_watch_done, which watch_new_dir makes
		 * sure runs (or clears it itself when it sends nothing). */
		l->lease_asked = true;
		evict(fs, l);
	}
	id = l ? l->id : 0;
	pthread_mutex_unlock(&dc->lock);
	if (id)
		watch_new_dir(fs, child, id, a->ino);
	qn_unref(&fs->nodes, child);
}

void qc_dir_note_link(struct qc_fs *fs, struct qn_node *parent,
		      const char *name, const struct qft_attr *a)
{
	struct qc_dircache *dc = dc_of(fs);

	if (!dc)
		return;
	pthread_mutex_lock(&dc->lock);
	forget_ino_attrs(dc, a->ino);
	pthread_mutex_unlock(&dc->lock);
	qc_dir_note_entry(fs, parent, name, a);
}

void qc_dir_note_gone(struct qc_fs *fs, struct qn_node *parent,
		      const char *name)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;
	struct dent *e;

	if (!dc || strlen(name) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	changed_dir(fs, parent);
	drop_child_listing(fs, parent, name);
	l = find_listing(dc, parent);
	if (l) {
		e = dent_find(l, name, name_hash(name));
		/* Its other names have one link less. */
		if (e && (e->attr.mode & QFT_S_IFMT) != QFT_S_IFDIR &&
		    e->attr.nlink > 1)
			forget_ino_attrs(dc, e->attr.ino);
		dent_del(dc, l, name);
		unstale(l, name);
	}
	pthread_mutex_unlock(&dc->lock);
}

/* The directory `name` in `from` (not moved by qn_rename yet) now lives
 * in `to`: its listing's "..". */
static void set_pino(struct qc_fs *fs, struct qn_node *from,
		     const char *name, struct qn_node *to)
{
	struct qn_node *moved = qn_find_ref(&fs->nodes, from, name);
	struct listing *ml, *tl;

	if (!moved)
		return;
	ml = find_listing(dc_of(fs), moved);
	tl = find_listing(dc_of(fs), to);
	if (ml)
		ml->pino = tl && tl->dino ? tl->dino : qn_rino(&fs->nodes, to);
	qn_unref(&fs->nodes, moved);
}

void qc_dir_note_rename(struct qc_fs *fs, struct qn_node *parent,
			const char *name, struct qn_node *newparent,
			const char *newname, bool exchange)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *ls, *ld;
	struct dent *es, *ed;
	struct qft_attr as, ad;
	bool has_s, has_d, known_s, known_d;
	uint64_t now = qc_now_ns();

	if (!dc || strlen(name) > QFT_MAX_NAME ||
	    strlen(newname) > QFT_MAX_NAME)
		return;
	pthread_mutex_lock(&dc->lock);
	changed_dir(fs, parent);
	if (newparent != parent)
		changed_dir(fs, newparent);
	ls = valid_listing(fs, parent, now);
	ld = valid_listing(fs, newparent, now);
	es = ls ? dent_find(ls, name, name_hash(name)) : NULL;
	ed = ld ? dent_find(ld, newname, name_hash(newname)) : NULL;
	/* What each name held, where a listing says so. */
	known_s = ls && !is_stale(ls, name);
	known_d = ld && !is_stale(ld, newname);
	has_s = es != NULL;
	has_d = ed != NULL;
	if (has_s)
		as = es->attr;
	if (has_d)
		ad = ed->attr;
	if (!exchange) {
		/* A directory renamed over loses its listing. */
		drop_child_listing(fs, newparent, newname);
		if (has_d && (ad.mode & QFT_S_IFMT) != QFT_S_IFDIR &&
		    ad.nlink > 1)
			forget_ino_attrs(dc, ad.ino);
	}
	/*
	 * The moved objects' ctime changed (fetched 0: their attributes
	 * are asked for again); a name whose new object is not known makes
	 * its listing incomplete, so it goes.
	 */
	if (ls) {
		if (exchange && !(known_d && has_d))
			listing_drop_unwatch(fs, ls), ls = NULL;
		else if (exchange && dent_put(dc, ls, name, &ad, 0) < 0)
			listing_drop_unwatch(fs, ls), ls = NULL;
		else if (!exchange)
			dent_del(dc, ls, name);
	}
	/* ls may have been dropped, and may be ld. */
	ld = find_listing(dc, newparent);
	if (ld) {
		if (!(known_s && has_s))
			listing_drop_unwatch(fs, ld);
		else if (dent_put(dc, ld, newname, &as, 0) < 0)
			listing_drop_unwatch(fs, ld);
	}
	ls = find_listing(dc, parent);
	if (ls)
		unstale(ls, name);
	ld = find_listing(dc, newparent);
	if (ld)
		unstale(ld, newname);
	/* A directory that moved keeps its listing; ".." is another. */
	set_pino(fs, parent, name, newparent);
	if (exchange)
		set_pino(fs, newparent, newname, parent);
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_drop(struct qc_fs *fs, struct qn_node *parent)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;

	if (!dc || !parent)
		return;
	pthread_mutex_lock(&dc->lock);
	record(dc, parent, 0, false);
	/* Before the listing goes: its reference may be the node's last. */
	qn_touch(&fs->nodes, parent);
	l = find_listing(dc, parent);
	if (l)
		listing_drop_unwatch(fs, l);
	pthread_mutex_unlock(&dc->lock);
}

void qc_dir_xattr_changed(struct qc_fs *fs, struct qn_node *n)
{
	struct qc_dircache *dc = dc_of(fs);
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	struct listing *l;
	struct dent *e;

	if (!dc || qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return;
	pthread_mutex_lock(&dc->lock);
	l = find_listing(dc, parent);
	e = l ? dent_find(l, name, name_hash(name)) : NULL;
	if (e)
		e->attr.flags &= ~QFT_ATTR_NOXATTR;
	pthread_mutex_unlock(&dc->lock);
	qn_unref(&fs->nodes, parent);
}

/* ---- readdir from the cache ---- */

static void snap_free(struct qc_dir_snap *s)
{
	if (!s)
		return;
	free(s->e);
	free(s->pool);
	free(s);
}

/* A snapshot of the valid, complete listing of `dir` (walked now), or
 * NULL when there is none (or no memory). */
static struct qc_dir_snap *snapshot(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = dc_of(fs);
	uint64_t now = qc_now_ns();
	struct qc_dir_snap *s = NULL;
	struct listing *l;
	size_t pool = 5, k = 0, pos = 0;	/* ".\0..\0" */

	pthread_mutex_lock(&dc->lock);
	l = valid_listing(fs, dir, now);
	/* Names of pipelined CREATEs not answered yet have no inode, and a
	 * name changed on the server may be a new one: not complete. */
	if (!l || resolve_predicted(fs, l) != 0 || l->nstale)
		goto out_unlock;
	for (size_t i = 0; i < l->nslots; i++)
		if (l->slots[i])
			pool += strlen(l->slots[i]->name) + 1;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out_unlock;
	s->e = calloc(l->live + 2, sizeof(*s->e));
	s->pool = malloc(pool);
	if (!s->e || !s->pool) {
		snap_free(s);
		s = NULL;
		goto out_unlock;
	}
	s->names_until = l->leased ? NEVER : l->names_until;
	s->xgen = qc_hint_xattr_gen(fs);
	memcpy(s->pool, ".\0..", 5);
	s->e[0].name = s->pool;
	s->e[0].ino = l->dino;
	s->e[0].type = QFT_S_IFDIR;
	s->e[1].name = s->pool + 2;
	s->e[1].ino = l->pino;
	s->e[1].type = QFT_S_IFDIR;
	pos = 5;
	k = 2;
	for (size_t i = 0; i < l->nslots; i++) {
		const struct dent *e = l->slots[i];
		struct snap_ent *se;
		size_t len;

		if (!e)
			continue;
		se = &s->e[k++];
		len = strlen(e->name) + 1;
		memcpy(s->pool + pos, e->name, len);
		se->name = s->pool + pos;
		pos += len;
		se->ino = e->attr.ino;
		se->type = e->attr.mode & QFT_S_IFMT;
		se->attr = e->attr;
		se->attr_ok = attr_ok(fs, l, e, now);
		se->attr_until = attr_until(fs, l, e);
		se->name_until = name_until(fs, l, e);
	}
	s->n = k;
	l->walked_ns = now;
	touch(dc, l);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
	return s;
}

/*
 * Fills `buf` from snapshot entries from index `off` on.  Entries with
 * trusted attributes become nodes (one kernel lookup each) in a
 * READDIRPLUS; the others go without (node id 0: no dentry), so that the
 * kernel looks them up.  Looked-up nodes are listed in `counted`.
 */
static size_t fill_snap(fuse_req_t req, struct qc_fs *fs, struct qn_node *dir,
			const struct qc_dir_snap *s, uint64_t off, bool plus,
			char *buf, size_t size, struct qn_node **counted,
			size_t *ncounted, uint64_t *next)
{
	uint64_t now = qc_now_ns();
	size_t used = 0;

	*ncounted = 0;
	for (uint64_t i = off; i < s->n; i++) {
		const struct snap_ent *se = &s->e[i];
		size_t need;

		if (plus) {
			struct fuse_entry_param e;
			struct qn_node *n;

			need = fuse_add_direntry_plus(req, NULL, 0, se->name,
						      NULL, 0);
			if (need > size - used)
				break;
			memset(&e, 0, sizeof(e));
			if (se->attr_ok && now < se->attr_until &&
			    now < s->names_until) {
				n = qn_lookup(&fs->nodes, dir, se->name,
					      &se->attr);
				if (n) {
					counted[(*ncounted)++] = n;
					qc_hint_noxattr_note(fs, n, &se->attr,
							     s->xgen);
					qc_entry_fill(fs, &e, n, &se->attr);
					e.entry_timeout = remaining(
						se->name_until, now,
						fs->entry_timeout);
					e.attr_timeout = remaining(
						se->attr_until, now,
						fs->attr_timeout);
				}
			}
			if (e.ino == 0) {
				e.attr.st_ino = qn_shown_child_ino(
					&fs->nodes, dir, se->name, se->ino);
				e.attr.st_mode = se->type;
			}
			fuse_add_direntry_plus(req, buf + used, size - used,
					       se->name, &e, (off_t)(i + 1));
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = qn_shown_child_ino(&fs->nodes, dir,
						       se->name, se->ino);
			st.st_mode = se->type;
			need = fuse_add_direntry(req, buf + used, size - used,
						 se->name, &st, (off_t)(i + 1));
			if (need > size - used)
				break;
		}
		used += need;
		*next = i + 1;
	}
	return used;
}

static void reply_snap(fuse_req_t req, struct qc_fs *fs, struct qn_node *dir,
		       const struct qc_dir_snap *s, size_t size, uint64_t off,
		       bool plus)
{
	struct qn_node **counted = NULL;
	size_t used, ncounted = 0;
	uint64_t next = off;
	char *buf;

	buf = malloc(size ? size : 1);
	if (plus)
		counted = calloc(s->n + 1, sizeof(*counted));
	if (!buf || (plus && !counted)) {
		free(buf);
		free(counted);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	used = fill_snap(req, fs, dir, s, off, plus, buf, size, counted,
			 &ncounted, &next);
	if (fuse_reply_buf(req, buf, used) != 0) {
		/* The kernel never saw these entries: undo their lookups. */
		for (size_t i = 0; i < ncounted; i++)
			qn_forget(&fs->nodes, counted[i], 1);
	}
	free(counted);
	free(buf);
}

/* ---- listings collected from READDIR PLUS ---- */

/* What a READDIR for the cache asks for: attributes, and a lease (a
 * server without change notification ignores WATCH). */
#define READDIR_CACHE_FLAGS (QFT_READDIR_PLUS | QFT_READDIR_WATCH)

static void build_free(struct qc_dir_build *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		free(b->e[i].name);
	free(b->e);
	free(b);
}

/* A reply without WATCHED makes the collection unleased. */
static void note_watched(struct qc_dir_build *b, const struct qc_reply *rep)
{
	if (!(rep->msg.opflags & QFT_READDIR_WATCHED))
		b->watched = false;
}

static struct qc_dir_build *build_new(struct qc_fs *fs)
{
	struct qc_dir_build *b = calloc(1, sizeof(*b));

	if (b) {
		qc_dir_fetch_begin(fs, &b->fb);
		b->watched = true;
	}
	return b;
}

/* A collection given up before its end: its watch goes back too. */
static void build_abandon(struct qc_fs *fs, struct qc_dir_build *b)
{
	struct qc_dircache *dc = dc_of(fs);

	if (!b)
		return;
	if (b->watched && b->dino) {
		pthread_mutex_lock(&dc->lock);
		work_add(fs, WORK_UNWATCH, NULL, b->dino, NULL);
		pthread_mutex_unlock(&dc->lock);
	}
	build_free(b);
}

/* Adds the entries of one checked READDIR PLUS reply. */
static void build_add(struct qc_fs *fs, struct qc_dir_build *b,
		      const struct qft_blob *data)
{
	struct qft_dirent d;
	struct qcur c;

	qcur_init(&c, data->p, data->len);
	while (!b->failed && c.left && qft_dirent_decode(&c, &d, true) == 0) {
		b->next = d.off;
		if (strcmp(d.name.s, ".") == 0) {
			b->dino = d.ino;
			continue;
		}
		if (strcmp(d.name.s, "..") == 0) {
			b->pino = d.ino;
			continue;
		}
		if (!d.has_attr || b->n >= dc_of(fs)->max_entries) {
			b->failed = true;
			break;
		}
		if (b->n == b->cap) {
			size_t nc = b->cap ? b->cap * 2 : 64;
			struct bent *ne = realloc(b->e, nc * sizeof(*ne));

			if (!ne) {
				b->failed = true;
				break;
			}
			b->e = ne;
			b->cap = nc;
		}
		b->e[b->n].name = strdup(d.name.s);
		if (!b->e[b->n].name) {
			b->failed = true;
			break;
		}
		b->e[b->n++].attr = d.attr;
	}
}

/* Installs a collected listing of `dir` that reached EOF, unless a change
 * may have raced with it. */
static void build_install(struct qc_fs *fs, struct qn_node *dir,
			  struct qc_dir_build *b)
{
	struct qc_dircache *dc = dc_of(fs);
	bool strip = qc_hint_xattr_gen(fs) != b->fb.xgen;
	struct listing *l;

	pthread_mutex_lock(&dc->lock);
	if (b->failed || spoiled(dc, b->fb.seq, dir, b->dino, false)) {
		qft_debug("dircache: listing of inode %llu not kept (%s)",
			  (unsigned long long)b->dino,
			  b->failed ? "incomplete" : "changed meanwhile");
		/* Not kept: nor is the watch it may have set. */
		if (b->watched && b->dino)
			work_add(fs, WORK_UNWATCH, NULL, b->dino, NULL);
		goto out_unlock;
	}
	l = listing_new(fs, dir, b->dino, b->pino,
			b->fb.start_ns + secs_ns(fs->entry_timeout), b->fb.gen);
	if (!l)
		goto out_unlock;
	if (b->watched && b->dino) {
		/* The server watches it since before it read the entries. */
		l->leased = true;
		l->names_until = NEVER;
	}
	for (size_t i = 0; i < b->n; i++) {
		if (strip)
			b->e[i].attr.flags &= ~QFT_ATTR_NOXATTR;
		if (dent_put(dc, l, b->e[i].name, &b->e[i].attr,
			     b->fb.start_ns) < 0) {
			listing_drop_unwatch(fs, l);
			goto out_unlock;
		}
	}
	l->walked_ns = qc_now_ns();
	evict(fs, l);
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}

/* ---- readdir from the server ---- */

void qc_dir_ahead_drop(struct qc_dir_ahead *a)
{
	if (a->valid)
		qc_reply_free(&a->rep);
	snap_free(a->snap);
	build_free(a->build);
	memset(a, 0, sizeof(*a));
}

/* Forgets the server reply read ahead (not the snapshot or collection). */
static void ahead_reply_drop(struct qc_dir_ahead *a)
{
	if (a->valid)
		qc_reply_free(&a->rep);
	a->valid = false;
	a->eof = false;
	a->pos = 0;
	memset(&a->rep, 0, sizeof(a->rep));
}

/*
 * Fills `buf` from a READDIR reply (with attributes when `srv_plus`).
 * With `plus`, every entry handed to the kernel with a node id counts one
 * lookup, so nodes are made only for the entries that fit, and "." and
 * ".." get node id 0 (no dentry).  The looked-up nodes are listed in
 * `counted` so a lost reply can undo them.
 */
static size_t fill_dir(fuse_req_t req, struct qc_fs *fs, fuse_ino_t ino,
		       const struct qft_blob *data, bool srv_plus, bool plus,
		       uint64_t xgen, char *buf, size_t size,
		       struct qn_node **counted, size_t *ncounted,
		       size_t *consumed, uint64_t *last_off)
{
	struct qft_dirent d;
	struct qcur c;
	size_t used = 0;

	*ncounted = 0;
	*consumed = 0;
	qcur_init(&c, data->p, data->len);
	while (c.left && qft_dirent_decode(&c, &d, srv_plus) == 0) {
		size_t need;

		if (plus) {
			struct fuse_entry_param e;

			need = fuse_add_direntry_plus(req, NULL, 0, d.name.s,
						      NULL, 0);
			if (need > size - used)
				break;
			memset(&e, 0, sizeof(e));
			if (d.has_attr && !is_dot(d.name.s)) {
				struct qn_node *n;

				n = qn_lookup(&fs->nodes, qc_fs_node(fs, ino),
					      d.name.s, &d.attr);
				if (n) {
					counted[(*ncounted)++] = n;
					qc_hint_noxattr_note(fs, n, &d.attr, xgen);
					qc_entry_fill(fs, &e, n, &d.attr);
				}
			}
			if (e.ino == 0) {
				e.attr.st_ino = qn_shown_child_ino(
					&fs->nodes, qc_fs_node(fs, ino),
					d.name.s, d.ino);
				e.attr.st_mode = d.type;
			}
			fuse_add_direntry_plus(req, buf + used, size - used,
					       d.name.s, &e, (off_t)d.off);
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = qn_shown_child_ino(&fs->nodes,
						       qc_fs_node(fs, ino),
						       d.name.s, d.ino);
			st.st_mode = d.type;
			need = fuse_add_direntry(req, buf + used, size - used,
						 d.name.s, &st, (off_t)d.off);
			if (need > size - used)
				break;
		}
		used += need;
		*consumed = data->len - c.left;
		*last_off = d.off;
	}
	return used;
}

/*
 * Whether the kernel's readdir at `off` continues the listing `a` holds,
 * with the entries it needs and attributes still fresh enough.
 */
static bool ahead_usable(const struct qc_dir_ahead *a, uint64_t off, bool plus)
{
	return a->valid && (a->plus || !plus) && a->next == off &&
	       qc_now_ns() < a->until &&
	       (a->pos < a->rep.msg.data.len || a->eof);
}

static void maybe_scan(struct qc_fs *fs, struct qn_node *dir);

static bool complete_listing(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = dc_of(fs);
	struct listing *l;
	bool ok;

	pthread_mutex_lock(&dc->lock);
	l = valid_listing(fs, dir, qc_now_ns());
	ok = l && !l->nstale;
	pthread_mutex_unlock(&dc->lock);
	return ok;
}

bool qc_dir_open_lazily(struct qc_fs *fs, struct qn_node *dir)
{
	if (!cache_on(fs))
		return false;
	if (complete_listing(fs, dir))
		return true;
	/* The opendir of a walk comes before its readdir: scan now. */
	maybe_scan(fs, dir);
	return complete_listing(fs, dir);
}

/* The OPENDIR a lazily opened directory skipped, now that a readdir
 * needs the server. */
static int open_now(struct qc_fs *fs, struct qc_file *f, struct qn_node *dir)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen, h;
	int r;

	/* An FSYNC on it may have opened it already (qc_file_handle). */
	pthread_mutex_lock(&f->lock);
	gen = f->gen;
	pthread_mutex_unlock(&f->lock);
	if (gen) {
		f->ahead.lazy = false;
		return 0;
	}
	r = qn_path(&fs->nodes, dir, NULL, path);
	if (r < 0)
		return r;
	r = qc_conn_wait(fs->conn, &gen);
	if (r == 0)
		r = qc_handle_alloc(fs->conn, gen, &h);
	if (r < 0)
		return qc_conn_user_err(r);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, h);
		return qc_file_open_error(fs, dir, path, r);
	}
	qc_reply_free(&rep);
	pthread_mutex_lock(&f->lock);
	f->gen = gen;
	f->nf.handle = h;
	pthread_mutex_unlock(&f->lock);
	f->ahead.lazy = false;
	return 0;
}

void qc_dir_readdir(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		    fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct qc_dir_ahead *a = &f->ahead;
	struct qn_node *dir = qc_fs_node(fs, ino);
	struct qn_node **counted = NULL;
	size_t used, ncounted = 0, consumed = 0;
	uint64_t last_off = (uint64_t)off;
	bool caching = cache_on(fs);
	struct qft_blob rest;
	struct qft_msg m;
	char *buf = NULL;
	int r, n;

	if (size > QFT_MAX_READDIR)
		size = QFT_MAX_READDIR;
	if (off == 0 && caching) {
		/* A new listing (or a rewind): from the cache if it can. */
		snap_free(a->snap);
		a->snap = snapshot(fs, dir);
		if (!a->snap) {
			maybe_scan(fs, dir);
			a->snap = snapshot(fs, dir);
		}
		if (a->snap)
			atomic_fetch_add(&dc_of(fs)->readdirs_local, 1);
	} else if (off == 0) {
		snap_free(a->snap);
		a->snap = NULL;
	}
	if (a->snap) {
		reply_snap(req, fs, dir, a->snap, size, (uint64_t)off, plus);
		return;
	}
	if (!ahead_usable(a, (uint64_t)off, plus)) {
		ahead_reply_drop(a);
		if (a->lazy && (r = open_now(fs, f, dir)) < 0)
			goto out_err;
		/* A collection goes on only from where it stopped. */
		if (a->build && (off == 0 || a->build->next != (uint64_t)off)) {
			build_abandon(fs, a->build);
			a->build = NULL;
		}
		if (off == 0 && caching)
			a->build = build_new(fs);
		qft_msg_init(&m, QFT_OP_READDIR, 0);
		m.offset = (uint64_t)off;
		/*
		 * As much as a reply may carry, unless nothing may be kept
		 * (attr_timeout=0): then just what the kernel asked for.
		 */
		m.length = fs->attr_timeout > 0 ? QFT_MAX_READDIR : size;
		/* A pipelined CREATE on the bulk stream could be missed. */
		qc_step_settle(fs);
		a->plus = plus || a->build;
		m.opflags = a->plus ? QFT_READDIR_PLUS : 0;
		/* A listing collected for the cache asks for a lease; a
		 * server without change notification ignores the flag. */
		if (a->build)
			m.opflags |= QFT_READDIR_WATCH;
		a->xgen = qc_hint_xattr_gen(fs);
		a->until = qc_now_ns() + secs_ns(fs->attr_timeout);
		/*
		 * A directory handle re-opened after a reconnect is a new
		 * stream: a listing in progress (a cookie other than 0)
		 * resumes only where the server's filesystem keeps cookies
		 * stable across opens, and may otherwise fail with EIO; a
		 * new listing starts clean.
		 */
		r = qc_file_call(fs, f, &m, &a->rep);
		if (r < 0)
			goto out_err;
		a->valid = true;
		n = qc_readdir_check(&a->rep.msg.data, a->plus);
		if (n < 0) {
			r = n;
			goto out_drop;
		}
		a->eof = (a->rep.msg.opflags & QFT_READDIR_EOF) != 0;
		a->next = (uint64_t)off;
		if (a->build) {
			note_watched(a->build, &a->rep);
			build_add(fs, a->build, &a->rep.msg.data);
			if (a->eof || a->build->failed) {
				build_install(fs, dir, a->build);
				build_free(a->build);
				a->build = NULL;
			}
		}
	}
	rest.p = a->rep.msg.data.p + a->pos;
	rest.len = a->rep.msg.data.len - (uint32_t)a->pos;
	/* One lookup per entry at most; entries are at least 21 bytes. */
	n = (int)(rest.len / 21) + 1;
	buf = malloc(size ? size : 1);
	counted = calloc((size_t)n, sizeof(*counted));
	if (!buf || !counted) {
		r = -ENOMEM;
		goto out_drop;
	}
	used = fill_dir(req, fs, ino, &rest, a->plus, plus, a->xgen, buf,
			size, counted, &ncounted, &consumed, &last_off);
	/*
	 * Done with `a` before replying: once the kernel has the reply it
	 * may release the directory, and `f` with it.  Should the reply not
	 * arrive, the kernel asks again at `off`, which no longer matches.
	 */
	a->pos += consumed;
	a->next = last_off;
	/* Drained and not the end: the next call asks the server. */
	if (a->pos >= a->rep.msg.data.len && !a->eof)
		ahead_reply_drop(a);
	if (fuse_reply_buf(req, buf, used) != 0) {
		/* The kernel never saw these entries: undo their lookups. */
		for (size_t i = 0; i < ncounted; i++)
			qn_forget(&fs->nodes, counted[i], 1);
	}
	free(counted);
	free(buf);
	return;

out_drop:
	free(counted);
	free(buf);
	ahead_reply_drop(a);
out_err:
	build_abandon(fs, a->build);
	a->build = NULL;
	fuse_reply_err(req, -r);
}

/* ---- SCAN: a subtree's listings in a few replies ---- */

/* A directory a SCAN announced (index 0: the scanned one). */
struct sdir {
	uint32_t parent;        /* index */
	char *name;             /* NULL for index 0 */
	struct qft_attr attr;
	struct bent *e;
	size_t n, cap;
	bool complete;          /* its DIR_END said status 0 */
	bool watched;           /* WATCHED came before it: a lease */
	struct qn_node *node;   /* made at install, with a reference */
};

struct scan {
	struct sdir *d;
	size_t nd, cap;
	size_t entries, limit;
	bool stop;              /* over the limit: nothing more is taken */
};

static void scan_free(struct qc_fs *fs, struct scan *sc)
{
	for (size_t i = 0; i < sc->nd; i++) {
		struct sdir *sd = &sc->d[i];

		for (size_t j = 0; j < sd->n; j++)
			free(sd->e[j].name);
		free(sd->e);
		free(sd->name);
		if (i && sd->node)
			qn_unref(&fs->nodes, sd->node);
	}
	free(sc->d);
}

static int scan_announce(struct scan *sc, uint32_t parent, const char *name,
			 const struct qft_attr *a)
{
	struct sdir *sd;

	if (sc->nd == sc->cap) {
		size_t nc = sc->cap ? sc->cap * 2 : 64;
		struct sdir *nd = realloc(sc->d, nc * sizeof(*nd));

		if (!nd)
			return -ENOMEM;
		sc->d = nd;
		sc->cap = nc;
	}
	sd = &sc->d[sc->nd];
	memset(sd, 0, sizeof(*sd));
	sd->parent = parent;
	if (name) {
		sd->name = strdup(name);
		if (!sd->name)
			return -ENOMEM;
		sd->attr = *a;
	}
	sc->nd++;
	return 0;
}

static int scan_add(struct scan *sc, const struct qft_scan_rec *rec)
{
	struct sdir *sd = &sc->d[rec->index];

	if (sd->n == sd->cap) {
		size_t nc = sd->cap ? sd->cap * 2 : 16;
		struct bent *ne = realloc(sd->e, nc * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		sd->e = ne;
		sd->cap = nc;
	}
	sd->e[sd->n].name = strdup(rec->name.s);
	if (!sd->e[sd->n].name)
		return -ENOMEM;
	sd->e[sd->n++].attr = rec->attr;
	sc->entries++;
	return 0;
}

/* Takes the records of one checked SCAN reply; -EPROTO when it does not
 * continue from where the last one stopped. */
static int scan_take(struct scan *sc, const struct qft_blob *data)
{
	struct qft_scan_rec rec;
	uint32_t base;
	struct qcur c;

	qcur_init(&c, data->p, data->len);
	if (qft_scan_head_decode(&c, &base) < 0 || base != sc->nd)
		return -EPROTO;
	while (!sc->stop && c.left && qft_scan_rec_decode(&c, &rec) == 0) {
		if (rec.kind == QFT_SCAN_REC_DIR_END) {
			sc->d[rec.index].complete = rec.status == 0;
			continue;
		}
		if (rec.kind == QFT_SCAN_REC_WATCHED) {
			sc->d[rec.index].watched = true;
			continue;
		}
		if (sc->entries >= sc->limit) {
			/* What is complete so far stays so; the rest is
			 * walked directory by directory. */
			sc->stop = true;
			break;
		}
		if (scan_add(sc, &rec) < 0 ||
		    ((rec.attr.mode & QFT_S_IFMT) == QFT_S_IFDIR &&
		     scan_announce(sc, rec.index, rec.name.s, &rec.attr) < 0)) {
			sc->stop = true;
			break;
		}
	}
	return 0;
}

/* The node of announced directory i (listing lock held: the table lock
 * nests inside it). */
static struct qn_node *scan_node(struct qc_fs *fs, struct scan *sc,
				 uint32_t i)
{
	struct sdir *sd = &sc->d[i];
	struct qn_node *p;

	if (sd->node || i == 0)
		return sd->node;
	p = scan_node(fs, sc, sd->parent);
	if (p)
		sd->node = qn_child_ref(&fs->nodes, p, sd->name, &sd->attr);
	return sd->node;
}

static void scan_install(struct qc_fs *fs, struct scan *sc,
			 const struct qc_dir_fetch *fb)
{
	struct qc_dircache *dc = dc_of(fs);
	bool strip = qc_hint_xattr_gen(fs) != fb->xgen;
	uint64_t top_dino, top_pino;
	struct listing *l;

	pthread_mutex_lock(&dc->lock);
	/* The client's own changes anywhere may be in the subtree. */
	if (spoiled(dc, fb->seq, NULL, 0, true))
		goto out_unlock;
	l = find_listing(dc, sc->d[0].node);
	top_dino = l ? l->dino : qn_rino(&fs->nodes, sc->d[0].node);
	top_pino = l ? l->pino : 0;
	for (uint32_t i = 0; i < sc->nd; i++) {
		struct sdir *sd = &sc->d[i];
		uint64_t dino = i ? sd->attr.ino : top_dino;
		uint64_t pino;
		struct qn_node *node;

		if (!sd->complete ||
		    spoiled(dc, fb->seq, NULL, dino, false)) {
			/* Not kept: nor is the watch it may have set. */
			if (sd->watched && dino)
				work_add(fs, WORK_UNWATCH, NULL, dino, NULL);
			continue;
		}
		node = scan_node(fs, sc, i);
		if (!node) {
			if (sd->watched && dino)
				work_add(fs, WORK_UNWATCH, NULL, dino, NULL);
			continue;
		}
		pino = i == 0 ? top_pino :
		       sd->parent ? sc->d[sd->parent].attr.ino : top_dino;
		l = listing_new(fs, node, dino, pino,
				fb->start_ns + secs_ns(fs->entry_timeout),
				fb->gen);
		if (!l)
			break;
		l->scanned = true;
		if (sd->watched && dino) {
			/* Watched since before the server read it. */
			l->leased = true;
			l->names_until = NEVER;
		}
		for (size_t j = 0; j < sd->n; j++) {
			if (strip)
				sd->e[j].attr.flags &= ~QFT_ATTR_NOXATTR;
			if (dent_put(dc, l, sd->e[j].name, &sd->e[j].attr,
				     fb->start_ns) < 0) {
				listing_drop(fs, l);
				l = NULL;
				break;
			}
		}
		if (l)
			evict(fs, l);
	}
out_unlock:
	pthread_mutex_unlock(&dc->lock);
}


/*
 * Lists the subtree of `top` into the cache with SCAN: OPENDIR sent
 * without waiting, SCANs until EOF or the cache's half is filled, CLOSE
 * without waiting.  Failures only mean nothing is cached.
 */
static void scan(struct qc_fs *fs, struct qn_node *top)
{
	struct qc_dircache *dc = dc_of(fs);
	char path[QFT_MAX_PATH + 1];
	struct scan sc = { 0 };
	struct qc_dir_fetch fb;
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen, h;
	bool eof = false;
	int r;

	if (qn_path(&fs->nodes, top, NULL, path) < 0 ||
	    qc_conn_wait(fs->conn, &gen) < 0 ||
	    qc_handle_alloc(fs->conn, gen, &h) < 0)
		return;
	sc.limit = dc->max_entries / 2 ? dc->max_entries / 2 : 1;
	if (scan_announce(&sc, 0, NULL, NULL) < 0)
		goto out_free;
	sc.d[0].node = top;
	/* Begun before settling, as a LOOKUP is (ops.c, qc_lookup). */
	qc_dir_fetch_begin(fs, &fb);
	qc_step_settle(fs);
	atomic_fetch_add(&dc->scans, 1);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	/* The server runs requests in order: the SCAN behind it needs no
	 * wait for its reply (and fails with EBADF if it failed). */
	if (qc_call_async(fs->conn, gen, &m, ignore_reply, NULL) < 0) {
		qc_handle_free(fs->conn, gen, h);
		goto out_free;
	}
	while (!eof && !sc.stop) {
		qft_msg_init(&m, QFT_OP_SCAN, 0);
		m.handle = h;
		m.length = QFT_MAX_SCAN;
		/* Leases for the listings, where the server can watch. */
		m.opflags = QFT_SCAN_WATCH;
		r = qc_call_gen(fs->conn, gen, &m, &rep);
		if (r == -ENOSYS || r == -EOPNOTSUPP) {
			pthread_mutex_lock(&dc->lock);
			dc->scan_broken = true;
			pthread_mutex_unlock(&dc->lock);
		}
		if (r < 0) {
			qft_debug("dircache: SCAN of '%s': %s", path,
				  strerror(-r));
			break;
		}
		r = qft_scan_check(&rep.msg.data);
		if (r >= 0)
			r = scan_take(&sc, &rep.msg.data);
		eof = rep.msg.opflags & QFT_SCAN_EOF;
		qc_reply_free(&rep);
		if (r < 0) {
			qft_warn("malformed SCAN reply for '%s'", path);
			/* Nothing of a scan that went wrong is trusted. */
			sc.nd = sc.nd ? 1 : 0;
			sc.d[0].complete = false;
			break;
		}
	}
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = h;
	(void)qc_send_noreply(fs->conn, gen, &m);
	qc_handle_free(fs->conn, gen, h);
	qft_debug("dircache: SCAN of '%s': %zu directories, %zu entries%s",
		  path, sc.nd, sc.entries, sc.stop ? " (stopped at the cap)" :
		  "");
	scan_install(fs, &sc, &fb);
out_free:
	scan_free(fs, &sc);
}

/*
 * A readdir of `dir` that the cache cannot answer: when its parent was
 * listed moments ago, something walks the tree, and the parent's whole
 * subtree is fetched at once (each listing once: a scan's own listings do
 * not start another).
 */
static void maybe_scan(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = dc_of(fs);
	char name[QFT_MAX_NAME + 1];
	uint64_t now = qc_now_ns();
	struct qn_node *parent;
	struct listing *pl;
	bool walk = false;

	if (qn_parent_ref(&fs->nodes, dir, &parent, name) < 0)
		return;
	pthread_mutex_lock(&dc->lock);
	pl = valid_listing(fs, parent, now);
	if (pl && !dc->scan_broken && !pl->scanned && pl->walked_ns &&
	    now - pl->walked_ns < WALK_NS) {
		pl->scanned = true;
		walk = true;
	}
	pthread_mutex_unlock(&dc->lock);
	if (walk)
		scan(fs, parent);
	qn_unref(&fs->nodes, parent);
}

/* ---- lookups ---- */

/*
 * A lookup in `dir` the cache could not answer: true when it is the
 * second one within WALK_NS of a directory without a listing, i.e. when
 * something looks up many names there (stat of many files, git status,
 * make) and reading the directory whole costs less than a lookup each.
 */
static bool busy_dir(struct qc_fs *fs, struct qn_node *dir)
{
	struct qc_dircache *dc = dc_of(fs);
	uint64_t now = qc_now_ns();
	bool busy = false;
	size_t i;

	pthread_mutex_lock(&dc->lock);
	if (!find_listing(dc, dir)) {
		i = ptr_bucket(dc, dir) & (PROBES - 1);
		if (dc->probes[i].dir != dir ||
		    now - dc->probes[i].since > WALK_NS) {
			dc->probes[i].dir = dir;
			dc->probes[i].misses = 0;
			dc->probes[i].since = now;
		}
		busy = ++dc->probes[i].misses == 2;
	}
	pthread_mutex_unlock(&dc->lock);
	return busy;
}

/*
 * Reads `dir` into the cache when it fits one READDIR reply: OPENDIR not
 * waited for, one READDIR PLUS, CLOSE not waited for.  A bigger one is
 * left alone (its lookups go to the server one by one, as before).
 */
static void fetch_listing(struct qc_fs *fs, struct qn_node *dir)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_dir_build *b;
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t gen, h;
	int r;

	if (qn_path(&fs->nodes, dir, NULL, path) < 0 ||
	    qc_conn_wait(fs->conn, &gen) < 0 ||
	    qc_handle_alloc(fs->conn, gen, &h) < 0)
		return;
	/* Begun before settling, as a LOOKUP is (ops.c, qc_lookup). */
	b = build_new(fs);
	if (!b)
		goto out_free_handle;
	qc_step_settle(fs);
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = h;
	qc_set_str(&m.path, path);
	if (qc_call_async(fs->conn, gen, &m, ignore_reply, NULL) < 0)
		goto out_free_build;
	qft_msg_init(&m, QFT_OP_READDIR, 0);
	m.handle = h;
	m.length = QFT_MAX_READDIR;
	m.opflags = READDIR_CACHE_FLAGS;
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r == 0) {
		note_watched(b, &rep);
		if (qc_readdir_check(&rep.msg.data, true) < 0)
			b->failed = true;
		else
			build_add(fs, b, &rep.msg.data);
		if (!(rep.msg.opflags & QFT_READDIR_EOF))
			b->failed = true;
		build_install(fs, dir, b);
		qc_reply_free(&rep);
	}
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = h;
	(void)qc_send_noreply(fs->conn, gen, &m);
out_free_build:
	build_free(b);
out_free_handle:
	qc_handle_free(fs->conn, gen, h);
}

bool qc_dir_reply_lookup(fuse_req_t req, struct qc_fs *fs, fuse_ino_t parent,
			 const char *name)
{
	struct qn_node *dir = qc_fs_node(fs, parent);
	struct fuse_entry_param e;
	double entry_to, attr_to;
	struct qft_attr a;
	struct qn_node *n;
	uint64_t xgen;
	int r;

	r = answer(fs, dir, name, true, &a, &entry_to, &attr_to, &xgen);
	if (r == -EAGAIN && cache_on(fs) && busy_dir(fs, dir)) {
		fetch_listing(fs, dir);
		r = answer(fs, dir, name, true, &a, &entry_to, &attr_to,
			   &xgen);
	}
	if (r == -EAGAIN)
		return false;
	if (r == 0) {
		/* Not kept by the kernel (timeout 0): every later lookup
		 * comes here again, and sees the name once it exists. */
		memset(&e, 0, sizeof(e));
		fuse_reply_entry(req, &e);
		atomic_fetch_add(&dc_of(fs)->negatives_local, 1);
		qc_stat_inc(&fs->stats, QC_STAT_LOOKUP_LOCAL);
		return true;
	}
	n = qn_lookup(&fs->nodes, dir, name, &a);
	if (!n)
		return false;
	qc_hint_noxattr_note(fs, n, &a, xgen);
	qc_entry_fill(fs, &e, n, &a);
	e.entry_timeout = entry_to;
	e.attr_timeout = attr_to;
	if (fuse_reply_entry(req, &e) != 0)
		qn_forget(&fs->nodes, n, 1);
	atomic_fetch_add(&dc_of(fs)->lookups_local, 1);
	qc_stat_inc(&fs->stats, QC_STAT_LOOKUP_LOCAL);
	return true;
}
