/* SPDX-License-Identifier: MIT */
/*
 * fd bookkeeping: close and its bulk forms, the dup family, fcntl, ioctl,
 * and every fd-creating call a program makes.
 *
 * The kernel reuses the lowest free fd number. libc can close an fd
 * internally (fclose of an fdopen'ed socket goes to __close_nocancel, which
 * no wrapper sees), so the table may still remember a number the kernel
 * already handed out again; every call that returns a new fd therefore
 * clears whatever the table held for that number.
 *
 * close() clears the slot before the real close: afterwards another
 * thread may already have received the same number from socket().
 */
#include <fcntl.h>
#include <limits.h>
#include <pty.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "preload/preload.h"
#include "preload/smc.h"
#include "smcr/engine.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1u << 2)
#endif

/* glibc's fortify entry points; <fcntl.h> declares them only under _FORTIFY_SOURCE. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

/* Returns fd, having cleared a stale table entry for it. */
static int fresh_fd(int fd)
{
	if (fd >= 0)
		smcr_preload_forget(fd);
	return fd;
}

static int fresh_fd_pair(int ret, const int fds[2])
{
	if (ret == 0) {
		smcr_preload_forget(fds[0]);
		smcr_preload_forget(fds[1]);
	}
	return ret;
}

/* ---- close ---------------------------------------------------------- */

SMCR_EXPORT int close(int fd)
{
	smcr_preload_enter();
	smcr_preload_forget(fd);
	return smcr_real.close(fd);
}

SMCR_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(close_range);
	/* CLOSE_RANGE_CLOEXEC only marks the fds; nothing is closed yet. */
	if (!((unsigned)flags & CLOSE_RANGE_CLOEXEC) && first <= last &&
	    smcr_preload_table_writable()) {
		smcr_smc_before_close_range(first, last);
		smcr_fdtab_forget_range(first, last);
	}
	return smcr_real.close_range(first, last, flags);
}

SMCR_EXPORT void closefrom(int lowfd)
{
	smcr_preload_enter();
	if (!smcr_real.closefrom)
		return;
	if (lowfd >= 0 && smcr_preload_table_writable()) {
		smcr_smc_before_close_range((unsigned)lowfd, UINT_MAX);
		smcr_fdtab_forget_range((unsigned)lowfd, UINT_MAX);
	}
	smcr_real.closefrom(lowfd);
}

/* ---- RLIMIT_NOFILE ---------------------------------------------------- */

/*
 * The engine raises the soft RLIMIT_NOFILE for the moment it moves one of
 * its fds above the program's numbers (include/smcr/engine.h); the
 * program's own change of the limit waits for that moment to end, so it is
 * neither lost to the engine's restore nor made from the raised value.
 */
_Static_assert(sizeof(struct rlimit) == sizeof(struct rlimit64), "one ABI for both names");

/*
 * Every other limit goes straight to the kernel, before the library
 * initialises and without touching its memory: a sanitizer runtime
 * preloaded ahead of us sets RLIMIT_CORE while it starts, before its
 * shadow memory exists, so this path must not be instrumented either.
 */
#define RLIMIT_PASS_THROUGH __attribute__((no_sanitize("address", "undefined", "thread")))

static int set_nofile_locked(pid_t pid, const struct rlimit *set, struct rlimit *old)
{
	bool ours = pid == 0 || pid == getpid();
	int rc;

	if (ours)
		smcr_engine_fd_limit_lock();
	rc = (int)syscall(SYS_prlimit64, pid, RLIMIT_NOFILE, set, old);
	if (ours)
		smcr_engine_fd_limit_unlock();
	return rc;
}

RLIMIT_PASS_THROUGH static int prlimit_common(pid_t pid, __rlimit_resource_t resource,
					      const struct rlimit *set, struct rlimit *old)
{
	if (resource != RLIMIT_NOFILE || !set) /* a read changes nothing */
		return (int)syscall(SYS_prlimit64, pid, resource, set, old);
	smcr_preload_enter();
	return set_nofile_locked(pid, set, old);
}

RLIMIT_PASS_THROUGH SMCR_EXPORT int setrlimit(__rlimit_resource_t resource,
					      const struct rlimit *rlim)
{
	return prlimit_common(0, resource, rlim, NULL);
}

RLIMIT_PASS_THROUGH SMCR_EXPORT int setrlimit64(__rlimit_resource_t resource,
						const struct rlimit64 *rlim)
{
	return prlimit_common(0, resource, (const struct rlimit *)rlim, NULL);
}

RLIMIT_PASS_THROUGH SMCR_EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource,
					    const struct rlimit *set, struct rlimit *old)
{
	return prlimit_common(pid, resource, set, old);
}

RLIMIT_PASS_THROUGH SMCR_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource,
					      const struct rlimit64 *set, struct rlimit64 *old)
{
	return prlimit_common(pid, resource, (const struct rlimit *)set, (struct rlimit *)old);
}

/* ---- dup family ----------------------------------------------------- */

/* newfd is a copy of oldfd: it shares oldfd's entry (and its refcount). */
static int after_dup(int oldfd, int newfd)
{
	if (newfd >= 0)
		smcr_preload_dup(oldfd, newfd);
	return newfd;
}

SMCR_EXPORT int dup(int fd)
{
	smcr_preload_enter();
	return after_dup(fd, smcr_real.dup(fd));
}

SMCR_EXPORT int dup2(int oldfd, int newfd)
{
	smcr_preload_enter();
	return after_dup(oldfd, smcr_real.dup2(oldfd, newfd));
}

SMCR_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	smcr_preload_enter();
	return after_dup(oldfd, smcr_real.dup3(oldfd, newfd, flags));
}

/* ---- fcntl, ioctl ---------------------------------------------------- */

/*
 * The optional third argument is an int or a pointer depending on cmd;
 * like glibc itself, take it as a pointer-sized value and pass it on.
 */
static int after_fcntl(int fd, int cmd, void *arg, int ret)
{
	if (ret >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		smcr_preload_dup(fd, ret);
	/* The SMC data path maps O_NONBLOCK to MSG_DONTWAIT: keep a copy. */
	if (ret >= 0 && cmd == F_SETFL)
		smcr_smc_set_nonblock(fd, ((int)(intptr_t)arg & O_NONBLOCK) != 0);
	return ret;
}

SMCR_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	smcr_preload_enter();
	return after_fcntl(fd, cmd, arg, smcr_real.fcntl(fd, cmd, arg));
}

SMCR_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(fcntl64);
	return after_fcntl(fd, cmd, arg, smcr_real.fcntl64(fd, cmd, arg));
}

/* FIONREAD and SIOCOUTQ of an SMC socket are the engine's; FIONBIO is noted. */
static int after_ioctl(int fd, unsigned long request, void *arg)
{
	int ret;

	if (smcr_preload_divert(fd)) {
		bool handled;

		ret = smcr_smc_ioctl(fd, request, arg, &handled);
		if (handled)
			return ret;
	}
	ret = smcr_real.ioctl(fd, request, arg);
	if (ret == 0 && request == FIONBIO && arg)
		smcr_smc_set_nonblock(fd, *(const int *)arg != 0);
	return ret;
}

SMCR_EXPORT int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	smcr_preload_enter();
	return after_ioctl(fd, request, arg);
}

/* ---- calls that create fds ------------------------------------------- */

/* open's mode argument exists only when the flags ask for a new file. */
static mode_t open_mode(int flags, va_list ap)
{
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		return (mode_t)va_arg(ap, int);
	return 0;
}

SMCR_EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	smcr_preload_enter();
	return fresh_fd(smcr_real.open(path, flags, mode));
}

SMCR_EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(open64);
	return fresh_fd(smcr_real.open64(path, flags, mode));
}

SMCR_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	smcr_preload_enter();
	return fresh_fd(smcr_real.openat(dirfd, path, flags, mode));
}

SMCR_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(openat64);
	return fresh_fd(smcr_real.openat64(dirfd, path, flags, mode));
}

SMCR_EXPORT int __open_2(const char *path, int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__open_2);
	return fresh_fd(smcr_real.__open_2(path, flags));
}

SMCR_EXPORT int __open64_2(const char *path, int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__open64_2);
	return fresh_fd(smcr_real.__open64_2(path, flags));
}

SMCR_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__openat_2);
	return fresh_fd(smcr_real.__openat_2(dirfd, path, flags));
}

SMCR_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(__openat64_2);
	return fresh_fd(smcr_real.__openat64_2(dirfd, path, flags));
}

SMCR_EXPORT int creat(const char *path, mode_t mode)
{
	smcr_preload_enter();
	return fresh_fd(smcr_real.creat(path, mode));
}

SMCR_EXPORT int creat64(const char *path, mode_t mode)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(creat64);
	return fresh_fd(smcr_real.creat64(path, mode));
}

SMCR_EXPORT int pipe(int fds[2])
{
	smcr_preload_enter();
	return fresh_fd_pair(smcr_real.pipe(fds), fds);
}

SMCR_EXPORT int pipe2(int fds[2], int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(pipe2);
	return fresh_fd_pair(smcr_real.pipe2(fds, flags), fds);
}

SMCR_EXPORT int eventfd(unsigned int initval, int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(eventfd);
	return fresh_fd(smcr_real.eventfd(initval, flags));
}

SMCR_EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	int ret;

	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(signalfd);
	ret = smcr_real.signalfd(fd, mask, flags);
	/* fd != -1 updates an existing signalfd: no new number. */
	return fd == -1 ? fresh_fd(ret) : ret;
}

SMCR_EXPORT int timerfd_create(int clockid, int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(timerfd_create);
	return fresh_fd(smcr_real.timerfd_create(clockid, flags));
}

SMCR_EXPORT int memfd_create(const char *name, unsigned int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(memfd_create);
	return fresh_fd(smcr_real.memfd_create(name, flags));
}

SMCR_EXPORT int inotify_init(void)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(inotify_init);
	return fresh_fd(smcr_real.inotify_init());
}

SMCR_EXPORT int inotify_init1(int flags)
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(inotify_init1);
	return fresh_fd(smcr_real.inotify_init1(flags));
}

SMCR_EXPORT int openpty(int *amaster, int *aslave, char *name, const struct termios *termp,
			const struct winsize *winp)
{
	int ret;

	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(openpty);
	ret = smcr_real.openpty(amaster, aslave, name, termp, winp);
	if (ret == 0) {
		smcr_preload_forget(*amaster);
		smcr_preload_forget(*aslave);
	}
	return ret;
}

/* The child's dup2 of the terminal onto 0-2 happens inside libc, unseen. */
SMCR_EXPORT pid_t forkpty(int *amaster, char *name, const struct termios *termp,
			  const struct winsize *winp)
{
	pid_t pid;

	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(forkpty);
	pid = smcr_real.forkpty(amaster, name, termp, winp);
	if (pid > 0) {
		smcr_preload_forget(*amaster);
	} else if (pid == 0) {
		smcr_preload_forget(0);
		smcr_preload_forget(1);
		smcr_preload_forget(2);
	}
	return pid;
}
