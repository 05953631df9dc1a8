/* SPDX-License-Identifier: MIT */
/*
 * The endpoint of a mount of a local directory: a qftfs-server the client
 * spawns itself (transport.h).
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
struct local_tr {
	const char *server;        /* -o server=, or NULL for the default */
	const char *root;
	bool capture;              /* daemonized: relay its stderr to the log */
	bool follow;               /* -o follow_symlinks */
	struct qc_transport *first; /* the first one, until qc_conn_start */
};

extern const struct qc_transport_ops local_ops;

int start_local(struct qc_conn **connp, struct local_tr *lt,
		const struct qc_conn_opts *co);

#endif /* QC_NET_LOCAL_H */
