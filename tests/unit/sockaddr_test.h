/* SPDX-License-Identifier: MIT */
/*
 * Socket addresses from their text, for the unit tests that hand addresses to
 * the policy or bind and connect real sockets.  Include after <cmocka.h>.
 */
#ifndef SMCR_TESTS_UNIT_SOCKADDR_TEST_H
#define SMCR_TESTS_UNIT_SOCKADDR_TEST_H

#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* "10.0.0.1" or "fd77::2" (any text with a colon is IPv6) and a port; the test fails on bad text. */
static inline struct sockaddr_storage sockaddr_of(const char *addr, unsigned port)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		assert_int_equal(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		assert_int_equal(inet_pton(AF_INET, addr, &in->sin_addr), 1);
	}
	return ss;
}

/* The length bind() and connect() want for an address of sockaddr_of(). */
static inline socklen_t sockaddr_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

#endif /* SMCR_TESTS_UNIT_SOCKADDR_TEST_H */
