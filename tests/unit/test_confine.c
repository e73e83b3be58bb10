/* SPDX-License-Identifier: MIT */
/*
 * The user-space seccomp evaluator (src/smcr/confine.c): what a classic BPF
 * filter lets the engine do, asked before the kernel applies the filter.
 *  - an allow list shaped like OpenSSH's privilege-separated child's (arch
 *    check, syscall number, errno for some calls, kill for the rest);
 *  - argument checks (a flag word, an fd), ALU, scratch memory, JSET;
 *  - actions: LOG allows, ERRNO, TRACE and KILL deny;
 *  - a program the evaluator cannot follow (a jump out of the program, a
 *    division by zero, an unknown instruction, no return) denies everything;
 *  - the kernel agrees: each filter is installed in a child process (with
 *    ERRNO instead of KILL) and every probed call is made for real; the
 *    calls the kernel refused are exactly the ones the evaluator denied.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "smcr/confine.h"
#include "smcr/engine.h"
#include "smcr/stats.h"

#define BIT(c) (1u << (c))
#define ALL ((1u << SMCR_CALL_COUNT) - 1)
#define NR_OFF offsetof(struct seccomp_data, nr)
#define ARCH_OFF offsetof(struct seccomp_data, arch)
#define ARG_OFF(i) (offsetof(struct seccomp_data, args) + 8 * (i))

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
/* if A == nr: return v */
#define ALLOW_NR(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), RET(SECCOMP_RET_ALLOW)
#define ERRNO_NR(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), RET(SECCOMP_RET_ERRNO | EACCES)

#ifdef __x86_64__
#define TEST_ARCH AUDIT_ARCH_X86_64
#define HAVE_ARCH 1
#elif defined(__aarch64__)
#define TEST_ARCH AUDIT_ARCH_AARCH64
#define HAVE_ARCH 1
#else
#define TEST_ARCH 0
#define HAVE_ARCH 0
#endif

#ifdef SYS_poll
#define NR_POLL SYS_poll
#else
#define NR_POLL SYS_ppoll
#endif

/* The kernel's default action is replaced by this errno in the child. */
#define DENIED_ERRNO ENOTRECOVERABLE

#define FPROG(arr) ((struct sock_fprog){ .len = sizeof(arr) / sizeof(arr[0]), .filter = (arr) })

/* Shaped like OpenSSH's sandbox-seccomp-filter.c: no network calls beyond read/write/poll. */
static struct sock_filter sshd_like[] = {
	LD(ARCH_OFF),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_ARCH, 1, 0),
	RET(SECCOMP_RET_KILL_PROCESS),
	LD(NR_OFF),
	ERRNO_NR(SYS_openat),
	ALLOW_NR(SYS_read),
	ALLOW_NR(SYS_write),
	ALLOW_NR(NR_POLL),
	ALLOW_NR(SYS_getpid),
	ALLOW_NR(SYS_futex),
	ALLOW_NR(SYS_close),
	ALLOW_NR(SYS_munmap),
	ALLOW_NR(SYS_exit_group),
	ALLOW_NR(SYS_exit),
	RET(SECCOMP_RET_KILL_PROCESS),
};

/*
 * Arguments: sendto only with exactly MSG_DONTWAIT | MSG_NOSIGNAL; write only
 * to fd 2 (so the engine's write counts as denied); everything else the
 * engine asks allowed; the flag test goes through scratch memory and X.
 */
static struct sock_filter with_args[] = {
	LD(ARCH_OFF),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_ARCH, 1, 0),
	RET(SECCOMP_RET_KILL_PROCESS),
	LD(NR_OFF),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendto, 0, 6),
	LD(ARG_OFF(3)),
	BPF_STMT(BPF_ST, 5),
	BPF_STMT(BPF_LDX | BPF_MEM, 5),
	BPF_STMT(BPF_MISC | BPF_TXA, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MSG_DONTWAIT | MSG_NOSIGNAL, 0, 1),
	RET(SECCOMP_RET_ALLOW),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 0, 3),
	LD(ARG_OFF(0)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 2),
	RET(SECCOMP_RET_ALLOW),
	LD(NR_OFF), /* not write: allowed unless it is recvmmsg (nr & 0xffff, by ALU) */
	BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xffff),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_recvmmsg, 0, 1),
	RET(SECCOMP_RET_ERRNO | EPERM),
	BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0, 0, 1), /* never taken */
	RET(SECCOMP_RET_KILL_PROCESS),
	LD(NR_OFF),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 1, 0),
	RET(SECCOMP_RET_ALLOW),
	RET(SECCOMP_RET_KILL_PROCESS),
};

/* Everything logged (LOG lets the call through), but getpid traced (denied). */
static struct sock_filter log_trace[] = {
	LD(NR_OFF),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpid, 0, 1),
	RET(SECCOMP_RET_TRACE),
	RET(SECCOMP_RET_LOG),
};

/* Another architecture's filter: this one's calls are all killed. */
static struct sock_filter other_arch[] = {
	LD(ARCH_OFF),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_S390X, 1, 0),
	RET(SECCOMP_RET_KILL_PROCESS),
	RET(SECCOMP_RET_ALLOW),
};

static void test_sshd_like(void **state)
{
	(void)state;
	if (!HAVE_ARCH)
		skip();
	assert_int_equal(smcr_confine_eval(sshd_like, sizeof(sshd_like) / sizeof(sshd_like[0])),
			 BIT(SMCR_CALL_SEND) | BIT(SMCR_CALL_RECVMMSG) | BIT(SMCR_CALL_GETSOCKNAME) |
				 BIT(SMCR_CALL_GETPEERNAME));
}

static void test_arguments(void **state)
{
	(void)state;
	if (!HAVE_ARCH)
		skip();
	assert_int_equal(smcr_confine_eval(with_args, sizeof(with_args) / sizeof(with_args[0])),
			 BIT(SMCR_CALL_WRITE) | BIT(SMCR_CALL_RECVMMSG));
}

static void test_actions(void **state)
{
	(void)state;
	assert_int_equal(smcr_confine_eval(log_trace, sizeof(log_trace) / sizeof(log_trace[0])),
			 HAVE_ARCH ? BIT(SMCR_CALL_GETPID) : ALL);
	assert_int_equal(smcr_confine_eval(other_arch, sizeof(other_arch) / sizeof(other_arch[0])),
			 ALL);
}

static void test_unfollowable(void **state)
{
	struct sock_filter jump_out[] = {
		BPF_JUMP(BPF_JMP | BPF_JA, 5, 0, 0),
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter cond_out[] = {
		LD(NR_OFF),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0, 9, 9),
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter div_zero[] = {
		LD(NR_OFF),
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter bad_load[] = {
		LD(2), /* not 32-bit aligned */
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter past_data[] = {
		LD(sizeof(struct seccomp_data)),
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter unknown[] = {
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 0), /* seccomp loads words only */
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter no_return[] = {
		LD(NR_OFF),
	};

	(void)state;
	assert_int_equal(smcr_confine_eval(jump_out, 2), ALL);
	assert_int_equal(smcr_confine_eval(cond_out, 3), ALL);
	assert_int_equal(smcr_confine_eval(div_zero, 3), ALL);
	assert_int_equal(smcr_confine_eval(bad_load, 2), ALL);
	assert_int_equal(smcr_confine_eval(past_data, 2), ALL);
	assert_int_equal(smcr_confine_eval(unknown, 2), ALL);
	assert_int_equal(smcr_confine_eval(no_return, 1), ALL);
	assert_int_equal(smcr_confine_eval(NULL, 0), ALL);
}

/*
 * In a child: the filter with its KILL and TRACE actions turned into
 * ERRNO(DENIED_ERRNO), then every probed call, made for real; the child
 * reports the calls the kernel refused through a pipe.
 */
static uint32_t kernel_denied(const struct sock_filter *prog, unsigned len)
{
	struct sock_filter copy[64];
	int fds[2], status;
	uint32_t denied = 0;
	pid_t pid;

	assert_true(len <= 64);
	for (unsigned i = 0; i < len; i++) {
		copy[i] = prog[i];
		if (BPF_CLASS(copy[i].code) == BPF_RET && BPF_RVAL(copy[i].code) == BPF_K) {
			uint32_t action = copy[i].k & SECCOMP_RET_ACTION_FULL;

			if (action != SECCOMP_RET_ALLOW && action != SECCOMP_RET_LOG &&
			    action != SECCOMP_RET_ERRNO)
				copy[i].k = SECCOMP_RET_ERRNO | DENIED_ERRNO;
			if (action == SECCOMP_RET_ERRNO)
				copy[i].k = SECCOMP_RET_ERRNO | DENIED_ERRNO;
		}
	}
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sock_fprog fp = { .len = (unsigned short)len, .filter = copy };
		uint32_t out = 0;

		/*
		 * The report goes out on fd 2 (with_args allows no other write);
		 * the probes' fds are closed and their addresses unmapped, so the
		 * calls the filter lets through fail harmlessly (EBADF, EFAULT).
		 */
		if (dup2(fds[1], 2) != 2)
			_exit(4);
		for (int fd = 3; fd < 300; fd++)
			close(fd);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp))
			_exit(2);
		for (unsigned i = 0; i < smcr_confine_probe_count(); i++) {
			enum smcr_call c;
			uint64_t a[6];
			long nr;

			smcr_confine_probe(i, &c, &nr, a);
			if (c == SMCR_CALL_MUNMAP)
				a[0] = 0; /* never mapped; the filters do not look at it */
			if (syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) < 0 && errno == DENIED_ERRNO)
				out |= 1u << c;
		}
		/* the system call itself: a sanitizer's _exit makes calls the filters deny */
		syscall(SYS_exit_group, write(2, &out, sizeof(out)) == sizeof(out) ? 0 : 3);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &denied, sizeof(denied)), sizeof(denied));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return denied;
}

static void test_kernel_agrees(void **state)
{
	struct {
		const struct sock_filter *prog;
		unsigned len;
	} cases[] = {
		{ sshd_like, sizeof(sshd_like) / sizeof(sshd_like[0]) },
		{ with_args, sizeof(with_args) / sizeof(with_args[0]) },
	};

	(void)state;
	if (!HAVE_ARCH)
		skip();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t ours = smcr_confine_eval(cases[i].prog, cases[i].len);
		uint32_t kernel = kernel_denied(cases[i].prog, cases[i].len);

		/*
		 * The evaluator counts a call denied if any of the values it
		 * asks with is; the kernel's answer is for the same values.
		 */
		assert_int_equal(ours, kernel);
	}
}

/*
 * A filter whose program could not be read before the kernel call (a filter
 * was in force: wrap_seccomp.c): everything counts as denied until the
 * kernel applied it, then exactly what its program denies, added to what
 * the filters before it deny; a refusal forgets it.
 */
static void test_unread_then_applied(void **state)
{
	static const struct sock_filter deny_getpid[] = {
		LD(NR_OFF),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpid, 0, 1),
		RET(SECCOMP_RET_ERRNO | EPERM),
		RET(SECCOMP_RET_ALLOW),
	};
	uint32_t first;

	(void)state;
	if (!HAVE_ARCH)
		skip();
	/* the engine publishes its stats file before confinement: not from a unit test */
	smcr_stats_keep_private();
	smcr_engine_confine(SMCR_CONFINE_FILTER, sshd_like,
			    sizeof(sshd_like) / sizeof(sshd_like[0]));
	first = atomic_load(&smcr_confine_denied);
	assert_true(smcr_confined());

	smcr_engine_confine(SMCR_CONFINE_UNKNOWN, NULL, 0);
	assert_int_equal(atomic_load(&smcr_confine_denied), ALL);
	smcr_engine_confine_undo();
	assert_int_equal(atomic_load(&smcr_confine_denied), first);

	smcr_engine_confine(SMCR_CONFINE_UNKNOWN, NULL, 0);
	smcr_engine_confine_applied(deny_getpid, sizeof(deny_getpid) / sizeof(deny_getpid[0]));
	assert_int_equal(atomic_load(&smcr_confine_denied), first | BIT(SMCR_CALL_GETPID));
	assert_true(smcr_confined());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sshd_like),
		cmocka_unit_test(test_arguments),
		cmocka_unit_test(test_actions),
		cmocka_unit_test(test_unfollowable),
		cmocka_unit_test(test_kernel_agrees),
		cmocka_unit_test(test_unread_then_applied),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
