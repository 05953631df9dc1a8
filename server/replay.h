/* SPDX-License-Identifier: MIT */
/*
 * Request numbering and the reply cache of one lane (bulk or meta) whose
 * HELLO granted QFT_FEAT_RESUME (docs/protocol.md, "Resuming a session").
 *
 * After HELLO the client numbers its requests 1, 2, 3 ...  The lane
 * accepts the next id, or a retransmission of one of the last
 * QFT_RESUME_WINDOW ids; anything else closes the connection.  For each
 * id in the window it remembers the opcode and, unless the opcode is one
 * that may simply run again (srv_replay_reexec), the encoded reply frame
 * (before sealing and compression), whether or not it could be sent.  An
 * OPEN's reply is kept without its first data (flag DATA clear, empty
 * data), which is a valid OPEN reply: the client then READs.
 *
 * Memory: QFT_RESUME_WINDOW slots, each holding at most one reply of at
 * most SRV_REPLAY_MAX_FRAME bytes (the replies kept carry attributes,
 * counts or an error text, never file data), so about 2.2 MiB per lane at
 * worst, allocated as replies arrive and reused slot by slot.
 *
 * One lane's thread uses it; nothing here is locked.
 *
 * In a build with -Dfault_injection=true, the environment variable
 * QFTFS_FAULT_DROP_REPLY=OP[,OP...] (names as qft_op_name gives them)
 * makes the first reply to a request of each named opcode vanish: it is
 * kept here as unsent and the lane's connection is shut down right after
 * (srv_replay_fault_drop), so that the client resumes and retransmits.
 * A test hook, not part of the protocol.
 */
#ifndef SRV_REPLAY_H
#define SRV_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/* The largest reply frame kept: a header, an attr and more, or an
 * error status with the longest error text. */
#define SRV_REPLAY_MAX_FRAME (QFT_HDR_SIZE + 4 + 4 + QFT_MAX_ERRMSG + 256)

struct srv_replay;

enum srv_replay_verdict {
	SRV_REPLAY_NEW = 0,   /* the next id: execute it */
	SRV_REPLAY_CACHED,    /* a retransmission: send the kept reply */
	SRV_REPLAY_AGAIN,     /* a retransmission of a re-executable op */
};

int srv_replay_new(struct srv_replay **out);
void srv_replay_free(struct srv_replay *rp);

/* READ, READDIR, SCAN, LSTAT, FSTAT, READLINK, STATFS, GETXATTR,
 * LISTXATTR, PING and FETCH: a second execution changes nothing. */
bool srv_replay_reexec(uint16_t op);

/*
 * Classifies request (op, id), just received: a verdict (>= 0), with
 * `frame` and `len` set to the kept reply for SRV_REPLAY_CACHED, or -EPROTO (logged)
 * when the id is neither the next nor a retransmission inside the window,
 * or the opcode differs from the one first received with that id.
 */
int srv_replay_check(struct srv_replay *rp, uint16_t op, uint64_t id,
		     const uint8_t **frame, size_t *len);

/*
 * Keeps the encoded reply `frame` (len bytes) of request `rep->id`, when
 * its opcode is not re-executable.  An OPEN reply is kept re-encoded
 * without its data.  Failures are logged: a retransmission of that id then
 * closes the connection instead of executing twice.
 */
void srv_replay_store(struct srv_replay *rp, const struct qft_msg *rep,
		      const uint8_t *frame, size_t len);

/* The id the lane expects next. */
uint64_t srv_replay_next(const struct srv_replay *rp);

/*
 * RESUME with the client's `seq` (its lowest id without a reply): 0 when
 * every id from seq up to srv_replay_next() - 1 can be answered (they are
 * in the window), -ESTALE otherwise.
 */
int srv_replay_resume(const struct srv_replay *rp, uint64_t seq);

#ifdef QFT_FAULT_INJECTION
#define SRV_REPLAY_FAULT_ENV "QFTFS_FAULT_DROP_REPLY"
/*
 * QFTFS_FAULT_STOP_REPLY=OP[,OP...]: the server stops itself (SIGSTOP)
 * when the reply to the first request of a named opcode is ready, after
 * executing it -- so that a test can kill it with that request done but
 * unanswered, the outcome a client can never know.
 */
#define SRV_REPLAY_FAULT_STOP_ENV "QFTFS_FAULT_STOP_REPLY"
/* Reads the environment variables: 0, or -EINVAL (logged) for a name
 * that is no opcode. */
int srv_replay_fault_init(void);
/* True (once per named opcode, for the whole process) when this reply
 * must not be sent. */
bool srv_replay_fault_drop(uint16_t op);
/* True (once per named opcode) when the server must stop before this
 * reply. */
bool srv_replay_fault_stop(uint16_t op);
#endif

#endif /* SRV_REPLAY_H */
