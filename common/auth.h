/* SPDX-License-Identifier: MIT */
/*
 * Data-plane handshake: mutual challenge-response over a 256-bit secret S
 * that the client handed the server through the ssh channel, deriving the
 * per-direction record keys (seal.h).  docs/security.md has the prose.
 *
 *   1. C -> S  48 bytes: u32 magic "QFTD", u32 version 1, u32 cipher,
 *              u32 reserved 0, Nc[32]
 *   2. S -> C  72 bytes: u32 magic, u32 version, Ns[32],
 *              proof_s = HMAC-SHA256(K_auth, "qftfs-server" || T)
 *   3. C -> S  32 bytes: proof_c = HMAC-SHA256(K_auth, "qftfs-client" || T)
 *
 *   T      = message 1 || the first 40 bytes of message 2 (magic, version,
 *            Ns), so the cipher the client asked for is authenticated and
 *            a changed one (downgrade) fails both proofs;
 *   K_auth = HKDF-SHA256(ikm S, no salt, info "qftfs v1 auth");
 *   keys   = HKDF-SHA256(ikm S, salt Nc || Ns, info "qftfs v1 c2s" and
 *            "qftfs v1 s2c"), 32 bytes each.
 *
 * Each side checks the other's proof in constant time before it trusts the
 * connection; the client checks first (it never proves itself to a server
 * that cannot prove itself).  The server sends nothing but message 2
 * before it has checked proof_c, and on a failure neither side sends
 * anything more: the caller closes the descriptor.  The handshake reads
 * exactly its own bytes, so records may follow message 3 at once.
 *
 * The descriptors stay blocking (they may be a shared stdin); the deadline
 * is kept with poll(2) and MSG_DONTWAIT on sockets.  On a pipe a write to
 * a closed reader raises SIGPIPE: callers ignore it.  Not thread-safe per
 * descriptor; any number of handshakes may run in parallel on different
 * descriptors.
 *
 * Error convention: 0 or a negative errno.
 *   -EACCES     the peer's proof is wrong (wrong secret, tampering, replay);
 *   -EPROTO     bad magic, version, reserved field or cipher id;
 *   -ETIMEDOUT  the whole handshake did not finish within timeout_ms;
 *   -EPIPE      the peer closed before a message began; -EIO inside one;
 *   -EINVAL     a bad argument (cipher); otherwise the errno of a failed
 *               read/write/poll, or -EIO for an OpenSSL failure.
 * On failure *out is wiped.
 */
#ifndef QFT_AUTH_H
#define QFT_AUTH_H

#include <stdint.h>

#include "seal.h"

#define QFT_AUTH_MAGIC     0x51465444u /* "QFTD" */
#define QFT_AUTH_VERSION   1u
#define QFT_SECRET_SIZE    32u
#define QFT_AUTH_NONCE     32u
#define QFT_AUTH_MAC       32u
#define QFT_AUTH_MSG1_SIZE (16u + QFT_AUTH_NONCE)
#define QFT_AUTH_MSG2_SIZE (8u + QFT_AUTH_NONCE + QFT_AUTH_MAC)
#define QFT_AUTH_MSG3_SIZE QFT_AUTH_MAC
/* A sensible deadline for the server's side of one handshake. */
#define QFT_AUTH_TIMEOUT_MS 5000

struct qft_session_keys {
	uint8_t c2s[QFT_KEY_SIZE];   /* client seals, server opens */
	uint8_t s2c[QFT_KEY_SIZE];   /* server seals, client opens */
};

/*
 * Runs the client side on `rfd`/`wfd` (the same descriptor for a socket).
 * `secret` stays owned by the caller.  timeout_ms < 0 waits forever, which
 * only makes sense on an already-trusted stream.
 */
int qft_auth_client_fds(int rfd, int wfd, const uint8_t secret[QFT_SECRET_SIZE],
			enum qft_cipher cipher, int timeout_ms,
			struct qft_session_keys *out);
/* Runs the server side; *cipher_out is the cipher the client chose. */
int qft_auth_server_fds(int rfd, int wfd, const uint8_t secret[QFT_SECRET_SIZE],
			int timeout_ms, enum qft_cipher *cipher_out,
			struct qft_session_keys *out);

static inline int qft_auth_client(int fd, const uint8_t secret[QFT_SECRET_SIZE],
				  enum qft_cipher cipher, int timeout_ms,
				  struct qft_session_keys *out)
{
	return qft_auth_client_fds(fd, fd, secret, cipher, timeout_ms, out);
}

static inline int qft_auth_server(int fd, const uint8_t secret[QFT_SECRET_SIZE],
				  int timeout_ms, enum qft_cipher *cipher_out,
				  struct qft_session_keys *out)
{
	return qft_auth_server_fds(fd, fd, secret, timeout_ms, cipher_out,
				   out);
}

/*
 * The resume key K_r = HKDF-SHA256(ikm S, no salt, info "qftfs v1 resume")
 * (docs/protocol.md, "Resuming a session"): what both ends keep, in place
 * of S, to authenticate the connections that resume a session, with the
 * same handshake.  0 or -EIO; on failure *out is wiped.
 */
int qft_auth_resume_key(const uint8_t secret[QFT_SECRET_SIZE],
			uint8_t out[QFT_SECRET_SIZE]);

/* OPENSSL_cleanse on the keys, once both seal directions are keyed. */
void qft_session_keys_wipe(struct qft_session_keys *k);

#endif /* QFT_AUTH_H */
