/* SPDX-License-Identifier: MIT */
/*
 * Fixtures the unit tests share: a connected socket pair, a thread that
 * must start, and a real qftfs-server on a descriptor.  They end the test
 * on failure (T_SKIP where sockets are not allowed), since nothing after
 * them could mean anything.
 */
#ifndef QFT_TEST_FIXTURE_H
#define QFT_TEST_FIXTURE_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

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

/* `exe --stdio --root ROOT` serving descriptor `fd` as its stdin and
 * stdout; the caller closes its copy of fd and reaps the pid. */
__attribute__((unused))
static pid_t spawn_stdio_server(const char *exe, const char *root, int fd)
{
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		execl(exe, exe, "--stdio", "--root", root, (char *)NULL);
		_exit(127);
	}
	return pid;
}

#endif /* QFT_TEST_FIXTURE_H */
