/* SPDX-License-Identifier: MIT */
/*
 * The bandwidth-delay estimate of one direction of a mount's bulk stream
 * (qc_bdp_), which the write-behind window and the read-ahead are sized
 * from when no size was given.  Callers take a call's send and answer
 * times with qc_bdp_now_us, the clock the samples are in.
 */
#ifndef QC_BDP_H
#define QC_BDP_H

#include <pthread.h>
#include <stdint.h>

#include "protocol.h"

/*
 * The bandwidth-delay product of one direction of the bulk stream, measured
 * from the calls themselves: the smallest time from sending a WRITE (or a
 * read-ahead READ) to its answer on this link, and the best rate at which
 * answered bytes came back, forgotten after QC_BDP_FORGET_US so that a
 * link that slowed down is measured again.  The call time is kept for the
 * link's life (a new link, after a reconnect, starts over): a busy stream
 * only ever sees call times stretched by its own window, and adopting
 * those would grow the window without end.  The call time includes
 * putting the call's own data on the wire, so the product covers a full
 * call beyond the link's own product: what a window must hold to keep the
 * link busy while the next call is prepared.  Guarded by lock.
 */
#define QC_BDP_FORGET_US    ((uint64_t)10000000)
/* A rate is measured over at least this long (and one call time). */
#define QC_BDP_INTERVAL_US  ((uint64_t)20000)
/* A window or credit sized from the product: this many products... */
#define QC_BDP_GAIN         2
/* ... and never less than this: a few calls in flight at all times. */
#define QC_BDP_MIN          ((uint64_t)4 * QFT_MAX_DATA)
struct qc_bdp {
	pthread_mutex_t lock;
	uint64_t gen;           /* the link measured */
	uint64_t rtt_us;        /* smallest call time, 0 = none yet */
	uint64_t bw;            /* best rate, bytes/s, 0 = none yet */
	uint64_t bw_at;
	uint64_t bytes;         /* answered so far */
	uint64_t mark_us;       /* start of the rate's current interval */
	uint64_t mark_bytes;    /* bytes at mark_us */
};

/* Microseconds on the monotonic clock: a call's send and answer times. */
uint64_t qc_bdp_now_us(void);
/* Forgets everything measured. */
void qc_bdp_reset(struct qc_bdp *b);
/* A call of `len` bytes sent on link `gen` at sent_us was answered at
 * now_us. */
void qc_bdp_sample(struct qc_bdp *b, uint64_t gen, uint64_t sent_us,
		   uint64_t now_us, uint32_t len);
/*
 * QC_BDP_GAIN products, at least QC_BDP_MIN and at most `max`; `dflt`
 * until both the call time and the rate are known.
 */
uint64_t qc_bdp_size(struct qc_bdp *b, uint64_t dflt, uint64_t max);
#endif /* QC_BDP_H */
