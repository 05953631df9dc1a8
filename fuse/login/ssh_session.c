// SPDX-License-Identifier: MIT
/* A session's names and address, and libssh2's last error (see
 * ssh_internal.h). */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>

#include "login/ssh_internal.h"

const char *qc_ssh_errmsg(struct qc_ssh *s)
{
	char *msg = NULL;

	if (!s->session)
		return "no session";
	libssh2_session_last_error(s->session, &msg, NULL, 0);
	return msg && *msg ? msg : "unknown error";
}

int64_t qc_ssh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool qc_ssh_proxied(const struct qc_ssh *s)
{
	return s->proxied;
}

const char *qc_ssh_name(const struct qc_ssh *s)
{
	return s->name ? s->name : s->alias;
}

const char *qc_ssh_host(const struct qc_ssh *s)
{
	return s->alias;
}

int qc_ssh_peer(const struct qc_ssh *s, struct sockaddr_storage *ss,
		socklen_t *len)
{
	if (s->openssh) {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
		char port[16];
		int r;

		/* ssh connected to the host the config names, as we read it
		 * (HostName); behind a proxy there is no direct address. */
		if (s->proxied)
			return -EHOSTUNREACH;
		snprintf(port, sizeof(port), "%d", s->port);
		r = getaddrinfo(s->hostname, port, &hints, &ai);
		if (r != 0)
			return -EHOSTUNREACH;
		memcpy(ss, ai->ai_addr, ai->ai_addrlen);
		*len = ai->ai_addrlen;
		freeaddrinfo(ai);
		return 0;
	}
	*len = sizeof(*ss);
	return getpeername(s->sock, (struct sockaddr *)ss, len) < 0 ? -errno
								     : 0;
}
