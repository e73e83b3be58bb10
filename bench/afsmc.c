// SPDX-License-Identifier: MIT
/*
 * afsmc.so: puts an unmodified program on the Linux kernel's own SMC, as IBM smc-tools'
 * libsmc-preload.so does (smc-tools is not packaged in Debian 12): every
 * socket(AF_INET or AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP) becomes
 * socket(AF_SMC, SOCK_STREAM, SMCPROTO_SMC or SMCPROTO_SMC6). The kernel then negotiates
 * SMC (its TCP option in SYN/SYN-ACK, CLC over TCP) and falls back to TCP by itself; the
 * program's addresses, options and calls stay those of TCP.
 *
 *   LD_PRELOAD=/path/afsmc.so PROGRAM ARGS...
 *
 * bench/rxe uses it for the kernel's columns, so that they run the very programs the
 * plain and smcr columns run. Nothing else is wrapped: accept() on an AF_SMC listener
 * returns AF_SMC sockets by itself. If AF_SMC is missing (no smc.ko) socket() fails with
 * the kernel's error rather than quietly handing out TCP.
 */
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC  0 /* the TCP connection underneath is IPv4 */
#define SMCPROTO_SMC6 1 /* ... IPv6 */

typedef int (*socket_fn)(int, int, int);

int socket(int domain, int type, int protocol)
{
	static socket_fn real;

	if (!real) {
		void *sym = dlsym(RTLD_NEXT, "socket");

		memcpy(&real, &sym, sizeof(real));
	}
	if ((domain == AF_INET || domain == AF_INET6) &&
	    (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP))
		return real(AF_SMC, type, domain == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC);
	return real(domain, type, protocol);
}
