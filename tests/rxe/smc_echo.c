// SPDX-License-Identifier: MIT
/*
 * smc_echo: one connection over the kernel's AF_SMC sockets: the client sends BYTES
 * bytes, the server echoes them, the client checks the echo. Whether the kernel really
 * used SMC-R (and not its TCP fallback) is for the caller to see, e.g. from RoCE
 * counters on the wire.
 *
 *   smc_echo server LOCAL_ADDR PORT BYTES
 *   smc_echo client SERVER_ADDR PORT BYTES LOCAL_ADDR
 *
 * After the echo each side prints what the kernel's smc_diag says of its socket
 * ("smc_diag mode=SMC-R" or "mode=TCP-fallback reason=... peer_diagnosis=...").
 *
 * Every socket call is bounded by a timeout. Exit 0 on a correct echo, 1 otherwise.
 */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
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
#define ACCEPT_TIMEOUT_MS 60000 /* a client under smc_run on a loaded TCG guest takes >20 s */
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
	req.r.diag_ext = 1 << (SMC_DIAG_FALLBACK - 1);
	if (send(fd, &req, sizeof(req), 0) < 0)
		done = 1;
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n <= 0)
			break;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct smc_diag_fallback *fb = NULL;
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
			if (m->diag_mode == SMC_DIAG_MODE_FALLBACK_TCP)
				printf("%s: smc_diag mode=TCP-fallback reason=%#010x peer_diagnosis=%#010x\n",
				       side, fb ? fb->reason : 0, fb ? fb->peer_diagnosis : 0);
			else
				printf("%s: smc_diag mode=%s\n", side,
				       m->diag_mode == SMC_DIAG_MODE_SMCR   ? "SMC-R"
				       : m->diag_mode == SMC_DIAG_MODE_SMCD ? "SMC-D"
									: "unknown");
		}
	}
	if (!found)
		printf("%s: smc_diag has no record of our socket\n", side);
	fflush(stdout);
	close(fd);
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

static int server(const char *addr, const char *port, size_t bytes)
{
	struct sockaddr_storage local;
	socklen_t len;
	int one = 1, lfd, fd, rc = 1;

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
	struct pollfd pfd = {.fd = lfd, .events = POLLIN};
	if (poll(&pfd, 1, ACCEPT_TIMEOUT_MS) != 1) {
		fprintf(stderr, "smc_echo: no connection within %d ms\n",
			ACCEPT_TIMEOUT_MS);
		goto out;
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0) {
		fail("accept");
		goto out;
	}
	/* echo as it arrives; the client reads while it sends */
	unsigned char buf[CHUNK];
	size_t done = 0;
	while (done < bytes) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r <= 0) {
			fail(r ? "recv" : "recv: early close");
			break;
		}
		for (ssize_t off = 0; off < r;) {
			ssize_t w = send(fd, buf + off, (size_t)(r - off), MSG_NOSIGNAL);
			if (w <= 0) {
				fail("send");
				goto closed;
			}
			off += w;
		}
		done += (size_t)r;
	}
closed:
	if (done == bytes)
		rc = 0;
	diag_report(fd, "server");
	close(fd);
out:
	close(lfd);
	return rc;
}

static int client(const char *addr, const char *port, size_t bytes,
		  const char *local_addr)
{
	struct sockaddr_storage peer, local;
	socklen_t peer_len, local_len;
	int fd, rc = 1;

	if (resolve(addr, port, &peer, &peer_len) ||
	    resolve(local_addr, "0", &local, &local_len))
		return 1;
	fd = smc_socket(&peer);
	if (fd < 0)
		return 1;
	if (bind(fd, (struct sockaddr *)&local, local_len) ||
	    connect(fd, (struct sockaddr *)&peer, peer_len)) {
		fail("bind/connect");
		goto out;
	}
	if (exchange(fd, bytes))
		goto out;
	printf("echoed %zu bytes over AF_SMC\n", bytes);
	diag_report(fd, "client");
	rc = 0;
out:
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3], strtoul(argv[4], NULL, 0));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], strtoul(argv[4], NULL, 0), argv[5]);
	fprintf(stderr, "usage: smc_echo server LOCAL_ADDR PORT BYTES\n"
			"       smc_echo client SERVER_ADDR PORT BYTES LOCAL_ADDR\n");
	return 2;
}
