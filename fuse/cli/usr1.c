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

static void *usr1_main(void *arg)
{
	struct qc_usr1 *u = arg;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	while (sigwait(&set, &sig) == 0 && !atomic_load(&u->quit))
		qc_reqlog_log_stats();
	return NULL;
}

static int block(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	return pthread_sigmask(SIG_BLOCK, &set, NULL) == 0 ? 0 : -EINVAL;
}

void qc_usr1_block(void)
{
	(void)block();
}

int qc_usr1_start(struct qc_usr1 *u)
{
	if (block() < 0)
		return -EINVAL;
	if (pthread_create(&u->thread, NULL, usr1_main, u) != 0)
		return -EAGAIN;
	u->running = true;
	return 0;
}

void qc_usr1_stop(struct qc_usr1 *u)
{
	if (!u->running)
		return;
	atomic_store(&u->quit, true);
	pthread_kill(u->thread, SIGUSR1);
	pthread_join(u->thread, NULL);
	u->running = false;
}
