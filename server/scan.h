/* SPDX-License-Identifier: MIT */
/*
 * SCAN: the names and attributes of a whole subtree, breadth-first, in
 * replies of a bounded size (docs/protocol.md, "SCAN").
 *
 * A scan belongs to a directory handle: the first SCAN on the handle
 * starts it, each later one goes on where the last reply stopped, CLOSE
 * ends it.  Its state is a queue of directories still to list (each by
 * its path below the scanned directory) and the stream of the one being
 * listed.  Directories are reached again by a walk from the scanned
 * directory that opens each component with O_NOFOLLOW | O_DIRECTORY, so
 * a symlink is never followed and nothing outside the handle's directory
 * (itself confined to the root) is ever opened; one that was replaced or
 * removed since it was announced ends with a DIR_END carrying that error.
 *
 * Under --follow-symlinks (`follow`) each entry's attributes are those of
 * what it leads to (srv_path_attr_at), so a symlink to a directory is
 * announced as a directory; it is never listed, though: its DIR_END says
 * EXDEV at once, and the client lists it with READDIR when asked.  That
 * keeps the walk above (no symlink followed) and bounds every scan by the
 * real tree below the handle, whatever loops and links to "/" the
 * symlinks make.
 *
 * Memory.  Queued directories of all the scans of one connection share
 * SRV_SCAN_MEM_MAX bytes, and one scan sends at most SRV_SCAN_MAX_ENTRIES
 * entries; past either limit the scan carries on without what does not
 * fit and its last reply says TRUNCATED.  Each scan holds at most three
 * descriptors.  In a build with -Dfault_injection=true, the environment
 * variable QFTFS_SCAN_LIMITS=ENTRIES,BYTES lowers both limits, so that the
 * tests reach them.
 *
 * Error convention: 0 or a negative errno.
 */
#ifndef SRV_SCAN_H
#define SRV_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define SRV_SCAN_MAX_ENTRIES 1000000u
#define SRV_SCAN_MEM_MAX     ((size_t)16 << 20)

struct srv_handles;
struct srv_handle;
struct srv_scan;
struct srv_watch;

/*
 * Appends the next records of the scan of directory handle `h` to `out`
 * (empty, its limit the reply budget): the head, then as many records as
 * fit.  Sets *rflags to QFT_SCAN_EOF (and QFT_SCAN_TRUNCATED) when the
 * scan has ended.  -EMSGSIZE when the budget holds not even one record
 * (nothing is lost: a later SCAN sends it), -ENOMEM, or the error that
 * kept the scan from starting.  With `watch` (QFT_SCAN_WATCH, and the
 * session grants change notification), the first step makes the scan
 * watch every directory before reading it and send WATCHED before the
 * DIR_END of each one still watched when its listing ends.
 */
int srv_scan_step(struct srv_handles *t, struct srv_handle *h,
		  struct srv_watch *watch, bool follow, struct qbuf *out,
		  uint32_t *rflags);

/* Ends a scan, giving its memory back to the connection; NULL is fine. */
void srv_scan_free(struct srv_handles *t, struct srv_scan *sc);

#endif /* SRV_SCAN_H */
