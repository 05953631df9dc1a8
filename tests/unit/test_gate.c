// SPDX-License-Identifier: MIT
/*
 * Unit test of server/gate.c: who gets a handshake slot on a session's
 * listener.  Connections are socketpairs standing in for accepted ones,
 * with made-up peer addresses; an evicted one is seen from its other end
 * (the gate shuts the socket down: a read returns end of file at once).
 * The end-to-end attacks are in tests/test_hostile.py and
 * tests/test_resume_server.py.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "check.h"
#include "gate.h"
#include "log.h"

struct conn {
	int fd, peer, slot;
};

/* A connection "from" 10.0.0.<host>, admitted: its slot, or -1. */
static int admit(struct srv_gate *g, struct conn *c, int host)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(40000) };
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(0x0a000000u | (uint32_t)host);
	c->fd = sv[0];
	c->peer = sv[1];
	c->slot = srv_gate_admit(g, sv[0], (struct sockaddr *)&sa,
				 sizeof(sa));
	return c->slot;
}

/* Whether the gate shut this connection down (its peer sees the end). */
static bool cut(const struct conn *c)
{
	char b;

	return recv(c->peer, &b, 1, MSG_DONTWAIT) == 0;
}

static void finish(struct srv_gate *g, struct conn *c, int result)
{
	srv_gate_done(g, c->slot, result, "test");
	close(c->fd);
	close(c->peer);
}

/* Two at once from one address; a third cuts the oldest of them short. */
static void test_per_address(void)
{
	struct srv_gate g;
	struct conn c[4];

	srv_gate_init(&g, "test connection");
	CHECK(admit(&g, &c[0], 1) >= 0);
	CHECK(admit(&g, &c[1], 1) >= 0);
	CHECK(!cut(&c[0]) && !cut(&c[1]));
	CHECK(admit(&g, &c[2], 1) >= 0);
	CHECK(cut(&c[0]));
	CHECK(!cut(&c[1]) && !cut(&c[2]));
	CHECK(g.slot[c[0].slot].evicted);
	/* Another address is not charged for it. */
	CHECK(admit(&g, &c[3], 2) >= 0);
	CHECK(!cut(&c[1]) && !cut(&c[2]) && !cut(&c[3]));
	CHECK_EQ(g.evicted, 1);
	for (int i = 0; i < 4; i++)
		finish(&g, &c[i], i == 0 ? -EIO : 0);
	/* The evicted one counts as a failure of its address. */
	CHECK_EQ(g.failed, 1);
	CHECK(srv_gate_room(&g));
}

/* Eight at once; the ninth cuts short the oldest of the address that
 * holds the most, never one of an address within its share when another
 * has more. */
static void test_overall(void)
{
	struct srv_gate g;
	struct conn c[10];

	srv_gate_init(&g, "test connection");
	/* Address 1 holds two (the oldest and a later one), 2..7 one each. */
	CHECK(admit(&g, &c[0], 2) >= 0);
	CHECK(admit(&g, &c[1], 1) >= 0);
	for (int i = 2; i < 7; i++)
		CHECK(admit(&g, &c[i], i + 1) >= 0);
	CHECK(admit(&g, &c[7], 1) >= 0);
	for (int i = 0; i < 8; i++)
		CHECK(!cut(&c[i]));
	CHECK(admit(&g, &c[8], 9) >= 0);
	/* Address 1 has the most: its oldest goes, not address 2's older
	 * one. */
	CHECK(cut(&c[1]));
	CHECK(!cut(&c[0]) && !cut(&c[7]) && !cut(&c[8]));
	/* Now everyone has one: the oldest overall goes. */
	CHECK(admit(&g, &c[9], 10) >= 0);
	CHECK(cut(&c[0]));
	for (int i = 2; i < 10; i++)
		CHECK(!cut(&c[i]));
	for (int i = 0; i < 10; i++)
		finish(&g, &c[i], 0);
}

/* Evicted handshakes keep their slot until done: with every slot taken
 * the gate admits nothing and says so. */
static void test_full(void)
{
	struct srv_gate g;
	struct conn c[SRV_GATE_SLOTS + 1];
	int n = 0;

	srv_gate_init(&g, "test connection");
	for (; n < SRV_GATE_SLOTS; n++)
		CHECK(admit(&g, &c[n], 1) >= 0);
	CHECK(!srv_gate_room(&g));
	CHECK_EQ(admit(&g, &c[n], 3), -1);
	close(c[n].fd);
	close(c[n].peer);
	finish(&g, &c[0], -EIO);
	CHECK(srv_gate_room(&g));
	CHECK(admit(&g, &c[0], 3) >= 0);
	for (int i = 0; i < SRV_GATE_SLOTS; i++)
		finish(&g, &c[i], -EPROTO);
}

/* Failures are logged per address up to a bound, then one in 100: a
 * flood ends nothing and fills no disk.  Counted, not read back. */
static void test_failures_end_nothing(void)
{
	struct srv_gate g;
	struct conn c;

	srv_gate_init(&g, "test connection");
	for (int i = 0; i < 1000; i++) {
		CHECK(admit(&g, &c, 1 + i % 40) >= 0);
		finish(&g, &c, -EPROTO);
	}
	CHECK_EQ(g.failed, 1000);
	CHECK(srv_gate_room(&g));
	CHECK(admit(&g, &c, 1) >= 0);
	finish(&g, &c, 0);
}

int main(void)
{
	/* The gate logs every failure it is told of: not here. */
	qft_log_init("test_gate", QFT_LOG_ERR);
	test_per_address();
	test_overall();
	test_full();
	test_failures_end_nothing();
	return check_exit("gate");
}
