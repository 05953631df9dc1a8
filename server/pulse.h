/* SPDX-License-Identifier: MIT */
/*
 * PROGRESS frames while a long request runs (QFT_FEAT_PROGRESS).
 *
 * A connection's thread runs one request at a time, so a FLUSH whose
 * fdatasync waits for slow storage (a 1 GiB file on a 10 MB/s card: a
 * minute and a half) keeps the connection silent for that long, which the
 * client cannot tell from a stopped server.  While such a request runs,
 * the pulse's thread sends a QFT_OP_PROGRESS frame naming it every
 * QFT_PROGRESS_INTERVAL_MS, so the client's deadline measures silence,
 * not work.  The frames stop before the request's reply is sent, and of
 * course when the process is stopped or dies: the client still notices
 * those within its deadline.
 *
 * Only requests whose slowness is the storage working (the syncs) are
 * covered: a request stuck on a hung file system should still look stuck.
 *
 * The thread starts with the first long request, so a connection that
 * never has one costs nothing but the struct.  Frames go out through the
 * channel's send lock (chan.h): between replies, never inside one.
 */
#ifndef SRV_PULSE_H
#define SRV_PULSE_H

#include <stdint.h>

#include "chan.h"

struct srv_pulse;

/* A pulse for `chan`, which must outlive it: 0 or -ENOMEM. */
int srv_pulse_new(struct srv_pulse **pp, struct qft_chan *chan);
/* Stops and joins the thread, if it ever started; NULL is allowed. */
void srv_pulse_free(struct srv_pulse *p);

/*
 * Request `id` (non-zero) starts running: PROGRESS frames for it from
 * QFT_PROGRESS_INTERVAL_MS on.  Must be followed by srv_pulse_end()
 * before the reply is sent.  With `p` NULL (the client did not ask for
 * the feature) nothing happens; should the thread not start, the request
 * runs without frames, as it would for such a client, and that is logged.
 */
void srv_pulse_begin(struct srv_pulse *p, uint64_t id);
/* The request ended: on return no frame for it is being or will be sent. */
void srv_pulse_end(struct srv_pulse *p);

#endif /* SRV_PULSE_H */
