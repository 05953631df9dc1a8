/* SPDX-License-Identifier: MIT */
/*
 * Whether /proc is procfs.  The server reaches objects it holds only by a
 * descriptor through /proc/self/fd/N: extended attributes and chmod of an
 * object pinned with O_PATH (ops.c, path.c), the inotify watch of a
 * directory (watch.c), and a handle's second, O_DIRECT descriptor
 * (xfer.c).  That is sound only where /proc is the kernel's procfs; where
 * it is anything else (not mounted in a container or chroot, a tmpfs or
 * a bind mount someone put there) such a path could name any file, and
 * acting on it would act outside the served root.  So each use asks
 * first: with another /proc the xattr and chmod operations are refused
 * with EOPNOTSUPP, change notification is granted to nobody, and direct
 * I/O is not used (docs/security.md, finding 8 of issue 18).
 *
 * Checked once (statfs magic PROC_SUPER_MAGIC on /proc/self/fd), the
 * first time it is asked, and said once at error level when it fails.
 * Thread-safe.
 */
#ifndef SRV_PROCFS_H
#define SRV_PROCFS_H

#include <stdbool.h>

bool srv_procfs_ok(void);

#endif /* SRV_PROCFS_H */
