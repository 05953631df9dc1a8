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
 * then on and in the process fuse_daemonize() forks.  Called first thing
 * in main: a SIGUSR1 sent as soon as a background mount's command returns
 * (before the daemon started its waiting thread) then stays pending
 * instead of ending the daemon by its default action.  Children undo it
 * before exec (qc_exec).
 */
void qc_usr1_block(void);

/*
 * Blocks SIGUSR1 (again: harmless) and starts the thread that takes it.
 * -EINVAL or -EAGAIN.
 */
int qc_usr1_start(struct qc_usr1 *u);

/* Stops the thread, if qc_usr1_start started it. */
void qc_usr1_stop(struct qc_usr1 *u);

#endif /* QC_CLI_USR1_H */
