// SPDX-License-Identifier: MIT
/*
 * Test helper for smcr-stat: a process that publishes stats through the
 * engine's own writer (src/smcr/stats.c), so the tool is checked against the
 * real producer of the file, not against a copy of its layout.
 *
 *   stats-writer [name COMM] records (see publish_fixture), prints one JSON line
 *                           describing them, then obeys commands on stdin:
 *                             churn MS   reuse record slots for MS milliseconds
 *                             fork       fork a child that opens one record of
 *                                        its own (4096/8192 rings, 11 sent, 22
 *                                        received) and prints a JSON line
 *                             forkreset  the same child, which first finds its copy
 *                                        of the fixture's IPv4 connection reads as
 *                                        reset (fork_tail.c: FORKRESET)
 *                             reap       end that child normally, print its status
 *                             listeners  register two more listeners (see
 *                                        add_listeners), print a JSON line
 *                             lgr        open three SMC-R records in two link
 *                                        groups (see add_link_groups), print a
 *                                        JSON line
 *                             tail       two SMC records whose streams went on over
 *                                        TCP: one live (HANDOFF, 40 sent), one
 *                                        closed (PEERTCP), and a TCP record made
 *                                        before connect (SHORTFLOWS, to port
 *                                        4711, no local address); prints a JSON line
 *                             exit       exit normally (the file is removed)
 *                           EOF exits too.  `name` sets the process name first.
 *   stats-writer fake MAGIC VERSION [SIZE|flap]
 *                           publishes a hand-made file with that magic and layout
 *                           version (cut to SIZE bytes, or flapping in size) as
 *                           <runtime dir>/smcr/stats.<pid>, keeps it
 *                           mapped (a live process), prints its pid, waits for EOF.
 *
 * The stats directory is the engine's: $XDG_RUNTIME_DIR/smcr (the test sets
 * XDG_RUNTIME_DIR to a private temporary directory).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "smcr/clc.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/stats.h"

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "stats-writer: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A connected loopback TCP pair on `family`; false when the family is unavailable. */
static bool tcp_pair(int family, int *client, int *server)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int lfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (lfd < 0)
		return false;
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		len = sizeof(*in6);
	}
	if (bind(lfd, (struct sockaddr *)&ss, len) < 0 || listen(lfd, 4) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&ss, &len) < 0) {
		close(lfd);
		return false;
	}
	*client = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*client < 0 || connect(*client, (struct sockaddr *)&ss, len) < 0)
		die("connect");
	*server = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (*server < 0)
		die("accept");
	close(lfd);
	return true;
}

static uint16_t port_of(int fd, bool peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&ss, &len) < 0)
		die("getsockname");
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* Only the fields stats.c reads; the rest of the engine never sees these. */
static struct smcr_sock *fake_sock(int fd, bool server, uint32_t rmb, uint32_t peer_rmb)
{
	struct smcr_sock *s = calloc(1, sizeof(*s));

	if (!s)
		die("calloc");
	s->tcp_fd = fd;
	s->ops = &smcr_shm_ops; /* its info() reads no state */
	s->server = server;
	s->rmb_size = rmb;
	s->peer_size = peer_rmb;
	s->stats = smcr_stats_conn_open(s);
	if (!s->stats)
		die("smcr_stats_conn_open");
	return s;
}

static void set_bytes(struct smcr_sock *s, uint64_t sent, uint64_t received,
		      uint64_t cdcs)
{
	s->bytes_sent = sent;
	s->bytes_received = received;
	s->cdc_sent = cdcs;
	s->cdc_received = cdcs + 1;
	smcr_stats_conn_update(s);
}

/* SMC-R records without RDMA: the transport's info() says what the next one shows. */
static struct smcr_xconn_info next_r_info;
static struct smcr_transport_ops fake_r_ops;

static void fake_r_info(const struct smcr_xconn *xc, struct smcr_xconn_info *out)
{
	(void)xc;
	*out = next_r_info;
}

static struct smcr_sock *fake_r_sock(int fd, bool server, uint32_t lgr, const char *dev)
{
	struct smcr_sock *s = calloc(1, sizeof(*s));

	if (!s)
		die("calloc");
	fake_r_ops = smcr_shm_ops;
	fake_r_ops.info = fake_r_info;
	memset(&next_r_info, 0, sizeof(next_r_info));
	next_r_info.mode = SMCR_STATS_MODE_SMC_R;
	next_r_info.link_group = lgr;
	snprintf(next_r_info.device, sizeof(next_r_info.device), "%s", dev);
	s->tcp_fd = fd;
	s->ops = &fake_r_ops;
	s->server = server;
	s->rmb_size = 65536;
	s->peer_size = 65536;
	s->stats = smcr_stats_conn_open(s);
	if (!s->stats)
		die("smcr_stats_conn_open");
	return s;
}

/* ---- a real SMC connection through the engine (records written by conn.c) ---------- */

struct real_pair {
	int lfd, cfd, sfd;
	struct smcr_listener *reg;
	struct smcr_sock *c, *s;
	int crc;
};

static const struct smcr_sock_opts real_opts = {.rcvbuf = 64 * 1024};

static void *real_client(void *arg)
{
	struct real_pair *p = arg;

	p->crc = smcr_sock_connect(p->cfd, &real_opts, &p->c);
	return NULL;
}

static void recv_all(struct smcr_sock *s, size_t len)
{
	char buf[4096];

	while (len > 0) {
		struct iovec iov = { .iov_base = buf, .iov_len = len < sizeof(buf) ? len : sizeof(buf) };
		ssize_t n = smcr_sock_recvv(s, &iov, 1, 0);

		if (n <= 0)
			die("smcr_sock_recvv");
		len -= (size_t)n;
	}
}

/* Client sends 3000 bytes, the server answers 100: both records must say so. */
static void real_pair_open(struct real_pair *p)
{
	static char data[3000];
	pthread_t t;
	int c = SMCR_CLASSIFY_NEED_MORE;

	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);

	memset(data, 'x', sizeof(data));
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, len) < 0 ||
	    listen(p->lfd, 4) < 0 || getsockname(p->lfd, (struct sockaddr *)&a, &len) < 0)
		die("listener");
	if (smcr_listener_register(p->lfd, &p->reg) != 0)
		die("smcr_listener_register");
	p->cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->cfd < 0 || connect(p->cfd, (struct sockaddr *)&a, len) < 0)
		die("connect");
	if (pthread_create(&t, NULL, real_client, p) != 0)
		die("pthread_create");
	p->sfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (p->sfd < 0)
		die("accept");
	for (int i = 0; i < 5000 && (c == SMCR_CLASSIFY_NEED_MORE || c == SMCR_CLASSIFY_NOTHING); i++) {
		c = smcr_sock_classify(p->sfd);
		if (c == SMCR_CLASSIFY_NEED_MORE || c == SMCR_CLASSIFY_NOTHING)
			poll(NULL, 0, 1);
	}
	if (c != SMCR_CLASSIFY_PROPOSAL ||
	    smcr_sock_accept(p->sfd, &real_opts, &p->s) != 0)
		die("SMC accept");
	pthread_join(t, NULL);
	if (p->crc != 0 || !p->c)
		die("SMC connect");
	if (smcr_sock_send(p->c, data, sizeof(data), 0) != (ssize_t)sizeof(data))
		die("smcr_sock_send");
	recv_all(p->s, sizeof(data));
	if (smcr_sock_send(p->s, data, 100, 0) != 100)
		die("smcr_sock_send");
	recv_all(p->c, 100);
}

/*
 * The fixture the test checks field by field:
 *   v4: client over 127.0.0.1, rings 65536/131072, 1000 sent, 2000 received, live
 *   v6: server over ::1, rings 16384/32768, 5 sent, 6 received, live (when ::1 exists)
 *   closed: client over 127.0.0.1, 777 sent, 888 received, aborted
 *   fallbacks: PEERNOSMC twice, NOSMCDEV once; one handshake error.
 *   tcp: a plain TCP record (server, PEERNOSMC) as the interposer makes them
 *   real: an engine SMC pair over 127.0.0.1, 64 KiB rings, 3000 bytes client to
 *         server and 100 back (so 2 more SMC handshakes)
 */
static struct fixture {
	struct smcr_sock *v4, *v6, *closed;
	struct smcr_tcp_record *tcp;
	struct real_pair real;
	struct smcr_listener *revoked, *second, *sibling; /* "listeners" */
	int revoked_fd, sibling_fd;
	struct smcr_sock *r[4];                  /* "lgr" */
	struct smcr_stats_lgr *lgr[3];
} fx = {.revoked_fd = -1, .sibling_fd = -1};

/* The fixture's IPv4 connection, which a forked child may find reset ("forkreset"). */
static struct smcr_sock *fixture_v4;

static void publish_fixture(void)
{
	int c4, s4, c6 = -1, s6 = -1, cx, sx, ct, st;
	struct smcr_sock *v4, *v6 = NULL, *closed;
	struct real_pair *real = &fx.real;
	bool have_v6;

	if (!tcp_pair(AF_INET, &c4, &s4) || !tcp_pair(AF_INET, &cx, &sx) ||
	    !tcp_pair(AF_INET, &ct, &st))
		die("loopback TCP");
	have_v6 = tcp_pair(AF_INET6, &c6, &s6);

	v4 = fake_sock(c4, false, 65536, 131072);
	set_bytes(v4, 1000, 2000, 10);
	fixture_v4 = v4;
	if (have_v6) {
		v6 = fake_sock(s6, true, 16384, 32768);
		set_bytes(v6, 5, 6, 20);
	}

	smcr_stats_fallback(SMCR_CLC_DECL_PEERNOSMC);
	smcr_stats_fallback(SMCR_CLC_DECL_PEERNOSMC);
	smcr_stats_fallback(SMCR_CLC_DECL_NOSMCDEV);
	smcr_stats_handshake_error();
	/* Waits: 2 spins won, 1 lost, 4 blocking waits slept. */
	smcr_stats_spin(true);
	smcr_stats_spin(true);
	smcr_stats_spin(false);
	for (int i = 0; i < 4; i++)
		smcr_stats_slept();
	fx.tcp = smcr_stats_tcp_open(st, true, SMCR_CLC_DECL_PEERNOSMC);
	if (!fx.tcp)
		die("smcr_stats_tcp_open");
	real_pair_open(real);
	/* Last, so that no later record takes its slot: --all must still see it. */
	closed = fake_sock(cx, false, 4096, 8192);
	set_bytes(closed, 777, 888, 30);
	smcr_stats_conn_close(closed, 1);
	fx.v4 = v4;
	fx.v6 = v6;
	fx.closed = closed;

	printf("{\"pid\": %d, \"path\": \"%s\", \"ipv6\": %s, "
	       "\"v4_local_port\": %u, \"v4_peer_port\": %u, "
	       "\"v6_local_port\": %u, \"v6_peer_port\": %u, "
	       "\"closed_local_port\": %u, \"v4_fd\": %d, \"v6_fd\": %d, "
	       "\"tcp_local_port\": %u, \"tcp_fd\": %d, "
	       "\"real_client_port\": %u, \"real_server_port\": %u}\n",
	       (int)getpid(), smcr_stats_path(), have_v6 ? "true" : "false",
	       port_of(c4, false), port_of(c4, true), have_v6 ? port_of(s6, false) : 0,
	       have_v6 ? port_of(s6, true) : 0, port_of(cx, false), c4, s6,
	       port_of(st, false), st, port_of(real->cfd, false),
	       port_of(real->sfd, false));
	fflush(stdout);
}

/*
 * A listener of this process on the real pair's port at 127.0.0.2: the port's
 * name is its sibling's, its own socket's name is its own.
 */
static int sibling_listener(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002),
				.sin_port = htons((uint16_t)port_of(fx.real.lfd, false))};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4) < 0)
		die("sibling listener");
	return fd;
}

/*
 * "listeners": beside the real pair's listener (served), one whose
 * registration is revoked as before an exec of a program without smcr, a
 * second registration of the real pair's socket (its names are held
 * already), and a sibling on the same port at another address (served).
 */
static void add_listeners(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4) < 0)
		die("listener");
	if (smcr_listener_register(fd, &fx.revoked) != 0)
		die("smcr_listener_register");
	smcr_listener_revoke(fx.revoked, fd, "exec of a program without smcr");
	fx.revoked_fd = fd;
	if (smcr_listener_register(fx.real.lfd, &fx.second) != 0)
		die("smcr_listener_register (second)");
	fx.sibling_fd = sibling_listener();
	if (smcr_listener_register(fx.sibling_fd, &fx.sibling) != 0)
		die("smcr_listener_register (sibling)");
	printf("{\"served_port\": %u, \"served_fd\": %d, \"revoked_port\": %u, "
	       "\"revoked_fd\": %d, \"sibling_fd\": %d}\n",
	       port_of(fx.real.lfd, false), fx.real.lfd, port_of(fd, false), fd, fx.sibling_fd);
	fflush(stdout);
}

/* A link of a group record: device, port 1, QPs and GIDs derived from `qpn`. */
static void fake_link(struct smcr_stats_link *l, const char *dev, uint8_t state, uint8_t id,
		      uint32_t qpn, uint32_t conns)
{
	snprintf(l->device, sizeof(l->device), "%s", dev);
	l->port = 1;
	l->state = state;
	l->link_id = id;
	l->qpn = qpn;
	l->peer_qpn = qpn + 1;
	l->conns = conns;
	l->gid[10] = l->gid[11] = l->peer_gid[10] = l->peer_gid[11] = 0xff;
	l->gid[12] = l->peer_gid[12] = 10;
	l->gid[15] = (uint8_t)qpn;
	l->peer_gid[15] = (uint8_t)(qpn + 1);
}

/*
 * "lgr": link group 0x101 (client, rxe0) carries two connections, 0x202
 * (server, rxe1, 3 RMB rescues) one, each over a loopback TCP pair of its own.  Group
 * records as lgr.c writes them: 0x101 active with two links (one connection
 * on each), 0x202 active with one, 0x303 an idle group kept for reuse (no
 * connection), 0x404 a group that has connection records but no group record
 * (as from a writer without the table).
 */
static void add_link_groups(void)
{
	struct smcr_stats_lgr g;
	int c[4], sv[4];

	for (int i = 0; i < 4; i++)
		if (!tcp_pair(AF_INET, &c[i], &sv[i]))
			die("loopback TCP");
	fx.r[0] = fake_r_sock(c[0], false, 0x101, "rxe0");
	fx.r[1] = fake_r_sock(c[1], false, 0x101, "rxe0");
	fx.r[2] = fake_r_sock(sv[2], true, 0x202, "rxe1");
	set_bytes(fx.r[0], 100, 200, 1);
	set_bytes(fx.r[1], 1000, 2000, 1);
	set_bytes(fx.r[2], 7, 9, 1);
	fx.r[3] = fake_r_sock(c[3], false, 0x404, "rxe0");
	for (int i = 0; i < 3; i++) {
		fx.lgr[i] = smcr_stats_lgr_open();
		if (!fx.lgr[i])
			die("smcr_stats_lgr_open");
	}
	memset(&g, 0, sizeof(g));
	g.id = 0x101;
	g.lgr_state = SMCR_STATS_LGR_ACTIVE;
	g.max_links = 2;
	g.conns = 2;
	g.peer_addr[10] = g.peer_addr[11] = 0xff;
	g.peer_addr[12] = 127;
	g.peer_addr[15] = 1;
	memcpy(g.peer_id, "\x12\x34\x02\x00\x00\x00\x00\x01", 8);
	fake_link(&g.links[0], "rxe0", SMCR_STATS_LINK_UP, 1, 17, 1);
	fake_link(&g.links[1], "rxe1", SMCR_STATS_LINK_UP, 2, 33, 1);
	smcr_stats_lgr_update(fx.lgr[0], &g);
	memset(&g.links[1], 0, sizeof(g.links[1]));
	g.id = 0x202;
	g.role = 1;
	g.max_links = 1;
	g.conns = 1;
	g.rmb_rescues = 3; /* a connection of it gave a silent peer room three times */
	fake_link(&g.links[0], "rxe1", SMCR_STATS_LINK_UP, 1, 49, 1);
	smcr_stats_lgr_update(fx.lgr[1], &g);
	g.rmb_rescues = 0;
	g.id = 0x303;
	g.role = 0;
	g.conns = 0;
	fake_link(&g.links[0], "rxe0", SMCR_STATS_LINK_UP, 1, 65, 0);
	smcr_stats_lgr_update(fx.lgr[2], &g);
	printf("{\"lgr_a\": %u, \"lgr_b\": %u}\n", 0x101u, 0x202u);
	fflush(stdout);
}

/* Everything the fixture holds, so that a leak checker sees a clean exit. */
static void release_fixture(void)
{
	smcr_listener_unregister(fx.sibling);
	smcr_listener_unregister(fx.second);
	smcr_listener_unregister(fx.revoked);
	if (fx.sibling_fd >= 0)
		close(fx.sibling_fd);
	if (fx.revoked_fd >= 0)
		close(fx.revoked_fd);
	for (int i = 0; i < 4; i++)
		free(fx.r[i]);
	for (int i = 0; i < 3; i++)
		smcr_stats_lgr_close(fx.lgr[i]);
	smcr_sock_close(fx.real.c);
	smcr_sock_close(fx.real.s);
	smcr_listener_unregister(fx.real.reg);
	smcr_stats_tcp_close(fx.tcp);
	free(fx.v4);
	free(fx.v6);
	free(fx.closed);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Open, update and close records as fast as possible, so a reader races slot
 * reuse: every record this writes has bytes_received == 2 * bytes_sent.
 */
static void churn(int ms)
{
	int c, s;
	int64_t end = now_ms() + ms;
	uint64_t k = 1;

	if (!tcp_pair(AF_INET, &c, &s))
		die("loopback TCP");
	while (now_ms() < end) {
		struct smcr_sock *a = fake_sock(c, false, 4096, 4096);
		struct smcr_sock *b = fake_sock(s, true, 4096, 4096);

		set_bytes(a, k, 2 * k, k);
		set_bytes(b, k + 1, 2 * (k + 1), k);
		smcr_stats_conn_close(a, 0);
		smcr_stats_conn_close(b, 0);
		free(a);
		free(b);
		k += 2;
	}
	close(c);
	close(s);
	printf("churned %llu\n", (unsigned long long)k / 2);
	fflush(stdout);
}

/* The forked child of "fork": its pid and the pipe whose closing ends it. */
static pid_t forked_pid;
static int forked_hold = -1;

/*
 * An accept-then-fork server in miniature: the child inherits the fixture's
 * records and makes one connection of its own.  It reports whether its stats
 * file existed before that first record (it must not: publishing is lazy).
 */
static void fork_child(bool reset)
{
	char parent_path[300], own_path[320], *slash;
	int hold[2], c, s;
	struct stat st;

	snprintf(parent_path, sizeof(parent_path), "%s", smcr_stats_path());
	if (pipe2(hold, O_CLOEXEC) < 0)
		die("pipe2");
	fflush(stdout);
	forked_pid = fork();
	if (forked_pid < 0)
		die("fork");
	if (forked_pid == 0) {
		struct smcr_sock *mine;
		bool before;
		char b;

		close(hold[1]);
		if (reset) {
			fixture_v4->fork_refused = true;
			smcr_stats_conn_refused(fixture_v4);
		}
		slash = strrchr(parent_path, '/');
		if (slash)
			*slash = '\0';
		snprintf(own_path, sizeof(own_path), "%s/stats.%d", parent_path, (int)getpid());
		before = stat(own_path, &st) == 0;
		if (!tcp_pair(AF_INET, &c, &s))
			die("loopback TCP");
		mine = fake_sock(c, false, 4096, 8192);
		set_bytes(mine, 11, 22, 3);
		printf("{\"child_pid\": %d, \"child_port\": %u, \"path\": \"%s\", "
		       "\"file_before_record\": %s}\n",
		       (int)getpid(), port_of(c, false), smcr_stats_path(),
		       before ? "true" : "false");
		fflush(stdout);
		while (read(hold[0], &b, 1) > 0) /* until the parent closes its end */
			;
		smcr_stats_conn_close(mine, 0);
		free(mine);
		exit(0);
	}
	close(hold[0]);
	forked_hold = hold[1];
}

/* "tail": what tcp_tail.c leaves in a record, live and closed. */
static void add_tails(void)
{
	int c1, s1, c2, s2;
	struct smcr_sock *live, *closed;

	if (!tcp_pair(AF_INET, &c1, &s1) || !tcp_pair(AF_INET, &c2, &s2))
		die("loopback TCP");
	live = fake_sock(c1, false, 65536, 65536);
	live->tail_reason = SMCR_CLC_DECL_HANDOFF;
	set_bytes(live, 40, 50, 3);
	closed = fake_sock(s2, true, 65536, 65536);
	closed->tail_reason = SMCR_CLC_DECL_PEERTCP;
	set_bytes(closed, 60, 70, 4);
	/* a client the learned policy kept on TCP: its record from the destination alone */
	{
		struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(4711),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

		if (!smcr_stats_tcp_open_dest(c2, (struct sockaddr *)&dst,
					      SMCR_CLC_DECL_SHORTFLOWS))
			die("smcr_stats_tcp_open_dest");
	}
	/* closed last: a later record would take its slot */
	smcr_stats_conn_close(closed, 0);
	printf("{\"live_port\": %u, \"closed_port\": %u, \"dest_fd\": %d}\n", port_of(c1, false),
	       port_of(s2, false), c2);
	fflush(stdout);
}

static void reap_child(void)
{
	int status = -1;

	if (forked_hold < 0)
		return;
	close(forked_hold);
	forked_hold = -1;
	waitpid(forked_pid, &status, 0);
	printf("reaped %d\n", status);
	fflush(stdout);
}

static void serve_commands(void)
{
	char line[64];

	while (fgets(line, sizeof(line), stdin)) {
		int ms;

		if (sscanf(line, "churn %d", &ms) == 1)
			churn(ms);
		else if (strncmp(line, "forkreset", 9) == 0)
			fork_child(true);
		else if (strncmp(line, "fork", 4) == 0)
			fork_child(false);
		else if (strncmp(line, "reap", 4) == 0)
			reap_child();
		else if (strncmp(line, "listeners", 9) == 0)
			add_listeners();
		else if (strncmp(line, "lgr", 3) == 0)
			add_link_groups();
		else if (strncmp(line, "tail", 4) == 0)
			add_tails();
		else if (strncmp(line, "exit", 4) == 0)
			return;
	}
}

/*
 * Until stdin closes, cut the file to its first page and restore it, over and
 * over: a reader that passed the size check may find its records gone (SIGBUS).
 */
static void flap_size(int fd, off_t full)
{
	struct pollfd in = {.fd = 0, .events = POLLIN};

	while (poll(&in, 1, 0) == 0)
		if (ftruncate(fd, 4096) < 0 || ftruncate(fd, full) < 0)
			die("ftruncate");
}

/*
 * A file with a header the tool must refuse, cut to `size` bytes when > 0;
 * size < 0: a valid file whose size flaps (flap_size).
 */
static int fake_file(uint32_t magic, uint32_t version, off_t size)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct smcr_stats_file *f;
	char path[512];
	int fd;

	if (!xdg)
		return 2;
	snprintf(path, sizeof(path), "%s/smcr", xdg);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/smcr/stats.%d", xdg, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(*f)) < 0)
		die(path);
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (f == MAP_FAILED)
		die("mmap");
	f->magic = magic;
	f->version = version;
	f->header_size = (uint32_t)offsetof(struct smcr_stats_file, conns);
	f->conn_size = sizeof(struct smcr_stats_conn);
	f->max_conns = SMCR_STATS_MAX_CONNS;
	f->pid = (int32_t)getpid();
	f->conns[0].state = SMCR_STATS_CONN_LIVE;
	f->conns[0].generation = 1;
	/* Our mapping stays; only the file's tail is gone. */
	if (size > 0 && ftruncate(fd, size) < 0)
		die("ftruncate");
	printf("{\"pid\": %d, \"path\": \"%s\"}\n", (int)getpid(), path);
	fflush(stdout);
	if (size < 0)
		flap_size(fd, (off_t)sizeof(*f));
	while (fgetc(stdin) != EOF)
		;
	unlink(path);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "fake") == 0) {
		off_t size = 0;

		if (argc == 5)
			size = strcmp(argv[4], "flap") == 0
				   ? -1
				   : (off_t)strtoul(argv[4], NULL, 0);
		return fake_file((uint32_t)strtoul(argv[2], NULL, 0),
				 (uint32_t)strtoul(argv[3], NULL, 0), size);
	}
	if (argc == 3 && strcmp(argv[1], "name") == 0) {
		/* Before the first record: the file takes comm when it is created. */
		prctl(PR_SET_NAME, argv[2], 0, 0, 0);
	} else if (argc != 1) {
		fprintf(
		    stderr,
		    "usage: stats-writer [name COMM | fake MAGIC VERSION [SIZE|flap]]\n");
		return 2;
	}
	publish_fixture();
	serve_commands(); /* until "exit" or EOF: a driver that dies closes our stdin */
	release_fixture();
	return 0;
}
