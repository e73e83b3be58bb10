// SPDX-License-Identifier: MIT
/*
 * smc_echo: connections over the kernel's AF_SMC sockets: the client sends BYTES
 * bytes, the server echoes them, the client checks the echo (a fixed pattern).
 *
 *   smc_echo server LOCAL_ADDR PORT BYTES [CONNS]     CONNS connections, one by one
 *   smc_echo client SERVER_ADDR PORT BYTES LOCAL_ADDR [CONNS]
 *   smc_echo pattern BYTES       the client's bytes on stdout (for a checksum)
 *   smc_echo stats               the kernel's SMC-R statistics (SMC_NETLINK_GET_STATS):
 *                                "smcr_client_v2_success N" ... one per line, then its
 *                                fallback statistics (SMC_NETLINK_GET_FBACK_STATS):
 *                                "fallback_server_count N", "fallback_client_count N"
 *                                and "fallback_server_0x03030000 N" per reason code
 *
 * After each echo each side prints what the kernel's smc_diag says of its socket
 * ("smc_diag mode=SMC-R ibdev=rxe1 gid=... peer_gid=..." with the link group's
 * link, or "mode=TCP-fallback reason=... peer_diagnosis=..."); SMC-R only with the
 * LGRINFO record (an unconnected socket has mode 0 too).
 *
 * SMC_ECHO_IDLE_S=N (client): after the echo, the connection stays idle N seconds
 * (smc_diag is read first), then BYTES more are echoed and checked: a link that
 * must survive the kernel's TEST LINK keepalive (tests/rxe/kernel.sh).
 *
 * Every socket call is bounded by a timeout. Exit 0 on a correct echo, 1 otherwise.
 */
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <linux/rtnetlink.h>
#include <linux/smc_diag.h>
#include <linux/sock_diag.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
/* protocol argument of socket(AF_SMC, ...): the address family of the TCP connection */
#define SMCPROTO_SMC  0
#define SMCPROTO_SMC6 1

#define IO_TIMEOUT_S	  20
#define ACCEPT_TIMEOUT_MS 300000 /* an smc_run client on a TCG guest at load 19 started >60 s late */
#define CHUNK		  65536

static int fail(const char *what)
{
	fprintf(stderr, "smc_echo: %s: %s\n", what, strerror(errno));
	return -1;
}

/* One line: the kernel's smc_diag record of our socket fd (mode, fallback reasons). */
static void diag_report(int sock, const char *side)
{
	struct {
		struct nlmsghdr nlh;
		struct smc_diag_req r;
	} req;
	static char buf[65536];
	struct stat st;
	int fd, found = 0, done = 0;

	if (fstat(sock, &st) < 0)
		return;
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return;
	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.r.diag_family = AF_SMC;
	req.r.diag_ext = 1 << (SMC_DIAG_FALLBACK - 1) | 1 << (SMC_DIAG_LGRINFO - 1);
	if (send(fd, &req, sizeof(req), 0) < 0)
		done = 1;
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n <= 0)
			break;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct smc_diag_fallback *fb = NULL;
			struct smc_diag_lgrinfo *lgr = NULL;
			struct smc_diag_msg *m;
			struct rtattr *a;
			int alen;

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = 1;
				break;
			}
			m = NLMSG_DATA(h);
			if (m->diag_inode != st.st_ino)
				continue;
			found = 1;
			a = (struct rtattr *)(m + 1);
			alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
			for (; RTA_OK(a, alen); a = RTA_NEXT(a, alen))
				if (a->rta_type == SMC_DIAG_FALLBACK)
					fb = RTA_DATA(a);
				else if (a->rta_type == SMC_DIAG_LGRINFO &&
					 RTA_PAYLOAD(a) >= sizeof(*lgr))
					lgr = RTA_DATA(a);
			if (m->diag_mode == SMC_DIAG_MODE_FALLBACK_TCP)
				printf("%s: smc_diag mode=TCP-fallback reason=%#010x peer_diagnosis=%#010x\n",
				       side, fb ? fb->reason : 0, fb ? fb->peer_diagnosis : 0);
			else if (m->diag_mode == SMC_DIAG_MODE_SMCR && lgr)
				printf("%s: smc_diag mode=SMC-R ibdev=%.*s gid=%.40s peer_gid=%.40s link_id=%u\n",
				       side, (int)sizeof(lgr->lnk[0].ibname), lgr->lnk[0].ibname,
				       lgr->lnk[0].gid, lgr->lnk[0].peer_gid, lgr->lnk[0].link_id);
			else
				printf("%s: smc_diag mode=%s (no link group)\n", side,
				       m->diag_mode == SMC_DIAG_MODE_SMCD ? "SMC-D" : "unknown");
		}
	}
	if (!found)
		printf("%s: smc_diag has no record of our socket\n", side);
	fflush(stdout);
	close(fd);
}

/* ---- the kernel's SMC statistics over generic netlink ---------------------------- */

struct nlreq {
	struct nlmsghdr nlh;
	struct genlmsghdr g;
	char attrs[64];
};

#define NLA_DATA(a) ((void *)((char *)(a) + NLA_HDRLEN))
#define NLA_OK(a, len) ((len) >= (int)NLA_HDRLEN && (a)->nla_len >= NLA_HDRLEN && \
			(a)->nla_len <= (len))
#define NLA_NEXT(a, len) ((len) -= NLA_ALIGN((a)->nla_len), \
			  (struct nlattr *)((char *)(a) + NLA_ALIGN((a)->nla_len)))

/* One request, then every reply until DONE/ERROR: cb(attrs, len) for each message. */
static int genl_talk(int fd, uint16_t type, uint8_t cmd, uint16_t flags, const char *name,
		     void (*cb)(struct nlattr *a, int len, void *arg), void *arg)
{
	static char buf[65536];
	struct nlreq r;

	memset(&r, 0, sizeof(r));
	r.nlh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r.nlh.nlmsg_type = type;
	r.nlh.nlmsg_flags = NLM_F_REQUEST | flags;
	r.g.cmd = cmd;
	r.g.version = 1;
	if (name) {
		struct nlattr *a = (struct nlattr *)r.attrs;

		a->nla_type = CTRL_ATTR_FAMILY_NAME;
		a->nla_len = (uint16_t)(NLA_HDRLEN + strlen(name) + 1);
		memcpy(NLA_DATA(a), name, strlen(name) + 1);
		r.nlh.nlmsg_len += NLA_ALIGN(a->nla_len);
	}
	if (send(fd, &r, r.nlh.nlmsg_len, 0) < 0)
		return -1;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n <= 0)
			return -1;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(h))->error ? -1 : 0;
			cb((struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN),
			   (int)(h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN)), arg);
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				return 0;
		}
	}
}

static void family_cb(struct nlattr *a, int len, void *arg)
{
	for (; NLA_OK(a, len); a = NLA_NEXT(a, len))
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
			*(uint16_t *)arg = *(uint16_t *)NLA_DATA(a);
}

static uint64_t nla_uint(const struct nlattr *a)
{
	uint64_t v = 0;

	memcpy(&v, NLA_DATA(a), a->nla_len - NLA_HDRLEN < 8 ? a->nla_len - NLA_HDRLEN : 8);
	return v;
}

static void stats_cb(struct nlattr *a, int len, void *arg)
{
	static const char *const tech_names[] = {
		[SMC_NLA_STATS_T_CLNT_V1_SUCC] = "client_v1_success",
		[SMC_NLA_STATS_T_CLNT_V2_SUCC] = "client_v2_success",
		[SMC_NLA_STATS_T_SRV_V1_SUCC] = "server_v1_success",
		[SMC_NLA_STATS_T_SRV_V2_SUCC] = "server_v2_success",
		[SMC_NLA_STATS_T_RX_BYTES] = "rx_bytes",
		[SMC_NLA_STATS_T_TX_BYTES] = "tx_bytes",
	};

	(void)arg;
	for (; NLA_OK(a, len); a = NLA_NEXT(a, len)) {
		struct nlattr *s;
		int slen;

		if ((a->nla_type & NLA_TYPE_MASK) != SMC_GEN_STATS)
			continue;
		slen = a->nla_len - NLA_HDRLEN;
		for (s = NLA_DATA(a); NLA_OK(s, slen); s = NLA_NEXT(s, slen)) {
			unsigned t = s->nla_type & NLA_TYPE_MASK;
			struct nlattr *x;
			int xlen;

			if (t == SMC_NLA_STATS_CLNT_HS_ERR_CNT || t == SMC_NLA_STATS_SRV_HS_ERR_CNT)
				printf("%s_handshake_errors %llu\n",
				       t == SMC_NLA_STATS_CLNT_HS_ERR_CNT ? "client" : "server",
				       (unsigned long long)nla_uint(s));
			if (t != SMC_NLA_STATS_SMCR_TECH)
				continue;
			xlen = s->nla_len - NLA_HDRLEN;
			for (x = NLA_DATA(s); NLA_OK(x, xlen); x = NLA_NEXT(x, xlen)) {
				unsigned xt = x->nla_type & NLA_TYPE_MASK;

				if (xt < sizeof(tech_names) / sizeof(tech_names[0]) && tech_names[xt])
					printf("smcr_%s %llu\n", tech_names[xt],
					       (unsigned long long)nla_uint(x));
			}
		}
	}
}

/* One reason code of one role per message (the role's totals in the first of them). */
static void fback_cb(struct nlattr *a, int len, void *arg)
{
	(void)arg;
	for (; NLA_OK(a, len); a = NLA_NEXT(a, len)) {
		const char *role = "client";
		uint64_t code = 0, count = 0;
		int have_code = 0;
		struct nlattr *s;
		int slen;

		if ((a->nla_type & NLA_TYPE_MASK) != SMC_GEN_FBACK_STATS)
			continue;
		slen = a->nla_len - NLA_HDRLEN;
		for (s = NLA_DATA(a); NLA_OK(s, slen); s = NLA_NEXT(s, slen)) {
			switch (s->nla_type & NLA_TYPE_MASK) {
			case SMC_NLA_FBACK_STATS_TYPE:
				role = nla_uint(s) ? "server" : "client";
				break;
			case SMC_NLA_FBACK_STATS_SRV_CNT:
				printf("fallback_server_count %llu\n", (unsigned long long)nla_uint(s));
				break;
			case SMC_NLA_FBACK_STATS_CLNT_CNT:
				printf("fallback_client_count %llu\n", (unsigned long long)nla_uint(s));
				break;
			case SMC_NLA_FBACK_STATS_RSN_CODE:
				code = nla_uint(s);
				have_code = 1;
				break;
			case SMC_NLA_FBACK_STATS_RSN_CNT:
				count = nla_uint(s);
				break;
			}
		}
		if (have_code)
			printf("fallback_%s_0x%08llx %llu\n", role, (unsigned long long)code,
			       (unsigned long long)count);
	}
}

static int kernel_stats(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	uint16_t id = 0;

	if (fd < 0)
		return fail("netlink socket");
	if (genl_talk(fd, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, SMC_GENL_FAMILY_NAME, family_cb,
		      &id) || !id) {
		fprintf(stderr, "smc_echo: no generic netlink family %s\n", SMC_GENL_FAMILY_NAME);
		close(fd);
		return 1;
	}
	if (genl_talk(fd, id, SMC_NETLINK_GET_STATS, NLM_F_DUMP, NULL, stats_cb, NULL)) {
		close(fd);
		return fail("SMC_NETLINK_GET_STATS");
	}
	if (genl_talk(fd, id, SMC_NETLINK_GET_FBACK_STATS, NLM_F_DUMP, NULL, fback_cb, NULL)) {
		close(fd);
		return fail("SMC_NETLINK_GET_FBACK_STATS");
	}
	fflush(stdout);
	close(fd);
	return 0;
}

static int resolve(const char *addr, const char *port, struct sockaddr_storage *out,
		   socklen_t *len)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res;
	int rc = getaddrinfo(addr, port, &hints, &res);

	if (rc) {
		fprintf(stderr, "smc_echo: bad address %s: %s\n", addr, gai_strerror(rc));
		return -1;
	}
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int smc_socket(const struct sockaddr_storage *addr)
{
	struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
	int fd = socket(AF_SMC, SOCK_STREAM,
			addr->ss_family == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC);

	if (fd < 0)
		return fail("socket(AF_SMC)");
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		close(fd);
		return fail("SO_RCVTIMEO/SO_SNDTIMEO");
	}
	return fd;
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + i / 251);
}

/*
 * Sends bytes [0, total) of the pattern while receiving and checking the echo, both
 * non-blocking under one poll() so that neither side's buffers can deadlock the exchange.
 */
static int exchange(int fd, size_t total)
{
	unsigned char out[CHUNK], in[CHUNK];
	size_t sent = 0, received = 0;

	while (received < total) {
		struct pollfd pfd = {.fd = fd,
				     .events = POLLIN | (sent < total ? POLLOUT : 0)};
		int n = poll(&pfd, 1, IO_TIMEOUT_S * 1000);

		if (n <= 0) {
			fprintf(
			    stderr,
			    "smc_echo: stalled after sending %zu, receiving %zu bytes\n",
			    sent, received);
			return -1;
		}
		if (sent < total && (pfd.revents & POLLOUT)) {
			size_t len = total - sent < CHUNK ? total - sent : CHUNK;
			for (size_t i = 0; i < len; i++)
				out[i] = pattern(sent + i);
			ssize_t w = send(fd, out, len, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN)
				return fail("send");
			sent += w > 0 ? (size_t)w : 0;
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, in, sizeof(in), MSG_DONTWAIT);
			if (r < 0 && errno != EAGAIN)
				return fail("recv");
			if (r == 0) {
				fprintf(stderr,
					"smc_echo: peer closed after %zu of %zu bytes\n",
					received, total);
				return -1;
			}
			for (ssize_t i = 0; i < r; i++) {
				if (in[i] != pattern(received + (size_t)i)) {
					fprintf(stderr,
						"smc_echo: wrong byte at offset %zu\n",
						received + (size_t)i);
					return -1;
				}
			}
			received += r > 0 ? (size_t)r : 0;
		}
	}
	return 0;
}

/* Echo one accepted connection of `bytes` bytes as they arrive. 0 on success. */
static int serve_one(int fd, size_t bytes)
{
	unsigned char buf[CHUNK];
	size_t done = 0;

	/* the client reads while it sends */
	while (done < bytes) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);

		if (r <= 0) {
			fail(r ? "recv" : "recv: early close");
			return -1;
		}
		for (ssize_t off = 0; off < r;) {
			ssize_t w = send(fd, buf + off, (size_t)(r - off), MSG_NOSIGNAL);

			if (w <= 0) {
				fail("send");
				return -1;
			}
			off += w;
		}
		done += (size_t)r;
	}
	return 0;
}

static int server(const char *addr, const char *port, size_t bytes, unsigned conns)
{
	struct sockaddr_storage local;
	socklen_t len;
	int one = 1, lfd, rc = 1;

	if (resolve(addr, port, &local, &len))
		return 1;
	lfd = smc_socket(&local);
	if (lfd < 0)
		return 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&local, len) || listen(lfd, 1)) {
		fail("bind/listen");
		goto out;
	}
	printf("listening on %s port %s\n", addr, port);
	fflush(stdout);
	for (unsigned i = 0; i < conns; i++) {
		struct pollfd pfd = {.fd = lfd, .events = POLLIN};
		int fd;

		if (poll(&pfd, 1, ACCEPT_TIMEOUT_MS) != 1) {
			fprintf(stderr, "smc_echo: no connection within %d ms\n",
				ACCEPT_TIMEOUT_MS);
			goto out;
		}
		fd = accept(lfd, NULL, NULL);
		if (fd < 0 && (errno == EAGAIN || errno == ECONNABORTED || errno == EINTR)) {
			/* readable, yet the connection is gone (a reset to its first SYN,
			 * which the client retries): wait for the next one */
			fprintf(stderr, "smc_echo: accept: %s; waiting for the next connection\n",
				strerror(errno));
			i--;
			continue;
		}
		if (fd < 0) {
			fail("accept");
			goto out;
		}
		rc = serve_one(fd, bytes) ? 1 : 0;
		diag_report(fd, "server");
		close(fd);
		if (rc)
			goto out;
		printf("server: echoed connection %u: %zu bytes\n", i + 1, bytes);
		fflush(stdout);
	}
out:
	close(lfd);
	return rc;
}

static int client(const char *addr, const char *port, size_t bytes,
		  const char *local_addr, unsigned conns)
{
	struct sockaddr_storage peer, local;
	socklen_t peer_len, local_len;

	if (resolve(addr, port, &peer, &peer_len) ||
	    resolve(local_addr, "0", &local, &local_len))
		return 1;
	for (unsigned i = 0; i < conns; i++) {
		int fd = smc_socket(&peer);

		if (fd < 0)
			return 1;
		if (bind(fd, (struct sockaddr *)&local, local_len) ||
		    connect(fd, (struct sockaddr *)&peer, peer_len)) {
			fail("bind/connect");
			close(fd);
			return 1;
		}
		if (exchange(fd, bytes)) {
			close(fd);
			return 1;
		}
		if (getenv("SMC_ECHO_IDLE_S")) {
			unsigned idle = (unsigned)strtoul(getenv("SMC_ECHO_IDLE_S"), NULL, 0);

			diag_report(fd, "client before idle");
			printf("idle for %u s\n", idle);
			fflush(stdout);
			sleep(idle);
			if (exchange(fd, bytes)) {
				close(fd);
				return 1;
			}
		}
		printf("echoed %zu bytes over AF_SMC (connection %u)\n", bytes, i + 1);
		diag_report(fd, "client");
		close(fd);
	}
	return 0;
}

/* The client's bytes, for a checksum on the other side. */
static int print_pattern(size_t bytes)
{
	unsigned char out[CHUNK];

	for (size_t done = 0; done < bytes;) {
		size_t len = bytes - done < CHUNK ? bytes - done : CHUNK;

		for (size_t i = 0; i < len; i++)
			out[i] = pattern(done + i);
		if (fwrite(out, 1, len, stdout) != len)
			return 1;
		done += len;
	}
	return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3], strtoul(argv[4], NULL, 0),
			      argc == 6 ? (unsigned)strtoul(argv[5], NULL, 0) : 1);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], strtoul(argv[4], NULL, 0), argv[5],
			      argc == 7 ? (unsigned)strtoul(argv[6], NULL, 0) : 1);
	if (argc == 3 && !strcmp(argv[1], "pattern"))
		return print_pattern(strtoul(argv[2], NULL, 0));
	if (argc == 2 && !strcmp(argv[1], "stats"))
		return kernel_stats();
	fprintf(stderr, "usage: smc_echo server LOCAL_ADDR PORT BYTES [CONNS]\n"
			"       smc_echo client SERVER_ADDR PORT BYTES LOCAL_ADDR [CONNS]\n"
			"       smc_echo pattern BYTES\n"
			"       smc_echo stats\n");
	return 2;
}
