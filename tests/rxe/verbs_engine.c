// SPDX-License-Identifier: MIT
/*
 * verbs_engine: the smcr engine's data path (CDC, cursors, flow control, close) running
 * over the verbs transport (src/smcr/verbs.c) between the two "hosts" of scripts/rxe-vm.
 *
 *   verbs_engine server LOCAL_ADDR PORT BYTES [CONNS [PINGS]]
 *   verbs_engine client SERVER_ADDR PORT LOCAL_ADDR BYTES [expect-reset]
 *   verbs_engine clients SERVER_ADDR PORT LOCAL_ADDR BYTES CONNS PARALLEL PINGS [expect-reset]
 *   verbs_engine rogue SERVER_ADDR PORT LOCAL_ADDR read|write
 *
 * The engine's own handshake (connect.c, accept.c) still picks the shm transport, so
 * this program runs the CLC flow itself, exactly as those do but with smcr_verbs_ops:
 * Proposal, Accept, Confirm encoded by the engine's CLC codec over the TCP connection,
 * the transport's hooks in between. Then it hands the transport to smcr_conn_new() and uses the engine's
 * socket API: PINGS 1-byte round trips, BYTES client -> server with every byte checked,
 * the server's stream hash sent back, both sides closed through the engine.
 * With expect-reset the client streams until the connection breaks (the calling script
 * kills the server or deletes its RDMA device) and passes if that ends in ECONNRESET or
 * EPIPE. Prints "ok: ..." / "FAIL: ..." and numbers; exit 0 only if everything held.
 *
 * Link groups (src/smcr/lgr.c): the server takes CONNS connections, each in its own
 * thread. `clients` makes CONNS connections: the first alone (first contact), the rest
 * PARALLEL at a time, each in its own thread (PARALLEL 1 = one after the other), each
 * with PINGS round trips and BYTES checked. It asserts that every connection ran on the
 * same link group and QP (the transport's info(), as smcr-stat shows it) and that this
 * process has exactly one QP (`rdma resource show qp`, the kernel's count), prints the
 * first-contact and the mean reuse handshake times, then waits for the idle group to be
 * torn down (VERBS_IDLE_MS, default 3000) and checks the QP is gone. Both sides print
 * their registered memory regions (`rdma resource show mr`) while connections are up.
 * With expect-reset every connection streams until the link breaks and must end in
 * ECONNRESET/EPIPE.
 *
 * rogue: a peer that knows the server's RMB (its rkey and address came in the CLC
 * Accept) and misuses the link group's own QP: an RDMA READ of the RMB, or an RDMA WRITE
 * just past its end. Passes if the NIC refuses it (remote access error). The server,
 * with VERBS_EXPECT_FAILURES=N, passes if exactly N of its connections failed, each on
 * a link group of its own, and the others (an honest client streaming meanwhile) went
 * through intact on another group: only the rogue's link ended.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/real.h"
#include "smcr/clc.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/lgr.h"
#include "smcr/stats.h"
#include "smcr/stats_abi.h"
#include "smcr/verbs.h"
#include "smcr/wire.h"

#define PINGS	    200
#define CLC_WAIT_MS 5000
#define RUN_LIMIT_S 120
#define CHUNK	    (64u << 10)
#define RING_SIZE   (256u << 10)
#define HASH_INIT   0xcbf29ce484222325ull

static int pings = PINGS;
/*
 * One connection in this process (client, or server with no CONNS): the
 * process's count of blocking waits (smcr-stat's waits_slept) is then that
 * connection's, and a ping-pong must not need more than a few per round
 * trip.  A lost or spurious wake-up loop shows here and not in the times:
 * a waiter woken again and again by an event nobody reads (wr.c's arm
 * skipped reading the completion channel) made every round trip spin
 * through dozens of waits, stealing the CPU the peer and soft-RoCE need,
 * and round trips of 0.1-0.6 s under load.
 */
static bool single_conn;
#define WAITS_PER_PING_MAX 4

static uint64_t waits_slept(void)
{
	const struct smcr_stats_file *f = smcr_stats_area();

	return f ? __atomic_load_n(&f->waits_slept, __ATOMIC_RELAXED) : 0;
}

/* The waits since `w0` over `n` round trips: within the bound?  (-1 and FAIL if not.) */
static int check_waits(const char *side, uint64_t w0, int n)
{
	uint64_t w = waits_slept() - w0;

	if (!single_conn || n < 50)
		return 0;
	if (w > (uint64_t)n * WAITS_PER_PING_MAX) {
		printf("FAIL: %s: %" PRIu64 " blocking waits over %d round trips (at most %d each)\n",
		       side, w, n, WAITS_PER_PING_MAX);
		return -1;
	}
	printf("ok: %s: %.2f blocking waits per round trip (%" PRIu64 " over %d)\n", side,
	       (double)w / n, w, n);
	return 0;
}
static bool quiet; /* many connections: per-connection lines only on failure */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int failf(const char *what, int err)
{
	printf("FAIL: %s: %s (%d)\n", what,
	       err > 0 && err < 4096 ? strerror(err) : "reason", err);
	return -1;
}

static uint8_t stream_byte(uint64_t i)
{
	uint64_t z = (i >> 3) * 0x9e3779b97f4a7c15ull + 0x5bd1e995ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint8_t)(z >> ((i & 7) * 8));
}

static uint64_t hash_update(uint64_t h, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static int resolve(const char *addr, const char *port, struct sockaddr_storage *out,
		   socklen_t *len)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res;
	int rc = getaddrinfo(addr, port, &hints, &res);

	if (rc) {
		printf("FAIL: bad address %s: %s\n", addr, gai_strerror(rc));
		return -1;
	}
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* ------------------------------------------------------------- CLC over TCP ---- */

static int clc_send(int fd, const struct smcr_clc_msg *m)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t n = smcr_clc_encode(m, buf, sizeof(buf), &err);

	if (n == 0) {
		printf("FAIL: encoding CLC %s: %s\n", smcr_clc_type_str(m->hdr.type),
		       smcr_clc_err_str(err));
		return -1;
	}
	return write(fd, buf, n) == (ssize_t)n ? 0 : failf("sending CLC", errno);
}

static int clc_recv(int fd, struct smcr_clc_msg *m)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	size_t have = 0, need = SMCR_CLC_HDR_LEN, len;
	enum smcr_clc_err err;

	for (;;) {
		while (have < need) {
			ssize_t n = read(fd, buf + have, need - have);

			if (n <= 0)
				return failf("reading CLC", n ? errno : ECONNRESET);
			have += (size_t)n;
		}
		switch (smcr_clc_decode(buf, have, m, &len, &err)) {
		case SMCR_WIRE_OK:
			return 0;
		case SMCR_WIRE_NEED_MORE:
			if (len <= have || len > sizeof(buf))
				return failf("CLC framing", EPROTO);
			need = len;
			break;
		default:
			printf("FAIL: bad CLC message: %s\n", smcr_clc_err_str(err));
			return -1;
		}
	}
}

/*
 * server_attach() never waits for the client: wait here, as the engine's handshake
 * does, on the TCP socket and the transport's fd until it attaches or CLC_WAIT_MS passes.
 */
static int server_attach_wait(const struct smcr_transport_ops *ops, struct smcr_xconn *xc,
			      int fd, uint32_t *peer_size)
{
	struct timespec t0, t;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = ops->server_wait_fd ? ops->server_wait_fd(xc) : -1,
					 .events = POLLIN } };
		long waited_ms;

		rc = ops->server_attach(xc, fd, peer_size);
		if (rc != -EAGAIN)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		waited_ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (waited_ms >= CLC_WAIT_MS)
			return -ETIMEDOUT;
		(void)poll(p, p[1].fd >= 0 ? 2 : 1, 10);
	}
}

static int decline(int fd, int reason)
{
	struct smcr_clc_msg d;

	memset(&d, 0, sizeof(d));
	d.hdr.type = SMCR_CLC_DECLINE;
	d.hdr.version = SMCR_CLC_V2;
	d.decline.diag = (uint32_t)reason;
	clc_send(fd, &d);
	return failf("declined", reason);
}

/* connect.c's client flow with smcr_verbs_ops. */
static struct smcr_sock *client_handshake(int fd)
{
	const struct smcr_transport_ops *ops = &smcr_verbs_ops;
	struct smcr_clc_msg prop, acc, conf;
	struct smcr_xconn *xc = NULL;
	uint32_t peer_size = 0;
	int rc;

	memset(&prop, 0, sizeof(prop));
	memset(&conf, 0, sizeof(conf));
	rc = ops->create(fd, RING_SIZE, CLC_WAIT_MS, &xc);
	if (rc) {
		failf("verbs transport for this connection", -rc);
		goto fail;
	}
	rc = ops->client_propose(xc, &prop);
	if (rc) {
		decline(fd, rc);
		goto fail;
	}
	if (clc_send(fd, &prop) || clc_recv(fd, &acc))
		goto fail;
	if (acc.hdr.type != SMCR_CLC_ACCEPT) {
		failf("server did not accept", (int)acc.decline.diag);
		goto fail;
	}
	rc = ops->client_attach(xc, &acc, &conf, &peer_size);
	if (rc) {
		decline(fd, rc);
		goto fail;
	}
	if (clc_send(fd, &conf))
		goto fail;
	if (!quiet)
		printf("ok: client handshake done (peer ring %u bytes)\n", peer_size);
	return smcr_conn_new(fd, false, ops, xc, peer_size, 0);
fail:
	if (xc)
		ops->destroy(xc, false);
	return NULL;
}

/* accept.c's server flow with smcr_verbs_ops. */
static struct smcr_sock *server_handshake(int fd)
{
	const struct smcr_transport_ops *ops = &smcr_verbs_ops;
	struct smcr_clc_msg prop, acc, conf;
	struct smcr_xconn *xc = NULL;
	uint32_t peer_size = 0;
	int rc;

	memset(&acc, 0, sizeof(acc));
	rc = ops->create(fd, RING_SIZE, CLC_WAIT_MS, &xc);
	if (rc) {
		failf("verbs transport for this connection", -rc);
		goto fail;
	}
	if (clc_recv(fd, &prop))
		goto fail;
	rc = ops->server_accept(xc, &prop, &acc);
	if (rc) {
		decline(fd, rc);
		goto fail;
	}
	if (clc_send(fd, &acc))
		goto fail;
	rc = server_attach_wait(ops, xc, fd, &peer_size);
	if (rc) {
		failf("server attach", rc);
		goto fail;
	}
	if (clc_recv(fd, &conf))
		goto fail;
	rc = ops->server_confirm(xc, &conf);
	if (rc) {
		failf("server confirm", rc);
		goto fail;
	}
	if (!quiet)
		printf("ok: server handshake done (peer ring %u bytes)\n", peer_size);
	return smcr_conn_new(fd, true, ops, xc, peer_size, 0);
fail:
	if (xc)
		ops->destroy(xc, false);
	return NULL;
}

/* ------------------------------------------------------------------ traffic ---- */

static int send_all(struct smcr_sock *s, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = smcr_sock_send(s, p, len, 0);

		if (n <= 0)
			return failf("smcr_sock_send", n ? (int)-n : EPIPE);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(struct smcr_sock *s, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		struct iovec iov = { .iov_base = p, .iov_len = len };
		ssize_t n = smcr_sock_recvv(s, &iov, 1, 0);

		if (n <= 0) {
			printf("    (state %d, peer flags %#x, flags sent %#x, cdc in %" PRIu64
			       " out %" PRIu64 ")\n",
			       (int)s->state, s->peer_conn_flags, s->conn_flags_sent,
			       s->cdc_received, s->cdc_sent);
			return failf("smcr_sock_recvv", n ? (int)-n : ECONNRESET);
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * expect-reset mode: the script kills the server or deletes its RDMA device while we
 * stream; the engine must end the connection with ECONNRESET (or EPIPE), never hang.
 */
static int client_until_reset(struct smcr_sock *s, uint64_t total)
{
	static _Thread_local uint8_t buf[CHUNK]; /* one per connection thread */
	uint64_t pos = 0;

	printf("streaming until the connection breaks\n");
	while (pos < total) {
		ssize_t n = smcr_sock_send(s, buf, sizeof(buf), 0);

		if (n == -ECONNRESET || n == -EPIPE) {
			printf("ok: send failed with %s after %" PRIu64
			       " bytes, as expected\n",
			       strerror((int)-n), pos);
			return 0;
		}
		if (n <= 0)
			return failf("smcr_sock_send: not a reset", n ? (int)-n : EIO);
		pos += (uint64_t)n;
	}
	printf("FAIL: all %" PRIu64 " bytes went through; expected a reset\n", total);
	return -1;
}

static int client_traffic(struct smcr_sock *s, uint64_t total)
{
	static _Thread_local uint8_t buf[CHUNK]; /* one per connection thread */
	uint64_t hash = HASH_INIT, peer_hash = 0;
	double t0, secs, first = 0;
	uint8_t b = 0;

	uint64_t w0 = 0;

	t0 = now_us();
	for (int i = 0; i < pings; i++) {
		if (send_all(s, &b, 1) || recv_all(s, &b, 1))
			return -1;
		if (i == 0) {
			first = now_us() - t0; /* includes waiting for CONFIRM LINK */
			w0 = waits_slept();
		}
		b++;
	}
	if (pings > 1)
		printf("ok: %d engine round trips of 1 byte (WRITE + CDC each way): first %.0f us, "
		       "mean %.0f us\n",
		       pings, first, (now_us() - t0) / pings);
	if (pings > 1 && check_waits("client", w0, pings - 1))
		return -1;
	t0 = now_us();
	for (uint64_t pos = 0; pos < total;) {
		size_t n = total - pos < CHUNK ? (size_t)(total - pos) : CHUNK;

		for (size_t i = 0; i < n; i++)
			buf[i] = stream_byte(pos + i);
		hash = hash_update(hash, buf, n);
		if (send_all(s, buf, n))
			return -1;
		pos += n;
	}
	if (recv_all(s, &peer_hash, sizeof(peer_hash)))
		return -1;
	secs = (now_us() - t0) / 1e6;
	if (total >= (1u << 20))
		printf("ok: engine sent %" PRIu64 " bytes in %.2f s = %.1f MB/s\n", total, secs,
		       (double)total / secs / 1e6);
	if (peer_hash != hash) {
		printf("FAIL: server's hash %016" PRIx64 " != ours %016" PRIx64 "\n",
		       peer_hash, hash);
		return -1;
	}
	if (total >= (1u << 20))
		printf("ok: server's stream hash equals ours (%016" PRIx64 ")\n", hash);
	return 0;
}

/*
 * The server's second half of round trips waits as an event-loop server
 * does (redis under epoll): poll() on the connection's ready fd, then ask the
 * engine.  A wake-up that brought no CDC is one such a program pays for
 * nothing (its read finds EAGAIN): the ready fd is for the peer's messages
 * and failures, and our own send completions (one per round trip) must not
 * make it readable.  A rare stray event may, hence a small bound, not none.
 */
#define EMPTY_WAKES_PER_PING_MAX 0.1

struct wake_count {
	uint64_t wakes, empty;
};

/* Wait until s has a byte (or an error), as an event loop does. */
static int evloop_wait(struct smcr_sock *s, struct wake_count *w)
{
	int rc = 0;

	smcr_sock_set_interest(s, POLLIN);
	for (;;) {
		struct pollfd p = { .fd = smcr_sock_ready_fd(s), .events = POLLIN };
		unsigned mask = smcr_sock_poll(s);
		uint64_t cdcs;

		if (mask & (POLLIN | POLLERR | POLLHUP))
			break;
		cdcs = __atomic_load_n(&s->cdc_received, __ATOMIC_RELAXED);
		if (poll(&p, 1, 10000) <= 0) {
			rc = failf("poll on the ready fd", errno ? errno : ETIMEDOUT);
			break;
		}
		w->wakes++;
		mask = smcr_sock_poll(s);
		if (!(mask & POLLIN) && __atomic_load_n(&s->cdc_received, __ATOMIC_RELAXED) == cdcs)
			w->empty++;
		if (mask & (POLLIN | POLLERR | POLLHUP))
			break;
	}
	smcr_sock_set_interest(s, 0);
	return rc;
}

static int check_wakes(const struct wake_count *w, int n)
{
	if (!single_conn || n < 50)
		return 0;
	if ((double)w->empty > n * EMPTY_WAKES_PER_PING_MAX) {
		printf("FAIL: server (event loop): %" PRIu64 " of %" PRIu64
		       " wake-ups over %d round trips brought nothing (at most %.2f each)\n",
		       w->empty, w->wakes, n, EMPTY_WAKES_PER_PING_MAX);
		return -1;
	}
	printf("ok: server (event loop): %.2f wake-ups per round trip, %.2f of them empty "
	       "(%" PRIu64 " and %" PRIu64 " over %d)\n",
	       (double)w->wakes / n, (double)w->empty / n, w->wakes, w->empty, n);
	return 0;
}

static int server_traffic(struct smcr_sock *s, uint64_t total)
{
	static _Thread_local uint8_t buf[CHUNK]; /* one per connection thread */
	uint64_t hash = HASH_INIT, bad = 0;
	uint8_t b;

	uint64_t w0 = 0;
	struct wake_count wakes = { 0, 0 };
	int half = pings / 2 > 1 ? pings / 2 : pings; /* blocking recv, then an event loop */

	for (int i = 0; i < pings; i++) {
		if (i >= half && evloop_wait(s, &wakes))
			return -1;
		if (recv_all(s, &b, 1) || send_all(s, &b, 1))
			return -1;
		if (i == 0)
			w0 = waits_slept();
		if (i == half - 1 && pings > 1 && check_waits("server", w0, half - 1))
			return -1;
	}
	if (half < pings && check_wakes(&wakes, pings - half))
		return -1;
	for (uint64_t pos = 0; pos < total;) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		ssize_t n = smcr_sock_recvv(s, &iov, 1, 0);

		if (n <= 0)
			return failf("smcr_sock_recvv", n ? (int)-n : ECONNRESET);
		for (ssize_t i = 0; i < n; i++)
			bad += buf[i] != stream_byte(pos + (uint64_t)i);
		hash = hash_update(hash, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	if (send_all(s, &hash, sizeof(hash)))
		return -1;
	if (bad || total >= (1u << 20))
		printf("%s: engine received %" PRIu64 " bytes, %" PRIu64
	       " differ from the generator\n",
	       bad ? "FAIL" : "ok", total, bad);
	return bad ? -1 : 0;
}

static int run(int fd, bool server, uint64_t total, bool expect_reset)
{
	double t0 = now_us();
	struct smcr_sock *s = server ? server_handshake(fd) : client_handshake(fd);
	int rc;

	if (!s) {
		close(fd);
		return 1;
	}
	printf("ok: CLC handshake and QP set-up took %.1f ms\n", (now_us() - t0) / 1e3);
	smcr_sock_set_timeouts(s, 10000, 10000); /* every blocking call bounded */
	if (server)
		rc = server_traffic(s, total);
	else if (expect_reset)
		rc = client_until_reset(s, total);
	else
		rc = client_traffic(s, total);
	smcr_sock_close(s);
	close(fd);
	return rc ? 1 : 0;
}

/* ------------------------------------------------------- many connections, one group ---- */

struct conn_job {
	pthread_t thread;
	int fd;
	bool server;
	bool expect_reset;
	uint64_t total;
	double handshake_ms;
	struct smcr_xconn_info info;
	int rc;
};

static void *conn_thread(void *arg)
{
	struct conn_job *j = arg;
	double t0 = now_us();
	struct smcr_sock *s = j->server ? server_handshake(j->fd) : client_handshake(j->fd);

	j->rc = 1;
	if (!s) {
		close(j->fd);
		return NULL;
	}
	j->handshake_ms = (now_us() - t0) / 1e3;
	s->ops->info(s->xc, &j->info);
	smcr_sock_set_timeouts(s, 10000, 10000);
	if (j->server)
		j->rc = server_traffic(s, j->total) ? 1 : 0;
	else if (j->expect_reset)
		j->rc = client_until_reset(s, j->total) ? 1 : 0;
	else
		j->rc = client_traffic(s, j->total) ? 1 : 0;
	smcr_sock_close(s);
	close(j->fd);
	return NULL;
}

/*
 * Our lines of `rdma resource show KIND` (-1: the tool failed), echoed with PREFIX:
 * those on our device of a program named verbs_engine. Not "pid N": the kernel records
 * the creating thread's id, and our connection threads are gone by then. In the VM the
 * other end runs on the other device, and the checks run one at a time.
 */
static int rdma_resources(const char *kind, const char *dev, const char *prefix)
{
	char cmd[96], line[512], link[40];
	int n = 0;
	FILE *f;

	if (!dev[0])
		return -1;
	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>&1", kind);
	snprintf(link, sizeof(link), "%s %s/", strcmp(kind, "qp") ? "dev" : "link", dev);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		/*
		 * QPs: every user-space RC QP on our device (the kernel names no dead
		 * thread's program; "comm [smc]" is the kernel's own SMC-R, whose idle
		 * link group from the AF_SMC check lives on for 10 minutes).
		 */
		if (strncmp(line, link, strlen(link) - (strcmp(kind, "qp") ? 1 : 0)) != 0 ||
		    (!strcmp(kind, "qp") && !strstr(line, " type RC ")) || strstr(line, " comm ["))
			continue;
		if (prefix)
			printf("%s%s", prefix, line);
		n++;
	}
	return pclose(f) == 0 ? n : -1;
}

/* After the last connection: the idle group goes, and its QP with it. */
static int check_teardown(const char *who, const char *dev)
{
	double t0 = now_us();

	for (int i = 0; i < 100 && smcr_verbs_lgr_count() > 0; i++)
		usleep(100 * 1000);
	if (smcr_verbs_lgr_count() > 0) {
		printf("FAIL: %s: link group still there %.0f ms after the last connection\n",
		       who, (now_us() - t0) / 1e3);
		return 1;
	}
	if (rdma_resources("qp", dev, NULL) != 0) {
		printf("FAIL: %s: group gone but QPs remain on %s:\n", who, dev);
		rdma_resources("qp", dev, "    ");
		return 1;
	}
	printf("ok: %s: idle link group torn down, no QP left (%.0f ms after the last "
	       "connection)\n",
	       who, (now_us() - t0) / 1e3);
	return 0;
}

/* All jobs on one link group and one QP, as info() reports them. */
static int check_one_group(const char *who, struct conn_job *jobs, int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		if (jobs[i].rc == 0 && (jobs[i].info.link_group != jobs[0].info.link_group ||
					jobs[i].info.qp_num != jobs[0].info.qp_num ||
					jobs[i].info.link_group == 0)) {
			printf("FAIL: %s: connection %d on link group %u QP %u, the first on %u QP %u\n",
			       who, i, jobs[i].info.link_group, jobs[i].info.qp_num,
			       jobs[0].info.link_group, jobs[0].info.qp_num);
			bad++;
		}
	}
	if (!bad)
		printf("ok: %s: all %d connections on link group %u, QP %u (%s)\n", who, n,
		       jobs[0].info.link_group, jobs[0].info.qp_num, jobs[0].info.device);
	return bad ? 1 : 0;
}

static int run_jobs(struct conn_job *jobs, int from, int to)
{
	int failed = 0;

	for (int i = from; i < to; i++) {
		if (pthread_create(&jobs[i].thread, NULL, conn_thread, &jobs[i])) {
			printf("FAIL: pthread_create\n");
			return 1;
		}
	}
	for (int i = from; i < to; i++) {
		pthread_join(jobs[i].thread, NULL);
		if (jobs[i].rc) {
			printf("FAIL: connection %d\n", i);
			failed++;
		}
	}
	return failed;
}

static int many_server(int lfd, int conns, uint64_t total)
{
	struct conn_job *jobs = calloc((size_t)conns, sizeof(*jobs));
	const char *ef = getenv("VERBS_EXPECT_FAILURES");
	int failed = 0, started = 0, expect_fail = ef ? atoi(ef) : 0;

	quiet = conns > 1;
	for (int i = 0; i < conns; i++) {
		jobs[i].fd = accept(lfd, NULL, NULL);
		if (jobs[i].fd < 0)
			return failf("accept", errno), 1;
		jobs[i].server = true;
		jobs[i].total = total;
		if (pthread_create(&jobs[i].thread, NULL, conn_thread, &jobs[i]))
			return failf("pthread_create", errno), 1;
		started++;
		if (i == 2) /* the first two connections ran, the second may be running */
			rdma_resources("mr", "rxe1", "server mr: ");
	}
	close(lfd);
	for (int i = 0; i < started; i++) {
		pthread_join(jobs[i].thread, NULL);
		failed += jobs[i].rc != 0;
	}
	if (expect_fail) {
		int bad = failed != expect_fail;

		for (int i = 0; i < conns; i++)
			for (int k = 0; k < conns; k++)
				bad += i != k && jobs[i].rc && jobs[i].info.link_group &&
				       jobs[i].info.link_group == jobs[k].info.link_group;
		printf("%s: server: %d of %d connections failed (want %d), each on a link group "
		       "of its own\n", bad ? "FAIL" : "ok", failed, conns, expect_fail);
		for (int i = 0; i < conns; i++)
			printf("    connection %d: %s on link group %u\n", i,
			       jobs[i].rc ? "failed" : "ok", jobs[i].info.link_group);
		failed = bad;
	} else {
		printf("%s: server: %d of %d connections failed\n", failed ? "FAIL" : "ok", failed,
		       conns);
	}
	failed += check_one_group("server", jobs, conns);
	failed += check_teardown("server", jobs[0].info.device);
	free(jobs);
	return failed ? 1 : 0;
}

static int many_clients(const struct sockaddr_storage *a, socklen_t alen,
			const struct sockaddr_storage *b, socklen_t blen, uint64_t total, int conns,
			int parallel, bool expect_reset)
{
	struct conn_job *jobs = calloc((size_t)conns, sizeof(*jobs));
	double reuse_ms = 0, t0;
	int failed = 0, qps;

	quiet = conns > 1;
	for (int i = 0; i < conns; i++) {
		jobs[i].fd = socket(a->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		jobs[i].total = total;
		jobs[i].expect_reset = expect_reset;
		if (jobs[i].fd < 0 || bind(jobs[i].fd, (const struct sockaddr *)b, blen))
			return failf("socket", errno), 1;
	}
	t0 = now_us();
	if (expect_reset) {
		/* the first makes the group, then all stream until the script breaks the link */
		for (int i = 0; i < conns; i++) {
			if (connect(jobs[i].fd, (const struct sockaddr *)a, alen) ||
			    pthread_create(&jobs[i].thread, NULL, conn_thread, &jobs[i]))
				return failf("connect", errno), 1;
			for (int w = 0; i == 0 && w < 500 && jobs[0].handshake_ms == 0; w++)
				usleep(10 * 1000);
		}
		for (int i = 0; i < conns; i++) {
			pthread_join(jobs[i].thread, NULL);
			failed += jobs[i].rc != 0;
		}
		printf("%s: %d connections of one link group reset (%d did not)\n",
		       failed ? "FAIL" : "ok", conns - failed, failed);
		failed += check_one_group("client", jobs, conns);
		return failed ? 1 : 0;
	}
	for (int i = 0; i < conns; i += i == 0 ? 1 : parallel) {
		int to = i == 0 ? 1 : (i + parallel < conns ? i + parallel : conns);

		for (int k = i; k < to; k++) {
			if (connect(jobs[k].fd, (const struct sockaddr *)a, alen))
				return failf("connect", errno), 1;
		}
		failed += run_jobs(jobs, i, to);
		if (i == 1 && parallel == 1) {
			/*
			 * Two connections came and went one after the other: the group's
			 * two message-slot regions plus one RMB and one send buffer in
			 * its pool (the second connection reused the first one's).
			 */
			int mrs = rdma_resources("mr", jobs[0].info.device, "client mr: ");

			if (mrs != 4) {
				printf("FAIL: client: %d memory regions after 2 sequential connections, "
				       "want 4 (2 slot arrays, 1 RMB, 1 send buffer)\n", mrs);
				failed++;
			} else {
				printf("ok: client: 4 memory regions after 2 sequential connections "
				       "(slots, 1 RMB, 1 send buffer: reused, not registered again)\n");
			}
		}
		if (failed)
			break;
	}
	printf("%s: client: %d connections (%d at a time) in %.2f s, %d failed\n",
	       failed ? "FAIL" : "ok", conns, parallel, (now_us() - t0) / 1e6, failed);
	if (failed)
		return 1;
	for (int i = 1; i < conns; i++)
		reuse_ms += jobs[i].handshake_ms;
	if (conns > 1)
		printf("ok: handshake (CLC + QP/buffers): first contact %.1f ms, reuse mean %.1f ms\n",
		       jobs[0].handshake_ms, reuse_ms / (conns - 1));
	failed += check_one_group("client", jobs, conns);
	qps = rdma_resources("qp", jobs[0].info.device, "client qp: ");
	if (qps != 1) {
		printf("FAIL: client: `rdma resource show qp` lists %d QPs of ours, want 1\n", qps);
		failed++;
	} else {
		printf("ok: client: the kernel lists exactly one QP of this process\n");
	}
	failed += check_teardown("client", jobs[0].info.device);
	free(jobs);
	return failed ? 1 : 0;
}

/* ------------------------------------------------------------------ rogue peer ---- */

static int rogue(int fd, bool do_read)
{
	struct smcr_sock *s = client_handshake(fd);
	struct smcr_lgr *g;
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	uint64_t addr;
	uint32_t rkey, size;
	static uint8_t sink[4096] __attribute__((aligned(4096)));
	const char *err = "";

	if (!s)
		return 1;
	g = smcr_verbs_lgr(s->xc);
	smcr_verbs_peer_rmb(s->xc, &addr, &rkey, &size);
	/* the server's QP is ready once its CONFIRM LINK came */
	if (smcr_lgr_await_active(g, 5000))
		return failf("CONFIRM LINK", ETIMEDOUT), 1;
	mr = smcr_ib_reg_sink(g->port, sink, sizeof(sink));
	if (!mr)
		return failf("registering the sink", errno), 1;
	sge = (struct ibv_sge){ .addr = (uintptr_t)sink, .length = 64, .lkey = mr->lkey };
	wr = (struct ibv_send_wr){
		.wr_id = 1ull << 62,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = do_read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		/* READ: the RMB itself; WRITE: the 64 bytes right after its end */
		.wr.rdma = { .remote_addr = do_read ? addr : addr + size, .rkey = rkey },
	};
	printf("rogue: RDMA %s of 64 bytes at the RMB's %s (rkey %#x, RMB %u bytes)\n",
	       do_read ? "READ" : "WRITE", do_read ? "start" : "end", rkey, size);
	pthread_mutex_lock(&g->mu);
	if (ibv_post_send(smcr_wr_qp(g->link), &wr, &bad)) {
		pthread_mutex_unlock(&g->mu);
		return failf("ibv_post_send", errno), 1;
	}
	pthread_mutex_unlock(&g->mu);
	for (int i = 0; i < 500 && !smcr_lgr_dead(g); i++)
		usleep(10 * 1000);
	pthread_mutex_lock(&g->mu);
	err = smcr_wr_link_error(g->link);
	pthread_mutex_unlock(&g->mu);
	/*
	 * READ: our QPs do not even allow remote reads (qp_access_flags), so rxe refuses
	 * it as an invalid request before it looks at the region; the region refuses it
	 * too (mr_access_probe shows that with a READ-capable QP).
	 */
	if (!strstr(err, "remote access error") &&
	    !(do_read && strstr(err, "remote invalid request error"))) {
		printf("FAIL: rogue %s: the link says '%s', want a remote access error\n",
		       do_read ? "READ" : "WRITE", err);
		return 1;
	}
	printf("ok: rogue %s refused by the server's NIC: %s\n", do_read ? "READ" : "WRITE", err);
	smcr_sock_close(s);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage a, b;
	socklen_t alen, blen;
	int fd, one = 1;
	const char *idle = getenv("VERBS_IDLE_MS");

	setvbuf(stdout, NULL, _IOLBF, 0);
	smcr_real_bind();
	smcr_verbs_set_lgr_idle_ms(idle ? atoi(idle) : 3000);
	alarm(RUN_LIMIT_S);
	if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "server")) {
		int lfd, conns = argc >= 6 ? atoi(argv[5]) : 1;

		if (argc == 7)
			pings = atoi(argv[6]);
		if (resolve(argv[2], argv[3], &a, &alen))
			return 1;
		lfd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0 ||
		    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    bind(lfd, (struct sockaddr *)&a, alen) || listen(lfd, 64))
			return failf("listen", errno), 1;
		printf("listening on %s port %s\n", argv[2], argv[3]);
		if (argc >= 6)
			return many_server(lfd, conns, strtoull(argv[4], NULL, 0));
		fd = accept(lfd, NULL, NULL);
		close(lfd);
		if (fd < 0)
			return failf("accept", errno), 1;
		single_conn = true;
		return run(fd, true, strtoull(argv[4], NULL, 0), false);
	}
	if ((argc == 9 || (argc == 10 && !strcmp(argv[9], "expect-reset"))) &&
	    !strcmp(argv[1], "clients")) {
		if (resolve(argv[2], argv[3], &a, &alen) || resolve(argv[4], "0", &b, &blen))
			return 1;
		pings = atoi(argv[8]);
		return many_clients(&a, alen, &b, blen, strtoull(argv[5], NULL, 0), atoi(argv[6]),
				    atoi(argv[7]) > 0 ? atoi(argv[7]) : 1, argc == 10);
	}
	if (argc == 6 && !strcmp(argv[1], "rogue")) {
		if (resolve(argv[2], argv[3], &a, &alen) || resolve(argv[4], "0", &b, &blen))
			return 1;
		fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&b, blen) ||
		    connect(fd, (struct sockaddr *)&a, alen))
			return failf("connect", errno), 1;
		return rogue(fd, !strcmp(argv[5], "read"));
	}
	if ((argc == 6 || (argc == 7 && !strcmp(argv[6], "expect-reset"))) &&
	    !strcmp(argv[1], "client")) {
		if (resolve(argv[2], argv[3], &a, &alen) ||
		    resolve(argv[4], "0", &b, &blen))
			return 1;
		fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&b, blen) ||
		    connect(fd, (struct sockaddr *)&a, alen))
			return failf("connect", errno), 1;
		single_conn = true;
		return run(fd, false, strtoull(argv[5], NULL, 0), argc == 7);
	}
	fprintf(stderr, "usage: verbs_engine server LOCAL_ADDR PORT BYTES [CONNS [PINGS]]\n"
			"       verbs_engine client SERVER_ADDR PORT LOCAL_ADDR BYTES "
			"[expect-reset]\n"
			"       verbs_engine clients SERVER_ADDR PORT LOCAL_ADDR BYTES CONNS "
			"PARALLEL PINGS [expect-reset]\n"
			"       verbs_engine rogue SERVER_ADDR PORT LOCAL_ADDR read|write\n");
	return 2;
}
