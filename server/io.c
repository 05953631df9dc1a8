// SPDX-License-Identifier: MIT
/* Blocking file I/O with pread/pwrite (see io.h). */
#include <errno.h>
#include <unistd.h>

#include "io.h"

ssize_t srv_io_read(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t srv_io_write(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* A regular file makes progress or fails with an errno; a
		 * zero return would loop forever. */
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return (ssize_t)len;
}

int srv_io_sync(int fd, bool datasync)
{
	int r = datasync ? fdatasync(fd) : fsync(fd);

	return r < 0 ? -errno : 0;
}
