// SPDX-License-Identifier: MIT
/*
 * Unit test of common/errmap.c: the errno <-> status mapping and the open
 * flag mapping.  The expected pairs are spelled out here independently of
 * errmap.c's table, so a swapped entry there shows up as a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>

#include "check.h"
#include "errmap.h"
#include "protocol.h"

static const struct {
	uint32_t status;
	int err;
	const char *name;
} pairs[] = {
#define P(x) { QFT_##x, x, #x }
	{ QFT_OK, 0, "OK" },
	P(EPERM), P(ENOENT), P(EIO), P(EBADF), P(ENOMEM), P(EACCES),
	P(EBUSY), P(EEXIST), P(EXDEV), P(ENOTDIR), P(EISDIR), P(EINVAL),
	P(ENFILE), P(EMFILE), P(ETXTBSY), P(EFBIG), P(ENOSPC), P(ESPIPE),
	P(EROFS), P(EMLINK), P(ERANGE), P(ENAMETOOLONG), P(ENOSYS),
	P(ENOTEMPTY), P(ELOOP), P(ENODATA), P(EOVERFLOW), P(EPROTO),
	P(EOPNOTSUPP), P(EDQUOT), P(ESTALE), P(ETIMEDOUT), P(EAGAIN),
	P(EINTR), P(E2BIG), P(ENXIO), P(ENODEV), P(ECANCELED),
#undef P
};

static void test_status_table(void)
{
	bool seen[QFT_STATUS__COUNT] = { false };

	/* The numbers are on the wire: they may only ever be appended to. */
	CHECK_EQ(QFT_OK, 0);
	CHECK_EQ(QFT_EPERM, 1);
	CHECK_EQ(QFT_EIO, 3);
	CHECK_EQ(QFT_EACCES, 6);
	CHECK_EQ(QFT_EINVAL, 12);
	CHECK_EQ(QFT_EFBIG, 16);
	CHECK_EQ(QFT_ENOSPC, 17);
	CHECK_EQ(QFT_EROFS, 19);
	CHECK_EQ(QFT_ENOSYS, 23);
	CHECK_EQ(QFT_EDQUOT, 30);
	CHECK_EQ(QFT_ECANCELED, 38);
	CHECK_EQ(QFT_STATUS__COUNT, 39);

	CHECK_EQ(sizeof(pairs) / sizeof(pairs[0]), QFT_STATUS__COUNT);
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		check_ctx("status %s", pairs[i].name);
		CHECK(pairs[i].status < QFT_STATUS__COUNT);
		if (pairs[i].status < QFT_STATUS__COUNT) {
			CHECK(!seen[pairs[i].status]);
			seen[pairs[i].status] = true;
		}
		CHECK_EQ(qft_errno_from_status(pairs[i].status), pairs[i].err);
		CHECK_EQ(qft_status_from_errno(pairs[i].err), pairs[i].status);
	}
	/* Every status maps to an errno that maps back to it. */
	for (uint32_t s = 0; s < QFT_STATUS__COUNT; s++) {
		int e = qft_errno_from_status(s);

		check_ctx("status %u", s);
		CHECK(s == QFT_OK ? e == 0 : e > 0);
		CHECK_EQ(qft_status_from_errno(e), s);
	}
	check_ctx("%s", "");
}

static void test_unknown(void)
{
	static const uint32_t bad_status[] = {
		QFT_STATUS__COUNT, QFT_STATUS__COUNT + 1, 255, 0x10000,
		0x7fffffffu, 0x80000000u, UINT32_MAX,
	};
	static const int bad_errno[] = {
		EDEADLK, ENOLINK, ECHILD, EDOM, EILSEQ, EHWPOISON, 4095, 9999,
		INT_MAX, -1, -EIO, INT_MIN,
	};

	for (size_t i = 0; i < sizeof(bad_status) / sizeof(bad_status[0]); i++) {
		check_ctx("status %#x", bad_status[i]);
		CHECK_EQ(qft_errno_from_status(bad_status[i]), EIO);
	}
	for (size_t i = 0; i < sizeof(bad_errno) / sizeof(bad_errno[0]); i++) {
		check_ctx("errno %d", bad_errno[i]);
		CHECK_EQ(qft_status_from_errno(bad_errno[i]), QFT_EIO);
	}
	check_ctx("%s", "");

	/* Linux aliases travel as their canonical code. */
	CHECK_EQ(qft_status_from_errno(ENOTSUP), QFT_EOPNOTSUPP);
	CHECK_EQ(qft_status_from_errno(EWOULDBLOCK), QFT_EAGAIN);

	/*
	 * Whatever the host errno, the round trip gives either that errno or
	 * EIO: never some other error that would mislead the caller.
	 */
	for (int e = 1; e < 4096; e++) {
		uint32_t s = qft_status_from_errno(e);
		int back = qft_errno_from_status(s);

		check_ctx("errno %d", e);
		CHECK(s < QFT_STATUS__COUNT);
		CHECK(back == e || (s == QFT_EIO && back == EIO));
	}
	check_ctx("%s", "");
}

/* Errors that cp and rsync must see exactly (design brief, point 3). */
static void test_identity(void)
{
	static const int keep[] = { ENOSPC, EDQUOT, EFBIG, EACCES, EROFS, EIO };

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		check_ctx("errno %d", keep[i]);
		CHECK(qft_status_from_errno(keep[i]) != QFT_OK);
		CHECK_EQ(qft_errno_from_status(qft_status_from_errno(keep[i])),
			 keep[i]);
	}
	check_ctx("%s", "");
	CHECK_EQ(qft_status_from_errno(0), QFT_OK);
	CHECK_EQ(qft_errno_from_status(QFT_OK), 0);
}

static const struct {
	uint32_t qft;
	int host;
} flag_pairs[] = {
	{ QFT_O_APPEND, O_APPEND }, { QFT_O_TRUNC, O_TRUNC },
	{ QFT_O_EXCL, O_EXCL }, { QFT_O_SYNC, O_SYNC },
	{ QFT_O_DSYNC, O_DSYNC }, { QFT_O_NOATIME, O_NOATIME },
};
#define NFLAGS (sizeof(flag_pairs) / sizeof(flag_pairs[0]))

static const struct {
	uint32_t qft;
	int host;
} acc_pairs[] = {
	{ QFT_O_RDONLY, O_RDONLY }, { QFT_O_WRONLY, O_WRONLY },
	{ QFT_O_RDWR, O_RDWR },
};

static void test_oflags(void)
{
	const int host_known = O_ACCMODE | O_APPEND | O_TRUNC | O_EXCL |
			       O_SYNC | O_DSYNC | O_NOATIME;

	for (size_t a = 0; a < 3; a++) {
		for (unsigned set = 0; set < (1u << NFLAGS); set++) {
			uint32_t q = acc_pairs[a].qft, q2;
			int h = acc_pairs[a].host, h2;

			for (size_t i = 0; i < NFLAGS; i++) {
				if (set & (1u << i)) {
					q |= flag_pairs[i].qft;
					h |= flag_pairs[i].host;
				}
			}
			/*
			 * O_SYNC is O_DSYNC plus more on Linux, so a host
			 * O_SYNC always reads as both protocol bits.
			 */
			if (q & QFT_O_SYNC)
				q |= QFT_O_DSYNC;
			check_ctx("acc %zu, set %#x", a, set);

			/* host -> protocol -> host is the identity. */
			q2 = qft_oflags_from_host(h);
			CHECK_EQ(q2, q);
			CHECK_EQ(q2 & ~QFT_O_KNOWN, 0);
			h2 = qft_oflags_to_host(q2);
			CHECK_EQ(h2, h);

			/* protocol -> host -> protocol too. */
			CHECK_EQ(qft_oflags_to_host(q), h);
			CHECK_EQ(qft_oflags_from_host(qft_oflags_to_host(q)), q);

			/* Host flags with no protocol meaning are dropped. */
			CHECK_EQ(qft_oflags_from_host(h | O_CREAT | O_CLOEXEC |
						      O_NONBLOCK | O_NOCTTY |
						      O_DIRECTORY | O_NOFOLLOW),
				 q);
		}
	}
	check_ctx("%s", "");
	CHECK_EQ(qft_oflags_from_host(O_SYNC), QFT_O_SYNC | QFT_O_DSYNC);
	CHECK_EQ(qft_oflags_from_host(O_DSYNC), QFT_O_DSYNC);
	CHECK_EQ(qft_oflags_to_host(QFT_O_SYNC), O_SYNC);
	/* QFT_O_LAZY is for the server's pacing, not a host open flag. */
	CHECK_EQ(qft_oflags_to_host(QFT_O_WRONLY | QFT_O_TRUNC | QFT_O_LAZY),
		 O_WRONLY | O_TRUNC);
	CHECK_EQ(qft_oflags_from_host(~O_ACCMODE | O_RDWR) & QFT_O_LAZY, 0);

	/*
	 * A peer's flags can only ever become the listed host flags with a
	 * real access mode: never O_CREAT, O_PATH, O_TMPFILE or mode 3.
	 */
	bool ok = true;
	for (uint64_t f = 0; f <= 0xffff; f++) {
		int h = qft_oflags_to_host((uint32_t)f);

		if ((h & ~host_known) || (h & O_ACCMODE) == O_ACCMODE)
			ok = false;
	}
	for (int bit = 16; bit < 32; bit++) {
		int h = qft_oflags_to_host(1u << bit | QFT_O_RDWR);

		if (h != O_RDWR)
			ok = false;
	}
	CHECK(ok);
}

int main(void)
{
	test_status_table();
	test_unknown();
	test_identity();
	test_oflags();
	return check_exit("test_errmap");
}
