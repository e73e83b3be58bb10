/* SPDX-License-Identifier: MIT */
/*
 * Sockets of programs that ask for SMC themselves: socket(AF_SMC,
 * SOCK_STREAM, SMCPROTO_SMC or SMCPROTO_SMC6), as IBM smc-tools' preload
 * rewrites a program's TCP sockets, and socket(AF_INET or AF_INET6,
 * SOCK_STREAM, IPPROTO_SMC) (Linux 6.11 and later).
 *
 * Where the kernel cannot serve them (no smc module: it refuses the family
 * or the protocol), or SMCR_AF_SMC=smcr says smcr serves them anyway, the
 * program gets the TCP socket the kernel's SMC would have put underneath,
 * tracked with SMCR_FD_F_AF_SMC or SMCR_FD_F_IPPROTO_SMC: it then runs SMC
 * where smcr finds an SMC peer and falls back to TCP as the kernel's does,
 * and answers what programs ask an SMC socket (SO_DOMAIN, SO_PROTOCOL,
 * SOL_SMC options) as the kernel's would.  Addresses stay AF_INET/AF_INET6,
 * as the kernel's SMC sockets report them.
 */
#ifndef SMCR_PRELOAD_AF_SMC_H
#define SMCR_PRELOAD_AF_SMC_H

#include <stdbool.h>
#include <sys/socket.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#ifndef SOL_SMC
#define SOL_SMC 286
#endif
#ifndef IPPROTO_SMC
#define IPPROTO_SMC 256
#endif
#define SMCR_SMCPROTO_SMC  0 /* socket(AF_SMC, ...): IPv4 underneath */
#define SMCR_SMCPROTO_SMC6 1 /* ... IPv6 underneath */
#define SMCR_SMC_LIMIT_HS  1 /* SOL_SMC option: limit the server's handshakes */

/* Does socket(domain, type, protocol) ask for SMC in one of the two ways? */
static inline bool smcr_af_smc_requested(int domain, int type, int protocol)
{
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM)
		return false;
	if (domain == AF_SMC)
		return protocol == SMCR_SMCPROTO_SMC || protocol == SMCR_SMCPROTO_SMC6;
	return protocol == IPPROTO_SMC && (domain == AF_INET || domain == AF_INET6);
}

/*
 * socket() for such a request: the kernel's socket when it serves it (or
 * smcr is not active, or SMCR_AF_SMC=kernel), else a tracked TCP socket.
 * Returns the fd, or -1 with errno (the kernel's, when smcr does not serve).
 */
int smcr_af_smc_socket(int domain, int type, int protocol);

/*
 * getsockopt/setsockopt of a socket smcr serves for such a request: true
 * when the call was answered here (*ret and errno set), false when it goes
 * to the kernel's TCP socket.
 */
bool smcr_af_smc_getsockopt(int fd, int level, int name, void *value, socklen_t *len,
			    int *ret);
bool smcr_af_smc_setsockopt(int fd, int level, int name, const void *value, socklen_t len,
			    int *ret);

#endif /* SMCR_PRELOAD_AF_SMC_H */
