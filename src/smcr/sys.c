// SPDX-License-Identifier: MIT
/* System helpers for the engine; see sys.h. */
#include "smcr/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "smcr/engine.h"
#include "smcr/libc.h"

static int random_fill(void *buf, size_t len)
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

/*
 * A connection's secrets and tokens take 8 to 16 bytes at a time, a few per
 * connection, and a getrandom() each cost more than the bytes: so they come
 * from a pool the kernel's CSPRNG fills RANDOM_POOL bytes at a time.  One
 * pool per thread (no lock on the connection path).  A forked child's copy
 * of its parent's pool would hand both processes the same secrets: the
 * child's handler moves the epoch on, which empties the pool of the one
 * thread a child has.  Bytes handed out are wiped from the pool.
 */
#define RANDOM_POOL 256u
#define RANDOM_POOLED_MAX 32u

static __thread uint8_t random_pool[RANDOM_POOL];
static __thread size_t random_used = RANDOM_POOL;
static __thread unsigned random_pool_epoch;
static atomic_uint random_epoch;

void smcr_sys_random_fork_child(void)
{
	atomic_fetch_add_explicit(&random_epoch, 1, memory_order_relaxed);
}

int smcr_sys_random(void *buf, size_t len)
{
	unsigned epoch = atomic_load_explicit(&random_epoch, memory_order_relaxed);

	if (len > RANDOM_POOLED_MAX)
		return random_fill(buf, len);
	if (random_pool_epoch != epoch || RANDOM_POOL - random_used < len) {
		int rc = random_fill(random_pool, RANDOM_POOL);

		if (rc < 0)
			return rc;
		random_used = 0;
		random_pool_epoch = epoch;
	}
	memcpy(buf, random_pool + random_used, len);
	explicit_bzero(random_pool + random_used, len);
	random_used += len;
	return 0;
}

/*
 * The engine's long-lived fds live above the program's soft RLIMIT_NOFILE
 * where the hard limit leaves room, so they never take a number the program
 * could have had: below it, a program near its limit would meet EMFILE in
 * its own open() where plain TCP left it room, and open() is not ours to
 * retry.  The kernel refuses F_DUPFD at or above the soft limit, so the move
 * raises the soft limit to the hard one for that one fcntl and puts back
 * exactly what prlimit reported as the old value (no cached copy goes stale
 * behind another process's prlimit).  fd_window_lock keeps two moves, the
 * program's own setrlimit/prlimit (smcr_sys_fd_window_lock() from the
 * embedder's wrappers), fork and exec out of each other's window, so the
 * raised value is never what anyone else sees or keeps.  It is a leaf lock:
 * only raw system calls run under it.
 *
 * Above FD_WINDOW_MAX_SOFT the kernel's fd table for numbers past the soft
 * limit would cost more (8 bytes per number, copied at every fork) than the
 * program could miss, and where soft equals hard there is no room at all:
 * then the fds go to SMCR_ENGINE_FD_FLOOR and up, and the engine stops
 * taking new ones while fewer than a quarter of the numbers are left, so the
 * program keeps at least that much of its own limit.
 */
#define FD_WINDOW_MAX_SOFT 65536u

static pthread_mutex_t fd_window_lock = PTHREAD_MUTEX_INITIALIZER;

void smcr_sys_fd_window_lock(void)
{
	pthread_mutex_lock(&fd_window_lock);
}

void smcr_sys_fd_window_unlock(void)
{
	pthread_mutex_unlock(&fd_window_lock);
}

static int nofile_limit(const struct rlimit *set, struct rlimit *old)
{
	return (int)smcr_libc.syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, set, old);
}

/* The number the engine's fds start from under the limits `cur`. */
static rlim_t fd_target(const struct rlimit *cur)
{
	return cur->rlim_cur > SMCR_ENGINE_FD_FLOOR ? cur->rlim_cur : SMCR_ENGINE_FD_FLOOR;
}

static bool room_above(const struct rlimit *cur)
{
	return cur->rlim_cur <= FD_WINDOW_MAX_SOFT && fd_target(cur) < cur->rlim_max;
}

/*
 * Raises the soft limit to the hard one and reports the limits it found in
 * *cur (one system call: prlimit swaps them).  The hard limit is read once;
 * if the program lowered it since, the swap fails and it is read again.
 */
static int raise_soft(struct rlimit *cur)
{
	static rlim_t hard;
	struct rlimit raised;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (!hard) {
			if (nofile_limit(NULL, cur) < 0)
				return -1;
			hard = cur->rlim_max;
		}
		raised = (struct rlimit){ hard, hard };
		if (nofile_limit(&raised, cur) == 0)
			return 0;
		hard = 0;
	}
	return -1;
}

/*
 * The limits the first move of this thread's current scope found
 * (smcr_sys_fd_scope_begin()).  A connection's set-up moves up to five fds
 * within one call of the library; where those limits left no room above the
 * program's numbers, the later moves go straight to SMCR_ENGINE_FD_FLOOR
 * without asking again: the raise would only have reported them once more.
 * The program's own changes (its setrlimit/prlimit and exec, under the
 * window lock) count up fd_limit_changes, and a scope that sees the count
 * move asks again; another process's prlimit on us during that one call is
 * concurrent with it, as it is between any move's raise and its fcntl.
 * Nothing outlives the scope, so the next set-up reads the limits afresh.
 */
static atomic_uint fd_limit_changes;

static __thread struct {
	unsigned depth;
	bool known;
	unsigned changes;
	struct rlimit lim;
} fd_scope __attribute__((tls_model("initial-exec")));

void smcr_sys_fd_limits_changing(void)
{
	atomic_fetch_add_explicit(&fd_limit_changes, 1, memory_order_relaxed);
}

void smcr_sys_fd_scope_begin(void)
{
	if (fd_scope.depth++ == 0)
		fd_scope.known = false;
}

void smcr_sys_fd_scope_end(void)
{
	if (fd_scope.depth > 0)
		fd_scope.depth--;
}

/* In a scope whose limits are known to leave no room: them, in *cur. */
static bool scope_says_no_room(struct rlimit *cur)
{
	if (fd_scope.depth == 0 || !fd_scope.known || room_above(&fd_scope.lim) ||
	    fd_scope.changes != atomic_load_explicit(&fd_limit_changes, memory_order_relaxed))
		return false;
	*cur = fd_scope.lim;
	return true;
}

/* A copy of `fd` at fd_target() or above, or -1; *cur: the limits in force. */
static int dup_above_soft(int fd, struct rlimit *cur)
{
	int high = -1;

	if (scope_says_no_room(cur))
		return -1;
	smcr_sys_fd_window_lock();
	if (raise_soft(cur) < 0) {
		smcr_sys_fd_window_unlock();
		return -1;
	}
	if (fd_scope.depth > 0) {
		fd_scope.lim = *cur;
		fd_scope.changes = atomic_load_explicit(&fd_limit_changes, memory_order_relaxed);
		fd_scope.known = true;
	}
	if (room_above(cur))
		high = (int)smcr_libc.syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, (int)fd_target(cur));
	if (cur->rlim_cur != cur->rlim_max)
		(void)nofile_limit(cur, NULL);
	smcr_sys_fd_window_unlock();
	return high;
}

/* A copy of `fd` where the engine keeps its fds, or -1; *cur: the limits. */
static int copy_high(int fd, struct rlimit *cur)
{
	int saved = errno, high = dup_above_soft(fd, cur);

	if (high < 0)
		high = smcr_libc.fcntl(fd, F_DUPFD_CLOEXEC, SMCR_ENGINE_FD_FLOOR);
	errno = saved;
	return high;
}

/* Without room above the program's numbers, its last quarter stays its own. */
static int keep_quarter(int fd, const struct rlimit *cur)
{
	if (fd >= 0 && cur->rlim_cur && !room_above(cur) && (rlim_t)fd < cur->rlim_cur &&
	    (rlim_t)fd >= cur->rlim_cur - cur->rlim_cur / 4) {
		smcr_libc.close(fd);
		errno = EMFILE;
		return -1;
	}
	return fd;
}

int smcr_sys_fd_high(int fd)
{
	struct rlimit cur = { 0, 0 };
	int high;

	if (fd < 0)
		return fd;
	high = copy_high(fd, &cur);
	if (high < 0)
		high = fd;
	else
		smcr_sys_close(fd);
	return keep_quarter(high, &cur);
}

int smcr_sys_fd_copy(int fd)
{
	struct rlimit cur = { 0, 0 };
	int copy = copy_high(fd, &cur);

	if (copy < 0)
		copy = smcr_libc.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return keep_quarter(copy, &cur);
}

int smcr_sys_eventfd(unsigned int initval, int flags)
{
	return smcr_sys_fd_high(smcr_libc.eventfd(initval, flags));
}

int smcr_sys_memfd(const char *name, unsigned int flags)
{
	return smcr_sys_fd_high(smcr_libc.memfd_create(name, flags));
}

int smcr_sys_epoll_set(int ep_fd, int fd, struct epoll_event *ev)
{
	if (smcr_libc.epoll_ctl(ep_fd, EPOLL_CTL_MOD, fd, ev) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	return smcr_libc.epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, ev) < 0 ? -errno : 0;
}

void smcr_sys_close(int fd)
{
	int saved = errno;

	if (fd >= 0)
		smcr_libc.close(fd);
	errno = saved;
}

ssize_t smcr_sys_read_text(const char *path, char *buf, size_t size)
{
	int saved = errno, fd = smcr_libc.open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = -1;

	if (fd >= 0 && size > 1) {
		n = smcr_libc.read(fd, buf, size - 1);
		smcr_sys_close(fd);
	} else if (fd >= 0) {
		smcr_sys_close(fd);
	}
	errno = saved;
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
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
