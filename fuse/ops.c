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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include "conn.h"
#include "errmap.h"
#include "log.h"
#include "msg.h"
#include "node.h"
#include "ops.h"
#include "protocol.h"

/*
 * One open file or directory.  The write-behind window of the bulk stream
 * (issue 4) and its sticky error will live here as well.
 */
struct qc_file {
	struct qn_file nf;      /* first: node link and protocol handle */
	bool dir;
	pthread_mutex_t lock;
	bool written;           /* lock: written since the last FLUSH */
	int werr;               /* lock: sticky write error, -errno or 0 */
};

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

static void reply_attr(fuse_req_t req, struct qc_fs *fs, struct qn_node *n,
		       const struct qft_attr *a)
{
	struct stat st;

	qn_note_attr(&fs->nodes, n, a, NULL);
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
static void reply_entry(fuse_req_t req, struct qc_fs *fs, fuse_ino_t parent,
			const char *name, const struct qft_attr *a)
{
	struct fuse_entry_param e;
	struct qn_node *n;

	n = qn_lookup(&fs->nodes, node_of(fs, parent), name, a);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fill_entry(fs, &e, n, a);
	/* An interrupted request's reply never reaches the kernel, and
	 * neither does the lookup it counted. */
	if (fuse_reply_entry(req, &e) != 0)
		qn_forget(&fs->nodes, n, 1);
}

static struct qc_file *file_new(bool dir)
{
	struct qc_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->dir = dir;
	pthread_mutex_init(&f->lock, NULL);
	return f;
}

static void file_free(struct qc_file *f)
{
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* After the last reference: the handle goes back to the server. */
static void file_close(struct qc_fs *fs, struct qc_file *f)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_CLOSE, 0);
	m.handle = f->nf.handle;
	(void)qc_send_noreply(fs->conn, &m);
	/* Reusable now: the server sees this CLOSE before any later bind. */
	qc_handle_free(fs->conn, f->nf.handle);
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
 * Names the object of a path operation on `ino`: its path, or when it has
 * none any more one of its open handles (*borrowed, to be put back).
 * Callers whose operation has no handle form pass borrowed = NULL.
 */
static int target_of(struct qc_fs *fs, fuse_ino_t ino, char *path,
		     struct qc_file **borrowed)
{
	struct qn_file *nf;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r != -ENOENT || !borrowed)
		return r;
	nf = qn_file_borrow(&fs->nodes, node_of(fs, ino));
	if (!nf)
		return -ENOENT;
	*borrowed = (struct qc_file *)nf;
	path[0] = '\0';
	return 0;
}

static void qc_init(void *userdata, struct fuse_conn_info *conn)
{
	/* libfuse asks the kernel for enough pages per request (max_pages)
	 * to carry this, and clamps it to its own buffer. */
	conn->max_write = QFT_MAX_DATA;
	if (conn->max_readahead > QFT_MAX_DATA)
		conn->max_readahead = QFT_MAX_DATA;
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

	r = node_path(fs, parent, name, path);
	if (r < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_LSTAT, 0);
	set_str(&m.path, path);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	reply_entry(req, fs, parent, name, &rep.msg.attr);
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

	if (fi) {
		qft_msg_init(&m, QFT_OP_FSTAT, 0);
		m.handle = file_of(fi)->nf.handle;
	} else {
		r = target_of(fs, ino, path, &borrowed);
		if (r < 0)
			goto out_err;
		if (borrowed) {
			qft_msg_init(&m, QFT_OP_FSTAT, 0);
			m.handle = borrowed->nf.handle;
		} else {
			qft_msg_init(&m, QFT_OP_LSTAT, 0);
			set_str(&m.path, path);
		}
	}
	r = qc_call(fs->conn, &m, &rep);
	file_put(fs, borrowed);
	if (r < 0)
		goto out_err;
	reply_attr(req, fs, node_of(fs, ino), &rep.msg.attr);
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
	struct qc_file *borrowed = NULL;
	struct qc_reply rep;
	struct qft_msg m;
	int r;

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

	if (fi) {
		m.handle = file_of(fi)->nf.handle;
	} else {
		r = target_of(fs, ino, path, &borrowed);
		if (r < 0)
			goto out_err;
		if (borrowed)
			m.handle = borrowed->nf.handle;
	}
	set_str(&m.path, path);
	r = qc_call(fs->conn, &m, &rep);
	file_put(fs, borrowed);
	if (r < 0)
		goto out_err;
	reply_attr(req, fs, node_of(fs, ino), &rep.msg.attr);
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

	r = check_name(name);
	if (r < 0)
		goto out_err;
	r = node_path(fs, parent, NULL, path);
	if (r < 0)
		goto out_err;
	set_str(&m->path, path);
	set_str(&m->name, name);
	r = qc_call(fs->conn, m, &rep);
	if (r < 0)
		goto out_err;
	reply_entry(req, fs, parent, name, &rep.msg.attr);
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

	if ((r = check_name(newname)) < 0 ||
	    (r = node_path(fs, ino, NULL, path)) < 0 ||
	    (r = node_path(fs, newparent, NULL, path2)) < 0)
		goto out_err;
	qft_msg_init(&m, QFT_OP_LINK, 0);
	set_str(&m.path, path);
	set_str(&m.path2, path2);
	set_str(&m.name2, newname);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	/*
	 * The new name is a node of its own (nodes are names here), so the
	 * kernel does not see the link count of the old one change: make it
	 * ask again.  Attributes only, which takes no lock.
	 */
	reply_entry(req, fs, newparent, newname, &rep.msg.attr);
	qc_reply_free(&rep);
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	return;
out_err:
	fuse_reply_err(req, -r);
}

static void qc_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qc_file *f;
	struct qft_msg m;
	uint64_t handle;
	bool same;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	f = file_new(false);
	if (!f) {
		r = -ENOMEM;
		goto out_err;
	}
	r = qc_handle_alloc(fs->conn, &handle);
	if (r < 0)
		goto out_free_file;
	qft_msg_init(&m, QFT_OP_OPEN, 0);
	m.handle = handle;
	set_str(&m.path, path);
	m.opflags = qft_oflags_from_host(fi->flags & ~(O_CREAT | O_EXCL));
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_free_handle;

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
	/* The server bound nothing, so the number is free at once. */
	qc_handle_free(fs->conn, handle);
out_free_file:
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
	uint64_t handle;
	int r;

	if ((r = check_name(name)) < 0 ||
	    (r = node_path(fs, parent, NULL, path)) < 0)
		goto out_err;
	f = file_new(false);
	if (!f) {
		r = -ENOMEM;
		goto out_err;
	}
	r = qc_handle_alloc(fs->conn, &handle);
	if (r < 0)
		goto out_free_file;
	qft_msg_init(&m, QFT_OP_CREATE, 0);
	m.handle = handle;
	set_str(&m.path, path);
	set_str(&m.name, name);
	m.opflags = qft_oflags_from_host(fi->flags & ~O_CREAT);
	m.mode = mode & 07777;
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, handle);
		goto out_free_file;
	}

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

static void qc_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_READ, 0);
	m.handle = file_of(fi)->nf.handle;
	m.offset = (uint64_t)off;
	m.length = size < QFT_MAX_DATA ? size : QFT_MAX_DATA;
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	fuse_reply_buf(req, (const char *)rep.msg.data.p, rep.msg.data.len);
	qc_reply_free(&rep);
}

static void qc_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	/* Flagged before sending, so a FLUSH that races with this write
	 * is never skipped. */
	pthread_mutex_lock(&f->lock);
	f->written = true;
	pthread_mutex_unlock(&f->lock);

	qft_msg_init(&m, QFT_OP_WRITE, 0);
	m.handle = f->nf.handle;
	m.offset = (uint64_t)off;
	m.data.p = (const uint8_t *)buf;
	/* The kernel never sends more than max_write; a larger request
	 * would just see a short write. */
	m.data.len = (uint32_t)(size < QFT_MAX_DATA ? size : QFT_MAX_DATA);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (rep.msg.count > m.data.len) {
		qft_err("server wrote %llu bytes of %u",
			(unsigned long long)rep.msg.count, m.data.len);
		fuse_reply_err(req, EIO);
	} else {
		fuse_reply_write(req, (size_t)rep.msg.count);
	}
	qc_reply_free(&rep);
}

static void qc_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	struct qc_file *f = file_of(fi);
	struct qc_reply rep;
	struct qft_msg m;
	bool written;
	int r, werr;

	pthread_mutex_lock(&f->lock);
	written = f->written;
	werr = f->werr;
	f->written = false;
	f->werr = 0;
	pthread_mutex_unlock(&f->lock);
	/* close() of a file that was only read costs no round trip. */
	if (!written && werr == 0) {
		fuse_reply_err(req, 0);
		return;
	}
	qft_msg_init(&m, QFT_OP_FLUSH, 0);
	m.handle = f->nf.handle;
	m.opflags = fs->commit_none ? QFT_FLUSH_NOSYNC : 0;
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0) {
		qc_reply_free(&rep);
		r = werr;
	}
	fuse_reply_err(req, -r);
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
	struct qc_reply rep;
	struct qft_msg m;
	int r;

	qft_msg_init(&m, QFT_OP_FSYNC, 0);
	m.handle = file_of(fi)->nf.handle;
	m.opflags = datasync ? QFT_FSYNC_DATASYNC : 0;
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
	fuse_reply_err(req, -r);
}

static void qc_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qc_file *f;
	struct qft_msg m;
	uint64_t handle;
	int r;

	r = node_path(fs, ino, NULL, path);
	if (r < 0)
		goto out_err;
	f = file_new(true);
	if (!f) {
		r = -ENOMEM;
		goto out_err;
	}
	r = qc_handle_alloc(fs->conn, &handle);
	if (r < 0)
		goto out_free_file;
	qft_msg_init(&m, QFT_OP_OPENDIR, 0);
	m.handle = handle;
	set_str(&m.path, path);
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0) {
		qc_handle_free(fs->conn, handle);
		goto out_free_file;
	}
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
		       const struct qft_blob *data, bool plus, char *buf,
		       size_t size, struct qn_node **counted, size_t *ncounted)
{
	struct qft_dirent d;
	struct qcur c;
	size_t used = 0;

	*ncounted = 0;
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
	}
	return used;
}

/* Checks every entry of a READDIR reply before any is used; returns the
 * number of entries or -EIO. */
static int check_entries(const struct qft_blob *data, bool plus)
{
	struct qft_dirent d;
	struct qcur c;
	int n = 0, r;

	qcur_init(&c, data->p, data->len);
	while (c.left) {
		r = qft_dirent_decode(&c, &d, plus);
		if (r < 0) {
			qft_err("malformed READDIR reply from the server: %s",
				strerror(-r));
			return -EIO;
		}
		n++;
	}
	return n;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	struct qc_fs *fs = fs_of(req);
	struct qn_node **counted = NULL;
	size_t used, ncounted = 0;
	struct qc_reply rep;
	struct qft_msg m;
	char *buf = NULL;
	int r, n;

	if (size > QFT_MAX_READDIR)
		size = QFT_MAX_READDIR;
	qft_msg_init(&m, QFT_OP_READDIR, 0);
	m.handle = file_of(fi)->nf.handle;
	m.offset = (uint64_t)off;
	/* The wire entries are no larger than the kernel's, so a budget of
	 * the kernel's buffer size fills it without much left over. */
	m.length = size;
	m.opflags = plus ? QFT_READDIR_PLUS : 0;
	r = qc_call(fs->conn, &m, &rep);
	if (r < 0)
		goto out_err;
	n = check_entries(&rep.msg.data, plus);
	if (n < 0) {
		r = n;
		goto out_free_reply;
	}
	buf = malloc(size ? size : 1);
	counted = calloc((size_t)n + 1, sizeof(*counted));
	if (!buf || !counted) {
		r = -ENOMEM;
		goto out_free_reply;
	}
	used = fill_dir(req, fs, ino, &rep.msg.data, plus, buf, size, counted,
			&ncounted);
	qc_reply_free(&rep);
	if (fuse_reply_buf(req, buf, used) != 0) {
		for (size_t i = 0; i < ncounted; i++)
			qn_forget(&fs->nodes, counted[i], 1);
	}
	free(counted);
	free(buf);
	return;

out_free_reply:
	free(counted);
	free(buf);
	qc_reply_free(&rep);
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

static void qc_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
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
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
out:
	fuse_reply_err(req, -r);
}

/* GETXATTR and LISTXATTR: size 0 asks for the size only. */
static void xattr_query(fuse_req_t req, struct qft_msg *m, fuse_ino_t ino,
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
	if (size == 0)
		fuse_reply_xattr(req, (size_t)rep.msg.count);
	else if (rep.msg.data.len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, (const char *)rep.msg.data.p,
			       rep.msg.data.len);
	qc_reply_free(&rep);
	return;
out_err:
	fuse_reply_err(req, -r);
}

static void qc_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct qft_msg m;

	if (strlen(name) > QFT_MAX_XATTR_NAME) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	qft_msg_init(&m, QFT_OP_GETXATTR, 0);
	set_str(&m.xname, name);
	xattr_query(req, &m, ino, size, QFT_MAX_XATTR_SIZE);
}

static void qc_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct qft_msg m;

	qft_msg_init(&m, QFT_OP_LISTXATTR, 0);
	xattr_query(req, &m, ino, size, QFT_MAX_XATTR_LIST);
}

static void qc_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct qc_fs *fs = fs_of(req);
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
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
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
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
	m.handle = f->nf.handle;
	m.offset = (uint64_t)offset;
	m.length = (uint64_t)length;
	/* Changed data must be made durable by the next flush as well. */
	pthread_mutex_lock(&f->lock);
	f->written = true;
	pthread_mutex_unlock(&f->lock);
	r = qc_call(fs->conn, &m, &rep);
	if (r == 0)
		qc_reply_free(&rep);
out:
	fuse_reply_err(req, -r);
}

/* The server is gone or going: nothing to close there any more. */
static void drop_file(struct qn_file *nf)
{
	file_free((struct qc_file *)nf);
}

void qc_fs_destroy(struct qc_fs *fs)
{
	qn_table_destroy(&fs->nodes, drop_file);
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
