/* SPDX-License-Identifier: MIT */
/*
 * Readiness of many same-host SMC connections under request/response load,
 * the shape of redis-benchmark against redis-server: a client with NCONN
 * connections sends a request on each, waits for its answer and sends the
 * next, switching its level-triggered epoll interest between writing and
 * reading around every request; the server answers each byte it reads.
 *
 *   test_doorbell CASE    CASE: the server's event loop
 *     lt-partial  level-triggered epoll; reads at most PARTIAL bytes per
 *                 report, so a socket must be reported again while bytes wait
 *     et          edge-triggered epoll; reads until EAGAIN
 *     poll        poll(), partial reads
 *     select      select(), partial reads
 *     blocking    level-triggered epoll, partial reads; the client sends a
 *                 request on every connection, then reads the answers with
 *                 blocking reads, one connection after the other
 *
 * Every answer is checked byte for byte; a wake-up lost on any connection
 * stalls the exchange, which fails after STALL_MS.  That neither side spins
 * is proved from the library's own counter of wake-ups that had nothing for
 * the application (wakeups_empty): bounded per request while data flows, and
 * at most one per connection while both sides sit idle in their waits.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/wait.h>

#include "smc_preload.h"
#include "smcr/stats_abi.h"
#include "preload_test.h"

#define NCONN 80     /* more than a thread's list of sockets to settle before a wait */
#define ROUNDS 60    /* requests per connection */
#define MAXREQ 200   /* request length: 1 .. MAXREQ bytes */
#define PARTIAL 5    /* bytes a partial reader takes per report */
#ifndef STALL_MS /* -DSTALL_MS=... to look at a stuck run with a debugger */
#define STALL_MS 10000
#endif
#define IDLE_MS 300

enum server_kind { LT_PARTIAL, ET, POLL, SELECT, BLOCKING_CLIENT };

static enum server_kind kind;
static struct sockaddr_in server_addr;
static int go_pipe[2]; /* server -> client: both idle phases are over, close */

#define CHECK_MODE_SMC(fd) CHECK(smc_preload_fd_mode(fd) == SMC_PRELOAD_FD_SMC)

static size_t req_len(int conn, int round)
{
	return 1 + (size_t)((conn * 31 + round * 7) % MAXREQ);
}

static unsigned char req_byte(int conn, int round, size_t i)
{
	return (unsigned char)(conn * 7 + round * 13 + (int)i * 3);
}

static size_t total_bytes(void)
{
	size_t t = 0;

	for (int c = 0; c < NCONN; c++)
		for (int r = 0; r < ROUNDS; r++)
			t += req_len(c, r);
	return t;
}

/*
 * Looked at only once this process has connections: the library publishes
 * stats.<pid> at its first stats event, and a file of that name before then
 * is a dead process's.  Its counters start at zero with the process.
 */
static const struct smcr_stats_file *my_stats(void)
{
	static const struct smcr_stats_file *f;
	char path[512];
	int fd;

	if (f)
		return f;
	snprintf(path, sizeof(path), "%s/smcr/stats.%d", getenv("XDG_RUNTIME_DIR"),
		 (int)getpid());
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED || f->magic != SMCR_STATS_MAGIC)
		f = NULL;
	return f;
}

static uint64_t wakeups_empty(void)
{
	const struct smcr_stats_file *f = my_stats();

	return f ? __atomic_load_n(&f->wakeups_empty, __ATOMIC_RELAXED) : UINT64_MAX;
}

/* Every connection of this process reached SMC and is still open. */
static void check_all_smc(const char *who)
{
	const struct smcr_stats_file *f = my_stats();

	CHECK(f != NULL);
	if (!f)
		return;
	if (f->handshakes_smc < NCONN || f->conns_open != NCONN || f->fallbacks != 0)
		fprintf(stderr, "%s: %llu SMC handshakes, %llu open, %llu fallbacks (want %d, %d, 0)\n",
			who, (unsigned long long)f->handshakes_smc,
			(unsigned long long)f->conns_open, (unsigned long long)f->fallbacks, NCONN,
			NCONN);
	CHECK(f->handshakes_smc >= NCONN && f->conns_open == NCONN && f->fallbacks == 0);
}

/*
 * While data flows a wake-up may find nothing now and then (a doorbell rung
 * for a cursor update, or for what a read took a moment before); a spinning
 * wait finds nothing over and over.
 */
static void check_busy_bound(const char *who, uint64_t empty, uint64_t requests)
{
	fprintf(stderr, "%s: %llu empty wake-ups over %llu requests\n", who,
		(unsigned long long)empty, (unsigned long long)requests);
	if (empty > 2 * requests + NCONN)
		fprintf(stderr, "%s: %llu empty wake-ups: more than 2 per request + %d\n", who,
			(unsigned long long)empty, NCONN);
	CHECK(empty <= 2 * requests + NCONN);
}

static void check_idle_bound(const char *who, uint64_t empty)
{
	if (empty > NCONN)
		fprintf(stderr, "%s: %llu empty wake-ups while idle (at most %d)\n", who,
			(unsigned long long)empty, NCONN);
	CHECK(empty <= NCONN);
}

/* ---- client --------------------------------------------------------------------------- */

struct cconn {
	int fd, round;
	size_t got;
	bool reading;
};

static void set_interest(int ep, struct cconn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	/* As redis' ae loop: a registration without events is deleted, then added again. */
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) == 0);
}

static void send_request(struct cconn *c, int i)
{
	unsigned char buf[MAXREQ];
	size_t len = req_len(i, c->round);

	for (size_t k = 0; k < len; k++)
		buf[k] = req_byte(i, c->round, k);
	CHECK(write(c->fd, buf, len) == (ssize_t)len);
	c->got = 0;
}

/* Takes what the answer has; true when it is complete. */
static bool take_answer(struct cconn *c, int i, int flags)
{
	unsigned char buf[MAXREQ];
	size_t len = req_len(i, c->round);
	ssize_t n = recv(c->fd, buf, len - c->got, flags);

	if (n < 0 && errno == EAGAIN)
		return false;
	if (n <= 0) {
		fprintf(stderr, "client conn %d round %d: recv %zd errno %d\n", i, c->round, n,
			errno);
		exit(T_EXIT_FAIL);
	}
	for (ssize_t k = 0; k < n; k++)
		if (buf[k] != req_byte(i, c->round, c->got + (size_t)k)) {
			fprintf(stderr, "client conn %d round %d byte %zu differs\n", i, c->round,
				c->got + (size_t)k);
			exit(T_EXIT_FAIL);
		}
	c->got += (size_t)n;
	return c->got == len;
}

static void client_epoll(struct cconn *cs)
{
	int ep = epoll_create1(0), done = 0;
	struct epoll_event out[NCONN];

	for (int i = 0; i < NCONN; i++) {
		struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = &cs[i] };

		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev) == 0);
	}
	while (done < NCONN) {
		int n = epoll_wait(ep, out, NCONN, STALL_MS);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "client: epoll_wait %d with %d connections unfinished\n", n,
				NCONN - done);
			exit(T_EXIT_FAIL);
		}
		for (int k = 0; k < n; k++) {
			struct cconn *c = out[k].data.ptr;
			int i = (int)(c - cs);

			if (!c->reading && (out[k].events & EPOLLOUT)) {
				send_request(c, i);
				c->reading = true;
				set_interest(ep, c, EPOLLIN);
			} else if (c->reading && (out[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
				   take_answer(c, i, 0)) {
				c->reading = false;
				if (++c->round == ROUNDS) {
					CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) == 0);
					done++;
				} else {
					set_interest(ep, c, EPOLLOUT);
				}
			}
		}
	}
	close(ep);
}

static void client_blocking(struct cconn *cs)
{
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < NCONN; i++)
			send_request(&cs[i], i);
		for (int i = 0; i < NCONN; i++) {
			while (!take_answer(&cs[i], i, 0))
				;
			cs[i].round++;
		}
	}
}

static void client(void)
{
	static struct cconn cs[NCONN];
	bool blocking = kind == BLOCKING_CLIENT;
	struct epoll_event out[4];
	uint64_t before;
	char go;
	int ep;

	close(go_pipe[1]);
	for (int i = 0; i < NCONN; i++) {
		cs[i].fd = socket(AF_INET, SOCK_STREAM | (blocking ? 0 : SOCK_NONBLOCK), 0);
		CHECK(cs[i].fd >= 0);
		if (connect(cs[i].fd, (struct sockaddr *)&server_addr, sizeof(server_addr)) < 0 &&
		    errno != EINPROGRESS) {
			perror("connect");
			exit(T_EXIT_FAIL);
		}
	}
	if (blocking)
		client_blocking(cs);
	else
		client_epoll(cs);
	for (int i = 0; i < NCONN; i++)
		CHECK_MODE_SMC(cs[i].fd);
	check_all_smc("client");
	check_busy_bound("client", wakeups_empty(), (uint64_t)NCONN * ROUNDS);

	/* Idle: every connection waited on for reading, nothing comes. */
	ep = epoll_create1(0);
	for (int i = 0; i < NCONN; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };

		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev) == 0);
	}
	before = wakeups_empty();
	CHECK(epoll_wait(ep, out, 4, IDLE_MS) == 0);
	check_idle_bound("client", wakeups_empty() - before);
	close(ep);

	CHECK(read(go_pipe[0], &go, 1) == 1);
	for (int i = 0; i < NCONN; i++)
		close(cs[i].fd);
	fflush(stderr);
	_exit(t_result());
}

/* ---- server --------------------------------------------------------------------------- */

static int conns[NCONN], nconns, closed;
static size_t echoed;

/* Reads what `partial` allows and answers it; returns false at the end of the stream. */
static bool serve(int fd, bool until_eagain)
{
	unsigned char buf[4096];

	for (;;) {
		ssize_t n = read(fd, buf, until_eagain ? sizeof(buf) : PARTIAL);

		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			CHECK(n == 0);
			return false;
		}
		CHECK(write(fd, buf, (size_t)n) == n);
		echoed += (size_t)n;
		if (!until_eagain)
			return true;
	}
}

static void take_connection(int lfd, int ep)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);

	CHECK(fd >= 0 && nconns < NCONN);
	if (fd < 0 || nconns >= NCONN)
		exit(T_EXIT_FAIL);
	conns[nconns++] = fd;
	if (ep >= 0) {
		struct epoll_event ev = { .events = EPOLLIN | (kind == ET ? EPOLLET : 0),
					  .data.fd = fd };

		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	}
}

static void end_of(int fd, int ep)
{
	if (ep >= 0)
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
	close(fd);
	for (int i = 0; i < nconns; i++)
		if (conns[i] == fd)
			conns[i] = -1;
	closed++;
}

/* One wait of the case's kind, then the work it reported; false if it timed out. */
static bool server_step(int lfd, int ep, int timeout_ms)
{
	bool until_eagain = kind == ET;

	if (ep >= 0) {
		struct epoll_event out[NCONN + 1];
		int n = epoll_wait(ep, out, NCONN + 1, timeout_ms);

		for (int k = 0; k < n; k++) {
			if (out[k].data.fd == lfd)
				take_connection(lfd, ep);
			else if (!serve(out[k].data.fd, until_eagain))
				end_of(out[k].data.fd, ep);
		}
		return n > 0 || (n < 0 && errno == EINTR);
	}
	if (kind == POLL) {
		struct pollfd p[NCONN + 1];
		int n, np = 0;

		p[np++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < nconns; i++)
			if (conns[i] >= 0)
				p[np++] = (struct pollfd){ .fd = conns[i], .events = POLLIN };
		n = poll(p, (nfds_t)np, timeout_ms);
		for (int k = 0; n > 0 && k < np; k++) {
			if (!p[k].revents)
				continue;
			if (p[k].fd == lfd)
				take_connection(lfd, -1);
			else if (!serve(p[k].fd, false))
				end_of(p[k].fd, -1);
		}
		return n > 0 || (n < 0 && errno == EINTR);
	}
	{
		fd_set r;
		struct timeval tv = { .tv_sec = timeout_ms / 1000,
				      .tv_usec = (timeout_ms % 1000) * 1000 };
		int n, maxfd = lfd;

		FD_ZERO(&r);
		FD_SET(lfd, &r);
		for (int i = 0; i < nconns; i++)
			if (conns[i] >= 0) {
				FD_SET(conns[i], &r);
				if (conns[i] > maxfd)
					maxfd = conns[i];
			}
		n = select(maxfd + 1, &r, NULL, NULL, &tv);
		if (n > 0 && FD_ISSET(lfd, &r))
			take_connection(lfd, -1);
		for (int i = 0; n > 0 && i < nconns; i++)
			if (conns[i] >= 0 && FD_ISSET(conns[i], &r) && !serve(conns[i], false))
				end_of(conns[i], -1);
		return n > 0 || (n < 0 && errno == EINTR);
	}
}

static int run_server(int lfd, pid_t child)
{
	int ep = -1, status = 0;
	size_t want = total_bytes();
	uint64_t before;

	if (kind == LT_PARTIAL || kind == ET || kind == BLOCKING_CLIENT) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };

		ep = epoll_create1(0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == 0);
	}
	while (echoed < want)
		if (!server_step(lfd, ep, STALL_MS)) {
			fprintf(stderr, "server: stalled with %zu of %zu bytes answered\n", echoed,
				want);
			kill(child, SIGKILL);
			return T_EXIT_FAIL;
		}
	for (int i = 0; i < NCONN; i++)
		CHECK_MODE_SMC(conns[i]);
	check_all_smc("server");
	check_busy_bound("server", wakeups_empty(), (uint64_t)NCONN * ROUNDS);

	/* Idle: the client sits in its own idle wait, nothing comes. */
	before = wakeups_empty();
	CHECK(!server_step(lfd, ep, IDLE_MS));
	check_idle_bound("server", wakeups_empty() - before);

	CHECK(write(go_pipe[1], "g", 1) == 1);
	while (closed < NCONN)
		if (!server_step(lfd, ep, STALL_MS)) {
			fprintf(stderr, "server: %d of %d connections never ended\n", NCONN - closed,
				NCONN);
			CHECK(false);
			break;
		}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "client failed: status 0x%x\n", status);
		t_failures++;
	}
	if (ep >= 0)
		close(ep);
	return t_result();
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "lt-partial", "et", "poll", "select", "blocking" };
	const char *which = argc > 1 ? argv[1] : "lt-partial";
	int lfd, rc;
	pid_t child;

	for (kind = LT_PARTIAL; kind <= BLOCKING_CLIENT; kind++)
		if (!strcmp(which, names[kind]))
			break;
	if (kind > BLOCKING_CLIENT) {
		fprintf(stderr, "unknown case %s\n", which);
		return T_EXIT_FAIL;
	}
	t_watchdog(90);
	signal(SIGPIPE, SIG_IGN);
	if (!smc_preload_active() || !getenv("XDG_RUNTIME_DIR")) {
		fprintf(stderr, "libsmcr.so is not preloaded, or XDG_RUNTIME_DIR is unset\n");
		return T_EXIT_FAIL;
	}
	/* Stats go to the runtime directory meson names (made here, 0700). */
	if (mkdir(getenv("XDG_RUNTIME_DIR"), 0700) < 0 && errno != EEXIST) {
		perror("XDG_RUNTIME_DIR");
		return T_EXIT_FAIL;
	}
	lfd = t_listen_loopback(SOCK_NONBLOCK, &server_addr);
	if (lfd < 0 || pipe(go_pipe) < 0) {
		perror("listen");
		return T_EXIT_FAIL;
	}
	child = fork();
	if (child == 0) {
		close(lfd);
		client();
	}
	close(go_pipe[0]);
	rc = run_server(lfd, child);
	close(lfd);
	return rc;
}
