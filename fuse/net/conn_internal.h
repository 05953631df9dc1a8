/* SPDX-License-Identifier: MIT */
/*
 * What the files of the connection (fuse/net/conn.h, with call.h and
 * handle.h) share: its structs, the clock helpers, and the functions one
 * file defines for the others.  Not for use outside fuse/net/.
 *
 * The files, bottom up (each calls only those above it in this list):
 *   reply.c     decoding and checking replies (qc_reply_free, qc_readdir_check)
 *   seq.c       a resumable session's numbering: each lane's kept
 *               requests, and the mark that it is resuming (qc_seq_*)
 *   pending.c   the table of requests in flight and completing them
 *   link.c      a link: its streams, handshake, failure, users
 *   reader.c    a link's reader threads: routing what the server sends
 *   stripe.c    striping a new link's bulk stream over more connections
 *               (qc_stripe_setup; a resumed one's: qc_stripe_join, then
 *               qc_stripe_start once it reads, qc_stripe_taken in its
 *               reader)
 *   resume.c    sending numbered requests, and resuming a session
 *               after a loss (qc_resume_*)
 *   carry.c     carrying a session whose server died over to a new
 *               server on the same boot of its host (qc_carry_*)
 *   call.c      sending requests and waiting for replies (qc_call*)
 *   reconnect.c making a new link after a loss, with backoff
 *   watchdog.c  deadlines, keepalives, and starting the reconnect
 *   handle.c    handle numbers per link (qc_handle_*)
 *   conn.c      the connection object and its lifecycle (qc_conn_*)
 *
 * Request/reply matching over a replaceable link:
 *
 * Callers wait on their own condition variable in a `struct pending` that
 * lives on their stack and sits in a small hash of in-flight requests keyed
 * by request id.  The live link's reader thread is the only receiver: it
 * takes the waiter out of the table, gives it the reply frame and wakes it.
 * Asynchronous calls put a heap-allocated entry with a callback in the same
 * table; whoever takes it out (the reader with the reply, qc_link_fail, or a
 * sender whose frame could not be encoded) completes and frees it, always
 * after dropping conn->lock.
 *
 * Every entry in the table belongs to the current link: entries are added
 * only while it is alive, and qc_link_fail empties the table when it dies, so
 * a new link starts with an empty one.  A resumable session is the
 * exception (resume.c): its entries belong to the session, survive the
 * death of its link and are sent again on the link that resumes it; they
 * go only when answered or when the session is given up.
 *
 * A link's memory and stream stay valid while anything may use them: its
 * reader (joined before it is freed) and the threads counted in `users`
 * (senders between taking it under the lock and finishing their send).
 * Only the watchdog (or qc_conn_shutdown, once the watchdog is stopped)
 * frees links, after they died and those users left.
 */
#ifndef QC_CONN_INTERNAL_H
#define QC_CONN_INTERNAL_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"
#include "chan.h"
#include "net/conn.h"
#include "pool.h"
#include "seal.h"
#include "tcpcc.h"
#include "thread.h"

#define PENDING_BUCKETS 256u
/* Receive buffers must hold a sealed record; send buffers share it. */
#define FRAME_LIMIT     ((size_t)QFT_CHAN_RECV_LIMIT)
#define HANDLE_WORDS    (QFT_MAX_HANDLES / 64u)

#define NS_PER_MS       1000000LL
#define NS_PER_S        1000000000LL
/* Waiting for a transport to go after a fault: it has nothing to finish. */
#define FAULT_REAP_MS   1000

/*
 * A request in flight (pending.c's table).  What is set before it enters
 * the table (id, op, cb, cb_ctx, oc) does not change there; once a thread
 * has taken it out, it is that thread's alone, whatever the lock.
 */
struct pending {
	uint64_t id;
	struct pending *next;   /* conn lock: bucket chain */
	pthread_cond_t cond;    /* qc_call only */
	bool done;              /* conn lock */
	int err;                /* conn lock: set with done when no reply */
	int64_t sent_ns;        /* conn lock: frame handed to the stream; 0
				 * while its sender still waits to send */
	struct qbuf frame;      /* the reply; the reader fills it before done */
	struct qft_pool *pool;  /* frame.data is a buffer of it, or NULL */
	/* qc_call_async: heap-allocated, completed by calling cb exactly
	 * once by whoever takes it out of the table (NULL for qc_call). */
	qc_done_fn *cb;
	void *cb_ctx;
	uint16_t op;            /* the request's opcode, to check the reply */
	/* qc_call_ordered: the connection whose `ordered` count it holds
	 * until completed; NULL otherwise */
	struct qc_conn *oc;
	/* A resumable lane's request (resume.c): its id on lane `lane`
	 * (seq, 0 when not numbered; `id` is then QC_RKEY(lane, seq)), set
	 * before it enters the table; its place in the lane's list and the
	 * copy of its frame (conn lock; `kept` is NULL while the resume
	 * resends it, which keeps kept_len). */
	unsigned lane;
	uint64_t seq;
	struct pending *rprev, *rnext;  /* conn lock */
	uint8_t *kept;          /* conn lock */
	size_t kept_len;
};

/* The table key of request `seq` of a resumable lane: apart from the
 * connection-wide ids of other links, which never get this high. */
#define QC_RKEY(lane, seq) \
	((1ull << 63) | ((uint64_t)(lane) << 62) | (uint64_t)(seq))
#define QC_RSEQ_MAX     ((1ull << 62) - 1)

/* What a resumable session keeps per lane across its links (resume.c):
 * every field under the conn lock. */
struct qc_rlane {
	uint64_t next;          /* the id the next request gets (from 1) */
	struct pending *head;   /* kept requests, unanswered, in id order */
	struct pending *tail;
};

/* The streams of a link (conn.h, "Two streams"). */
enum { LANE_BULK, LANE_META, LANES };

struct lane {
	struct link *l;         /* immutable */
	struct qft_chan chan;
	/* The stream's record keys, when sealed; the channel borrows them
	 * (tx under its write lock, rx for the reader). */
	struct qft_seal tx;
	struct qft_seal rx;
	bool sealed;            /* immutable once the lane is set up */
	/* HELLO granted QFT_FEAT_NOTIFY: NOTIFY frames are accepted here.
	 * Set before the readers start, then immutable. */
	bool notify;
	/* HELLO granted QFT_FEAT_PROGRESS: PROGRESS frames are accepted
	 * here (link_progress).  Set before the readers start. */
	bool progress;
	/* HELLO granted QFT_FEAT_LAZY: OPEN and CREATE may carry QFT_O_LAZY
	 * here (link_send drops it elsewhere).  Set before the readers
	 * start. */
	bool lazy;
	/* HELLO (or RESUME) granted QFT_FEAT_RESUME: requests here are
	 * numbered and kept (resume.c).  Set before the readers start. */
	bool resume;
	/* HELLO granted QFT_FEAT_CRED: requests here carry their caller
	 * (link_send drops it elsewhere).  Set before the readers start. */
	bool cred;
	uint32_t features;      /* granted by HELLO; set before the readers */
	pthread_t reader;
	bool reader_running;    /* the thread that frees the link only */
};

struct link {
	struct qc_conn *c;      /* immutable */
	uint64_t gen;           /* immutable */
	/* lane[0] is bulk; lane[1] is meta when nlanes is 2, else unused
	 * and everything goes on bulk.  nlanes is fixed before the readers
	 * start. */
	struct lane lane[LANES];
	unsigned nlanes;
	struct qc_endpoint ep;  /* priv: for the transport's close */
	atomic_int_fast64_t last_rx; /* ns: last frame received (or start) */
	atomic_int_fast64_t last_tx; /* ns: last frame sent */

	bool dead;              /* conn lock: nothing more will be answered */
	bool clean;             /* conn lock: the server ended it, asked to */
	unsigned users;         /* conn lock: senders using chan unlocked */
	unsigned npending;      /* conn lock: its entries in the table */
	int64_t busy_since;     /* conn lock: when npending last left 0 */
	unsigned ended;         /* conn lock: lanes the server closed while
				 * we were closing */
	/* The server's uid and gid from the bulk HELLO reply: set by the
	 * handshake, before anyone else sees the link. */
	uint32_t srv_uid, srv_gid;
	/* Every lane agreed on RESUME: its death resumes the session
	 * (resume.c).  Set by the handshake, before the readers start. */
	bool resume;
	/* The server host's boot id from the bulk HELLO reply ("" when it
	 * told none), or for a resumed link the session's: set by the
	 * handshake, before the readers start, then immutable. */
	char boot_id[QFT_MAX_BOOT_ID + 1];
	/* The TCP congestion control of the bulk stream's two senders:
	 * this host's (uploads; qft_tcpcc_get on the socket) and the
	 * server's (downloads; the HELLO reply's, or for a resumed link
	 * the session's).  "" where it is not TCP or the server told
	 * none.  Set before the readers start, then immutable. */
	char cc_up[QFT_TCPCC_NAME_MAX];
	char cc_down[QFT_TCPCC_NAME_MAX];
	/* The bulk stream's connections (stripe.c; 0 until striped, then
	 * 2 or more), and how many the server said it sends on to begin
	 * with (what this side sends on, its channel knows).  Set when the
	 * server answers the STRIPE.  Conn lock. */
	unsigned streams, streams_down;
	/* The STRIPE that takes the joined stripes: its id while its reply
	 * is awaited (else 0), and how many stripes it takes.  Conn lock. */
	uint64_t stripe_id;
	unsigned stripe_n;
};

/*
 * The session a dead resumable link leaves behind, while it is resumed
 * (resume.c): what the next link is made like.  Conn lock.
 */
struct qc_rsess {
	struct qc_endpoint ep;  /* priv, cipher: the transport's */
	bool held;              /* ep.priv is ours to close */
	uint64_t gen;
	unsigned nlanes;
	uint32_t features[LANES];
	/* The boot id its server's host told ("" when none): a new server
	 * that tells the same one can take the session over (carry.c). */
	char boot_id[QFT_MAX_BOOT_ID + 1];
	/* The server's congestion control its HELLO told (link.cc_down):
	 * RESUME does not tell it again. */
	char cc_down[QFT_TCPCC_NAME_MAX];
};

struct qc_conn {
	struct qc_conn_opts o;  /* immutable */
	atomic_uint_fast64_t next_id;
	/* The live link's generation, 0 while there is none: changed under
	 * lock, read without it by every operation on a handle. */
	atomic_uint_fast64_t live_gen;

	pthread_mutex_t lock;
	/* lock (CLOCK_MONOTONIC): a link was installed or died, users left,
	 * closing was set, the watchdog finished. */
	pthread_cond_t cond;
	pthread_cond_t ping_cond; /* lock: ping_wanted or closing */
	struct link *cur;       /* lock: the newest link, maybe dead; NULL
				 * between tearing one down and the next */
	uint64_t last_gen;      /* lock */
	struct pending *pending[PENDING_BUCKETS]; /* lock */
	bool closing;           /* lock: qc_conn_shutdown asked for the end */
	bool lost;              /* lock: down by a fault, not replaced yet */
	int64_t lost_at;        /* lock: when it went down */
	bool warned_stray;      /* lock */
	bool ping_wanted;       /* lock */
	bool watchdog_done;     /* lock */
	/* lock: a reconnect attempt's link during its handshake, which
	 * qc_conn_shutdown cuts short rather than wait for */
	struct link *attempt;

	bool started;           /* owner thread only */
	bool abandoned;         /* owner thread only: watchdog left running */
	pthread_t watchdog;
	pthread_t pinger;

	/* The handle numbers: handle.c's alone. */
	pthread_mutex_t hlock;
	uint64_t hgen;          /* hlock: the link whose numbers hmap holds */
	uint64_t hmap[HANDLE_WORDS]; /* hlock: bit n set = handle n + 1 taken */
	uint64_t hdir[HANDLE_WORDS]; /* hlock: ... and bound by OPENDIR, so it
				      * lives on the meta lane */
	uint32_t hnext;         /* hlock: word where the next search starts */

	uint32_t srv_uid;       /* lock: the live link's (qc_conn_server_ids) */
	uint32_t srv_gid;       /* lock */

	/*
	 * qc_call_ordered requests not completed yet: requests on the meta
	 * stream wait for them, so that none overtakes one.  Its own lock,
	 * since they complete wherever a link fails, `lock` held or not.
	 */
	pthread_mutex_t olock;
	pthread_cond_t ocond;   /* olock: ordered fell to 0 */
	uint64_t ordered;       /* olock */

	/* Requests sent, by how their sender waited (qc_conn_counts). */
	atomic_uint_fast64_t n_waited;
	atomic_uint_fast64_t n_async;
	atomic_uint_fast64_t n_noreply;

	/* A link's bulk stream could not be striped: the next ones are
	 * not (stripe.c). */
	atomic_bool stripes_off;
	/* STRIPEs sent since one was last answered (stripe.c). */
	atomic_uint stripe_tries;

	/* Receive buffers of every link (RPOOL_*); its own locking. */
	struct qft_pool *rpool;

	/*
	 * Resuming (resume.c).  slock[lane] keeps a resumable lane's ids in
	 * send order: held from numbering a request through sending it, and
	 * by the resume from resending through installing the link; taken
	 * before `lock`, never while holding it.
	 */
	pthread_mutex_t slock[LANES];
	pthread_cond_t rcond;   /* lock: a kept request went, a link died */
	unsigned rwaiters;      /* lock: threads waiting on rcond */
	struct qc_rlane rl[LANES]; /* lock */
	uint64_t kept_n;        /* lock: requests with a copy kept */
	uint64_t kept_bytes;    /* lock: ... and their bytes */
	bool resuming;          /* lock: a link died, its session resumes */
	int64_t resume_until;   /* lock: when its grace ends */
	bool expired;           /* lock: the grace passed: calls fail at once
				 * until a new link is up */
	uint64_t resumes;       /* lock: links resumed */
	struct qc_rsess rs;     /* lock: the session being resumed */
	/*
	 * lock: the session's server is gone (its port refused us) but its
	 * host may still hold what it acknowledged: with `resuming` still
	 * set (callers wait as for a resume), the reconnect starts a new
	 * server and carries the session over to it (carry.c).
	 */
	bool restarting;
	uint64_t restarts;      /* lock: sessions carried over */
};

static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static inline struct timespec ts_at(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / NS_PER_S,
			       .tv_nsec = ns % NS_PER_S };

	return ts;
}

/* pthread_cond_timedwait until the CLOCK_MONOTONIC time `ns`; true once
 * that time has passed. */
static inline bool wait_until(pthread_cond_t *cond, pthread_mutex_t *m,
			      int64_t ns)
{
	struct timespec ts = ts_at(ns);

	return pthread_cond_timedwait(cond, m, &ts) == ETIMEDOUT ||
	       now_ns() >= ns;
}

static inline uint64_t next_id(struct qc_conn *c)
{
	return atomic_fetch_add(&c->next_id, 1);
}

static inline int64_t deadline_ns(const struct qc_conn *c)
{
	return (int64_t)c->o.timeout_s * NS_PER_S;
}

/* For the entry points that require the conn lock held (thread.h). */
#define qc_conn_assert_locked(c) qft_assert_locked(&(c)->lock)

/* reply.c */
void qc_reply_frame_free(struct qbuf *frame, struct qft_pool **pool);
int qc_reply_check(uint16_t op, struct qc_reply *rep);

/* pending.c */
void qc_pending_complete(struct pending *p);
struct pending *qc_pending_fail_all(struct qc_conn *c);
struct pending *qc_pending_take(struct qc_conn *c, uint64_t id);
struct pending *qc_pending_find(struct qc_conn *c, uint64_t id);
void qc_pending_add(struct qc_conn *c, struct link *l, struct pending *p);

/* link.c */
void qc_link_wipe_keys(struct qc_endpoint *ep);
void qc_link_wipe_meta(struct qc_endpoint *ep);
int qc_link_new(struct qc_conn *c, struct qc_endpoint *ep, struct link **out);
void qc_link_shutdown(struct link *l);
void qc_link_join(struct link *l);
void qc_link_free(struct qc_conn *c, struct link *l, int reap_ms);
void qc_link_fail(struct qc_conn *c, struct link *l, int err, const char *why);
void qc_link_go_live(struct qc_conn *c, struct link *l);
int qc_link_hello(struct link *l, int timeout_s, char *msg, size_t size);
void qc_link_retire(struct qc_conn *c, struct link *l, int reap_ms);
int qc_link_get(struct qc_conn *c, uint64_t gen, struct link **out);
void qc_link_put(struct qc_conn *c, struct link *l);

/* reader.c */
int qc_reader_start(struct link *l);

/* stripe.c */
int qc_stripe_setup(struct qc_conn *c, struct link *l);
void qc_stripe_join(struct qc_conn *c, struct link *l);
int qc_stripe_start(struct qc_conn *c, struct link *l);
int qc_stripe_taken(struct link *l, const struct qbuf *in);

/* call.c */
int qc_call_async_lane(struct qc_conn *c, uint64_t gen, unsigned lane,
		       struct qft_msg *req, qc_done_fn *done, void *ctx,
		       bool ordered);

/* handle.c */
void qc_handle_reset(struct qc_conn *c, uint64_t gen);
bool qc_handle_is_dir(struct qc_conn *c, uint64_t gen, uint64_t handle,
		      bool opendir);

/* seq.c */
int qc_seq_init(struct qc_conn *c);
void qc_seq_destroy(struct qc_conn *c);
void qc_seq_unkeep(struct qc_conn *c, struct pending *p);
void qc_seq_forget(struct qc_conn *c);
int qc_seq_lost(struct qc_conn *c, struct link *l);

/* resume.c */
int qc_resume_send(struct qc_conn *c, struct link *l, unsigned lane,
		   struct qft_msg *req, struct pending *p);
void qc_resume_retire(struct qc_conn *c, struct link *l);
void qc_resume_run(struct qc_conn *c);
void qc_resume_end(struct qc_conn *c);
void qc_resume_bye(struct qc_conn *c, struct link *l);
void qc_resume_abandon(struct qc_conn *c, const char *why);
/* A request as it is kept: `req` encoded into a heap copy (*frame, *len;
 * id 0 until numbered).  0, or -EIO (logged). */
int qc_resume_frame(const struct qft_msg *req, uint8_t **frame, size_t *len);
/* Conn lock held: p (its copy in p->kept) gets lane `lane`'s next id,
 * written into the copy, joins the lane's list and the table for l. */
void qc_resume_number(struct qc_conn *c, struct link *l, unsigned lane,
		      struct pending *p);
/* Conn lock held (dropped while sending), send locks held: every kept
 * request sent again on l, reading already, which carries them all
 * from now on.  0, or -errno when l failed or the connection closes. */
int qc_resume_resend_all(struct qc_conn *c, struct link *l);
/* Conn lock held: l becomes the session's live link. */
void qc_resume_go_live(struct qc_conn *c, struct link *l);

/* carry.c */
int qc_carry_run(struct qc_conn *c, struct link *l);

/* reconnect.c */
void qc_reconnect(struct qc_conn *c);

/* watchdog.c */
void *qc_watchdog_main(void *arg);
void *qc_watchdog_pinger_main(void *arg);

#endif /* QC_CONN_INTERNAL_H */
