/* SPDX-License-Identifier: MIT */
/*
 * The per-chunk lz4 codec of the data plane (-o compress=lz4|auto).
 *
 * A chunk is one frame's payload (QFT_F_LZ4 in protocol.h): at most
 * QFT_LZ4_MAX_CHUNK bytes, in practice a READ reply's or a WRITE's data
 * with its few fields, coded on its own (no dictionary, no state shared
 * between chunks), so that a receiver can decode any chunk alone, in any
 * order, with bounded memory:
 *
 *   offset size field
 *   0      1    kind: QFT_LZ4_RAW (0) or QFT_LZ4_LZ4 (1); nothing else
 *   1      4    L, the original length, big-endian; L <= QFT_LZ4_MAX_CHUNK
 *   5      ...  RAW: exactly L bytes, as they are
 *                LZ4: one LZ4 block (lz4's block format, no frame) of
 *                1 to L-1 bytes that decompresses to exactly L bytes
 *
 * The encoded length is known from the frame that carries the chunk; the
 * chunk does not repeat it.  An encoder sends LZ4 only when the block is
 * at least 1/QFT_LZ4_MIN_GAIN of L smaller than L (see below), so the
 * encoded chunk is never longer than QFT_LZ4_HDR_SIZE + L: callers size
 * their buffers with qft_lz4_bound() and never have to handle growth.
 *
 * Decoding validates before acting: the kind, L <= QFT_LZ4_MAX_CHUNK and
 * L <= the caller's capacity are all checked before a byte is decompressed;
 * the block is then expanded with LZ4_decompress_safe() into exactly L
 * bytes of the caller's buffer (never LZ4_decompress_fast, which trusts
 * its input), and anything other than exactly L bytes out is rejected.
 *
 * Error convention: 0 or a negative errno.
 *   -EBADMSG   a malformed chunk: truncated, unknown kind, L over
 *              QFT_LZ4_MAX_CHUNK, a RAW body not L bytes long, an LZ4 block
 *              that fails to decompress or yields other than L bytes;
 *   -EMSGSIZE  a well-formed chunk whose L exceeds the caller's capacity,
 *              or an output buffer smaller than qft_lz4_bound(n);
 *   -EINVAL    encoding more than QFT_LZ4_MAX_CHUNK bytes, a bad mode name.
 * On failure the output buffer's contents are unspecified and *out_len
 * is not set.  Nothing here allocates, logs or keeps global state; the
 * functions are safe to call from several threads on different policies.
 */
#ifndef QFT_LZ4CHUNK_H
#define QFT_LZ4CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define QFT_LZ4_RAW       0u
#define QFT_LZ4_LZ4       1u
#define QFT_LZ4_HDR_SIZE  5u
/* The largest chunk: a whole frame payload. */
#define QFT_LZ4_MAX_CHUNK QFT_MAX_PAYLOAD

/*
 * LZ4 is sent only when it saves more than L/32 (about 3%).  A smaller
 * saving is not worth what it costs the receiver: a decompression pass
 * and a second buffer, where a RAW chunk is written to disk straight from
 * the frame it arrived in (qft_lz4_decode_view).
 */
#define QFT_LZ4_MIN_GAIN  32u
/* Inputs this short never shrink by a useful amount: always RAW. */
#define QFT_LZ4_MIN_INPUT 32u

/*
 * compress=auto samples a chunk before compressing it: up to
 * QFT_LZ4_SAMPLES pieces of QFT_LZ4_SAMPLE_SIZE bytes (start, middle, end)
 * are compressed on their own, and the whole chunk only when they shrink
 * by the same 1/QFT_LZ4_MIN_GAIN.  Chunks up to QFT_LZ4_SAMPLE_WHOLE bytes
 * are compressed whole, which costs no more than sampling them.
 */
#define QFT_LZ4_SAMPLE_SIZE  4096u
#define QFT_LZ4_SAMPLES      3u
#define QFT_LZ4_SAMPLE_WHOLE (4u * QFT_LZ4_SAMPLE_SIZE)
/* After this many incompressible chunks in a row, auto stops trying ... */
#define QFT_LZ4_AUTO_GIVE_UP 4u
/* ... and sends this many chunks RAW untried before probing again. */
#define QFT_LZ4_AUTO_REPROBE 16u

enum qft_lz4_mode {
	QFT_LZ4_NONE = 0,   /* every chunk RAW (one code path for callers) */
	QFT_LZ4_ALWAYS,     /* "lz4": compress every chunk, RAW if no gain */
	QFT_LZ4_AUTO,       /* "auto": sample first, back off on noise */
};

/*
 * How one stream of chunks is encoded, and what the auto mode has
 * learned about it.  One per stream (a file being sent), owned by the
 * caller, not locked: use it from one thread at a time.  The tunables may
 * be changed after qft_lz4_policy_init() and before the first chunk.
 */
struct qft_lz4_policy {
	enum qft_lz4_mode mode;
	int accel;            /* LZ4_compress_fast acceleration, >= 1 */
	unsigned give_up;     /* auto: see QFT_LZ4_AUTO_GIVE_UP */
	unsigned reprobe;     /* auto: see QFT_LZ4_AUTO_REPROBE */

	/* Auto state. */
	unsigned streak;      /* incompressible chunks in a row */
	unsigned skip;        /* chunks still to send RAW untried */

	/* Statistics, for logs and benchmarks. */
	uint64_t chunks;      /* chunks encoded */
	uint64_t lz4_chunks;  /* ... of which sent LZ4 */
	uint64_t sampled_out; /* auto: rejected by the sample alone */
	uint64_t skipped;     /* auto: sent RAW untried while backing off */
	uint64_t bytes_in;    /* original bytes */
	uint64_t bytes_out;   /* encoded bytes, headers included */
};

/* Sets the mode, default tunables (accel 1) and clears state and counts. */
void qft_lz4_policy_init(struct qft_lz4_policy *p, enum qft_lz4_mode mode);

/* "none", "lz4", "auto" for -o compress=; 0 and *m set, or -EINVAL. */
int qft_lz4_mode_parse(const char *name, enum qft_lz4_mode *m);
/* The inverse; "?" for an unknown value. */
const char *qft_lz4_mode_name(enum qft_lz4_mode m);

/* The largest encoding of n bytes: header plus n (RAW is the worst case). */
static inline size_t qft_lz4_bound(size_t n)
{
	return QFT_LZ4_HDR_SIZE + n;
}

/*
 * Encodes in[0..n) (n <= QFT_LZ4_MAX_CHUNK) as one chunk into out[0..cap),
 * cap >= qft_lz4_bound(n), and sets *out_len.  `p` chooses the mode and
 * is updated; NULL means QFT_LZ4_ALWAYS with acceleration 1.  `in` and
 * `out` must not overlap.
 */
int qft_lz4_encode(struct qft_lz4_policy *p, const uint8_t *in, size_t n,
		   uint8_t *out, size_t cap, size_t *out_len);

/*
 * The same for a sender that can send the data as it is when compression
 * does not pay (a frame without QFT_F_LZ4): returns 1 with an LZ4 chunk
 * in out[0..*out_len), or 0 when the chunk would be RAW, in which case
 * nothing was copied and out's contents are unspecified.  Counts in `p`
 * as qft_lz4_encode would.  -EINVAL / -EMSGSIZE as above.
 */
int qft_lz4_try_encode(struct qft_lz4_policy *p, const uint8_t *in,
		       size_t n, uint8_t *out, size_t cap, size_t *out_len);

/*
 * Reads and checks the header of in[0..n): on success *kind and *len (L)
 * are set, L <= QFT_LZ4_MAX_CHUNK.  The body is not looked at; use it to size
 * or refuse a buffer before decoding.
 */
int qft_lz4_peek(const uint8_t *in, size_t n, unsigned *kind, size_t *len);

/*
 * Decodes the chunk in[0..n) into out[0..cap) and sets *out_len to L.
 * Fails with -EMSGSIZE, before decompressing anything, when L > cap.
 */
int qft_lz4_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap,
		   size_t *out_len);

/*
 * The same without copying RAW data: on success *data points either into
 * `in` (RAW; valid as long as `in`) or into scratch (LZ4; scratch holds
 * cap bytes), and *len is L.  L > cap fails for both kinds, so `cap`
 * bounds what the caller accepts either way.  Lets a receiver write a
 * RAW chunk to disk straight from the frame it arrived in.
 */
int qft_lz4_decode_view(const uint8_t *in, size_t n, uint8_t *scratch,
			size_t cap, const uint8_t **data, size_t *len);

#endif /* QFT_LZ4CHUNK_H */
