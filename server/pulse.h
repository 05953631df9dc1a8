/* SPDX-License-Identifier: MIT */
/*
 * PROGRESS frames while a long request runs (QFT_FEAT_PROGRESS).
 *
 * A connection's thread runs one request at a time, so a FLUSH whose
 * fdatasync waits for slow storage (a 1 GiB file on a 10 MB/s card: a
 * minute and a half) keeps the connection silent for that long, which the
 * client cannot tell from a stopped server.  srv_pulse_run() therefore
 * hands such a wait to the pulse's worker thread and, while it runs, sends
 * a QFT_OP_PROGRESS frame naming the request every
 * QFT_PROGRESS_INTERVAL_MS from the connection's own thread, so the
 * client's deadline measures silence, not work.  The last frame leaves
 * before the request's reply.
 *
 * Why the frames come from the connection's thread and the wait runs on
 * the worker, not the other way round: a thread waiting for the disk
 * sleeps uninterruptibly, and a SIGSTOP aimed at the process is taken
 * by that thread when it is the one the kernel picked (the main thread
 * is a connection's), so the process would only stop once the disk is
 * done, sending frames all along.  A thread sleeping in a condition wait
 * takes the signal at once and stops every thread with it: a stopped or
 * killed server falls silent, and the client notices within its deadline.
 *
 * Only waits that are the storage working belong here (the syncs, the
 * write-out behind a stream): a request stuck on a hung file system
 * should still look stuck.  The worker starts with the first such wait,
 * so a connection that never has one costs nothing but the struct.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef SRV_PULSE_H
#define SRV_PULSE_H

#include <stdint.h>

#include "chan.h"

struct srv_pulse;

/* A wait for the storage: 0 or a negative errno. */
typedef int srv_pulse_fn(void *arg);

/* A pulse for `chan`, which must outlive it: 0 or -ENOMEM. */
int srv_pulse_new(struct srv_pulse **pp, struct qft_chan *chan);
/* Stops and joins the worker, if it ever started; NULL is allowed. */
void srv_pulse_free(struct srv_pulse *p);

/*
 * Runs fn(arg) for request `id` (non-zero) and returns its result, sending
 * PROGRESS frames for `id` from QFT_PROGRESS_INTERVAL_MS on while it runs.
 * With `p` NULL (the client did not ask for the feature), or when the
 * worker cannot start (logged once), fn runs here, without frames, as it
 * would for a client that did not ask.  A frame that cannot be sent only
 * ends the frames: the reply's send reports the broken connection.
 */
int srv_pulse_run(struct srv_pulse *p, uint64_t id, srv_pulse_fn *fn,
		  void *arg);

#endif /* SRV_PULSE_H */
