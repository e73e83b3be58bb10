// SPDX-License-Identifier: MIT
/*
 * smc_sockets: a program written for the kernel's SMC, as smc_afsmc.sh runs it.
 * It makes its sockets the two ways Linux offers, socket(AF_SMC, SOCK_STREAM,
 * SMCPROTO_SMC or SMCPROTO_SMC6) and socket(AF_INET or AF_INET6, SOCK_STREAM,
 * IPPROTO_SMC), or a plain TCP socket, and checks on each what a program may
 * read from an SMC socket: SO_DOMAIN and SO_PROTOCOL as the kernel reports
 * them, AF_INET/AF_INET6 addresses, the SOL_SMC option SMC_LIMIT_HS.
 *
 *   smc_sockets probe KIND FAMILY
 *       socket() only; prints "ok" or the errno's name (EAFNOSUPPORT, ...)
 *   smc_sockets server KIND FAMILY CONNECTIONS
 *       listens on the loopback address, prints "port N", echoes CONNECTIONS
 *       connections one after another (0: without end), printing for each
 *       "received BYTES fnv HEX", then "done", and waits to be killed
 *   smc_sockets client KIND FAMILY PORT BYTES [HOLD_MS]
 *       sends BYTES of a fixed pseudo-random stream while reading the echo,
 *       half-closes, reads to the end, prints "exchanged", holds the
 *       connection HOLD_MS, prints "sent BYTES fnv HEX" and exits 0 only if
 *       the echo is the stream, byte for byte
 *
 * KIND: afsmc, ipproto or tcp; FAMILY: 4 or 6.  Exit 2: a socket attribute is
 * not what the kernel's socket of that kind reports, or a call failed.
 * SMC_SOCKETS_ADDR: the server's address instead of the loopback one (the
 * server binds it, the client connects to it); SMC_SOCKETS_LOCAL: the
 * client's own address (tests/rxe/afsmc.sh, between the rxe VM's hosts).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#ifndef SOL_SMC
#define SOL_SMC 286
#endif
#ifndef IPPROTO_SMC
#define IPPROTO_SMC 256
#endif
#define SMCPROTO_SMC  0
#define SMCPROTO_SMC6 1
#define SMC_LIMIT_HS  1

enum kind { KIND_AFSMC, KIND_IPPROTO, KIND_TCP };

struct sock_spec {
	enum kind kind;
	int family; /* AF_INET or AF_INET6 */
};

static void die(const char *what)
{
	fprintf(stderr, "smc_sockets: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* `what` is `got` where the kernel's socket of the same kind gives `want`. */
static void wrong(const char *what, long got, long want)
{
	fprintf(stderr, "smc_sockets: %s is %ld, expected %ld\n", what, got, want);
	exit(2);
}

static struct sock_spec parse_spec(const char *kind, const char *family)
{
	struct sock_spec s;

	if (strcmp(kind, "afsmc") == 0)
		s.kind = KIND_AFSMC;
	else if (strcmp(kind, "ipproto") == 0)
		s.kind = KIND_IPPROTO;
	else if (strcmp(kind, "tcp") == 0)
		s.kind = KIND_TCP;
	else
		exit(64);
	s.family = strcmp(family, "6") == 0 ? AF_INET6 : AF_INET;
	return s;
}

static int make_socket(struct sock_spec s)
{
	switch (s.kind) {
	case KIND_AFSMC:
		return socket(AF_SMC, SOCK_STREAM,
			      s.family == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC);
	case KIND_IPPROTO:
		return socket(s.family, SOCK_STREAM, IPPROTO_SMC);
	default:
		return socket(s.family, SOCK_STREAM, 0);
	}
}

/* What the kernel's socket of this kind says it is. */
static void check_identity(int fd, struct sock_spec s)
{
	int want_domain = s.kind == KIND_AFSMC ? AF_SMC : s.family;
	int want_proto = s.kind == KIND_AFSMC
			     ? (s.family == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC)
			 : s.kind == KIND_IPPROTO ? IPPROTO_SMC
						  : IPPROTO_TCP;
	int v, limit;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0)
		die("getsockopt(SO_DOMAIN)");
	if (v != want_domain)
		wrong("SO_DOMAIN", v, want_domain);
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) < 0)
		die("getsockopt(SO_PROTOCOL)");
	if (v != want_proto)
		wrong("SO_PROTOCOL", v, want_proto);
	if (s.kind == KIND_TCP)
		return;
	/* SOL_SMC: SMC_LIMIT_HS reads 0 (net.smc.limit_handshake's default), then what
	 * was set. */
	len = sizeof(limit);
	if (getsockopt(fd, SOL_SMC, SMC_LIMIT_HS, &limit, &len) < 0)
		die("getsockopt(SOL_SMC, SMC_LIMIT_HS)");
	v = 1;
	if (setsockopt(fd, SOL_SMC, SMC_LIMIT_HS, &v, sizeof(v)) < 0)
		die("setsockopt(SOL_SMC, SMC_LIMIT_HS, 1)");
	len = sizeof(v);
	if (getsockopt(fd, SOL_SMC, SMC_LIMIT_HS, &v, &len) < 0 || len != sizeof(v))
		die("getsockopt(SOL_SMC, SMC_LIMIT_HS) after setting it");
	if (v != 1)
		wrong("SMC_LIMIT_HS after setting it to 1", v, 1);
	v = limit;
	if (setsockopt(fd, SOL_SMC, SMC_LIMIT_HS, &v, sizeof(v)) < 0)
		die("setsockopt(SOL_SMC, SMC_LIMIT_HS) back");
	len = sizeof(v);
	errno = 0;
	if (getsockopt(fd, SOL_SMC, 99, &v, &len) == 0 || errno != EOPNOTSUPP)
		wrong("the errno of getsockopt(SOL_SMC, 99)", errno, EOPNOTSUPP);
	errno = 0;
	if (setsockopt(fd, SOL_SMC, 99, &v, sizeof(v)) == 0 || errno != EOPNOTSUPP)
		wrong("the errno of setsockopt(SOL_SMC, 99)", errno, EOPNOTSUPP);
	errno = 0;
	if (setsockopt(fd, SOL_SMC, SMC_LIMIT_HS, &v, 2) == 0 || errno != EINVAL)
		wrong("the errno of setsockopt(SOL_SMC, SMC_LIMIT_HS) with 2 bytes", errno, EINVAL);
}

/* The socket's addresses are TCP's, as the kernel's SMC sockets report them. */
static void check_address_family(int fd, struct sock_spec s, int peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if ((peer ? getpeername(fd, (struct sockaddr *)&ss, &len)
		  : getsockname(fd, (struct sockaddr *)&ss, &len)) < 0)
		die(peer ? "getpeername" : "getsockname");
	if (ss.ss_family != s.family)
		wrong(peer ? "getpeername's family" : "getsockname's family",
		      ss.ss_family, s.family);
}

/* `text`, or the loopback address when it is NULL, with `port`. */
static socklen_t address(struct sock_spec s, const char *text, int port,
			 struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (s.family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		if (text && inet_pton(AF_INET6, text, &a->sin6_addr) != 1)
			exit(64);
		a->sin6_port = htons((uint16_t)port);
		return sizeof(*a);
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (text && inet_pton(AF_INET, text, &a->sin_addr) != 1)
		exit(64);
	a->sin_port = htons((uint16_t)port);
	return sizeof(*a);
}

/* FNV-1a, 64 bits, of a stream fed in pieces. */
static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

#define FNV_START 0xcbf29ce484222325ull

/* The fixed pseudo-random stream (xorshift64), byte by byte. */
struct stream {
	uint64_t state;
	uint64_t word;
	unsigned left;
};

static unsigned char stream_next(struct stream *st)
{
	if (st->left == 0) {
		st->state ^= st->state << 13;
		st->state ^= st->state >> 7;
		st->state ^= st->state << 17;
		st->word = st->state;
		st->left = 8;
	}
	st->left--;
	return (unsigned char)(st->word >> (8 * st->left));
}

static int probe(struct sock_spec s)
{
	int fd = make_socket(s);

	if (fd < 0) {
		const char *name = errno == EAFNOSUPPORT      ? "EAFNOSUPPORT"
				   : errno == EPROTONOSUPPORT ? "EPROTONOSUPPORT"
				   : errno == EINVAL	      ? "EINVAL"
							      : strerror(errno);
		printf("%s\n", name);
		return 0;
	}
	check_identity(fd, s);
	printf("ok\n");
	close(fd);
	return 0;
}

static void echo_one(int fd)
{
	unsigned char buf[65536];
	uint64_t h = FNV_START;
	long long total = 0;

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read");
		if (n == 0)
			break;
		h = fnv(h, buf, (size_t)n);
		total += n;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				die("write");
			off += w;
		}
	}
	printf("received %lld fnv %016llx\n", total, (unsigned long long)h);
	fflush(stdout);
}

static _Noreturn void server(struct sock_spec s, int connections)
{
	struct sockaddr_storage ss;
	socklen_t len = address(s, getenv("SMC_SOCKETS_ADDR"), 0, &ss);
	int one = 1, fd = make_socket(s);

	if (fd < 0)
		die("socket");
	check_identity(fd, s);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		die("bind");
	if (listen(fd, 8) < 0)
		die("listen");
	check_address_family(fd, s, 0);
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		die("getsockname");
	printf("port %d\n",
	       ntohs(s.family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					  : ((struct sockaddr_in *)&ss)->sin_port));
	fflush(stdout);
	for (int i = 0; connections == 0 || i < connections; i++) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int c = accept(fd, (struct sockaddr *)&peer, &plen);

		if (c < 0)
			die("accept");
		if (peer.ss_family != s.family)
			wrong("accept's address family", peer.ss_family, s.family);
		/* An SMC listener's accepted sockets are SMC sockets of its kind. */
		check_identity(c, s);
		check_address_family(c, s, 1);
		echo_one(c);
		close(c);
	}
	printf("done\n");
	fflush(stdout);
	for (;;)
		pause();
}

/* Sends `bytes` of the stream while reading the echo; 0 if the echo is the stream. */
static int exchange(int fd, long long bytes, uint64_t *sent_fnv)
{
	struct stream out = {.state = 0x9e3779b97f4a7c15ull}, check = out;
	static unsigned char pend[65536], buf[65536];
	size_t pend_len = 0, pend_off = 0;
	long long made = 0, sent = 0, got = 0;
	int mismatch = 0, wr_open = bytes > 0;
	uint64_t h = FNV_START;

	if (!wr_open && shutdown(fd, SHUT_WR) < 0)
		die("shutdown");
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};

		if (poll(&p, 1, 30000) <= 0)
			die("poll (no progress in 30 s)");
		if (wr_open && (p.revents & POLLOUT)) {
			ssize_t w;

			if (pend_off == pend_len) {
				pend_len = bytes - made < (long long)sizeof(pend)
					       ? (size_t)(bytes - made)
					       : sizeof(pend);
				for (size_t i = 0; i < pend_len; i++)
					pend[i] = stream_next(&out);
				made += (long long)pend_len;
				pend_off = 0;
			}
			w = send(fd, pend + pend_off, pend_len - pend_off, MSG_DONTWAIT);
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				die("send");
			if (w > 0) {
				h = fnv(h, pend + pend_off, (size_t)w);
				pend_off += (size_t)w;
				sent += w;
			}
			if (sent == bytes) {
				if (shutdown(fd, SHUT_WR) < 0)
					die("shutdown");
				wr_open = 0;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n < 0)
				die("recv");
			if (n == 0)
				break;
			for (ssize_t i = 0; i < n; i++)
				mismatch |= buf[i] != stream_next(&check);
			got += n;
		}
	}
	*sent_fnv = h;
	if (got != bytes || wr_open)
		fprintf(stderr, "smc_sockets: echo of %lld bytes, sent %lld of %lld\n",
			got, sent, bytes);
	if (mismatch)
		fprintf(stderr, "smc_sockets: the echo differs from what was sent\n");
	return got == bytes && !wr_open && !mismatch ? 0 : 1;
}

static int client(struct sock_spec s, int port, long long bytes, int hold_ms)
{
	struct sockaddr_storage ss;
	socklen_t len = address(s, getenv("SMC_SOCKETS_ADDR"), port, &ss);
	const char *local = getenv("SMC_SOCKETS_LOCAL");
	uint64_t h = 0;
	int rc, fd = make_socket(s);

	if (fd < 0)
		die("socket");
	check_identity(fd, s);
	if (local) {
		struct sockaddr_storage ls;
		socklen_t llen = address(s, local, 0, &ls);

		if (bind(fd, (struct sockaddr *)&ls, llen) < 0)
			die("bind");
	}
	if (connect(fd, (struct sockaddr *)&ss, len) < 0)
		die("connect");
	check_address_family(fd, s, 0);
	check_address_family(fd, s, 1);
	rc = exchange(fd, bytes, &h);
	printf("exchanged\n");
	fflush(stdout);
	if (hold_ms > 0) {
		struct timespec t = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};

		nanosleep(&t, NULL);
	}
	close(fd);
	printf("sent %lld fnv %016llx\n", bytes, (unsigned long long)h);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "probe") == 0)
		return probe(parse_spec(argv[2], argv[3]));
	if (argc >= 5 && strcmp(argv[1], "server") == 0)
		server(parse_spec(argv[2], argv[3]), atoi(argv[4]));
	if (argc >= 6 && strcmp(argv[1], "client") == 0)
		return client(parse_spec(argv[2], argv[3]), atoi(argv[4]), atoll(argv[5]),
			      argc >= 7 ? atoi(argv[6]) : 0);
	fprintf(stderr, "usage: smc_sockets probe|server|client KIND FAMILY ...\n");
	return 64;
}
