/* SPDX-License-Identifier: MIT */
/*
 * Record sealing for the data plane: each frame travels as one record that
 * is authenticated always and encrypted unless the cipher is "none".
 * docs/security.md describes the format in prose; this is the code's view.
 *
 *   offset   size  field
 *   0        4     L: bytes that follow (body + 16-byte tag), big-endian
 *   4        L-16  body: the frame, encrypted (or in clear with "none")
 *   4+L-16   16    tag
 *
 * The nonce is never sent.  Each direction has its own key and counts its
 * records from 0; record number i is sealed with the 96-bit nonce
 * 0x00000000 || u64 big-endian i.  The receiver uses the number it expects,
 * so a replayed, dropped, reordered or forged record fails the tag check.
 * The 4-byte length is associated data, so it cannot be changed either.
 * With QFT_CIPHER_NONE the body is the frame in clear and the tag is
 * AES-256-GCM over no plaintext with (length || frame) as associated data
 * (GMAC): the same counter rules, no confidentiality.
 *
 * A struct qft_seal is one direction of one connection: qft_seal_init()
 * keys it once, every record then only changes the IV.  It is not locked:
 * a sender must seal and send under the same lock (the channel's write
 * lock), so that records reach the wire in counter order; only one thread
 * opens.  Any failure to open a record is final: the struct refuses every
 * later record and the caller tears the connection down.  Nothing here
 * logs, and nothing keeps a copy of the key outside OpenSSL's context,
 * which qft_seal_free() wipes.
 *
 * Error convention: 0 or a negative errno.
 *   -EINVAL   bad argument (unknown cipher, wrong direction);
 *   -EMSGSIZE a frame longer than QFT_SEAL_MAX_FRAME, or an output qbuf
 *             whose limit is too small (the qbuf is left unchanged);
 *   -EBADMSG  a record that is malformed, out of range or fails its tag,
 *             and every record after it;
 *   -EOVERFLOW the record counter is exhausted (2^64 - 1 records);
 *   -ENOMEM, -EIO  allocation or OpenSSL failure.
 */
#ifndef QFT_SEAL_H
#define QFT_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "buf.h"
#include "protocol.h"

/* Values are part of the handshake (auth.h): never renumber. */
enum qft_cipher {
	QFT_CIPHER_NONE = 0,              /* authenticated, not encrypted */
	QFT_CIPHER_AES256GCM = 1,
	QFT_CIPHER_CHACHA20POLY1305 = 2,
	QFT_CIPHER__COUNT
};

#define QFT_KEY_SIZE        32u
#define QFT_SEAL_LEN_SIZE   4u
#define QFT_SEAL_TAG_SIZE   16u
/* The largest frame: a header and the largest payload. */
#define QFT_SEAL_MAX_FRAME  (QFT_HDR_SIZE + QFT_MAX_PAYLOAD)
/* Bounds on L, the length field. */
#define QFT_SEAL_MIN_BODY   QFT_SEAL_TAG_SIZE
#define QFT_SEAL_MAX_BODY   (QFT_SEAL_MAX_FRAME + QFT_SEAL_TAG_SIZE)
/* Bytes a record adds to its frame. */
#define QFT_SEAL_OVERHEAD   (QFT_SEAL_LEN_SIZE + QFT_SEAL_TAG_SIZE)
#define QFT_SEAL_MAX_RECORD (QFT_SEAL_LEN_SIZE + QFT_SEAL_MAX_BODY)

struct evp_cipher_ctx_st; /* OpenSSL's EVP_CIPHER_CTX, kept out of users */

struct qft_seal {
	struct evp_cipher_ctx_st *ctx; /* keyed once; owns the key */
	enum qft_cipher cipher;
	bool encrypt;                  /* sealing (true) or opening */
	bool failed;                   /* sticky: see above */
	uint64_t seq;                  /* number of the next record */
};

/* "none", "aes256-gcm", "chacha20-poly1305"; NULL for an unknown value. */
const char *qft_cipher_name(enum qft_cipher c);
/* The inverse, for -o cipher=NAME: 0 and *c set, or -EINVAL. */
int qft_cipher_parse(const char *name, enum qft_cipher *c);

/*
 * Keys one direction.  `key` is QFT_KEY_SIZE bytes; the caller keeps
 * ownership and should wipe it once both directions are initialised.  On
 * failure *s is left freed (qft_seal_free() on it is harmless).
 */
int qft_seal_init(struct qft_seal *s, enum qft_cipher cipher,
		  const uint8_t key[QFT_KEY_SIZE], bool encrypt);
/* Wipes the key and releases the context; *s may be re-initialised. */
void qft_seal_free(struct qft_seal *s);

/*
 * Appends the record for `frame` (n bytes, n <= QFT_SEAL_MAX_FRAME) to
 * `out`: QFT_SEAL_OVERHEAD + n bytes.  On failure `out` is unchanged and
 * the counter does not move, so nothing was consumed.
 */
int qft_seal_record(struct qft_seal *s, const uint8_t *frame, size_t n,
		    struct qbuf *out);
/*
 * The same without a second buffer: `rec` holds the frame at
 * rec[QFT_SEAL_LEN_SIZE..+n) and has room for QFT_SEAL_OVERHEAD + n bytes;
 * the length, the sealed body and the tag are written in place.
 */
int qft_seal_in_place(struct qft_seal *s, uint8_t *rec, size_t n);
/*
 * Seals the frame that is the concatenation of iov[0..n) (at most
 * QFT_SEAL_MAX_FRAME bytes in all) out of place, so that a frame's header
 * and its data never have to be gathered into one buffer first: the
 * length field goes to `len_field`, the tag to `tag`, and with an
 * encrypting cipher the encrypted body (as many bytes as the frame) to
 * `body`, which must not overlap the pieces.  With QFT_CIPHER_NONE the
 * body on the wire is the frame as it is: `body` is not written (it may
 * be NULL), and the record is len_field, the pieces, then tag -- what a
 * writev can send without a copy.  The same failures as
 * qft_seal_record (nothing is consumed on -EINVAL or -EMSGSIZE).
 */
int qft_seal_iov(struct qft_seal *s, const struct iovec *iov, int n,
		 uint8_t len_field[QFT_SEAL_LEN_SIZE], uint8_t *body,
		 uint8_t tag[QFT_SEAL_TAG_SIZE]);

/*
 * Reads and checks the length field at the start of a record: on success
 * *body_len is L, the number of bytes to read after the 4 length bytes,
 * QFT_SEAL_MIN_BODY <= L <= QFT_SEAL_MAX_BODY.  Call it before allocating
 * anything for the body; -EBADMSG when L is out of range.
 */
int qft_seal_body_len(const uint8_t len_field[QFT_SEAL_LEN_SIZE],
		      size_t *body_len);

/*
 * Authenticates and decrypts one whole record (n bytes: the length field,
 * the body and the tag) in place.  On success *frame points into `rec` at
 * the frame and *frame_len is its length; on failure the body is zeroed so
 * that unauthenticated plaintext never escapes, and the struct is failed.
 */
int qft_open_record(struct qft_seal *s, uint8_t *rec, size_t n,
		    uint8_t **frame, size_t *frame_len);
/*
 * The same for a record whose length field was read apart from the rest:
 * `body` holds the n = L bytes that follow it (the body and the tag), and
 * on success the frame is body[0..*frame_len), decrypted where it landed,
 * so a receiver can read the body straight to where the frame is wanted.
 */
int qft_open_split(struct qft_seal *s,
		   const uint8_t len_field[QFT_SEAL_LEN_SIZE], uint8_t *body,
		   size_t n, size_t *frame_len);

#endif /* QFT_SEAL_H */
