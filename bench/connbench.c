// SPDX-License-Identifier: MIT
/*
 * connbench: connections per second and a 14-byte ping-pong over TCP or a UNIX
 * socket, for bench/run. An ordinary socket program: under scripts/smc_run it
 * is smcr's, without it plain TCP, and with "unix" it measures the UNIX socket
 * beside them, with the same code.
 *
 *   connbench server tcp ADDR PORT | server unix PATH
 *       one thread, epoll, non-blocking (as nginx or redis serve): every
 *       connection gets each 14-byte request echoed back as its response, and
 *       is closed when the client closes it. Runs until killed.
 *   connbench cps tcp ADDR PORT THREADS SECONDS | cps unix PATH THREADS SECONDS
 *       THREADS threads, each making connections one after the other for
 *       SECONDS: socket + connect + 14-byte request + 14-byte response + close
 *       (the client closes first). Prints "cps rate R conns N". SECONDS may
 *       be n=COUNT instead: exactly COUNT connections per thread (for
 *       counting system calls per connection as a difference of two counts).
 *   connbench pp tcp ADDR PORT SECONDS | pp unix PATH SECONDS
 *       one connection, 14-byte messages echoed one at a time (TCP_NODELAY),
 *       every round trip timed after 100 untimed ones. Prints "pp rtt_p50_us
 *       R rounds N".
 *
 * Every answer is checked byte for byte; any error exits 1 with a message.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MSG 14
#define MAX_EVENTS 256
#define MAX_SAMPLES (1 << 21)
#define PP_WARMUP 100
#define MAX_THREADS 64

static int die(const char *what)
{
	fprintf(stderr, "connbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The server's address, from the command line. */
static struct sockaddr_storage target;
static socklen_t target_len;

static void parse_target(char **argv, int *used)
{
	memset(&target, 0, sizeof(target));
	if (!strcmp(argv[0], "unix")) {
		struct sockaddr_un *un = (struct sockaddr_un *)&target;

		un->sun_family = AF_UNIX;
		if (strlen(argv[1]) >= sizeof(un->sun_path)) {
			fprintf(stderr, "connbench: path too long\n");
			exit(2);
		}
		strcpy(un->sun_path, argv[1]);
		target_len = sizeof(*un);
		*used = 2;
	} else if (!strcmp(argv[0], "tcp")) {
		struct sockaddr_in *in = (struct sockaddr_in *)&target;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)atoi(argv[2]));
		if (inet_pton(AF_INET, argv[1], &in->sin_addr) != 1) {
			fprintf(stderr, "connbench: bad IPv4 address %s\n", argv[1]);
			exit(2);
		}
		target_len = sizeof(*in);
		*used = 3;
	} else {
		fprintf(stderr, "connbench: transport must be tcp or unix\n");
		exit(2);
	}
}

static void nodelay(int fd)
{
	int one = 1;

	if (target.ss_family == AF_INET &&
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		die("TCP_NODELAY");
}

static int connect_one(void)
{
	int fd = socket(target.ss_family, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&target, target_len) < 0)
		die("connect");
	return fd;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write");
		buf += n;
		len -= (size_t)n;
	}
}

static void read_all(int fd, char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = read(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			errno = ECONNRESET;
		if (n <= 0)
			die("read");
		buf += n;
		len -= (size_t)n;
	}
}

/* ---- server ------------------------------------------------------------- */

static void set_nonblock_echo(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

/* Echo what the client sent; a 14-byte response fits any socket buffer at once. */
static void serve_readable(int fd)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n > 0) {
			if (write(fd, buf, (size_t)n) != n) {
				close(fd);
				return;
			}
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno == EINTR)
			continue;
		close(fd); /* EOF or error: the client is gone */
		return;
	}
}

static __attribute__((noreturn)) int server(void)
{
	struct epoll_event events[MAX_EVENTS];
	int one = 1, ep, listener;

	if (target.ss_family == AF_UNIX)
		unlink(((struct sockaddr_un *)&target)->sun_path);
	listener = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (listener < 0)
		die("socket");
	setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(listener, (struct sockaddr *)&target, target_len) < 0 || listen(listener, 1024) < 0)
		die("listen");
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	set_nonblock_echo(ep, listener);
	for (;;) {
		int n = epoll_wait(ep, events, MAX_EVENTS, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;

			if (fd != listener) {
				serve_readable(fd);
				continue;
			}
			for (;;) {
				int c = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (c < 0) {
					if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
						break;
					if (errno == EMFILE || errno == ENFILE)
						break;
					die("accept4");
				}
				nodelay(c);
				set_nonblock_echo(ep, c);
			}
		}
	}
}

/* ---- clients ------------------------------------------------------------ */

static const char request[MSG] = "connbench-req";

static void one_exchange(int fd, char *tag)
{
	char answer[MSG];

	write_all(fd, tag, MSG);
	read_all(fd, answer, MSG);
	if (memcmp(answer, tag, MSG) != 0) {
		fprintf(stderr, "connbench: the answer is not the request\n");
		exit(1);
	}
}

static double cps_deadline;
static unsigned long cps_count; /* per thread; 0 = until cps_deadline */
static atomic_ulong cps_conns;

static void *cps_thread(void *arg)
{
	char tag[MSG];
	unsigned long n = 0;

	memcpy(tag, request, MSG);
	tag[0] = (char)('A' + (intptr_t)arg % 26);
	while (cps_count ? n < cps_count : now_s() < cps_deadline) {
		int fd = connect_one();

		nodelay(fd);
		tag[MSG - 1] = (char)n;
		one_exchange(fd, tag);
		if (close(fd) < 0)
			die("close");
		n++;
	}
	atomic_fetch_add(&cps_conns, n);
	return NULL;
}

static int cps(int threads, const char *length)
{
	pthread_t tid[MAX_THREADS];
	double start, seconds = 0;

	if (!strncmp(length, "n=", 2))
		cps_count = strtoul(length + 2, NULL, 10);
	else
		seconds = atof(length);
	if (threads < 1 || threads > MAX_THREADS || (seconds <= 0 && cps_count == 0)) {
		fprintf(stderr, "connbench: 1..%d threads, seconds > 0 or n=COUNT > 0\n", MAX_THREADS);
		return 2;
	}
	start = now_s();
	cps_deadline = start + seconds;
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, cps_thread, (void *)(intptr_t)i) != 0)
			die("pthread_create");
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	printf("cps rate %.2f conns %lu\n", (double)atomic_load(&cps_conns) / (now_s() - start),
	       atomic_load(&cps_conns));
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int pingpong(double seconds)
{
	static double rtt[MAX_SAMPLES];
	char tag[MSG];
	size_t n = 0;
	int fd = connect_one();
	double end;

	memcpy(tag, request, MSG);
	nodelay(fd);
	for (int i = 0; i < PP_WARMUP; i++)
		one_exchange(fd, tag);
	end = now_s() + seconds;
	while (n < MAX_SAMPLES) {
		double t0 = now_s(), t1;

		tag[MSG - 1] = (char)n;
		one_exchange(fd, tag);
		t1 = now_s();
		rtt[n++] = t1 - t0;
		if (t1 >= end)
			break;
	}
	close(fd);
	qsort(rtt, n, sizeof(rtt[0]), cmp_double);
	printf("pp rtt_p50_us %.3f rounds %zu\n", rtt[n / 2] * 1e6, n);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int used;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 4 || (!strcmp(argv[2], "tcp") && argc < 5)) {
		fprintf(stderr, "usage: connbench server|cps|pp tcp ADDR PORT|unix PATH ...\n");
		return 2;
	}
	parse_target(argv + 2, &used);
	argv += 2 + used;
	argc -= 2 + used;
	if (!strcmp(mode, "server") && argc == 0)
		return server();
	alarm(600);
	if (!strcmp(mode, "cps") && argc == 2)
		return cps(atoi(argv[0]), argv[1]);
	if (!strcmp(mode, "pp") && argc == 1)
		return pingpong(atof(argv[0]));
	fprintf(stderr, "connbench: bad arguments\n");
	return 2;
}
