// SPDX-License-Identifier: MIT
/*
 * The endpoint of a mount of a remote directory (remote.h): the vtable a
 * reconnect calls from the watchdog thread, and the first start, in the
 * foreground.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "login/bootstrap.h"
#include "net/conn.h"
#include "net/remote.h"
#include "protocol.h"


/* Hands the data plane of a finished bootstrap to an endpoint. */
static void boot_endpoint(struct qc_boot *b, struct qc_endpoint *ep)
{
	ep->fd = b->data_fd;
	b->data_fd = -1;
	ep->sealed = true;
	ep->cipher = b->cipher;
	ep->keys = b->keys;
	qft_session_keys_wipe(&b->keys);
	ep->priv = b;
	ep->resumable = b->resume_ok;
}

static int remote_open(void *ctx, struct qc_endpoint *ep)
{
	struct qc_remote_tr *rt = ctx;
	struct qc_boot *b;
	int r;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	r = qc_boot_open(b, &rt->bo);
	if (r < 0) {
		free(b);
		return r;
	}
	boot_endpoint(b, ep);
	return 0;
}

static void remote_close(void *ctx, struct qc_endpoint *ep, int timeout_ms,
			 bool clean)
{
	struct qc_boot *b = ep->priv;

	(void)ctx;
	(void)clean;
	/* Closing the channel ends the server, if it is still there. */
	qc_boot_close(b, timeout_ms);
	free(b);
}

static int remote_open_meta(void *ctx, struct qc_endpoint *ep)
{
	struct qc_remote_tr *rt = ctx;
	int r;

	r = qc_boot_open_meta(ep->priv, &rt->bo, &ep->meta_fd,
			      &ep->meta_keys);
	if (r == 0)
		ep->meta = true;
	return r;
}

static int remote_reattach(void *ctx, struct qc_endpoint *ep, int *fd,
			   struct qft_session_keys *keys)
{
	struct qc_remote_tr *rt = ctx;

	return qc_boot_reattach(ep->priv, &rt->bo, fd, keys);
}

static int remote_join(void *ctx, const struct qc_endpoint *ep, int *fd,
		       struct qft_session_keys *keys)
{
	struct qc_remote_tr *rt = ctx;

	return qc_boot_join(ep->priv, &rt->bo, fd, keys);
}

static const struct qc_transport_ops remote_ops = {
	.open = remote_open,
	.close = remote_close,
	.open_meta = remote_open_meta,
	.reattach = remote_reattach,
	.join = remote_join,
};

/* Logs in, starts the server, opens the data plane, says HELLO. */
int qc_remote_start(struct qc_remote_tr *rt, struct qc_conn_opts *co,
		    struct qc_conn **connp)
{
	char msg[QFT_MAX_ERRMSG + 128];
	struct qc_endpoint ep = { .fd = -1, .meta_fd = -1 };
	struct qc_boot *b;
	int r;

	b = calloc(1, sizeof(*b));
	if (!b) {
		fprintf(stderr, "qftfs: out of memory\n");
		return -ENOMEM;
	}
	r = qc_boot_open(b, &rt->bo);
	if (r < 0) {
		free(b);
		return r;
	}
	boot_endpoint(b, &ep);
	co->ops = &remote_ops;
	co->ops_ctx = rt;
	r = qc_conn_new(connp, co, &ep);
	if (r < 0) {
		fprintf(stderr, "qftfs: cannot set up the data plane: %s\n",
			strerror(-r));
		qc_boot_close(b, QC_REAP_WAIT_MS);
		free(b);
		return r;
	}
	r = qc_conn_hello(*connp, QC_HELLO_TIMEOUT_S, msg, sizeof(msg));
	if (r == 0) {
		rt->first = b;
		return 0;
	}

	if (r == -EPIPE)
		snprintf(msg, sizeof(msg), "qftfs-server closed the data "
			 "connection during the handshake");
	qc_conn_shutdown(*connp, 0, -1);
	qc_conn_free(*connp);
	*connp = NULL;
	qc_boot_close(b, QC_REAP_WAIT_MS);
	free(b);
	fprintf(stderr, "qftfs: %s\n", msg);
	return r;
}
