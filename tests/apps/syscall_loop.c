// SPDX-License-Identifier: MIT
/*
 * syscall_loop: a fixed number of socket calls on a path that stays TCP, for
 * counting the system calls they cost (smc_syscalls.sh runs it under strace
 * -c at two lengths: the difference is the cost of the extra calls alone).
 *
 *   syscall_loop eagain N      an accepted loopback connection whose client
 *                              has sent nothing: N recv(MSG_DONTWAIT), each
 *                              EAGAIN; then the client's first byte is read
 *                              (the server's connection then stays TCP)
 *   syscall_loop connect PORT N
 *                              N connections to 127.0.0.1:PORT, one after the
 *                              other: connect, 14 bytes each way, close
 *   syscall_loop serve N       N connections accepted on a loopback listener,
 *                              one after the other: accept, 14 bytes each
 *                              way, close
 *   syscall_loop serve-nb N    the same as an event-driven server (nginx) does
 *                              it: accept4(SOCK_NONBLOCK), epoll (edge
 *                              triggered), recv into a 4 KiB buffer until
 *                              EAGAIN
 *
 * The clients of `eagain` and `serve` are made with raw system calls, so the
 * library under test never sees them: only the accepted sockets are tracked.  Afterwards the
 * program prints "ready PID" and waits for its stdin to end, so that the
 * caller can read its published stats while it still runs.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "syscall_loop: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void eagain(long n)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	char buf[64];
	int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd, sfd;

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) < 0)
		die("listen");
	cfd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	if (cfd < 0 || syscall(SYS_connect, cfd, &addr, sizeof(addr)) < 0)
		die("raw connect");
	sfd = accept(lfd, NULL, NULL);
	if (sfd < 0)
		die("accept");
	for (long i = 0; i < n; i++)
		if (recv(sfd, buf, sizeof(buf), MSG_DONTWAIT) != -1 || errno != EAGAIN)
			die("recv on a connection whose client sent nothing");
	if (syscall(SYS_write, cfd, "x", 1) != 1)
		die("raw write");
	if (recv(sfd, buf, sizeof(buf), 0) != 1 || buf[0] != 'x')
		die("recv of the client's first byte");
	syscall(SYS_close, cfd);
	close(sfd);
	close(lfd);
}

/* Reads exactly `len` bytes through the library's read(). */
static void read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);

		if (r <= 0)
			die("read");
		got += (size_t)r;
	}
}

static int loopback_listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	*addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (lfd < 0 || bind(lfd, (struct sockaddr *)addr, sizeof(*addr)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)addr, &len) < 0)
		die("listen");
	return lfd;
}

static void raw_read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		long r = syscall(SYS_read, fd, buf + got, len - got);

		if (r <= 0)
			die("raw read");
		got += (size_t)r;
	}
}

static void serve(long n)
{
	struct sockaddr_in addr;
	char msg[14] = "syscall_loop.", buf[14];
	int lfd = loopback_listener(&addr);

	for (long i = 0; i < n; i++) {
		int cfd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0), sfd;

		if (cfd < 0 || syscall(SYS_connect, cfd, &addr, sizeof(addr)) < 0 ||
		    syscall(SYS_write, cfd, msg, sizeof(msg)) != (long)sizeof(msg))
			die("raw client");
		sfd = accept(lfd, NULL, NULL);
		if (sfd < 0)
			die("accept");
		read_all(sfd, buf, sizeof(buf));
		if (write(sfd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			die("write");
		close(sfd);
		raw_read_all(cfd, buf, sizeof(buf));
		syscall(SYS_close, cfd);
	}
	close(lfd);
}

/* One connection's request, as an event-driven server reads it: 14 bytes, then EAGAIN. */
static void serve_nb_one(int ep, int sfd, char *buf, size_t len)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.fd = sfd };
	size_t got = 0;

	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0)
		die("epoll_ctl");
	for (;;) {
		ssize_t r;

		if (epoll_wait(ep, &ev, 1, 10000) != 1)
			die("epoll_wait");
		while ((r = recv(sfd, buf + got, len - got, 0)) > 0)
			got += (size_t)r;
		if (r < 0 && errno != EAGAIN)
			die("recv");
		if (got >= 14 || r == 0)
			break;
	}
	if (got != 14)
		die("short request");
}

static void serve_nb(long n)
{
	struct sockaddr_in addr;
	char msg[14] = "syscall_loop.", buf[4096];
	int lfd = loopback_listener(&addr), ep = epoll_create1(0);

	if (ep < 0)
		die("epoll_create1");
	for (long i = 0; i < n; i++) {
		int cfd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0), sfd;

		if (cfd < 0 || syscall(SYS_connect, cfd, &addr, sizeof(addr)) < 0 ||
		    syscall(SYS_write, cfd, msg, sizeof(msg)) != (long)sizeof(msg))
			die("raw client");
		sfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (sfd < 0)
			die("accept4");
		serve_nb_one(ep, sfd, buf, sizeof(buf));
		if (write(sfd, buf, sizeof(msg)) != (ssize_t)sizeof(msg))
			die("write");
		close(sfd);
		raw_read_all(cfd, buf, sizeof(msg));
		syscall(SYS_close, cfd);
	}
	close(ep);
	close(lfd);
}

static void connections(int port, long n)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char msg[14] = "syscall_loop.", buf[14];

	for (long i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
			die("connect");
		if (write(fd, msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			die("write");
		read_all(fd, buf, sizeof(buf));
		if (memcmp(buf, msg, sizeof(msg)) != 0) {
			fprintf(stderr, "syscall_loop: the echo differs\n");
			exit(1);
		}
		close(fd);
	}
}

int main(int argc, char **argv)
{
	char c;

	if (argc == 3 && !strcmp(argv[1], "eagain"))
		eagain(atol(argv[2]));
	else if (argc == 4 && !strcmp(argv[1], "connect"))
		connections(atoi(argv[2]), atol(argv[3]));
	else if (argc == 3 && !strcmp(argv[1], "serve"))
		serve(atol(argv[2]));
	else if (argc == 3 && !strcmp(argv[1], "serve-nb"))
		serve_nb(atol(argv[2]));
	else {
		fprintf(stderr,
			"usage: syscall_loop eagain N | connect PORT N | serve N | serve-nb N\n");
		return 2;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
