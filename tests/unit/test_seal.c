// SPDX-License-Identifier: MIT
/*
 * Record sealing (common/seal.c): round trips for every cipher and size,
 * the wire format checked against an independent OpenSSL computation, and
 * every way a record can be tampered with, replayed, reordered or sent
 * with the wrong key failing with -EBADMSG.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "check.h"
#include "seal.h"

static const enum qft_cipher ciphers[] = {
	QFT_CIPHER_NONE, QFT_CIPHER_AES256GCM, QFT_CIPHER_CHACHA20POLY1305,
};
#define N_CIPHERS (sizeof(ciphers) / sizeof(ciphers[0]))

static uint8_t key_a[QFT_KEY_SIZE], key_b[QFT_KEY_SIZE];

/* A recognisable pattern that must not survive encryption. */
static const char pattern[] = "qftfs-plaintext-pattern-0123456789";

static void fill_frame(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static void fill_pattern(uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)pattern[i % (sizeof(pattern) - 1)];
}

static void pair_init(enum qft_cipher c, const uint8_t *tx_key,
		      const uint8_t *rx_key, struct qft_seal *tx,
		      struct qft_seal *rx)
{
	CHECK_EQ(qft_seal_init(tx, c, tx_key, true), 0);
	CHECK_EQ(qft_seal_init(rx, c, rx_key, false), 0);
}

static void pair_free(struct qft_seal *tx, struct qft_seal *rx)
{
	qft_seal_free(tx);
	qft_seal_free(rx);
}

/* Opens a copy of a record the way a receiver would: length first. */
static int open_copy(struct qft_seal *rx, const uint8_t *rec, size_t n,
		     uint8_t **copy, uint8_t **frame, size_t *frame_len)
{
	size_t body;
	int r;

	*copy = NULL;
	if (n < QFT_SEAL_LEN_SIZE)
		return -EBADMSG;
	r = qft_seal_body_len(rec, &body);
	if (r < 0)
		return r;
	if (body != n - QFT_SEAL_LEN_SIZE)
		return -EBADMSG;
	*copy = malloc(n);
	if (!*copy)
		return -ENOMEM;
	memcpy(*copy, rec, n);
	return qft_open_record(rx, *copy, n, frame, frame_len);
}

static void test_names(void)
{
	enum qft_cipher c;
	size_t i;

	check_ctx("names");
	for (i = 0; i < N_CIPHERS; i++) {
		const char *name = qft_cipher_name(ciphers[i]);

		CHECK(name != NULL);
		CHECK_EQ(qft_cipher_parse(name, &c), 0);
		CHECK_EQ(c, ciphers[i]);
	}
	CHECK_EQ(qft_cipher_parse("aes128-cbc", &c), -EINVAL);
	CHECK_EQ(qft_cipher_parse("", &c), -EINVAL);
	CHECK(qft_cipher_name(QFT_CIPHER__COUNT) == NULL);
	CHECK(qft_cipher_name((enum qft_cipher)-1) == NULL);
	check_ctx("%s", "");
}

static void test_init_args(void)
{
	struct qft_seal s, rx;
	struct qbuf out;
	uint8_t *frame;
	size_t len;
	uint8_t rec[QFT_SEAL_OVERHEAD];

	check_ctx("init args");
	CHECK_EQ(qft_seal_init(&s, QFT_CIPHER__COUNT, key_a, true), -EINVAL);
	qft_seal_free(&s);
	CHECK_EQ(qft_seal_init(&s, (enum qft_cipher)-1, key_a, true), -EINVAL);
	qft_seal_free(&s);

	/* Each struct does one direction only. */
	pair_init(QFT_CIPHER_AES256GCM, key_a, key_a, &s, &rx);
	qbuf_init(&out, QFT_SEAL_MAX_RECORD);
	CHECK_EQ(qft_seal_record(&rx, rec, 0, &out), -EINVAL);
	CHECK_EQ(out.len, 0);
	CHECK_EQ(qft_seal_record(&s, rec, 0, &out), 0);
	CHECK_EQ(qft_open_record(&s, out.data, out.len, &frame, &len),
		 -EINVAL);
	CHECK_EQ(qft_open_record(&rx, out.data, out.len, &frame, &len), 0);
	CHECK_EQ(len, 0);
	qbuf_free(&out);
	pair_free(&s, &rx);
	/* A freed struct refuses work instead of crashing. */
	CHECK(qft_seal_in_place(&s, rec, 0) < 0);
	check_ctx("%s", "");
}

static void test_round_trip(enum qft_cipher c)
{
	static const size_t sizes[] = {
		0, 1, 16, 4096, 16384, (1u << 20) + QFT_HDR_SIZE,
		QFT_SEAL_MAX_FRAME,
	};
	size_t n_sizes = sizeof(sizes) / sizeof(sizes[0]);
	struct qft_seal tx, rx;
	struct qbuf out;
	uint8_t *src, *frame;
	size_t i, len, off, body;
	int round;

	src = malloc(QFT_SEAL_MAX_FRAME);
	CHECK(src != NULL);
	if (!src)
		return;
	pair_init(c, key_a, key_a, &tx, &rx);
	qbuf_init(&out, 4 * QFT_SEAL_MAX_RECORD);
	/* Twice through, so the counter runs past a few values and the
	 * reused context is exercised at every size after every other. */
	for (round = 0; round < 2; round++) {
		qbuf_reset(&out);
		for (i = 0; i < n_sizes; i++) {
			check_ctx("round trip %s size %zu round %d",
				  qft_cipher_name(c), sizes[i], round);
			fill_frame(src, sizes[i], (unsigned)(i + 10 * round));
			CHECK_EQ(qft_seal_record(&tx, src, sizes[i], &out), 0);
		}
		/* The records lie back to back as they would on the wire. */
		off = 0;
		for (i = 0; i < n_sizes; i++) {
			check_ctx("round trip %s size %zu round %d",
				  qft_cipher_name(c), sizes[i], round);
			CHECK(out.len - off >= QFT_SEAL_OVERHEAD + sizes[i]);
			CHECK_EQ(qft_seal_body_len(out.data + off, &body), 0);
			CHECK_EQ(body, sizes[i] + QFT_SEAL_TAG_SIZE);
			CHECK_EQ(qft_open_record(&rx, out.data + off,
						 QFT_SEAL_LEN_SIZE + body,
						 &frame, &len), 0);
			CHECK_EQ(len, sizes[i]);
			CHECK(frame == out.data + off + QFT_SEAL_LEN_SIZE);
			fill_frame(src, sizes[i], (unsigned)(i + 10 * round));
			CHECK(len == 0 || memcmp(frame, src, len) == 0);
			off += QFT_SEAL_LEN_SIZE + body;
		}
		CHECK_EQ(off, out.len);
	}
	CHECK_EQ(tx.seq, 2 * n_sizes);
	CHECK_EQ(rx.seq, 2 * n_sizes);
	qbuf_free(&out);
	pair_free(&tx, &rx);
	free(src);
	check_ctx("%s", "");
}

static void test_in_place(enum qft_cipher c)
{
	struct qft_seal tx, rx;
	uint8_t rec[QFT_SEAL_OVERHEAD + 300], want[300];
	uint8_t *frame;
	size_t len;
	int i;

	check_ctx("in place %s", qft_cipher_name(c));
	pair_init(c, key_a, key_a, &tx, &rx);
	for (i = 0; i < 3; i++) {
		fill_frame(want, sizeof(want), (unsigned)i);
		memcpy(rec + QFT_SEAL_LEN_SIZE, want, sizeof(want));
		CHECK_EQ(qft_seal_in_place(&tx, rec, sizeof(want)), 0);
		CHECK_EQ(qft_load32(rec), sizeof(want) + QFT_SEAL_TAG_SIZE);
		CHECK_EQ(qft_open_record(&rx, rec, sizeof(rec), &frame, &len),
			 0);
		CHECK_EQ(len, sizeof(want));
		CHECK(memcmp(frame, want, sizeof(want)) == 0);
	}
	pair_free(&tx, &rx);
	check_ctx("%s", "");
}

/*
 * Recomputes record `seq` with a one-shot context from the format as
 * documented: nonce 0^4 || u64 BE seq, AAD = length (|| frame for none).
 */
static void check_format(enum qft_cipher c, const uint8_t *key,
			 uint64_t seq, const uint8_t *frame, size_t n,
			 const uint8_t *rec)
{
	const EVP_CIPHER *evp = c == QFT_CIPHER_CHACHA20POLY1305 ?
		EVP_chacha20_poly1305() : EVP_aes_256_gcm();
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	uint8_t iv[12] = { 0 }, len_field[4], tag[16];
	uint8_t *body = malloc(n + 1);
	int outl;

	CHECK(ctx != NULL && body != NULL);
	if (!ctx || !body)
		goto out;
	qft_store64(iv + 4, seq);
	qft_store32(len_field, (uint32_t)(n + 16));
	CHECK(EVP_EncryptInit_ex(ctx, evp, NULL, key, iv) == 1);
	CHECK(EVP_EncryptUpdate(ctx, NULL, &outl, len_field, 4) == 1);
	if (c == QFT_CIPHER_NONE) {
		CHECK(EVP_EncryptUpdate(ctx, NULL, &outl, frame, (int)n) == 1);
		memcpy(body, frame, n);
	} else {
		CHECK(EVP_EncryptUpdate(ctx, body, &outl, frame, (int)n) == 1);
	}
	CHECK(EVP_EncryptFinal_ex(ctx, tag, &outl) == 1);
	CHECK(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) == 1);
	CHECK(memcmp(rec, len_field, 4) == 0);
	CHECK(memcmp(rec + 4, body, n) == 0);
	CHECK(memcmp(rec + 4 + n, tag, 16) == 0);
out:
	EVP_CIPHER_CTX_free(ctx);
	free(body);
}

static void test_format(enum qft_cipher c)
{
	struct qft_seal tx;
	struct qbuf out;
	uint8_t frame[100];
	size_t first;
	uint64_t seq;

	check_ctx("format %s", qft_cipher_name(c));
	CHECK_EQ(qft_seal_init(&tx, c, key_a, true), 0);
	qbuf_init(&out, QFT_SEAL_MAX_RECORD);
	fill_frame(frame, sizeof(frame), 3);
	for (seq = 0; seq < 3; seq++) {
		qbuf_reset(&out);
		CHECK_EQ(qft_seal_record(&tx, frame, sizeof(frame), &out), 0);
		CHECK_EQ(out.len, QFT_SEAL_OVERHEAD + sizeof(frame));
		check_format(c, key_a, seq, frame, sizeof(frame), out.data);
	}
	/* Near the top of the counter, where the high nonce bytes matter. */
	tx.seq = 0x0102030405060708ull;
	qbuf_reset(&out);
	CHECK_EQ(qft_seal_record(&tx, frame, sizeof(frame), &out), 0);
	check_format(c, key_a, 0x0102030405060708ull, frame, sizeof(frame),
		     out.data);
	/* Same frame, next counter: a different record. */
	first = out.len;
	CHECK_EQ(qft_seal_record(&tx, frame, sizeof(frame), &out), 0);
	CHECK(memcmp(out.data + first + QFT_SEAL_LEN_SIZE,
		     out.data + QFT_SEAL_LEN_SIZE,
		     sizeof(frame) + QFT_SEAL_TAG_SIZE) != 0);
	qbuf_free(&out);
	qft_seal_free(&tx);
	check_ctx("%s", "");
}

/* Seals `n` records of `len` bytes each into separate buffers. */
static void seal_n(struct qft_seal *tx, struct qbuf *recs, int n, size_t len)
{
	uint8_t frame[512];
	int i;

	for (i = 0; i < n; i++) {
		fill_frame(frame, len, (unsigned)i);
		qbuf_init(&recs[i], QFT_SEAL_MAX_RECORD);
		CHECK_EQ(qft_seal_record(tx, frame, len, &recs[i]), 0);
	}
}

static void free_n(struct qbuf *recs, int n)
{
	int i;

	for (i = 0; i < n; i++)
		qbuf_free(&recs[i]);
}

static int open_rec(struct qft_seal *rx, const struct qbuf *rec)
{
	uint8_t *copy, *frame;
	size_t len;
	int r;

	r = open_copy(rx, rec->data, rec->len, &copy, &frame, &len);
	free(copy);
	return r;
}

static void test_tamper(enum qft_cipher c)
{
	struct qft_seal tx, rx;
	struct qbuf rec[1];
	uint8_t *copy, *frame;
	size_t len, pos, n, i;
	int bit;

	CHECK_EQ(qft_seal_init(&tx, c, key_a, true), 0);
	seal_n(&tx, rec, 1, 200);
	n = rec[0].len;
	/* Every bit of the length, and of the body and tag. */
	for (pos = 0; pos < n; pos++) {
		for (bit = 0; bit < 8; bit++) {
			uint8_t *bad;
			size_t body;
			int r;

			if (pos >= 8 && pos < n - 20 && bit != 0 && bit != 7)
				continue; /* the middle of the body: two bits */
			check_ctx("tamper %s pos %zu bit %d",
				  qft_cipher_name(c), pos, bit);
			CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
			bad = malloc(n);
			CHECK(bad != NULL);
			if (!bad)
				continue;
			memcpy(bad, rec[0].data, n);
			bad[pos] ^= (uint8_t)(1u << bit);
			/* A changed length fails the range check (before a
			 * receiver allocates) or no longer matches the record
			 * that was framed with it. */
			r = qft_seal_body_len(bad, &body);
			CHECK(r == -EBADMSG || body != n - QFT_SEAL_LEN_SIZE ||
			      pos >= QFT_SEAL_LEN_SIZE);
			/* open_record applies the same checks itself. */
			r = qft_open_record(&rx, bad, n, &frame, &len);
			CHECK_EQ(r, -EBADMSG);
			if (pos >= QFT_SEAL_LEN_SIZE) {
				/* No unauthenticated plaintext is left. */
				for (i = QFT_SEAL_LEN_SIZE;
				     i < n - QFT_SEAL_TAG_SIZE; i++)
					if (bad[i])
						break;
				CHECK_EQ(i, n - QFT_SEAL_TAG_SIZE);
			}
			/* Failure is final: the genuine record fails too. */
			CHECK_EQ(open_copy(&rx, rec[0].data, n, &copy, &frame,
					   &len), -EBADMSG);
			free(copy);
			free(bad);
			qft_seal_free(&rx);
		}
	}
	/* Truncated or extended records never open. */
	check_ctx("truncate %s", qft_cipher_name(c));
	for (i = 0; i < n; i += 7) {
		CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
		copy = malloc(n);
		memcpy(copy, rec[0].data, n);
		CHECK_EQ(qft_open_record(&rx, copy, i, &frame, &len), -EBADMSG);
		free(copy);
		qft_seal_free(&rx);
	}
	CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
	copy = malloc(n + 1);
	memcpy(copy, rec[0].data, n);
	copy[n] = 0;
	CHECK_EQ(qft_open_record(&rx, copy, n + 1, &frame, &len), -EBADMSG);
	free(copy);
	qft_seal_free(&rx);

	free_n(rec, 1);
	qft_seal_free(&tx);
	check_ctx("%s", "");
}

static void test_sequence(enum qft_cipher c)
{
	struct qft_seal tx, rx;
	struct qbuf rec[4];

	pair_init(c, key_a, key_a, &tx, &rx);
	seal_n(&tx, rec, 4, 64);

	check_ctx("replay %s", qft_cipher_name(c));
	CHECK_EQ(open_rec(&rx, &rec[0]), 0);
	CHECK_EQ(open_rec(&rx, &rec[0]), -EBADMSG);
	qft_seal_free(&rx);

	check_ctx("reorder %s", qft_cipher_name(c));
	CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
	CHECK_EQ(open_rec(&rx, &rec[1]), -EBADMSG);
	CHECK_EQ(open_rec(&rx, &rec[0]), -EBADMSG); /* sticky */
	qft_seal_free(&rx);

	check_ctx("drop %s", qft_cipher_name(c));
	CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
	CHECK_EQ(open_rec(&rx, &rec[0]), 0);
	CHECK_EQ(open_rec(&rx, &rec[2]), -EBADMSG);
	qft_seal_free(&rx);

	check_ctx("in order %s", qft_cipher_name(c));
	CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
	CHECK_EQ(open_rec(&rx, &rec[0]), 0);
	CHECK_EQ(open_rec(&rx, &rec[1]), 0);
	CHECK_EQ(open_rec(&rx, &rec[2]), 0);
	CHECK_EQ(open_rec(&rx, &rec[3]), 0);
	qft_seal_free(&rx);

	check_ctx("other key %s", qft_cipher_name(c));
	CHECK_EQ(qft_seal_init(&rx, c, key_b, false), 0);
	CHECK_EQ(open_rec(&rx, &rec[0]), -EBADMSG);
	qft_seal_free(&rx);

	free_n(rec, 4);
	pair_free(&tx, &rx);
	check_ctx("%s", "");
}

/* The two directions of one connection: c2s key a, s2c key b. */
static void test_directions(enum qft_cipher c)
{
	struct qft_seal c_tx, c_rx, s_tx, s_rx;
	struct qbuf up[1], down[1];

	check_ctx("directions %s", qft_cipher_name(c));
	pair_init(c, key_a, key_a, &c_tx, &s_rx);
	pair_init(c, key_b, key_b, &s_tx, &c_rx);
	seal_n(&c_tx, up, 1, 80);
	seal_n(&s_tx, down, 1, 80);
	/* Reflecting a record back at its sender fails. */
	CHECK_EQ(open_rec(&c_rx, &up[0]), -EBADMSG);
	CHECK_EQ(open_rec(&s_rx, &down[0]), -EBADMSG);
	qft_seal_free(&c_rx);
	qft_seal_free(&s_rx);
	CHECK_EQ(qft_seal_init(&c_rx, c, key_b, false), 0);
	CHECK_EQ(qft_seal_init(&s_rx, c, key_a, false), 0);
	CHECK_EQ(open_rec(&s_rx, &up[0]), 0);
	CHECK_EQ(open_rec(&c_rx, &down[0]), 0);
	free_n(up, 1);
	free_n(down, 1);
	pair_free(&c_tx, &s_rx);
	pair_free(&s_tx, &c_rx);
	check_ctx("%s", "");
}

/* A record sealed with one cipher never opens as another. */
static void test_cross_cipher(void)
{
	struct qft_seal tx, rx;
	struct qbuf rec[1];
	size_t i, j;

	for (i = 0; i < N_CIPHERS; i++) {
		for (j = 0; j < N_CIPHERS; j++) {
			if (i == j)
				continue;
			check_ctx("cross %s -> %s",
				  qft_cipher_name(ciphers[i]),
				  qft_cipher_name(ciphers[j]));
			CHECK_EQ(qft_seal_init(&tx, ciphers[i], key_a, true), 0);
			CHECK_EQ(qft_seal_init(&rx, ciphers[j], key_a, false),
				 0);
			seal_n(&tx, rec, 1, 64);
			CHECK_EQ(open_rec(&rx, &rec[0]), -EBADMSG);
			free_n(rec, 1);
			pair_free(&tx, &rx);
		}
	}
	check_ctx("%s", "");
}

static void test_limits(enum qft_cipher c)
{
	static const uint32_t bad_len[] = {
		0, 1, QFT_SEAL_TAG_SIZE - 1, QFT_SEAL_MAX_BODY + 1,
		QFT_SEAL_MAX_BODY + 4096, 0x7fffffffu, 0xffffffffu,
	};
	struct qft_seal tx, rx;
	struct qbuf out, small;
	uint8_t lenf[4], frame[64], rec[QFT_SEAL_OVERHEAD + 64];
	uint8_t *big, *f;
	size_t body, i, flen;

	check_ctx("limits %s", qft_cipher_name(c));
	for (i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++) {
		qft_store32(lenf, bad_len[i]);
		body = 12345;
		CHECK_EQ(qft_seal_body_len(lenf, &body), -EBADMSG);
		CHECK_EQ(body, 12345);
	}
	qft_store32(lenf, QFT_SEAL_MAX_BODY);
	CHECK_EQ(qft_seal_body_len(lenf, &body), 0);
	CHECK_EQ(body, QFT_SEAL_MAX_BODY);
	qft_store32(lenf, QFT_SEAL_MIN_BODY);
	CHECK_EQ(qft_seal_body_len(lenf, &body), 0);

	/* An oversized length never reaches the cipher, even when the
	 * caller hands over a buffer that really is that long. */
	pair_init(c, key_a, key_a, &tx, &rx);
	big = calloc(1, QFT_SEAL_LEN_SIZE + QFT_SEAL_MAX_BODY + 1);
	CHECK(big != NULL);
	if (big) {
		qft_store32(big, QFT_SEAL_MAX_BODY + 1);
		CHECK_EQ(qft_open_record(&rx, big,
					 QFT_SEAL_LEN_SIZE +
					 QFT_SEAL_MAX_BODY + 1, &f, &flen),
			 -EBADMSG);
		free(big);
	}
	qft_seal_free(&rx);

	/* Sealing refuses too-long frames and leaves the output alone. */
	big = malloc(QFT_SEAL_MAX_FRAME + 1);
	CHECK(big != NULL);
	qbuf_init(&out, 2 * QFT_SEAL_MAX_RECORD);
	CHECK_EQ(qbuf_put_u32(&out, 0xdeadbeef), 0);
	if (big) {
		memset(big, 0x5a, QFT_SEAL_MAX_FRAME + 1);
		CHECK_EQ(qft_seal_record(&tx, big, QFT_SEAL_MAX_FRAME + 1,
					 &out), -EMSGSIZE);
		CHECK_EQ(out.len, 4);
		CHECK_EQ(qft_seal_in_place(&tx, big, QFT_SEAL_MAX_FRAME + 1),
			 -EMSGSIZE);
		free(big);
	}
	/* A qbuf whose limit is too small: -EMSGSIZE, nothing consumed. */
	qbuf_init(&small, QFT_SEAL_OVERHEAD + sizeof(frame) - 1);
	fill_frame(frame, sizeof(frame), 9);
	CHECK_EQ(qft_seal_record(&tx, frame, sizeof(frame), &small), -EMSGSIZE);
	CHECK_EQ(small.len, 0);
	CHECK_EQ(tx.seq, 0);
	qbuf_free(&small);
	qbuf_free(&out);

	/* The counter stops at 2^64 - 1 instead of reusing a nonce. */
	CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
	tx.seq = UINT64_MAX - 1;
	rx.seq = UINT64_MAX - 1;
	memcpy(rec + QFT_SEAL_LEN_SIZE, frame, sizeof(frame));
	CHECK_EQ(qft_seal_in_place(&tx, rec, sizeof(frame)), 0);
	CHECK_EQ(qft_open_record(&rx, rec, sizeof(rec), &f, &flen), 0);
	CHECK(memcmp(f, frame, sizeof(frame)) == 0);
	memcpy(rec + QFT_SEAL_LEN_SIZE, frame, sizeof(frame));
	CHECK_EQ(qft_seal_in_place(&tx, rec, sizeof(frame)), -EOVERFLOW);
	CHECK_EQ(tx.seq, UINT64_MAX);
	qft_store32(rec, sizeof(frame) + QFT_SEAL_TAG_SIZE);
	CHECK_EQ(qft_open_record(&rx, rec, sizeof(rec), &f, &flen),
		 -EOVERFLOW);
	pair_free(&tx, &rx);
	check_ctx("%s", "");
}

static void test_visibility(enum qft_cipher c)
{
	struct qft_seal tx, rx;
	struct qbuf out;
	uint8_t *frame, *copy, *f;
	size_t n = 16384, len;

	check_ctx("visibility %s", qft_cipher_name(c));
	frame = malloc(n);
	CHECK(frame != NULL);
	if (!frame)
		return;
	fill_pattern(frame, n);
	pair_init(c, key_a, key_a, &tx, &rx);
	qbuf_init(&out, QFT_SEAL_MAX_RECORD);
	CHECK_EQ(qft_seal_record(&tx, frame, n, &out), 0);
	if (c == QFT_CIPHER_NONE) {
		/* In clear, exactly, between the length and the tag. */
		CHECK(memcmp(out.data + QFT_SEAL_LEN_SIZE, frame, n) == 0);
	} else {
		/* Not even a short piece of the pattern survives. */
		CHECK(memmem(out.data, out.len, pattern, 8) == NULL);
		CHECK(memmem(out.data, out.len, pattern + 13, 8) == NULL);
	}
	CHECK_EQ(open_copy(&rx, out.data, out.len, &copy, &f, &len), 0);
	CHECK_EQ(len, n);
	CHECK(memcmp(f, frame, n) == 0);
	free(copy);
	qft_seal_free(&rx);

	/* With none, changing the visible data is still caught. */
	CHECK_EQ(qft_seal_init(&rx, c, key_a, false), 0);
	out.data[QFT_SEAL_LEN_SIZE + n / 2] ^= 0x20;
	CHECK_EQ(open_copy(&rx, out.data, out.len, &copy, &f, &len), -EBADMSG);
	free(copy);

	qbuf_free(&out);
	pair_free(&tx, &rx);
	free(frame);
	check_ctx("%s", "");
}

int main(void)
{
	size_t i;

	fill_frame(key_a, sizeof(key_a), 1);
	fill_frame(key_b, sizeof(key_b), 2);
	test_names();
	test_init_args();
	test_cross_cipher();
	for (i = 0; i < N_CIPHERS; i++) {
		test_round_trip(ciphers[i]);
		test_in_place(ciphers[i]);
		test_format(ciphers[i]);
		test_tamper(ciphers[i]);
		test_sequence(ciphers[i]);
		test_directions(ciphers[i]);
		test_limits(ciphers[i]);
		test_visibility(ciphers[i]);
	}
	return check_exit("test_seal");
}
