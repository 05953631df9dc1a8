// SPDX-License-Identifier: MIT
/* Becoming another program in a forked child (see exec.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "login/exec.h"

void qc_exec(char **argv, int first, const char *before,
		       const char *between, const char *after)
{
	char msg[512];
	sigset_t none;
	int n;

	/* The client blocks SIGUSR1 in every thread (cli/usr1.h); the
	 * program must not inherit that. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (close_range((unsigned)first, ~0u, 0) < 0) {
		long max = sysconf(_SC_OPEN_MAX);

		for (int fd = first; fd < max; fd++)
			close(fd);
	}
	execvp(argv[0], argv);
	n = snprintf(msg, sizeof(msg), "%s%s%s%s%s", before, argv[0], between,
		     strerror(errno), after);
	if (n > 0)
		(void)!write(STDERR_FILENO, msg,
			     (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(127);
}
