/* SPDX-License-Identifier: MIT */
/*
 * What the mount knows of the locks the server holds for it (-o
 * locks=server; docs/architecture.md, "Locks"): which lock owners took
 * locks on which node through which open file.  The FUSE callbacks
 * (ops/locks.c) take and drop the locks; this module only remembers, so
 * that
 *   - a close (FLUSH) sends the owner's QFT_LOCK_CLOSE only when the owner
 *     took locks on the file, not on every close;
 *   - an open file through which locks were taken is never opened again
 *     on a new server (a lost session, or one carried over: its locks did
 *     not come along) but fails with EIO (handle.c, rebind.c) -- never a
 *     silently lost lock;
 *   - blocking waits, which each hold a FUSE thread, stay below a cap.
 * It knows nothing of ranges or types, only which kinds an owner may
 * hold: a lock is noted before it is asked for, and forgotten when an
 * unlock drops every lock of its kind (flock's, or a record unlock of the
 * whole file) and no lock was asked for since that unlock was -- so the
 * client may think a lock held that is not, never the reverse.
 *
 * Its own lock, taken after a file's lock where both are held; nothing is
 * called with it held.  Error convention: 0 or a negative errno.
 */
#ifndef QC_LOCK_H
#define QC_LOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct qc_file;
struct qc_lock_ent;

/* Blocking waits at most at once: each holds one of the session's FUSE
 * threads (main.c's MAX_THREADS), and the rest must go on serving. */
#define QC_LOCK_MAX_WAITS 16u

/* Kinds of lock an owner may hold. */
#define QC_LOCK_RECORD 0x1u   /* fcntl: POSIX or OFD */
#define QC_LOCK_FLOCK  0x2u

struct qc_locks {
	pthread_mutex_t lock;
	struct qc_lock_ent *head;  /* lock */
	uint64_t gen;              /* lock: locks asked for, ever */
	unsigned waits;            /* lock: blocking waits in progress */
};

void qc_lock_init(struct qc_locks *t);
void qc_lock_destroy(struct qc_locks *t);

/*
 * `owner` is about to ask for a lock of `kind` on node `ino` through f:
 * from now on it may hold one.  0 or -ENOMEM; *gen is what
 * qc_lock_undo needs.
 */
int qc_lock_note(struct qc_locks *t, uint64_t ino, uint64_t owner,
		 const struct qc_file *f, unsigned kind, uint64_t *gen);
/* That lock was refused: forgotten again if nothing changed since. */
void qc_lock_undo(struct qc_locks *t, uint64_t ino, uint64_t owner,
		  const struct qc_file *f, unsigned kind, uint64_t gen);
/* The generation before an unlock that drops every lock of a kind. */
uint64_t qc_lock_gen(struct qc_locks *t);
/* That unlock succeeded: `owner` holds no lock of `kind` on `ino` any
 * more -- unless a lock was asked for since `gen`. */
void qc_lock_forget(struct qc_locks *t, uint64_t ino, uint64_t owner,
		    unsigned kind, uint64_t gen);
/* Whether `owner` may hold locks on node `ino`; and forgets them all. */
bool qc_lock_take_owner(struct qc_locks *t, uint64_t ino, uint64_t owner);
/* f was released: what was taken through it ended with it. */
void qc_lock_file_gone(struct qc_locks *t, const struct qc_file *f);
/* Whether locks were taken through f (and f is not released). */
bool qc_lock_file_held(struct qc_locks *t, const struct qc_file *f);

/* A blocking wait begins: false when QC_LOCK_MAX_WAITS are waiting. */
bool qc_lock_wait_begin(struct qc_locks *t);
void qc_lock_wait_end(struct qc_locks *t);

#endif /* QC_LOCK_H */
