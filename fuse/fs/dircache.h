/* SPDX-License-Identifier: MIT */
/*
 * The client's directory cache: complete listings of directories, with the
 * type, inode and full attributes of every entry, kept so that lookups,
 * getattrs and readdirs of a tree the client has seen cost no round trip.
 *
 * A listing belongs to a directory's node (it holds a reference on it, so
 * the node, and with it the listing's key, lives as long as the listing).
 * It comes from
 *   - a READDIR PLUS walk from cookie 0 to EOF (the kernel's readdir of the
 *     directory, read ahead as before: one READDIR of QFT_MAX_READDIR
 *     serves many kernel pages);
 *   - a SCAN of a subtree, started when the kernel walks a tree (a readdir
 *     of a directory whose parent was listed moments ago);
 *   - a directory this client just made (known empty).
 * The client's own namespace changes keep listings exact: the FUSE
 * callbacks (fuse/ops/) tell the cache of every create, mknod, symlink,
 * mkdir, link, rename and removal through qc_dir_note_*, the pipelined
 * CREATE of commit=async included (its entry has predicted attributes,
 * inode 0, until the server answers); a failure or a lost reply drops the
 * affected listing (qc_dir_drop).
 *
 * Validity.  Without a lease, a listing's names are trusted for
 * entry_timeout and its attributes for attr_timeout from when the request
 * that fetched them was sent, the promise the man page makes for the
 * kernel's own caches.  With a lease (the server watches the directory and
 * promised a NOTIFY when anyone else changes it), both are trusted until
 * the server says otherwise or the link is lost.  Attributes of a file
 * this client opened after they were fetched (or holds open now) are not
 * trusted: writes change size and times behind the listing's back.
 *
 * Memory: at most `max_entries` entries over all listings (-o dircache=N);
 * the least recently used listings go first.
 *
 * Locks.  One mutex (the listing lock) guards every listing.  Lock order:
 * the listing lock, then the node table's lock (node.c), then an open
 * file's lock.  Nobody holds the listing lock while sending a request or
 * waiting for a reply, and it is never taken with the table or a file's
 * lock held; so the connection's reader thread (NOTIFY frames, async
 * completions) may take it.
 *
 * Error convention: 0 or a negative errno, unless said otherwise.
 *
 * The code is in fuse/fs/dir/ (prefix qc_dir_; fs/dir/internal.h lists
 * its files, each with one job); this header is all the rest of the
 * client uses.
 */
#ifndef QC_DIRCACHE_H
#define QC_DIRCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <fuse_lowlevel.h>

#include "net/conn.h"
#include "msg.h"

struct qc_fs;
struct qc_file;
struct qn_node;
struct qc_dir_snap;
struct qc_dir_build;
struct qc_dircache;

#define QC_DIRCACHE_DEFAULT 200000u   /* entries, -o dircache= */
#define QC_DIRCACHE_MAX     50000000u

/*
 * Per open directory (struct qc_dir_ahead in struct qc_file).  The kernel
 * does not run two readdirs of one open directory at once (its file
 * position lock), so only qc_dir_readdir touches it, one call at a time,
 * and without the file's lock.
 */
struct qc_dir_ahead {
	/* Served from the cache: a snapshot of the listing taken at cookie
	 * 0, so that a listing in progress stays consistent; cookies are
	 * indexes into it. */
	struct qc_dir_snap *snap;
	/* Served from the server: the rest of the last READDIR reply. */
	struct qc_reply rep;    /* owns the entries */
	bool valid;
	bool plus;              /* READDIR PLUS: entries carry attributes */
	bool eof;               /* the reply ended the directory */
	size_t pos;             /* first unserved byte of rep.msg.data */
	uint64_t next;          /* the cookie the kernel asks for next */
	uint64_t until;         /* CLOCK_MONOTONIC ns: attributes trusted */
	uint64_t xgen;          /* xattr_gen before the READDIR was sent */
	/* A listing being collected from cookie 0 on, installed at EOF. */
	struct qc_dir_build *build;
	/* Opened without an OPENDIR (the cache had its listing): the
	 * handle is opened by the first readdir the cache cannot answer.
	 * Until then the file's gen is 0, which no link has. */
	bool lazy;
};

/*
 * Sets up fs->dirs with a cap of `max_entries` (0 turns the cache off:
 * every lookup and readdir goes to the server, as the readdir-ahead alone
 * did).  Before the session runs.
 */
int qc_dir_init(struct qc_fs *fs, size_t max_entries);
/* Starts the worker that invalidates the kernel's caches and gives
 * watches back (after fuse_daemonize forked, with fs->se set). */
int qc_dir_start(struct qc_fs *fs);
/* Stops it, once the session loop ended (before the session goes). */
void qc_dir_stop(struct qc_fs *fs);
/* Stops the worker and frees every listing; before the node table goes. */
void qc_dir_destroy(struct qc_fs *fs);
/* Parses -o dircache=N (entries, 0 = off); prints why and returns
 * -EINVAL on a bad value. */
int qc_dir_parse_max(const char *s, size_t *out);

/*
 * What a request that fetches names or attributes from the server noted
 * before it was sent, so that its answer is not cached when something
 * changed meanwhile (a notification, or the client's own change).
 */
struct qc_dir_fetch {
	uint64_t seq;           /* the cache's event count */
	uint64_t start_ns;      /* CLOCK_MONOTONIC: validity runs from here */
	uint64_t xgen;          /* xattr_gen (hints.h) */
	uint64_t gen;           /* the link (conn.h): answers hold on it only */
};

void qc_dir_fetch_begin(struct qc_fs *fs, struct qc_dir_fetch *fb);

/*
 * The kernel's LOOKUP of `name` in `parent`, answered from the cache when
 * it can be (a node and its attributes, or "no such name": a negative
 * entry the kernel does not keep, so that it asks again).  Returns true
 * when it replied to req, false when the server must be asked.
 */
bool qc_dir_reply_lookup(fuse_req_t req, struct qc_fs *fs, fuse_ino_t parent,
			 const char *name);

/*
 * The server's answer about `name` in `parent` to a request begun with
 * `fb`: its attributes `a`, or with a NULL, that it does not exist.
 * Refreshes the entry of a listing the cache keeps, unless something
 * changed there since the request was sent.
 */
void qc_dir_note_fetched(struct qc_fs *fs, struct qn_node *parent,
			 const char *name, const struct qft_attr *a,
			 const struct qc_dir_fetch *fb);

/*
 * Whether an OPENDIR of `dir` may wait until a readdir needs the server:
 * the cache holds a complete listing of it now (after a SCAN of its
 * parent's subtree when this looks like a tree walk).
 */
bool qc_dir_open_lazily(struct qc_fs *fs, struct qn_node *dir);
/*
 * Marks directory f, made without an OPENDIR because qc_dir_open_lazily
 * said so (no link, gen 0), for the first readdir that needs the server
 * to send the OPENDIR then.  Before f is shared.
 */
void qc_dir_ahead_lazy(struct qc_file *f);

/*
 * Answers the kernel's READDIR (or with `plus` READDIRPLUS) of `size`
 * bytes at cookie `off` on open directory f of node `ino`: from a snapshot
 * of a complete listing when the cache has one at cookie 0, else from
 * what was read ahead when it continues that listing, else with a new
 * READDIR (which collects a listing for the cache on the way).  May start
 * a SCAN of the parent's subtree when this looks like a tree walk.
 * Replies to req exactly once.
 */
void qc_dir_readdir(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		    fuse_ino_t ino, size_t size, off_t off, bool plus);

/* Frees what was read ahead or snapshot (the directory is released). */
void qc_dir_ahead_drop(struct qc_dir_ahead *a);

/* ---- For the rest of the client (create, getattr, setattr) ---- */

/*
 * Whether `name` exists in `parent`, from a valid listing only (never
 * asks the server).  Returns 1 when it does and the listing's attributes
 * for it are trusted right now (copied to *out unless NULL), 0 when the
 * name is known to be absent, -EAGAIN when the cache does not know (no
 * valid listing, a name changed on the server and not yet re-read, or
 * attributes not trusted: ask the server).
 */
int qc_dir_lookup(struct qc_fs *fs, struct qn_node *parent, const char *name,
		  struct qft_attr *out);

/*
 * Fresh attributes of node `n` from its parent's listing: true with *out
 * set when the listing is valid, holds n's name for the same object (inode
 * and type) and its attributes are trusted; false otherwise (ask the
 * server).  The NOXATTR hint in out->flags is as trustworthy as the rest.
 */
bool qc_dir_cached_attr(struct qc_fs *fs, struct qn_node *n,
			struct qft_attr *out);

/*
 * True only when `parent`'s listing is under a server lease (nobody else
 * can have made the name without the client being told), `parent` is a
 * directory this client made itself (a notification of a name made on
 * the server a moment ago may still be on its way: see fs/dir/lease.c), AND
 * `name` is absent from it: an O_EXCL create of it can be answered before
 * the server's reply.  A create sent on that basis must still report the
 * server's error at the latest at close().
 */
bool qc_dir_leased_absent(struct qc_fs *fs, struct qn_node *parent,
			  const char *name);

/*
 * Under the same conditions (a lease on a directory this client made):
 * 1 with the file type bits in *type when `name` is in it, 0 when it is
 * absent; -EAGAIN when the listing cannot say (ask the server).  What a
 * rename there will meet (commit=async answers it before the server).
 */
int qc_dir_leased_name(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, uint32_t *type);

/*
 * This client made or changed `name` in `parent` (create, setattr,
 * a write's new size), with attributes `a` (possibly predicted before the
 * server's reply; call again with the reply's).  The entry is added or
 * replaced in parent's listing, if there is one, and trusted as fresh
 * (but not while the node has open files, nor after a later open or
 * release: node.c stamps those).  If the request then fails, or its reply
 * is lost, call qc_dir_drop(parent).
 */
void qc_dir_note_entry(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, const struct qft_attr *a);

/*
 * New attributes `a` of the object called `name` in `parent` (an answer
 * to a change of it): its entry is updated if the listing still has that
 * name for that object, and never made -- by the time the answer comes
 * the name may have gone (a rename sent since).
 */
void qc_dir_note_attr(struct qc_fs *fs, struct qn_node *parent,
		      const char *name, const struct qft_attr *a);

/*
 * The server's answer `a` to a change of node `n` (called `name` in
 * `parent`) sent while n's attribute generation was `gen` (qn_attr_gen):
 * noted as qc_dir_note_attr does, unless a later change of n went out
 * since -- answers to a chown and a chmod sent back to back may come
 * after both were predicted, and the chown's would put back the mode
 * from before the chmod.  The caller marks n (qn_attr_stale) before it
 * notes the prediction of each change.
 */
void qc_dir_note_answer(struct qc_fs *fs, struct qn_node *parent,
			const char *name, const struct qft_attr *a,
			struct qn_node *n, uint64_t gen);

/* This client made directory `name` in `parent` (attributes `a`, request
 * begun with `fb`): its entry, and a listing of it, known empty. */
void qc_dir_note_mkdir(struct qc_fs *fs, struct qn_node *parent,
		       const char *name, const struct qft_attr *a,
		       const struct qc_dir_fetch *fb);

/* This client made a hard link `name` in `parent` to an object with
 * attributes `a`: every other name of it has a new link count. */
void qc_dir_note_link(struct qc_fs *fs, struct qn_node *parent,
		      const char *name, const struct qft_attr *a);

/* This client renamed (with `exchange`, swapped) `name` in `parent` and
 * `newname` in `newparent`; before qn_rename moves the nodes. */
void qc_dir_note_rename(struct qc_fs *fs, struct qn_node *parent,
			const char *name, struct qn_node *newparent,
			const char *newname, bool exchange);

/* This client removed `name` from `parent`: the listing drops it (and the
 * listing of the directory it named, if any). */
void qc_dir_note_gone(struct qc_fs *fs, struct qn_node *parent,
		      const char *name);

/*
 * What `parent` holds is no longer known (a request that changes it
 * failed in a way that may or may not have taken effect, e.g. a lost
 * reply): its listing is dropped.  Safe with parent NULL.
 */
void qc_dir_drop(struct qc_fs *fs, struct qn_node *parent);

/*
 * Around a SETXATTR or REMOVEXATTR of node `n`: its entry in its parent's
 * listing loses the NOXATTR hint.  Call before sending and again after
 * the reply (whatever it was).
 */
void qc_dir_xattr_changed(struct qc_fs *fs, struct qn_node *n);

/* ---- For walk-ahead (fs/walk.h; fs/dir/walk.c) ---- */

struct qc_dir_walk_ent {
	char *name;             /* owned */
	struct qft_attr attr;
	bool trusted;           /* attr may be answered now */
};

/*
 * The regular files of `dir`'s listing, in listing order, with their
 * attributes, when the listing is under a lease on the live link, in
 * *out (freed with qc_dir_walk_free), their number as the result;
 * `trusted` says whose attributes are trusted now (not opened by this
 * client since, no other names, not changed on the server since).  -EAGAIN when there is no such listing or it
 * holds more than `max` names, -ENOMEM.
 */
ssize_t qc_dir_walk_list(struct qc_fs *fs, struct qn_node *dir, size_t max,
			 struct qc_dir_walk_ent **out);
void qc_dir_walk_free(struct qc_dir_walk_ent *e, size_t n);
/* Orders of qc_dir_walk_next's directories.  By name is as the walkers
 * that sort names take them (rsync, git): a directory's as if it ended
 * in '/' ("14.0.6" before "14"). */
enum { QC_DIR_WALK_LISTING, QC_DIR_WALK_NAME, QC_DIR_WALK_INO };
/*
 * Up to `max` directories a depth-first walker goes to after the files
 * of `dir`: its subdirectories (those after `after`, the file it is at,
 * unless NULL), then those of its parent after it (and so on up a few
 * levels), in `order` (QC_DIR_WALK_*), each with a node reference in
 * out[] (the caller drops them), only those whose own listing is under a
 * lease now.  Their number.
 */
size_t qc_dir_walk_next(struct qc_fs *fs, struct qn_node *dir, int order,
			const char *after, struct qn_node **out, size_t max);
/*
 * Whether a depth-first walker in directory `cur`, following `order`
 * (QC_DIR_WALK_*), has passed directory `a` for good: neither is the
 * other's ancestor, and under their lowest common ancestor, whose
 * listing must be leased, `a`'s branch comes first.  False when that
 * cannot be known.
 */
bool qc_dir_walk_passed(struct qc_fs *fs, struct qn_node *a,
			struct qn_node *cur, int order);
/* Whether `a` comes before `b` in dir's leased listing in `order`
 * (QC_DIR_WALK_*): 1 or 0; -EAGAIN without such a listing, -ENOENT when
 * either name is not in it. */
int qc_dir_walk_cmp(struct qc_fs *fs, struct qn_node *dir, const char *a,
		    const char *b, int order);
/* The cache's event count now: taken before sending a FETCH. */
uint64_t qc_dir_walk_seq(struct qc_fs *fs);
/*
 * Whether contents of `name` in `dir` read with attributes `a` are the
 * file's current contents: the listing is under a lease on the live
 * link, its entry for `name` is unchanged since (no notification about
 * it) with trusted attributes of the same inode, size, mtime and ctime,
 * and, with `since`, no change of `dir` was recorded after that event.
 */
bool qc_dir_walk_fresh(struct qc_fs *fs, struct qn_node *dir,
		       const char *name, const struct qft_attr *a,
		       const uint64_t *since);

/*
 * Change notification (conn.h, qc_notify_fn) for fs: CHANGED forgets the
 * name (or the whole listing) of the directory with that inode, GONE drops
 * its listing, ALL every listing; the kernel's caches of what changed are
 * invalidated by a worker thread, never by the caller (the reader thread).
 * An ALL that comes with the link's death leaves the kernel's caches
 * alone until a new link is up: while there is no server to ask, what it
 * was told holds for as long as it was told.
 */
void qc_dir_notify(void *fs, uint64_t dir_ino, uint32_t kind,
		   const char *name, size_t namelen);

#endif /* QC_DIRCACHE_H */
