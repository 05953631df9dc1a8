/* SPDX-License-Identifier: MIT */
/*
 * The endpoint of a mount of a remote directory: the ssh bootstrap of a
 * qftfs-server on the remote host (login/bootstrap.h), on the first
 * connection and again on every reconnect (conn.h's struct
 * qc_transport_ops).
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_NET_REMOTE_H
#define QC_NET_REMOTE_H

#include "login/bootstrap.h"
#include "net/conn.h"

/* What a remote mount's endpoints are made from: the whole bootstrap each
 * time (ep->priv is a heap-allocated struct qc_boot). */
struct qc_remote_tr {
	struct qc_boot_opts bo;    /* batch (no prompts) once mounted */
	struct qc_boot *first;     /* the first one, until qc_conn_start */
};

/*
 * The first connection, in the foreground: logs in, starts the server,
 * opens the data plane, makes the connection (*connp) with `co`, which it
 * first points at this endpoint (co->ops, co->ops_ctx = rt: reconnects
 * bootstrap again), and says HELLO.  On success rt->first is the
 * bootstrap, whose channel pump the caller pauses around the fork
 * (qc_boot_pause, qc_boot_resume) and forgets once qc_conn_start owns it.
 * On failure *connp is NULL and stderr says why.
 */
int qc_remote_start(struct qc_remote_tr *rt, struct qc_conn_opts *co,
		    struct qc_conn **connp);

#endif /* QC_NET_REMOTE_H */
