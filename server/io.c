// SPDX-License-Identifier: MIT
/* Blocking file I/O with pread/pwrite, and test faults (see io.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "io.h"
#include "log.h"
#include "protocol.h"

#ifdef QFT_FAULT_INJECTION
struct fault_cfg {
	bool armed;          /* anything at all: else no fstat per call */
	bool read_on, write_on, sync_on;
	uint64_t read_at, write_at;
	char name[QFT_MAX_NAME + 1]; /* name_eio: "" when off */
};

static struct fault_cfg fault;

/* "NAME=NUMBER" with NAME == key: 1 and *v set, 0 if another key, or
 * -EINVAL for a bad number. */
static int fault_num(const char *item, const char *key, uint64_t *v)
{
	size_t n = strlen(key);
	char *end;

	if (strncmp(item, key, n) != 0 || item[n] != '=')
		return 0;
	errno = 0;
	*v = strtoull(item + n + 1, &end, 0);
	if (errno || end == item + n + 1 || *end || item[n + 1] == '-')
		return -EINVAL;
	return 1;
}

int srv_io_fault_init(void)
{
	const char *env = getenv(SRV_IO_FAULT_ENV);
	char *copy, *item, *save = NULL;
	int r = 0;

	memset(&fault, 0, sizeof(fault));
	if (!env || !*env)
		return 0;
	copy = strdup(env);
	if (!copy)
		return -ENOMEM;
	for (item = strtok_r(copy, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		int a = fault_num(item, "read_eio_at", &fault.read_at);
		int b = a ? 0 : fault_num(item, "write_eio_at",
					  &fault.write_at);

		if (a < 0 || b < 0) {
			r = -EINVAL;
			break;
		}
		if (a)
			fault.read_on = true;
		else if (b)
			fault.write_on = true;
		else if (strcmp(item, "fsync_eio") == 0)
			fault.sync_on = true;
		else if (strncmp(item, "name_eio=", 9) == 0 && item[9] &&
			 strlen(item + 9) <= QFT_MAX_NAME)
			strcpy(fault.name, item + 9);
		else {
			r = -EINVAL;
			break;
		}
	}
	free(copy);
	if (r < 0) {
		memset(&fault, 0, sizeof(fault));
		qft_err("%s=%s: expected a comma-separated list of %s",
			SRV_IO_FAULT_ENV, env, SRV_IO_FAULT_HELP);
		return r;
	}
	fault.armed = fault.read_on || fault.write_on || fault.sync_on ||
		      fault.name[0];
	if (fault.armed)
		qft_warn("test fault injection armed: %s=%s", SRV_IO_FAULT_ENV,
			 env);
	return 0;
}

static bool covers(uint64_t at, uint64_t off, size_t len)
{
	return at >= off && at - off < len;
}

int srv_io_fault(int fd, enum srv_io_fault_kind kind, uint64_t off,
		 size_t len)
{
	struct stat st;
	bool hit;

	if (!fault.armed)
		return 0;
	switch (kind) {
	case SRV_IO_FAULT_READ:
		hit = fault.read_on && covers(fault.read_at, off, len);
		break;
	case SRV_IO_FAULT_WRITE:
		hit = fault.write_on && covers(fault.write_at, off, len);
		break;
	case SRV_IO_FAULT_SYNC:
		hit = fault.sync_on;
		break;
	default:
		hit = false;
	}
	if (!hit || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	return -EIO;
}
int srv_io_fault_name(const char *name)
{
	return fault.name[0] && strcmp(fault.name, name) == 0 ? -EIO : 0;
}
#endif /* QFT_FAULT_INJECTION */

ssize_t srv_io_read(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

#ifdef QFT_FAULT_INJECTION
	int f = srv_io_fault(fd, SRV_IO_FAULT_READ, off, len);

	if (f < 0)
		return f;
#endif
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

#ifdef QFT_FAULT_INJECTION
	int f = srv_io_fault(fd, SRV_IO_FAULT_WRITE, off, len);

	if (f < 0)
		return f;
#endif
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

ssize_t srv_io_read_once(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

#ifdef QFT_FAULT_INJECTION
	int f = srv_io_fault(fd, SRV_IO_FAULT_READ, off, len);

	if (f < 0)
		return f;
#endif
	do
		n = pread(fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

ssize_t srv_io_write_once(int fd, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

#ifdef QFT_FAULT_INJECTION
	int f = srv_io_fault(fd, SRV_IO_FAULT_WRITE, off, len);

	if (f < 0)
		return f;
#endif
	do
		n = pwrite(fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

int srv_io_sync(int fd, bool datasync)
{
	int r;

#ifdef QFT_FAULT_INJECTION
	if ((r = srv_io_fault(fd, SRV_IO_FAULT_SYNC, 0, 0)) < 0)
		return r;
#endif
	r = datasync ? fdatasync(fd) : fsync(fd);
	return r < 0 ? -errno : 0;
}
