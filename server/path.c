// SPDX-License-Identifier: MIT
/* Confined path resolution (see path.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#endif

#include "log.h"
#include "msg.h"
#include "path.h"
#include "procfs.h"
#include "protocol.h"

/*
 * The served root's device, for srv_path_ino: set by srv_path_init, which
 * runs before the session's threads start; a process serves one root.
 */
static uint64_t root_dev;
static bool root_dev_known;

/* openat2 fails with EAGAIN when a rename races with a RESOLVE_BENEATH
 * lookup; retrying is what the man page recommends. */
#define OPENAT2_RETRIES 16

#if defined(HAVE_LINUX_OPENAT2_H) && defined(SYS_openat2)
static int do_openat2(int dirfd, const char *path, int flags)
{
	struct open_how how;

	/* open(2) adds O_LARGEFILE by itself on 32-bit systems; the raw
	 * system call does not.  O_PATH refuses it, and needs none. */
	if (!(flags & O_PATH))
		flags |= O_LARGEFILE;
	memset(&how, 0, sizeof(how));
	how.flags = (unsigned long long)flags;
	/* No symlink on the way, as the walk below: the client's kernel
	 * resolves the links it is shown, so a path that meets one here
	 * met a name replaced since (path.h). */
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
	for (int i = 0; i < OPENAT2_RETRIES; i++) {
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

		if (fd >= 0)
			return (int)fd;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	return -EAGAIN;
}
#else
static int do_openat2(int dirfd, const char *path, int flags)
{
	return -ENOSYS;
}
#endif

static int do_openat(int dirfd, const char *path, int flags)
{
	for (;;) {
		int fd = openat(dirfd, path, flags);

		if (fd >= 0)
			return fd;
		if (errno != EINTR)
			return -errno;
	}
}

void srv_path_init(struct srv_root *r, int root_fd, bool force_walk)
{
	struct stat st;
	int fd;

	r->fd = root_fd;
	r->use_openat2 = false;
	r->follow = false;
	if (fstat(root_fd, &st) == 0) {
		root_dev = (uint64_t)st.st_dev;
		root_dev_known = true;
	}
	if (force_walk) {
		qft_debug("path resolution: component walk (forced)");
		return;
	}
	fd = do_openat2(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		r->use_openat2 = true;
		qft_debug("path resolution: openat2 RESOLVE_BENEATH");
		return;
	}
	/* ENOSYS on kernels before 5.6 and under qemu-user; seccomp filters
	 * in containers often say EPERM for system calls they do not know.
	 * Said once per server (this runs once), since the walk costs a
	 * system call per path component. */
	qft_info("openat2 unavailable (%s): confining paths with a "
		 "component-by-component walk", strerror(-fd));
}

/*
 * Opens the first `len` bytes of `path` (a valid protocol path, or a
 * prefix of one ending before a '/').  The final component gets `flags`
 * plus O_NOFOLLOW; the ones before it must be real directories.
 */
static int resolve(const struct srv_root *r, const char *path, size_t len,
		   int flags)
{
	char buf[QFT_MAX_PATH + 1];
	const char *p, *end;
	int dfd, fd;

	flags |= O_CLOEXEC;
	if (!r->follow)
		flags |= O_NOFOLLOW;
	if (len == 0)
		return do_openat(r->fd, ".", flags);
	if (len > QFT_MAX_PATH)
		return -ENAMETOOLONG;
	memcpy(buf, path, len);
	buf[len] = '\0';
	/* The decoder let no "..", "." or leading '/' through, so only the
	 * symlinks lead elsewhere: where they point, as for any program the
	 * server's user runs (the kernel ends a loop with ELOOP). */
	if (r->follow)
		return do_openat(r->fd, buf, flags);
	if (r->use_openat2)
		return do_openat2(r->fd, buf, flags);

	/* Each intermediate component is opened without following it, so a
	 * symlink anywhere on the way ends the walk -- with ELOOP, as
	 * openat2's RESOLVE_NO_SYMLINKS does (O_DIRECTORY says ENOTDIR). */
	dfd = r->fd;
	p = buf;
	while ((end = strchr(p, '/')) != NULL) {
		struct stat st;
		int nfd;

		buf[end - buf] = '\0';
		nfd = do_openat(dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW |
				O_CLOEXEC);
		if (nfd == -ENOTDIR &&
		    fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(st.st_mode))
			nfd = -ELOOP;
		if (dfd != r->fd)
			close(dfd);
		if (nfd < 0)
			return nfd;
		dfd = nfd;
		p = end + 1;
	}
	fd = do_openat(dfd, p, flags);
	if (dfd != r->fd)
		close(dfd);
	return fd;
}

int srv_path_open(const struct srv_root *r, const char *path, int flags)
{
	return resolve(r, path, strlen(path), flags);
}

/* What may be opened for data of the object `fd` pins (path.h): a
 * regular file or a directory, its attributes in *st. */
static int pinned_openable(int fd, struct stat *st)
{
	if (fstat(fd, st) < 0)
		return -errno;
	if (S_ISLNK(st->st_mode))
		return -ELOOP;
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		return -ENXIO;
	return 0;
}

int srv_path_reopen(int fd, int flags)
{
	char proc[SRV_PROC_FD_MAX];
	struct stat st;
	int r;

	if ((r = pinned_openable(fd, &st)) < 0)
		return r;
	/* Nothing else reopens what an O_PATH descriptor pins (without
	 * procfs: srv_path_reopen_at). */
	if ((r = srv_path_proc_fd(proc, fd)) < 0)
		return r;
	/* The magic link must be followed: no O_NOFOLLOW here. */
	return do_openat(AT_FDCWD, proc, (flags & ~(O_CREAT | O_EXCL |
						    O_NOFOLLOW | O_PATH)) |
			 O_NOCTTY | O_CLOEXEC);
}

int srv_path_reopen_at(int fd, int flags, int dfd, const char *name,
		       bool follow)
{
	struct stat pin, st;
	int r, nfd;

	if (srv_procfs_ok())
		return srv_path_reopen(fd, flags);
	if ((r = pinned_openable(fd, &pin)) < 0)
		return r;
	nfd = do_openat(dfd, name, (flags & ~(O_CREAT | O_EXCL | O_PATH)) |
			(follow ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_NOCTTY |
			O_CLOEXEC);
	if (nfd < 0)
		return nfd == -ELOOP || nfd == -ENOENT ? -ESTALE : nfd;
	if (fstat(nfd, &st) < 0) {
		r = -errno;
		goto out_close;
	}
	if (st.st_dev != pin.st_dev || st.st_ino != pin.st_ino) {
		r = -ESTALE;
		goto out_close;
	}
	if (!(flags & O_NONBLOCK) &&
	    fcntl(nfd, F_SETFL, fcntl(nfd, F_GETFL) & ~O_NONBLOCK) < 0) {
		r = -errno;
		goto out_close;
	}
	return nfd;

out_close:
	close(nfd);
	return r;
}

int srv_path_open_data(const struct srv_root *r, const char *path, int flags)
{
	const char *name;
	int pin, fd, dfd;

	pin = srv_path_open(r, path, O_PATH);
	if (pin < 0)
		return pin;
	if (srv_procfs_ok()) {
		fd = srv_path_reopen(pin, flags);
		close(pin);
		return fd;
	}
	dfd = srv_path_open_parent(r, path, &name);
	if (dfd < 0) {
		close(pin);
		return dfd;
	}
	fd = srv_path_reopen_at(pin, flags, dfd, name, r->follow);
	close(dfd);
	close(pin);
	return fd;
}

int srv_path_open_object(const struct srv_root *r, const char *path)
{
	const char *name;
	int fd, dfd, lfd;

	fd = srv_path_open(r, path, O_PATH);
	if (fd >= 0 || !r->follow || (fd != -ENOENT && fd != -ELOOP &&
				       fd != -ENOTDIR && fd != -EACCES))
		return fd;
	dfd = srv_path_open_parent(r, path, &name);
	if (dfd < 0)
		return fd;
	lfd = do_openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	/* Missing as well: the first answer is the one to give. */
	return lfd < 0 ? fd : lfd;
}

int srv_path_open_dir(const struct srv_root *r, const char *path)
{
	return srv_path_open(r, path, O_PATH | O_DIRECTORY);
}

int srv_path_open_parent(const struct srv_root *r, const char *path,
			 const char **name)
{
	const char *slash = strrchr(path, '/');

	if (*path == '\0') {
		*name = ".";
		return resolve(r, "", 0, O_PATH | O_DIRECTORY);
	}
	if (!slash) {
		*name = path;
		return resolve(r, "", 0, O_PATH | O_DIRECTORY);
	}
	*name = slash + 1;
	return resolve(r, path, (size_t)(slash - path), O_PATH | O_DIRECTORY);
}

int srv_path_proc_fd(char buf[SRV_PROC_FD_MAX], int fd)
{
	if (!srv_procfs_ok())
		return -EOPNOTSUPP;
	snprintf(buf, SRV_PROC_FD_MAX, "/proc/self/fd/%d", fd);
	return 0;
}

uint64_t srv_path_ino(uint64_t dev, uint64_t ino)
{
	uint64_t h = dev;

	if (!root_dev_known || dev == root_dev)
		return ino;
	/* Any good 64-bit mixer will do: device numbers differ in few
	 * bits (the minor number, mostly). */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	/* The top bit stays clear: numbers with it set are the client's
	 * own (provisional numbers, fuse/fs/node.h). */
	h &= 0x7fffffffull;
	/* 0 would show the number unchanged, as if on the root's device. */
	if (h == 0)
		h = 1;
	return ino ^ (h << 32);
}

void srv_path_attr_from_stat(struct qft_attr *a, const struct stat *st)
{
	qft_attr_from_stat(a, st);
	a->ino = srv_path_ino((uint64_t)st->st_dev, (uint64_t)st->st_ino);
}

/*
 * The NOXATTR hint is read through an O_PATH descriptor of the very object
 * stat'ed, so a rename racing with us cannot pin another object's answer
 * on it.  Only the stat can fail: without the hint the client merely asks
 * for xattrs itself.
 */
static int attr_of(int dfd, const char *name, int oflags, struct stat *st,
		   struct qft_attr *a)
{
	char proc[SRV_PROC_FD_MAX];
	int fd, r = 0;

	fd = openat(dfd, name, O_PATH | oflags | O_CLOEXEC);
	if (fd < 0) {
		/* Out of descriptors, say: the attributes still count. */
		if (fstatat(dfd, name, st, oflags & O_NOFOLLOW ?
			    AT_SYMLINK_NOFOLLOW : 0) < 0)
			return -errno;
		srv_path_attr_from_stat(a, st);
		return 0;
	}
	if (fstat(fd, st) < 0) {
		r = -errno;
		goto out_close_fd;
	}
	srv_path_attr_from_stat(a, st);
	if ((S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) &&
	    srv_path_proc_fd(proc, fd) == 0 && listxattr(proc, NULL, 0) == 0)
		a->flags |= QFT_ATTR_NOXATTR;
out_close_fd:
	close(fd);
	return r;
}

int srv_path_attr_at(int dfd, const char *name, bool follow, struct stat *st,
		     struct qft_attr *a, bool *followed)
{
	struct qft_attr fa;
	struct stat fst;
	int r;

	if (followed)
		*followed = false;
	r = attr_of(dfd, name, O_NOFOLLOW, st, a);
	if (r < 0 || !follow || !S_ISLNK(st->st_mode))
		return r;
	/* A link: what it leads to, if it leads anywhere.  ENOENT, ELOOP,
	 * EACCES, ENOTDIR: the link itself stays, as it is -- until its
	 * target appears, which is why it is marked FOLLOWED too. */
	if (attr_of(dfd, name, 0, &fst, &fa) == 0) {
		*st = fst;
		*a = fa;
		if (followed)
			*followed = true;
	}
	a->flags |= QFT_ATTR_FOLLOWED;
	return 0;
}
