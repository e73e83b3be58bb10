/* SPDX-License-Identifier: MIT */
/*
 * Sockets of programs that ask for SMC themselves (af_smc.h).
 *
 * The kernel's SMC socket is an SMC layer over a TCP socket of the family
 * its protocol names (AF_SMC: SMCPROTO_SMC = IPv4, SMCPROTO_SMC6 = IPv6;
 * IPPROTO_SMC: the family of the call).  Addresses, bind, connect, accept
 * and the TCP-level options all go to that TCP socket, so the TCP socket
 * smcr hands out answers them as the kernel's would.  What the TCP socket
 * would answer differently is answered here from the fd table: the
 * socket's own domain and protocol (the kernel's AF_SMC socket reports
 * AF_SMC and 0 or 1; its IPPROTO_SMC socket its inet family and 256), and
 * the SOL_SMC level, where Linux has one option, SMC_LIMIT_HS.
 *
 * SMC_LIMIT_HS asks the kernel's listener to stop offering SMC while its
 * handshake work queue is congested.  smcr runs each server handshake in
 * the thread that uses the socket, with no queue to congest: the value is
 * kept and reported, and changes nothing.
 */
#include "preload/af_smc.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "preload/preload.h"

/* The family of the TCP socket the kernel's SMC socket would sit on. */
static int tcp_domain_of(int domain, int protocol)
{
	if (domain == AF_SMC)
		return protocol == SMCR_SMCPROTO_SMC6 ? AF_INET6 : AF_INET;
	return domain;
}

static const char *request_name(int domain, int protocol)
{
	if (domain == AF_SMC)
		return protocol == SMCR_SMCPROTO_SMC6
			   ? "AF_SMC, SOCK_STREAM, SMCPROTO_SMC6"
			   : "AF_SMC, SOCK_STREAM, SMCPROTO_SMC";
	return domain == AF_INET6 ? "AF_INET6, SOCK_STREAM, IPPROTO_SMC"
				  : "AF_INET, SOCK_STREAM, IPPROTO_SMC";
}

/*
 * The errors of a kernel without SMC: no AF_SMC family (EAFNOSUPPORT), no
 * IPPROTO_SMC (EPROTONOSUPPORT; EINVAL where the kernel predates protocol
 * numbers above 255).  Anything else (EACCES from a security module, EMFILE)
 * is the kernel's answer to this program and stands.
 */
static bool kernel_lacks_smc(int err)
{
	return err == EAFNOSUPPORT || err == EPROTONOSUPPORT || err == EINVAL;
}

static int serve_with_tcp(int domain, int type, int protocol, int kernel_err)
{
	int tcp_domain = tcp_domain_of(domain, protocol);
	unsigned flags = (domain == AF_SMC ? SMCR_FD_F_AF_SMC : SMCR_FD_F_IPPROTO_SMC) |
			 SMCR_FD_F_NO_TIMEO |
			 ((type & SOCK_NONBLOCK) ? SMCR_FD_F_NONBLOCK : 0);
	int fd = smcr_real.socket(tcp_domain, type, IPPROTO_TCP);

	if (fd < 0)
		return fd;
	if (!smcr_preload_track(fd, tcp_domain, flags)) {
		/*
		 * Untracked, it would be a plain TCP socket that says it is one:
		 * the program gets what it would have got without smcr.
		 */
		smcr_real.close(fd);
		smcr_dbg("socket(%s): fd %d beyond the fd table, not served by smcr",
			 request_name(domain, protocol), fd);
		errno = kernel_err ? kernel_err : ENOBUFS;
		return -1;
	}
	smcr_info("fd %d: socket(%s) served by smcr as an %s TCP socket (%s%s)", fd,
		  request_name(domain, protocol),
		  tcp_domain == AF_INET6 ? "AF_INET6" : "AF_INET",
		  kernel_err ? "the kernel: " : "SMCR_AF_SMC=smcr",
		  kernel_err ? strerror(kernel_err) : "");
	return fd;
}

int smcr_af_smc_socket(int domain, int type, int protocol)
{
	int policy = smcr_config_get()->af_smc;
	int fd;

	if (!smcr_preload_tracking() || policy == SMCR_CONFIG_AF_SMC_KERNEL)
		return smcr_real.socket(domain, type, protocol);
	if (policy == SMCR_CONFIG_AF_SMC_SMCR)
		return serve_with_tcp(domain, type, protocol, 0);
	fd = smcr_real.socket(domain, type, protocol);
	if (fd >= 0) {
		/* The kernel's SMC serves it: none of ours. */
		smcr_preload_forget(fd);
		return fd;
	}
	if (!kernel_lacks_smc(errno))
		return fd;
	return serve_with_tcp(domain, type, protocol, errno);
}

/* The SMCR_FD_F_* flags of a socket smcr serves for an SMC request, or 0. */
static unsigned asked_smc_flags(int fd)
{
	struct smcr_fd_entry *e;

	if (smcr_guard_inside())
		return 0; /* the engine's own calls see the TCP socket */
	e = smcr_fdtab_peek(fd);
	return e ? smcr_fd_entry_flags(e) & (SMCR_FD_F_ASKED_SMC | SMCR_FD_F_SMC_LIMIT_HS)
		 : 0;
}

/* An int option as the kernel copies it out: at most `*len` bytes of it. */
static int put_int_option(void *value, socklen_t *len, int v)
{
	int n;

	if (!len) {
		errno = EFAULT;
		return -1;
	}
	if ((int)*len < 0) {
		errno = EINVAL;
		return -1;
	}
	n = (int)*len < (int)sizeof(v) ? (int)*len : (int)sizeof(v);
	if (!value && n > 0) {
		errno = EFAULT;
		return -1;
	}
	memcpy(value, &v, (size_t)n);
	*len = (socklen_t)n;
	return 0;
}

/* What the kernel's SMC socket reports for SO_DOMAIN and SO_PROTOCOL. */
static int own_domain(int fd, unsigned flags)
{
	struct smcr_fd_entry *e = smcr_fdtab_peek(fd);

	if (flags & SMCR_FD_F_AF_SMC)
		return AF_SMC;
	return e ? e->domain : AF_INET;
}

static int own_protocol(int fd, unsigned flags)
{
	struct smcr_fd_entry *e = smcr_fdtab_peek(fd);

	if (flags & SMCR_FD_F_IPPROTO_SMC)
		return IPPROTO_SMC;
	return e && e->domain == AF_INET6 ? SMCR_SMCPROTO_SMC6 : SMCR_SMCPROTO_SMC;
}

bool smcr_af_smc_getsockopt(int fd, int level, int name, void *value, socklen_t *len,
			    int *ret)
{
	unsigned flags;

	if (level != SOL_SMC &&
	    (level != SOL_SOCKET || (name != SO_DOMAIN && name != SO_PROTOCOL)))
		return false;
	flags = asked_smc_flags(fd);
	if (!(flags & SMCR_FD_F_ASKED_SMC))
		return false;
	if (level == SOL_SOCKET) {
		*ret = put_int_option(value, len,
				      name == SO_DOMAIN ? own_domain(fd, flags)
							: own_protocol(fd, flags));
		return true;
	}
	if (name != SMCR_SMC_LIMIT_HS) {
		errno = EOPNOTSUPP;
		*ret = -1;
		return true;
	}
	*ret = put_int_option(value, len, (flags & SMCR_FD_F_SMC_LIMIT_HS) ? 1 : 0);
	return true;
}

bool smcr_af_smc_setsockopt(int fd, int level, int name, const void *value, socklen_t len,
			    int *ret)
{
	struct smcr_fd_entry *e;
	int v;

	if (level != SOL_SMC || !(asked_smc_flags(fd) & SMCR_FD_F_ASKED_SMC))
		return false;
	*ret = -1;
	if (name != SMCR_SMC_LIMIT_HS) {
		errno = EOPNOTSUPP;
		return true;
	}
	if (len < sizeof(int)) {
		errno = EINVAL;
		return true;
	}
	if (!value) {
		errno = EFAULT;
		return true;
	}
	memcpy(&v, value, sizeof(v));
	e = smcr_fdtab_peek(fd);
	if (e && smcr_preload_table_writable()) {
		if (v)
			atomic_fetch_or_explicit(&e->flags, SMCR_FD_F_SMC_LIMIT_HS,
						 memory_order_relaxed);
		else
			atomic_fetch_and_explicit(&e->flags, ~SMCR_FD_F_SMC_LIMIT_HS,
						  memory_order_relaxed);
	}
	*ret = 0;
	return true;
}
