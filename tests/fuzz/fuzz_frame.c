// SPDX-License-Identifier: MIT
/*
 * Fuzz target: everything that turns bytes from the peer into frames and
 * messages, on both sides of the connection.
 *
 * The first input byte picks a mode (its low 7 bits modulo 5) and, with
 * its top bit, lets the stream modes accept compressed (QFT_F_LZ4) frames
 * as after a HELLO that agreed on it; the rest is the subject:
 *   0  one frame: qft_hdr_decode and qft_msg_decode (request or reply, as
 *      its flags say), then READDIR entries or SCAN records when it
 *      carries them (qft_scan_check, then a walk of the records);
 *   1  one lz4 chunk: qft_lz4_decode and qft_lz4_decode_view;
 *   2  a plain byte stream read by qft_chan_recv until it fails;
 *   3  a sealed stream as it arrives (record lengths, bodies, tags): the
 *      record parser and the failing AEAD open;
 *   4  a sealed stream whose records the harness seals with the fixed test
 *      key, so the open succeeds and what is inside is checked: the rest
 *      is a list of [u16 big-endian length][that many bytes] records.
 * In modes 3 and 4 the second byte picks the cipher (modulo 3).
 *
 * Oracles besides the sanitizers: a message that decodes must encode back
 * to exactly the bytes it came from (the codec is canonical, so the two
 * directions cannot disagree), and so must each READDIR entry and SCAN
 * record (a HELLO of another version is decoded only up to its version,
 * so it alone is not canonical); an entry name is a valid name or "." or
 * ".."; what qft_scan_check accepts walks record by record to the end with
 * valid names and indexes of directories already announced; the two lz4 decoders agree; a
 * decoded chunk encodes and decodes back to itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "chan.h"
#include "fuzz.h"
#include "lz4chunk.h"
#include "msg.h"
#include "protocol.h"
#include "seal.h"

/* Pipes are grown to this so that a whole input fits without a writer
 * thread; 1 MiB is the default /proc/sys/fs/pipe-max-size. */
#define PIPE_SIZE (1 << 20)

static void check_dirents(const struct qft_blob *data)
{
	struct qft_dirent d;
	struct qbuf b;
	struct qcur c;

	qbuf_init(&b, QFT_MAX_READDIR);
	qcur_init(&c, data->p, data->len);
	while (c.left) {
		const uint8_t *start = c.p;

		if (qft_dirent_decode(&c, &d, true) < 0)
			break;
		FUZZ_CHECK(strlen(d.name.s) == d.name.len);
		FUZZ_CHECK(qft_name_valid(d.name.s, d.name.len) ||
			   strcmp(d.name.s, ".") == 0 ||
			   strcmp(d.name.s, "..") == 0);
		FUZZ_CHECK(!memchr(d.name.s, '/', d.name.len));
		qbuf_reset(&b);
		FUZZ_CHECK(qft_dirent_encode(&b, &d) == 0);
		FUZZ_CHECK(b.len == (size_t)(c.p - start));
		FUZZ_CHECK(memcmp(b.data, start, b.len) == 0);
	}
	qbuf_free(&b);
}

/* What a client relies on once qft_scan_check accepted a SCAN blob. */
static void check_scan(const struct qft_blob *data)
{
	struct qft_scan_rec rec;
	uint64_t next;
	uint32_t base;
	struct qbuf b;
	struct qcur c;
	int n, k = 0;

	n = qft_scan_check(data);
	if (n < 0) {
		FUZZ_CHECK(n == -EBADMSG || n == -EINVAL);
		return;
	}
	qbuf_init(&b, 4096);
	qcur_init(&c, data->p, data->len);
	FUZZ_CHECK(qft_scan_head_decode(&c, &base) == 0 && base > 0);
	next = base;
	while (c.left) {
		const uint8_t *start = c.p;

		FUZZ_CHECK(qft_scan_rec_decode(&c, &rec) == 0);
		if (c.p == start)
			break;
		FUZZ_CHECK(rec.index < next);
		if (rec.kind == QFT_SCAN_REC_ENTRY) {
			FUZZ_CHECK(qft_name_valid(rec.name.s, rec.name.len));
			FUZZ_CHECK(strlen(rec.name.s) == rec.name.len);
			if ((rec.attr.mode & QFT_S_IFMT) == QFT_S_IFDIR)
				next++;
		} else {
			FUZZ_CHECK(rec.kind == QFT_SCAN_REC_DIR_END);
		}
		qbuf_reset(&b);
		FUZZ_CHECK(qft_scan_rec_encode(&b, &rec) == 0);
		FUZZ_CHECK(b.len == (size_t)(c.p - start));
		FUZZ_CHECK(memcmp(b.data, start, b.len) == 0);
		k++;
	}
	FUZZ_CHECK(k == n);
	qbuf_free(&b);
}

/* Decodes one whole frame and checks what a successful decode promises. */
static void check_frame(const uint8_t *p, size_t n)
{
	struct qft_hdr h;
	struct qft_msg m;
	struct qbuf b;
	int hr, mr;

	hr = qft_hdr_decode(&h, p, n);
	mr = qft_msg_decode(&m, p, n);
	if (hr < 0) {
		FUZZ_CHECK(mr == hr);
		return;
	}
	FUZZ_CHECK(h.len <= QFT_MAX_PAYLOAD);
	if (mr < 0) {
		FUZZ_CHECK(mr == -EBADMSG || mr == -EINVAL);
		return;
	}
	FUZZ_CHECK(n == QFT_HDR_SIZE + h.len);
	FUZZ_CHECK(m.op == h.op && m.id == h.id && m.flags == h.flags);
	FUZZ_CHECK(m.data.len <= QFT_MAX_DATA);
	if (m.path.s)
		FUZZ_CHECK(qft_path_valid(m.path.s, m.path.len));
	/* A NOTIFY's name may be empty (the whole directory). */
	if (m.name.s && !(m.op == QFT_OP_NOTIFY && m.name.len == 0))
		FUZZ_CHECK(qft_name_valid(m.name.s, m.name.len));
	if (m.op == QFT_OP_NOTIFY)
		FUZZ_CHECK(m.flags == QFT_F_NOTIFY && m.id == 0 &&
			   m.kind >= QFT_NOTIFY_CHANGED &&
			   m.kind <= QFT_NOTIFY_ALL &&
			   (m.kind == QFT_NOTIFY_ALL) == (m.ino == 0) &&
			   (m.kind == QFT_NOTIFY_CHANGED || !m.name.len));
	if (m.target.s)
		FUZZ_CHECK(m.target.len > 0 && m.target.len <= QFT_MAX_PATH &&
			   strlen(m.target.s) == m.target.len);

	/* A HELLO of another version: the rest of it was not decoded. */
	if (m.op == QFT_OP_HELLO && m.version != QFT_VERSION) {
		FUZZ_CHECK(m.magic == QFT_MAGIC);
		return;
	}
	/* Canonical: encoding what was decoded gives the same bytes. */
	qbuf_init(&b, QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	FUZZ_CHECK(qft_msg_encode(&b, &m) == 0);
	FUZZ_CHECK(b.len == n && memcmp(b.data, p, n) == 0);
	qbuf_free(&b);

	if (m.op == QFT_OP_READDIR && (m.flags & QFT_F_REPLY) &&
	    m.status == QFT_OK)
		check_dirents(&m.data);
	if (m.op == QFT_OP_SCAN && (m.flags & QFT_F_REPLY) &&
	    m.status == QFT_OK)
		check_scan(&m.data);
}

static void fuzz_lz4(const uint8_t *p, size_t n)
{
	static uint8_t out[QFT_LZ4_MAX_CHUNK], scratch[QFT_LZ4_MAX_CHUNK];
	static uint8_t again[QFT_LZ4_MAX_CHUNK + QFT_LZ4_HDR_SIZE];
	const uint8_t *view;
	size_t len, vlen, elen, dlen;
	int r, rv;

	r = qft_lz4_decode(p, n, out, sizeof(out), &len);
	rv = qft_lz4_decode_view(p, n, scratch, sizeof(scratch), &view, &vlen);
	FUZZ_CHECK((r == 0) == (rv == 0));
	if (r < 0) {
		FUZZ_CHECK(r == -EBADMSG || r == -EMSGSIZE);
		return;
	}
	FUZZ_CHECK(len == vlen && len <= QFT_LZ4_MAX_CHUNK);
	FUZZ_CHECK(memcmp(out, view, len) == 0);
	/* What came out goes back in and out unchanged. */
	r = qft_lz4_encode(NULL, out, len, again, sizeof(again), &elen);
	FUZZ_CHECK(r == 0 && elen <= qft_lz4_bound(len));
	r = qft_lz4_decode(again, elen, scratch, sizeof(scratch), &dlen);
	FUZZ_CHECK(r == 0 && dlen == len && memcmp(scratch, out, len) == 0);
}

/*
 * A pipe holding p[0..n), or as much of it as fits, then end of stream.
 * Both ends are non-blocking: the writer must never wait (nobody reads
 * yet), and the reader never has to, since the writer is gone by then.
 */
static int stream_of(const uint8_t *p, size_t n, int *rfd)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	if (n > 65536)
		(void)fcntl(fds[1], F_SETPIPE_SZ, PIPE_SIZE);
	while (n) {
		ssize_t w = write(fds[1], p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;    /* full: the rest is cut off */
		p += w;
		n -= (size_t)w;
	}
	close(fds[1]);
	*rfd = fds[0];
	return 0;
}

/* Receives frames from `rfd` until the stream fails; closes rfd. */
static void drain(int rfd, struct qft_seal *rx, bool lz4)
{
	struct qft_chan c;
	struct qft_hdr h;
	struct qbuf in;
	int r;

	FUZZ_CHECK(qft_chan_init(&c, rfd, -1) == 0);
	if (rx)
		qft_chan_set_seal(&c, NULL, rx);
	if (lz4)
		qft_chan_set_lz4(&c, QFT_LZ4_NONE);
	qbuf_init(&in, QFT_CHAN_RECV_LIMIT);
	while ((r = qft_chan_recv(&c, &in, &h)) == 0) {
		FUZZ_CHECK(in.len == QFT_HDR_SIZE + h.len);
		check_frame(in.data, in.len);
	}
	FUZZ_CHECK(r == -EPIPE || r == -EIO || r == -EBADMSG ||
		   r == -ENOSYS);
	/* A failed record is final: nothing after it is ever opened. */
	if (rx && rx->failed)
		FUZZ_CHECK(r == -EBADMSG);
	qbuf_free(&in);
	qft_chan_destroy(&c);
}

static const uint8_t test_key[QFT_KEY_SIZE] = {
	0x71, 0x66, 0x74, 0x66, 0x73, 0x2d, 0x66, 0x75,
	0x7a, 0x7a, 0x2d, 0x6b, 0x65, 0x79, 0x00, 0x01,
	0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
	0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
};

/* Seals each [u16 length][bytes] piece of p[0..n) as one record. */
static int seal_pieces(struct qft_seal *tx, const uint8_t *p, size_t n,
		       struct qbuf *out)
{
	while (n >= 2) {
		size_t len = qft_load16(p);

		p += 2;
		n -= 2;
		if (len > n)
			len = n;
		if (qft_seal_record(tx, p, len, out) < 0)
			return -EIO;
		p += len;
		n -= len;
	}
	return 0;
}

static void fuzz_sealed(const uint8_t *p, size_t n, bool seal_here, bool lz4)
{
	struct qft_seal tx, rx;
	enum qft_cipher cipher;
	struct qbuf stream;
	int rfd;

	if (n < 1)
		return;
	cipher = (enum qft_cipher)(p[0] % QFT_CIPHER__COUNT);
	p++;
	n--;
	FUZZ_CHECK(qft_seal_init(&rx, cipher, test_key, false) == 0);
	if (seal_here) {
		FUZZ_CHECK(qft_seal_init(&tx, cipher, test_key, true) == 0);
		qbuf_init(&stream, 2 * PIPE_SIZE);
		if (seal_pieces(&tx, p, n, &stream) == 0 &&
		    stream_of(stream.data, stream.len, &rfd) == 0)
			drain(rfd, &rx, lz4);
		qbuf_free(&stream);
		qft_seal_free(&tx);
	} else if (stream_of(p, n, &rfd) == 0) {
		drain(rfd, &rx, lz4);
	}
	qft_seal_free(&rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool lz4;
	int rfd;

	if (size < 1)
		return 0;
	lz4 = data[0] & 0x80;
	switch ((data[0] & 0x7f) % 5) {
	case 0:
		check_frame(data + 1, size - 1);
		break;
	case 1:
		fuzz_lz4(data + 1, size - 1);
		break;
	case 2:
		if (stream_of(data + 1, size - 1, &rfd) == 0)
			drain(rfd, NULL, lz4);
		break;
	case 3:
		fuzz_sealed(data + 1, size - 1, false, lz4);
		break;
	case 4:
		fuzz_sealed(data + 1, size - 1, true, lz4);
		break;
	}
	return 0;
}
