// SPDX-License-Identifier: MIT
/* Reading the remote command's lines (see lineio.h). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "login/lineio.h"

int qc_line_read(int fd, char *buf, size_t size, int timeout_ms)
{
	struct timespec ts;
	int64_t deadline;
	size_t n = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 +
		   timeout_ms;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left;
		ssize_t r;
		char c;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		left = deadline - ((int64_t)ts.tv_sec * 1000 +
				   ts.tv_nsec / 1000000);
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		r = read(fd, &c, 1);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		if (r == 0) {
			buf[n] = '\0';
			return -EPIPE;
		}
		if (c == '\n')
			break;
		if (n == size - 1) {
			buf[n] = '\0';
			return -EMSGSIZE;
		}
		buf[n++] = c;
	}
	buf[n] = '\0';
	return (int)n;
}
