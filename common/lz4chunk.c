// SPDX-License-Identifier: MIT
/* Per-chunk lz4 codec; the format and the rules are in lz4chunk.h. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <lz4.h>

#include "buf.h"
#include "lz4chunk.h"

/* LZ4 takes int sizes: make sure every chunk fits one. */
_Static_assert(QFT_LZ4_MAX_CHUNK <= LZ4_MAX_INPUT_SIZE,
	       "a chunk must fit LZ4's input limit");
_Static_assert(QFT_LZ4_SAMPLES >= 2 &&
	       QFT_LZ4_SAMPLE_WHOLE >= QFT_LZ4_SAMPLES * QFT_LZ4_SAMPLE_SIZE,
	       "samples must fit inside a chunk that is sampled");

static const char *const mode_names[] = {
	[QFT_LZ4_NONE] = "none",
	[QFT_LZ4_ALWAYS] = "lz4",
	[QFT_LZ4_AUTO] = "auto",
};

void qft_lz4_policy_init(struct qft_lz4_policy *p, enum qft_lz4_mode mode)
{
	memset(p, 0, sizeof(*p));
	p->mode = mode;
	p->accel = 1;
	p->give_up = QFT_LZ4_AUTO_GIVE_UP;
	p->reprobe = QFT_LZ4_AUTO_REPROBE;
}

int qft_lz4_mode_parse(const char *name, enum qft_lz4_mode *m)
{
	for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]);
	     i++) {
		if (strcmp(name, mode_names[i]) == 0) {
			*m = (enum qft_lz4_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *qft_lz4_mode_name(enum qft_lz4_mode m)
{
	if ((size_t)m >= sizeof(mode_names) / sizeof(mode_names[0]))
		return "?";
	return mode_names[m];
}

/* The longest LZ4 block worth sending for n >= QFT_LZ4_MIN_INPUT bytes. */
static size_t gain_limit(size_t n)
{
	return n - n / QFT_LZ4_MIN_GAIN - 1;
}

/*
 * Compresses in[0..n) into dst[0..limit).  With limit below
 * LZ4_compressBound(n), LZ4 checks every write against it and gives up
 * with 0 once the block cannot fit, so an unprofitable attempt never
 * writes past `limit` and stops early.  Returns the block size or 0.
 */
static size_t compress_into(const uint8_t *in, size_t n, uint8_t *dst,
			    size_t limit, int accel)
{
	int r = LZ4_compress_fast((const char *)in, (char *)dst, (int)n,
				  (int)limit, accel);

	return r > 0 ? (size_t)r : 0;
}

/*
 * auto: whether pieces of the chunk shrink enough to try it whole.  Each
 * piece is compressed alone, so this sees redundancy within a few KiB
 * (text, tables, zeros) but not repeats further apart; that costs at most
 * a missed gain, never a wrong chunk.  For n > QFT_LZ4_SAMPLE_WHOLE.
 */
static bool samples_shrink(const uint8_t *in, size_t n, int accel)
{
	uint8_t tmp[QFT_LZ4_SAMPLE_SIZE];
	size_t in_sum = 0, out_sum = 0;

	for (size_t i = 0; i < QFT_LZ4_SAMPLES; i++) {
		size_t off = i * (n - QFT_LZ4_SAMPLE_SIZE) /
			     (QFT_LZ4_SAMPLES - 1);
		size_t c = compress_into(in + off, QFT_LZ4_SAMPLE_SIZE, tmp,
					 gain_limit(QFT_LZ4_SAMPLE_SIZE),
					 accel);

		in_sum += QFT_LZ4_SAMPLE_SIZE;
		out_sum += c ? c : QFT_LZ4_SAMPLE_SIZE;
	}
	return out_sum <= gain_limit(in_sum);
}

/*
 * auto: counts incompressible chunks.  After `give_up` in a row the next
 * `reprobe` chunks go RAW untried; the streak is kept until a chunk
 * shrinks, so each failed re-probe backs off again at once.
 */
static void auto_note(struct qft_lz4_policy *p, bool shrank)
{
	unsigned give_up = p->give_up ? p->give_up : 1;

	if (shrank) {
		p->streak = 0;
		return;
	}
	if (p->streak < give_up)
		p->streak++;
	if (p->streak >= give_up)
		p->skip = p->reprobe;
}

/* auto: whether to compress this chunk whole. */
static bool auto_try(struct qft_lz4_policy *p, const uint8_t *in, size_t n,
		     int accel)
{
	if (p->skip) {
		p->skip--;
		p->skipped++;
		return false;
	}
	if (n <= QFT_LZ4_SAMPLE_WHOLE || samples_shrink(in, n, accel))
		return true;
	p->sampled_out++;
	auto_note(p, false);
	return false;
}

/* Counts one encoded chunk in p's statistics. */
static void count_chunk(struct qft_lz4_policy *p, size_t n, size_t out_len,
			bool lz4)
{
	if (!p)
		return;
	p->chunks++;
	p->lz4_chunks += lz4;
	p->bytes_in += n;
	p->bytes_out += out_len;
}

int qft_lz4_try_encode(struct qft_lz4_policy *p, const uint8_t *in,
		       size_t n, uint8_t *out, size_t cap, size_t *out_len)
{
	enum qft_lz4_mode mode = p ? p->mode : QFT_LZ4_ALWAYS;
	int accel = p && p->accel > 0 ? p->accel : 1;
	bool try = false;
	size_t body = 0;

	if (n > QFT_LZ4_MAX_CHUNK)
		return -EINVAL;
	if (cap < qft_lz4_bound(n))
		return -EMSGSIZE;
	if (n >= QFT_LZ4_MIN_INPUT) {
		if (mode == QFT_LZ4_ALWAYS)
			try = true;
		else if (mode == QFT_LZ4_AUTO)
			try = auto_try(p, in, n, accel);
	}
	if (try) {
		body = compress_into(in, n, out + QFT_LZ4_HDR_SIZE,
				     gain_limit(n), accel);
		if (mode == QFT_LZ4_AUTO)
			auto_note(p, body != 0);
	}
	if (!body) {
		count_chunk(p, n, qft_lz4_bound(n), false);
		return 0;
	}
	out[0] = QFT_LZ4_LZ4;
	qft_store32(out + 1, (uint32_t)n);
	*out_len = QFT_LZ4_HDR_SIZE + body;
	count_chunk(p, n, *out_len, true);
	return 1;
}

int qft_lz4_encode(struct qft_lz4_policy *p, const uint8_t *in, size_t n,
		   uint8_t *out, size_t cap, size_t *out_len)
{
	int r = qft_lz4_try_encode(p, in, n, out, cap, out_len);

	if (r != 0)
		return r < 0 ? r : 0;
	out[0] = QFT_LZ4_RAW;
	qft_store32(out + 1, (uint32_t)n);
	if (n)
		memcpy(out + QFT_LZ4_HDR_SIZE, in, n);
	*out_len = qft_lz4_bound(n);
	return 0;
}

int qft_lz4_peek(const uint8_t *in, size_t n, unsigned *kind, size_t *len)
{
	uint32_t l;

	if (n < QFT_LZ4_HDR_SIZE)
		return -EBADMSG;
	l = qft_load32(in + 1);
	if (in[0] > QFT_LZ4_LZ4 || l > QFT_LZ4_MAX_CHUNK)
		return -EBADMSG;
	*kind = in[0];
	*len = l;
	return 0;
}

int qft_lz4_decode_view(const uint8_t *in, size_t n, uint8_t *scratch,
			size_t cap, const uint8_t **data, size_t *len)
{
	const uint8_t *body = in + QFT_LZ4_HDR_SIZE;
	size_t l, blen;
	unsigned kind;
	int r, got;

	if ((r = qft_lz4_peek(in, n, &kind, &l)) < 0)
		return r;
	if (l > cap)
		return -EMSGSIZE;
	blen = n - QFT_LZ4_HDR_SIZE;
	if (kind == QFT_LZ4_RAW) {
		if (blen != l)
			return -EBADMSG;
		*data = body;
		*len = l;
		return 0;
	}
	/*
	 * An encoder sends LZ4 only when it is shorter than the data, so a
	 * longer block is malformed; this also keeps blen within int.  The
	 * capacity given to LZ4 is l, not cap: it can then neither write
	 * past what the header declared nor stop short unnoticed.
	 */
	if (blen == 0 || blen >= l)
		return -EBADMSG;
	got = LZ4_decompress_safe((const char *)body, (char *)scratch,
				  (int)blen, (int)l);
	if (got < 0 || (size_t)got != l)
		return -EBADMSG;
	*data = scratch;
	*len = l;
	return 0;
}

int qft_lz4_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap,
		   size_t *out_len)
{
	const uint8_t *data;
	size_t l;
	int r;

	if ((r = qft_lz4_decode_view(in, n, out, cap, &data, &l)) < 0)
		return r;
	if (data != out && l)
		memcpy(out, data, l);
	*out_len = l;
	return 0;
}
