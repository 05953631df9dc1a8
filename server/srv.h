/* SPDX-License-Identifier: MIT */
/*
 * State of one qftfs-server connection, shared by the server's modules.
 * The server is single-threaded: nothing here is locked.
 */
#ifndef SRV_SRV_H
#define SRV_SRV_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "chan.h"
#include "handle.h"
#include "msg.h"
#include "path.h"
#include "protocol.h"

struct srv {
	struct srv_root root;
	struct srv_handles handles;
	struct qft_chan chan;
	bool hello_done;     /* the first frame was a matching HELLO */
	int fatal;           /* -errno: close the connection after this reply */

	/*
	 * Buffers reused across requests, so the steady state allocates
	 * nothing: the received frame, the encoded reply, and the storage
	 * that reply fields point into until the reply is sent.
	 */
	struct qbuf in;
	struct qbuf out;
	struct qbuf dirents;           /* READDIR entries */
	uint8_t *data;                 /* READ data, GETXATTR/LISTXATTR values */
	size_t data_cap;
	char link[QFT_MAX_PATH + 1];   /* READLINK target */
	char errmsg[QFT_MAX_ERRMSG];   /* reply error text */
};

#endif /* SRV_SRV_H */
