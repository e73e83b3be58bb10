/* SPDX-License-Identifier: MIT */
/*
 * Threads doing socket/dup/close/accept at the same time. Each thread
 * checks the fds it owns (a number another thread closed may be reused at
 * any moment, so only owned fds have a stable answer): tracked TCP
 * sockets, their dups, the copies surviving the original's close,
 * untracked UDP sockets, and connections accepted by a separate thread.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "smc_preload.h"
#include "preload_test.h"

#define CANDIDATE SMC_PRELOAD_FD_CANDIDATE
#define UNTRACKED SMC_PRELOAD_FD_UNTRACKED
#define WORKERS 4
#define ROUNDS 1500
#define CONNECTS (WORKERS * ROUNDS / 10)

static atomic_int bad;
static struct sockaddr_in listen_addr;

#define EXPECT(cond)                                                           \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "line %d: %s\n", __LINE__, #cond);     \
			atomic_fetch_add(&bad, 1);                             \
		}                                                              \
	} while (0)

static void *worker(void *arg)
{
	for (int round = 0; round < ROUNDS; round++) {
		int tcp = socket(AF_INET, SOCK_STREAM, 0);
		int udp = socket(AF_INET, SOCK_DGRAM, 0);
		int copy = dup(tcp);
		int copy2 = fcntl(tcp, F_DUPFD_CLOEXEC, 0);
		int copy3 = dup3(copy, copy2, 0); /* onto our own copy2: still the socket */

		EXPECT(smc_preload_fd_mode(tcp) == CANDIDATE);
		EXPECT(smc_preload_fd_mode(udp) == UNTRACKED);
		EXPECT(smc_preload_fd_mode(copy) == CANDIDATE);
		EXPECT(copy3 == copy2 && smc_preload_fd_mode(copy2) == CANDIDATE);
		close(tcp);
		EXPECT(smc_preload_fd_mode(copy) == CANDIDATE);
		EXPECT(dup2(udp, copy2) == copy2 && smc_preload_fd_mode(copy2) == UNTRACKED);
		close(copy);
		close(copy2);
		close(udp);
		if (round % 10 == 0) {
			int fd = socket(AF_INET, SOCK_STREAM, 0);

			EXPECT(connect(fd, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) == 0);
			/* The listener is this process's: the client stays TCP. */
			EXPECT(smc_preload_fd_mode(fd) == SMC_PRELOAD_FD_FALLBACK);
			close(fd);
		}
	}
	return NULL;
}

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg;

	for (int i = 0; i < CONNECTS; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		EXPECT(fd >= 0 && smc_preload_fd_mode(fd) == CANDIDATE);
		close(fd);
	}
	return NULL;
}

int main(void)
{
	pthread_t workers[WORKERS], acc;
	int lfd;

	t_watchdog(90);
	if (!smc_preload_fd_mode) {
		fprintf(stderr, "libsmcr.so is not loaded\n");
		return T_EXIT_FAIL;
	}
	lfd = t_listen_loopback(0, &listen_addr);
	CHECK(lfd >= 0);
	CHECK(pthread_create(&acc, NULL, acceptor, &lfd) == 0);
	for (int i = 0; i < WORKERS; i++)
		CHECK(pthread_create(&workers[i], NULL, worker, NULL) == 0);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(workers[i], NULL);
	pthread_join(acc, NULL);
	close(lfd);
	CHECK(atomic_load(&bad) == 0);
	return t_result();
}
