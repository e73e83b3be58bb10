// SPDX-License-Identifier: MIT
/*
 * sockbench: the three workloads of bench/rxe in one small program, so that every column
 * (plain TCP, smcr, the kernel's AF_SMC, and the mixed ones) runs exactly the same code and
 * only the preloaded library differs. It is an ordinary TCP program: under scripts/smc_run
 * it is smcr's, under bench/afsmc.so (socket(AF_INET, SOCK_STREAM) -> AF_SMC) the kernel's.
 *
 *   sockbench server ADDR PORT
 *       serve connections one after the other until killed; the first byte a client sends
 *       says what it wants: 'P' ping-pong, 'T' stream, 'C' short connection.
 *   sockbench client pp|tp|cps|all SERVER PORT SECONDS LOCAL_ADDR
 *       pp   one connection, 14-byte messages echoed back, one at a time (TCP_NODELAY on both
 *            sides): round-trip times after 10 untimed ones; prints "pp rtt_p50_us R
 *            rtt_min_us R rtt_p99_us R rounds N conns 1"
 *       tp   one connection, 65536-byte send() calls for SECONDS, then shutdown(SHUT_WR);
 *            the server answers with the byte count it received: prints "tp MBps R bytes N
 *            conns 1" (bytes the server confirmed / time until its answer arrived)
 *       cps  connections one after the other for SECONDS, each connect() + 14 bytes each
 *            way + close() (the client closes first), after one warm-up connection that is
 *            not timed (it may set up the SMC-R link group); prints "cps rate R
 *            conn_p50_us R conns N" (N counts the warm-up too: every connection made)
 *       all  one untimed short connection ("warmup conns 1": an SMC-R client sets up its
 *            link group here, which the kernel's may have from an earlier process), then
 *            pp, tp and cps, SECONDS each, in one process (a program start under
 *            scripts/smc_run costs seconds in the TCG guest)
 *   sockbench ksmc-stats
 *       the kernel's SMC counters (generic netlink SMC_GEN_NETLINK, SMC_NETLINK_GET_STATS and
 *       _GET_FBACK_STATS): "smcr_client_v2 N smcr_server_v2 N smcr_client_v1 N
 *       smcr_server_v1 N client_fallbacks N server_fallbacks N client_hs_errors N
 *       server_hs_errors N reasons CODE:COUNT,..." (counts since boot).
 *
 * Every socket call is bounded (SO_RCVTIMEO/SO_SNDTIMEO 30 s); every echoed byte is checked.
 * Exit 0 on success, 1 on any error (message on stderr).
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG_SMALL   14
#define MSG_STREAM  65536
#define IO_TIMEOUT  30
#define MAX_SAMPLES (1 << 20)
#define PP_WARMUP   10 /* untimed round trips before the timed ones */

static int die(const char *what)
{
	fprintf(stderr, "sockbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void resolve(const char *addr, const char *port, struct sockaddr_storage *out,
		    socklen_t *len)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int rc = getaddrinfo(addr, port, &hints, &res);

	if (rc) {
		fprintf(stderr, "sockbench: bad address %s: %s\n", addr, gai_strerror(rc));
		exit(1);
	}
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
}

static void bound_io(int fd)
{
	struct timeval tv = { .tv_sec = IO_TIMEOUT };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		die("SO_RCVTIMEO/SO_SNDTIMEO");
}

static void nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY");
}

/* Reads exactly len bytes; 0 on success, -1 at EOF before the first byte. */
static int read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = recv(fd, (char *)buf + got, len - got, 0);

		if (r == 0 && got == 0)
			return -1;
		if (r == 0) {
			errno = ECONNRESET;
			die("recv: peer closed mid-message");
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("recv");
		}
		got += (size_t)r;
	}
	return 0;
}

static void write_all(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t w = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("send");
		}
		done += (size_t)w;
	}
}

/* ---- server ------------------------------------------------------------------------ */

static void serve_pingpong(int fd, const unsigned char *first)
{
	unsigned char msg[MSG_SMALL];

	memcpy(msg, first, MSG_SMALL);
	nodelay(fd);
	do
		write_all(fd, msg, MSG_SMALL);
	while (read_all(fd, msg, MSG_SMALL) == 0);
}

static void serve_stream(int fd, size_t already)
{
	static unsigned char buf[MSG_STREAM];
	uint64_t total = already;

	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);

		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("recv (stream)");
		}
		total += (uint64_t)r;
	}
	write_all(fd, &total, sizeof(total));
}

static void serve_short(int fd, const unsigned char *first)
{
	unsigned char rest[1];

	write_all(fd, first, MSG_SMALL);
	/* the client closes first; its FIN ends our wait */
	if (read_all(fd, rest, 1) == 0) {
		errno = EPROTO;
		die("short connection: data after the exchange");
	}
}

static int server(const char *addr, const char *port)
{
	struct sockaddr_storage local;
	socklen_t len;
	int one = 1, lfd;

	resolve(addr, port, &local, &len);
	lfd = socket(local.ss_family, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("SO_REUSEADDR");
	if (bind(lfd, (struct sockaddr *)&local, len) || listen(lfd, 128))
		die("bind/listen");
	printf("listening on %s port %s\n", addr, port);
	fflush(stdout);
	for (;;) {
		unsigned char first[MSG_SMALL];
		ssize_t r;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		bound_io(fd);
		/* the first byte says which workload; ping-pong and short ones send 14 */
		r = recv(fd, first, 1, 0);
		if (r == 1 && first[0] == 'T') {
			serve_stream(fd, 1);
		} else if (r == 1 && (first[0] == 'P' || first[0] == 'C')) {
			if (read_all(fd, first + 1, MSG_SMALL - 1))
				die("first message cut short");
			if (first[0] == 'P')
				serve_pingpong(fd, first);
			else
				serve_short(fd, first);
		} else if (r != 0) {
			fprintf(stderr, "sockbench: a connection began with %zd byte(s) '%c'\n", r,
				r > 0 ? first[0] : '?');
			return 1;
		}
		close(fd);
	}
}

/* ---- client ------------------------------------------------------------------------ */

static struct sockaddr_storage peer, local;
static socklen_t peer_len, local_len;

static int connect_one(void)
{
	int fd = socket(peer.ss_family, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	bound_io(fd);
	if (bind(fd, (struct sockaddr *)&local, local_len))
		die("bind");
	if (connect(fd, (struct sockaddr *)&peer, peer_len))
		die("connect");
	return fd;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);

	return v[i < n ? i : n - 1];
}

static void pingpong(double seconds)
{
	static double rtt[MAX_SAMPLES];
	unsigned char out[MSG_SMALL], in[MSG_SMALL];
	size_t n = 0;
	int fd = connect_one();

	nodelay(fd);
	memset(out, 'p', sizeof(out));
	out[0] = 'P';
	double end = 0;
	for (uint32_t round = 0; n < MAX_SAMPLES; round++) {
		if (round == PP_WARMUP)
			end = now_s() + seconds;
		double t0 = now_s();

		memcpy(out + 1, &round, sizeof(round));
		write_all(fd, out, MSG_SMALL);
		if (read_all(fd, in, MSG_SMALL)) {
			errno = ECONNRESET;
			die("ping-pong: server closed");
		}
		double t1 = now_s();
		if (memcmp(in, out, MSG_SMALL)) {
			errno = EPROTO;
			die("ping-pong: the echo differs");
		}
		if (round < PP_WARMUP)
			continue;
		rtt[n++] = (t1 - t0) * 1e6;
		if (t1 >= end)
			break;
	}
	close(fd);
	qsort(rtt, n, sizeof(rtt[0]), cmp_double);
	printf("pp rtt_p50_us %.2f rtt_min_us %.2f rtt_p99_us %.2f rounds %zu conns 1\n",
	       percentile(rtt, n, 0.5), rtt[0], percentile(rtt, n, 0.99), n);
}

static void stream(double seconds)
{
	static unsigned char buf[MSG_STREAM];
	uint64_t sent = 0, confirmed = 0;
	int fd = connect_one();

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 1);
	buf[0] = 'T';
	double start = now_s(), end = start + seconds;
	do {
		write_all(fd, buf, sizeof(buf));
		sent += sizeof(buf);
	} while (now_s() < end);
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	if (read_all(fd, &confirmed, sizeof(confirmed))) {
		errno = ECONNRESET;
		die("stream: no count from the server");
	}
	double elapsed = now_s() - start;
	close(fd);
	if (confirmed != sent) {
		fprintf(stderr, "sockbench: sent %" PRIu64 " bytes, the server received %" PRIu64 "\n",
			sent, confirmed);
		exit(1);
	}
	printf("tp MBps %.3f bytes %" PRIu64 " seconds %.3f conns 1\n",
	       (double)confirmed / elapsed / 1e6, confirmed, elapsed);
}

static void short_one(uint32_t i)
{
	unsigned char out[MSG_SMALL], in[MSG_SMALL];
	int fd = connect_one();

	memset(out, 'c', sizeof(out));
	out[0] = 'C';
	memcpy(out + 1, &i, sizeof(i));
	write_all(fd, out, MSG_SMALL);
	if (read_all(fd, in, MSG_SMALL) || memcmp(in, out, MSG_SMALL)) {
		errno = EPROTO;
		die("short connection: no or a wrong echo");
	}
	close(fd);
}

static void short_conns(double seconds)
{
	static double took[MAX_SAMPLES];
	size_t n = 0;

	short_one(0); /* warm-up: the first SMC-R connection may set up the link group */
	double start = now_s(), end = start + seconds, t = start;
	while (n < MAX_SAMPLES) {
		short_one((uint32_t)n + 1);
		double t1 = now_s();

		took[n++] = (t1 - t) * 1e6;
		t = t1;
		if (t1 >= end)
			break;
	}
	qsort(took, n, sizeof(took[0]), cmp_double);
	printf("cps rate %.2f conn_p50_us %.1f conns %zu\n", (double)n / (t - start),
	       percentile(took, n, 0.5), n + 1);
}

/* ---- the kernel's SMC counters ----------------------------------------------------- */

struct nl_req {
	struct nlmsghdr nlh;
	struct genlmsghdr genl;
	char attrs[256];
};

struct ksmc {
	uint64_t v[8]; /* in the order of ksmc_names */
	char reasons[512];
};

static const char *const ksmc_names[8] = {
	"smcr_client_v2", "smcr_server_v2", "smcr_client_v1", "smcr_server_v1",
	"client_fallbacks", "server_fallbacks", "client_hs_errors", "server_hs_errors",
};

typedef void (*nl_attr_fn)(const struct nlattr *attrs, int len, struct ksmc *k);

#define NLA_DATA(a) ((const void *)((const char *)(a) + NLA_HDRLEN))
#define NLA_LEN(a)  ((int)(a)->nla_len - NLA_HDRLEN)
#define NLA_TYPE(a) ((a)->nla_type & NLA_TYPE_MASK)
#define NLA_OK(a, len)                                                                      \
	((len) >= NLA_HDRLEN && (a)->nla_len >= NLA_HDRLEN && (int)(a)->nla_len <= (len))
#define NLA_NEXT(a, len)                                                                    \
	((len) -= NLA_ALIGN((a)->nla_len),                                                  \
	 (const struct nlattr *)((const char *)(a) + NLA_ALIGN((a)->nla_len)))

static uint64_t nla_uint(const struct nlattr *a)
{
	uint64_t v = 0;

	switch (NLA_LEN(a)) {
	case 1: return *(const uint8_t *)NLA_DATA(a);
	case 2: return *(const uint16_t *)NLA_DATA(a);
	case 4: return *(const uint32_t *)NLA_DATA(a);
	case 8: memcpy(&v, NLA_DATA(a), 8); return v;
	}
	return 0;
}

static const struct nlattr *nla_find(const struct nlattr *a, int len, int type)
{
	for (; NLA_OK(a, len); a = NLA_NEXT(a, len))
		if (NLA_TYPE(a) == type)
			return a;
	return NULL;
}

static int nl_transact(int fd, struct nl_req *req, nl_attr_fn fn, struct ksmc *k)
{
	static char buf[65536];

	if (send(fd, req, req->nlh.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
			if (fn)
				fn((const struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN),
				   (int)(h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN)), k);
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				return 0;
		}
	}
}

static void nl_start(struct nl_req *req, uint16_t family, uint8_t cmd, uint16_t flags)
{
	memset(req, 0, sizeof(*req));
	req->nlh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	req->nlh.nlmsg_type = family;
	req->nlh.nlmsg_flags = NLM_F_REQUEST | flags;
	req->genl.cmd = cmd;
	req->genl.version = 1;
}

static uint16_t family_id;

static void family_attrs(const struct nlattr *a, int len, struct ksmc *k)
{
	(void)k;
	a = nla_find(a, len, CTRL_ATTR_FAMILY_ID);
	if (a)
		family_id = (uint16_t)nla_uint(a);
}

static void stats_attrs(const struct nlattr *a, int len, struct ksmc *k)
{
	static const int tech[4] = { SMC_NLA_STATS_T_CLNT_V2_SUCC, SMC_NLA_STATS_T_SRV_V2_SUCC,
				     SMC_NLA_STATS_T_CLNT_V1_SUCC, SMC_NLA_STATS_T_SRV_V1_SUCC };
	const struct nlattr *s = nla_find(a, len, SMC_GEN_STATS), *x;

	if (!s)
		return;
	x = nla_find(NLA_DATA(s), NLA_LEN(s), SMC_NLA_STATS_SMCR_TECH);
	for (int i = 0; x && i < 4; i++) {
		const struct nlattr *c = nla_find(NLA_DATA(x), NLA_LEN(x), tech[i]);

		k->v[i] = c ? nla_uint(c) : 0;
	}
	x = nla_find(NLA_DATA(s), NLA_LEN(s), SMC_NLA_STATS_CLNT_HS_ERR_CNT);
	k->v[6] = x ? nla_uint(x) : 0;
	x = nla_find(NLA_DATA(s), NLA_LEN(s), SMC_NLA_STATS_SRV_HS_ERR_CNT);
	k->v[7] = x ? nla_uint(x) : 0;
}

/* one message per (side, reason); each also carries both sides' totals */
static void fback_attrs(const struct nlattr *a, int len, struct ksmc *k)
{
	const struct nlattr *s = nla_find(a, len, SMC_GEN_FBACK_STATS), *x;
	uint64_t side = 0, code = 0, count = 0;
	size_t used = strlen(k->reasons);

	if (!s)
		return;
	int l = NLA_LEN(s);
	for (x = NLA_DATA(s); NLA_OK(x, l); x = NLA_NEXT(x, l)) {
		switch (NLA_TYPE(x)) {
		case SMC_NLA_FBACK_STATS_TYPE: side = nla_uint(x); break;
		case SMC_NLA_FBACK_STATS_CLNT_CNT: k->v[4] = nla_uint(x); break;
		case SMC_NLA_FBACK_STATS_SRV_CNT: k->v[5] = nla_uint(x); break;
		case SMC_NLA_FBACK_STATS_RSN_CODE: code = nla_uint(x); break;
		case SMC_NLA_FBACK_STATS_RSN_CNT: count = nla_uint(x); break;
		}
	}
	if (count && used + 40 < sizeof(k->reasons))
		snprintf(k->reasons + used, sizeof(k->reasons) - used, "%s%s:0x%08" PRIx64 ":%" PRIu64,
			 used ? "," : "", side ? "server" : "client", code, count);
}

static int ksmc_stats(void)
{
	struct nl_req req;
	struct ksmc k = { 0 };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);

	if (fd < 0)
		die("netlink socket");
	nl_start(&req, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0);
	struct nlattr *name = (struct nlattr *)req.attrs;
	name->nla_type = CTRL_ATTR_FAMILY_NAME;
	name->nla_len = NLA_HDRLEN + sizeof(SMC_GENL_FAMILY_NAME);
	memcpy((char *)name + NLA_HDRLEN, SMC_GENL_FAMILY_NAME, sizeof(SMC_GENL_FAMILY_NAME));
	req.nlh.nlmsg_len += NLA_ALIGN(name->nla_len);
	if (nl_transact(fd, &req, family_attrs, &k) || !family_id) {
		fprintf(stderr, "sockbench: no %s netlink family (smc.ko not loaded?)\n",
			SMC_GENL_FAMILY_NAME);
		return 1;
	}
	nl_start(&req, family_id, SMC_NETLINK_GET_STATS, NLM_F_DUMP);
	int rc = nl_transact(fd, &req, stats_attrs, &k);
	if (!rc) {
		nl_start(&req, family_id, SMC_NETLINK_GET_FBACK_STATS, NLM_F_DUMP);
		rc = nl_transact(fd, &req, fback_attrs, &k);
	}
	close(fd);
	if (rc) {
		errno = -rc;
		die("SMC netlink stats");
	}
	for (int i = 0; i < 8; i++)
		printf("%s %" PRIu64 " ", ksmc_names[i], k.v[i]);
	printf("reasons %s\n", k.reasons[0] ? k.reasons : "-");
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3]);
	if (argc == 2 && !strcmp(argv[1], "ksmc-stats"))
		return ksmc_stats();
	if (argc == 7 && !strcmp(argv[1], "client")) {
		double seconds = strtod(argv[5], NULL);

		resolve(argv[3], argv[4], &peer, &peer_len);
		resolve(argv[6], "0", &local, &local_len);
		setvbuf(stdout, NULL, _IOLBF, 0);
		if (!strcmp(argv[2], "pp"))
			pingpong(seconds);
		else if (!strcmp(argv[2], "tp"))
			stream(seconds);
		else if (!strcmp(argv[2], "cps"))
			short_conns(seconds);
		else if (!strcmp(argv[2], "all")) {
			short_one(0);
			printf("warmup conns 1\n");
			pingpong(seconds);
			stream(seconds);
			short_conns(seconds);
		} else
			goto usage;
		return 0;
	}
usage:
	fprintf(stderr, "usage: sockbench server ADDR PORT\n"
			"       sockbench client pp|tp|cps|all SERVER PORT SECONDS LOCAL_ADDR\n"
			"       sockbench ksmc-stats\n");
	return 2;
}
