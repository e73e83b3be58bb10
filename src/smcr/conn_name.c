/* SPDX-License-Identifier: MIT */
/*
 * A connection's addresses for a log line ("local 127.0.0.1:5000, peer
 * 127.0.0.1:40312"), so a reader can tell which connection a line is about
 * without the process's fd table. Two system calls: for log paths only.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "smcr/confine.h"
#include "smcr/engine.h"
#include "smcr/libc.h"

static void format_addr(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, (unsigned)ntohs(in->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
	} else {
		snprintf(buf, size, "?");
	}
}

const char *smcr_conn_name(int tcp_fd, char *buf, size_t size)
{
	struct sockaddr_storage self = { 0 }, peer = { 0 };
	socklen_t slen = sizeof(self), plen = sizeof(peer);
	char a[INET6_ADDRSTRLEN + 8] = "?", b[INET6_ADDRSTRLEN + 8] = "?";

	/* A seccomp filter may deny both (confine.h): "?" rather than a killed process. */
	if (smcr_call_allowed(SMCR_CALL_GETSOCKNAME) &&
	    smcr_libc.getsockname(tcp_fd, (struct sockaddr *)&self, &slen) == 0)
		format_addr(&self, a, sizeof(a));
	if (smcr_call_allowed(SMCR_CALL_GETPEERNAME) &&
	    smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&peer, &plen) == 0)
		format_addr(&peer, b, sizeof(b));
	snprintf(buf, size, "local %s, peer %s", a, b);
	return buf;
}
