/* SPDX-License-Identifier: MIT */
/*
 * Handle numbers of the connection's links (net/conn.h, which includes
 * this; conn.h, "Handles are per link").
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_NET_HANDLE_H
#define QC_NET_HANDLE_H

#include <stdint.h>

struct qc_conn;

/*
 * Client-chosen handles of link `gen`, 1..QFT_MAX_HANDLES.  A handle may
 * be reused as soon as its CLOSE (or the failed OPEN that tried to bind
 * it) has been sent: the server executes requests in order, so it sees the
 * CLOSE before any later request that binds the number again.  -EMFILE
 * when all are in use, -ENOTCONN when `gen` is not the live link.  Freeing
 * a handle of a link that is gone does nothing: its numbers went with it.
 */
int qc_handle_alloc(struct qc_conn *c, uint64_t gen, uint64_t *handle);
void qc_handle_free(struct qc_conn *c, uint64_t gen, uint64_t handle);

#endif /* QC_NET_HANDLE_H */
