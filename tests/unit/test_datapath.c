// SPDX-License-Identifier: MIT
/*
 * Unit test of the copy-free data path: qft_msg_encode_head, qft_seal_iov
 * and qft_open_split, qft_chan_sendv (sealed with each cipher, in clear
 * and plain, with and without lz4), records that arrive split at every
 * byte boundary, one record buffer reused by racing senders, and the
 * buffer pool's back-pressure (common/pool.h).  alarm() bounds the run, so
 * a deadlock fails the test instead of hanging it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "chan.h"
#include "check.h"
#include "fixture.h"
#include "msg.h"
#include "pool.h"
#include "protocol.h"
#include "seal.h"

#define RECV_LIMIT QFT_CHAN_RECV_LIMIT

/* The ways a channel can carry frames: plain, or sealed with a cipher. */
enum mode { M_PLAIN, M_NONE, M_AES, M_CHACHA, M__COUNT };

static const char *const mode_names[M__COUNT] = {
	"plain", "cipher none", "aes256-gcm", "chacha20-poly1305",
};

/* Room for a full WRITE starting a few bytes in (each sender's skew). */
static uint8_t data[QFT_MAX_DATA + 64];

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A pair of seals (sender's, receiver's) for `m`; false for M_PLAIN. */
static bool seals(enum mode m, struct qft_seal *tx, struct qft_seal *rx)
{
	static const enum qft_cipher ciphers[M__COUNT] = {
		[M_NONE] = QFT_CIPHER_NONE,
		[M_AES] = QFT_CIPHER_AES256GCM,
		[M_CHACHA] = QFT_CIPHER_CHACHA20POLY1305,
	};
	uint8_t key[QFT_KEY_SIZE];

	if (m == M_PLAIN)
		return false;
	for (unsigned i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i * 7 + m);
	CHECK_EQ(qft_seal_init(tx, ciphers[m], key, true), 0);
	CHECK_EQ(qft_seal_init(rx, ciphers[m], key, false), 0);
	return true;
}

/* A WRITE of data[skew..skew+n) on handle `who`, id `id`. */
static void write_msg(struct qft_msg *m, uint64_t who, uint64_t id,
		      size_t skew, size_t n)
{
	/* Handles and ids start at 1 on the wire. */
	qft_msg_init(m, QFT_OP_WRITE, id + 1);
	m->handle = who + 1;
	m->offset = id * 4096;
	m->data.p = data + skew;
	m->data.len = (uint32_t)n;
}

/* The head and tail of a frame equal its whole encoding. */
static void test_encode_head(void)
{
	struct qbuf whole, head;
	struct qft_blob tail;
	struct qft_msg m;

	qbuf_init(&whole, RECV_LIMIT);
	qbuf_init(&head, RECV_LIMIT);
	for (size_t n = 0; n <= QFT_MAX_DATA; n = n ? n * 4 : 1) {
		check_ctx("WRITE of %zu", n);
		write_msg(&m, 3, 5, 1, n);
		qbuf_reset(&whole);
		qbuf_reset(&head);
		CHECK_EQ(qft_msg_encode(&whole, &m), 0);
		CHECK_EQ(qft_msg_encode_head(&head, &m, &tail), 0);
		CHECK_EQ(tail.len, n);
		CHECK(tail.p == m.data.p);
		CHECK_EQ(head.len + tail.len, whole.len);
		CHECK(memcmp(head.data, whole.data, head.len) == 0);
		CHECK(n == 0 || memcmp(whole.data + head.len, tail.p, n) == 0);
	}
	/* A READ reply ends in its data too; a LSTAT has none. */
	qft_msg_init(&m, QFT_OP_READ, 9);
	m.flags = QFT_F_REPLY;
	m.data.p = data;
	m.data.len = 777;
	qbuf_reset(&whole);
	qbuf_reset(&head);
	CHECK_EQ(qft_msg_encode(&whole, &m), 0);
	CHECK_EQ(qft_msg_encode_head(&head, &m, &tail), 0);
	CHECK_EQ(tail.len, 777);
	CHECK_EQ(head.len + tail.len, whole.len);
	qft_msg_init(&m, QFT_OP_LSTAT, 10);
	m.path.s = "a/b";
	m.path.len = 3;
	qbuf_reset(&whole);
	qbuf_reset(&head);
	CHECK_EQ(qft_msg_encode(&whole, &m), 0);
	CHECK_EQ(qft_msg_encode_head(&head, &m, &tail), 0);
	CHECK_EQ(tail.len, 0);
	CHECK(tail.p == NULL);
	CHECK_EQ(head.len, whole.len);
	CHECK(memcmp(head.data, whole.data, head.len) == 0);
	/* Too big: refused, nothing left behind. */
	write_msg(&m, 3, 5, 0, QFT_MAX_DATA);
	m.data.len = QFT_MAX_PAYLOAD;
	qbuf_reset(&head);
	CHECK_EQ(qft_msg_encode_head(&head, &m, &tail), -EMSGSIZE);
	CHECK_EQ(head.len, 0);
	CHECK_EQ(tail.len, 0);
	check_ctx("%s", "");
	qbuf_free(&whole);
	qbuf_free(&head);
}

/*
 * Sealing from pieces makes byte for byte the record that sealing the
 * whole frame makes, for every cipher and any cut into pieces; and
 * qft_open_split opens it with the length field apart.
 */
static void test_seal_iov(void)
{
	static uint8_t rec[QFT_SEAL_OVERHEAD + 70000], want_rec[sizeof(rec)];
	const size_t n = 70000;

	for (enum mode m = M_NONE; m < M__COUNT; m++) {
		struct qft_seal tx, tx2, rx, rx2;
		struct qbuf want;
		size_t cuts[] = { 0, 1, 16, 4095, 40000, n - 1, n };

		seals(m, &tx, &rx);
		seals(m, &tx2, &rx2);
		qbuf_init(&want, sizeof(want_rec));
		for (unsigned a = 0; a < sizeof(cuts) / sizeof(cuts[0]); a++) {
			struct iovec iov[3] = {
				{ data, cuts[a] },
				{ data + cuts[a], (n - cuts[a]) / 2 },
				{ data + cuts[a] + (n - cuts[a]) / 2,
				  n - cuts[a] - (n - cuts[a]) / 2 },
			};
			uint8_t lenf[QFT_SEAL_LEN_SIZE], tag[QFT_SEAL_TAG_SIZE];
			size_t flen = 0;

			check_ctx("%s, cut at %zu", mode_names[m], cuts[a]);
			qbuf_reset(&want);
			CHECK_EQ(qft_seal_record(&tx2, data, n, &want), 0);
			CHECK_EQ(qft_seal_iov(&tx, iov, 3, lenf,
					      m == M_NONE ? NULL : rec + 4,
					      tag), 0);
			if (m == M_NONE)
				memcpy(rec + 4, data, n);
			memcpy(rec, lenf, 4);
			memcpy(rec + 4 + n, tag, sizeof(tag));
			CHECK_EQ(want.len, n + QFT_SEAL_OVERHEAD);
			CHECK(memcmp(want.data, rec, want.len) == 0);
			memcpy(want_rec, rec, want.len);
			CHECK_EQ(qft_open_split(&rx, lenf, rec + 4,
						n + QFT_SEAL_TAG_SIZE, &flen), 0);
			CHECK_EQ(flen, n);
			CHECK(memcmp(rec + 4, data, n) == 0);
			/* The twin opens the whole record the old way. */
			{
				uint8_t *f;
				size_t fl;

				CHECK_EQ(qft_open_record(&rx2, want_rec,
							 want.len, &f, &fl), 0);
				CHECK_EQ(fl, n);
			}
		}
		/* A body where the cipher encrypts is required. */
		{
			struct iovec v = { data, 10 };
			uint8_t lenf[4], tag[16];
			size_t flen;

			if (m != M_NONE)
				CHECK_EQ(qft_seal_iov(&tx, &v, 1, lenf, NULL,
						      tag), -EINVAL);
			/* A wrong length field fails and poisons. */
			CHECK_EQ(qft_seal_iov(&tx, &v, 1, lenf, rec + 4, tag), 0);
			lenf[3] ^= 1;
			CHECK_EQ(qft_open_split(&rx, lenf, rec + 4, 26, &flen),
				 -EBADMSG);
		}
		check_ctx("%s", "");
		qbuf_free(&want);
		qft_seal_free(&tx);
		qft_seal_free(&tx2);
		qft_seal_free(&rx);
		qft_seal_free(&rx2);
	}
}

struct receiver {
	struct qft_chan *ch;
	/* what to expect: frames from `senders` senders, `per` each, the
	 * i-th of sender s a WRITE of size_of(s, i) bytes */
	unsigned senders, per;
	size_t (*size_of)(unsigned s, unsigned i);
	int bad;            /* frames that were not what was sent */
	unsigned got;
	int end;            /* qft_chan_recv's result after the last one */
	volatile bool done; /* the receiver stopped */
};

/* Every frame must be a WRITE whose data is data[skew..) with the skew,
 * the length and the order of its sender. */
static void *receive_main(void *arg)
{
	struct receiver *rc = arg;
	unsigned next[16] = { 0 };
	struct qbuf in;
	struct qft_hdr h;
	int r;

	qbuf_init(&in, RECV_LIMIT);
	while ((r = qft_chan_recv(rc->ch, &in, &h)) == 0) {
		struct qft_msg m;
		unsigned s, i;

		if (qft_msg_decode(&m, in.data, in.len) < 0 ||
		    m.op != QFT_OP_WRITE || m.handle < 1 ||
		    m.handle > rc->senders) {
			rc->bad++;
			continue;
		}
		s = (unsigned)m.handle - 1;
		i = next[s]++;
		if (m.id != i + 1 || m.data.len != rc->size_of(s, i) ||
		    memcmp(m.data.p, data + s, m.data.len) != 0)
			rc->bad++;
		rc->got++;
	}
	rc->end = r;
	qbuf_free(&in);
	rc->done = true;
	return NULL;
}

static size_t size_mixed(unsigned s, unsigned i)
{
	/* The first is the largest: it sizes the record buffer. */
	static const size_t sizes[] = { QFT_MAX_DATA, 0, 1, 100, 4095, 4096,
					65536, QFT_MAX_DATA - 7 };

	return sizes[(s + i) % (sizeof(sizes) / sizeof(sizes[0]))];
}

/* Sends the i-th WRITE of sender s as head + data, the data itself in
 * one or two pieces. */
static int send_one(struct qft_chan *ch, unsigned s, unsigned i,
		    size_t (*size_of)(unsigned, unsigned))
{
	uint8_t stack[128];
	struct qbuf head = { .data = stack, .cap = sizeof(stack),
			     .limit = sizeof(stack) };
	struct qft_blob tail;
	struct qft_msg m;
	struct iovec iov[3];
	int n = 1, r;

	write_msg(&m, s, i, s, size_of(s, i));
	if ((r = qft_msg_encode_head(&head, &m, &tail)) < 0)
		return r;
	iov[0] = (struct iovec){ head.data, head.len };
	if (tail.len > 1 && (i & 1)) {
		iov[n++] = (struct iovec){ (void *)tail.p, tail.len / 3 };
		iov[n++] = (struct iovec){ (void *)(tail.p + tail.len / 3),
					   tail.len - tail.len / 3 };
	} else if (tail.len) {
		iov[n++] = (struct iovec){ (void *)tail.p, tail.len };
	}
	return qft_chan_sendv(ch, iov, n);
}

struct sender {
	struct qft_chan *ch;
	unsigned who, per;
	int err;
};

static void *send_main(void *arg)
{
	struct sender *sd = arg;

	for (unsigned i = 0; i < sd->per && !sd->err; i++)
		sd->err = send_one(sd->ch, sd->who, i, size_mixed);
	return NULL;
}

/*
 * Racing senders share one channel and so one record buffer: every frame
 * arrives whole and in its sender's order, for every mode, lz4 on and
 * off; the record buffer is allocated once and then reused.
 */
static void test_concurrent_senders(void)
{
	enum { SENDERS = 4, PER = 40 };

	for (enum mode m = M_PLAIN; m < M__COUNT; m++) {
		for (int z = 0; z < 2; z++) {
			struct qft_seal tx, rx;
			struct qft_chan a, b;
			struct receiver rc = { .ch = &b, .senders = SENDERS,
					       .per = PER,
					       .size_of = size_mixed };
			struct sender sd[SENDERS];
			pthread_t rt, st[SENDERS];
			bool sealed = seals(m, &tx, &rx);
			uint8_t *first = NULL;
			size_t cap = 0;
			int sv[2];

			check_ctx("%s, lz4 %s", mode_names[m], z ? "on" : "off");
			make_pair(sv);
			CHECK_EQ(qft_chan_init(&a, sv[0], sv[0]), 0);
			CHECK_EQ(qft_chan_init(&b, sv[1], sv[1]), 0);
			if (sealed) {
				qft_chan_set_seal(&a, &tx, NULL);
				qft_chan_set_seal(&b, NULL, &rx);
			}
			if (z) {
				qft_chan_set_lz4(&a, QFT_LZ4_ALWAYS);
				qft_chan_set_lz4(&b, QFT_LZ4_NONE);
			}
			start(&rt, receive_main, &rc);
			/* One frame first, to see which buffer it used. */
			CHECK_EQ(send_one(&a, 0, 0, size_mixed), 0);
			first = a.sbuf.data;
			cap = a.sbuf.cap;
			for (unsigned s = 0; s < SENDERS; s++) {
				sd[s] = (struct sender){ .ch = &a, .who = s,
							 .per = PER };
				if (s == 0)
					sd[s].per = 0;
				start(&st[s], send_main, &sd[s]);
			}
			for (unsigned s = 0; s < SENDERS; s++) {
				pthread_join(st[s], NULL);
				CHECK_EQ(sd[s].err, 0);
			}
			/* Sender 0 sent only its frame 0: make the count
			 * come out as PER each by sending the rest here. */
			for (unsigned i = 1; i < PER; i++)
				CHECK_EQ(send_one(&a, 0, i, size_mixed), 0);
			shutdown(sv[0], SHUT_WR);
			pthread_join(rt, NULL);
			CHECK_EQ(rc.bad, 0);
			CHECK_EQ(rc.got, SENDERS * PER);
			CHECK_EQ(rc.end, -EPIPE);
			if (m == M_AES || m == M_CHACHA || z) {
				/* Encrypted or compressed frames were built
				 * in the one buffer, never a new one... */
				CHECK(first != NULL);
				CHECK(a.sbuf.data == first);
				CHECK_EQ(a.sbuf.cap, cap);
			} else {
				/* ... and plain or clear ones in none. */
				CHECK(a.sbuf.data == NULL);
			}
			qft_chan_destroy(&a);
			qft_chan_destroy(&b);
			if (sealed) {
				qft_seal_free(&tx);
				qft_seal_free(&rx);
			}
		}
	}
	check_ctx("%s", "");
}

/* The wire bytes of frames sent through a channel in mode m. */
static void wire_of(enum mode m, bool lz4, struct qft_seal *tx,
		    size_t (*size_of)(unsigned, unsigned), unsigned count,
		    struct qbuf *w)
{
	struct qft_chan a;
	int sv[2];

	make_pair(sv);
	CHECK_EQ(qft_chan_init(&a, sv[0], sv[0]), 0);
	if (m != M_PLAIN)
		qft_chan_set_seal(&a, tx, NULL);
	if (lz4)
		qft_chan_set_lz4(&a, QFT_LZ4_ALWAYS);
	qbuf_reset(w);
	for (unsigned i = 0; i < count; i++) {
		uint8_t buf[65536];
		ssize_t n;
		int avail = 0;

		CHECK_EQ(send_one(&a, 0, i, size_of), 0);
		/* Small frames: they fit the socket buffer. */
		while (ioctl(sv[1], FIONREAD, &avail) == 0 && avail > 0 &&
		       (n = read(sv[1], buf, sizeof(buf))) > 0)
			CHECK_EQ(qbuf_put_bytes(w, buf, (size_t)n), 0);
	}
	qft_chan_destroy(&a);
	close(sv[1]);
}

static size_t size_small(unsigned s, unsigned i)
{
	(void)s;
	/* The second is long enough to be compressed. */
	return i == 1 ? 4200 : 23;
}

/* Waits until the receiver took every byte written to the pipe (or
 * stopped, which the checks after it report). */
static void drained(int rfd, const struct receiver *rc)
{
	int avail;

	/* Once the pipe is empty the receiver has read the first part,
	 * so whatever comes next arrives in a read of its own. */
	while (ioctl(rfd, FIONREAD, &avail) == 0 && avail > 0 && !rc->done)
		sched_yield();
}

/*
 * A receiver handed three frames split at every byte boundary: the
 * first `k` bytes, then (once it has taken them all, so they arrive in
 * separate reads) the rest.  Every frame must arrive whole; a stream
 * that ends after k bytes must fail with -EIO (or -EPIPE at a frame
 * boundary), never hand on a short frame.
 */
static void test_split_reads(void)
{
	struct qbuf w;

	qbuf_init(&w, 1u << 20);
	for (enum mode m = M_PLAIN; m < M__COUNT; m++) {
		for (int z = 0; z < 2; z++) {
			struct qft_seal tx, rx;
			bool sealed = seals(m, &tx, &rx);

			wire_of(m, z, &tx, size_small, 3, &w);
			check_ctx("%s, lz4 %s: %zu bytes", mode_names[m],
				  z ? "on" : "off", w.len);
			if (sealed) {
				qft_seal_free(&tx);
				qft_seal_free(&rx);
			}
			for (size_t k = 1; k < w.len; k++) {
				struct receiver rc = {
					.senders = 1, .per = 3,
					.size_of = size_small };
				struct qft_seal tx2, rx2;
				struct qft_chan b;
				pthread_t rt;
				int pv[2];

				/* Fresh keys: each run starts at record 0. */
				seals(m, &tx2, &rx2);
				CHECK_EQ(pipe(pv), 0);
				CHECK_EQ(qft_chan_init(&b, pv[0], -1), 0);
				if (sealed)
					qft_chan_set_seal(&b, NULL, &rx2);
				if (z)
					qft_chan_set_lz4(&b, QFT_LZ4_NONE);
				rc.ch = &b;
				start(&rt, receive_main, &rc);
				CHECK_EQ(write(pv[1], w.data, k), (ssize_t)k);
				/* Every 7th split also tries a cut stream;
				 * the rest are complete. */
				if (k % 7 == 0) {
					close(pv[1]);
					pthread_join(rt, NULL);
					CHECK_EQ(rc.bad, 0);
					CHECK(rc.got < 3);
					CHECK(rc.end == -EIO ||
					      rc.end == -EPIPE);
				} else {
					drained(pv[0], &rc);
					CHECK_EQ(write(pv[1], w.data + k,
						       w.len - k),
						 (ssize_t)(w.len - k));
					close(pv[1]);
					pthread_join(rt, NULL);
					CHECK_EQ(rc.bad, 0);
					CHECK_EQ(rc.got, 3);
					CHECK_EQ(rc.end, -EPIPE);
				}
				qft_chan_destroy(&b);
				if (sealed) {
					qft_seal_free(&tx2);
					qft_seal_free(&rx2);
				}
			}
		}
	}
	check_ctx("%s", "");
	qbuf_free(&w);
}

/* sendv refuses what would desynchronise the stream, sending nothing. */
static void test_sendv_checks(void)
{
	uint8_t hdr[QFT_HDR_SIZE] = { 0 };
	struct iovec iov[QFT_CHAN_MAX_IOV + 1];
	struct qft_chan a;
	int sv[2], avail = -1;

	make_pair(sv);
	CHECK_EQ(qft_chan_init(&a, sv[0], sv[0]), 0);
	for (unsigned i = 0; i <= QFT_CHAN_MAX_IOV; i++)
		iov[i] = (struct iovec){ data, 1 };
	iov[0] = (struct iovec){ hdr, sizeof(hdr) };
	qft_store32(hdr, QFT_CHAN_MAX_IOV);
	CHECK_EQ(qft_chan_sendv(&a, iov, QFT_CHAN_MAX_IOV + 1), -EINVAL);
	CHECK_EQ(qft_chan_sendv(&a, iov, 0), -EINVAL);
	/* The header's length must be what follows. */
	CHECK_EQ(qft_chan_sendv(&a, iov, 2), -EINVAL);
	/* A header cut in two pieces is refused too. */
	iov[0].iov_len = 8;
	CHECK_EQ(qft_chan_sendv(&a, iov, 1), -EINVAL);
	CHECK_EQ(ioctl(sv[1], FIONREAD, &avail), 0);
	CHECK_EQ(avail, 0);
	/* and none of it was sticky */
	iov[0].iov_len = sizeof(hdr);
	qft_store16(hdr + 4, QFT_OP_WRITE);
	qft_store32(hdr, QFT_CHAN_MAX_IOV - 1);
	CHECK_EQ(qft_chan_sendv(&a, iov, QFT_CHAN_MAX_IOV), 0);
	CHECK_EQ(ioctl(sv[1], FIONREAD, &avail), 0);
	CHECK_EQ(avail, QFT_HDR_SIZE + QFT_CHAN_MAX_IOV - 1);
	qft_chan_destroy(&a);
	close(sv[1]);
}

struct getter {
	struct qft_pool *p;
	uint8_t *buf;
	volatile bool done;
	volatile bool stop;
};

static bool getter_stop(void *arg)
{
	struct getter *g = arg;

	return g->stop;
}

static void *get_main(void *arg)
{
	struct getter *g = arg;

	g->buf = qft_pool_get(g->p, getter_stop, g, 10);
	g->done = true;
	return NULL;
}

/*
 * The pool: buffers come back for reuse; at `max` out a get waits (it
 * does not fail) until one is returned or its stop says so; a buffer
 * returned after the owner let go frees the pool (ASan checks).
 */
static void test_pool(void)
{
	struct qft_pool_stats st;
	struct qft_pool *p;
	struct getter g;
	uint8_t *a, *b, *c;
	pthread_t t;

	CHECK_EQ(qft_pool_new(&p, 4096, 0, 2), -EINVAL);
	CHECK_EQ(qft_pool_new(&p, 4096, 3, 2), -EINVAL);
	CHECK_EQ(qft_pool_new(&p, 4096, 1, 2), 0);
	a = qft_pool_get(p, NULL, NULL, 10);
	b = qft_pool_get(p, NULL, NULL, 10);
	CHECK(a && b && a != b);
	memset(a, 1, 4096);
	memset(b, 2, 4096);

	/* Exhausted: the getter waits... */
	g = (struct getter){ .p = p };
	start(&t, get_main, &g);
	sleep_ms(100);
	CHECK(!g.done);
	/* ...until a buffer comes back, which it then gets. */
	qft_pool_put(p, a);
	pthread_join(t, NULL);
	CHECK(g.done);
	CHECK(g.buf == a);
	qft_pool_stats(p, &st);
	CHECK_EQ(st.gets, 3);
	CHECK_EQ(st.allocs, 2);
	CHECK_EQ(st.waits, 1);
	CHECK_EQ(st.out, 2);

	/* A waiting get ends when its stop says so. */
	g = (struct getter){ .p = p };
	start(&t, get_main, &g);
	sleep_ms(50);
	CHECK(!g.done);
	g.stop = true;
	pthread_join(t, NULL);
	CHECK(g.buf == NULL);

	/* Beyond `keep` returned buffers are freed, not kept. */
	qft_pool_put(p, a);
	qft_pool_put(p, b);
	qft_pool_stats(p, &st);
	CHECK_EQ(st.out, 0);
	CHECK_EQ(st.idle, 1);
	c = qft_pool_get(p, NULL, NULL, 10);
	CHECK(c == a || c == b);
	qft_pool_put(p, NULL);
	/* The owner lets go with a buffer out; its return frees it all. */
	qft_pool_release(p);
	qft_pool_put(p, c);
}

struct churner {
	struct qft_pool *p;
	unsigned rounds;
	int bad;
};

/* Holds two buffers at once, each marked as its own. */
static void *churn_main(void *arg)
{
	struct churner *ch = arg;
	uint8_t *held[2];

	for (unsigned r = 0; r < ch->rounds; r++) {
		for (unsigned i = 0; i < 2; i++) {
			held[i] = qft_pool_get(ch->p, NULL, NULL, 10);
			if (!held[i]) {
				ch->bad++;
				return NULL;
			}
			memset(held[i], (int)(uintptr_t)ch & 0xff, 64);
		}
		sched_yield();
		for (unsigned i = 0; i < 2; i++) {
			for (unsigned j = 0; j < 64; j++)
				if (held[i][j] != ((uintptr_t)ch & 0xff))
					ch->bad++;
			qft_pool_put(ch->p, held[i]);
		}
	}
	return NULL;
}

/*
 * Many threads on a pool smaller than their demand: nobody fails, no
 * buffer is handed to two at once, and no more than max are made.  Each
 * holds two at a time, and max is one more than the threads: so many
 * wait, yet one of them can always go on (with fewer, every thread could
 * hold one and wait for its second forever -- true of any pool).
 */
static void test_pool_concurrent(void)
{
	enum { THREADS = 6 };
	struct churner ch[THREADS];
	struct qft_pool_stats st;
	struct qft_pool *p;
	pthread_t t[THREADS];

	CHECK_EQ(qft_pool_new(&p, 256, 4, THREADS + 1), 0);
	for (unsigned i = 0; i < THREADS; i++) {
		ch[i] = (struct churner){ .p = p, .rounds = 2000 };
		start(&t[i], churn_main, &ch[i]);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(ch[i].bad, 0);
	}
	qft_pool_stats(p, &st);
	CHECK_EQ(st.gets, THREADS * 2000 * 2);
	CHECK_EQ(st.out, 0);
	CHECK(st.allocs < st.gets);
	qft_pool_release(p);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	alarm(240);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 131 + (i >> 9));
	test_encode_head();
	test_seal_iov();
	test_sendv_checks();
	test_concurrent_senders();
	test_split_reads();
	test_pool();
	test_pool_concurrent();
	return check_exit("test_datapath");
}
