// SPDX-License-Identifier: MIT
/* Whether /proc is procfs (see procfs.h). */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include "log.h"
#include "procfs.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool ok;

static void check(void)
{
	struct statfs sf;

	/* The directory the paths are made in, not just /proc: a procfs
	 * at /proc with something else mounted over /proc/self/fd would
	 * be as wrong. */
	if (statfs("/proc/self/fd", &sf) < 0) {
		qft_err("/proc/self/fd: %s: /proc is not procfs here, so "
			"extended attributes, chmod, change notification and "
			"direct I/O are off (mount procfs on /proc)",
			strerror(errno));
		return;
	}
	if (sf.f_type != PROC_SUPER_MAGIC) {
		qft_err("/proc/self/fd is on a file system of type 0x%lx, "
			"not procfs: its paths cannot be trusted, so extended "
			"attributes, chmod, change notification and direct "
			"I/O are off (mount procfs on /proc)",
			(unsigned long)sf.f_type);
		return;
	}
	ok = true;
}

bool srv_procfs_ok(void)
{
	pthread_once(&once, check);
	return ok;
}
