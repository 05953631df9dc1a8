/* SPDX-License-Identifier: MIT */
/*
 * What the files of the directory cache (fuse/fs/dir/) share: its
 * structures and module-private functions.  Not for the rest of the
 * client, which includes fs/dircache.h.
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

static inline struct qc_dircache *qc_dir_of(struct qc_fs *fs)
{
	return fs->dirs;
}

/* Whether names may be answered from the cache at all. */
static inline bool qc_dir_cache_on(struct qc_fs *fs)
{
	return fs->dirs && fs->entry_timeout > 0;
}

static inline uint64_t qc_dir_secs_ns(double s)
{
	return s > 0 ? (uint64_t)(s * 1e9) : 0;
}

static inline bool qc_dir_is_dot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* store.c */
uint32_t qc_dir_name_hash(const char *name);
size_t qc_dir_ptr_bucket(const struct qc_dircache *dc, const void *p);
size_t qc_dir_ino_bucket(const struct qc_dircache *dc, uint64_t ino);
void qc_dir_ignore_reply(void *ctx, int err, struct qc_reply *rep);
void qc_dir_record(struct qc_dircache *dc, struct qn_node *dir, uint64_t dino,
		   bool all);
bool qc_dir_spoiled(const struct qc_dircache *dc, uint64_t seq,
		    const struct qn_node *dir, uint64_t dino, bool any_local);
uint64_t qc_dir_link_gen(struct qc_fs *fs);
struct dent *qc_dir_dent_find(const struct listing *l, const char *name,
			      uint32_t h);
void qc_dir_unstale(struct listing *l, const char *name);
bool qc_dir_is_stale(const struct listing *l, const char *name);
int qc_dir_dent_put(struct qc_dircache *dc, struct listing *l,
		    const char *name, const struct qft_attr *a,
		    uint64_t fetched_ns);
void qc_dir_dent_del(struct qc_dircache *dc, struct listing *l,
		     const char *name);
struct listing *qc_dir_find_listing(const struct qc_dircache *dc,
				    const struct qn_node *dir);
void qc_dir_touch(struct qc_dircache *dc, struct listing *l);
struct work *qc_dir_work_add(struct qc_fs *fs, enum work_kind kind,
			     struct qn_node *dir, uint64_t ino,
			     const char *name);
void qc_dir_work_add_names(struct qc_fs *fs, const struct listing *l);
void qc_dir_listing_drop(struct qc_fs *fs, struct listing *l);
void qc_dir_listing_drop_unwatch(struct qc_fs *fs, struct listing *l);
struct listing *qc_dir_valid_listing(struct qc_fs *fs, struct qn_node *dir,
				     uint64_t now);
void qc_dir_evict(struct qc_fs *fs, struct listing *keep);
struct listing *qc_dir_listing_new(struct qc_fs *fs, struct qn_node *dir,
				   uint64_t dino, uint64_t pino,
				   uint64_t names_until, uint64_t gen);
void qc_dir_forget_ino_attrs(struct qc_dircache *dc, uint64_t ino);
int qc_dir_mark_stale(struct qc_fs *fs, struct listing *l, const char *name);
int qc_dir_resolve_predicted(struct qc_fs *fs, struct listing *l);

/* lease.c */
uint64_t qc_dir_attr_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e);
bool qc_dir_attr_ok(struct qc_fs *fs, const struct listing *l,
		    const struct dent *e, uint64_t now);
uint64_t qc_dir_name_until(struct qc_fs *fs, const struct listing *l,
			   const struct dent *e);
double qc_dir_remaining(uint64_t until, uint64_t now, double max);
void qc_dir_watch_new_dir(struct qc_fs *fs, struct qn_node *dir,
			  uint64_t id, uint64_t dino);

/* notify.c */
void *qc_dir_worker_main(void *arg);
void qc_dir_work_clear(struct qc_fs *fs);

/* build.c */
void qc_dir_build_free(struct qc_dir_build *b);
void qc_dir_build_note_watched(struct qc_dir_build *b,
			       const struct qc_reply *rep);
struct qc_dir_build *qc_dir_build_new(struct qc_fs *fs);
void qc_dir_build_abandon(struct qc_fs *fs, struct qc_dir_build *b);
void qc_dir_build_add(struct qc_fs *fs, struct qc_dir_build *b,
		      const struct qft_blob *data);
void qc_dir_build_install(struct qc_fs *fs, struct qn_node *dir,
			  struct qc_dir_build *b);
bool qc_dir_busy(struct qc_fs *fs, struct qn_node *dir);
void qc_dir_fetch_listing(struct qc_fs *fs, struct qn_node *dir);

/* scan.c */
void qc_dir_maybe_scan(struct qc_fs *fs, struct qn_node *dir);

#endif /* QC_DIR_INTERNAL_H */
