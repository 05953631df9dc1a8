/* SPDX-License-Identifier: MIT */
/*
 * The endpoint of a mount of a remote directory: the ssh bootstrap of a
 * qftfs-server on the remote host (login/bootstrap.h).
 */
#ifndef QC_NET_REMOTE_H
#define QC_NET_REMOTE_H

#include "login/bootstrap.h"
#include "net/conn.h"

/* The same for a remote mount: the whole bootstrap each time (ep->priv is
 * a heap-allocated struct qc_boot). */
struct remote_tr {
	struct qc_boot_opts bo;    /* batch (no prompts) once mounted */
	struct qc_boot *first;     /* the first one, until qc_conn_start */
};

extern const struct qc_transport_ops remote_ops;

int start_remote(struct qc_conn **connp, struct remote_tr *rt,
		 const struct qc_conn_opts *co);

#endif /* QC_NET_REMOTE_H */
