/* SPDX-License-Identifier: MIT */
/*
 * The endpoint of a mount of a local directory: a qftfs-server the client
 * spawns itself (transport.h), on the first connection and again on every
 * reconnect (conn.h's struct qc_transport_ops).
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef QC_NET_LOCAL_H
#define QC_NET_LOCAL_H

#include <stdbool.h>

#include "net/conn.h"
#include "net/transport.h"

/*
 * The server a local mount talks to, started for the first connection and
 * again for every reconnect (qc_transport_ops; ep->priv is a heap-allocated
 * struct qc_transport).
 */
struct qc_local_tr {
	const char *server;        /* -o server=, or NULL for the default */
	const char *root;
	bool capture;              /* daemonized: relay its stderr to the log */
	bool follow;               /* -o follow_symlinks */
	struct qc_transport *first; /* the first one, until qc_conn_start */
};

/*
 * The first connection, in the foreground: starts the server, makes the
 * connection (*connp) with `co`, which it first points at this endpoint
 * (co->ops, co->ops_ctx = lt: reconnects start a server of their own),
 * and says HELLO.  On success lt->first is the server, for the caller to
 * relay its messages once daemonized and to forget once qc_conn_start
 * owns it.  On failure *connp is NULL and stderr says why, in the
 * server's own words and from its exit status.
 */
int qc_local_start(struct qc_local_tr *lt, struct qc_conn_opts *co,
		   struct qc_conn **connp);

#endif /* QC_NET_LOCAL_H */
