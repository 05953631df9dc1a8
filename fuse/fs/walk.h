/* SPDX-License-Identifier: MIT */
/*
 * Walk-ahead (qc_walk_): the contents of a tree walker's next small files
 * fetched before it opens them, so that cp -r, tar, rsync and grep -r
 * off the mount do not wait one round trip per file.
 *
 * When a process reads a file of a directory whose listing the cache
 * holds under a lease (dircache.h), the client sends FETCH requests
 * (protocol.h, QFT_FEAT_FETCH) for the files that come after it, in
 * listing order -- or in name order, once the walker's opens show that
 * it follows that order (rsync sorts) -- and keeps the answers.  The
 * walker's next read-only open of such a file is then answered with
 * those bytes: the OPEN goes out behind the answer (a pipelined step,
 * steps.h) and the read-ahead stream is primed with the contents
 * (readahead.h), so neither the open nor the reads wait.  Opens of the
 * directory's other files advance the walk and keep the requests ahead
 * of it.  A stat-only walk (find, du, ls -lR) never reads a file, so it
 * fetches nothing.  A walker that moves on to the next directory (a
 * read-only open there by a caller that read another directory's files
 * within QC_WALK_NEXT_NS) has its walk begin with that open, so that the
 * first FETCH there travels beside the first file's OPEN.  Once the
 * walker's files of a directory are all asked for, the small files of the
 * directories it goes to next (qc_dir_walk_next: its subdirectories, then
 * those after it, in the walker's order) are asked for whole, at most
 * QC_WALK_NEXT_DIRS directories not reached yet, within the same budget:
 * a tree of many small directories does not wait at each directory.
 *
 * Coherence.  Contents are used only while the directory's listing is
 * under a lease on the live link, its entry for the name unchanged since
 * the FETCH was sent (a notification drops or marks it) with trusted
 * attributes of the same inode, size, mtime and ctime as the bytes came
 * with (qc_dir_walk_fresh), and not at all for O_DIRECT, writing or
 * truncating opens, a file whose pages the kernel may hold, nor for a
 * caller other than the one the FETCH read as.  A file this client
 * opened since the listing was read has untrusted attributes, so
 * neither a local write nor a truncate can leave stale bytes usable.
 * Files over QC_WALK_FILE_MAX (the protocol's bound for one file of a
 * FETCH) are left to their OPEN, which starts their read-ahead as before.
 *
 * Memory: the bytes asked for and held, over all directories, never
 * exceed -o walkahead=SIZE (0 turns walk-ahead off); at most
 * QC_WALK_DIRS directories are followed at once (least recently used
 * goes; those fetched ahead take the place of walks passed through), and
 * one untouched for QC_WALK_IDLE_NS is given up.
 *
 * Locks: the walk lock is the innermost: nothing else is taken, no
 * request sent and no reply waited for while holding it, except waiting
 * on its own condition for a FETCH answer.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_WALK_H
#define QC_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "net/conn.h"
#include "msg.h"

struct qc_fs;
struct qn_node;
struct qc_walk;

#define QC_WALK_DEFAULT   ((uint64_t)4 << 20)
/* Files above this size are opened as before (their OPEN brings their
 * first QC_OPEN_DATA bytes and starts read-ahead).  The whole bound of
 * the protocol, less the byte a FETCH asks for beyond a file's size: a
 * header tree's files of 64 to 256 KiB (a quarter of /usr/include's
 * bytes) each cost an OPEN's round trip and a read-ahead of their own
 * under a bound of 64 KiB. */
#define QC_WALK_FILE_MAX  (QFT_FETCH_FILE_MAX - 1)
/* Data one FETCH asks for, at most (its names' sizes, plus one byte
 * each). */
#define QC_WALK_BATCH     ((uint64_t)256 << 10)
/* Names one FETCH asks for, at most. */
#define QC_WALK_NAMES     128u
/* Files asked for ahead of the walker, at most (empty files cost no
 * bytes). */
#define QC_WALK_AHEAD     1024u
/* What a walk may hold at first: one read of a file asks for little;
 * each open that follows the order doubles it, up to the budget. */
#define QC_WALK_CREDIT    ((uint64_t)32 << 10)
/* Directories followed at once (those fetched ahead of the walker
 * included), and how long an untouched one is kept. */
#define QC_WALK_DIRS      16u
/* Directories whose files are fetched ahead of the walker, before it
 * gets there, at most. */
#define QC_WALK_NEXT_DIRS 8u
#define QC_WALK_IDLE_NS   (10ull * 1000000000u)
/* A read-only open in a new directory by a caller that read another
 * directory's files this recently begins its walk at once. */
#define QC_WALK_NEXT_NS   (2ull * 1000000000u)
/* A directory with at most this many small files of at most this many
 * bytes in all is fetched whole by its walk's first FETCH. */
#define QC_WALK_WHOLE_FILES 128u
#define QC_WALK_WHOLE_BYTES ((uint64_t)256 << 10)
/* The same bound for a directory fetched before the walker gets there
 * (a tree walk is under way, so more may be asked for at once; one
 * FETCH answers at most QFT_MAX_DATA). */
#define QC_WALK_AHEAD_BYTES ((uint64_t)768 << 10)
/* Room a walk wants free in the budget before it takes from others. */
#define QC_WALK_HEADROOM  ((uint64_t)256 << 10)
/* Votes for an order (walk_int.h) at which all are halved. */
#define QC_WALK_VOTES     1024u
/* Names of a directory a walk considers: a bigger one is not followed. */
#define QC_WALK_LIST_MAX  100000u

/* Sets up fs->walk (nothing when walkahead is 0): after the options set
 * fs->walkahead (-o walkahead=SIZE, qc_fs_parse_size; QC_WALK_DEFAULT
 * without it). */
int qc_walk_init(struct qc_fs *fs);
/* Frees it, after the session: every FETCH is completed by then. */
void qc_walk_destroy(struct qc_fs *fs);

/*
 * The first read of an open file of node `n` (any open): the walk of its
 * directory starts here, or goes on.
 */
void qc_walk_note_read(struct qc_fs *fs, struct qn_node *n);

/* Contents of a file answered by walk-ahead. */
struct qc_walk_hit {
	struct qft_attr attr;   /* what the bytes came with */
	struct qc_reply rep;    /* rep.msg.data: the whole file; owns it */
};

/*
 * A read-only open (`flags`, as open(2)'s) of regular file `n`: when
 * the walk fetched its contents and they are current (see above), fills
 * *hit and returns true (the caller frees hit->rep, or hands it to
 * qc_ra_prime); false otherwise, after advancing the walk either way.
 */
bool qc_walk_open(struct qc_fs *fs, struct qn_node *n, int flags,
		  struct qc_walk_hit *hit);

#endif /* QC_WALK_H */
