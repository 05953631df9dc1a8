// SPDX-License-Identifier: MIT
/*
 * Data-plane handshake (see auth.h and docs/security.md).  Fixed-size
 * messages, read and written with a deadline over descriptors that stay
 * blocking: every read or write is preceded by poll(2), and sockets are
 * driven with MSG_DONTWAIT so that a short buffer can never block past the
 * deadline.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "auth.h"

/* Both labels are 12 bytes, so label || transcript is unambiguous. */
#define AUTH_LABEL_LEN 12
static const char auth_label_server[AUTH_LABEL_LEN + 1] = "qftfs-server";
static const char auth_label_client[AUTH_LABEL_LEN + 1] = "qftfs-client";

#define AUTH_INFO_AUTH "qftfs v1 auth"
#define AUTH_INFO_C2S  "qftfs v1 c2s"
#define AUTH_INFO_S2C  "qftfs v1 s2c"
#define AUTH_INFO_RESUME "qftfs v1 resume"

/* Transcript: message 1, then magic, version and Ns of message 2. */
#define AUTH_MSG2_HEAD (8u + QFT_AUTH_NONCE)
#define AUTH_T_SIZE    (QFT_AUTH_MSG1_SIZE + AUTH_MSG2_HEAD)
#define AUTH_NC_OFF    16u

struct auth_io {
	int rfd, wfd;
	bool rsock, wsock;       /* cleared on ENOTSOCK: use read/write */
	bool forever;            /* no deadline */
	int64_t deadline_ms;     /* CLOCK_MONOTONIC */
};

static int64_t auth_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void auth_io_init(struct auth_io *io, int rfd, int wfd, int timeout_ms)
{
	io->rfd = rfd;
	io->wfd = wfd;
	io->rsock = io->wsock = true;
	io->forever = timeout_ms < 0;
	io->deadline_ms = auth_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
}

/* Waits until fd is ready for `ev` (or in error: the I/O call tells). */
static int auth_wait(struct auth_io *io, int fd, short ev)
{
	struct pollfd p;
	int64_t left;
	int r, ms = -1;

	for (;;) {
		if (!io->forever) {
			left = io->deadline_ms - auth_now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			ms = left > INT_MAX ? INT_MAX : (int)left;
		}
		p.fd = fd;
		p.events = ev;
		p.revents = 0;
		r = poll(&p, 1, ms);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			continue;         /* the deadline check above ends it */
		if (p.revents & POLLNVAL)
			return -EBADF;
		return 0;
	}
}

static int auth_read(struct auth_io *io, uint8_t *p, size_t n)
{
	size_t got = 0;
	ssize_t k;
	int r;

	while (got < n) {
		r = auth_wait(io, io->rfd, POLLIN);
		if (r < 0)
			return r;
		if (io->rsock) {
			k = recv(io->rfd, p + got, n - got, MSG_DONTWAIT);
			if (k < 0 && errno == ENOTSOCK) {
				io->rsock = false;
				continue;
			}
		} else {
			k = read(io->rfd, p + got, n - got);
		}
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == EWOULDBLOCK)
				continue;
			if (errno != ECONNRESET)
				return -errno;
			k = 0;        /* a reset is a cut stream, like EOF */
		}
		if (k == 0)
			return got ? -EIO : -EPIPE;
		got += (size_t)k;
	}
	return 0;
}

static int auth_write(struct auth_io *io, const uint8_t *p, size_t n)
{
	size_t done = 0;
	ssize_t k;
	int r;

	while (done < n) {
		r = auth_wait(io, io->wfd, POLLOUT);
		if (r < 0)
			return r;
		if (io->wsock) {
			k = send(io->wfd, p + done, n - done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (k < 0 && errno == ENOTSOCK) {
				io->wsock = false;
				continue;
			}
		} else {
			k = write(io->wfd, p + done, n - done);
		}
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == EWOULDBLOCK)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		done += (size_t)k;
	}
	return 0;
}

/* HKDF-SHA256 into out[QFT_KEY_SIZE]; salt may be NULL (none). */
static int auth_hkdf(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt,
		     size_t salt_len, const char *info, uint8_t *out)
{
	char digest[] = "SHA256";
	OSSL_PARAM params[5], *p = params;
	EVP_KDF_CTX *kctx;
	EVP_KDF *kdf;
	int r = -EIO;

	kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	if (!kdf)
		goto out_clear_err;
	kctx = EVP_KDF_CTX_new(kdf);
	EVP_KDF_free(kdf);
	if (!kctx)
		goto out_clear_err;
	*p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						digest, 0);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
						 (void *)ikm, ikm_len);
	if (salt)
		*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
							 (void *)salt,
							 salt_len);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
						 (void *)info, strlen(info));
	*p = OSSL_PARAM_construct_end();
	if (EVP_KDF_derive(kctx, out, QFT_KEY_SIZE, params) == 1)
		r = 0;
	/* Frees (and wipes) the copy of the key the context holds. */
	EVP_KDF_CTX_free(kctx);
out_clear_err:
	if (r < 0)
		ERR_clear_error();
	return r;
}

/* HMAC-SHA256(key, label || t) into out[QFT_AUTH_MAC]. */
static int auth_hmac(const uint8_t key[QFT_KEY_SIZE], const char *label,
		     const uint8_t *t, size_t t_len, uint8_t *out)
{
	char digest[] = "SHA256";
	OSSL_PARAM params[2];
	EVP_MAC_CTX *mctx;
	EVP_MAC *mac;
	size_t outl = 0;
	int r = -EIO;

	mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!mac)
		goto out_clear_err;
	mctx = EVP_MAC_CTX_new(mac);
	EVP_MAC_free(mac);
	if (!mctx)
		goto out_clear_err;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						     digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	if (EVP_MAC_init(mctx, key, QFT_KEY_SIZE, params) == 1 &&
	    EVP_MAC_update(mctx, (const uint8_t *)label, AUTH_LABEL_LEN) == 1 &&
	    EVP_MAC_update(mctx, t, t_len) == 1 &&
	    EVP_MAC_final(mctx, out, &outl, QFT_AUTH_MAC) == 1 &&
	    outl == QFT_AUTH_MAC)
		r = 0;
	EVP_MAC_CTX_free(mctx);
out_clear_err:
	if (r < 0)
		ERR_clear_error();
	return r;
}

static int auth_session_keys(const uint8_t *secret, const uint8_t *nc,
			     const uint8_t *ns, struct qft_session_keys *out)
{
	uint8_t salt[2 * QFT_AUTH_NONCE];
	int r;

	memcpy(salt, nc, QFT_AUTH_NONCE);
	memcpy(salt + QFT_AUTH_NONCE, ns, QFT_AUTH_NONCE);
	if ((r = auth_hkdf(secret, QFT_SECRET_SIZE, salt, sizeof(salt),
			   AUTH_INFO_C2S, out->c2s)) < 0 ||
	    (r = auth_hkdf(secret, QFT_SECRET_SIZE, salt, sizeof(salt),
			   AUTH_INFO_S2C, out->s2c)) < 0)
		return r;
	return 0;
}

int qft_auth_resume_key(const uint8_t secret[QFT_SECRET_SIZE],
			uint8_t out[QFT_SECRET_SIZE])
{
	int r;

	/* A key of the secret's size: it takes the secret's place. */
	_Static_assert(QFT_KEY_SIZE == QFT_SECRET_SIZE, "key sizes");
	r = auth_hkdf(secret, QFT_SECRET_SIZE, NULL, 0, AUTH_INFO_RESUME, out);
	if (r < 0)
		OPENSSL_cleanse(out, QFT_SECRET_SIZE);
	return r;
}

void qft_session_keys_wipe(struct qft_session_keys *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}

int qft_auth_client_fds(int rfd, int wfd, const uint8_t secret[QFT_SECRET_SIZE],
			enum qft_cipher cipher, int timeout_ms,
			struct qft_session_keys *out)
{
	uint8_t t[AUTH_T_SIZE];            /* msg1 || head of msg2 */
	uint8_t msg2[QFT_AUTH_MSG2_SIZE];
	uint8_t k_auth[QFT_KEY_SIZE];
	uint8_t mac[QFT_AUTH_MAC];
	struct auth_io io;
	int r;

	qft_session_keys_wipe(out);
	if ((unsigned)cipher >= QFT_CIPHER__COUNT)
		return -EINVAL;
	auth_io_init(&io, rfd, wfd, timeout_ms);

	if ((r = auth_hkdf(secret, QFT_SECRET_SIZE, NULL, 0, AUTH_INFO_AUTH,
			   k_auth)) < 0)
		goto out_wipe;
	qft_store32(t, QFT_AUTH_MAGIC);
	qft_store32(t + 4, QFT_AUTH_VERSION);
	qft_store32(t + 8, (uint32_t)cipher);
	qft_store32(t + 12, 0);
	if (RAND_bytes(t + AUTH_NC_OFF, QFT_AUTH_NONCE) != 1) {
		ERR_clear_error();
		r = -EIO;
		goto out_wipe;
	}
	if ((r = auth_write(&io, t, QFT_AUTH_MSG1_SIZE)) < 0 ||
	    (r = auth_read(&io, msg2, sizeof(msg2))) < 0)
		goto out_wipe;

	if (qft_load32(msg2) != QFT_AUTH_MAGIC ||
	    qft_load32(msg2 + 4) != QFT_AUTH_VERSION) {
		r = -EPROTO;
		goto out_wipe;
	}
	memcpy(t + QFT_AUTH_MSG1_SIZE, msg2, AUTH_MSG2_HEAD);
	if ((r = auth_hmac(k_auth, auth_label_server, t, sizeof(t), mac)) < 0)
		goto out_wipe;
	if (CRYPTO_memcmp(mac, msg2 + AUTH_MSG2_HEAD, QFT_AUTH_MAC) != 0) {
		r = -EACCES;
		goto out_wipe;
	}

	/* The server is genuine: prove ourselves, keys first so that a
	 * failure cannot leave the server believing we are done. */
	if ((r = auth_session_keys(secret, t + AUTH_NC_OFF, msg2 + 8,
				   out)) < 0 ||
	    (r = auth_hmac(k_auth, auth_label_client, t, sizeof(t),
			   mac)) < 0 ||
	    (r = auth_write(&io, mac, sizeof(mac))) < 0)
		goto out_wipe;
	r = 0;

out_wipe:
	if (r < 0)
		qft_session_keys_wipe(out);
	OPENSSL_cleanse(k_auth, sizeof(k_auth));
	OPENSSL_cleanse(mac, sizeof(mac));
	return r;
}

int qft_auth_server_fds(int rfd, int wfd, const uint8_t secret[QFT_SECRET_SIZE],
			int timeout_ms, enum qft_cipher *cipher_out,
			struct qft_session_keys *out)
{
	uint8_t t[AUTH_T_SIZE];
	uint8_t msg2[QFT_AUTH_MSG2_SIZE];
	uint8_t msg3[QFT_AUTH_MSG3_SIZE];
	uint8_t k_auth[QFT_KEY_SIZE];
	uint8_t mac[QFT_AUTH_MAC];
	struct auth_io io;
	uint32_t cipher;
	int r;

	qft_session_keys_wipe(out);
	auth_io_init(&io, rfd, wfd, timeout_ms);
	/* Read first: an unauthenticated peer costs no crypto until then. */
	if ((r = auth_read(&io, t, QFT_AUTH_MSG1_SIZE)) < 0)
		return r;
	cipher = qft_load32(t + 8);
	if (qft_load32(t) != QFT_AUTH_MAGIC ||
	    qft_load32(t + 4) != QFT_AUTH_VERSION ||
	    cipher >= QFT_CIPHER__COUNT || qft_load32(t + 12) != 0)
		return -EPROTO;

	if ((r = auth_hkdf(secret, QFT_SECRET_SIZE, NULL, 0, AUTH_INFO_AUTH,
			   k_auth)) < 0)
		goto out_wipe;
	qft_store32(msg2, QFT_AUTH_MAGIC);
	qft_store32(msg2 + 4, QFT_AUTH_VERSION);
	if (RAND_bytes(msg2 + 8, QFT_AUTH_NONCE) != 1) {
		ERR_clear_error();
		r = -EIO;
		goto out_wipe;
	}
	memcpy(t + QFT_AUTH_MSG1_SIZE, msg2, AUTH_MSG2_HEAD);
	if ((r = auth_hmac(k_auth, auth_label_server, t, sizeof(t),
			   msg2 + AUTH_MSG2_HEAD)) < 0 ||
	    (r = auth_write(&io, msg2, sizeof(msg2))) < 0 ||
	    (r = auth_read(&io, msg3, sizeof(msg3))) < 0)
		goto out_wipe;

	if ((r = auth_hmac(k_auth, auth_label_client, t, sizeof(t),
			   mac)) < 0)
		goto out_wipe;
	if (CRYPTO_memcmp(mac, msg3, QFT_AUTH_MAC) != 0) {
		r = -EACCES;
		goto out_wipe;
	}
	if ((r = auth_session_keys(secret, t + AUTH_NC_OFF, msg2 + 8,
				   out)) < 0)
		goto out_wipe;
	*cipher_out = (enum qft_cipher)cipher;
	r = 0;

out_wipe:
	if (r < 0)
		qft_session_keys_wipe(out);
	OPENSSL_cleanse(k_auth, sizeof(k_auth));
	OPENSSL_cleanse(mac, sizeof(mac));
	return r;
}
