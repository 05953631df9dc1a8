// SPDX-License-Identifier: MIT
/*
 * commit=async's end (sync.h): both ask the closer (fs/commit.h) for
 * what is still queued and what failed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/xattr.h>

#include "cli/sync.h"
#include "fs/commit.h"
#include "fs/fs.h"
#include "log.h"
#include "protocol.h"

/*
 * commit=async: what the application was told is done must be on the
 * server before the connection ends, and what failed must be said.
 */
int qc_sync_drain(struct qc_fs *fs)
{
	char text[QFT_MAX_PATH + 256];
	int r;

	r = qc_commit_sync(fs, text, sizeof(text));
	qc_commit_stop(fs);
	if (r < 0)
		qft_err("unmount: writes queued with commit=async failed: %s",
			text);
	return r;
}

/*
 * `qftfs --sync MOUNTPOINT`: waits until everything written to the mount
 * is on the server's disk and reports what failed since the last time.
 * The kernel does not pass sync(2) or syncfs(2) on to a FUSE file
 * system, so the mount answers an attribute of its root instead.
 */
static int sync_mount(const char *mnt)
{
	char text[QFT_MAX_PATH + 256];
	ssize_t n;

	n = getxattr(mnt, QC_COMMIT_SYNC_XATTR, text, sizeof(text) - 1);
	if (n < 0) {
		int e = errno;

		fprintf(stderr, "qftfs: --sync %s: %s%s\n", mnt, strerror(e),
			e == ENOTSUP || e == ENODATA || e == EOPNOTSUPP ?
			" (not the root of a qftfs mount?)" : "");
		return 1;
	}
	text[n] = '\0';
	if (strncmp(text, "errors 0\n", 9) == 0)
		return 0;
	fprintf(stderr, "qftfs: %s: writes failed after close():\n%s", mnt,
		text);
	return 1;
}

int qc_sync_main(int argc, char *argv[])
{
	if (argc != 3) {
		fprintf(stderr, "usage: qftfs --sync MOUNTPOINT\n");
		return 2;
	}
	return sync_mount(argv[2]);
}
