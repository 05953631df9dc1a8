// SPDX-License-Identifier: MIT
/*
 * Request handlers.  Every handler has the same shape: check the request
 * (handle kind, lengths; the decoder already checked names, paths and flag
 * bits), resolve paths through path.c so nothing outside the root is ever
 * reached, make the system call, and fill the reply.  Entry operations
 * open the parent directory confined and then use *at calls on the single
 * name, never following it.  READ and WRITE of regular files are queued
 * in the I/O engine by xfer.c and never reach op_read/op_write; those
 * serve the rest (devices, O_APPEND handles) through io.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include "copy.h"
#include "cred.h"
#include "errmap.h"
#include "host.h"
#include "io.h"
#include "lock.h"
#include "log.h"
#include "ops.h"
#include "procfs.h"
#include "pulse.h"
#include "scan.h"
#include "tcpcc.h"
#include "walk.h"
#include "watch.h"

typedef int (*op_fn)(struct srv *s, const struct qft_msg *req,
		     struct qft_msg *rep);

/* Sets the reply's error text; it lives in s->errmsg until sent. */
__attribute__((format(printf, 3, 4)))
static void set_errmsg(struct srv *s, struct qft_msg *rep, const char *fmt,
		       ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
	rep->errmsg.s = s->errmsg;
	rep->errmsg.len = (uint32_t)strlen(s->errmsg);
}

/* Makes s->data hold at least `n` bytes (n <= QFT_MAX_DATA). */
static int data_reserve(struct srv *s, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (n <= s->data_cap)
		return 0;
	/* Grow in powers of two so mixed sizes settle after a few calls. */
	cap = 65536;
	while (cap < n)
		cap *= 2;
	p = realloc(s->data, cap);
	if (!p)
		return -ENOMEM;
	s->data = p;
	s->data_cap = cap;
	return 0;
}

static int reply_attr_fd(int fd, struct qft_msg *rep)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	srv_path_attr_from_stat(&rep->attr, &st);
	return 0;
}

/* `follow` (--follow-symlinks): as LSTAT shows `name`, FOLLOWED hint and
 * NOXATTR included. */
static int reply_attr_at(int dfd, const char *name, bool follow,
			 struct qft_msg *rep)
{
	struct stat st;

	if (follow)
		return srv_path_attr_at(dfd, name, true, &st, &rep->attr, NULL);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	srv_path_attr_from_stat(&rep->attr, &st);
	return 0;
}

static int op_hello(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	enum qft_lz4_mode z;

	if (s->hello_done) {
		set_errmsg(s, rep, "duplicate HELLO");
		return -EPROTO;
	}
	if (req->version != QFT_VERSION) {
		set_errmsg(s, rep,
			   "protocol version mismatch: client speaks v%u, "
			   "qftfs-server speaks v%u; install matching qftfs "
			   "versions on both ends", req->version, QFT_VERSION);
		qft_err("%s", s->errmsg);
		s->fatal = -EPROTO;
		return -EPROTO;
	}
	s->hello_done = true;
	rep->magic = QFT_MAGIC;
	rep->version = QFT_VERSION;
	/* Who owns what we create (a setgid directory aside), so that the
	 * client can answer for a new file without asking. */
	rep->uid = (uint32_t)geteuid();
	rep->gid = (uint32_t)getegid();
	/* Compression goes on before this reply leaves, which is safe: the
	 * reply is far below QFT_CHAN_LZ4_MIN, so it goes as it is. */
	z = qft_chan_lz4_accept(&s->chan, req->features, !s->no_compress,
				&rep->features);
	if (req->features & QFT_FEAT_LZ4)
		qft_debug("compression: %s%s", qft_lz4_mode_name(z),
			  s->no_compress ? " (--no-compress)" : "");
	/* Following symlinks: the server's mode, told to a client that
	 * asks whether it has it. */
	if ((req->features & QFT_FEAT_FOLLOW) && s->root.follow)
		rep->features |= QFT_FEAT_FOLLOW;
	/* Change notification: granted where the session can watch. */
	if ((req->features & QFT_FEAT_NOTIFY) &&
	    srv_watch_grant(s->watch, &s->chan, s->is_meta)) {
		rep->features |= QFT_FEAT_NOTIFY;
		s->notify = true;
	}
	/* Acting as each caller: only where this process can (root, and
	 * the kernel lets it switch a thread's ids; cred.h). */
	if (req->features & QFT_FEAT_CRED) {
		if (srv_cred_available()) {
			rep->features |= QFT_FEAT_CRED;
			s->cred_on = true;
			qft_debug("acting as each caller on this connection");
		} else if (geteuid() == 0) {
			qft_warn("the client asks this server to act as each "
				 "of its users, which it cannot here; the "
				 "client will refuse the shared mount");
		}
	}
	/* O_NOATIME needs nothing but the right to set it, file by file. */
	if (req->features & QFT_FEAT_NOATIME) {
		rep->features |= QFT_FEAT_NOATIME;
		s->noatime = true;
	}
	/* Locks need a second open of a file (lock.h), through procfs. */
	if ((req->features & QFT_FEAT_LOCKS) && srv_procfs_ok()) {
		rep->features |= QFT_FEAT_LOCKS;
		s->locks_on = true;
	}
	/* Walk-ahead (walk.h) needs nothing the server might lack. */
	if (req->features & QFT_FEAT_FETCH)
		rep->features |= QFT_FEAT_FETCH;
	/* Lazy handles need nothing the server might lack. */
	if (req->features & QFT_FEAT_LAZY) {
		rep->features |= QFT_FEAT_LAZY;
		s->lazy = true;
	}
	/* Progress frames: a client that asks for them counts them as life
	 * while a sync takes longer than its deadline.  A reconnect's HELLO
	 * comes on a new connection, so there is never one already. */
	if ((req->features & QFT_FEAT_PROGRESS) && !s->pulse) {
		if (srv_pulse_new(&s->pulse, &s->chan) == 0)
			rep->features |= QFT_FEAT_PROGRESS;
		else
			qft_warn("no PROGRESS frames on this connection: out "
				 "of memory");
	}
	/* Resuming: only where the session can outlive the connection
	 * (s->resume is set for --session over TCP with --resume > 0). */
	if (s->resume &&
	    srv_resume_grant(s->resume, s->lane, s->chan.rfd,
			     req->features & QFT_FEAT_RESUME)) {
		if (srv_replay_new(&s->replay) == 0)
			rep->features |= QFT_FEAT_RESUME;
		else
			qft_warn("this connection cannot be resumed: out of "
				 "memory");
	}
	/* The host's boot: a client whose server dies compares the next
	 * one's (docs/protocol.md, "Carrying a session over"). */
	if (req->features & QFT_FEAT_BOOTID) {
		const char *id = srv_host_boot_id(&rep->boot_id.len);

		if (id) {
			rep->boot_id.s = id;
			rep->features |= QFT_FEAT_BOOTID;
		}
	}
	/* Striping (chan.h): bulk data over more connections, which the
	 * session's listener takes as it takes resumed ones. */
	if ((req->features & QFT_FEAT_STRIPES) && s->lane == SRV_LANE_BULK &&
	    (rep->features & QFT_FEAT_RESUME) &&
	    qft_tcpcc_get(s->chan.wfd, s->tcpcc) == 0 &&
	    srv_resume_stripes_grant(s->resume))
		rep->features |= QFT_FEAT_STRIPES;
	/* What this connection's downloads are sent with, for the
	 * client's statistics (session.c chose it at accept). */
	if ((req->features & QFT_FEAT_TCPCC) &&
	    qft_tcpcc_get(s->chan.wfd, s->tcpcc) == 0 && s->tcpcc[0]) {
		rep->tcpcc.s = s->tcpcc;
		rep->tcpcc.len = (uint32_t)strlen(s->tcpcc);
		rep->features |= QFT_FEAT_TCPCC;
	}
	/* Server-side copy and holes (copy.h). */
	rep->features |= srv_copy_features(req->features);
	s->features = rep->features;
	return 0;
}

/*
 * The client ends a resumable session (on bulk, behind everything else):
 * answered, then the loop ends as at an end of stream.
 */
static int op_bye(struct srv *s, const struct qft_msg *req,
		  struct qft_msg *rep)
{
	if (!s->replay || s->lane != SRV_LANE_BULK)
		return -EINVAL;
	s->bye = true;
	return 0;
}

/*
 * Change notification (watch.h): what the client's own changes will look
 * like to the session's watches, so that they are not reported back.
 * Each handler brackets its syscalls with srv_watch_begin/_done and says
 * which events they make on which names.
 */
#define WATCH_ATTR (SRV_WATCH_ATTRIB | SRV_WATCH_MODIFY)

/* `kinds` for the object at `path` (its entry and, for a directory,
 * itself): for requests that name an object by path (xattrs). */
static void watch_expect_path(struct srv *s, struct srv_watch_op *op,
			      const char *path, unsigned kinds)
{
	const char *name;
	int dfd;

	if (!op->id)
		return;
	dfd = srv_path_open_parent(&s->root, path, &name);
	if (dfd < 0)
		return;
	srv_watch_expect(s->watch, op, dfd, name, kinds);
	srv_watch_expect_self(s->watch, op, dfd, name, kinds);
	close(dfd);
}

/* A handle about to open `name` in dfd with `qflags`: registered as a
 * writer when it may write (watch.h); 0 otherwise. */
static uint32_t watch_writer(struct srv *s, int dfd, const char *name,
			     uint32_t qflags)
{
	if ((qflags & QFT_O_ACCMODE) == QFT_O_RDONLY &&
	    !(qflags & QFT_O_TRUNC))
		return 0;
	return srv_watch_writer_open(s->watch, dfd, name);
}

static int op_lstat(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	const char *name;
	struct stat st;
	int dfd, r;

	if (*req->path.s == '\0')
		return srv_path_attr_at(s->root.fd, ".", false, &st,
					&rep->attr, NULL);
	dfd = srv_path_open_parent(&s->root, req->path.s, &name);
	if (dfd < 0)
		return dfd;
	r = srv_path_attr_at(dfd, name, s->root.follow, &st, &rep->attr,
			     NULL);
	close(dfd);
	return r;
}

static int op_fstat(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	struct srv_handle *h;
	int r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_ANY, &h)) < 0)
		return r;
	return reply_attr_fd(h->fd, rep);
}

/*
 * Whether `mode` only clears set-id bits a regular file has: what the
 * kernel does for anyone who writes to or truncates a file they may write
 * (and FUSE forwards to us as a chmod from that writer, who need not own
 * the file).
 */
static bool clears_setid_only(const struct stat *st, uint32_t mode)
{
	mode_t old = st->st_mode & 07777, new = (mode_t)(mode & 07777);

	return S_ISREG(st->st_mode) && new != old && !(new & ~old) &&
	       !((old ^ new) & ~(mode_t)(S_ISUID | S_ISGID));
}

/*
 * Clears the set-id bits `bits` of the regular file `proc` names for a
 * caller who may write it but not chmod it: as the server, and nothing
 * else (the mode as it is then, less those bits), so no bit is ever set
 * this way.  Whether the caller may write is the kernel's answer to an
 * open for writing, as the caller (faccessat's AT_EACCESS may be emulated
 * with the process's ids, which are root's).
 */
static int kill_setid(const char *proc, mode_t bits)
{
	struct stat st;
	int fd, r, e;

	fd = open(proc, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -EPERM;
	close(fd);
	r = srv_cred_begin_server();
	if (r == 0 && (stat(proc, &st) < 0 ||
		       chmod(proc, (st.st_mode & 07777) & ~bits) < 0))
		r = -errno;
	e = srv_cred_end_server();
	return e < 0 ? e : r;
}

/*
 * chmod of the object `fd` pins (open or O_PATH).  Linux has no modes on
 * symlinks and fchmod() refuses O_PATH descriptors, so it is changed
 * through its /proc/self/fd link, which reaches exactly that object.
 */
static int chmod_pinned(int fd, uint32_t mode)
{
	char proc[SRV_PROC_FD_MAX];
	struct stat st;
	int r;

	if ((r = srv_path_proc_fd(proc, fd)) < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -EOPNOTSUPP;
	if (chmod(proc, (mode_t)(mode & 07777)) == 0)
		return 0;
	if (errno == EPERM && srv_cred_unprivileged() &&
	    clears_setid_only(&st, mode))
		return kill_setid(proc, (st.st_mode ^ (mode_t)mode) &
				  (S_ISUID | S_ISGID));
	return -errno;
}

/* truncate(2) of the object an O_PATH descriptor pins: a regular file
 * only, never opened (a FIFO or device planted under the name is not). */
static int truncate_pinned(int fd, uint64_t size)
{
	char proc[SRV_PROC_FD_MAX];
	struct stat st;
	int r;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((r = srv_path_proc_fd(proc, fd)) < 0)
		return r;
	return truncate(proc, (off_t)size) < 0 ? -errno : 0;
}

#define SET_TIMES (QFT_SET_ATIME | QFT_SET_MTIME | QFT_SET_ATIME_NOW | \
		   QFT_SET_MTIME_NOW)

static void setattr_times(const struct qft_msg *req, struct timespec ts[2])
{
	ts[0].tv_sec = ts[1].tv_sec = 0;
	ts[0].tv_nsec = ts[1].tv_nsec = UTIME_OMIT;
	if (req->valid & QFT_SET_ATIME_NOW) {
		ts[0].tv_nsec = UTIME_NOW;
	} else if (req->valid & QFT_SET_ATIME) {
		ts[0].tv_sec = (time_t)req->atime.sec;
		ts[0].tv_nsec = req->atime.nsec;
	}
	if (req->valid & QFT_SET_MTIME_NOW) {
		ts[1].tv_nsec = UTIME_NOW;
	} else if (req->valid & QFT_SET_MTIME) {
		ts[1].tv_sec = (time_t)req->mtime.sec;
		ts[1].tv_nsec = req->mtime.nsec;
	}
}

/*
 * Changes are applied in the order chmod, chown, truncate, times, so that
 * an explicit mtime wins over the one the truncate set.
 */
static int setattr_fd(struct srv_handle *h, const struct qft_msg *req,
		      struct qft_msg *rep)
{
	uint32_t v = req->valid;
	struct timespec ts[2];

	int r;

	if ((v & QFT_SET_MODE) && (r = chmod_pinned(h->fd, req->mode)) < 0)
		return r;
	if (v & (QFT_SET_UID | QFT_SET_GID)) {
		uid_t uid = (v & QFT_SET_UID) ? (uid_t)req->uid : (uid_t)-1;
		gid_t gid = (v & QFT_SET_GID) ? (gid_t)req->gid : (gid_t)-1;

		if (fchown(h->fd, uid, gid) < 0)
			return -errno;
	}
	if (v & QFT_SET_SIZE) {
		if (ftruncate(h->fd, (off_t)req->size) < 0)
			return -errno;
		if (h->kind == SRV_H_FILE)
			h->dirty = true;
	}
	if (v & SET_TIMES) {
		setattr_times(req, ts);
		if (futimens(h->fd, ts) < 0)
			return -errno;
	}
	return reply_attr_fd(h->fd, rep);
}

/*
 * `follow`: --follow-symlinks, the change goes to what a symlink leads
 * to, as chmod(1), chown(1) without -h, truncate(1) and touch(1) do.
 * The object is resolved once and pinned (O_PATH), and every change goes
 * to that object: a name swapped for a symlink meanwhile is never
 * followed by a later step (an owner change above all).
 */
static int setattr_at(int dfd, const char *name, bool follow,
		      const struct qft_msg *req, struct qft_msg *rep)
{
	char proc[SRV_PROC_FD_MAX];
	uint32_t v = req->valid;
	struct timespec ts[2];
	struct stat st;
	int fd, r = 0;

	fd = openat(dfd, name, O_PATH | (follow ? 0 : O_NOFOLLOW) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if ((v & QFT_SET_MODE) && (r = chmod_pinned(fd, req->mode)) < 0)
		goto out_close_fd;
	if (v & (QFT_SET_UID | QFT_SET_GID)) {
		uid_t uid = (v & QFT_SET_UID) ? (uid_t)req->uid : (uid_t)-1;
		gid_t gid = (v & QFT_SET_GID) ? (gid_t)req->gid : (gid_t)-1;

		if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0) {
			r = -errno;
			goto out_close_fd;
		}
	}
	if ((v & QFT_SET_SIZE) && (r = truncate_pinned(fd, req->size)) < 0)
		goto out_close_fd;
	if (v & SET_TIMES) {
		setattr_times(req, ts);
		if (fstat(fd, &st) < 0) {
			r = -errno;
		} else if (S_ISLNK(st.st_mode)) {
			/* The magic link would lead to the link's target. */
			if (utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
				r = -errno;
		} else if ((r = srv_path_proc_fd(proc, fd)) == 0 &&
			   utimensat(AT_FDCWD, proc, ts, 0) < 0) {
			r = -errno;
		}
		if (r < 0)
			goto out_close_fd;
	}
	r = reply_attr_at(dfd, name, follow, rep);
out_close_fd:
	close(fd);
	return r;
}

/* By handle when one is given (FUSE's ftruncate), else by path. */
static int op_setattr(struct srv *s, const struct qft_msg *req,
		      struct qft_msg *rep)
{
	struct srv_handle *h;
	const char *name;
	struct srv_watch_op wop;
	int dfd, r;

	if (req->handle) {
		r = srv_handle_get(&s->handles, req->handle, SRV_H_ANY, &h);
		if (r < 0)
			return r;
		srv_watch_begin(s->watch, &wop);
		srv_watch_expect_writer(s->watch, &wop, h->watch_writer,
					WATCH_ATTR);
		srv_watch_expect_fd(s->watch, &wop, h->fd, WATCH_ATTR);
		/* A handle opened read-only has no name here; the path the
		 * client may send along names it, for this only (never to
		 * act on). */
		if (!h->watch_writer && req->path.len)
			watch_expect_path(s, &wop, req->path.s, WATCH_ATTR);
		r = setattr_fd(h, req, rep);
		srv_watch_done(s->watch, &wop);
		return r;
	}
	dfd = srv_path_open_parent(&s->root, req->path.s, &name);
	if (dfd < 0)
		return dfd;
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, dfd, name, WATCH_ATTR);
	srv_watch_expect_self(s->watch, &wop, dfd, name, WATCH_ATTR);
	r = srv_io_fault_name(name);
	if (r == 0)
		r = setattr_at(dfd, name, s->root.follow, req, rep);
	srv_watch_done(s->watch, &wop);
	close(dfd);
	return r;
}

static int op_opendir(struct srv *s, const struct qft_msg *req,
		      struct qft_msg *rep)
{
	struct srv_cred *cred;
	struct srv_handle *h;
	struct stat st;
	DIR *dir;
	int fd, r;

	if ((r = srv_handle_reserve(&s->handles, req->handle, &h)) < 0)
		return r;
	if (s->handles.ndirs >= SRV_MAX_DIRS) {
		set_errmsg(s, rep, "too many open directories (%u)",
			   SRV_MAX_DIRS);
		return -EMFILE;
	}
	cred = srv_cred_hold(s, &r);
	if (r < 0)
		return r;
	fd = srv_path_open(&s->root, req->path.s, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		r = fd;
		goto out_put_cred;
	}
	if (fstat(fd, &st) < 0)
		goto out_close_fd;
	dir = fdopendir(fd);
	if (!dir)
		goto out_close_fd;
	srv_handle_set_dir(&s->handles, h, dir);
	/* The device READDIR shows its entries' inode numbers of. */
	h->dev = (uint64_t)st.st_dev;
	h->ino = (uint64_t)st.st_ino;
	h->cred = cred;
	return 0;
out_close_fd:
	r = -errno;
	close(fd);
out_put_cred:
	srv_cred_put(cred);
	return r;
}

static uint32_t dtype_to_mode(unsigned char t)
{
	switch (t) {
	case DT_REG:  return QFT_S_IFREG;
	case DT_DIR:  return QFT_S_IFDIR;
	case DT_LNK:  return QFT_S_IFLNK;
	case DT_CHR:  return QFT_S_IFCHR;
	case DT_BLK:  return QFT_S_IFBLK;
	case DT_FIFO: return QFT_S_IFIFO;
	case DT_SOCK: return QFT_S_IFSOCK;
	default:      return 0;
	}
}

static bool is_dot_or_dotdot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/*
 * Entries from the handle's stream, resuming at the request's cookie
 * (d_off of the last entry the client has; 0 = the start).  h->dir_pos
 * tracks where the stream stands, so a client reading straight through
 * costs no seek; an entry that does not fit is pushed back with seekdir()
 * so that it comes first in the next reply, and nothing is lost or sent
 * twice.
 */
static int op_readdir(struct srv *s, const struct qft_msg *req,
		      struct qft_msg *rep)
{
	bool plus = req->opflags & QFT_READDIR_PLUS;
	struct qbuf *b = &s->dirents;
	struct srv_watch_key key;
	struct srv_handle *h;
	bool eof = false, watching = false;
	size_t budget;
	int r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_DIR, &h)) < 0)
		return r;
	/* The watch goes in before the entries are read: a change the
	 * listing misses is one the watch sees.  Without the feature the
	 * flag asks for nothing. */
	if ((req->opflags & QFT_READDIR_WATCH) && s->notify) {
		r = srv_watch_add(s->watch, h->fd, &key);
		if (r < 0)
			qft_debug("READDIR: cannot watch the directory: %s",
				  strerror(-r));
		watching = r == 0;
	}
	/* The decoder caps length at QFT_MAX_READDIR, the buffer's limit. */
	budget = (size_t)req->length;
	qbuf_reset(b);

	if ((long)req->offset != h->dir_pos) {
		seekdir(h->dir, (long)req->offset);
		h->dir_pos = (long)req->offset;
	}
	for (;;) {
		struct qft_dirent d;
		struct dirent *de;
		struct stat st;
		bool followed;
		size_t start;

		errno = 0;
		de = readdir(h->dir);
		if (!de) {
			if (errno == 0) {
				eof = true;
				break;
			}
			r = -errno;
			/* Start over from the last good cookie next time. */
			seekdir(h->dir, h->dir_pos);
			if (b->len == 0)
				return r;
			break;
		}
		memset(&d, 0, sizeof(d));
		d.ino = srv_path_ino(h->dev, de->d_ino);
		d.off = (uint64_t)de->d_off;
		d.type = dtype_to_mode(de->d_type);
		d.name.s = de->d_name;
		d.name.len = (uint32_t)strlen(de->d_name);
		/* Clients reject a reply with a name the protocol forbids, so
		 * one such entry (a filesystem with longer names) would hide
		 * the whole directory: leave it out instead. */
		if (!is_dot_or_dotdot(de->d_name) &&
		    !qft_name_valid(d.name.s, d.name.len)) {
			qft_debug("READDIR: skipping an entry whose name the "
				  "protocol cannot carry (%u bytes)",
				  d.name.len);
			h->dir_pos = de->d_off;
			continue;
		}
		/* ".." of the root lies outside it: never look at it. */
		if (plus && !is_dot_or_dotdot(de->d_name) &&
		    srv_path_attr_at(h->fd, de->d_name, s->root.follow, &st,
				     &d.attr, &followed) == 0) {
			d.has_attr = true;
			if (d.type == 0 || followed)
				d.type = st.st_mode & S_IFMT;
		} else if (s->root.follow && d.type == QFT_S_IFLNK &&
			   fstatat(h->fd, de->d_name, &st, 0) == 0) {
			/* Without PLUS too: the type of what it leads to
			 * (one that leads nowhere stays a link). */
			d.type = st.st_mode & S_IFMT;
		}
		start = b->len;
		r = qft_dirent_encode(b, &d);
		if (r == 0 && b->len > budget) {
			b->len = start;
			r = -EMSGSIZE;
		}
		if (r < 0) {
			seekdir(h->dir, h->dir_pos);
			if (b->len > 0)
				break;
			/* Not even one entry fits: EINVAL, like getdents(2). */
			return r == -EMSGSIZE ? -EINVAL : r;
		}
		h->dir_pos = de->d_off;
	}
	rep->opflags = eof ? QFT_READDIR_EOF : 0;
	/* Evicted meanwhile (by the other connection's listing): GONE is
	 * on its way, and the reply must not promise the opposite. */
	if (watching && srv_watch_holds(s->watch, &key))
		rep->opflags |= QFT_READDIR_WATCHED;
	rep->data.p = b->data;
	rep->data.len = (uint32_t)b->len;
	return 0;
}

static int op_mkdir(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	struct srv_watch_op wop;
	int dfd, r;

	dfd = srv_path_open_dir(&s->root, req->path.s);
	if (dfd < 0)
		return dfd;
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, dfd, req->name.s, SRV_WATCH_CREATE);
	if (mkdirat(dfd, req->name.s, req->mode & 07777) < 0)
		r = -errno;
	else
		r = reply_attr_at(dfd, req->name.s, false, rep);
	srv_watch_done(s->watch, &wop);
	close(dfd);
	return r;
}

static int remove_entry(struct srv *s, const struct qft_msg *req, int flags)
{
	struct srv_watch_op wop;
	int dfd, r = 0;

	dfd = srv_path_open_dir(&s->root, req->path.s);
	if (dfd < 0)
		return dfd;
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, dfd, req->name.s, SRV_WATCH_DELETE);
	if (unlinkat(dfd, req->name.s, flags) < 0)
		r = -errno;
	srv_watch_done(s->watch, &wop);
	close(dfd);
	return r;
}

static int op_rmdir(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	return remove_entry(s, req, AT_REMOVEDIR);
}

static int op_unlink(struct srv *s, const struct qft_msg *req,
		     struct qft_msg *rep)
{
	return remove_entry(s, req, 0);
}

/*
 * Completes OPEN and CREATE: the handle gets the descriptor and the
 * identity it was opened as (`cred`, taken over).  Only regular files
 * and directories get here, and only a dangling symlink's new target
 * (--follow-symlinks) is opened with O_NONBLOCK, which a regular file
 * then loses.
 */
static int finish_open(struct srv_handle *h, int fd, uint32_t qflags,
		       struct srv_cred *cred, struct qft_msg *rep)
{
	struct stat st;
	int fl, r;

	if (fstat(fd, &st) < 0)
		goto out_close_fd;
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		fl = fcntl(fd, F_GETFL);
		if (fl < 0 || ((fl & O_NONBLOCK) &&
			       fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
			goto out_close_fd;
	}
	srv_path_attr_from_stat(&rep->attr, &st);
	srv_handle_set_file(h, fd);
	h->cred = cred;
	/* Truncating changed the file as much as a write would. */
	h->dirty = (qflags & QFT_O_TRUNC) &&
		   (qflags & QFT_O_ACCMODE) != QFT_O_RDONLY;
	h->regular = S_ISREG(st.st_mode);
	h->append = qflags & QFT_O_APPEND;
	h->lazy = qflags & QFT_O_LAZY;
	if (h->lazy)
		qft_debug("lazy handle: no write-out behind its WRITEs");
	h->dev = (uint64_t)st.st_dev;
	h->ino = (uint64_t)st.st_ino;
	return 0;
out_close_fd:
	r = -errno;
	close(fd);
	srv_cred_put(cred);
	return r;
}

/* The open flags of OPEN and CREATE, beyond what the decoder checks. */
static int check_oflags(const struct srv *s, uint32_t qflags)
{
	/* As an older server would: the bit means nothing unless agreed. */
	if ((qflags & QFT_O_LAZY) && !s->lazy)
		return -EINVAL;
	return 0;
}

/* Attempts at a CREATE whose name keeps appearing and vanishing. */
#define CREATE_TRIES 8

/*
 * --follow-symlinks: O_CREAT through the dangling symlink `name`, which
 * makes its target wherever it points, as the server user's own open(2)
 * would.  No O_EXCL is possible through a link, so what was opened is
 * checked after: anything but a regular file (a FIFO or device that
 * appeared there meanwhile) is closed at once.
 */
static int create_through_link(int dfd, const char *name, int flags,
			       mode_t mode)
{
	struct stat st;
	int fd;

	fd = openat(dfd, name, flags | O_CREAT | O_NONBLOCK, mode);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENXIO;
	}
	return fd;
}

/*
 * The name exists: opened as OPEN would open it (O_CREAT's meaning for an
 * existing name), never a device or FIFO, or -ENOENT when it went away
 * again.
 */
static int open_existing(const struct srv *s, int dfd, const char *name,
			 int flags, mode_t mode)
{
	struct stat st;
	int pin, fd;

	pin = openat(dfd, name, O_PATH | (s->root.follow ? 0 : O_NOFOLLOW) |
		     O_CLOEXEC);
	if (pin < 0) {
		int r = -errno;

		if (r == -ENOENT && s->root.follow &&
		    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(st.st_mode))
			return create_through_link(dfd, name, flags, mode);
		return r;
	}
	fd = srv_path_reopen_at(pin, flags, dfd, name, s->root.follow);
	close(pin);
	return fd;
}

/*
 * CREATE opens with O_EXCL always, so that it knows it made the file (a
 * regular file, never anything else); only when the client did not ask
 * for O_EXCL does an existing name get opened instead, as OPEN would,
 * and as the caller, who may be refused.  A name that vanishes between
 * the two is tried again, a few times (then ENOENT: it keeps vanishing).
 */
static int create_open(const struct srv *s, int dfd, const char *name,
		       uint32_t qflags, mode_t mode)
{
	int flags = qft_oflags_to_host(qflags) | O_NOCTTY | O_CLOEXEC;

	for (int i = 1;; i++) {
		int fd = openat(dfd, name, flags | O_CREAT | O_EXCL |
				O_NOFOLLOW, mode);

		if (fd >= 0)
			return fd;
		if (errno != EEXIST || (qflags & QFT_O_EXCL))
			return -errno;
		fd = open_existing(s, dfd, name, flags, mode);
		if (fd != -ENOENT || i == CREATE_TRIES)
			return fd;
	}
}

static int op_create(struct srv *s, const struct qft_msg *req,
		     struct qft_msg *rep)
{
	struct srv_watch_op wop;
	struct srv_cred *cred;
	struct srv_handle *h;
	uint32_t writer;
	int dfd, fd, r;

	if ((r = check_oflags(s, req->opflags)) < 0 ||
	    (r = srv_handle_reserve(&s->handles, req->handle, &h)) < 0)
		return r;
	dfd = srv_path_open_dir(&s->root, req->path.s);
	if (dfd < 0)
		return dfd;
	cred = srv_cred_hold(s, &r);
	if (r < 0) {
		close(dfd);
		return r;
	}
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, dfd, req->name.s, SRV_WATCH_CREATE |
			 (req->opflags & QFT_O_TRUNC ? SRV_WATCH_MODIFY : 0));
	writer = watch_writer(s, dfd, req->name.s, req->opflags);
	fd = create_open(s, dfd, req->name.s, req->opflags,
			 (mode_t)(req->mode & 07777));
	srv_watch_done(s->watch, &wop);
	close(dfd);
	if (fd < 0) {
		r = fd;
		srv_cred_put(cred);
		goto out_writer;
	}
	r = finish_open(h, fd, req->opflags, cred, rep);
	if (r == 0) {
		h->watch_writer = writer;
		return 0;
	}
out_writer:
	srv_watch_writer_close(s->watch, writer);
	return r;
}

/*
 * The first `length` bytes of a file just opened, for the OPEN reply.  A
 * failure only leaves QFT_OPEN_DATA clear: the open itself succeeded,
 * and the client READs (and meets the error, if it lasts) as it would
 * have anyway.  OPEN is not a request the engine takes (xfer.h), so the
 * loop drained it first: this read sees every WRITE received before the
 * OPEN, on any handle, and none received after it.
 */
static void open_data(struct srv *s, const struct srv_handle *h,
		      uint64_t length, struct qft_msg *rep)
{
	ssize_t n;
	int r;

	/* The decoder caps length at QFT_MAX_DATA. */
	if ((r = data_reserve(s, (size_t)length)) < 0) {
		qft_debug("OPEN: no first data: %s", strerror(-r));
		return;
	}
	n = srv_io_read(h->fd, s->data, (size_t)length, 0);
	if (n < 0) {
		qft_debug("OPEN: no first data: %s", strerror((int)-n));
		return;
	}
	rep->opflags = QFT_OPEN_DATA;
	if ((uint64_t)n < length)
		rep->opflags |= QFT_OPEN_EOF;
	rep->data.p = s->data;
	rep->data.len = (uint32_t)n;
}

static int op_open(struct srv *s, const struct qft_msg *req,
		   struct qft_msg *rep)
{
	struct srv_watch_op wop;
	struct srv_cred *cred;
	struct srv_handle *h;
	const char *base;
	uint32_t writer = 0;
	int fd, r;

	if ((r = check_oflags(s, req->opflags)) < 0 ||
	    (r = srv_handle_reserve(&s->handles, req->handle, &h)) < 0)
		return r;
	cred = srv_cred_hold(s, &r);
	if (r < 0)
		return r;
	srv_watch_begin(s->watch, &wop);
	if (srv_watch_on(s->watch) &&
	    ((req->opflags & QFT_O_ACCMODE) != QFT_O_RDONLY ||
	     (req->opflags & QFT_O_TRUNC))) {
		/* What the writes will look like: the entry's name in its
		 * directory (one more confined walk, for writers only). */
		const char *name;
		int dfd = srv_path_open_parent(&s->root, req->path.s, &name);

		if (dfd >= 0) {
			if (req->opflags & QFT_O_TRUNC)
				srv_watch_expect(s->watch, &wop, dfd, name,
						 SRV_WATCH_MODIFY);
			writer = watch_writer(s, dfd, name, req->opflags);
			close(dfd);
		}
	}
	/* The flag map has no O_CREAT: OPEN never creates.  Only regular
	 * files and directories are opened (srv_path_reopen). */
	base = strrchr(req->path.s, '/');
	fd = srv_io_fault_name(base ? base + 1 : req->path.s);
	if (fd == 0)
		fd = srv_path_open_data(&s->root, req->path.s,
					qft_oflags_to_host(req->opflags));
	srv_watch_done(s->watch, &wop);
	if (fd < 0) {
		srv_cred_put(cred);
		srv_watch_writer_close(s->watch, writer);
		return fd;
	}
	/* A noatime mount: its reads leave the access time (executing a
	 * program too).  Refused (EPERM) for a file neither the server's
	 * user nor the caller owns without CAP_FOWNER: read as before. */
	if (s->noatime && (req->opflags & QFT_O_ACCMODE) != QFT_O_WRONLY) {
		int fl = fcntl(fd, F_GETFL);

		if (fl >= 0)
			(void)fcntl(fd, F_SETFL, fl | O_NOATIME);
	}
	r = finish_open(h, fd, req->opflags, cred, rep);
	if (r < 0) {
		srv_watch_writer_close(s->watch, writer);
		return r;
	}
	h->watch_writer = writer;
	/* Only regular files: a directory has no data to read. */
	if (req->length && h->regular &&
	    (req->opflags & QFT_O_ACCMODE) != QFT_O_WRONLY)
		open_data(s, h, req->length, rep);
	return 0;
}

static int op_read(struct srv *s, const struct qft_msg *req,
		   struct qft_msg *rep)
{
	struct srv_handle *h;
	uint64_t len = req->length;
	ssize_t n;
	int r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h)) < 0)
		return r;
	/* The decoder bounds length and offset separately, not their sum. */
	if (len > (uint64_t)INT64_MAX - req->offset)
		len = (uint64_t)INT64_MAX - req->offset;
	if ((r = data_reserve(s, (size_t)len)) < 0)
		return r;
	n = srv_io_read(h->fd, s->data, (size_t)len, req->offset);
	if (n < 0)
		return (int)n;
	rep->data.p = s->data;
	rep->data.len = (uint32_t)n;
	return 0;
}

static int op_write(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	struct srv_handle *h;
	ssize_t n;
	int r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h)) < 0)
		return r;
	if (req->data.len == 0)
		return 0;
	/* Even a failed write may have changed part of the file. */
	h->dirty = true;
	n = srv_io_write(h->fd, req->data.p, req->data.len, req->offset);
	if (n < 0) {
		/* Kept for FLUSH too, so close() fails even when the client
		 * let this reply go by (write-behind). */
		if (h->err == 0)
			h->err = (int)n;
		return (int)n;
	}
	rep->count = (uint64_t)n;
	return 0;
}

/* A sync for the pulse's worker (pulse.h): what it syncs, and how. */
struct sync_job {
	int fd;
	bool datasync;
	bool fs;        /* syncfs(2) of fd's file system */
};

static int sync_job_run(void *arg)
{
	const struct sync_job *j = arg;

	if (j->fs)
		return syncfs(j->fd) < 0 ? -errno : 0;
	return srv_io_sync(j->fd, j->datasync);
}

/*
 * The sync of request `req`, which takes as long as the storage needs:
 * PROGRESS frames meanwhile, where the client asked for them.
 */
static int sync_pulsed(struct srv *s, const struct qft_msg *req, int fd,
		       bool datasync, bool fs)
{
	struct sync_job j = { .fd = fd, .datasync = datasync, .fs = fs };

	return srv_pulse_run(s->pulse, req->id, sync_job_run, &j);
}

static int op_flush(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	struct srv_handle *h;
	int err, r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h)) < 0)
		return r;
	err = h->err;
	h->err = 0;
	if (h->dirty && !(req->opflags & QFT_FLUSH_NOSYNC)) {
		r = sync_pulsed(s, req, h->fd, true, false);
		if (r == 0)
			h->dirty = false;
	}
	if (err || r)
		return err ? err : r;
	/* Size and times after every write: what close() leaves behind, so
	 * the client need not ask again. */
	return reply_attr_fd(h->fd, rep);
}

static int op_fsync(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	struct srv_handle *h;
	int r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_ANY, &h)) < 0)
		return r;
	r = sync_pulsed(s, req, h->fd, req->opflags & QFT_FSYNC_DATASYNC,
			false);
	if (r == 0)
		h->dirty = false;
	return r;
}

static int op_close(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	struct srv_handle *h;
	uint32_t writer = 0;
	int r;

	if (srv_handle_get(&s->handles, req->handle, SRV_H_ANY, &h) == 0)
		writer = h->watch_writer;
	/* An open file's OFD and flock locks end with it (lock.h). */
	srv_lock_handle_closed(&s->locks, req->handle);
	r = srv_handle_close(&s->handles, req->handle);
	/* After close(2): its IN_CLOSE_WRITE is queued by now. */
	srv_watch_writer_close(s->watch, writer);
	return r;
}

/* Whether two names are links of one inode (neither followed). */
static bool same_inode(int d1, const char *n1, int d2, const char *n2)
{
	struct stat a, b;

	return fstatat(d1, n1, &a, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fstatat(d2, n2, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int op_rename(struct srv *s, const struct qft_msg *req,
		     struct qft_msg *rep)
{
	unsigned int flags = 0;
	bool xchg = req->opflags & QFT_RENAME_EXCHANGE;
	struct srv_watch_op wop;
	int d1, d2, r = 0;

	if (req->opflags & QFT_RENAME_NOREPLACE)
		flags |= RENAME_NOREPLACE;
	if (req->opflags & QFT_RENAME_EXCHANGE)
		flags |= RENAME_EXCHANGE;
	d1 = srv_path_open_dir(&s->root, req->path.s);
	if (d1 < 0)
		return d1;
	d2 = srv_path_open_dir(&s->root, req->path2.s);
	if (d2 < 0) {
		r = d2;
		goto out_close_d1;
	}
	/*
	 * Two links of one inode: rename(2) succeeds and changes nothing,
	 * so no event will come to meet an expectation, and no writer
	 * registration moves.
	 */
	if (!flags && same_inode(d1, req->name.s, d2, req->name2.s))
		goto out_close_d2;
	/* An exchange moves each name both ways. */
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, d1, req->name.s,
			 SRV_WATCH_MOVED_FROM |
			 (xchg ? SRV_WATCH_MOVED_TO : 0));
	srv_watch_expect(s->watch, &wop, d2, req->name2.s,
			 SRV_WATCH_MOVED_TO |
			 (xchg ? SRV_WATCH_MOVED_FROM : 0));
	r = srv_io_fault_name(req->name2.s);
	if (r == 0 && renameat2(d1, req->name.s, d2, req->name2.s, flags) < 0)
		r = -errno;
	srv_watch_done(s->watch, &wop);
	if (r == 0)
		srv_watch_renamed(s->watch, d1, req->name.s, d2, req->name2.s,
				  xchg);
out_close_d2:
	close(d2);
out_close_d1:
	close(d1);
	return r;
}

static int op_symlink(struct srv *s, const struct qft_msg *req,
		      struct qft_msg *rep)
{
	struct srv_watch_op wop;
	int dfd, r;

	dfd = srv_path_open_dir(&s->root, req->path.s);
	if (dfd < 0)
		return dfd;
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, dfd, req->name.s, SRV_WATCH_CREATE);
	/* The target is stored verbatim and never resolved here. */
	if (symlinkat(req->target.s, dfd, req->name.s) < 0)
		r = -errno;
	else
		r = reply_attr_at(dfd, req->name.s, false, rep);
	srv_watch_done(s->watch, &wop);
	close(dfd);
	return r;
}

static int op_readlink(struct srv *s, const struct qft_msg *req,
		       struct qft_msg *rep)
{
	const char *name;
	ssize_t n;
	int dfd, r = 0;

	dfd = srv_path_open_parent(&s->root, req->path.s, &name);
	if (dfd < 0)
		return dfd;
	n = readlinkat(dfd, name, s->link, sizeof(s->link));
	if (n < 0)
		r = -errno;
	else if ((size_t)n >= sizeof(s->link))
		r = -ENAMETOOLONG;  /* may be cut: never hand out a prefix */
	else if (n == 0)
		r = -EIO;           /* the protocol has no empty targets */
	close(dfd);
	if (r < 0)
		return r;
	rep->target.s = s->link;
	rep->target.len = (uint32_t)n;
	return 0;
}

static int op_link(struct srv *s, const struct qft_msg *req,
		   struct qft_msg *rep)
{
	struct srv_watch_op wop;
	const char *name;
	int d1, d2, r;

	d1 = srv_path_open_parent(&s->root, req->path.s, &name);
	if (d1 < 0)
		return d1;
	d2 = srv_path_open_dir(&s->root, req->path2.s);
	if (d2 < 0) {
		r = d2;
		goto out_close_d1;
	}
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, d2, req->name2.s, SRV_WATCH_CREATE);
	/* The source's link count changes too (an attribute). */
	srv_watch_expect(s->watch, &wop, d1, name, SRV_WATCH_ATTRIB);
	/* No AT_SYMLINK_FOLLOW: a symlink source is linked, not followed.
	 * Under --follow-symlinks the client saw what it leads to, and a
	 * second name for the link itself would resolve its relative target
	 * from another directory: the object is linked, as by `ln -L`. */
	if (linkat(d1, name, d2, req->name2.s,
		   s->root.follow ? AT_SYMLINK_FOLLOW : 0) < 0)
		r = -errno;
	else
		r = reply_attr_at(d2, req->name2.s, s->root.follow, rep);
	srv_watch_done(s->watch, &wop);
	close(d2);
out_close_d1:
	close(d1);
	return r;
}

static int op_statfs(struct srv *s, const struct qft_msg *req,
		     struct qft_msg *rep)
{
	struct statvfs v;
	int fd, r = 0;

	fd = srv_path_open_object(&s->root, req->path.s);
	if (fd < 0)
		return fd;
	if (fstatvfs(fd, &v) < 0)
		r = -errno;
	else
		qft_statfs_from_host(&rep->st, &v);
	close(fd);
	return r;
}

/*
 * `qftfs --sync` and the unmount of a commit=async mount: everything
 * written through this server made durable at once, instead of an
 * fdatasync per file.  syncfs(2) needs a descriptor that is not O_PATH.
 */
static int op_syncfs(struct srv *s, const struct qft_msg *req,
		     struct qft_msg *rep)
{
	int fd, r = 0;

	fd = openat(s->root.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = sync_pulsed(s, req, fd, false, true);
	close(fd);
	return r;
}

static int op_fallocate(struct srv *s, const struct qft_msg *req,
			struct qft_msg *rep)
{
	struct srv_handle *h;
	int mode = 0, r;

	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h)) < 0)
		return r;
	/* Linux refuses a hole punch that would change the size. */
	if ((req->opflags & QFT_FALLOC_PUNCH_HOLE) &&
	    !(req->opflags & QFT_FALLOC_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (req->opflags & QFT_FALLOC_KEEP_SIZE)
		mode |= FALLOC_FL_KEEP_SIZE;
	if (req->opflags & QFT_FALLOC_PUNCH_HOLE)
		mode |= FALLOC_FL_PUNCH_HOLE;
	if (req->opflags & QFT_FALLOC_ZERO_RANGE)
		mode |= FALLOC_FL_ZERO_RANGE;
	if (fallocate(h->fd, mode, (off_t)req->offset, (off_t)req->length) < 0)
		return -errno;
	h->dirty = true;
	return 0;
}

/*
 * Extended attributes have no descriptor form for O_PATH descriptors and
 * the l*xattr calls take paths, so the object is opened confined (not
 * following a final symlink) and reached through /proc/self/fd/N.
 */
static int xattr_open(struct srv *s, const char *path,
		      char proc[SRV_PROC_FD_MAX])
{
	int fd;

	/* Checked before anything is opened. */
	if (!srv_procfs_ok())
		return -EOPNOTSUPP;
	fd = srv_path_open_object(&s->root, path);
	if (fd >= 0)
		(void)srv_path_proc_fd(proc, fd);
	return fd;
}

/* Shared by GETXATTR and LISTXATTR: length 0 asks only for the size. */
static int xattr_reply(struct srv *s, const struct qft_msg *req,
		       struct qft_msg *rep, bool list)
{
	char proc[SRV_PROC_FD_MAX];
	size_t len = (size_t)req->length;
	ssize_t n;
	int fd, r = 0;

	if (len && (r = data_reserve(s, len)) < 0)
		return r;
	fd = xattr_open(s, req->path.s, proc);
	if (fd < 0)
		return fd;
	if (list)
		n = listxattr(proc, len ? (char *)s->data : NULL, len);
	else
		n = getxattr(proc, req->xname.s, len ? s->data : NULL, len);
	if (n < 0) {
		r = -errno;
	} else {
		rep->count = (uint64_t)n;
		if (len) {
			rep->data.p = s->data;
			rep->data.len = (uint32_t)n;
		}
	}
	close(fd);
	return r;
}

static int op_getxattr(struct srv *s, const struct qft_msg *req,
		       struct qft_msg *rep)
{
	return xattr_reply(s, req, rep, false);
}

static int op_listxattr(struct srv *s, const struct qft_msg *req,
			struct qft_msg *rep)
{
	return xattr_reply(s, req, rep, true);
}

static int op_setxattr(struct srv *s, const struct qft_msg *req,
		       struct qft_msg *rep)
{
	char proc[SRV_PROC_FD_MAX];
	struct srv_watch_op wop;
	int flags = 0, fd, r = 0;

	if (req->data.len > QFT_MAX_XATTR_SIZE)
		return -E2BIG;
	if (req->opflags & QFT_XATTR_CREATE)
		flags |= XATTR_CREATE;
	if (req->opflags & QFT_XATTR_REPLACE)
		flags |= XATTR_REPLACE;

	fd = xattr_open(s, req->path.s, proc);
	if (fd < 0)
		return fd;
	srv_watch_begin(s->watch, &wop);
	watch_expect_path(s, &wop, req->path.s, SRV_WATCH_ATTRIB);
	if (setxattr(proc, req->xname.s, req->data.p, req->data.len,
		     flags) < 0)
		r = -errno;
	srv_watch_done(s->watch, &wop);
	close(fd);
	return r;
}

static int op_removexattr(struct srv *s, const struct qft_msg *req,
			  struct qft_msg *rep)
{
	char proc[SRV_PROC_FD_MAX];
	struct srv_watch_op wop;
	int fd, r = 0;

	fd = xattr_open(s, req->path.s, proc);
	if (fd < 0)
		return fd;
	srv_watch_begin(s->watch, &wop);
	watch_expect_path(s, &wop, req->path.s, SRV_WATCH_ATTRIB);
	if (removexattr(proc, req->xname.s) < 0)
		r = -errno;
	srv_watch_done(s->watch, &wop);
	close(fd);
	return r;
}

static int op_mknod(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	uint32_t type = req->mode & QFT_S_IFMT;
	struct srv_watch_op wop;
	int dfd, r;

	/*
	 * A device node under the root is a door out of it (a block device
	 * holds whole file systems), so it is made only where whoever
	 * started the server allowed it -- and never opened for data
	 * either way (srv_path_reopen).
	 */
	if ((type == QFT_S_IFBLK || type == QFT_S_IFCHR) &&
	    !s->allow_devices) {
		set_errmsg(s, rep, "this server makes no device nodes (it was "
			   "not started with --allow-devices)");
		return -EPERM;
	}
	dfd = srv_path_open_dir(&s->root, req->path.s);
	if (dfd < 0)
		return dfd;
	srv_watch_begin(s->watch, &wop);
	srv_watch_expect(s->watch, &wop, dfd, req->name.s, SRV_WATCH_CREATE);
	if (mknodat(dfd, req->name.s, (mode_t)req->mode,
		    type == QFT_S_IFBLK || type == QFT_S_IFCHR ?
		    (dev_t)req->rdev : 0) < 0)
		r = -errno;
	else
		r = reply_attr_at(dfd, req->name.s, false, rep);
	srv_watch_done(s->watch, &wop);
	close(dfd);
	return r;
}

/*
 * The next records of the scan of a directory handle (scan.h).  Runs
 * after the engine drained, like everything but READ and WRITE, so it
 * sees every earlier change made through this connection.
 */
static int op_scan(struct srv *s, const struct qft_msg *req,
		   struct qft_msg *rep)
{
	struct srv_handle *h;
	struct qbuf b;
	size_t budget;
	int r;

	/* A file handle, or none, is EBADF like READDIR on one. */
	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_DIR, &h)) < 0)
		return r;
	/* The decoder caps length at QFT_MAX_SCAN. */
	budget = (size_t)req->length;
	if ((r = data_reserve(s, budget)) < 0)
		return r;
	/* A view of s->data that can never grow past the budget (limit ==
	 * cap), so the records are built where the reply sends them from. */
	memset(&b, 0, sizeof(b));
	b.data = s->data;
	b.cap = budget;
	b.limit = budget;
	r = srv_scan_step(&s->handles, h,
			  (req->opflags & QFT_SCAN_WATCH) && s->notify ?
			  s->watch : NULL, s->root.follow, &b, &rep->opflags);
	if (r == -EMSGSIZE) {
		set_errmsg(s, rep, "SCAN budget of %zu bytes holds no record",
			   budget);
		return -EINVAL;
	}
	if (r < 0)
		return r;
	rep->data.p = b.data;
	rep->data.len = (uint32_t)b.len;
	return 0;
}

/* Walk-ahead: several small files' contents (walk.h). */
static int op_fetch(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	struct qbuf b;
	int r;

	if ((r = data_reserve(s, SRV_WALK_OUT_MAX)) < 0)
		return r;
	memset(&b, 0, sizeof(b));
	b.data = s->data;
	b.cap = SRV_WALK_OUT_MAX;
	b.limit = SRV_WALK_OUT_MAX;
	if ((r = srv_walk_fetch(&s->root, req, s->noatime, &b)) < 0)
		return r;
	rep->data.p = b.data;
	rep->data.len = (uint32_t)b.len;
	return 0;
}

/* The client forgets a watched directory; ending nothing is no error
 * (the watch may have ended with GONE just before). */
static int op_unwatch(struct srv *s, const struct qft_msg *req,
		      struct qft_msg *rep)
{
	srv_watch_remove(s->watch, req->ino);
	return 0;
}

/* The client's keepalive: answering is the whole point. */
static int op_ping(struct srv *s, const struct qft_msg *req,
		   struct qft_msg *rep)
{
	return 0;
}

/* Locks (lock.h): only where HELLO agreed on them. */
static int op_lock(struct srv *s, const struct qft_msg *req,
		   struct qft_msg *rep)
{
	return s->locks_on ? srv_lock_set(s, req, rep) : -ENOSYS;
}

static int op_getlk(struct srv *s, const struct qft_msg *req,
		    struct qft_msg *rep)
{
	return s->locks_on ? srv_lock_get(s, req, rep) : -ENOSYS;
}

static const op_fn handlers[QFT_OP__COUNT] = {
	[QFT_OP_HELLO]       = op_hello,
	[QFT_OP_LSTAT]       = op_lstat,
	[QFT_OP_FSTAT]       = op_fstat,
	[QFT_OP_SETATTR]     = op_setattr,
	[QFT_OP_OPENDIR]     = op_opendir,
	[QFT_OP_READDIR]     = op_readdir,
	[QFT_OP_MKDIR]       = op_mkdir,
	[QFT_OP_RMDIR]       = op_rmdir,
	[QFT_OP_UNLINK]      = op_unlink,
	[QFT_OP_CREATE]      = op_create,
	[QFT_OP_OPEN]        = op_open,
	[QFT_OP_READ]        = op_read,
	[QFT_OP_WRITE]       = op_write,
	[QFT_OP_FLUSH]       = op_flush,
	[QFT_OP_FSYNC]       = op_fsync,
	[QFT_OP_CLOSE]       = op_close,
	[QFT_OP_RENAME]      = op_rename,
	[QFT_OP_SYMLINK]     = op_symlink,
	[QFT_OP_READLINK]    = op_readlink,
	[QFT_OP_LINK]        = op_link,
	[QFT_OP_STATFS]      = op_statfs,
	[QFT_OP_FALLOCATE]   = op_fallocate,
	[QFT_OP_GETXATTR]    = op_getxattr,
	[QFT_OP_SETXATTR]    = op_setxattr,
	[QFT_OP_LISTXATTR]   = op_listxattr,
	[QFT_OP_REMOVEXATTR] = op_removexattr,
	[QFT_OP_MKNOD]       = op_mknod,
	[QFT_OP_PING]        = op_ping,
	[QFT_OP_SCAN]        = op_scan,
	[QFT_OP_UNWATCH]     = op_unwatch,
	[QFT_OP_SYNCFS]      = op_syncfs,
	[QFT_OP_BYE]         = op_bye,
	[QFT_OP_COPY]        = srv_copy_op,
	[QFT_OP_SEEK]        = srv_copy_seek,
	[QFT_OP_LOCK]        = op_lock,
	[QFT_OP_GETLK]       = op_getlk,
	[QFT_OP_FETCH]       = op_fetch,
};

static int send_reply(struct srv *s, const struct qft_msg *rep)
{
#ifdef QFT_FAULT_INJECTION
	const char *cut;
#endif
	int r;

	qbuf_reset(&s->out);
	r = qft_msg_encode(&s->out, rep);
	if (r < 0) {
		/* Handlers bound every field, so only a bug gets here; the
		 * client still gets an answer instead of waiting forever. */
		struct qft_msg err;

		qft_err("cannot encode %s reply: %s", qft_op_name(rep->op),
			strerror(-r));
		qft_msg_init(&err, rep->op, rep->id);
		err.flags = QFT_F_REPLY;
		err.status = QFT_EIO;
		qbuf_reset(&s->out);
		if ((r = qft_msg_encode(&s->out, &err)) < 0)
			return r;
	}
	if (s->replay && rep->op != QFT_OP_HELLO)
		srv_replay_store(s->replay, rep, s->out.data, s->out.len);
#ifdef QFT_FAULT_INJECTION
	if (srv_replay_fault_stop(rep->op)) {
		qft_warn("fault injection: stopping before the reply to %s "
			 "id %llu", qft_op_name(rep->op),
			 (unsigned long long)rep->id);
		raise(SIGSTOP);
	}
	if (s->replay && !s->link_dead &&
	    (cut = srv_replay_fault_cut(s->replay, rep->op, rep->id))) {
		qft_warn("fault injection: %s the reply to %s id %llu and "
			 "cutting the %s connection", cut,
			 qft_op_name(rep->op), (unsigned long long)rep->id,
			 s->is_meta ? "meta" : "bulk");
		srv_op_link_down(s);
		return 0;
	}
#endif
	/* A resumable lane whose connection died keeps the reply for the
	 * RESUME and goes on finishing what it received. */
	if (s->link_dead)
		return 0;
	r = qft_chan_send(&s->chan, s->out.data, s->out.len);
	if (r < 0 && s->replay) {
		qft_debug("cannot send the reply to %s id %llu: %s; kept",
			  qft_op_name(rep->op), (unsigned long long)rep->id,
			  strerror(-r));
		srv_op_link_down(s);
		return 0;
	}
	if (r < 0)
		qft_err("closing connection: cannot send reply: %s",
			strerror(-r));
	return r;
}

void srv_op_link_down(struct srv *s)
{
	if (s->link_dead)
		return;
	s->link_dead = true;
	/* The receive ends too, so the loop detaches the lane. */
	qft_chan_shutdown(&s->chan);
}

int srv_op_reply(struct srv *s, const struct qft_msg *rep)
{
	return send_reply(s, rep);
}

int srv_op_reply_error(struct srv *s, uint16_t op, uint64_t id, int err,
		       const char *msg)
{
	struct qft_msg rep;

	qft_msg_init(&rep, op, id);
	rep.flags = QFT_F_REPLY;
	rep.status = qft_status_from_errno(err);
	if (msg) {
		rep.errmsg.s = msg;
		rep.errmsg.len = (uint32_t)strlen(msg);
	}
	return send_reply(s, &rep);
}

int srv_op_dispatch(struct srv *s, const struct qft_msg *req)
{
	struct qft_msg rep;
	int r;

	if (!s->hello_done && req->op != QFT_OP_HELLO) {
		qft_err("closing connection: %s before HELLO",
			qft_op_name(req->op));
		return -EPROTO;
	}
	/* Answered by a switch of the channel, never kept for a replay. */
	if (req->op == QFT_OP_STRIPE) {
		r = srv_resume_stripe(s, req);
		if (r != -EPIPE)
			return r;
		srv_op_link_down(s);
		return 0;
	}
	qft_msg_init_reply(&rep, req);
	/* The decoder accepts only known opcodes, all of which are here. */
	if (req->op < QFT_OP__COUNT && handlers[req->op])
		r = handlers[req->op](s, req, &rep);
	else
		r = -ENOSYS;
	if (r < 0)
		rep.status = qft_status_from_errno(-r);
	qft_debug("%s id %llu: %s", qft_op_name(req->op),
		  (unsigned long long)req->id, r < 0 ? strerror(-r) : "ok");
	if ((r = send_reply(s, &rep)) < 0)
		return r;
	return s->fatal;
}
