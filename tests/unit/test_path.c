// SPDX-License-Identifier: MIT
/*
 * Unit test of the inode numbers the server shows (server/path.c,
 * srv_path_ino): those of the root's device unchanged, those of other
 * devices told apart from it and from each other by their high half,
 * with the low half kept.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "check.h"
#include "msg.h"
#include "path.h"

/* Device numbers as Linux hands them out: anonymous (tmpfs, overlay,
 * btrfs subvolumes: major 0), SCSI disks (8), NVMe and virtio (259,
 * 253, 254), loop devices (7). */
static const unsigned majors[] = { 0, 7, 8, 253, 254, 259 };
#define MINORS 256u
#define NDEVS (sizeof(majors) / sizeof(majors[0]) * MINORS)

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	static uint64_t high[NDEVS];
	struct srv_root root;
	struct qft_attr a;
	struct stat st;
	uint64_t dev, v;
	size_t n = 0;
	int fd;

	/* Before any root is known every number is shown as it is. */
	CHECK_EQ(srv_path_ino(12345, 77), 77);

	fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(fstat(fd, &st), 0);
	srv_path_init(&root, fd, false);
	dev = (uint64_t)st.st_dev;

	check_ctx("root device");
	CHECK_EQ(srv_path_ino(dev, 77), 77);
	CHECK_EQ(srv_path_ino(dev, UINT64_MAX), UINT64_MAX);
	srv_path_attr_from_stat(&a, &st);
	CHECK_EQ(a.ino, (uint64_t)st.st_ino);

	check_ctx("other devices");
	for (size_t i = 0; i < sizeof(majors) / sizeof(majors[0]); i++) {
		for (unsigned m = 0; m < MINORS; m++) {
			uint64_t d = makedev(majors[i], m);

			if (d == dev)
				continue;
			v = srv_path_ino(d, 77);
			/* Told apart from the root's 77, low half kept. */
			CHECK(v != 77);
			CHECK_EQ(v & 0xffffffffull, 77);
			/* Clear of the client's provisional range. */
			CHECK(!(v >> 63));
			/* The same mix for every number of the device. */
			CHECK_EQ(srv_path_ino(d, 1) ^ 1, v ^ 77);
			/* XOR keeps the device's numbers apart. */
			CHECK(srv_path_ino(d, 78) != v);
			high[n++] = v >> 32;
		}
	}
	/* No two of these devices share a high half. */
	qsort(high, n, sizeof(high[0]), cmp_u64);
	for (size_t i = 1; i < n; i++)
		CHECK(high[i] != high[i - 1]);

	check_ctx("attributes");
	st.st_dev = (dev_t)makedev(0, 99) == st.st_dev ? makedev(0, 98)
						      : makedev(0, 99);
	st.st_ino = 4242;
	srv_path_attr_from_stat(&a, &st);
	CHECK_EQ(a.ino, srv_path_ino((uint64_t)st.st_dev, 4242));
	CHECK(a.ino != 4242);
	close(fd);
	return check_exit("test_path");
}
