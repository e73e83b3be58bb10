/* SPDX-License-Identifier: MIT */
/*
 * Library start-up, fork handlers and the smc_preload_* API.
 *
 * Initialisation runs once, on whichever comes first: a wrapper call (an
 * earlier library's constructor may create sockets before our constructor
 * runs) or our constructor. It binds libc (dlsym only; no dlopen inside a
 * constructor), parses the configuration, decides whether to act at all,
 * maps the fd table and registers the fork handlers.
 */
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SMC_PRELOAD_WEAK /* we define them: strong symbols */
#include "smc_preload.h"

#include "common/config.h"
#include "common/log.h"
#include "preload/handoff.h"
#include "preload/preload.h"
#include "smcr/engine.h"

atomic_bool smcr_preload_ready;
bool smcr_preload_active;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/*
 * The library's one fork handler: every global lock, in acquisition order,
 * the interposer's (spawn's file actions, fd table, then the SMC glue's)
 * outside the engine's (src/smcr/engine.c lists those).  A lock missing here
 * can leave a forked child of a multi-threaded program with a lock held by a
 * thread that does not exist there.
 */
static void atfork_prepare(void)
{
	/* Bind first: binding takes locks of its own (dlsym, pthread_once). */
	smcr_real_bind();
	/* first: a filter call holds it while it takes the locks below */
	smcr_seccomp_fork_prepare();
	smcr_spawn_fork_prepare();
	smcr_fdtab_lock();
	smcr_smc_lock();
	smcr_engine_fork_prepare();
}

static void atfork_parent(void)
{
	smcr_engine_fork_parent();
	smcr_smc_unlock();
	smcr_fdtab_forked();
	smcr_fdtab_unlock();
	smcr_spawn_fork_parent();
	smcr_seccomp_fork_parent();
}

/*
 * Every handler below unlocks what atfork_prepare() locked rather than
 * initialising it again: the child's one thread is the thread that locked
 * it, and initialising a locked mutex is undefined (ThreadSanitizer, for
 * one, then sees the child hold every one of them for good).
 */
static void atfork_child(void)
{
	smcr_engine_fork_child();
	smcr_fdtab_forked();
	smcr_fdtab_reinit_child();
	smcr_smc_reinit_child();
	smcr_spawn_fork_child();
	smcr_seccomp_fork_child();
}

/* SMCR_EXIT_REPORT: the counters of a process whose stats file is about to go. */
static void exit_report(void)
{
	char line[512];

	if (!smcr_config_get()->exit_report)
		return;
	smcr_stats_report(line, sizeof(line));
	smcr_log_line("smcr[%s %d] exit: %s", smcr_log_progname(), (int)getpid(), line);
}

/*
 * The library's one exit handler: connections first (their closes count),
 * then the report, then the engine's exit.
 */
static void at_exit(void)
{
	int saved = errno;

	smcr_guard_enter();
	smcr_smc_exit();
	exit_report();
	smcr_engine_exit();
	smcr_guard_leave();
	errno = saved;
}

/* libc functions a libc may lack: the system call itself. */
static int sys_eventfd(unsigned int initval, int flags)
{
	return (int)syscall(SYS_eventfd2, initval, flags);
}

static int sys_memfd_create(const char *name, unsigned int flags)
{
	return (int)syscall(SYS_memfd_create, name, flags);
}

static int sys_timerfd_create(int clockid, int flags)
{
	return (int)syscall(SYS_timerfd_create, clockid, flags);
}

static int sys_inotify_init1(int flags)
{
	return (int)syscall(SYS_inotify_init1, flags);
}

/*
 * The engine calls libc through the functions behind our wrappers; calls
 * into libibverbs from its own threads run inside the recursion guard, so
 * that library's own socket and file calls pass the wrappers untouched.
 */
static void engine_init(void)
{
	struct smcr_engine_env env = {
#define SMCR_LIBC_REAL(ret, name, params) .libc.name = smcr_real.name,
		SMCR_LIBC_FUNCS(SMCR_LIBC_REAL)
#undef SMCR_LIBC_REAL
		.foreign_enter = smcr_guard_enter,
		.foreign_leave = smcr_guard_leave,
		.fd_label = smcr_fdtab_label_of,
	};

	if (!env.libc.eventfd)
		env.libc.eventfd = sys_eventfd;
	if (!env.libc.memfd_create)
		env.libc.memfd_create = sys_memfd_create;
	if (!env.libc.timerfd_create)
		env.libc.timerfd_create = sys_timerfd_create;
	if (!env.libc.inotify_init1)
		env.libc.inotify_init1 = sys_inotify_init1;
	smcr_engine_init(&env);
}

/* Table size: the fds the process may ever open, unless configured. */
static unsigned fdtab_size(const struct smcr_config *cfg)
{
	struct rlimit lim;

	if (cfg->max_fds)
		return cfg->max_fds;
	if (getrlimit(RLIMIT_NOFILE, &lim) < 0 || lim.rlim_max == RLIM_INFINITY ||
	    lim.rlim_max > SMCR_CONFIG_MAX_FDS_LIMIT)
		return SMCR_CONFIG_MAX_FDS_LIMIT;
	if (lim.rlim_max < SMCR_CONFIG_MAX_FDS_MIN)
		return SMCR_CONFIG_MAX_FDS_MIN;
	return (unsigned)lim.rlim_max;
}

static int object_is_liburing(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	(void)size;
	(void)arg;
	name = name ? name + 1 : info->dlpi_name;
	return name && strncmp(name, "liburing.so", 11) == 0;
}

/*
 * A program linked with liburing may read and write its sockets through
 * io_uring, in the kernel, where no wrapper sees the calls: an SMC
 * connection's bytes are in the rings, so such a read would wait forever on
 * the TCP socket and such a write would put bytes on TCP that the peer never
 * reads.  The library cannot tell which fds the program gives io_uring, so it
 * stays out of the way of the whole process: plain TCP, as without it.
 */
static bool uses_io_uring(void)
{
	return dl_iterate_phdr(object_is_liburing, NULL) != 0;
}

/* A PT_NOTE segment holds a note owned by "Go" (the Go linker's build id). */
static bool notes_name_go(const unsigned char *p, size_t size, size_t align)
{
	while (size >= sizeof(ElfW(Nhdr))) {
		const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
		size_t name_len = (n->n_namesz + align - 1) & ~(align - 1);
		size_t desc_len = (n->n_descsz + align - 1) & ~(align - 1);
		size_t len = sizeof(*n) + name_len + desc_len;

		if (name_len < n->n_namesz || desc_len < n->n_descsz || len > size)
			return false;
		if ((n->n_namesz == 3 || n->n_namesz == 4) &&
		    memcmp(p + sizeof(*n), "Go", 3) == 0)
			return true;
		p += len;
		size -= len;
	}
	return false;
}

/* Called for the main program first: stops the walk there, 1 if it is Go's. */
static int main_program_is_go(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		/* notes are padded to 4 bytes, or 8 in a segment aligned so */
		if (ph->p_type == PT_NOTE && (ph->p_align == 4 || ph->p_align == 8) &&
		    notes_name_go((const unsigned char *)(info->dlpi_addr + ph->p_vaddr),
				  ph->p_memsz, ph->p_align))
			return 1;
	}
	return -1;
}

/*
 * Go's runtime makes its socket calls as system call instructions of its
 * own, not through libc, in every Go program (cgo or not): no wrapper sees
 * the sockets of its net package, which stay plain TCP, and a client under
 * smcr finds no listener of it registered (PEERNOSMC).  The library stays
 * active for what does go through libc (C libraries called through cgo),
 * and says once why the program's own connections are TCP.
 */
static bool is_go_program(void)
{
	return dl_iterate_phdr(main_program_is_go, NULL) == 1;
}

/* Decides whether to act, and says why not (once, at info level). */
static bool decide_active(const struct smcr_config *cfg, bool secure)
{
	int ret;

	if (secure) {
		smcr_info("not active: secure-execution (setuid/setgid/capabilities) process;"
			  " every call passes through");
		return false;
	}
	if (cfg->disabled) {
		smcr_info("not active: SMCR_DISABLE is set; every call passes through");
		return false;
	}
	if (uses_io_uring()) {
		smcr_warn_once_per_session("not active in a program linked with liburing: sockets it"
					   " reads and writes through io_uring bypass smcr, so"
					   " every call passes through (plain TCP)");
		return false;
	}
	if (is_go_program())
		smcr_warn_once_per_session("in a Go program: its net package makes socket system calls"
					   " itself, not through libc, so smcr sees none of its"
					   " connections and they stay plain TCP (sockets opened"
					   " through libc, by cgo code, can use SMC)");
	ret = smcr_fdtab_init(fdtab_size(cfg));
	if (ret < 0) {
		smcr_warn("not active: cannot map the fd table (errno %d); every call passes through",
			  -ret);
		return false;
	}
	return true;
}

static void init_all(void)
{
	int saved_errno = errno;
	const struct smcr_config *cfg;
	bool secure = getauxval(AT_SECURE) != 0;

	smcr_guard_enter();
	smcr_real_bind();
	cfg = smcr_config_get();
	/* A setuid program must not append to a file its caller names. */
	smcr_log_setup(cfg->log_level, secure ? NULL : cfg->log_file);
	for (unsigned i = 0; i < cfg->n_problems; i++)
		smcr_warn_once_per_session(cfg->problems[i]);

	smcr_preload_active = decide_active(cfg, secure);
	if (smcr_preload_active) {
		engine_init();
		smcr_smc_init();
		/* sockets an earlier image of this process handed over (exec) */
		smcr_handoff_adopt();
		atexit(at_exit);
	}
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	if (smcr_preload_active && smcr_log_enabled(SMCR_LOG_INFO))
		smcr_log_line("smcr: active in %s (pid %d), version %s", smcr_log_progname(),
			      (int)getpid(), SMCR_VERSION);
	if (smcr_preload_active)
		smcr_dbg("fd table: %u slots", smcr_fdtab_nslots);

	atomic_store_explicit(&smcr_preload_ready, true, memory_order_release);
	smcr_guard_leave();
	errno = saved_errno;
}

void smcr_preload_init(void)
{
	/*
	 * Re-entered from our own initialisation on this thread (a libc or
	 * malloc call inside init_all reached a wrapper): libc is all the
	 * wrapper needs; the table is not mapped yet, so it tracks nothing.
	 */
	if (smcr_guard_inside()) {
		smcr_real_bind();
		return;
	}
	pthread_once(&init_once, init_all);
}

__attribute__((constructor)) static void smcr_preload_constructor(void)
{
	smcr_preload_enter();
}

SMCR_EXPORT const char *smc_preload_version(void)
{
	return SMCR_VERSION;
}

SMCR_EXPORT int smc_preload_active(void)
{
	smcr_preload_enter();
	return smcr_preload_active;
}

SMCR_EXPORT int smc_preload_fd_mode(int fd)
{
	struct smcr_fd_entry *entry;
	int mode;

	smcr_preload_enter();
	entry = smcr_fdtab_peek(fd);
	if (!entry)
		return SMC_PRELOAD_FD_UNTRACKED;
	mode = atomic_load_explicit(&entry->mode, memory_order_relaxed);
	/* A screened socket is TCP for good: only its first bytes are looked at. */
	return mode == SMCR_FD_SCREEN ? SMC_PRELOAD_FD_FALLBACK : mode;
}

__thread pid_t smcr_vfork_parent __attribute__((tls_model("initial-exec")));

bool smcr_preload_in_vfork_child(void)
{
	if (getpid() == smcr_vfork_parent) {
		/* The child has exec'ed or exited: this is the parent again. */
		smcr_vfork_parent = 0;
		return false;
	}
	return true;
}

/*
 * Called by the vfork entry point (vfork.S) before it jumps to libc's
 * vfork: marks this thread and returns the function to jump to. A C
 * wrapper cannot call vfork itself: the child would return through (and
 * clobber) the wrapper's stack frame, which the parent still needs.
 */
smcr_vfork_fn *smcr_vfork_prepare(void)
{
	smcr_preload_enter();
	smcr_handoff_note_vfork();
	smcr_vfork_parent = getpid();
	return smcr_real.vfork ? smcr_real.vfork : smcr_real.fork;
}

__thread void *smcr_vfork_ret __attribute__((tls_model("initial-exec")));

void smcr_vfork_parent_resume(pid_t child)
{
	int saved = errno;

	(void)child;
	smcr_vfork_parent = 0;
	smcr_handoff_after_vfork();
	errno = saved;
}

#if !defined(__x86_64__)
/* No assembly entry point here: a real fork is the safe vfork. */
SMCR_EXPORT pid_t vfork(void)
{
	smcr_preload_enter();
	return smcr_real.fork();
}
#endif

SMCR_EXPORT pid_t fork(void)
{
	pid_t pid;

	smcr_preload_enter();
	/*
	 * libc's fork runs the atfork handlers above; the child inherits the
	 * fd table as it was (see fdtab.h). Engine state that cannot cross
	 * fork (RDMA resources) is the engine's own atfork handlers' concern:
	 * a child's copy of an SMC-R connection reads as reset.
	 */
	pid = smcr_real.fork();
	if (pid == 0)
		smcr_dbg("forked child of %d", (int)getppid());
	return pid;
}
