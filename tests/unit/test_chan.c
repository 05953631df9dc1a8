// SPDX-License-Identifier: MIT
/*
 * Unit test of common/chan.c: frames over a socketpair (and a pipe pair)
 * between threads, the receiver's limits and end-of-stream results, and
 * senders racing on one channel.  alarm() bounds the whole run, so a
 * deadlock fails the test instead of hanging it.
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
#include "msg.h"
#include "protocol.h"

#define FRAME_LIMIT (QFT_HDR_SIZE + QFT_MAX_PAYLOAD)

static uint8_t pattern[QFT_MAX_DATA];

static void make_pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(errno == EAFNOSUPPORT || errno == EPERM ? T_SKIP : 1);
	}
}

static void start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int r = pthread_create(t, NULL, fn, arg);

	if (r) {
		fprintf(stderr, "pthread_create: %s\n", strerror(r));
		exit(1);
	}
}

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

static void test_concurrent_senders(void)
{
	struct qft_chan tx, rx;
	struct sender s[NSENDERS];
	pthread_t t[NSENDERS];
	int next[NSENDERS] = { 0 };
	struct qbuf in;
	struct qft_hdr h;
	struct qft_msg m;
	int sv[2], received = 0, bad = 0, r;

	check_ctx("concurrent senders");
	make_pair(sv);
	CHECK_EQ(qft_chan_init(&tx, sv[0], sv[0]), 0);
	CHECK_EQ(qft_chan_init(&rx, sv[1], sv[1]), 0);
	for (int i = 0; i < NSENDERS; i++) {
		s[i] = (struct sender){ .ch = &tx, .idx = i };
		start(&t[i], sender_run, &s[i]);
	}
	qbuf_init(&in, FRAME_LIMIT);
	while (received < NSENDERS * PER_SENDER) {
		r = qft_chan_recv(&rx, &in, &h);
		if (r < 0) {
			CHECK_EQ(r, 0);
			break;
		}
		/* Every frame decodes and carries exactly its sender's bytes. */
		r = qft_msg_decode(&m, in.data, in.len);
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
		if (!ok && ++bad <= 3)
			CHECK(!"frame from a sender arrived intact and in order");
		if (idx >= 0 && idx < NSENDERS)
			next[idx] = seq + 1;
		received++;
	}
	for (int i = 0; i < NSENDERS; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(s[i].err, 0);
		CHECK_EQ(next[i], PER_SENDER);
	}
	CHECK_EQ(received, NSENDERS * PER_SENDER);
	CHECK_EQ(bad, 0);
	qft_chan_destroy(&tx);
	/* All senders done and the channel closed: a clean end. */
	CHECK_EQ(qft_chan_recv(&rx, &in, &h), -EPIPE);
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
	test_concurrent_senders();
	return check_exit("test_chan");
}
