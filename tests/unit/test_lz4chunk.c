// SPDX-License-Identifier: MIT
/*
 * The per-chunk lz4 codec (common/lz4chunk.c): round trips of every kind
 * of data and size in every mode, RAW for what does not compress, every
 * truncation and 100k random corruptions rejected or decoded to exactly
 * the declared length (input and output end at a guard page, so an
 * overrun faults even inside the uninstrumented liblz4, and ASan watches
 * the rest), lengths checked before anything is decompressed,
 * and the auto policy's sampling and back-off.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "buf.h"
#include "check.h"
#include "lz4chunk.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* splitmix64: fixed seeds make every failure reproducible. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void *xmalloc(size_t n)
{
	/* malloc(0) may return NULL; tests want a valid pointer. */
	void *p = malloc(n ? n : 1);

	if (!p) {
		perror("malloc");
		exit(1);
	}
	return p;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rng() >> 56);
}

/* Text like a JSON log: the kind of data compress=lz4 is for. */
static void fill_json(uint8_t *p, size_t n)
{
	static const char *const names[] = {
		"sensor", "gateway", "rootfs", "bundle", "kernel", "dtb",
	};
	static const char *const states[] = { "ok", "degraded", "failed" };
	char rec[256];
	size_t i = 0;

	while (i < n) {
		uint64_t r = rng();
		int len = snprintf(rec, sizeof(rec),
			"{\"id\": %llu, \"name\": \"%s-%u\", \"value\": %u.%03u, "
			"\"state\": \"%s\", \"tags\": [\"a\", \"b%u\"], "
			"\"ok\": %s}\n",
			(unsigned long long)(r % 1000000),
			names[(r >> 20) % 6], (unsigned)((r >> 24) % 100),
			(unsigned)((r >> 32) % 1000),
			(unsigned)((r >> 42) % 1000), states[(r >> 52) % 3],
			(unsigned)((r >> 56) % 10),
			(r >> 63) ? "true" : "false");
		size_t take = (size_t)len < n - i ? (size_t)len : n - i;

		memcpy(p + i, rec, take);
		i += take;
	}
}

/* Halves of random and text, in stripes of 64 KiB. */
static void fill_mixed(uint8_t *p, size_t n)
{
	for (size_t off = 0; off < n; off += 64 * KiB) {
		size_t len = n - off < 64 * KiB ? n - off : 64 * KiB;

		if ((off / (64 * KiB)) % 2)
			fill_random(p + off, len);
		else
			fill_json(p + off, len);
	}
}

enum kind { K_RANDOM, K_ZERO, K_JSON, K_MIXED, K__COUNT };
static const char *const kind_names[] = { "random", "zero", "json", "mixed" };

static void fill(enum kind k, uint8_t *p, size_t n)
{
	switch (k) {
	case K_RANDOM: fill_random(p, n); break;
	case K_ZERO:   memset(p, 0, n); break;
	case K_JSON:   fill_json(p, n); break;
	case K_MIXED:  fill_mixed(p, n); break;
	case K__COUNT: break;
	}
}

static const size_t sizes[] = { 0, 1, 4095, 64 * KiB, MiB };
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))
static const enum qft_lz4_mode modes[] = {
	QFT_LZ4_NONE, QFT_LZ4_ALWAYS, QFT_LZ4_AUTO,
};
#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/*
 * ASan sees only instrumented code, and liblz4 is not: an overrun inside
 * LZ4_decompress_safe would write or read past a heap block unnoticed.
 * So the decoder's input and output sit at the very end of an arena that
 * is followed by an inaccessible page, and any access past either end
 * faults, with or without a sanitizer.
 */
#define ARENA_SIZE (2 * MiB)

struct arena {
	uint8_t *end;
};

static struct arena in_arena, out_arena;

static void arena_init(struct arena *a)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *map = mmap(NULL, ARENA_SIZE + pg, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (map == MAP_FAILED || mprotect(map + ARENA_SIZE, pg, PROT_NONE)) {
		perror("mmap");
		exit(1);
	}
	a->end = map + ARENA_SIZE;
}

/* n bytes that end right before the guard page. */
static uint8_t *arena_tail(struct arena *a, size_t n)
{
	if (n > ARENA_SIZE) {
		fprintf(stderr, "arena too small for %zu bytes\n", n);
		exit(1);
	}
	return a->end - n;
}

/*
 * Decodes from an exact-size copy into an exact-size buffer, both against
 * a guard page; *outp is a heap copy of the output for the caller to free.
 */
static int decode_exact(const uint8_t *enc, size_t n, size_t cap,
			uint8_t **outp, size_t *len)
{
	uint8_t *in = arena_tail(&in_arena, n);
	uint8_t *out = arena_tail(&out_arena, cap);
	size_t declared = 0, mark = 0;
	unsigned kind;
	int r;

	if (n)
		memcpy(in, enc, n);
	/* Bytes just past the declared length must stay untouched when the
	 * buffer is larger: LZ4 is given the declared length, not cap. */
	if (qft_lz4_peek(in, n, &kind, &declared) == 0 && declared < cap) {
		mark = cap - declared < 64 ? cap - declared : 64;
		memset(out + declared, 0xa5, mark);
	}
	r = qft_lz4_decode(in, n, out, cap, len);
	for (size_t i = 0; r == 0 && i < mark; i++)
		if (out[declared + i] != 0xa5) {
			CHECK(!"decoder wrote past the declared length");
			break;
		}
	*outp = xmalloc(cap);
	if (r == 0 && *len)
		memcpy(*outp, out, *len);
	return r;
}

static void test_round_trips(void)
{
	for (size_t m = 0; m < N_MODES; m++) {
		for (int k = 0; k < K__COUNT; k++) {
			for (size_t s = 0; s < N_SIZES; s++) {
				size_t n = sizes[s], cap = qft_lz4_bound(n);
				struct qft_lz4_policy pol;
				uint8_t *in = xmalloc(n), *enc = xmalloc(cap);
				uint8_t *dec;
				size_t elen = 0, dlen = 0;
				unsigned kind;
				size_t plen;

				check_ctx("mode %s, %s, %zu bytes",
					  qft_lz4_mode_name(modes[m]),
					  kind_names[k], n);
				rng_state = 1000 + k * 10 + s;
				fill((enum kind)k, in, n);
				qft_lz4_policy_init(&pol, modes[m]);
				CHECK_EQ(qft_lz4_encode(&pol, in, n, enc, cap,
							&elen), 0);
				CHECK(elen <= cap);
				CHECK_EQ(qft_lz4_peek(enc, elen, &kind, &plen),
					 0);
				CHECK_EQ(plen, n);
				/* Which kind each input must produce. */
				if (modes[m] == QFT_LZ4_NONE || k == K_RANDOM ||
				    n < QFT_LZ4_MIN_INPUT)
					CHECK_EQ(kind, QFT_LZ4_RAW);
				else
					CHECK_EQ(kind, QFT_LZ4_LZ4);
				if (kind == QFT_LZ4_RAW)
					CHECK_EQ(elen, QFT_LZ4_HDR_SIZE + n);
				else
					CHECK(elen - QFT_LZ4_HDR_SIZE <=
					      n - n / QFT_LZ4_MIN_GAIN - 1);
				CHECK_EQ(decode_exact(enc, elen, n, &dec,
						      &dlen), 0);
				CHECK_EQ(dlen, n);
				CHECK(n == 0 || memcmp(dec, in, n) == 0);
				CHECK_EQ(pol.chunks, 1);
				CHECK_EQ(pol.lz4_chunks, kind == QFT_LZ4_LZ4);
				CHECK_EQ(pol.bytes_in, n);
				CHECK_EQ(pol.bytes_out, elen);
				free(dec);
				free(enc);
				free(in);
			}
		}
	}
	check_ctx("%s", "");
}

static void test_ratios(void)
{
	/* The text the benchmark uses must compress well, or it tests little. */
	size_t n = MiB, cap = qft_lz4_bound(n), elen;
	uint8_t *in = xmalloc(n), *enc = xmalloc(cap);

	rng_state = 7;
	fill_json(in, n);
	CHECK_EQ(qft_lz4_encode(NULL, in, n, enc, cap, &elen), 0);
	CHECK(elen < n / 2);
	printf("json-like 1 MiB -> %zu bytes (%.1f%%)\n", elen,
	       100.0 * (double)elen / (double)n);
	memset(in, 0, n);
	CHECK_EQ(qft_lz4_encode(NULL, in, n, enc, cap, &elen), 0);
	CHECK(elen < n / 100);
	free(enc);
	free(in);
}

static void test_view(void)
{
	size_t n = 4095, cap = qft_lz4_bound(n), elen, len;
	uint8_t *in = xmalloc(n), *enc = xmalloc(cap), *scratch = xmalloc(n);
	const uint8_t *data;

	rng_state = 11;
	fill_random(in, n);
	CHECK_EQ(qft_lz4_encode(NULL, in, n, enc, cap, &elen), 0);
	CHECK_EQ(enc[0], QFT_LZ4_RAW);
	CHECK_EQ(qft_lz4_decode_view(enc, elen, scratch, n, &data, &len), 0);
	CHECK(data == enc + QFT_LZ4_HDR_SIZE); /* no copy for RAW */
	CHECK_EQ(len, n);
	/* The capacity bounds RAW chunks too. */
	CHECK_EQ(qft_lz4_decode_view(enc, elen, scratch, n - 1, &data, &len),
		 -EMSGSIZE);
	fill_json(in, n);
	CHECK_EQ(qft_lz4_encode(NULL, in, n, enc, cap, &elen), 0);
	CHECK_EQ(enc[0], QFT_LZ4_LZ4);
	CHECK_EQ(qft_lz4_decode_view(enc, elen, scratch, n, &data, &len), 0);
	CHECK(data == scratch);
	CHECK_EQ(len, n);
	CHECK(memcmp(scratch, in, n) == 0);
	free(scratch);
	free(enc);
	free(in);
}

static void test_encode_args(void)
{
	uint8_t in[64] = { 0 }, out[QFT_LZ4_HDR_SIZE + 64];
	struct qft_lz4_policy pol;
	enum qft_lz4_mode m;
	size_t len = 12345;

	/* The output must hold a RAW chunk, whatever the data. */
	CHECK_EQ(qft_lz4_encode(NULL, in, 64, out, sizeof(out) - 1, &len),
		 -EMSGSIZE);
	CHECK_EQ(len, 12345);
	CHECK_EQ(qft_lz4_encode(NULL, in, (size_t)QFT_LZ4_MAX_CHUNK + 1, out,
				(size_t)-1, &len), -EINVAL);
	CHECK_EQ(qft_lz4_encode(NULL, in, 64, out, sizeof(out), &len), 0);
	CHECK_EQ(out[0], QFT_LZ4_LZ4);

	CHECK_EQ(qft_lz4_mode_parse("none", &m), 0);
	CHECK_EQ(m, QFT_LZ4_NONE);
	CHECK_EQ(qft_lz4_mode_parse("lz4", &m), 0);
	CHECK_EQ(m, QFT_LZ4_ALWAYS);
	CHECK_EQ(qft_lz4_mode_parse("auto", &m), 0);
	CHECK_EQ(m, QFT_LZ4_AUTO);
	CHECK_EQ(qft_lz4_mode_parse("LZ4", &m), -EINVAL);
	CHECK_EQ(qft_lz4_mode_parse("", &m), -EINVAL);
	CHECK(strcmp(qft_lz4_mode_name((enum qft_lz4_mode)7), "?") == 0);

	/* A zero acceleration is taken as the default, not passed on. */
	qft_lz4_policy_init(&pol, QFT_LZ4_ALWAYS);
	pol.accel = 0;
	CHECK_EQ(qft_lz4_encode(&pol, in, 64, out, sizeof(out), &len), 0);
	CHECK_EQ(out[0], QFT_LZ4_LZ4);
}

/* A well-formed LZ4 chunk of n bytes of text, in a new buffer. */
static uint8_t *make_lz4_chunk(size_t n, uint64_t seed, uint8_t **orig,
			       size_t *elen)
{
	size_t cap = qft_lz4_bound(n);
	uint8_t *in = xmalloc(n), *enc = xmalloc(cap);

	rng_state = seed;
	fill_json(in, n);
	CHECK_EQ(qft_lz4_encode(NULL, in, n, enc, cap, elen), 0);
	CHECK_EQ(enc[0], QFT_LZ4_LZ4);
	if (orig)
		*orig = in;
	else
		free(in);
	return enc;
}

static void test_truncation(void)
{
	/* Every truncation for chunks up to 64 KiB; for 1 MiB (hundreds of
	 * thousands of prefixes) both ends and a stride through the middle. */
	static const size_t tsizes[] = { 1, 4095, 64 * KiB, MiB };

	for (size_t s = 0; s < sizeof(tsizes) / sizeof(tsizes[0]); s++) {
		for (int k = 0; k < 2; k++) {
			size_t n = tsizes[s], cap = qft_lz4_bound(n), elen;
			uint8_t *in = xmalloc(n), *enc = xmalloc(cap);
			size_t step;

			rng_state = 99 + s;
			fill(k ? K_JSON : K_RANDOM, in, n);
			CHECK_EQ(qft_lz4_encode(NULL, in, n, enc, cap, &elen),
				 0);
			step = n <= 64 * KiB ? 1 : 257;
			for (size_t t = 0; t < elen; t++) {
				uint8_t *dec;
				size_t dlen;

				if (t > 64 && t + 64 < elen && t % step)
					continue;
				check_ctx("%s %zu truncated to %zu of %zu",
					  k ? "json" : "random", n, t, elen);
				CHECK_EQ(decode_exact(enc, t, n, &dec, &dlen),
					 -EBADMSG);
				free(dec);
			}
			/* And one byte too many. */
			{
				uint8_t *longer = xmalloc(elen + 1), *dec;
				size_t dlen;

				memcpy(longer, enc, elen);
				longer[elen] = 0;
				check_ctx("%s %zu extended",
					  k ? "json" : "random", n);
				CHECK_EQ(decode_exact(longer, elen + 1, n,
						      &dec, &dlen), -EBADMSG);
				free(dec);
				free(longer);
			}
			free(enc);
			free(in);
		}
	}
	check_ctx("%s", "");
}

static void test_lengths_checked_first(void)
{
	size_t n = 64 * KiB, elen, len;
	uint8_t *enc = make_lz4_chunk(n, 5, NULL, &elen);
	uint8_t *out = xmalloc(n), *hdr;
	unsigned kind;

	/* Capacity one short: refused, and not one byte written. */
	memset(out, 0xa5, n);
	CHECK_EQ(qft_lz4_decode(enc, elen, out, n - 1, &len), -EMSGSIZE);
	for (size_t i = 0; i < n; i++)
		if (out[i] != 0xa5) {
			CHECK(!"decoder wrote into a too-small buffer");
			break;
		}
	CHECK_EQ(qft_lz4_decode(enc, elen, out, 0, &len), -EMSGSIZE);

	/* A declared length over QFT_LZ4_MAX_CHUNK is malformed, whatever the
	 * capacity; so is one that disagrees with the block. */
	hdr = xmalloc(elen);
	memcpy(hdr, enc, elen);
	qft_store32(hdr + 1, QFT_LZ4_MAX_CHUNK + 1);
	CHECK_EQ(qft_lz4_peek(hdr, elen, &kind, &len), -EBADMSG);
	CHECK_EQ(qft_lz4_decode(hdr, elen, out, (size_t)-1, &len), -EBADMSG);
	qft_store32(hdr + 1, UINT32_MAX);
	CHECK_EQ(qft_lz4_decode(hdr, elen, out, (size_t)-1, &len), -EBADMSG);
	qft_store32(hdr + 1, (uint32_t)n - 1);
	CHECK_EQ(qft_lz4_decode(hdr, elen, out, n, &len), -EBADMSG);
	qft_store32(hdr + 1, (uint32_t)n + 1);
	{
		uint8_t *big = xmalloc(n + 1);

		CHECK_EQ(qft_lz4_decode(hdr, elen, big, n + 1, &len),
			 -EBADMSG);
		free(big);
	}
	/* Unknown kinds. */
	memcpy(hdr, enc, elen);
	for (unsigned k = 2; k < 256; k++) {
		hdr[0] = (uint8_t)k;
		CHECK_EQ(qft_lz4_peek(hdr, elen, &kind, &len), -EBADMSG);
	}
	/* LZ4 that would not have been worth sending, or is empty. */
	{
		uint8_t c[QFT_LZ4_HDR_SIZE + 8] = { QFT_LZ4_LZ4 };

		qft_store32(c + 1, 0);
		CHECK_EQ(qft_lz4_decode(c, QFT_LZ4_HDR_SIZE, out, n, &len),
			 -EBADMSG);
		CHECK_EQ(qft_lz4_decode(c, QFT_LZ4_HDR_SIZE + 1, out, n,
					&len), -EBADMSG);
		qft_store32(c + 1, 8);
		c[QFT_LZ4_HDR_SIZE] = 0x80; /* 8 literals, lz4-valid */
		CHECK_EQ(qft_lz4_decode(c, QFT_LZ4_HDR_SIZE + 8, out, n,
					&len), -EBADMSG);
		/* RAW of length 0 is the one way to say "no data". */
		c[0] = QFT_LZ4_RAW;
		qft_store32(c + 1, 0);
		CHECK_EQ(qft_lz4_decode(c, QFT_LZ4_HDR_SIZE, out, n, &len),
			 0);
		CHECK_EQ(len, 0);
	}
	free(hdr);
	free(out);
	free(enc);
}

/* Decodes a corrupted chunk: rejected, or exactly the declared length. */
static void corrupt_case(const uint8_t *enc, size_t elen, size_t cap,
			 unsigned long *ok, unsigned long *bad)
{
	uint8_t *dec;
	size_t dlen = 0;
	int r = decode_exact(enc, elen, cap, &dec, &dlen);

	if (r == 0) {
		unsigned kind;
		size_t declared;

		CHECK_EQ(qft_lz4_peek(enc, elen, &kind, &declared), 0);
		CHECK_EQ(dlen, declared);
		CHECK(dlen <= cap);
		(*ok)++;
	} else {
		CHECK(r == -EBADMSG || r == -EMSGSIZE);
		(*bad)++;
	}
	free(dec);
}

static void test_corruption(void)
{
	size_t n = 16 * KiB, elen;
	uint8_t *enc = make_lz4_chunk(n, 21, NULL, &elen);
	uint8_t *mut = xmalloc(elen + 64);
	unsigned long ok = 0, bad = 0;

	/* Every single bit flip of a whole chunk. */
	for (size_t i = 0; i < elen * 8; i++) {
		memcpy(mut, enc, elen);
		mut[i / 8] ^= (uint8_t)(1u << (i % 8));
		check_ctx("bit flip %zu", i);
		corrupt_case(mut, elen, n, &ok, &bad);
	}
	printf("bit flips: %lu rejected, %lu decoded to the declared length\n",
	       bad, ok);
	free(enc);

	/* 100k random mutations (flips, random bytes, runs, cuts, growth)
	 * of a 64 KiB chunk, fixed seed; capacities at, below and above L. */
	n = 64 * KiB;
	enc = make_lz4_chunk(n, 22, NULL, &elen);
	free(mut);
	mut = xmalloc(elen + 64);
	ok = bad = 0;
	rng_state = 0x5eed;
	for (unsigned long it = 0; it < 100000; it++) {
		size_t len = elen, cap = n;
		unsigned edits = 1 + (unsigned)(rng() % 4);

		memcpy(mut, enc, elen);
		for (unsigned e = 0; e < edits; e++) {
			uint64_t r = rng();
			size_t at = (size_t)((r >> 8) % len);

			switch (r % 6) {
			case 0: mut[at] ^= (uint8_t)(1u << ((r >> 40) % 8));
				break;
			case 1: mut[at] = (uint8_t)(r >> 48); break;
			case 2: /* a run of one byte, as a repeated token */
				for (size_t j = at; j < len && j < at + 16; j++)
					mut[j] = (uint8_t)(r >> 48);
				break;
			case 3: /* the header: kind or length */
				mut[(r >> 40) % QFT_LZ4_HDR_SIZE] ^=
					(uint8_t)(r >> 48);
				break;
			case 4: if (len > 1) len = 1 + at % (len - 1);
				break;
			case 5: if (len < elen + 64) mut[len++] = (uint8_t)r;
				break;
			}
		}
		switch (it % 8) {
		case 0: cap = n / 2; break;
		case 1: cap = n + 4096; break;
		default: break;
		}
		check_ctx("mutation %lu", it);
		corrupt_case(mut, len, cap, &ok, &bad);
	}
	check_ctx("%s", "");
	printf("100000 mutations: %lu rejected, %lu decoded to the declared "
	       "length\n", bad, ok);
	CHECK(bad > 90000);
	free(mut);
	free(enc);
}

static void test_auto_policy(void)
{
	size_t n = MiB, cap = qft_lz4_bound(n), elen;
	uint8_t *rnd = xmalloc(n), *txt = xmalloc(n), *enc = xmalloc(cap);
	struct qft_lz4_policy pol;
	uint64_t tried, before;
	unsigned raw_text = 0;

	rng_state = 31;
	fill_random(rnd, n);
	fill_json(txt, n);
	qft_lz4_policy_init(&pol, QFT_LZ4_AUTO);

	/* Random data: the samples reject each chunk, so the whole chunk is
	 * never compressed; after give_up of them, chunks go RAW untried. */
	for (unsigned i = 0; i < 100; i++) {
		rnd[i] ^= 0x5a; /* a different chunk each time */
		CHECK_EQ(qft_lz4_encode(&pol, rnd, n, enc, cap, &elen), 0);
		CHECK_EQ(enc[0], QFT_LZ4_RAW);
	}
	tried = pol.chunks - pol.sampled_out - pol.skipped;
	CHECK_EQ(tried, 0);
	CHECK_EQ(pol.lz4_chunks, 0);
	CHECK(pol.skipped >= 100 - QFT_LZ4_AUTO_GIVE_UP -
			     100 / QFT_LZ4_AUTO_REPROBE);
	printf("auto on 100 random chunks: %llu sampled out, %llu skipped, "
	       "%llu compressed whole\n",
	       (unsigned long long)pol.sampled_out,
	       (unsigned long long)pol.skipped, (unsigned long long)tried);

	/* Text after noise: within one back-off period it compresses again,
	 * and from then on every chunk. */
	for (unsigned i = 0; i < 40; i++) {
		CHECK_EQ(qft_lz4_encode(&pol, txt, n, enc, cap, &elen), 0);
		if (enc[0] == QFT_LZ4_RAW) {
			raw_text++;
			CHECK(i <= QFT_LZ4_AUTO_REPROBE);
		}
	}
	CHECK(raw_text <= QFT_LZ4_AUTO_REPROBE);
	CHECK_EQ(pol.streak, 0);

	/* Mixed data passes the samples and compresses. */
	rng_state = 32;
	fill_mixed(txt, n);
	before = pol.lz4_chunks;
	CHECK_EQ(qft_lz4_encode(&pol, txt, n, enc, cap, &elen), 0);
	CHECK_EQ(enc[0], QFT_LZ4_LZ4);
	CHECK_EQ(pol.lz4_chunks, before + 1);

	/* Small chunks are compressed whole, never sampled. */
	qft_lz4_policy_init(&pol, QFT_LZ4_AUTO);
	CHECK_EQ(qft_lz4_encode(&pol, txt, QFT_LZ4_SAMPLE_WHOLE, enc, cap,
				&elen), 0);
	CHECK_EQ(enc[0], QFT_LZ4_LZ4);
	CHECK_EQ(pol.sampled_out, 0);

	/* Back-off counts: give_up misses, then reprobe skips, then one
	 * probe, which backs off again at once when it misses. */
	qft_lz4_policy_init(&pol, QFT_LZ4_AUTO);
	pol.give_up = 2;
	pol.reprobe = 3;
	for (unsigned i = 0; i < 2 + 3 + 1 + 3; i++)
		CHECK_EQ(qft_lz4_encode(&pol, rnd, n, enc, cap, &elen), 0);
	CHECK_EQ(pol.sampled_out, 3);
	CHECK_EQ(pol.skipped, 6);
	free(enc);
	free(txt);
	free(rnd);
}

/*
 * try_encode: an LZ4 chunk identical to encode's when it pays, and 0 with
 * nothing to send when it does not; a whole frame payload (more than
 * QFT_MAX_DATA) is one chunk.
 */
static void test_try_encode(void)
{
	size_t n = QFT_LZ4_MAX_CHUNK, cap = qft_lz4_bound(n), elen, tlen, dlen;
	uint8_t *txt = xmalloc(n), *rnd = xmalloc(n), *enc = xmalloc(cap);
	uint8_t *tenc = xmalloc(cap), *dec = xmalloc(n);
	struct qft_lz4_policy pol;

	check_ctx("try_encode");
	rng_state = 41;
	fill_json(txt, n);
	fill_random(rnd, n);
	CHECK_EQ(qft_lz4_encode(NULL, txt, n, enc, cap, &elen), 0);
	CHECK_EQ(enc[0], QFT_LZ4_LZ4);
	CHECK_EQ(qft_lz4_try_encode(NULL, txt, n, tenc, cap, &tlen), 1);
	CHECK(tlen == elen && memcmp(enc, tenc, elen) == 0);
	CHECK_EQ(qft_lz4_decode(tenc, tlen, dec, n, &dlen), 0);
	CHECK(dlen == n && memcmp(dec, txt, n) == 0);

	tlen = 12345;
	CHECK_EQ(qft_lz4_try_encode(NULL, rnd, n, tenc, cap, &tlen), 0);
	CHECK_EQ(tlen, 12345);
	qft_lz4_policy_init(&pol, QFT_LZ4_NONE);
	CHECK_EQ(qft_lz4_try_encode(&pol, txt, n, tenc, cap, &tlen), 0);
	CHECK_EQ(pol.chunks, 1);
	CHECK_EQ(pol.bytes_out, qft_lz4_bound(n));
	CHECK_EQ(qft_lz4_try_encode(NULL, txt, n, tenc, cap - 1, &tlen),
		 -EMSGSIZE);
	CHECK_EQ(qft_lz4_try_encode(NULL, txt, n + 1, tenc, cap + 1, &tlen),
		 -EINVAL);
	free(dec);
	free(tenc);
	free(enc);
	free(rnd);
	free(txt);
	check_ctx("%s", "");
}

int main(void)
{
	arena_init(&in_arena);
	arena_init(&out_arena);
	test_round_trips();
	test_ratios();
	test_view();
	test_encode_args();
	test_truncation();
	test_lengths_checked_first();
	test_corruption();
	test_auto_policy();
	test_try_encode();
	return check_exit("test_lz4chunk");
}
