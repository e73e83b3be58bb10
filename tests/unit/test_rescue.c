// SPDX-License-Identifier: MIT
/*
 * Giving a silent peer room (src/smcr/rx.c, protocol.md §6.6), through the
 * engine's own send and receive calls over a fake transport that answers as
 * a Linux peer does after a failover: its consumer-cursor update was lost
 * with the link, and it sends a CDC again only when it has data to write
 * into room in our RMB.  Our send that waits for room in its RMB ends only
 * if the engine held its unread data aside; the program then reads the held
 * bytes and the RMB's in order (recv, readv, MSG_PEEK, FIONREAD, poll).
 * Without the peer's move (its failover validation), or once the peer sent a
 * CDC after it, the engine leaves the RMB alone.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "smcr/cdc.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/stats_abi.h"
#include "smcr/transport.h"

#define RMB 16384u  /* ours: the fake peer writes here */
#define PEER 16384u /* the fake peer's: we write there */
#define LOCAL_TOKEN 0x11u
#define PEER_TOKEN 0x22u

static struct fake {
	uint8_t rmb[RMB], peer_rmb[PEER];
	uint8_t inbox[16][SMCR_CDC_MSG_LEN];
	unsigned nin;
	struct smcr_cdc_msg sent[64]; /* data CDCs we sent, decoded */
	unsigned nsent;
	int efd;
	bool move;          /* failover() reports one move */
	unsigned rescued;   /* rmb_rescued() calls */
	/* the peer's side */
	struct smcr_curs prod;     /* its producer cursor in our RMB */
	struct smcr_curs our_cons; /* our consumer cursor as it knows it */
	struct smcr_curs consumed; /* what it consumed of its RMB (all we wrote) */
	uint32_t written;          /* its stream bytes written into our RMB */
	uint32_t to_write;         /* its send buffer: what it still has to write */
	uint16_t seq;
} f;

static uint8_t stream_byte(uint32_t i)
{
	return (uint8_t)(i * 13u + (i >> 9) + 5u);
}

static void doorbell(void)
{
	uint64_t one = 1;

	assert_int_equal(write(f.efd, &one, sizeof(one)), sizeof(one));
}

/* The peer writes what fits of its send buffer into our RMB, then one CDC. */
static void peer_write(void)
{
	struct smcr_cdc_msg m = { .token = LOCAL_TOKEN };
	uint32_t used = 0, n;

	smcr_curs_diff(f.our_cons, f.prod, RMB, &used);
	n = RMB - used < f.to_write ? RMB - used : f.to_write;
	if (n == 0)
		return; /* Linux: no room in the peer's RMB, no CDC (smc_tx_sndbuf_nonempty) */
	for (uint32_t i = 0; i < n; i++)
		f.rmb[(f.prod.count + i) % RMB] = stream_byte(f.written + i);
	f.written += n;
	f.to_write -= n;
	f.prod = smcr_curs_advance(f.prod, n, RMB);
	m.seqno = ++f.seq;
	m.prod = f.prod;
	m.cons = f.consumed;
	smcr_cdc_encode(&m, f.inbox[f.nin++]);
	doorbell();
}

/* The peer moved the connection to another link: its validation CDC names its last CDC. */
static void peer_validation(void)
{
	smcr_cdc_encode_validation(f.seq, LOCAL_TOKEN, f.inbox[f.nin++]);
	doorbell();
}

/* A CDC of the peer's on the new link that changes nothing (its cursors as they are). */
static void peer_idle_cdc(void)
{
	/* its consumer cursor as we knew it: the update that moved it was lost */
	struct smcr_cdc_msg m = { .token = LOCAL_TOKEN, .prod = f.prod, .cons = { 0, 0 } };

	m.seqno = ++f.seq;
	smcr_cdc_encode(&m, f.inbox[f.nin++]);
	doorbell();
}

static void fk_tokens(const struct smcr_xconn *xc, uint32_t *local, uint32_t *peer)
{
	(void)xc;
	*local = LOCAL_TOKEN;
	*peer = PEER_TOKEN;
}

static void fk_info(const struct smcr_xconn *xc, struct smcr_xconn_info *out)
{
	(void)xc;
	memset(out, 0, sizeof(*out));
	out->mode = SMCR_STATS_MODE_SMC_R;
}

static void fk_ring(struct smcr_xconn *xc, uint8_t **ring, uint32_t *size)
{
	(void)xc;
	*ring = f.rmb;
	*size = RMB;
}

static int fk_write_peer(struct smcr_xconn *xc, uint32_t offset, const void *src, uint32_t len)
{
	(void)xc;
	memcpy(f.peer_rmb + offset, src, len);
	return 0;
}

static int fk_send_ctrl(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN])
{
	struct smcr_cdc_msg m;
	enum smcr_cdc_err err;

	(void)xc;
	assert_int_equal(smcr_cdc_decode(msg, SMCR_CDC_MSG_LEN, &m, &err), SMCR_WIRE_OK);
	if (m.prod_flags & SMCR_CDC_PROD_FAILOVER)
		return 0;
	assert_true(f.nsent < 64);
	f.sent[f.nsent++] = m;
	f.our_cons = m.cons;
	peer_write();
	return 0;
}

static int fk_recv_ctrl(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN])
{
	(void)xc;
	if (!f.nin)
		return 0;
	memcpy(msg, f.inbox[0], SMCR_CDC_MSG_LEN);
	memmove(f.inbox[0], f.inbox[1], --f.nin * SMCR_CDC_MSG_LEN);
	return 1;
}

static int fk_failover(struct smcr_xconn *xc, struct smcr_curs *fin_prod, uint16_t *fin_seq)
{
	(void)xc;
	if (!f.move)
		return 0;
	f.move = false;
	/* every CDC we sent got through: nothing to write again */
	*fin_prod = f.sent[f.nsent - 1].prod;
	*fin_seq = f.sent[f.nsent - 1].seqno;
	return 1;
}

static int fk_rewrite(struct smcr_xconn *xc, uint32_t offset, uint32_t len)
{
	(void)xc;
	(void)offset;
	(void)len;
	return 0;
}

static void fk_rmb_rescued(struct smcr_xconn *xc)
{
	(void)xc;
	f.rescued++;
}

static bool fk_peer_gone(struct smcr_xconn *xc)
{
	(void)xc;
	return false;
}

static int fk_ready_fd(const struct smcr_xconn *xc)
{
	(void)xc;
	return f.efd;
}

static bool fk_settle(struct smcr_xconn *xc, bool ready)
{
	uint64_t v;

	(void)xc;
	while (read(f.efd, &v, sizeof(v)) == sizeof(v))
		;
	if (ready || f.nin)
		doorbell();
	return false;
}

static bool fk_ctrl_pending(const struct smcr_xconn *xc)
{
	(void)xc;
	return f.nin > 0;
}

static bool fk_peer_running(const struct smcr_xconn *xc)
{
	(void)xc;
	return false;
}

static void fk_set_sleeping(struct smcr_xconn *xc, bool sleeping)
{
	(void)xc;
	(void)sleeping;
}

static void fk_destroy(struct smcr_xconn *xc, bool clean)
{
	(void)xc;
	(void)clean;
}

static const struct smcr_transport_ops fake_ops = {
	.name = "fake",
	.tokens = fk_tokens,
	.info = fk_info,
	.ring = fk_ring,
	.write_peer = fk_write_peer,
	.send_ctrl = fk_send_ctrl,
	.recv_ctrl = fk_recv_ctrl,
	.failover = fk_failover,
	.rewrite = fk_rewrite,
	.rmb_rescued = fk_rmb_rescued,
	.peer_gone = fk_peer_gone,
	.ready_fd = fk_ready_fd,
	.settle = fk_settle,
	.ctrl_pending = fk_ctrl_pending,
	.peer_running = fk_peer_running,
	.set_sleeping = fk_set_sleeping,
	.destroy = fk_destroy,
};

static int sv[2];

/*
 * A connection whose RMB the peer filled, and whose peer's RMB we filled; the
 * peer consumed all of it but the CDC that said so never arrived, and it has
 * `more` bytes still to send.
 */
static struct smcr_sock *stalled_conn(uint32_t more)
{
	static uint8_t out[PEER];
	struct smcr_sock *s;

	memset(&f, 0, sizeof(f));
	f.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(f.efd >= 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	s = smcr_conn_new(sv[0], true, &fake_ops, NULL, PEER, 0);
	assert_non_null(s);
	f.to_write = RMB + more;
	peer_write(); /* our RMB full */
	for (uint32_t i = 0; i < PEER; i++)
		out[i] = (uint8_t)i;
	assert_int_equal(smcr_sock_send(s, out, PEER, 0), PEER); /* its RMB full */
	assert_int_equal(smcr_rx_readable(s), RMB);
	assert_int_equal(smcr_tx_space(s), 0);
	f.consumed = s->tx_prod; /* consumed, and the update lost with the link */
	return s;
}

static void end_conn(struct smcr_sock *s)
{
	smcr_conn_free(s, false);
	close(sv[0]);
	close(sv[1]);
	close(f.efd);
}

/* Reads n bytes with recv, checking they continue the peer's stream at *at. */
static void read_stream(struct smcr_sock *s, uint32_t n, uint32_t *at)
{
	uint8_t buf[4096];

	while (n > 0) {
		struct iovec iov = { .iov_base = buf, .iov_len = n < sizeof(buf) ? n : sizeof(buf) };
		ssize_t got = smcr_sock_recvv(s, &iov, 1, 0);

		assert_true(got > 0);
		for (ssize_t i = 0; i < got; i++)
			assert_int_equal(buf[i], stream_byte(*at + (uint32_t)i));
		*at += (uint32_t)got;
		n -= (uint32_t)got;
	}
}

static void test_rescue_after_failover(void **state)
{
	struct smcr_sock *s = stalled_conn(4096);
	uint8_t more[1000] = { 0 }, x[7], y[50], z[100], peek[100];
	struct iovec iov[3] = { { x, sizeof(x) }, { y, sizeof(y) }, { z, sizeof(z) } };
	struct iovec piov = { .iov_base = peek, .iov_len = sizeof(peek) };
	uint32_t at = 0;
	bool asked = false;

	(void)state;
	f.move = true; /* both sides move */
	peer_validation();
	/* Blocks for room; the peer answers only once it has room itself. */
	assert_int_equal(smcr_sock_send(s, more, sizeof(more), 0), sizeof(more));
	assert_int_equal(f.rescued, 1);
	assert_int_equal(s->rmb_rescues, 1);
	assert_int_equal(s->link_switches, 1);
	for (unsigned i = 0; i < f.nsent; i++)
		if (f.sent[i].cons.wrap == 1 && f.sent[i].cons.count == 0)
			asked |= (f.sent[i].prod_flags & SMCR_CDC_PROD_CONS_UPD_REQ) != 0;
	assert_true(asked); /* our cursor past the whole RMB, and a request for the peer's */
	/* the whole RMB held, the peer's next 4 KiB in the RMB */
	assert_int_equal(smcr_rxhold_len(&s->held), RMB);
	assert_int_equal(smcr_rx_readable(s), 4096);
	assert_int_equal(f.written, RMB + 4096);
	assert_int_equal(smcr_sock_readable_bytes(s), RMB + 4096);
	assert_true(smcr_sock_poll(s) & POLLIN);
	/* MSG_PEEK sees the held bytes and takes nothing */
	assert_int_equal(smcr_sock_recvv(s, &piov, 1, MSG_PEEK), sizeof(peek));
	for (uint32_t i = 0; i < sizeof(peek); i++)
		assert_int_equal(peek[i], stream_byte(i));
	assert_int_equal(smcr_sock_readable_bytes(s), RMB + 4096);
	/* up to 20 bytes before the end of the held ones, then a readv across it */
	read_stream(s, RMB - 20, &at);
	assert_int_equal(smcr_sock_recvv(s, iov, 3, 0), 157);
	for (uint32_t i = 0; i < 157; i++) {
		uint8_t b = i < 7 ? x[i] : i < 57 ? y[i - 7] : z[i - 57];

		assert_int_equal(b, stream_byte(at + i));
	}
	at += 157;
	assert_null(s->held.buf); /* drained: freed */
	assert_int_equal(smcr_sock_readable_bytes(s), RMB + 4096 - at);
	read_stream(s, RMB + 4096 - at, &at);
	assert_int_equal(smcr_sock_readable_bytes(s), 0);
	assert_false(smcr_sock_poll(s) & POLLIN);
	end_conn(s);
}

/* The same stall, the RMB left alone: SO_SNDTIMEO (longer than the rescue's wait) ends it. */
static void assert_no_rescue(struct smcr_sock *s)
{
	uint8_t more[1000] = { 0 };

	s->snd_timeout_ms = 1200;
	assert_int_equal(smcr_sock_send(s, more, sizeof(more), 0), -EAGAIN);
	assert_int_equal(f.rescued, 0);
	assert_int_equal(s->rmb_rescues, 0);
	assert_int_equal(smcr_rxhold_len(&s->held), 0);
	assert_int_equal(smcr_rx_readable(s), RMB);
}

/* On a connection that never moved links. */
static void test_no_rescue_without_move(void **state)
{
	struct smcr_sock *s = stalled_conn(4096);

	(void)state;
	assert_no_rescue(s);
	end_conn(s);
}

/* Only our side moved: the peer's updates did not go over the lost link. */
static void test_no_rescue_own_move_only(void **state)
{
	struct smcr_sock *s = stalled_conn(4096);

	(void)state;
	f.move = true;
	doorbell();
	assert_no_rescue(s);
	assert_int_equal(s->link_switches, 1);
	end_conn(s);
}

/* The peer moved and then sent a CDC on the new link: that cursor is its real one. */
static void test_no_rescue_after_peer_cdc(void **state)
{
	struct smcr_sock *s = stalled_conn(4096);

	(void)state;
	peer_validation();
	peer_idle_cdc();
	assert_no_rescue(s);
	end_conn(s);
}

/* A non-blocking send never waits, so it never holds anything aside either. */
static void test_no_rescue_nonblocking(void **state)
{
	struct smcr_sock *s = stalled_conn(4096);
	uint8_t more[1000] = { 0 };

	(void)state;
	f.move = true;
	peer_validation();
	assert_int_equal(smcr_sock_send(s, more, sizeof(more), MSG_DONTWAIT), -EAGAIN);
	assert_int_equal(s->link_switches, 1);
	assert_int_equal(f.rescued, 0);
	assert_int_equal(smcr_rx_readable(s), RMB);
	end_conn(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rescue_after_failover),
		cmocka_unit_test(test_no_rescue_without_move),
		cmocka_unit_test(test_no_rescue_own_move_only),
		cmocka_unit_test(test_no_rescue_after_peer_cdc),
		cmocka_unit_test(test_no_rescue_nonblocking),
	};

	alarm(60); /* a send that never ends fails the test instead of stalling it */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
