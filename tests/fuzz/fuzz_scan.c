// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the client's reading of SCAN replies (fuse/fs/dir/scan.c):
 * the records of one reply after another, each checked by qft_scan_check
 * and taken into the scan's directories and entries, as the directory
 * cache does before it installs them (qc_dir_scan_parse).  The frames
 * around them are fuzz_client's and fuzz_frame's business.
 *
 * Input: byte 0, the entry cap (the cache's half; 1 + byte 0 * 4), then
 * replies, each a big-endian u16 length and that many bytes of SCAN data
 * (a head with the base index, then records).
 *
 * Oracles besides the sanitizers (LeakSanitizer included: a scan that
 * went wrong must free what it took):
 *  - a scan that took every reply has at least the top directory, no
 *    more complete directories than directories, and no more entries
 *    than the cap allows past the reply that reached it;
 *  - a malformed reply leaves the top directory alone, incomplete.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "buf.h"
#include "fs/dir/internal.h"
#include "fuzz.h"
#include "log.h"
#include "msg.h"

#define MAX_REPLIES 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct qft_blob rep[MAX_REPLIES];
	size_t n = 0, limit, dirs = 0, entries = 0, complete = 0;
	int r;

	if (!ready) {
		qft_log_init("fuzz_scan", getenv("QFTFS_FUZZ_DEBUG") ?
			     QFT_LOG_DEBUG : QFT_LOG_ERR);
		ready = true;
	}
	if (size < 1)
		return 0;
	limit = 1 + (size_t)data[0] * 4;
	data++;
	size--;
	while (size >= 2 && n < MAX_REPLIES) {
		size_t len = (size_t)data[0] << 8 | data[1];

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		rep[n].p = data;
		rep[n].len = len;
		n++;
		data += len;
		size -= len;
	}
	r = qc_dir_scan_parse(rep, n, limit, &dirs, &entries, &complete);
	if (r < 0) {
		FUZZ_CHECK(r == -EPROTO);
		FUZZ_CHECK(dirs == 1 && complete == 0);
		return 0;
	}
	FUZZ_CHECK(r == 0);
	FUZZ_CHECK(dirs >= 1);
	FUZZ_CHECK(complete <= dirs);
	FUZZ_CHECK(dirs <= entries + 1);
	FUZZ_CHECK(entries <= limit);
	return 0;
}
