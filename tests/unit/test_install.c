// SPDX-License-Identifier: MIT
/*
 * Unit test of fuse/login/install.c's decisions without a remote host: which
 * build a board reporting `uname -m`, its /bin/sh's ELF flags and its ARM
 * dynamic linker gets, and where the client finds the binary to upload.
 * The exchange with the remote script is tested end to end by
 * tests/test_install.py.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "check.h"
#include "login/install.h"

static void test_pick(void)
{
	static const struct {
		const char *m, *e, *ld, *want;
	} cases[] = {
		{ "x86_64", "-", "-", "x86_64" },
		{ "aarch64", "00000000", "-", "aarch64" },
		{ "arm64", "-", "-", "aarch64" },
		/* ARMv7 with a hard-float userland (flags 0x05000400). */
		{ "armv7l", "00040005", "hf", "armhf" },
		/* ARMv7 running Debian armel (0x05000200): soft float. */
		{ "armv7l", "00020005", "el", "armel" },
		/* No od on the board: the dynamic linker decides. */
		{ "armv7l", "-", "el", "armel" },
		{ "armv7l", "-", "hf", "armhf" },
		{ "armv7l", "-", "-", "armhf" },
		/* A 64-bit CPU in 32-bit mode. */
		{ "armv8l", "00040005", "hf", "armhf" },
		/* Pi Zero / Pi 1 with Raspbian's hard-float ARMv6 userland:
		 * Debian's armhf is ARMv7 code, armel runs. */
		{ "armv6l", "00040005", "hf", "armel" },
		{ "armv5tejl", "-", "-", "armel" },
		{ "mips", "-", "-", NULL },
		{ "armv", "-", "-", NULL },
		{ "riscv64", "-", "-", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = qc_install_pick_arch(cases[i].m, cases[i].e,
						       cases[i].ld);

		check_ctx("%s %s %s", cases[i].m, cases[i].e, cases[i].ld);
		if (!cases[i].want)
			CHECK(got == NULL);
		else
			CHECK(got && strcmp(got, cases[i].want) == 0);
	}
	check_ctx("%s", "");
}

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL);
	if (f) {
		fputs("binary", f);
		fclose(f);
	}
}

static void test_find(void)
{
	char dir[] = "/tmp/qftfs-test-install-XXXXXX", path[PATH_MAX];
	char looked[4096], *found;
	struct qc_install_opts o = { .enabled = true };
	int err;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	o.server_binaries = dir;
	/* Nothing there: -ENOENT, and the message lists where it looked. */
	found = qc_install_find(&o, "armel", looked, sizeof(looked), &err);
	CHECK(found == NULL);
	CHECK_EQ(err, -ENOENT);
	snprintf(path, sizeof(path), "%s/armel/qftfs-server", dir);
	CHECK(strstr(looked, path) != NULL);
	snprintf(path, sizeof(path), "%s/qftfs-server-armel", dir);
	CHECK(strstr(looked, path) != NULL);

	/* DIR/qftfs-server-ARCH */
	touch(path);
	found = qc_install_find(&o, "armel", looked, sizeof(looked), &err);
	CHECK(found && strcmp(found, path) == 0);
	CHECK_EQ(err, 0);
	free(found);

	/* DIR/ARCH/qftfs-server comes first; a directory is no binary. */
	snprintf(path, sizeof(path), "%s/armel", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/armel/qftfs-server", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	found = qc_install_find(&o, "armel", looked, sizeof(looked), &err);
	CHECK(found && strstr(found, "qftfs-server-armel") != NULL);
	free(found);
	CHECK_EQ(rmdir(path), 0);
	touch(path);
	found = qc_install_find(&o, "armel", looked, sizeof(looked), &err);
	CHECK(found && strcmp(found, path) == 0);
	free(found);
	/* Another architecture does not take it. */
	found = qc_install_find(&o, "aarch64", looked, sizeof(looked), &err);
	if (found && strstr(found, dir))
		CHECK(!"aarch64 found the armel binary");
	free(found);

	unlink(path);
	snprintf(path, sizeof(path), "%s/armel", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/qftfs-server-armel", dir);
	unlink(path);
	rmdir(dir);
}

static void test_parse(void)
{
	bool on = false;

	CHECK_EQ(qc_install_parse("yes", &on), 0);
	CHECK(on);
	CHECK_EQ(qc_install_parse("no", &on), 0);
	CHECK(!on);
	CHECK_EQ(qc_install_parse("maybe", &on), -EINVAL);
	CHECK_EQ(qc_install_parse("", &on), -EINVAL);
	/* The script goes inside single quotes: it must hold none. */
	CHECK(strchr(qc_install_script(), '\'') == NULL);
}

/* qc_install_run against `remote`, the script's whole output. */
static int exchange(const char *remote)
{
	struct qc_install_opts o = { .enabled = true };
	char ran[256];
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if (write(sv[1], remote, strlen(remote)) != (ssize_t)strlen(remote))
		return -EIO;
	shutdown(sv[1], SHUT_WR);
	r = qc_install_run(sv[0], "board", &o, ran, sizeof(ran));
	close(sv[0]);
	close(sv[1]);
	return r;
}

/* NOTE lines (a home cache passed over, and why) are shown and skipped;
 * a flood of them is not the script. */
static void test_notes(void)
{
	char many[1024] = "";

	CHECK_EQ(exchange("QFTFS-NOTE not using /h/.cache/qftfs for the "
			  "server cache: /h belongs to uid 7, not 1000\n"
			  "QFTFS-RUN /tmp/qftfs-1000/x/qftfs-server\n"), 0);
	for (int i = 0; i < 9; i++)
		strcat(many, "QFTFS-NOTE again\n");
	strcat(many, "QFTFS-RUN /x\n");
	CHECK_EQ(exchange(many), -EPROTO);
	CHECK_EQ(exchange("QFTFS-NOTE\n"), -EPROTO);
}

int main(void)
{
	test_pick();
	test_find();
	test_parse();
	test_notes();
	return check_exit("install");
}
