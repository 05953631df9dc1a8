// SPDX-License-Identifier: MIT
/* Byte buffer and decoding cursor; invariants are in buf.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void qbuf_init(struct qbuf *b, size_t limit)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->limit = limit;
}

void qbuf_free(struct qbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void qbuf_reset(struct qbuf *b)
{
	b->len = 0;
}

int qbuf_reserve(struct qbuf *b, size_t more)
{
	size_t want, cap;
	uint8_t *p;

	if (more > b->limit - b->len)
		return -EMSGSIZE;
	want = b->len + more;
	if (want <= b->cap)
		return 0;
	/* Grow geometrically so appending n bytes costs O(n) overall. */
	cap = b->cap ? b->cap : 256;
	if (cap > b->limit)
		cap = b->limit; /* keep cap <= limit for small limits too */
	while (cap < want)
		cap = cap > b->limit / 2 ? b->limit : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

uint8_t *qbuf_extend(struct qbuf *b, size_t n)
{
	uint8_t *p;

	if (qbuf_reserve(b, n) < 0)
		return NULL;
	p = b->data + b->len;
	b->len += n;
	return p;
}

int qbuf_put_bytes(struct qbuf *b, const void *p, size_t n)
{
	int r;

	if (n == 0)
		return 0;
	r = qbuf_reserve(b, n);
	if (r < 0)
		return r;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int qbuf_put_u8(struct qbuf *b, uint8_t v)
{
	return qbuf_put_bytes(b, &v, 1);
}

int qbuf_put_u16(struct qbuf *b, uint16_t v)
{
	uint8_t tmp[2];

	qft_store16(tmp, v);
	return qbuf_put_bytes(b, tmp, sizeof(tmp));
}

int qbuf_put_u32(struct qbuf *b, uint32_t v)
{
	uint8_t tmp[4];

	qft_store32(tmp, v);
	return qbuf_put_bytes(b, tmp, sizeof(tmp));
}

int qbuf_put_u64(struct qbuf *b, uint64_t v)
{
	uint8_t tmp[8];

	qft_store64(tmp, v);
	return qbuf_put_bytes(b, tmp, sizeof(tmp));
}

int qbuf_put_blob(struct qbuf *b, const void *p, size_t n)
{
	uint8_t *dst;
	int r;

	if (n > UINT32_MAX)
		return -EMSGSIZE;
	/* Reserve the whole field first so a failure leaves nothing behind. */
	r = qbuf_reserve(b, 4 + n);
	if (r < 0)
		return r;
	dst = qbuf_extend(b, 4 + n);
	qft_store32(dst, (uint32_t)n);
	if (n)
		memcpy(dst + 4, p, n);
	return 0;
}

int qbuf_put_str(struct qbuf *b, const char *s, size_t n)
{
	uint8_t *dst;
	int r;

	if (n >= UINT32_MAX)
		return -EMSGSIZE;
	r = qbuf_reserve(b, 4 + n + 1);
	if (r < 0)
		return r;
	dst = qbuf_extend(b, 4 + n + 1);
	qft_store32(dst, (uint32_t)n);
	if (n)
		memcpy(dst + 4, s, n);
	dst[4 + n] = '\0';
	return 0;
}

void qbuf_set_u32(struct qbuf *b, size_t off, uint32_t v)
{
	qft_store32(b->data + off, v);
}

int qcur_get_bytes(struct qcur *c, const uint8_t **p, size_t n)
{
	if (c->left < n)
		return -EBADMSG;
	*p = c->p;
	c->p += n;
	c->left -= n;
	return 0;
}

int qcur_get_u8(struct qcur *c, uint8_t *v)
{
	if (c->left < 1)
		return -EBADMSG;
	*v = c->p[0];
	c->p++;
	c->left--;
	return 0;
}

int qcur_get_u16(struct qcur *c, uint16_t *v)
{
	if (c->left < 2)
		return -EBADMSG;
	*v = qft_load16(c->p);
	c->p += 2;
	c->left -= 2;
	return 0;
}

int qcur_get_u32(struct qcur *c, uint32_t *v)
{
	if (c->left < 4)
		return -EBADMSG;
	*v = qft_load32(c->p);
	c->p += 4;
	c->left -= 4;
	return 0;
}

int qcur_get_u64(struct qcur *c, uint64_t *v)
{
	if (c->left < 8)
		return -EBADMSG;
	*v = qft_load64(c->p);
	c->p += 8;
	c->left -= 8;
	return 0;
}

int qcur_get_blob(struct qcur *c, const uint8_t **p, uint32_t *len,
		  uint32_t max)
{
	uint32_t n;

	if (c->left < 4)
		return -EBADMSG;
	n = qft_load32(c->p);
	if (n > max || n > c->left - 4)
		return -EBADMSG;
	*p = c->p + 4;
	*len = n;
	c->p += 4 + (size_t)n;
	c->left -= 4 + (size_t)n;
	return 0;
}

int qcur_get_str(struct qcur *c, const char **s, uint32_t *len, uint32_t max)
{
	const uint8_t *p;
	uint32_t n;

	if (c->left < 4)
		return -EBADMSG;
	n = qft_load32(c->p);
	/* Compare without adding to n, which the peer controls. */
	if (n > max || c->left - 4 < 1 || n > c->left - 4 - 1)
		return -EBADMSG;
	p = c->p + 4;
	if (p[n] != '\0')
		return -EBADMSG;
	/* Framed correctly, but no C string can carry it: invalid, not junk. */
	if (memchr(p, '\0', n))
		return -EINVAL;
	*s = (const char *)p;
	*len = n;
	c->p += 4 + (size_t)n + 1;
	c->left -= 4 + (size_t)n + 1;
	return 0;
}
