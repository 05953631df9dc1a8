/* SPDX-License-Identifier: MIT */
/*
 * The request loop of one connection: receive a frame, decode it, run it,
 * reply; strictly in the order received, on one thread.
 */
#ifndef SRV_LOOP_H
#define SRV_LOOP_H

#include "srv.h"

/*
 * Serves until the client ends the stream.  Returns 0 on a clean end of
 * stream at a frame boundary, or a negative errno when the connection was
 * closed for cause (malformed frame, version mismatch, I/O error), which
 * has already been logged.
 */
int srv_loop_run(struct srv *s);

#endif /* SRV_LOOP_H */
