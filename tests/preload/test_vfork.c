/* SPDX-License-Identifier: MIT */
/*
 * vfork: the child shares the parent's memory until exec or _exit, and
 * what it closes and dup2s (python's subprocess does exactly that between
 * vfork and exec) must not change the parent's view of its own sockets.
 * Also: vfork still behaves as vfork (the child's exit status arrives, the
 * parent resumes after the child), and the exec'ed child is a fresh,
 * separately initialised process.
 */
#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>

#include "smc_preload.h"
#include "preload_test.h"

#define CANDIDATE SMC_PRELOAD_FD_CANDIDATE

int main(int argc, char **argv)
{
	int sock, copy, status;
	pid_t pid;

	t_watchdog(30);
	if (argc == 2 && strcmp(argv[1], "--exec-child") == 0) {
		/* exec'ed from the vfork child: the library initialised anew here. */
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		return smc_preload_fd_mode && smc_preload_fd_mode(fd) == CANDIDATE ? 0 : 3;
	}
	if (!smc_preload_fd_mode) {
		fprintf(stderr, "libsmcr.so is not loaded\n");
		return T_EXIT_FAIL;
	}
	sock = socket(AF_INET, SOCK_STREAM, 0);
	copy = dup(sock);
	CHECK(smc_preload_fd_mode(sock) == CANDIDATE && smc_preload_fd_mode(copy) == CANDIDATE);

	/* The child closes and overwrites fds, then exits. */
	pid = vfork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		dup2(null, sock);
		close(copy);
		close_range(3, INT_MAX, 0);
		_exit(7);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 7);
	CHECK(smc_preload_fd_mode(sock) == CANDIDATE);
	CHECK(smc_preload_fd_mode(copy) == CANDIDATE);
	CHECK(fcntl(sock, F_GETFD) >= 0 && fcntl(copy, F_GETFD) >= 0);

	/* The parent's own bookkeeping works again after the child is gone. */
	close(copy);
	CHECK(smc_preload_fd_mode(copy) == SMC_PRELOAD_FD_UNTRACKED);
	CHECK(smc_preload_fd_mode(sock) == CANDIDATE);

	/* vfork + exec, the way posix shells and subprocess use it. */
	pid = vfork();
	if (pid == 0) {
		close(sock);
		execl(argv[0], argv[0], "--exec-child", (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0);
	CHECK(smc_preload_fd_mode(sock) == CANDIDATE);
	close(sock);
	CHECK(smc_preload_fd_mode(sock) == SMC_PRELOAD_FD_UNTRACKED);
	return t_result();
}
