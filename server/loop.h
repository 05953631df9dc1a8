/* SPDX-License-Identifier: MIT */
/*
 * The request loop of one connection, on one thread: receive a frame,
 * decode it, and either queue it in the file I/O engine (READ and WRITE
 * of regular files, xfer.h) or, once the engine is empty, run it and
 * reply.  While operations are queued the loop polls the socket together
 * with the engine's eventfd, so replies go out as operations complete and
 * a quiet socket never holds them back.  Requests take effect in the
 * order received (xfer.h says how the engine keeps that).
 */
#ifndef SRV_LOOP_H
#define SRV_LOOP_H

#include "srv.h"

/*
 * Serves until the client ends the stream.  Returns 0 on a clean end of
 * stream at a frame boundary (after answering everything still queued),
 * or a negative errno when the connection was closed for cause
 * (malformed frame, version mismatch, I/O error, file I/O unavailable),
 * which has already been logged.
 */
int srv_loop_run(struct srv *s);

#endif /* SRV_LOOP_H */
