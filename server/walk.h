/* SPDX-License-Identifier: MIT */
/*
 * FETCH (walk-ahead, docs/protocol.md "Walk-ahead"): the contents of
 * several small files of one directory, read without handles, so that a
 * client reading a tree (cp -r, tar, rsync, grep -r) has a walker's next
 * files before it opens them.
 *
 * Each name is opened in the confined directory as O_PATH without
 * following it, checked to be a regular file, re-opened for reading
 * through that very object (srv_path_reopen_at: never a FIFO or device,
 * never another object swapped in) and read from offset 0; the
 * attributes sent are those of the descriptor read, so the client can
 * tell which version of the file the bytes belong to.  A name that
 * cannot be read gets its error and the others go on.  The reply holds
 * at most QFT_MAX_DATA bytes of data: the names past that get no record
 * (the client asks again or opens them).  Nothing is kept between
 * requests; at most two descriptors are open at a time.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef SRV_WALK_H
#define SRV_WALK_H

#include "buf.h"
#include <stdbool.h>

#include "msg.h"
#include "path.h"

/* Room srv_walk_fetch needs in `out` (its limit). */
#define SRV_WALK_OUT_MAX ((size_t)QFT_MAX_DATA + 8192u)

/*
 * Appends the records answering FETCH `req` to `out` (empty, limit at
 * least SRV_WALK_OUT_MAX).  Fails only when the directory cannot be
 * opened or the name list is malformed.  With `noatime` (the session's
 * NOATIME feature) the reads leave the files' access times where the
 * kernel lets them, as OPEN's do.
 */
int srv_walk_fetch(const struct srv_root *root, const struct qft_msg *req,
		   bool noatime, struct qbuf *out);

#endif /* SRV_WALK_H */
