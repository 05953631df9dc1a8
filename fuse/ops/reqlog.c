// SPDX-License-Identifier: MIT
/*
 * Requests from arrival to answer (see reqlog.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "fs/file.h"
#include "log.h"
#include "fs/node.h"
#include "protocol.h"
#include "ops/reqlog.h"
#include "fs/stats.h"

#define BUCKETS     256u
#define RATE_SECS   8        /* ring of per-second byte counts */
#define RATE_OVER   3        /* the rate is over the last full seconds */
#define XFER_KEEP_NS ((int64_t)3 * 1000000000) /* closed files shown */
/* Closed files kept to show, at most: a tree walk closes thousands a
 * second, and every read looks its file up among those kept. */
#define XFER_CLOSED_MAX 64u
#define XFER_IDLE_NS ((int64_t)10 * 1000000000) /* open, shown while
						 * this recent */

enum op {
	OP_LOOKUP, OP_GETATTR, OP_SETATTR, OP_READLINK, OP_MKNOD, OP_MKDIR,
	OP_UNLINK, OP_RMDIR, OP_SYMLINK, OP_RENAME, OP_LINK, OP_OPEN,
	OP_CREATE, OP_READ, OP_WRITE, OP_FLUSH, OP_RELEASE, OP_FSYNC,
	OP_OPENDIR, OP_READDIR, OP_READDIRPLUS, OP_RELEASEDIR, OP_FSYNCDIR,
	OP_STATFS, OP_SETXATTR, OP_GETXATTR, OP_LISTXATTR, OP_REMOVEXATTR,
	OP_FALLOCATE, OP_COPY_FILE_RANGE, OP_LSEEK, OP_GETLK, OP_SETLK,
	OP_FLOCK, OP__COUNT
};

static const char *const op_names[OP__COUNT] = {
	"lookup", "getattr", "setattr", "readlink", "mknod", "mkdir",
	"unlink", "rmdir", "symlink", "rename", "link", "open", "create",
	"read", "write", "flush", "release", "fsync", "opendir", "readdir",
	"readdirplus", "releasedir", "fsyncdir", "statfs", "setxattr",
	"getxattr", "listxattr", "removexattr", "fallocate",
	"copy_file_range", "lseek", "getlk", "setlk", "flock",
};

/* A request between its arrival and its answer. */
struct rec {
	fuse_req_t req;
	struct rec *next;
	int64_t start_ns;
	uint64_t ino;
	size_t size;            /* asked for (read) or given (write) */
	enum op op;
};

/* A file being read or written, by inode, with its path when first
 * touched (the inode is pinned while open, not afterwards). */
struct xfer {
	struct xfer *next;
	uint64_t ino;
	uint64_t rd, wr;
	int64_t first_ns, last_ns;
	int64_t closed_ns;      /* 0 while open */
	char *path;
};

struct opsum {
	uint64_t n, errors, bytes;
	int64_t total_ns, max_ns;
};

/*
 * The log is one per process, not a field of the mount, because of how
 * answers reach it: the linker's --wrap turns each fuse_reply_* into a
 * __wrap_ here that gets only the request, and the request's userdata is
 * the mount's struct qc_fs (fs layer), which has no room for the ops
 * layer's state (nor do the stats' live hook and qc_reqlog_summary and
 * qc_reqlog_log_stats take any).  One session per process makes that one
 * instance.
 */
static struct {
	pthread_mutex_t lock;
	/* Set once by qc_reqlog_ops before the session starts. */
	const struct fuse_lowlevel_ops *real;
	struct fuse_lowlevel_ops ops;
	struct qc_fs *fs;
	struct rec *recs[BUCKETS];      /* lock */
	uint64_t in_flight;             /* lock */
	struct opsum sum[OP__COUNT];    /* lock */
	struct xfer *xfers;             /* lock */
	unsigned nclosed;               /* lock: closed ones among xfers */
	struct {
		int64_t sec;
		uint64_t rd, wr;
	} rate[RATE_SECS];              /* lock */
} R = { .lock = PTHREAD_MUTEX_INITIALIZER };

int __real_fuse_reply_err(fuse_req_t req, int err);
int __wrap_fuse_reply_err(fuse_req_t req, int err);
void __real_fuse_reply_none(fuse_req_t req);
void __wrap_fuse_reply_none(fuse_req_t req);
int __real_fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e);
int __wrap_fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e);
int __real_fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
			     const struct fuse_file_info *fi);
int __wrap_fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
			     const struct fuse_file_info *fi);
int __real_fuse_reply_attr(fuse_req_t req, const struct stat *attr,
			   double attr_timeout);
int __wrap_fuse_reply_attr(fuse_req_t req, const struct stat *attr,
			   double attr_timeout);
int __real_fuse_reply_readlink(fuse_req_t req, const char *link);
int __wrap_fuse_reply_readlink(fuse_req_t req, const char *link);
int __real_fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi);
int __wrap_fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi);
int __real_fuse_reply_write(fuse_req_t req, size_t count);
int __wrap_fuse_reply_write(fuse_req_t req, size_t count);
int __real_fuse_reply_buf(fuse_req_t req, const char *buf, size_t size);
int __wrap_fuse_reply_buf(fuse_req_t req, const char *buf, size_t size);
int __real_fuse_reply_iov(fuse_req_t req, const struct iovec *iov, int count);
int __wrap_fuse_reply_iov(fuse_req_t req, const struct iovec *iov, int count);
int __real_fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf);
int __wrap_fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf);
int __real_fuse_reply_xattr(fuse_req_t req, size_t count);
int __wrap_fuse_reply_xattr(fuse_req_t req, size_t count);
int __real_fuse_reply_lseek(fuse_req_t req, off_t off);
int __wrap_fuse_reply_lseek(fuse_req_t req, off_t off);
int __real_fuse_reply_lock(fuse_req_t req, const struct flock *lock);
int __wrap_fuse_reply_lock(fuse_req_t req, const struct flock *lock);

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned bucket(fuse_req_t req)
{
	return (unsigned)(((uintptr_t)req >> 4) % BUCKETS);
}

/* lock held: whether `x` is worth showing: moving, or just closed. */
static bool xfer_shown(const struct xfer *x, int64_t now)
{
	return x->closed_ns || now - x->last_ns <= XFER_IDLE_NS;
}

/* lock held: the open transfer of `ino`, or NULL. */
static struct xfer *xfer_of(uint64_t ino)
{
	for (struct xfer *x = R.xfers; x; x = x->next)
		if (x->ino == ino && !x->closed_ns)
			return x;
	return NULL;
}

/*
 * A read or write of `ino` arrives: makes its transfer if there is none.
 * The path is taken without our lock (the node table has its own, and an
 * answer may be given under it), while the file is open and so its node
 * pinned.
 */
static void xfer_note(uint64_t ino)
{
	char path[QFT_MAX_PATH + 1];
	struct xfer *x;
	bool known;

	pthread_mutex_lock(&R.lock);
	known = xfer_of(ino) != NULL;
	pthread_mutex_unlock(&R.lock);
	if (known)
		return;
	if (qn_path(&R.fs->nodes, qc_fs_node(R.fs, ino), NULL, path) < 0)
		snprintf(path, sizeof(path), "(inode %llu)",
			 (unsigned long long)ino);
	x = calloc(1, sizeof(*x));
	if (!x)
		return;
	x->ino = ino;
	x->first_ns = x->last_ns = now_ns();
	x->path = strdup(path[0] == '/' ? path + 1 : path);
	pthread_mutex_lock(&R.lock);
	if (xfer_of(ino)) {
		/* Another reader made it meanwhile. */
		pthread_mutex_unlock(&R.lock);
		free(x->path);
		free(x);
		return;
	}
	x->next = R.xfers;
	R.xfers = x;
	pthread_mutex_unlock(&R.lock);
}

/* lock held: unlinks and frees the transfer *pp. */
static void xfer_drop(struct xfer **pp)
{
	struct xfer *x = *pp;

	*pp = x->next;
	if (x->closed_ns)
		R.nclosed--;
	free(x->path);
	free(x);
}

/*
 * lock held: forgets transfers closed a while ago, and the oldest closed
 * ones beyond XFER_CLOSED_MAX (an open file's stays, so that it is
 * counted once however long it rests).  The list then holds the open
 * files and a few closed ones, whatever the mount read before.
 */
static void xfer_prune(int64_t now)
{
	for (struct xfer **pp = &R.xfers; *pp;) {
		if ((*pp)->closed_ns && now - (*pp)->closed_ns > XFER_KEEP_NS)
			xfer_drop(pp);
		else
			pp = &(*pp)->next;
	}
	while (R.nclosed > XFER_CLOSED_MAX) {
		struct xfer **oldest = NULL;

		for (struct xfer **pp = &R.xfers; *pp; pp = &(*pp)->next)
			if ((*pp)->closed_ns && (!oldest ||
			    (*pp)->closed_ns < (*oldest)->closed_ns))
				oldest = pp;
		xfer_drop(oldest);
	}
}

static void begin(fuse_req_t req, enum op op, uint64_t ino, size_t size)
{
	struct rec *r = malloc(sizeof(*r));

	/* Without memory the request goes on, uncounted. */
	if (!r)
		return;
	r->req = req;
	r->op = op;
	r->ino = ino;
	r->size = size;
	r->start_ns = now_ns();
	pthread_mutex_lock(&R.lock);
	r->next = R.recs[bucket(req)];
	R.recs[bucket(req)] = r;
	R.in_flight++;
	pthread_mutex_unlock(&R.lock);
}

/* lock held: the per-second ring, for the rates. */
static void rate_add(int64_t now, uint64_t rd, uint64_t wr)
{
	int64_t sec = now / 1000000000;
	unsigned i = (unsigned)(sec % RATE_SECS);

	if (R.rate[i].sec != sec) {
		R.rate[i].sec = sec;
		R.rate[i].rd = R.rate[i].wr = 0;
	}
	R.rate[i].rd += rd;
	R.rate[i].wr += wr;
}

/* Errors that are answers, not failures: a name that does not exist, an
 * attribute that is not there. */
static bool expected_error(enum op op, int err)
{
	switch (op) {
	case OP_LOOKUP:
		return err == ENOENT;
	case OP_GETXATTR:
	case OP_LISTXATTR:
		return err == ENODATA || err == ERANGE || err == ENOTSUP;
	/* No data or hole there; a server without COPY (the kernel then
	 * copies itself). */
	case OP_LSEEK:
		return err == ENXIO;
	case OP_COPY_FILE_RANGE:
		return err == EOPNOTSUPP;
	default:
		return false;
	}
}

/*
 * The answer to `req`: `err` (0 for data), `bytes` of data.  Done before
 * the real reply, which frees the request.
 */
static void end(fuse_req_t req, int err, size_t bytes, bool created)
{
	struct qc_stats *st = &R.fs->stats;
	struct rec *r = NULL;
	int64_t now = now_ns(), ns;

	pthread_mutex_lock(&R.lock);
	for (struct rec **pp = &R.recs[bucket(req)]; *pp; pp = &(*pp)->next)
		if ((*pp)->req == req) {
			r = *pp;
			*pp = r->next;
			R.in_flight--;
			break;
		}
	if (!r) {
		pthread_mutex_unlock(&R.lock);
		return;
	}
	ns = now - r->start_ns;
	R.sum[r->op].n++;
	R.sum[r->op].total_ns += ns;
	if (ns > R.sum[r->op].max_ns)
		R.sum[r->op].max_ns = ns;
	if (err) {
		R.sum[r->op].errors++;
	} else if (r->op == OP_READ || r->op == OP_WRITE) {
		struct xfer *x = xfer_of(r->ino);
		bool rd = r->op == OP_READ;

		R.sum[r->op].bytes += bytes;
		rate_add(now, rd ? bytes : 0, rd ? 0 : bytes);
		if (x) {
			if (rd && x->rd == 0 && bytes)
				qc_stat_inc(st, QC_STAT_FILES_READ);
			if (!rd && x->wr == 0 && bytes)
				qc_stat_inc(st, QC_STAT_FILES_WRITTEN);
			*(rd ? &x->rd : &x->wr) += bytes;
			x->last_ns = now;
		}
		qc_stat_add(st, rd ? QC_STAT_BYTES_READ : QC_STAT_BYTES_WRITTEN,
			    bytes);
		qc_stat_inc(st, rd ? QC_STAT_READS : QC_STAT_WRITES);
	} else if (r->op == OP_RELEASE) {
		struct xfer *x = xfer_of(r->ino);

		if (x) {
			x->closed_ns = now;
			R.nclosed++;
			xfer_prune(now);
		}
	}
	pthread_mutex_unlock(&R.lock);

	qc_stat_inc(st, QC_STAT_REQUESTS);
	if (created)
		qc_stat_inc(st, QC_STAT_FILES_CREATED);
	if (err && !expected_error(r->op, err))
		qc_stat_error(st, err);
	if (qft_log_level() >= QFT_LOG_DEBUG) {
		char res[64];

		if (err)
			snprintf(res, sizeof(res), "%s", strerrorname_np(err) ?
				 strerrorname_np(err) : "error");
		else
			snprintf(res, sizeof(res), "ok %zu bytes", bytes);
		qft_debug("request %s ino %llu size %zu: %s in %.3f ms",
			  op_names[r->op], (unsigned long long)r->ino,
			  r->size, res, (double)ns / 1e6);
	}
	free(r);
}

/* --- the replies, on their way to libfuse --- */

int __wrap_fuse_reply_err(fuse_req_t req, int err)
{
	end(req, err, 0, false);
	return __real_fuse_reply_err(req, err);
}

void __wrap_fuse_reply_none(fuse_req_t req)
{
	end(req, 0, 0, false);
	__real_fuse_reply_none(req);
}

int __wrap_fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_entry(req, e);
}

int __wrap_fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
			     const struct fuse_file_info *fi)
{
	end(req, 0, 0, true);
	return __real_fuse_reply_create(req, e, fi);
}

int __wrap_fuse_reply_attr(fuse_req_t req, const struct stat *attr,
			   double attr_timeout)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_attr(req, attr, attr_timeout);
}

int __wrap_fuse_reply_readlink(fuse_req_t req, const char *link)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_readlink(req, link);
}

int __wrap_fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_open(req, fi);
}

int __wrap_fuse_reply_write(fuse_req_t req, size_t count)
{
	end(req, 0, count, false);
	return __real_fuse_reply_write(req, count);
}

int __wrap_fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
	end(req, 0, size, false);
	return __real_fuse_reply_buf(req, buf, size);
}

int __wrap_fuse_reply_iov(fuse_req_t req, const struct iovec *iov, int count)
{
	size_t n = 0;

	for (int i = 0; i < count; i++)
		n += iov[i].iov_len;
	end(req, 0, n, false);
	return __real_fuse_reply_iov(req, iov, count);
}

int __wrap_fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_statfs(req, stbuf);
}

int __wrap_fuse_reply_xattr(fuse_req_t req, size_t count)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_xattr(req, count);
}

int __wrap_fuse_reply_lseek(fuse_req_t req, off_t off)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_lseek(req, off);
}

int __wrap_fuse_reply_lock(fuse_req_t req, const struct flock *lock)
{
	end(req, 0, 0, false);
	return __real_fuse_reply_lock(req, lock);
}

/* --- the live values and the transfers attribute --- */

static void live(struct qc_stats_live *out)
{
	int64_t now = now_ns(), sec = now / 1000000000, oldest = now;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&R.lock);
	out->in_flight = R.in_flight;
	for (unsigned b = 0; b < BUCKETS; b++)
		for (struct rec *r = R.recs[b]; r; r = r->next)
			if (r->start_ns < oldest)
				oldest = r->start_ns;
	out->oldest_ms = (uint64_t)((now - oldest) / 1000000);
	for (unsigned i = 0; i < RATE_SECS; i++)
		if (R.rate[i].sec < sec && R.rate[i].sec >= sec - RATE_OVER) {
			out->read_rate += R.rate[i].rd;
			out->write_rate += R.rate[i].wr;
		}
	out->read_rate /= RATE_OVER;
	out->write_rate /= RATE_OVER;
	xfer_prune(now);
	for (struct xfer *x = R.xfers; x; x = x->next) {
		out->transfers += !x->closed_ns && xfer_shown(x, now);
		out->transfers_closed += x->closed_ns != 0;
	}
	pthread_mutex_unlock(&R.lock);
}

static uint64_t backlog(const struct qc_stats *st)
{
	(void)st;
	return qc_commit_backlog(R.fs);
}

char *qc_reqlog_transfers(size_t *len)
{
	int64_t now = now_ns();
	char *text = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&text, &cap);

	if (!f)
		return NULL;
	pthread_mutex_lock(&R.lock);
	xfer_prune(now);
	for (struct xfer *x = R.xfers; x; x = x->next)
		if (xfer_shown(x, now))
			fprintf(f, "%llu %llu %lld %d %s\n",
				(unsigned long long)x->rd,
				(unsigned long long)x->wr,
				(long long)((now - x->first_ns) / 1000000),
				!x->closed_ns, x->path ? x->path : "?");
	pthread_mutex_unlock(&R.lock);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	*len = cap;
	return text;
}

/* --- the operations, on their way in --- */

static void w_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	begin(req, OP_LOOKUP, parent, 0);
	R.real->lookup(req, parent, name);
}

static void w_getattr(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	begin(req, OP_GETATTR, ino, 0);
	R.real->getattr(req, ino, fi);
}

static void w_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		      int to_set, struct fuse_file_info *fi)
{
	begin(req, OP_SETATTR, ino, 0);
	R.real->setattr(req, ino, attr, to_set, fi);
}

static void w_readlink(fuse_req_t req, fuse_ino_t ino)
{
	begin(req, OP_READLINK, ino, 0);
	R.real->readlink(req, ino);
}

static void w_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, dev_t rdev)
{
	begin(req, OP_MKNOD, parent, 0);
	R.real->mknod(req, parent, name, mode, rdev);
}

static void w_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode)
{
	begin(req, OP_MKDIR, parent, 0);
	R.real->mkdir(req, parent, name, mode);
}

static void w_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	begin(req, OP_UNLINK, parent, 0);
	R.real->unlink(req, parent, name);
}

static void w_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	begin(req, OP_RMDIR, parent, 0);
	R.real->rmdir(req, parent, name);
}

static void w_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		      const char *name)
{
	begin(req, OP_SYMLINK, parent, 0);
	R.real->symlink(req, link, parent, name);
}

static void w_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		     fuse_ino_t newparent, const char *newname,
		     unsigned int flags)
{
	begin(req, OP_RENAME, parent, 0);
	R.real->rename(req, parent, name, newparent, newname, flags);
}

static void w_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		   const char *newname)
{
	begin(req, OP_LINK, ino, 0);
	R.real->link(req, ino, newparent, newname);
}

static void w_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	begin(req, OP_OPEN, ino, 0);
	R.real->open(req, ino, fi);
}

static void w_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, struct fuse_file_info *fi)
{
	begin(req, OP_CREATE, parent, 0);
	R.real->create(req, parent, name, mode, fi);
}

static void w_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	xfer_note(ino);
	begin(req, OP_READ, ino, size);
	R.real->read(req, ino, size, off, fi);
}

static void w_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		    size_t size, off_t off, struct fuse_file_info *fi)
{
	xfer_note(ino);
	begin(req, OP_WRITE, ino, size);
	R.real->write(req, ino, buf, size, off, fi);
}

static void w_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	begin(req, OP_FLUSH, ino, 0);
	R.real->flush(req, ino, fi);
}

static void w_release(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	begin(req, OP_RELEASE, ino, 0);
	R.real->release(req, ino, fi);
}

static void w_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi)
{
	begin(req, OP_FSYNC, ino, 0);
	R.real->fsync(req, ino, datasync, fi);
}

static void w_opendir(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	begin(req, OP_OPENDIR, ino, 0);
	R.real->opendir(req, ino, fi);
}

static void w_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	begin(req, OP_READDIR, ino, size);
	R.real->readdir(req, ino, size, off, fi);
}

static void w_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			  off_t off, struct fuse_file_info *fi)
{
	begin(req, OP_READDIRPLUS, ino, size);
	R.real->readdirplus(req, ino, size, off, fi);
}

static void w_releasedir(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	begin(req, OP_RELEASEDIR, ino, 0);
	R.real->releasedir(req, ino, fi);
}

static void w_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		       struct fuse_file_info *fi)
{
	begin(req, OP_FSYNCDIR, ino, 0);
	R.real->fsyncdir(req, ino, datasync, fi);
}

static void w_statfs(fuse_req_t req, fuse_ino_t ino)
{
	begin(req, OP_STATFS, ino, 0);
	R.real->statfs(req, ino);
}

static void w_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		       const char *value, size_t size, int flags)
{
	begin(req, OP_SETXATTR, ino, size);
	R.real->setxattr(req, ino, name, value, size, flags);
}

static void w_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		       size_t size)
{
	begin(req, OP_GETXATTR, ino, size);
	R.real->getxattr(req, ino, name, size);
}

static void w_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	begin(req, OP_LISTXATTR, ino, size);
	R.real->listxattr(req, ino, size);
}

static void w_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	begin(req, OP_REMOVEXATTR, ino, 0);
	R.real->removexattr(req, ino, name);
}

static void w_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			off_t offset, off_t length, struct fuse_file_info *fi)
{
	begin(req, OP_FALLOCATE, ino, 0);
	R.real->fallocate(req, ino, mode, offset, length, fi);
}

static void w_copy_file_range(fuse_req_t req, fuse_ino_t ino_in,
			      off_t off_in, struct fuse_file_info *fi_in,
			      fuse_ino_t ino_out, off_t off_out,
			      struct fuse_file_info *fi_out, size_t len,
			      int flags)
{
	begin(req, OP_COPY_FILE_RANGE, ino_out, len);
	R.real->copy_file_range(req, ino_in, off_in, fi_in, ino_out, off_out,
				fi_out, len, flags);
}

static void w_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		    struct fuse_file_info *fi)
{
	begin(req, OP_LSEEK, ino, 0);
	R.real->lseek(req, ino, off, whence, fi);
}

static void w_getlk(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct flock *lock)
{
	begin(req, OP_GETLK, ino, 0);
	R.real->getlk(req, ino, fi, lock);
}

/* A blocking setlk or flock is counted from its arrival to its grant:
 * the wait is the request's latency. */
static void w_setlk(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct flock *lock, int sleep)
{
	begin(req, OP_SETLK, ino, 0);
	R.real->setlk(req, ino, fi, lock, sleep);
}

static void w_flock(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, int op)
{
	begin(req, OP_FLOCK, ino, 0);
	R.real->flock(req, ino, fi, op);
}

/* Each callback the real table has, wrapped; the others stay NULL so
 * libfuse answers them as before. */
#define WRAP(field) \
	do { if (real->field) R.ops.field = w_##field; } while (0)

const struct fuse_lowlevel_ops *qc_reqlog_ops(
	const struct fuse_lowlevel_ops *real, struct qc_fs *fs)
{
	R.real = real;
	R.fs = fs;
	R.ops = *real;
	WRAP(lookup); WRAP(getattr); WRAP(setattr); WRAP(readlink);
	WRAP(mknod); WRAP(mkdir); WRAP(unlink); WRAP(rmdir); WRAP(symlink);
	WRAP(rename); WRAP(link); WRAP(open); WRAP(create); WRAP(read);
	WRAP(write); WRAP(flush); WRAP(release); WRAP(fsync); WRAP(opendir);
	WRAP(readdir); WRAP(readdirplus); WRAP(releasedir); WRAP(fsyncdir);
	WRAP(statfs); WRAP(setxattr); WRAP(getxattr); WRAP(listxattr);
	WRAP(removexattr); WRAP(fallocate); WRAP(copy_file_range);
	WRAP(lseek); WRAP(getlk); WRAP(setlk); WRAP(flock);
	fs->stats.live = live;
	fs->stats.backlog = backlog;
	return &R.ops;
}

void qc_reqlog_summary(void)
{
	pthread_mutex_lock(&R.lock);
	qft_info("summary: %-12s %8s %7s %14s %10s %10s", "operation",
		 "count", "errors", "bytes", "mean ms", "max ms");
	for (int i = 0; i < OP__COUNT; i++) {
		const struct opsum *s = &R.sum[i];

		if (!s->n)
			continue;
		qft_info("summary: %-12s %8llu %7llu %14llu %10.3f %10.3f",
			 op_names[i], (unsigned long long)s->n,
			 (unsigned long long)s->errors,
			 (unsigned long long)s->bytes,
			 (double)s->total_ns / (double)s->n / 1e6,
			 (double)s->max_ns / 1e6);
	}
	pthread_mutex_unlock(&R.lock);
}

void qc_reqlog_log_stats(void)
{
	size_t len = qc_stats_format(&R.fs->stats, R.fs->conn, NULL, 0);
	size_t cap = len + 1;
	char *buf = malloc(cap);

	if (!buf)
		return;
	len = qc_stats_format(&R.fs->stats, R.fs->conn, buf, cap);
	/* It may have grown since it was measured: cut, never overrun. */
	buf[len < cap ? len : cap - 1] = '\0';
	/* One line: "name value, name value, ..." */
	for (char *p = buf; (p = strchr(p, '\n'));)
		*p = (p[1] ? ',' : '\0');
	qft_info("stats: %s", buf);
	free(buf);
	/* The round trip for the next time. */
	qc_stats_probe(&R.fs->stats, R.fs->conn);
}
