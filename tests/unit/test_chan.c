// SPDX-License-Identifier: MIT
/*
 * Unit test of common/chan.c: frames over a socketpair (and a pipe pair)
 * between threads, the receiver's limits and end-of-stream results, and
 * senders racing on one channel, with and without compression; and
 * compression (QFT_F_LZ4): round trips plain and sealed, what goes as it
 * is, chunks that claim too much or do not expand, a compressed frame
 * where it was not agreed, the auto policy on noise, and the HELLO
 * negotiation.  alarm() bounds the whole run, so a deadlock fails the
 * test instead of hanging it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "chan.h"
#include "check.h"
#include "fixture.h"
#include "lz4chunk.h"
#include "msg.h"
#include "protocol.h"
#include "seal.h"

#define FRAME_LIMIT (QFT_HDR_SIZE + QFT_MAX_PAYLOAD)

static uint8_t pattern[QFT_MAX_DATA];

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* Writes raw bytes, as a misbehaving peer would. */
static void raw_write(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n) {
		perror("write");
		exit(1);
	}
}

/* ---- request/reply traffic between a client and a server thread ---- */

#define NREQ 40

struct client {
	struct qft_chan *ch;
	int fd;              /* the client's socket, for shutdown(SHUT_WR) */
	int send_err;
	int replies;         /* replies that arrived and checked out */
	int recv_end;        /* qft_chan_recv's result after the last one */
};

static void make_request(struct qft_msg *m, int i)
{
	switch (i % 5) {
	case 0:
		qft_msg_init(m, QFT_OP_LSTAT, 1000 + i);
		m->path = (struct qft_str){ "a/b", 3 };
		break;
	case 1:
		/* A whole 1 MiB WRITE: larger than any socket buffer. */
		qft_msg_init(m, QFT_OP_WRITE, 1000 + i);
		m->handle = 1 + i;
		m->offset = (uint64_t)i << 20;
		m->data = (struct qft_blob){ pattern, QFT_MAX_DATA - i };
		break;
	case 2:
		qft_msg_init(m, QFT_OP_READ, 1000 + i);
		m->handle = 7;
		m->length = QFT_MAX_DATA;
		break;
	case 3:
		qft_msg_init(m, QFT_OP_UNLINK, 1000 + i);
		m->path = (struct qft_str){ "", 0 };
		m->name = (struct qft_str){ "gone", 4 };
		break;
	default:
		qft_msg_init(m, QFT_OP_HELLO, 1000 + i);
		m->magic = QFT_MAGIC;
		m->version = QFT_VERSION;
		break;
	}
}

static void *client_send(void *arg)
{
	struct client *cl = arg;
	struct qbuf scratch;
	struct qft_msg m;

	qbuf_init(&scratch, FRAME_LIMIT);
	for (int i = 0; i < NREQ && !cl->send_err; i++) {
		make_request(&m, i);
		cl->send_err = qft_chan_send_msg(cl->ch, &scratch, &m);
	}
	/* End of requests at a frame boundary: the server sees -EPIPE. */
	shutdown(cl->fd, SHUT_WR);
	qbuf_free(&scratch);
	return NULL;
}

static void *client_recv(void *arg)
{
	struct client *cl = arg;
	struct qbuf in;
	struct qft_hdr h;
	struct qft_msg m;
	int r;

	qbuf_init(&in, FRAME_LIMIT);
	for (;;) {
		r = qft_chan_recv(cl->ch, &in, &h);
		if (r < 0)
			break;
		r = qft_msg_decode(&m, in.data, in.len);
		if (r < 0 || !(m.flags & QFT_F_REPLY) || m.id < 1000 ||
		    m.id >= 1000 + NREQ)
			break;
		int i = (int)(m.id - 1000);
		bool ok = true;

		switch (i % 5) {
		case 0:
			ok = m.op == QFT_OP_LSTAT && m.status == QFT_ENOENT &&
			     strcmp(m.errmsg.s, "no such file: a/b") == 0;
			break;
		case 1:
			ok = m.op == QFT_OP_WRITE && m.count == QFT_MAX_DATA - (unsigned)i;
			break;
		case 2:
			ok = m.op == QFT_OP_READ && m.data.len == QFT_MAX_DATA &&
			     memcmp(m.data.p, pattern, QFT_MAX_DATA) == 0;
			break;
		case 3:
			ok = m.op == QFT_OP_UNLINK && m.status == QFT_OK;
			break;
		default:
			ok = m.op == QFT_OP_HELLO && m.magic == QFT_MAGIC;
			break;
		}
		if (!ok)
			break;
		cl->replies++;
	}
	cl->recv_end = r;
	qbuf_free(&in);
	return NULL;
}

/* The server side: answer each request in order, as qftfs-server will. */
static void test_request_reply(void)
{
	struct qft_chan cch, sch;
	struct client cl = { .ch = &cch };
	pthread_t ts, tr;
	struct qbuf in, out;
	struct qft_hdr h;
	struct qft_msg req, rep;
	int sv[2], r, served = 0;

	check_ctx("request/reply");
	make_pair(sv);
	cl.fd = sv[0];
	CHECK_EQ(qft_chan_init(&cch, sv[0], sv[0]), 0);
	CHECK_EQ(qft_chan_init(&sch, sv[1], sv[1]), 0);
	qbuf_init(&in, FRAME_LIMIT);
	qbuf_init(&out, FRAME_LIMIT);
	start(&ts, client_send, &cl);
	start(&tr, client_recv, &cl);

	for (;;) {
		r = qft_chan_recv(&sch, &in, &h);
		if (r < 0)
			break;
		CHECK_EQ(in.len, QFT_HDR_SIZE + h.len);
		r = qft_msg_decode(&req, in.data, in.len);
		CHECK_EQ(r, 0);
		if (r < 0)
			break;
		CHECK_EQ(req.id, 1000 + served);   /* order is preserved */
		CHECK_EQ(h.id, req.id);
		CHECK_EQ(h.op, req.op);
		qft_msg_init_reply(&rep, &req);
		switch (req.op) {
		case QFT_OP_LSTAT:
			rep.status = QFT_ENOENT;
			rep.errmsg = (struct qft_str){ "no such file: a/b", 17 };
			break;
		case QFT_OP_WRITE:
			CHECK(memcmp(req.data.p, pattern, req.data.len) == 0);
			CHECK_EQ(req.offset, (uint64_t)served << 20);
			rep.count = req.data.len;
			break;
		case QFT_OP_READ:
			rep.data = (struct qft_blob){ pattern, QFT_MAX_DATA };
			break;
		case QFT_OP_HELLO:
			rep.magic = QFT_MAGIC;
			rep.version = QFT_VERSION;
			break;
		}
		CHECK_EQ(qft_chan_send_msg(&sch, &out, &rep), 0);
		served++;
	}
	CHECK_EQ(r, -EPIPE);
	CHECK_EQ(served, NREQ);
	pthread_join(ts, NULL);
	CHECK_EQ(cl.send_err, 0);
	/* No more replies: the client's receiver sees a clean end. */
	shutdown(sv[1], SHUT_WR);
	pthread_join(tr, NULL);
	CHECK_EQ(cl.replies, NREQ);
	CHECK_EQ(cl.recv_end, -EPIPE);

	qft_chan_destroy(&cch);
	qft_chan_destroy(&sch);
	CHECK(!fd_open(sv[0]) && !fd_open(sv[1]));
	qbuf_free(&in);
	qbuf_free(&out);
	check_ctx("%s", "");
}

/* ---- the receiver's limits ---- */

static void put_header(uint8_t *p, uint32_t len, uint16_t op, uint16_t flags,
		       uint64_t id)
{
	qft_store32(p, len);
	qft_store16(p + 4, op);
	qft_store16(p + 6, flags);
	qft_store64(p + 8, id);
}

/* Writes a header then `left` zero bytes, from a thread of its own
 * because a whole frame does not fit in the socket buffer. */
struct raw_writer {
	int fd;
	uint8_t hdr[QFT_HDR_SIZE];
	size_t left;
};

static void *raw_writer_run(void *arg)
{
	struct raw_writer *rw = arg;
	static uint8_t zeros[65536];

	/* Stops quietly when the reader goes away mid-frame. */
	if (write(rw->fd, rw->hdr, QFT_HDR_SIZE) != QFT_HDR_SIZE)
		return NULL;
	while (rw->left) {
		size_t n = rw->left < sizeof(zeros) ? rw->left : sizeof(zeros);
		ssize_t w = write(rw->fd, zeros, n);

		if (w <= 0)
			break;
		rw->left -= (size_t)w;
	}
	return NULL;
}

static void test_bad_headers(void)
{
	static const struct {
		uint32_t len;
		uint16_t op, flags;
		int r;
	} cases[] = {
		{ QFT_MAX_PAYLOAD + 1, QFT_OP_WRITE, 0, -EBADMSG },
		{ UINT32_MAX, QFT_OP_WRITE, 0, -EBADMSG },
		{ 0x80000000u, 0xffff, 0, -EBADMSG },
		{ 8, QFT_OP_LSTAT, 0x0002, -EBADMSG },
		{ 8, QFT_OP_LSTAT, 0x8001, -EBADMSG },
		{ 8, 0, 0, -ENOSYS },
		{ 8, QFT_OP__COUNT, 0, -ENOSYS },
		{ 8, 0xffff, QFT_F_REPLY, -ENOSYS },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct qft_chan ch;
		struct qbuf in;
		struct qft_hdr h;
		uint8_t hdr[QFT_HDR_SIZE];
		int sv[2];

		check_ctx("bad header #%zu (len %#x op %#x flags %#x)", i,
			  cases[i].len, cases[i].op, cases[i].flags);
		make_pair(sv);
		CHECK_EQ(qft_chan_init(&ch, sv[1], sv[1]), 0);
		put_header(hdr, cases[i].len, cases[i].op, cases[i].flags, 5);
		raw_write(sv[0], hdr, sizeof(hdr));
		qbuf_init(&in, FRAME_LIMIT);
		CHECK_EQ(qft_chan_recv(&ch, &in, &h), cases[i].r);
		/* Refused on the header alone: nothing the peer announced
		 * was allocated. */
		CHECK(in.cap <= 4096);
		CHECK_EQ(in.len, QFT_HDR_SIZE);
		qbuf_free(&in);
		qft_chan_destroy(&ch);
		close(sv[0]);
	}

	/* At the limit a frame is accepted and read in full. */
	{
		struct raw_writer rw = { .left = QFT_MAX_PAYLOAD };
		struct qft_chan ch;
		struct qbuf in;
		struct qft_hdr h;
		pthread_t t;
		int sv[2];

		check_ctx("header at the payload limit");
		make_pair(sv);
		rw.fd = sv[0];
		put_header(rw.hdr, QFT_MAX_PAYLOAD, QFT_OP_WRITE, 0, 6);
		CHECK_EQ(qft_chan_init(&ch, sv[1], sv[1]), 0);
		start(&t, raw_writer_run, &rw);
		qbuf_init(&in, FRAME_LIMIT);
		CHECK_EQ(qft_chan_recv(&ch, &in, &h), 0);
		CHECK_EQ(h.len, QFT_MAX_PAYLOAD);
		CHECK_EQ(h.id, 6);
		CHECK_EQ(in.len, FRAME_LIMIT);
		pthread_join(t, NULL);
		/* A receive buffer with a smaller limit cannot take it. */
		qbuf_free(&in);
		rw.left = QFT_MAX_PAYLOAD;
		start(&t, raw_writer_run, &rw);
		qbuf_init(&in, 64 * 1024);
		CHECK_EQ(qft_chan_recv(&ch, &in, &h), -ENOMEM);
		CHECK(in.cap <= 64 * 1024);
		qbuf_free(&in);
		/* The writer may be blocked on the unread rest: unblock it. */
		shutdown(sv[1], SHUT_RDWR);
		pthread_join(t, NULL);
		qft_chan_destroy(&ch);
		close(sv[0]);
	}

	/* An empty payload is a frame like any other at this layer. */
	{
		struct qft_chan ch;
		struct qbuf in;
		struct qft_hdr h;
		uint8_t hdr[QFT_HDR_SIZE];
		int sv[2];

		check_ctx("empty payload");
		make_pair(sv);
		CHECK_EQ(qft_chan_init(&ch, sv[1], sv[1]), 0);
		put_header(hdr, 0, QFT_OP_CLOSE, 0, 7);
		raw_write(sv[0], hdr, sizeof(hdr));
		close(sv[0]);
		qbuf_init(&in, FRAME_LIMIT);
		CHECK_EQ(qft_chan_recv(&ch, &in, &h), 0);
		CHECK_EQ(in.len, QFT_HDR_SIZE);
		CHECK_EQ(qft_chan_recv(&ch, &in, &h), -EPIPE);
		qbuf_free(&in);
		qft_chan_destroy(&ch);
	}
	check_ctx("%s", "");
}

/* ---- end of stream ---- */

/*
 * The peer writes `cut` bytes of a valid 100-byte-payload frame, or the
 * whole frame when cut is SIZE_MAX, then closes.
 */
static int recv_after_cut(size_t cut, int *second)
{
	struct qft_chan ch;
	struct qbuf in, enc;
	struct qft_hdr h;
	struct qft_msg m;
	int sv[2], r;

	make_pair(sv);
	CHECK_EQ(qft_chan_init(&ch, sv[1], sv[1]), 0);
	qft_msg_init(&m, QFT_OP_WRITE, 77);
	m.handle = 1;
	m.data = (struct qft_blob){ pattern, 80 };
	qbuf_init(&enc, FRAME_LIMIT);
	CHECK_EQ(qft_msg_encode(&enc, &m), 0);
	CHECK_EQ(enc.len, QFT_HDR_SIZE + 100);
	raw_write(sv[0], enc.data, cut < enc.len ? cut : enc.len);
	close(sv[0]);

	qbuf_init(&in, FRAME_LIMIT);
	r = qft_chan_recv(&ch, &in, &h);
	if (r == 0)
		CHECK(in.len == enc.len && memcmp(in.data, enc.data, enc.len) == 0);
	*second = qft_chan_recv(&ch, &in, &h);
	qbuf_free(&in);
	qbuf_free(&enc);
	qft_chan_destroy(&ch);
	return r;
}

static void test_end_of_stream(void)
{
	int second;

	check_ctx("clean close before any frame");
	CHECK_EQ(recv_after_cut(0, &second), -EPIPE);
	CHECK_EQ(second, -EPIPE);
	for (size_t cut = 1; cut < QFT_HDR_SIZE + 100; cut++) {
		check_ctx("stream cut after %zu bytes", cut);
		CHECK_EQ(recv_after_cut(cut, &second), -EIO);
	}
	check_ctx("clean close after a whole frame");
	CHECK_EQ(recv_after_cut(SIZE_MAX, &second), 0);
	CHECK_EQ(second, -EPIPE);
	check_ctx("%s", "");
}

/* qft_chan_shutdown wakes a receiver blocked on an idle stream. */
struct blocked {
	struct qft_chan *ch;
	int r;
};

static void *blocked_recv(void *arg)
{
	struct blocked *b = arg;
	struct qbuf in;
	struct qft_hdr h;

	qbuf_init(&in, FRAME_LIMIT);
	b->r = qft_chan_recv(b->ch, &in, &h);
	qbuf_free(&in);
	return NULL;
}

static void test_shutdown(void)
{
	struct qft_chan ch;
	struct blocked b = { .ch = &ch, .r = 1 };
	struct qft_msg m;
	struct qbuf scratch;
	pthread_t t;
	int sv[2];

	check_ctx("shutdown wakes the receiver");
	make_pair(sv);
	CHECK_EQ(qft_chan_init(&ch, sv[1], sv[1]), 0);
	start(&t, blocked_recv, &b);
	usleep(50 * 1000);   /* let it block; the result is the same if not */
	qft_chan_shutdown(&ch);
	pthread_join(t, NULL);
	CHECK_EQ(b.r, -EPIPE);

	/* Sending on a shut-down socket fails, and the failure sticks. */
	check_ctx("send after shutdown");
	qft_msg_init(&m, QFT_OP_CLOSE, 1);
	m.handle = 1;
	qbuf_init(&scratch, FRAME_LIMIT);
	CHECK_EQ(qft_chan_send_msg(&ch, &scratch, &m), -EPIPE);
	CHECK_EQ(qft_chan_send_msg(&ch, &scratch, &m), -EPIPE);
	qbuf_free(&scratch);
	qft_chan_destroy(&ch);
	close(sv[0]);
	check_ctx("%s", "");
}

static void test_send_errors(void)
{
	struct qft_chan ch;
	struct qft_msg m;
	struct qbuf scratch;
	int sv[2];

	make_pair(sv);
	CHECK_EQ(qft_chan_init(&ch, sv[0], sv[0]), 0);
	qbuf_init(&scratch, FRAME_LIMIT);

	/* A message that does not encode is refused before any byte goes
	 * out, and does not poison the channel. */
	check_ctx("send unencodable");
	qft_msg_init(&m, 0, 1);
	CHECK_EQ(qft_chan_send_msg(&ch, &scratch, &m), -EINVAL);
	qft_msg_init(&m, QFT_OP_WRITE, 2);
	m.handle = 1;
	static uint8_t big[QFT_MAX_PAYLOAD];
	m.data = (struct qft_blob){ big, sizeof(big) - 8 };
	CHECK_EQ(qft_chan_send_msg(&ch, &scratch, &m), -EMSGSIZE);
	qft_msg_init(&m, QFT_OP_CLOSE, 3);
	m.handle = 1;
	CHECK_EQ(qft_chan_send_msg(&ch, &scratch, &m), 0);
	{
		struct qft_chan rc;
		struct qbuf in;
		struct qft_hdr h;

		CHECK_EQ(qft_chan_init(&rc, sv[1], -1), 0);
		qbuf_init(&in, FRAME_LIMIT);
		CHECK_EQ(qft_chan_recv(&rc, &in, &h), 0);
		CHECK_EQ(h.id, 3);   /* the refused ones left nothing behind */
		qbuf_free(&in);
		qft_chan_destroy(&rc);   /* closes sv[1] */
	}

	/* Peer gone: -EPIPE (SIGPIPE is ignored), and it sticks. */
	check_ctx("send to a closed peer");
	CHECK_EQ(qft_chan_send_msg(&ch, &scratch, &m), -EPIPE);
	CHECK_EQ(qft_chan_send(&ch, scratch.data, scratch.len), -EPIPE);
	qbuf_free(&scratch);
	qft_chan_destroy(&ch);
	CHECK(!fd_open(sv[0]));
	check_ctx("%s", "");
}

/*
 * A frame cut short by a failed write desynchronises the stream for good:
 * later sends must fail with the same error and write nothing, even once
 * the socket would accept bytes again.  A non-blocking socket makes the
 * cut happen on demand (EAGAIN after part of a 1 MiB frame).
 */
static void test_sticky_send_error(void)
{
	static uint8_t drain[65536];
	struct qft_chan ch;
	struct qft_msg m;
	struct qbuf scratch;
	ssize_t got;
	int sv[2], r;

	check_ctx("sticky send error");
	make_pair(sv);
	CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
	CHECK_EQ(qft_chan_init(&ch, sv[0], sv[0]), 0);
	qbuf_init(&scratch, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_WRITE, 1);
	m.handle = 1;
	m.data = (struct qft_blob){ pattern, QFT_MAX_DATA };
	r = qft_chan_send_msg(&ch, &scratch, &m);
	if (r != -EAGAIN) {
		/* A socket buffer over 1 MiB: nothing to cut, no test. */
		fprintf(stderr, "sticky send error: first send gave %d, skipped\n", r);
		goto out;
	}
	/* Drain what got through; the socket is writable again. */
	while ((got = read(sv[1], drain, sizeof(drain))) > 0)
		;
	qft_msg_init(&m, QFT_OP_CLOSE, 2);
	m.handle = 1;
	CHECK_EQ(qft_chan_send_msg(&ch, &scratch, &m), -EAGAIN);
	CHECK_EQ(qft_chan_send(&ch, scratch.data, scratch.len), -EAGAIN);
	/* ... and nothing reached the peer. */
	CHECK_EQ(read(sv[1], drain, sizeof(drain)), -1);
out:
	qbuf_free(&scratch);
	qft_chan_destroy(&ch);
	close(sv[1]);
	check_ctx("%s", "");
}

/* Two pipes instead of one socket: rfd != wfd. */
static void test_pipes(void)
{
	int a[2], b[2];
	struct qft_chan c1, c2;
	struct qbuf scratch, in;
	struct qft_msg m, got;
	struct qft_hdr h;

	check_ctx("pipes");
	if (pipe2(a, O_CLOEXEC) < 0 || pipe2(b, O_CLOEXEC) < 0) {
		perror("pipe2");
		exit(1);
	}
	/* c1 writes a[1], reads b[0]; c2 writes b[1], reads a[0]. */
	CHECK_EQ(qft_chan_init(&c1, b[0], a[1]), 0);
	CHECK_EQ(qft_chan_init(&c2, a[0], b[1]), 0);
	qbuf_init(&scratch, FRAME_LIMIT);
	qbuf_init(&in, FRAME_LIMIT);
	qft_msg_init(&m, QFT_OP_MKDIR, 42);
	m.path = (struct qft_str){ "x", 1 };
	m.name = (struct qft_str){ "y", 1 };
	m.mode = 0755;
	CHECK_EQ(qft_chan_send_msg(&c1, &scratch, &m), 0);
	CHECK_EQ(qft_chan_recv(&c2, &in, &h), 0);
	CHECK_EQ(qft_msg_decode(&got, in.data, in.len), 0);
	CHECK(got.op == QFT_OP_MKDIR && got.id == 42 && got.mode == 0755 &&
	      strcmp(got.name.s, "y") == 0);

	/* shutdown on a pipe closes our write end: the peer sees EOF. */
	qft_chan_shutdown(&c1);
	CHECK(!fd_open(a[1]));
	CHECK_EQ(qft_chan_recv(&c2, &in, &h), -EPIPE);
	CHECK_EQ(qft_chan_send_msg(&c1, &scratch, &m), -EPIPE);

	qft_chan_destroy(&c1);
	qft_chan_destroy(&c2);
	CHECK(!fd_open(a[0]) && !fd_open(b[0]) && !fd_open(b[1]));
	qbuf_free(&scratch);
	qbuf_free(&in);
	check_ctx("%s", "");
}

/* ---- senders racing on one channel ---- */

#define NSENDERS 4
#define PER_SENDER 150

struct sender {
	struct qft_chan *ch;
	int idx;
	int err;
};

/* Sizes from a few bytes to most of a megabyte, so that some writes are
 * split by the kernel and would interleave without the lock. */
static uint32_t frame_data_len(int idx, int seq)
{
	static const uint32_t sizes[] = {
		1, 17, 4096, 65536 + 3, 200000, 3, 700000, 100, 1000000,
	};

	return sizes[(seq * 7 + idx * 3) % (sizeof(sizes) / sizeof(sizes[0]))];
}

static uint8_t frame_byte(uint64_t id, size_t i)
{
	return (uint8_t)(pattern[(i + id * 977) % sizeof(pattern)] ^ (uint8_t)id);
}

static void *sender_run(void *arg)
{
	struct sender *s = arg;
	struct qbuf scratch;
	struct qft_msg m;
	uint8_t *data = malloc(QFT_MAX_DATA);

	if (!data) {
		s->err = -ENOMEM;
		return NULL;
	}
	qbuf_init(&scratch, FRAME_LIMIT);
	for (int seq = 0; seq < PER_SENDER && !s->err; seq++) {
		uint64_t id = (uint64_t)s->idx << 32 | (uint32_t)seq;
		uint32_t len = frame_data_len(s->idx, seq);

		for (size_t i = 0; i < len; i++)
			data[i] = frame_byte(id, i);
		qft_msg_init(&m, QFT_OP_WRITE, id);
		m.handle = 1 + (uint64_t)s->idx;
		m.offset = (uint64_t)seq << 20;
		m.data = (struct qft_blob){ data, len };
		s->err = qft_chan_send_msg(s->ch, &scratch, &m);
	}
	qbuf_free(&scratch);
	free(data);
	return NULL;
}

/* Compression as `mode` says from tx to rx, and NSENDERS sender_run
 * threads on tx. */
static void start_senders(struct qft_chan *tx, struct qft_chan *rx,
			  enum qft_lz4_mode mode, struct sender s[NSENDERS],
			  pthread_t t[NSENDERS])
{
	if (mode != QFT_LZ4_NONE) {
		qft_chan_set_lz4(tx, mode);
		qft_chan_set_lz4(rx, QFT_LZ4_NONE);
	}
	for (int i = 0; i < NSENDERS; i++) {
		s[i] = (struct sender){ .ch = tx, .idx = i };
		start(&t[i], sender_run, &s[i]);
	}
}

/*
 * Receives the frames of NSENDERS sender_run threads from `rx`: each must
 * decode and carry exactly its sender's bytes, in its sender's order
 * (next[] says how far each got).  Returns how many came; *bad counts
 * the wrong ones.
 */
static int receive_senders(struct qft_chan *rx, struct qbuf *in,
			   int next[NSENDERS], int *bad)
{
	struct qft_hdr h;
	struct qft_msg m;
	int received = 0, r;

	*bad = 0;
	while (received < NSENDERS * PER_SENDER) {
		r = qft_chan_recv(rx, in, &h);
		if (r < 0) {
			CHECK_EQ(r, 0);
			break;
		}
		r = qft_msg_decode(&m, in->data, in->len);
		if (r < 0) {
			CHECK_EQ(r, 0);
			break;
		}
		int idx = (int)(m.id >> 32), seq = (int)(uint32_t)m.id;
		bool ok = idx >= 0 && idx < NSENDERS && seq == next[idx] &&
			  m.handle == 1 + (uint64_t)idx &&
			  m.data.len == frame_data_len(idx, seq);

		for (size_t i = 0; ok && i < m.data.len; i++)
			ok = m.data.p[i] == frame_byte(m.id, i);
		if (!ok && ++*bad <= 3)
			CHECK(!"frame from a sender arrived intact and in order");
		if (idx >= 0 && idx < NSENDERS)
			next[idx] = seq + 1;
		received++;
	}
	return received;
}

static void test_concurrent_senders(enum qft_lz4_mode mode)
{
	struct qft_chan tx, rx;
	struct sender s[NSENDERS];
	pthread_t t[NSENDERS];
	int next[NSENDERS] = { 0 };
	struct qbuf in;
	struct qft_hdr h;
	int sv[2], received = 0, bad = 0;

	check_ctx("concurrent senders, compress=%s", qft_lz4_mode_name(mode));
	make_pair(sv);
	CHECK_EQ(qft_chan_init(&tx, sv[0], sv[0]), 0);
	CHECK_EQ(qft_chan_init(&rx, sv[1], sv[1]), 0);
	start_senders(&tx, &rx, mode, s, t);
	qbuf_init(&in, FRAME_LIMIT);
	received = receive_senders(&rx, &in, next, &bad);
	for (int i = 0; i < NSENDERS; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(s[i].err, 0);
		CHECK_EQ(next[i], PER_SENDER);
	}
	CHECK_EQ(received, NSENDERS * PER_SENDER);
	CHECK_EQ(bad, 0);
	if (mode != QFT_LZ4_NONE) {
		struct qft_chan_lz4_stats st;

		/* The pattern compresses: some frames went compressed, and
		 * what was sent is what arrived. */
		qft_chan_lz4_stats(&tx, &st);
		CHECK(st.tx_lz4 > 0);
		CHECK(st.tx_wire < st.tx_bytes);
		CHECK_EQ(st.tx_frames, NSENDERS * PER_SENDER);
		CHECK_EQ(rx.st.rx_lz4, st.tx_lz4);
		CHECK_EQ(rx.st.rx_bytes, st.tx_bytes);
		CHECK_EQ(rx.st.rx_wire, st.tx_wire);
	}
	qft_chan_destroy(&tx);
	/* All senders done and the channel closed: a clean end. */
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EPIPE);
	qft_chan_destroy(&rx);
	qbuf_free(&in);
	check_ctx("%s", "");
}

/* ---- compression (QFT_F_LZ4) ---- */

#define KEY_BYTE 0x42

/* Text like a JSON log, the data compress=lz4 is for. */
static void fill_json(uint8_t *p, size_t n, unsigned seed)
{
	static const char *const states[] = { "ok", "degraded", "failed" };
	char rec[160];
	size_t i = 0;

	while (i < n) {
		unsigned v = seed = seed * 1103515245u + 12345u;
		int len = snprintf(rec, sizeof(rec),
			"{\"id\": %u, \"name\": \"sensor-%u\", \"value\": "
			"%u.%03u, \"state\": \"%s\"}\n", v % 100000,
			(v >> 8) % 64, (v >> 12) % 1000, (v >> 3) % 1000,
			states[(v >> 20) % 3]);
		size_t take = (size_t)len < n - i ? (size_t)len : n - i;

		memcpy(p + i, rec, take);
		i += take;
	}
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(seed >> 56);
	}
}

/* Both directions of a sealed link, keyed alike. */
struct seals {
	struct qft_seal tx, rx;
};

static void seals_init(struct seals *s)
{
	uint8_t key[QFT_KEY_SIZE];

	memset(key, KEY_BYTE, sizeof(key));
	CHECK_EQ(qft_seal_init(&s->tx, QFT_CIPHER_AES256GCM, key, true), 0);
	CHECK_EQ(qft_seal_init(&s->rx, QFT_CIPHER_AES256GCM, key, false), 0);
}

static void seals_free(struct seals *s)
{
	qft_seal_free(&s->tx);
	qft_seal_free(&s->rx);
}

/* Bytes as they travelled. */
struct wire {
	uint8_t *p;
	size_t len;
};

struct capture {
	struct qft_chan *ch;
	int fd;
	const struct qft_msg *m;
	int r;
};

static void *capture_send(void *arg)
{
	struct capture *cp = arg;
	struct qbuf scratch;

	qbuf_init(&scratch, FRAME_LIMIT);
	cp->r = qft_chan_send_msg(cp->ch, &scratch, cp->m);
	shutdown(cp->fd, SHUT_WR);
	qbuf_free(&scratch);
	return NULL;
}

/* The same, leaving the stream open for the next frame. */
static void *capture_send_keep(void *arg)
{
	struct capture *cp = arg;
	struct qbuf scratch;

	qbuf_init(&scratch, FRAME_LIMIT);
	cp->r = qft_chan_send_msg(cp->ch, &scratch, cp->m);
	qbuf_free(&scratch);
	return NULL;
}

/* Reads a stream to its end into *w (which the caller frees). */
static void read_to_end(int fd, struct wire *w)
{
	size_t cap = 1 << 16;

	w->p = malloc(cap);
	w->len = 0;
	for (;;) {
		ssize_t n;

		if (w->len == cap) {
			cap *= 2;
			w->p = realloc(w->p, cap);
		}
		if (!w->p) {
			perror("realloc");
			exit(1);
		}
		n = read(fd, w->p + w->len, cap - w->len);
		if (n <= 0)
			break;
		w->len += (size_t)n;
	}
}

/*
 * Sends *m on a channel that compresses with `mode` (sealed with `tx`
 * unless NULL) and returns what went on the wire, from a thread because
 * a large frame does not fit the socket buffer.
 */
static void capture(enum qft_lz4_mode mode, struct qft_seal *tx,
		    const struct qft_msg *m, struct wire *w,
		    struct qft_chan_lz4_stats *st)
{
	struct qft_chan ch;
	struct capture cp = { .ch = &ch, .m = m };
	pthread_t t;
	int sv[2];

	make_pair(sv);
	cp.fd = sv[0];
	CHECK_EQ(qft_chan_init(&ch, sv[0], sv[0]), 0);
	if (tx)
		qft_chan_set_seal(&ch, tx, NULL);
	if (mode != QFT_LZ4_NONE)
		qft_chan_set_lz4(&ch, mode);
	start(&t, capture_send, &cp);
	read_to_end(sv[1], w);
	pthread_join(t, NULL);
	CHECK_EQ(cp.r, 0);
	if (st)
		qft_chan_lz4_stats(&ch, st);
	qft_chan_destroy(&ch);
	close(sv[1]);
}

struct replay {
	int fd;
	const struct wire *w;
};

static void *replay_write(void *arg)
{
	struct replay *rp = arg;
	size_t off = 0;

	/* Stops quietly when the receiver gives up mid-frame. */
	while (off < rp->w->len) {
		ssize_t n = write(rp->fd, rp->w->p + off, rp->w->len - off);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	shutdown(rp->fd, SHUT_WR);
	return NULL;
}

/*
 * Feeds `w` to a receiving channel that accepts compressed frames when
 * `lz4` (and opens records with `rx` unless NULL); returns what
 * qft_chan_recv said, with the frame in *in and its header in *h.
 */
static int replay(const struct wire *w, bool lz4, struct qft_seal *rx,
		  struct qbuf *in, struct qft_hdr *h)
{
	struct qft_chan ch;
	struct replay rp = { .w = w };
	pthread_t t;
	int sv[2], r;

	make_pair(sv);
	rp.fd = sv[0];
	CHECK_EQ(qft_chan_init(&ch, sv[1], sv[1]), 0);
	if (rx)
		qft_chan_set_seal(&ch, NULL, rx);
	if (lz4)
		qft_chan_set_lz4(&ch, QFT_LZ4_NONE);
	start(&t, replay_write, &rp);
	memset(h, 0, sizeof(*h));
	r = qft_chan_recv(&ch, in, h);
	/* Unblock a writer stuck on what was not read. */
	shutdown(sv[1], SHUT_RDWR);
	pthread_join(t, NULL);
	qft_chan_destroy(&ch);
	close(sv[0]);
	return r;
}

/* A WRITE of data[0..n) and its plain encoding. */
static void write_msg(struct qft_msg *m, struct qbuf *enc, const uint8_t *data,
		      size_t n)
{
	qft_msg_init(m, QFT_OP_WRITE, 99);
	m->handle = 3;
	m->offset = 1 << 20;
	m->data = (struct qft_blob){ data, (uint32_t)n };
	qbuf_reset(enc);
	CHECK_EQ(qft_msg_encode(enc, m), 0);
}

static bool same_frame(const struct qbuf *in, const struct qbuf *enc)
{
	return in->len == enc->len && memcmp(in->data, enc->data, in->len) == 0;
}

static void test_lz4_round_trips(void)
{
	static uint8_t json[QFT_MAX_DATA], noise[QFT_MAX_DATA];
	struct qft_chan_lz4_stats st;
	struct qbuf enc, in;
	struct qft_msg m;
	struct qft_hdr h;
	struct wire w;
	struct seals sl;

	fill_json(json, sizeof(json), 1);
	fill_random(noise, sizeof(noise), 2);
	qbuf_init(&enc, FRAME_LIMIT);
	qbuf_init(&in, FRAME_LIMIT);

	/* Compressible: the wire carries a QFT_F_LZ4 frame much smaller
	 * than the original, and the receiver hands on the original, byte
	 * for byte, without the flag. */
	for (int i = 0; i < 2; i++) {
		enum qft_lz4_mode mode = i ? QFT_LZ4_AUTO : QFT_LZ4_ALWAYS;

		check_ctx("lz4 round trip, compress=%s",
			  qft_lz4_mode_name(mode));
		write_msg(&m, &enc, json, sizeof(json));
		capture(mode, NULL, &m, &w, &st);
		CHECK(w.len >= QFT_HDR_SIZE);
		CHECK(qft_load16(w.p + 6) == QFT_F_LZ4);
		CHECK_EQ(qft_load32(w.p), w.len - QFT_HDR_SIZE);
		CHECK(w.len < enc.len / 2);
		CHECK_EQ(st.tx_lz4, 1);
		CHECK_EQ(st.tx_bytes, enc.len - QFT_HDR_SIZE);
		CHECK_EQ(st.tx_wire, w.len - QFT_HDR_SIZE);
		CHECK_EQ(replay(&w, true, NULL, &in, &h), 0);
		CHECK(same_frame(&in, &enc));
		CHECK_EQ(h.len, enc.len - QFT_HDR_SIZE);
		CHECK_EQ(h.flags, 0);
		CHECK_EQ(h.op, QFT_OP_WRITE);
		CHECK_EQ(h.id, 99);
		free(w.p);
	}

	/* Incompressible, or too small to bother: sent as it is. */
	check_ctx("lz4 raw fallback");
	write_msg(&m, &enc, noise, sizeof(noise));
	capture(QFT_LZ4_ALWAYS, NULL, &m, &w, &st);
	CHECK(w.len == enc.len && memcmp(w.p, enc.data, enc.len) == 0);
	CHECK_EQ(st.tx_lz4, 0);
	CHECK_EQ(replay(&w, true, NULL, &in, &h), 0);
	CHECK(same_frame(&in, &enc));
	free(w.p);
	check_ctx("lz4 small frame");
	write_msg(&m, &enc, json, QFT_CHAN_LZ4_MIN - 21);
	CHECK_EQ(enc.len, QFT_HDR_SIZE + QFT_CHAN_LZ4_MIN - 1);
	capture(QFT_LZ4_ALWAYS, NULL, &m, &w, NULL);
	CHECK(w.len == enc.len && memcmp(w.p, enc.data, enc.len) == 0);
	free(w.p);
	check_ctx("lz4 at the threshold");
	write_msg(&m, &enc, json, QFT_CHAN_LZ4_MIN - 20);
	capture(QFT_LZ4_ALWAYS, NULL, &m, &w, NULL);
	CHECK(qft_load16(w.p + 6) == QFT_F_LZ4 && w.len < enc.len);
	CHECK_EQ(replay(&w, true, NULL, &in, &h), 0);
	CHECK(same_frame(&in, &enc));
	free(w.p);

	/* Receiving only: a channel set to QFT_LZ4_NONE sends as it is. */
	check_ctx("lz4 receive only");
	write_msg(&m, &enc, json, sizeof(json));
	capture(QFT_LZ4_NONE, NULL, &m, &w, NULL);
	CHECK(w.len == enc.len && memcmp(w.p, enc.data, enc.len) == 0);
	free(w.p);

	/* Sealed: compressed before sealing (the record is small), opened
	 * then expanded; a replayed record still fails, and so does a
	 * compressed one where compression was not agreed. */
	check_ctx("lz4 sealed");
	seals_init(&sl);
	capture(QFT_LZ4_ALWAYS, &sl.tx, &m, &w, &st);
	CHECK(w.len < enc.len / 2);
	CHECK_EQ(st.tx_lz4, 1);
	CHECK_EQ(replay(&w, true, &sl.rx, &in, &h), 0);
	CHECK(same_frame(&in, &enc));
	CHECK_EQ(h.len, enc.len - QFT_HDR_SIZE);
	CHECK_EQ(replay(&w, true, &sl.rx, &in, &h), -EBADMSG);
	seals_free(&sl);
	seals_init(&sl);
	CHECK_EQ(replay(&w, false, &sl.rx, &in, &h), -EBADMSG);
	CHECK(!sl.rx.failed);   /* the record was fine; its content not */
	seals_free(&sl);
	free(w.p);

	qbuf_free(&in);
	qbuf_free(&enc);
	check_ctx("%s", "");
}

/*
 * A frame with QFT_F_LZ4 and the given chunk as payload, as a hostile or
 * broken peer could send it.
 */
static void lz4_frame(struct wire *w, const uint8_t *chunk, size_t n)
{
	w->len = QFT_HDR_SIZE + n;
	w->p = malloc(w->len);
	if (!w->p) {
		perror("malloc");
		exit(1);
	}
	put_header(w->p, (uint32_t)n, QFT_OP_WRITE, QFT_F_LZ4, 5);
	if (n)
		memcpy(w->p + QFT_HDR_SIZE, chunk, n);
}

static void test_lz4_hostile(void)
{
	size_t cap = qft_lz4_bound(QFT_MAX_PAYLOAD), zlen, blen;
	uint8_t *zeros = calloc(1, QFT_MAX_PAYLOAD + 1);
	uint8_t *chunk = malloc(cap + 64), *bad = malloc(cap + 64);
	struct qbuf in;
	struct qft_hdr h;
	struct wire w;

	if (!zeros || !chunk || !bad) {
		perror("malloc");
		exit(1);
	}
	qbuf_init(&in, FRAME_LIMIT);

	/* A chunk of exactly QFT_MAX_PAYLOAD bytes is the largest frame. */
	check_ctx("lz4 largest payload");
	CHECK_EQ(qft_lz4_encode(NULL, zeros, QFT_MAX_PAYLOAD, chunk, cap,
				&zlen), 0);
	CHECK_EQ(chunk[0], QFT_LZ4_LZ4);
	lz4_frame(&w, chunk, zlen);
	CHECK_EQ(replay(&w, true, NULL, &in, &h), 0);
	CHECK_EQ(h.len, QFT_MAX_PAYLOAD);
	CHECK_EQ(in.len, QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	CHECK(memcmp(in.data + QFT_HDR_SIZE, zeros, QFT_MAX_PAYLOAD) == 0);
	free(w.p);

	/* ... and one that claims a byte more is refused before anything
	 * is expanded or allocated for it, whatever the block says. */
	check_ctx("lz4 oversized claim");
	memcpy(bad, chunk, zlen);
	qft_store32(bad + 1, QFT_MAX_PAYLOAD + 1);
	lz4_frame(&w, bad, zlen);
	qbuf_free(&in);
	qbuf_init(&in, FRAME_LIMIT);
	CHECK_EQ(replay(&w, true, NULL, &in, &h), -EBADMSG);
	CHECK_EQ(in.len, QFT_HDR_SIZE);
	CHECK(in.cap <= 4096);
	free(w.p);
	qft_store32(bad + 1, UINT32_MAX);
	lz4_frame(&w, bad, zlen);
	CHECK_EQ(replay(&w, true, NULL, &in, &h), -EBADMSG);
	free(w.p);

	/* Corrupted chunks: a claimed length one off either way, an unknown
	 * kind, a cut or padded block, a header alone, nothing at all, a
	 * RAW chunk whose length disagrees. */
	fill_json(zeros, 200000, 7);
	CHECK_EQ(qft_lz4_encode(NULL, zeros, 200000, chunk, cap, &zlen), 0);
	CHECK_EQ(chunk[0], QFT_LZ4_LZ4);
	for (int i = 0; i < 9; i++) {
		check_ctx("lz4 corrupted chunk #%d", i);
		memcpy(bad, chunk, zlen);
		blen = zlen;
		switch (i) {
		case 0: qft_store32(bad + 1, 200001); break;
		case 1: qft_store32(bad + 1, 199999); break;
		case 2: bad[0] = 2; break;
		case 3: blen = zlen - 7; break;
		case 4: memset(bad + zlen, 0, 64); blen = zlen + 64; break;
		case 5: blen = QFT_LZ4_HDR_SIZE; break;
		case 6: blen = 3; break;
		case 7: blen = 0; break;
		default:
			bad[0] = QFT_LZ4_RAW;
			break;
		}
		lz4_frame(&w, bad, blen);
		CHECK_EQ(replay(&w, true, NULL, &in, &h), -EBADMSG);
		free(w.p);
	}
	/* A block of garbage: whatever LZ4 makes of it, never more than
	 * the claimed length, and here not exactly that. */
	check_ctx("lz4 garbage block");
	fill_random(bad + QFT_LZ4_HDR_SIZE, 5000, 11);
	bad[0] = QFT_LZ4_LZ4;
	qft_store32(bad + 1, 100000);
	lz4_frame(&w, bad, QFT_LZ4_HDR_SIZE + 5000);
	CHECK_EQ(replay(&w, true, NULL, &in, &h), -EBADMSG);
	free(w.p);

	/* A RAW chunk is a valid chunk, if a useless one. */
	check_ctx("lz4 raw chunk");
	CHECK_EQ(qft_lz4_encode(NULL, zeros, 10, chunk, cap, &zlen), 0);
	CHECK_EQ(chunk[0], QFT_LZ4_RAW);
	lz4_frame(&w, chunk, zlen);
	CHECK_EQ(replay(&w, true, NULL, &in, &h), 0);
	CHECK_EQ(h.len, 10);
	free(w.p);

	/* Compression not agreed: refused on the header alone. */
	check_ctx("lz4 not agreed");
	lz4_frame(&w, chunk, zlen);
	qbuf_free(&in);
	qbuf_init(&in, FRAME_LIMIT);
	CHECK_EQ(replay(&w, false, NULL, &in, &h), -EBADMSG);
	CHECK_EQ(in.len, QFT_HDR_SIZE);
	CHECK(in.cap <= 4096);
	CHECK_EQ(h.id, 5);
	free(w.p);

	qbuf_free(&in);
	free(bad);
	free(chunk);
	free(zeros);
	check_ctx("%s", "");
}

/*
 * compress=auto on a stream of noise stops trying after a few chunks and
 * only probes now and then; text after it is compressed again soon.
 */
static void test_lz4_auto(void)
{
	static uint8_t json[QFT_MAX_DATA], noise[QFT_MAX_DATA];
	struct qft_chan tx, rx;
	struct qbuf scratch, in;
	struct qft_msg m;
	struct qft_hdr h;
	int sv[2];
	unsigned compressed = 0;

	check_ctx("lz4 auto");
	fill_json(json, sizeof(json), 3);
	fill_random(noise, sizeof(noise), 4);
	make_pair(sv);
	CHECK_EQ(qft_chan_init(&tx, sv[0], sv[0]), 0);
	CHECK_EQ(qft_chan_init(&rx, sv[1], sv[1]), 0);
	qft_chan_set_lz4(&tx, QFT_LZ4_AUTO);
	qft_chan_set_lz4(&rx, QFT_LZ4_AUTO);
	qbuf_init(&scratch, FRAME_LIMIT);
	qbuf_init(&in, FRAME_LIMIT);
	/* One frame at a time, each read before the next is sent: the
	 * receiver's socket buffer never has to hold one. */
	for (int i = 0; i < 60; i++) {
		struct capture cp = { .ch = &tx, .fd = -1, .m = &m };
		pthread_t t;

		noise[0] = (uint8_t)i;
		write_msg(&m, &scratch, i < 40 ? noise : json, QFT_MAX_DATA);
		m.id = (uint64_t)i;
		qbuf_reset(&scratch);
		CHECK_EQ(qft_msg_encode(&scratch, &m), 0);
		start(&t, capture_send_keep, &cp);
		CHECK_EQ(qft_chan_recv(&rx, &in, &h), 0);
		pthread_join(t, NULL);
		CHECK_EQ(cp.r, 0);
		CHECK_EQ(h.id, (uint64_t)i);
		CHECK(same_frame(&in, &scratch));
		if (i >= 40 && rx.st.rx_lz4 > compressed)
			compressed = (unsigned)rx.st.rx_lz4;
	}
	/* Noise: never compressed, and most chunks not even tried. */
	CHECK_EQ(tx.txz.reprobe, QFT_CHAN_LZ4_REPROBE);
	CHECK(tx.txz.skipped >= 40 - QFT_LZ4_AUTO_GIVE_UP -
			       40 / (QFT_CHAN_LZ4_REPROBE + 1));
	/* Text: compressed from at most one back-off period on. */
	CHECK(compressed >= 20 - QFT_CHAN_LZ4_REPROBE);
	CHECK_EQ(tx.st.tx_lz4, rx.st.rx_lz4);
	printf("auto: 40 noise then 20 text frames: %llu compressed, "
	       "%llu skipped untried, %llu rejected by samples\n",
	       (unsigned long long)tx.st.tx_lz4,
	       (unsigned long long)tx.txz.skipped,
	       (unsigned long long)tx.txz.sampled_out);
	qbuf_free(&scratch);
	qbuf_free(&in);
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);
	check_ctx("%s", "");
}

/* HELLO negotiation: what each side asks, accepts and turns on. */
static void test_lz4_negotiation(void)
{
	static const struct {
		enum qft_lz4_mode client;
		uint32_t extra;      /* unknown bits the client adds */
		bool allow;          /* server: not --no-compress */
		enum qft_lz4_mode server_tx, client_tx;
		uint32_t reply;
	} cases[] = {
		{ QFT_LZ4_NONE, 0, true, QFT_LZ4_NONE, QFT_LZ4_NONE, 0 },
		{ QFT_LZ4_ALWAYS, 0, true, QFT_LZ4_ALWAYS, QFT_LZ4_ALWAYS,
		  QFT_FEAT_LZ4 },
		{ QFT_LZ4_AUTO, 0, true, QFT_LZ4_AUTO, QFT_LZ4_AUTO,
		  QFT_FEAT_LZ4 | QFT_FEAT_LZ4_AUTO },
		{ QFT_LZ4_ALWAYS, 0, false, QFT_LZ4_NONE, QFT_LZ4_NONE, 0 },
		{ QFT_LZ4_AUTO, 0, false, QFT_LZ4_NONE, QFT_LZ4_NONE, 0 },
		{ QFT_LZ4_ALWAYS, 0xfff0u, true, QFT_LZ4_ALWAYS,
		  QFT_LZ4_ALWAYS, QFT_FEAT_LZ4 },
		{ QFT_LZ4_NONE, ~QFT_FEAT_KNOWN, true, QFT_LZ4_NONE,
		  QFT_LZ4_NONE, 0 },
	};

	CHECK_EQ(qft_chan_lz4_offer(QFT_LZ4_NONE), 0);
	CHECK_EQ(qft_chan_lz4_offer(QFT_LZ4_ALWAYS), QFT_FEAT_LZ4);
	CHECK_EQ(qft_chan_lz4_offer(QFT_LZ4_AUTO),
		 QFT_FEAT_LZ4 | QFT_FEAT_LZ4_AUTO);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct qft_chan cc, sc;
		uint32_t asked, reply = 0xdead;
		int sv[2];

		check_ctx("negotiation #%zu", i);
		make_pair(sv);
		CHECK_EQ(qft_chan_init(&cc, sv[0], sv[0]), 0);
		CHECK_EQ(qft_chan_init(&sc, sv[1], sv[1]), 0);
		asked = qft_chan_lz4_offer(cases[i].client) | cases[i].extra;
		CHECK_EQ(qft_chan_lz4_accept(&sc, asked, cases[i].allow,
					     &reply), cases[i].server_tx);
		CHECK_EQ(reply, cases[i].reply);
		CHECK_EQ(sc.txz.mode, cases[i].server_tx);
		CHECK_EQ(sc.rx_lz4, cases[i].reply != 0);
		/* A reply with bits the client never asked for turns
		 * nothing more on. */
		CHECK_EQ(qft_chan_lz4_agreed(&cc, cases[i].client,
					     reply | 0xff00u),
			 cases[i].client_tx);
		CHECK_EQ(cc.txz.mode, cases[i].client_tx);
		CHECK_EQ(cc.rx_lz4, cases[i].client_tx != QFT_LZ4_NONE);
		qft_chan_destroy(&cc);
		qft_chan_destroy(&sc);
	}
	check_ctx("%s", "");
}

/* ---- striping ---- */

#define NSTRIPES 4u

/*
 * A striped pair: `tx` sends on its socketpair and NSTRIPES-1 more,
 * `rx` reads the other ends.  The switch frame (a PING) goes the old
 * way; the receiver switches once it has it.
 */
static void striped_pair(struct qft_chan *tx, struct qft_chan *rx,
			 unsigned use, struct qbuf *in)
{
	int sv[2], txs[NSTRIPES - 1], rxs[NSTRIPES - 1];
	uint8_t ping[QFT_HDR_SIZE];
	struct qft_hdr h;

	make_pair(sv);
	CHECK_EQ(qft_chan_init(tx, sv[0], sv[0]), 0);
	CHECK_EQ(qft_chan_init(rx, sv[1], sv[1]), 0);
	for (unsigned i = 0; i < NSTRIPES - 1; i++) {
		make_pair(sv);
		txs[i] = sv[0];
		rxs[i] = sv[1];
	}
	CHECK_EQ(qft_chan_stripes_add(tx, txs, NSTRIPES - 1), 0);
	CHECK_EQ(qft_chan_stripes_add(rx, rxs, NSTRIPES - 1), 0);
	/* once only */
	CHECK_EQ(qft_chan_stripes_add(tx, txs, 1), -EINVAL);
	CHECK_EQ(qft_chan_stripes(tx), NSTRIPES);
	put_header(ping, 0, QFT_OP_PING, 0, 99);
	CHECK_EQ(qft_chan_send_switch(tx, ping, sizeof(ping), NSTRIPES + 1),
		 -EINVAL);
	CHECK_EQ(qft_chan_send_switch(tx, ping, sizeof(ping), use), 0);
	CHECK_EQ(qft_chan_tx_use(tx), use);
	CHECK_EQ(qft_chan_recv(rx, in, &h), 0);
	CHECK_EQ(h.op, QFT_OP_PING);
	CHECK_EQ(h.id, 99);
	qft_chan_recv_switch(rx);
}

/*
 * Concurrent senders over four stripes, sealed or not, compressed or
 * not: every frame arrives intact and in its sender's order, and every
 * stripe carried some.  Then the sender's end: a clean -EPIPE.
 */
static void test_striped(enum qft_lz4_mode mode, bool sealed)
{
	struct qft_chan tx, rx;
	struct sender s[NSENDERS];
	pthread_t t[NSENDERS];
	int next[NSENDERS] = { 0 };
	struct seals k;
	struct qbuf in;
	struct qft_hdr h;
	int received = 0, bad = 0;

	check_ctx("striped, compress=%s, %s", qft_lz4_mode_name(mode),
		  sealed ? "sealed" : "plain");
	qbuf_init(&in, FRAME_LIMIT);
	if (sealed) {
		seals_init(&k);
	}
	striped_pair(&tx, &rx, NSTRIPES, &in);
	if (sealed) {
		/* Sealing from the switch on is the same as from the start:
		 * records are counted across the stripes. */
		qft_chan_set_seal(&tx, &k.tx, NULL);
		qft_chan_set_seal(&rx, NULL, &k.rx);
	}
	start_senders(&tx, &rx, mode, s, t);
	received = receive_senders(&rx, &in, next, &bad);
	for (int i = 0; i < NSENDERS; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(s[i].err, 0);
	}
	CHECK_EQ(received, NSENDERS * PER_SENDER);
	CHECK_EQ(bad, 0);
	for (unsigned i = 0; i < NSTRIPES; i++)
		CHECK(tx.tx_chunks[i] > 0);
	qft_chan_destroy(&tx);
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EPIPE);
	qft_chan_destroy(&rx);
	qbuf_free(&in);
	if (sealed)
		seals_free(&k);
	check_ctx("%s", "");
}

/* A plain frame as one striped chunk behind a raw number. */
static void raw_striped(int fd, uint64_t num, uint16_t op, uint64_t id)
{
	uint8_t b[QFT_CHAN_STRIPE_HDR + QFT_HDR_SIZE];

	qft_store64(b, num);
	qft_store32(b + 8, QFT_HDR_SIZE);
	put_header(b + QFT_CHAN_STRIPE_HDR, 0, op, 0, id);
	raw_write(fd, b, sizeof(b));
}

/* A chunk header alone, with the length given. */
static void raw_chunk_hdr(int fd, uint64_t num, uint32_t len)
{
	uint8_t b[QFT_CHAN_STRIPE_HDR];

	qft_store64(b, num);
	qft_store32(b + 8, len);
	raw_write(fd, b, sizeof(b));
}

/*
 * What a broken or hostile sender makes: a number already past, one
 * that never comes (every stripe's next is later), a stripe cut inside
 * a number; and use=1 keeps everything on the channel's own socket.
 */
static void test_striped_hostile(void)
{
	struct qft_chan tx, rx;
	struct qbuf in;
	struct qft_hdr h;
	uint8_t ping[QFT_HDR_SIZE];

	qbuf_init(&in, FRAME_LIMIT);

	check_ctx("striped: a number never sent");
	striped_pair(&tx, &rx, NSTRIPES, &in);
	for (unsigned i = 0; i < NSTRIPES; i++)
		raw_striped(i ? tx.sfd[i] : tx.wfd, 5 + i, QFT_OP_PING, i);
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EBADMSG);
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);

	check_ctx("striped: a number already past");
	striped_pair(&tx, &rx, NSTRIPES, &in);
	raw_striped(tx.sfd[2], 0, QFT_OP_PING, 1);
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), 0);
	raw_striped(tx.sfd[1], 0, QFT_OP_PING, 2);
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EBADMSG);
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);

	check_ctx("striped: chunk lengths 0 and over the chunk size");
	striped_pair(&tx, &rx, NSTRIPES, &in);
	raw_chunk_hdr(tx.wfd, 0, 0);
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EBADMSG);
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);
	striped_pair(&tx, &rx, NSTRIPES, &in);
	raw_chunk_hdr(tx.sfd[1], 0, QFT_CHAN_STRIPE_CHUNK + 1);
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EBADMSG);
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);

	check_ctx("striped: a frame split over chunks of two stripes");
	striped_pair(&tx, &rx, NSTRIPES, &in);
	{
		uint8_t f[QFT_HDR_SIZE];

		put_header(f, 0, QFT_OP_PING, 0, 42);
		raw_chunk_hdr(tx.sfd[2], 1, QFT_HDR_SIZE - 5);
		raw_write(tx.sfd[2], f + 5, QFT_HDR_SIZE - 5);
		raw_chunk_hdr(tx.wfd, 0, 5);
		raw_write(tx.wfd, f, 5);
		CHECK_EQ(qft_chan_recv(&rx, &in, &h), 0);
		CHECK_EQ(h.op, QFT_OP_PING);
		CHECK_EQ(h.id, 42);
	}
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);

	check_ctx("striped: a stripe cut inside a number");
	striped_pair(&tx, &rx, NSTRIPES, &in);
	raw_write(tx.sfd[3], "\0\0\0", 3);
	close(tx.sfd[3]);
	tx.sfd[3] = -1;
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EIO);
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);

	check_ctx("striped: use=1 sends on the channel's own socket");
	striped_pair(&tx, &rx, 1, &in);
	put_header(ping, 0, QFT_OP_PING, 0, 7);
	for (int i = 0; i < 20; i++)
		CHECK_EQ(qft_chan_send(&tx, ping, sizeof(ping)), 0);
	for (int i = 0; i < 20; i++)
		CHECK_EQ(qft_chan_recv(&rx, &in, &h), 0);
	CHECK_EQ(tx.tx_chunks[0], 20);
	for (unsigned i = 1; i < NSTRIPES; i++)
		CHECK_EQ(tx.tx_chunks[i], 0);
	/* the receiver waits on the one stripe that holds what is due */
	{
		int fds[QFT_CHAN_MAX_STRIPES];

		CHECK_EQ(qft_chan_rx_fds(&rx, fds, QFT_CHAN_MAX_STRIPES),
			 (int)NSTRIPES);
		CHECK_EQ(qft_chan_send(&tx, ping, sizeof(ping)), 0);
		CHECK_EQ(qft_chan_recv(&rx, &in, &h), 0);
	}
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);
	qbuf_free(&in);
	check_ctx("%s", "");
}

/*
 * The verdicts that grow the stripes: a first sample only primes; too
 * few segments are no verdict (the counts go on); loss must be seen in
 * QFT_CHAN_LOSS_VERDICTS verdicts in a row, so a burst between clean
 * stretches grows nothing; counts that go back start afresh.
 */
static void test_loss_verdicts(void)
{
	const uint64_t n = QFT_CHAN_LOSS_SEGS;
	/* Just at the threshold, and just under it. */
	const uint64_t lossy = (n * QFT_CHAN_LOSS_PPM + 999999) / 1000000;
	struct qft_chan_loss g = { 0 };
	uint64_t segs = 1000, resent = 7;

	check_ctx("%s", "loss verdicts");
	CHECK(!qft_chan_loss_step(&g, segs, resent));      /* primes */
	CHECK(g.primed);
	/* Too few to judge, however many were resent. */
	CHECK(!qft_chan_loss_step(&g, segs + n - 1, resent + n));
	CHECK_EQ(g.lossy, 0);
	/* ... and they count toward the next verdict: lossy. */
	segs += n;
	resent += n;
	CHECK(!qft_chan_loss_step(&g, segs, resent));
	CHECK_EQ(g.lossy, 1);
	/* A clean verdict breaks the row. */
	segs += n;
	CHECK(!qft_chan_loss_step(&g, segs, resent + lossy - 1));
	resent += lossy - 1;
	CHECK_EQ(g.lossy, 0);
	/* Bursts between clean stretches never grow anything. */
	for (int i = 0; i < 20; i++) {
		segs += n;
		resent += i % 2 ? 0 : n / 2;
		CHECK(!qft_chan_loss_step(&g, segs, resent));
	}
	/* Loss all the time: the third verdict in a row says grow. */
	for (unsigned i = 1; i <= QFT_CHAN_LOSS_VERDICTS; i++) {
		segs += n;
		resent += lossy;
		CHECK_EQ(qft_chan_loss_step(&g, segs, resent),
			 i == QFT_CHAN_LOSS_VERDICTS);
	}
	/* Counts that went back (other sockets): a new start. */
	CHECK(!qft_chan_loss_step(&g, 10, 0));
	CHECK_EQ(g.lossy, 0);
	CHECK_EQ(g.segs, 10);
	/* Huge counts do not overflow the comparison. */
	g = (struct qft_chan_loss){ 0 };
	CHECK(!qft_chan_loss_step(&g, UINT64_MAX / 2, 0));
	CHECK(!qft_chan_loss_step(&g, UINT64_MAX / 2 + n, 0));
	CHECK_EQ(g.lossy, 0);
	check_ctx("%s", "");
}

/*
 * qft_chan_tx_grow: nothing before the switch; never past the stripes
 * the channel has; and over sockets that are not TCP, which cannot say
 * what they lose, the use stays where it began however much is sent.
 */
static void test_grow_bounds(void)
{
	struct qft_chan tx, rx;
	struct qbuf in;
	struct qft_hdr h;
	uint8_t ping[QFT_HDR_SIZE];

	check_ctx("%s", "grow bounds");
	qbuf_init(&in, FRAME_LIMIT);
	striped_pair(&tx, &rx, 2, &in);
	qft_chan_tx_grow(&tx, 64);
	CHECK_EQ(tx.tx_max, NSTRIPES);
	CHECK_EQ(qft_chan_tx_use(&tx), 2);
	put_header(ping, 0, QFT_OP_PING, 0, 7);
	for (int i = 0; i < 400; i++) {
		/* Past a probe interval now and then. */
		if (i % 100 == 0)
			tx.tx_probe_ns = 0;
		CHECK_EQ(qft_chan_send(&tx, ping, sizeof(ping)), 0);
		CHECK_EQ(qft_chan_recv(&rx, &in, &h), 0);
	}
	CHECK_EQ(qft_chan_tx_use(&tx), 2);
	CHECK_EQ(tx.tx_max, 2);
	/* Chunks came in on the two in use. */
	CHECK_EQ(qft_chan_rx_used(&rx), 2);
	qft_chan_destroy(&tx);
	qft_chan_destroy(&rx);
	qbuf_free(&in);
	check_ctx("%s", "");
}

int main(void)
{
	/* A dead peer must show up as -EPIPE, not kill the process. */
	signal(SIGPIPE, SIG_IGN);
	alarm(120);
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 251 + (i >> 9));

	test_request_reply();
	test_bad_headers();
	test_end_of_stream();
	test_shutdown();
	test_send_errors();
	test_sticky_send_error();
	test_pipes();
	test_concurrent_senders(QFT_LZ4_NONE);
	test_concurrent_senders(QFT_LZ4_ALWAYS);
	test_concurrent_senders(QFT_LZ4_AUTO);
	test_lz4_round_trips();
	test_lz4_hostile();
	test_lz4_auto();
	test_lz4_negotiation();
	test_striped(QFT_LZ4_NONE, false);
	test_striped(QFT_LZ4_NONE, true);
	test_striped(QFT_LZ4_ALWAYS, true);
	test_striped_hostile();
	test_loss_verdicts();
	test_grow_bounds();
	return check_exit("test_chan");
}
