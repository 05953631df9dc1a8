// SPDX-License-Identifier: MIT
/* The link-measured bandwidth-delay estimate (see bdp.h). */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "fs/bdp.h"

uint64_t qc_bdp_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void qc_bdp_reset(struct qc_bdp *b)
{
	pthread_mutex_lock(&b->lock);
	b->gen = b->rtt_us = b->bw = b->bw_at = 0;
	b->bytes = b->mark_us = b->mark_bytes = 0;
	pthread_mutex_unlock(&b->lock);
}

void qc_bdp_sample(struct qc_bdp *b, uint64_t gen, uint64_t sent_us,
		   uint64_t now_us, uint32_t len)
{
	uint64_t rtt = now_us > sent_us ? now_us - sent_us : 1;
	uint64_t span;

	pthread_mutex_lock(&b->lock);
	if (gen != b->gen) {
		/* Another link: what was measured was another path. */
		b->gen = gen;
		b->rtt_us = b->bw = b->bw_at = 0;
		b->mark_us = 0;
	}
	if (b->rtt_us == 0 || rtt < b->rtt_us)
		b->rtt_us = rtt;
	b->bytes += len;
	if (b->mark_us == 0 || now_us < b->mark_us) {
		b->mark_us = now_us;
		b->mark_bytes = b->bytes;
		goto out;
	}
	span = now_us - b->mark_us;
	if (span >= QC_BDP_INTERVAL_US && span >= b->rtt_us) {
		uint64_t rate = (b->bytes - b->mark_bytes) * 1000000u / span;

		if (rate >= b->bw || now_us - b->bw_at > QC_BDP_FORGET_US) {
			b->bw = rate;
			b->bw_at = now_us;
		}
		b->mark_us = now_us;
		b->mark_bytes = b->bytes;
	}
out:
	pthread_mutex_unlock(&b->lock);
}

uint64_t qc_bdp_size(struct qc_bdp *b, uint64_t dflt, uint64_t max)
{
	uint64_t v = dflt;

	pthread_mutex_lock(&b->lock);
	/* rtt_us is at most seconds and bw at most some GB/s: no overflow */
	if (b->rtt_us && b->bw)
		v = QC_BDP_GAIN * (b->bw * b->rtt_us / 1000000u);
	pthread_mutex_unlock(&b->lock);
	if (v < QC_BDP_MIN)
		v = QC_BDP_MIN;
	return v < max ? v : max;
}
