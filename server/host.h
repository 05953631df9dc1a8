/* SPDX-License-Identifier: MIT */
/*
 * The identity of the host the server runs on, as a client carrying its
 * session over to a new server needs it (docs/protocol.md, "Carrying a
 * session over to a new server"): the kernel's boot id, which changes
 * at every boot, so that equal ids mean that what an earlier server on
 * this host wrote and had acknowledged is still in the page cache.
 *
 * In a build with -Dfault_injection=true, QFTFS_FAULT_BOOT_ID=STRING
 * replaces the id, so that a test can play a host that rebooted.  A
 * test hook, not part of the protocol.
 *
 * Read once at start (srv_host_init); nothing here is locked after that.
 */
#ifndef SRV_HOST_H
#define SRV_HOST_H

#include <stdint.h>

#define SRV_HOST_FAULT_ENV "QFTFS_FAULT_BOOT_ID"

/*
 * Reads the boot id (and the fault hook).  Never fails the server: a
 * host without one (not Linux, /proc not mounted) just has none, and
 * HELLO then does not grant QFT_FEAT_BOOTID.  -EINVAL only for a bad
 * QFTFS_FAULT_BOOT_ID value (logged).
 */
int srv_host_init(void);

/* The boot id as HELLO sends it (visible ASCII, 1 to QFT_MAX_BOOT_ID
 * bytes), or NULL when the host has none; *len its length. */
const char *srv_host_boot_id(uint32_t *len);

#endif /* SRV_HOST_H */
