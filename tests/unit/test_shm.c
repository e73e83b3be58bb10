// SPDX-License-Identifier: MIT
/*
 * The shm transport's rendezvous against strangers and hostile peers: only
 * the proven other end of the TCP connection may attach, and what it hands
 * over (memfd, eventfd) is checked before it is mapped or written.  The
 * server is the real engine (smcr_sock_accept in a thread); the client side
 * is played by hand so it can lie.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "smcr/clc.h"
#include "smcr/engine.h"
#include "smcr/transport.h"

#define RING (16u * 1024)

/* Mirror of shm.c's proof message (its layout is part of the rendezvous protocol). */
struct proof {
	uint32_t magic;
	uint32_t version;
	uint8_t secret[16];
	uint32_t ring_size;
	uint32_t reserved;
};

struct server_run {
	int fd;
	int rc;
	struct smcr_sock *s;
};

static void *server_main(void *arg)
{
	struct server_run *r = arg;

	r->rc = smcr_sock_accept(r->fd, NULL, &r->s);
	return NULL;
}

struct setup {
	int lfd, cfd, sfd;
	struct smcr_listener *reg;
	struct server_run run;
	pthread_t thread;
	struct smcr_xconn *xc;
	uint8_t secret[16];   /* the client's, as proposed */
	uint64_t token;       /* the server's rendezvous token */
};

static int connect_loopback(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static size_t read_clc(int fd, struct smcr_clc_msg *m)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t got = 0, len = 0;

	while (got < sizeof(buf)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);

		if (n <= 0)
			return 0;
		got += (size_t)n;
		if (smcr_clc_decode(buf, got, m, &len, &err) != SMCR_WIRE_NEED_MORE)
			break;
	}
	return len == got ? len : 0;
}

static void send_clc(int fd, const struct smcr_clc_msg *m)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t n = smcr_clc_encode(m, buf, sizeof(buf), &err);

	assert_true(n > 0);
	assert_int_equal(send(fd, buf, n, 0), (ssize_t)n);
}

/* TCP connection to an smcr listener, and the genuine Proposal of a real shm client. */
static void setup_begin(struct setup *st, struct smcr_clc_msg *prop)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	memset(st, 0, sizeof(*st));
	st->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(st->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(st->lfd, 4), 0);
	assert_int_equal(getsockname(st->lfd, (struct sockaddr *)&sa, &len), 0);
	assert_int_equal(smcr_listener_register(st->lfd, &st->reg), 0);
	st->cfd = connect_loopback(ntohs(sa.sin_port));
	st->sfd = accept4(st->lfd, NULL, NULL, SOCK_CLOEXEC);

	assert_int_equal(smcr_shm_ops.create(-1, RING, 2000, &st->xc), 0);
	memset(prop, 0, sizeof(*prop));
	assert_int_equal(smcr_shm_ops.client_propose(st->xc, prop), 0);
	smcr_put_be64(st->secret, prop->proposal.ism_gid);
	smcr_put_be64(st->secret + 8, prop->proposal.ism_gids[0].gid);
	/* Our own rendezvous, offered in a second GID entry. */
	assert_int_equal(prop->proposal.ism_gid_cnt, 2);
}

/* Proposal -> server thread (the real engine) -> its Accept read into *acc. */
static void setup_send_proposal(struct setup *st, const struct smcr_clc_msg *prop,
				struct smcr_clc_msg *acc)
{
	send_clc(st->cfd, prop);
	for (int i = 0; i < 1000 && smcr_sock_classify(st->sfd) != SMCR_CLASSIFY_PROPOSAL; i++)
		poll(NULL, 0, 1);
	st->run.fd = st->sfd;
	assert_int_equal(pthread_create(&st->thread, NULL, server_main, &st->run), 0);
	assert_true(read_clc(st->cfd, acc) > 0);
	assert_int_equal(acc->hdr.type, SMCR_CLC_ACCEPT);
	st->token = acc->accept.dmb_token;
}

/*
 * Up to the Accept in the classic order, which the hand-made clients below
 * play: a client that offers no rendezvous of its own, so it knocks on the
 * server's.
 */
static void setup_until_accept(struct setup *st)
{
	struct smcr_clc_msg m;

	setup_begin(st, &m);
	m.proposal.ism_gid_cnt = 1;
	setup_send_proposal(st, &m, &m);
	assert_int_equal(m.accept.dmbe_idx, 0);
}

static int rv_connect(uint64_t token)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "smcr/rv/%016llx",
			 (unsigned long long)token);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa,
				 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)), 0);
	return fd;
}

static void send_proof(int sock, const uint8_t secret[16], uint32_t ring_size, int fd0, int fd1)
{
	struct proof p = { .magic = 0x534d5250u, .version = 1, .ring_size = ring_size };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &p, .iov_len = sizeof(p) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int fds[2] = { fd0, fd1 };

	memcpy(p.secret, secret, 16);
	memset(u.buf, 0, sizeof(u.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	assert_int_equal(sendmsg(sock, &mh, MSG_NOSIGNAL), (ssize_t)sizeof(p));
}

/* After the knock: the server answers nothing (EOF/reset) and falls back on our Decline. */
static void expect_rejected_then_decline(struct setup *st, int sock)
{
	struct smcr_clc_msg m;
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	char b;

	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_true(recv(sock, &b, 1, 0) <= 0); /* no proof, no fds for a liar */
	close(sock);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_DECLINE;
	m.hdr.version = SMCR_CLC_V2;
	m.decline.diag = SMCR_CLC_DECL_PEERDECL;
	send_clc(st->cfd, &m);
	pthread_join(st->thread, NULL);
	assert_true(st->run.rc > 0); /* fallback, both on TCP */
	assert_null(st->run.s);
	assert_int_equal(send(st->cfd, "x", 1, 0), 1);
	assert_int_equal(recv(st->sfd, &b, 1, 0), 1);
}

static void teardown(struct setup *st)
{
	smcr_shm_ops.destroy(st->xc, false);
	smcr_listener_unregister(st->reg);
	close(st->cfd);
	close(st->sfd);
	close(st->lfd);
}

/* A sealed memfd of the right size, as a real client would send. */
static int good_memfd(uint32_t ring)
{
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_int_equal(ftruncate(fd, 4096 + ring), 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	return fd;
}

static void test_wrong_secret_rejected(void **state)
{
	struct setup st;
	uint8_t wrong[16];
	int sock, mfd, efd;

	(void)state;
	setup_until_accept(&st);
	memcpy(wrong, st.secret, 16);
	wrong[15] ^= 1;
	sock = rv_connect(st.token);
	mfd = good_memfd(RING);
	efd = eventfd(0, EFD_CLOEXEC);
	send_proof(sock, wrong, RING, mfd, efd);
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	close(efd);
	teardown(&st);
}

static void test_unsealed_memfd_rejected(void **state)
{
	struct setup st;
	int sock, mfd, efd;

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	mfd = memfd_create("t", MFD_CLOEXEC); /* could be shrunk under the server: SIGBUS */
	assert_int_equal(ftruncate(mfd, 4096 + RING), 0);
	efd = eventfd(0, EFD_CLOEXEC);
	send_proof(sock, st.secret, RING, mfd, efd);
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	close(efd);
	teardown(&st);
}

static void test_small_memfd_rejected(void **state)
{
	struct setup st;
	int sock, mfd, efd;

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	mfd = good_memfd(RING / 2); /* claims RING bytes, has half */
	efd = eventfd(0, EFD_CLOEXEC);
	send_proof(sock, st.secret, RING, mfd, efd);
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	close(efd);
	teardown(&st);
}

static void test_pipe_instead_of_eventfd_rejected(void **state)
{
	struct setup st;
	int sock, mfd, p[2];

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	mfd = good_memfd(RING);
	assert_int_equal(pipe(p), 0); /* a full blocking pipe would hang the server's writes */
	send_proof(sock, st.secret, RING, mfd, p[1]);
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	close(p[0]);
	close(p[1]);
	teardown(&st);
}

static void test_odd_ring_size_rejected(void **state)
{
	struct setup st;
	int sock, mfd, efd;

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	mfd = good_memfd(RING + 4096);
	efd = eventfd(0, EFD_CLOEXEC);
	send_proof(sock, st.secret, RING + 4096, mfd, efd); /* not 16 KiB << n */
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	close(efd);
	teardown(&st);
}

/* A stranger from another process knocks first; the server keeps the door shut. */
static void test_other_process_cannot_attach(void **state)
{
	struct setup st;
	pid_t pid;
	int status, sock;

	(void)state;
	setup_until_accept(&st);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/*
		 * Knows the token (it is visible in /proc/net/unix) and even the
		 * secret.  No cmocka asserts in the child: plain calls, exit code.
		 */
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct proof pr = { .magic = 0x534d5250u, .version = 1, .ring_size = RING };
		int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "smcr/rv/%016llx",
				 (unsigned long long)st.token);
		char b;

		memcpy(pr.secret, st.secret, 16);
		if (connect(s, (struct sockaddr *)&sa,
			    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) < 0)
			_exit(0); /* refused: fine */
		(void)!send(s, &pr, sizeof(pr), MSG_NOSIGNAL); /* may fail: already thrown out */
		_exit(recv(s, &b, 1, 0) <= 0 ? 0 : 1); /* must get nothing back */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* The stranger's pid is not the proposer's: rejected before its proof is read. */
	sock = rv_connect(st.token);
	{
		int mfd = good_memfd(RING), efd = eventfd(0, EFD_CLOEXEC);
		struct smcr_clc_msg m;
		char b;

		send_proof(sock, st.secret, RING, mfd, efd);
		/* The real client (this pid) is accepted: the server answers with its proof. */
		assert_true(recv(sock, &b, 1, MSG_PEEK) > 0);
		close(mfd);
		close(efd);
		close(sock);
		memset(&m, 0, sizeof(m));
		m.hdr.type = SMCR_CLC_DECLINE;
		m.hdr.version = SMCR_CLC_V2;
		m.decline.diag = SMCR_CLC_DECL_PEERDECL;
		send_clc(st.cfd, &m);
	}
	pthread_join(st.thread, NULL);
	assert_true(st.run.rc > 0);
	teardown(&st);
}

/*
 * A hand-made peer that completes the handshake with the server: it maps its
 * own control page and ring (`region`: page at 0, ring at 4096) and hands over
 * `efd` as its doorbell.
 */
struct fake_peer {
	struct setup st;
	uint8_t *region;
	int sock, mfd, efd;
};

/* Offsets in struct shm_ctrl (src/smcr/shm.c), the words a peer publishes. */
#define CTRL_SLEEPING 8
#define CTRL_CPU 12
#define CTRL_ARMED 64

static void fake_peer_attach(struct fake_peer *fp, int efd)
{
	struct proof reply;
	struct smcr_clc_msg m;
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &reply, .iov_len = sizeof(reply) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };

	setup_until_accept(&fp->st);
	fp->sock = rv_connect(fp->st.token);
	fp->mfd = good_memfd(RING);
	fp->efd = efd;
	fp->region = mmap(NULL, 4096 + RING, PROT_READ | PROT_WRITE, MAP_SHARED, fp->mfd, 0);
	assert_true(fp->region != MAP_FAILED);
	fp->region[CTRL_ARMED] = 1; /* ring me, please */
	send_proof(fp->sock, fp->st.secret, RING, fp->mfd, efd);
	assert_int_equal(recvmsg(fp->sock, &mh, MSG_CMSG_CLOEXEC), (ssize_t)sizeof(reply));
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		for (size_t k = 0; k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
			close(fd);
		}
	/* Confirm as the shm client would. */
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_CONFIRM;
	m.hdr.version = SMCR_CLC_V2;
	m.hdr.typev1 = SMCR_CLC_PATH_D;
	m.accept.ism_gid = smcr_get_be64(fp->st.secret);
	m.accept.gid_ext = smcr_get_be64(fp->st.secret + 8);
	m.accept.ism_chid = 0xFFFF;
	m.accept.dmb_token = fp->st.token;
	m.accept.dmbe_size = 0; /* 16 KiB */
	memcpy(m.accept.eid, "SMCR-USERSPACE-SAMEHOST-SHM     ", SMCR_CLC_EID_LEN);
	send_clc(fp->st.cfd, &m);
	pthread_join(fp->st.thread, NULL);
	assert_int_equal(fp->st.run.rc, 0);
}

static void fake_peer_detach(struct fake_peer *fp)
{
	smcr_sock_abort(fp->st.run.s, false);
	munmap(fp->region, 4096 + RING);
	close(fp->sock);
	close(fp->mfd);
	close(fp->efd);
	teardown(&fp->st);
}

/*
 * A peer that completes the handshake but hands over a *blocking* eventfd
 * whose counter is at its maximum: the server's doorbell write must not
 * block (the engine makes the received eventfd non-blocking).
 */
static void test_blocking_full_eventfd_cannot_stall_sender(void **state)
{
	struct fake_peer fp;
	uint64_t near_max = UINT64_MAX - 1;
	int efd = eventfd(0, EFD_CLOEXEC); /* blocking */

	(void)state;
	assert_int_equal(write(efd, &near_max, sizeof(near_max)), 8);
	fake_peer_attach(&fp, efd);
	/* Rings our doorbell: must return, not block on the full counter. */
	assert_int_equal(smcr_sock_send(fp.st.run.s, "hi", 2, 0), 2);
	assert_memory_equal(fp.region + 4096, "hi", 2);
	fake_peer_detach(&fp);
}

static void set_word(uint8_t *region, size_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(void *)(region + off), v, __ATOMIC_RELAXED);
}

/*
 * The spin's "is the peer running" test: a peer asleep in a wait is not worth
 * spinning for, unless we just rang it (it has not re-armed since): it is
 * then on its way to answer.  Without that, a request/response pair whose
 * sides both send and then wait would always find the other still marked
 * asleep, and neither would ever spin.
 */
static void test_rung_sleeping_peer_counts_as_running(void **state)
{
	struct fake_peer fp;
	struct smcr_sock *s;

	(void)state;
	fake_peer_attach(&fp, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	s = fp.st.run.s;
	set_word(fp.region, CTRL_CPU, 0); /* CPU unknown: never "ours" */
	set_word(fp.region, CTRL_SLEEPING, 0);
	assert_true(smcr_sock_peer_running(s));
	set_word(fp.region, CTRL_SLEEPING, 1); /* asleep and armed: not rung */
	assert_false(smcr_sock_peer_running(s));
	assert_int_equal(smcr_sock_send(s, "q", 1, 0), 1); /* rings: armed 1 -> 0 */
	assert_int_equal(fp.region[CTRL_ARMED], 0);
	assert_true(smcr_sock_peer_running(s));
	set_word(fp.region, CTRL_ARMED, 1); /* it woke, took the message, re-armed */
	assert_false(smcr_sock_peer_running(s));
	fake_peer_detach(&fp);
}

/* The real client finishes the handshake with the Accept in hand; the server thread ends. */
static void client_completes(struct setup *st, const struct smcr_clc_msg *acc)
{
	struct smcr_clc_msg conf;
	uint32_t peer_ring = 0;
	uint8_t *ring;
	uint32_t size;

	memset(&conf, 0, sizeof(conf));
	assert_int_equal(smcr_shm_ops.client_attach(st->xc, acc, &conf, &peer_ring), 0);
	assert_int_equal(peer_ring, smcr_clc_rmbe_size(acc->accept.dmbe_size));
	send_clc(st->cfd, &conf);
	pthread_join(st->thread, NULL);
	assert_int_equal(st->run.rc, 0);
	/* The server's data lands in the client's ring: both attached the right region. */
	assert_int_equal(smcr_sock_send(st->run.s, "hi", 2, 0), 2);
	smcr_shm_ops.ring(st->xc, &ring, &size);
	assert_memory_equal(ring, "hi", 2);
	smcr_sock_abort(st->run.s, false);
}

/*
 * A client that offers its own rendezvous: the server knocks on it and
 * leaves its proof there before the Accept (DMBE index 1 says so), so the
 * client attaches without waiting on the UNIX socket.
 */
static void test_server_knocks_on_offered_rendezvous(void **state)
{
	struct setup st;
	struct smcr_clc_msg m;

	(void)state;
	setup_begin(&st, &m);
	setup_send_proposal(&st, &m, &m);
	assert_int_equal(m.accept.dmbe_idx, 1);
	client_completes(&st, &m);
	teardown(&st);
}

/*
 * Strangers who read the client's rendezvous name (it is visible in
 * /proc/net/unix) and knock first: one says nothing, one brings a proof with
 * the wrong secret and fds.  The client skips both, attaches to the real
 * server, and neither stranger gets anything back.
 */
static void test_strangers_on_client_rendezvous_are_skipped(void **state)
{
	struct setup st;
	struct smcr_clc_msg m;
	uint8_t wrong[16];
	/* The liar's ring has the server's size: only the secret gives it away. */
	uint32_t server_ring = 1u << 20;
	int silent, liar, mfd = good_memfd(server_ring), efd = eventfd(0, EFD_CLOEXEC);
	char b;

	(void)state;
	setup_begin(&st, &m);
	silent = rv_connect(m.proposal.ism_gids[1].gid);
	liar = rv_connect(m.proposal.ism_gids[1].gid);
	memset(wrong, 0xA5, sizeof(wrong));
	send_proof(liar, wrong, server_ring, mfd, efd);
	setup_send_proposal(&st, &m, &m);
	assert_int_equal(m.accept.dmbe_idx, 1);
	assert_int_equal(smcr_clc_rmbe_size(m.accept.dmbe_size), server_ring);
	client_completes(&st, &m);
	assert_true(recv(silent, &b, 1, 0) <= 0);
	assert_true(recv(liar, &b, 1, 0) <= 0);
	close(silent);
	close(liar);
	close(mfd);
	close(efd);
	teardown(&st);
}

/*
 * The name in the Proposal is held by another process (squatted, or simply
 * not the proposer's): the server must not leave its proof and fds there; it
 * falls back to the classic order, and the handshake still succeeds.
 */
static void test_foreign_rendezvous_means_classic_order(void **state)
{
	struct setup st;
	struct smcr_clc_msg m;
	uint64_t name = 0x5eed5eed5eed0001ull ^ (uint64_t)getpid();
	int ready[2];
	pid_t pid;
	char b;

	(void)state;
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "smcr/rv/%016llx",
				 (unsigned long long)name);

		if (bind(l, (struct sockaddr *)&sa,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) < 0 ||
		    listen(l, 4) < 0)
			_exit(1);
		(void)!write(ready[1], "r", 1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	setup_begin(&st, &m);
	m.proposal.ism_gids[1].gid = name; /* names the other process's socket */
	setup_send_proposal(&st, &m, &m);
	assert_int_equal(m.accept.dmbe_idx, 0);
	client_completes(&st, &m);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	teardown(&st);
}

/* Our own rendezvous listener under `name`, as a knocked-order client binds it. */
static int rv_listen_as(uint64_t name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "smcr/rv/%016llx",
			 (unsigned long long)name);

	assert_int_equal(bind(l, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
			 0);
	assert_int_equal(listen(l, 4), 0);
	return l;
}

/*
 * The knocked order with the client's Confirm visible on TCP before its
 * proof on the knock socket, as poll() can see them when the server is
 * preempted between sampling the two fds (wrk against nginx under load:
 * 1 connection in ~20000 was declined after its Confirm).  The Confirm is
 * not a Decline: the server must wait for the proof and attach.
 */
static void test_confirm_seen_before_proof_is_not_a_decline(void **state)
{
	struct setup st;
	struct smcr_clc_msg m, conf;
	uint64_t name = 0x5eed5eed5eed0002ull ^ (uint64_t)getpid();
	int l, knock, mfd = good_memfd(RING), efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct pollfd pfd;

	(void)state;
	l = rv_listen_as(name);
	setup_begin(&st, &m);
	m.proposal.ism_gids[1].gid = name; /* we are the proposer: the server knocks here */
	setup_send_proposal(&st, &m, &m);
	assert_int_equal(m.accept.dmbe_idx, 1);
	knock = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(knock >= 0);
	/* Our Confirm first (the server's view of it), the proof 100 ms later. */
	conf = m;
	conf.hdr.type = SMCR_CLC_CONFIRM;
	conf.accept.ism_gid = smcr_get_be64(st.secret);
	conf.accept.gid_ext = smcr_get_be64(st.secret + 8);
	conf.accept.dmbe_idx = 0;
	conf.accept.dmbe_size = smcr_clc_rmbe_compress(RING, 15);
	send_clc(st.cfd, &conf);
	poll(NULL, 0, 100);
	send_proof(knock, st.secret, RING, mfd, efd);
	pthread_join(st.thread, NULL);
	assert_int_equal(st.run.rc, 0); /* SMC, not a Decline after our Confirm */
	pfd = (struct pollfd){ .fd = st.cfd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 0), 0); /* and nothing for us on TCP */
	assert_int_equal(smcr_sock_send(st.run.s, "hi", 2, 0), 2);
	smcr_sock_abort(st.run.s, false);
	close(knock);
	close(l);
	close(mfd);
	close(efd);
	teardown(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_secret_rejected),
		cmocka_unit_test(test_unsealed_memfd_rejected),
		cmocka_unit_test(test_small_memfd_rejected),
		cmocka_unit_test(test_pipe_instead_of_eventfd_rejected),
		cmocka_unit_test(test_odd_ring_size_rejected),
		cmocka_unit_test(test_other_process_cannot_attach),
		cmocka_unit_test(test_blocking_full_eventfd_cannot_stall_sender),
		cmocka_unit_test(test_rung_sleeping_peer_counts_as_running),
		cmocka_unit_test(test_server_knocks_on_offered_rendezvous),
		cmocka_unit_test(test_strangers_on_client_rendezvous_are_skipped),
		cmocka_unit_test(test_foreign_rendezvous_means_classic_order),
		cmocka_unit_test(test_confirm_seen_before_proof_is_not_a_decline),
	};

	signal(SIGPIPE, SIG_IGN);
	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
