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
 * cannot hurt them (smc_confine.c smcr_smc_before_confine): accepted connections
 * not classified yet are settled (a Proposal declined, reason CONFINED),
 * listeners leave the registry, and every connection made from then on
 * stays TCP with reason CONFINED.  SMC connections keep running on the calls
 * the filter allows.  If the kernel refuses the filter, the engine forgets
 * it again (what was settled stays TCP).
 *
 * The seccomp system call itself installs filters too: libseccomp's
 * seccomp_load() makes it through libc's syscall(), which is wrapped here
 * for that one call number (and for io_uring_setup, below).  A program that makes the call with its own
 * system call instruction is not seen (design §8).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unistd.h>
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
 * The program a filter call hands the kernel is the caller's memory, and it
 * may be no program at all: libseccomp asks the kernel what it supports with
 * a filter at NULL, and a buggy or hostile caller may pass an unmapped
 * address, a header whose .filter is unmapped, or a length of 0 or above
 * BPF_MAXINSNS.  The kernel answers those with EFAULT or EINVAL and applies
 * nothing; the wrapper must answer the same, must not fault reading them,
 * and must not confine the process, nor settle its sockets, for them.
 *
 * So the wrapper reads the program with a call that reports a bad address
 * instead of faulting: process_vm_readv on this process (its own memory
 * needs no ptrace permission).  It copies header and instructions into
 * private memory, the engine evaluates that copy, and the kernel installs
 * the same copy, so what the engine judged is what applies even if the
 * caller's memory changes meanwhile.  Where the read shows the kernel would
 * refuse the program, the caller's own arguments go to the kernel unread,
 * and its answer, whatever it is, is the caller's.
 *
 * process_vm_readv is a call a filter in force may deny, killing the
 * process (systemd's SystemCallFilter= with @debug excluded does), so it is
 * made only where no filter is in force yet.  Under one, the wrapper does
 * not read the program before the kernel call: the engine confines itself
 * as for a filter it cannot see (every call it makes counts as denied), the
 * caller's arguments go to the kernel, and once the kernel has applied the
 * filter (so it has read the whole program from that memory) the engine
 * reads it and narrows its denials to what it denies.
 */
enum program_read {
	PROGRAM_COPIED,	 /* the copy is the program the kernel will be given */
	PROGRAM_REFUSED, /* the kernel refuses it (EFAULT, EINVAL) without applying anything */
	PROGRAM_UNREAD,	 /* a filter is in force: not read before the kernel call */
};

/* One filter call at a time: the copy, and the engine's state to undo, are the process's. */
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sock_filter program_copy[BPF_MAXINSNS];

void smcr_seccomp_fork_prepare(void)
{
	pthread_mutex_lock(&install_lock);
}

void smcr_seccomp_fork_parent(void)
{
	pthread_mutex_unlock(&install_lock);
}

void smcr_seccomp_fork_child(void)
{
	pthread_mutex_unlock(&install_lock);
}

/* n bytes at `from` of this process into `to`: 1 copied, 0 not all mapped, -1 no answer. */
static int read_own(void *to, const void *from, size_t n)
{
	struct iovec local = { .iov_base = to, .iov_len = n };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)from, .iov_len = n };
	ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);

	if (got == (ssize_t)n)
		return 1;
	if (got >= 0 || errno == EFAULT)
		return 0;
	return -1; /* ENOSYS (no CONFIG_CROSS_MEMORY_ATTACH), EPERM (a security module) */
}

static enum program_read read_program(const struct sock_fprog *user, struct sock_fprog *copy)
{
	int r;

	if (!user)
		return PROGRAM_REFUSED;
	/* 0 none, 2 a filter; -1 (EINVAL) no seccomp in the kernel: the call fails anyway */
	if (smcr_real.prctl(PR_GET_SECCOMP, 0, 0, 0, 0) > 0)
		return PROGRAM_UNREAD;
	r = read_own(copy, user, sizeof(*copy));
	if (r <= 0)
		return r < 0 ? PROGRAM_UNREAD : PROGRAM_REFUSED;
	if (copy->len == 0 || copy->len > BPF_MAXINSNS)
		return PROGRAM_REFUSED;
	r = read_own(program_copy, copy->filter, copy->len * sizeof(program_copy[0]));
	if (r <= 0)
		return r < 0 ? PROGRAM_UNREAD : PROGRAM_REFUSED;
	copy->filter = program_copy;
	return PROGRAM_COPIED;
}

/* One PR_SET_SECCOMP or seccomp(SECCOMP_SET_MODE_*) call, around the kernel's. */
struct install {
	const struct sock_fprog *user; /* the caller's argument */
	const struct sock_fprog *arg;  /* what the kernel is given */
	struct sock_fprog copy;
	enum program_read read;
	bool locked, confining;
};

/*
 * Before the kernel call, while every call is still allowed: the engine
 * learns the filter and this process's sockets are settled.  The engine's
 * work leaves errno as the program had it: only the kernel's answer sets it.
 */
static void install_begin(struct install *in, unsigned long mode, const struct sock_fprog *user)
{
	enum smcr_confine_kind kind = SMCR_CONFINE_UNKNOWN;
	int saved = errno;

	in->user = user;
	in->arg = user;
	in->read = PROGRAM_REFUSED;
	in->locked = false;
	in->confining = false;
	if (!smcr_preload_active || (mode != SECCOMP_MODE_STRICT && mode != SECCOMP_MODE_FILTER))
		return;
	pthread_mutex_lock(&install_lock);
	in->locked = true;
	smcr_guard_enter();
	if (mode == SECCOMP_MODE_STRICT) {
		kind = SMCR_CONFINE_STRICT;
		in->confining = true;
	} else {
		in->read = read_program(user, &in->copy);
		if (in->read == PROGRAM_COPIED) {
			kind = SMCR_CONFINE_FILTER;
			in->arg = &in->copy;
		}
		in->confining = in->read != PROGRAM_REFUSED;
	}
	if (in->confining) {
		smcr_smc_before_confine();
		if (kind == SMCR_CONFINE_FILTER)
			smcr_engine_confine(kind, in->copy.filter, in->copy.len);
		else
			smcr_engine_confine(kind, NULL, 0);
	}
	smcr_guard_leave();
	errno = saved;
}

/* After it: applied (`applied`) or refused, the engine follows the kernel's answer. */
static void install_end(struct install *in, bool applied)
{
	int saved = errno;

	if (in->confining && !applied) {
		smcr_engine_confine_undo();
		smcr_smc_confine_refused();
	} else if (in->confining && in->read == PROGRAM_UNREAD) {
		/* the kernel has just read header and program from there */
		smcr_engine_confine_applied(in->user->filter, in->user->len);
	}
	if (in->locked)
		pthread_mutex_unlock(&install_lock);
	errno = saved;
}

SMCR_EXPORT int prctl(int option, ...)
{
	struct install in;
	unsigned long a[4];
	va_list ap;
	int ret;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	smcr_preload_enter();
	if (option != PR_SET_SECCOMP)
		return smcr_real.prctl(option, a[0], a[1], a[2], a[3]);
	install_begin(&in, a[0], (const struct sock_fprog *)a[1]);
	ret = smcr_real.prctl(option, a[0], (unsigned long)in.arg, a[2], a[3]);
	install_end(&in, ret == 0);
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
	struct install in;
	long ret;

	/*
	 * The strict mode takes no flags and no argument; libseccomp's first
	 * question to the kernel is SECCOMP_SET_MODE_STRICT with flags 1 (EINVAL).
	 */
	if (op == SECCOMP_SET_MODE_STRICT && flags == 0 && prog == NULL)
		mode = SECCOMP_MODE_STRICT;
	else if (op == SECCOMP_SET_MODE_FILTER)
		mode = SECCOMP_MODE_FILTER;
	smcr_preload_enter();
	install_begin(&in, mode, prog);
	ret = smcr_real.syscall(SYS_seccomp, a[0], a[1], (long)in.arg, a[3], a[4], a[5]);
	install_end(&in, ret == 0 || (ret > 0 && op == SECCOMP_SET_MODE_FILTER &&
				      (flags & SECCOMP_FILTER_FLAG_NEW_LISTENER)));
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
 * io_uring set up through libc's syscall() (the io-uring crate and the
 * runtimes built on it; liburing itself is seen when the library starts,
 * init.c): once the ring exists, smcr steps aside (smc_confine.c) before the
 * program can give it a socket.
 */
static SMCR_COLD long io_uring_setup_call(const long a[6])
{
	long ret = smcr_real.syscall(SYS_io_uring_setup, a[0], a[1], a[2], a[3], a[4], a[5]);
	int saved = errno;

	/* (only called once the library is initialised: syscall() checks) */
	if (ret >= 0)
		smcr_smc_after_io_uring();
	errno = saved;
	return ret;
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
	if (unlikely(number == SYS_io_uring_setup))
		return io_uring_setup_call(a);
	return smcr_real.syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
