// SPDX-License-Identifier: MIT
/*
 * FUSE low-level operations over the protocol (see ops.h).
 *
 * Helpers return 0 or a negative errno; each callback ends by turning that
 * into exactly one reply.  Paths are built into stack buffers of
 * QFT_MAX_PATH + 1 bytes from the node table; a node that lost its name
 * (unlinked, renamed over) is reached through one of its open handles where
 * the protocol has a handle form of the operation, and is ENOENT otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>

#include "conn.h"
#include "errmap.h"
#include "log.h"
#include "msg.h"
#include "node.h"
#include "ops.h"
#include "protocol.h"

/* Read-ahead asks for what one READ carries, at multiples of that size. */
#define RA_CHUNK        ((uint64_t)QFT_MAX_DATA)
/* A new stream's credit; it doubles up to fs->readahead while the reader
 * keeps consuming everything. */
#define RA_CREDIT_START ((uint64_t)2 << 20)
/* Read-ahead all handles together may hold: at least this, or two full
 * windows. */
#define RA_TOTAL_MIN    ((uint64_t)64 << 20)
/* Chunks that one kernel read (at most RA_CHUNK bytes) can span. */
#define RA_MAX_IOV      4

struct qc_file;

/*
 * One READ of a read-ahead stream.  It lives while it is on its file's
 * list (listed), while its reply is awaited (!done) and while readers use
 * its data (pins); ra_chunk_maybe_free frees it when none of these holds.
 * Fields not marked immutable are guarded by the file's lock.
 */
struct ra_chunk {
	struct ra_chunk *next;  /* file lock: the stream's list, by offset */
	struct ra_chunk *snext; /* owned by the reader that made it: to send */
	struct qc_file *f;      /* immutable */
	uint64_t off;           /* immutable */
	uint32_t len;           /* immutable: bytes asked for */
	uint32_t got;           /* file lock: bytes received (< len: EOF) */
	uint32_t served;        /* file lock: bytes handed to the kernel */
	uint32_t charged;       /* file lock: its part of fs->ra_bytes */
	unsigned pins;          /* file lock: readers using the data */
	bool listed;            /* file lock */
	bool done;              /* file lock: the reply (or error) is in */
	int err;                /* file lock: the READ's error, -errno */
	struct qc_reply rep;    /* file lock: the data, once done */
};

/*
 * One open file or directory, with its two bulk streams.
 *
 * Write-behind: a WRITE is answered to the kernel as soon as it is sent;
 * wb_bytes counts what the server has not acknowledged yet, bounded by
 * fs->window.  The first failed WRITE's error is kept in werr and returned
 * by every later write, fsync and flush until a flush reports it.
 *
 * Read-ahead: on the second read in a row that continues the previous one,
 * READs for the chunks ahead of the reader are sent without waiting and
 * their replies kept, in order, on ra_head..ra_tail; reads inside that
 * window are served from them, anything else stops the stream.
 *
 * The callbacks of both (wb_done, ra_done) run on the connection's reader
 * thread and take only `lock`, which nobody holds while sending or waiting
 * for a reply.  `async` counts the calls not completed yet (and readers
 * that still use chunks after answering the kernel, which may release the
 * file as soon as it has the answer): a released file is freed by whoever
 * brings it to zero.  Lock order: the node table's lock, then a file's
 * lock.
 */
/*
 * The rest of a directory's last READDIR reply.  The kernel lists a
 * directory a page at a time; asking the server for a page each time
 * cost `ls -l` of 1,000 entries about ten round trips.  The client asks
 * for QFT_MAX_READDIR instead and serves the kernel's next pages from
 * here while it reads on from where it stopped.
 */
struct dir_ahead {
	struct qc_reply rep;    /* owns the entries */
	bool valid;
	bool plus;              /* READDIR PLUS: entries carry attributes */
	bool eof;               /* the reply ended the directory */
	size_t pos;             /* first unserved byte of rep.msg.data */
	uint64_t next;          /* the cookie the kernel asks for next */
	uint64_t until;         /* CLOCK_MONOTONIC ns: attributes trusted */
	uint64_t xgen;          /* xattr_gen before the READDIR was sent */
};

struct qc_file {
	struct qn_file nf;      /* first: node link and protocol handle */
	struct qc_fs *fs;       /* immutable */
	bool dir;               /* immutable */
	/* The kernel does not run two readdirs of one open directory at
	 * once (its file position lock), so only do_readdir touches this,
	 * one call at a time, and without `lock`. */
	struct dir_ahead ahead;
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* lock: an async call completed */
	bool written;           /* lock: written since the last FLUSH */
	int werr;               /* lock: sticky write error, -errno or 0 */
	uint64_t wb_bytes;      /* lock: WRITE bytes sent, not answered */
	uint64_t wb_issued;     /* lock: WRITEs sent (or about to be) */
	uint64_t wb_answered;   /* lock: ... and completed */
	unsigned async;         /* lock: async calls not completed, and
				 * reads still unpinning after their reply */
	bool closing;           /* lock: released; the last completion frees */
	uint64_t ra_next;       /* lock: where a sequential read begins next */
	bool ra_on;             /* lock: a read-ahead stream runs */
	bool ra_eof;            /* lock: a chunk came back short */
	uint64_t ra_pos;        /* lock: furthest end of a read in the stream */
	uint64_t ra_end;        /* lock: end of the last chunk asked for */
	uint64_t ra_credit;     /* lock: how far past ra_pos it may ask; kept
				 * across streams, halved by writes that
				 * waste it, doubled by a reader using it */
	uint64_t ra_eaten;      /* lock: consumed since the credit last grew */
	struct ra_chunk *ra_head; /* lock */
	struct ra_chunk *ra_tail; /* lock */
	uint64_t nocap_until;   /* lock: CLOCK_MONOTONIC ns until which the
				 * node is known to have no file capability */
	/*
	 * Reconnects (conn.h): nf.handle is a number on link `gen`, and
	 * both change (under lock) when file_handle() re-opens the file on
	 * a new link -- which it does only when nothing written through it
	 * can have been lost; otherwise the file fails for good (`failed`).
	 * mods counts changes sent through the handle (WRITE, FALLOCATE,
	 * truncation); durable is the count that a successful FLUSH or
	 * FSYNC covered.
	 */
	uint64_t gen;           /* lock */
	int oflags;             /* immutable: the open(2) flags */
	int failed;             /* lock: -errno for every later use, or 0 */
	bool reopening;         /* lock: a thread re-opens it; others wait */
	uint64_t mods;          /* lock */
	uint64_t durable;       /* lock */
};

/* Bumped by every change of XATTR_CAPS through the mount, so that a
 * GETXATTR answered meanwhile is not remembered. */
static atomic_uint_fast64_t caps_gen;

/* Bumped by every SETXATTR and REMOVEXATTR sent, so that a NOXATTR hint in
 * attributes the server read around it is not remembered. */
static atomic_uint_fast64_t xattr_gen;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct qc_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct qn_node *node_of(struct qc_fs *fs, fuse_ino_t ino)
{
	return qn_from_ino(&fs->nodes, ino);
}

static struct qc_file *file_of(const struct fuse_file_info *fi)
{
	return (struct qc_file *)(uintptr_t)fi->fh;
}

static void set_str(struct qft_str *s, const char *p)
{
	s->s = p;
	s->len = (uint32_t)strlen(p);
}

/* Kernel names can be up to 1024 bytes; the protocol allows NAME_MAX. */
static int check_name(const char *name)
{
	return strlen(name) > QFT_MAX_NAME ? -ENAMETOOLONG : 0;
}

static int node_path(struct qc_fs *fs, fuse_ino_t ino, const char *name,
		     char *buf)
{
	int r;

	if (name && (r = check_name(name)) < 0)
		return r;
	r = qn_path(&fs->nodes, node_of(fs, ino), name, buf);
	return r < 0 ? r : 0;
}

static void attr_to_stat(const struct qft_attr *a, struct stat *st)
{
	qft_attr_to_stat(a, st);
	/*
	 * The preferred I/O size is what one request carries, not the
	 * server's disk block: cp and friends size their buffers from it, and
	 * each write(2) is one round trip.
	 */
	st->st_blksize = QFT_MAX_DATA;
}

/*
 * Remembers the server's NOXATTR hint (protocol.h) for attr_timeout, as
 * long as it trusts the attributes that carried it, or forgets it when
 * they did not carry it.  `xgen` is xattr_gen as it was before the request
 * that returned `a` was sent.
 */
static void noxattr_note(struct qc_fs *fs, struct qn_node *n,
			 const struct qft_attr *a, uint64_t xgen)
{
	uint64_t until = 0;

	if ((a->flags & QFT_ATTR_NOXATTR) && fs->attr_timeout > 0 &&
	    atomic_load(&xattr_gen) == xgen)
		until = now_ns() + (uint64_t)(fs->attr_timeout * 1e9);
	pthread_mutex_lock(&fs->nodes.lock);
	n->noxattr_until = until;
	pthread_mutex_unlock(&fs->nodes.lock);
}

static bool noxattr_known(struct qc_fs *fs, fuse_ino_t ino)
{
	struct qn_node *n = node_of(fs, ino);
	uint64_t now = now_ns();
	bool known;

	pthread_mutex_lock(&fs->nodes.lock);
	known = now < n->noxattr_until;
	pthread_mutex_unlock(&fs->nodes.lock);
	return known;
}

static void noxattr_forget(struct qc_fs *fs, fuse_ino_t ino)
{
	struct qn_node *n = node_of(fs, ino);

	pthread_mutex_lock(&fs->nodes.lock);
	n->noxattr_until = 0;
	pthread_mutex_unlock(&fs->nodes.lock);
}

static void reply_attr(fuse_req_t req, struct qc_fs *fs, struct qn_node *n,
		       const struct qft_attr *a, uint64_t xgen)
{
	struct stat st;

	qn_note_attr(&fs->nodes, n, a, NULL);
	noxattr_note(fs, n, a, xgen);
	attr_to_stat(a, &st);
	fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void fill_entry(struct qc_fs *fs, struct fuse_entry_param *e,
		       struct qn_node *n, const struct qft_attr *a)
{
	memset(e, 0, sizeof(*e));
	e->ino = qn_to_ino(&fs->nodes, n);
	e->attr_timeout = fs->attr_timeout;
	e->entry_timeout = fs->entry_timeout;
	attr_to_stat(a, &e->attr);
}

/* Answers a request that created or found `name` in `parent`. */
static bool attr_behind_writes(struct qc_fs *fs, struct qn_node *n,
			       const struct qft_attr *a, struct qft_attr *out);

static void reply_entry(fuse_req_t req, struct qc_fs *fs, fuse_ino_t parent,
			const char *name, const struct qft_attr *a,
			uint64_t xgen)
{
	struct fuse_entry_param e;
	struct qft_attr fresh;
	struct qn_node *n;

	n = qn_lookup(&fs->nodes, node_of(fs, parent), name, a);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	noxattr_note(fs, n, a, xgen);
	fill_entry(fs, &e, n,
		   attr_behind_writes(fs, n, a, &fresh) ? &fresh : a);
	/* An interrupted request's reply never reaches the kernel, and
	 * neither does the lookup it counted. */
	if (fuse_reply_entry(req, &e) != 0)
		qn_forget(&fs->nodes, n, 1);
}

static struct qc_file *file_new(struct qc_fs *fs, bool dir)
{
	struct qc_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fs = fs;
	f->dir = dir;
	/* No read continues "the previous one" before there is one. */
	f->ra_next = UINT64_MAX;
	f->ra_credit = RA_CREDIT_START;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	return f;
}

/* Frees c once nothing holds it any more; file lock held (or f unshared). */
static void ra_chunk_maybe_free(struct ra_chunk *c)
{
	if (c->listed || !c->done || c->pins)
		return;
	atomic_fetch_sub(&c->f->fs->ra_bytes, c->charged);
	qc_reply_free(&c->rep);
	free(c);
}

static void ra_unlink_head(struct qc_file *f)
{
	struct ra_chunk *c = f->ra_head;

	f->ra_head = c->next;
	if (!f->ra_head)
		f->ra_tail = NULL;
	c->next = NULL;
	c->listed = false;
	ra_chunk_maybe_free(c);
}

/*
 * Ends the read-ahead stream and drops its data; chunks still awaited are
 * freed by their completion, chunks in use by their last reader.  Another
 * stream needs two reads in a row again.
 */
static void ra_stop(struct qc_file *f)
{
	while (f->ra_head)
		ra_unlink_head(f);
	f->ra_on = false;
	f->ra_eof = false;
	f->ra_next = UINT64_MAX;
}

/* Once no request can refer to f any more (f->async == 0). */
static void file_free(struct qc_file *f)
{
	/* Written through a mapping after the last close(), say: nobody is
	 * left to be told, so at least the log is. */
	if (f->werr)
		qft_warn("a write to a released file failed: %s",
			 strerror(-f->werr));
	ra_stop(f);
	if (f->ahead.valid)
		qc_reply_free(&f->ahead.rep);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/*
 * Completes one async call of f: wakes whoever waits for it, releases the
 * lock (held on entry), and frees f if it was released and this was its
 * last call.  f must not be touched after this.
 */
static void file_async_done(struct qc_file *f)
{
	bool last;

	f->async--;
	last = f->closing && f->async == 0;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	if (last)
		file_free(f);
}

/*
 * After the last reference: the handle goes back to the server.  CLOSE
 * needs no waiting (the server runs it after the WRITEs before it), but
 * the file lives on until the completions that refer to it have run.
 */
static void file_close(struct qc_fs *fs, struct qc_file *f)
{
	struct qft_msg m;
	uint64_t gen;
	bool last;

	pthread_mutex_lock(&f->lock);
	gen = f->gen;
	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = f->nf.handle;
	pthread_mutex_unlock(&f->lock);
	/* A handle of a link that is gone went with it: nothing to close. */
	(void)qc_send_noreply(fs->conn, gen, &m);
	/* Reusable now: the server sees this CLOSE before any later bind. */
	qc_handle_free(fs->conn, gen, m.handle);
	pthread_mutex_lock(&f->lock);
	ra_stop(f);
	f->closing = true;
	last = f->async == 0;
	pthread_mutex_unlock(&f->lock);
	if (last)
		file_free(f);
}

static void file_put(struct qc_fs *fs, struct qc_file *f)
{
	if (f && qn_file_put(&fs->nodes, &f->nf))
		file_close(fs, f);
}

static void file_release(struct qc_fs *fs, struct qc_file *f)
{
	if (qn_file_detach(&fs->nodes, &f->nf))
		file_close(fs, f);
}

/*
 * Drops the read-ahead data of every open file of n, which a write or a
 * truncation through this mount has just made stale.  Called after that
 * request was sent, so a chunk asked for later is fresh, and before the
 * kernel hears back, so no read issued after it can be served old data.
 */
static void ra_invalidate(struct qc_fs *fs, struct qn_node *n)
{
	pthread_mutex_lock(&fs->nodes.lock);
	for (struct qn_file *nf = n ? n->files : NULL; nf; nf = nf->next) {
		struct qc_file *f = (struct qc_file *)nf;

		bool wasted = false;

		if (f->dir)
			continue;
		pthread_mutex_lock(&f->lock);
		/*
		 * Read-ahead thrown away unread means reads and writes take
		 * turns on this file: ask less far ahead next time, down to
		 * one chunk, so that each turn does not refetch a window.
		 */
		for (struct ra_chunk *c = f->ra_head; c; c = c->next)
			wasted |= !c->done || c->served < c->got;
		if (wasted && f->ra_credit / 2 >= RA_CHUNK)
			f->ra_credit /= 2;
		ra_stop(f);
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
}

/* The same for the node of an open file (whose node is stable while the
 * kernel holds the file, but read under the table lock all the same). */
static void ra_invalidate_file(struct qc_fs *fs, struct qc_file *f)
{
	struct qn_node *n;

	pthread_mutex_lock(&fs->nodes.lock);
	n = f->nf.node;
	pthread_mutex_unlock(&fs->nodes.lock);
	ra_invalidate(fs, n);
}

/* Whether WRITEs sent through f on the live link are still unanswered. */
static bool writes_in_flight(struct qc_fs *fs, struct qc_file *f)
{
	bool busy;

	if (f->dir)
		return false;
	pthread_mutex_lock(&f->lock);
	busy = !f->failed && f->gen == qc_conn_gen(fs->conn) &&
	       f->wb_issued != f->wb_answered;
	pthread_mutex_unlock(&f->lock);
	return busy;
}

/*
 * Names the object of a path operation on `ino`: its path, or when it has
 * none any more, or has WRITEs in flight, one of its open handles
 * (*borrowed, to be put back).
 * Callers whose operation has no handle form pass borrowed = NULL.
 */
static int target_of(struct qc_fs *fs, fuse_ino_t ino, char *path,
		     struct qc_file **borrowed)
{
	struct qn_file *nf;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (borrowed && r == 0) {
		/*
		 * Path requests travel on the meta stream, file data on
		 * bulk (conn.h, "Two streams"): while WRITEs of an open
		 * handle are unanswered, only a request queued behind them
		 * on the same stream is sure to see them.
		 */
		nf = qn_file_borrow(&fs->nodes, node_of(fs, ino));
		if (nf && writes_in_flight(fs, (struct qc_file *)nf)) {
			*borrowed = (struct qc_file *)nf;
			path[0] = '\0';
			return 0;
		}
		file_put(fs, (struct qc_file *)nf);
	}
	if (r != -ENOENT || !borrowed)
		return r;
	nf = qn_file_borrow(&fs->nodes, node_of(fs, ino));
	if (!nf)
		return -ENOENT;
	*borrowed = (struct qc_file *)nf;
	path[0] = '\0';
	return 0;
}

/* The connection's "that handle's link is gone" is EIO to a user. */
static int user_err(int r)
{
	return r == -ENOTCONN ? -EIO : r;
}

/* Whether attributes `a` name another object than node `n` knew: another
 * type, or with `ino_too`, another inode. */
static bool node_replaced(struct qc_fs *fs, struct qn_node *n,
			  const struct qft_attr *a, bool ino_too)
{
	bool changed;

	pthread_mutex_lock(&fs->nodes.lock);
	changed = (n->rtype && n->rtype != (a->mode & QFT_S_IFMT)) ||
		  (ino_too && n->rino && n->rino != a->ino);
	pthread_mutex_unlock(&fs->nodes.lock);
	return changed;
}

/*
 * After a failed OPEN or OPENDIR of `path` for node `n`: the name may now
 * lead to another type of object than the kernel looked up (replaced
 * behind its back), which the server reports as ELOOP (a symlink it will
 * not follow), EISDIR, ENOTDIR, ENXIO or EINVAL.  Then the answer is
 * ESTALE, on which the VFS looks the name up again and retries the open.
 */
static int open_error(struct qc_fs *fs, struct qn_node *n, const char *path,
		      int r)
{
	struct qc_reply rep;
	struct qft_msg m;

	if (r != -ELOOP && r != -EINVAL && r != -EISDIR && r != -ENOTDIR &&
	    r != -ENXIO)
		return user_err(r);
	qft_msg_init(&m, QFT_OP_LSTAT, 0);
	set_str(&m.path, path);
	if (qc_call(fs->conn, &m, &rep) < 0)
		return r;
	if (node_replaced(fs, n, &rep.msg.attr, false))
		r = -ESTALE;
	qc_reply_free(&rep);
	return r;
}

static struct qn_node *file_node(struct qc_fs *fs, struct qc_file *f)
{
	struct qn_node *n;

	pthread_mutex_lock(&fs->nodes.lock);
	n = f->nf.node;
	pthread_mutex_unlock(&fs->nodes.lock);
	return n;
}

/* For messages: the file's path, or a description when it has none. */
static const char *file_name(struct qc_fs *fs, struct qc_file *f, char *buf)
{
	if (qn_path(&fs->nodes, file_node(fs, f), NULL, buf) < 0)
		return "(a removed file)";
	return buf[0] ? buf : "/";
}

/*
 * Opens f again on link `gen`, by path, with its flags less those that
 * create or truncate, and checks that the file is the one it was: same
 * type and inode and, for a handle that changed nothing, the size and
 * mtime the client last saw.  Returns 0 with the new handle in *handle,
 * -ENOTCONN when the link went away meanwhile (try again), or the error
 * the file is failed with (ESTALE when it changed).  No lock held.
 */
static int file_reopen(struct qc_fs *fs, struct qc_file *f, uint64_t gen,
		       bool changed_it, uint64_t *handle)
{
	char path[QFT_MAX_PATH + 1];
	struct qn_node *n = file_node(fs, f);
	struct qc_reply rep;
	struct qft_msg m;
	bool same = true;
	uint64_t h;
	int r;

	r = qn_path(&fs->nodes, n, NULL, path);
	if (r < 0) {
		qft_warn("an open file that was removed cannot be re-opened "
			 "after reconnecting; it fails with ESTALE");
		return -ESTALE;
	}
	r = qc_handle_alloc(fs->conn, gen, &h);
	if (r < 0)
		return r == -ENOTCONN ? r : user_err(r);
	qft_msg_init(&m, f->dir ? QFT_OP_OPENDIR : QFT_OP_OPEN, 0);
	m.handle = h;
	set_str(&m.path, path);
	if (!f->dir)
		m.opflags = qft_oflags_from_host(f->oflags &
						 ~(O_CREAT | O_EXCL | O_TRUNC));
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, h);
		/* Lost again, or nothing to tell apart from that. */
		if (r == -ENOTCONN || r == -EIO)
			return -ENOTCONN;
		if (r == -ENOENT || open_error(fs, n, path, r) == -ESTALE)
			r = -ESTALE;
		qft_warn("%s: cannot re-open after reconnecting: %s",
			 path[0] ? path : "/", strerror(-r));
		return r;
	}
	/* OPENDIR answers no attributes: a directory just re-opens. */
	if (!f->dir && node_replaced(fs, n, &rep.msg.attr, true)) {
		same = false;
	} else if (!f->dir) {
		/* A handle that wrote changed size and mtime itself. */
		if (changed_it)
			qn_note_attr(&fs->nodes, n, &rep.msg.attr, NULL);
		else
			qn_note_attr(&fs->nodes, n, &rep.msg.attr, &same);
	}
	qc_reply_free(&rep);
	if (!same) {
		qft_msg_init(&m, QFT_OP_CLOSE, 0);
		m.handle = h;
		(void)qc_send_noreply(fs->conn, gen, &m);
		qc_handle_free(fs->conn, gen, h);
		qft_warn("%s changed on the server while the connection was "
			 "down; its open file fails with ESTALE",
			 path[0] ? path : "/");
		return -ESTALE;
	}
	qft_debug("%s: re-opened after reconnecting", path[0] ? path : "/");
	*handle = h;
	return 0;
}

/*
 * The handle (and its link) to send a request of f on.  After the link it
 * was opened on is gone, waits for a new one (at most the deadline) and
 * re-opens f there -- unless something written through f may not have
 * reached the server's disk: data answered to the kernel but not made
 * durable by a FLUSH or FSYNC since, or WRITEs that were in flight.  Such
 * a file fails for good with EIO, never silently.  Returns 0 or the
 * -errno to answer with.
 */
static int file_handle(struct qc_fs *fs, struct qc_file *f, uint64_t *gen,
		       uint64_t *handle)
{
	int r = 0, tries = 0;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		char name[QFT_MAX_PATH + 1];
		uint64_t h, live;
		bool changed_it;

		while (f->reopening)
			pthread_cond_wait(&f->cond, &f->lock);
		/* Read after f->gen settled, so an older value cannot make
		 * a handle just re-opened look lost. */
		live = qc_conn_gen(fs->conn);
		if (f->failed) {
			r = f->failed;
			break;
		}
		if (live && f->gen == live) {
			*gen = f->gen;
			*handle = f->nf.handle;
			r = 0;
			break;
		}
		if (tries++ == 3) {
			r = -EIO;
			break;
		}
		/* Generations only grow: f's link is dead.  A file that
		 * lost data with it fails now, without waiting for a new
		 * link that could not help. */
		if (f->mods != f->durable || f->wb_bytes || f->werr) {
			f->failed = -EIO;
			pthread_mutex_unlock(&f->lock);
			qft_err("%s: data written before the connection was "
				"lost may not have reached the server; the "
				"open file fails with EIO",
				file_name(fs, f, name));
			pthread_mutex_lock(&f->lock);
			continue;
		}
		pthread_mutex_unlock(&f->lock);
		r = qc_conn_wait(fs->conn, &live);
		pthread_mutex_lock(&f->lock);
		if (r < 0)
			break;
		if (f->reopening || f->failed || f->gen == live)
			continue;
		/* Written meanwhile?  Then it is not clean any more. */
		if (f->mods != f->durable || f->wb_bytes || f->werr)
			continue;
		changed_it = f->mods != 0;
		f->reopening = true;
		pthread_mutex_unlock(&f->lock);
		r = file_reopen(fs, f, live, changed_it, &h);
		pthread_mutex_lock(&f->lock);
		f->reopening = false;
		pthread_cond_broadcast(&f->cond);
		if (r == -ENOTCONN)
			continue;
		if (r < 0) {
			f->failed = r;
			continue;
		}
		/* Read-ahead of the old handle is gone with its link. */
		ra_stop(f);
		f->gen = live;
		f->nf.handle = h;
	}
	pthread_mutex_unlock(&f->lock);
	return user_err(r);
}

/* qc_call on the handle of f, re-opened first if its link was replaced. */
static int file_call(struct qc_fs *fs, struct qc_file *f, struct qft_msg *m,
		     struct qc_reply *rep)
{
	uint64_t gen;
	int r;

	for (int tries = 0; tries < 3; tries++) {
		r = file_handle(fs, f, &gen, &m->handle);
		if (r < 0)
			return r;
		r = qc_call_gen(fs->conn, gen, m, rep);
		/* Not sent: the link changed since; once more. */
		if (r != -ENOTCONN)
			return r;
	}
	return -EIO;
}

/*
 * The attributes of `n` as an FSTAT through an open handle of it with
 * WRITEs in flight sees them: queued behind those WRITEs on the bulk
 * stream, where a path LSTAT on meta could overtake them and report the
 * size from before (conn.h, "Two streams").  False when there is no such
 * handle, the FSTAT fails, or it names another inode than `a`.
 */
static bool attr_behind_writes(struct qc_fs *fs, struct qn_node *n,
			       const struct qft_attr *a, struct qft_attr *out)
{
	struct qc_file *f;
	struct qc_reply rep;
	struct qft_msg m;
	bool ok = false;

	f = (struct qc_file *)qn_file_borrow(&fs->nodes, n);
	if (f && writes_in_flight(fs, f)) {
		qft_msg_init(&m, QFT_OP_FSTAT, 0);
		if (file_call(fs, f, &m, &rep) == 0) {
			ok = rep.msg.attr.ino == a->ino &&
			     (rep.msg.attr.mode & QFT_S_IFMT) ==
			     (a->mode & QFT_S_IFMT);
			if (ok)
				*out = rep.msg.attr;
			qc_reply_free(&rep);
		}
	}
	file_put(fs, f);
	return ok;
}

static void qc_init(void *userdata, struct fuse_conn_info *conn)
{
	struct qc_fs *fs = userdata;

	if (!fs->sizes_set) {
		fs->window = QC_WINDOW_DEFAULT;
		fs->readahead = QC_READAHEAD_DEFAULT;
		fs->sizes_set = true;
	}
	/* libfuse asks the kernel for enough pages per request (max_pages)
	 * to carry this, and clamps it to its own buffer. */
	conn->max_write = QFT_MAX_DATA;
	/*
	 * The kernel offers the most read-ahead it will do (its bdi's
	 * ra_pages) and only ever lowers it to what we answer, so keep its
	 * offer.  Reads of its read-ahead are sent in parallel (async_read)
	 * and served from our own, deeper, read-ahead stream.
	 */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* Read-ahead and async direct I/O are background requests; allow
	 * enough of them to keep the connection busy. */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;

	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
		conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/*
	 * Writes go through to the server (write-behind is the protocol's
	 * job, not the page cache's).  Locks are not forwarded: the kernel
	 * keeps them local to this mount.  The kernel, not the server,
	 * clears set-id bits on write, since the server may run with
	 * privileges that make its own writes keep them.
	 */
	conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_POSIX_LOCKS |
			FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_HANDLE_KILLPRIV);
}

static void qc_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;
	uint64_t xgen;

	r = node_path(fs, parent, name, path);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_LSTAT, 0);
	set_str(&m.path, path);
	xgen = atomic_load(&xattr_gen);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	reply_entry(req, fs, parent, name, &rep.msg.attr, xgen);
	qc_reply_free(&rep);
	return;
out_err:
	if (r == -ENOENT && fs->negative_timeout > 0) {
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->negative_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	fuse_reply_err(req, -r);
}

static void qc_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct qc_fs *fs = fs_of(req);

	qn_forget(&fs->nodes, node_of(fs, ino), nlookup);
	fuse_reply_none(req);
}

static void qc_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct qc_fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++)
		qn_forget(&fs->nodes, node_of(fs, forgets[i].ino),
			  forgets[i].nlookup);
	fuse_reply_none(req);
}

static void qc_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_file *borrowed = NULL;
	struct qc_reply rep;
	struct qft_msg m;
	int r;
	uint64_t xgen;

	if (fi) {
		qft_msg_init(&m, QFT_OP_FSTAT, 0);
	} else {
		r = target_of(fs, ino, path, &borrowed);
		if (r < 0)
			goto out_err;
		if (borrowed) {
			qft_msg_init(&m, QFT_OP_FSTAT, 0);
		} else {
			qft_msg_init(&m, QFT_OP_LSTAT, 0);
			set_str(&m.path, path);
		}
	}
	xgen = atomic_load(&xattr_gen);
	if (fi || borrowed)
		r = file_call(fs, fi ? file_of(fi) : borrowed, &m, &rep);
	else
		r = qc_call(fs->conn, &m, &rep);
	file_put(fs, borrowed);
	if (r < 0)
		goto out_err;
	reply_attr(req, fs, node_of(fs, ino), &rep.msg.attr, xgen);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

static void qc_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int valid, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1] = "";
	struct qc_file *borrowed = NULL, *hf;
	struct qc_reply rep;
	struct qft_msg m;
	int r;
	uint64_t xgen;

	qft_msg_init(&m, QFT_OP_SETATTR, 0);
	if (valid & FUSE_SET_ATTR_MODE) {
		m.valid |= QFT_SET_MODE;
		m.mode = attr->st_mode & 07777;
	}
	if (valid & FUSE_SET_ATTR_UID) {
		m.valid |= QFT_SET_UID;
		m.uid = attr->st_uid;
	}
	if (valid & FUSE_SET_ATTR_GID) {
		m.valid |= QFT_SET_GID;
		m.gid = attr->st_gid;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0) {
			r = -EINVAL;
			goto out_err;
		}
		m.valid |= QFT_SET_SIZE;
		m.size = (uint64_t)attr->st_size;
	}
	/* "Now" is the server's clock, so it travels as a flag. */
	if (valid & FUSE_SET_ATTR_ATIME_NOW) {
		m.valid |= QFT_SET_ATIME_NOW;
	} else if (valid & FUSE_SET_ATTR_ATIME) {
		m.valid |= QFT_SET_ATIME;
		m.atime.sec = attr->st_atim.tv_sec;
		m.atime.nsec = (uint32_t)attr->st_atim.tv_nsec;
	}
	if (valid & FUSE_SET_ATTR_MTIME_NOW) {
		m.valid |= QFT_SET_MTIME_NOW;
	} else if (valid & FUSE_SET_ATTR_MTIME) {
		m.valid |= QFT_SET_MTIME;
		m.mtime.sec = attr->st_mtim.tv_sec;
		m.mtime.nsec = (uint32_t)attr->st_mtim.tv_nsec;
	}

	if (!fi) {
		r = target_of(fs, ino, path, &borrowed);
		if (r < 0)
			goto out_err;
	}
	hf = fi ? file_of(fi) : borrowed;
	if (hf && (m.valid & QFT_SET_SIZE)) {
		/* A truncation through the handle is a change to make
		 * durable like a write. */
		pthread_mutex_lock(&hf->lock);
		hf->mods++;
		pthread_mutex_unlock(&hf->lock);
	}
	set_str(&m.path, path);
	xgen = atomic_load(&xattr_gen);
	if (hf)
		r = file_call(fs, hf, &m, &rep);
	else
		r = qc_call(fs->conn, &m, &rep);
	file_put(fs, borrowed);
	/* Even a failed truncation may have cut the file. */
	if (m.valid & QFT_SET_SIZE)
		ra_invalidate(fs, node_of(fs, ino));
	if (r < 0)
		goto out_err;
	reply_attr(req, fs, node_of(fs, ino), &rep.msg.attr, xgen);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

static void qc_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_READLINK, 0);
	set_str(&m.path, path);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	fuse_reply_readlink(req, rep.msg.target.s);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

/* MKNOD, MKDIR and SYMLINK: an entry op whose reply is the new attrs. */
static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
		       struct qft_msg *m)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	int r;
	uint64_t xgen;

	r = check_name(name);
	if (r < 0)
		goto out_err;
	r = node_path(fs, parent, NULL, path);
	if (r < 0)
		goto out_err;
	set_str(&m->path, path);
	set_str(&m->name, name);
	xgen = atomic_load(&xattr_gen);
	r = qc_call(fs->conn, m, &rep);
	if (r < 0)
		goto out_err;
	reply_entry(req, fs, parent, name, &rep.msg.attr, xgen);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

static void qc_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_MKNOD, 0);
	m.mode = mode & (QFT_S_IFMT | 07777);
	m.rdev = rdev;
	make_entry(req, parent, name, &m);
}

static void qc_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_MKDIR, 0);
	m.mode = mode & 07777;
	make_entry(req, parent, name, &m);
}

static void qc_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct qft_msg m;

	if (strlen(link) > QFT_MAX_PATH) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	qft_msg_init(&m, QFT_OP_SYMLINK, 0);
	set_str(&m.target, link);
	make_entry(req, parent, name, &m);
}

/* UNLINK and RMDIR: the name goes away on the server, then here. */
static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 uint16_t op)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	r = check_name(name);
	if (r < 0)
		goto out;
	r = node_path(fs, parent, NULL, path);
	if (r < 0)
		goto out;
	qft_msg_init(&m, op, 0);
	set_str(&m.path, path);
	set_str(&m.name, name);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out;
	qc_reply_free(&rep);
	qn_remove(&fs->nodes, node_of(fs, parent), name);
out:
	fuse_reply_err(req, -r);
}

static void qc_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, QFT_OP_UNLINK);
}

static void qc_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, QFT_OP_RMDIR);
}

static void qc_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1], path2[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_RENAME, 0);
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		r = -EINVAL;
		goto out;
	}
	if (flags & RENAME_NOREPLACE)
		m.opflags |= QFT_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		m.opflags |= QFT_RENAME_EXCHANGE;
	if ((r = check_name(name)) < 0 || (r = check_name(newname)) < 0 ||
	    (r = node_path(fs, parent, NULL, path)) < 0 ||
	    (r = node_path(fs, newparent, NULL, path2)) < 0)
		goto out;
	set_str(&m.path, path);
	set_str(&m.name, name);
	set_str(&m.path2, path2);
	set_str(&m.name2, newname);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out;
	qc_reply_free(&rep);
	qn_rename(&fs->nodes, node_of(fs, parent), name, node_of(fs, newparent),
		  newname, flags & RENAME_EXCHANGE);
out:
	fuse_reply_err(req, -r);
}

static void qc_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1], path2[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;
	uint64_t xgen;

	if ((r = check_name(newname)) < 0 ||
	    (r = node_path(fs, ino, NULL, path)) < 0 ||
	    (r = node_path(fs, newparent, NULL, path2)) < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_LINK, 0);
	set_str(&m.path, path);
	set_str(&m.path2, path2);
	set_str(&m.name2, newname);
	xgen = atomic_load(&xattr_gen);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	/*
	 * The new name is a node of its own (nodes are names here), so the
	 * kernel does not see the link count of the old one change: make it
	 * ask again.  Attributes only, which takes no lock.
	 */
	reply_entry(req, fs, newparent, newname, &rep.msg.attr, xgen);
	qc_reply_free(&rep);
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	return;
out_err:
	fuse_reply_err(req, -r);
}

/*
 * The start of every open: the client's state for the new handle and a
 * handle number on the current link (waiting for one within the deadline
 * while reconnecting).  0, or the user's errno with nothing left to undo.
 */
static int file_begin(struct qc_fs *fs, bool dir, int oflags,
		      struct qc_file **fp, uint64_t *gen, uint64_t *handle)
{
	struct qc_file *f = file_new(fs, dir);
	int r;

	if (!f)
		return -ENOMEM;
	f->oflags = oflags;
	r = qc_conn_wait(fs->conn, gen);
	if (r == 0)
		r = qc_handle_alloc(fs->conn, *gen, handle);
	if (r < 0) {
		file_free(f);
		return user_err(r);
	}
	*fp = f;
	return 0;
}

static void qc_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qc_file *f;
	struct qft_msg m;
	uint64_t handle, gen = 0;
	bool same;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	r = file_begin(fs, false, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_OPEN, 0);
	m.handle = handle;
	set_str(&m.path, path);
	m.opflags = qft_oflags_from_host(fi->flags & ~(O_CREAT | O_EXCL));
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	/* O_TRUNC (atomic_o_trunc) cut the file under other open handles. */
	if (m.opflags & QFT_O_TRUNC)
		ra_invalidate(fs, node_of(fs, ino));
	if (r < 0) {
		r = open_error(fs, node_of(fs, ino), path, r);
		goto out_free_handle;
	}
	if (node_replaced(fs, node_of(fs, ino), &rep.msg.attr, false)) {
		/* Opened something else than the kernel looked up. */
		qc_reply_free(&rep);
		qft_msg_init(&m, QFT_OP_CLOSE, 0);
		m.handle = handle;
		(void)qc_send_noreply(fs->conn, gen, &m);
		r = -ESTALE;
		goto out_free_handle;
	}
	f->gen = gen;

	/*
	 * Cached pages stay valid if the file is as the kernel last saw it;
	 * otherwise the kernel drops them on this open.
	 */
	qn_note_attr(&fs->nodes, node_of(fs, ino), &rep.msg.attr, &same);
	qc_reply_free(&rep);
	fi->keep_cache = same;
	qn_file_attach(&fs->nodes, node_of(fs, ino), &f->nf, handle);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) != 0)
		file_release(fs, f);
	return;

out_free_handle:
	/* The server bound nothing (or its CLOSE is sent), so the number is
	 * free at once. */
	qc_handle_free(fs->conn, gen, handle);
	file_free(f);
out_err:
	fuse_reply_err(req, -r);
}

static void qc_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct fuse_entry_param e;
	struct qc_reply rep;
	struct qc_file *f;
	struct qn_node *n;
	struct qft_msg m;
	uint64_t handle, gen;
	int r;

	if ((r = check_name(name)) < 0 ||
	    (r = node_path(fs, parent, NULL, path)) < 0)
		goto out_err;
	r = file_begin(fs, false, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_CREATE, 0);
	m.handle = handle;
	set_str(&m.path, path);
	set_str(&m.name, name);
	m.opflags = qft_oflags_from_host(fi->flags & ~O_CREAT);
	m.mode = mode & 07777;
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, handle);
		r = user_err(r);
		goto out_free_file;
	}
	f->gen = gen;

	n = qn_lookup(&fs->nodes, node_of(fs, parent), name, &rep.msg.attr);
	if (!n) {
		qc_reply_free(&rep);
		f->nf.handle = handle;
		file_close(fs, f);
		r = -ENOMEM;
		goto out_err;
	}
	fill_entry(fs, &e, n, &rep.msg.attr);
	qc_reply_free(&rep);
	qn_file_attach(&fs->nodes, n, &f->nf, handle);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_create(req, &e, fi) != 0) {
		/* The kernel will neither release the file nor forget it. */
		qn_forget(&fs->nodes, n, 1);
		file_release(fs, f);
	}
	return;

out_free_file:
	file_free(f);
out_err:
	fuse_reply_err(req, -r);
}

static void read_plain(fuse_req_t req, struct qc_fs *fs, struct qc_file *f,
		       size_t size, uint64_t off)
{
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_READ, 0);
	m.offset = off;
	m.length = size;
	r = file_call(fs, f, &m, &rep);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (rep.msg.data.len > size) {
		/* More than asked for is a broken server, not data. */
		qft_err("READ of %zu bytes at %llu: the server sent %u bytes; "
			"failing the read with EIO", size,
			(unsigned long long)off, rep.msg.data.len);
		fuse_reply_err(req, EIO);
	} else {
		fuse_reply_buf(req, (const char *)rep.msg.data.p,
			       rep.msg.data.len);
	}
	qc_reply_free(&rep);
}

/*
 * Whether a read of [off, end) belongs to the read-ahead stream: it starts
 * one on the second read in a row that begins where the previous ended,
 * and stops it on a read outside its window (random access).  Reads inside
 * the window are accepted in any order, since the kernel's parallel
 * read-ahead requests reach us in whatever order our threads take them.
 * File lock held.
 */
static bool ra_admit(struct qc_fs *fs, struct qc_file *f, uint64_t off,
		     uint64_t end)
{
	if (f->ra_on) {
		uint64_t lo = f->ra_head ? f->ra_head->off : f->ra_end;

		if (off < lo || off > f->ra_end) {
			qft_debug("handle %llu: read at %llu outside the "
				  "read-ahead window, stopped",
				  (unsigned long long)f->nf.handle,
				  (unsigned long long)off);
			ra_stop(f);
			f->ra_next = end;
			f->ra_credit = RA_CREDIT_START;
			return false;
		}
	} else {
		bool seq = off == f->ra_next;

		f->ra_next = end;
		if (!seq)
			return false;
		qft_debug("handle %llu: sequential reads, read-ahead from %llu",
			  (unsigned long long)f->nf.handle,
			  (unsigned long long)off);
		f->ra_on = true;
		f->ra_eof = false;
		f->ra_end = off;
		f->ra_pos = off;
		if (f->ra_credit > fs->readahead)
			f->ra_credit = fs->readahead;
		f->ra_eaten = 0;
	}
	if (end > f->ra_pos)
		f->ra_pos = end;
	/* Chunks a whole chunk behind the reader were skipped, not read. */
	while (f->ra_head && f->ra_head->off + f->ra_head->len + RA_CHUNK <= off)
		ra_unlink_head(f);
	return true;
}

/*
 * Adds chunks up to `ra_credit` past the reader and returns them, linked
 * by snext, for the caller to send once it dropped the lock.  What the
 * reader asked for is always requested; beyond it only within the budget
 * of all handles together.  File lock held.
 */
static struct ra_chunk *ra_fill(struct qc_fs *fs, struct qc_file *f)
{
	uint64_t want = f->ra_pos + f->ra_credit;
	uint64_t budget = 2 * fs->readahead > RA_TOTAL_MIN ?
		2 * fs->readahead : RA_TOTAL_MIN;
	struct ra_chunk *first = NULL, **tail = &first;

	while (!f->ra_eof && f->ra_end < want) {
		uint64_t len = RA_CHUNK - f->ra_end % RA_CHUNK;
		struct ra_chunk *c;

		if (f->ra_end >= f->ra_pos &&
		    atomic_load(&fs->ra_bytes) + len > budget)
			break;
		c = calloc(1, sizeof(*c));
		if (!c)
			break;
		c->f = f;
		c->off = f->ra_end;
		c->len = (uint32_t)len;
		c->charged = (uint32_t)len;
		c->listed = true;
		atomic_fetch_add(&fs->ra_bytes, len);
		if (f->ra_tail)
			f->ra_tail->next = c;
		else
			f->ra_head = c;
		f->ra_tail = c;
		f->ra_end += len;
		f->async++;
		*tail = c;
		tail = &c->snext;
	}
	return first;
}

static void ra_done(void *ctx, int err, struct qc_reply *rep)
{
	struct ra_chunk *c = ctx;
	struct qc_file *f = c->f;

	if (err == 0 && rep->msg.data.len > c->len) {
		qft_err("server sent %u bytes for a READ of %u",
			rep->msg.data.len, c->len);
		err = -EIO;
	}
	pthread_mutex_lock(&f->lock);
	c->done = true;
	c->err = err;
	if (err == 0) {
		c->got = rep->msg.data.len;
		c->rep = *rep;
		memset(rep, 0, sizeof(*rep));
		/* The server answers short only at the end of the file. */
		if (c->got < c->len && c->listed)
			f->ra_eof = true;
	}
	/* Readers parked at the end of a file must not hold budget for
	 * data that never came. */
	atomic_fetch_sub(&f->fs->ra_bytes, c->charged - c->got);
	c->charged = c->got;
	ra_chunk_maybe_free(c);
	file_async_done(f);
}

/* Sends the READs of chunks on handle `handle` of link `gen` (a chunk of
 * a link that is gone completes with -ENOTCONN). */
static void ra_send(struct qc_fs *fs, uint64_t gen, uint64_t handle,
		    struct ra_chunk *c)
{
	while (c) {
		/* Once sent, the chunk may be completed and freed. */
		struct ra_chunk *next = c->snext;
		struct qft_msg m;

		qft_msg_init(&m, QFT_OP_READ, 0);
		m.handle = handle;
		m.offset = c->off;
		m.length = c->len;
		(void)qc_call_async(fs->conn, gen, &m, ra_done, c);
		c = next;
	}
}

/*
 * Pins the chunks that cover [off, end) and returns how many, or 0 (and
 * pins nothing) when they do not cover it.  A chunk known to end the file
 * or to have failed covers everything after it.  File lock held.
 */
static int ra_pin(struct qc_file *f, uint64_t off, uint64_t end,
		  struct ra_chunk **pinned)
{
	uint64_t pos = off;
	int n = 0;

	for (struct ra_chunk *c = f->ra_head; c && pos < end; c = c->next) {
		if (c->off + c->len <= pos)
			continue;
		if (c->off > pos || n == RA_MAX_IOV)
			break;
		pinned[n++] = c;
		pos = c->off + c->len;
		if (c->done && (c->err || c->got < c->len))
			pos = end;
	}
	if (pos < end)
		return 0;
	for (int i = 0; i < n; i++)
		pinned[i]->pins++;
	return n;
}

/*
 * Points `iov` at the bytes of [off, end) in the pinned chunks (all done)
 * and counts them as consumed.  Returns the byte count, which is short
 * only where the file ends, or a chunk's error: a failed READ is never
 * passed off as end of file.  File lock held.
 */
static ssize_t ra_collect(struct qc_fs *fs, struct qc_file *f, uint64_t off,
			  uint64_t end, struct ra_chunk **pinned, int npin,
			  struct iovec *iov, int *niov)
{
	uint64_t pos = off;

	*niov = 0;
	for (int i = 0; i < npin && pos < end; i++) {
		struct ra_chunk *c = pinned[i];
		uint64_t in = pos - c->off, n;

		if (c->err) {
			ra_stop(f);
			return c->err;
		}
		if (in >= c->got)
			break;
		n = c->got - in < end - pos ? c->got - in : end - pos;
		iov[*niov].iov_base = (void *)(c->rep.msg.data.p + in);
		iov[*niov].iov_len = n;
		(*niov)++;
		c->served += (uint32_t)n;
		pos += n;
		if (c->got < c->len)
			break;
	}
	/* Consumed chunks go; each credit's worth consumed doubles it. */
	while (f->ra_head && f->ra_head->done && !f->ra_head->err &&
	       f->ra_head->served >= f->ra_head->got) {
		f->ra_eaten += f->ra_head->len;
		ra_unlink_head(f);
	}
	if (f->ra_on && f->ra_eaten >= f->ra_credit &&
	    f->ra_credit < fs->readahead) {
		f->ra_credit = 2 * f->ra_credit < fs->readahead ?
			2 * f->ra_credit : fs->readahead;
		f->ra_eaten = 0;
	}
	return (ssize_t)(pos - off);
}

static void qc_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct ra_chunk *pinned[RA_MAX_IOV], *fresh = NULL;
	struct iovec iov[RA_MAX_IOV];
	uint64_t start = (uint64_t)off, end;
	int npin = 0, niov = 0;
	uint64_t gen, handle;
	ssize_t got;
	int r;

	/* The kernel never asks for more than max_read; a larger request
	 * would just see a short read. */
	if (size > QFT_MAX_DATA)
		size = QFT_MAX_DATA;
	end = start + size;
	if (size == 0 || fs->readahead == 0 || off < 0) {
		read_plain(req, fs, f, size, start);
		return;
	}
	/* A stream only on a live handle (re-opened after a reconnect). */
	r = file_handle(fs, f, &gen, &handle);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (ra_admit(fs, f, start, end)) {
		fresh = ra_fill(fs, f);
		npin = ra_pin(f, start, end, pinned);
	}
	gen = f->gen;
	handle = f->nf.handle;
	pthread_mutex_unlock(&f->lock);
	ra_send(fs, gen, handle, fresh);
	if (npin == 0) {
		read_plain(req, fs, f, size, start);
		return;
	}

	pthread_mutex_lock(&f->lock);
	for (int i = 0; i < npin; i++)
		while (!pinned[i]->done)
			pthread_cond_wait(&f->cond, &f->lock);
	got = ra_collect(fs, f, start, end, pinned, npin, iov, &niov);
	if (got > 0) {
		/* Once the kernel has its reply it may release the file while
		 * we still unpin: hold it like an async call. */
		f->async++;
		pthread_mutex_unlock(&f->lock);
		fuse_reply_iov(req, iov, niov);
		pthread_mutex_lock(&f->lock);
	}
	for (int i = 0; i < npin; i++) {
		pinned[i]->pins--;
		ra_chunk_maybe_free(pinned[i]);
	}
	if (got > 0) {
		file_async_done(f);
		return;
	}
	pthread_mutex_unlock(&f->lock);
	if (got < 0 && got != -ENOTCONN)
		fuse_reply_err(req, (int)-got);
	else
		/* Nothing at all where the stream saw the end: ask the
		 * server, in case the file grew since.  Or the chunk was
		 * lost with its link: read it again on the handle re-opened
		 * (or fail with EIO when that cannot be). */
		read_plain(req, fs, f, size, start);
}

/* One WRITE in flight, for its completion. */
struct wb_write {
	struct qc_file *f;
	uint32_t len;
};

static void wb_done(void *ctx, int err, struct qc_reply *rep)
{
	struct wb_write *w = ctx;
	struct qc_file *f = w->f;

	if (err == 0 && rep->msg.count != w->len) {
		/* Already answered in full to the kernel: data is lost. */
		qft_err("server wrote %llu bytes of %u",
			(unsigned long long)rep->msg.count, w->len);
		err = -EIO;
	}
	/* Lost with its link: whether it was written nobody knows. */
	err = user_err(err);
	pthread_mutex_lock(&f->lock);
	f->wb_bytes -= w->len;
	f->wb_answered++;
	if (err < 0 && f->werr == 0)
		f->werr = err;
	free(w);
	file_async_done(f);
}

static void qc_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct wb_write *w;
	struct qft_msg m;
	uint64_t gen, handle;
	uint32_t len;
	int r;

	/* The kernel never sends more than max_write; a larger request
	 * would just see a short write. */
	len = (uint32_t)(size < QFT_MAX_DATA ? size : QFT_MAX_DATA);
	if (len == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	r = file_handle(fs, f, &gen, &handle);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->f = f;
	w->len = len;

	pthread_mutex_lock(&f->lock);
	/* Room in the window; a write larger than it goes alone. */
	while (f->werr == 0 && f->wb_bytes > 0 &&
	       f->wb_bytes + len > fs->window)
		pthread_cond_wait(&f->cond, &f->lock);
	r = f->werr;
	if (r == 0) {
		/* Flagged before sending, so a FLUSH that races with this
		 * write is never skipped. */
		f->written = true;
		f->mods++;
		f->wb_bytes += len;
		f->wb_issued++;
		f->async++;
	}
	pthread_mutex_unlock(&f->lock);
	if (r < 0) {
		/* Data already lost on this handle: no later write may look
		 * like it succeeded. */
		free(w);
		fuse_reply_err(req, -r);
		return;
	}

	qft_msg_init(&m, QFT_OP_WRITE, 0);
	m.handle = handle;
	m.offset = (uint64_t)off;
	m.data.p = (const uint8_t *)buf;
	m.data.len = len;
	/* On failure wb_done has run and made the error sticky. */
	r = user_err(qc_call_async(fs->conn, gen, &m, wb_done, w));
	ra_invalidate_file(fs, f);
	if (r == 0 && fs->window == 0) {
		/* No write-behind: answer once the server did. */
		pthread_mutex_lock(&f->lock);
		while (f->wb_bytes > 0)
			pthread_cond_wait(&f->cond, &f->lock);
		r = f->werr;
		pthread_mutex_unlock(&f->lock);
	}
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	fuse_reply_write(req, len);
}

/*
 * FLUSH and FSYNC are sent at once, behind the WRITEs in flight, not after
 * draining them: the server executes them after those WRITEs, so their
 * success covers them, and a drain would cost a round trip per close().
 * Their reply is then matched up with the answers to every WRITE issued
 * before them (today those arrived first, replies being in order; the wait
 * keeps that true if the server ever answers out of order), so a WRITE's
 * error is in werr when the result is decided.
 */
static int wb_collect(struct qc_file *f, uint64_t issued, bool clear)
{
	int werr;

	pthread_mutex_lock(&f->lock);
	while (f->wb_answered < issued)
		pthread_cond_wait(&f->cond, &f->lock);
	werr = f->werr;
	if (clear)
		f->werr = 0;
	pthread_mutex_unlock(&f->lock);
	return werr;
}

/* A FLUSH or FSYNC sent when f had made `mods` changes succeeded. */
static void file_durable(struct qc_file *f, uint64_t mods)
{
	pthread_mutex_lock(&f->lock);
	if (mods > f->durable)
		f->durable = mods;
	pthread_mutex_unlock(&f->lock);
}

static void qc_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t issued, mods;
	bool written;
	int r, werr, failed;

	pthread_mutex_lock(&f->lock);
	written = f->written || f->mods != f->durable;
	werr = f->werr;
	issued = f->wb_issued;
	mods = f->mods;
	failed = f->failed;
	f->written = false;
	pthread_mutex_unlock(&f->lock);
	/* close() of a file that was only read costs no round trip (and
	 * does not fail, even when the file went stale). */
	if (!written && werr == 0) {
		fuse_reply_err(req, 0);
		return;
	}
	if (failed) {
		fuse_reply_err(req, -failed);
		return;
	}
	qft_msg_init(&m, QFT_OP_FLUSH, 0);
	m.opflags = fs->commit_none ? QFT_FLUSH_NOSYNC : 0;
	r = file_call(fs, f, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Reported here, so cleared, as the server's FLUSH clears its own. */
	werr = wb_collect(f, issued, true);
	if (r == 0 && werr == 0)
		file_durable(f, mods);
	fuse_reply_err(req, werr ? -werr : -r);
}

static void qc_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	file_release(fs_of(req), file_of(fi));
	fuse_reply_err(req, 0);
}

static void qc_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t issued, mods;
	int r, werr;

	pthread_mutex_lock(&f->lock);
	issued = f->wb_issued;
	mods = f->mods;
	pthread_mutex_unlock(&f->lock);
	qft_msg_init(&m, QFT_OP_FSYNC, 0);
	m.opflags = datasync ? QFT_FSYNC_DATASYNC : 0;
	r = file_call(fs, f, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Kept for the flush at close as well. */
	werr = wb_collect(f, issued, false);
	if (r == 0 && werr == 0)
		file_durable(f, mods);
	fuse_reply_err(req, werr ? -werr : -r);
}

static void qc_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qc_file *f;
	struct qft_msg m;
	uint64_t handle, gen;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	r = file_begin(fs, true, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = handle;
	set_str(&m.path, path);
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, handle);
		r = open_error(fs, node_of(fs, ino), path, r);
		goto out_free_file;
	}
	f->gen = gen;
	qc_reply_free(&rep);
	qn_file_attach(&fs->nodes, node_of(fs, ino), &f->nf, handle);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) != 0)
		file_release(fs, f);
	return;

out_free_file:
	file_free(f);
out_err:
	fuse_reply_err(req, -r);
}

static bool is_dot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/*
 * Fills `buf` from a READDIR reply.  With `plus`, every entry handed to the
 * kernel with a node id counts one lookup, so nodes are made only for the
 * entries that fit, and "." and ".." get node id 0 (no dentry).  The
 * looked-up nodes are listed in `counted` so a lost reply can undo them.
 */
static size_t fill_dir(fuse_req_t req, struct qc_fs *fs, fuse_ino_t ino,
		       const struct qft_blob *data, bool plus, uint64_t xgen,
		       char *buf, size_t size, struct qn_node **counted,
		       size_t *ncounted, size_t *consumed, uint64_t *last_off)
{
	struct qft_dirent d;
	struct qcur c;
	size_t used = 0;

	*ncounted = 0;
	*consumed = 0;
	qcur_init(&c, data->p, data->len);
	while (c.left && qft_dirent_decode(&c, &d, plus) == 0) {
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

				n = qn_lookup(&fs->nodes, node_of(fs, ino),
					      d.name.s, &d.attr);
				if (n) {
					counted[(*ncounted)++] = n;
					noxattr_note(fs, n, &d.attr, xgen);
					fill_entry(fs, &e, n, &d.attr);
				}
			}
			if (e.ino == 0) {
				e.attr.st_ino = d.ino;
				e.attr.st_mode = d.type;
			}
			fuse_add_direntry_plus(req, buf + used, size - used,
					       d.name.s, &e, (off_t)d.off);
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = d.ino;
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
 * with the same kind of entries and attributes still fresh enough.
 */
static bool ahead_usable(const struct dir_ahead *a, uint64_t off, bool plus)
{
	return a->valid && a->plus == plus && a->next == off &&
	       now_ns() < a->until &&
	       (a->pos < a->rep.msg.data.len || a->eof);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct dir_ahead *a = &f->ahead;
	struct qn_node **counted = NULL;
	size_t used, ncounted = 0, consumed = 0;
	uint64_t last_off = (uint64_t)off;
	struct qft_blob rest;
	struct qft_msg m;
	char *buf = NULL;
	int r, n;

	if (size > QFT_MAX_READDIR)
		size = QFT_MAX_READDIR;
	if (!ahead_usable(a, (uint64_t)off, plus)) {
		if (a->valid)
			qc_reply_free(&a->rep);
		memset(a, 0, sizeof(*a));
		qft_msg_init(&m, QFT_OP_READDIR, 0);
		m.offset = (uint64_t)off;
		/*
		 * As much as a reply may carry, unless nothing may be kept
		 * (attr_timeout=0): then just what the kernel asked for.
		 */
		m.length = fs->attr_timeout > 0 ? QFT_MAX_READDIR : size;
		m.opflags = plus ? QFT_READDIR_PLUS : 0;
		a->xgen = atomic_load(&xattr_gen);
		a->until = now_ns() + (uint64_t)(fs->attr_timeout * 1e9);
		/*
		 * A directory handle re-opened after a reconnect is a new
		 * stream: a listing in progress (a cookie other than 0)
		 * resumes only where the server's filesystem keeps cookies
		 * stable across opens, and may otherwise fail with EIO; a
		 * new listing starts clean.
		 */
		r = file_call(fs, f, &m, &a->rep);
		if (r < 0)
			goto out_err;
		a->valid = true;
		n = qc_readdir_check(&a->rep.msg.data, plus);
		if (n < 0) {
			r = n;
			goto out_drop;
		}
		a->plus = plus;
		a->eof = (a->rep.msg.opflags & QFT_READDIR_EOF) != 0;
		a->next = (uint64_t)off;
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
	used = fill_dir(req, fs, ino, &rest, plus, a->xgen, buf, size,
			counted, &ncounted, &consumed, &last_off);
	/*
	 * Done with `a` before replying: once the kernel has the reply it
	 * may release the directory, and `f` with it.  Should the reply not
	 * arrive, the kernel asks again at `off`, which no longer matches.
	 */
	a->pos += consumed;
	a->next = last_off;
	/* Drained and not the end: the next call asks the server. */
	if (a->pos >= a->rep.msg.data.len && !a->eof) {
		qc_reply_free(&a->rep);
		memset(a, 0, sizeof(*a));
	}
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
	qc_reply_free(&a->rep);
	memset(a, 0, sizeof(*a));
out_err:
	fuse_reply_err(req, -r);
}

static void qc_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void qc_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void qc_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	file_release(fs_of(req), file_of(fi));
	fuse_reply_err(req, 0);
}

static void qc_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct statvfs sv;
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	/* A node without a name still lives on the same filesystem as the
	 * root, near enough for statfs. */
	if (node_path(fs, ino, NULL, path) < 0)
		path[0] = '\0';
	qft_msg_init(&m, QFT_OP_STATFS, 0);
	set_str(&m.path, path);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	qft_statfs_to_host(&rep.msg.st, &sv);
	qc_reply_free(&rep);
	fuse_reply_statfs(req, &sv);
}

#define XATTR_CAPS "security.capability"

/*
 * The kernel asks for XATTR_CAPS before every write(2) to a file (FUSE
 * mounts are not SB_NOSEC, so file_remove_privs checks each time), which
 * would make every write wait a round trip and undo write-behind.  The
 * server's "none" is remembered on the node's open files for attr_timeout
 * seconds, the trust the kernel already gives the cached mode bits when it
 * clears set-id bits on write, and forgotten as soon as the name is set or
 * removed through this mount.  attr_timeout=0 turns this off.
 */
static bool nocap_known(struct qc_fs *fs, fuse_ino_t ino)
{
	struct qn_node *n = node_of(fs, ino);
	uint64_t now = now_ns();
	bool known = false;

	pthread_mutex_lock(&fs->nodes.lock);
	for (struct qn_file *nf = n->files; nf && !known; nf = nf->next) {
		struct qc_file *f = (struct qc_file *)nf;

		pthread_mutex_lock(&f->lock);
		known = now < f->nocap_until;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	return known;
}

/* Remembers (until > 0) or forgets (0) that ino has no capability. */
static void nocap_set(struct qc_fs *fs, fuse_ino_t ino, uint64_t until)
{
	struct qn_node *n = node_of(fs, ino);

	pthread_mutex_lock(&fs->nodes.lock);
	for (struct qn_file *nf = n->files; nf; nf = nf->next) {
		struct qc_file *f = (struct qc_file *)nf;

		pthread_mutex_lock(&f->lock);
		f->nocap_until = until;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
}

static void qc_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	bool caps;
	int r;

	qft_msg_init(&m, QFT_OP_SETXATTR, 0);
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
		r = -EINVAL;
		goto out;
	}
	if (flags & XATTR_CREATE)
		m.opflags |= QFT_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		m.opflags |= QFT_XATTR_REPLACE;
	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		r = -ERANGE;
		goto out;
	}
	if (size > QFT_MAX_XATTR_SIZE) {
		r = -E2BIG;
		goto out;
	}
	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out;
	set_str(&m.path, path);
	set_str(&m.xname, name);
	m.data.p = (const uint8_t *)value;
	m.data.len = (uint32_t)size;
	caps = strcmp(name, XATTR_CAPS) == 0;
	if (caps)
		atomic_fetch_add(&caps_gen, 1);
	atomic_fetch_add(&xattr_gen, 1);
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Even a failed call may have changed them (a lost reply). */
	noxattr_forget(fs, ino);
	if (caps)
		nocap_set(fs, ino, 0);
out:
	fuse_reply_err(req, -r);
}

/* GETXATTR and LISTXATTR: size 0 asks for the size only.  Returns what
 * was answered: 0 or the negative errno. */
static int xattr_query(fuse_req_t req, struct qft_msg *m, fuse_ino_t ino,
		       size_t size, size_t max)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	set_str(&m->path, path);
	m->length = size < max ? size : max;
	r = qc_call(fs->conn, m, &rep);
	if (r < 0)
		goto out_err;
	if (size == 0) {
		fuse_reply_xattr(req, (size_t)rep.msg.count);
	} else if (rep.msg.data.len > size) {
		r = -ERANGE;
		fuse_reply_err(req, ERANGE);
	} else {
		fuse_reply_buf(req, (const char *)rep.msg.data.p,
			       rep.msg.data.len);
	}
	qc_reply_free(&rep);
	return r;
out_err:
	fuse_reply_err(req, -r);
	return r;
}

static void qc_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct qc_fs *fs = fs_of(req);
	bool caps = strcmp(name, XATTR_CAPS) == 0;
	uint64_t gen = atomic_load(&caps_gen), start = now_ns();
	struct qft_msg m;

	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	if ((caps && nocap_known(fs, ino)) || noxattr_known(fs, ino)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	qft_msg_init(&m, QFT_OP_GETXATTR, 0);
	set_str(&m.xname, name);
	if (xattr_query(req, &m, ino, size, QFT_MAX_XATTR_SIZE) == -ENODATA &&
	    caps && fs->attr_timeout > 0 && atomic_load(&caps_gen) == gen)
		nocap_set(fs, ino, start + (uint64_t)(fs->attr_timeout * 1e9));
}

static void qc_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct qft_msg m;

	if (noxattr_known(fs_of(req), ino)) {
		if (size == 0)
			fuse_reply_xattr(req, 0);
		else
			fuse_reply_buf(req, NULL, 0);
		return;
	}

	qft_msg_init(&m, QFT_OP_LISTXATTR, 0);
	xattr_query(req, &m, ino, size, QFT_MAX_XATTR_LIST);
}

static void qc_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	bool caps;
	int r;

	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		r = -ERANGE;
		goto out;
	}
	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out;
	qft_msg_init(&m, QFT_OP_REMOVEXATTR, 0);
	set_str(&m.path, path);
	set_str(&m.xname, name);
	/* Removing it cannot make a capability appear, but a GETXATTR
	 * answered around it says nothing reliable either way. */
	caps = strcmp(name, XATTR_CAPS) == 0;
	if (caps)
		atomic_fetch_add(&caps_gen, 1);
	atomic_fetch_add(&xattr_gen, 1);
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Even a failed call may have changed them (a lost reply). */
	noxattr_forget(fs, ino);
	if (caps)
		nocap_set(fs, ino, 0);
out:
	fuse_reply_err(req, -r);
}

static void qc_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			 off_t offset, off_t length, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_FALLOCATE, 0);
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
		     FALLOC_FL_ZERO_RANGE)) {
		r = -EOPNOTSUPP;
		goto out;
	}
	if (offset < 0 || length <= 0 || length > INT64_MAX - offset) {
		r = -EINVAL;
		goto out;
	}
	if (mode & FALLOC_FL_KEEP_SIZE)
		m.opflags |= QFT_FALLOC_KEEP_SIZE;
	if (mode & FALLOC_FL_PUNCH_HOLE)
		m.opflags |= QFT_FALLOC_PUNCH_HOLE;
	if (mode & FALLOC_FL_ZERO_RANGE)
		m.opflags |= QFT_FALLOC_ZERO_RANGE;
	m.offset = (uint64_t)offset;
	m.length = (uint64_t)length;
	/* Changed data must be made durable by the next flush as well. */
	pthread_mutex_lock(&f->lock);
	f->written = true;
	f->mods++;
	pthread_mutex_unlock(&f->lock);
	r = file_call(fs, f, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Punched or zeroed ranges, or a grown file, change what reads see. */
	ra_invalidate_file(fs, f);
out:
	fuse_reply_err(req, -r);
}

static int parse_size(const char *name, const char *s, uint64_t *out)
{
	unsigned long long v;
	uint64_t unit = 1;
	char *end;

	if (!s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *s == '-' || *s == '+' || errno)
		goto out_bad;
	switch (*end) {
	case 'k': case 'K': unit = (uint64_t)1 << 10; end++; break;
	case 'm': case 'M': unit = (uint64_t)1 << 20; end++; break;
	case 'g': case 'G': unit = (uint64_t)1 << 30; end++; break;
	}
	if (*end || v > QC_STREAM_SIZE_MAX / unit)
		goto out_bad;
	*out = v * unit;
	return 0;
out_bad:
	fprintf(stderr, "qftfs: invalid %s '%s': expected a size in bytes "
		"with an optional K, M or G suffix, at most 1G\n", name, s);
	return -EINVAL;
}

int qc_fs_set_sizes(struct qc_fs *fs, const char *window,
		    const char *readahead)
{
	uint64_t w = QC_WINDOW_DEFAULT, ra = QC_READAHEAD_DEFAULT;

	if (parse_size("window", window, &w) < 0 ||
	    parse_size("readahead", readahead, &ra) < 0)
		return -EINVAL;
	fs->window = w;
	fs->readahead = ra;
	fs->sizes_set = true;
	return 0;
}

/* The server is gone or going: nothing to close there any more. */
static void drop_file(struct qn_file *nf)
{
	file_free((struct qc_file *)nf);
}

void qc_fs_destroy(struct qc_fs *fs)
{
	qn_table_destroy(&fs->nodes, drop_file);
	/* Every chunk is freed by now; anything else is a bookkeeping bug. */
	if (atomic_load(&fs->ra_bytes) != 0)
		qft_warn("read-ahead accounting is off by %llu bytes",
			 (unsigned long long)atomic_load(&fs->ra_bytes));
}

const struct fuse_lowlevel_ops qc_ops = {
	.init         = qc_init,
	.lookup       = qc_lookup,
	.forget       = qc_forget,
	.forget_multi = qc_forget_multi,
	.getattr      = qc_getattr,
	.setattr      = qc_setattr,
	.readlink     = qc_readlink,
	.mknod        = qc_mknod,
	.mkdir        = qc_mkdir,
	.unlink       = qc_unlink,
	.rmdir        = qc_rmdir,
	.symlink      = qc_symlink,
	.rename       = qc_rename,
	.link         = qc_link,
	.open         = qc_open,
	.create       = qc_create,
	.read         = qc_read,
	.write        = qc_write,
	.flush        = qc_flush,
	.release      = qc_release,
	.fsync        = qc_fsync,
	.opendir      = qc_opendir,
	.readdir      = qc_readdir,
	.readdirplus  = qc_readdirplus,
	.releasedir   = qc_releasedir,
	.fsyncdir     = qc_fsync,
	.statfs       = qc_statfs,
	.setxattr     = qc_setxattr,
	.getxattr     = qc_getxattr,
	.listxattr    = qc_listxattr,
	.removexattr  = qc_removexattr,
	.fallocate    = qc_fallocate,
};
