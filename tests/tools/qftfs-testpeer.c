// SPDX-License-Identifier: MIT
/*
 * qftfs-testpeer: a data-plane client for tests that can misbehave on
 * purpose.  It connects to a `qftfs-server --session` port, runs the
 * handshake of docs/security.md with its own code (HKDF and HMAC straight
 * from libcrypto, not common/auth.c, so the two implementations check each
 * other), then sends sealed frames with common/seal.c: HELLO and,
 * optionally, MKDIR NAME.  On request it uses a wrong secret, sends a
 * wrong proof, flips a ciphertext byte, sends a record twice, records
 * every byte it sends, or replays such a recording verbatim.
 *
 * It reports what happened on stdout, one event per line:
 *   handshake ok | handshake failed: WHY | server proof wrong
 *   reply OP status N
 *   closed after N bytes | timeout after N bytes
 * With --hold it then keeps the connection until the server closes it
 * (or 30 s pass), printing "closed" or "still open".
 * Exit status: 0 when the exchange went through with every reply OK, 1
 * otherwise, 2 for a usage error.  Only for tests: it has no other use.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "auth.h"
#include "buf.h"
#include "msg.h"
#include "protocol.h"
#include "seal.h"

#define IO_TIMEOUT_MS 5000

static int sock = -1;
static FILE *record_file;

static void die(const char *msg)
{
	fprintf(stderr, "qftfs-testpeer: %s\n", msg);
	exit(2);
}

static int send_all(const void *p, size_t n)
{
	const uint8_t *b = p;

	if (record_file && fwrite(p, 1, n, record_file) != n)
		die("cannot write the recording");
	while (n) {
		ssize_t w = send(sock, b, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads exactly n bytes within the timeout; *got counts them. */
static int recv_all(void *p, size_t n, size_t *got)
{
	uint8_t *b = p;

	*got = 0;
	while (*got < n) {
		struct pollfd pf = { .fd = sock, .events = POLLIN };
		ssize_t r;

		if (poll(&pf, 1, IO_TIMEOUT_MS) == 0)
			return -ETIMEDOUT;
		r = recv(sock, b + *got, n - *got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		if (r == 0)
			return -EPIPE;
		*got += (size_t)r;
	}
	return 0;
}

/* Everything the server still sends, until it closes or goes quiet. */
static int drain(size_t *total)
{
	uint8_t buf[4096];

	for (;;) {
		size_t got;
		int r = recv_all(buf, 1, &got);

		*total += got;
		if (r == -EPIPE) {
			printf("closed after %zu bytes\n", *total);
			return 0;
		}
		if (r < 0) {
			printf("timeout after %zu bytes\n", *total);
			return r;
		}
	}
}

static void hkdf(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt,
		 size_t salt_len, const char *info, uint8_t out[32])
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t n = 32;

	if (!c || EVP_PKEY_derive_init(c) <= 0 ||
	    EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) <= 0 ||
	    EVP_PKEY_CTX_set1_hkdf_key(c, ikm, (int)ikm_len) <= 0 ||
	    (salt && EVP_PKEY_CTX_set1_hkdf_salt(c, salt, (int)salt_len) <= 0) ||
	    EVP_PKEY_CTX_add1_hkdf_info(c, (const uint8_t *)info,
					(int)strlen(info)) <= 0 ||
	    EVP_PKEY_derive(c, out, &n) <= 0 || n != 32)
		die("HKDF failed");
	EVP_PKEY_CTX_free(c);
}

static void proof(const uint8_t key[32], const char *label, const uint8_t *t,
		  size_t t_len, uint8_t out[32])
{
	uint8_t buf[12 + QFT_AUTH_MSG1_SIZE + 40];
	unsigned n = 32;

	memcpy(buf, label, 12);
	memcpy(buf + 12, t, t_len);
	if (!HMAC(EVP_sha256(), key, 32, buf, 12 + t_len, out, &n) || n != 32)
		die("HMAC failed");
}

static void store32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/*
 * The client side of the handshake.  `bad_proof` sends random bytes as
 * message 3; a wrong secret is the caller's.  Unlike qftfs, it sends its
 * proof even when the server's is wrong, so that the server's check is
 * what gets tested.  Returns 0, or -1 after printing why.
 */
static int handshake(const uint8_t secret[32], enum qft_cipher cipher,
		     bool bad_proof, struct qft_session_keys *keys)
{
	uint8_t t[QFT_AUTH_MSG1_SIZE + 40], msg2[QFT_AUTH_MSG2_SIZE];
	uint8_t k_auth[32], mac[32], salt[64];
	size_t got;
	int r;

	store32(t, QFT_AUTH_MAGIC);
	store32(t + 4, QFT_AUTH_VERSION);
	store32(t + 8, (uint32_t)cipher);
	store32(t + 12, 0);
	if (RAND_bytes(t + 16, 32) != 1)
		die("RAND_bytes failed");
	if ((r = send_all(t, QFT_AUTH_MSG1_SIZE)) < 0 ||
	    (r = recv_all(msg2, sizeof(msg2), &got)) < 0) {
		printf("handshake failed: %s\n", strerror(-r));
		return -1;
	}
	memcpy(t + QFT_AUTH_MSG1_SIZE, msg2, 40);
	hkdf(secret, 32, NULL, 0, "qftfs v1 auth", k_auth);
	proof(k_auth, "qftfs-server", t, sizeof(t), mac);
	if (memcmp(mac, msg2 + 40, 32) != 0)
		printf("server proof wrong\n");
	proof(k_auth, "qftfs-client", t, sizeof(t), mac);
	if (bad_proof && RAND_bytes(mac, sizeof(mac)) != 1)
		die("RAND_bytes failed");
	if ((r = send_all(mac, sizeof(mac))) < 0) {
		printf("handshake failed: %s\n", strerror(-r));
		return -1;
	}
	memcpy(salt, t + 16, 32);
	memcpy(salt + 32, msg2 + 8, 32);
	hkdf(secret, 32, salt, sizeof(salt), "qftfs v1 c2s", keys->c2s);
	hkdf(secret, 32, salt, sizeof(salt), "qftfs v1 s2c", keys->s2c);
	printf("handshake ok\n");
	return 0;
}

static void hex_secret(const char *hex, uint8_t out[32])
{
	if (strlen(hex) != 64)
		die("--secret needs 64 hex digits");
	for (int i = 0; i < 32; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			die("--secret needs 64 hex digits");
		out[i] = (uint8_t)v;
	}
}

static int replay(const char *path)
{
	uint8_t buf[65536];
	size_t n, total = 0;
	FILE *f = fopen(path, "rb");

	if (!f)
		die("cannot open the replay file");
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (send_all(buf, n) < 0)
		printf("send failed\n");
	drain(&total);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "secret", required_argument, NULL, 's' },
		{ "cipher", required_argument, NULL, 'c' },
		{ "auth", required_argument, NULL, 'a' },
		{ "mkdir", required_argument, NULL, 'm' },
		{ "corrupt", required_argument, NULL, 'x' },
		{ "duplicate", required_argument, NULL, 'D' },
		{ "record", required_argument, NULL, 'r' },
		{ "replay", required_argument, NULL, 'R' },
		{ "hold", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *host = "127.0.0.1", *auth = "good", *mkdir_name = NULL;
	const char *replay_path = NULL;
	enum qft_cipher cipher = QFT_CIPHER_AES256GCM;
	int port = 0, corrupt = -1, duplicate = -1, c, nrec = 0, ok = 1;
	bool ended = false, hold = false;
	uint8_t secret[32];
	bool have_secret = false;
	struct qft_session_keys keys;
	struct qft_seal tx, rx;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct qbuf out, in;
	size_t total = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'H': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 's': hex_secret(optarg, secret); have_secret = true; break;
		case 'c':
			if (qft_cipher_parse(optarg, &cipher) < 0)
				die("unknown cipher");
			break;
		case 'a': auth = optarg; break;
		case 'm': mkdir_name = optarg; break;
		case 'x': corrupt = atoi(optarg); break;
		case 'D': duplicate = atoi(optarg); break;
		case 'r':
			record_file = fopen(optarg, "wb");
			if (!record_file)
				die("cannot create the recording");
			break;
		case 'R': replay_path = optarg; break;
		case 'h': hold = true; break;
		default: die("bad option");
		}
	}
	if (port <= 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		die("--port and an IPv4 --host are needed");
	if (!replay_path && !have_secret)
		die("--secret is needed");
	sa.sin_port = htons((uint16_t)port);
	sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		printf("connect failed: %s\n", strerror(errno));
		return 1;
	}
	if (replay_path)
		return replay(replay_path);

	if (strcmp(auth, "wrong-secret") == 0)
		secret[0] ^= 0x80;
	if (handshake(secret, cipher, strcmp(auth, "wrong-proof") == 0,
		      &keys) < 0)
		return 1;
	if (qft_seal_init(&tx, cipher, keys.c2s, true) < 0 ||
	    qft_seal_init(&rx, cipher, keys.s2c, false) < 0)
		die("cannot key the records");

	/* The requests, each as a record: HELLO, then MKDIR NAME. */
	qbuf_init(&out, QFT_SEAL_MAX_RECORD);
	qbuf_init(&in, QFT_SEAL_MAX_RECORD);
	for (int i = 0; i < (mkdir_name ? 2 : 1); i++) {
		struct qbuf frame;
		struct qft_msg m;

		qbuf_init(&frame, QFT_SEAL_MAX_FRAME);
		qft_msg_init(&m, i == 0 ? QFT_OP_HELLO : QFT_OP_MKDIR,
			     (uint64_t)i + 1);
		if (i == 0) {
			m.magic = QFT_MAGIC;
			m.version = QFT_VERSION;
		} else {
			m.path.s = "";
			m.name.s = mkdir_name;
			m.name.len = (uint32_t)strlen(mkdir_name);
			m.mode = 0755;
		}
		if (qft_msg_encode(&frame, &m) < 0)
			die("cannot encode a request");
		qbuf_reset(&out);
		if (qft_seal_record(&tx, frame.data, frame.len, &out) < 0)
			die("cannot seal a record");
		qbuf_free(&frame);
		if (i == corrupt)
			out.data[QFT_SEAL_LEN_SIZE] ^= 0x01;
		for (int k = 0; k < (i == duplicate ? 2 : 1); k++)
			if (send_all(out.data, out.len) < 0)
				printf("send failed\n");
		nrec++;
	}
	if (record_file)
		fclose(record_file);

	/* One reply per request, each opened in turn. */
	for (int i = 0; i < nrec; i++) {
		uint8_t *p, *frame;
		size_t got, body, flen;
		struct qft_msg rep;
		int r;

		qbuf_reset(&in);
		p = qbuf_extend(&in, QFT_SEAL_LEN_SIZE);
		r = recv_all(p, QFT_SEAL_LEN_SIZE, &got);
		total += got;
		if (r == 0 && qft_seal_body_len(p, &body) == 0) {
			p = qbuf_extend(&in, body);
			r = recv_all(p, body, &got);
			total += got;
		} else if (r == 0) {
			r = -EBADMSG;
		}
		if (r == -EPIPE) {
			printf("closed after %zu bytes\n", total);
			ok = 0;
			ended = true;
			break;
		}
		if (r < 0) {
			printf("receive failed: %s\n", strerror(-r));
			ok = 0;
			break;
		}
		if (qft_open_record(&rx, in.data, in.len, &frame, &flen) < 0 ||
		    qft_msg_decode(&rep, frame, flen) < 0) {
			printf("bad reply record\n");
			ok = 0;
			break;
		}
		printf("reply %s status %u\n", qft_op_name(rep.op), rep.status);
		if (rep.status != QFT_OK)
			ok = 0;
	}
	if (!ok && !ended)
		drain(&total);
	if (ok && hold) {
		struct pollfd pf = { .fd = sock, .events = POLLIN };
		char b;

		fflush(stdout);
		if (poll(&pf, 1, 30000) == 1 && recv(sock, &b, 1, 0) <= 0)
			printf("closed\n");
		else
			printf("still open\n");
	}
	qft_seal_free(&tx);
	qft_seal_free(&rx);
	qbuf_free(&out);
	qbuf_free(&in);
	close(sock);
	return ok ? 0 : 1;
}
