// SPDX-License-Identifier: MIT
/*
 * The callbacks of ranges of open files the server works on without the
 * data crossing the link: copy_file_range and lseek's SEEK_DATA and
 * SEEK_HOLE (fs/copy.h; see internal.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "fs/copy.h"
#include "fs/stats.h"
#include "ops/internal.h"
#include "protocol.h"

void qc_ops_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			    struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			    off_t off_out, struct fuse_file_info *fi_out,
			    size_t len, int flags)
{
	uint64_t copied = 0;
	int r;

	/* The kernel checked the ranges, the open modes and the files'
	 * kinds; what it cannot know is left to the server. */
	if (flags != 0) {
		r = -EINVAL;
		goto out_err;
	}
	if (off_in < 0 || off_out < 0) {
		r = -EINVAL;
		goto out_err;
	}
	/* The answer's count is 32 bits wide (fuse_write_out): a short
	 * copy, which the caller continues. */
	r = qc_copy_range(fs_of(req), file_of(fi_in), (uint64_t)off_in,
			  file_of(fi_out), (uint64_t)off_out, (uint64_t)len,
			  &copied);
	if (r < 0)
		goto out_err;
	fuse_reply_write(req, (size_t)copied);
	return;
out_err:
	fuse_reply_err(req, -r);
}

/*
 * SEEK_DATA or SEEK_HOLE of a file whose current attributes (qc_ops_
 * current_attr) show blocks for every byte: it has no hole the server
 * could report, so the size answers, as on a file system without holes
 * -- grep asks SEEK_HOLE of every file it reads (to skip holes), a round
 * trip each.  0 with *res, -ENXIO past the end, or 1 when the server
 * must be asked (a sparse file, or its size not known now).
 */
static int seek_solid(struct qc_fs *fs, fuse_ino_t ino, uint64_t off,
		      bool hole, uint64_t *res)
{
	struct qft_attr a;

	if (!qc_ops_current_attr(fs, qc_fs_node(fs, ino), &a) ||
	    (a.mode & QFT_S_IFMT) != QFT_S_IFREG || a.size == 0 ||
	    a.blocks > UINT64_MAX / 512 || a.blocks * 512 < a.size)
		return 1;
	qc_stat_inc(&fs->stats, QC_STAT_SEEKS_LOCAL);
	return qc_copy_seek_solid(a.size, off, hole, res);
}

void qc_ops_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		  struct fuse_file_info *fi)
{
	uint64_t res = 0;
	int r;

	/* The kernel sends only these two; the others it answers itself. */
	if ((whence != SEEK_DATA && whence != SEEK_HOLE) || off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	r = seek_solid(fs_of(req), ino, (uint64_t)off, whence == SEEK_HOLE,
		       &res);
	if (r > 0)
		r = qc_copy_seek(fs_of(req), file_of(fi), (uint64_t)off,
				 whence == SEEK_HOLE, &res);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	fuse_reply_lseek(req, (off_t)res);
}
