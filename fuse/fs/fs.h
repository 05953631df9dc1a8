/* SPDX-License-Identifier: MIT */
/*
 * The mounted filesystem: the state every module of the client shares
 * (struct qc_fs, fuse_req_userdata() of every request), its options, and
 * the small helpers they all use.
 *
 * Modules of the filesystem layer (fuse/fs/), bottom up, each calling
 * only those before it:
 *   node.c, node_file.c  qn_: the inode table; its open files
 *   idmap.c    qc_idmap_: owners and modes as shown (idmap=, uid=, ...)
 *   entry.c    qc_entry_: entry and attribute replies as the kernel gets
 *              them
 *   hints.c    qc_hint_: what the client may answer about xattrs itself
 *   lock.c     qc_lock_: which owners took locks on the server through
 *              which open files
 *   handle.c   qc_file_ (base): an open file's lifetime, handle, reopen,
 *              changes in flight and their sticky error
 *   bdp.c      qc_bdp_: a direction's measured bandwidth-delay product
 *   stream.c   qc_stream_: the mount's estimates and whether the window
 *              and read-ahead are sized from them
 *   readahead.c   qc_ra_: read-ahead of an open file
 *   walk.c        qc_walk_: a tree walker's next small files fetched ahead
 *   writebehind.c qc_wb_: write-behind of an open file
 *   steps.c    qc_step_: pipelined steps and the
 *              attributes predicted while they are out
 *   commit.c   qc_commit_: -o commit=async
 *   rebind.c   qc_rebind_: open files bound again on a new server when
 *              a session is carried over to it (net/conn.h)
 *   dircache.c qc_dir_: directory listings: lookups and readdirs answered
 *              locally, SCAN of walked trees, leases
 *   file.c     qc_file_: open, flush, fsync and release over the above
 *   fs.c       qc_fs_: options, init and teardown of the mount
 * and above them the FUSE callbacks (fuse/ops/).
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_FS_H
#define QC_FS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "fs/commit.h"
#include "fs/entry.h"
#include "fs/handle.h"
#include "net/conn.h"
#include "fs/hints.h"
#include "fs/idmap.h"
#include "fs/lock.h"
#include "fs/node.h"
#include "fs/steps.h"
#include "fs/stream.h"
#include "fs/stats.h"

struct qc_fs {
	struct fuse_session *se; /* for cache invalidation notices */
	struct qc_conn *conn;
	struct qn_table nodes;
	/* owners and modes as the local side sees them (idmap.h): set up
	 * before the mount serves, read-only after */
	struct qc_idmap idmap;
	double entry_timeout;    /* seconds the kernel may cache a name */
	double attr_timeout;     /* ... attributes */
	double negative_timeout; /* ... a missing name; 0: not cached */
	bool commit_none;        /* -o commit=none: FLUSH without fdatasync */
	/* -o allow_other: other local users use the mount, and with a
	 * server running as root what they make is theirs (ops.c,
	 * owner_for).  Immutable once mounted. */
	bool multi_user;
	/* The kernel checks permissions (default_permissions, given or
	 * added for a shared mount): it is given POSIX ACLs to check and
	 * cache too (ops.c, FUSE_CAP_POSIX_ACL).  Immutable once mounted. */
	bool kernel_acls;
	/* -o follow_symlinks: the server shows each symlink as what it
	 * leads to (ops.c, make_entry).  Immutable once mounted. */
	bool follow;
	/*
	 * Bulk streams.  window: most bytes of WRITEs per handle sent and
	 * not yet acknowledged (-o window=SIZE; 0 = every write waits for
	 * its answer).  readahead: most bytes a sequential reader's
	 * read-ahead may ask for ahead of it (-o readahead=SIZE; 0 = off).
	 * Until sizes_set (qc_fs_set_sizes), init applies the defaults.
	 */
	uint64_t window;
	uint64_t readahead;
	bool sizes_set;
	/* -o walkahead=SIZE: most bytes of files fetched ahead of tree
	 * walkers (walk.h; 0 = off); immutable once mounted.  walk: its
	 * state (its own lock), NULL when off. */
	uint64_t walkahead;
	struct qc_walk *walk;
	/* Read-ahead bytes asked for and not yet consumed, all handles:
	 * bounds the client's memory whatever the number of readers. */
	atomic_uint_fast64_t ra_bytes;
	/* atomic: generations of the xattr hints (hints.h) */
	struct qc_hints hints;
	/* The directory cache (dircache.h; its own lock); NULL when off. */
	struct qc_dircache *dirs;
	/* atomic: what the mount did (stats.h) */
	struct qc_stats stats;
	/*
	 * Pipelined CREATEs not answered yet, all files (steps.h,
	 * qc_step_settle): requests on the meta stream that could meet
	 * such a name wait for them, since only requests on one stream
	 * keep their order.  Its own lock.
	 */
	struct qc_steps steps;
	/* The link-measured window and read-ahead sizes (stream.h); its
	 * own locks. */
	struct qc_streams streams;
	/* -o commit=async (commit.h) */
	struct qc_commit commit;
	/* Every file, for a session carried over to a new server
	 * (handle.h); its own lock. */
	struct qc_file_reg files;
	/* The locks the server holds for the mount (lock.h); its own
	 * lock. */
	struct qc_locks locks;
};

#define QC_WINDOW_DEFAULT    ((uint64_t)16 << 20)
#define QC_READAHEAD_DEFAULT ((uint64_t)16 << 20)
#define QC_STREAM_SIZE_MAX   ((uint64_t)1 << 30)

/* The node table and the locks, before the session starts. */
int qc_fs_init(struct qc_fs *fs);

/*
 * Parses -o window= and -o readahead= (either may be NULL for the
 * default): a byte count with an optional K, M or G suffix (powers of
 * 1024), at most QC_STREAM_SIZE_MAX.  Prints the reason and returns
 * -EINVAL on a bad value.
 */
int qc_fs_set_sizes(struct qc_fs *fs, const char *window,
		    const char *readahead);

/* parse_size for other options of the fs layer (-o walkahead=). */
int qc_fs_parse_size(const char *name, const char *s, uint64_t *out);

/* Frees the node table and what the kernel left open, once the session
 * has ended. */
void qc_fs_destroy(struct qc_fs *fs);

static inline struct qn_node *qc_fs_node(struct qc_fs *fs, fuse_ino_t ino)
{
	return qn_from_ino(&fs->nodes, ino);
}

/* CLOCK_MONOTONIC in ns: the clock of every hint's and cache's expiry. */
static inline uint64_t qc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Until when attributes fetched now may answer getattr (attr_timeout). */
static inline uint64_t qc_fs_attr_until(const struct qc_fs *fs)
{
	return qc_now_ns() + (uint64_t)(fs->attr_timeout * 1e9);
}

static inline void qc_set_str(struct qft_str *s, const char *p)
{
	s->s = p;
	s->len = (uint32_t)strlen(p);
}

#endif /* QC_FS_H */
