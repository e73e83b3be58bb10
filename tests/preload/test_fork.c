/* SPDX-License-Identifier: MIT */
/*
 * fork: an accept-then-fork server (the child serves the connection the
 * parent accepted, both see consistent fd tables, the parent's close does
 * not disturb the child), and fork from a multi-threaded process whose
 * threads create and close sockets all the time (the fork handlers must
 * not leave a lock held in the child: a deadlock there is a failure via
 * the child's watchdog).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "smc_preload.h"
#include "preload_test.h"

#define CANDIDATE SMC_PRELOAD_FD_CANDIDATE
#define UNTRACKED SMC_PRELOAD_FD_UNTRACKED

static bool child_ok(pid_t pid)
{
	int status;

	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_fork_after_accept(void)
{
	struct sockaddr_in addr;
	int lfd = t_listen_loopback(0, &addr);
	char buf[16];
	pid_t client, server;
	int conn;

	CHECK(lfd >= 0);
	client = fork();
	if (client == 0) {
		int fd;

		alarm(20);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
		    t_write_all(fd, "hello fork", 10) < 0 || t_read_all(fd, buf, 10) < 0)
			_exit(2);
		_exit(memcmp(buf, "HELLO FORK", 10) == 0 ? 0 : 3);
	}
	conn = accept(lfd, NULL, NULL);
	CHECK(smc_preload_fd_mode(conn) == CANDIDATE);
	server = fork();
	if (server == 0) {
		alarm(20);
		close(lfd);
		if (smc_preload_fd_mode(conn) != CANDIDATE)
			_exit(4);
		if (t_read_all(conn, buf, 10) < 0)
			_exit(5);
		for (int i = 0; i < 10; i++)
			buf[i] = (char)(buf[i] >= 'a' && buf[i] <= 'z' ? buf[i] - 32 : buf[i]);
		_exit(t_write_all(conn, buf, 10) == 0 ? 0 : 6);
	}
	/* The parent lets go of the connection; the child still serves it. */
	close(conn);
	CHECK(smc_preload_fd_mode(conn) == UNTRACKED);
	CHECK(smc_preload_fd_mode(lfd) == CANDIDATE);
	CHECK(child_ok(server));
	CHECK(child_ok(client));
	close(lfd);
}

/* A child closing its copy leaves the parent's table alone. */
static void test_child_close_is_private(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	pid_t pid = fork();

	if (pid == 0) {
		close(fd);
		_exit(smc_preload_fd_mode(fd) == UNTRACKED ? 0 : 1);
	}
	CHECK(child_ok(pid));
	CHECK(smc_preload_fd_mode(fd) == CANDIDATE);
	close(fd);
}

#define CHURN_THREADS 3
#define CHURN_BATCH 300 /* more than one fd-table pool chunk: growth takes the lock */
static atomic_bool churn_stop;

static void *churn(void *arg)
{
	int fds[CHURN_BATCH];

	while (!atomic_load(&churn_stop)) {
		int n = 0;

		for (; n < CHURN_BATCH; n++) {
			fds[n] = socket(AF_INET, SOCK_STREAM, 0);
			if (fds[n] < 0)
				break;
		}
		while (n-- > 0)
			close(fds[n]);
	}
	return NULL;
}

static void test_fork_while_threads_churn(void)
{
	pthread_t threads[CHURN_THREADS];
	int forks = 40;

	atomic_store(&churn_stop, false);
	for (int i = 0; i < CHURN_THREADS; i++)
		CHECK(pthread_create(&threads[i], NULL, churn, NULL) == 0);
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			/* Only this thread exists here; every lock must be free. */
			int fds[CHURN_BATCH], ok = 1;

			alarm(10);
			for (int n = 0; n < CHURN_BATCH; n++) {
				fds[n] = socket(AF_INET, SOCK_STREAM, 0);
				ok &= fds[n] >= 0 && smc_preload_fd_mode(fds[n]) == CANDIDATE;
			}
			for (int n = 0; n < CHURN_BATCH; n++)
				close(fds[n]);
			_exit(ok ? 0 : 1);
		}
		CHECK(pid > 0 && child_ok(pid));
	}
	atomic_store(&churn_stop, true);
	for (int i = 0; i < CHURN_THREADS; i++)
		pthread_join(threads[i], NULL);
}

int main(void)
{
	t_watchdog(90);
	if (!smc_preload_fd_mode) {
		fprintf(stderr, "libsmcr.so is not loaded\n");
		return T_EXIT_FAIL;
	}
	test_fork_after_accept();
	test_child_close_is_private();
	test_fork_while_threads_churn();
	return t_result();
}
