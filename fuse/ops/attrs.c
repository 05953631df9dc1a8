// SPDX-License-Identifier: MIT
/*
 * The callbacks about an object's attributes: getattr, setattr (with its
 * predicted and asynchronous forms), readlink and statfs (see
 * internal.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/hints.h"
#include "fs/idmap.h"
#include "msg.h"
#include "fs/node.h"
#include "ops/internal.h"
#include "protocol.h"
#include "fs/readahead.h"

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

/*
 * Names the object of a path operation on `ino`: its path, or when it has
 * none any more, or has WRITEs in flight, one of its open handles
 * (*borrowed, to be put back): for an FSTAT (`fstat`) any handle of the
 * node behind the WRITEs of all its open files, else the one writing.
 * Callers whose operation has no handle form pass borrowed = NULL.
 */
static int target_of(struct qc_fs *fs, fuse_ino_t ino, char *path,
		     struct qc_file **borrowed, bool fstat)
{
	struct qn_file *nf;
	int r;

	r = qc_ops_node_path(fs, ino, NULL, path);
	if (borrowed && r == 0) {
		/*
		 * Path requests travel on the meta stream, file data on
		 * bulk (conn.h, "Two streams"): while WRITEs of an open
		 * handle are unanswered, only a request queued behind them
		 * on the same stream is sure to see them.
		 */
		*borrowed = fstat ?
			qc_file_borrow_behind(fs, qc_fs_node(fs, ino)) :
			qc_file_borrow_busy(fs, qc_fs_node(fs, ino));
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

/*
 * fstat of a directory open by someone after it was removed or renamed
 * over (the kernel sends no handle with a directory's getattr, and a
 * walk's directories have none on the server, dirs.c): ext4 answers the
 * removed directory's attributes with no links, and so does the mount,
 * from the last ones seen.  Only for a node that has lost its name; a
 * name the server no longer has is ENOENT as before.
 */
static bool removed_dir_attr(struct qc_fs *fs, fuse_ino_t ino,
			     struct qft_attr *a)
{
	struct qn_node *n = qc_fs_node(fs, ino);
	char path[QFT_MAX_PATH + 1];

	if (qc_ops_node_path(fs, ino, NULL, path) != -ENOENT ||
	    !qn_get_attr(&fs->nodes, n, a) ||
	    (a->mode & QFT_S_IFMT) != QFT_S_IFDIR)
		return false;
	a->nlink = 0;
	return true;
}

void qc_ops_getattr(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_file *borrowed = NULL;
	struct qc_reply rep;
	struct qft_msg m;
	int r;
	uint64_t xgen, agen;
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
		r = target_of(fs, ino, path, &borrowed, true);
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
	agen = qn_attr_gen(&fs->nodes, qc_fs_node(fs, ino));
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
		r = qc_ops_node_path(fs, ino, NULL, path);
		if (r == 0) {
			qft_msg_init(&m, QFT_OP_LSTAT, 0);
			qc_set_str(&m.path, path);
			r = qc_call(fs->conn, &m, &rep);
		}
	}
	if (r == 0 && !fi && !borrowed && fs->attr_timeout > 0 &&
	    !qn_replaced(&fs->nodes, qc_fs_node(fs, ino), &rep.msg.attr,
			 false))
		qn_note_fetched(&fs->nodes, qc_fs_node(fs, ino),
				&rep.msg.attr, agen, qc_fs_attr_until(fs));
	qc_file_put(fs, borrowed);
	if (r < 0)
		goto out_err;
	reply_attr(req, fs, qc_fs_node(fs, ino), &rep.msg.attr, xgen);
	qc_reply_free(&rep);
	return;
out_err:
	if (r == -ENOENT && !fi && removed_dir_attr(fs, ino, &a)) {
		reply_predicted(req, fs, qc_fs_node(fs, ino), &a);
		return;
	}
	fuse_reply_err(req, -r);
}

/*
 * commit=async (commit.h): whether SETATTR `m` by path of node `n` may be
 * answered before the server did, and with what (*a).  Only when its
 * outcome is known: no truncation (data, and its errors, are the
 * server's), a file or directory whose attributes are known, and the
 * user the server acts as may make the change (qc_ops_actor: root, or
 * the owner changing mode and times, or the group to its own).
 */
static bool setattr_predicted(struct qc_fs *fs, struct qn_node *n,
			      const struct qft_msg *m, struct qft_attr *a)
{
	uint32_t uid, gid, type;

	if (!fs->commit.on || fs->window == 0 || (m->valid & QFT_SET_SIZE) ||
	    !qc_ops_current_attr(fs, n, a))
		return false;
	type = a->mode & QFT_S_IFMT;
	if (type != QFT_S_IFREG && type != QFT_S_IFDIR)
		return false;
	qc_ops_actor(fs, &uid, &gid);
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
			qc_dir_note_answer(fs, parent, name, &rep->msg.attr,
					   sf->n, sf->gen);
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

void qc_ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
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
	r = qc_idmap_to_remote(&fs->idmap,
			       m.valid & QFT_SET_UID ? &m.uid : NULL,
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
		r = target_of(fs, ino, path, &borrowed, false);
		if (r < 0)
			goto out_err;
	}
	hf = fi ? file_of(fi) : borrowed;
	if (hf && fs->window > 0 && qc_step_predict_setattr(fs, hf, &m, &a)) {
		/* The server does not use it, but recognises the change
		 * as ours by it (no NOTIFY ends the directory's lease). */
		if (qc_ops_node_path(fs, ino, NULL, path) == 0)
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
	/*
	 * By path on the meta stream: a pipelined CREATE still queued on
	 * bulk (behind a tree copy's data) would run after it, and a
	 * directory's times set here (tar sets them once it has filled the
	 * directory) be overwritten by the create of its last file.
	 */
	if (!hf)
		qc_step_settle(fs);
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

void qc_ops_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	r = qc_ops_node_path(fs, ino, NULL, path);
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

void qc_ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct statvfs sv;
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	/* A node without a name still lives on the same filesystem as the
	 * root, near enough for statfs. */
	if (qc_ops_node_path(fs, ino, NULL, path) < 0)
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
