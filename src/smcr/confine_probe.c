// SPDX-License-Identifier: MIT
/*
 * A seccomp filter the process inherited across exec (systemd's
 * SystemCallFilter=, a container runtime's profile, a sandboxing launcher)
 * is invisible to the prctl wrapper, and its program cannot be read back
 * without privilege.  Its answer to a call it does not allow may be to kill
 * the process with SIGSYS (systemd's default), so the engine must not find
 * out by making the call: a service that runs under plain TCP must not die
 * because smcr called bpf() or memfd_create() on its behalf.
 *
 * A child finds out instead.  Once per process image, before the engine's
 * first call that plain TCP would not make, and only when the process runs
 * under a filter at all ("Seccomp: 2" in /proc/self/status), a child that
 * shares the process's memory (clone with CLONE_VM | CLONE_VFORK, as
 * posix_spawn does: no copy of the page tables, and no exit signal, so the
 * program's SIGCHLD handler and its waitpid(-1) never see it) makes each
 * such call with harmless arguments and records how far it got.  A call
 * that killed the child, or that returned an error the real call could not
 * have returned, is denied.  Any denial confines the engine as a filter the
 * process installs itself does (confine.c): connections stay TCP with reason
 * CONFINED, listeners are not registered.  Where the stats file's own calls
 * are denied the process keeps its stats in private memory.
 */
#include "smcr/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/engine.h"
#include "smcr/libc.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

/*
 * The child runs on a stack of its own, beside every sanitizer's idea of
 * this thread's stack: nothing in it may be instrumented.
 */
#define PROBE_CODE __attribute__((no_sanitize("address", "undefined", "thread"), noinline))

enum probe_group {
	PROBE_DATA,  /* the data path of a connection (confine.h's calls) */
	PROBE_SETUP, /* making connections and listeners: sockets, rings, doorbells */
	PROBE_STATS, /* the stats file (stats_area.c, stats_dir.c) */
};

/* What the call returns when the filter lets it through. */
enum probe_expect {
	EXPECT_OK,    /* success */
	EXPECT_EBADF, /* asked about fd -1 */
	EXPECT_EINVAL,
	EXPECT_EAGAIN,
	EXPECT_ANY,   /* may fail for reasons of its own (privilege, kernel version):
			 the engine copes with its failure, only a kill denies */
};

struct live_probe {
	const char *name;
	long (*run)(void);
	unsigned char expect;
	unsigned char group;
	signed char call; /* enum smcr_call for PROBE_DATA, else -1 */
};

/* A result: >= 0, or -errno.  The child's errno is its parent thread's TLS:
 * the parent saves and restores it around the child. */
PROBE_CODE static long res(long r)
{
	return r < 0 ? -errno : r;
}

/* A real object made by a probe goes at once (the child's fd table is its own copy). */
PROBE_CODE static long made(long fd)
{
	long r = res(fd);

	if (r >= 0)
		syscall(SYS_close, (int)r);
	return r < 0 ? r : 0;
}

static char probe_byte;
static uint32_t probe_word;

PROBE_CODE static long p_read(void) { return res(syscall(SYS_read, -1, &probe_byte, 1)); }
PROBE_CODE static long p_write(void) { return res(syscall(SYS_write, -1, &probe_byte, 1)); }
#ifdef SYS_poll
PROBE_CODE static long p_poll(void) { return res(syscall(SYS_poll, NULL, 0, 0)); }
#else
PROBE_CODE static long p_poll(void) { return res(syscall(SYS_ppoll, NULL, 0, NULL, NULL, 0)); }
#endif
PROBE_CODE static long p_sendto(void)
{
	return res(syscall(SYS_sendto, -1, &probe_byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0));
}
PROBE_CODE static long p_recvmmsg(void)
{
	return res(syscall(SYS_recvmmsg, -1, NULL, 0, MSG_DONTWAIT, NULL));
}
PROBE_CODE static long p_getsockname(void) { return res(syscall(SYS_getsockname, -1, NULL, NULL)); }
PROBE_CODE static long p_getpeername(void) { return res(syscall(SYS_getpeername, -1, NULL, NULL)); }
PROBE_CODE static long p_getpid(void) { return res(syscall(SYS_getpid)); }
PROBE_CODE static long p_futex_wait(void)
{
	/* the word is 0, not 1: EAGAIN at once */
	return res(syscall(SYS_futex, &probe_word, FUTEX_WAIT_PRIVATE, 1, NULL));
}
PROBE_CODE static long p_futex_wake(void) { return res(syscall(SYS_futex, &probe_word, FUTEX_WAKE, 1)); }
PROBE_CODE static long p_futex_wake_private(void)
{
	return res(syscall(SYS_futex, &probe_word, FUTEX_WAKE_PRIVATE, 1));
}
PROBE_CODE static long p_close(void) { return res(syscall(SYS_close, -1)); }
PROBE_CODE static long p_munmap(void) { return res(syscall(SYS_munmap, NULL, 0)); }

PROBE_CODE static long p_unix_seqpacket(void)
{
	return made(syscall(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
}
PROBE_CODE static long p_unix_dgram(void)
{
	return made(syscall(SYS_socket, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
}
PROBE_CODE static long p_sock_diag(void)
{
	return made(syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 4 /* NETLINK_SOCK_DIAG */));
}
PROBE_CODE static long p_bind(void) { return res(syscall(SYS_bind, -1, NULL, 0)); }
PROBE_CODE static long p_listen(void) { return res(syscall(SYS_listen, -1, 0)); }
PROBE_CODE static long p_connect(void) { return res(syscall(SYS_connect, -1, NULL, 0)); }
PROBE_CODE static long p_accept4(void) { return res(syscall(SYS_accept4, -1, NULL, NULL, SOCK_CLOEXEC)); }
PROBE_CODE static long p_sendmsg(void) { return res(syscall(SYS_sendmsg, -1, NULL, MSG_DONTWAIT)); }
PROBE_CODE static long p_recvmsg(void) { return res(syscall(SYS_recvmsg, -1, NULL, MSG_DONTWAIT)); }
PROBE_CODE static long p_setsockopt(void)
{
	return res(syscall(SYS_setsockopt, -1, SOL_SOCKET, SO_PASSCRED, NULL, 0));
}
PROBE_CODE static long p_getsockopt(void)
{
	return res(syscall(SYS_getsockopt, -1, SOL_SOCKET, SO_PEERCRED, NULL, NULL));
}
PROBE_CODE static long p_shutdown(void) { return res(syscall(SYS_shutdown, -1, SHUT_RDWR)); }
PROBE_CODE static long p_dupfd(void)
{
	return res(syscall(SYS_fcntl, -1, F_DUPFD_CLOEXEC, SMCR_ENGINE_FD_FLOOR));
}
PROBE_CODE static long p_seals(void)
{
	return res(syscall(SYS_fcntl, -1, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW));
}
PROBE_CODE static long p_prlimit(void)
{
	struct rlimit r;

	return res(syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &r));
}
PROBE_CODE static long p_memfd(void)
{
	return made(syscall(SYS_memfd_create, "smcr-probe", MFD_CLOEXEC | MFD_ALLOW_SEALING));
}
PROBE_CODE static long p_fchmod(void) { return res(syscall(SYS_fchmod, -1, 0600)); }
PROBE_CODE static long p_ftruncate(void) { return res(syscall(SYS_ftruncate, -1, 4096)); }
PROBE_CODE static long p_madvise(void) { return res(syscall(SYS_madvise, NULL, 0, MADV_NORMAL)); }
PROBE_CODE static long p_eventfd(void)
{
	return made(syscall(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK));
}
PROBE_CODE static long p_epoll_create(void) { return made(syscall(SYS_epoll_create1, EPOLL_CLOEXEC)); }
PROBE_CODE static long p_epoll_ctl(void)
{
	struct epoll_event ev = { .events = EPOLLIN };

	return res(syscall(SYS_epoll_ctl, -1, EPOLL_CTL_ADD, -1, &ev));
}
PROBE_CODE static long p_pidfd(void) { return made(syscall(SYS_pidfd_open, syscall(SYS_getpid), 0)); }
PROBE_CODE static long p_bpf(void)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.pathname = (uint64_t)(uintptr_t)"/sys/fs/bpf/smcr-probe/none";
	return res(syscall(SYS_bpf, BPF_OBJ_GET, &attr, sizeof(attr)));
}
PROBE_CODE static long p_prctl(void)
{
	char comm[16];

	return res(syscall(SYS_prctl, PR_GET_NAME, comm, 0, 0, 0));
}
PROBE_CODE static long p_mkdirat(void) { return res(syscall(SYS_mkdirat, -1, "smcr-probe", 0700)); }
PROBE_CODE static long p_unlinkat(void) { return res(syscall(SYS_unlinkat, -1, "smcr-probe", 0)); }
PROBE_CODE static long p_renameat(void)
{
	return res(syscall(SYS_renameat, -1, "smcr-probe", -1, "smcr-probe"));
}
PROBE_CODE static long p_flock(void) { return res(syscall(SYS_flock, -1, LOCK_SH | LOCK_NB)); }

#define DATA(name, fn, expect, call) { name, fn, expect, PROBE_DATA, call }
#define SETUP(name, fn, expect) { name, fn, expect, PROBE_SETUP, -1 }
#define STATS(name, fn, expect) { name, fn, expect, PROBE_STATS, -1 }

static const struct live_probe live_probes[] = {
	DATA("read", p_read, EXPECT_EBADF, SMCR_CALL_READ),
	DATA("write", p_write, EXPECT_EBADF, SMCR_CALL_WRITE),
	DATA("poll", p_poll, EXPECT_OK, SMCR_CALL_POLL),
	DATA("sendto", p_sendto, EXPECT_EBADF, SMCR_CALL_SEND),
	DATA("recvmmsg", p_recvmmsg, EXPECT_EBADF, SMCR_CALL_RECVMMSG),
	DATA("getsockname", p_getsockname, EXPECT_EBADF, SMCR_CALL_GETSOCKNAME),
	DATA("getpeername", p_getpeername, EXPECT_EBADF, SMCR_CALL_GETPEERNAME),
	DATA("getpid", p_getpid, EXPECT_OK, SMCR_CALL_GETPID),
	DATA("futex", p_futex_wait, EXPECT_EAGAIN, SMCR_CALL_FUTEX),
	DATA("futex", p_futex_wake, EXPECT_OK, SMCR_CALL_FUTEX),
	DATA("futex", p_futex_wake_private, EXPECT_OK, SMCR_CALL_FUTEX),
	DATA("close", p_close, EXPECT_EBADF, SMCR_CALL_CLOSE),
	DATA("munmap", p_munmap, EXPECT_EINVAL, SMCR_CALL_MUNMAP),
	SETUP("socket(AF_UNIX, SOCK_SEQPACKET)", p_unix_seqpacket, EXPECT_OK),
	SETUP("socket(AF_UNIX, SOCK_DGRAM)", p_unix_dgram, EXPECT_OK),
	SETUP("socket(AF_NETLINK, NETLINK_SOCK_DIAG)", p_sock_diag, EXPECT_OK),
	SETUP("bind", p_bind, EXPECT_EBADF),
	SETUP("listen", p_listen, EXPECT_EBADF),
	SETUP("connect", p_connect, EXPECT_EBADF),
	SETUP("accept4", p_accept4, EXPECT_EBADF),
	SETUP("sendmsg", p_sendmsg, EXPECT_EBADF),
	SETUP("recvmsg", p_recvmsg, EXPECT_EBADF),
	SETUP("setsockopt", p_setsockopt, EXPECT_EBADF),
	SETUP("getsockopt", p_getsockopt, EXPECT_EBADF),
	SETUP("shutdown", p_shutdown, EXPECT_EBADF),
	SETUP("fcntl(F_DUPFD_CLOEXEC)", p_dupfd, EXPECT_EBADF),
	SETUP("fcntl(F_ADD_SEALS)", p_seals, EXPECT_EBADF),
	SETUP("prlimit64", p_prlimit, EXPECT_OK),
	SETUP("memfd_create", p_memfd, EXPECT_OK),
	SETUP("fchmod", p_fchmod, EXPECT_EBADF),
	SETUP("ftruncate", p_ftruncate, EXPECT_EBADF),
	SETUP("madvise", p_madvise, EXPECT_OK),
	SETUP("eventfd2", p_eventfd, EXPECT_OK),
	SETUP("epoll_create1", p_epoll_create, EXPECT_OK),
	SETUP("epoll_ctl", p_epoll_ctl, EXPECT_EBADF),
	SETUP("pidfd_open", p_pidfd, EXPECT_ANY),
	SETUP("bpf", p_bpf, EXPECT_ANY),
	SETUP("prctl(PR_GET_NAME)", p_prctl, EXPECT_OK),
	STATS("mkdirat", p_mkdirat, EXPECT_EBADF),
	STATS("unlinkat", p_unlinkat, EXPECT_EBADF),
	STATS("renameat", p_renameat, EXPECT_EBADF),
	STATS("flock", p_flock, EXPECT_EBADF),
	STATS("ftruncate", p_ftruncate, EXPECT_EBADF),
};

#define N_PROBES (sizeof(live_probes) / sizeof(live_probes[0]))

/* Shared with the child (CLONE_VM): where it starts, how far it got, what each call said. */
static struct {
	unsigned start;
	volatile unsigned at;
	long result[N_PROBES];
} run;

static bool result_allowed(const struct live_probe *p, long r)
{
	switch (p->expect) {
	case EXPECT_OK: return r >= 0;
	case EXPECT_EBADF: return r == -EBADF;
	case EXPECT_EINVAL: return r == -EINVAL;
	case EXPECT_EAGAIN: return r == -EAGAIN;
	default: return true;
	}
}

PROBE_CODE static int probe_child(void *arg)
{
	struct { unsigned long handler, flags, restorer, mask; } dfl = { 0 }; /* SIG_DFL */

	(void)arg;
	/*
	 * The program's own SIGSYS handler (a filter's SECCOMP_RET_TRAP) must
	 * not run here: the child dies of the signal instead, which is what it
	 * tells (the kernel also resets a blocked one to the default).
	 */
	syscall(SYS_rt_sigaction, SIGSYS, &dfl, NULL, 8);
	for (unsigned i = run.start; i < N_PROBES; i++) {
		run.at = i;
		run.result[i] = live_probes[i].run();
	}
	run.at = N_PROBES;
	syscall(SYS_exit, 0);
	return 0;
}

static _Alignas(64) unsigned char probe_stack[32 * 1024];

/*
 * Runs the probes from run.start in a child; returns the index of the call
 * that killed it (N_PROBES: none did), or -1 if no child could be made.
 */
static int probe_from(unsigned start)
{
	int status, saved = errno;
	sigset_t all, old;
	pid_t pid, w;

	run.start = start;
	run.at = start;
	/*
	 * The child starts with every signal blocked and never unblocks one: a
	 * signal to the process group (^C) must not run one of the program's
	 * handlers in a child that shares its memory.  A seccomp SIGSYS is
	 * forced through the mask, and kills it.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* No exit signal: only our __WALL wait sees the child. */
	pid = clone(probe_child, probe_stack + sizeof(probe_stack), CLONE_VM | CLONE_VFORK, NULL);
	if (pid < 0) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		errno = saved;
		return -1;
	}
	do
		w = waitpid(pid, &status, __WALL);
	while (w < 0 && errno == EINTR);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	if (w != pid)
		return -1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && run.at == N_PROBES)
		return N_PROBES;
	return (int)run.at;
}

/* Bit per live probe: denied.  Returns false if the probe could not run. */
static bool probe_all(uint64_t *denied)
{
	unsigned i = 0;

	_Static_assert(N_PROBES <= 64, "one bit per probe");
	*denied = 0;
	while (i < N_PROBES) {
		int killed_at = probe_from(i);

		if (killed_at < 0)
			return false;
		for (unsigned k = i; k < (unsigned)killed_at; k++)
			if (!result_allowed(&live_probes[k], run.result[k]))
				*denied |= UINT64_C(1) << k;
		if ((unsigned)killed_at >= N_PROBES)
			break;
		*denied |= UINT64_C(1) << killed_at;
		i = (unsigned)killed_at + 1;
	}
	return true;
}

/* "Seccomp:" of /proc/self/status: 0 none, 1 strict, 2 filter; -1 not known. */
static int seccomp_mode(void)
{
	char buf[4096];
	const char *p;

	if (smcr_sys_read_text("/proc/self/status", buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "\nSeccomp:");
	if (!p)
		return 0; /* a kernel without seccomp */
	p += strlen("\nSeccomp:");
	while (*p == ' ' || *p == '\t')
		p++;
	return *p >= '0' && *p <= '2' ? *p - '0' : -1;
}

static void log_inherited(uint64_t denied, bool stats_denied)
{
	char message[768];
	char list[512] = "";
	size_t n = 0;
	const char *last = "";

	for (unsigned i = 0; i < N_PROBES && n < sizeof(list); i++)
		if ((denied & (UINT64_C(1) << i)) && strcmp(live_probes[i].name, last) != 0) {
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", n ? ", " : "",
					      live_probes[i].name);
			last = live_probes[i].name;
		}
	snprintf(message, sizeof(message),
		 "a seccomp filter the process inherited denies what smcr needs (%s): its"
		 " connections stay TCP (reason CONFINED)", list);
	/* The marker that says it once per session is a file: where files are denied, each says it. */
	if (stats_denied)
		smcr_warn("%s", message);
	else
		smcr_warn_once_per_session(message);
}

static pthread_mutex_t inherited_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool inherited_checked;

void smcr_confine_check_inherited(void)
{
	uint64_t denied = 0;
	uint32_t calls = 0;
	bool stats_denied = false, any = false;
	int mode;

	if (atomic_load_explicit(&inherited_checked, memory_order_acquire))
		return;
	pthread_mutex_lock(&inherited_lock);
	if (atomic_load_explicit(&inherited_checked, memory_order_relaxed)) {
		pthread_mutex_unlock(&inherited_lock);
		return;
	}
	/* (the strict mode cannot be inherited: it allows no exec) */
	mode = seccomp_mode();
	if (mode != 0) {
		if (!probe_all(&denied)) {
			/* no child to ask: nothing is known, so nothing is tried */
			denied = ~UINT64_C(0) >> (64 - N_PROBES);
		}
		for (unsigned i = 0; i < N_PROBES; i++) {
			if (!(denied & (UINT64_C(1) << i)))
				continue;
			any = true;
			if (live_probes[i].group == PROBE_DATA)
				calls |= 1u << live_probes[i].call;
			else if (live_probes[i].group == PROBE_STATS)
				stats_denied = true;
		}
	}
	if (stats_denied)
		smcr_stats_keep_private();
	if (any) {
		/* first: it silences the log where a log line would be denied */
		smcr_confine_inherited(calls);
		log_inherited(denied, stats_denied);
	} else if (mode != 0) {
		smcr_dbg("the process runs under a seccomp filter that allows every call smcr makes");
	}
	atomic_store_explicit(&inherited_checked, true, memory_order_release);
	pthread_mutex_unlock(&inherited_lock);
}
