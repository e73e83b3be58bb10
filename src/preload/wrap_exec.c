/* SPDX-License-Identifier: MIT */
/*
 * The exec family: what the sockets of this image become in the next one.
 *
 * The next image learns what this one knew (handoff.c): an accepted
 * connection not classified yet, and a registered listener, are handed over
 * in the environment (SMCR_INHERIT) when the new image will load smcr, and
 * settled first when it will not (a Proposal declined, reason HANDOFF), so
 * its new owner never reads a CLC byte. SMC connections cannot cross exec:
 * they end visibly (smc_lifecycle.c, smcr_smc_before_exec: design §8).
 *
 * Whether the new image loads smcr is decided from what the dynamic loader
 * will do: the new environment's LD_PRELOAD names this library (or this
 * process got it from /etc/ld.so.preload), SMCR_DISABLE is not set in it,
 * and the file is a dynamically linked ELF program of this library's class
 * and machine (or a "#!" script whose interpreter is), neither setuid,
 * setgid nor with file capabilities (the loader ignores LD_PRELOAD then).
 * A wrong "yes" would leave a Proposal unread by anyone, so every doubt
 * answers "no": the cost of "no" is only a connection that stays TCP.
 *
 * Only an exec that can succeed changes anything: the file is looked up
 * first (access X_OK, along PATH for the p variants), so a program that
 * tries one name after another keeps its connections through the failures.
 * libc's own execs (execl* call execve internally, posix_spawn and system
 * run in a child) do not pass through here, hence the l variants are
 * wrapped too; a child's exec never touches its parent's connections.
 * posix_spawn is judged here, in the parent, before the child exists: its
 * file actions' dup2s are recorded as the program adds them, so a socket
 * that reaches the child only through a dup2 (a close-on-exec connection
 * made the child's stdin) is found too. system() and popen() are not
 * followed: an unread connection that is not close-on-exec reaches their
 * shell unannounced (a shell that reads its parent's socket is rare).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "preload/handoff.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "smcr/engine.h"

extern char **environ;

/* Environments longer than this are not copied: no handover (a bound on the copy). */
#define HANDOFF_MAX_ENV 4096u
/* "#!" interpreters followed, as the kernel does (BINPRM_MAX_RECURSION). */
#define SCRIPT_DEPTH 4

#if defined(__x86_64__)
#define OWN_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define OWN_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define OWN_MACHINE EM_PPC64
#elif defined(__s390x__)
#define OWN_MACHINE EM_S390
#else
#define OWN_MACHINE EM_NONE /* unknown here: no image is said to load smcr */
#endif

static bool runnable(const char *path)
{
	struct stat st;

	return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* execvp's search: a name with a slash as it is, else along PATH; the path found in `out`. */
static bool runnable_on_path(const char *file, char out[PATH_MAX])
{
	const char *path = getenv("PATH"), *p;

	if (!*file)
		return false;
	if (strchr(file, '/')) {
		snprintf(out, PATH_MAX, "%s", file);
		return runnable(file);
	}
	if (!path)
		path = "/bin:/usr/bin";
	for (p = path;; p++) {
		const char *end = strchrnul(p, ':');
		int n = end == p ? snprintf(out, PATH_MAX, "%s", file)
				 : snprintf(out, PATH_MAX, "%.*s/%s", (int)(end - p), p, file);

		if (n > 0 && n < PATH_MAX && runnable(out))
			return true;
		if (!*end)
			return false;
		p = end;
	}
}

static bool file_loads_preload(const char *path, int depth);

/* "#!interpreter ...": does the interpreter load it? */
static bool script_loads_preload(const char *head, size_t n, int depth)
{
	char interp[256];
	size_t i = 2, j = 0;

	while (i < n && (head[i] == ' ' || head[i] == '\t'))
		i++;
	while (i < n && j + 1 < sizeof(interp) && head[i] != ' ' && head[i] != '\t' &&
	       head[i] != '\n' && head[i] != '\0')
		interp[j++] = head[i++];
	interp[j] = '\0';
	return j > 0 && depth < SCRIPT_DEPTH && file_loads_preload(interp, depth + 1);
}

/* A dynamically linked ELF of our class and machine: has a PT_INTERP header. */
static bool elf_is_dynamic(int fd, const Elf64_Ehdr *eh)
{
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != OWN_MACHINE ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 || eh->e_phnum > 128)
		return false;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh->e_phoff + i * sizeof(ph))) !=
		    (ssize_t)sizeof(ph))
			return false;
		if (ph.p_type == PT_INTERP)
			return true;
	}
	return false;
}

/* Will the dynamic loader run `path` with LD_PRELOAD honoured? */
static bool file_loads_preload(const char *path, int depth)
{
	union {
		Elf64_Ehdr eh;
		char head[256];
	} u;
	struct stat st;
	bool yes = false;
	ssize_t n;
	int fd = smcr_real.open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & (S_ISUID | S_ISGID)) ||
	    fgetxattr(fd, "security.capability", NULL, 0) >= 0)
		goto out; /* secure execution: the loader ignores LD_PRELOAD */
	memset(&u, 0, sizeof(u));
	n = pread(fd, &u, sizeof(u), 0);
	if (n >= (ssize_t)sizeof(Elf64_Ehdr) && !memcmp(u.eh.e_ident, ELFMAG, SELFMAG))
		yes = elf_is_dynamic(fd, &u.eh);
	else if (n > 2 && u.head[0] == '#' && u.head[1] == '!')
		yes = script_loads_preload(u.head, (size_t)n, depth);
out:
	smcr_real.close(fd);
	return yes;
}

static size_t env_count(char *const envp[])
{
	size_t n = 0;

	while (envp && envp[n])
		n++;
	return n;
}

/* `envp` without any SMCR_INHERIT of its own, plus `var`, into `out` (n + 2 slots). */
static void env_with(char *const envp[], size_t n, const char *var, char **out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], "SMCR_INHERIT=", 13) != 0)
			out[k++] = envp[i];
	out[k++] = (char *)var;
	out[k] = NULL;
}

enum exec_how { EXEC_PATH, EXEC_SEARCH, EXEC_FD };

static int real_exec(enum exec_how how, const char *name, int fd, char *const argv[],
		     char *const envp[])
{
	switch (how) {
	case EXEC_PATH:
		return smcr_real.execve(name, argv, envp);
	case EXEC_SEARCH:
		SMCR_REAL_OR_ENOSYS(execvpe);
		return smcr_real.execvpe(name, argv, envp);
	default:
		SMCR_REAL_OR_ENOSYS(fexecve);
		return smcr_real.fexecve(fd, argv, envp);
	}
}

/*
 * The program the exec will run, in `buf`; NULL if the exec cannot succeed
 * (then nothing changes).
 */
static const char *exec_target(enum exec_how how, const char *name, int fd, char buf[PATH_MAX])
{
	struct stat st;

	switch (how) {
	case EXEC_PATH:
		return runnable(name) ? name : NULL;
	case EXEC_SEARCH:
		return runnable_on_path(name, buf) ? buf : NULL;
	default:
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			return NULL;
		snprintf(buf, PATH_MAX, "/proc/self/fd/%d", fd);
		return buf;
	}
}

static int exec_common(enum exec_how how, const char *name, int fd, char *const argv[],
		       char *const envp[])
{
	char buf[PATH_MAX];
	const char *prog = NULL, *var = NULL;
	struct smcr_handoff h;
	size_t n = env_count(envp), len = (n + 2) * sizeof(char *);
	char **env = MAP_FAILED;
	bool locked;
	int rc, err;

	smcr_preload_enter();
	/*
	 * A confined process (wrap_seccomp.c) settled its sockets when it was
	 * confined, and its filter, which the new image inherits, may deny what
	 * judging the file takes: the exec goes as it is.
	 */
	if (smcr_preload_active && smcr_smc_enabled && !smcr_engine_confined_known())
		prog = exec_target(how, name, fd, buf);
	if (prog) {
		bool keeps = n < HANDOFF_MAX_ENV && smcr_handoff_env_keeps(envp) &&
			     file_loads_preload(prog, 0);

		/* mmap, not malloc: a vfork child shares its parent's heap and locks */
		if (keeps)
			env = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				   -1, 0);
		var = smcr_handoff_before_exec(&h, env != MAP_FAILED);
		smcr_smc_before_exec();
	}
	/*
	 * The new image must not inherit a soft RLIMIT_NOFILE another thread
	 * raised for a moment (engine.h).  Not in a vfork child: the lock is its
	 * parent's memory, and an exec holding it would keep it locked there.
	 */
	locked = smcr_preload_table_writable();
	if (locked)
		smcr_engine_fd_limit_lock();
	if (env == MAP_FAILED) {
		rc = real_exec(how, name, fd, argv, envp);
	} else {
		if (var)
			env_with(envp, n, var, env);
		rc = real_exec(how, name, fd, argv, var ? env : envp);
	}
	err = errno;
	if (locked)
		smcr_engine_fd_limit_unlock();
	if (env != MAP_FAILED)
		munmap(env, len);
	if (prog)
		smcr_handoff_exec_failed();
	errno = err;
	return rc;
}

SMCR_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_common(EXEC_PATH, path, -1, argv, envp);
}

SMCR_EXPORT int execv(const char *path, char *const argv[])
{
	return exec_common(EXEC_PATH, path, -1, argv, environ);
}

SMCR_EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_common(EXEC_SEARCH, file, -1, argv, environ);
}

SMCR_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return exec_common(EXEC_SEARCH, file, -1, argv, envp);
}

SMCR_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	return exec_common(EXEC_FD, NULL, fd, argv, envp);
}

/*
 * The l variants: their arguments as an argv array (the heap: exec replaces
 * the image anyway, and a failed one frees it), execle's envp after the NULL.
 */
static char **argv_of(const char *arg0, va_list ap, size_t n, char *const **envp)
{
	char **argv = malloc((n + 1) * sizeof(*argv));

	if (!argv)
		return NULL;
	argv[0] = (char *)arg0;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	if (envp)
		*envp = va_arg(ap, char *const *);
	return argv;
}

/* Arguments after arg0 up to and including the NULL. */
static size_t count_args(va_list ap)
{
	size_t n = 1;

	while (va_arg(ap, const char *))
		n++;
	return n;
}

#define L_VARIANT(call, envp_ptr)                                          \
	do {                                                              \
		va_list ap;                                               \
		char **argv;                                              \
		char *const *envp = environ;                              \
		size_t n;                                                 \
		int rc, err;                                              \
                                                                          \
		va_start(ap, arg);                                        \
		n = count_args(ap);                                       \
		va_end(ap);                                               \
		va_start(ap, arg);                                        \
		argv = argv_of(arg, ap, n, envp_ptr);                     \
		va_end(ap);                                               \
		if (!argv) {                                              \
			errno = ENOMEM;                                   \
			return -1;                                        \
		}                                                         \
		rc = call;                                                \
		err = errno;                                              \
		free(argv);                                               \
		errno = err;                                              \
		return rc;                                                \
	} while (0)

SMCR_EXPORT int execl(const char *path, const char *arg, ...)
{
	L_VARIANT(exec_common(EXEC_PATH, path, -1, argv, envp), NULL);
}

SMCR_EXPORT int execlp(const char *file, const char *arg, ...)
{
	L_VARIANT(exec_common(EXEC_SEARCH, file, -1, argv, envp), NULL);
}

SMCR_EXPORT int execle(const char *path, const char *arg, ...)
{
	L_VARIANT(exec_common(EXEC_PATH, path, -1, argv, envp), &envp);
}

/* ---- posix_spawn ---------------------------------------------------------------------- */

/*
 * The dup2s of live file-actions objects, by object. When one does not fit,
 * every spawn with file actions settles its unsettled connections until the
 * table is empty again: never a socket in a child that nobody told.
 */
#define SPAWN_DUPS_MAX 64

static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	const posix_spawn_file_actions_t *fa;
	struct smcr_spawn_dup2 dup;
} spawn_dups[SPAWN_DUPS_MAX];
static unsigned spawn_n_dups;
static bool spawn_dups_lost;

/* init.c's fork handler: a leaf lock, taken before all others. */
void smcr_spawn_fork_prepare(void)
{
	pthread_mutex_lock(&spawn_lock);
}

void smcr_spawn_fork_parent(void)
{
	pthread_mutex_unlock(&spawn_lock);
}

void smcr_spawn_fork_child(void)
{
	pthread_mutex_unlock(&spawn_lock);
}

static void spawn_forget(const posix_spawn_file_actions_t *fa)
{
	unsigned k = 0;

	pthread_mutex_lock(&spawn_lock);
	for (unsigned i = 0; i < spawn_n_dups; i++)
		if (spawn_dups[i].fa != fa)
			spawn_dups[k++] = spawn_dups[i];
	spawn_n_dups = k;
	if (k == 0)
		spawn_dups_lost = false;
	pthread_mutex_unlock(&spawn_lock);
}

SMCR_EXPORT int posix_spawn_file_actions_init(posix_spawn_file_actions_t *fa)
{
	smcr_preload_enter();
	spawn_forget(fa);
	return smcr_real.posix_spawn_file_actions_init(fa);
}

SMCR_EXPORT int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t *fa)
{
	smcr_preload_enter();
	spawn_forget(fa);
	return smcr_real.posix_spawn_file_actions_destroy(fa);
}

SMCR_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int newfd)
{
	int rc;

	smcr_preload_enter();
	rc = smcr_real.posix_spawn_file_actions_adddup2(fa, fd, newfd);
	if (rc != 0 || !smcr_preload_active || !smcr_smc_enabled)
		return rc;
	pthread_mutex_lock(&spawn_lock);
	if (spawn_n_dups < SPAWN_DUPS_MAX) {
		spawn_dups[spawn_n_dups].fa = fa;
		spawn_dups[spawn_n_dups].dup = (struct smcr_spawn_dup2){ fd, newfd };
		spawn_n_dups++;
	} else {
		spawn_dups_lost = true;
	}
	pthread_mutex_unlock(&spawn_lock);
	return rc;
}

/* The recorded dup2s of `fa` into `out`; false if some may be missing. */
static bool spawn_dups_of(const posix_spawn_file_actions_t *fa,
			  struct smcr_spawn_dup2 out[SPAWN_DUPS_MAX], unsigned *n)
{
	bool known;

	*n = 0;
	if (!fa)
		return true;
	pthread_mutex_lock(&spawn_lock);
	for (unsigned i = 0; i < spawn_n_dups; i++)
		if (spawn_dups[i].fa == fa)
			out[(*n)++] = spawn_dups[i].dup;
	known = !spawn_dups_lost;
	pthread_mutex_unlock(&spawn_lock);
	return known;
}

static int spawn_common(bool search, pid_t *pid, const char *file,
			const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
			char *const argv[], char *const envp[])
{
	struct smcr_spawn_dup2 dups[SPAWN_DUPS_MAX];
	char buf[PATH_MAX];
	const char *prog = NULL, *var = NULL;
	struct smcr_handoff h;
	size_t n = env_count(envp);
	char **env = NULL;
	unsigned n_dups;
	bool known;
	int rc;

	smcr_preload_enter();
	/* A confined process: as exec_common. */
	if (smcr_preload_active && smcr_smc_enabled && !smcr_engine_confined_known())
		prog = search ? (runnable_on_path(file, buf) ? buf : NULL)
			      : (runnable(file) ? file : NULL);
	if (prog) {
		if (n < HANDOFF_MAX_ENV && smcr_handoff_env_keeps(envp) && file_loads_preload(prog, 0))
			env = malloc((n + 2) * sizeof(char *));
		known = spawn_dups_of(fa, dups, &n_dups);
		var = smcr_handoff_before_spawn(&h, env != NULL, dups, n_dups, known);
		if (var)
			env_with(envp, n, var, env);
	}
	rc = search ? smcr_real.posix_spawnp(pid, file, fa, attr, argv, var ? env : envp)
		    : smcr_real.posix_spawn(pid, file, fa, attr, argv, var ? env : envp);
	free(env);
	return rc;
}

SMCR_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return spawn_common(false, pid, path, fa, attr, argv, envp);
}

SMCR_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return spawn_common(true, pid, file, fa, attr, argv, envp);
}
