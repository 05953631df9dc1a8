/* SPDX-License-Identifier: MIT */
/*
 * Server-side copy and holes (QFT_FEAT_COPY, QFT_FEAT_HOLES): COPY runs
 * the host's copy_file_range between two open handles, which shares the
 * blocks where the file system can (a reflink on btrfs or XFS) and copies
 * in the kernel otherwise, and falls back to reads and writes of its own
 * where the kernel refuses (EXDEV, EOPNOTSUPP, EINVAL, ENOSYS: another
 * file system, an old kernel); SEEK answers SEEK_DATA and SEEK_HOLE with
 * the host's lseek on the handle's file.
 *
 * A COPY is bounded (QFT_MAX_COPY) and runs in chunks on the pulse's
 * worker (pulse.h), so the client hears PROGRESS frames while the
 * storage works, as for a long fdatasync.  An error after some bytes
 * were copied ends the copy short with those bytes counted, as
 * copy_file_range(2) does; the caller's next call meets the error.
 *
 * In a build with -Dfault_injection=true, QFTFS_FAULT_COPY makes the
 * server act as one that cannot copy: EXDEV or EOPNOTSUPP (every
 * copy_file_range fails so, and the fallback copies), `old` (HELLO
 * grants neither feature, as a server before them), or `slow` (each MiB
 * copied takes 1.5 s more: PROGRESS frames must keep the copy alive).
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef SRV_COPY_H
#define SRV_COPY_H

#include <stdint.h>

#include "msg.h"

struct srv;

/* The features of this module HELLO grants, of those `asked`. */
uint32_t srv_copy_features(uint32_t asked);

/* COPY: rep->count bytes copied and the destination's attributes. */
int srv_copy_op(struct srv *s, const struct qft_msg *req,
		struct qft_msg *rep);
/* SEEK: rep->offset, where the data or hole asked for starts. */
int srv_copy_seek(struct srv *s, const struct qft_msg *req,
		  struct qft_msg *rep);

#endif /* SRV_COPY_H */
