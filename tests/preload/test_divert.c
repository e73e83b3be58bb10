/* SPDX-License-Identifier: MIT */
/*
 * The SMC-mode branch of the data-path wrappers without an engine socket.
 * This program links the wrappers in directly (no LD_PRELOAD), marks one
 * connection SMC through the fd table (no engine socket behind it), and checks
 * that every data call on it returns exactly what the same call returns
 * on an untouched connection: data, return value, errno, address length.
 * That is the contract the engine's divert_recvmsg/divert_sendmsg inherit.
 * Calls made from inside the library (guard depth > 0) must bypass the
 * branch.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "common/guard.h"
#include "preload/fdtab.h"
#include "smc_preload.h"
#include "preload_test.h"

ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *addrlen);

struct pair {
	int client, server;
};

struct outcome {
	long ret;
	int err;
	socklen_t addrlen;
	char data[32];
};

static void set_smc(int fd)
{
	struct smcr_fd_entry *entry = smcr_fdtab_peek(fd);

	if (entry)
		atomic_store(&entry->mode, SMCR_FD_SMC);
}

/* One send call from client to server, selected by how. */
static struct outcome do_send(const struct pair *p, int how)
{
	char msg[] = "smc-data";
	struct iovec iov[2] = { { msg, 4 }, { msg + 4, 4 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	struct outcome o = { 0 };

	errno = 0;
	switch (how) {
	case 0: o.ret = write(p->client, msg, 8); break;
	case 1: o.ret = send(p->client, msg, 8, MSG_NOSIGNAL); break;
	case 2: o.ret = sendto(p->client, msg, 8, 0, NULL, 0); break;
	case 3: o.ret = writev(p->client, iov, 2); break;
	default: o.ret = sendmsg(p->client, &mh, 0); break;
	}
	o.err = errno;
	return o;
}

/* One receive call on the server, selected by how. */
static struct outcome do_recv(const struct pair *p, int how)
{
	struct outcome o = { 0 };
	struct sockaddr_storage from;
	struct iovec iov[2] = { { o.data, 3 }, { o.data + 3, 5 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	o.addrlen = sizeof(from);
	errno = 0;
	switch (how) {
	case 0: o.ret = read(p->server, o.data, 8); break;
	case 1: o.ret = recv(p->server, o.data, 8, MSG_WAITALL); break;
	case 2: o.ret = recvfrom(p->server, o.data, 8, MSG_WAITALL, (struct sockaddr *)&from,
				 &o.addrlen); break;
	case 3: o.ret = readv(p->server, iov, 2); break;
	case 4: o.ret = recvmsg(p->server, &mh, MSG_WAITALL); o.addrlen = mh.msg_namelen; break;
	case 5: o.ret = __read_chk(p->server, o.data, 8, sizeof(o.data)); break;
	case 6: o.ret = __recv_chk(p->server, o.data, 8, sizeof(o.data), MSG_WAITALL); break;
	default: o.ret = __recvfrom_chk(p->server, o.data, 8, sizeof(o.data), MSG_WAITALL,
					(struct sockaddr *)&from, &o.addrlen); break;
	}
	o.err = errno;
	return o;
}

static void expect_same(const char *what, int how, struct outcome plain, struct outcome smc)
{
	if (plain.ret != smc.ret || plain.err != smc.err || plain.addrlen != smc.addrlen ||
	    memcmp(plain.data, smc.data, sizeof(plain.data)) != 0) {
		fprintf(stderr, "%s #%d: plain ret %ld errno %d addrlen %u, smc ret %ld errno %d addrlen %u\n",
			what, how, plain.ret, plain.err, plain.addrlen, smc.ret, smc.err, smc.addrlen);
		t_failures++;
	}
}

int main(void)
{
	struct pair plain, smc;

	t_watchdog(30);
	if (t_tcp_pair(&plain.client, &plain.server) < 0 || t_tcp_pair(&smc.client, &smc.server) < 0) {
		fprintf(stderr, "no loopback TCP\n");
		return T_EXIT_FAIL;
	}
	/* A client connected to a listener of its own process stays TCP. */
	CHECK(smc_preload_fd_mode(smc.client) == SMC_PRELOAD_FD_FALLBACK);
	set_smc(smc.client);
	set_smc(smc.server);
	CHECK(smc_preload_fd_mode(smc.client) == SMC_PRELOAD_FD_SMC);
	CHECK(smc_preload_fd_mode(plain.client) == SMC_PRELOAD_FD_FALLBACK);

	for (int send_how = 0; send_how < 5; send_how++) {
		for (int recv_how = 0; recv_how < 8; recv_how++) {
			expect_same("send", send_how, do_send(&plain, send_how), do_send(&smc, send_how));
			struct outcome a = do_recv(&plain, recv_how), b = do_recv(&smc, recv_how);

			expect_same("recv", recv_how, a, b);
			CHECK(b.ret == 8 && memcmp(b.data, "smc-data", 8) == 0);
		}
	}

	/* Nothing to read on a nonblocking socket: the same EAGAIN. */
	for (int recv_how = 0; recv_how < 8; recv_how++) {
		struct outcome a, b;
		int flags_a = fcntl(plain.server, F_GETFL), flags_b = fcntl(smc.server, F_GETFL);

		fcntl(plain.server, F_SETFL, flags_a | O_NONBLOCK);
		fcntl(smc.server, F_SETFL, flags_b | O_NONBLOCK);
		a = do_recv(&plain, recv_how);
		b = do_recv(&smc, recv_how);
		expect_same("recv-empty", recv_how, a, b);
		CHECK(b.ret == -1 && b.err == EAGAIN);
		fcntl(plain.server, F_SETFL, flags_a);
		fcntl(smc.server, F_SETFL, flags_b);
	}

	/* After the peer closes: 0 from every receive form, EPIPE from every send. */
	close(plain.client);
	close(smc.client);
	for (int recv_how = 0; recv_how < 8; recv_how++)
		expect_same("recv-eof", recv_how, do_recv(&plain, recv_how), do_recv(&smc, recv_how));
	plain.client = plain.server;
	smc.client = smc.server;
	for (int send_how = 0; send_how < 5; send_how++) {
		do_send(&plain, 1);
		do_send(&smc, 1);
	}
	expect_same("send-after-reset", 1, do_send(&plain, 1), do_send(&smc, 1));

	/* Inside the library the branch is skipped: still the kernel's answer. */
	smcr_guard_enter();
	expect_same("guarded", 0, do_recv(&plain, 0), do_recv(&smc, 0));
	smcr_guard_leave();
	close(plain.server);
	close(smc.server);
	return t_result();
}
