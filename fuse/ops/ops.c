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
#include <stdint.h>
#include <stdio.h>    /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "errmap.h"
#include "fs/file.h"
#include "fs/hints.h"
#include "fs/idmap.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "ops/ops.h"
#include "protocol.h"
#include "fs/stream.h"

static struct qc_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct qc_file *file_of(const struct fuse_file_info *fi)
{
	return (struct qc_file *)(uintptr_t)fi->fh;
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
	r = qn_path(&fs->nodes, qc_fs_node(fs, ino), name, buf);
	return r < 0 ? r : 0;
}

static void reply_attr(fuse_req_t req, struct qc_fs *fs, struct qn_node *n,
		       const struct qft_attr *a, uint64_t xgen)
{
	struct stat st;

	/*
	 * The path led to an object of another type than the kernel's
	 * inode (another thread replaced the name between the kernel's
	 * lookup and this request, the target of a followed symlink was
	 * replaced or made, a name was replaced where no watch saw it): the
	 * kernel would take those attributes as corruption and fail the
	 * inode with EIO for good.  ESTALE makes stat(2) walk the path
	 * again and look the name up afresh.
	 */
	if (qn_replaced(&fs->nodes, n, a, false)) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	qn_note_attr(&fs->nodes, n, a, NULL);
	qc_hint_noxattr_note(fs, n, a, xgen);
	qc_entry_attr_to_stat(fs, n, a, &st);
	fuse_reply_attr(req, &st, fs->attr_timeout);
}

/*
 * Attributes the client predicts (file.h, "Pipelined steps"): the kernel
 * may use them for this answer only and asks again next time, when the
 * server's own may be known.
 */
static void reply_predicted(fuse_req_t req, struct qc_fs *fs,
			    struct qn_node *n, const struct qft_attr *a)
{
	struct stat st;

	qc_entry_attr_to_stat(fs, n, a, &st);
	fuse_reply_attr(req, &st, 0);
}

/* Answers a request that created or found `name` in `parent`. */
/* `passing`: an answer true only for this request (make_entry), which
 * the kernel and the node must not keep. */
static void reply_entry(fuse_req_t req, struct qc_fs *fs, fuse_ino_t parent,
			const char *name, const struct qft_attr *a,
			uint64_t xgen, bool passing)
{
	struct fuse_entry_param e;
	struct qft_attr fresh;
	struct qn_node *n;

	n = qn_lookup(&fs->nodes, qc_fs_node(fs, parent), name, a);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	qc_hint_noxattr_note(fs, n, a, xgen);
	qc_entry_fill(fs, &e, n,
		      qc_file_attr_behind_writes(fs, n, a, &fresh) ?
		      &fresh : a);
	if (passing) {
		e.entry_timeout = 0;
		e.attr_timeout = 0;
		qn_attr_stale(&fs->nodes, n);
	}
	/* An interrupted request's reply never reaches the kernel, and
	 * neither does the lookup it counted. */
	if (fuse_reply_entry(req, &e) != 0)
		qn_forget(&fs->nodes, n, 1);
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
		*borrowed = qc_file_borrow_busy(fs, qc_fs_node(fs, ino));
		if (*borrowed) {
			path[0] = '\0';
			return 0;
		}
	}
	if (r != -ENOENT || !borrowed)
		return r;
	nf = qn_file_borrow(&fs->nodes, qc_fs_node(fs, ino));
	if (!nf)
		return -ENOENT;
	*borrowed = (struct qc_file *)nf;
	path[0] = '\0';
	return 0;
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
	struct qc_dir_fetch fb;
	struct qc_reply rep;
	struct qft_msg m;
	bool sent = false;
	int r;

	r = node_path(fs, parent, name, path);
	if (r < 0)
		goto out_err;
	if (qc_dir_reply_lookup(req, fs, parent, name))
		return;
	qft_msg_init(&m, QFT_OP_LSTAT, 0);
	qc_set_str(&m.path, path);
	/*
	 * A pipelined CREATE of the name must be seen (file.h).  The fetch
	 * begins first: a create counted after the settle is then recorded
	 * after it and spoils this answer, which may have overtaken its
	 * CREATE on the other stream.
	 */
	qc_dir_fetch_begin(fs, &fb);
	qc_step_settle(fs);
	sent = true;
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	qc_dir_note_fetched(fs, qc_fs_node(fs, parent), name, &rep.msg.attr,
			    &fb);
	reply_entry(req, fs, parent, name, &rep.msg.attr, fb.xgen, false);
	qc_reply_free(&rep);
	return;
out_err:
	if (r == -ENOENT && sent)
		qc_dir_note_fetched(fs, qc_fs_node(fs, parent), name, NULL,
				    &fb);
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

	qn_forget(&fs->nodes, qc_fs_node(fs, ino), nlookup);
	fuse_reply_none(req);
}

static void qc_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct qc_fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++)
		qn_forget(&fs->nodes, qc_fs_node(fs, forgets[i].ino),
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
	struct qft_attr a;
	double left;

	if (qc_step_predicted(fs, qc_fs_node(fs, ino), &a)) {
		/* Pipelined steps of an open file are not answered yet:
		 * what they will have made, valid for no time at all. */
		qc_stat_inc(&fs->stats, QC_STAT_GETATTR_LOCAL);
		reply_predicted(req, fs, qc_fs_node(fs, ino), &a);
		return;
	}
	if (qn_fresh_attr(&fs->nodes, qc_fs_node(fs, ino), qc_now_ns(), &a,
			  &left)) {
		/* Told by the answer to a FLUSH, within attr_timeout. */
		struct stat st;

		qc_stat_inc(&fs->stats, QC_STAT_GETATTR_LOCAL);
		qc_entry_attr_to_stat(fs, qc_fs_node(fs, ino), &a, &st);
		fuse_reply_attr(req, &st, left);
		return;
	}
	if (ino != FUSE_ROOT_ID &&
	    qc_dir_cached_attr(fs, qc_fs_node(fs, ino), &a)) {
		/*
		 * From the parent's listing (dircache.h), which says how
		 * long they hold; the kernel is given none of that time, so
		 * that it asks again and the listing decides each time.
		 */
		struct stat st;

		qc_stat_inc(&fs->stats, QC_STAT_GETATTR_LOCAL);
		qc_entry_attr_to_stat(fs, qc_fs_node(fs, ino), &a, &st);
		fuse_reply_attr(req, &st, 0);
		return;
	}
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
			qc_set_str(&m.path, path);
		}
	}
	xgen = qc_hint_xattr_gen(fs);
	if (fi || borrowed)
		r = qc_file_call(fs, fi ? file_of(fi) : borrowed, &m, &rep);
	else
		r = qc_call(fs->conn, &m, &rep);
	if (r < 0 && fi) {
		/* fstat of a file whose pipelined CREATE was refused. */
		r = qc_file_error(file_of(fi), r);
	} else if (r < 0 && borrowed && qc_file_error(borrowed, 0) < 0) {
		/* The handle borrowed for the name never opened (its CREATE
		 * was refused, and the node lost the name): the name is what
		 * the server has there, if anything. */
		r = node_path(fs, ino, NULL, path);
		if (r == 0) {
			qft_msg_init(&m, QFT_OP_LSTAT, 0);
			qc_set_str(&m.path, path);
			r = qc_call(fs->conn, &m, &rep);
		}
	}
	qc_file_put(fs, borrowed);
	if (r < 0)
		goto out_err;
	reply_attr(req, fs, qc_fs_node(fs, ino), &rep.msg.attr, xgen);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

/*
 * Whether the server's user may create in a directory with attributes
 * `pa`, as far as its mode bits tell.  A create the client can see will
 * be refused (the usual EACCES) waits for the server, so that open(2)
 * fails as it would locally (a shell does not check close() after a
 * redirection); supplementary groups and ACLs the client cannot see make
 * it wait too, unless "other" may write.  Root may, short of a
 * read-only or immutable directory, which the close then reports.
 */
static bool may_create_in(const struct qft_attr *pa, uint32_t uid,
			  uint32_t gid)
{
	uint32_t need = 03; /* write and search */

	if (uid == 0)
		return true;
	if (pa->uid == uid)
		return ((pa->mode >> 6) & need) == need;
	if (pa->gid == gid && ((pa->mode >> 3) & need) == need)
		return true;
	return (pa->mode & need) == need;
}

/*
 * Attributes of `n` a prediction may start from: what its open files
 * will have made of it, or attributes still fresh (never merely the last
 * ones seen: a file written since has another size).
 */
static bool current_attr(struct qc_fs *fs, struct qn_node *n,
			 struct qft_attr *a)
{
	double left;

	return qc_step_predicted(fs, n, a) ||
	       qn_fresh_attr(&fs->nodes, n, qc_now_ns(), a, &left) ||
	       (n != &fs->nodes.root && qc_dir_cached_attr(fs, n, a));
}

/*
 * commit=async (commit.h): whether SETATTR `m` by path of node `n` may be
 * answered before the server did, and with what (*a).  Only when its
 * outcome is known: no truncation (data, and its errors, are the
 * server's), a file or directory whose attributes are known, and the
 * server's user may make the change (root, or the owner changing mode
 * and times, or the group to its own).
 */
static bool setattr_predicted(struct qc_fs *fs, struct qn_node *n,
			      const struct qft_msg *m, struct qft_attr *a)
{
	uint32_t uid, gid, type;

	if (!fs->commit.on || fs->window == 0 || (m->valid & QFT_SET_SIZE) ||
	    !current_attr(fs, n, a))
		return false;
	type = a->mode & QFT_S_IFMT;
	if (type != QFT_S_IFREG && type != QFT_S_IFDIR)
		return false;
	qc_conn_server_ids(fs->conn, &uid, &gid);
	if (uid != 0) {
		if (a->uid != uid)
			return false;
		if ((m->valid & QFT_SET_UID) && m->uid != uid)
			return false;
		if ((m->valid & QFT_SET_GID) && m->gid != gid &&
		    m->gid != a->gid)
			return false;
	}
	qc_step_apply_setattr(m, a);
	return true;
}

struct setattr_fix {
	struct qn_node *n;      /* a reference */
	uint64_t gen;           /* n's attr_gen once the prediction was set */
};

/* The outcome of an asynchronous SETATTR (qc_commit_fix_fn). */
static void setattr_fixed(struct qc_fs *fs, void *ctx, int err,
			  const struct qc_reply *rep)
{
	struct setattr_fix *sf = ctx;
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;

	if (qn_parent_ref(&fs->nodes, sf->n, &parent, name) < 0)
		parent = NULL;
	if (err == 0) {
		/* The server's own, unless a change went out since. */
		if ((rep->msg.attr.mode & QFT_S_IFMT) != QFT_S_IFDIR)
			qn_note_fresh(&fs->nodes, sf->n, &rep->msg.attr,
				      sf->gen, qc_fs_attr_until(fs));
		if (parent)
			qc_dir_note_attr(fs, parent, name, &rep->msg.attr);
	} else {
		/* What was predicted is not so: ask the server next time. */
		qn_attr_stale(&fs->nodes, sf->n);
		qc_dir_drop(fs, parent);
	}
	if (parent)
		qn_unref(&fs->nodes, parent);
	qn_unref(&fs->nodes, sf->n);
	free(sf);
}

/* Sends SETATTR `m` of node `n` at `path` without waiting, `a` being
 * what it makes; 0, or -errno to do it synchronously instead. */
static int setattr_async(struct qc_fs *fs, struct qn_node *n,
			 struct qft_msg *m, const char *path,
			 const struct qft_attr *a)
{
	char name[QFT_MAX_NAME + 1];
	struct setattr_fix *sf;
	struct qn_node *parent;
	int r;

	sf = malloc(sizeof(*sf));
	if (!sf)
		return -ENOMEM;
	qn_ref(&fs->nodes, n);
	sf->n = n;
	/* The prediction answers getattr until the reply replaces it; not
	 * a directory's (whatever is made in it changes its times). */
	qn_attr_stale(&fs->nodes, n);
	sf->gen = qn_attr_gen(&fs->nodes, n);
	if ((a->mode & QFT_S_IFMT) != QFT_S_IFDIR)
		qn_note_fresh(&fs->nodes, n, a, sf->gen, qc_fs_attr_until(fs));
	if (qn_parent_ref(&fs->nodes, n, &parent, name) == 0) {
		qc_dir_note_attr(fs, parent, name, a);
		qn_unref(&fs->nodes, parent);
	}
	qc_set_str(&m->path, path);
	r = qc_commit_path_op(fs, m, path, setattr_fixed, sf);
	if (r < 0) {
		qn_attr_stale(&fs->nodes, n);
		qn_unref(&fs->nodes, n);
		free(sf);
	}
	return r;
}

static void qc_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int valid, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1] = "";
	struct qc_file *borrowed = NULL, *hf;
	struct qc_reply rep;
	struct qft_attr a;
	struct qft_msg m;
	int r;
	uint64_t xgen, agen;

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
	/* -o idmap=: the owner as the server knows it. */
	r = qc_idmap_to_remote(m.valid & QFT_SET_UID ? &m.uid : NULL,
			       m.valid & QFT_SET_GID ? &m.gid : NULL);
	if (r < 0)
		goto out_err;
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
	if (hf && fs->window > 0 && qc_step_predict_setattr(fs, hf, &m, &a)) {
		/* The server does not use it, but recognises the change
		 * as ours by it (no NOTIFY ends the directory's lease). */
		if (node_path(fs, ino, NULL, path) == 0)
			qc_set_str(&m.path, path);
		qn_attr_stale(&fs->nodes, qc_fs_node(fs, ino));
		/*
		 * fchmod, fchown, futimens of an open file (cp -p, rsync,
		 * tar): sent behind its other requests without waiting; a
		 * refusal is reported by the next write, fsync or close.
		 */
		r = qc_step_send(fs, hf, &m, &a);
		qc_file_put(fs, borrowed);
		if (r < 0)
			goto out_err;
		qc_stat_inc(&fs->stats, QC_STAT_SETATTR_ASYNC);
		reply_predicted(req, fs, qc_fs_node(fs, ino), &a);
		return;
	}
	if (!hf && setattr_predicted(fs, qc_fs_node(fs, ino), &m, &a) &&
	    setattr_async(fs, qc_fs_node(fs, ino), &m, path, &a) == 0) {
		/* utimensat or chmod by path after close() in a tree copy
		 * (rsync): in order behind the file's data, reported like
		 * its close (commit.h). */
		qc_stat_inc(&fs->stats, QC_STAT_SETATTR_ASYNC);
		reply_predicted(req, fs, qc_fs_node(fs, ino), &a);
		return;
	}
	if (hf && (m.valid & QFT_SET_SIZE)) {
		/* A truncation through the handle is a change to make
		 * durable like a write. */
		qc_file_changed(hf, false);
	}
	qc_set_str(&m.path, path);
	xgen = qc_hint_xattr_gen(fs);
	qn_attr_stale(&fs->nodes, qc_fs_node(fs, ino));
	agen = qn_attr_gen(&fs->nodes, qc_fs_node(fs, ino));
	if (hf)
		r = qc_file_call(fs, hf, &m, &rep);
	else
		r = qc_call(fs->conn, &m, &rep);
	qc_file_put(fs, borrowed);
	/* Even a failed truncation may have cut the file. */
	if (m.valid & QFT_SET_SIZE)
		qc_ra_invalidate(fs, qc_fs_node(fs, ino));
	if (r < 0)
		goto out_err;
	/* The server's attributes as they are now: what rsync's lstat and
	 * open right after are answered from (unless something changed
	 * meanwhile).  Not a directory's: whatever is made in it changes
	 * its times, and nothing here would make them stale. */
	if (fs->attr_timeout > 0 && !hf &&
	    (rep.msg.attr.mode & QFT_S_IFMT) != QFT_S_IFDIR)
		qn_note_fresh(&fs->nodes, qc_fs_node(fs, ino), &rep.msg.attr,
			      agen, qc_fs_attr_until(fs));
	reply_attr(req, fs, qc_fs_node(fs, ino), &rep.msg.attr, xgen);
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
	qc_set_str(&m.path, path);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	fuse_reply_readlink(req, rep.msg.target.s);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

/*
 * MKNOD, MKDIR and SYMLINK: an entry op whose reply is the new attrs.  The
 * parent's listing gains the name; a new directory's listing is known
 * empty.  A failure drops the parent's listing: the name exists after all
 * (EEXIST), or the request may have taken effect (a lost reply).
 */
/*
 * The owner an object made by the caller of `req` in `parent` must be
 * given: on a mount other local users may use (allow_other) and served
 * by root, what a user makes is theirs, as on a local filesystem (a
 * set-group-ID directory's group wins).  1 with *uid and *gid set (as the
 * server knows them, idmap.h), 0 when the server's own user is right, or
 * -EPERM when idmap cannot map the caller.
 */
static int owner_for(fuse_req_t req, struct qc_fs *fs, struct qn_node *parent,
		     uint32_t *uid, uint32_t *gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint32_t su, sg;
	struct qft_attr pa;
	int r;

	if (!fs->multi_user)
		return 0;
	qc_conn_server_ids(fs->conn, &su, &sg);
	if (su != 0)
		return 0;
	*uid = ctx->uid;
	*gid = ctx->gid;
	r = qc_idmap_to_remote(uid, gid);
	if (r < 0)
		return r;
	if (qn_get_attr(&fs->nodes, parent, &pa) && (pa.mode & S_ISGID))
		*gid = pa.gid;
	return *uid != su || *gid != sg;
}

/*
 * Gives the object just made at `path` (through `handle` when not 0, on
 * link `gen`) the owner from owner_for; *rep is then its attributes.  On
 * failure the object is removed again (remove_op), so that nothing is
 * left that its maker does not own.
 */
static int give_owner(struct qc_fs *fs, uint64_t gen, uint64_t handle,
		      const char *dir, const char *name, uint16_t remove_op,
		      uint32_t uid, uint32_t gid, struct qc_reply *rep)
{
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rrep;
	struct qft_msg m;
	int r;

	if (snprintf(path, sizeof(path), "%s%s%s", dir, *dir ? "/" : "",
		     name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	qft_msg_init(&m, QFT_OP_SETATTR, 0);
	m.handle = handle;
	if (!handle)
		qc_set_str(&m.path, path);
	m.valid = QFT_SET_UID | QFT_SET_GID;
	m.uid = uid;
	m.gid = gid;
	r = handle ? qc_call_gen(fs->conn, gen, &m, rep) :
		     qc_call(fs->conn, &m, rep);
	if (r == 0)
		return 0;
	qft_warn("/%s: made, but giving it to uid %u gid %u failed: %s; "
		 "removing it", path, uid, gid, strerror(-r));
	qft_msg_init(&m, remove_op, 0);
	qc_set_str(&m.path, dir);
	qc_set_str(&m.name, name);
	if (qc_call(fs->conn, &m, &rrep) == 0)
		qc_reply_free(&rrep);
	return qc_conn_user_err(r);
}

static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
		       struct qft_msg *m)
{
	struct qc_fs *fs = fs_of(req);
	struct qn_node *dir = qc_fs_node(fs, parent);
	char path[QFT_MAX_PATH + 1];
	struct qc_dir_fetch fb;
	struct qc_reply rep;
	uint32_t uid, gid;
	int r, owned;
	/*
	 * -o follow_symlinks: the kernel must get the new link as a link,
	 * while the server shows it as what it leads to from now on; so
	 * this answer is cached nowhere (no listing entry, no kernel
	 * timeouts) and the next lookup asks the server.  Nor can the link
	 * be given its maker as owner: SETATTR by path would follow it and
	 * change the owner of its target.
	 */
	bool passing = fs->follow && m->op == QFT_OP_SYMLINK;

	r = check_name(name);
	if (r < 0)
		goto out_err;
	r = node_path(fs, parent, NULL, path);
	if (r < 0)
		goto out_err;
	qc_set_str(&m->path, path);
	qc_set_str(&m->name, name);
	owned = passing ? 0 : owner_for(req, fs, dir, &uid, &gid);
	if (owned < 0) {
		r = owned;
		goto out_err;
	}
	qc_dir_fetch_begin(fs, &fb);
	r = qc_call(fs->conn, m, &rep);
	if (r < 0) {
		qc_dir_drop(fs, dir);
		goto out_err;
	}
	if (owned) {
		struct qc_reply orep;

		r = give_owner(fs, 0, 0, path, name,
			       m->op == QFT_OP_MKDIR ? QFT_OP_RMDIR :
			       QFT_OP_UNLINK, uid, gid, &orep);
		qc_reply_free(&rep);
		if (r < 0) {
			qc_dir_drop(fs, dir);
			goto out_err;
		}
		rep = orep;
	}
	if (passing)
		qc_dir_drop(fs, dir);
	else if (m->op == QFT_OP_MKDIR)
		qc_dir_note_mkdir(fs, dir, name, &rep.msg.attr, &fb);
	else
		qc_dir_note_entry(fs, dir, name, &rep.msg.attr);
	reply_entry(req, fs, parent, name, &rep.msg.attr, fb.xgen, passing);
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
	qc_set_str(&m.target, link);
	make_entry(req, parent, name, &m);
}

/* UNLINK and RMDIR: the name goes away on the server, then here. */
/*
 * `name` in `parent` is about to lose its object: the kernel's other
 * inodes of that object (nodes are names here) have a stale link count
 * it would otherwise keep for attr_timeout.  Before the reply, so that a
 * stat right after unlink(2) or rename(2) returns sees the new count.
 */
static void others_lose_a_link(struct qc_fs *fs, fuse_ino_t parent,
			       const char *name)
{
	uint64_t ids[16];
	size_t n;

	n = qn_other_names(&fs->nodes, qc_fs_node(fs, parent), name, ids,
			   sizeof(ids) / sizeof(ids[0]));
	if (n)
		qn_names_changed(&fs->nodes);
	for (size_t i = 0; i < n && fs->se; i++)
		fuse_lowlevel_notify_inval_inode(fs->se, ids[i], -1, 0);
}

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
	qc_set_str(&m.path, path);
	qc_set_str(&m.name, name);
	qc_step_settle(fs);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		qc_dir_drop(fs, qc_fs_node(fs, parent));
		goto out;
	}
	qc_reply_free(&rep);
	others_lose_a_link(fs, parent, name);
	qc_dir_note_gone(fs, qc_fs_node(fs, parent), name);
	qn_remove(&fs->nodes, qc_fs_node(fs, parent), name);
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

/*
 * commit=async (commit.h): whether a rename may be answered before the
 * server did.  Only when its outcome is known: both directories leased
 * and made by this client (qc_dir_leased_name), writable by the server's
 * user without a sticky bit, the source a file or symlink, and the
 * target absent or not a directory.
 */
static bool rename_predicted(struct qc_fs *fs, struct qn_node *dir,
			     const char *name, struct qn_node *newdir,
			     const char *newname, unsigned int flags)
{
	struct qft_attr da, na;
	uint32_t uid, gid, type, ttype;
	int r;

	if (!fs->commit.on || fs->window == 0 || flags)
		return false;
	qc_conn_server_ids(fs->conn, &uid, &gid);
	if (!qn_get_attr(&fs->nodes, dir, &da) ||
	    !qn_get_attr(&fs->nodes, newdir, &na) ||
	    !may_create_in(&da, uid, gid) || !may_create_in(&na, uid, gid) ||
	    (uid != 0 && ((da.mode | na.mode) & S_ISVTX)))
		return false;
	if (qc_dir_leased_name(fs, dir, name, &type) != 1 ||
	    (type != QFT_S_IFREG && type != QFT_S_IFLNK))
		return false;
	r = qc_dir_leased_name(fs, newdir, newname, &ttype);
	return r == 0 || (r == 1 && ttype != QFT_S_IFDIR);
}

struct rename_fix {
	struct qn_node *dir, *newdir;   /* references */
};

/* The outcome of an asynchronous RENAME (qc_commit_fix_fn). */
static void rename_fixed(struct qc_fs *fs, void *ctx, int err,
			 const struct qc_reply *rep)
{
	struct rename_fix *rf = ctx;

	(void)rep;
	if (err) {
		/* The names are not where the caches put them. */
		qn_names_changed(&fs->nodes);
		qc_dir_drop(fs, rf->dir);
		qc_dir_drop(fs, rf->newdir);
	}
	qn_unref(&fs->nodes, rf->dir);
	qn_unref(&fs->nodes, rf->newdir);
	free(rf);
}

static int rename_async(struct qc_fs *fs, struct qn_node *dir,
			struct qn_node *newdir, struct qft_msg *m,
			const char *shown)
{
	struct rename_fix *rf = malloc(sizeof(*rf));
	int r;

	if (!rf)
		return -ENOMEM;
	qn_ref(&fs->nodes, dir);
	qn_ref(&fs->nodes, newdir);
	rf->dir = dir;
	rf->newdir = newdir;
	r = qc_commit_path_op(fs, m, shown, rename_fixed, rf);
	if (r < 0) {
		qn_unref(&fs->nodes, dir);
		qn_unref(&fs->nodes, newdir);
		free(rf);
	}
	return r;
}

/*
 * Whether two names are, as far as this client knows, links of one
 * server inode: rename(2) then does nothing and both names stay, while
 * the kernel, which sees two inodes (nodes are names here), moves its
 * dentry as for any rename.
 */
static bool same_object(struct qc_fs *fs, fuse_ino_t parent, const char *name,
			fuse_ino_t newparent, const char *newname)
{
	struct qn_node *a, *b = NULL;
	bool same = false;

	a = qn_find_ref(&fs->nodes, qc_fs_node(fs, parent), name);
	if (a)
		b = qn_find_ref(&fs->nodes, qc_fs_node(fs, newparent),
				newname);
	if (a && b)
		same = qn_rino(&fs->nodes, a) &&
		       qn_rino(&fs->nodes, a) == qn_rino(&fs->nodes, b);
	if (b)
		qn_unref(&fs->nodes, b);
	if (a)
		qn_unref(&fs->nodes, a);
	return same;
}

static void qc_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1], path2[QFT_MAX_PATH + 1];
	char shown[QFT_MAX_PATH + QFT_MAX_NAME + 2];
	struct qc_reply rep;
	struct qft_msg m;
	bool same;
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
	qc_set_str(&m.path, path);
	qc_set_str(&m.name, name);
	qc_set_str(&m.path2, path2);
	qc_set_str(&m.name2, newname);
	/* A file whose CREATE is unanswered has no server inode yet, and
	 * is nobody's other link. */
	same = !flags && same_object(fs, parent, name, newparent, newname);
	if (!same && rename_predicted(fs, qc_fs_node(fs, parent), name,
			     qc_fs_node(fs, newparent), newname, flags) &&
	    snprintf(shown, sizeof(shown), "%s%s%s", path, *path ? "/" : "",
		     name) > 0 &&
	    rename_async(fs, qc_fs_node(fs, parent),
			 qc_fs_node(fs, newparent), &m, shown) == 0) {
		/* rsync's rename of its temporary file over the target:
		 * in order behind the file's data (commit.h). */
		qc_stat_inc(&fs->stats, QC_STAT_RENAME_ASYNC);
		goto out_renamed;
	}
	qc_step_settle(fs);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0 || same) {
		/* After a same-object rename the listings are what they
		 * were, if the client knew right; asked for again in case
		 * it did not. */
		qc_dir_drop(fs, qc_fs_node(fs, parent));
		qc_dir_drop(fs, qc_fs_node(fs, newparent));
	}
	if (r < 0)
		goto out;
	qc_reply_free(&rep);
	if (same) {
		/* Only the kernel's dentry moves: the node follows it. */
		qn_rename(&fs->nodes, qc_fs_node(fs, parent), name,
			  qc_fs_node(fs, newparent), newname, false);
		goto out;
	}
out_renamed:
	if (!(flags & RENAME_EXCHANGE))
		others_lose_a_link(fs, newparent, newname);
	qc_dir_note_rename(fs, qc_fs_node(fs, parent), name,
			   qc_fs_node(fs, newparent), newname,
			   flags & RENAME_EXCHANGE);
	qn_rename(&fs->nodes, qc_fs_node(fs, parent), name, qc_fs_node(fs, newparent),
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
	qc_set_str(&m.path, path);
	qc_set_str(&m.path2, path2);
	qc_set_str(&m.name2, newname);
	qc_step_settle(fs);
	xgen = qc_hint_xattr_gen(fs);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		qc_dir_drop(fs, qc_fs_node(fs, newparent));
		goto out_err;
	}
	qc_dir_note_link(fs, qc_fs_node(fs, newparent), newname,
			 &rep.msg.attr);
	/*
	 * The new name is a node of its own (nodes are names here), so the
	 * kernel does not see the link count of the old one change: make it
	 * ask again, before link(2) returns and a stat could come.
	 * Attributes only, which takes no inode lock (link(2) holds the
	 * old one's).
	 */
	qn_names_changed(&fs->nodes);
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	reply_entry(req, fs, newparent, newname, &rep.msg.attr, xgen, false);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

/*
 * How much of the file an OPEN asks for (QC_OPEN_DATA): the first bytes
 * come with the answer, so reading a small file costs no round trip of
 * its own.  Nothing for a file opened to write only or truncate, and
 * nothing when the kernel may hold its pages already (it would not read
 * them again); for a file known to be small, its size and one byte more,
 * so that the answer also says where it ends.
 */
static uint64_t open_data_length(struct qc_fs *fs, struct qn_node *n,
				 int flags)
{
	struct qft_attr a;

	if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_TRUNC) ||
	    fs->readahead == 0 || qn_paged(&fs->nodes, n))
		return 0;
	if (qn_get_attr(&fs->nodes, n, &a) && a.size < QC_OPEN_DATA)
		return a.size + 1;
	return QC_OPEN_DATA;
}

/*
 * Whether an open of node `n` with `flags` may be answered before the
 * server did, with *a the attributes the file has: a read-only open of a
 * regular file the server's user may read, named in a leased directory
 * this client made (rsync opens each file it wrote once more to fchmod
 * it).  Its refusal is reported by the next read, fsync or close.
 */
static bool open_predicted(struct qc_fs *fs, struct qn_node *n, int flags,
			   struct qft_attr *a)
{
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	uint32_t uid, gid, type;
	bool ok;

	if (fs->window == 0 || (flags & O_ACCMODE) != O_RDONLY ||
	    (flags & (O_TRUNC | O_APPEND)) || !current_attr(fs, n, a) ||
	    (a->mode & QFT_S_IFMT) != QFT_S_IFREG)
		return false;
	qc_conn_server_ids(fs->conn, &uid, &gid);
	if (uid != 0 && !(a->uid == uid && (a->mode & S_IRUSR)))
		return false;
	if (qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return false;
	ok = qc_dir_leased_name(fs, parent, name, &type) == 1 &&
	     type == QFT_S_IFREG;
	qn_unref(&fs->nodes, parent);
	return ok;
}

static void qc_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qc_file *f;
	struct qft_attr a;
	struct qft_msg m;
	uint64_t handle, gen = 0;
	bool same;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	r = qc_file_begin(fs, false, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_OPEN, 0);
	m.handle = handle;
	qc_set_str(&m.path, path);
	m.opflags = qc_file_oflags(fs, fi->flags & ~(O_CREAT | O_EXCL));
	if (open_predicted(fs, qc_fs_node(fs, ino), fi->flags, &a)) {
		f->gen = gen;
		qn_file_attach(&fs->nodes, qc_fs_node(fs, ino), &f->nf, handle);
		r = qc_step_send(fs, f, &m, &a);
		if (r < 0) {
			qc_file_release(fs, f);
			goto out_err;
		}
		qc_stat_inc(&fs->stats, QC_STAT_OPEN_ASYNC);
		/* The server's word on the pages comes too late to keep them. */
		fi->keep_cache = 0;
		fi->fh = (uintptr_t)f;
		if (fuse_reply_open(req, fi) != 0)
			qc_file_release(fs, f);
		return;
	}
	m.length = open_data_length(fs, qc_fs_node(fs, ino), fi->flags);
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	/* O_TRUNC (atomic_o_trunc) cut the file under other open handles. */
	if (m.opflags & QFT_O_TRUNC) {
		qc_ra_invalidate(fs, qc_fs_node(fs, ino));
		qn_attr_stale(&fs->nodes, qc_fs_node(fs, ino));
	}
	if (r < 0) {
		r = qc_file_open_error(fs, qc_fs_node(fs, ino), path, r);
		goto out_free_handle;
	}
	if (qn_replaced(&fs->nodes, qc_fs_node(fs, ino), &rep.msg.attr, false)) {
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
	qn_note_attr(&fs->nodes, qc_fs_node(fs, ino), &rep.msg.attr, &same);
	if (rep.msg.opflags & QFT_OPEN_DATA)
		qc_ra_prime(fs, f, (uint32_t)m.length, &rep);
	qc_reply_free(&rep);
	fi->keep_cache = same;
	qn_file_attach(&fs->nodes, qc_fs_node(fs, ino), &f->nf, handle);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) != 0)
		qc_file_release(fs, f);
	return;

out_free_handle:
	/* The server bound nothing (or its CLOSE is sent), so the number is
	 * free at once. */
	qc_handle_free(fs->conn, gen, handle);
	qc_file_free(f);
out_err:
	fuse_reply_err(req, -r);
}

/* Hands a created (or pipelined) file f of node n to the kernel. */
static void reply_create(fuse_req_t req, struct qc_fs *fs,
			 const struct fuse_entry_param *e, struct qn_node *n,
			 struct qc_file *f, struct fuse_file_info *fi)
{
	fi->fh = (uintptr_t)f;
	if (fuse_reply_create(req, e, fi) != 0) {
		/* The kernel will neither release the file nor forget it. */
		qn_forget(&fs->nodes, n, 1);
		qc_file_release(fs, f);
	}
}


/*
 * The attributes a file created by `m` in `parent` will have: the mode
 * asked for (the kernel applied the umask, the server applies none), the
 * server's user, and its group or, in a set-group-ID directory, the
 * directory's.  False when that cannot be known.  Anything the server
 * does otherwise (a default ACL, a grpid mount) is seen as soon as the
 * kernel asks again, since predictions are given a validity of 0.
 */
static bool predict_create(struct qc_fs *fs, struct qn_node *parent,
			   const struct qft_msg *m, struct qft_attr *a)
{
	struct qft_attr pa;
	struct timespec ts;
	uint32_t uid, gid;

	qc_conn_server_ids(fs->conn, &uid, &gid);
	if (!qn_get_attr(&fs->nodes, parent, &pa) ||
	    (pa.mode & QFT_S_IFMT) != QFT_S_IFDIR ||
	    !may_create_in(&pa, uid, gid))
		return false;
	memset(a, 0, sizeof(*a));
	a->mode = QFT_S_IFREG | m->mode;
	a->nlink = 1;
	a->uid = uid;
	a->gid = (pa.mode & S_ISGID) ? pa.gid : gid;
	a->blksize = pa.blksize;
	clock_gettime(CLOCK_REALTIME, &ts);
	a->atime.sec = a->mtime.sec = a->ctime.sec = ts.tv_sec;
	a->atime.nsec = a->mtime.nsec = a->ctime.nsec = (uint32_t)ts.tv_nsec;
	return true;
}

/*
 * Whether a create may be answered before the server did.  Without
 * O_EXCL it may: the kernel asks only for a name it found missing, and
 * were it there after all, the server opens it as an OPEN would have,
 * with any error reported by the next write, fsync or close.  With
 * O_EXCL the answer "created" must never be given for a name that
 * exists, so only when the server holds a lease on the directory and
 * the name is absent from it.  -o window=0 asks for synchronous writes,
 * and gets synchronous creates too.
 */
static bool create_may_pipeline(struct qc_fs *fs, struct qn_node *parent,
				const char *name, int flags)
{
	if (fs->window == 0)
		return false;
	if (flags & O_EXCL)
		return qc_dir_leased_absent(fs, parent, name);
	return true;
}

/* A create answered at once; the CREATE goes out behind it (file.h,
 * "Pipelined steps"). */
static void create_pipelined(fuse_req_t req, struct qc_fs *fs,
			     fuse_ino_t parent, const char *name,
			     struct qft_msg *m, const struct qft_attr *a,
			     struct fuse_file_info *fi)
{
	uint64_t cgen = qc_hint_caps_gen(fs), start = qc_now_ns();
	struct fuse_entry_param e;
	struct qc_file *f;
	struct qn_node *n;
	uint64_t handle, gen;
	int r;

	r = qc_file_begin(fs, false, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	f->gen = gen;
	n = qn_lookup(&fs->nodes, qc_fs_node(fs, parent), name, a);
	if (!n) {
		qc_handle_free(fs->conn, gen, handle);
		qc_file_free(f);
		r = -ENOMEM;
		goto out_err;
	}
	qn_file_attach(&fs->nodes, n, &f->nf, handle);
	/* Its inode number is the server's to give; the kernel needs one
	 * now (node.h, "Inode numbers as the kernel is shown them"). */
	(void)qn_provisional_ino(&fs->nodes, n);
	/* A file just made has no capability: the kernel's check before
	 * every write(2) is answered here, not after the CREATE's reply. */
	qc_hint_nocap_note(fs, n, cgen, start);
	r = qc_step_send(fs, f, m, a);
	if (r < 0) {
		qn_forget(&fs->nodes, n, 1);
		qn_unlink_node(&fs->nodes, n);
		qc_file_release(fs, f);
		goto out_err;
	}
	qc_stat_inc(&fs->stats, QC_STAT_CREATE_ASYNC);
	/* The directory's listing has it, with an inode once answered. */
	qc_dir_note_entry(fs, qc_fs_node(fs, parent), name, a);
	qc_entry_fill(fs, &e, n, a);
	e.attr_timeout = 0;
	reply_create(req, fs, &e, n, f, fi);
	return;
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
	struct qft_attr a;
	struct qc_file *f;
	struct qn_node *n;
	struct qft_msg m;
	uint64_t handle, gen;
	uint32_t uid, gid;
	int r, owned;

	if ((r = check_name(name)) < 0 ||
	    (r = node_path(fs, parent, NULL, path)) < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_CREATE, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.name, name);
	m.opflags = qc_file_oflags(fs, fi->flags & ~O_CREAT);
	m.mode = mode & 07777;
	owned = owner_for(req, fs, qc_fs_node(fs, parent), &uid, &gid);
	if (owned < 0) {
		r = owned;
		goto out_err;
	}
	/* A file given to its maker is answered with its owner: no
	 * prediction (multi-user mounts are not the tree-copy path). */
	if (!owned &&
	    create_may_pipeline(fs, qc_fs_node(fs, parent), name, fi->flags) &&
	    predict_create(fs, qc_fs_node(fs, parent), &m, &a)) {
		create_pipelined(req, fs, parent, name, &m, &a, fi);
		return;
	}
	r = qc_file_begin(fs, false, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	m.handle = handle;
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, handle);
		/* The name exists after all, or may (a lost reply). */
		qc_dir_drop(fs, qc_fs_node(fs, parent));
		r = qc_conn_user_err(r);
		goto out_free_file;
	}
	f->gen = gen;
	if (owned) {
		struct qc_reply orep;

		r = give_owner(fs, gen, handle, path, name, QFT_OP_UNLINK, uid,
			       gid, &orep);
		qc_reply_free(&rep);
		if (r < 0) {
			qc_dir_drop(fs, qc_fs_node(fs, parent));
			f->nf.handle = handle;
			qc_file_close(fs, f);
			goto out_err;
		}
		rep = orep;
	}
	qc_dir_note_entry(fs, qc_fs_node(fs, parent), name, &rep.msg.attr);

	n = qn_lookup(&fs->nodes, qc_fs_node(fs, parent), name, &rep.msg.attr);
	if (!n) {
		qc_reply_free(&rep);
		f->nf.handle = handle;
		qc_file_close(fs, f);
		r = -ENOMEM;
		goto out_err;
	}
	qc_entry_fill(fs, &e, n, &rep.msg.attr);
	qc_reply_free(&rep);
	qn_file_attach(&fs->nodes, n, &f->nf, handle);
	reply_create(req, fs, &e, n, f, fi);
	return;

out_free_file:
	qc_file_free(f);
out_err:
	fuse_reply_err(req, -r);
}

static void qc_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);

	/* From now on the kernel may have the pages (open_data_length);
	 * once per open file, not a table lock per read. */
	if (!atomic_exchange(&f->paged_noted, true))
		qn_note_paged(&fs->nodes, qc_fs_node(fs, ino));
	qc_ra_read(req, fs, f, size, off);
}

static void qc_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	uint32_t len;
	int r;

	/* The kernel never sends more than max_write; a larger request
	 * would just see a short write. */
	len = (uint32_t)(size < QFT_MAX_DATA ? size : QFT_MAX_DATA);
	if (len == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	r = qc_wb_write(fs_of(req), file_of(fi), buf, len, off);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	fuse_reply_write(req, len);
}

static void qc_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -qc_file_flush(fs_of(req), file_of(fi)));
}

static void qc_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	fuse_reply_err(req, -qc_file_fsync(fs_of(req), file_of(fi), datasync));
}

static void qc_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	qc_file_release(fs_of(req), file_of(fi));
	fuse_reply_err(req, 0);
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
	if (qc_dir_open_lazily(fs, qc_fs_node(fs, ino))) {
		/* A walk's directories cost no round trip each. */
		f = qc_file_new(fs, true);
		if (!f) {
			r = -ENOMEM;
			goto out_err;
		}
		f->oflags = fi->flags;
		f->ahead.lazy = true;
		/* A number of no link (f->gen is 0): nothing is sent for it
		 * and freeing it frees nobody's. */
		handle = 1;
		goto out_attach;
	}
	r = qc_file_begin(fs, true, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = handle;
	qc_set_str(&m.path, path);
	r = qc_call_gen(fs->conn, gen, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, gen, handle);
		r = qc_file_open_error(fs, qc_fs_node(fs, ino), path, r);
		goto out_free_file;
	}
	f->gen = gen;
	qc_reply_free(&rep);
out_attach:
	qn_file_attach(&fs->nodes, qc_fs_node(fs, ino), &f->nf, handle);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) != 0)
		qc_file_release(fs, f);
	return;

out_free_file:
	qc_file_free(f);
out_err:
	fuse_reply_err(req, -r);
}

static void qc_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	qc_dir_readdir(req, fs_of(req), file_of(fi), ino, size, off, false);
}

static void qc_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	qc_dir_readdir(req, fs_of(req), file_of(fi), ino, size, off, true);
}

static void qc_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	qc_file_release(fs_of(req), file_of(fi));
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
	qc_set_str(&m.path, path);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	qft_statfs_to_host(&rep.msg.st, &sv);
	qc_reply_free(&rep);
	fuse_reply_statfs(req, &sv);
}

/* The mount's counters (stats.h) as the value of QC_STATS_XATTR. */
static void reply_stats(fuse_req_t req, struct qc_fs *fs, size_t size)
{
	size_t len = qc_stats_format(&fs->stats, fs->conn, NULL, 0);
	char *buf;

	if (size == 0) {
		fuse_reply_xattr(req, len);
		return;
	}
	if (size < len) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	buf = malloc(len + 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	len = qc_stats_format(&fs->stats, fs->conn, buf, len + 1);
	fuse_reply_buf(req, buf, len);
	free(buf);
}

/* `qftfs --sync` (commit.h): waits, then the report as the value. */
static void reply_sync(fuse_req_t req, struct qc_fs *fs, size_t size)
{
	char text[QFT_MAX_PATH + 256];
	size_t len;

	qc_commit_sync(fs, text, sizeof(text));
	len = strlen(text);
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, text, len);
}

/* Whether `name` of `ino` is the client's own, not the server's to set. */
static bool is_own_xattr(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID && (strcmp(name, QC_STATS_XATTR) == 0 ||
				       strcmp(name, QC_COMMIT_SYNC_XATTR) == 0);
}

/*
 * An extended attribute of `n` was set or removed: its ctime changed, and
 * a POSIX ACL changes its mode too (cp -a sets a directory's mode that
 * way), so attributes noted before are neither fresh nor trusted.
 */
static void xattr_changed_attrs(struct qc_fs *fs, struct qn_node *n)
{
	qn_attr_stale(&fs->nodes, n);
	qn_touch(&fs->nodes, n);
}

/*
 * Sends SETXATTR or REMOVEXATTR `m` of `ino`.  While an open handle of it
 * has WRITEs or steps in flight, on their stream behind them: the server
 * completes them first, so a WRITE executed after it cannot strip the
 * file capability it sets (cp -a, tar --xattrs, setcap after a close in
 * commit=async), and its pipelined CREATE has made the name.  Otherwise
 * on meta, once no CREATE of the mount is unanswered (the path may name a
 * file made by one).
 */
static int xattr_change_call(struct qc_fs *fs, fuse_ino_t ino,
			     struct qft_msg *m, struct qc_reply *rep)
{
	struct qc_file *f;
	uint64_t gen, handle;
	int r;

	f = qc_file_borrow_busy(fs, qc_fs_node(fs, ino));
	if (f && qc_file_handle(fs, f, &gen, &handle) == 0) {
		r = qc_call_behind(fs->conn, gen, m, rep);
		qc_file_put(fs, f);
		return r;
	}
	qc_file_put(fs, f);
	qc_step_settle(fs);
	return qc_call(fs->conn, m, rep);
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
	if (is_own_xattr(ino, name)) {
		r = -EPERM;
		goto out;
	}
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
	qc_set_str(&m.path, path);
	qc_set_str(&m.xname, name);
	m.data.p = (const uint8_t *)value;
	m.data.len = (uint32_t)size;
	/* The listing's hint first, then the generation (hints.h). */
	qc_dir_xattr_changed(fs, qc_fs_node(fs, ino));
	caps = qc_hint_xattr_begin(fs, name);
	r = xattr_change_call(fs, ino, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Even a failed call may have changed them (a lost reply). */
	qc_dir_xattr_changed(fs, qc_fs_node(fs, ino));
	xattr_changed_attrs(fs, qc_fs_node(fs, ino));
	qc_hint_xattr_end(fs, qc_fs_node(fs, ino), caps);
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
	qc_set_str(&m->path, path);
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
	bool caps = qc_hint_is_caps(name);
	uint64_t gen = qc_hint_caps_gen(fs), start = qc_now_ns();
	struct qft_msg m;

	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	if (is_own_xattr(ino, name)) {
		if (strcmp(name, QC_COMMIT_SYNC_XATTR) == 0)
			reply_sync(req, fs, size);
		else
			reply_stats(req, fs, size);
		return;
	}
	if ((caps && qc_hint_nocap(fs, qc_fs_node(fs, ino))) ||
	    qc_hint_noxattr(fs, qc_fs_node(fs, ino))) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	qc_step_settle(fs);
	qft_msg_init(&m, QFT_OP_GETXATTR, 0);
	qc_set_str(&m.xname, name);
	if (xattr_query(req, &m, ino, size, QFT_MAX_XATTR_SIZE) == -ENODATA &&
	    caps)
		qc_hint_nocap_note(fs, qc_fs_node(fs, ino), gen, start);
}

static void qc_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct qc_fs *fs = fs_of(req);
	struct qft_msg m;

	if (qc_hint_noxattr(fs, qc_fs_node(fs, ino))) {
		if (size == 0)
			fuse_reply_xattr(req, 0);
		else
			fuse_reply_buf(req, NULL, 0);
		return;
	}

	qc_step_settle(fs);
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

	if (is_own_xattr(ino, name)) {
		r = -EPERM;
		goto out;
	}
	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		r = -ERANGE;
		goto out;
	}
	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out;
	qft_msg_init(&m, QFT_OP_REMOVEXATTR, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.xname, name);
	/* Removing it cannot make a capability appear, but a GETXATTR
	 * answered around it says nothing reliable either way. */
	/* The listing's hint first, then the generation (hints.h). */
	qc_dir_xattr_changed(fs, qc_fs_node(fs, ino));
	caps = qc_hint_xattr_begin(fs, name);
	r = xattr_change_call(fs, ino, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Even a failed call may have changed them (a lost reply). */
	qc_dir_xattr_changed(fs, qc_fs_node(fs, ino));
	xattr_changed_attrs(fs, qc_fs_node(fs, ino));
	qc_hint_xattr_end(fs, qc_fs_node(fs, ino), caps);
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
	qc_file_changed(f, true);
	qn_attr_stale(&fs->nodes, qc_fs_node(fs, ino));
	r = qc_file_call(fs, f, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	/* Punched or zeroed ranges, or a grown file, change what reads see. */
	qc_ra_invalidate_file(fs, f);
out:
	fuse_reply_err(req, -r);
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
