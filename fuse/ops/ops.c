// SPDX-License-Identifier: MIT
/*
 * FUSE low-level operations over the protocol (see ops.h): what the
 * session asks of the kernel at init, and the table of callbacks, which
 * live in the files ops/internal.h lists, one per kind.  Those that can
 * reach the server with a path go through caller.c, which sets the
 * caller they act for.
 */
#include <fuse_lowlevel.h>

#include "fs/fs.h"
#include "net/conn.h"
#include "ops/internal.h"
#include "ops/ops.h"
#include "protocol.h"

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
	/* The umask is applied by caller.c, only where the parent has no
	 * default ACL (acl(5)), as a local file system does. */
	if (conn->capable & FUSE_CAP_DONT_MASK)
		conn->want |= FUSE_CAP_DONT_MASK;
	/*
	 * Where this kernel checks permissions anyway (default_permissions,
	 * which a shared mount of a root server always has), it checks the
	 * access ACLs as ext4 would, not the mode bits alone, and caches
	 * them per inode (ls -l asks for each entry's).  Not elsewhere:
	 * the capability turns default_permissions on, which on a mount of
	 * another user's files would check this user's ids against owners
	 * the server's user stands for (docs/security.md, "ACLs").
	 */
	if (fs->kernel_acls && (conn->capable & FUSE_CAP_POSIX_ACL))
		conn->want |= FUSE_CAP_POSIX_ACL;
	/*
	 * Writes go through to the server (write-behind is the protocol's
	 * job, not the page cache's).  The kernel, not the server, clears
	 * set-id bits on write, since the server may run with privileges
	 * that make its own writes keep them.
	 */
	conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_POSIX_LOCKS |
			FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_HANDLE_KILLPRIV);
	/* Locks go to the server where it holds them (ops/locks.c);
	 * otherwise (-o locks=local, an older server) the kernel keeps
	 * them among this mount's processes. */
	if (qc_conn_locks(fs->conn))
		conn->want |= conn->capable & (FUSE_CAP_POSIX_LOCKS |
					       FUSE_CAP_FLOCK_LOCKS);
}

const struct fuse_lowlevel_ops qc_ops = {
	.init         = qc_init,
	.lookup       = qc_caller_lookup,
	.forget       = qc_ops_forget,
	.forget_multi = qc_ops_forget_multi,
	.getattr      = qc_caller_getattr,
	.setattr      = qc_caller_setattr,
	.readlink     = qc_caller_readlink,
	.mknod        = qc_caller_mknod,
	.mkdir        = qc_caller_mkdir,
	.unlink       = qc_caller_unlink,
	.rmdir        = qc_caller_rmdir,
	.symlink      = qc_caller_symlink,
	.rename       = qc_caller_rename,
	.link         = qc_caller_link,
	.open         = qc_caller_open,
	.create       = qc_caller_create,
	.read         = qc_ops_read,
	.write        = qc_ops_write,
	.flush        = qc_locks_flush,
	.release      = qc_locks_release,
	.fsync        = qc_ops_fsync,
	.opendir      = qc_caller_opendir,
	.readdir      = qc_caller_readdir,
	.readdirplus  = qc_caller_readdirplus,
	.releasedir   = qc_ops_releasedir,
	.fsyncdir     = qc_ops_fsync,
	.statfs       = qc_caller_statfs,
	.setxattr     = qc_caller_setxattr,
	.getxattr     = qc_caller_getxattr,
	.listxattr    = qc_caller_listxattr,
	.removexattr  = qc_caller_removexattr,
	.fallocate    = qc_ops_fallocate,
	.copy_file_range = qc_ops_copy_file_range,
	.lseek        = qc_ops_lseek,
	.getlk        = qc_locks_getlk,
	.setlk        = qc_locks_setlk,
	.flock        = qc_locks_flock,
};
