// SPDX-License-Identifier: MIT
/*
 * Unit test of server/path.c: the inode numbers the server shows
 * (srv_path_ino): those of the root's device unchanged, those of other
 * devices told apart from it and from each other by their high half,
 * with the low half kept; and the one rule both resolvers follow
 * (openat2 and the component walk): no symlink is followed anywhere on a
 * path, with ELOOP from either, and OPEN reaches only regular files and
 * directories (srv_path_reopen).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

static int make_tree(char *dir, size_t size)
{
	int fd;

	snprintf(dir, size, "/tmp/qftfs-test-path-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (mkdirat(fd, "d", 0755) < 0 ||
	    close(openat(fd, "d/x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) < 0 ||
	    symlinkat("d", fd, "ld") < 0 || symlinkat("d/x", fd, "lf") < 0 ||
	    symlinkat("/", fd, "abs") < 0 || mkfifoat(fd, "fifo", 0666) < 0)
		return -1;
	return fd;
}

static void remove_tree(int fd, const char *dir)
{
	static const char *const names[] = { "d/x", "ld", "lf", "abs",
					     "fifo" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlinkat(fd, names[i], 0);
	unlinkat(fd, "d", AT_REMOVEDIR);
	close(fd);
	rmdir(dir);
}

/* The file type of what `fd` is, closing it; or the negative errno. */
static int type_of(int fd)
{
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		st.st_mode = 0;
	close(fd);
	return (int)(st.st_mode & S_IFMT);
}

/* Both resolvers, one rule (issue 18, finding 8). */
static void test_resolvers(void)
{
	char dir[64];
	const char *name;
	int fd = make_tree(dir, sizeof(dir));

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	for (int walk = 0; walk < 2; walk++) {
		struct srv_root r;
		int pfd;

		srv_path_init(&r, fd, walk);
		check_ctx("%s", walk ? "walk" : "openat2 (where there is one)");
		CHECK_EQ(type_of(srv_path_open(&r, "d/x", O_RDONLY)), S_IFREG);
		/* A symlink on the way, inside the root or out of it. */
		CHECK_EQ(srv_path_open(&r, "ld/x", O_RDONLY), -ELOOP);
		CHECK_EQ(srv_path_open(&r, "ld/x", O_PATH), -ELOOP);
		CHECK_EQ(srv_path_open(&r, "abs/etc", O_PATH), -ELOOP);
		pfd = srv_path_open_parent(&r, "ld/x/y", &name);
		CHECK_EQ(pfd, -ELOOP);
		if (pfd >= 0)
			close(pfd);
		/* As the last component of a directory's path, what
		 * O_DIRECTORY | O_NOFOLLOW says of a symlink. */
		CHECK_EQ(srv_path_open_dir(&r, "ld"), -ENOTDIR);
		pfd = srv_path_open_parent(&r, "ld/x", &name);
		CHECK_EQ(pfd, -ENOTDIR);
		if (pfd >= 0)
			close(pfd);
		/* The final one: the link itself with O_PATH, else ELOOP. */
		CHECK_EQ(type_of(srv_path_open(&r, "lf", O_PATH)), S_IFLNK);
		CHECK_EQ(srv_path_open(&r, "lf", O_RDONLY), -ELOOP);
		/* A file where a directory should be. */
		CHECK_EQ(srv_path_open(&r, "d/x/y", O_RDONLY), -ENOTDIR);
		/* OPEN's data opens: files and directories only. */
		CHECK_EQ(type_of(srv_path_open_data(&r, "d/x", O_RDWR)),
			 S_IFREG);
		CHECK_EQ(type_of(srv_path_open_data(&r, "d",
						    O_RDONLY | O_DIRECTORY)),
			 S_IFDIR);
		CHECK_EQ(srv_path_open_data(&r, "lf", O_RDONLY), -ELOOP);
		CHECK_EQ(srv_path_open_data(&r, "fifo", O_RDONLY), -ENXIO);
		CHECK_EQ(srv_path_open_data(&r, "fifo", O_WRONLY), -ENXIO);
	}
	/* Had the FIFO been opened for reading by any of the above, and
	 * kept so, a writer would find a reader; it finds none. */
	check_ctx("fifo never opened");
	{
		int w = openat(fd, "fifo", O_WRONLY | O_NONBLOCK | O_CLOEXEC);

		CHECK(w < 0 && errno == ENXIO);
		if (w >= 0)
			close(w);
	}
	check_ctx("%s", "");
	remove_tree(fd, dir);
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
	test_resolvers();
	return check_exit("test_path");
}
