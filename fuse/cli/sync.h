/* SPDX-License-Identifier: MIT */
/*
 * commit=async's end: the unmount's drain and `qftfs --sync MOUNTPOINT`,
 * which says, from another process, what the mount's closer has not
 * managed to put on the server's disk.
 */
#ifndef QC_CLI_SYNC_H
#define QC_CLI_SYNC_H

#include "fs/fs.h"

/*
 * For a commit=async mount whose session ended, before the connection
 * does: waits until every queued close is on the server and stops the
 * closer (qc_commit_stop).  0, or -errno after logging which writes
 * failed.
 */
int qc_sync_drain(struct qc_fs *fs);

/* argv[1] is "--sync".  Returns the exit status (0, 1 when writes failed
 * or MOUNTPOINT is no qftfs mount, or 2 on usage). */
int qc_sync_main(int argc, char *argv[]);

#endif /* QC_CLI_SYNC_H */
