/* SPDX-License-Identifier: MIT */
/*
 * Path resolution confined to the served root.
 *
 * Every protocol path is relative to the root ("" is the root itself) and
 * has already been checked by the decoder: no "..", no ".", no empty or
 * over-long components.  That is not enough on its own, because any
 * component may be a symlink planted on the server.  So resolution
 * follows no symlink at all: the final component is never followed, and
 * an intermediate one that is a symlink ends the resolution with ELOOP --
 * by openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), where the kernel
 * also refuses anything that would leave the root (EXDEV), or, on kernels
 * without openat2, by a walk that opens each intermediate component with
 * O_NOFOLLOW | O_DIRECTORY.  Both follow the same rule, with the same
 * errno.  A client never needs more: its kernel resolves every symlink
 * the mount shows, so a path with a symlink on its way names something
 * replaced behind the client's back (a directory swapped for a link to
 * elsewhere), which is exactly what must not be followed.
 *
 * Every descriptor returned is O_CLOEXEC and owned by the caller.
 * Error convention: a descriptor (>= 0) or a negative errno.
 */
#ifndef SRV_PATH_H
#define SRV_PATH_H

#include <stdbool.h>
#include <sys/stat.h>

struct srv_root {
	int fd;            /* O_PATH directory: the served root, never closed here */
	bool use_openat2;  /* decided once by srv_path_init() */
	/*
	 * --follow-symlinks (sshfs's follow_symlinks), set once at start by
	 * whoever started the server: paths are then resolved by the kernel
	 * as the server's user's own open(2) would, every symlink followed
	 * (an absolute target meaning the server's own "/"), so nothing
	 * below confines them; entry operations still act on the final
	 * name itself.  See docs/security.md, "Following symlinks".
	 */
	bool follow;
};

/*
 * Chooses the resolution method: openat2 when the kernel has it, unless
 * `force_walk` asks for the portable walk (used to test that path).
 * Leaves `follow` off.
 */
void srv_path_init(struct srv_root *r, int root_fd, bool force_walk);

/*
 * Opens `path` with `flags`; O_NOFOLLOW and O_CLOEXEC are always added, so
 * a final symlink is never followed (it fails with ELOOP, or with O_PATH
 * yields the link itself).  "" opens the root.  With `follow`, only
 * O_CLOEXEC is added: the final symlink is followed like the others.
 */
int srv_path_open(const struct srv_root *r, const char *path, int flags);

/*
 * Opens the directory holding the last component of `path` (O_PATH, for
 * *at calls) and points *name at that component inside `path`.  For the
 * root itself ("") it opens the root and sets *name to ".", so callers
 * need no special case; the *at call must not follow `name`
 * (AT_SYMLINK_NOFOLLOW, O_NOFOLLOW, or a call that never follows), with
 * `follow` too, except where the operation itself follows (stat, chmod,
 * truncate, utimes: see srv_path_attr_at).
 */
int srv_path_open_parent(const struct srv_root *r, const char *path,
			 const char **name);

/*
 * The object `path` names, as O_PATH: srv_path_open(r, path, O_PATH), but
 * with `follow`, a final symlink that leads nowhere (dangling, a loop) is
 * itself the object, as srv_path_attr_at shows it.  For the requests that
 * name an object rather than an entry (xattrs, statfs).
 */
int srv_path_open_object(const struct srv_root *r, const char *path);

/*
 * Opens for data (OPEN, and CREATE of an existing name) the object pinned
 * by `fd` (an O_PATH descriptor), with `flags` less those that create,
 * through its /proc/self/fd link, so that it is that very object: a
 * regular file or a directory.  Anything else is never opened -- opening
 * a device or a FIFO has effects of its own, and the kernel never asks a
 * FUSE file system to open one: -ELOOP for a symlink (as O_NOFOLLOW
 * would), -ENXIO for the rest.
 */
int srv_path_reopen(int fd, int flags);

/*
 * srv_path_reopen where /proc may not be procfs (a chroot without it):
 * then `name` in `dfd` (not followed unless `follow`) is opened instead,
 * non-blocking, and kept only when it is the object `fd` pins -- a name
 * swapped meanwhile gives -ESTALE, never another object's data.  (What
 * cannot be avoided without /proc: a swapped-in FIFO or device node is
 * opened before it is told apart; only root can make one on the server,
 * and this server makes none unless --allow-devices.)
 */
int srv_path_reopen_at(int fd, int flags, int dfd, const char *name,
		       bool follow);

/* srv_path_open(r, path, O_PATH) then srv_path_reopen(): OPEN. */
int srv_path_open_data(const struct srv_root *r, const char *path, int flags);

/* Opens the directory `path` as O_PATH, for *at calls on names in it. */
int srv_path_open_dir(const struct srv_root *r, const char *path);

/*
 * "/proc/self/fd/N" for `fd`: lets the *xattr and chmod calls, which have
 * no descriptor form for O_PATH descriptors, reach exactly the object a
 * confined open found (the magic link resolves to that object itself, not
 * through it even when it is a symlink).  -EOPNOTSUPP, and nothing in
 * buf, where /proc is not procfs (procfs.h): such a path could lead
 * anywhere.
 */
#define SRV_PROC_FD_MAX 32
int srv_path_proc_fd(char buf[SRV_PROC_FD_MAX], int fd);

struct qft_attr;

/*
 * The inode number a client is shown for inode `ino` of device `dev`.
 * A served tree may span file systems (a mount point below the root),
 * but the client shows one device, so equal inode numbers of two of them
 * would look like one object: hard links to tar, cp -a and rsync -H (a
 * file stored as a link to another), a loop to find and du.  Objects on
 * the root's device keep their number; others have a 31-bit hash of
 * their device mixed into the high half (the top bit stays clear for
 * the client's provisional numbers), which leaves the low half (all
 * of a number below 2^32) as it was.  Two devices can still collide when
 * their hashes do, or with inode numbers of 2^32 and more.
 */
uint64_t srv_path_ino(uint64_t dev, uint64_t ino);

/* qft_attr_from_stat() with the inode number as srv_path_ino shows it:
 * for every attribute the server sends. */
void srv_path_attr_from_stat(struct qft_attr *a, const struct stat *st);

/*
 * Attributes of `name` in the directory `dfd`, not following it, with the
 * NOXATTR hint (protocol.h) for regular files and directories: what LSTAT,
 * READDIR PLUS and SCAN send.  0 or a negative errno (of the stat).
 *
 * With `follow`, a symlink's attributes are those of the object it leads
 * to, and *followed (may be NULL) says so; a symlink that cannot be
 * followed (dangling, a loop, a target the server's user may not reach)
 * keeps its own, so it stays visible as what it is rather than failing a
 * whole listing.  Either way they carry QFT_ATTR_FOLLOWED.
 */
int srv_path_attr_at(int dfd, const char *name, bool follow, struct stat *st,
		     struct qft_attr *a, bool *followed);

#endif /* SRV_PATH_H */
