// SPDX-License-Identifier: MIT
/* The host's boot id (see host.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "log.h"
#include "protocol.h"

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

static char boot_id[QFT_MAX_BOOT_ID + 1];
static uint32_t boot_id_len;

/* What the protocol allows of a boot id (msg.c checks the same). */
static bool valid(const char *s, size_t n)
{
	if (n == 0 || n > QFT_MAX_BOOT_ID)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] >= 0x7f)
			return false;
	return true;
}

static void read_boot_id(void)
{
	char buf[QFT_MAX_BOOT_ID + 2];
	ssize_t n;
	int fd;

	fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		qft_info("no boot id (%s: %s): a client whose server dies "
			 "cannot carry its written data over to a new one",
			 BOOT_ID_PATH, strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n <= 0 || !valid(buf, (size_t)n)) {
		qft_info("%s holds no usable boot id", BOOT_ID_PATH);
		return;
	}
	memcpy(boot_id, buf, (size_t)n);
	boot_id[n] = '\0';
	boot_id_len = (uint32_t)n;
}

int srv_host_init(void)
{
#ifdef QFT_FAULT_INJECTION
	const char *env = getenv(SRV_HOST_FAULT_ENV);

	if (env && *env) {
		if (!valid(env, strlen(env))) {
			qft_err("%s=%s: expected 1 to %u visible ASCII "
				"characters", SRV_HOST_FAULT_ENV, env,
				QFT_MAX_BOOT_ID);
			return -EINVAL;
		}
		strcpy(boot_id, env);
		boot_id_len = (uint32_t)strlen(env);
		qft_warn("test fault injection armed: the boot id is %s (%s)",
			 boot_id, SRV_HOST_FAULT_ENV);
		return 0;
	}
#endif
	read_boot_id();
	return 0;
}

const char *srv_host_boot_id(uint32_t *len)
{
	*len = boot_id_len;
	return boot_id_len ? boot_id : NULL;
}
