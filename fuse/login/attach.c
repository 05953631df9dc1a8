// SPDX-License-Identifier: MIT
/* Attaching to a running session over a new ssh login (see attach.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "login/attach.h"
#include "login/lineio.h"
#include "protocol.h"

#define LINE_MAX_ATTACH 64

/* Why an --attach that said no line ended: gone for good, or not. */
static int exit_reason(struct qc_ssh *s, const char *host)
{
	struct qc_ssh_exit ex = { .known = false };

	if (qc_ssh_wait(s, 2000, &ex) < 0 || !ex.known || ex.signal[0]) {
		qft_debug("attach: the ssh channel to %s closed", host);
		return -EPIPE;
	}
	/* Not there, not runnable, or too old to know --attach: this
	 * session can never be attached to. */
	if (ex.status == QFT_ATTACH_EXIT_GONE || ex.status == 127 ||
	    ex.status == 126 || ex.status == 2) {
		qft_info("attach: qftfs-server --attach on %s exited with "
			 "status %d", host, ex.status);
		return -ECONNREFUSED;
	}
	qft_debug("attach: qftfs-server --attach on %s exited with status %d",
		  host, ex.status);
	return -EIO;
}

int qc_attach_open(struct qc_ssh **ssh, const struct qc_ssh_opts *o,
		   const char *command, const uint8_t key[QFT_SECRET_SIZE],
		   enum qft_cipher cipher, int timeout_ms, int *fd,
		   struct qft_session_keys *keys)
{
	char line[LINE_MAX_ATTACH], word[16];
	struct qc_ssh *s = NULL;
	unsigned version;
	const char *host;
	int cfd = -1, r;

	r = qc_ssh_connect(&s, o);
	if (r < 0) {
		qft_debug("attach: no ssh login: %s", strerror(-r));
		/* A refused login is no proof that the session is gone. */
		return r == -ECONNREFUSED ? -EHOSTUNREACH :
		       r == -EACCES ? -EPERM : r;
	}
	host = qc_ssh_host(s);
	r = qc_ssh_exec(s, command);
	if (r < 0)
		goto out_free;
	r = qc_ssh_pump_start(s, &cfd);
	if (r < 0)
		goto out_free;
	line[0] = '\0';
	r = qc_line_read(cfd, line, sizeof(line), timeout_ms);
	if (r == -EPIPE && !line[0]) {
		r = exit_reason(s, host);
		goto out_close;
	}
	if (r < 0) {
		qft_debug("attach: no answer from %s: %s", host, strerror(-r));
		goto out_close;
	}
	if (sscanf(line, "QFTFS %u %15s", &version, word) != 2) {
		qft_warn("attach: unexpected output from %s: '%.40s'", host,
			 line);
		r = -EIO;
		goto out_close;
	}
	if (strcmp(word, "gone") == 0) {
		qft_info("attach: %s says the session is gone", host);
		r = -ECONNREFUSED;
		goto out_close;
	}
	if (strcmp(word, "attached") != 0 || version != QFT_VERSION) {
		qft_warn("attach: qftfs-server on %s answered '%.40s'", host,
			 line);
		r = -EPROTO;
		goto out_close;
	}
	r = qft_auth_client_fds(cfd, cfd, key, cipher, timeout_ms, keys);
	if (r < 0) {
		qft_debug("attach: handshake through ssh: %s", strerror(-r));
		/* A wrong proof is final; a handshake cut short is not. */
		r = r == -EACCES || r == -EPROTO ? -EACCES : -ETIMEDOUT;
		goto out_close;
	}
	*fd = cfd;
	*ssh = s;
	return 0;

out_close:
	close(cfd);
out_free:
	qc_ssh_free(s);
	return r;
}
