// SPDX-License-Identifier: MIT
/* COPY and SEEK on the server (see copy.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include "copy.h"
#include "io.h"
#include "log.h"
#include "path.h"
#include "protocol.h"
#include "pulse.h"
#include "srv.h"

/*
 * One copy_file_range call at most: large enough that a reflink of a big
 * file takes a few calls, small enough that a copy in the kernel (or onto
 * slow storage) returns between PROGRESS frames' worth of work.
 */
#define COPY_CHUNK ((size_t)64 << 20)
/* One read and write of the fallback. */
#define PLAIN_CHUNK ((size_t)1 << 20)

#ifdef QFT_FAULT_INJECTION
#define COPY_FAULT_ENV "QFTFS_FAULT_COPY"

/* What QFTFS_FAULT_COPY asks: 0 (nothing), an errno every
 * copy_file_range fails with, -1 for "old", or COPY_SLOW. */
#define COPY_SLOW (-3)
static int copy_fault(void)
{
	static int v = -2;
	const char *env;

	if (v != -2)
		return v;
	env = getenv(COPY_FAULT_ENV);
	if (!env || !*env)
		v = 0;
	else if (strcmp(env, "EXDEV") == 0)
		v = EXDEV;
	else if (strcmp(env, "EOPNOTSUPP") == 0)
		v = EOPNOTSUPP;
	else if (strcmp(env, "old") == 0)
		v = -1;
	else if (strcmp(env, "slow") == 0)
		v = COPY_SLOW;
	else {
		qft_err("%s=%s: expected EXDEV, EOPNOTSUPP, old or slow; "
			"ignored", COPY_FAULT_ENV, env);
		v = 0;
	}
	if (v)
		qft_warn("test fault injection armed: %s=%s", COPY_FAULT_ENV,
			 env);
	return v;
}
#else
#define COPY_SLOW (-3)
static int copy_fault(void)
{
	return 0;
}
#endif

uint32_t srv_copy_features(uint32_t asked)
{
	if (copy_fault() == -1)
		return 0;
	return asked & (QFT_FEAT_COPY | QFT_FEAT_HOLES);
}

/* A COPY for the pulse's worker. */
struct copy_job {
	int in, out;
	uint64_t off_in, off_out, len;
	uint64_t done;          /* bytes copied so far */
	bool plain;             /* the kernel refused: reads and writes */
	int fault;              /* copy_fault() > 0, read on the
				 * connection's thread */
	bool slow;              /* test builds: storage that takes 1.5 s
				 * per MiB (QFTFS_FAULT_COPY=slow) */
};

static ssize_t kernel_copy(struct copy_job *j, size_t want)
{
	loff_t in = (loff_t)(j->off_in + j->done);
	loff_t out = (loff_t)(j->off_out + j->done);
	ssize_t n;

	if (j->fault > 0)
		return -j->fault;
	if (j->slow) {
		struct timespec ts = { 1, 500000000 };

		if (want > ((size_t)1 << 20))
			want = (size_t)1 << 20;
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	do
		n = copy_file_range(j->in, &in, j->out, &out, want, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* Reads then writes up to `want` bytes through buf (PLAIN_CHUNK bytes):
 * the count (0 at the source's end) or a negative errno. */
static ssize_t plain_copy(struct copy_job *j, void *buf, size_t want)
{
	ssize_t n, w;

	if (want > PLAIN_CHUNK)
		want = PLAIN_CHUNK;
	n = srv_io_read(j->in, buf, want, j->off_in + j->done);
	if (n <= 0)
		return n;
	w = srv_io_write(j->out, buf, (size_t)n, j->off_out + j->done);
	return w < 0 ? w : n;
}

static int copy_run(void *arg)
{
	struct copy_job *j = arg;
	void *buf = NULL;
	int r = 0;

	while (j->done < j->len) {
		size_t want = j->len - j->done < COPY_CHUNK ?
			(size_t)(j->len - j->done) : COPY_CHUNK;
		ssize_t n;

		if (!j->plain) {
			n = kernel_copy(j, want);
			/* Not between these files, or not on this kernel:
			 * the same bytes the slow way, still on the server.
			 * (An overlap, copy_file_range's other EINVAL, was
			 * refused before.) */
			if (n == -EXDEV || n == -EOPNOTSUPP || n == -EINVAL ||
			    n == -ENOSYS) {
				qft_debug("copy_file_range: %s; copying with "
					  "reads and writes",
					  strerror((int)-n));
				j->plain = true;
				continue;
			}
		} else {
			if (!buf && !(buf = malloc(PLAIN_CHUNK))) {
				r = -ENOMEM;
				break;
			}
			n = plain_copy(j, buf, want);
		}
		if (n < 0) {
			r = (int)n;
			break;
		}
		if (n == 0)
			break;  /* the source ends */
		j->done += (uint64_t)n;
	}
	free(buf);
	/* Bytes copied before an error are the answer; the next call
	 * meets the error (copy_file_range(2)). */
	return j->done ? 0 : r;
}

/*
 * A request of a feature HELLO did not grant closes the connection, as
 * it does on a server before the feature (the opcode is unknown there):
 * the client must never send one, and a test of an "old" server sees it
 * if it did.
 */
static int granted(struct srv *s, const struct qft_msg *req, uint32_t feat)
{
	if (s->features & feat)
		return 0;
	qft_err("closing connection: %s without the HELLO feature %#x",
		qft_op_name(req->op), feat);
	s->fatal = -EPROTO;
	return -EPROTO;
}

int srv_copy_op(struct srv *s, const struct qft_msg *req,
		struct qft_msg *rep)
{
	struct copy_job j = { 0 };
	struct srv_handle *hin, *hout;
	struct stat sin, sout;
	int r;

	if ((r = granted(s, req, QFT_FEAT_COPY)) < 0)
		return r;
	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE,
				&hin)) < 0 ||
	    (r = srv_handle_get(&s->handles, req->handle2, SRV_H_FILE,
				&hout)) < 0)
		return r;
	/* copy_file_range(2)'s own answers, given before the fallback
	 * could do otherwise: an appending destination ignores offsets. */
	if (hout->append)
		return -EBADF;
	if (fstat(hin->fd, &sin) < 0 || fstat(hout->fd, &sout) < 0)
		return -errno;
	if (S_ISDIR(sin.st_mode) || S_ISDIR(sout.st_mode))
		return -EISDIR;
	if (!S_ISREG(sin.st_mode) || !S_ISREG(sout.st_mode))
		return -EINVAL;
	if (sin.st_dev == sout.st_dev && sin.st_ino == sout.st_ino &&
	    req->offset < req->offset2 + req->length &&
	    req->offset2 < req->offset + req->length)
		return -EINVAL;
	j.in = hin->fd;
	j.out = hout->fd;
	j.off_in = req->offset;
	j.off_out = req->offset2;
	j.len = req->length;
	j.fault = copy_fault() > 0 ? copy_fault() : 0;
	j.slow = copy_fault() == COPY_SLOW;
	/* Even a failed copy may have written part of the range. */
	if (j.len)
		hout->dirty = true;
	r = srv_pulse_run(s->pulse, req->id, copy_run, &j);
	if (r < 0)
		return r;
	rep->count = j.done;
	if (fstat(hout->fd, &sout) < 0)
		return -errno;
	srv_path_attr_from_stat(&rep->attr, &sout);
	return 0;
}

int srv_copy_seek(struct srv *s, const struct qft_msg *req,
		  struct qft_msg *rep)
{
	bool hole = req->opflags == QFT_SEEK_HOLE;
	struct srv_handle *h;
	off_t off, next;
	int r;

	if ((r = granted(s, req, QFT_FEAT_HOLES)) < 0)
		return r;
	if ((r = srv_handle_get(&s->handles, req->handle, SRV_H_FILE, &h)) < 0)
		return r;
	/* The handle's position is nobody's: every transfer names its
	 * offset (pread, pwrite, the engine). */
	off = lseek(h->fd, (off_t)req->offset, hole ? SEEK_HOLE : SEEK_DATA);
	if (off < 0)
		return -errno;
	rep->offset = (uint64_t)off;
	/* Where what was found ends, so that the client's next question
	 * (cp asks SEEK_HOLE from the data it found) needs no round trip;
	 * 0 when there is nothing after it (ENXIO) or no answer. */
	next = lseek(h->fd, off, hole ? SEEK_DATA : SEEK_HOLE);
	rep->offset2 = next > off ? (uint64_t)next : 0;
	return 0;
}
