// SPDX-License-Identifier: MIT
/*
 * The connection engine end to end: two engines in this process (client in a
 * thread, or in a forked child where a process must die) over a real
 * loopback TCP connection and the shm transport.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "smcr/cdc.h"
#include "smcr/clc.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/shm.h"
#include "smcr/stats.h"
#include "smcr/sys.h"
#include "smcr/transport.h"

#include "engine_test.h"

#define RING_SMALL (16u * 1024)

static int64_t smcr_test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- fixtures ---------------------------------------------------------------- */

struct pair {
	int lfd;
	struct smcr_listener *reg;
	uint16_t port;
	int cfd, sfd;
	struct smcr_sock *c, *s;
	int crc, src;
	uint32_t rcvbuf;
};

static int tcp_listener(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static int tcp_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static int g_spin_us; /* opts.spin_us for both ends of pair_open() */

static void *client_main(void *arg)
{
	struct pair *p = arg;
	struct smcr_sock_opts o = { .rcvbuf = p->rcvbuf, .spin_us = g_spin_us };

	p->crc = smcr_sock_connect(p->cfd, &o, &p->c);
	return NULL;
}

static void pair_listen(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->cfd = p->sfd = -1;
	p->lfd = tcp_listener(&p->port);
	assert_int_equal(smcr_listener_register(p->lfd, &p->reg), 0);
}

static void pair_open(struct pair *p, uint32_t rcvbuf)
{
	struct smcr_sock_opts o = { .rcvbuf = rcvbuf, .spin_us = g_spin_us };
	pthread_t t;

	pair_listen(p);
	p->rcvbuf = rcvbuf;
	p->cfd = tcp_connect(p->port);
	assert_true(smcr_peer_is_registered(p->cfd));
	{
		/* the same answers with the peer's address given, and a plan to propose */
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		struct smcr_client_plan plan;

		assert_int_equal(getpeername(p->cfd, (struct sockaddr *)&peer, &plen), 0);
		assert_true(smcr_peer_is_registered_at(p->cfd, &peer));
		assert_int_equal(smcr_sock_connect_plan(p->cfd, &peer, &plan), 0);
		assert_non_null(plan.ops);
		assert_int_equal(smcr_sock_connect_plan(p->cfd, NULL, &plan), 0);
		assert_non_null(plan.ops);
	}
	assert_int_equal(pthread_create(&t, NULL, client_main, p), 0);
	p->sfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(p->sfd >= 0);
	assert_int_equal(classify_wait(p->sfd), SMCR_CLASSIFY_PROPOSAL);
	p->src = smcr_sock_accept(p->sfd, &o, &p->s);
	pthread_join(t, NULL);
	assert_int_equal(p->src, 0);
	assert_int_equal(p->crc, 0);
	assert_non_null(p->c);
	assert_non_null(p->s);
}

static void pair_close(struct pair *p)
{
	if (p->c)
		smcr_sock_close(p->c);
	if (p->s)
		smcr_sock_close(p->s);
	if (p->cfd >= 0)
		close(p->cfd);
	if (p->sfd >= 0)
		close(p->sfd);
	smcr_listener_unregister(p->reg);
	close(p->lfd);
}

/* Wait (bounded) for an event on the readiness fd, then report the poll mask. */
static unsigned wait_mask(struct smcr_sock *s, unsigned want)
{
	unsigned m = 0;

	smcr_sock_set_interest(s, want & (POLLIN | POLLOUT));
	for (int i = 0; i < 200; i++) {
		struct pollfd pfd = { .fd = smcr_sock_ready_fd(s), .events = POLLIN };

		m = smcr_sock_poll(s);
		if (m & want)
			break;
		poll(&pfd, 1, 50);
	}
	smcr_sock_set_interest(s, 0);
	return m;
}

/* ---- handshake ------------------------------------------------------------------ */

static int live_records(const struct smcr_stats_file *f)
{
	int n = 0;

	for (unsigned i = 0; i < f->max_conns; i++)
		n += f->conns[i].state == SMCR_STATS_CONN_LIVE;
	return n;
}

static void test_handshake(void **state)
{
	const struct smcr_stats_file *f = smcr_stats_area();
	uint64_t before = f->handshakes_smc;
	int live = live_records(f);
	struct pair p;

	(void)state;
	pair_open(&p, 64 * 1024);
	assert_int_equal(smcr_sock_rcvbuf(p.s), 64 * 1024);
	assert_int_equal(smcr_sock_sndbuf(p.c), 64 * 1024);
	assert_int_equal(smcr_sock_rcvbuf(p.c), 64 * 1024);
	/* Nothing of CLC is left in either TCP stream. */
	{
		char b;
		assert_int_equal(recv(p.cfd, &b, 1, MSG_DONTWAIT | MSG_PEEK), -1);
		assert_int_equal(recv(p.sfd, &b, 1, MSG_DONTWAIT | MSG_PEEK), -1);
	}
	assert_int_equal(f->handshakes_smc - before, 2);
	assert_int_equal(live_records(f), live + 2);
	pair_close(&p);
	assert_int_equal(live_records(f), live);
}

/* SMCR_EXIT_REPORT's line: the counters smcr-stat shows, fallbacks by name, never past its room. */
static void test_stats_report(void **state)
{
	const struct smcr_stats_file *f = smcr_stats_area();
	char line[512], expect[128], tiny[12];
	struct pair p;

	(void)state;
	pair_open(&p, 64 * 1024);
	pair_close(&p);
	smcr_note_fallback(SMCR_CLC_DECL_PEERNOSMC);
	smcr_note_fallback(SMCR_CLC_DECL_PEERNOSMC);
	smcr_stats_report(line, sizeof(line));
	snprintf(expect, sizeof(expect), "%llu SMC, %llu TCP (",
		 (unsigned long long)f->handshakes_smc, (unsigned long long)f->fallbacks);
	assert_true(f->handshakes_smc >= 2 && f->fallbacks >= 2);
	assert_memory_equal(line, expect, strlen(expect));
	assert_non_null(strstr(line, "PEERNOSMC "));
	assert_non_null(strstr(line, "), "));
	assert_non_null(strstr(line, " handshake errors, "));
	memset(tiny, 'x', sizeof(tiny));
	smcr_stats_report(tiny, sizeof(tiny) - 2);
	assert_int_equal(strlen(tiny), sizeof(tiny) - 3);
	assert_int_equal(tiny[sizeof(tiny) - 2], 'x');
}

/* ---- data integrity ------------------------------------------------------------- */

static uint8_t stream_byte(uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull;

	return (uint8_t)(x >> 56 ^ x >> 29);
}

struct xfer {
	struct smcr_sock *s;
	uint64_t total;
	unsigned seed;
	int64_t result;
};

static void *writer_main(void *arg)
{
	struct xfer *x = arg;
	uint8_t buf[40000];
	uint64_t off = 0;

	while (off < x->total) {
		size_t n = 1 + (size_t)rand_r(&x->seed) % sizeof(buf);
		ssize_t w;

		if (n > x->total - off)
			n = (size_t)(x->total - off);
		for (size_t i = 0; i < n; i++)
			buf[i] = stream_byte(off + i);
		w = smcr_sock_send(x->s, buf, n, 0);
		if (w != (ssize_t)n) { /* blocking send completes fully */
			x->result = w < 0 ? w : -EIO;
			return NULL;
		}
		off += n;
	}
	x->result = (int64_t)off;
	return NULL;
}

static int64_t read_and_check(struct smcr_sock *s, uint64_t total, unsigned seed, int flags)
{
	uint8_t buf[50000];
	uint64_t off = 0;

	while (off < total) {
		size_t n = 1 + (size_t)rand_r(&seed) % sizeof(buf);
		ssize_t r;

		if (n > total - off)
			n = (size_t)(total - off); /* MSG_WAITALL must not wait beyond the end */
		r = sock_recv(s, buf, n, flags);

		if (r <= 0)
			return r < 0 ? r : -EPIPE;
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != stream_byte(off + (uint64_t)i))
				return -EBADMSG;
		off += (uint64_t)r;
	}
	return (int64_t)off;
}

static void test_integrity_many_wraps(void **state)
{
	const uint64_t total = 8u << 20; /* 512 wraps of a 16 KiB ring */
	struct xfer w1, w2;
	pthread_t t1, t2;
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	w1 = (struct xfer){ .s = p.c, .total = total, .seed = 1 };
	w2 = (struct xfer){ .s = p.s, .total = total / 2, .seed = 2 };
	/* Both directions at once. */
	assert_int_equal(pthread_create(&t1, NULL, writer_main, &w1), 0);
	assert_int_equal(pthread_create(&t2, NULL, writer_main, &w2), 0);
	assert_int_equal(read_and_check(p.s, total, 3, 0), (int64_t)total);
	assert_int_equal(read_and_check(p.c, total / 2, 4, MSG_WAITALL), (int64_t)(total / 2));
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	assert_int_equal(w1.result, (int64_t)total);
	assert_int_equal(w2.result, (int64_t)(total / 2));
	assert_int_equal(smcr_sock_readable_bytes(p.s), 0);
	pair_close(&p);
}

/* ---- flow control ----------------------------------------------------------------- */

static void test_full_ring_eagain_and_resume(void **state)
{
	static uint8_t buf[RING_SMALL * 2];
	uint32_t size;
	ssize_t n, more;
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	size = smcr_sock_sndbuf(p.c);
	memset(buf, 0xA5, sizeof(buf));
	n = smcr_sock_send(p.c, buf, sizeof(buf), MSG_DONTWAIT);
	assert_int_equal(n, (ssize_t)size); /* partial: exactly the ring */
	assert_int_equal(smcr_sock_send(p.c, buf, 1, MSG_DONTWAIT), -EAGAIN);
	assert_false(smcr_sock_poll(p.c) & POLLOUT);
	assert_int_equal(smcr_sock_unacked_bytes(p.c), size);
	assert_int_equal(smcr_sock_readable_bytes(p.s), size);

	/* The reader frees the ring; the writer is woken through its doorbell. */
	assert_int_equal(sock_recv(p.s, buf, size, MSG_WAITALL), (ssize_t)size);
	assert_true(wait_mask(p.c, POLLOUT) & POLLOUT);
	more = smcr_sock_send(p.c, buf, 100, MSG_DONTWAIT);
	assert_int_equal(more, 100);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 100);
	pair_close(&p);
}

/* ---- peek, waitall, readiness ------------------------------------------------------- */

static void test_peek_and_readiness(void **state)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	char buf[64];
	struct pair p;
	int ep;

	(void)state;
	pair_open(&p, RING_SMALL);
	ep = epoll_create1(EPOLL_CLOEXEC);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, smcr_sock_ready_fd(p.s), &ev), 0);
	smcr_sock_set_interest(p.s, POLLIN);
	/* Idle: the readiness fd is quiet. */
	assert_int_equal(epoll_wait(ep, &out, 1, 0), 0);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);

	assert_int_equal(smcr_sock_send(p.c, "hello world", 11, 0), 11);
	assert_int_equal(epoll_wait(ep, &out, 1, 5000), 1);
	assert_true(smcr_sock_poll(p.s) & POLLIN);
	assert_int_equal(sock_recv(p.s, buf, 5, MSG_PEEK), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(smcr_sock_readable_bytes(p.s), 11);
	/* Level-triggered: still readable until consumed. */
	assert_int_equal(epoll_wait(ep, &out, 1, 0), 1);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 11);
	assert_memory_equal(buf, "hello world", 11);
	assert_false(smcr_sock_poll(p.s) & POLLIN);
	assert_int_equal(epoll_wait(ep, &out, 1, 0), 0);
	close(ep);
	smcr_sock_set_interest(p.s, 0);
	pair_close(&p);
}

struct delayed_send {
	struct smcr_sock *s;
	int rc;
};

static void *delayed_sender(void *arg)
{
	struct delayed_send *d = arg;

	poll(NULL, 0, 20);
	d->rc = (int)smcr_sock_send(d->s, "abc", 3, 0);
	poll(NULL, 0, 20);
	d->rc += (int)smcr_sock_send(d->s, "defg", 4, 0);
	return NULL;
}

static void test_waitall_blocks_until_complete(void **state)
{
	struct delayed_send d;
	char buf[8] = { 0 };
	pthread_t t;
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	d = (struct delayed_send){ .s = p.c };
	assert_int_equal(pthread_create(&t, NULL, delayed_sender, &d), 0);
	assert_int_equal(sock_recv(p.s, buf, 7, MSG_WAITALL), 7);
	assert_memory_equal(buf, "abcdefg", 7);
	pthread_join(t, NULL);
	assert_int_equal(d.rc, 7);
	pair_close(&p);
}

/* One connection used by several threads at once, as TCP allows. */
struct shared_io {
	struct smcr_sock *s;
	uint8_t value;
	size_t total;
	size_t counts[3];
	ssize_t rc;
};

static void *shared_sender(void *arg)
{
	struct shared_io *io = arg;
	uint8_t buf[3000];
	size_t off = 0;

	memset(buf, io->value, sizeof(buf));
	while (off < io->total) {
		size_t n = io->total - off < sizeof(buf) ? io->total - off : sizeof(buf);
		ssize_t w = smcr_sock_send(io->s, buf, n, 0);

		if (w != (ssize_t)n) {
			io->rc = w;
			return NULL;
		}
		off += n;
	}
	io->rc = (ssize_t)off;
	return NULL;
}

static void *shared_reader(void *arg)
{
	struct shared_io *io = arg;
	uint8_t buf[5000];

	for (;;) {
		ssize_t r = sock_recv(io->s, buf, sizeof(buf), 0);

		if (r <= 0) {
			io->rc = r;
			return NULL;
		}
		for (ssize_t i = 0; i < r; i++)
			io->counts[buf[i] < 3 ? buf[i] : 0]++;
	}
}

static void test_two_senders_two_readers_one_connection(void **state)
{
	const size_t total = 2u << 20;
	struct shared_io snd[2], rcv[2];
	pthread_t ts[2], tr[2];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	for (int i = 0; i < 2; i++) {
		snd[i] = (struct shared_io){ .s = p.c, .value = (uint8_t)(i + 1), .total = total };
		rcv[i] = (struct shared_io){ .s = p.s };
		assert_int_equal(pthread_create(&tr[i], NULL, shared_reader, &rcv[i]), 0);
		assert_int_equal(pthread_create(&ts[i], NULL, shared_sender, &snd[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(ts[i], NULL);
		assert_int_equal(snd[i].rc, (ssize_t)total);
	}
	/* EOF wakes both blocked readers. */
	assert_int_equal(smcr_sock_shutdown(p.c, SHUT_WR), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(tr[i], NULL);
		assert_int_equal(rcv[i].rc, 0);
	}
	assert_int_equal(rcv[0].counts[0] + rcv[1].counts[0], 0);
	assert_int_equal(rcv[0].counts[1] + rcv[1].counts[1], total);
	assert_int_equal(rcv[0].counts[2] + rcv[1].counts[2], total);
	pair_close(&p);
}

/* An edge-triggered epoll waiter in another thread is woken by the peer's data. */
struct et_waiter {
	int ep;
	int events;
};

static void *et_wait_main(void *arg)
{
	struct et_waiter *w = arg;
	struct epoll_event ev;

	w->events = epoll_wait(w->ep, &ev, 1, 5000);
	return NULL;
}

static void test_edge_triggered_wakeup(void **state)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct et_waiter w;
	char buf[8];
	pthread_t t;
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	w.ep = epoll_create1(EPOLL_CLOEXEC);
	assert_int_equal(epoll_ctl(w.ep, EPOLL_CTL_ADD, smcr_sock_ready_fd(p.s), &ev), 0);
	smcr_sock_set_interest(p.s, POLLIN);
	assert_int_equal(pthread_create(&t, NULL, et_wait_main, &w), 0);
	poll(NULL, 0, 20);
	assert_int_equal(smcr_sock_send(p.c, "ping", 4, 0), 4);
	pthread_join(t, NULL);
	assert_int_equal(w.events, 1);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 4);
	/* Drained: an edge-triggered wait now sleeps until the next message. */
	smcr_sock_poll(p.s);
	assert_int_equal(epoll_wait(w.ep, &ev, 1, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, et_wait_main, &w), 0);
	poll(NULL, 0, 20);
	assert_int_equal(smcr_sock_send(p.c, "pong", 4, 0), 4);
	pthread_join(t, NULL);
	assert_int_equal(w.events, 1);
	close(w.ep);
	smcr_sock_set_interest(p.s, 0);
	pair_close(&p);
}

static void test_receive_and_send_timeouts(void **state)
{
	static uint8_t big[RING_SMALL + 1];
	char buf[8];
	struct pair p;
	int64_t t0;

	(void)state;
	pair_open(&p, RING_SMALL);
	smcr_sock_set_timeouts(p.s, 50, 0);
	t0 = smcr_test_now_ms();
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), -EAGAIN);
	assert_true(smcr_test_now_ms() - t0 >= 45);
	/* A blocking send that cannot finish in time returns what it sent. */
	smcr_sock_set_timeouts(p.c, 0, 50);
	assert_int_equal(smcr_sock_send(p.c, big, sizeof(big), 0), RING_SMALL);
	assert_int_equal(smcr_sock_send(p.c, big, 1, 0), -EAGAIN);
	pair_close(&p);
}

/*
 * nginx's pattern: EPOLLIN|EPOLLOUT|EPOLLET on an idle, writable connection.
 * Engine calls must not produce new edges for an unchanged state (a busy
 * loop), and new data must produce one.
 */
static void test_edge_triggered_no_storm(void **state)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET }, out;
	char buf[8];
	struct pair p;
	int ep;

	(void)state;
	pair_open(&p, RING_SMALL);
	ep = epoll_create1(EPOLL_CLOEXEC);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, smcr_sock_ready_fd(p.s), &ev), 0);
	smcr_sock_set_interest(p.s, POLLIN | POLLOUT);
	assert_int_equal(epoll_wait(ep, &out, 1, 1000), 1); /* writable: one edge */
	assert_true(smcr_sock_poll(p.s) & POLLOUT);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
		smcr_sock_poll(p.s);
		assert_int_equal(epoll_wait(ep, &out, 1, 0), 0);
	}
	assert_int_equal(smcr_sock_send(p.c, "data", 4, 0), 4);
	assert_int_equal(epoll_wait(ep, &out, 1, 1000), 1); /* new data: a new edge */
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), 4);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
	assert_int_equal(epoll_wait(ep, &out, 1, 0), 0);
	close(ep);
	smcr_sock_set_interest(p.s, 0);
	pair_close(&p);
}

/* An idle SMC connection costs no CPU: nobody spins, everybody sleeps. */
static void test_idle_connection_uses_no_cpu(void **state)
{
	struct rusage before, after;
	struct delayed_send d;
	char buf[8];
	pthread_t t;
	struct pair p;
	long used_us;

	(void)state;
	pair_open(&p, RING_SMALL);
	d = (struct delayed_send){ .s = p.c };
	getrusage(RUSAGE_SELF, &before);
	/* A reader blocked for ~40 ms while the peer is idle (delayed_sender sleeps). */
	assert_int_equal(pthread_create(&t, NULL, delayed_sender, &d), 0);
	assert_int_equal(sock_recv(p.s, buf, 7, MSG_WAITALL), 7);
	pthread_join(t, NULL);
	getrusage(RUSAGE_SELF, &after);
	used_us = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000000L +
		  (after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
		  (after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1000000L +
		  (after.ru_stime.tv_usec - before.ru_stime.tv_usec);
	assert_true(used_us < 20000); /* a spinning waiter would burn ~40 ms */
	pair_close(&p);
}

/* Opt-in bounded spin: ping-pong and a stream stay correct. */
struct ponger {
	struct smcr_sock *s;
	int n;
	int ok;
};

static void *ponger_main(void *arg)
{
	struct ponger *pg = arg;
	char b[14];

	for (int i = 0; i < pg->n; i++) {
		if (sock_recv(pg->s, b, sizeof(b), MSG_WAITALL) != (ssize_t)sizeof(b) ||
		    smcr_sock_send(pg->s, b, sizeof(b), 0) != (ssize_t)sizeof(b))
			return NULL;
	}
	pg->ok = 1;
	return NULL;
}

static void test_bounded_spin(void **state)
{
	struct ponger pg;
	struct xfer w;
	pthread_t t;
	struct pair p;
	char b[14];

	(void)state;
	g_spin_us = 50;
	pair_open(&p, RING_SMALL);
	g_spin_us = 0;
	pg = (struct ponger){ .s = p.s, .n = 2000 };
	assert_int_equal(pthread_create(&t, NULL, ponger_main, &pg), 0);
	for (int i = 0; i < pg.n; i++) {
		memset(b, (char)i, sizeof(b));
		assert_int_equal(smcr_sock_send(p.c, b, sizeof(b), 0), (ssize_t)sizeof(b));
		assert_int_equal(sock_recv(p.c, b, sizeof(b), MSG_WAITALL), (ssize_t)sizeof(b));
		assert_int_equal(b[13], (char)i);
	}
	pthread_join(t, NULL);
	assert_int_equal(pg.ok, 1);
	w = (struct xfer){ .s = p.c, .total = 1u << 20, .seed = 5 };
	assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
	assert_int_equal(read_and_check(p.s, 1u << 20, 6, 0), 1 << 20);
	pthread_join(t, NULL);
	assert_int_equal(w.result, 1 << 20);
	pair_close(&p);
}

/* writev/readv shapes across the ring's wrap point keep every byte in order. */
static void test_iovecs_across_wrap(void **state)
{
	/* 9000 bytes a round into a 16 KiB ring: the cursors cross the wrap at
	 * ever different places, inside one iovec element or between two. */
	static uint8_t src[3][3000], dst[4][2300];
	struct iovec out[3], in[4];
	uint64_t off = 0;
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	/* Move both cursors off 0 first. */
	for (size_t k = 0; k < 1000; k++)
		src[0][k] = stream_byte(k);
	assert_int_equal(smcr_sock_send(p.c, src[0], 1000, 0), 1000);
	assert_int_equal(sock_recv(p.s, dst[0], 1000, MSG_WAITALL), 1000);
	off = 1000;
	for (int round = 0; round < 30; round++) {
		size_t total = 0, got = 0;
		ssize_t sent;

		for (int i = 0; i < 3; i++) {
			for (size_t k = 0; k < sizeof(src[i]); k++)
				src[i][k] = stream_byte(off + total + k);
			out[i] = (struct iovec){ .iov_base = src[i], .iov_len = sizeof(src[i]) };
			total += sizeof(src[i]);
		}
		/* What the sender believes is free (protocol.md §6.5: updates lag). */
		sent = smcr_sock_sendv(p.c, out, 3, MSG_DONTWAIT);
		assert_true(sent > 0);
		while (got < (size_t)sent) {
			ssize_t r;

			for (int i = 0; i < 4; i++)
				in[i] = (struct iovec){ .iov_base = dst[i], .iov_len = sizeof(dst[i]) };
			r = smcr_sock_recvv(p.s, in, 4, 0);
			assert_true(r > 0 && got + (size_t)r <= (size_t)sent);
			for (ssize_t k = 0; k < r; k++)
				assert_int_equal(dst[k / 2300][k % 2300], stream_byte(off + got + (uint64_t)k));
			got += (size_t)r;
		}
		off += (uint64_t)sent;
	}
	pair_close(&p);
}

static void test_bad_iovecs_rejected(void **state)
{
	struct iovec iov[2] = { { .iov_base = NULL, .iov_len = SIZE_MAX / 2 + 1 },
				{ .iov_base = NULL, .iov_len = SIZE_MAX / 2 + 1 } };
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	assert_int_equal(smcr_sock_sendv(p.c, iov, 2, MSG_DONTWAIT), -EINVAL);
	assert_int_equal(smcr_sock_recvv(p.s, iov, 2, MSG_DONTWAIT), -EINVAL);
	assert_int_equal(smcr_sock_sendv(p.c, iov, -1, MSG_DONTWAIT), -EINVAL);
	/* Empty: nothing to read is "would block", as TCP (a blocking one waits). */
	assert_int_equal(smcr_sock_recvv(p.s, NULL, 0, MSG_DONTWAIT), -EAGAIN);
	pair_close(&p);
}

/* ---- close sequences ---------------------------------------------------------------- */

static void test_shutdown_half_close(void **state)
{
	char buf[32];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	assert_int_equal(smcr_sock_send(p.c, "last words", 10, 0), 10);
	assert_int_equal(smcr_sock_shutdown(p.c, SHUT_WR), 0);
	assert_int_equal(smcr_sock_send(p.c, "x", 1, 0), -EPIPE);
	/* Buffered data first, then EOF; the other direction still works. */
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 10);
	assert_true(smcr_sock_poll(p.s) & POLLRDHUP);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 0);
	assert_int_equal(smcr_sock_send(p.s, "reply", 5, 0), 5);
	assert_int_equal(sock_recv(p.c, buf, sizeof(buf), 0), 5);
	assert_memory_equal(buf, "reply", 5);
	/*
	 * Same-host: TCP's FIN waits for the close, since the stream may yet
	 * have to go on over TCP with what the peer never read sent there
	 * first (tcp_tail.c); over SMC-R the TCP connection is half-closed at
	 * once (protocol.md §7.2).
	 */
	assert_int_equal(recv(p.sfd, buf, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(smcr_sock_shutdown(p.s, SHUT_WR), 0);
	assert_int_equal(sock_recv(p.c, buf, sizeof(buf), 0), 0);
	assert_true(smcr_sock_poll(p.c) & POLLHUP);
	pair_close(&p);
}

static void test_close_then_peer_sees_eof_and_epipe(void **state)
{
	char buf[16];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	assert_int_equal(smcr_sock_send(p.c, "bye", 3, 0), 3);
	smcr_sock_close(p.c);
	p.c = NULL;
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 3);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 0);
	assert_int_equal(smcr_sock_send(p.s, "x", 1, MSG_DONTWAIT), -EPIPE);
	/* TCP saw the FIN that follows the CDC. */
	assert_int_equal(recv(p.sfd, buf, 1, 0), 0);
	pair_close(&p);
}

static void test_close_with_unread_data_aborts(void **state)
{
	char buf[16];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	assert_int_equal(smcr_sock_send(p.s, "unread", 6, 0), 6);
	assert_true(wait_mask(p.c, POLLIN) & POLLIN);
	smcr_sock_close(p.c);
	p.c = NULL;
	assert_true(wait_mask(p.s, POLLERR) & POLLERR);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), -ECONNRESET);
	pair_close(&p);
}

static void test_peer_abort_is_econnreset(void **state)
{
	char buf[16];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	smcr_sock_abort(p.c, false);
	p.c = NULL;
	assert_true(wait_mask(p.s, POLLERR) & POLLERR);
	assert_int_equal(smcr_sock_take_error(p.s), ECONNRESET);
	assert_int_equal(smcr_sock_take_error(p.s), 0);
	/* Reported (by SO_ERROR here): no longer an error, the end of the stream, as TCP's. */
	assert_false(smcr_sock_poll(p.s) & POLLERR);
	assert_true(smcr_sock_poll(p.s) & POLLHUP);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 0);
	assert_int_equal(smcr_sock_send(p.s, "x", 1, 0), -EPIPE);
	pair_close(&p);
}

/* Abort with an immediate TCP reset (the fd lives on without the engine, e.g. exec). */
static void test_abort_reset_now(void **state)
{
	struct pollfd pfd;
	char buf[4];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	smcr_sock_abort(p.c, true);
	p.c = NULL;
	/* The peer's TCP socket sees the RST without anyone closing an fd. */
	pfd = (struct pollfd){ .fd = p.sfd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_int_equal(recv(p.sfd, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, ECONNRESET);
	/* The fd that lived on reads as a dead socket, not a hang. */
	assert_true(recv(p.cfd, buf, sizeof(buf), MSG_DONTWAIT) <= 0);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), -ECONNRESET);
	pair_close(&p);
}

/* The peer process dies without a word: the blocked reader wakes with a reset. */
static void test_peer_death_wakes_reader(void **state)
{
	struct pair p;
	char buf[16];
	pid_t pid;
	int status;

	(void)state;
	pair_listen(&p);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct smcr_sock *c = NULL;
		int fd = tcp_connect(p.port);

		if (smcr_sock_connect(fd, NULL, &c) != 0)
			_exit(2);
		if (smcr_sock_send(c, "alive", 5, 0) != 5)
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	p.sfd = accept4(p.lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(p.sfd >= 0);
	assert_int_equal(classify_wait(p.sfd), SMCR_CLASSIFY_PROPOSAL);
	assert_int_equal(smcr_sock_accept(p.sfd, NULL, &p.s), 0);
	assert_int_equal(sock_recv(p.s, buf, 5, MSG_WAITALL), 5);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), -ECONNRESET);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	pair_close(&p);
}

/* ---- hostile peer ---------------------------------------------------------------------- */

/* Play the client's engine gone rogue: post a raw CDC into the server's mailbox. */
static void post_raw_cdc(struct smcr_sock *from, struct smcr_curs prod, struct smcr_curs cons)
{
	struct smcr_cdc_msg m = {
		.seqno = (uint16_t)(from->tx_seqno + 1), .token = from->peer_token,
		.prod = prod, .cons = cons,
	};
	uint8_t wire[SMCR_CDC_MSG_LEN];

	from->tx_seqno++;
	smcr_cdc_encode(&m, wire);
	assert_int_equal(from->ops->send_ctrl(from->xc, wire), 0);
}

static void hostile_case(struct smcr_curs prod, struct smcr_curs cons)
{
	uint8_t buf[64], canary[64];
	struct pair p;

	pair_open(&p, RING_SMALL);
	memset(buf, 0x5A, sizeof(buf));
	memcpy(canary, buf, sizeof(buf));
	post_raw_cdc(p.c, prod, cons);
	/* Aborted, nothing copied out of (or beyond) the ring. */
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), -ECONNRESET);
	assert_memory_equal(buf, canary, sizeof(buf));
	assert_int_equal(p.s->state, SMCR_CONN_ABORTED);
	assert_int_equal(smcr_sock_readable_bytes(p.s), 0);
	/* The peer is told: it sees the reset too. */
	assert_true(wait_mask(p.c, POLLERR) & POLLERR);
	assert_int_equal(sock_recv(p.c, buf, sizeof(buf), 0), -ECONNRESET);
	pair_close(&p);
}

static void test_hostile_producer_cursor_outside_ring(void **state)
{
	(void)state;
	hostile_case((struct smcr_curs){ .wrap = 0, .count = RING_SMALL + 100 },
		     (struct smcr_curs){ 0, 0 });
}

static void test_hostile_producer_cursor_too_far_ahead(void **state)
{
	(void)state;
	/* More than a ring ahead of what we consumed: would overwrite unread data. */
	hostile_case((struct smcr_curs){ .wrap = 1, .count = 10 }, (struct smcr_curs){ 0, 0 });
}

static void test_hostile_producer_cursor_backwards(void **state)
{
	(void)state;
	/* More than a ring behind: no peer still holds bytes that old to write again. */
	hostile_case((struct smcr_curs){ .wrap = 0xFFFE, .count = 100 }, (struct smcr_curs){ 0, 0 });
}

/*
 * A peer that moved the connection to another link rewinds its producer
 * cursor to its last completed CDC and writes those bytes again (Linux,
 * smc_switch_cursor), here behind even what we consumed.  Nothing is delivered
 * twice, nothing new appears, and the connection goes on.
 */
static void test_rewound_producer_cursor_changes_nothing(void **state)
{
	static const char data[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789abcdefghijklmnopqrstuvwxyzABCDEF";
	char buf[128];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	assert_int_equal(smcr_sock_send(p.c, data, 100, 0), 100);
	assert_int_equal(sock_recv(p.s, buf, 50, MSG_WAITALL), 50);
	post_raw_cdc(p.c, (struct smcr_curs){ .wrap = 0, .count = 40 }, (struct smcr_curs){ 0, 0 });
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), 50);
	assert_memory_equal(buf, data + 50, 50);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
	assert_int_not_equal(p.s->state, SMCR_CONN_ABORTED);
	/* The bytes after the old cursor arrive once, and only they. */
	assert_int_equal(smcr_sock_send(p.c, "after", 5, 0), 5);
	assert_int_equal(sock_recv(p.s, buf, 5, MSG_WAITALL), 5);
	assert_memory_equal(buf, "after", 5);
	assert_int_equal(smcr_sock_readable_bytes(p.s), 0);
	pair_close(&p);
}

static void test_hostile_consumer_cursor_unwritten(void **state)
{
	(void)state;
	/* Claims to have consumed data the server never produced. */
	hostile_case((struct smcr_curs){ 0, 0 }, (struct smcr_curs){ .wrap = 0, .count = 4096 });
}

static void test_hostile_bad_token(void **state)
{
	struct smcr_cdc_msg m = { .seqno = 1, .token = 0x12345678 };
	uint8_t wire[SMCR_CDC_MSG_LEN], buf[8];
	struct pair p;

	(void)state;
	pair_open(&p, RING_SMALL);
	if (m.token == p.c->peer_token)
		m.token ^= 2;
	smcr_cdc_encode(&m, wire);
	assert_int_equal(p.c->ops->send_ctrl(p.c->xc, wire), 0);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_DONTWAIT), -ECONNRESET);
	pair_close(&p);
}

/* ---- fallback -------------------------------------------------------------------------- */

static void test_non_clc_first_bytes_are_tcp(void **state)
{
	char buf[32];
	struct pair p;

	(void)state;
	pair_listen(&p);
	p.cfd = tcp_connect(p.port);
	p.sfd = accept4(p.lfd, NULL, NULL, SOCK_CLOEXEC);
	/* Nothing sent yet: told apart from a prefix, so no FIONREAD is needed. */
	assert_int_equal(smcr_sock_classify(p.sfd), SMCR_CLASSIFY_NOTHING);
	assert_int_equal(send(p.cfd, "GET / HTTP/1.0\r\n", 16, 0), 16);
	assert_int_equal(classify_wait(p.sfd), SMCR_CLASSIFY_TCP);
	/* Peeked, never consumed. */
	assert_int_equal(recv(p.sfd, buf, sizeof(buf), 0), 16);
	assert_memory_equal(buf, "GET / HTTP/1.0\r\n", 16);
	/* A CLC eyecatcher prefix alone is "need more", not TCP. */
	assert_int_equal(send(p.cfd, "\xE2\xD4", 2, 0), 2);
	poll(NULL, 0, 20);
	assert_int_equal(smcr_sock_classify(p.sfd), SMCR_CLASSIFY_NEED_MORE);
	shutdown(p.cfd, SHUT_WR);
	pair_close(&p);
}

static void test_unregistered_peer_gets_no_proposal(void **state)
{
	struct smcr_sock *c = (struct smcr_sock *)1;
	uint16_t port;
	int lfd = tcp_listener(&port), cfd, sfd;
	char b;

	(void)state;
	cfd = tcp_connect(port);
	sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_false(smcr_peer_is_registered(cfd));
	{
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		struct smcr_client_plan plan;

		assert_int_equal(getpeername(cfd, (struct sockaddr *)&peer, &plen), 0);
		assert_false(smcr_peer_is_registered_at(cfd, &peer));
		assert_int_equal(smcr_sock_connect_plan(cfd, &peer, &plan), SMCR_CLC_DECL_PEERNOSMC);
		assert_null(plan.ops);
	}
	assert_int_equal(smcr_sock_connect(cfd, NULL, &c), SMCR_CLC_DECL_PEERNOSMC);
	assert_null(c);
	assert_string_equal(smcr_fallback_reason_str(SMCR_CLC_DECL_PEERNOSMC), "PEERNOSMC");
	poll(NULL, 0, 20);
	assert_int_equal(recv(sfd, &b, 1, MSG_DONTWAIT), -1); /* not one byte sent */
	close(cfd);
	close(sfd);
	close(lfd);
}

static size_t encode(struct smcr_clc_msg *m, uint8_t *buf)
{
	enum smcr_clc_err err;
	size_t n = smcr_clc_encode(m, buf, SMCR_CLC_MAX_LEN, &err);

	assert_true(n > 0);
	return n;
}

/* An smcr server receiving an offer it cannot take declines; both go on over TCP. */
static void test_server_declines_foreign_proposal(void **state)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	struct smcr_clc_msg m, d;
	struct smcr_sock *s = NULL;
	enum smcr_clc_err err;
	struct pair p;
	size_t n, len;

	(void)state;
	pair_listen(&p);
	p.cfd = tcp_connect(p.port);
	p.sfd = accept4(p.lfd, NULL, NULL, SOCK_CLOEXEC);
	/* A v1 SMC-R proposal, as a kernel with only RoCE would send. */
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_PROPOSAL;
	m.hdr.version = SMCR_CLC_V1;
	m.hdr.typev1 = SMCR_CLC_PATH_R;
	m.proposal.ipv4_prefix = 0x7f000000;
	m.proposal.ipv4_prefix_len = 8;
	n = encode(&m, buf);
	assert_int_equal(send(p.cfd, buf, n, 0), (ssize_t)n);
	assert_int_equal(send(p.cfd, "app data", 8, 0), 8);
	assert_int_equal(classify_wait(p.sfd), SMCR_CLASSIFY_PROPOSAL);
	/* no v1 RoCE device: Linux's reason (smc_find_rdma_v1_device_serv) */
	assert_int_equal(smcr_sock_accept(p.sfd, NULL, &s), SMCR_CLC_DECL_NOSMCRDEV);
	assert_null(s);
	/* Client reads the Decline, then both talk TCP; the app data was not eaten. */
	n = (size_t)recv(p.cfd, buf, sizeof(buf), 0);
	assert_int_equal(smcr_clc_decode(buf, n, &d, &len, &err), SMCR_WIRE_OK);
	assert_int_equal(len, n);
	assert_int_equal(d.hdr.type, SMCR_CLC_DECLINE);
	assert_int_equal(d.decline.diag, SMCR_CLC_DECL_NOSMCRDEV);
	assert_int_equal(recv(p.sfd, buf, 8, MSG_WAITALL), 8);
	assert_memory_equal(buf, "app data", 8);
	assert_int_equal(send(p.sfd, "tcp reply", 9, 0), 9);
	assert_int_equal(recv(p.cfd, buf, 9, MSG_WAITALL), 9);
	pair_close(&p);
}

struct decliner {
	int lfd;
	uint32_t reason;
	int ok;
};

/* A registered server that reads the Proposal and declines it. */
static void *decliner_main(void *arg)
{
	struct decliner *d = arg;
	uint8_t buf[SMCR_CLC_MAX_LEN];
	struct smcr_clc_msg m;
	enum smcr_clc_err err;
	size_t got = 0, len = 0;
	int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC);

	while (fd >= 0) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
		if (smcr_clc_decode(buf, got, &m, &len, &err) != SMCR_WIRE_NEED_MORE)
			break;
	}
	if (fd < 0 || len == 0 || got != len || m.hdr.type != SMCR_CLC_PROPOSAL)
		return NULL;
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_DECLINE;
	m.hdr.version = SMCR_CLC_V2;
	m.decline.diag = d->reason;
	len = smcr_clc_encode(&m, buf, sizeof(buf), &err);
	if (send(fd, buf, len, 0) != (ssize_t)len || send(fd, "banner", 6, 0) != 6)
		return NULL;
	if (recv(fd, buf, 5, MSG_WAITALL) == 5 && memcmp(buf, "hello", 5) == 0)
		d->ok = 1;
	close(fd);
	return NULL;
}

static void test_client_fallback_on_decline(void **state)
{
	struct decliner d = { .reason = SMCR_CLC_DECL_MAX_DMB };
	struct smcr_sock *c = NULL;
	struct pair p;
	pthread_t t;
	char buf[8];

	(void)state;
	pair_listen(&p);
	d.lfd = p.lfd;
	assert_int_equal(pthread_create(&t, NULL, decliner_main, &d), 0);
	p.cfd = tcp_connect(p.port);
	assert_int_equal(smcr_sock_connect(p.cfd, NULL, &c), SMCR_CLC_DECL_MAX_DMB);
	assert_null(c);
	/* The stream continues as TCP: the server's first bytes arrive intact. */
	assert_int_equal(recv(p.cfd, buf, 6, MSG_WAITALL), 6);
	assert_memory_equal(buf, "banner", 6);
	assert_int_equal(send(p.cfd, "hello", 5, 0), 5);
	pthread_join(t, NULL);
	assert_int_equal(d.ok, 1);
	pair_close(&p);
}

/* A server that writes first: the client fails but leaves the banner unread. */
static void test_server_speaks_first(void **state)
{
	struct smcr_sock *c = NULL;
	struct pair p;
	char buf[16];

	(void)state;
	pair_listen(&p);
	p.cfd = tcp_connect(p.port);
	p.sfd = accept4(p.lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_int_equal(send(p.sfd, "220 banner\r\n", 12, 0), 12);
	poll(NULL, 0, 10);
	assert_int_equal(smcr_sock_connect(p.cfd, NULL, &c), -EPROTO);
	assert_null(c);
	assert_int_equal(recv(p.cfd, buf, 12, MSG_WAITALL), 12);
	assert_memory_equal(buf, "220 banner\r\n", 12);
	/* The server side finds the late Proposal and declines it. */
	assert_int_equal(classify_wait(p.sfd), SMCR_CLASSIFY_PROPOSAL);
	assert_int_equal(smcr_sock_decline_late_proposal(p.sfd, SMCR_CLC_DECL_SYNCERR), 1);
	pair_close(&p);
}

struct server_run {
	int fd;
	int rc;
	struct smcr_sock *s;
};

static void *server_accept_main(void *arg)
{
	struct server_run *r = arg;

	r->rc = smcr_sock_accept(r->fd, NULL, &r->s);
	return NULL;
}

static size_t read_clc(int fd, struct smcr_clc_msg *m)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t got = 0, len = 0;

	while (got < sizeof(buf)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);

		if (n <= 0)
			return 0;
		got += (size_t)n;
		if (smcr_clc_decode(buf, got, m, &len, &err) != SMCR_WIRE_NEED_MORE)
			break;
	}
	return len == got ? len : 0;
}

/* The client declines after the Accept: the server stops waiting at once. */
static void test_server_falls_back_when_client_declines(void **state)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	struct server_run r = { .rc = 99 };
	struct smcr_xconn *xc = NULL;
	struct smcr_clc_msg m;
	struct pair p;
	pthread_t t;
	int64_t t0;
	size_t n;

	(void)state;
	pair_listen(&p);
	p.cfd = tcp_connect(p.port);
	p.sfd = accept4(p.lfd, NULL, NULL, SOCK_CLOEXEC);
	/* A genuine shm Proposal, from the transport itself. */
	assert_int_equal(smcr_shm_ops.create(-1, RING_SMALL, 2000, &xc), 0);
	memset(&m, 0, sizeof(m));
	assert_int_equal(smcr_shm_ops.client_propose(xc, &m), 0);
	n = encode(&m, buf);
	assert_int_equal(send(p.cfd, buf, n, 0), (ssize_t)n);
	assert_int_equal(classify_wait(p.sfd), SMCR_CLASSIFY_PROPOSAL);
	r.fd = p.sfd;
	assert_int_equal(pthread_create(&t, NULL, server_accept_main, &r), 0);
	assert_true(read_clc(p.cfd, &m) > 0);
	assert_int_equal(m.hdr.type, SMCR_CLC_ACCEPT);
	t0 = smcr_test_now_ms();
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_DECLINE;
	m.hdr.version = SMCR_CLC_V2;
	m.decline.diag = SMCR_CLC_DECL_MODEUNSUPP;
	n = encode(&m, buf);
	assert_int_equal(send(p.cfd, buf, n, 0), (ssize_t)n);
	pthread_join(t, NULL);
	assert_true(r.rc > 0);
	assert_null(r.s);
	assert_true(smcr_test_now_ms() - t0 < 1000);
	/* Both on TCP, nothing of CLC left. */
	assert_int_equal(send(p.cfd, "tcp", 3, 0), 3);
	assert_int_equal(recv(p.sfd, buf, 3, MSG_WAITALL), 3);
	assert_memory_equal(buf, "tcp", 3);
	smcr_shm_ops.destroy(xc, false);
	pair_close(&p);
}

/* A server whose Accept points at no rendezvous: the client declines and stays on TCP. */
static void *bad_accept_server(void *arg)
{
	struct decliner *d = arg;
	uint8_t buf[SMCR_CLC_MAX_LEN];
	struct smcr_clc_msg m;
	enum smcr_clc_err err;
	int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC);
	size_t n;

	if (fd < 0 || read_clc(fd, &m) == 0 || m.hdr.type != SMCR_CLC_PROPOSAL)
		return NULL;
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_ACCEPT;
	m.hdr.version = SMCR_CLC_V2;
	m.hdr.typev1 = SMCR_CLC_PATH_D;
	m.accept.ism_chid = 0xFFFF;
	m.accept.dmb_token = 0x1234; /* nobody listens there */
	memcpy(m.accept.eid, "SMCR-USERSPACE-SAMEHOST-SHM     ", SMCR_CLC_EID_LEN);
	n = smcr_clc_encode(&m, buf, sizeof(buf), &err);
	if (send(fd, buf, n, 0) != (ssize_t)n || read_clc(fd, &m) == 0 ||
	    m.hdr.type != SMCR_CLC_DECLINE)
		return NULL;
	d->reason = m.decline.diag;
	if (send(fd, "ok", 2, 0) == 2)
		d->ok = 1;
	close(fd);
	return NULL;
}

static void test_client_declines_unreachable_accept(void **state)
{
	struct decliner d = { 0 };
	struct smcr_sock *c = NULL;
	struct pair p;
	pthread_t t;
	char buf[2];
	int rc;

	(void)state;
	pair_listen(&p);
	d.lfd = p.lfd;
	assert_int_equal(pthread_create(&t, NULL, bad_accept_server, &d), 0);
	p.cfd = tcp_connect(p.port);
	rc = smcr_sock_connect(p.cfd, NULL, &c);
	pthread_join(t, NULL);
	assert_true(rc > 0);
	assert_null(c);
	assert_int_equal(d.ok, 1);
	assert_int_equal((int)d.reason, rc);
	assert_int_equal(recv(p.cfd, buf, 2, MSG_WAITALL), 2);
	assert_memory_equal(buf, "ok", 2);
	pair_close(&p);
}

/*
 * The server's CLC bound passes between its Accept and the client's answer
 * (a client stopped there): the server gives SMC up, not the connection.
 * The client's late answer to the Accept is taken off the stream, and both
 * ends go on over TCP with every byte of data intact and none of CLC.
 * One thread: the client's steps run only once the server has given up.
 */
static void test_server_gives_up_then_takes_late_answer(void **state)
{
	struct smcr_sock_opts so = { .handshake_ms = 50 };
	struct smcr_handshake *chs = NULL, *shs = NULL;
	struct smcr_sock *c = NULL, *s = NULL;
	struct pollfd pfd;
	struct pair p;
	char buf[8];
	int crc, rc;

	(void)state;
	pair_listen(&p);
	p.cfd = tcp_connect(p.port);
	assert_int_equal(smcr_sock_connect_start(p.cfd, NULL, &chs), SMCR_HANDSHAKE_PENDING);
	p.sfd = accept4(p.lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(p.sfd >= 0);
	assert_int_equal(classify_wait(p.sfd), SMCR_CLASSIFY_PROPOSAL);
	assert_int_equal(smcr_sock_accept_start(p.sfd, &so, &shs), SMCR_HANDSHAKE_PENDING);
	/* past the bound: still pending (given up), however long it waits */
	rc = smcr_handshake_step(shs, smcr_test_now_ms() + 300, &s);
	assert_int_equal(rc, SMCR_HANDSHAKE_PENDING);
	assert_null(s);
	/* the server sent nothing after its Accept: the client answers it */
	do
		crc = smcr_handshake_step(chs, smcr_test_now_ms() + 2000, &c);
	while (crc == SMCR_HANDSHAKE_PENDING);
	smcr_handshake_free(chs);
	if (crc == 0) {
		/* it attached before the server let go: a Confirm, answered by a Decline */
		assert_non_null(c);
	} else {
		assert_true(crc > 0);
		assert_null(c);
	}
	rc = smcr_handshake_step(shs, smcr_test_now_ms() + 2000, &s);
	smcr_handshake_free(shs);
	assert_int_equal(rc, SMCR_CLC_DECL_TIMEOUT_AL);
	assert_null(s);
	/* TCP both ways, nothing of CLC in either direction */
	assert_int_equal(send(p.sfd, "pong", 4, 0), 4);
	if (c) {
		assert_int_equal(smcr_sock_send(c, "ping", 4, 0), 4);
		struct iovec iov = { buf, 4 };

		assert_int_equal(smcr_sock_recvv(c, &iov, 1, MSG_WAITALL), 4);
	} else {
		assert_int_equal(send(p.cfd, "ping", 4, 0), 4);
		assert_int_equal(recv(p.cfd, buf, 4, MSG_WAITALL), 4);
	}
	assert_memory_equal(buf, "pong", 4);
	assert_int_equal(recv(p.sfd, buf, 4, MSG_WAITALL), 4);
	assert_memory_equal(buf, "ping", 4);
	pfd = (struct pollfd){ .fd = p.sfd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 0), 0);
	if (c)
		smcr_sock_close(c);
	pair_close(&p);
}

static void test_late_proposal_declined(void **state)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	struct smcr_clc_msg m, d;
	enum smcr_clc_err err;
	struct pair p;
	size_t n, len;

	(void)state;
	pair_listen(&p);
	p.cfd = tcp_connect(p.port);
	p.sfd = accept4(p.lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_int_equal(smcr_sock_decline_late_proposal(p.sfd, SMCR_CLC_DECL_SYNCERR), 0);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_PROPOSAL;
	m.hdr.version = SMCR_CLC_V1;
	m.hdr.typev1 = SMCR_CLC_PATH_R;
	n = encode(&m, buf);
	assert_int_equal(send(p.cfd, buf, n, 0), (ssize_t)n);
	assert_int_equal(classify_wait(p.sfd), SMCR_CLASSIFY_PROPOSAL);
	assert_int_equal(smcr_sock_decline_late_proposal(p.sfd, SMCR_CLC_DECL_SYNCERR), 1);
	n = (size_t)recv(p.cfd, buf, sizeof(buf), 0);
	assert_int_equal(smcr_clc_decode(buf, n, &d, &len, &err), SMCR_WIRE_OK);
	assert_int_equal(d.decline.diag, SMCR_CLC_DECL_SYNCERR);
	assert_int_equal(recv(p.sfd, buf, 1, MSG_DONTWAIT), -1);
	pair_close(&p);
}

/*
 * The screen of a confined server (read off the stream, no peek): a
 * Proposal's every prefix asks for more, as many bytes as its header says
 * once it is there; the whole of it is a Proposal of exactly its length, also
 * with data after it; anything else, at any byte, is TCP.
 */
static void test_screen_proposal_read_off_the_stream(void **state)
{
	uint8_t buf[SMCR_CLC_MAX_LEN + 16], dbuf[64];
	struct smcr_clc_msg m, d;
	enum smcr_clc_err err;
	size_t n, need, len;

	(void)state;
	assert_int_equal(SMCR_CLC_SCREEN_MAX, SMCR_CLC_MAX_LEN);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_PROPOSAL;
	m.hdr.version = SMCR_CLC_V1;
	m.hdr.typev1 = SMCR_CLC_PATH_R;
	n = encode(&m, buf);
	for (size_t have = 0; have < n; have++) {
		need = 0;
		assert_int_equal(smcr_clc_screen(buf, have, &need), SMCR_CLASSIFY_NEED_MORE);
		assert_int_equal(need, have < SMCR_CLC_HDR_LEN ? SMCR_CLC_HDR_LEN : n);
	}
	assert_int_equal(smcr_clc_screen(buf, n, &need), SMCR_CLASSIFY_PROPOSAL);
	assert_int_equal(need, n);
	memcpy(buf + n, "data", 4);
	assert_int_equal(smcr_clc_screen(buf, n + 4, &need), SMCR_CLASSIFY_PROPOSAL);
	assert_int_equal(need, n);
	/* one byte off in the eyecatcher, the type or the length's high byte: not a Proposal */
	for (size_t i = 0; i < 6; i++) {
		uint8_t copy[SMCR_CLC_MAX_LEN];

		memcpy(copy, buf, n);
		copy[i] ^= i == 5 ? 0x80 : 0x01; /* (the length's high byte: past any Proposal) */
		assert_int_equal(smcr_clc_screen(copy, n, &need), SMCR_CLASSIFY_TCP);
	}
	assert_int_equal(smcr_clc_screen("GET / HTTP/1.0\r\n", 16, &need), SMCR_CLASSIFY_TCP);
	assert_int_equal(smcr_clc_screen("\xE2\xD4\xC3", 3, &need), SMCR_CLASSIFY_NEED_MORE);
	assert_int_equal(smcr_clc_screen("\xE2\xD4\xC3\x00", 4, &need), SMCR_CLASSIFY_TCP);
	/* another CLC message (an Accept's header) is no Proposal */
	buf[4] = SMCR_CLC_ACCEPT;
	assert_int_equal(smcr_clc_screen(buf, 5, &need), SMCR_CLASSIFY_TCP);
	/* the Decline it is answered with */
	n = smcr_clc_decline_encode(SMCR_CLC_DECL_CONFINED, dbuf, sizeof(dbuf));
	assert_true(n > 0);
	assert_int_equal(smcr_clc_decode(dbuf, n, &d, &len, &err), SMCR_WIRE_OK);
	assert_int_equal(len, n);
	assert_int_equal(d.hdr.type, SMCR_CLC_DECLINE);
	assert_int_equal(d.decline.diag, SMCR_CLC_DECL_CONFINED);
	assert_int_equal(smcr_clc_decline_encode(SMCR_CLC_DECL_CONFINED, dbuf, 8), 0);
}

/* Ring buffers are reused after a clean close and start zeroed. */
static void test_pooled_ring_is_zeroed(void **state)
{
	uint8_t zero[256] = { 0 };
	char buf[16];
	struct pair p;

	(void)state;
	for (int round = 0; round < 3; round++) {
		pair_open(&p, RING_SMALL);
		assert_memory_equal(p.s->rmb, zero, sizeof(zero));
		assert_memory_equal(p.c->rmb, zero, sizeof(zero));
		memset(buf, 'q', sizeof(buf));
		assert_int_equal(smcr_sock_send(p.c, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
		assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_WAITALL),
				 (ssize_t)sizeof(buf));
		smcr_sock_close(p.c);
		p.c = NULL;
		assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 0);
		pair_close(&p);
	}
}

/*
 * Only the written part of a ring is zeroed on reuse (shm_region.c
 * smcr_shm_region_zero): a connection that wrapped its ring must leave all
 * of it zeroed, a short one the bytes it wrote.  Both ends of every round check their whole rings, and
 * the rings are the pooled ones of the round before.
 */
static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void test_pooled_ring_zeroed_whole(void **state)
{
	static uint8_t buf[64 * 1024];
	const uint8_t *prev_s = NULL, *prev_c = NULL;
	struct pair p;

	(void)state;
	for (int round = 0; round < 4; round++) {
		/* rounds 0 and 2 wrap the rings (1.5 rings each way), 1 and 3 write 100 bytes */
		size_t total = round % 2 ? 100 : RING_SMALL * 3 / 2;

		pair_open(&p, RING_SMALL);
		if (round > 0) {
			assert_ptr_equal(p.s->rmb, prev_s); /* reused, not fresh */
			assert_ptr_equal(p.c->rmb, prev_c);
		}
		assert_true(all_zero(p.s->rmb, p.s->rmb_size));
		assert_true(all_zero(p.c->rmb, p.c->rmb_size));
		for (struct smcr_sock *from = p.c, *to = p.s; from; from = from == p.c ? p.s : NULL,
							  to = p.c) {
			size_t sent = 0, got = 0;

			memset(buf, 'q' + round, sizeof(buf));
			while (got < total) {
				size_t want = total - sent < sizeof(buf) ? total - sent : sizeof(buf);
				ssize_t n = want ? smcr_sock_send(from, buf, want, MSG_DONTWAIT) : 0;

				if (n > 0)
					sent += (size_t)n;
				n = sock_recv(to, buf, sizeof(buf), MSG_DONTWAIT);
				if (n > 0)
					got += (size_t)n;
			}
		}
		prev_s = p.s->rmb;
		prev_c = p.c->rmb;
		smcr_sock_close(p.c);
		p.c = NULL;
		assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 0);
		pair_close(&p);
	}
}

/*
 * Secrets come from a pool of kernel randomness: a forked child must not
 * draw the bytes its parent draws next (both would offer the same secret).
 */
static void test_fork_child_draws_its_own_random(void **state)
{
	uint8_t first[8], parent[16], child[16];
	int fds[2], status;
	pid_t pid;

	(void)state;
	assert_int_equal(smcr_sys_random(first, sizeof(first)), 0); /* the pool is full now */
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		bool ok = smcr_sys_random(child, sizeof(child)) == 0 &&
			  write(fds[1], child, sizeof(child)) == (ssize_t)sizeof(child);

		_exit(ok ? 0 : 1);
	}
	assert_int_equal(smcr_sys_random(parent, sizeof(parent)), 0);
	assert_int_equal(read(fds[0], child, sizeof(child)), (ssize_t)sizeof(child));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_memory_not_equal(parent, child, sizeof(child));
	close(fds[0]);
	close(fds[1]);
}

/* A forked child must not reuse the parent's pooled (MAP_SHARED) rings. */
static void test_fork_child_forgets_pool(void **state)
{
	struct pair p;
	char buf[4];
	pid_t pid;
	int status;

	(void)state;
	pair_open(&p, RING_SMALL);
	smcr_sock_close(p.c);
	p.c = NULL;
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 0);
	pair_close(&p); /* the server closed after the peer: its ring is pooled */
	assert_true(smcr_shm_test_pool_size() > 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(smcr_shm_test_pool_size() == 0 ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(smcr_shm_test_pool_size() > 0);
}

/* A forked child drops its copies; the parent's connection carries on. */
static void test_fork_child_forgets_connection(void **state)
{
	char buf[8];
	struct pair p;
	pid_t pid;
	int status;

	(void)state;
	pair_open(&p, RING_SMALL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		smcr_sock_forget_inherited(p.c);
		smcr_sock_forget_inherited(p.s);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Nothing was sent, nothing reset: both directions still work. */
	assert_false(smcr_sock_poll(p.s) & (POLLERR | POLLHUP | POLLIN));
	assert_int_equal(smcr_sock_send(p.c, "after", 5, 0), 5);
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), 0), 5);
	assert_int_equal(smcr_sock_send(p.s, "fork", 4, 0), 4);
	assert_int_equal(sock_recv(p.c, buf, sizeof(buf), 0), 4);
	pair_close(&p);
}

/* The published stats: header, per-connection records, fallback reasons. */
static void test_stats_records(void **state)
{
	const struct smcr_stats_file *f = smcr_stats_area();
	const struct smcr_stats_conn *rec = NULL;
	const char *path = smcr_stats_path();
	char buf[1000];
	struct pair p;

	(void)state;
	assert_int_equal(f->magic, SMCR_STATS_MAGIC);
	assert_int_equal(f->version, SMCR_STATS_VERSION);
	assert_int_equal(f->conn_size, sizeof(struct smcr_stats_conn));
	assert_int_equal(f->pid, getpid());
	if (path[0]) {
		struct stat st;

		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	pair_open(&p, RING_SMALL);
	memset(buf, 7, sizeof(buf));
	assert_int_equal(smcr_sock_send(p.c, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_int_equal(sock_recv(p.s, buf, sizeof(buf), MSG_WAITALL), (ssize_t)sizeof(buf));
	for (unsigned i = 0; i < f->max_conns; i++)
		if (f->conns[i].state == SMCR_STATS_CONN_LIVE && f->conns[i].tcp_fd == p.cfd)
			rec = &f->conns[i];
	assert_non_null(rec);
	assert_int_equal(rec->mode, SMCR_STATS_MODE_SMC_SHM);
	assert_int_equal(rec->role, 0);
	assert_int_equal(rec->bytes_sent, sizeof(buf));
	assert_int_equal(rec->rmb_size, RING_SMALL);
	assert_int_equal(rec->peer_port, p.port);
	/* A TCP-mode connection has a record with its reason until it ends. */
	{
		struct smcr_tcp_record *tr = smcr_stats_tcp_open(p.sfd, true, SMCR_CLC_DECL_PEERNOSMC);
		const struct smcr_stats_conn *c = (const struct smcr_stats_conn *)(const void *)tr;

		assert_non_null(tr);
		assert_int_equal(c->state, SMCR_STATS_CONN_LIVE);
		assert_int_equal(c->mode, SMCR_STATS_MODE_TCP);
		assert_int_equal(c->fallback_reason, SMCR_CLC_DECL_PEERNOSMC);
		assert_int_equal(c->bytes_sent, 0);
		assert_int_equal(c->local_port, p.port);
		smcr_stats_tcp_close(tr);
		assert_int_equal(c->state, SMCR_STATS_CONN_FREE);
	}
	pair_close(&p);
	/* Earlier tests fell back with these reasons. */
	{
		bool peernosmc = false;

		for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++)
			if (f->fallback_reasons[i].reason == SMCR_CLC_DECL_PEERNOSMC &&
			    f->fallback_reasons[i].count > 0)
				peernosmc = true;
		assert_true(peernosmc);
		assert_true(f->fallbacks >= 3);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake),
		cmocka_unit_test(test_stats_report),
		cmocka_unit_test(test_integrity_many_wraps),
		cmocka_unit_test(test_full_ring_eagain_and_resume),
		cmocka_unit_test(test_peek_and_readiness),
		cmocka_unit_test(test_waitall_blocks_until_complete),
		cmocka_unit_test(test_two_senders_two_readers_one_connection),
		cmocka_unit_test(test_edge_triggered_wakeup),
		cmocka_unit_test(test_edge_triggered_no_storm),
		cmocka_unit_test(test_receive_and_send_timeouts),
		cmocka_unit_test(test_idle_connection_uses_no_cpu),
		cmocka_unit_test(test_bounded_spin),
		cmocka_unit_test(test_bad_iovecs_rejected),
		cmocka_unit_test(test_iovecs_across_wrap),
		cmocka_unit_test(test_shutdown_half_close),
		cmocka_unit_test(test_close_then_peer_sees_eof_and_epipe),
		cmocka_unit_test(test_close_with_unread_data_aborts),
		cmocka_unit_test(test_peer_abort_is_econnreset),
		cmocka_unit_test(test_abort_reset_now),
		cmocka_unit_test(test_peer_death_wakes_reader),
		cmocka_unit_test(test_hostile_producer_cursor_outside_ring),
		cmocka_unit_test(test_hostile_producer_cursor_too_far_ahead),
		cmocka_unit_test(test_hostile_producer_cursor_backwards),
		cmocka_unit_test(test_rewound_producer_cursor_changes_nothing),
		cmocka_unit_test(test_hostile_consumer_cursor_unwritten),
		cmocka_unit_test(test_hostile_bad_token),
		cmocka_unit_test(test_non_clc_first_bytes_are_tcp),
		cmocka_unit_test(test_unregistered_peer_gets_no_proposal),
		cmocka_unit_test(test_server_declines_foreign_proposal),
		cmocka_unit_test(test_client_fallback_on_decline),
		cmocka_unit_test(test_server_speaks_first),
		cmocka_unit_test(test_server_falls_back_when_client_declines),
		cmocka_unit_test(test_client_declines_unreachable_accept),
		cmocka_unit_test(test_server_gives_up_then_takes_late_answer),
		cmocka_unit_test(test_late_proposal_declined),
		cmocka_unit_test(test_screen_proposal_read_off_the_stream),
		cmocka_unit_test(test_pooled_ring_is_zeroed),
		cmocka_unit_test(test_pooled_ring_zeroed_whole),
		cmocka_unit_test(test_fork_child_draws_its_own_random),
		cmocka_unit_test(test_fork_child_forgets_pool),
		cmocka_unit_test(test_fork_child_forgets_connection),
		cmocka_unit_test(test_stats_records),
	};

	signal(SIGPIPE, SIG_IGN);
	alarm(120); /* bounded: a hang fails the test instead of stalling CI */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
