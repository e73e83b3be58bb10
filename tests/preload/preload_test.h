/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the preload test programs: checks that report file:line and
 * keep going (so one run shows every mismatch), exit codes meson
 * understands (0 pass, 77 skip, 1 fail), loopback TCP fixtures, and a
 * watchdog so no test can hang.
 */
#ifndef SMCR_TESTS_PRELOAD_TEST_H
#define SMCR_TESTS_PRELOAD_TEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

static int t_failures;

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                \
			t_failures++;                                                  \
		}                                                                      \
	} while (0)

/* call must fail with -1 and exactly errno expected. */
#define CHECK_FAILS(call, expected)                                                    \
	do {                                                                           \
		errno = 0;                                                             \
		long t_ret_ = (long)(call);                                            \
		int t_err_ = errno;                                                    \
		if (t_ret_ != -1 || t_err_ != (expected)) {                            \
			fprintf(stderr, "%s:%d: %s: returned %ld errno %d (%s), expected -1 errno %d (%s)\n", \
				__FILE__, __LINE__, #call, t_ret_, t_err_, strerror(t_err_), \
				(expected), strerror(expected));                       \
			t_failures++;                                                  \
		}                                                                      \
	} while (0)

/* call must succeed (>= 0) and leave errno exactly as it was. */
#define CHECK_OK_ERRNO_KEPT(call)                                                      \
	({                                                                             \
		errno = 31337;                                                         \
		long t_ret_ = (long)(call);                                            \
		if (t_ret_ < 0 || errno != 31337) {                                    \
			fprintf(stderr, "%s:%d: %s: returned %ld, errno %d (expected success, errno untouched)\n", \
				__FILE__, __LINE__, #call, t_ret_, errno);             \
			t_failures++;                                                  \
		}                                                                      \
		t_ret_;                                                                \
	})

static inline int t_result(void)
{
	if (t_failures)
		fprintf(stderr, "%d check(s) failed\n", t_failures);
	return t_failures ? T_EXIT_FAIL : T_EXIT_PASS;
}

/* Kills the test after seconds: a hang is a failure, never a stuck CI job. */
static inline void t_watchdog(unsigned seconds)
{
	signal(SIGALRM, SIG_DFL);
	alarm(seconds);
}

/* A listening TCP socket on 127.0.0.1 with a kernel-chosen port. */
static inline int t_listen_loopback(int type_flags, struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM | type_flags, 0);

	if (fd < 0)
		return -1;
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)addr, &len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A connected TCP pair over loopback: *client and *server (accepted). */
static inline int t_tcp_pair(int *client, int *server)
{
	struct sockaddr_in addr;
	int lfd = t_listen_loopback(0, &addr);

	if (lfd < 0)
		return -1;
	*client = socket(AF_INET, SOCK_STREAM, 0);
	if (*client < 0 || connect(*client, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(lfd);
		return -1;
	}
	*server = accept(lfd, NULL, NULL);
	close(lfd);
	return *server < 0 ? -1 : 0;
}

/* Writes and reads all of len, or fails. */
static inline int t_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static inline int t_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

#endif /* SMCR_TESTS_PRELOAD_TEST_H */
