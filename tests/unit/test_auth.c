// SPDX-License-Identifier: MIT
/*
 * Data-plane handshake (common/auth.c) over socketpairs with threads: the
 * happy path checked against an independent computation of the documented
 * derivations, and a man in the middle that records, replays, flips and
 * downgrades, plus peers that stall, lie about the protocol or vanish.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>

#include "auth.h"
#include "check.h"

#define T_TIMEOUT_MS 5000     /* generous: only a hang would reach it */
#define T_STALL_MS   300

static uint8_t secret_a[QFT_SECRET_SIZE], secret_b[QFT_SECRET_SIZE];

/* ---- plain blocking I/O for the test's own peers ---- */

static int write_full(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);

		if (k < 0 && errno == ENOTSOCK)
			k = write(fd, b, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* 0, or -EPIPE at EOF (with *got bytes read), or -errno. */
static int read_full(int fd, void *p, size_t n, size_t *got)
{
	uint8_t *b = p;
	size_t dummy;

	if (!got)
		got = &dummy;
	*got = 0;
	while (*got < n) {
		ssize_t k = read(fd, b + *got, n - *got);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EPIPE;
		*got += (size_t)k;
	}
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void make_pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		exit(1);
	}
}

/* ---- an independent implementation of the documented derivations ---- */

/* HKDF-SHA256 through EVP_PKEY (auth.c uses EVP_KDF). */
static int ref_hkdf(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt,
		    size_t salt_len, const uint8_t *info, size_t info_len,
		    uint8_t *out, size_t out_len)
{
	EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t len = out_len;
	int ok;

	ok = pctx && EVP_PKEY_derive_init(pctx) == 1 &&
	     EVP_PKEY_CTX_set_hkdf_md(pctx, EVP_sha256()) == 1 &&
	     (!salt || EVP_PKEY_CTX_set1_hkdf_salt(pctx, salt,
						   (int)salt_len) == 1) &&
	     EVP_PKEY_CTX_set1_hkdf_key(pctx, ikm, (int)ikm_len) == 1 &&
	     EVP_PKEY_CTX_add1_hkdf_info(pctx, info, (int)info_len) == 1 &&
	     EVP_PKEY_derive(pctx, out, &len) == 1 && len == out_len;
	EVP_PKEY_CTX_free(pctx);
	return ok ? 0 : -1;
}

static void ref_k_auth(const uint8_t *secret, uint8_t k[32])
{
	CHECK_EQ(ref_hkdf(secret, 32, NULL, 0, (const uint8_t *)"qftfs v1 auth",
			  13, k, 32), 0);
}

/* HMAC-SHA256(k, label || t) with the one-shot HMAC(). */
static void ref_proof(const uint8_t k[32], const char *label,
		      const uint8_t *t, size_t t_len, uint8_t out[32])
{
	uint8_t buf[12 + 128];
	unsigned len = 0;

	memcpy(buf, label, 12);
	memcpy(buf + 12, t, t_len);
	CHECK(HMAC(EVP_sha256(), k, 32, buf, 12 + t_len, out, &len) != NULL);
	CHECK_EQ(len, 32);
}

static void ref_keys(const uint8_t *secret, const uint8_t *nc,
		     const uint8_t *ns, struct qft_session_keys *k)
{
	uint8_t salt[64];

	memcpy(salt, nc, 32);
	memcpy(salt + 32, ns, 32);
	CHECK_EQ(ref_hkdf(secret, 32, salt, 64, (const uint8_t *)"qftfs v1 c2s",
			  12, k->c2s, 32), 0);
	CHECK_EQ(ref_hkdf(secret, 32, salt, 64, (const uint8_t *)"qftfs v1 s2c",
			  12, k->s2c, 32), 0);
}

/* RFC 5869 test case 1, so the reference itself is known to be right. */
static void test_ref_hkdf(void)
{
	static const uint8_t salt[13] = {
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
		0x0a, 0x0b, 0x0c };
	static const uint8_t info[10] = {
		0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9 };
	static const uint8_t okm[42] = {
		0x3c, 0xb2, 0x5f, 0x25, 0xfa, 0xac, 0xd5, 0x7a, 0x90, 0x43,
		0x4f, 0x64, 0xd0, 0x36, 0x2f, 0x2a, 0x2d, 0x2d, 0x0a, 0x90,
		0xcf, 0x1a, 0x5a, 0x4c, 0x5d, 0xb0, 0x2d, 0x56, 0xec, 0xc4,
		0xc5, 0xbf, 0x34, 0x00, 0x72, 0x08, 0xd5, 0xb8, 0x87, 0x18,
		0x58, 0x65 };
	uint8_t ikm[22], out[42];

	check_ctx("rfc5869");
	memset(ikm, 0x0b, sizeof(ikm));
	CHECK_EQ(ref_hkdf(ikm, sizeof(ikm), salt, sizeof(salt), info,
			  sizeof(info), out, sizeof(out)), 0);
	CHECK(memcmp(out, okm, sizeof(okm)) == 0);
	check_ctx("%s", "");
}

static void build_msg1(uint8_t m[QFT_AUTH_MSG1_SIZE], uint32_t magic,
		       uint32_t version, uint32_t cipher, uint32_t reserved)
{
	size_t i;

	qft_store32(m, magic);
	qft_store32(m + 4, version);
	qft_store32(m + 8, cipher);
	qft_store32(m + 12, reserved);
	for (i = 16; i < QFT_AUTH_MSG1_SIZE; i++)
		m[i] = (uint8_t)(rand() & 0xff);
}

/* ---- the two sides as threads ---- */

struct side {
	pthread_t th;
	int rfd, wfd;
	const uint8_t *secret;
	enum qft_cipher cipher;     /* client: asked; server: got */
	int timeout_ms;
	int r;
	int64_t elapsed_ms;
	struct qft_session_keys keys;
	bool keep_open;             /* leave fds to the test on success */
};

static void side_done(struct side *s)
{
	/* As a real caller: on failure close at once and send nothing. */
	if (s->r < 0 || !s->keep_open) {
		close(s->rfd);
		if (s->wfd != s->rfd)
			close(s->wfd);
	}
}

static void *client_main(void *arg)
{
	struct side *s = arg;
	int64_t t0 = now_ms();

	s->r = qft_auth_client_fds(s->rfd, s->wfd, s->secret, s->cipher,
				   s->timeout_ms, &s->keys);
	s->elapsed_ms = now_ms() - t0;
	side_done(s);
	return NULL;
}

static void *server_main(void *arg)
{
	struct side *s = arg;
	int64_t t0 = now_ms();

	s->cipher = (enum qft_cipher)-1;
	s->r = qft_auth_server_fds(s->rfd, s->wfd, s->secret, s->timeout_ms,
				   &s->cipher, &s->keys);
	s->elapsed_ms = now_ms() - t0;
	side_done(s);
	return NULL;
}

static void side_start_keep(struct side *s, void *(*fn)(void *), int fd,
			    const uint8_t *secret, enum qft_cipher cipher,
			    int timeout_ms, bool keep_open)
{
	memset(s, 0, sizeof(*s));
	s->keep_open = keep_open;
	s->rfd = s->wfd = fd;
	s->secret = secret;
	s->cipher = cipher;
	s->timeout_ms = timeout_ms;
	s->r = 1;
	if (pthread_create(&s->th, NULL, fn, s) != 0) {
		perror("pthread_create");
		exit(1);
	}
}

static void side_start(struct side *s, void *(*fn)(void *), int fd,
		       const uint8_t *secret, enum qft_cipher cipher,
		       int timeout_ms)
{
	side_start_keep(s, fn, fd, secret, cipher, timeout_ms, false);
}

static void side_join(struct side *s)
{
	pthread_join(s->th, NULL);
}

static bool keys_zero(const struct qft_session_keys *k)
{
	static const struct qft_session_keys zero;

	return memcmp(k, &zero, sizeof(zero)) == 0;
}

/* ---- a man in the middle ---- */

struct mitm {
	pthread_t th;
	int cfd, sfd;               /* toward the client, toward the server */
	int msg;                    /* 1..3: the message to flip, 0 none */
	size_t off;
	uint8_t mask;
	bool set_cipher;            /* rewrite the cipher id in message 1 */
	uint32_t cipher;
	/* What passed, as sent by the genuine peers. */
	uint8_t m1[QFT_AUTH_MSG1_SIZE], m2[QFT_AUTH_MSG2_SIZE];
	uint8_t m3[QFT_AUTH_MSG3_SIZE];
	int seen;                   /* messages relayed */
};

static void *mitm_main(void *arg)
{
	struct mitm *m = arg;
	uint8_t buf[QFT_AUTH_MSG2_SIZE];

	if (read_full(m->cfd, m->m1, sizeof(m->m1), NULL) < 0)
		goto out;
	memcpy(buf, m->m1, sizeof(m->m1));
	if (m->set_cipher)
		qft_store32(buf + 8, m->cipher);
	if (m->msg == 1)
		buf[m->off] ^= m->mask;
	if (write_full(m->sfd, buf, sizeof(m->m1)) < 0)
		goto out;
	m->seen = 1;

	if (read_full(m->sfd, m->m2, sizeof(m->m2), NULL) < 0)
		goto out;
	memcpy(buf, m->m2, sizeof(m->m2));
	if (m->msg == 2)
		buf[m->off] ^= m->mask;
	if (write_full(m->cfd, buf, sizeof(m->m2)) < 0)
		goto out;
	m->seen = 2;

	if (read_full(m->cfd, m->m3, sizeof(m->m3), NULL) < 0)
		goto out;
	memcpy(buf, m->m3, sizeof(m->m3));
	if (m->msg == 3)
		buf[m->off] ^= m->mask;
	if (write_full(m->sfd, buf, sizeof(m->m3)) < 0)
		goto out;
	m->seen = 3;
out:
	/* Whichever side gave up, the other sees the stream end. */
	close(m->cfd);
	close(m->sfd);
	return NULL;
}

/*
 * Runs client <-> mitm <-> server to completion.  The sides close their
 * descriptors (keep_open is off): only the outcome is looked at.
 */
static void run_mitm(struct mitm *m, const uint8_t *c_secret,
		     const uint8_t *s_secret, enum qft_cipher cipher,
		     struct side *c, struct side *s)
{
	int cs[2], ss[2];

	make_pair(cs);
	make_pair(ss);
	m->cfd = cs[1];
	m->sfd = ss[0];
	if (pthread_create(&m->th, NULL, mitm_main, m) != 0)
		exit(1);
	side_start(s, server_main, ss[1], s_secret, 0, T_TIMEOUT_MS);
	side_start(c, client_main, cs[0], c_secret, cipher, T_TIMEOUT_MS);
	side_join(c);
	side_join(s);
	pthread_join(m->th, NULL);
}

/* ---- tests ---- */

/* Both sides over a direct socketpair; the test keeps the descriptors. */
static void handshake(const uint8_t *c_secret, const uint8_t *s_secret,
		      enum qft_cipher cipher, struct side *c, struct side *s)
{
	int sv[2];

	make_pair(sv);
	side_start_keep(s, server_main, sv[1], s_secret, 0, T_TIMEOUT_MS,
			true);
	side_start_keep(c, client_main, sv[0], c_secret, cipher, T_TIMEOUT_MS,
			true);
	side_join(c);
	side_join(s);
}

/* After a handshake: one record each way over the same descriptors. */
static void exchange_records(struct side *c, struct side *s)
{
	struct qft_seal c_tx, c_rx, s_tx, s_rx;
	static const char up[] = "hello from the client";
	static const char down[] = "and back from the server";
	uint8_t rec[QFT_SEAL_OVERHEAD + 64], *frame;
	size_t len;

	CHECK_EQ(qft_seal_init(&c_tx, c->cipher, c->keys.c2s, true), 0);
	CHECK_EQ(qft_seal_init(&c_rx, c->cipher, c->keys.s2c, false), 0);
	CHECK_EQ(qft_seal_init(&s_tx, s->cipher, s->keys.s2c, true), 0);
	CHECK_EQ(qft_seal_init(&s_rx, s->cipher, s->keys.c2s, false), 0);

	memcpy(rec + QFT_SEAL_LEN_SIZE, up, sizeof(up));
	CHECK_EQ(qft_seal_in_place(&c_tx, rec, sizeof(up)), 0);
	CHECK_EQ(write_full(c->wfd, rec, QFT_SEAL_OVERHEAD + sizeof(up)), 0);
	memset(rec, 0, sizeof(rec));
	CHECK_EQ(read_full(s->rfd, rec, QFT_SEAL_OVERHEAD + sizeof(up), NULL),
		 0);
	CHECK_EQ(qft_open_record(&s_rx, rec, QFT_SEAL_OVERHEAD + sizeof(up),
				 &frame, &len), 0);
	CHECK(len == sizeof(up) && memcmp(frame, up, len) == 0);

	memcpy(rec + QFT_SEAL_LEN_SIZE, down, sizeof(down));
	CHECK_EQ(qft_seal_in_place(&s_tx, rec, sizeof(down)), 0);
	CHECK_EQ(write_full(s->wfd, rec, QFT_SEAL_OVERHEAD + sizeof(down)), 0);
	memset(rec, 0, sizeof(rec));
	CHECK_EQ(read_full(c->rfd, rec, QFT_SEAL_OVERHEAD + sizeof(down),
			   NULL), 0);
	CHECK_EQ(qft_open_record(&c_rx, rec, QFT_SEAL_OVERHEAD + sizeof(down),
				 &frame, &len), 0);
	CHECK(len == sizeof(down) && memcmp(frame, down, len) == 0);

	qft_seal_free(&c_tx);
	qft_seal_free(&c_rx);
	qft_seal_free(&s_tx);
	qft_seal_free(&s_rx);
}

static void close_sides(struct side *c, struct side *s)
{
	close(c->rfd);
	close(s->rfd);
}

static void test_success(void)
{
	static const enum qft_cipher ciphers[] = {
		QFT_CIPHER_NONE, QFT_CIPHER_AES256GCM,
		QFT_CIPHER_CHACHA20POLY1305,
	};
	struct qft_session_keys first;
	struct side c, s;
	size_t i;

	for (i = 0; i < 3; i++) {
		check_ctx("success %s", qft_cipher_name(ciphers[i]));
		handshake(secret_a, secret_a, ciphers[i], &c, &s);
		CHECK_EQ(c.r, 0);
		CHECK_EQ(s.r, 0);
		CHECK_EQ(s.cipher, ciphers[i]);
		CHECK(memcmp(&c.keys, &s.keys, sizeof(c.keys)) == 0);
		CHECK(memcmp(c.keys.c2s, c.keys.s2c, QFT_KEY_SIZE) != 0);
		CHECK(!keys_zero(&c.keys));
		if (i == 0)
			first = c.keys;
		else    /* same secret, fresh nonces: fresh keys */
			CHECK(memcmp(&first, &c.keys, sizeof(first)) != 0);
		if (c.r == 0 && s.r == 0)
			exchange_records(&c, &s);
		close_sides(&c, &s);
	}
	qft_session_keys_wipe(&first);
	CHECK(keys_zero(&first));
	check_ctx("%s", "");
}

/* Two pipes instead of a socket: the read/write fallback path. */
static void test_pipes(void)
{
	int up[2], down[2];
	struct side c, s;

	check_ctx("pipes");
	if (pipe(up) < 0 || pipe(down) < 0) {
		perror("pipe");
		exit(1);
	}
	memset(&c, 0, sizeof(c));
	memset(&s, 0, sizeof(s));
	c.rfd = down[0];
	c.wfd = up[1];
	c.secret = secret_a;
	c.cipher = QFT_CIPHER_AES256GCM;
	c.timeout_ms = T_TIMEOUT_MS;
	s.rfd = up[0];
	s.wfd = down[1];
	s.secret = secret_a;
	s.timeout_ms = T_TIMEOUT_MS;
	pthread_create(&s.th, NULL, server_main, &s);
	pthread_create(&c.th, NULL, client_main, &c);
	side_join(&c);
	side_join(&s);
	CHECK_EQ(c.r, 0);
	CHECK_EQ(s.r, 0);
	CHECK_EQ(s.cipher, QFT_CIPHER_AES256GCM);
	CHECK(memcmp(&c.keys, &s.keys, sizeof(c.keys)) == 0);
	check_ctx("%s", "");
}

/*
 * The test plays the client from the spec alone, against the real server:
 * proves the documented derivations are the implemented ones.
 */
static void test_reference_client(void)
{
	uint8_t m1[QFT_AUTH_MSG1_SIZE], m2[QFT_AUTH_MSG2_SIZE], t[88];
	uint8_t k[32], proof[32];
	struct qft_session_keys keys;
	struct side s;
	int sv[2];

	check_ctx("reference client");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
	build_msg1(m1, 0x51465444, 1, QFT_CIPHER_CHACHA20POLY1305, 0);
	CHECK_EQ(write_full(sv[0], m1, sizeof(m1)), 0);
	CHECK_EQ(read_full(sv[0], m2, sizeof(m2), NULL), 0);
	CHECK_EQ(qft_load32(m2), 0x51465444);
	CHECK_EQ(qft_load32(m2 + 4), 1);
	memcpy(t, m1, 48);
	memcpy(t + 48, m2, 40);
	ref_k_auth(secret_a, k);
	ref_proof(k, "qftfs-server", t, sizeof(t), proof);
	CHECK(memcmp(proof, m2 + 40, 32) == 0);
	ref_proof(k, "qftfs-client", t, sizeof(t), proof);
	CHECK_EQ(write_full(sv[0], proof, sizeof(proof)), 0);
	side_join(&s);
	CHECK_EQ(s.r, 0);
	CHECK_EQ(s.cipher, QFT_CIPHER_CHACHA20POLY1305);
	ref_keys(secret_a, m1 + 16, m2 + 8, &keys);
	CHECK(memcmp(&keys, &s.keys, sizeof(keys)) == 0);
	close(sv[0]);
	check_ctx("%s", "");
}

/* And the reverse: the test plays the server against the real client. */
static void test_reference_server(void)
{
	uint8_t m1[QFT_AUTH_MSG1_SIZE], m2[QFT_AUTH_MSG2_SIZE], t[88];
	uint8_t m3[QFT_AUTH_MSG3_SIZE], k[32], proof[32];
	struct qft_session_keys keys;
	struct side c;
	size_t i;
	int sv[2];

	check_ctx("reference server");
	make_pair(sv);
	side_start(&c, client_main, sv[0], secret_a, QFT_CIPHER_NONE,
		   T_TIMEOUT_MS);
	CHECK_EQ(read_full(sv[1], m1, sizeof(m1), NULL), 0);
	CHECK_EQ(qft_load32(m1), 0x51465444);
	CHECK_EQ(qft_load32(m1 + 4), 1);
	CHECK_EQ(qft_load32(m1 + 8), QFT_CIPHER_NONE);
	CHECK_EQ(qft_load32(m1 + 12), 0);
	qft_store32(m2, 0x51465444);
	qft_store32(m2 + 4, 1);
	for (i = 8; i < 40; i++)
		m2[i] = (uint8_t)rand();
	memcpy(t, m1, 48);
	memcpy(t + 48, m2, 40);
	ref_k_auth(secret_a, k);
	ref_proof(k, "qftfs-server", t, sizeof(t), m2 + 40);
	CHECK_EQ(write_full(sv[1], m2, sizeof(m2)), 0);
	CHECK_EQ(read_full(sv[1], m3, sizeof(m3), NULL), 0);
	ref_proof(k, "qftfs-client", t, sizeof(t), proof);
	CHECK(memcmp(proof, m3, 32) == 0);
	side_join(&c);
	CHECK_EQ(c.r, 0);
	ref_keys(secret_a, m1 + 16, m2 + 8, &keys);
	CHECK(memcmp(&keys, &c.keys, sizeof(keys)) == 0);
	close(sv[1]);
	check_ctx("%s", "");
}

/*
 * The resume key is HKDF(S, "qftfs v1 resume") by the reference, differs
 * from the handshake's K_auth and from S, and a handshake under it works
 * while one that mixes S and K_r fails: a resume proof made with S (or a
 * first connection made with K_r) is refused.
 */
static void test_resume_key(void)
{
	uint8_t kr[QFT_SECRET_SIZE], ref[32], ka[32];
	struct side c, s;

	check_ctx("resume key");
	CHECK_EQ(qft_auth_resume_key(secret_a, kr), 0);
	CHECK_EQ(ref_hkdf(secret_a, 32, NULL, 0,
			  (const uint8_t *)"qftfs v1 resume", 15, ref, 32), 0);
	CHECK(memcmp(kr, ref, sizeof(kr)) == 0);
	ref_k_auth(secret_a, ka);
	CHECK(memcmp(kr, ka, sizeof(kr)) != 0);
	CHECK(memcmp(kr, secret_a, sizeof(kr)) != 0);
	handshake(kr, kr, QFT_CIPHER_AES256GCM, &c, &s);
	CHECK_EQ(c.r, 0);
	CHECK_EQ(s.r, 0);
	check_ctx("resume key against the secret");
	handshake(secret_a, kr, QFT_CIPHER_AES256GCM, &c, &s);
	CHECK_EQ(c.r, -EACCES);
	CHECK(keys_zero(&s.keys));
	check_ctx("%s", "");
}

static void test_wrong_secret(void)
{
	uint8_t m1[QFT_AUTH_MSG1_SIZE], m2[QFT_AUTH_MSG2_SIZE], t[88];
	uint8_t k[32], proof[32], byte;
	struct side c, s;
	size_t got;
	int sv[2];

	/* The client checks first: it refuses and sends no proof, so the
	 * server sees the stream end and never accepts. */
	check_ctx("wrong secret");
	handshake(secret_a, secret_b, QFT_CIPHER_AES256GCM, &c, &s);
	CHECK_EQ(c.r, -EACCES);
	CHECK_EQ(s.r, -EPIPE);
	CHECK(keys_zero(&c.keys));
	CHECK(keys_zero(&s.keys));

	/* A client that skips that check and answers with a proof made
	 * from the wrong secret: the server refuses with -EACCES and sends
	 * nothing after message 2. */
	check_ctx("wrong secret, blind client");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
	build_msg1(m1, QFT_AUTH_MAGIC, 1, QFT_CIPHER_AES256GCM, 0);
	CHECK_EQ(write_full(sv[0], m1, sizeof(m1)), 0);
	CHECK_EQ(read_full(sv[0], m2, sizeof(m2), NULL), 0);
	memcpy(t, m1, 48);
	memcpy(t + 48, m2, 40);
	ref_k_auth(secret_b, k);
	ref_proof(k, "qftfs-client", t, sizeof(t), proof);
	CHECK_EQ(write_full(sv[0], proof, sizeof(proof)), 0);
	side_join(&s);
	CHECK_EQ(s.r, -EACCES);
	CHECK(keys_zero(&s.keys));
	CHECK_EQ(read_full(sv[0], &byte, 1, &got), -EPIPE);
	CHECK_EQ(got, 0);
	close(sv[0]);

	/* The server's proof is not the client's: reflecting it fails. */
	check_ctx("reflected proof");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
	CHECK_EQ(write_full(sv[0], m1, sizeof(m1)), 0);
	CHECK_EQ(read_full(sv[0], m2, sizeof(m2), NULL), 0);
	CHECK_EQ(write_full(sv[0], m2 + 40, 32), 0);
	side_join(&s);
	CHECK_EQ(s.r, -EACCES);
	close(sv[0]);
	check_ctx("%s", "");
}

static void test_replay(void)
{
	struct mitm m;
	struct side c, s;
	uint8_t m1[QFT_AUTH_MSG1_SIZE], m2[QFT_AUTH_MSG2_SIZE];
	int sv[2];

	/* Record a genuine session. */
	check_ctx("replay: record");
	memset(&m, 0, sizeof(m));
	run_mitm(&m, secret_a, secret_a, QFT_CIPHER_AES256GCM, &c, &s);
	CHECK_EQ(m.seen, 3);
	CHECK_EQ(c.r, 0);
	CHECK_EQ(s.r, 0);

	/* Replay its messages 1 and 3 to a fresh server. */
	check_ctx("replay: to server");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
	CHECK_EQ(write_full(sv[0], m.m1, sizeof(m.m1)), 0);
	CHECK_EQ(read_full(sv[0], m2, sizeof(m2), NULL), 0);
	CHECK(memcmp(m2 + 8, m.m2 + 8, 32) != 0);   /* a fresh Ns */
	CHECK_EQ(write_full(sv[0], m.m3, sizeof(m.m3)), 0);
	side_join(&s);
	CHECK_EQ(s.r, -EACCES);
	close(sv[0]);

	/* Replay its message 2 to a fresh client. */
	check_ctx("replay: to client");
	make_pair(sv);
	side_start(&c, client_main, sv[0], secret_a, QFT_CIPHER_AES256GCM,
		   T_TIMEOUT_MS);
	CHECK_EQ(read_full(sv[1], m1, sizeof(m1), NULL), 0);
	CHECK(memcmp(m1 + 16, m.m1 + 16, 32) != 0);  /* a fresh Nc */
	CHECK_EQ(write_full(sv[1], m.m2, sizeof(m.m2)), 0);
	side_join(&c);
	CHECK_EQ(c.r, -EACCES);
	close(sv[1]);
	check_ctx("%s", "");
}

static void test_flips(void)
{
	static const size_t sizes[] = {
		0, QFT_AUTH_MSG1_SIZE, QFT_AUTH_MSG2_SIZE, QFT_AUTH_MSG3_SIZE,
	};
	static const uint8_t masks[] = { 0x01, 0x80 };
	struct mitm m;
	struct side c, s;
	size_t off, k;
	int msg;

	for (msg = 1; msg <= 3; msg++) {
		for (off = 0; off < sizes[msg]; off++) {
			for (k = 0; k < sizeof(masks); k++) {
				bool downgrade;

				check_ctx("flip msg %d off %zu mask %#x", msg,
					  off, masks[k]);
				memset(&m, 0, sizeof(m));
				m.msg = msg;
				m.off = off;
				m.mask = masks[k];
				run_mitm(&m, secret_a, secret_a,
					 QFT_CIPHER_AES256GCM, &c, &s);
				/* The one thing that must never happen. */
				CHECK(s.r != 0);
				CHECK(keys_zero(&s.keys));
				/* cipher 1 -> 0 is valid: a downgrade. */
				downgrade = msg == 1 && off == 11 &&
					    masks[k] == 0x01;
				if (msg == 1 && off < 16 && !downgrade) {
					CHECK_EQ(s.r, -EPROTO);
					CHECK_EQ(c.r, -EPIPE);
				} else if (msg == 1) {
					CHECK_EQ(c.r, -EACCES);
					CHECK_EQ(s.r, -EPIPE);
				} else if (msg == 2) {
					CHECK_EQ(c.r, off < 8 ? -EPROTO :
						 -EACCES);
					CHECK_EQ(s.r, -EPIPE);
				} else {
					/* The client cannot know. */
					CHECK_EQ(c.r, 0);
					CHECK_EQ(s.r, -EACCES);
				}
			}
		}
	}
	check_ctx("%s", "");
}

static void test_downgrade(void)
{
	static const struct { enum qft_cipher asked; uint32_t forced; } cases[] = {
		{ QFT_CIPHER_AES256GCM, QFT_CIPHER_NONE },
		{ QFT_CIPHER_CHACHA20POLY1305, QFT_CIPHER_NONE },
		{ QFT_CIPHER_CHACHA20POLY1305, QFT_CIPHER_AES256GCM },
		{ QFT_CIPHER_NONE, QFT_CIPHER_AES256GCM },
	};
	struct mitm m;
	struct side c, s;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_ctx("downgrade %s -> %u", qft_cipher_name(cases[i].asked),
			  cases[i].forced);
		memset(&m, 0, sizeof(m));
		m.set_cipher = true;
		m.cipher = cases[i].forced;
		run_mitm(&m, secret_a, secret_a, cases[i].asked, &c, &s);
		/* The server took the forged id and answered; the client
		 * saw its proof did not cover what it asked for. */
		CHECK_EQ(m.seen, 2);
		CHECK_EQ(c.r, -EACCES);
		CHECK_EQ(s.r, -EPIPE);
		CHECK(keys_zero(&c.keys));
	}
	check_ctx("%s", "");
}

/* A stalling peer: -ETIMEDOUT within the deadline, whatever it sends. */
static void test_stall(void)
{
	uint8_t m1[QFT_AUTH_MSG1_SIZE], m2[QFT_AUTH_MSG2_SIZE];
	struct side c, s;
	int64_t t0, spent;
	size_t i;
	int sv[2];

	check_ctx("stall: silent client");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_STALL_MS);
	side_join(&s);
	CHECK_EQ(s.r, -ETIMEDOUT);
	CHECK(s.elapsed_ms >= T_STALL_MS - 5);
	CHECK(s.elapsed_ms < T_STALL_MS + 700);
	close(sv[0]);

	/* One byte every 50 ms: the deadline is for the whole handshake,
	 * not per read, so trickling does not extend it. */
	check_ctx("stall: trickling client");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_STALL_MS);
	build_msg1(m1, QFT_AUTH_MAGIC, 1, QFT_CIPHER_AES256GCM, 0);
	t0 = now_ms();
	for (i = 0; i < sizeof(m1) && now_ms() - t0 < 3 * T_STALL_MS; i++) {
		if (write_full(sv[0], m1 + i, 1) < 0)
			break;
		sleep_ms(50);
	}
	side_join(&s);
	CHECK_EQ(s.r, -ETIMEDOUT);
	CHECK(s.elapsed_ms < T_STALL_MS + 700);
	close(sv[0]);

	/* A valid message 1, then silence instead of message 3. */
	check_ctx("stall: no proof");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_STALL_MS);
	CHECK_EQ(write_full(sv[0], m1, sizeof(m1)), 0);
	CHECK_EQ(read_full(sv[0], m2, sizeof(m2), NULL), 0);
	side_join(&s);
	CHECK_EQ(s.r, -ETIMEDOUT);
	CHECK(s.elapsed_ms < T_STALL_MS + 700);
	close(sv[0]);

	/* The client has a deadline too. */
	check_ctx("stall: silent server");
	make_pair(sv);
	t0 = now_ms();
	side_start(&c, client_main, sv[0], secret_a, QFT_CIPHER_AES256GCM,
		   T_STALL_MS);
	side_join(&c);
	spent = now_ms() - t0;
	CHECK_EQ(c.r, -ETIMEDOUT);
	CHECK(spent >= T_STALL_MS - 5 && spent < T_STALL_MS + 700);
	close(sv[1]);
	check_ctx("%s", "");
}

/* Bad headers: -EPROTO, and the server answers nothing at all. */
static void test_bad_header(void)
{
	static const struct { uint32_t magic, version, cipher, reserved; }
	cases[] = {
		{ 0x51465446, 1, 1, 0 },   /* the frame magic "QFTF" */
		{ 0, 0, 0, 0 },
		{ QFT_AUTH_MAGIC, 0, 1, 0 },
		{ QFT_AUTH_MAGIC, 2, 1, 0 },
		{ QFT_AUTH_MAGIC, 1, 3, 0 },
		{ QFT_AUTH_MAGIC, 1, 0xffffffff, 0 },
		{ QFT_AUTH_MAGIC, 1, 1, 1 },
	};
	uint8_t m1[QFT_AUTH_MSG1_SIZE], byte;
	struct side s, c;
	size_t i, got;
	int sv[2];

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_ctx("bad header %zu", i);
		make_pair(sv);
		side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
		build_msg1(m1, cases[i].magic, cases[i].version,
			   cases[i].cipher, cases[i].reserved);
		CHECK_EQ(write_full(sv[0], m1, sizeof(m1)), 0);
		side_join(&s);
		CHECK_EQ(s.r, -EPROTO);
		CHECK_EQ(read_full(sv[0], &byte, 1, &got), -EPIPE);
		CHECK_EQ(got, 0);
		close(sv[0]);
	}

	/* A server speaking another version: the client refuses. */
	check_ctx("bad header: server version");
	make_pair(sv);
	side_start(&c, client_main, sv[0], secret_a, QFT_CIPHER_NONE,
		   T_TIMEOUT_MS);
	CHECK_EQ(read_full(sv[1], m1, sizeof(m1), NULL), 0);
	{
		uint8_t m2[QFT_AUTH_MSG2_SIZE] = { 0 };

		qft_store32(m2, QFT_AUTH_MAGIC);
		qft_store32(m2 + 4, 2);
		CHECK_EQ(write_full(sv[1], m2, sizeof(m2)), 0);
	}
	side_join(&c);
	CHECK_EQ(c.r, -EPROTO);
	/* The client sent nothing after message 1. */
	CHECK_EQ(read_full(sv[1], &byte, 1, &got), -EPIPE);
	close(sv[1]);

	/* A cipher the client does not know is refused before sending. */
	check_ctx("bad cipher argument");
	make_pair(sv);
	side_start(&c, client_main, sv[0], secret_a, QFT_CIPHER__COUNT,
		   T_TIMEOUT_MS);
	side_join(&c);
	CHECK_EQ(c.r, -EINVAL);
	CHECK_EQ(read_full(sv[1], &byte, 1, &got), -EPIPE);
	CHECK_EQ(got, 0);
	close(sv[1]);
	check_ctx("%s", "");
}

/* A peer that goes away: -EPIPE between messages, -EIO inside one. */
static void test_cut(void)
{
	uint8_t m1[QFT_AUTH_MSG1_SIZE], m2[QFT_AUTH_MSG2_SIZE];
	struct side s, c;
	int sv[2];

	check_ctx("cut: before message 1");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
	close(sv[0]);
	side_join(&s);
	CHECK_EQ(s.r, -EPIPE);

	check_ctx("cut: inside message 1");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
	build_msg1(m1, QFT_AUTH_MAGIC, 1, 1, 0);
	CHECK_EQ(write_full(sv[0], m1, 20), 0);
	close(sv[0]);
	side_join(&s);
	CHECK_EQ(s.r, -EIO);

	check_ctx("cut: inside message 3");
	make_pair(sv);
	side_start(&s, server_main, sv[1], secret_a, 0, T_TIMEOUT_MS);
	CHECK_EQ(write_full(sv[0], m1, sizeof(m1)), 0);
	CHECK_EQ(read_full(sv[0], m2, sizeof(m2), NULL), 0);
	CHECK_EQ(write_full(sv[0], m2, 5), 0);
	close(sv[0]);
	side_join(&s);
	CHECK_EQ(s.r, -EIO);

	check_ctx("cut: server gone");
	make_pair(sv);
	close(sv[1]);
	side_start(&c, client_main, sv[0], secret_a, 1, T_TIMEOUT_MS);
	side_join(&c);
	CHECK(c.r == -EPIPE);
	check_ctx("%s", "");
}

int main(void)
{
	size_t i;

	/* As the real programs must: a closed pipe is an error, not death. */
	signal(SIGPIPE, SIG_IGN);
	srand(12345);
	for (i = 0; i < QFT_SECRET_SIZE; i++) {
		secret_a[i] = (uint8_t)(i * 17 + 1);
		secret_b[i] = (uint8_t)(i * 17 + 1);
	}
	secret_b[31] ^= 1;   /* differs in one bit only */

	test_ref_hkdf();
	test_success();
	test_pipes();
	test_reference_client();
	test_reference_server();
	test_wrong_secret();
	test_resume_key();
	test_replay();
	test_flips();
	test_downgrade();
	test_stall();
	test_bad_header();
	test_cut();
	return check_exit("test_auth");
}
