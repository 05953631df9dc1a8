/* SPDX-License-Identifier: MIT */
/*
 * Byte buffers for building frames and a cursor for decoding them.
 *
 * struct qbuf is a growable output buffer.  Invariants: `data` is NULL only
 * while `cap` is 0; `len <= cap <= limit`; a put that would grow the buffer
 * past `limit` fails with -EMSGSIZE and leaves the buffer unchanged, so a
 * caller can never build a frame larger than the protocol allows.  The
 * buffer owns `data`; qbuf_free() releases it.
 *
 * struct qcur reads big-endian values from a borrowed byte range.  Every
 * get either succeeds and advances, or fails (-EBADMSG on short or
 * oversized input) and consumes nothing; callers chain gets with `if ((r = ...) < 0 || (r = ...) < 0)`.
 * Pointers returned by qcur_get_bytes/qcur_get_str point into the range and
 * live as long as it does.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QFT_BUF_H
#define QFT_BUF_H

#include <stddef.h>
#include <stdint.h>

struct qbuf {
	uint8_t *data;
	size_t len;
	size_t cap;
	size_t limit;
};

void qbuf_init(struct qbuf *b, size_t limit);
void qbuf_free(struct qbuf *b);
void qbuf_reset(struct qbuf *b);                  /* len = 0, keeps memory */
int qbuf_reserve(struct qbuf *b, size_t more);    /* room for `more` bytes */
/* Appends `n` uninitialised bytes and returns where they start, or NULL. */
uint8_t *qbuf_extend(struct qbuf *b, size_t n);
int qbuf_put_u8(struct qbuf *b, uint8_t v);
int qbuf_put_u16(struct qbuf *b, uint16_t v);
int qbuf_put_u32(struct qbuf *b, uint32_t v);
int qbuf_put_u64(struct qbuf *b, uint64_t v);
int qbuf_put_bytes(struct qbuf *b, const void *p, size_t n);
/* u32 length, the bytes, then a NUL that the length does not count. */
int qbuf_put_str(struct qbuf *b, const char *s, size_t n);
/* u32 length then the bytes (binary data, no terminator). */
int qbuf_put_blob(struct qbuf *b, const void *p, size_t n);
/* Overwrites 4 bytes at `off` (which must lie inside len). */
void qbuf_set_u32(struct qbuf *b, size_t off, uint32_t v);

struct qcur {
	const uint8_t *p;
	size_t left;
};

static inline void qcur_init(struct qcur *c, const void *p, size_t n)
{
	c->p = p;
	c->left = n;
}

int qcur_get_u8(struct qcur *c, uint8_t *v);
int qcur_get_u16(struct qcur *c, uint16_t *v);
int qcur_get_u32(struct qcur *c, uint32_t *v);
int qcur_get_u64(struct qcur *c, uint64_t *v);
int qcur_get_bytes(struct qcur *c, const uint8_t **p, size_t n);
/*
 * A string written by qbuf_put_str.  Fails, consuming nothing, with
 * -EBADMSG unless len <= max and the terminator is present, and with
 * -EINVAL if a NUL lies inside.  On success *s is NUL-terminated in place.
 */
int qcur_get_str(struct qcur *c, const char **s, uint32_t *len, uint32_t max);
/* A blob written by qbuf_put_blob, at most `max` bytes. */
int qcur_get_blob(struct qcur *c, const uint8_t **p, uint32_t *len,
		  uint32_t max);

/* Host-order load/store helpers for fixed headers. */
static inline uint16_t qft_load16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t qft_load32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t qft_load64(const uint8_t *p)
{
	return (uint64_t)qft_load32(p) << 32 | qft_load32(p + 4);
}

static inline void qft_store16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void qft_store32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void qft_store64(uint8_t *p, uint64_t v)
{
	qft_store32(p, (uint32_t)(v >> 32));
	qft_store32(p + 4, (uint32_t)v);
}

#endif /* QFT_BUF_H */
