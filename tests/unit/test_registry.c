// SPDX-License-Identifier: MIT
/*
 * The host-local listener registry (src/smcr/registry.c) must not be fooled
 * by another user (design §4 "never guess", design §7): a registry name bound by a
 * process of another uid for a port served by a plain TCP listener must not
 * make smcr_peer_is_registered() true, and a squatted name must not stop the
 * real listener from working (it stays TCP, never proposes wrongly).
 *
 * Needs root (to fork a registrant that setuid()s to nobody): skipped (77)
 * otherwise.  Loopback only; every wait bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "smcr/engine.h"
#include "smcr/registry.h"

#include "sockaddr_test.h"

#define NOBODY 65534

/* A listening TCP socket on `addr` (127.x or ::1), port 0 or `port`. */
static int tcp_listener(const char *addr, uint16_t port, uint16_t *bound)
{
	struct sockaddr_storage ss = sockaddr_of(addr, port);
	socklen_t len = sockaddr_len(&ss);
	int one = 1, fd;

	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 16) < 0) {
		close(fd);
		return -1;
	}
	len = sizeof(ss);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	*bound = ntohs(((struct sockaddr_in *)&ss)->sin_port); /* same offset in v6 */
	return fd;
}

static int tcp_client(const char *addr, uint16_t port)
{
	struct sockaddr_storage ss = sockaddr_of(addr, port);
	socklen_t len = sockaddr_len(&ss);
	int fd;

	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, len), 0);
	return fd;
}

/*
 * A process of user `uid` holding a registry entry (and, if `serve_addr`, a
 * TCP listener of its own there) until the pipe closes.
 */
struct foreign {
	pid_t pid;
	int hold;      /* close to let it exit */
	int reg_rc;    /* smcr_registry_add() in the child */
	uint16_t port; /* its listener's port, if it made one */
};

static int read_full(int fd, void *buf, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (poll(&p, 1, 10000) != 1)
			return -1;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static struct foreign foreign_start(uid_t uid, uint16_t port, const char *serve_addr)
{
	struct foreign f = { .reg_rc = -1 };
	int up[2], down[2];
	int32_t msg[2];

	assert_int_equal(pipe2(up, O_CLOEXEC), 0);
	assert_int_equal(pipe2(down, O_CLOEXEC), 0);
	f.pid = fork();
	assert_true(f.pid >= 0);
	if (f.pid == 0) {
		struct smcr_registration reg;
		uint16_t p = port;
		int lfd = -1;
		char c;

		close(up[0]);
		close(down[1]);
		if (setgid((gid_t)uid) < 0 || setuid(uid) < 0)
			_exit(3);
		if (serve_addr) {
			lfd = tcp_listener(serve_addr, port, &p);
			if (lfd < 0)
				_exit(4);
		}
		msg[0] = smcr_registry_add(lfd, p, &reg);
		msg[1] = p;
		if (write(up[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			_exit(5);
		if (read(down[0], &c, 1) < 0) /* EOF: the test is done with us */
			_exit(6);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	f.hold = down[1];
	assert_int_equal(read_full(up[0], msg, sizeof(msg)), 0);
	close(up[0]);
	f.reg_rc = msg[0];
	f.port = (uint16_t)msg[1];
	return f;
}

static void foreign_stop(struct foreign *f)
{
	int status = -1;

	close(f->hold);
	assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static bool peer_registered(const char *addr, uint16_t port)
{
	int fd = tcp_client(addr, port);
	bool yes = smcr_peer_is_registered(fd);

	close(fd);
	return yes;
}

/* Baseline: nobody registered -> no; the listener's own registration -> yes. */
static void test_own_registration_believed(void **state)
{
	const char *addrs[] = { "127.0.0.1", "::1" };

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct smcr_listener *l = NULL;
		uint16_t port;
		int lfd = tcp_listener(addrs[i], 0, &port);

		assert_true(lfd >= 0);
		assert_false(peer_registered(addrs[i], port));
		assert_int_equal(smcr_listener_register(lfd, &l), 0);
		assert_true(peer_registered(addrs[i], port));
		smcr_listener_unregister(l);
		assert_false(peer_registered(addrs[i], port));
		close(lfd);
	}
}

/*
 * The listener goes to a program without smcr while a forked holder of the
 * registration lives on (nginx's old master during a binary upgrade): the
 * revocation by one process holds for every holder's copy.
 */
static void test_revoked_registration_not_believed(void **state)
{
	struct smcr_listener *l = NULL;
	uint16_t port;
	int lfd = tcp_listener("127.0.0.1", 0, &port), go[2], done[2];
	pid_t child;
	char c = 0;

	(void)state;
	assert_true(lfd >= 0);
	assert_int_equal(smcr_listener_register(lfd, &l), 0);
	assert_true(peer_registered("127.0.0.1", port));
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* the holder that keeps its copy of the registration, untouched */
		_exit(read(go[0], &c, 1) == 1 && write(done[1], &c, 1) == 1 ? 0 : 1);
	}
	smcr_listener_revoke(l, lfd, "test");
	assert_false(peer_registered("127.0.0.1", port));
	assert_int_equal(write(go[1], &c, 1), 1);
	assert_int_equal(read(done[0], &c, 1), 1);
	assert_false(peer_registered("127.0.0.1", port));
	waitpid(child, NULL, 0);
	smcr_listener_unregister(l);
	close(lfd);
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
}

/*
 * Registered while another registration held the name (a new nginx master
 * while the old one lives): believed through the other's, and once that one
 * is gone the listener takes the name itself.
 */
static void test_claim_after_other_registrant_left(void **state)
{
	struct smcr_listener *first = NULL, *second = NULL;
	uint16_t port;
	int lfd = tcp_listener("127.0.0.1", 0, &port);

	(void)state;
	assert_true(lfd >= 0);
	assert_int_equal(smcr_listener_register(lfd, &first), 0);
	assert_int_equal(smcr_listener_register(lfd, &second), 0);
	assert_false(smcr_listener_claim(second)); /* the name is taken */
	assert_true(peer_registered("127.0.0.1", port));
	smcr_listener_unregister(first);
	assert_false(peer_registered("127.0.0.1", port));
	assert_true(smcr_listener_claim(second));
	assert_true(peer_registered("127.0.0.1", port));
	assert_false(smcr_listener_claim(second)); /* held already */
	smcr_listener_unregister(second);
	assert_false(peer_registered("127.0.0.1", port));
	close(lfd);
}

/* The hole: uid 65534 registers the port of root's plain TCP server. */
static void test_foreign_registrant_not_believed(void **state)
{
	const char *addrs[] = { "127.0.0.1", "::1" };

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		uint16_t port;
		int lfd = tcp_listener(addrs[i], 0, &port);
		struct foreign f;

		assert_true(lfd >= 0);
		f = foreign_start(NOBODY, port, NULL);
		assert_true(f.reg_rc >= 0); /* the name is really bound... */
		assert_false(peer_registered(addrs[i], port)); /* ...and not believed */
		foreign_stop(&f);
		close(lfd);
	}
}

/* Squatting: the name is taken first; the real listener stays TCP, no error. */
static void test_squatted_name_stays_tcp(void **state)
{
	struct smcr_listener *l = NULL;
	uint16_t port;
	int lfd = tcp_listener("127.0.0.1", 0, &port);
	struct foreign f;

	(void)state;
	assert_true(lfd >= 0);
	f = foreign_start(NOBODY, port, NULL);
	assert_true(f.reg_rc >= 0);
	assert_int_equal(smcr_listener_register(lfd, &l), 0); /* logs a warning */
	assert_false(peer_registered("127.0.0.1", port));
	smcr_listener_unregister(l);
	foreign_stop(&f);
	close(lfd);
}

/* The check is "registrant owns the listener", not "registrant is me". */
static void test_other_users_real_server_believed(void **state)
{
	struct foreign f;

	(void)state;
	f = foreign_start(NOBODY, 0, "127.0.0.1");
	assert_true(f.reg_rc >= 0);
	assert_true(peer_registered("127.0.0.1", f.port));
	foreign_stop(&f);
}

/*
 * Same port, two addresses, two owners: root's plain server on 127.0.0.1,
 * nobody's registered server on 127.0.0.2.  Only the latter is believed.
 */
static void test_listener_matched_by_address(void **state)
{
	uint16_t port;
	int lfd = tcp_listener("127.0.0.1", 0, &port);
	struct foreign f;

	(void)state;
	assert_true(lfd >= 0);
	f = foreign_start(NOBODY, port, "127.0.0.2");
	assert_true(f.reg_rc >= 0);
	assert_int_equal(f.port, port);
	assert_true(peer_registered("127.0.0.2", port));
	assert_false(peer_registered("127.0.0.1", port));
	foreign_stop(&f);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_registration_believed),
		cmocka_unit_test(test_revoked_registration_not_believed),
		cmocka_unit_test(test_claim_after_other_registrant_left),
		cmocka_unit_test(test_foreign_registrant_not_believed),
		cmocka_unit_test(test_squatted_name_stays_tcp),
		cmocka_unit_test(test_other_users_real_server_believed),
		cmocka_unit_test(test_listener_matched_by_address),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_registry: needs root to run a registrant of another uid\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
