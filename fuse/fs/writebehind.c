// SPDX-License-Identifier: MIT
/* Write-behind of an open file (see writebehind.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "net/conn.h"
#include "fs/file.h"
#include "fs/fs.h"
#include "log.h"
#include "msg.h"
#include "fs/handle.h"
#include "fs/node.h"
#include "protocol.h"
#include "fs/steps.h"
#include "fs/readahead.h"
#include "fs/writebehind.h"

uint64_t qc_wb_window(struct qc_fs *fs)
{
	uint64_t dflt = QC_WINDOW_DEFAULT < fs->window ? QC_WINDOW_DEFAULT :
		fs->window;

	if (!fs->streams.window_auto || fs->window == 0)
		return fs->window;
	return qc_bdp_size(&fs->streams.up, dflt, fs->window);
}

bool qc_wb_must_wait(const struct qc_file *f, uint64_t window, uint32_t len)
{
	/* Room in the window; a write larger than it goes alone.  After an
	 * error the next write fails at once instead. */
	return f->err == 0 && f->wb.bytes > 0 && f->wb.bytes + len > window;
}

int qc_wb_account(struct qc_file *f, uint32_t len)
{
	int r = qc_file_change_begin(f, true);

	if (r == 0)
		f->wb.bytes += len;
	return r;
}

void qc_wb_complete(struct qc_file *f, uint32_t len, int err)
{
	qc_file_assert_locked(f);
	f->wb.bytes -= len;
	qc_file_change_done(f, err);
}

/* One WRITE in flight, for its completion. */
struct wb_write {
	struct qc_file *f;
	uint32_t len;
	uint64_t gen;
	uint64_t sent_us;
};

static void wb_done(void *ctx, int err, struct qc_reply *rep)
{
	struct wb_write *w = ctx;
	struct qc_file *f = w->f;

	if (err == 0 && rep->msg.count != w->len) {
		/* Already answered in full to the kernel: data is lost. */
		qft_err("server wrote %llu bytes of %u",
			(unsigned long long)rep->msg.count, w->len);
		err = -EIO;
	}
	if (err == 0)
		qc_bdp_sample(&f->fs->streams.up, w->gen, w->sent_us, qc_bdp_now_us(),
			      w->len);
	/* Lost with its link: whether it was written nobody knows. */
	err = qc_conn_user_err(err);
	pthread_mutex_lock(&f->lock);
	qc_wb_complete(f, w->len, err);
	free(w);
	qc_file_async_done(f);
}

int qc_wb_write(struct qc_fs *fs, struct qc_file *f, const char *buf,
		uint32_t len, off_t off)
{
	struct wb_write *w;
	struct qft_msg m;
	uint64_t gen, handle, window = qc_wb_window(fs);
	int r;

	r = qc_file_handle(fs, f, &gen, &handle);
	if (r < 0)
		return r;
	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->f = f;
	w->len = len;

	pthread_mutex_lock(&f->lock);
	while (qc_wb_must_wait(f, window, len))
		pthread_cond_wait(&f->cond, &f->lock);
	r = qc_wb_account(f, len);
	if (r == 0)
		qc_step_note_write(f, (uint64_t)off + len);
	pthread_mutex_unlock(&f->lock);
	if (r < 0) {
		/* Data already lost on this handle: no later write may look
		 * like it succeeded. */
		free(w);
		return r;
	}

	/* Size and mtime change: no getattr may be answered from before. */
	qn_file_attr_stale(&fs->nodes, &f->nf);
	qft_msg_init(&m, QFT_OP_WRITE, 0);
	m.handle = handle;
	m.offset = (uint64_t)off;
	m.data.p = (const uint8_t *)buf;
	m.data.len = len;
	w->gen = gen;
	w->sent_us = qc_bdp_now_us();
	/* On failure wb_done has run and made the error sticky. */
	r = qc_conn_user_err(qc_call_async(fs->conn, gen, &m, wb_done, w));
	qc_ra_invalidate_file(fs, f);
	if (r == 0 && fs->window == 0) {
		/* No write-behind: answer once the server did. */
		pthread_mutex_lock(&f->lock);
		while (f->wb.bytes > 0)
			pthread_cond_wait(&f->cond, &f->lock);
		r = f->err;
		pthread_mutex_unlock(&f->lock);
	}
	return r;
}
