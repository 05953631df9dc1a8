// SPDX-License-Identifier: MIT
/* Handshake slots on a session's listener (see gate.h). */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "gate.h"
#include "log.h"

void srv_gate_init(struct srv_gate *g, const char *what)
{
	memset(g, 0, sizeof(*g));
	g->what = what;
	for (size_t i = 0; i < SRV_GATE_SLOTS; i++)
		g->slot[i].fd = -1;
}

bool srv_gate_room(const struct srv_gate *g)
{
	for (size_t i = 0; i < SRV_GATE_SLOTS; i++)
		if (!g->slot[i].used)
			return true;
	return false;
}

/* Live (not evicted) handshakes from `addr`. */
static unsigned live_from(const struct srv_gate *g, const char *addr)
{
	unsigned n = 0;

	for (size_t i = 0; i < SRV_GATE_SLOTS; i++)
		n += g->slot[i].used && !g->slot[i].evicted &&
		     strcmp(g->slot[i].addr, addr) == 0;
	return n;
}

/* The oldest live handshake from `addr` (any address when NULL), or -1. */
static int oldest(const struct srv_gate *g, const char *addr)
{
	int best = -1;

	for (size_t i = 0; i < SRV_GATE_SLOTS; i++) {
		const struct srv_gate_slot *sl = &g->slot[i];

		if (!sl->used || sl->evicted ||
		    (addr && strcmp(sl->addr, addr) != 0))
			continue;
		if (best < 0 || sl->seq < g->slot[best].seq)
			best = (int)i;
	}
	return best;
}

static void evict(struct srv_gate *g, int i, const char *for_addr)
{
	struct srv_gate_slot *sl = &g->slot[i];

	sl->evicted = true;
	g->evicted++;
	/* Its handshake's poll wakes at once and fails; the owner's thread
	 * reports it through srv_gate_done as usual. */
	shutdown(sl->fd, SHUT_RDWR);
	qft_debug("%s from %s: handshake cut short to make room for one "
		  "from %s", g->what, sl->peer, for_addr);
}

int srv_gate_admit(struct srv_gate *g, int fd, const struct sockaddr *sa,
		   socklen_t len)
{
	char addr[NI_MAXHOST], serv[NI_MAXSERV];
	struct srv_gate_slot *sl = NULL;
	unsigned live = 0, most = 0;
	int victim = -1;

	for (size_t i = 0; i < SRV_GATE_SLOTS; i++) {
		if (!g->slot[i].used && !sl)
			sl = &g->slot[i];
		live += g->slot[i].used && !g->slot[i].evicted;
	}
	if (!sl)
		return -1;
	if (sa->sa_family == AF_UNIX) {
		/* The attach socket: its peers were checked to be the
		 * session's own user, and share one share between them. */
		snprintf(addr, sizeof(addr), "the attach socket");
		serv[0] = '\0';
	} else if (getnameinfo(sa, len, addr, sizeof(addr), serv,
			       sizeof(serv),
			       NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(addr, sizeof(addr), "?");
		snprintf(serv, sizeof(serv), "?");
	}

	if (live_from(g, addr) >= SRV_GATE_PER_PEER) {
		victim = oldest(g, addr);
	} else if (live >= SRV_GATE_LIVE) {
		/* The address holding the most gives way, its oldest first. */
		for (size_t i = 0; i < SRV_GATE_SLOTS; i++) {
			const struct srv_gate_slot *o = &g->slot[i];
			unsigned n;

			if (!o->used || o->evicted)
				continue;
			n = live_from(g, o->addr);
			if (n > most ||
			    (n == most && o->seq < g->slot[victim].seq)) {
				most = n;
				victim = (int)i;
			}
		}
	}
	if (victim >= 0)
		evict(g, victim, addr);

	memset(sl, 0, sizeof(*sl));
	sl->used = true;
	sl->fd = fd;
	sl->seq = ++g->seq;
	snprintf(sl->addr, sizeof(sl->addr), "%s", addr);
	if (serv[0])
		snprintf(sl->peer, sizeof(sl->peer), "%s port %s", addr, serv);
	else
		snprintf(sl->peer, sizeof(sl->peer), "%s", addr);
	return (int)(sl - g->slot);
}

/* The failure record of `addr`, made (replacing the least recent) if
 * need be. */
static struct srv_gate_peer *peer_of(struct srv_gate *g, const char *addr)
{
	struct srv_gate_peer *lru = &g->peer[0];

	for (size_t i = 0; i < SRV_GATE_PEERS; i++) {
		struct srv_gate_peer *p = &g->peer[i];

		if (p->addr[0] && strcmp(p->addr, addr) == 0)
			return p;
		if (!p->addr[0] || (lru->addr[0] && p->last < lru->last))
			lru = p;
	}
	memset(lru, 0, sizeof(*lru));
	snprintf(lru->addr, sizeof(lru->addr), "%s", addr);
	return lru;
}

void srv_gate_done(struct srv_gate *g, int i, int result, const char *reason)
{
	struct srv_gate_slot *sl = &g->slot[i];
	struct srv_gate_peer *p;

	if (result < 0) {
		/* Whatever error the shutdown made it fail with. */
		if (sl->evicted)
			reason = "cut short to make room for another handshake";
		g->failed++;
		p = peer_of(g, sl->addr);
		p->failed++;
		p->last = sl->seq;
		if (p->failed <= SRV_GATE_LOG_FIRST)
			qft_warn("rejected a %s from %s: %s", g->what,
				 sl->peer, reason);
		else if (p->failed % SRV_GATE_LOG_EVERY == 0)
			qft_warn("rejected a %s from %s: %s (%llu failed "
				 "handshakes from %s so far; the session "
				 "goes on)", g->what, sl->peer, reason,
				 (unsigned long long)p->failed, sl->addr);
		else
			qft_debug("rejected a %s from %s: %s", g->what,
				  sl->peer, reason);
	}
	memset(sl, 0, sizeof(*sl));
	sl->fd = -1;
}

void srv_gate_shutdown_all(struct srv_gate *g)
{
	for (size_t i = 0; i < SRV_GATE_SLOTS; i++)
		if (g->slot[i].used)
			shutdown(g->slot[i].fd, SHUT_RDWR);
}
