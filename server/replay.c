// SPDX-License-Identifier: MIT
/* Request numbering and reply cache of a resumable lane (see replay.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "protocol.h"
#include "replay.h"

struct slot {
	uint64_t id;         /* 0: unused */
	uint16_t op;
	bool kept;           /* frame holds the reply */
	uint32_t len;
	uint8_t *frame;      /* SRV_REPLAY_MAX_FRAME bytes once allocated */
};

struct srv_replay {
	uint64_t next;       /* the id expected next */
	struct slot slot[QFT_RESUME_WINDOW];
	struct qbuf scratch; /* an OPEN reply re-encoded without data */
};

int srv_replay_new(struct srv_replay **out)
{
	struct srv_replay *rp = calloc(1, sizeof(*rp));

	if (!rp)
		return -ENOMEM;
	rp->next = 1;
	qbuf_init(&rp->scratch, SRV_REPLAY_MAX_FRAME);
	*out = rp;
	return 0;
}

void srv_replay_free(struct srv_replay *rp)
{
	if (!rp)
		return;
	for (size_t i = 0; i < QFT_RESUME_WINDOW; i++)
		free(rp->slot[i].frame);
	qbuf_free(&rp->scratch);
	free(rp);
}

bool srv_replay_reexec(uint16_t op)
{
	switch (op) {
	case QFT_OP_READ:
	case QFT_OP_READDIR:
	case QFT_OP_SCAN:
	case QFT_OP_LSTAT:
	case QFT_OP_FSTAT:
	case QFT_OP_READLINK:
	case QFT_OP_STATFS:
	case QFT_OP_GETXATTR:
	case QFT_OP_LISTXATTR:
	case QFT_OP_PING:
	/* Read-only like READ, and its reply carries file data the cache
	 * must not hold: run again, it reads the files as they are now. */
	case QFT_OP_FETCH:
		return true;
	default:
		return false;
	}
}

static struct slot *slot_of(struct srv_replay *rp, uint64_t id)
{
	return &rp->slot[id % QFT_RESUME_WINDOW];
}

/* The lowest id still in the window. */
static uint64_t window_low(uint64_t next)
{
	return next > QFT_RESUME_WINDOW ? next - QFT_RESUME_WINDOW : 1;
}

int srv_replay_check(struct srv_replay *rp, uint16_t op, uint64_t id,
		     const uint8_t **frame, size_t *len)
{
	struct slot *sl;

	if (id == rp->next) {
		sl = slot_of(rp, id);
		sl->id = id;
		sl->op = op;
		sl->kept = false;
		rp->next++;
		return SRV_REPLAY_NEW;
	}
	if (id == 0 || id >= rp->next || id < window_low(rp->next)) {
		qft_err("closing connection: %s id %llu out of order "
			"(expected %llu)", qft_op_name(op),
			(unsigned long long)id, (unsigned long long)rp->next);
		return -EPROTO;
	}
	sl = slot_of(rp, id);
	if (sl->id != id || sl->op != op) {
		qft_err("closing connection: %s id %llu retransmitted as "
			"another request", qft_op_name(op),
			(unsigned long long)id);
		return -EPROTO;
	}
	if (srv_replay_reexec(op))
		return SRV_REPLAY_AGAIN;
	if (!sl->kept) {
		/* Its reply could not be kept: executing it again is what
		 * the cache is there to prevent. */
		qft_err("closing connection: no reply kept for the "
			"retransmitted %s id %llu", qft_op_name(op),
			(unsigned long long)id);
		return -EPROTO;
	}
	*frame = sl->frame;
	*len = sl->len;
	return SRV_REPLAY_CACHED;
}

/* Re-encodes an OPEN reply with its first data left out. */
static int strip_open(struct srv_replay *rp, const struct qft_msg *rep,
		      const uint8_t **frame, size_t *len)
{
	struct qft_msg m = *rep;
	int r;

	m.opflags &= ~(uint32_t)(QFT_OPEN_DATA | QFT_OPEN_EOF);
	m.data.p = NULL;
	m.data.len = 0;
	qbuf_reset(&rp->scratch);
	r = qft_msg_encode(&rp->scratch, &m);
	if (r < 0)
		return r;
	*frame = rp->scratch.data;
	*len = rp->scratch.len;
	return 0;
}

void srv_replay_store(struct srv_replay *rp, const struct qft_msg *rep,
		      const uint8_t *frame, size_t len)
{
	struct slot *sl = slot_of(rp, rep->id);
	int r;

	if (srv_replay_reexec(rep->op) || sl->id != rep->id ||
	    sl->op != rep->op)
		return;
	if (rep->op == QFT_OP_OPEN && rep->status == QFT_OK &&
	    (rep->opflags & QFT_OPEN_DATA)) {
		r = strip_open(rp, rep, &frame, &len);
		if (r < 0) {
			qft_err("cannot keep the reply of OPEN id %llu: %s",
				(unsigned long long)rep->id, strerror(-r));
			return;
		}
	}
	if (len > SRV_REPLAY_MAX_FRAME) {
		qft_err("cannot keep the reply of %s id %llu: %zu bytes",
			qft_op_name(rep->op), (unsigned long long)rep->id, len);
		return;
	}
	if (!sl->frame) {
		sl->frame = malloc(SRV_REPLAY_MAX_FRAME);
		if (!sl->frame) {
			qft_err("cannot keep the reply of %s id %llu: out of "
				"memory", qft_op_name(rep->op),
				(unsigned long long)rep->id);
			return;
		}
	}
	memcpy(sl->frame, frame, len);
	sl->len = (uint32_t)len;
	sl->kept = true;
}

uint64_t srv_replay_next(const struct srv_replay *rp)
{
	return rp->next;
}

int srv_replay_resume(const struct srv_replay *rp, uint64_t seq)
{
	if (seq == 0 || seq > rp->next || seq < window_low(rp->next))
		return -ESTALE;
	return 0;
}

#ifdef QFT_FAULT_INJECTION
/* Opcodes whose first reply is still to be dropped, or to stop the
 * server at; set once at start. */
static bool fault_armed[QFT_OP__COUNT];
static bool stop_armed[QFT_OP__COUNT];

/* Arms armed[op] for every opcode named in the list `env` names. */
static int arm(const char *name, bool *armed)
{
	const char *env = getenv(name);
	char *list, *tok, *save = NULL;
	int r = 0;

	if (!env || !*env)
		return 0;
	list = strdup(env);
	if (!list)
		return -ENOMEM;
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		uint16_t op;

		for (op = 1; op < QFT_OP__COUNT; op++)
			if (strcmp(qft_op_name(op), tok) == 0)
				break;
		if (op == QFT_OP__COUNT) {
			qft_err("%s: no opcode named %s", name, tok);
			r = -EINVAL;
			break;
		}
		armed[op] = true;
	}
	free(list);
	if (r == 0)
		qft_warn("fault injection: %s=%s", name, env);
	return r;
}

int srv_replay_fault_init(void)
{
	int r = arm(SRV_REPLAY_FAULT_ENV, fault_armed);

	return r < 0 ? r : arm(SRV_REPLAY_FAULT_STOP_ENV, stop_armed);
}

bool srv_replay_fault_drop(uint16_t op)
{
	return op < QFT_OP__COUNT &&
	       __atomic_exchange_n(&fault_armed[op], false, __ATOMIC_RELAXED);
}

bool srv_replay_fault_stop(uint16_t op)
{
	return op < QFT_OP__COUNT &&
	       __atomic_exchange_n(&stop_armed[op], false, __ATOMIC_RELAXED);
}
#endif
