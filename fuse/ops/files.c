// SPDX-License-Identifier: MIT
/*
 * The callbacks of open files: open, create, read, write, flush, fsync,
 * release and fallocate, with the open and create that are answered
 * before the server did (file.h, "Pipelined steps"; see internal.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "net/conn.h"
#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/hints.h"
#include "msg.h"
#include "fs/node.h"
#include "ops/internal.h"
#include "protocol.h"
#include "fs/readahead.h"
#include "fs/walk.h"
#include "fs/writebehind.h"

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

/* Whether an open with `flags` is of the kind answered before the server
 * (open_predicted, open_paged): read-only, neither truncating nor
 * appending, on a mount that pipelines. */
static bool early_flags(const struct qc_fs *fs, int flags)
{
	return fs->window != 0 && (flags & O_ACCMODE) == O_RDONLY &&
	       !(flags & (O_TRUNC | O_APPEND));
}

/* Whether the user the server acts as (qc_ops_actor) may read a regular
 * file with attributes *a for certain -- root, or its owner with read
 * permission -- so that the server would not refuse the open. */
static bool early_reader(struct qc_fs *fs, const struct qft_attr *a)
{
	uint32_t uid, gid;

	if ((a->mode & QFT_S_IFMT) != QFT_S_IFREG)
		return false;
	qc_ops_actor(fs, &uid, &gid);
	return uid == 0 || (a->uid == uid && (a->mode & S_IRUSR));
}

/*
 * Whether an open of node `n` with `flags` may be answered before the
 * server did, with *a the attributes the file has: a read-only open of a
 * regular file the user the server acts as may read (qc_ops_actor; root,
 * or the owner with read permission), named in a leased directory
 * this client made (rsync opens each file it wrote once more to fchmod
 * it).  Its refusal is reported by the next read, fsync or close.
 */
static bool open_predicted(struct qc_fs *fs, struct qn_node *n, int flags,
			   struct qft_attr *a)
{
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	uint32_t type;
	bool ok;

	if (!early_flags(fs, flags) || !qc_ops_current_attr(fs, n, a) ||
	    !early_reader(fs, a))
		return false;
	if (qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return false;
	ok = qc_dir_leased_name(fs, parent, name, &type) == 1 &&
	     type == QFT_S_IFREG;
	qn_unref(&fs->nodes, parent);
	return ok;
}

/*
 * Whether a read-only open of `n` may keep the pages the kernel holds and
 * be answered before the server: they came through an open of the file
 * with the attributes *a gets (qn_paged_attr), the directory's lease says
 * the file still has exactly those (qc_dir_walk_fresh: as walk-ahead's
 * contents), and the user the server acts as may read it (as
 * open_predicted).  A warm re-read of a tree then waits for nothing.
 */
static bool open_paged(struct qc_fs *fs, struct qn_node *n, int flags,
		       struct qft_attr *a)
{
	char name[QFT_MAX_NAME + 1];
	struct qn_node *parent;
	bool ok;

	if (!early_flags(fs, flags) || (flags & O_DIRECT) ||
	    !qn_paged_attr(&fs->nodes, n, a) || !early_reader(fs, a))
		return false;
	if (qn_parent_ref(&fs->nodes, n, &parent, name) < 0)
		return false;
	ok = qc_dir_walk_fresh(fs, parent, name, a, NULL);
	qn_unref(&fs->nodes, parent);
	return ok;
}

/* The OPEN behind an open answered early (open_behind): only its
 * failure matters, for whatever later goes to the server through the
 * handle. */
static void behind_open_done(void *ctx, int err, struct qc_reply *rep)
{
	struct qc_file *f = ctx;

	(void)rep;
	pthread_mutex_lock(&f->lock);
	if (err < 0 && err != -ENOTCONN)
		qc_file_fail(f, qc_conn_user_err(err));
	qc_file_async_done(f);
}

/*
 * Hands the open file f to the kernel: opened with attributes *a (kept
 * for the pages its reads give the kernel, qn_note_paged), the pages
 * the kernel holds kept or dropped.
 */
static void reply_open(fuse_req_t req, struct qc_fs *fs,
		       struct fuse_file_info *fi, struct qc_file *f,
		       const struct qft_attr *a, bool keep)
{
	f->opened = *a;
	f->opened_known = true;
	fi->keep_cache = keep;
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) != 0)
		qc_file_release(fs, f);
}

/*
 * The OPEN `m` that binds f's handle, sent without anyone waiting for it
 * -- not even close(), which for a file only read reports nothing; a
 * request that does reach the server through the handle is sent behind
 * it on the same stream.  A link lost meanwhile re-opens the file on the
 * next (handle.h).
 */
static void open_behind(struct qc_fs *fs, fuse_ino_t ino, struct qft_msg *m,
			struct qc_file *f, uint64_t gen, uint64_t handle)
{
	pthread_mutex_lock(&f->lock);
	qc_file_hold(f);
	pthread_mutex_unlock(&f->lock);
	(void)qc_call_async(fs->conn, gen, m, behind_open_done, f);
	qn_file_attach(&fs->nodes, qc_fs_node(fs, ino), &f->nf, handle);
}

/* An open answered with what walk-ahead fetched (fs/walk.h): the reads
 * are served from the contents. */
static void open_walked(fuse_req_t req, struct qc_fs *fs, fuse_ino_t ino,
			struct fuse_file_info *fi, struct qft_msg *m,
			struct qc_file *f, uint64_t gen, uint64_t handle,
			struct qc_walk_hit *hit)
{
	bool same;

	/* The size and one byte more were asked for: a short answer. */
	qc_ra_prime(fs, f, hit->rep.msg.data.len + 1, &hit->rep);
	qc_reply_free(&hit->rep);
	qn_note_attr(&fs->nodes, qc_fs_node(fs, ino), &hit->attr, &same);
	open_behind(fs, ino, m, f, gen, handle);
	reply_open(req, fs, fi, f, &hit->attr, false);
}

void qc_ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_walk_hit hit;
	struct qc_reply rep;
	struct qc_file *f;
	struct qft_attr a;
	struct qft_msg m;
	uint64_t handle, gen = 0;
	bool same, walked;
	int r;

	r = qc_ops_node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	r = qc_file_begin(fs, false, fi->flags, &f, &gen, &handle);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_OPEN, 0);
	m.handle = handle;
	qc_set_str(&m.path, path);
	m.opflags = qc_file_oflags(fs, fi->flags & ~(O_CREAT | O_EXCL));
	if (open_paged(fs, qc_fs_node(fs, ino), fi->flags, &a)) {
		/* The kernel reads its pages: nothing to wait for. */
		open_behind(fs, ino, &m, f, gen, handle);
		qc_stat_inc(&fs->stats, QC_STAT_OPEN_ASYNC);
		reply_open(req, fs, fi, f, &a, true);
		return;
	}
	walked = fs->readahead && fs->window &&
		 qc_walk_open(fs, qc_fs_node(fs, ino), fi->flags, &hit);
	if (walked) {
		open_walked(req, fs, ino, fi, &m, f, gen, handle, &hit);
		return;
	}
	if (open_predicted(fs, qc_fs_node(fs, ino), fi->flags, &a)) {
		qn_file_attach(&fs->nodes, qc_fs_node(fs, ino), &f->nf, handle);
		r = qc_step_send(fs, f, &m, &a);
		if (r < 0) {
			qc_file_release(fs, f);
			goto out_err;
		}
		qc_stat_inc(&fs->stats, QC_STAT_OPEN_ASYNC);
		/* The pages the kernel holds are kept when they are of the
		 * file the lease vouches for now (a warm re-read of a tree
		 * waits for nothing); the server's word comes too late to
		 * decide otherwise. */
		reply_open(req, fs, fi, f, &a,
			   qn_pages_valid(&fs->nodes, qc_fs_node(fs, ino), &a));
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

	/*
	 * Cached pages stay valid if the file is as the kernel last saw it;
	 * otherwise the kernel drops them on this open.
	 */
	qn_note_attr(&fs->nodes, qc_fs_node(fs, ino), &rep.msg.attr, &same);
	if (rep.msg.opflags & QFT_OPEN_DATA)
		qc_ra_prime(fs, f, (uint32_t)m.length, &rep);
	a = rep.msg.attr;
	qc_reply_free(&rep);
	qn_file_attach(&fs->nodes, qc_fs_node(fs, ino), &f->nf, handle);
	reply_open(req, fs, fi, f, &a, same);
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
 * user the server acts as (the caller on a shared mount, qc_ops_actor),
 * and its group or, in a set-group-ID directory, the directory's (which
 * also drops a set-group-ID bit the caller may not keep: then the answer
 * waits).  False when that cannot be known.  Anything the server
 * does otherwise (a default ACL, a grpid mount) is seen as soon as the
 * kernel asks again, since predictions are given a validity of 0.
 */
static bool predict_create(struct qc_fs *fs, struct qn_node *parent,
			   const struct qft_msg *m, struct qft_attr *a)
{
	struct qft_attr pa;
	struct timespec ts;
	uint32_t uid, gid;

	qc_ops_actor(fs, &uid, &gid);
	/* What a chmod or chown answered before the server did (rsync
	 * sets a directory's mode, then fills it) made of it first. */
	if ((!qc_ops_current_attr(fs, parent, &pa) &&
	     !qn_get_attr(&fs->nodes, parent, &pa)) ||
	    (pa.mode & QFT_S_IFMT) != QFT_S_IFDIR ||
	    !qc_ops_may_create_in(&pa, uid, gid) ||
	    ((m->mode & S_ISGID) && uid != 0 && (pa.mode & S_ISGID) &&
	     pa.gid != gid))
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
 * O_EXCL (which a shared mount sends always, see create_excl) the answer
 * "created" must never be given for a name that exists, so only when the
 * server holds a lease on the directory and the name is absent from it.
 * -o window=0 asks for synchronous writes, and gets synchronous creates
 * too.
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

/*
 * Whether a create must not open a name that exists, whatever the caller
 * asked: on a mount other users share.  The kernel asks to create only
 * a name it found missing, so it checked the caller's right to the
 * directory and never to a file that appeared meanwhile (another user's
 * private one); with O_EXCL the server refuses it, and the kernel, told
 * ESTALE, looks the name up again and checks the file itself before it
 * opens it (default_permissions) -- a second check beside the server's.
 */
static bool create_excl(struct qc_fs *fs, int flags)
{
	return (flags & O_EXCL) || fs->multi_user;
}

void qc_ops_create(fuse_req_t req, fuse_ino_t parent, const char *name,
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
	int r;

	if ((r = qc_ops_check_name(name)) < 0 ||
	    (r = qc_ops_node_path(fs, parent, NULL, path)) < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_CREATE, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.name, name);
	m.opflags = qc_file_oflags(fs, fi->flags & ~O_CREAT);
	if (create_excl(fs, fi->flags))
		m.opflags |= QFT_O_EXCL;
	m.mode = mode & 07777;
	if (create_may_pipeline(fs, qc_fs_node(fs, parent), name,
				create_excl(fs, fi->flags) ? O_EXCL : 0) &&
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
		/* The caller did not ask for O_EXCL: the kernel looks the
		 * name up again and opens what it finds (create_excl). */
		if (r == -EEXIST && !(fi->flags & O_EXCL))
			r = -ESTALE;
		goto out_free_file;
	}
	qc_dir_note_entry(fs, qc_fs_node(fs, parent), name, &rep.msg.attr);

	n = qn_lookup(&fs->nodes, qc_fs_node(fs, parent), name, &rep.msg.attr);
	if (!n) {
		qc_reply_free(&rep);
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

void qc_ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);

	/* From now on the kernel may have the pages (open_data_length);
	 * once per open file, not a table lock per read. */
	if (!atomic_exchange(&f->paged_noted, true)) {
		qn_note_paged(&fs->nodes, qc_fs_node(fs, ino),
			      f->opened_known ? &f->opened : NULL);
		/* A file of a directory is read: a tree walk may begin. */
		qc_walk_note_read(fs, qc_fs_node(fs, ino));
	}
	qc_ra_read(req, fs, f, size, off);
}

void qc_ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
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

void qc_ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		  struct fuse_file_info *fi)
{
	fuse_reply_err(req, -qc_file_fsync(fs_of(req), file_of(fi), datasync));
}

void qc_ops_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
		      off_t offset, off_t length, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct qc_reply rep;
	struct qft_attr a;
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
	/*
	 * The server's fallocate cleared set-user-ID and set-group-ID as a
	 * write does (as the caller), but this kernel marks only size and
	 * times stale: a stat asking for the mode alone would be answered
	 * the bits from before.  All its attributes, then (no inode lock).
	 */
	if (r == 0 && fs->se &&
	    qn_get_attr(&fs->nodes, qc_fs_node(fs, ino), &a) &&
	    (a.mode & (S_ISUID | S_ISGID)))
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
out:
	fuse_reply_err(req, -r);
}
