// SPDX-License-Identifier: MIT
/* The mount's streams (see stream.h). */
#include <pthread.h>
#include <stdbool.h>

#include "fs/bdp.h"
#include "fs/fs.h"
#include "fs/stream.h"

/* One estimate per direction for the whole mount: its files all share
 * its link. */
void qc_stream_init(struct qc_streams *sm)
{
	pthread_mutex_init(&sm->up.lock, NULL);
	pthread_mutex_init(&sm->down.lock, NULL);
	qc_bdp_reset(&sm->up);
	qc_bdp_reset(&sm->down);
}

void qc_stream_destroy(struct qc_streams *sm)
{
	pthread_mutex_destroy(&sm->up.lock);
	pthread_mutex_destroy(&sm->down.lock);
}

void qc_stream_set_auto(struct qc_fs *fs, bool window, bool readahead)
{
	fs->streams.window_auto = window;
	fs->streams.ra_auto = readahead;
}
