/* SPDX-License-Identifier: MIT */
/*
 * What the files of the directory cache (fuse/fs/dir/, prefix qc_dir_)
 * share: its structures and module-private functions.  Not for the rest
 * of the client, which includes fs/dircache.h.
 *
 * The files, bottom up (each calls only the ones above it in this list):
 *   store.c    listings and their entries, the event ring, the LRU and
 *              eviction, the worker's queue
 *   build.c    listings built from READDIR PLUS replies (a readdir's, or
 *              a busy directory read whole for its lookups)
 *   scan.c     SCAN of a walked subtree
 *   lease.c    what may be answered locally and for how long: validity,
 *              lookups, creates under a lease, a new directory's lease
 *   note.c     the client's own changes and what its requests learn
 *   notify.c   the server's notifications and the worker thread that
 *              invalidates the kernel's caches
 *   readdir.c  the kernel's readdir on an open directory
 *   walk.c     what walk-ahead (fs/walk.h) takes from leased listings
 *   setup.c    -o dircache=N, init, the worker's start and stop, destroy
 */
#ifndef QC_DIR_INTERNAL_H
#define QC_DIR_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/dircache.h"
#include "fs/fs.h"
#include "msg.h"
#include "protocol.h"

/* Events remembered to tell whether a fetch raced with a change. */
#define RING            1024u
/* Names of one listing changed on the server and not read again; past
 * this the listing is dropped. */
#define STALE_MAX       16u
/* A readdir of a directory whose parent was listed this recently is a
 * tree walk (find, du, ls -R, cp -r, tar, rsync). */
#define WALK_NS         (2ull * 1000000000u)
#define NEVER           UINT64_MAX
/* Directories whose lookups missed recently (see qc_dir_busy). */
#define PROBES          256u

/* One name of a listing.  Listing lock, as the listing it is in. */
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
	/* Names added or removed, or a name's type or inode number changed
	 * in place (store.c): walk.c's sorted subdirectories are redone. */
	uint64_t changes;
	/* walk.c's: the slots of its subdirectories in one order (sorted
	 * when `changes` was `at`), for the walker's next directories. */
	struct {
		uint32_t *slot;
		size_t n;
		int order;      /* QC_DIR_WALK_* */
		uint64_t at;
	} subs;
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

/* Listing lock while queued; the worker's alone once it took it off. */
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
 * a directory (dir), or the server's notice about one (dino), or all.
 * Listing lock (qc_dircache.ring). */
struct event {
	uint64_t seq;
	struct qn_node *dir;
	uint64_t dino;
	bool all;
};

struct qc_dircache {
	/* Set by qc_dir_init, read-only after: no lock. */
	size_t max_entries;
	size_t nbuckets;        /* of by_node and by_ino, a power of two */
	pthread_mutex_t lock;   /* the listing lock: the fields below */
	size_t nentries;        /* names over all listings */
	struct listing **by_node, **by_ino;
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
	/* The worker's queue. */
	struct work *work_head, **work_tail;
	/* Invalidations put off while there is no link (qc_dir_work_add
	 * _names), which the worker queues once a new one is up. */
	struct work *held_head, **held_tail;
	unsigned nwork;         /* in both */
	bool work_stop;
	/* with the lock (CLOCK_MONOTONIC): work queued, or stop */
	pthread_cond_t work_cond;
	pthread_cond_t lease_cond; /* with the lock: a new directory's lease
				    * was answered */
	/* No lock: only the threads that start and stop the worker
	 * (qc_dir_start, qc_dir_stop, outside the session loop). */
	bool worker_running;
	pthread_t worker;
	/* Atomics, no lock; logged by qc_dir_destroy, which tests read in
	 * the debug log. */
	atomic_uint_fast64_t lookups_local, negatives_local, readdirs_local,
			     scans, evictions, notices;
};

/* One name of a listing being collected (a build's or a SCAN's); owned
 * by what collects it, no lock. */
struct bent {
	struct qft_attr attr;
	char *name;
};

/*
 * A listing collected from READDIR PLUS replies of one open directory
 * (struct qc_dir_ahead: one readdir at a time, no lock), or of a busy
 * directory read whole (qc_dir_fetch_listing, on its own).  No lock: its
 * collector's alone; installed under the listing lock.
 */
struct qc_dir_build {
	struct qc_dir_fetch fb;
	uint64_t next;          /* the cookie the next reply must start at */
	uint64_t dino, pino;
	struct bent *e;
	size_t n, cap;
	bool failed;            /* too big, or out of memory: not cached */
	bool watched;           /* every reply said WATCHED: a lease */
};

/* The cache of fs; NULL when it is off (-o dircache=0). */
static inline struct qc_dircache *qc_dir_of(struct qc_fs *fs)
{
	return fs->dirs;
}

/* Whether names may be answered from the cache at all. */
static inline bool qc_dir_cache_on(struct qc_fs *fs)
{
	return fs->dirs && fs->entry_timeout > 0;
}

/* A timeout option in CLOCK_MONOTONIC ns (0 for none). */
static inline uint64_t qc_dir_secs_ns(double s)
{
	return s > 0 ? (uint64_t)(s * 1e9) : 0;
}

/* "." or "..": never an entry of a listing. */
static inline bool qc_dir_is_dot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/*
 * store.c: listings.  Every function on a listing or on dc's fields wants
 * the listing lock held (and takes the node table's lock inside it, never
 * the other way round); qc_dir_link_gen and qc_dir_ignore_reply want no
 * lock.
 */
uint32_t qc_dir_name_hash(const char *name);
size_t qc_dir_ptr_bucket(const struct qc_dircache *dc, const void *p);
size_t qc_dir_ino_bucket(const struct qc_dircache *dc, uint64_t ino);
/* The completion of a request whose outcome the next one on the same
 * handle shows (an OPENDIR before a READDIR or SCAN). */
void qc_dir_ignore_reply(void *ctx, int err, struct qc_reply *rep);
/* Records a change (of `dir`, of inode `dino`, or with `all` of
 * everything) that fetches in flight may have missed. */
void qc_dir_record(struct qc_dircache *dc, struct qn_node *dir, uint64_t dino,
		   bool all);
/* Whether an answer about `dir` (or `dino`) fetched since event `seq`
 * may miss a change; with `any_local`, any change the client made. */
bool qc_dir_spoiled(const struct qc_dircache *dc, uint64_t seq,
		    const struct qn_node *dir, uint64_t dino, bool any_local);
/* The live link's generation; 0 when there is none. */
uint64_t qc_dir_link_gen(struct qc_fs *fs);
/* The entry `name` (hash h) of `l`, or NULL. */
struct dent *qc_dir_dent_find(const struct listing *l, const char *name,
			      uint32_t h);
/* Names changed on the server since `l` was read (asked for again). */
void qc_dir_unstale(struct listing *l, const char *name);
bool qc_dir_is_stale(const struct listing *l, const char *name);
/* Adds or replaces `name`; 0, or -ENOMEM and the caller drops `l`. */
int qc_dir_dent_put(struct qc_dircache *dc, struct listing *l,
		    const char *name, const struct qft_attr *a,
		    uint64_t fetched_ns);
void qc_dir_dent_del(struct qc_dircache *dc, struct listing *l,
		     const char *name);
/* The listing of `dir`, valid or not, or NULL. */
struct listing *qc_dir_find_listing(const struct qc_dircache *dc,
				    const struct qn_node *dir);
/* `l` was used: to the front of the LRU. */
void qc_dir_touch(struct qc_dircache *dc, struct listing *l);
/* Queues work for the worker and returns it; NULL when dropped (queue
 * full, stopping, or no session for an invalidation). */
struct work *qc_dir_work_add(struct qc_fs *fs, enum work_kind kind,
			     struct qn_node *dir, uint64_t ino,
			     const char *name);
/* Queues the invalidation of every name of leased `l`; while there is
 * no link, for when a new one is up. */
void qc_dir_work_add_names(struct qc_fs *fs, const struct listing *l);
/* Takes `l` out and frees it; its lease, if any, is left to the caller. */
void qc_dir_listing_drop(struct qc_fs *fs, struct listing *l);
/* The same, and gives its lease back (UNWATCH, by the worker). */
void qc_dir_listing_drop_unwatch(struct qc_fs *fs, struct listing *l);
/* The listing of `dir` while its names are trusted at `now`, or NULL
 * (an expired one, or one of another link, is dropped on the way). */
struct listing *qc_dir_valid_listing(struct qc_fs *fs, struct qn_node *dir,
				     uint64_t now);
/* Drops least recently used listings, never `keep`, down to the cap. */
void qc_dir_evict(struct qc_fs *fs, struct listing *keep);
/* A new, empty listing of `dir` (replacing any), with a node reference;
 * NULL when out of memory.  The caller calls qc_dir_evict once it is
 * filled. */
struct listing *qc_dir_listing_new(struct qc_fs *fs, struct qn_node *dir,
				   uint64_t dino, uint64_t pino,
				   uint64_t names_until, uint64_t gen);
/* Every name of inode `ino` has a new link count: attributes unknown. */
void qc_dir_forget_ino_attrs(struct qc_dircache *dc, uint64_t ino);
/* `name` of `l` changed on the server; -1 when `l` was dropped instead. */
int qc_dir_mark_stale(struct qc_fs *fs, struct listing *l, const char *name);
/* Entries of pipelined CREATEs take their node's answer; returns how many
 * still wait for it, or -1 when `l` was dropped. */
int qc_dir_resolve_predicted(struct qc_fs *fs, struct listing *l);

/* lease.c: validity (listing lock held) and a new directory's lease. */
/* Until when (CLOCK_MONOTONIC ns, NEVER) the attributes of `e` hold. */
uint64_t qc_dir_attr_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e);
/* Whether the attributes of `e` may be answered at `now`. */
bool qc_dir_attr_ok(struct qc_fs *fs, const struct listing *l,
		    const struct dent *e, uint64_t now);
/* Until when the name of `e` may be answered. */
uint64_t qc_dir_name_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e);
/* Seconds from `now` to `until`, at most `max` (no lock needed). */
double qc_dir_remaining(uint64_t until, uint64_t now, double max);
/* Asks for a lease on `dir`, just made (listing `id`, inode `dino`),
 * without waiting; clears the listing's lease_asked in every case.  No
 * lock held. */
void qc_dir_watch_new_dir(struct qc_fs *fs, struct qn_node *dir,
			  uint64_t id, uint64_t dino);

/* notify.c: the worker thread (started by qc_dir_start, arg: the fs). */
void *qc_dir_worker_main(void *arg);
/* Frees the work left once the worker stopped; takes the listing lock. */
void qc_dir_work_clear(struct qc_fs *fs);

/* build.c: no lock held by the caller (each takes it as it needs). */
void qc_dir_build_free(struct qc_dir_build *b);
/* A reply without WATCHED makes the collection unleased. */
void qc_dir_build_note_watched(struct qc_dir_build *b,
			       const struct qc_reply *rep);
/* A new collection, its fetch begun now; NULL when out of memory. */
struct qc_dir_build *qc_dir_build_new(struct qc_fs *fs);
/* Frees `b` given up before its end, and gives its watch back. */
void qc_dir_build_abandon(struct qc_fs *fs, struct qc_dir_build *b);
/* Adds the entries of one checked READDIR PLUS reply. */
void qc_dir_build_add(struct qc_fs *fs, struct qc_dir_build *b,
		      const struct qft_blob *data);
/* Installs `b` as the listing of `dir` unless it failed or a change may
 * have raced with it; `b` stays the caller's to free. */
void qc_dir_build_install(struct qc_fs *fs, struct qn_node *dir,
			  struct qc_dir_build *b);
/* A lookup missed in `dir`: true at the second miss in a moment. */
bool qc_dir_busy(struct qc_fs *fs, struct qn_node *dir);
/* Reads `dir` into the cache when one READDIR reply holds it. */
void qc_dir_fetch_listing(struct qc_fs *fs, struct qn_node *dir);

/* scan.c: when `dir`'s parent was listed moments ago (a tree walk), its
 * subtree is fetched with SCAN.  No lock held; waits for the server. */
void qc_dir_maybe_scan(struct qc_fs *fs, struct qn_node *dir);
/*
 * What a scan takes from `n` SCAN replies' data, as scan() does, without
 * installing anything: the directories announced, the entries taken and
 * how many directories are complete.  0, or -EPROTO when a reply is
 * malformed (then only the top directory is left, incomplete).  For
 * tests/fuzz/fuzz_scan.c.
 */
int qc_dir_scan_parse(const struct qft_blob *replies, size_t n, size_t limit,
		      size_t *dirs, size_t *entries, size_t *complete);

#endif /* QC_DIR_INTERNAL_H */
