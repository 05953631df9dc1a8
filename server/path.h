/* SPDX-License-Identifier: MIT */
/*
 * Path resolution confined to the served root.
 *
 * Every protocol path is relative to the root ("" is the root itself) and
 * has already been checked by the decoder: no "..", no ".", no empty or
 * over-long components.  That is not enough on its own, because any
 * component may be a symlink planted on the server.  So resolution never
 * follows the final component, and the intermediate ones are resolved
 * either by openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), where the
 * kernel refuses anything that would leave the root (EXDEV, ELOOP), or, on
 * kernels without openat2, by a walk that opens each intermediate
 * component with O_NOFOLLOW | O_DIRECTORY and so refuses every symlink on
 * the way (ENOTDIR).  The errno of a refusal is passed through unchanged.
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
};

/*
 * Chooses the resolution method: openat2 when the kernel has it, unless
 * `force_walk` asks for the portable walk (used to test that path).
 */
void srv_path_init(struct srv_root *r, int root_fd, bool force_walk);

/*
 * Opens `path` with `flags`; O_NOFOLLOW and O_CLOEXEC are always added, so
 * a final symlink is never followed (it fails with ELOOP, or with O_PATH
 * yields the link itself).  "" opens the root.
 */
int srv_path_open(const struct srv_root *r, const char *path, int flags);

/*
 * Opens the directory holding the last component of `path` (O_PATH, for
 * *at calls) and points *name at that component inside `path`.  For the
 * root itself ("") it opens the root and sets *name to ".", so callers
 * need no special case; the *at call must not follow `name`
 * (AT_SYMLINK_NOFOLLOW, O_NOFOLLOW, or a call that never follows).
 */
int srv_path_open_parent(const struct srv_root *r, const char *path,
			 const char **name);

/* Opens the directory `path` as O_PATH, for *at calls on names in it. */
int srv_path_open_dir(const struct srv_root *r, const char *path);

/*
 * "/proc/self/fd/N" for `fd`: lets the *xattr and chmod calls, which have
 * no descriptor form for O_PATH descriptors, reach exactly the object a
 * confined open found (the magic link resolves to that object itself, not
 * through it even when it is a symlink).
 */
#define SRV_PROC_FD_MAX 32
void srv_path_proc_fd(char buf[SRV_PROC_FD_MAX], int fd);

struct qft_attr;

/*
 * Attributes of `name` in the directory `dfd`, not following it, with the
 * NOXATTR hint (protocol.h) for regular files and directories: what LSTAT,
 * READDIR PLUS and SCAN send.  0 or a negative errno (of the stat).
 */
int srv_path_attr_at(int dfd, const char *name, struct stat *st,
		     struct qft_attr *a);

#endif /* SRV_PATH_H */
