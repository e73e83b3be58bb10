// SPDX-License-Identifier: MIT
/* System helpers for the engine; see sys.h. */
#include "smcr/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "smcr/engine.h"
#include "smcr/libc.h"

int smcr_sys_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int smcr_sys_fd_high(int fd)
{
	int saved = errno, high;

	if (fd < 0 || fd >= SMCR_ENGINE_FD_FLOOR)
		return fd;
	high = smcr_libc.fcntl(fd, F_DUPFD_CLOEXEC, SMCR_ENGINE_FD_FLOOR);
	if (high < 0) {
		errno = saved;
		return fd;
	}
	smcr_libc.close(fd);
	errno = saved;
	return high;
}

int smcr_sys_eventfd(unsigned int initval, int flags)
{
	return smcr_sys_fd_high(smcr_libc.eventfd(initval, flags));
}

int smcr_sys_memfd(const char *name, unsigned int flags)
{
	return smcr_sys_fd_high(smcr_libc.memfd_create(name, flags));
}

void smcr_sys_close(int fd)
{
	int saved = errno;

	if (fd >= 0)
		smcr_libc.close(fd);
	errno = saved;
}

int64_t smcr_sys_deadline(int ms)
{
	return ms < 0 ? -1 : smcr_now_ms() + ms;
}

/*
 * Signals that report a fault of the thread itself: their handlers are crash
 * handlers (sanitizers, JVMs, crash reporters), usually without SA_RESTART,
 * and they do not interrupt a wait in progress.  SIGKILL/SIGSTOP cannot be caught.
 */
static bool is_fault_signal(int sig)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP: case SIGSYS:
	case SIGKILL: case SIGSTOP:
		return true;
	default:
		return false;
	}
}

bool smcr_sys_signal_restarts(void)
{
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (is_fault_signal(sig) || sigaction(sig, NULL, &sa) < 0)
			continue;
		/* sa_handler and sa_sigaction share storage: SIG_DFL/SIG_IGN either way. */
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}

static int wait_fds(struct pollfd *p, unsigned n, int64_t deadline_ms, bool for_app)
{
	for (;;) {
		int timeout = -1;
		int rc;

		if (deadline_ms >= 0) {
			int64_t left = deadline_ms - smcr_now_ms();

			if (left <= 0)
				timeout = 0;
			else
				timeout = left > 60000 ? 60000 : (int)left;
		}
		rc = smcr_libc.poll(p, n, timeout);
		if (rc < 0) {
			/*
			 * poll() is never restarted by the kernel; a socket call
			 * is, with SA_RESTART.  Programs that install handlers
			 * without it (Python, for one) rely on EINTR to run them.
			 */
			if (errno == EINTR && (!for_app || smcr_sys_signal_restarts()))
				continue;
			return -errno;
		}
		if (rc > 0)
			return 1;
		if (deadline_ms >= 0 && smcr_now_ms() >= deadline_ms)
			return 0;
	}
}

int smcr_sys_wait_fd(int fd, short events, int64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	return wait_fds(&p, 1, deadline_ms, false);
}

int smcr_sys_wait_fds(struct pollfd *fds, unsigned n, int64_t deadline_ms)
{
	return wait_fds(fds, n, deadline_ms, false);
}

int smcr_sys_wait_fd_app(int fd, short events, int64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	return wait_fds(&p, 1, deadline_ms, true);
}
