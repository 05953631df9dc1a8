/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz targets share: libFuzzer's entry point, which driver.c
 * also calls when there is no libFuzzer, and the check that turns a
 * broken invariant into a crash libFuzzer keeps the input for.
 */
#ifndef QFT_FUZZ_H
#define QFT_FUZZ_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The sanitizers' report channel, when a sanitizer is linked in: libFuzzer
 * run with -close_fd_mask=2 (to silence the code's own logging) closes
 * stderr but keeps that one.
 */
void __sanitizer_report_error_summary(const char *msg)
	__attribute__((weak));

/* Aborts with the failed condition: a finding, not an input error. */
#define FUZZ_CHECK(cond)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			fuzz_check_failed(__FILE__, __LINE__, #cond);     \
		}                                                         \
	} while (0)

__attribute__((noreturn))
static inline void fuzz_check_failed(const char *file, int line,
				     const char *what)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s:%d: fuzz invariant failed: %s", file,
		 line, what);
	fprintf(stderr, "%s\n", msg);
	if (__sanitizer_report_error_summary)
		__sanitizer_report_error_summary(msg);
	abort();
}

/* Sends all n bytes, or stops when the peer under test closed (it has
 * read what it wanted). */
static inline void fuzz_send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/*
 * Calls `remove` for every /tmp/<prefix>PID-... whose PID no longer
 * runs: what a target's earlier process left behind when it died
 * without atexit() (a crash's abort(), libFuzzer's -max_total_time and
 * its _Exit).  A live process's is never touched.
 */
static inline void fuzz_remove_stale(const char *prefix,
				     void (*remove)(const char *path))
{
	size_t n = strlen(prefix);
	struct dirent *de;
	DIR *d;

	d = opendir("/tmp");
	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[300], *end;
		long pid;

		if (strncmp(de->d_name, prefix, n) != 0)
			continue;
		pid = strtol(de->d_name + n, &end, 10);
		if (end == de->d_name + n || *end != '-' || pid <= 0 ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "/tmp/%s", de->d_name);
		remove(path);
	}
	closedir(d);
}

#endif /* QFT_FUZZ_H */
