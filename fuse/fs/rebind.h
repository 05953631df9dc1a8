/* SPDX-License-Identifier: MIT */
/*
 * Open files carried over to a new server (net/conn.h, "Carrying a
 * session over"): the connection's rebind hook.
 *
 * When the session whose server died is carried over to a new one, every
 * open file and directory of its link is opened again there, by path,
 * under its handle number -- unless it is no longer the file it was,
 * which then fails for good: another inode or type; for a file this
 * client has not changed, another size or mtime; for one with writes not
 * yet durable, a size beyond what it wrote.  Such a file fails with EIO
 * when written data may be lost with the old server, ESTALE otherwise.
 * An O_APPEND file with writes in flight fails with EIO too: an append
 * sent again could land twice.
 */
#ifndef QC_FS_REBIND_H
#define QC_FS_REBIND_H

#include <stdint.h>

struct qc_carry;

/* qc_rebind_fn (net/conn.h) with the mount as ctx. */
void qc_rebind_all(void *ctx, uint64_t gen, struct qc_carry *cy);

#endif /* QC_FS_REBIND_H */
