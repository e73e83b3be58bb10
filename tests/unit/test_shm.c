// SPDX-License-Identifier: MIT
/*
 * The shm transport's rendezvous against strangers and hostile peers: only
 * the proven other end of the TCP connection may attach, and what it hands
 * over (its memfd, nothing else) is checked before it is mapped.  The
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
#include <linux/sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

#include "engine_test.h"

/* One source, two programs (see main): each leaves the other's tests unused. */
#pragma GCC diagnostic ignored "-Wunused-function"

#define RING (16u * 1024)

/* Mirror of shm_rv.c's proof message (its layout is part of the rendezvous protocol). */
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

static bool send_clc_raw(int fd, const struct smcr_clc_msg *m)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t n = smcr_clc_encode(m, buf, sizeof(buf), &err);

	return n > 0 && send(fd, buf, n, 0) == (ssize_t)n;
}

static void send_clc(int fd, const struct smcr_clc_msg *m)
{
	assert_true(send_clc_raw(fd, m));
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

static int rv_connect_raw(uint64_t token)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "smcr/rv/%016llx",
			 (unsigned long long)token);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa,
			       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int rv_connect(uint64_t token)
{
	int fd = rv_connect_raw(token);

	assert_true(fd >= 0);
	return fd;
}

#define PROOF_VERSION 2

/* A proof with `nfds` fds (a genuine one has exactly one: the memfd). */
static ssize_t send_proof_fds(int sock, const uint8_t secret[16], uint32_t ring_size,
			      const int *fds, unsigned nfds)
{
	struct proof p = { .magic = 0x534d5250u, .version = PROOF_VERSION, .ring_size = ring_size };
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &p, .iov_len = sizeof(p) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = CMSG_SPACE(nfds * sizeof(int)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memcpy(p.secret, secret, 16);
	memset(u.buf, 0, sizeof(u.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL);
}

static void send_proof(int sock, const uint8_t secret[16], uint32_t ring_size, int memfd)
{
	assert_int_equal(send_proof_fds(sock, secret, ring_size, &memfd, 1), (ssize_t)sizeof(struct proof));
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
static int good_memfd_raw(uint32_t ring)
{
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd >= 0 && (ftruncate(fd, 4096 + ring) < 0 ||
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int good_memfd(uint32_t ring)
{
	int fd = good_memfd_raw(ring);

	assert_true(fd >= 0);
	return fd;
}

static void test_wrong_secret_rejected(void **state)
{
	struct setup st;
	uint8_t wrong[16];
	int sock, mfd;

	(void)state;
	setup_until_accept(&st);
	memcpy(wrong, st.secret, 16);
	wrong[15] ^= 1;
	sock = rv_connect(st.token);
	mfd = good_memfd(RING);
	send_proof(sock, wrong, RING, mfd);
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	teardown(&st);
}

static void test_unsealed_memfd_rejected(void **state)
{
	struct setup st;
	int sock, mfd;

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	mfd = memfd_create("t", MFD_CLOEXEC); /* could be shrunk under the server: SIGBUS */
	assert_int_equal(ftruncate(mfd, 4096 + RING), 0);
	send_proof(sock, st.secret, RING, mfd);
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	teardown(&st);
}

static void test_small_memfd_rejected(void **state)
{
	struct setup st;
	int sock, mfd;

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	mfd = good_memfd(RING / 2); /* claims RING bytes, has half */
	send_proof(sock, st.secret, RING, mfd);
	expect_rejected_then_decline(&st, sock);
	close(mfd);
	teardown(&st);
}

/*
 * A proof that brings a second fd (a doorbell of the peer's choosing, whose
 * blocking mode the peer controls): rejected, nothing but the memfd is taken.
 */
static void test_extra_fd_rejected(void **state)
{
	struct setup st;
	int sock, fds[2], p[2];

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	fds[0] = good_memfd(RING);
	assert_int_equal(pipe(p), 0);
	fds[1] = p[1];
	assert_int_equal(send_proof_fds(sock, st.secret, RING, fds, 2), (ssize_t)sizeof(struct proof));
	expect_rejected_then_decline(&st, sock);
	close(fds[0]);
	close(p[0]);
	close(p[1]);
	teardown(&st);
}

static void test_odd_ring_size_rejected(void **state)
{
	struct setup st;
	int sock, mfd;

	(void)state;
	setup_until_accept(&st);
	sock = rv_connect(st.token);
	mfd = good_memfd(RING + 4096);
	send_proof(sock, st.secret, RING + 4096, mfd); /* not 16 KiB << n */
	expect_rejected_then_decline(&st, sock);
	close(mfd);
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
		struct proof pr = { .magic = 0x534d5250u, .version = PROOF_VERSION, .ring_size = RING };
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
		int mfd = good_memfd(RING);
		struct smcr_clc_msg m;
		char b;

		send_proof(sock, st.secret, RING, mfd);
		/* The real client (this pid) is accepted: the server answers with its proof. */
		assert_true(recv(sock, &b, 1, MSG_PEEK) > 0);
		close(mfd);
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
 * own control page and ring (`region`: page at 0, ring at 4096), and keeps
 * what the server handed over: its memfd (`got`, mapped at `server_region`).
 */
struct fake_peer {
	struct setup st;
	uint8_t *region;
	uint8_t *server_region;
	int sock, mfd;
	int got[4];
	unsigned ngot;
};

/* Offsets in struct shm_ctrl (src/smcr/shm_int.h), the words a peer publishes. */
#define CTRL_SLEEPING 8
#define CTRL_CPU 12
#define CTRL_ARMED 64
#define CTRL_FEATURES 16
#define CTRL_BELL_PIPE 24
#define FEAT_PIPE_BELL 2u

/* The proof the server sent on `sock`, and its fds in got[] (the memfd first). */
static bool recv_server_proof_raw(int sock, int got[4], unsigned *ngot)
{
	struct proof reply;
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &reply, .iov_len = sizeof(reply) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };

	*ngot = 0;
	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(reply))
		return false;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		for (size_t k = 0; k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int) && *ngot < 4; k++)
			memcpy(&got[(*ngot)++], CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
	return *ngot >= 1;
}

static void recv_server_proof(int sock, int got[4], unsigned *ngot)
{
	assert_true(recv_server_proof_raw(sock, got, ngot));
}

/* Confirm as the shm client would. */
static bool send_confirm_raw(int cfd, const uint8_t secret[16], uint64_t token)
{
	struct smcr_clc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_CONFIRM;
	m.hdr.version = SMCR_CLC_V2;
	m.hdr.typev1 = SMCR_CLC_PATH_D;
	m.accept.ism_gid = smcr_get_be64(secret);
	m.accept.gid_ext = smcr_get_be64(secret + 8);
	m.accept.ism_chid = 0xFFFF;
	m.accept.dmb_token = token;
	m.accept.dmbe_size = 0; /* 16 KiB */
	memcpy(m.accept.eid, "SMCR-USERSPACE-SAMEHOST-SHM     ", SMCR_CLC_EID_LEN);
	return send_clc_raw(cfd, &m);
}

static void send_confirm(struct setup *st)
{
	assert_true(send_confirm_raw(st->cfd, st->secret, st->token));
}

static void fake_peer_attach(struct fake_peer *fp)
{
	setup_until_accept(&fp->st);
	fp->sock = rv_connect(fp->st.token);
	fp->mfd = good_memfd(RING);
	fp->region = mmap(NULL, 4096 + RING, PROT_READ | PROT_WRITE, MAP_SHARED, fp->mfd, 0);
	assert_true(fp->region != MAP_FAILED);
	fp->region[CTRL_ARMED] = 1; /* ring me, please */
	send_proof(fp->sock, fp->st.secret, RING, fp->mfd);
	recv_server_proof(fp->sock, fp->got, &fp->ngot);
	assert_true(fp->ngot >= 1);
	fp->server_region = mmap(NULL, 4096 + RING, PROT_READ | PROT_WRITE, MAP_SHARED,
				 fp->got[0], 0);
	assert_true(fp->server_region != MAP_FAILED);
	send_confirm(&fp->st);
	pthread_join(fp->st.thread, NULL);
	assert_int_equal(fp->st.run.rc, 0);
}

static void fake_peer_detach(struct fake_peer *fp)
{
	smcr_sock_abort(fp->st.run.s, false);
	munmap(fp->region, 4096 + RING);
	munmap(fp->server_region, 4096 + RING);
	close(fp->sock);
	close(fp->mfd);
	for (unsigned i = 0; i < fp->ngot; i++)
		close(fp->got[i]);
	teardown(&fp->st);
}

static bool is_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	return strcmp(target, "anon_inode:[eventfd]") == 0;
}

/* Run `fn(arg)` on a thread; false if it has not returned within `ms` (it is left stuck). */
static bool returns_within(void *(*fn)(void *), void *arg, int ms)
{
	struct timespec ts;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	if (pthread_timedjoin_np(t, NULL, &ts) != 0) {
		pthread_detach(t);
		return false;
	}
	return true;
}

static void set_word(uint8_t *region, size_t off, uint32_t v);

/* What the server's application does: poll, read, many small sends (each rings). */
static void *victim_calls(void *arg)
{
	struct fake_peer *fp = arg;
	char b;

	(void)smcr_sock_poll(fp->st.run.s);
	(void)sock_recv(fp->st.run.s, &b, 1, MSG_DONTWAIT);
	for (int i = 0; i < 4000; i++) {
		set_word(fp->region, CTRL_ARMED, 1); /* "ring me", and never read a ring */
		if (smcr_sock_send(fp->st.run.s, "x", 1, MSG_DONTWAIT) != 1)
			break; /* 4000 bytes fit the 16 KiB ring */
		(void)smcr_sock_poll(fp->st.run.s);
	}
	(void)sock_recv(fp->st.run.s, &b, 1, MSG_DONTWAIT);
	return NULL;
}

/*
 * The doorbell attack: a peer turns every file it holds in common with us
 * blocking (O_NONBLOCK is a flag of the open file description, which
 * SCM_RIGHTS shares), drains or fills what it can, tells us it rang without
 * ringing (`armed` 0 in our control page), asks to be rung on every CDC and
 * never takes a ring off.  None of our calls may block: each returns within
 * a bound.  (With eventfds handed to the peer, the server's read() of its
 * own eventfd blocked here for ever.)
 */
static void test_peer_cannot_block_our_calls(void **state)
{
	struct fake_peer fp;
	uint64_t v;

	(void)state;
	fake_peer_attach(&fp);
	/* Everything the server gave us: made blocking; its eventfds emptied. */
	for (unsigned i = 0; i < fp.ngot; i++) {
		int fl = fcntl(fp.got[i], F_GETFL);

		if (is_eventfd(fp.got[i])) {
			assert_int_equal(fcntl(fp.got[i], F_SETFL, fl | O_NONBLOCK), 0);
			(void)!read(fp.got[i], &v, sizeof(v));
		}
		assert_int_equal(fcntl(fp.got[i], F_SETFL, fl & ~O_NONBLOCK), 0);
	}
	/* Our own socket end blocking too (its description is ours alone: no effect). */
	assert_int_equal(fcntl(fp.sock, F_SETFL, fcntl(fp.sock, F_GETFL) & ~O_NONBLOCK), 0);
	/* "I rang" without ringing: the server will go and take a ring that is not there. */
	set_word(fp.server_region, CTRL_ARMED, 0);
	assert_true(returns_within(victim_calls, &fp, 10000));
	fake_peer_detach(&fp);
}

static void set_word(uint8_t *region, size_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(void *)(region + off), v, __ATOMIC_RELAXED);
}

static uint32_t get_word(const uint8_t *region, size_t off)
{
	return __atomic_load_n((const uint32_t *)(const void *)(region + off), __ATOMIC_RELAXED);
}

/* One ring as the peer makes it: "armed" swapped, one byte, optionally carrying `fd`. */
static void ring_with_fd(struct fake_peer *fp, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char p = 'P';
	struct iovec iov = { .iov_base = &p, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (fd >= 0) {
		memset(u.buf, 0, sizeof(u.buf));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	set_word(fp->server_region, CTRL_ARMED, 0);
	assert_int_equal(sendmsg(fp->sock, &mh, MSG_NOSIGNAL), 1);
}

/* The fd the server's ring carried (its pipe offer), or -1 for a plain ring. */
static int take_ring_fd(struct fake_peer *fp)
{
	union {
		char buf[256];
		struct cmsghdr align;
	} u;
	char b;
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	int fd = -1;

	if (recvmsg(fp->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
		return -1;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static void *drain_pipe_ring(void *arg)
{
	struct fake_peer *fp = arg;

	(void)smcr_sock_poll(fp->st.run.s); /* re-arms, sees "armed" 0, takes the ring */
	(void)smcr_sock_poll(fp->st.run.s);
	return NULL;
}

/*
 * The pipe a peer offers as our doorbell: it keeps a copy of the read end's
 * description, makes it blocking and takes the rings itself, then says it
 * rang.  Our drain reads the pipe through a description of its own, so it
 * never blocks; we say we took the pipe only in our own page.
 */
static void test_peer_pipe_cannot_block_our_drain(void **state)
{
	struct fake_peer fp;
	int p[2];
	char b;

	(void)state;
	fake_peer_attach(&fp);
	set_word(fp.region, CTRL_FEATURES, FEAT_PIPE_BELL);
	assert_int_equal(pipe(p), 0);
	ring_with_fd(&fp, p[0]);
	(void)smcr_sock_poll(fp.st.run.s);
	assert_int_equal(get_word(fp.server_region, CTRL_BELL_PIPE), 1);
	/* The description we sent, blocking; our ring, taken by us. */
	assert_int_equal(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) & ~O_NONBLOCK), 0);
	assert_int_equal(write(p[1], "r", 1), 1);
	assert_int_equal(read(p[0], &b, 1), 1);
	set_word(fp.server_region, CTRL_ARMED, 0);
	assert_true(returns_within(drain_pipe_ring, &fp, 5000));
	close(p[0]);
	close(p[1]);
	fake_peer_detach(&fp);
}

/* Not a pipe (our own memfd, a socket): never taken; the rings stay on the socket. */
static void test_peer_offer_of_non_pipe_is_refused(void **state)
{
	struct fake_peer fp;
	int sv[2];

	(void)state;
	fake_peer_attach(&fp);
	set_word(fp.region, CTRL_FEATURES, FEAT_PIPE_BELL);
	ring_with_fd(&fp, fp.mfd);
	(void)smcr_sock_poll(fp.st.run.s);
	assert_int_equal(get_word(fp.server_region, CTRL_BELL_PIPE), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ring_with_fd(&fp, sv[0]);
	(void)smcr_sock_poll(fp.st.run.s);
	assert_int_equal(get_word(fp.server_region, CTRL_BELL_PIPE), 0);
	close(sv[0]);
	close(sv[1]);
	fake_peer_detach(&fp);
}

/* Sends whose every CDC rings (the peer re-arms each time); false if one failed. */
static bool send_ringing(struct fake_peer *fp, int n)
{
	for (int i = 0; i < n; i++) {
		set_word(fp->region, CTRL_ARMED, 1);
		if (smcr_sock_send(fp->st.run.s, "x", 1, MSG_DONTWAIT) != 1)
			return false;
	}
	return true;
}

static void *ring_a_full_pipe(void *arg)
{
	return send_ringing(arg, 6000) ? arg : NULL;
}

/*
 * Our own pipe, offered to a chatty peer after a few rings: the peer shrinks
 * it to one page, makes the read end's description blocking, says it took
 * it and never reads; then closes it.  Our rings neither block on the full
 * pipe nor raise SIGPIPE once nobody else reads it.
 */
static void test_peer_cannot_block_or_kill_us_through_our_pipe(void **state)
{
	struct fake_peer fp;
	void (*old)(int) = signal(SIGPIPE, SIG_DFL);
	int rd = -1;

	(void)state;
	fake_peer_attach(&fp);
	set_word(fp.region, CTRL_FEATURES, FEAT_PIPE_BELL);
	for (int i = 0; i < 16 && rd < 0; i++) {
		assert_true(send_ringing(&fp, 1));
		rd = take_ring_fd(&fp);
	}
	assert_true(rd >= 0);
	assert_true(fcntl(rd, F_SETPIPE_SZ, 4096) >= 0);
	assert_int_equal(fcntl(rd, F_SETFL, fcntl(rd, F_GETFL) & ~O_NONBLOCK), 0);
	set_word(fp.region, CTRL_BELL_PIPE, 1);
	assert_true(returns_within(ring_a_full_pipe, &fp, 10000));
	close(rd);
	assert_true(send_ringing(&fp, 100)); /* alive: no SIGPIPE */
	fake_peer_detach(&fp);
	signal(SIGPIPE, old);
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
	fake_peer_attach(&fp);
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
	int silent, liar, mfd = good_memfd(server_ring);
	char b;

	(void)state;
	setup_begin(&st, &m);
	silent = rv_connect(m.proposal.ism_gids[1].gid);
	liar = rv_connect(m.proposal.ism_gids[1].gid);
	memset(wrong, 0xA5, sizeof(wrong));
	send_proof(liar, wrong, server_ring, mfd);
	setup_send_proposal(&st, &m, &m);
	assert_int_equal(m.accept.dmbe_idx, 1);
	assert_int_equal(smcr_clc_rmbe_size(m.accept.dmbe_size), server_ring);
	client_completes(&st, &m);
	assert_true(recv(silent, &b, 1, 0) <= 0);
	assert_true(recv(liar, &b, 1, 0) <= 0);
	close(silent);
	close(liar);
	close(mfd);
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
	int l, knock, mfd = good_memfd(RING);
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
	send_proof(knock, st.secret, RING, mfd);
	pthread_join(st.thread, NULL);
	assert_int_equal(st.run.rc, 0); /* SMC, not a Decline after our Confirm */
	pfd = (struct pollfd){ .fd = st.cfd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 0), 0); /* and nothing for us on TCP */
	assert_int_equal(smcr_sock_send(st.run.s, "hi", 2, 0), 2);
	smcr_sock_abort(st.run.s, false);
	close(knock);
	close(l);
	close(mfd);
	teardown(&st);
}

/* ---- the ring pool: a ring once handed to a process stays that process's ---- */

static ino_t fd_ino(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/*
 * A hand-made classic-order client for a process of its own (no cmocka
 * here: a failure is a 0 return).  It completes the handshake with the
 * server at `port` and returns the inode of the ring the server handed it,
 * which it keeps mapped and open, as an attacker would.
 */
static ino_t lone_client(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct smcr_xconn *xc = NULL;
	struct smcr_clc_msg m;
	uint8_t secret[16];
	int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), sock, mfd, got[4];
	unsigned ngot = 0;
	uint64_t token;

	if (cfd < 0 || connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    smcr_shm_ops.create(-1, RING, 2000, &xc) != 0)
		return 0;
	memset(&m, 0, sizeof(m));
	if (smcr_shm_ops.client_propose(xc, &m) != 0)
		return 0;
	smcr_put_be64(secret, m.proposal.ism_gid);
	smcr_put_be64(secret + 8, m.proposal.ism_gids[0].gid);
	m.proposal.ism_gid_cnt = 1; /* the classic order: we knock */
	if (!send_clc_raw(cfd, &m) || read_clc(cfd, &m) == 0 || m.hdr.type != SMCR_CLC_ACCEPT)
		return 0;
	token = m.accept.dmb_token;
	sock = rv_connect_raw(token);
	mfd = good_memfd_raw(RING);
	if (sock < 0 || mfd < 0 ||
	    send_proof_fds(sock, secret, RING, &mfd, 1) != (ssize_t)sizeof(struct proof) ||
	    !recv_server_proof_raw(sock, got, &ngot) ||
	    mmap(NULL, 4096 + RING, PROT_READ | PROT_WRITE, MAP_SHARED, got[0], 0) == MAP_FAILED ||
	    !send_confirm_raw(cfd, secret, token))
		return 0;
	return fd_ino(got[0]);
}

/* The server's side of one lone client's connection (the real engine). */
static struct smcr_sock *serve_one(int lfd, int *sfd)
{
	struct smcr_sock *s = NULL;

	*sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*sfd >= 0);
	assert_int_equal(classify_wait(*sfd), SMCR_CLASSIFY_PROPOSAL);
	assert_int_equal(smcr_sock_accept(*sfd, NULL, &s), 0);
	return s;
}

static void end_one(struct smcr_sock *s, int sfd)
{
	smcr_sock_abort(s, false);
	close(sfd);
}

static ino_t read_ino(int fd)
{
	ino_t ino = 0;

	assert_int_equal(read(fd, &ino, sizeof(ino)), (ssize_t)sizeof(ino));
	return ino;
}

static void write_ino(int fd, ino_t ino)
{
	(void)!write(fd, &ino, sizeof(ino));
}

/* A process with the pid `want` (free now): fork's semantics, needs CAP_SYS_ADMIN. */
static pid_t fork_as(pid_t want)
{
	pid_t tid = want;
	struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid = (uintptr_t)&tid,
				 .set_tid_size = 1 };

	return (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
}

struct pool_setup {
	int lfd;
	uint16_t port;
	struct smcr_listener *reg;
	int rep[2]; /* child -> test: inodes */
	int cmd[2]; /* test -> child: go on */
};

static void pool_setup(struct pool_setup *ps)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	ps->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(ps->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ps->lfd, 8), 0);
	assert_int_equal(getsockname(ps->lfd, (struct sockaddr *)&sa, &len), 0);
	ps->port = ntohs(sa.sin_port);
	assert_int_equal(smcr_listener_register(ps->lfd, &ps->reg), 0);
	assert_int_equal(pipe2(ps->rep, O_CLOEXEC), 0);
	assert_int_equal(pipe2(ps->cmd, O_CLOEXEC), 0);
}

static void pool_teardown(struct pool_setup *ps)
{
	smcr_listener_unregister(ps->reg);
	close(ps->lfd);
	close(ps->rep[0]);
	close(ps->rep[1]);
	close(ps->cmd[0]);
	close(ps->cmd[1]);
}

/*
 * The pid-reuse attack on the ring pool.  Process A connects twice: the
 * second time it gets its own ring back (the pool's benefit, kept for the
 * same live process).  Then it leaves a child holding that ring's mapping
 * (a mapping cannot be revoked) and exits; a new process B gets A's pid,
 * as a recycled pid would, and connects.  B must get a ring nobody else has
 * ever mapped, not A's.  (Pooled by pid, B got A's ring: A's child read
 * and wrote B's traffic.)
 */
static void test_ring_never_goes_to_a_recycled_pid(void **state)
{
	struct pool_setup ps;
	struct smcr_sock *s;
	pid_t a, b, holder = 0;
	ino_t first, again, recycled;
	int sfd, status;
	char go = 'g';

	(void)state;
	pool_setup(&ps);
	a = fork();
	assert_true(a >= 0);
	if (a == 0) {
		/* Start well before the server's rendezvous exists (the start time proves us). */
		poll(NULL, 0, 50);
		write_ino(ps.rep[1], lone_client(ps.port));
		(void)!read(ps.cmd[0], &go, 1);
		write_ino(ps.rep[1], lone_client(ps.port));
		(void)!read(ps.cmd[0], &go, 1);
		holder = fork(); /* keeps both rings mapped after A is gone */
		if (holder == 0) {
			pause();
			_exit(0);
		}
		(void)!write(ps.rep[1], &holder, sizeof(holder));
		_exit(0);
	}
	s = serve_one(ps.lfd, &sfd);
	first = read_ino(ps.rep[0]);
	assert_true(first != 0);
	end_one(s, sfd);
	assert_int_equal(write(ps.cmd[1], &go, 1), 1);
	s = serve_one(ps.lfd, &sfd);
	again = read_ino(ps.rep[0]);
	end_one(s, sfd);
	assert_true(again == first); /* the same live process: its ring, from the pool */
	assert_int_equal(write(ps.cmd[1], &go, 1), 1);
	assert_int_equal(read(ps.rep[0], &holder, sizeof(holder)), (ssize_t)sizeof(holder));
	assert_int_equal(waitpid(a, &status, 0), a);

	b = fork_as(a);
	if (b < 0 && errno == EPERM) {
		kill(holder, SIGKILL);
		pool_teardown(&ps);
		skip(); /* test_shm_pid_reuse runs this alone and says SKIP (77) then */
	}
	if (b == 0) {
		write_ino(ps.rep[1], lone_client(ps.port));
		pause();
		_exit(0);
	}
	assert_int_equal(b, a);
	s = serve_one(ps.lfd, &sfd);
	recycled = read_ino(ps.rep[0]);
	assert_true(recycled != 0);
	assert_true(recycled != first); /* never the ring A's child still maps */
	end_one(s, sfd);
	kill(b, SIGKILL);
	kill(holder, SIGKILL);
	waitpid(b, NULL, 0);
	pool_teardown(&ps);
}

/*
 * Another process that connects after A while A still lives (its pid is
 * not A's) never gets A's ring either; A, connecting again, still does.
 */
static void test_ring_stays_with_its_process(void **state)
{
	static const int order[3] = { 0, 1, 0 }; /* A, then B, then A again */
	struct pool_setup ps;
	struct smcr_sock *s;
	pid_t kid[2];
	ino_t ino[3];
	int sfd, cmd[2][2];
	char go = 'g';

	(void)state;
	pool_setup(&ps);
	for (int k = 0; k < 2; k++) {
		/* a command pipe each: "connect" reaches the process it names */
		assert_int_equal(pipe(cmd[k]), 0);
		kid[k] = fork();
		assert_true(kid[k] >= 0);
		if (kid[k] == 0) {
			for (int i = 0; i < (k == 0 ? 2 : 1); i++) {
				if (read(cmd[k][0], &go, 1) != 1)
					_exit(1);
				write_ino(ps.rep[1], lone_client(ps.port));
			}
			pause();
			_exit(0);
		}
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(write(cmd[order[i]][1], &go, 1), 1);
		s = serve_one(ps.lfd, &sfd);
		ino[i] = read_ino(ps.rep[0]);
		assert_true(ino[i] != 0);
		end_one(s, sfd);
	}
	assert_true(ino[1] != ino[0]);
	assert_true(ino[2] == ino[0]);
	for (int k = 0; k < 2; k++) {
		kill(kid[k], SIGKILL);
		waitpid(kid[k], NULL, 0);
		close(cmd[k][0]);
		close(cmd[k][1]);
	}
	pool_teardown(&ps);
}

int main(void)
{
#ifdef TEST_PID_REUSE
	/* Alone, so that "no CAP_SYS_ADMIN to choose a pid" reads as a skip, not a pass. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_never_goes_to_a_recycled_pid),
	};
	pid_t probe = fork_as(1);

	if (probe < 0 && errno == EPERM) {
		fprintf(stderr, "test_shm_pid_reuse: choosing a pid needs CAP_SYS_ADMIN: skipped\n");
		return 77;
	}
#else
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_secret_rejected),
		cmocka_unit_test(test_unsealed_memfd_rejected),
		cmocka_unit_test(test_small_memfd_rejected),
		cmocka_unit_test(test_extra_fd_rejected),
		cmocka_unit_test(test_odd_ring_size_rejected),
		cmocka_unit_test(test_other_process_cannot_attach),
		cmocka_unit_test(test_peer_cannot_block_our_calls),
		cmocka_unit_test(test_rung_sleeping_peer_counts_as_running),
		cmocka_unit_test(test_peer_pipe_cannot_block_our_drain),
		cmocka_unit_test(test_peer_offer_of_non_pipe_is_refused),
		cmocka_unit_test(test_peer_cannot_block_or_kill_us_through_our_pipe),
		cmocka_unit_test(test_server_knocks_on_offered_rendezvous),
		cmocka_unit_test(test_strangers_on_client_rendezvous_are_skipped),
		cmocka_unit_test(test_foreign_rendezvous_means_classic_order),
		cmocka_unit_test(test_confirm_seen_before_proof_is_not_a_decline),
		cmocka_unit_test(test_ring_stays_with_its_process),
	};
#endif

	signal(SIGPIPE, SIG_IGN);
	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
