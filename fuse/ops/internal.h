/* SPDX-License-Identifier: MIT */
/*
 * What the FUSE callbacks of fuse/ops/ share, private to them.  ops.c
 * holds the table (qc_ops) that names the callbacks of the other files:
 *
 *   common.c   a node's path, who may create, attributes to predict from,
 *              whom the server acts as
 *   caller.c   the caller each callback acts for (the table names its
 *              wrappers, which call the callbacks below)
 *   entries.c  lookup, forget, mknod, mkdir, symlink, link, unlink, rmdir,
 *              rename
 *   attrs.c    getattr, setattr, readlink, statfs
 *   files.c    open, create, read, write, fsync, fallocate
 *   dirs.c     opendir, readdir, readdirplus, releasedir
 *   ranges.c   copy_file_range, lseek (SEEK_DATA, SEEK_HOLE): the server
 *              works on the ranges (fs/copy.h)
 *   xattrs.c   getxattr, setxattr, listxattr, removexattr, and the
 *              mount's own attributes of its root (who may read them)
 *   locks.c    getlk, setlk, flock forwarded to the server, and flush
 *              and release, which end locks
 *
 * The callback files call common.c (xattrs.c also the request log for
 * what it observed, reqlog.h), never one another (no link-time cycle,
 * tests/test_layers.py), and only libfuse, through the table, calls them.
 *
 * Helpers return 0 or a negative errno; each callback ends by turning that
 * into exactly one reply.  Paths are built into stack buffers of
 * QFT_MAX_PATH + 1 bytes from the node table; a node that lost its name
 * (unlinked, renamed over) is reached through one of its open handles where
 * the protocol has a handle form of the operation, and is ENOENT otherwise.
 */
#ifndef QC_OPS_INTERNAL_H
#define QC_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

#include "fs/file.h"
#include "fs/fs.h"
#include "fs/node.h"
#include "msg.h"
#include "protocol.h"

/* The mount a request is for (the session's userdata). */
static inline struct qc_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The open file or directory of an open handle the kernel holds. */
static inline struct qc_file *file_of(const struct fuse_file_info *fi)
{
	return (struct qc_file *)(uintptr_t)fi->fh;
}

/* --- common.c --- */

/* 0, or -ENAMETOOLONG for a name the protocol cannot carry. */
int qc_ops_check_name(const char *name);

/* The server's path of `ino` (with `name` appended when not NULL) into
 * `buf` of QFT_MAX_PATH + 1 bytes: 0 or -errno (-ENOENT: no name). */
int qc_ops_node_path(struct qc_fs *fs, fuse_ino_t ino, const char *name,
		     char *buf);

/* Whether the user the server acts as (uid, gid: qc_ops_actor) may
 * create in a directory with attributes `pa`, as far as its mode bits
 * tell. */
bool qc_ops_may_create_in(const struct qft_attr *pa, uint32_t uid,
			  uint32_t gid);

/* Attributes of `n` a prediction may start from, into *a; false: none. */
bool qc_ops_current_attr(struct qc_fs *fs, struct qn_node *n,
			 struct qft_attr *a);

/*
 * Whom the server acts as for this thread's requests, as the server
 * knows them: the caller (caller.c) on a mount whose server acts as each
 * caller, else the server's own user.  Who owns what a request makes,
 * and whose rights a prediction must assume.
 */
void qc_ops_actor(struct qc_fs *fs, uint32_t *uid, uint32_t *gid);

/* --- caller.c --- */

/*
 * The caller of `req` as the server must know it (caller.c): 0, or
 * -EACCES when its groups cannot be known exactly.
 */
int qc_caller_of(fuse_req_t req, struct qc_fs *fs, struct qft_cred *c);

/*
 * The file system ids and groups in the text of /proc/TID/status: 0,
 * -EINVAL when a line is missing or malformed, -E2BIG for more than
 * QFT_MAX_GROUPS groups.  Pure: tests/unit/test_caller.c calls it.
 */
int qc_caller_parse_status(const char *text, uint32_t *fsuid,
			   uint32_t *fsgid, struct qft_cred *c);

/* The wrappers the table names: each sets its caller, then calls the
 * callback of the same name (qc_ops_*). */
void qc_caller_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void qc_caller_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi);
void qc_caller_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int valid, struct fuse_file_info *fi);
void qc_caller_readlink(fuse_req_t req, fuse_ino_t ino);
void qc_caller_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev);
void qc_caller_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode);
void qc_caller_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void qc_caller_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void qc_caller_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name);
void qc_caller_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags);
void qc_caller_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname);
void qc_caller_open(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi);
void qc_caller_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi);
void qc_caller_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi);
void qc_caller_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi);
void qc_caller_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi);
void qc_caller_statfs(fuse_req_t req, fuse_ino_t ino);
void qc_caller_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags);
void qc_caller_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size);
void qc_caller_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void qc_caller_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* --- the callbacks, each answering its request exactly once --- */

/* entries.c */
void qc_ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void qc_ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void qc_ops_forget_multi(fuse_req_t req, size_t count,
			 struct fuse_forget_data *forgets);
void qc_ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode, dev_t rdev);
void qc_ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode);
void qc_ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		    const char *name);
void qc_ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void qc_ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void qc_ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		   fuse_ino_t newparent, const char *newname,
		   unsigned int flags);
void qc_ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		 const char *newname);

/* attrs.c */
void qc_ops_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void qc_ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		    int valid, struct fuse_file_info *fi);
void qc_ops_readlink(fuse_req_t req, fuse_ino_t ino);
void qc_ops_statfs(fuse_req_t req, fuse_ino_t ino);

/* files.c */
void qc_ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void qc_ops_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, struct fuse_file_info *fi);
void qc_ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		 struct fuse_file_info *fi);
void qc_ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		  size_t size, off_t off, struct fuse_file_info *fi);
void qc_ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		  struct fuse_file_info *fi);
void qc_ops_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
		      off_t offset, off_t length, struct fuse_file_info *fi);

/* ranges.c */
void qc_ops_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			    struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			    off_t off_out, struct fuse_file_info *fi_out,
			    size_t len, int flags);
void qc_ops_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		  struct fuse_file_info *fi);

/* dirs.c */
void qc_ops_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void qc_ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void qc_ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			off_t off, struct fuse_file_info *fi);
void qc_ops_releasedir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi);

/* xattrs.c */
void qc_ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		     const char *value, size_t size, int flags);
void qc_ops_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		     size_t size);
void qc_ops_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void qc_ops_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* locks.c */
void qc_locks_getlk(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct flock *lock);
void qc_locks_setlk(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct flock *lock, int sleep);
void qc_locks_flock(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, int op);
void qc_locks_flush(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi);
void qc_locks_release(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi);

#endif /* QC_OPS_INTERNAL_H */
