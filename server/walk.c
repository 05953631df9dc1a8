// SPDX-License-Identifier: MIT
/* Walk-ahead: FETCH of several small files (see walk.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "errmap.h"
#include "io.h"
#include "log.h"
#include "protocol.h"
#include "walk.h"

/* Bytes of a record besides its data: status, attributes, flags, the
 * data's length. */
#define REC_HEAD (4u + QFT_ATTR_WIRE_SIZE + 4u + 4u)

/* Reads up to `want` bytes from offset 0 into buf; the count or -errno. */
static ssize_t read_head(int fd, uint8_t *buf, size_t want)
{
	size_t got = 0;

	while (got < want) {
		ssize_t n = pread(fd, buf + got, want - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * One name: its record, or 1 when it does not fit what is left of `out`
 * (nothing appended).  The status of a name that cannot be read is its
 * record's, never the request's.  `buf` holds max_len bytes.
 */
static int fetch_one(int dfd, const char *name, uint64_t max_len,
		     bool noatime, uint8_t *buf, struct qbuf *out)
{
	struct qft_fetch_rec rec;
	struct stat st;
	size_t want;
	ssize_t got;
	int pfd, fd, r;

	memset(&rec, 0, sizeof(rec));
	/* The I/O fault hook of test builds fails OPENs of a name; the
	 * client then opens it itself and meets the fault there. */
	r = srv_io_fault_name(name);
	if (r < 0)
		goto out_status;
	pfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0) {
		r = -errno;
		goto out_status;
	}
	if (fstat(pfd, &st) < 0) {
		r = -errno;
		goto out_close_pfd;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		goto out_close_pfd;
	}
	fd = srv_path_reopen_at(pfd, O_RDONLY, dfd, name, false);
	if (fd < 0) {
		r = fd;
		goto out_close_pfd;
	}
	/* Refused (EPERM) for a file the server's user does not own
	 * without CAP_FOWNER: read as before, as OPEN does. */
	if (noatime) {
		int fl = fcntl(fd, F_GETFL);

		if (fl >= 0)
			(void)fcntl(fd, F_SETFL, fl | O_NOATIME);
	}
	/* The attributes of what is read, taken before reading: a write
	 * after this changes mtime, so the client never pairs newer bytes
	 * with attributes it could take for current. */
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out_close_fd;
	}
	srv_path_attr_from_stat(&rec.attr, &st);
	/* Its size and one byte more: a short read says where it ends. */
	want = (uint64_t)st.st_size < max_len ? (size_t)st.st_size + 1 :
	       (size_t)max_len;
	if (out->len + REC_HEAD + want > out->limit) {
		close(fd);
		close(pfd);
		return 1;
	}
	got = read_head(fd, buf, want);
	if (got < 0) {
		r = (int)got;
		goto out_close_fd;
	}
	/* A file that grew past the budget is not whole: no bytes, and the
	 * client opens it itself. */
	if ((size_t)got < want) {
		rec.flags = QFT_FETCH_EOF;
		rec.data.p = buf;
		rec.data.len = (uint32_t)got;
	}
	close(fd);
	close(pfd);
	return qft_fetch_rec_encode(out, &rec);
out_close_fd:
	close(fd);
out_close_pfd:
	close(pfd);
out_status:
	rec.status = qft_status_from_errno(-r);
	if (out->len + 4 > out->limit)
		return 1;
	return qft_fetch_rec_encode(out, &rec);
}

int srv_walk_fetch(const struct srv_root *root, const struct qft_msg *req,
		   bool noatime, struct qbuf *out)
{
	struct qft_str name;
	uint8_t *buf;
	struct qcur c;
	int dfd, r, n = 0;

	if ((r = qft_fetch_names_check(&req->data)) < 0)
		return r;
	dfd = srv_path_open_dir(root, req->path.s);
	if (dfd < 0)
		return dfd;
	buf = malloc(req->length ? (size_t)req->length : 1);
	if (!buf) {
		r = -ENOMEM;
		goto out_close;
	}
	qcur_init(&c, req->data.p, req->data.len);
	while (c.left) {
		if ((r = qft_fetch_name_next(&c, &name)) < 0)
			goto out_free;
		r = fetch_one(dfd, name.s, req->length, noatime, buf, out);
		if (r == 1)
			break;
		if (r < 0)
			goto out_free;
		n++;
	}
	qft_debug("FETCH: %d records, %zu bytes", n, out->len);
	r = 0;
out_free:
	free(buf);
out_close:
	close(dfd);
	return r;
}
