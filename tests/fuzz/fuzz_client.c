// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the client's side of a connection (fuse/net/) reading
 * what a hostile server sends: the HELLO reply, then replies matched to
 * requests by id, checked against their request's opcode, decoded, and
 * for READDIR walked entry by entry (qc_readdir_check, which fuse/fs/dir/readdir.c
 * runs before it hands any entry to the kernel), and NOTIFY frames
 * (change notification) where the client asked for them.
 *
 * The fuzzer plays the server.  Input:
 *   byte 0     options: bit 0, the stream starts with the HELLO reply
 *              (else the harness answers HELLO itself); bit 1, the client
 *              offers lz4 (-o compress=lz4), and the harness's HELLO reply
 *              accepts it, so compressed replies are allowed; bit 2, the
 *              client asks for change notification (want_notify), and
 *              the harness's HELLO reply grants it, so NOTIFY frames are
 *              allowed; bit 3, the harness's HELLO reply grants
 *              PROGRESS frames (QFT_FEAT_PROGRESS, which the client always
 *              asks for), so frames with QFT_F_PROGRESS restart the
 *              deadlines of the requests they name; bit 4, the call
 *              selectors also reach SCAN and SYNCFS (calls[] below; the
 *              other inputs keep their meaning)
 *   byte 1     number of calls, modulo MAX_CALLS + 1
 *   bytes 2..  one byte per call choosing its request (calls[] below)
 *   the rest   the server's byte stream
 * The client's ids are 1 for HELLO and 2, 3, ... for the calls in order.
 * Every call is made with qc_call_async (CLOSE with qc_send_noreply, as
 * for released handles) before a byte of the stream after HELLO is
 * written, so which reply finds which waiter depends on the input alone;
 * then the stream is written, ended, and the connection shut down.
 *
 * Oracles besides the sanitizers: every call completes exactly once; a
 * success carries the reply to its own request (same opcode and id, a
 * reply, status OK); a failure is a negative errno and no reply; a READDIR
 * that qc_readdir_check accepts has only names without '/' or NUL that are
 * valid or "." or "..", as many as it counted; a READLINK target is a
 * non-empty string that fits a path; a notification handed to the
 * callback has a known kind, a NUL-terminated name that is empty or a
 * valid name (empty for GONE and ALL), inode 0 exactly for ALL; none comes
 * where the client did not ask, and where the harness granted them the
 * link's end delivers ALL last; a PROGRESS frame completes no call (each
 * completes once, with its own reply), and one that was not granted ends
 * the link like any stray frame.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "buf.h"
#include "net/conn.h"
#include "fuzz.h"
#include "log.h"
#include "msg.h"
#include "protocol.h"

#define OPT_HELLO_IN_INPUT 0x01
#define OPT_LZ4            0x02
#define OPT_NOTIFY         0x04
#define OPT_PROGRESS       0x08
#define OPT_MORE_CALLS     0x10
#define MAX_CALLS          16

struct call {
	struct qft_msg req;
	bool noreply;
	/* Written by the completion (reader thread), read after shutdown,
	 * which joins that thread. */
	int completions;
	int err;
	uint64_t got_id;
};

static const uint8_t wdata[100] = { 'w' };

/* What the notification callback saw; written on the reader thread (or
 * the one that failed the link), read after qc_conn_free joined it. */
struct notes {
	unsigned calls;
	uint32_t last_kind;
};

static void notify_cb(void *ctx, uint64_t ino, uint32_t kind,
		      const char *name, size_t namelen)
{
	struct notes *n = ctx;

	n->calls++;
	n->last_kind = kind;
	FUZZ_CHECK(kind == QFT_NOTIFY_CHANGED || kind == QFT_NOTIFY_GONE ||
		   kind == QFT_NOTIFY_ALL);
	FUZZ_CHECK(name != NULL && strlen(name) == namelen);
	FUZZ_CHECK(namelen == 0 || qft_name_valid(name, namelen));
	FUZZ_CHECK(kind == QFT_NOTIFY_CHANGED || namelen == 0);
	FUZZ_CHECK((kind == QFT_NOTIFY_ALL) == (ino == 0));
}

/* The request that selector `sel` stands for. */
static void make_call(struct call *k, uint8_t sel, bool more)
{
	struct qft_msg *m = &k->req;

	memset(k, 0, sizeof(*k));
	switch (more ? sel % 24 : sel % 22) {
	case 0:
		qft_msg_init(m, QFT_OP_LSTAT, 0);
		m->path.s = "a";
		m->path.len = 1;
		break;
	case 1:
		qft_msg_init(m, QFT_OP_FSTAT, 0);
		m->handle = 1;
		break;
	case 2:
	case 3:
		qft_msg_init(m, QFT_OP_READDIR, 0);
		m->handle = 1;
		m->length = 4096;
		m->opflags = sel % 22 == 3 ? QFT_READDIR_PLUS : 0;
		break;
	case 4:
	case 5:
		qft_msg_init(m, QFT_OP_READ, 0);
		m->handle = 1;
		m->length = sel % 22 == 4 ? 4096 : QFT_MAX_DATA;
		break;
	case 6:
		qft_msg_init(m, QFT_OP_WRITE, 0);
		m->handle = 1;
		m->data.p = wdata;
		m->data.len = sizeof(wdata);
		break;
	case 7:
		qft_msg_init(m, QFT_OP_READLINK, 0);
		m->path.s = "ln";
		m->path.len = 2;
		break;
	case 8:
	case 9:
		qft_msg_init(m, QFT_OP_GETXATTR, 0);
		m->path.s = "a";
		m->path.len = 1;
		m->xname.s = "user.k";
		m->xname.len = 6;
		m->length = sel % 22 == 8 ? 0 : 64;
		break;
	case 10:
		qft_msg_init(m, QFT_OP_LISTXATTR, 0);
		m->path.s = "";
		m->length = 1024;
		break;
	case 11:
		qft_msg_init(m, QFT_OP_OPEN, 0);
		m->handle = 2;
		m->path.s = "a";
		m->path.len = 1;
		m->opflags = QFT_O_RDWR;
		break;
	case 12:
		qft_msg_init(m, QFT_OP_CREATE, 0);
		m->handle = 3;
		m->path.s = "";
		m->name.s = "n";
		m->name.len = 1;
		m->opflags = QFT_O_RDWR;
		m->mode = 0644;
		break;
	case 13:
		qft_msg_init(m, QFT_OP_STATFS, 0);
		m->path.s = "";
		break;
	case 14:
		qft_msg_init(m, QFT_OP_SYMLINK, 0);
		m->path.s = "";
		m->name.s = "s";
		m->name.len = 1;
		m->target.s = "a";
		m->target.len = 1;
		break;
	case 15:
		qft_msg_init(m, QFT_OP_OPENDIR, 0);
		m->handle = 4;
		m->path.s = "d";
		m->path.len = 1;
		break;
	case 16:
		qft_msg_init(m, QFT_OP_SETATTR, 0);
		m->path.s = "a";
		m->path.len = 1;
		m->valid = QFT_SET_MODE;
		m->mode = 0600;
		break;
	case 17:
		qft_msg_init(m, QFT_OP_MKDIR, 0);
		m->path.s = "";
		m->name.s = "m";
		m->name.len = 1;
		m->mode = 0755;
		break;
	case 18:
		qft_msg_init(m, QFT_OP_FLUSH, 0);
		m->handle = 1;
		break;
	case 19:
		qft_msg_init(m, QFT_OP_PING, 0);
		break;
	case 20:
		qft_msg_init(m, QFT_OP_CLOSE, 0);
		m->handle = 1;
		k->noreply = true;
		break;
	case 22:
		qft_msg_init(m, QFT_OP_SCAN, 0);
		m->handle = 4;
		m->length = QFT_MAX_SCAN;
		m->opflags = QFT_SCAN_WATCH;
		break;
	case 23:
		qft_msg_init(m, QFT_OP_SYNCFS, 0);
		break;
	case 21:
		qft_msg_init(m, QFT_OP_UNLINK, 0);
		m->path.s = "";
		m->name.s = "a";
		m->name.len = 1;
		break;
	}
}

/* What fuse/fs/dir/readdir.c relies on once a READDIR reply passed the check. */
static void check_readdir(const struct qft_msg *m, bool plus)
{
	struct qft_dirent d;
	struct qcur c;
	int n, seen = 0;

	n = qc_readdir_check(&m->data, plus);
	if (n < 0) {
		FUZZ_CHECK(n == -EIO);
		return;
	}
	qcur_init(&c, m->data.p, m->data.len);
	while (c.left) {
		FUZZ_CHECK(qft_dirent_decode(&c, &d, plus) == 0);
		FUZZ_CHECK(strlen(d.name.s) == d.name.len);
		FUZZ_CHECK(!memchr(d.name.s, '/', d.name.len));
		FUZZ_CHECK(qft_name_valid(d.name.s, d.name.len) ||
			   strcmp(d.name.s, ".") == 0 ||
			   strcmp(d.name.s, "..") == 0);
		FUZZ_CHECK(plus || !d.has_attr);
		seen++;
	}
	FUZZ_CHECK(seen == n);
}

static void call_done(void *ctx, int err, struct qc_reply *rep)
{
	struct call *k = ctx;
	const struct qft_msg *m;

	k->completions++;
	k->err = err;
	if (err < 0) {
		FUZZ_CHECK(rep == NULL && err >= -4095);
		return;
	}
	FUZZ_CHECK(err == 0 && rep != NULL);
	m = &rep->msg;
	k->got_id = m->id;
	FUZZ_CHECK(m->op == k->req.op);
	FUZZ_CHECK(m->flags & QFT_F_REPLY);
	FUZZ_CHECK(m->status == QFT_OK);
	switch (m->op) {
	case QFT_OP_READDIR:
		check_readdir(m, k->req.opflags & QFT_READDIR_PLUS);
		break;
	case QFT_OP_READLINK:
		FUZZ_CHECK(m->target.s && m->target.len > 0 &&
			   m->target.len <= QFT_MAX_PATH &&
			   strlen(m->target.s) == m->target.len);
		break;
	case QFT_OP_READ:
	case QFT_OP_GETXATTR:
	case QFT_OP_LISTXATTR:
		FUZZ_CHECK(m->data.len <= QFT_MAX_DATA);
		break;
	}
}

/* How many leading bytes of p[0..n) make one whole frame, or n. */
static size_t first_frame(const uint8_t *p, size_t n)
{
	uint32_t len;

	if (n < QFT_HDR_SIZE)
		return n;
	len = qft_load32(p);
	return n - QFT_HDR_SIZE < len ? n : QFT_HDR_SIZE + len;
}

static void hello_reply(int fd, bool lz4, bool notify, bool progress)
{
	struct qft_msg m;
	struct qbuf b;

	qft_msg_init(&m, QFT_OP_HELLO, 1);
	m.flags = QFT_F_REPLY;
	m.magic = QFT_MAGIC;
	m.version = QFT_VERSION;
	m.features = (lz4 ? QFT_FEAT_LZ4 : 0) |
		     (notify ? QFT_FEAT_NOTIFY : 0) |
		     (progress ? QFT_FEAT_PROGRESS : 0);
	qbuf_init(&b, 256);
	FUZZ_CHECK(qft_msg_encode(&b, &m) == 0);
	fuzz_send_all(fd, b.data, b.len);
	qbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready, debug;
	struct call calls[MAX_CALLS];
	struct qc_conn_opts o;
	struct qc_endpoint ep;
	struct notes notes = { 0 };
	struct qc_conn *c;
	size_t ncalls, n;
	char msg[256];
	uint8_t opts;
	int sv[2];

	if (size < 2)
		return 0;
	if (!ready) {
		/* QFTFS_FUZZ_DEBUG=1 shows what the client logs and how
		 * each call ended. */
		debug = getenv("QFTFS_FUZZ_DEBUG") != NULL;
		qft_log_init("fuzz_client", debug ? QFT_LOG_DEBUG :
			     QFT_LOG_ERR);
		ready = true;
	}
	opts = data[0];
	ncalls = data[1] % (MAX_CALLS + 1);
	data += 2;
	size -= 2;
	if (size < ncalls)
		return 0;
	for (size_t i = 0; i < ncalls; i++)
		make_call(&calls[i], data[i], opts & OPT_MORE_CALLS);
	data += ncalls;
	size -= ncalls;

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
			      sv) == 0);
	memset(&o, 0, sizeof(o));
	o.timeout_s = 30;       /* never reached: nothing here waits */
	o.keepalive_s = 0;
	o.reconnect = false;
	o.host = "fuzz";
	o.compress = (opts & OPT_LZ4) ? QFT_LZ4_ALWAYS : QFT_LZ4_NONE;
	o.want_notify = opts & OPT_NOTIFY;
	o.notify = notify_cb;
	o.notify_ctx = &notes;
	memset(&ep, 0, sizeof(ep));
	ep.fd = sv[0];
	FUZZ_CHECK(qc_conn_new(&c, &o, &ep) == 0);

	/* The HELLO reply is in the socket before the client asks: its
	 * receive must not wait. */
	if (opts & OPT_HELLO_IN_INPUT) {
		n = first_frame(data, size);
		fuzz_send_all(sv[1], data, n);
		data += n;
		size -= n;
		if (size == 0)
			shutdown(sv[1], SHUT_WR);
	} else {
		hello_reply(sv[1], opts & OPT_LZ4, opts & OPT_NOTIFY,
			    opts & OPT_PROGRESS);
	}
	if (qc_conn_hello(c, 5, msg, sizeof(msg)) < 0) {
		qc_conn_free(c);
		close(sv[1]);
		return 0;
	}
	FUZZ_CHECK(qc_conn_start(c) == 0);

	for (size_t i = 0; i < ncalls; i++) {
		struct call *k = &calls[i];

		if (k->noreply) {
			(void)qc_send_noreply(c, 1, &k->req);
			continue;
		}
		(void)qc_call_async(c, 1, &k->req, call_done, k);
	}
	fuzz_send_all(sv[1], data, size);
	shutdown(sv[1], SHUT_WR);
	/* Returns once the client read the whole stream (its end closes the
	 * link): every completion has run by then. */
	(void)qc_conn_shutdown(c, 5000, 0);
	qc_conn_free(c);
	close(sv[1]);

	if (!(opts & OPT_NOTIFY))
		FUZZ_CHECK(notes.calls == 0);
	else if (!(opts & OPT_HELLO_IN_INPUT))
		FUZZ_CHECK(notes.calls > 0 &&
			   notes.last_kind == QFT_NOTIFY_ALL);
	for (size_t i = 0; i < ncalls; i++) {
		const struct call *k = &calls[i];

		if (k->noreply)
			continue;
		if (debug)
			fprintf(stderr, "fuzz_client: %s id %llu: %s\n",
				qft_op_name(k->req.op),
				(unsigned long long)k->req.id,
				k->err ? strerror(-k->err) : "ok");
		FUZZ_CHECK(k->completions == 1);
		if (k->err == 0)
			FUZZ_CHECK(k->got_id == k->req.id);
	}
	return 0;
}
