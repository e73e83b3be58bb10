// SPDX-License-Identifier: MIT
/*
 * An attacker's CLC client for the server-handshake tests: it connects to
 * HOST PORT (from SRC if given), sends one genuine same-host Proposal (made
 * by the engine's own shm transport and CLC encoder, so the server cannot
 * tell it from a real smcr client's) and then stays silent: no Confirm, no
 * Decline, no rendezvous answer.
 *
 *   hostile_clc HOST PORT HOLD_MS [SRC]
 *
 * Prints one line per event on stdout, flushed at once:
 *   "reply accept" or "reply decline 0xREASON"  (the server's answer; none
 *                                                within 10 s: "reply none")
 *   after HOLD_MS of silence, what the connection shows:
 *   "end reset" | "end eof" | "end open" | "end data"
 * Exit 0 when it got that far, 1 on a local error.
 *
 * With HOSTILE_CLC_SPLIT_MS=N in the environment it sends the Proposal's
 * first 5 bytes, then after N ms the rest of it and at once the 4 bytes
 * "tail", as a client that does not wait for the answer would: a server
 * must take exactly the Proposal off the stream, whatever its reads get.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "smcr/clc.h"
#include "smcr/transport.h"

static int parse_addr(const char *host, int port, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
	return -1;
}

/*
 * The server's reply, consumed alone (its own data may follow a Decline):
 * 1 and *m, 0 none within timeout_ms, -1 closed or not CLC.
 */
static int read_reply(int fd, struct smcr_clc_msg *m, int timeout_ms)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	size_t len = 0;
	enum smcr_clc_err err;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, timeout_ms) <= 0)
			return 0;
		n = recv(fd, buf, sizeof(buf), MSG_PEEK);
		if (n <= 0)
			return -1;
		if (smcr_clc_frame(buf, (size_t)n, &len, &err) == SMCR_WIRE_INVALID ||
		    len > sizeof(buf))
			return -1;
		if (len && (size_t)n >= len)
			break;
		poll(NULL, 0, 1); /* the rest is on its way */
	}
	if (recv(fd, buf, len, 0) != (ssize_t)len)
		return -1;
	return smcr_clc_decode(buf, len, m, &len, &err) == SMCR_WIRE_OK ? 1 : -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage dst, src;
	socklen_t dlen, slen;
	struct smcr_xconn *xc = NULL;
	struct smcr_clc_msg prop, reply;
	uint8_t wire[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t n;
	int fd, hold_ms, rc;
	char c;

	if (argc < 4 || argc > 5 || parse_addr(argv[1], atoi(argv[2]), &dst, &dlen) < 0 ||
	    (argc == 5 && parse_addr(argv[4], 0, &src, &slen) < 0)) {
		fprintf(stderr, "usage: hostile_clc HOST PORT HOLD_MS [SRC]\n");
		return 1;
	}
	hold_ms = atoi(argv[3]);
	fd = socket(dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || (argc == 5 && bind(fd, (struct sockaddr *)&src, slen) < 0) ||
	    connect(fd, (struct sockaddr *)&dst, dlen) < 0) {
		perror("hostile_clc: connect");
		return 1;
	}
	memset(&prop, 0, sizeof(prop));
	if (smcr_shm_ops.create(-1, 16384, 2000, &xc) < 0 ||
	    smcr_shm_ops.client_propose(xc, &prop) != 0) {
		fprintf(stderr, "hostile_clc: cannot make a Proposal\n");
		return 1;
	}
	n = smcr_clc_encode(&prop, wire, sizeof(wire), &err);
	if (getenv("HOSTILE_CLC_SPLIT_MS") && n > 5) {
		uint8_t rest[SMCR_CLC_MAX_LEN + 4];

		memcpy(rest, wire + 5, n - 5);
		memcpy(rest + n - 5, "tail", 4);
		if (send(fd, wire, 5, MSG_NOSIGNAL) != 5) {
			perror("hostile_clc: send");
			return 1;
		}
		poll(NULL, 0, atoi(getenv("HOSTILE_CLC_SPLIT_MS")));
		if (send(fd, rest, n - 1, MSG_NOSIGNAL) != (ssize_t)(n - 1)) {
			perror("hostile_clc: send");
			return 1;
		}
	} else if (n == 0 || send(fd, wire, n, MSG_NOSIGNAL) != (ssize_t)n) {
		perror("hostile_clc: send");
		return 1;
	}
	rc = read_reply(fd, &reply, 10000);
	if (rc == 1 && reply.hdr.type == SMCR_CLC_ACCEPT)
		printf("reply accept\n");
	else if (rc == 1 && reply.hdr.type == SMCR_CLC_DECLINE)
		printf("reply decline 0x%08x\n", reply.decline.diag);
	else
		printf("reply %s\n", rc == 0 ? "none" : "garbage");
	fflush(stdout);
	/* Silence: the server's rendezvous knock and proof stay unanswered. */
	{
		struct pollfd p = {.fd = fd, .events = POLLIN};

		rc = poll(&p, 1, hold_ms);
	}
	if (rc == 0) {
		printf("end open\n");
	} else {
		ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);

		printf("end %s\n", r > 0 ? "data" : r == 0 ? "eof" : "reset");
	}
	fflush(stdout);
	close(fd);
	return 0;
}
