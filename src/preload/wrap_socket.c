/* SPDX-License-Identifier: MIT */
/*
 * Socket life cycle: socket, socketpair, bind, listen, connect, accept,
 * accept4, shutdown, get/setsockopt, getsockname, getpeername.
 *
 * Only TCP stream sockets (AF_INET/AF_INET6, SOCK_STREAM, protocol 0 or
 * IPPROTO_TCP) enter the fd table; every other socket passes through and
 * merely clears a stale entry its number may have had. listen registers
 * the listener for same-host SMC (and, before it, marks it for RFC 7609's TCP
 * option when that mode is on), connect marks the socket for the option before
 * the SYN and runs the client's handshake (at
 * once, or after a non-blocking connect completes), accepted sockets are
 * classified at their first I/O; shutdown and a few socket options answer
 * from the engine in SMC mode (smc_data.c).  Sockets of programs that ask for SMC
 * themselves (AF_SMC, IPPROTO_SMC) are served as TCP sockets where the kernel
 * cannot serve them (af_smc.c).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "preload/af_smc.h"
#include "preload/preload.h"

static bool is_tcp_stream(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

static const char *domain_name(int domain)
{
	return domain == AF_INET6 ? "AF_INET6" : "AF_INET";
}

SMCR_EXPORT int socket(int domain, int type, int protocol)
{
	int fd;

	smcr_preload_enter();
	if (unlikely(smcr_af_smc_requested(domain, type, protocol)))
		return smcr_af_smc_socket(domain, type, protocol);
	fd = smcr_real.socket(domain, type, protocol);
	if (fd < 0)
		return fd;
	if (smcr_preload_tracking() && is_tcp_stream(domain, type, protocol)) {
		if (smcr_preload_track(fd, domain,
				       SMCR_FD_F_NO_TIMEO |
					       ((type & SOCK_NONBLOCK) ? SMCR_FD_F_NONBLOCK : 0)))
			smcr_dbg("fd %d: %s TCP socket tracked", fd, domain_name(domain));
		else
			smcr_dbg("fd %d: %s TCP socket not tracked (beyond table or no memory)",
				 fd, domain_name(domain));
	} else {
		smcr_preload_forget(fd);
	}
	return fd;
}

SMCR_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	int ret;

	smcr_preload_enter();
	ret = smcr_real.socketpair(domain, type, protocol, sv);
	if (ret == 0) {
		smcr_preload_forget(sv[0]);
		smcr_preload_forget(sv[1]);
	}
	return ret;
}

SMCR_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	smcr_preload_enter();
	return smcr_real.bind(fd, addr, len);
}

static void add_flags(int fd, unsigned flags)
{
	struct smcr_fd_entry *entry = smcr_fdtab_peek(fd);

	if (entry && smcr_preload_table_writable())
		atomic_fetch_or_explicit(&entry->flags, flags, memory_order_relaxed);
}

SMCR_EXPORT int listen(int fd, int backlog)
{
	int ret;

	smcr_preload_enter();
	if (!smcr_guard_inside())
		smcr_smc_before_listen(fd);
	ret = smcr_real.listen(fd, backlog);
	if (ret == 0 && !smcr_guard_inside()) {
		add_flags(fd, SMCR_FD_F_LISTENING);
		smcr_smc_after_listen(fd);
	}
	return ret;
}

SMCR_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int ret;

	smcr_preload_enter();
	if (smcr_guard_inside())
		return smcr_real.connect(fd, addr, len);
	smcr_smc_before_connect(fd, addr, len);
	add_flags(fd, SMCR_FD_F_CONNECTING);
	ret = smcr_real.connect(fd, addr, len);
	if (ret == 0 && smcr_preload_table_writable() && smcr_fdtab_peek(fd))
		ret = smcr_smc_after_connect(fd, ret);
	return ret;
}

/*
 * The peer's address accept() wrote, if it is whole (`got` <= `room`): the
 * connection's stats record needs it if it stays TCP, and asking the kernel
 * again would cost a system call per connection.
 */
static void keep_peer(struct smcr_fd_entry *e, const struct sockaddr *addr, socklen_t got,
		      socklen_t room)
{
	if (!addr || got > room || got > (socklen_t)sizeof(e->accepted_peer) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return;
	memcpy(&e->accepted_peer, addr, got);
}

/* An accepted connection of a tracked listener is a tracked TCP socket. */
static int after_accept(int listen_fd, int fd, int flags, const struct sockaddr *addr,
			socklen_t got, socklen_t room)
{
	struct smcr_fd_entry *listener;

	if (fd < 0)
		return fd;
	listener = smcr_preload_tracking() ? smcr_fdtab_peek(listen_fd) : NULL;
	if (listener) {
		int domain = listener->domain;
		/* The kernel's SMC listener hands out SMC sockets of its own kind. */
		unsigned inherited = smcr_fd_entry_flags(listener) &
				     (SMCR_FD_F_ASKED_SMC | SMCR_FD_F_NO_TIMEO);

		if (!smcr_fdtab_same_fork(listener))
			inherited &= ~SMCR_FD_F_NO_TIMEO;

		if (smcr_preload_track(fd, domain,
				       SMCR_FD_F_ACCEPTED | inherited |
					       ((flags & SOCK_NONBLOCK) ? SMCR_FD_F_NONBLOCK : 0))) {
			smcr_dbg("fd %d: accepted on fd %d, %s TCP socket tracked", fd, listen_fd,
				 domain_name(domain));
			keep_peer(smcr_fdtab_peek(fd), addr, got, room);
			smcr_smc_after_accept(listen_fd, fd);
		}
	} else {
		smcr_preload_forget(fd);
	}
	return fd;
}

/*
 * accept() and accept4() (`flags` < 0: accept): where the program asks for no
 * address, the kernel writes it into ours, at no cost.
 */
static int accept_any(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct sockaddr_storage own;
	socklen_t own_len = sizeof(own), room;
	int c;

	if (!addr) {
		addr = (struct sockaddr *)&own;
		len = &own_len;
	}
	room = len ? *len : 0;
	c = flags < 0 ? smcr_real.accept(fd, addr, len) : smcr_real.accept4(fd, addr, len, flags);
	return after_accept(fd, c, flags < 0 ? 0 : flags, addr, c >= 0 && len ? *len : room + 1,
			    room);
}

SMCR_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	smcr_preload_enter();
	return accept_any(fd, addr, len, -1);
}

SMCR_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	smcr_preload_enter();
	return accept_any(fd, addr, len, flags);
}

SMCR_EXPORT int shutdown(int fd, int how)
{
	smcr_preload_enter();
	if (smcr_preload_divert(fd)) {
		bool handled;
		int ret = smcr_smc_shutdown(fd, how, &handled);

		if (handled)
			return ret;
	}
	return smcr_real.shutdown(fd, how);
}

SMCR_EXPORT int getsockopt(int fd, int level, int name, void *value, socklen_t *len)
{
	int ret;

	smcr_preload_enter();
	if (smcr_af_smc_getsockopt(fd, level, name, value, len, &ret))
		return ret;
	if (smcr_preload_divert(fd)) {
		bool handled;

		ret = smcr_smc_getsockopt(fd, level, name, value, len, &handled);
		if (handled)
			return ret;
	}
	return smcr_real.getsockopt(fd, level, name, value, len);
}

SMCR_EXPORT int setsockopt(int fd, int level, int name, const void *value, socklen_t len)
{
	int ret;

	smcr_preload_enter();
	if (smcr_af_smc_setsockopt(fd, level, name, value, len, &ret))
		return ret;
	if (unlikely(level == IPPROTO_TCP && name == TCP_ULP) && smcr_fdtab_is_smc(fd)) {
		smcr_smc_refuse_ulp(fd, value, len);
		errno = EOPNOTSUPP;
		return -1;
	}
	ret = smcr_real.setsockopt(fd, level, name, value, len);
	if (ret == 0 && level == SOL_SOCKET) {
		smcr_smc_note_setsockopt(fd, level, name);
		if (name == SO_REUSEPORT || name == SO_BINDTODEVICE || name == SO_BINDTOIFINDEX)
			smcr_smc_listener_shared(fd);
	}
	if (ret == 0 && smcr_preload_divert(fd))
		smcr_smc_after_setsockopt(fd, level, name, value, len);
	return ret;
}

SMCR_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	smcr_preload_enter();
	return smcr_real.getsockname(fd, addr, len);
}

SMCR_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	smcr_preload_enter();
	return smcr_real.getpeername(fd, addr, len);
}
