/* SPDX-License-Identifier: MIT */
/*
 * The exec family: before the process image is replaced, the SMC
 * connections it owns are reset (smc.c, smcr_smc_before_exec: design §8,
 * "an SMC-mode connection cannot cross exec; it must end visibly").
 *
 * Only an exec that can succeed resets anything: the file is looked up
 * first (access X_OK, along PATH for the p variants), so a program that
 * tries one name after another keeps its connections through the failures.
 * libc's own execs (execl* call execve internally, posix_spawn and system
 * run in a child) do not pass through here, hence the l variants are
 * wrapped too; a child's exec never touches its parent's connections.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/preload.h"
#include "preload/smc.h"

extern char **environ;

static bool runnable(const char *path)
{
	struct stat st;

	return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* execvp's search: a name with a slash as it is, else along PATH. */
static bool runnable_on_path(const char *file)
{
	const char *path = getenv("PATH"), *p;
	char buf[PATH_MAX];

	if (!*file)
		return false;
	if (strchr(file, '/'))
		return runnable(file);
	if (!path)
		path = "/bin:/usr/bin";
	for (p = path;; p++) {
		const char *end = strchrnul(p, ':');
		int n = end == p ? snprintf(buf, sizeof(buf), "%s", file)
				 : snprintf(buf, sizeof(buf), "%.*s/%s", (int)(end - p), p, file);

		if (n > 0 && (size_t)n < sizeof(buf) && runnable(buf))
			return true;
		if (!*end)
			return false;
		p = end;
	}
}

static void before_exec(bool will_run)
{
	if (will_run)
		smcr_smc_before_exec();
}

static int do_execve(const char *path, char *const argv[], char *const envp[])
{
	smcr_preload_enter();
	before_exec(runnable(path));
	return smcr_real.execve(path, argv, envp);
}

SMCR_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return do_execve(path, argv, envp);
}

SMCR_EXPORT int execv(const char *path, char *const argv[])
{
	smcr_preload_enter();
	before_exec(runnable(path));
	return smcr_real.execv(path, argv);
}

SMCR_EXPORT int execvp(const char *file, char *const argv[])
{
	smcr_preload_enter();
	before_exec(runnable_on_path(file));
	return smcr_real.execvp(file, argv);
}

static int do_execvpe(const char *file, char *const argv[], char *const envp[])
{
	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(execvpe);
	before_exec(runnable_on_path(file));
	return smcr_real.execvpe(file, argv, envp);
}

SMCR_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return do_execvpe(file, argv, envp);
}

SMCR_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct stat st;

	smcr_preload_enter();
	SMCR_REAL_OR_ENOSYS(fexecve);
	before_exec(fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	return smcr_real.fexecve(fd, argv, envp);
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
	L_VARIANT(do_execve(path, argv, envp), NULL);
}

SMCR_EXPORT int execlp(const char *file, const char *arg, ...)
{
	L_VARIANT(do_execvpe(file, argv, envp), NULL);
}

SMCR_EXPORT int execle(const char *path, const char *arg, ...)
{
	L_VARIANT(do_execve(path, argv, envp), &envp);
}
