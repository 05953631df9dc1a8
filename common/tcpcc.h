/* SPDX-License-Identifier: MIT */
/*
 * The TCP congestion control of a data connection (qftfs -o congestion=,
 * qftfs-server --congestion=; docs/architecture.md, "Congestion
 * control").  Each side chooses for the connections it sends on: the
 * client for uploads, the server for downloads.
 *
 * On a far link that drops packets, one connection running the usual
 * loss-based default (cubic) halves its window at every loss and takes
 * seconds to grow it back; BBR paces by the bandwidth and round trip it
 * measures and keeps the link's rate.  A process may set an algorithm
 * the kernel lists in net.ipv4.tcp_allowed_congestion_control, or any
 * available one with CAP_NET_ADMIN; `auto` takes BBR where it may and
 * otherwise keeps the host's default, without a word above debug.
 */
#ifndef QFT_TCPCC_H
#define QFT_TCPCC_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol.h"

/* The kernel's TCP_CA_NAME_MAX, with the terminating NUL. */
#define QFT_TCPCC_NAME_MAX (QFT_MAX_TCPCC + 1u)
/* What `auto` asks for. */
#define QFT_TCPCC_PREFERRED "bbr"

enum qft_tcpcc_mode {
	QFT_TCPCC_AUTO,     /* the preferred algorithm where allowed */
	QFT_TCPCC_SYSTEM,   /* leave the host's default alone */
	QFT_TCPCC_NAMED,    /* exactly `name`, or fail */
};

struct qft_tcpcc {
	enum qft_tcpcc_mode mode;
	char name[QFT_TCPCC_NAME_MAX];  /* QFT_TCPCC_NAMED only */
};

/*
 * Parses "auto", "system" or an algorithm's name (1 to 15 of [a-z0-9_]).
 * NULL or "" gives auto.  0, or -EINVAL with *out untouched.
 */
int qft_tcpcc_parse(const char *s, struct qft_tcpcc *out);

/* "auto", "system" or the name, as qft_tcpcc_parse reads it back. */
const char *qft_tcpcc_str(const struct qft_tcpcc *p);

/*
 * Applies policy `p` to the connected or listening TCP socket `fd` and
 * puts the algorithm it now uses in `used` (QFT_TCPCC_NAME_MAX bytes).
 * Returns 0; -ENOPROTOOPT when `fd` is not a TCP socket (a socketpair,
 * a pipe: `used` is then ""); for QFT_TCPCC_NAMED, the kernel's refusal:
 * -ENOENT (not available on this host) or -EPERM (not allowed for this
 * process).  `auto` never fails on a refusal: `*refused` (may be NULL)
 * says the preferred one was refused and the default kept.
 */
int qft_tcpcc_apply(int fd, const struct qft_tcpcc *p,
		    char used[QFT_TCPCC_NAME_MAX], bool *refused);

/* The algorithm socket `fd` uses, in `used`: 0, or -ENOPROTOOPT when
 * it is not a TCP socket (`used` is then ""). */
int qft_tcpcc_get(int fd, char used[QFT_TCPCC_NAME_MAX]);

/*
 * Writes why `name` was refused (-ENOENT, -EPERM from qft_tcpcc_apply)
 * in words a user can act on, naming the host's available or allowed
 * algorithms.
 */
void qft_tcpcc_refusal(const char *name, int err, char *buf, size_t size);

#endif /* QFT_TCPCC_H */
