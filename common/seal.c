// SPDX-License-Identifier: MIT
/*
 * AEAD records with implicit counter nonces (see seal.h).  One
 * EVP_CIPHER_CTX per direction is keyed once; each record only sets a new
 * IV, which restarts GCM/Poly1305 state without redoing the key schedule.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "seal.h"

#define SEAL_IV_SIZE 12

static const char *const cipher_names[QFT_CIPHER__COUNT] = {
	[QFT_CIPHER_NONE] = "none",
	[QFT_CIPHER_AES256GCM] = "aes256-gcm",
	[QFT_CIPHER_CHACHA20POLY1305] = "chacha20-poly1305",
};

const char *qft_cipher_name(enum qft_cipher c)
{
	if ((unsigned)c >= QFT_CIPHER__COUNT)
		return NULL;
	return cipher_names[c];
}

int qft_cipher_parse(const char *name, enum qft_cipher *c)
{
	unsigned i;

	for (i = 0; i < QFT_CIPHER__COUNT; i++) {
		if (strcmp(name, cipher_names[i]) == 0) {
			*c = (enum qft_cipher)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* 4 zero bytes || u64 big-endian record number. */
static void seal_iv(uint8_t iv[SEAL_IV_SIZE], uint64_t seq)
{
	memset(iv, 0, 4);
	qft_store64(iv + 4, seq);
}

int qft_seal_init(struct qft_seal *s, enum qft_cipher cipher,
		  const uint8_t key[QFT_KEY_SIZE], bool encrypt)
{
	const EVP_CIPHER *evp;
	int enc = encrypt ? 1 : 0;

	memset(s, 0, sizeof(*s));
	switch (cipher) {
	case QFT_CIPHER_NONE:        /* GMAC: GCM with the frame as AAD */
	case QFT_CIPHER_AES256GCM:
		evp = EVP_aes_256_gcm();
		break;
	case QFT_CIPHER_CHACHA20POLY1305:
		evp = EVP_chacha20_poly1305();
		break;
	default:
		return -EINVAL;
	}
	s->ctx = EVP_CIPHER_CTX_new();
	if (!s->ctx)
		return -ENOMEM;
	/* The IV length is 12 by default for both; say so rather than rely on
	 * it, since the nonce layout is part of the wire format. */
	if (EVP_CipherInit_ex(s->ctx, evp, NULL, NULL, NULL, enc) != 1 ||
	    EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_SET_IVLEN, SEAL_IV_SIZE,
				NULL) != 1 ||
	    EVP_CipherInit_ex(s->ctx, NULL, NULL, key, NULL, enc) != 1)
		goto out_free_ctx;
	s->cipher = cipher;
	s->encrypt = encrypt;
	return 0;

out_free_ctx:
	ERR_clear_error();
	qft_seal_free(s);
	return -EIO;
}

void qft_seal_free(struct qft_seal *s)
{
	/* Resetting the context frees the provider state, which OpenSSL
	 * wipes (key schedule included) before releasing it. */
	EVP_CIPHER_CTX_free(s->ctx);
	s->ctx = NULL;
	s->failed = true;
}

int qft_seal_iov(struct qft_seal *s, const struct iovec *iov, int n,
		 uint8_t len_field[QFT_SEAL_LEN_SIZE], uint8_t *body,
		 uint8_t tag[QFT_SEAL_TAG_SIZE])
{
	uint8_t iv[SEAL_IV_SIZE];
	size_t total = 0, done = 0;
	int outl;

	if (!s->ctx || !s->encrypt || n < 0 ||
	    (!body && s->cipher != QFT_CIPHER_NONE))
		return -EINVAL;
	if (s->failed)
		return -EIO;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > QFT_SEAL_MAX_FRAME - total)
			return -EMSGSIZE;
		total += iov[i].iov_len;
	}
	/* Never reuse a nonce: refuse the last value instead of wrapping. */
	if (s->seq == UINT64_MAX)
		return -EOVERFLOW;

	qft_store32(len_field, (uint32_t)(total + QFT_SEAL_TAG_SIZE));
	seal_iv(iv, s->seq);
	if (EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(s->ctx, NULL, &outl, len_field,
			      QFT_SEAL_LEN_SIZE) != 1)
		goto out_fail;
	for (int i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		int len = (int)iov[i].iov_len;

		if (len == 0)
			continue;
		if (s->cipher == QFT_CIPHER_NONE) {
			/* GMAC: the frame is associated data, sent as is. */
			if (EVP_EncryptUpdate(s->ctx, NULL, &outl, p,
					      len) != 1)
				goto out_fail;
			continue;
		}
		/* The pieces go on as one stream: GCM and ChaCha20 carry the
		 * keystream position over, so the body is what one call over
		 * the whole frame would have made. */
		if (EVP_EncryptUpdate(s->ctx, body + done, &outl, p,
				      len) != 1 || outl < 0 ||
		    (size_t)outl > total - done)
			goto out_fail;
		done += (size_t)outl;
	}
	if (s->cipher != QFT_CIPHER_NONE && done != total)
		goto out_fail;
	/* AEAD modes emit nothing at final; the tag comes from a ctrl. */
	if (EVP_EncryptFinal_ex(s->ctx, tag, &outl) != 1 || outl != 0 ||
	    EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG,
				QFT_SEAL_TAG_SIZE, tag) != 1)
		goto out_fail;
	s->seq++;
	return 0;

out_fail:
	/* The context is in an unknown state mid-record: stop here. */
	ERR_clear_error();
	s->failed = true;
	return -EIO;
}

/*
 * Seals the frame at `frame` (n bytes) into rec: length at rec[0..4), body
 * at rec[4..4+n), tag after it.  `frame` is either rec + 4 (in place:
 * OpenSSL allows exactly overlapping input and output) or a buffer that
 * does not overlap rec.
 */
static int seal_core(struct qft_seal *s, uint8_t *rec, const uint8_t *frame,
		     size_t n)
{
	struct iovec v = { .iov_base = (void *)frame, .iov_len = n };
	uint8_t *body = rec + QFT_SEAL_LEN_SIZE;

	if (n > QFT_SEAL_MAX_FRAME)
		return -EMSGSIZE;
	/* In clear the record carries the frame itself. */
	if (s->cipher == QFT_CIPHER_NONE && frame != body && n && s->ctx &&
	    s->encrypt && !s->failed)
		memcpy(body, frame, n);
	return qft_seal_iov(s, &v, 1, rec, body, body + n);
}

int qft_seal_record(struct qft_seal *s, const uint8_t *frame, size_t n,
		    struct qbuf *out)
{
	size_t old_len = out->len;
	uint8_t *rec;
	int r;

	if (n > QFT_SEAL_MAX_FRAME)
		return -EMSGSIZE;
	r = qbuf_reserve(out, QFT_SEAL_OVERHEAD + n);
	if (r < 0)
		return r;
	rec = qbuf_extend(out, QFT_SEAL_OVERHEAD + n);
	r = seal_core(s, rec, frame, n);
	if (r < 0)
		out->len = old_len;
	return r;
}

int qft_seal_in_place(struct qft_seal *s, uint8_t *rec, size_t n)
{
	return seal_core(s, rec, rec + QFT_SEAL_LEN_SIZE, n);
}

int qft_seal_body_len(const uint8_t len_field[QFT_SEAL_LEN_SIZE],
		      size_t *body_len)
{
	uint32_t l = qft_load32(len_field);

	if (l < QFT_SEAL_MIN_BODY || l > QFT_SEAL_MAX_BODY)
		return -EBADMSG;
	*body_len = l;
	return 0;
}

int qft_open_split(struct qft_seal *s,
		   const uint8_t len_field[QFT_SEAL_LEN_SIZE], uint8_t *body,
		   size_t n, size_t *frame_len)
{
	uint8_t iv[SEAL_IV_SIZE];
	uint8_t *tag;
	size_t l, body_len;
	int outl, r;

	if (!s->ctx || s->encrypt)
		return -EINVAL;
	if (s->failed)
		return -EBADMSG;
	if (qft_seal_body_len(len_field, &l) < 0 || l != n) {
		s->failed = true;
		return -EBADMSG;
	}
	if (s->seq == UINT64_MAX) {
		s->failed = true;
		return -EOVERFLOW;
	}
	body_len = l - QFT_SEAL_TAG_SIZE;
	tag = body + body_len;

	seal_iv(iv, s->seq);
	r = -EIO;
	if (EVP_DecryptInit_ex(s->ctx, NULL, NULL, NULL, iv) != 1 ||
	    EVP_DecryptUpdate(s->ctx, NULL, &outl, len_field,
			      QFT_SEAL_LEN_SIZE) != 1)
		goto out_fail;
	if (s->cipher == QFT_CIPHER_NONE) {
		if (body_len && EVP_DecryptUpdate(s->ctx, NULL, &outl, body,
						  (int)body_len) != 1)
			goto out_fail;
	} else if (body_len) {
		/* In place: OpenSSL allows exactly overlapping in and out. */
		if (EVP_DecryptUpdate(s->ctx, body, &outl, body,
				      (int)body_len) != 1 ||
		    (size_t)outl != body_len)
			goto out_fail;
	}
	if (EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_SET_TAG,
				QFT_SEAL_TAG_SIZE, tag) != 1)
		goto out_fail;
	r = -EBADMSG;
	if (EVP_DecryptFinal_ex(s->ctx, tag, &outl) != 1 || outl != 0)
		goto out_fail;
	s->seq++;
	*frame_len = body_len;
	return 0;

out_fail:
	ERR_clear_error();
	/* The body now holds plaintext nobody vouched for. */
	memset(body, 0, body_len);
	s->failed = true;
	return r;
}

int qft_open_record(struct qft_seal *s, uint8_t *rec, size_t n,
		    uint8_t **frame, size_t *frame_len)
{
	int r;

	if (!s->ctx || s->encrypt)
		return -EINVAL;
	if (s->failed)
		return -EBADMSG;
	if (n < QFT_SEAL_LEN_SIZE) {
		s->failed = true;
		return -EBADMSG;
	}
	r = qft_open_split(s, rec, rec + QFT_SEAL_LEN_SIZE,
			   n - QFT_SEAL_LEN_SIZE, frame_len);
	if (r == 0)
		*frame = rec + QFT_SEAL_LEN_SIZE;
	return r;
}
