// SPDX-License-Identifier: MIT
/*
 * verbs_stream: two SMC-R-style endpoints built on src/smcr/ib.c and wr.c, one per
 * "host" of scripts/rxe-vm, moving a byte stream by RDMA WRITE into the peer's RMB plus
 * 44-byte CDC-like SENDs, the way the verbs transport will.
 *
 *   verbs_stream server LOCAL_ADDR PORT BYTES RING_SIZE
 *   verbs_stream client SERVER_ADDR PORT LOCAL_ADDR BYTES RING_SIZE [rogue]
 *
 * 1. The client connects a plain TCP socket from LOCAL_ADDR; each side finds its RDMA
 *    port and RoCE v2 GID from the socket's local address (smcr_ib_port_open), creates
 *    its link (CQ + completion channel + RC QP) and an RMB registered remote-write-only,
 *    and both exchange QP number, PSN, GID, MAC, MTU, RMB address, rkey and size over the
 *    TCP connection (as CLC Accept/Confirm would), then bring their QPs to RTS.
 * 2. Latency: PINGS round trips of a 44-byte SEND and its answer, every wait through the
 *    completion channel (no busy polling).
 * 3. Stream: BYTES from client to server through the server's RMB of RING_SIZE bytes.
 *    The client writes chunks of CHUNK bytes (not a divisor of the ring, so writes wrap
 *    and go out as two WRITEs) from a send buffer that mirrors the peer's RMB, then a
 *    CDC-like message with its producer cursor; the server checks every byte against
 *    the generator, hashes the stream and returns consumer cursors. At the end both
 *    compare hashes.
 * 4. rogue (client only, instead of 2 and 3): one RDMA WRITE just past the end of the
 *    server's RMB; the server's NIC must refuse it (remote access error).
 * Prints "ok: ..." / "FAIL: ..." lines and numbers; exit 0 only if everything held.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/real.h"
#include "smcr/ib.h"
#include "smcr/wr.h"

#define PINGS	    500
#define CHUNK	    60000u
#define WAIT_MS	    10000
#define RUN_LIMIT_S 120
#define INFO_MAGIC  0x534d5651u /* "SMVQ" */

enum msg_kind {
	MSG_CDC = 0xfe, /* producer cursor (client) or consumer cursor (server) */
	MSG_PING = 0x70,
	MSG_PONG = 0x71,
	MSG_DONE = 0x7f, /* end of stream: cursor and stream hash */
};

/* Both 64-bit fields big endian at fixed offsets of the 44-byte message. */
struct msg {
	uint8_t kind;
	uint64_t cursor;
	uint64_t hash;
};

static void msg_encode(const struct msg *m, uint8_t out[SMCR_WR_MSG_LEN])
{
	uint64_t c = htobe64(m->cursor), h = htobe64(m->hash);

	memset(out, 0, SMCR_WR_MSG_LEN);
	out[0] = m->kind;
	out[1] = SMCR_WR_MSG_LEN;
	memcpy(out + 8, &c, 8);
	memcpy(out + 16, &h, 8);
}

static void msg_decode(const uint8_t in[SMCR_WR_MSG_LEN], struct msg *m)
{
	uint64_t c, h;

	memcpy(&c, in + 8, 8);
	memcpy(&h, in + 16, 8);
	m->kind = in[0];
	m->cursor = be64toh(c);
	m->hash = be64toh(h);
}

/* What CLC would carry for one side, big endian on the TCP connection. */
struct info_wire {
	uint32_t magic;
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t rmb_addr;
	uint32_t rmb_size;
	uint8_t mtu;
	uint8_t mac[SMCR_IB_MAC_LEN];
	uint8_t gid[SMCR_IB_GID_LEN];
} __attribute__((packed));

struct endpoint {
	int tcp;
	struct smcr_ib_port *port;
	struct smcr_wr_link *link;
	uint8_t *rmb;
	uint32_t rmb_size;
	struct ibv_mr *rmb_mr;
	uint64_t rmb_iova;
	uint8_t *sndbuf; /* mirrors the peer's RMB */
	struct ibv_mr *snd_mr;
	struct smcr_wr_remote_rmb peer_rmb;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int failf(const char *what, int err)
{
	printf("FAIL: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return -1;
}

/* The stream's byte at position i: anyone can compute it, so the receiver checks all. */
static uint64_t word_at(uint64_t k)
{
	uint64_t z = k * 0x9e3779b97f4a7c15ull + 0x5bd1e995ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void stream_fill(uint8_t *dst, uint64_t pos, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		dst[i] = (uint8_t)(word_at((pos + i) >> 3) >> (((pos + i) & 7) * 8));
}

/* FNV-1a over the stream, byte by byte, so chunking cannot change it. */
static uint64_t hash_update(uint64_t h, const uint8_t *p, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}
#define HASH_INIT 0xcbf29ce484222325ull

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

static int full_io(int fd, void *buf, size_t len, bool write_it)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = write_it ? write(fd, p, len) : read(fd, p, len);

		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Device, link and RMB for the TCP connection's local address. */
static int endpoint_open(struct endpoint *ep, uint32_t rmb_size)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	int rc;

	if (getsockname(ep->tcp, (struct sockaddr *)&local, &len) < 0)
		return failf("getsockname", errno);
	rc = smcr_ib_port_open((struct sockaddr *)&local, &ep->port);
	if (rc)
		return failf("no RDMA port with a RoCE v2 GID for the local address", rc);
	printf("ok: local address is on %s port %u, GID index %u, MTU %d\n",
	       ep->port->name, ep->port->port_num, ep->port->gid_index,
	       128 << ep->port->active_mtu);
	/* Whoever services a link group reads its async events under the group mutex. */
	if (!(fcntl(ep->port->ctx->async_fd, F_GETFL) & O_NONBLOCK))
		return failf("the port's async event fd blocks (a read would hold the group)", EINVAL);
	rc = smcr_wr_link_create(ep->port, &ep->link);
	if (rc)
		return failf("link create", rc);
	ep->rmb_size = rmb_size;
	ep->rmb = aligned_alloc(4096, rmb_size);
	if (!ep->rmb)
		return failf("RMB", ENOMEM);
	memset(ep->rmb, 0, rmb_size);
	ep->rmb_mr = smcr_ib_reg_rmb(ep->port, ep->rmb, rmb_size, &ep->rmb_iova);
	if (!ep->rmb_mr)
		return failf("register RMB", errno);
	return 0;
}

/* Trade link and RMB descriptions over TCP, bring the QP up, agree that both are. */
static int endpoint_connect(struct endpoint *ep)
{
	struct smcr_ib_qp_info own, peer;
	struct info_wire out = {0}, in;
	uint8_t ready = 1;
	int rc;

	smcr_wr_link_info(ep->link, &own);
	out.magic = htobe32(INFO_MAGIC);
	out.qpn = htobe32(own.qpn);
	out.psn = htobe32(own.psn);
	out.rkey = htobe32(ep->rmb_mr->rkey);
	out.rmb_addr = htobe64(ep->rmb_iova); /* a random IOVA, not our address */
	out.rmb_size = htobe32(ep->rmb_size);
	out.mtu = own.mtu;
	memcpy(out.mac, own.mac, sizeof(out.mac));
	memcpy(out.gid, own.gid, sizeof(out.gid));
	rc = full_io(ep->tcp, &out, sizeof(out), true);
	if (!rc)
		rc = full_io(ep->tcp, &in, sizeof(in), false);
	if (rc)
		return failf("exchanging QP info over TCP", rc);
	if (be32toh(in.magic) != INFO_MAGIC)
		return failf("peer info", EPROTO);
	memset(&peer, 0, sizeof(peer));
	peer.qpn = be32toh(in.qpn);
	peer.psn = be32toh(in.psn);
	peer.mtu = in.mtu;
	memcpy(peer.mac, in.mac, sizeof(peer.mac));
	memcpy(peer.gid, in.gid, sizeof(peer.gid));
	ep->peer_rmb.addr = be64toh(in.rmb_addr);
	ep->peer_rmb.rkey = be32toh(in.rkey);
	ep->peer_rmb.size = be32toh(in.rmb_size);
	ep->sndbuf = aligned_alloc(4096, ep->peer_rmb.size);
	if (!ep->sndbuf)
		return failf("send buffer", ENOMEM);
	ep->snd_mr = smcr_ib_reg_source(ep->port, ep->sndbuf, ep->peer_rmb.size);
	if (!ep->snd_mr)
		return failf("register send buffer", errno);
	rc = smcr_wr_link_connect(ep->link, &peer);
	if (rc)
		return failf("QP to RTS", rc);
	/* the peer's QP must be in RTR before our first SEND (CONFIRM LINK's job in SMC)
	 */
	rc = full_io(ep->tcp, &ready, 1, true);
	if (!rc)
		rc = full_io(ep->tcp, &ready, 1, false);
	if (rc)
		return failf("ready handshake", rc);
	printf("ok: QP %u (PSN %u) connected to peer QP %u, peer RMB %u bytes\n", own.qpn,
	       own.psn, peer.qpn, ep->peer_rmb.size);
	return 0;
}

static void endpoint_close(struct endpoint *ep)
{
	smcr_wr_link_destroy(ep->link);
	if (ep->rmb_mr)
		ibv_dereg_mr(ep->rmb_mr);
	if (ep->snd_mr)
		ibv_dereg_mr(ep->snd_mr);
	smcr_ib_port_close(ep->port);
	free(ep->rmb);
	free(ep->sndbuf);
	if (ep->tcp >= 0)
		close(ep->tcp);
}

static int send_msg(struct endpoint *ep, enum msg_kind kind, uint64_t cursor,
		    uint64_t hash)
{
	struct msg m = {.kind = (uint8_t)kind, .cursor = cursor, .hash = hash};
	uint8_t raw[SMCR_WR_MSG_LEN];
	int rc;

	msg_encode(&m, raw);
	rc = smcr_wr_send_msg(ep->link, raw, WAIT_MS);
	return rc ? failf("send message", rc) : 0;
}

/* Next message, waiting at most WAIT_MS: 0 or -1. */
static int next_msg(struct endpoint *ep, struct msg *m)
{
	uint8_t raw[SMCR_WR_MSG_LEN];

	for (;;) {
		int rc = smcr_wr_recv_msg(ep->link, raw);

		if (rc == 1) {
			msg_decode(raw, m);
			return 0;
		}
		if (rc < 0) {
			printf("FAIL: link failed: %s\n", smcr_wr_link_error(ep->link));
			return -1;
		}
		rc = smcr_wr_wait_msg(ep->link, WAIT_MS);
		if (rc == 0) {
			printf("FAIL: no message within %d ms\n", WAIT_MS);
			return -1;
		}
		if (rc < 0)
			return failf("waiting for a message", rc);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ----------------------------------------------------------------------- client ---- */

static int client_pings(struct endpoint *ep)
{
	static double rtt[PINGS];
	struct msg m;
	double sum = 0;

	for (int i = 0; i < PINGS; i++) {
		double t0 = now_us();

		if (send_msg(ep, MSG_PING, (uint64_t)i, 0) || next_msg(ep, &m))
			return -1;
		if (m.kind != MSG_PONG || m.cursor != (uint64_t)i) {
			printf("FAIL: ping %d answered by kind 0x%02x cursor %" PRIu64
			       "\n",
			       i, m.kind, m.cursor);
			return -1;
		}
		rtt[i] = now_us() - t0;
		sum += rtt[i];
	}
	qsort(rtt, PINGS, sizeof(rtt[0]), cmp_double);
	printf("ok: %d round trips of a 44-byte SEND: min %.0f us, median %.0f us, "
	       "mean %.0f us, p99 %.0f us\n",
	       PINGS, rtt[0], rtt[PINGS / 2], sum / PINGS, rtt[PINGS * 99 / 100]);
	return 0;
}

/* Take every pending message; the newest consumer cursor wins. */
static int client_take_acks(struct endpoint *ep, uint64_t prod, uint64_t *peer_cons)
{
	uint8_t raw[SMCR_WR_MSG_LEN];
	struct msg m;
	int rc;

	while ((rc = smcr_wr_recv_msg(ep->link, raw)) == 1) {
		msg_decode(raw, &m);
		if (m.kind != MSG_CDC || m.cursor < *peer_cons || m.cursor > prod) {
			printf("FAIL: bad consumer update (kind 0x%02x, %" PRIu64 ")\n",
			       m.kind, m.cursor);
			return -1;
		}
		*peer_cons = m.cursor;
	}
	if (rc < 0) {
		printf("FAIL: link failed: %s\n", smcr_wr_link_error(ep->link));
		return -1;
	}
	return 0;
}

static int client_stream(struct endpoint *ep, uint64_t total)
{
	const uint32_t ring = ep->peer_rmb.size;
	uint64_t prod = 0, peer_cons = 0, hash = HASH_INIT;
	struct smcr_wr_stats st;
	struct msg m;
	double t0 = now_us(), secs;
	int rc;

	while (prod < total) {
		uint64_t space = ring - (prod - peer_cons);
		uint32_t off = (uint32_t)(prod % ring), len, first;

		if (client_take_acks(ep, prod, &peer_cons))
			return -1;
		space = ring - (prod - peer_cons);
		if (space == 0) {
			rc = smcr_wr_wait_msg(ep->link, WAIT_MS);
			if (rc <= 0)
				return failf("waiting for the consumer",
					     rc ? rc : ETIMEDOUT);
			continue;
		}
		len = (uint32_t)(space < CHUNK ? space : CHUNK);
		if (total - prod < len)
			len = (uint32_t)(total - prod);
		/* the send buffer mirrors the peer's ring: fill it where the bytes will
		 * land */
		first = len < ring - off ? len : ring - off;
		stream_fill(ep->sndbuf + off, prod, first);
		stream_fill(ep->sndbuf, prod + first, len - first);
		hash = hash_update(hash, ep->sndbuf + off, first);
		hash = hash_update(hash, ep->sndbuf, len - first);
		rc = smcr_wr_write_mirrored(ep->link, ep->snd_mr, &ep->peer_rmb, off, len,
					    WAIT_MS);
		if (rc)
			return failf("RDMA WRITE", rc);
		prod += len;
		if (send_msg(ep, MSG_CDC, prod, 0))
			return -1;
	}
	if (send_msg(ep, MSG_DONE, prod, hash))
		return -1;
	do {
		if (next_msg(ep, &m))
			return -1;
	} while (m.kind == MSG_CDC);
	secs = (now_us() - t0) / 1e6;
	smcr_wr_link_stats(ep->link, &st);
	printf("ok: sent %" PRIu64 " bytes in %.2f s = %.1f MB/s (%" PRIu64
	       " WRITEs, %" PRIu64 " wrapped, %" PRIu64 " messages, %" PRIu64
	       " send waits)\n",
	       prod, secs, (double)prod / secs / 1e6, st.writes, st.wrapped, st.msgs_sent,
	       st.send_waits);
	if (m.kind != MSG_DONE || m.cursor != total || m.hash != hash) {
		printf("FAIL: receiver reports %" PRIu64 " bytes, hash %016" PRIx64
		       "; sent %" PRIu64 ", hash %016" PRIx64 "\n",
		       m.cursor, m.hash, total, hash);
		return -1;
	}
	printf("ok: receiver's stream hash equals the sender's (%016" PRIx64 ")\n", hash);
	if (st.wrapped == 0 && total > ring) {
		printf("FAIL: no write wrapped around the ring\n");
		return -1;
	}
	return 0;
}

/*
 * rogue mode: behave like a peer that writes outside the RMB it was given (one page
 * just past its end, with a made-up ring size). The server's NIC must refuse it with a
 * remote access error, which also ends the link on both sides.
 */
static int client_rogue(struct endpoint *ep)
{
	struct smcr_wr_remote_rmb fake = ep->peer_rmb;
	uint8_t raw[SMCR_WR_MSG_LEN];
	int rc;

	fake.size *= 2;
	rc = smcr_wr_write_ring(ep->link, ep->snd_mr, ep->sndbuf, &fake,
				ep->peer_rmb.size, 4096, WAIT_MS);
	if (rc)
		return failf("posting the rogue WRITE", rc);
	if (send_msg(ep, MSG_PING, 0, 0))
		return -1;
	/* the link is expected to fail: wait for that, not through next_msg() */
	rc = smcr_wr_wait_msg(ep->link, WAIT_MS);
	if (rc > 0 && smcr_wr_recv_msg(ep->link, raw) == 1) {
		printf("FAIL: the peer answered after an out-of-bounds WRITE\n");
		return -1;
	}
	if (!strstr(smcr_wr_link_error(ep->link), "remote access error")) {
		printf("FAIL: expected a remote access error, link says '%s'\n",
		       smcr_wr_link_error(ep->link));
		return -1;
	}
	printf("ok: the NIC refused a WRITE just past the peer's RMB: %s\n",
	       smcr_wr_link_error(ep->link));
	return 0;
}

static int client(const char *server, const char *port, const char *local_addr,
		  uint64_t total, uint32_t ring, bool rogue)
{
	struct sockaddr_storage dst, src;
	socklen_t dlen, slen;
	struct endpoint ep = {.tcp = -1};
	int rc = 1;

	if (resolve(server, port, &dst, &dlen) || resolve(local_addr, "0", &src, &slen))
		return 1;
	ep.tcp = socket(dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ep.tcp < 0 || bind(ep.tcp, (struct sockaddr *)&src, slen) < 0 ||
	    connect(ep.tcp, (struct sockaddr *)&dst, dlen) < 0) {
		failf("TCP connect", errno);
		goto out;
	}
	if (endpoint_open(&ep, ring) || endpoint_connect(&ep))
		goto out;
	if (rogue ? client_rogue(&ep) : client_pings(&ep) || client_stream(&ep, total))
		goto out;
	rc = 0;
out:
	endpoint_close(&ep);
	return rc;
}

/* ----------------------------------------------------------------------- server ---- */

/* Consume [cons, prod) from the RMB: compare with the generator, hash it. */
static uint64_t server_consume(struct endpoint *ep, uint64_t cons, uint64_t prod,
			       uint64_t hash, uint64_t *bad)
{
	static uint8_t expect[CHUNK];

	while (cons < prod) {
		uint32_t off = (uint32_t)(cons % ep->rmb_size);
		uint64_t n = prod - cons;

		if (n > ep->rmb_size - off)
			n = ep->rmb_size - off;
		if (n > CHUNK)
			n = CHUNK;
		stream_fill(expect, cons, (uint32_t)n);
		for (uint64_t i = 0; i < n; i++)
			*bad += expect[i] != ep->rmb[off + i];
		hash = hash_update(hash, ep->rmb + off, (uint32_t)n);
		cons += n;
	}
	return hash;
}

static int server_loop(struct endpoint *ep, uint64_t total)
{
	uint64_t cons = 0, hash = HASH_INIT, bad = 0, pings = 0;
	struct msg m;
	int rc;

	for (;;) {
		if (next_msg(ep, &m))
			return -1;
		switch (m.kind) {
		case MSG_PING:
			pings++;
			if (send_msg(ep, MSG_PONG, m.cursor, 0))
				return -1;
			break;
		case MSG_CDC:
			/* validate like a CDC: monotonic, never more than the ring holds
			 */
			if (m.cursor < cons || m.cursor - cons > ep->rmb_size ||
			    m.cursor > total) {
				printf("FAIL: bad producer cursor %" PRIu64
				       " (consumed %" PRIu64 ")\n",
				       m.cursor, cons);
				return -1;
			}
			hash = server_consume(ep, cons, m.cursor, hash, &bad);
			cons = m.cursor;
			if (send_msg(ep, MSG_CDC, cons, 0))
				return -1;
			break;
		case MSG_DONE:
			if (send_msg(ep, MSG_DONE, cons, hash))
				return -1;
			/* destroying the link would flush our answer unsent */
			rc = smcr_wr_flush(ep->link, WAIT_MS);
			if (rc)
				return failf("flushing the last message", rc);
			printf("%s: received %" PRIu64 " of %" PRIu64 " bytes, %" PRIu64
			       " differ from the generator, hash %016" PRIx64 ", %" PRIu64
			       " pings answered\n",
			       cons == total && !bad && m.hash == hash ? "ok" : "FAIL",
			       cons, total, bad, hash, pings);
			return cons == total && !bad && m.hash == hash ? 0 : -1;
		default:
			printf("FAIL: unknown message kind 0x%02x\n", m.kind);
			return -1;
		}
	}
}

static int server(const char *local_addr, const char *port, uint64_t total, uint32_t ring)
{
	struct sockaddr_storage addr;
	socklen_t len;
	struct endpoint ep = {.tcp = -1};
	int lfd, one = 1, rc = 1;

	if (resolve(local_addr, port, &addr, &len))
		return 1;
	lfd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&addr, len) < 0 || listen(lfd, 1) < 0) {
		failf("TCP listen", errno);
		return 1;
	}
	printf("listening on %s port %s\n", local_addr, port);
	fflush(stdout);
	ep.tcp = accept(lfd, NULL, NULL);
	close(lfd);
	if (ep.tcp < 0) {
		failf("accept", errno);
		return 1;
	}
	if (endpoint_open(&ep, ring) || endpoint_connect(&ep) || server_loop(&ep, total))
		goto out;
	rc = 0;
out:
	endpoint_close(&ep);
	return rc;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	smcr_real_bind();   /* the engine's helpers call libc through this table */
	alarm(RUN_LIMIT_S); /* bounded whatever happens */
	if (argc == 6 && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3], strtoull(argv[4], NULL, 0),
			      (uint32_t)strtoul(argv[5], NULL, 0));
	if ((argc == 7 || (argc == 8 && !strcmp(argv[7], "rogue"))) &&
	    !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argv[4], strtoull(argv[5], NULL, 0),
			      (uint32_t)strtoul(argv[6], NULL, 0), argc == 8);
	fprintf(stderr,
		"usage: verbs_stream server LOCAL_ADDR PORT BYTES RING_SIZE\n"
		"       verbs_stream client SERVER_ADDR PORT LOCAL_ADDR BYTES RING_SIZE "
		"[rogue]\n");
	return 2;
}
