// SPDX-License-Identifier: MIT
/*
 * SIGUSR1 (usr1.h).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/usr1.h"
#include "ops/reqlog.h"

/* SIGUSR1 logs the statistics (qc_reqlog_log_stats) instead of ending
 * the process: a thread of its own waits for it. */
static pthread_t usr1_thread;
static bool usr1_running;
static atomic_bool usr1_quit;

static void *usr1_main(void *arg)
{
	sigset_t set;
	int sig;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	while (sigwait(&set, &sig) == 0 && !atomic_load(&usr1_quit))
		qc_reqlog_log_stats();
	return NULL;
}

int usr1_start(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -EINVAL;
	if (pthread_create(&usr1_thread, NULL, usr1_main, NULL) != 0)
		return -EAGAIN;
	usr1_running = true;
	return 0;
}

void usr1_stop(void)
{
	if (!usr1_running)
		return;
	atomic_store(&usr1_quit, true);
	pthread_kill(usr1_thread, SIGUSR1);
	pthread_join(usr1_thread, NULL);
	usr1_running = false;
}
