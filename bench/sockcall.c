// SPDX-License-Identifier: MIT
/*
 * sockcall: the cost of one socket call, in nanoseconds, to compare a process
 * with and without the interposer. One thread owns both ends of a TCP
 * loopback connection and bounces a small message between them, so there is
 * no wake-up, no scheduler and no other process in the measurement: only the
 * calls themselves (libc, the wrapper if present, the kernel).
 *
 *   sockcall MODE SECONDS [MSG_BYTES]
 *
 * MODE: sendrecv  send() + recv() on TCP (4 calls per round)
 *       rw        write() + read() on TCP
 *       pipe      write() + read() on a pipe (an fd the interposer must pass through)
 *       poll      poll() on a readable TCP socket + recv(MSG_PEEK)
 *       socket    socket() + close() of a TCP socket (fd table bookkeeping)
 *       eagain    recv(MSG_DONTWAIT) on an empty TCP socket: the cheapest call
 *                 on a tracked socket, so the wrapper's own cost shows most
 * SECONDS is split into TRIALS runs, each timed in this thread's CPU time;
 * the fastest is the call's cost with the least interference from the rest
 * of the machine (the median is printed too).
 * Prints: "MODE min_ns_per_call median_ns_per_call CALLS".
 *
 *   sockcall MODE rounds=N [MSG_BYTES]
 *
 * runs exactly N rounds (a multiple of 1000) with no timing and prints
 * "MODE CALLS": for counting instructions under valgrind, where the
 * difference between two N is the exact cost of the calls in user space.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS_PER_CLOCK_CHECK 1000
#define MAX_MSG 4096
#define TRIALS 11

static double clock_seconds(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_seconds(void)
{
	return clock_seconds(CLOCK_MONOTONIC);
}

/* CPU time of this thread: time it spent descheduled by other load does not
 * count, which removes most of a shared machine's noise. */
static double cpu_seconds(void)
{
	return clock_seconds(CLOCK_THREAD_CPUTIME_ID);
}

static void die(const char *what)
{
	fprintf(stderr, "sockcall: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A connected TCP pair on 127.0.0.1, both ends in this thread. */
static void tcp_pair(int fds[2])
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int one = 1;
	int listener = socket(AF_INET, SOCK_STREAM, 0);

	if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(listener, 1) < 0 || getsockname(listener, (struct sockaddr *)&addr, &len) < 0)
		die("listen");
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&addr, sizeof(addr)) < 0)
		die("connect");
	fds[1] = accept(listener, NULL, NULL);
	if (fds[1] < 0)
		die("accept");
	close(listener);
	for (int i = 0; i < 2; i++)
		if (setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
			die("TCP_NODELAY");
}

/* Reads exactly n bytes (a loopback message may in theory arrive split). */
static void read_full(int fd, char *buf, size_t n, int use_recv)
{
	while (n > 0) {
		ssize_t got = use_recv ? recv(fd, buf, n, 0) : read(fd, buf, n);

		if (got <= 0)
			die("read");
		buf += got;
		n -= (size_t)got;
	}
}

static void write_full(int fd, const char *buf, size_t n, int use_send)
{
	ssize_t put = use_send ? send(fd, buf, n, 0) : write(fd, buf, n);

	if (put != (ssize_t)n)
		die("write");
}

/* One round: a message a -> b and back; 4 calls. */
static void bounce(const int a[2], const int b[2], char *buf, size_t n, int sockcalls)
{
	write_full(a[1], buf, n, sockcalls);
	read_full(b[0], buf, n, sockcalls);
	write_full(b[1], buf, n, sockcalls);
	read_full(a[0], buf, n, sockcalls);
}

/* Set by "rounds=N": run exactly that many rounds instead of for a time. */
static unsigned long fixed_rounds;

static unsigned long run(const char *mode, double seconds, size_t n)
{
	char buf[MAX_MSG] = { 0 };
	unsigned long rounds = 0;
	unsigned calls_per_round = 4;
	int tcp[2], p1[2], p2[2];
	int a[2], b[2]; /* a[1] writes to b[0]; b[1] writes to a[0] */
	int sockcalls = 0, kind;
	double end = now_seconds() + seconds;

	if (!strcmp(mode, "sendrecv") || !strcmp(mode, "rw")) {
		kind = 0;
		sockcalls = mode[0] == 's';
		tcp_pair(tcp);
		a[0] = a[1] = tcp[0];
		b[0] = b[1] = tcp[1];
	} else if (!strcmp(mode, "pipe")) {
		kind = 0;
		if (pipe(p1) < 0 || pipe(p2) < 0)
			die("pipe");
		a[1] = p1[1];
		b[0] = p1[0];
		b[1] = p2[1];
		a[0] = p2[0];
	} else if (!strcmp(mode, "poll")) {
		kind = 1;
		calls_per_round = 2;
		tcp_pair(tcp);
		write_full(tcp[0], buf, n, 1);
	} else if (!strcmp(mode, "socket")) {
		kind = 2;
		calls_per_round = 2;
	} else if (!strcmp(mode, "eagain")) {
		kind = 3;
		calls_per_round = 1;
		tcp_pair(tcp);
	} else {
		fprintf(stderr, "sockcall: unknown mode %s\n", mode);
		exit(2);
	}

	while (fixed_rounds ? rounds < fixed_rounds : now_seconds() < end) {
		for (int i = 0; i < ROUNDS_PER_CLOCK_CHECK; i++) {
			if (kind == 0) {
				bounce(a, b, buf, n, sockcalls);
			} else if (kind == 1) {
				struct pollfd pfd = { .fd = tcp[1], .events = POLLIN };

				if (poll(&pfd, 1, 1000) != 1 || recv(tcp[1], buf, n, MSG_PEEK) <= 0)
					die("poll");
			} else if (kind == 2) {
				int fd = socket(AF_INET, SOCK_STREAM, 0);

				if (fd < 0)
					die("socket");
				close(fd);
			} else if (recv(tcp[1], buf, n, MSG_DONTWAIT) != -1 || errno != EAGAIN) {
				die("recv on an empty socket");
			}
		}
		rounds += ROUNDS_PER_CLOCK_CHECK;
	}
	if (kind == 0 && !strcmp(mode, "pipe")) {
		close(p1[0]);
		close(p1[1]);
		close(p2[0]);
		close(p2[1]);
	} else if (kind != 2) {
		close(tcp[0]);
		close(tcp[1]);
	}
	return rounds * calls_per_round;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: sockcall sendrecv|rw|pipe|poll|socket SECONDS [MSG_BYTES]\n");
		return 2;
	}
	size_t n = argc > 3 ? (size_t)atoi(argv[3]) : 14;

	if (!strncmp(argv[2], "rounds=", 7)) {
		fixed_rounds = strtoul(argv[2] + 7, NULL, 10);
		if (fixed_rounds == 0 || fixed_rounds % ROUNDS_PER_CLOCK_CHECK || n < 1 || n > MAX_MSG) {
			fprintf(stderr, "sockcall: rounds must be a positive multiple of %d\n",
				ROUNDS_PER_CLOCK_CHECK);
			return 2;
		}
		printf("%s %lu\n", argv[1], run(argv[1], 0, n));
		return 0;
	}
	double seconds = atof(argv[2]);

	if (n < 1 || n > MAX_MSG || seconds <= 0) {
		fprintf(stderr, "sockcall: bad arguments\n");
		return 2;
	}
	alarm((unsigned)seconds + 10);
	run(argv[1], seconds / 10, n); /* warm-up */

	double ns_per_call[TRIALS];
	unsigned long total_calls = 0;

	for (int t = 0; t < TRIALS; t++) {
		double start = cpu_seconds();
		unsigned long calls = run(argv[1], seconds / TRIALS, n);

		ns_per_call[t] = (cpu_seconds() - start) * 1e9 / (double)calls;
		total_calls += calls;
	}
	qsort(ns_per_call, TRIALS, sizeof(ns_per_call[0]), compare_doubles);
	printf("%s %.1f %.1f %lu\n", argv[1], ns_per_call[0], ns_per_call[TRIALS / 2], total_calls);
	return 0;
}
