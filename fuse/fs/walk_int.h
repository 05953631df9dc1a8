/* SPDX-License-Identifier: MIT */
/*
 * Walk-ahead's own (fs/walk.h): the walks' state, shared by its files,
 * each calling only those below it: walk.c (a walker's opens and reads)
 * over walk_ahead.c (the order of a tree and the directories fetched
 * ahead) over walk_fetch.c (the table of walks and their FETCHes) over
 * walk_list.c (a walk made from a listing).  No other module includes
 * it.
 */
#ifndef QC_WALK_INT_H
#define QC_WALK_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs/dircache.h"
#include "fs/walk.h"

/* Directories above a walk's that it knows (wdir.up). */
#define QC_WALK_UP 16u

/*
 * Orders of a walker's opens: the directory's (find, tar, grep -r), its
 * names' (rsync, ls), its inode numbers' (cp, which sorts by inode on
 * file systems where that reads faster).
 */
enum order { BY_LISTING, BY_NAME, BY_INO, ORDERS };

/* A file of a followed directory the walk asked for.  Walk lock. */
struct slot {
	bool ready;             /* the contents are in (else asked) */
	bool unwanted;          /* asked, then given up: dropped on arrival */
	uint64_t charge;        /* its part of qc_walk.held */
	struct qft_attr attr;   /* ready: what the bytes came with */
	uint8_t *data;          /* ready: the whole file (malloc, or NULL) */
	uint32_t len;
};

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
	/* The directories above, nearest first, when the walk was made:
	 * identities only, no references (names hold their parents, and a
	 * stale one only misjudges which walk gives its files up). */
	const struct qn_node *up[QC_WALK_UP];
	unsigned nup;
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
	bool ahead;             /* fetched before the walker got here: no
				 * file of it opened yet */
	unsigned heads;         /* ahead, too big to be fetched whole: the
				 * orders (bits) its first files were in */
	bool next_done;         /* the directories after it were asked */
	unsigned refs;          /* the table's, FETCHes', waiters' */
	bool gone;              /* out of the table */
};

struct qc_walk {
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* with the lock: a FETCH was answered */
	struct wdir *dirs[QC_WALK_DIRS];  /* lock */
	uint64_t held;          /* lock: bytes asked for or held, all dirs */
	/* Lock: for each order, how many of the walkers' opens came right
	 * after the one before in it (halved now and then): which order
	 * a tree's walker follows, where one directory's few opens cannot
	 * tell (they come in every order at once). */
	unsigned votes[ORDERS];
};

/* Lock held: the ents index of the file at place p of order o. */
static inline size_t qc_walk_at_in(const struct wdir *wd, enum order o,
				   size_t p)
{
	return wd->perm[o] ? wd->perm[o][p] : p;
}

/* Lock held: the place of ents index i in order o. */
static inline size_t qc_walk_place_in(const struct wdir *wd, enum order o,
				      size_t i)
{
	return wd->rank[o] ? wd->rank[o][i] : i;
}

/* The same in the order wd follows. */
static inline size_t qc_walk_at(const struct wdir *wd, size_t p)
{
	return qc_walk_at_in(wd, wd->order, p);
}

static inline size_t qc_walk_place(const struct wdir *wd, size_t i)
{
	return qc_walk_place_in(wd, wd->order, i);
}

/* Walks retired under the lock, freed after it (qc_walk_bury). */
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

/* walk_list.c.  A walk of `dir` from its leased listing (a reference
 * on dir), or NULL; no lock held. */
struct wdir *qc_walk_new(struct qc_fs *fs, struct qn_node *dir);
void qc_walk_free(struct qc_fs *fs, struct wdir *wd);
/* The ents index of `name` in wd, or SIZE_MAX. */
size_t qc_walk_find_name(const struct wdir *wd, const char *name);

/* walk_fetch.c: the table and the FETCHes; the walk lock held unless
 * said. */
/* What a slot holds once its file was opened or passed: never asked
 * again. */
extern struct slot qc_walk_passed;
/* Slot s of wd no longer counts against the budgets. */
void qc_walk_uncharge(struct qc_fs *fs, struct wdir *wd, struct slot *s);
/* Gives slot i of wd up; its bytes, if any, were never read. */
void qc_walk_slot_drop(struct qc_fs *fs, struct wdir *wd, size_t i);
/* The walk of `dir` in the table, or NULL; walks idle too long retire
 * into g on the way. */
struct wdir *qc_walk_find(struct qc_fs *fs, struct qn_node *dir,
			  uint64_t now, struct grave *g);
/* Puts a new walk in the table, retiring the least recently used one
 * (a walk fetched ahead last) when it is full. */
void qc_walk_insert(struct qc_fs *fs, struct wdir *wd, struct grave *g);
/* Takes wd out of the table and drops what it holds (into g when its
 * last reference goes). */
void qc_walk_retire(struct qc_fs *fs, struct wdir *wd, struct grave *g);
/* Drops a reference; true when the caller must free wd (qc_walk_bury). */
bool qc_walk_put(struct wdir *wd);
/* Frees the walks in g; no lock held. */
void qc_walk_bury(struct qc_fs *fs, struct grave *g);
/* Whether the calling thread's caller is the one wd's FETCHes read as. */
bool qc_walk_same_caller(const struct wdir *wd);
/* Whether file i of wd may be asked for now. */
bool qc_walk_may_ask(struct qc_fs *fs, struct wdir *wd, size_t i);
/* A new FETCH of wd, prepended to *out; NULL without memory. */
struct batch *qc_walk_batch_new(struct qc_fs *fs, struct wdir *wd,
				struct batch **out);
/* File i of wd goes into FETCH b, charged; false without memory. */
bool qc_walk_batch_add(struct qc_fs *fs, struct wdir *wd, struct batch *b,
		       size_t i);
/* What asking for all of wd's small files would hold, or 0 when they are
 * too many, more than `limit` bytes, or none. */
uint64_t qc_walk_whole_bytes(struct qc_fs *fs, struct wdir *wd,
			     uint64_t limit);
/* Asks for all of wd's small files when qc_walk_whole_bytes allows and
 * the budget has room for them and `slack` more: false if not. */
bool qc_walk_fetch_whole(struct qc_fs *fs, struct wdir *wd, uint64_t limit,
			 uint64_t slack, struct batch **out);
/* What asking for wd's first small files in each order of wd->heads
 * would hold: as many as one FETCH names, up to `limit` bytes; 0 if
 * none. */
uint64_t qc_walk_head_bytes(struct qc_fs *fs, struct wdir *wd,
			    uint64_t limit);
/* Asks for those, when the budget has room for them and `slack` more:
 * a directory too big to be fetched whole, whose first files a walker
 * that goes there reads first.  False if not. */
bool qc_walk_fetch_head(struct qc_fs *fs, struct wdir *wd, uint64_t limit,
			uint64_t slack, struct batch **out);
/* Sends the FETCHes of `list`; no lock held. */
void qc_walk_send(struct qc_fs *fs, struct batch *list);

/* walk_ahead.c. */
/* Where the walker goes on from: the directory whose files are all
 * asked for, the order it follows, and the file it is at ("" if none). */
struct next_step {
	struct qn_node *dir;    /* holds a reference */
	int order;              /* QC_DIR_WALK_* */
	char after[QFT_MAX_NAME + 1];
};
/* Lock held: whether the walk of wd's directory is all asked for, so the
 * directories after it may be (once); if so fills *ns (a reference on
 * the directory's node). */
bool qc_walk_next_due(struct qc_fs *fs, struct wdir *wd,
		      struct next_step *ns);
/* The directories after ns's fetched ahead; no lock held; drops ns's
 * reference. */
void qc_walk_next(struct qc_fs *fs, struct next_step *ns);
/* Lock held: a vote for each order for_order[] names (halving them all
 * now and then, so that a new walker's order wins in time). */
void qc_walk_votes_add(struct qc_walk *w, const bool for_order[ORDERS]);
/* The walker entered directory `dir`: votes for the orders in which it
 * came from its parent as a depth-first walker would; no lock held. */
void qc_walk_vote_entry(struct qc_fs *fs, struct qn_node *dir);

#endif /* QC_WALK_INT_H */
