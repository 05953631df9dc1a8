// SPDX-License-Identifier: MIT
/*
 * Who a request acts for (QFT_FEAT_CRED; docs/security.md, "A mount
 * other users share").
 *
 * On a mount other local users share (-o allow_other) whose server runs
 * as root, the server acts as each caller, so each request must say who
 * that is.  The callbacks that can reach the server run with their
 * caller set on the thread (qc_call_act_as), as a kernel thread runs
 * with its task's credentials: every request the callback causes on this
 * thread carries it -- those it waits for, the listings the directory
 * cache fetches for it, and the pipelined steps and commit=async path
 * requests it sends without waiting.  An open file keeps its opener's
 * for the reopen after a reconnect (fs/handle.c), and requests on a handle
 * without a caller (the kernel's writes, release's CLOSE, the closer
 * thread's) act as that opener on the server.
 *
 * The caller is the kernel's: its fsuid and fsgid from the FUSE request,
 * and its supplementary groups read from /proc/TID/status of the thread
 * that made it (the kernel sends no groups), checked against the
 * request's ids, so that a pid reused meanwhile is noticed.  They are
 * mapped through the mount's idmap (fs/idmap.h).  Reading them costs
 * about 19 us per callback (the 2-core VM of docs/benchmarks.md), on a
 * shared mount of a root server only; no cache, so that a process that
 * dropped a group never acts with it again.  A caller whose groups
 * cannot be known exactly -- in a pid namespace we cannot see, gone, or
 * in more than QFT_MAX_GROUPS groups -- is refused with EACCES rather
 * than sent with fewer groups: a group can take rights away (mode 0707),
 * so fewer groups could be more rights.
 *
 * The wrappers are what the table (ops.c) names; each calls the callback
 * of the same name in the file internal.h lists.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/hints.h"
#include "fs/idmap.h"
#include "log.h"
#include "net/conn.h"
#include "ops/internal.h"

/* Bytes of /proc/TID/status read: its Uid, Gid and Groups lines come
 * well within, even with QFT_MAX_GROUPS ten-digit groups. */
#define STATUS_MAX 4096

/* The numbers after `key` on its line, at most max (-E2BIG past it). */
static int status_numbers(const char *text, const char *key,
			  uint32_t *v, uint32_t max, uint32_t *n)
{
	size_t klen = strlen(key);
	const char *p = text, *end;

	for (;;) {
		if (strncmp(p, key, klen) == 0)
			break;
		p = strchr(p, '\n');
		if (!p)
			return -EINVAL;
		p++;
	}
	p += klen;
	end = strchr(p, '\n');
	if (!end)
		return -E2BIG;  /* the line goes on past what was read */
	*n = 0;
	for (;;) {
		unsigned long x;
		char *q;

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p == end)
			return 0;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		x = strtoul(p, &q, 10);
		if (errno || x >= UINT32_MAX || q > end)
			return -EINVAL;
		if (*n == max)
			return -E2BIG;
		v[(*n)++] = (uint32_t)x;
		p = q;
	}
}

int qc_caller_parse_status(const char *text, uint32_t *fsuid,
			   uint32_t *fsgid, struct qft_cred *c)
{
	uint32_t ids[4], n;
	int r;

	/* Real, effective, saved and file system ids: the last counts. */
	if (status_numbers(text, "Uid:", ids, 4, &n) < 0 || n != 4)
		return -EINVAL;
	*fsuid = ids[3];
	if (status_numbers(text, "Gid:", ids, 4, &n) < 0 || n != 4)
		return -EINVAL;
	*fsgid = ids[3];
	r = status_numbers(text, "Groups:", c->groups, QFT_MAX_GROUPS,
			   &c->ngroups);
	if (r < 0)
		c->ngroups = 0;
	return r;
}

int qc_caller_of(fuse_req_t req, struct qc_fs *fs, struct qft_cred *c)
{
	static atomic_bool said_ns, said_groups;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[48], buf[STATUS_MAX + 1];
	uint32_t fsuid, fsgid;
	ssize_t len;
	int fd, r;

	if (ctx->pid <= 0) {
		if (!atomic_exchange(&said_ns, true))
			qft_warn("a caller (uid %u) this mount's pid namespace "
				 "cannot see is refused: its groups are not "
				 "known", (unsigned)ctx->uid);
		return -EACCES;
	}
	snprintf(path, sizeof(path), "/proc/%u/status", (unsigned)ctx->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -EACCES;     /* gone: nobody waits for the answer */
	len = read(fd, buf, STATUS_MAX);
	close(fd);
	if (len <= 0)
		return -EACCES;
	buf[len] = '\0';
	c->uid = (uint32_t)ctx->uid;
	c->gid = (uint32_t)ctx->gid;
	r = qc_caller_parse_status(buf, &fsuid, &fsgid, c);
	if (r == -E2BIG) {
		if (!atomic_exchange(&said_groups, true))
			qft_warn("a caller (uid %u) in more than %u groups is "
				 "refused: the server would act without some "
				 "of them", (unsigned)ctx->uid, QFT_MAX_GROUPS);
		return -EACCES;
	}
	/* Not the thread that asked any more (its id reused), or changed
	 * identity since: nothing is known of the one that asked. */
	if (r < 0 || fsuid != c->uid || fsgid != c->gid)
		return -EACCES;
	qc_idmap_caller(&fs->idmap, c);
	return 0;
}

/*
 * Whether requests of this mount name their caller: a shared mount
 * whose server runs as root (which then granted QFT_FEAT_CRED, or the
 * handshake failed).  A server running as another user acts as that
 * user for everyone; the caller would not be sent anyway.
 */
static bool acts_as_callers(struct qc_fs *fs)
{
	uint32_t uid, gid;

	if (!fs->multi_user)
		return false;
	qc_conn_server_ids(fs->conn, &uid, &gid);
	return uid == 0;
}

/* Sets the thread's caller for the callback; false after answering
 * with the error when it cannot be known. */
static bool caller_begin(fuse_req_t req, struct qft_cred *c)
{
	struct qc_fs *fs = fs_of(req);
	int r;

	if (!acts_as_callers(fs))
		return true;
	r = qc_caller_of(req, fs, c);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return false;
	}
	qc_call_act_as(c);
	return true;
}

#define AS_CALLER(req, call)                                   \
	do {                                                   \
		struct qft_cred c_;                            \
		if (caller_begin((req), &c_)) {                \
			call;                                  \
			qc_call_act_as(NULL);                  \
		}                                              \
	} while (0)

void qc_caller_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	AS_CALLER(req, qc_ops_lookup(req, parent, name));
}

void qc_caller_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	AS_CALLER(req, qc_ops_getattr(req, ino, fi));
}

void qc_caller_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int valid, struct fuse_file_info *fi)
{
	AS_CALLER(req, qc_ops_setattr(req, ino, attr, valid, fi));
}

void qc_caller_readlink(fuse_req_t req, fuse_ino_t ino)
{
	AS_CALLER(req, qc_ops_readlink(req, ino));
}

/*
 * The mode to create with in `parent`: the caller's umask applied unless
 * the directory has a default ACL, which then decides alone (acl(5); a
 * new subdirectory of one with `group::rwx` gets rwx, not the umask's
 * r-x).  The kernel leaves the umask to us (FUSE_CAP_DONT_MASK, ops.c)
 * and gives it with the request; without that capability it applied it
 * already and gives 0.  The server, whose own umask is 0, makes what it
 * is told, under a default ACL the ACL's.  A directory known to have
 * none (hints.h, qc_hint_nodefacl) needs no question; otherwise one
 * GETXATTR of the default ACL, as the caller, whose "none" is remembered.
 */
static mode_t caller_mode(fuse_req_t req, fuse_ino_t parent, mode_t mode)
{
	struct qc_fs *fs = fs_of(req);
	mode_t mask = fuse_req_ctx(req)->umask & 0777;
	char path[QFT_MAX_PATH + 1];
	struct qc_reply rep;
	struct qft_msg m;
	uint64_t xgen;
	int r;

	if (mask == 0 || (mode & mask) == 0)
		return mode;
	if (qc_hint_nodefacl(fs, qc_fs_node(fs, parent)))
		return mode & ~mask;
	if (qc_ops_node_path(fs, parent, NULL, path) < 0)
		return mode & ~mask;
	qft_msg_init(&m, QFT_OP_GETXATTR, 0);
	qc_set_str(&m.path, path);
	qc_set_str(&m.xname, "system.posix_acl_default");
	m.length = 0;
	xgen = qc_hint_xattr_gen(fs);
	r = qc_call(fs->conn, &m, &rep);
	if (r == -ENODATA)
		qc_hint_nodefacl_note(fs, qc_fs_node(fs, parent), xgen);
	if (r < 0)
		return mode & ~mask;
	qc_reply_free(&rep);
	return mode;
}

void qc_caller_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	AS_CALLER(req, qc_ops_mknod(req, parent, name,
				    caller_mode(req, parent, mode), rdev));
}

void qc_caller_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	AS_CALLER(req, qc_ops_mkdir(req, parent, name,
				    caller_mode(req, parent, mode)));
}

void qc_caller_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	AS_CALLER(req, qc_ops_unlink(req, parent, name));
}

void qc_caller_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	AS_CALLER(req, qc_ops_rmdir(req, parent, name));
}

void qc_caller_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	AS_CALLER(req, qc_ops_symlink(req, link, parent, name));
}

void qc_caller_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	AS_CALLER(req, qc_ops_rename(req, parent, name, newparent, newname,
				     flags));
}

void qc_caller_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	AS_CALLER(req, qc_ops_link(req, ino, newparent, newname));
}

void qc_caller_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	AS_CALLER(req, qc_ops_open(req, ino, fi));
}

void qc_caller_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	AS_CALLER(req, qc_ops_create(req, parent, name,
				     caller_mode(req, parent, mode), fi));
}

void qc_caller_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	AS_CALLER(req, qc_ops_opendir(req, ino, fi));
}

void qc_caller_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	AS_CALLER(req, qc_ops_readdir(req, ino, size, off, fi));
}

void qc_caller_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	AS_CALLER(req, qc_ops_readdirplus(req, ino, size, off, fi));
}

void qc_caller_statfs(fuse_req_t req, fuse_ino_t ino)
{
	AS_CALLER(req, qc_ops_statfs(req, ino));
}

void qc_caller_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	AS_CALLER(req, qc_ops_setxattr(req, ino, name, value, size, flags));
}

void qc_caller_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	AS_CALLER(req, qc_ops_getxattr(req, ino, name, size));
}

void qc_caller_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	AS_CALLER(req, qc_ops_listxattr(req, ino, size));
}

void qc_caller_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	AS_CALLER(req, qc_ops_removexattr(req, ino, name));
}
