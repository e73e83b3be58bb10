/* SPDX-License-Identifier: MIT */
/*
 * Small readers of socket addresses both layers take apart.
 */
#ifndef SMCR_COMMON_SOCKADDR_H
#define SMCR_COMMON_SOCKADDR_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

/* The port of an AF_INET or AF_INET6 address, host order; 0 for any other family. */
static inline uint16_t smcr_sockaddr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
	return 0;
}

#endif /* SMCR_COMMON_SOCKADDR_H */
