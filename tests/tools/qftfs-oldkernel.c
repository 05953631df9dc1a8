// SPDX-License-Identifier: MIT
/*
 * qftfs-oldkernel PROGRAM [ARGS...]: runs PROGRAM as on an old kernel.
 *
 * A seccomp filter makes every system call newer than Linux 4.10 fail
 * with ENOSYS, as a kernel without it would answer: statx (4.11),
 * io_pgetevents and rseq (4.18), and everything numbered after them --
 * io_uring (5.1), clone3 (5.3), openat2 (5.6), faccessat2 (5.8),
 * close_range (5.9), ...  On x86_64 new system calls only ever get higher
 * numbers, so "from statx on" is one comparison.  tests/test_cross.py runs
 * qftfs-server under it: the boards' vendor kernels are that old, and the
 * server must probe, fall back and say so (docs/boards.md).
 *
 * Exit status: PROGRAM's, or 77 where the filter cannot be installed
 * (not x86_64, or seccomp refused), 127 when PROGRAM cannot be run.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

int main(int argc, char **argv)
{
#if defined(__x86_64__) && defined(SYS_statx)
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, SYS_statx, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(code) / sizeof(code[0]),
		.filter = code,
	};

	if (argc < 2) {
		fprintf(stderr, "usage: qftfs-oldkernel PROGRAM [ARGS...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		fprintf(stderr, "qftfs-oldkernel: seccomp: %s\n",
			strerror(errno));
		return 77;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "qftfs-oldkernel: %s: %s\n", argv[1], strerror(errno));
	return 127;
#else
	(void)argc;
	(void)argv;
	fprintf(stderr, "qftfs-oldkernel: x86_64 only\n");
	return 77;
#endif
}
