// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the data-plane handshake (common/auth.c) from either side,
 * and the server's session secret line (server/session.c): what a peer
 * that does not know the secret can make either end read.
 *
 * Input: one byte of mode, then its subject.
 *   mode 0  the server's side: the rest is what the "client" sends
 *           (message 1, message 3, anything after)
 *   mode 1  the client's side: byte 1 chooses the cipher the client
 *           asks for (modulo the cipher count), the rest is what the
 *           "server" sends (message 2 and anything after)
 *   mode 2  an honest client and an honest server with the same secret,
 *           through a relay that xors bytes into the three messages: the
 *           rest is byte 1, the cipher, then (u8 offset, u8 mask)
 *           pairs, offsets counted over messages 1, 2 and 3 in a row
 *   mode 3  the secret line: the rest is what the ssh channel carries
 * Each side runs over a socketpair with a 2 s deadline; the peer's bytes
 * are written and the socket's write end shut, so nothing waits for more.
 *
 * Oracles besides the sanitizers:
 *  - modes 0 and 1: a handshake never succeeds (the proofs are HMACs
 *    over a nonce the fuzzer never sees); a failure is one of the
 *    documented errors, and the keys are wiped;
 *  - mode 2: with no byte changed both sides succeed with the same keys
 *    and cipher; with any byte changed at least one side fails, and the
 *    server never succeeds unless the client did with the same keys
 *    (a tampered handshake cannot hand the server keys of its own);
 *  - mode 3: the line is accepted exactly when it is 64 hex digits and a
 *    newline, and then the secret is their value; otherwise it is
 *    wiped.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "auth.h"
#include "fuzz.h"
#include "log.h"
#include "session.h"

#define TIMEOUT_MS 2000
#define MSG_TOTAL (QFT_AUTH_MSG1_SIZE + QFT_AUTH_MSG2_SIZE + \
		   QFT_AUTH_MSG3_SIZE)

static const uint8_t secret[QFT_SECRET_SIZE] = {
	0x51, 0x46, 0x54, 0x46, 0x53, 0x20, 0x66, 0x75, 0x7a, 0x7a, 0x20,
	0x73, 0x65, 0x63, 0x72, 0x65, 0x74, 0x20, 0x6b, 0x65, 0x79, 0x20,
	0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
};

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static bool documented(int r)
{
	return r == -EACCES || r == -EPROTO || r == -ETIMEDOUT ||
	       r == -EPIPE || r == -EIO || r == -ECONNRESET;
}

/* Reads what the side under test writes until it closes. */
static void *drain_main(void *arg)
{
	int fd = *(int *)arg;
	uint8_t buf[512];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

/* Modes 0 and 1: one side against the input. */
static void one_side(bool server, enum qft_cipher cipher,
		     const uint8_t *data, size_t size)
{
	struct qft_session_keys keys;
	enum qft_cipher got = QFT_CIPHER__COUNT;
	pthread_t drain;
	int sv[2], r;

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
			      sv) == 0);
	/* Small enough for the socket buffer: written before the side runs. */
	fuzz_send_all(sv[1], data, size);
	shutdown(sv[1], SHUT_WR);
	FUZZ_CHECK(pthread_create(&drain, NULL, drain_main, &sv[1]) == 0);
	memset(&keys, 0xa5, sizeof(keys));
	if (server)
		r = qft_auth_server(sv[0], secret, TIMEOUT_MS, &got, &keys);
	else
		r = qft_auth_client(sv[0], secret, cipher, TIMEOUT_MS, &keys);
	close(sv[0]);
	FUZZ_CHECK(pthread_join(drain, NULL) == 0);
	close(sv[1]);
	FUZZ_CHECK(r < 0);
	FUZZ_CHECK(documented(r));
	FUZZ_CHECK(all_zero(&keys, sizeof(keys)));
}

/* Mode 2: the relay between an honest pair. */
struct relay {
	int c, s;                       /* the client's and server's peers */
	uint8_t mask[MSG_TOTAL];
};

static bool relay_msg(int from, int to, uint8_t *mask, size_t n)
{
	uint8_t buf[QFT_AUTH_MSG2_SIZE];
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(from, buf + got, n - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		got += (size_t)k;
	}
	for (size_t i = 0; i < n; i++)
		buf[i] ^= mask[i];
	fuzz_send_all(to, buf, n);
	return true;
}

static void *relay_main(void *arg)
{
	struct relay *rl = arg;

	if (relay_msg(rl->c, rl->s, rl->mask, QFT_AUTH_MSG1_SIZE) &&
	    relay_msg(rl->s, rl->c, rl->mask + QFT_AUTH_MSG1_SIZE,
		      QFT_AUTH_MSG2_SIZE))
		(void)relay_msg(rl->c, rl->s, rl->mask + QFT_AUTH_MSG1_SIZE +
				QFT_AUTH_MSG2_SIZE, QFT_AUTH_MSG3_SIZE);
	/* Either side still waiting sees the end at once. */
	shutdown(rl->c, SHUT_RDWR);
	shutdown(rl->s, SHUT_RDWR);
	return NULL;
}

struct server_side {
	int fd, r;
	enum qft_cipher cipher;
	struct qft_session_keys keys;
};

static void *server_main(void *arg)
{
	struct server_side *sv = arg;

	sv->r = qft_auth_server(sv->fd, secret, TIMEOUT_MS, &sv->cipher,
				&sv->keys);
	/* The client may still wait for message 2 or our end. */
	shutdown(sv->fd, SHUT_RDWR);
	return NULL;
}

static void pair(enum qft_cipher cipher, const uint8_t *data, size_t size)
{
	struct relay rl = { 0 };
	struct server_side srv = { 0 };
	struct qft_session_keys ck;
	pthread_t tr, ts;
	int a[2], b[2], rc;
	bool changed = false;

	for (size_t i = 0; i + 1 < size; i += 2) {
		rl.mask[data[i] % MSG_TOTAL] ^= data[i + 1];
	}
	changed = !all_zero(rl.mask, sizeof(rl.mask));
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) == 0);
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b) == 0);
	rl.c = a[1];
	rl.s = b[1];
	srv.fd = b[0];
	srv.cipher = QFT_CIPHER__COUNT;
	FUZZ_CHECK(pthread_create(&tr, NULL, relay_main, &rl) == 0);
	FUZZ_CHECK(pthread_create(&ts, NULL, server_main, &srv) == 0);
	rc = qft_auth_client(a[0], secret, cipher, TIMEOUT_MS, &ck);
	/* A client that failed writes nothing more: the server must fail
	 * on its own (end of stream), not wait for a byte. */
	shutdown(a[0], SHUT_RDWR);
	FUZZ_CHECK(pthread_join(ts, NULL) == 0);
	FUZZ_CHECK(pthread_join(tr, NULL) == 0);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);

	FUZZ_CHECK(rc == 0 || documented(rc));
	FUZZ_CHECK(srv.r == 0 || documented(srv.r));
	if (rc < 0)
		FUZZ_CHECK(all_zero(&ck, sizeof(ck)));
	if (srv.r < 0)
		FUZZ_CHECK(all_zero(&srv.keys, sizeof(srv.keys)));
	if (!changed) {
		FUZZ_CHECK(rc == 0 && srv.r == 0);
	} else {
		FUZZ_CHECK(rc < 0 || srv.r < 0);
	}
	if (srv.r == 0) {
		/* Only a client that is done can have convinced the server;
		 * a changed byte in message 3 is the one case where the
		 * client is done and the server is not. */
		FUZZ_CHECK(rc == 0);
		FUZZ_CHECK(srv.cipher == cipher);
		FUZZ_CHECK(memcmp(&ck, &srv.keys, sizeof(ck)) == 0);
	}
}

/* Mode 3: the secret line. */
static void secret_line(const uint8_t *data, size_t size)
{
	uint8_t got[QFT_SECRET_SIZE], want[QFT_SECRET_SIZE];
	bool valid = size >= 2 * QFT_SECRET_SIZE + 1 &&
		     data[2 * QFT_SECRET_SIZE] == '\n';
	int sv[2], r;

	for (size_t i = 0; valid && i < 2 * QFT_SECRET_SIZE; i++)
		valid = isxdigit(data[i]);
	for (size_t i = 0; valid && i < QFT_SECRET_SIZE; i++) {
		char hx[3] = { (char)data[2 * i], (char)data[2 * i + 1], 0 };

		want[i] = (uint8_t)strtoul(hx, NULL, 16);
	}
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
			      sv) == 0);
	fuzz_send_all(sv[1], data, size);
	shutdown(sv[1], SHUT_WR);
	memset(got, 0xa5, sizeof(got));
	r = srv_session_read_secret(sv[0], got);
	close(sv[0]);
	close(sv[1]);
	if (valid) {
		FUZZ_CHECK(r == 0);
		FUZZ_CHECK(memcmp(got, want, sizeof(got)) == 0);
	} else {
		FUZZ_CHECK(r == -EINVAL || r == -EPIPE);
		FUZZ_CHECK(all_zero(got, sizeof(got)));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;

	if (!ready) {
		signal(SIGPIPE, SIG_IGN);
		qft_log_init("fuzz_auth", getenv("QFTFS_FUZZ_DEBUG") ?
			     QFT_LOG_DEBUG : QFT_LOG_ERR);
		ready = true;
	}
	/* More than any socket buffer holds is nothing new for a
	 * handshake that reads 80 bytes. */
	if (size < 1 || size > 4096)
		return 0;
	switch (data[0] % 4) {
	case 0:
		one_side(true, QFT_CIPHER_NONE, data + 1, size - 1);
		break;
	case 1:
		if (size < 2)
			return 0;
		one_side(false, (enum qft_cipher)(data[1] % QFT_CIPHER__COUNT),
			 data + 2, size - 2);
		break;
	case 2:
		if (size < 2)
			return 0;
		pair((enum qft_cipher)(data[1] % QFT_CIPHER__COUNT), data + 2,
		     size - 2);
		break;
	default:
		secret_line(data + 1, size - 1);
		break;
	}
	return 0;
}
