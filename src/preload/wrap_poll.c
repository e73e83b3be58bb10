/* SPDX-License-Identifier: MIT */
/*
 * Readiness: poll/ppoll (and their fortify variants), select/pselect,
 * epoll_create/create1/ctl/wait/pwait/pwait2.
 *
 * All pass through in this issue. SMC-mode sockets make their readiness
 * visible to the kernel through a per-connection doorbell fd that
 * epoll_ctl registers in the program's own epoll set in place of the TCP
 * socket (docs/design.md section 5); poll and select will translate fd
 * arrays. epoll_create* clear stale table entries like every call that
 * creates an fd.
 */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "preload/preload.h"

/* glibc's fortify entry points; declared only under _FORTIFY_SOURCE. */
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		const sigset_t *mask, size_t fdslen);

SMCR_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	smcr_preload_enter();
	return smcr_real.poll(fds, nfds, timeout);
}

SMCR_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__poll_chk);
	return smcr_real.__poll_chk(fds, nfds, timeout, fdslen);
}

SMCR_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		      const sigset_t *mask)
{
	smcr_preload_enter();
	return smcr_real.ppoll(fds, nfds, timeout, mask);
}

SMCR_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			    const sigset_t *mask, size_t fdslen)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__ppoll_chk);
	return smcr_real.__ppoll_chk(fds, nfds, timeout, mask, fdslen);
}

SMCR_EXPORT int select(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		       struct timeval *timeout)
{
	smcr_preload_enter();
	return smcr_real.select(nfds, readfds, writefds, exceptfds, timeout);
}

SMCR_EXPORT int pselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
			const struct timespec *timeout, const sigset_t *mask)
{
	smcr_preload_enter();
	return smcr_real.pselect(nfds, readfds, writefds, exceptfds, timeout, mask);
}

SMCR_EXPORT int epoll_create(int size)
{
	int fd;

	smcr_preload_enter();
	fd = smcr_real.epoll_create(size);
	if (fd >= 0)
		smcr_preload_forget(fd);
	return fd;
}

SMCR_EXPORT int epoll_create1(int flags)
{
	int fd;

	smcr_preload_enter();
	fd = smcr_real.epoll_create1(flags);
	if (fd >= 0)
		smcr_preload_forget(fd);
	return fd;
}

SMCR_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	smcr_preload_enter();
	return smcr_real.epoll_ctl(epfd, op, fd, event);
}

SMCR_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	smcr_preload_enter();
	return smcr_real.epoll_wait(epfd, events, maxevents, timeout);
}

SMCR_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
			    const sigset_t *mask)
{
	smcr_preload_enter();
	return smcr_real.epoll_pwait(epfd, events, maxevents, timeout, mask);
}

SMCR_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
			     const struct timespec *timeout, const sigset_t *mask)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(epoll_pwait2);
	return smcr_real.epoll_pwait2(epfd, events, maxevents, timeout, mask);
}
