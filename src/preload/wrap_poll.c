/* SPDX-License-Identifier: MIT */
/*
 * Readiness: poll/ppoll (and their fortify variants), select/pselect,
 * epoll_create/create1/ctl/wait/pwait/pwait2.
 *
 * SMC-mode sockets make their readiness visible to the kernel through a
 * per-connection doorbell fd that epoll_ctl registers in the program's own
 * epoll set in place of the TCP socket (design §5); poll and
 * select translate fd arrays (smc_poll.c). Calls without an SMC socket (or
 * a connecting candidate) pass through after one scan of their fds.
 * epoll_create* clear stale table entries like every call that creates an
 * fd.
 */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include <stdint.h>
#include <time.h>

#include "common/spin.h"
#include "preload/preload.h"

static struct timespec *ms_timespec(int timeout, struct timespec *ts)
{
	if (timeout < 0)
		return NULL;
	ts->tv_sec = timeout / 1000;
	ts->tv_nsec = (long)(timeout % 1000) * 1000000;
	return ts;
}

/* glibc's fortify entry points; declared only under _FORTIFY_SOURCE. */
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		const sigset_t *mask, size_t fdslen);

SMCR_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct timespec ts;

	smcr_preload_enter();
	if (smcr_smc_poll_needed(fds, nfds))
		return smcr_smc_ppoll(fds, nfds, ms_timespec(timeout, &ts), NULL);
	return smcr_real.poll(fds, nfds, timeout);
}

SMCR_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	struct timespec ts;

	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__poll_chk);
	if (fdslen / sizeof(*fds) >= nfds && smcr_smc_poll_needed(fds, nfds))
		return smcr_smc_ppoll(fds, nfds, ms_timespec(timeout, &ts), NULL);
	return smcr_real.__poll_chk(fds, nfds, timeout, fdslen);
}

SMCR_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		      const sigset_t *mask)
{
	smcr_preload_enter();
	if (smcr_smc_poll_needed(fds, nfds))
		return smcr_smc_ppoll(fds, nfds, timeout, mask);
	return smcr_real.ppoll(fds, nfds, timeout, mask);
}

SMCR_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			    const sigset_t *mask, size_t fdslen)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__ppoll_chk);
	if (fdslen / sizeof(*fds) >= nfds && smcr_smc_poll_needed(fds, nfds))
		return smcr_smc_ppoll(fds, nfds, timeout, mask);
	return smcr_real.__ppoll_chk(fds, nfds, timeout, mask, fdslen);
}

SMCR_EXPORT int select(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		       struct timeval *timeout)
{
	smcr_preload_enter();
	if (smcr_smc_select_needed(nfds, readfds, writefds, exceptfds)) {
		struct timespec ts;

		if (timeout) {
			ts.tv_sec = timeout->tv_sec;
			ts.tv_nsec = timeout->tv_usec * 1000;
		}
		return smcr_smc_pselect(nfds, readfds, writefds, exceptfds,
					timeout ? &ts : NULL, NULL);
	}
	return smcr_real.select(nfds, readfds, writefds, exceptfds, timeout);
}

SMCR_EXPORT int pselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
			const struct timespec *timeout, const sigset_t *mask)
{
	smcr_preload_enter();
	if (smcr_smc_select_needed(nfds, readfds, writefds, exceptfds))
		return smcr_smc_pselect(nfds, readfds, writefds, exceptfds, timeout, mask);
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
	return smcr_smc_epoll_ctl(epfd, op, fd, event);
}

/*
 * Reports of SMC doorbells and candidates are translated; when every report
 * was a spurious doorbell, wait again for what is left of the timeout.
 */
static int epoll_wait_loop(int epfd, struct epoll_event *events, int maxevents, int timeout,
			   const sigset_t *mask, bool pwait)
{
	int64_t deadline = timeout > 0 ? smcr_now_ms() + timeout : 0;
	int wait_ms = timeout;

	for (;;) {
		int n = pwait ? smcr_real.epoll_pwait(epfd, events, maxevents, wait_ms, mask)
			      : smcr_real.epoll_wait(epfd, events, maxevents, wait_ms);

		if (n <= 0 || !smcr_smc_epoll_active() || smcr_guard_inside())
			return n;
		n = smcr_smc_epoll_filter(epfd, events, n);
		if (n > 0 || timeout == 0)
			return n;
		if (timeout > 0) {
			int64_t left = deadline - smcr_now_ms();

			if (left <= 0)
				return 0;
			wait_ms = (int)left;
		}
	}
}

/*
 * SMCR_SPIN_US > 0 (opt-in): first spin without blocking while a peer of an
 * SMC socket in the set runs (its answer is microseconds away, a sleep and
 * wake-up pair costs more), then wait for what is left of the timeout.
 */
static int epoll_wait_translated(int epfd, struct epoll_event *events, int maxevents,
				 int timeout, const sigset_t *mask, bool pwait)
{
	struct smcr_smc_spin_set spin = { .n = 0 };
	int64_t start;
	int n;

	if (timeout != 0 && !smcr_guard_inside())
		smcr_smc_settle_io();
	if (smcr_smc_spin_us <= 0 || timeout == 0 || !smcr_smc_epoll_active() ||
	    smcr_guard_inside())
		return epoll_wait_loop(epfd, events, maxevents, timeout, mask, pwait);
	start = smcr_now_ms();
	n = smcr_smc_epoll_spin(epfd, events, maxevents, mask, pwait, &spin);
	if (n == 0) {
		if (timeout > 0) {
			int64_t left = timeout - (smcr_now_ms() - start);

			timeout = left > 0 ? (int)left : 0;
		}
		n = epoll_wait_loop(epfd, events, maxevents, timeout, mask, pwait);
	}
	smcr_smc_epoll_spin_end(&spin);
	return n;
}

SMCR_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	smcr_preload_enter();
	return epoll_wait_translated(epfd, events, maxevents, timeout, NULL, false);
}

SMCR_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
			    const sigset_t *mask)
{
	smcr_preload_enter();
	return epoll_wait_translated(epfd, events, maxevents, timeout, mask, true);
}

SMCR_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
			     const struct timespec *timeout, const sigset_t *mask)
{
	int64_t ms = timeout ? timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000 : -1;
	struct smcr_smc_spin_set spin = { .n = 0 };
	struct timespec left;
	int n;

	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(epoll_pwait2);
	if (ms != 0 && !smcr_guard_inside())
		smcr_smc_settle_io();
	if (smcr_smc_spin_us > 0 && ms != 0 && smcr_smc_epoll_active() && !smcr_guard_inside()) {
		/* As epoll_wait: spin first, then wait for what is left of the timeout. */
		int64_t start = smcr_now_ns();

		n = smcr_smc_epoll_spin(epfd, events, maxevents, mask, true, &spin);
		if (n != 0) {
			smcr_smc_epoll_spin_end(&spin);
			return n;
		}
		if (timeout) {
			int64_t ns = timeout->tv_sec * 1000000000LL + timeout->tv_nsec -
				     (smcr_now_ns() - start);

			if (ns < 0)
				ns = 0;
			left.tv_sec = ns / 1000000000;
			left.tv_nsec = ns % 1000000000;
			timeout = &left;
			ms = (ns + 999999) / 1000000;
		}
	}
	/* The first wait keeps the caller's precision; later ones are in ms. */
	n = smcr_real.epoll_pwait2(epfd, events, maxevents, timeout, mask);
	if (n > 0 && smcr_smc_epoll_active() && !smcr_guard_inside() &&
	    (n = smcr_smc_epoll_filter(epfd, events, n)) == 0 && ms != 0) {
		if (ms > INT32_MAX)
			ms = INT32_MAX;
		/* Only spurious doorbells: the rest of the time, without a second spin. */
		n = epoll_wait_loop(epfd, events, maxevents, (int)ms, mask, true);
	}
	smcr_smc_epoll_spin_end(&spin);
	return n;
}
