/* SPDX-License-Identifier: MIT */
/*
 * prctl(PR_SET_SECCOMP): the process confines its own system calls.
 *
 * A seccomp filter may kill the process at the first call it does not allow
 * (OpenSSH's privilege-separated child does, after its key exchange began
 * over a connection that may already be SMC).  So before the kernel applies
 * a filter, while every call is still allowed, the engine learns it
 * (engine.h smcr_engine_confine: it runs the filter over the calls it may
 * still make) and the sockets of this process are put where the filter
 * cannot hurt them (smc.c smcr_smc_before_confine): accepted connections
 * not classified yet are settled (a Proposal declined, reason CONFINED),
 * listeners leave the registry, and every connection made from then on
 * stays TCP with reason CONFINED.  SMC connections keep running on the calls
 * the filter allows.  If the kernel refuses the filter, the engine forgets
 * it again (what was settled stays TCP).
 *
 * The seccomp system call itself installs filters too: libseccomp's
 * seccomp_load() makes it through libc's syscall(), which is wrapped here
 * for that one call number.  A program that makes the call with its own
 * system call instruction is not seen (design §8).
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "smcr/engine.h"

/*
 * Can the call confine the process at all?  A filter program at NULL
 * cannot: the kernel reads its header from there and answers EFAULT.
 * libseccomp makes that call, with each flag in turn, to learn what the
 * kernel supports (whether or not the program loads a filter later), so it
 * must neither settle this process's sockets nor confine the engine.
 */
static bool confines(unsigned long mode, const struct sock_fprog *prog)
{
	return mode == SECCOMP_MODE_STRICT || (mode == SECCOMP_MODE_FILTER && prog != NULL);
}

/* The engine's work leaves errno as the program had it: only the kernel's answer sets it. */
static void before_confine(unsigned long mode, const struct sock_fprog *prog)
{
	int saved = errno;

	smcr_guard_enter();
	smcr_smc_before_confine();
	if (mode == SECCOMP_MODE_STRICT)
		smcr_engine_confine(SMCR_CONFINE_STRICT, NULL, 0);
	else
		smcr_engine_confine(SMCR_CONFINE_FILTER, prog->filter, prog->len);
	smcr_guard_leave();
	errno = saved;
}

SMCR_EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	bool confining;
	va_list ap;
	int ret, err;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	smcr_preload_enter();
	confining = option == PR_SET_SECCOMP && smcr_preload_active &&
		    confines(a[0], (const struct sock_fprog *)a[1]);
	if (confining)
		before_confine(a[0], (const struct sock_fprog *)a[1]);
	ret = smcr_real.prctl(option, a[0], a[1], a[2], a[3]);
	if (confining && ret != 0) {
		err = errno;
		smcr_engine_confine_undo();
		errno = err;
	}
	return ret;
}

/*
 * seccomp(SECCOMP_SET_MODE_STRICT | SECCOMP_SET_MODE_FILTER, flags, args):
 * the prctl path above, with the kernel's own measure of success.  With
 * SECCOMP_FILTER_FLAG_NEW_LISTENER the call returns the listener's fd; with
 * SECCOMP_FILTER_FLAG_TSYNC (and no TSYNC_ESRCH) a thread that could not be
 * synchronised fails it with that thread's id, > 0, and no filter applied.
 * The kernel refuses TSYNC with NEW_LISTENER unless TSYNC_ESRCH turns that
 * failure into -1/ESRCH, so a positive result is a failure exactly when
 * NEW_LISTENER is not set.
 */
static SMCR_COLD long seccomp_call(long a[6])
{
	unsigned long op = (unsigned long)a[0], flags = (unsigned long)a[1];
	const struct sock_fprog *prog = (const struct sock_fprog *)a[2];
	unsigned long mode = SECCOMP_MODE_DISABLED;
	bool confining;
	long ret;
	int err;

	/*
	 * The strict mode takes no flags and no argument; libseccomp's first
	 * question to the kernel is SECCOMP_SET_MODE_STRICT with flags 1 (EINVAL).
	 */
	if (op == SECCOMP_SET_MODE_STRICT && flags == 0 && prog == NULL)
		mode = SECCOMP_MODE_STRICT;
	else if (op == SECCOMP_SET_MODE_FILTER)
		mode = SECCOMP_MODE_FILTER;
	smcr_preload_enter();
	confining = smcr_preload_active && confines(mode, prog);
	if (confining)
		before_confine(mode, prog);
	ret = smcr_real.syscall(SYS_seccomp, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (confining &&
	    (ret < 0 || (ret > 0 && (op == SECCOMP_SET_MODE_STRICT ||
				     !(flags & SECCOMP_FILTER_FLAG_NEW_LISTENER))))) {
		err = errno;
		smcr_engine_confine_undo();
		errno = err;
	}
	return ret;
}

/*
 * Before the library has initialised, a call goes to the kernel without
 * libc: a sanitizer runtime preloaded ahead of us sets its limits while it
 * starts (wrap_fd.c's setrlimit makes the system call through syscall()),
 * when nothing may allocate yet, and binding the table (dlsym) would.  None
 * of it is instrumented: the sanitizer's shadow memory does not exist yet.
 */
#define EARLY_CODE __attribute__((no_sanitize("address", "undefined", "thread")))
#if defined(__x86_64__) && !defined(__ILP32__)
#define HAVE_RAW_SYSCALL 1
EARLY_CODE static inline long raw_syscall(long n, const long a[6])
{
	register long r10 __asm__("r10") = a[3];
	register long r8 __asm__("r8") = a[4];
	register long r9 __asm__("r9") = a[5];
	unsigned long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return (long)ret;
}
#elif defined(__aarch64__)
#define HAVE_RAW_SYSCALL 1
EARLY_CODE static inline long raw_syscall(long n, const long a[6])
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a[0];
	register long x1 __asm__("x1") = a[1];
	register long x2 __asm__("x2") = a[2];
	register long x3 __asm__("x3") = a[3];
	register long x4 __asm__("x4") = a[4];
	register long x5 __asm__("x5") = a[5];

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}
#else
#define HAVE_RAW_SYSCALL 0
#endif

EARLY_CODE static SMCR_COLD long early_syscall(long number, const long a[6])
{
#if HAVE_RAW_SYSCALL
	long ret = raw_syscall(number, a);

	/* libc's convention: -1 and errno for the kernel's -4095..-1 */
	if ((unsigned long)ret > -4096UL) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
#else
	smcr_real_bind();
	return smcr_real.syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
#endif
}

/*
 * Every other call number passes straight on (with the library's own raw
 * system calls, which reach this wrapper too: tests/check-exports.sh).  It
 * is the hot path of programs that make their futex calls this way, so it
 * is one compare and a call, and it is not instrumented: the seccomp probe's
 * child (src/smcr/confine_probe.c) comes through here on a stack of its own.
 */
EARLY_CODE SMCR_EXPORT long syscall(long number, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (unlikely(number == SYS_seccomp))
		return seccomp_call(a);
	/* Initialised implies bound. */
	if (unlikely(!atomic_load_explicit(&smcr_preload_ready, memory_order_acquire)))
		return early_syscall(number, a);
	return smcr_real.syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
