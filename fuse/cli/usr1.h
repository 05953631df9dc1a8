/* SPDX-License-Identifier: MIT */
/*
 * SIGUSR1 logs the mount's statistics (qc_reqlog_log_stats) instead of
 * ending the process: a thread of its own waits for it with sigwait(2),
 * so no signal handler, and no global, is involved.
 */
#ifndef QC_CLI_USR1_H
#define QC_CLI_USR1_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Zero-initialised by the caller; main thread only, but `quit`. */
struct qc_usr1 {
	pthread_t thread;
	bool running;           /* thread was started */
	atomic_bool quit;       /* the waiting thread reads it */
};

/*
 * Blocks SIGUSR1 in the calling thread, so in every thread it starts from
 * then on, and starts the thread that takes it.  -EINVAL or -EAGAIN.
 */
int qc_usr1_start(struct qc_usr1 *u);

/* Stops the thread, if qc_usr1_start started it. */
void qc_usr1_stop(struct qc_usr1 *u);

#endif /* QC_CLI_USR1_H */
