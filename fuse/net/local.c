// SPDX-License-Identifier: MIT
/*
 * The endpoint of a mount of a local directory (local.h): the vtable a
 * reconnect calls from the watchdog thread (so it logs), and the first
 * start, in the foreground (so it prints).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "log.h"
#include "net/conn.h"
#include "net/local.h"
#include "net/transport.h"
#include "protocol.h"

#define RELAY_WAIT_MS     2000

static int local_open(void *ctx, struct qc_endpoint *ep)
{
	struct qc_local_tr *lt = ctx;
	struct qc_transport *t;
	int r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	r = qc_transport_spawn(t, lt->server, lt->root, lt->follow,
			       lt->capture);
	if (r < 0) {
		qft_err("cannot start the server: %s", strerror(-r));
		qc_transport_free(t, 0);
		free(t);
		return r;
	}
	if (lt->capture && (r = qc_transport_relay_start(t)) < 0)
		qft_warn("cannot relay the server's messages: %s",
			 strerror(-r));
	ep->fd = t->fd;
	ep->sealed = false;
	ep->meta = true;
	ep->meta_fd = t->meta_fd;
	t->meta_fd = -1;
	ep->priv = t;
	return 0;
}

static void local_close(void *ctx, struct qc_endpoint *ep, int timeout_ms,
			bool clean)
{
	struct qc_transport *t = ep->priv;
	char desc[128];
	int status = 0;

	(void)ctx;
	if (!clean)
		qc_transport_kill(t, timeout_ms, NULL);
	else if (qc_transport_reap(t, timeout_ms, &status) == 0 && status)
		qft_warn("server %s",
			 qc_transport_status_str(status, desc, sizeof(desc)));
	qc_transport_free(t, RELAY_WAIT_MS);
	free(t);
}

static const struct qc_transport_ops local_ops = {
	.open = local_open,
	.close = local_close,
};

/* Starts the server, says HELLO; on failure explains why, from the
 * server's own words and exit status. */
int qc_local_start(struct qc_local_tr *lt, struct qc_conn_opts *co,
		   struct qc_conn **connp)
{
	char msg[QFT_MAX_ERRMSG + 128], desc[128];
	struct qc_endpoint ep = { .fd = -1, .meta_fd = -1 };
	struct qc_transport *t;
	int status = 0, r;
	bool reaped;

	t = calloc(1, sizeof(*t));
	if (!t) {
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	r = qc_transport_spawn(t, lt->server, lt->root, lt->follow,
			       lt->capture);
	if (r < 0) {
		fprintf(stderr, "qftfs: cannot start the server: %s\n",
			strerror(-r));
		goto out_free;
	}
	ep.fd = t->fd;
	ep.meta = true;
	ep.meta_fd = t->meta_fd;
	t->meta_fd = -1;
	ep.priv = t;
	co->ops = &local_ops;
	co->ops_ctx = lt;
	r = qc_conn_new(connp, co, &ep);
	if (r < 0) {
		fprintf(stderr, "qftfs: %s\n", strerror(-r));
		qc_transport_reap(t, QC_REAP_WAIT_MS, NULL);
		goto out_free;
	}
	r = qc_conn_hello(*connp, QC_HELLO_TIMEOUT_S, msg, sizeof(msg));
	if (r == 0) {
		lt->first = t;
		return 0;
	}

	/* The transport stays ours (-1), for its exit status and stderr. */
	qc_conn_shutdown(*connp, 0, -1);
	qc_conn_free(*connp);
	*connp = NULL;
	reaped = qc_transport_reap(t, QC_REAP_WAIT_MS, &status) == 0;
	/* What the server said (such as why exec failed) comes first. */
	qc_transport_copy_stderr(t, 1000);
	if (r != -EPIPE)
		fprintf(stderr, "qftfs: %s\n", msg);
	else if (reaped)
		fprintf(stderr, "qftfs: the server '%s' did not start (%s)\n",
			t->argv0,
			qc_transport_status_str(status, desc, sizeof(desc)));
	else
		fprintf(stderr, "qftfs: the server '%s' did not start\n",
			t->argv0);
	/* getopt's own words come first; this says what to do about them. */
	if (r == -EPIPE && reaped && lt->follow && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 2)
		fprintf(stderr, "qftfs: -o follow_symlinks needs a qftfs-server "
			"that knows --follow-symlinks: update '%s', or mount "
			"without follow_symlinks\n", t->argv0);
out_free:
	qc_transport_free(t, RELAY_WAIT_MS);
	free(t);
	return r;
}
