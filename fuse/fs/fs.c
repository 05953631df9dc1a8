// SPDX-License-Identifier: MIT
/* The mounted filesystem's options, entry replies and teardown (see
 * fs.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/dircache.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "fs/walk.h"
#include "log.h"
#include "msg.h"
#include "fs/node.h"
#include "protocol.h"
#include "fs/steps.h"
#include "fs/stream.h"

/* The ceiling of a measured window or read-ahead. */
#define QC_AUTO_SIZE_MAX ((uint64_t)256 << 20)

static int parse_size(const char *name, const char *s, uint64_t *out)
{
	unsigned long long v;
	uint64_t unit = 1;
	char *end;

	if (!s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *s == '-' || *s == '+' || errno)
		goto out_bad;
	switch (*end) {
	case 'k': case 'K': unit = (uint64_t)1 << 10; end++; break;
	case 'm': case 'M': unit = (uint64_t)1 << 20; end++; break;
	case 'g': case 'G': unit = (uint64_t)1 << 30; end++; break;
	}
	if (*end || v > QC_STREAM_SIZE_MAX / unit)
		goto out_bad;
	*out = v * unit;
	return 0;
out_bad:
	fprintf(stderr, "qftfs: invalid %s '%s': expected a size in bytes "
		"with an optional K, M or G suffix, at most 1G\n", name, s);
	return -EINVAL;
}

int qc_fs_init(struct qc_fs *fs)
{
	int r = qn_table_init(&fs->nodes);

	if (r < 0)
		return r;
	qc_step_init(&fs->steps);
	qc_stream_init(&fs->streams);
	qc_file_reg_init(&fs->files);
	qc_lock_init(&fs->locks);
	/* After the options: walkahead is already set. */
	if ((r = qc_walk_init(fs)) < 0)
		return r;
	/* After the options: commit.on is already set. */
	return qc_commit_init(&fs->commit, fs->commit.on);
}

int qc_fs_parse_size(const char *name, const char *s, uint64_t *out)
{
	return parse_size(name, s, out);
}

/*
 * The most a measured window or read-ahead may grow to: 1/64 of the
 * memory per direction (a window's data waits in the send queue, a
 * read-ahead's in replies), between the fixed default and 256 MiB.  A
 * 10 GbE link with a 40 ms round trip wants 100 MB.
 */
static uint64_t auto_ceiling(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t v = QC_WINDOW_DEFAULT;

	if (pages > 0 && psize > 0)
		v = (uint64_t)pages * (uint64_t)psize / 64;
	if (v < QC_WINDOW_DEFAULT)
		v = QC_WINDOW_DEFAULT;
	return v < QC_AUTO_SIZE_MAX ? v : QC_AUTO_SIZE_MAX;
}

int qc_fs_set_sizes(struct qc_fs *fs, const char *window,
		    const char *readahead)
{
	uint64_t w = auto_ceiling(), ra = auto_ceiling();

	if (parse_size("window", window, &w) < 0 ||
	    parse_size("readahead", readahead, &ra) < 0)
		return -EINVAL;
	fs->window = w;
	fs->readahead = ra;
	fs->sizes_set = true;
	/* Sizes not given are measured, up to the ceiling above. */
	qc_stream_set_auto(fs, !window, !readahead);
	return 0;
}

/* The server is gone or going: nothing to close there any more. */
static void drop_file(struct qn_file *nf)
{
	qc_file_free((struct qc_file *)nf);
}

void qc_fs_destroy(struct qc_fs *fs)
{
	/* Listings and walks hold node references: they go first. */
	qc_walk_destroy(fs);
	qc_dir_destroy(fs);
	qn_table_destroy(&fs->nodes, drop_file);
	qc_file_reg_destroy(&fs->files);
	qc_lock_destroy(&fs->locks);
	qc_stream_destroy(&fs->streams);
	qc_step_destroy(&fs->steps);
	qc_commit_destroy(&fs->commit);
	/* Every chunk is freed by now; anything else is a bookkeeping bug. */
	if (atomic_load(&fs->ra_bytes) != 0)
		qft_warn("read-ahead accounting is off by %llu bytes",
			 (unsigned long long)atomic_load(&fs->ra_bytes));
}
