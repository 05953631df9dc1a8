/* SPDX-License-Identifier: MIT */
/*
 * READ and WRITE of regular files through the I/O engine (uring.h): reads
 * batched ahead of the socket, writes queued behind it, and the pool
 * buffers that every frame is received into.
 *
 * Memory.  The engine's pool (SRV_XFER_BUFS buffers of one sealed record
 * each) is all the memory requests in flight ever take: each frame is
 * received into a pool buffer, a queued WRITE keeps its buffer until the
 * data is written (no copy), a queued READ takes another for its data
 * until its reply is sent.  With the pool empty the server stops reading
 * the socket until an operation completes; replies are sent with blocking
 * writes, so a client that stops reading them stops the server too.
 *
 * Ordering (the protocol's promise: requests take effect in the order
 * received).  Operations of one handle are ordered by the engine (a READ
 * waits for an overlapping earlier WRITE).  A READ or WRITE is queued only
 * while no other handle of the same file (dev, ino) has operations in the
 * engine; otherwise the engine is drained first.  Every other request,
 * and READ/WRITE of handles that are not regular files or were opened
 * O_APPEND (where the file, not the offset, says where data lands), runs
 * only once the engine is empty (srv_xfer_drain()): so it sees every
 * earlier WRITE, FLUSH reports their errors, and CLOSE never closes a
 * descriptor the kernel is still using.  Replies to queued requests are
 * sent as their operations complete.
 *
 * Error convention: 0 (or a count) or a negative errno; a negative return
 * means the connection must close and has been logged.
 */
#ifndef SRV_XFER_H
#define SRV_XFER_H

#include <stdbool.h>

#include "msg.h"
#include "srv.h"

/*
 * Direct I/O (--direct).  With SRV_DIRECT_AUTO (the default) a WRITE of a
 * regular file that is large (256 KiB or more) and aligned in file
 * offset, length and memory as statx(STATX_DIOALIGN) says goes through a
 * second descriptor of the file opened O_DIRECT: the disk takes the data
 * from the pool buffer without the page cache copy.  So does such a READ
 * on io_uring (with pread each direct MiB would wait for the disk), while
 * the next 32 MiB of the file are mostly not in the page cache
 * (cachestat(2), probed once per 32 MiB).  File systems without direct
 * I/O, tails, small and unaligned transfers use the page cache as before.
 * The kernel keeps the two coherent (a direct transfer writes back and
 * drops the cached pages of its range), so buffered and direct requests,
 * other handles and truncation see one file.  SRV_DIRECT_OFF: never.
 */
enum srv_direct {
	SRV_DIRECT_AUTO = 0,
	SRV_DIRECT_OFF,
};
/* Sets the mode for every connection; before the first one starts. */
void srv_xfer_direct(enum srv_direct mode);
/* "auto" or "off": 0 and *mode set, or -EINVAL. */
int srv_xfer_direct_parse(const char *name, enum srv_direct *mode);

/* Creates the engine with s->io_backend; logs why when it cannot. */
int srv_xfer_init(struct srv *s);
/* Waits for what the kernel still has and frees the engine. */
void srv_xfer_destroy(struct srv *s);

/*
 * Points s->in at a free pool buffer for the next frame, sending replies
 * of completed operations until one is free.
 */
int srv_xfer_rx(struct srv *s);

/* The eventfd to poll next to the socket; operations not yet answered. */
int srv_xfer_fd(const struct srv *s);
unsigned srv_xfer_pending(const struct srv *s);

/* Sends the replies of completed operations; with `wait`, waits for at
 * least one unless none is pending.  Returns how many. */
int srv_xfer_reap(struct srv *s, bool wait);
/* Completes and answers everything pending. */
int srv_xfer_drain(struct srv *s);

/*
 * Queues `req` (received into s->in) when it is a READ or WRITE of a
 * regular file: 1.  0 when it is not one the engine takes: the caller
 * drains and runs it through srv_op_dispatch().
 */
int srv_xfer_submit(struct srv *s, const struct qft_msg *req);

#endif /* SRV_XFER_H */
