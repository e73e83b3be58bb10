// SPDX-License-Identifier: MIT
/*
 * verbs_engine: the smcr engine's data path (CDC, cursors, flow control, close) running
 * over the verbs transport (src/smcr/verbs.c) between the two "hosts" of scripts/rxe-vm.
 *
 *   verbs_engine server LOCAL_ADDR PORT BYTES
 *   verbs_engine client SERVER_ADDR PORT LOCAL_ADDR BYTES [expect-reset]
 *
 * The engine's own handshake (conn.c) still picks the shm transport, so this program runs
 * the CLC flow itself, exactly as conn.c does but with smcr_verbs_ops: Proposal, Accept,
 * Confirm encoded by the engine's CLC codec over the TCP connection, the transport's
 * hooks in between. Then it hands the transport to smcr_conn_new() and uses the engine's
 * socket API: PINGS 1-byte round trips, BYTES client -> server with every byte checked,
 * the server's stream hash sent back, both sides closed through the engine.
 * With expect-reset the client streams until the connection breaks (the calling script
 * kills the server or deletes its RDMA device) and passes if that ends in ECONNRESET or
 * EPIPE. Prints "ok: ..." / "FAIL: ..." and numbers; exit 0 only if everything held.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
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
#include "smcr/verbs.h"
#include "smcr/wire.h"

#define PINGS	    200
#define CLC_WAIT_MS 5000
#define RUN_LIMIT_S 120
#define CHUNK	    (64u << 10)
#define RING_SIZE   (256u << 10)
#define HASH_INIT   0xcbf29ce484222325ull

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

/* conn.c's client flow with smcr_verbs_ops. */
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
	printf("ok: client handshake done (peer ring %u bytes)\n", peer_size);
	return smcr_conn_new(fd, false, ops, xc, peer_size, 0);
fail:
	if (xc)
		ops->destroy(xc, false);
	return NULL;
}

/* conn.c's server flow with smcr_verbs_ops. */
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
	rc = ops->server_attach(xc, fd, &peer_size);
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
		ssize_t n = smcr_sock_recv(s, p, len, 0);

		if (n <= 0)
			return failf("smcr_sock_recv", n ? (int)-n : ECONNRESET);
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
	static uint8_t buf[CHUNK];
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
	static uint8_t buf[CHUNK];
	uint64_t hash = HASH_INIT, peer_hash = 0;
	double t0, secs, first = 0;
	uint8_t b = 0;

	t0 = now_us();
	for (int i = 0; i < PINGS; i++) {
		if (send_all(s, &b, 1) || recv_all(s, &b, 1))
			return -1;
		if (i == 0)
			first = now_us() - t0; /* includes waiting for CONFIRM LINK */
		b++;
	}
	printf(
	    "ok: %d engine round trips of 1 byte (WRITE + CDC each way): first %.0f us, "
	    "mean %.0f us\n",
	    PINGS, first, (now_us() - t0) / PINGS);
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
	printf("ok: engine sent %" PRIu64 " bytes in %.2f s = %.1f MB/s\n", total, secs,
	       (double)total / secs / 1e6);
	if (peer_hash != hash) {
		printf("FAIL: server's hash %016" PRIx64 " != ours %016" PRIx64 "\n",
		       peer_hash, hash);
		return -1;
	}
	printf("ok: server's stream hash equals ours (%016" PRIx64 ")\n", hash);
	return 0;
}

static int server_traffic(struct smcr_sock *s, uint64_t total)
{
	static uint8_t buf[CHUNK];
	uint64_t hash = HASH_INIT, bad = 0;
	uint8_t b;

	for (int i = 0; i < PINGS; i++) {
		if (recv_all(s, &b, 1) || send_all(s, &b, 1))
			return -1;
	}
	for (uint64_t pos = 0; pos < total;) {
		ssize_t n = smcr_sock_recv(s, buf, sizeof(buf), 0);

		if (n <= 0)
			return failf("smcr_sock_recv", n ? (int)-n : ECONNRESET);
		for (ssize_t i = 0; i < n; i++)
			bad += buf[i] != stream_byte(pos + (uint64_t)i);
		hash = hash_update(hash, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	if (send_all(s, &hash, sizeof(hash)))
		return -1;
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

int main(int argc, char **argv)
{
	struct sockaddr_storage a, b;
	socklen_t alen, blen;
	int fd, one = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	smcr_real_bind();
	alarm(RUN_LIMIT_S);
	if (argc == 5 && !strcmp(argv[1], "server")) {
		int lfd;

		if (resolve(argv[2], argv[3], &a, &alen))
			return 1;
		lfd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0 ||
		    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    bind(lfd, (struct sockaddr *)&a, alen) || listen(lfd, 1))
			return failf("listen", errno), 1;
		printf("listening on %s port %s\n", argv[2], argv[3]);
		fd = accept(lfd, NULL, NULL);
		close(lfd);
		if (fd < 0)
			return failf("accept", errno), 1;
		return run(fd, true, strtoull(argv[4], NULL, 0), false);
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
		return run(fd, false, strtoull(argv[5], NULL, 0), argc == 7);
	}
	fprintf(stderr, "usage: verbs_engine server LOCAL_ADDR PORT BYTES\n"
			"       verbs_engine client SERVER_ADDR PORT LOCAL_ADDR BYTES "
			"[expect-reset]\n");
	return 2;
}
