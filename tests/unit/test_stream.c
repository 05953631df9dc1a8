// SPDX-License-Identifier: MIT
/*
 * Unit test of fuse/fs/stream.c's window decisions, without a connection:
 * the read-ahead stream (when it starts and stops, how far it asks, how
 * its credit grows and shrinks, the budget of all handles, serving reads
 * from chunks across boundaries, end of file and errors) and the
 * write-behind window (room, accounting, the sticky error).
 *
 * Replies are simulated by completing chunks the way the connection's
 * reader thread does (file lock, qc_ra_complete, qc_file_async_done).
 * Under ASan a chunk freed too early or never freed fails the test too.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/bdp.h"
#include "fs/readahead.h"
#include "fs/stream.h"
#include "fs/writebehind.h"

#define CHUNK QC_RA_CHUNK
#define KiB   ((uint64_t)1 << 10)
#define MiB   ((uint64_t)1 << 20)
/* read_through's answers that are not byte counts or -errno */
#define NOT_STREAM  (-10000)
#define NOT_COVERED (-10001)

static struct qc_fs fs;
static uint8_t data[QFT_MAX_DATA];

/* The simulated server: a file of file_size bytes; the READ at fail_off
 * fails with fail_err. */
static uint64_t file_size;
static uint64_t fail_off;
static int fail_err;

static struct qc_file *new_file(uint64_t readahead)
{
	struct qc_file *f;

	memset(&fs, 0, sizeof(fs));
	qc_stream_init(&fs.streams);
	fs.readahead = readahead;
	fs.window = 16 * MiB;
	file_size = UINT64_MAX;
	fail_off = UINT64_MAX;
	fail_err = 0;
	f = qc_file_new(&fs, false, 0);
	if (!f) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return f;
}

/* Frees f as the last completion would; no chunk may be left charged. */
static void free_file(struct qc_file *f)
{
	pthread_mutex_lock(&f->lock);
	qc_ra_stop(f);
	CHECK_EQ(f->async, 0);
	pthread_mutex_unlock(&f->lock);
	qc_file_free(f);
	CHECK_EQ(atomic_load(&fs.ra_bytes), 0);
}

/* The reply to chunk c's READ: `got` bytes or `err`. */
static void complete_raw(struct qc_file *f, struct qc_ra_chunk *c, int err,
			 uint32_t got)
{
	struct qc_reply rep;

	memset(&rep, 0, sizeof(rep));
	rep.msg.data.p = data;
	rep.msg.data.len = got;
	pthread_mutex_lock(&f->lock);
	qc_ra_complete(c, err, err ? NULL : &rep);
	qc_file_async_done(f);
}

/* What the simulated server answers for chunk c. */
static void complete(struct qc_file *f, struct qc_ra_chunk *c)
{
	uint64_t left = c->off < file_size ? file_size - c->off : 0;

	if (c->off == fail_off)
		complete_raw(f, c, fail_err, 0);
	else
		complete_raw(f, c, 0, (uint32_t)(left < c->len ? left : c->len));
}

/* Completes a list of fresh chunks (linked by snext); returns how many. */
static int complete_all(struct qc_file *f, struct qc_ra_chunk *c)
{
	int n = 0;

	while (c) {
		struct qc_ra_chunk *next = c->snext;

		complete(f, c);
		n++;
		c = next;
	}
	return n;
}

/*
 * A kernel read of [off, off + len) through the stream, as qc_ra_read
 * does it with the replies arriving at once.  Returns the bytes served
 * (checked against `data`), a chunk's -errno, NOT_STREAM when the read is
 * not the stream's, NOT_COVERED when the chunks do not cover it.
 * *fresh counts the READs it sent.
 */
static long read_through(struct qc_file *f, uint64_t off, uint64_t len,
			 int *fresh)
{
	struct qc_ra_chunk *pinned[QC_RA_MAX_IOV], *sent = NULL;
	struct iovec iov[QC_RA_MAX_IOV];
	int npin = 0, niov = 0, n;
	ssize_t got;
	size_t total = 0;

	pthread_mutex_lock(&f->lock);
	if (!qc_ra_admit(&fs, f, off, off + len)) {
		pthread_mutex_unlock(&f->lock);
		return NOT_STREAM;
	}
	sent = qc_ra_fill(&fs, f);
	npin = qc_ra_pin(f, off, off + len, pinned);
	pthread_mutex_unlock(&f->lock);
	n = complete_all(f, sent);
	if (fresh)
		*fresh = n;
	if (npin == 0)
		return NOT_COVERED;

	pthread_mutex_lock(&f->lock);
	for (int i = 0; i < npin; i++)
		CHECK(pinned[i]->done);
	got = qc_ra_collect(&fs, f, off, off + len, pinned, npin, iov, &niov);
	if (got >= 0) {
		uint64_t pos = off;

		/* Each piece points at its offset's bytes in its chunk. */
		for (int i = 0; i < niov; i++) {
			uint64_t in = 0;

			for (int k = 0; k < npin; k++)
				if (pos >= pinned[k]->off &&
				    pos < pinned[k]->off + pinned[k]->len)
					in = pos - pinned[k]->off;
			CHECK(iov[i].iov_base == (void *)(data + in));
			pos += iov[i].iov_len;
			total += iov[i].iov_len;
		}
		CHECK_EQ(total, (size_t)got);
	}
	qc_ra_unpin(pinned, npin);
	pthread_mutex_unlock(&f->lock);
	return (long)got;
}

static void test_start_stop(void)
{
	struct qc_file *f = new_file(16 * MiB);
	int fresh = -1;

	check_ctx("start/stop");
	/* The first read is never a stream, however it looks. */
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	CHECK(!f->ra.on);
	CHECK_EQ(f->ra.next, 128 * KiB);
	/* The second read in a row starts one. */
	CHECK_EQ(read_through(f, 128 * KiB, 128 * KiB, &fresh), 128 * KiB);
	CHECK(f->ra.on);
	/* It asked for the start credit past the reader, in whole chunks
	 * from where the reader was: [128K, 1M), [1M, 2M), [2M, 3M). */
	CHECK_EQ(fresh, 3);
	CHECK_EQ(f->ra.end, 3 * MiB);
	CHECK_EQ(f->ra.credit, QC_RA_CREDIT_START);
	CHECK_EQ(atomic_load(&fs.ra_bytes), 3 * MiB - 128 * KiB);
	CHECK_EQ(f->async, 0);

	/* Reads inside the window, in any order, are served from it. */
	CHECK_EQ(read_through(f, 512 * KiB, 128 * KiB, &fresh), 128 * KiB);
	CHECK_EQ(read_through(f, 256 * KiB, 128 * KiB, &fresh), 128 * KiB);

	/* Random access: a read past the window stops the stream and
	 * drops its data and credit. */
	CHECK_EQ(read_through(f, 10 * MiB, 4 * KiB, NULL), NOT_STREAM);
	CHECK(!f->ra.on);
	CHECK(f->ra.head == NULL);
	CHECK_EQ(f->ra.credit, QC_RA_CREDIT_START);
	CHECK_EQ(atomic_load(&fs.ra_bytes), 0);
	/* One behind it is served on its own and the stream goes on: it may
	 * be a late one of the kernel's parallel reads (after a new
	 * start). */
	CHECK_EQ(read_through(f, 10 * MiB + 4 * KiB, 4 * KiB, NULL), 4 * KiB);
	CHECK(f->ra.on);
	CHECK_EQ(read_through(f, 0, 4 * KiB, NULL), NOT_STREAM);
	CHECK(f->ra.on);
	CHECK_EQ(read_through(f, 10 * MiB + 8 * KiB, 4 * KiB, NULL), 4 * KiB);
	free_file(f);

	/* The kernel's parallel reads out of order: one 2 MiB ahead drops
	 * the chunk the reader skipped, and the late read inside it is
	 * served on its own without stopping the stream. */
	f = new_file(16 * MiB);
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 128 * KiB, 128 * KiB, NULL), 128 * KiB);
	pthread_mutex_lock(&f->lock);
	f->ra.credit = 8 * MiB;
	pthread_mutex_unlock(&f->lock);
	CHECK_EQ(read_through(f, 256 * KiB, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(read_through(f, QC_RA_SKIPPED + MiB, 128 * KiB, NULL),
		 128 * KiB);
	CHECK(f->ra.head != NULL && f->ra.head->off >= 1 * MiB);
	CHECK_EQ(read_through(f, 512 * KiB, 128 * KiB, NULL), NOT_STREAM);
	CHECK(f->ra.on);
	CHECK_EQ(read_through(f, QC_RA_SKIPPED + MiB + 128 * KiB, 128 * KiB,
			      NULL), 128 * KiB);
	free_file(f);

	/* A gap between two reads is not sequential. */
	f = new_file(16 * MiB);
	CHECK_EQ(read_through(f, 0, 4 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 8 * KiB, 4 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 4 * KiB, 4 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 8 * KiB, 4 * KiB, NULL), 4 * KiB);
	free_file(f);

	/* A mount with less read-ahead than the start credit starts with
	 * that much. */
	f = new_file(1 * MiB);
	CHECK_EQ(read_through(f, 0, 4 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 4 * KiB, 4 * KiB, &fresh), 4 * KiB);
	CHECK_EQ(f->ra.credit, 1 * MiB);
	CHECK_EQ(fresh, 2);  /* [4K, 1M) and [1M, 2M) reach pos + 1M */
	free_file(f);
}

/* The data OPEN brought along, as qc_open hands it over: `got` of `asked`
 * bytes at offset 0. */
static void prime(struct qc_file *f, uint32_t asked, uint32_t got)
{
	struct qc_reply rep;

	memset(&rep, 0, sizeof(rep));
	rep.msg.data.p = data;
	rep.msg.data.len = got;
	qc_ra_prime(&fs, f, asked, &rep);
}

/*
 * The kernel's parallel reads overtake each other most at the start: the
 * read of the second MiB may come before the read of the first, which
 * OPEN's 128 KiB answer in part.  That is not random access: stopping
 * the stream would drop OPEN's chunk, and the first read would fetch its
 * 128 KiB again.  A jump further than the credit still is.
 */
static void test_overtaken(void)
{
	struct qc_file *f = new_file(16 * MiB);
	int fresh = -1;

	check_ctx("overtaken");
	prime(f, QC_OPEN_DATA, QC_OPEN_DATA);
	CHECK_EQ(read_through(f, 1 * MiB, 1 * MiB, &fresh), (long)MiB);
	CHECK(f->ra.on);
	/* [128K, 1M), [1M, 2M), [2M, 3M), [3M, 4M): the gap is asked for
	 * too, since the overtaken read is still to come. */
	CHECK_EQ(fresh, 4);
	CHECK(f->ra.head != NULL && f->ra.head->off == 0);
	/* The overtaken read: OPEN's chunk and the gap's, nothing fetched. */
	CHECK_EQ(read_through(f, 0, 1 * MiB, &fresh), (long)MiB);
	CHECK_EQ(fresh, 0);
	CHECK_EQ(read_through(f, 2 * MiB, 1 * MiB, NULL), (long)MiB);
	free_file(f);

	/* The same in the middle of a stream: 1 MiB past the window with a
	 * credit of 2 MiB extends it. */
	f = new_file(16 * MiB);
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 128 * KiB, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(f->ra.end, 3 * MiB);
	CHECK_EQ(read_through(f, 4 * MiB, 128 * KiB, NULL), 128 * KiB);
	CHECK(f->ra.on);
	CHECK_EQ(read_through(f, 256 * KiB, 128 * KiB, &fresh), 128 * KiB);
	CHECK_EQ(fresh, 0);
	free_file(f);

	/* Further than the credit past OPEN's chunk is random access. */
	f = new_file(16 * MiB);
	prime(f, QC_OPEN_DATA, QC_OPEN_DATA);
	CHECK_EQ(read_through(f, QC_OPEN_DATA + QC_RA_CREDIT_START + 1,
			      4 * KiB, NULL), NOT_STREAM);
	CHECK(!f->ra.on);
	CHECK(f->ra.head == NULL);
	free_file(f);
}

static void test_credit(void)
{
	struct qc_file *f = new_file(4 * MiB);
	uint64_t off;

	check_ctx("credit");
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	/* Consumed chunks: [128K, 1M) and [1M, 2M) are less than the
	 * credit, the credit stays. */
	for (off = 128 * KiB; off < 2 * MiB; off += 128 * KiB)
		CHECK_EQ(read_through(f, off, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(f->ra.credit, 2 * MiB);
	/* [2M, 3M) consumed too: a credit's worth eaten, it doubles. */
	for (; off < 3 * MiB; off += 128 * KiB)
		CHECK_EQ(read_through(f, off, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(f->ra.credit, 4 * MiB);
	CHECK_EQ(f->ra.eaten, 0);
	/* ... up to the mount's read-ahead, no further. */
	for (; off < 12 * MiB; off += 128 * KiB)
		CHECK_EQ(read_through(f, off, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(f->ra.credit, 4 * MiB);
	/* Never more asked ahead than credit past the reader, rounded up
	 * to a chunk. */
	CHECK(f->ra.end <= f->ra.pos + f->ra.credit + CHUNK);
	CHECK(f->ra.end >= f->ra.pos + f->ra.credit);

	/* A write with unread read-ahead halves the credit... */
	pthread_mutex_lock(&f->lock);
	CHECK(f->ra.head != NULL);
	qc_ra_drop(f);
	CHECK_EQ(f->ra.credit, 2 * MiB);
	CHECK(!f->ra.on);
	CHECK(f->ra.head == NULL);
	/* ... and with nothing wasted leaves it. */
	qc_ra_drop(f);
	CHECK_EQ(f->ra.credit, 2 * MiB);
	pthread_mutex_unlock(&f->lock);
	CHECK_EQ(atomic_load(&fs.ra_bytes), 0);

	/* Chunks still awaited count as waste; they are freed by their
	 * reply, which no longer marks the end of the file. */
	{
		struct qc_ra_chunk *sent;

		CHECK_EQ(read_through(f, 0, 4 * KiB, NULL), NOT_STREAM);
		pthread_mutex_lock(&f->lock);
		CHECK(qc_ra_admit(&fs, f, 4 * KiB, 8 * KiB));
		sent = qc_ra_fill(&fs, f);
		CHECK(sent != NULL);
		qc_ra_drop(f);
		CHECK_EQ(f->ra.credit, 1 * MiB);
		pthread_mutex_unlock(&f->lock);
		file_size = 1;
		complete_all(f, sent);
		CHECK(!f->ra.eof);
		CHECK_EQ(atomic_load(&fs.ra_bytes), 0);

		/* Not below one chunk. */
		pthread_mutex_lock(&f->lock);
		CHECK(!qc_ra_admit(&fs, f, 8 * KiB, 12 * KiB));
		CHECK(qc_ra_admit(&fs, f, 12 * KiB, 16 * KiB));
		sent = qc_ra_fill(&fs, f);
		CHECK(sent != NULL);
		qc_ra_drop(f);
		pthread_mutex_unlock(&f->lock);
		complete_all(f, sent);
	}
	CHECK_EQ(f->ra.credit, 1 * MiB);
	CHECK_EQ(atomic_load(&fs.ra_bytes), 0);
	free_file(f);

	/* With room to grow: 2M, 4M, 8M, 16M, each after a credit's worth
	 * was eaten, and never past the mount's read-ahead. */
	f = new_file(16 * MiB);
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	for (off = 128 * KiB; off < 3 * MiB; off += 128 * KiB)
		CHECK_EQ(read_through(f, off, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(f->ra.credit, 4 * MiB);
	for (; off < 7 * MiB; off += 128 * KiB)
		CHECK_EQ(read_through(f, off, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(f->ra.credit, 8 * MiB);
	for (; off < 40 * MiB; off += 128 * KiB)
		CHECK_EQ(read_through(f, off, 128 * KiB, NULL), 128 * KiB);
	CHECK_EQ(f->ra.credit, 16 * MiB);
	free_file(f);
}

static void test_boundaries(void)
{
	struct qc_file *f = new_file(16 * MiB);
	struct qc_ra_chunk *pinned[QC_RA_MAX_IOV];

	check_ctx("boundaries");
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 128 * KiB, 128 * KiB, NULL), 128 * KiB);
	/* Across the boundary of [128K, 1M) and [1M, 2M): two pieces. */
	CHECK_EQ(read_through(f, MiB - 64 * KiB, 128 * KiB, NULL), 128 * KiB);
	/* The first chunk is consumed only as far as read; it went once
	 * its last byte was served. */
	CHECK_EQ(read_through(f, 256 * KiB, MiB - 320 * KiB, NULL),
		 MiB - 320 * KiB);
	CHECK(f->ra.head != NULL && f->ra.head->off == MiB);

	/* A range the chunks do not cover pins nothing. */
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(qc_ra_pin(f, f->ra.end, f->ra.end + 4 * KiB, pinned), 0);
	CHECK_EQ(qc_ra_pin(f, f->ra.end - 4 * KiB, f->ra.end + 4 * KiB,
			   pinned), 0);
	for (struct qc_ra_chunk *c = f->ra.head; c; c = c->next)
		CHECK_EQ(c->pins, 0);
	/* Behind the head (served chunks are gone): not covered either. */
	CHECK_EQ(qc_ra_pin(f, 0, 4 * KiB, pinned), 0);
	pthread_mutex_unlock(&f->lock);

	/* A chunk QC_RA_SKIPPED behind the reader was skipped: dropped;
	 * nearer ones stay for the kernel's late parallel reads. */
	pthread_mutex_lock(&f->lock);
	f->ra.credit = 8 * MiB;
	pthread_mutex_unlock(&f->lock);
	CHECK_EQ(read_through(f, 2 * MiB + 4 * KiB, 4 * KiB, NULL), 4 * KiB);
	CHECK(f->ra.head != NULL && f->ra.head->off == MiB);
	CHECK_EQ(read_through(f, 2 * MiB + QC_RA_SKIPPED + 4 * KiB, 4 * KiB,
			      NULL), 4 * KiB);
	CHECK(f->ra.head != NULL && f->ra.head->off == 2 * MiB);
	free_file(f);
}

static void test_eof_and_errors(void)
{
	struct qc_file *f = new_file(16 * MiB);
	struct qc_ra_chunk *c;
	int fresh = -1;

	check_ctx("eof");
	file_size = MiB + 100 * KiB;
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 128 * KiB, 128 * KiB, NULL), 128 * KiB);
	/* [1M, 2M) came back short: end of file, nothing asked after it. */
	CHECK(f->ra.eof);
	CHECK_EQ(read_through(f, MiB - 64 * KiB, 128 * KiB, &fresh),
		 128 * KiB);
	CHECK_EQ(fresh, 0);
	/* A read across the end gets what there is. */
	CHECK_EQ(read_through(f, MiB + 64 * KiB, 128 * KiB, NULL), 36 * KiB);
	/* Wholly past it: nothing (the caller asks the server again). */
	CHECK_EQ(read_through(f, MiB + 100 * KiB, 128 * KiB, NULL), 0);
	/* Budget held only for bytes that came: the first chunk (not all
	 * read yet) and 100K of the second. */
	CHECK_EQ(atomic_load(&fs.ra_bytes), MiB - 128 * KiB + 100 * KiB);
	free_file(f);

	check_ctx("error chunk");
	f = new_file(16 * MiB);
	fail_off = MiB;
	fail_err = -EIO;
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 128 * KiB, 128 * KiB, NULL), 128 * KiB);
	CHECK(!f->ra.eof);
	/* Data before the failed chunk, then the chunk: an error, not a
	 * short read that would look like the end of the file. */
	CHECK_EQ(read_through(f, MiB - 64 * KiB, 128 * KiB, NULL), -EIO);
	CHECK(!f->ra.on);
	CHECK_EQ(atomic_load(&fs.ra_bytes), 0);
	free_file(f);

	/* A chunk lost with its link is an error too (the caller reads it
	 * again on the re-opened handle). */
	f = new_file(16 * MiB);
	fail_off = 4 * KiB;
	fail_err = -ENOTCONN;
	CHECK_EQ(read_through(f, 0, 4 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 4 * KiB, 4 * KiB, NULL), -ENOTCONN);
	free_file(f);

	/* More bytes than asked for is a broken server: EIO. */
	check_ctx("oversized");
	f = new_file(16 * MiB);
	pthread_mutex_lock(&f->lock);
	CHECK(!qc_ra_admit(&fs, f, 0, 4 * KiB));
	CHECK(qc_ra_admit(&fs, f, 4 * KiB, 8 * KiB));
	c = qc_ra_fill(&fs, f);
	pthread_mutex_unlock(&f->lock);
	CHECK(c != NULL);
	if (c) {
		struct qc_ra_chunk *rest = c->snext;

		complete_raw(f, c, 0, c->len + 1);
		CHECK_EQ(c->err, -EIO);
		CHECK(!f->ra.eof);
		complete_all(f, rest);
	}
	free_file(f);
}

static void test_budget(void)
{
	uint64_t budget = QC_RA_TOTAL_MIN, others;
	struct qc_file *f = new_file(16 * MiB);
	int fresh = -1;

	check_ctx("budget");
	/* Two full windows when that is more than the minimum. */
	CHECK(2 * fs.readahead <= budget);
	others = budget - 512 * KiB;
	atomic_store(&fs.ra_bytes, others);
	CHECK_EQ(read_through(f, 0, 128 * KiB, NULL), NOT_STREAM);
	/* What the reader asked for is always requested, nothing beyond
	 * it past the budget. */
	CHECK_EQ(read_through(f, 128 * KiB, 128 * KiB, &fresh), 128 * KiB);
	CHECK_EQ(fresh, 1);
	CHECK_EQ(f->ra.end, MiB);
	/* A reader exactly at the end of what was asked for: nothing. */
	CHECK_EQ(read_through(f, MiB - 128 * KiB, 128 * KiB, &fresh),
		 128 * KiB);
	CHECK_EQ(fresh, 0);
	CHECK_EQ(read_through(f, MiB - 64 * KiB, 128 * KiB, &fresh),
		 128 * KiB);
	CHECK_EQ(fresh, 1);
	CHECK_EQ(f->ra.end, 2 * MiB);
	/* Room again: the stream asks ahead again. */
	atomic_fetch_sub(&fs.ra_bytes, others);
	CHECK_EQ(read_through(f, MiB + 64 * KiB, 128 * KiB, &fresh),
		 128 * KiB);
	CHECK(fresh >= 2);
	free_file(f);

	/* The budget of a large read-ahead is two windows. */
	f = new_file(64 * MiB);
	atomic_store(&fs.ra_bytes, 128 * MiB - 1 * MiB);
	CHECK_EQ(read_through(f, 0, 4 * KiB, NULL), NOT_STREAM);
	CHECK_EQ(read_through(f, 4 * KiB, 4 * KiB, &fresh), 4 * KiB);
	/* [4K, 1M) for the reader; [1M, 2M) would pass 128M - 4K. */
	CHECK_EQ(fresh, 1);
	atomic_fetch_sub(&fs.ra_bytes, 128 * MiB - 1 * MiB);
	free_file(f);
}

static void wb_answer(struct qc_file *f, uint32_t len, int err)
{
	pthread_mutex_lock(&f->lock);
	qc_wb_complete(f, len, err);
	qc_file_async_done(f);
}

/* The decisions as qc_wb_write takes them: with the file's lock. */
static int wb_account(struct qc_file *f, uint32_t len)
{
	int r;

	pthread_mutex_lock(&f->lock);
	r = qc_wb_account(f, len);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static bool wb_must_wait(struct qc_file *f, uint64_t window, uint32_t len)
{
	bool r;

	pthread_mutex_lock(&f->lock);
	r = qc_wb_must_wait(f, window, len);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static void test_write_behind(void)
{
	struct qc_file *f = new_file(16 * MiB);

	check_ctx("write-behind");
	/* An empty window takes any write, even one larger than it. */
	CHECK(!wb_must_wait(f, 100, 200));
	CHECK(!wb_must_wait(f, 0, 1));
	CHECK_EQ(wb_account(f, 60), 0);
	CHECK_EQ(f->wb.bytes, 60);
	CHECK_EQ(f->issued, 1);
	CHECK_EQ(f->async, 1);
	CHECK(f->written);
	CHECK_EQ(f->mods, 1);
	/* Up to the window exactly, not a byte more. */
	CHECK(!wb_must_wait(f, 100, 40));
	CHECK(wb_must_wait(f, 100, 41));
	/* window=0: every write waits for the one before. */
	CHECK(wb_must_wait(f, 0, 1));
	CHECK_EQ(wb_account(f, 40), 0);
	CHECK_EQ(f->wb.bytes, 100);
	CHECK_EQ(f->issued, 2);

	wb_answer(f, 60, 0);
	CHECK_EQ(f->wb.bytes, 40);
	CHECK_EQ(f->answered, 1);
	CHECK_EQ(f->err, 0);
	/* The first error sticks; later ones do not replace it. */
	wb_answer(f, 40, -ENOSPC);
	CHECK_EQ(f->wb.bytes, 0);
	CHECK_EQ(f->answered, 2);
	CHECK_EQ(f->err, -ENOSPC);
	CHECK_EQ(f->async, 0);
	/* A writer waiting for room sees the error instead. */
	f->wb.bytes = 100;
	CHECK(!wb_must_wait(f, 100, 50));
	f->wb.bytes = 0;
	/* No later write may look like it succeeded. */
	CHECK_EQ(wb_account(f, 10), -ENOSPC);
	CHECK_EQ(f->issued, 2);
	CHECK_EQ(f->wb.bytes, 0);
	CHECK_EQ(f->async, 0);
	CHECK_EQ(f->mods, 2);
	/* fsync reports it and keeps it for close; close clears it. */
	CHECK_EQ(qc_file_collect(f, 2, false), -ENOSPC);
	CHECK_EQ(f->err, -ENOSPC);
	CHECK_EQ(qc_file_collect(f, 2, true), -ENOSPC);
	CHECK_EQ(f->err, 0);
	CHECK_EQ(qc_file_collect(f, 2, true), 0);
	CHECK_EQ(wb_account(f, 10), 0);
	wb_answer(f, 10, 0);
	free_file(f);

	/* Errors in answer order: the first answered one is kept. */
	f = new_file(16 * MiB);
	CHECK_EQ(wb_account(f, 10), 0);
	CHECK_EQ(wb_account(f, 20), 0);
	wb_answer(f, 10, -EIO);
	wb_answer(f, 20, -ENOSPC);
	CHECK_EQ(f->err, -EIO);
	CHECK_EQ(f->wb.bytes, 0);
	CHECK_EQ(qc_file_collect(f, f->issued, true), -EIO);
	free_file(f);
}

/*
 * The bandwidth-delay estimate: the smallest call time and the best rate
 * over intervals, the window sized from them within its bounds, a fixed
 * size while nothing is known or the mount was given one, and a new link
 * measured afresh.
 */
static void test_bdp(void)
{
	struct qc_bdp b = { .lock = PTHREAD_MUTEX_INITIALIZER };
	const uint64_t ms = 1000, t0 = 5000000;
	uint64_t t;

	check_ctx("bdp");
	qc_bdp_reset(&b);
	/* Nothing measured: the default, but never past the ceiling. */
	CHECK_EQ(qc_bdp_size(&b, 16 * MiB, 256 * MiB), 16 * MiB);
	CHECK_EQ(qc_bdp_size(&b, 16 * MiB, 8 * MiB), 8 * MiB);
	/* 1 MiB calls answered 9 ms after sending, one every 8 ms: a call
	 * time, but no rate before an interval has passed. */
	qc_bdp_sample(&b, 1, t0, t0 + 9 * ms, MiB);
	CHECK_EQ(b.rtt_us, 9 * ms);
	CHECK_EQ(b.bw, 0);
	CHECK_EQ(qc_bdp_size(&b, 16 * MiB, 256 * MiB), 16 * MiB);
	t = t0 + 9 * ms;
	for (int i = 0; i < 10; i++) {
		t += 8 * ms;
		/* call times stretched by the window do not count */
		qc_bdp_sample(&b, 1, t - 30 * ms, t, MiB);
	}
	CHECK_EQ(b.rtt_us, 9 * ms);
	/* 131 MB/s: the first interval that reached 20 ms, 3 MiB in 24 ms */
	CHECK_EQ(b.bw, 3 * MiB * 1000000 / (24 * ms));
	/* 2 x 131 MB/s x 9 ms = 2.4 MB: below the floor of four calls */
	CHECK_EQ(qc_bdp_size(&b, 16 * MiB, 256 * MiB), QC_BDP_MIN);
	/* A long path: 100 ms call times make 2 x 131 MB/s x 100 ms */
	qc_bdp_reset(&b);
	t = t0;
	for (int i = 0; i < 20; i++) {
		t += 8 * ms;
		qc_bdp_sample(&b, 1, t - 100 * ms, t, MiB);
	}
	CHECK_EQ(b.rtt_us, 100 * ms);
	/* the first interval had to last a call time: 13 MiB in 104 ms */
	CHECK_EQ(b.bw, 13 * MiB * 1000000 / (104 * ms));
	CHECK_EQ(qc_bdp_size(&b, 16 * MiB, 256 * MiB),
		 QC_BDP_GAIN * (b.bw * 100 * ms / 1000000));
	CHECK(qc_bdp_size(&b, 16 * MiB, 256 * MiB) > 16 * MiB);
	/* ... bounded by the ceiling */
	CHECK_EQ(qc_bdp_size(&b, 16 * MiB, 10 * MiB), 10 * MiB);
	/* A slower rate replaces the best one only once it is old. */
	t += QC_BDP_FORGET_US / 2;
	qc_bdp_sample(&b, 1, t - 100 * ms, t, MiB);
	t += 100 * ms;
	qc_bdp_sample(&b, 1, t - 100 * ms, t, MiB);
	CHECK_EQ(b.bw, 13 * MiB * 1000000 / (104 * ms));
	t += QC_BDP_FORGET_US;
	qc_bdp_sample(&b, 1, t - 100 * ms, t, MiB);
	CHECK_EQ(b.bw, MiB * 1000000 / QC_BDP_FORGET_US);
	/* A new link is another path: measured from scratch. */
	qc_bdp_sample(&b, 2, t, t + 2 * ms, MiB);
	CHECK_EQ(b.gen, 2);
	CHECK_EQ(b.rtt_us, 2 * ms);
	CHECK_EQ(b.bw, 0);
	CHECK_EQ(qc_bdp_size(&b, 16 * MiB, 256 * MiB), 16 * MiB);

	/* The mount's window: fixed unless it measures; 0 stays 0. */
	memset(&fs, 0, sizeof(fs));
	qc_stream_init(&fs.streams);
	fs.window = 64 * MiB;
	fs.readahead = 64 * MiB;
	qc_bdp_reset(&fs.streams.up);
	qc_bdp_reset(&fs.streams.down);
	qc_stream_set_auto(&fs, false, false);
	CHECK_EQ(qc_wb_window(&fs), 64 * MiB);
	CHECK_EQ(qc_ra_limit(&fs), 64 * MiB);
	qc_stream_set_auto(&fs, true, true);
	CHECK_EQ(qc_wb_window(&fs), QC_WINDOW_DEFAULT);
	CHECK_EQ(qc_ra_limit(&fs), QC_READAHEAD_DEFAULT);
	t = t0;
	for (int i = 0; i < 10; i++) {
		t += 8 * ms;
		qc_bdp_sample(&fs.streams.up, 1, t - 9 * ms, t, MiB);
	}
	CHECK_EQ(qc_wb_window(&fs), QC_BDP_MIN);
	CHECK_EQ(qc_ra_limit(&fs), QC_READAHEAD_DEFAULT);
	fs.window = 0;
	CHECK_EQ(qc_wb_window(&fs), 0);
	qc_stream_set_auto(&fs, false, false);
	qc_bdp_reset(&fs.streams.up);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	test_start_stop();
	test_overtaken();
	test_credit();
	test_boundaries();
	test_eof_and_errors();
	test_budget();
	test_write_behind();
	test_bdp();
	return check_exit("test_stream");
}
