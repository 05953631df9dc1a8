/* SPDX-License-Identifier: MIT */
/*
 * Attaching to a running session over a new ssh login (docs/protocol.md,
 * "Attaching over ssh"), where the session cannot be reached over TCP:
 * the tunnel (-o transport=ssh, a ProxyJump), or a direct port that no
 * longer answers while ssh does (a firewall appeared).
 *
 *   1. log in with ssh (ssh.h; never prompting) and run
 *        exec <server> --attach <id>
 *      where <id> is the session id the server's greeting gave;
 *   2. read one line: "QFTFS <version> attached", or "QFTFS <version>
 *      gone" when no such session runs any more (also said by exit
 *      status QFT_ATTACH_EXIT_GONE, or 126/127/2: a server that cannot be
 *      run or cannot attach);
 *   3. run the data-plane handshake under the resume key K_r through the
 *      channel: the session's own proof decides, not the id.
 *
 * The result is the channel's descriptor and its record keys; the caller
 * then sends RESUME on it as on a TCP connection, and keeps the login
 * (struct qc_ssh) until that connection is gone.
 *
 * Error convention: 0 or a negative errno, logged at debug level only
 * (the resume retries every second or so) except when final.
 */
#ifndef QC_ATTACH_H
#define QC_ATTACH_H

#include "auth.h"
#include "login/ssh.h"
#include "seal.h"

/*
 * Steps 1-3 with `ssh` and the remote `command`, each step within about
 * `timeout_ms`.  0 with *ssh (free it with qc_ssh_free once the
 * connection is closed), *fd (the caller's to close) and *keys set;
 * -ECONNREFUSED when the session is gone, -EACCES when the proof was
 * refused, -EPROTO for a server of another protocol version, another
 * -errno when a later attempt may work.
 */
int qc_attach_open(struct qc_ssh **ssh, const struct qc_ssh_opts *o,
		   const char *command, const uint8_t key[QFT_SECRET_SIZE],
		   enum qft_cipher cipher, int timeout_ms, int *fd,
		   struct qft_session_keys *keys);

#endif /* QC_ATTACH_H */
