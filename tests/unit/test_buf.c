// SPDX-License-Identifier: MIT
/*
 * Unit test of common/buf.c: qbuf growth and its limit, and the qcur
 * getters on exact, short and oversized input.  Every input a getter reads
 * is copied into a heap block of exactly its size, so that under ASan a read
 * one byte too far is reported instead of passing silently.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "check.h"

static uint8_t *dup_exact(const void *p, size_t n)
{
	/* malloc(0) may return NULL; the getters must not touch it anyway. */
	uint8_t *q = malloc(n ? n : 1);

	if (!q) {
		perror("malloc");
		exit(1);
	}
	if (n)
		memcpy(q, p, n);
	return q;
}

static void test_put_encoding(void)
{
	static const uint8_t want[] = {
		0x81,
		0x82, 0x83,
		0x84, 0x85, 0x86, 0x87,
		0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
		'x', 'y',
		0, 0, 0, 3, 'a', 'b', 'c', 0,
		0, 0, 0, 0, 0,
		0, 0, 0, 2, 0xff, 0x00,
		0, 0, 0, 0,
	};
	struct qbuf b;

	check_ctx("put encoding");
	qbuf_init(&b, 1024);
	CHECK(b.data == NULL && b.len == 0 && b.cap == 0 && b.limit == 1024);
	CHECK_EQ(qbuf_put_u8(&b, 0x81), 0);
	CHECK_EQ(qbuf_put_u16(&b, 0x8283), 0);
	CHECK_EQ(qbuf_put_u32(&b, 0x84858687u), 0);
	CHECK_EQ(qbuf_put_u64(&b, 0x88898a8b8c8d8e8full), 0);
	CHECK_EQ(qbuf_put_bytes(&b, "xy", 2), 0);
	CHECK_EQ(qbuf_put_str(&b, "abcdef", 3), 0);
	CHECK_EQ(qbuf_put_str(&b, NULL, 0), 0);
	CHECK_EQ(qbuf_put_blob(&b, "\xff\x00", 2), 0);
	CHECK_EQ(qbuf_put_blob(&b, NULL, 0), 0);
	/* Zero bytes is a no-op, even with no source. */
	CHECK_EQ(qbuf_put_bytes(&b, NULL, 0), 0);
	CHECK_EQ(b.len, sizeof(want));
	CHECK(b.len <= b.cap && b.cap <= b.limit);
	CHECK(memcmp(b.data, want, sizeof(want)) == 0);

	qbuf_set_u32(&b, 1, 0xdeadbeefu);
	CHECK(b.data[1] == 0xde && b.data[2] == 0xad && b.data[3] == 0xbe &&
	      b.data[4] == 0xef && b.data[5] == 0x86);
	CHECK_EQ(b.len, sizeof(want));

	qbuf_free(&b);
	CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
	/* Freeing twice, or a buffer never used, is harmless. */
	qbuf_free(&b);
	check_ctx("%s", "");
}

static void test_load_store(void)
{
	uint8_t p[8];

	qft_store16(p, 0xa1b2);
	CHECK(p[0] == 0xa1 && p[1] == 0xb2);
	CHECK_EQ(qft_load16(p), 0xa1b2);
	qft_store32(p, 0xa1b2c3d4u);
	CHECK(p[0] == 0xa1 && p[1] == 0xb2 && p[2] == 0xc3 && p[3] == 0xd4);
	CHECK_EQ(qft_load32(p), 0xa1b2c3d4u);
	qft_store64(p, 0xf1e2d3c4b5a69788ull);
	CHECK(p[0] == 0xf1 && p[3] == 0xc4 && p[4] == 0xb5 && p[7] == 0x88);
	CHECK_EQ(qft_load64(p), 0xf1e2d3c4b5a69788ull);
}

/* Appends 3 MiB in uneven pieces and checks the bytes and the growth. */
static void test_growth(void)
{
	const size_t total = 3u << 20;
	struct qbuf b;
	size_t grows = 0, last_cap = 0, piece = 1;
	uint8_t chunk[4099];
	bool ok = true;

	check_ctx("growth");
	qbuf_init(&b, 4u << 20);
	while (b.len < total) {
		size_t n = piece % sizeof(chunk) + 1;

		if (n > total - b.len)
			n = total - b.len;
		for (size_t i = 0; i < n; i++)
			chunk[i] = (uint8_t)((b.len + i) * 7 + 3);
		if (qbuf_put_bytes(&b, chunk, n) != 0) {
			ok = false;
			break;
		}
		if (b.cap != last_cap) {
			grows++;
			last_cap = b.cap;
		}
		if (!(b.len <= b.cap && b.cap <= b.limit))
			ok = false;
		piece = piece * 31 + 17;
	}
	CHECK(ok);
	CHECK_EQ(b.len, total);
	/* Geometric growth: a couple of dozen reallocations, not thousands. */
	CHECK(grows > 0 && grows <= 24);
	ok = true;
	for (size_t i = 0; i < total; i++)
		if (b.data[i] != (uint8_t)(i * 7 + 3))
			ok = false;
	CHECK(ok);

	/* reset keeps the memory for reuse. */
	last_cap = b.cap;
	qbuf_reset(&b);
	CHECK_EQ(b.len, 0);
	CHECK_EQ(b.cap, last_cap);
	CHECK(b.data != NULL);
	CHECK_EQ(qbuf_put_u32(&b, 7), 0);
	CHECK_EQ(b.cap, last_cap);
	qbuf_free(&b);
	check_ctx("%s", "");
}

enum put_kind {
	PUT_U8, PUT_U16, PUT_U32, PUT_U64, PUT_BYTES, PUT_STR, PUT_BLOB,
	PUT_EXTEND, PUT_RESERVE, PUT__COUNT
};

static const char *const put_names[PUT__COUNT] = {
	"u8", "u16", "u32", "u64", "bytes", "str", "blob", "extend", "reserve",
};

/* Bytes each kind appends (str "hello": 4 + 5 + NUL; blob: 4 + 6). */
static const size_t put_size[PUT__COUNT] = { 1, 2, 4, 8, 7, 10, 10, 3, 5 };

static int do_put(struct qbuf *b, enum put_kind k)
{
	switch (k) {
	case PUT_U8:    return qbuf_put_u8(b, 0xa5);
	case PUT_U16:   return qbuf_put_u16(b, 0xa5a5);
	case PUT_U32:   return qbuf_put_u32(b, 0xa5a5a5a5u);
	case PUT_U64:   return qbuf_put_u64(b, 0xa5a5a5a5a5a5a5a5ull);
	case PUT_BYTES: return qbuf_put_bytes(b, "1234567", 7);
	case PUT_STR:   return qbuf_put_str(b, "hello", 5);
	case PUT_BLOB:  return qbuf_put_blob(b, "blob!!", 6);
	case PUT_EXTEND: return qbuf_extend(b, 3) ? 0 : -EMSGSIZE;
	case PUT_RESERVE: {
		/* Reserve does not append; make it comparable by appending. */
		int r = qbuf_reserve(b, 5);

		if (r == 0 && !qbuf_extend(b, 5))
			r = -EIO;
		return r;
	}
	case PUT__COUNT: break;
	}
	return -EIO;
}

/*
 * For every kind of put and a range of limits: a put that would cross the
 * limit fails with -EMSGSIZE and leaves len, cap, data and the bytes alone;
 * a put that reaches the limit exactly succeeds.
 */
static void test_limit(void)
{
	static const size_t limits[] = {
		0, 1, 2, 3, 7, 9, 10, 15, 16, 100, 255, 256, 257, 1000, 4096,
	};

	for (size_t li = 0; li < sizeof(limits) / sizeof(limits[0]); li++) {
		size_t limit = limits[li];

		for (int k = 0; k < PUT__COUNT; k++) {
			size_t sz = put_size[k];
			struct qbuf b;
			uint8_t *snap;
			uint8_t *old_data;
			size_t old_len, old_cap;

			check_ctx("limit %zu, put %s", limit, put_names[k]);
			qbuf_init(&b, limit);
			/* Fill up to one byte short of room for this put. */
			while (limit - b.len >= sz)
				CHECK_EQ(qbuf_put_u8(&b, (uint8_t)(b.len * 13)), 0);
			CHECK(b.cap <= limit);
			CHECK(limit - b.len < sz);

			old_len = b.len;
			old_cap = b.cap;
			old_data = b.data;
			snap = dup_exact(b.data, b.len);
			CHECK_EQ(do_put(&b, k), -EMSGSIZE);
			CHECK_EQ(b.len, old_len);
			CHECK_EQ(b.cap, old_cap);
			CHECK(b.data == old_data);
			CHECK(old_len == 0 || memcmp(b.data, snap, old_len) == 0);
			free(snap);

			/* Room for exactly sz bytes: the put fits. */
			if (limit >= sz) {
				qbuf_reset(&b);
				while (b.len < limit - sz)
					CHECK_EQ(qbuf_put_u8(&b, 1), 0);
				CHECK_EQ(do_put(&b, k), 0);
				CHECK_EQ(b.len, limit);
				CHECK(b.cap <= limit);
				CHECK_EQ(qbuf_put_u8(&b, 1), -EMSGSIZE);
				CHECK_EQ(qbuf_reserve(&b, 0), 0);
				CHECK_EQ(b.len, limit);
			}
			qbuf_free(&b);
		}
	}
	check_ctx("%s", "");
}

static void test_huge_lengths(void)
{
	struct qbuf b;
	static const uint8_t dummy[1];

	check_ctx("huge lengths");
	/* Lengths no u32 field can carry are refused before any copying. */
	qbuf_init(&b, SIZE_MAX);
	CHECK_EQ(qbuf_put_str(&b, (const char *)dummy, (size_t)UINT32_MAX),
		 -EMSGSIZE);
	if (sizeof(size_t) > 4)
		CHECK_EQ(qbuf_put_blob(&b, dummy, (size_t)UINT32_MAX + 1),
			 -EMSGSIZE);
	CHECK(b.len == 0 && b.data == NULL);
	qbuf_free(&b);

	/* A request bigger than what is left under the limit, no overflow. */
	qbuf_init(&b, 64);
	CHECK_EQ(qbuf_put_u32(&b, 1), 0);
	CHECK_EQ(qbuf_reserve(&b, SIZE_MAX), -EMSGSIZE);
	CHECK_EQ(qbuf_reserve(&b, SIZE_MAX - 2), -EMSGSIZE);
	CHECK(qbuf_extend(&b, SIZE_MAX) == NULL);
	CHECK_EQ(qbuf_put_str(&b, (const char *)dummy, SIZE_MAX - 3), -EMSGSIZE);
	CHECK_EQ(qbuf_put_blob(&b, dummy, SIZE_MAX - 3), -EMSGSIZE);
	CHECK_EQ(b.len, 4);
	qbuf_free(&b);
	check_ctx("%s", "");
}

/* Checks one integer getter on exact, every short, and oversized input. */
static void check_get_int(int width)
{
	uint8_t src[8 + 3];
	uint64_t want = 0;

	for (int i = 0; i < (int)sizeof(src); i++)
		src[i] = (uint8_t)(0xf1 + i * 0x11);
	for (int i = 0; i < width; i++)
		want = want << 8 | src[i];

	for (size_t n = 0; n <= (size_t)width + 3; n++) {
		uint8_t *p = dup_exact(src, n);
		struct qcur c;
		uint64_t got = 0x5555;
		uint8_t v8 = 0x55;
		uint16_t v16 = 0x5555;
		uint32_t v32 = 0x5555;
		int r = -1;

		check_ctx("get u%d, %zu bytes", width * 8, n);
		qcur_init(&c, p, n);
		switch (width) {
		case 1: r = qcur_get_u8(&c, &v8); got = v8; break;
		case 2: r = qcur_get_u16(&c, &v16); got = v16; break;
		case 4: r = qcur_get_u32(&c, &v32); got = v32; break;
		case 8: r = qcur_get_u64(&c, &got); break;
		}
		if (n < (size_t)width) {
			CHECK_EQ(r, -EBADMSG);
			CHECK(c.p == p);
			CHECK_EQ(c.left, n);
			CHECK_EQ(got, 0x55 + (width > 1) * 0x5500);
		} else {
			CHECK_EQ(r, 0);
			CHECK_EQ(got, want);
			CHECK(c.p == p + width);
			CHECK_EQ(c.left, n - width);
		}
		free(p);
	}
	check_ctx("%s", "");
}

static void test_get_bytes(void)
{
	static const uint8_t src[] = { 1, 2, 3, 4, 5 };
	uint8_t *p = dup_exact(src, sizeof(src));
	const uint8_t *out = NULL;
	struct qcur c;

	check_ctx("get bytes");
	qcur_init(&c, p, sizeof(src));
	CHECK_EQ(qcur_get_bytes(&c, &out, 0), 0);
	CHECK(out == p && c.p == p && c.left == 5);
	CHECK_EQ(qcur_get_bytes(&c, &out, 6), -EBADMSG);
	CHECK_EQ(qcur_get_bytes(&c, &out, SIZE_MAX), -EBADMSG);
	CHECK(c.p == p && c.left == 5);
	CHECK_EQ(qcur_get_bytes(&c, &out, 2), 0);
	CHECK(out == p && c.p == p + 2 && c.left == 3);
	CHECK_EQ(qcur_get_bytes(&c, &out, 4), -EBADMSG);
	CHECK(c.p == p + 2 && c.left == 3);
	CHECK_EQ(qcur_get_bytes(&c, &out, 3), 0);
	CHECK(out == p + 2 && c.left == 0);
	CHECK_EQ(qcur_get_bytes(&c, &out, 1), -EBADMSG);
	CHECK_EQ(qcur_get_bytes(&c, &out, 0), 0);
	free(p);
	check_ctx("%s", "");
}

/* Runs qcur_get_str on an exact copy of src[0..n) and checks the outcome. */
static void try_str(const uint8_t *src, size_t n, uint32_t max, int want_r,
		    const char *want_s, size_t line)
{
	uint8_t *p = dup_exact(src, n);
	const char *s = (const char *)"sentinel";
	uint32_t len = 0x5a5a;
	struct qcur c;
	int r;

	qcur_init(&c, p, n);
	r = qcur_get_str(&c, &s, &len, max);
	if (r != want_r)
		fprintf(stderr, "(from line %zu, n %zu, max %u)\n", line, n, max);
	CHECK_EQ(r, want_r);
	if (want_r == 0 && r == 0) {
		size_t wl = strlen(want_s);

		CHECK_EQ(len, wl);
		CHECK(s == (const char *)p + 4);
		CHECK(memcmp(s, want_s, wl) == 0 && s[wl] == '\0');
		CHECK(c.p == p + 4 + wl + 1);
		CHECK_EQ(c.left, n - (4 + wl + 1));
	} else if (r != 0) {
		CHECK(c.p == p);
		CHECK_EQ(c.left, n);
		CHECK(strcmp(s, "sentinel") == 0);
		CHECK_EQ(len, 0x5a5a);
	}
	free(p);
}

static void test_get_str(void)
{
	struct qbuf b;
	uint8_t raw[32];

	check_ctx("get str");
	qbuf_init(&b, 4096);
	CHECK_EQ(qbuf_put_str(&b, "hello", 5), 0);
	CHECK_EQ(b.len, 10);
	/* Exact, then every truncation, then oversized. */
	try_str(b.data, b.len, 255, 0, "hello", __LINE__);
	for (size_t n = 0; n < b.len; n++)
		try_str(b.data, n, 255, -EBADMSG, NULL, __LINE__);
	CHECK_EQ(qbuf_put_u32(&b, 0xabcdef01u), 0);
	try_str(b.data, b.len, 255, 0, "hello", __LINE__);

	/* Bound: len == max is fine, len > max is not. */
	try_str(b.data, 10, 5, 0, "hello", __LINE__);
	try_str(b.data, 10, 4, -EBADMSG, NULL, __LINE__);
	try_str(b.data, 10, 0, -EBADMSG, NULL, __LINE__);

	/* Missing terminator: another byte in its place, or no byte at all. */
	memcpy(raw, "\0\0\0\5helloX", 10);
	try_str(raw, 10, 255, -EBADMSG, NULL, __LINE__);
	try_str(raw, 9, 255, -EBADMSG, NULL, __LINE__);

	/* Embedded NUL, framed correctly: invalid rather than malformed. */
	memcpy(raw, "\0\0\0\5he\0lo\0", 10);
	try_str(raw, 10, 255, -EINVAL, NULL, __LINE__);
	memcpy(raw, "\0\0\0\5\0ello\0", 10);
	try_str(raw, 10, 255, -EINVAL, NULL, __LINE__);
	memcpy(raw, "\0\0\0\5hell\0\0", 10);
	try_str(raw, 10, 255, -EINVAL, NULL, __LINE__);

	/* The empty string still carries its terminator. */
	memcpy(raw, "\0\0\0\0\0", 5);
	try_str(raw, 5, 0, 0, "", __LINE__);
	try_str(raw, 4, 0, -EBADMSG, NULL, __LINE__);
	memcpy(raw, "\0\0\0\0Z", 5);
	try_str(raw, 5, 0, -EBADMSG, NULL, __LINE__);

	/* Non-ASCII bytes pass untouched. */
	memcpy(raw, "\0\0\0\2\xc3\xbc\0", 7);
	try_str(raw, 7, 255, 0, "\xc3\xbc", __LINE__);

	/* Lengths near UINT32_MAX must not wrap any bound check. */
	static const uint32_t huge[] = {
		UINT32_MAX, UINT32_MAX - 1, UINT32_MAX - 3, UINT32_MAX - 4,
		UINT32_MAX - 5, 0x80000000u, 0x7fffffffu,
	};
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		memset(raw, 0, sizeof(raw));
		qft_store32(raw, huge[i]);
		for (size_t n = 0; n <= sizeof(raw); n++) {
			check_ctx("get str len %#x, %zu bytes", huge[i], n);
			try_str(raw, n, UINT32_MAX, -EBADMSG, NULL, __LINE__);
		}
	}
	qbuf_free(&b);
	check_ctx("%s", "");
}

static void try_blob(const uint8_t *src, size_t n, uint32_t max, int want_r,
		     uint32_t want_len)
{
	uint8_t *p = dup_exact(src, n);
	const uint8_t *out = (const uint8_t *)"sentinel";
	uint32_t len = 0x5a5a;
	struct qcur c;
	int r;

	qcur_init(&c, p, n);
	r = qcur_get_blob(&c, &out, &len, max);
	CHECK_EQ(r, want_r);
	if (r == 0 && want_r == 0) {
		CHECK_EQ(len, want_len);
		CHECK(out == p + 4);
		CHECK(memcmp(out, src + 4, len) == 0);
		CHECK(c.p == p + 4 + len);
		CHECK_EQ(c.left, n - 4 - len);
	} else if (r != 0) {
		CHECK(c.p == p && c.left == n);
		CHECK(memcmp(out, "sentinel", 8) == 0);
		CHECK_EQ(len, 0x5a5a);
	}
	free(p);
}

static void test_get_blob(void)
{
	struct qbuf b;
	uint8_t raw[32];

	check_ctx("get blob");
	qbuf_init(&b, 4096);
	/* Blobs may hold any byte, NUL included. */
	CHECK_EQ(qbuf_put_blob(&b, "\0ab\0\xff\0", 6), 0);
	CHECK_EQ(b.len, 10);
	try_blob(b.data, b.len, 6, 0, 6);
	try_blob(b.data, b.len, 5, -EBADMSG, 0);
	for (size_t n = 0; n < b.len; n++) {
		check_ctx("get blob, %zu bytes", n);
		try_blob(b.data, n, 1000, -EBADMSG, 0);
	}
	check_ctx("get blob");
	CHECK_EQ(qbuf_put_u8(&b, 9), 0);
	try_blob(b.data, b.len, 1000, 0, 6);

	memcpy(raw, "\0\0\0\0", 4);
	try_blob(raw, 4, 0, 0, 0);
	try_blob(raw, 3, 0, -EBADMSG, 0);

	static const uint32_t huge[] = {
		UINT32_MAX, UINT32_MAX - 1, UINT32_MAX - 3, UINT32_MAX - 4,
		0x80000000u,
	};
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		memset(raw, 0x33, sizeof(raw));
		qft_store32(raw, huge[i]);
		for (size_t n = 0; n <= sizeof(raw); n++) {
			check_ctx("get blob len %#x, %zu bytes", huge[i], n);
			try_blob(raw, n, UINT32_MAX, -EBADMSG, 0);
		}
	}
	qbuf_free(&b);
	check_ctx("%s", "");
}

static int get_chain(struct qcur *c, uint32_t *v32, const char **s,
		     uint32_t *len, uint64_t *v64)
{
	int r;

	if ((r = qcur_get_u32(c, v32)) < 0 ||
	    (r = qcur_get_str(c, s, len, 255)) < 0 ||
	    (r = qcur_get_u64(c, v64)) < 0)
		return r;
	return 0;
}

/* Gets chained the documented way stop at the first failure in place. */
static void test_chain(void)
{
	struct qbuf b;
	struct qcur c;
	uint32_t v32, len;
	uint64_t v64;
	const char *s;
	int r;

	check_ctx("chain");
	qbuf_init(&b, 256);
	CHECK_EQ(qbuf_put_u32(&b, 42), 0);
	CHECK_EQ(qbuf_put_str(&b, "name", 4), 0);
	CHECK_EQ(qbuf_put_u32(&b, 7), 0); /* too short for the u64 below */
	qcur_init(&c, b.data, b.len);
	r = get_chain(&c, &v32, &s, &len, &v64);
	CHECK_EQ(r, -EBADMSG);
	CHECK_EQ(v32, 42);
	CHECK(len == 4 && strcmp(s, "name") == 0);
	CHECK_EQ(c.left, 4);
	CHECK(c.p == b.data + 13);
	qbuf_free(&b);
	check_ctx("%s", "");
}

int main(void)
{
	test_put_encoding();
	test_load_store();
	test_growth();
	test_limit();
	test_huge_lengths();
	check_get_int(1);
	check_get_int(2);
	check_get_int(4);
	check_get_int(8);
	test_get_bytes();
	test_get_str();
	test_get_blob();
	test_chain();
	return check_exit("test_buf");
}
