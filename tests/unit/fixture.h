/* SPDX-License-Identifier: MIT */
/*
 * Fixtures the channel tests share: a connected socket pair and a thread
 * that must start.  Both end the test on failure (T_SKIP where sockets
 * are not allowed), since nothing after them could mean anything.
 */
#ifndef QFT_TEST_FIXTURE_H
#define QFT_TEST_FIXTURE_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"

__attribute__((unused))
static void make_pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(errno == EAFNOSUPPORT || errno == EPERM ? T_SKIP : 1);
	}
}

__attribute__((unused))
static void start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int r = pthread_create(t, NULL, fn, arg);

	if (r) {
		fprintf(stderr, "pthread_create: %s\n", strerror(r));
		exit(1);
	}
}

#endif /* QFT_TEST_FIXTURE_H */
