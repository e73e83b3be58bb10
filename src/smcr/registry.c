// SPDX-License-Identifier: MIT
/*
 * Host-local registry of smcr listeners (design §4: propose only to a peer
 * known to speak SMC).  A listener binds and listens on an abstract UNIX
 * seqpacket socket "smcr/l/<netns inode>/<port>".  Abstract names are per
 * network namespace and vanish with the last process holding the socket, so a
 * crashed server leaves nothing behind.
 *
 * Abstract names have no owner and no permissions: any local user can bind
 * any name.  So the name alone proves nothing (design §7).  A client believes
 * an entry only when the kernel vouches for it, through NETLINK_SOCK_DIAG:
 *   - unix_diag reports the uid that created the registry socket
 *     (UNIX_DIAG_UID; kernel-maintained, a user cannot chown a socket to
 *     someone else);
 *   - inet_diag reports the uid of every TCP listener on that port that can
 *     have accepted our connection (bound to the peer address or a wildcard,
 *     IPv4 and IPv6);
 * and all of them must be the same user; and each of those TCP listeners must
 * have its own name, "smcr/i/<netns inode>/<socket inode>", made by that user,
 * which only a process serving that very listener binds (which listener takes
 * a connection is the kernel's choice: SO_REUSEPORT spreads them, and a
 * plain listener of the same user on that port, a reuseport sibling or a
 * server on another address, would read the Proposal as data).  Another user
 * can therefore neither
 * make clients propose SMC to a plain server it does not own, nor usurp a
 * real smcr listener: an entry squatted by another uid is simply not
 * believed (the clients stay on TCP) and the real listener logs a warning.
 * Processes of one user are one trust domain (same-user spoofing is out of
 * scope, as for everything else a user's processes can do to each other).
 *
 * Looking the name up through unix_diag rather than connect() also means a
 * lookup leaves nothing queued on the listener's registry socket, which never
 * accepts.  The dump asks only for listening unix sockets, a short list.
 * Abstract names live in one namespace per socket type, so the registrant
 * also binds the same name on a datagram socket: a client's connect() to it
 * failing with ECONNREFUSED says "not registered" for the price of two system
 * calls, before any diag dump (a squatted probe name only costs the dump).
 *
 * A registration is revoked by shutting its socket down (smcr_registry_revoke):
 * the listener went to a program without smcr while processes that still
 * hold the registration (it followed fork) live on.  The diag dump reports a
 * socket's shutdown state, and a shut-down name is not a registration.
 *
 * A process of the same user can still bind a listener's name without
 * serving it (same-user spoofing, out of scope as above); a listener whose
 * process execs into a program without smcr has its names revoked
 * (smcr_registry_revoke) while the fds that hold them live on elsewhere.
 */
#include "smcr/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sockaddr.h"
#include "smcr/libc.h"
#include "smcr/rundir.h"
#include "smcr/sys.h"

/* An id no socket owner can have: the lookup failed or was ambiguous. */
#define NO_UID ((uint32_t)-1)

/* TCP_LISTEN in the kernel's state numbering (include/net/tcp_states.h). */
#define DIAG_STATE_LISTEN 10
#define DIAG_STATE_SYN_RECV 3

/*
 * A listener's socket name (registry.h, socket_fd) says with its backlog,
 * which unix_diag reports, whether the TCP listener is exclusive
 * (listener_is_exclusive()).  0 is what every registration said before
 * there was a second value: such a listener is looked at in full each time.
 */
#define SOCKET_NAME_SHARED 0
#define SOCKET_NAME_EXCLUSIVE 1

static unsigned long long netns_inode(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/*
 * Name without the leading NUL; returns its length.  `ns` is netns_inode(),
 * which callers read once per lookup: a stat of /proc/self/ns/net walks procfs
 * and is a visible share of a client's connection set-up, so one lookup never
 * pays it twice.
 */
static size_t registry_name(unsigned long long ns, uint16_t port, char *out, size_t len)
{
	int n = snprintf(out, len, "smcr/l/%llu/%u", ns, (unsigned)port);

	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

static socklen_t registry_sockaddr(unsigned long long ns, uint16_t port, struct sockaddr_un *sa)
{
	size_t n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = registry_name(ns, port, sa->sun_path + 1, sizeof(sa->sun_path) - 1);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* The name that says one TCP listener (by its socket inode) is served. */
static size_t socket_name(unsigned long long ns, unsigned long long ino, char *out, size_t len)
{
	int n = snprintf(out, len, "smcr/i/%llu/%llu", ns, ino);

	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

/* ---- sock_diag ----------------------------------------------------------------------- */

typedef void (*diag_visit_fn)(const struct nlmsghdr *nh, void *ctx);

/*
 * Send one SOCK_DIAG_BY_FAMILY request on the NETLINK_SOCK_DIAG socket `fd`
 * and hand every answer to `visit`: a dump (all matching sockets, ended by
 * NLMSG_DONE) or a lookup of one socket (one answer or an error).  0 when
 * complete, -errno otherwise (then nothing may be concluded).
 */
/* The sock_diag request `req` to the kernel; 0 or -errno. */
static int diag_send(int fd, const void *req, size_t req_len, bool dump)
{
	struct {
		struct nlmsghdr nh;
		uint8_t body[sizeof(struct inet_diag_req_v2)];
	} msg;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	if (req_len > sizeof(msg.body))
		return -EINVAL;
	memset(&msg, 0, sizeof(msg));
	msg.nh.nlmsg_len = (uint32_t)NLMSG_LENGTH(req_len);
	msg.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nh.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | (dump ? NLM_F_DUMP : 0));
	msg.nh.nlmsg_seq = 1;
	memcpy(msg.body, req, req_len);
	if (smcr_libc.sendto(fd, &msg, msg.nh.nlmsg_len, 0, (struct sockaddr *)&kernel,
			     sizeof(kernel)) < 0)
		return -errno;
	return 0;
}

/*
 * One datagram of the kernel's answer, each record to visit: 1 if the
 * answer is complete, 0 if more comes, -errno for the kernel's error.
 */
static int diag_answer(const uint8_t *buf, size_t left, bool dump, diag_visit_fn visit,
		       void *ctx)
{
	for (const struct nlmsghdr *nh = (const struct nlmsghdr *)(const void *)buf;
	     NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
		if (nh->nlmsg_type == NLMSG_DONE)
			return 1;
		if (nh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);

			if (nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error < 0)
				return e->error;
			return -EIO;
		}
		if (nh->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
			visit(nh, ctx);
			if (!dump)
				return 1;
		}
	}
	return 0;
}

static int diag_query(int fd, const void *req, size_t req_len, bool dump, diag_visit_fn visit,
		      void *ctx)
{
	enum { BUF_LEN = 32768 };
	uint8_t *buf;
	int rc;

	if (req_len > sizeof(struct inet_diag_req_v2))
		return -EINVAL;
	buf = malloc(BUF_LEN);
	if (!buf)
		return -ENOMEM;
	rc = diag_send(fd, req, req_len, dump);
	while (rc == 0) {
		ssize_t n = smcr_libc.recv(fd, buf, BUF_LEN, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = n < 0 ? -errno : -EIO;
		else
			rc = diag_answer(buf, (size_t)n, dump, visit, ctx);
	}
	free(buf);
	return rc < 0 ? rc : 0;
}

/* At most this many TCP listeners may share a port for a client to propose SMC. */
#define MAX_CANDIDATES 16

/* One unix socket, as unix_diag names it: its inode and the kernel's cookie. */
struct unix_id {
	uint32_t ino;
	uint32_t cookie[2];
};

/* The listen backlog unix_diag reports (UNIX_DIAG_RQLEN), or -1. */
static long unix_diag_backlog(const struct rtattr *a)
{
	struct unix_diag_rqlen rq;

	if (a->rta_type != UNIX_DIAG_RQLEN || RTA_PAYLOAD(a) < sizeof(rq))
		return -1;
	memcpy(&rq, RTA_DATA(a), sizeof(rq));
	return (long)rq.udiag_wqueue;
}

/*
 * Who created the listening abstract unix socket called `name`?  And does
 * each of `n_sockets` socket names exist, unrevoked, created by that same uid?
 */
struct unix_owner_query {
	const char *name;
	char name_buf[64];
	size_t name_len;
	uint32_t uid;  /* NO_UID until found */
	unsigned hits; /* a name is bound once per netns; more would be a surprise */
	struct unix_id id; /* the name's socket */
	char sockets[MAX_CANDIDATES][48];
	size_t socket_len[MAX_CANDIDATES];
	uint32_t socket_uid[MAX_CANDIDATES]; /* NO_UID: missing, revoked or seen twice */
	unsigned socket_hits[MAX_CANDIDATES];
	struct unix_id socket_id[MAX_CANDIDATES];
	bool socket_exclusive[MAX_CANDIDATES]; /* SOCKET_NAME_EXCLUSIVE */
	unsigned n_sockets;
};

static bool abstract_name_is(const char *p, size_t plen, const char *name, size_t name_len)
{
	return plen == name_len + 1 && p[0] == '\0' && memcmp(p + 1, name, name_len) == 0;
}

/*
 * Shut down: revoked (smcr_registry_revoke()), the listener went to a
 * program without smcr.  The kernel reports it with every unix socket.
 */
static bool unix_diag_revoked(const struct rtattr *a)
{
	return a->rta_type == UNIX_DIAG_SHUTDOWN && RTA_PAYLOAD(a) >= 1 &&
	       *(const uint8_t *)RTA_DATA(a) != 0;
}

static void unix_owner_visit(const struct nlmsghdr *nh, void *ctx)
{
	struct unix_owner_query *q = ctx;
	const struct unix_diag_msg *m = NLMSG_DATA(nh);
	size_t len = nh->nlmsg_len;
	const struct rtattr *a;
	bool named = false, revoked = false;
	uint32_t uid = NO_UID;
	long backlog = -1;
	size_t alen;
	int socket = -1;

	if (len < NLMSG_LENGTH(sizeof(*m)))
		return;
	alen = len - NLMSG_LENGTH(sizeof(*m));
	for (a = (const struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
		const char *p = RTA_DATA(a);
		size_t plen = RTA_PAYLOAD(a);

		if (a->rta_type == UNIX_DIAG_NAME) {
			/* Abstract: a leading NUL, then exactly the name (no terminator). */
			named = abstract_name_is(p, plen, q->name, q->name_len);
			for (unsigned i = 0; i < q->n_sockets && !named && socket < 0; i++)
				if (abstract_name_is(p, plen, q->sockets[i], q->socket_len[i]))
					socket = (int)i;
		} else if (a->rta_type == UNIX_DIAG_UID && plen >= sizeof(uint32_t)) {
			memcpy(&uid, p, sizeof(uid));
		} else if (a->rta_type == UNIX_DIAG_RQLEN) {
			backlog = unix_diag_backlog(a);
		} else {
			revoked = revoked || unix_diag_revoked(a);
		}
	}
	if (socket >= 0) {
		q->socket_hits[socket]++;
		q->socket_uid[socket] = q->socket_hits[socket] == 1 && !revoked ? uid : NO_UID;
		q->socket_id[socket] = (struct unix_id){ m->udiag_ino,
							 { m->udiag_cookie[0], m->udiag_cookie[1] } };
		q->socket_exclusive[socket] = backlog == SOCKET_NAME_EXCLUSIVE;
	}
	if (!named)
		return;
	q->hits++;
	q->uid = q->hits == 1 && !revoked ? uid : NO_UID;
	q->id = (struct unix_id){ m->udiag_ino, { m->udiag_cookie[0], m->udiag_cookie[1] } };
}

static int diag_socket(void)
{
	int fd = smcr_libc.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);

	return fd < 0 ? -errno : fd;
}

/*
 * The owner of port's registry name, NO_UID if none (or revoked, or the dump
 * failed); *all_served: each of the `n` TCP listeners `inodes` has its socket
 * name, unrevoked, made by that same owner.
 */
static uint32_t registry_owner_of(int nl, unsigned long long ns, uint16_t port,
				  const unsigned long long *inodes, unsigned n, bool *all_served,
				  struct unix_owner_query *out)
{
	struct unix_owner_query scratch, *q = out ? out : &scratch;
	struct unix_diag_req req = {
		.sdiag_family = AF_UNIX,
		.udiag_states = 1u << DIAG_STATE_LISTEN,
		.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID | UDIAG_SHOW_RQLEN,
	};

	*all_served = false;
	if (n > MAX_CANDIDATES)
		return NO_UID;
	memset(q, 0, sizeof(*q));
	q->name = q->name_buf;
	q->uid = NO_UID;
	q->n_sockets = n;
	for (unsigned i = 0; i < n; i++) {
		q->socket_len[i] = socket_name(ns, inodes[i], q->sockets[i], sizeof(q->sockets[i]));
		q->socket_uid[i] = NO_UID;
		if (q->socket_len[i] == 0)
			return NO_UID;
	}
	q->name_len = registry_name(ns, port, q->name_buf, sizeof(q->name_buf));
	if (q->name_len == 0 || diag_query(nl, &req, sizeof(req), true, unix_owner_visit, q) < 0)
		return NO_UID;
	*all_served = q->uid != NO_UID;
	for (unsigned i = 0; i < n; i++)
		*all_served = *all_served && q->socket_uid[i] == q->uid;
	return q->uid;
}

static uint32_t registry_owner(int nl, unsigned long long ns, uint16_t port)
{
	bool unused;

	return registry_owner_of(nl, ns, port, NULL, 0, &unused, NULL);
}

/* An address in 16 bytes: IPv4 as ::ffff:a.b.c.d. */
struct addr16 {
	uint8_t b[16];
};

static const uint8_t v4mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static bool addr16_is_v4(const struct addr16 *a)
{
	return memcmp(a->b, v4mapped_prefix, 12) == 0;
}

static bool addr16_is_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/*
 * Owners of the TCP listeners on `port` that can have accepted a connection
 * to `dst`: bound to dst itself or to a wildcard of a family that reaches it
 * (an IPv6 wildcard listener reaches IPv4 unless V6ONLY, which diag does not
 * say, so it counts).  Conservative: one owner differing spoils the answer.
 */
struct listener_query {
	struct addr16 dst;
	uint16_t port;
	uint32_t uid;    /* NO_UID until found; NO_UID again when owners differ */
	unsigned found;
	unsigned long long inodes[MAX_CANDIDATES]; /* the first MAX_CANDIDATES found */
	uint32_t cookies[MAX_CANDIDATES][2];       /* and their sock_diag cookies */
};

static void listener_visit(const struct nlmsghdr *nh, void *ctx)
{
	struct listener_query *q = ctx;
	const struct inet_diag_msg *m = NLMSG_DATA(nh);
	struct addr16 src;
	bool reaches;

	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*m)) || m->idiag_state != DIAG_STATE_LISTEN ||
	    ntohs(m->id.idiag_sport) != q->port)
		return;
	if (m->idiag_family == AF_INET) {
		memcpy(src.b, v4mapped_prefix, 12);
		memcpy(src.b + 12, m->id.idiag_src, 4);
		reaches = addr16_is_v4(&q->dst) &&
			  (addr16_is_zero(src.b + 12, 4) || memcmp(&src, &q->dst, 16) == 0);
	} else if (m->idiag_family == AF_INET6) {
		memcpy(src.b, m->id.idiag_src, 16);
		reaches = addr16_is_zero(src.b, 16) || memcmp(&src, &q->dst, 16) == 0;
	} else {
		return;
	}
	if (!reaches)
		return;
	if (q->found < MAX_CANDIDATES) {
		q->inodes[q->found] = m->idiag_inode;
		q->cookies[q->found][0] = m->id.idiag_cookie[0];
		q->cookies[q->found][1] = m->id.idiag_cookie[1];
	}
	if (q->found++ == 0)
		q->uid = m->idiag_uid;
	else if (q->uid != m->idiag_uid)
		q->uid = NO_UID;
}

/* The owner of the TCP listeners that can have accepted a connection to dst, and their inodes. */
static uint32_t listener_owner(int nl, const struct addr16 *dst, uint16_t port,
			       struct listener_query *out)
{
	struct listener_query q = { .dst = *dst, .port = port, .uid = NO_UID };
	static const uint8_t families[] = { AF_INET, AF_INET6 };

	for (size_t i = 0; i < sizeof(families); i++) {
		struct inet_diag_req_v2 req = {
			.sdiag_family = families[i],
			.sdiag_protocol = IPPROTO_TCP,
			.idiag_states = 1u << DIAG_STATE_LISTEN,
		};

		/* An IPv6 destination is never served by an IPv4 listener. */
		if (families[i] == AF_INET && !addr16_is_v4(dst))
			continue;
		if (diag_query(nl, &req, sizeof(req), true, listener_visit, &q) < 0)
			return NO_UID;
	}
	*out = q;
	return q.found ? q.uid : NO_UID;
}

/*
 * The owner of the server's end of our very connection, looked up by its
 * 4-tuple: the answer when no listener is left to ask (a server that accepts
 * once and closes its listener, as socat without fork does).  An accepted or not-yet-accepted child carries the
 * owner of the listener that made it.  Only a full socket counts: a request
 * socket (SYN_RECV) reports uid 0, and kernels before sk_uid-based diag
 * report 0 for a child still in the accept queue, so anything but a match
 * sends the caller on to the listener dump, never to a yes.
 */
struct conn_query {
	uint32_t uid;
};

static void conn_visit(const struct nlmsghdr *nh, void *ctx)
{
	struct conn_query *q = ctx;
	const struct inet_diag_msg *m = NLMSG_DATA(nh);

	if (nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*m)) && m->idiag_state != DIAG_STATE_SYN_RECV &&
	    m->idiag_state != DIAG_STATE_LISTEN)
		q->uid = m->idiag_uid;
}

static void diag_addr(uint32_t out[4], const struct sockaddr_storage *ss)
{
	memset(out, 0, 16);
	if (ss->ss_family == AF_INET)
		memcpy(out, &((const struct sockaddr_in *)(const void *)ss)->sin_addr, 4);
	else
		memcpy(out, &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr, 16);
}

static uint32_t server_end_owner(int nl, const struct sockaddr_storage *self,
				 const struct sockaddr_storage *peer)
{
	struct conn_query q = { .uid = NO_UID };
	struct inet_diag_req_v2 req = {
		.sdiag_family = (uint8_t)peer->ss_family,
		.sdiag_protocol = IPPROTO_TCP,
		.idiag_states = ~0u,
		.id = {
			.idiag_sport = htons(smcr_sockaddr_port(peer)),
			.idiag_dport = htons(smcr_sockaddr_port(self)),
			.idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE },
		},
	};

	diag_addr(req.id.idiag_src, peer);
	diag_addr(req.id.idiag_dst, self);
	if (diag_query(nl, &req, sizeof(req), false, conn_visit, &q) < 0)
		return NO_UID;
	return q.uid;
}

/* ---- user ids the kernel could not map ------------------------------------------------ */

/*
 * diag reports uids as seen from our user namespace; every uid not mapped
 * there reads as the overflow uid.  In a container two different outside
 * users could thus both read 65534 and look alike.  The overflow uid counts
 * only when it is a real, mapped uid of our namespace (as on the host).
 */
static uint32_t read_overflow_uid(void)
{
	FILE *f = fopen("/proc/sys/kernel/overflowuid", "re");
	unsigned v = 65534;

	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 65534;
		fclose(f);
	}
	return v;
}

static bool uid_is_mapped(uint32_t uid)
{
	FILE *f = fopen("/proc/self/uid_map", "re");
	unsigned long inside, outside, count;
	bool mapped = false;

	if (!f)
		return false;
	while (!mapped && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3)
		mapped = uid >= inside && uid - inside < count;
	fclose(f);
	return mapped;
}

bool smcr_registry_uid_is_distinct(uint32_t uid)
{
	/* 0 unknown, 1 ambiguous overflow uid, 2 real overflow uid. */
	static int overflow_state;
	static uint32_t overflow_uid;
	int st = __atomic_load_n(&overflow_state, __ATOMIC_ACQUIRE);

	if (uid == NO_UID)
		return false;
	if (st == 0) {
		uint32_t v = read_overflow_uid();

		__atomic_store_n(&overflow_uid, v, __ATOMIC_RELAXED);
		st = uid_is_mapped(v) ? 2 : 1;
		__atomic_store_n(&overflow_state, st, __ATOMIC_RELEASE);
	}
	return uid != __atomic_load_n(&overflow_uid, __ATOMIC_RELAXED) || st == 2;
}

/* ---- the registry ---------------------------------------------------------------------- */

static struct addr16 addr16_of(const struct sockaddr_storage *ss)
{
	struct addr16 a;

	if (ss->ss_family == AF_INET) {
		memcpy(a.b, v4mapped_prefix, 12);
		memcpy(a.b + 12, &((const struct sockaddr_in *)(const void *)ss)->sin_addr, 4);
	} else {
		memcpy(a.b, &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr, 16);
	}
	return a;
}

/*
 * The registry names carry our current netns; diag answers for it too.  A
 * socket made in another namespace (setns after socket()) is not ours to judge.
 */
static bool socket_in_our_netns(int fd, unsigned long long our_ns)
{
	struct stat st;
	int ns = smcr_libc.ioctl(fd, SIOCGSKNS);
	bool same;

	if (ns < 0) /* no SIOCGSKNS (old kernel, or no CAP in the netns's user ns) */
		return errno == ENOTTY || errno == EPERM;
	same = fstat(ns, &st) == 0 && (unsigned long long)st.st_ino == our_ns;
	smcr_sys_close(ns);
	return same;
}

/*
 * A socket of `type` bound to the abstract name `sa`, or -errno; a seqpacket
 * one listens with `backlog` (nobody connects: it is what diag reports).
 */
static int bind_abstract(const struct sockaddr_un *sa, socklen_t len, int type, int backlog)
{
	int fd, err;

	fd = smcr_sys_fd_high(smcr_libc.socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (fd < 0)
		return -errno;
	if (smcr_libc.bind(fd, (const struct sockaddr *)sa, len) == 0 &&
	    (type != SOCK_SEQPACKET || smcr_libc.listen(fd, backlog) == 0))
		return fd;
	err = -errno;
	smcr_sys_close(fd);
	return err;
}

static int bind_registry_name(unsigned long long ns, int type, uint16_t port)
{
	struct sockaddr_un sa;
	socklen_t len = registry_sockaddr(ns, port, &sa);

	return bind_abstract(&sa, len, type, SOCKET_NAME_SHARED);
}

/*
 * This TCP listener's own name (registry.h, socket_fd), if it has none yet.
 * Taken: by another process holding the same listener (fork, exec), which
 * serves it as well.
 */
static void claim_socket_name(unsigned long long ns, struct smcr_registration *r)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;

	if (r->socket_fd >= 0 || r->socket_ino == 0)
		return;
	n = socket_name(ns, r->socket_ino, sa.sun_path + 1, sizeof(sa.sun_path) - 1);
	if (n == 0)
		return;
	r->socket_fd = bind_abstract(&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n),
				     SOCK_SEQPACKET,
				     r->exclusive ? SOCKET_NAME_EXCLUSIVE : SOCKET_NAME_SHARED);
	if (r->socket_fd < 0)
		r->socket_fd = -1;
}

/*
 * No other TCP listener can share this one's connections: without
 * SO_REUSEPORT on it the kernel refuses any other listener on an address
 * overlapping its own (a wildcard included) for that port, whoever asks, as
 * long as it is bound to no device (a listener bound to another device may
 * share the address).  Anything unknown counts as shared.
 */
static bool listener_is_exclusive(int listen_fd)
{
	int reuseport = 1, ifindex = 1;
	socklen_t len = sizeof(reuseport), ilen = sizeof(ifindex);

	return smcr_libc.getsockopt(listen_fd, SOL_SOCKET, SO_REUSEPORT, &reuseport, &len) == 0 &&
	       reuseport == 0 &&
	       smcr_libc.getsockopt(listen_fd, SOL_SOCKET, SO_BINDTOIFINDEX, &ifindex, &ilen) == 0 &&
	       ifindex == 0;
}

/* The port's name is held by the listener's own user (a sibling), else warned: squatted. */
static bool port_name_held_by_sibling(int listen_fd, uint16_t port)
{
	struct stat st;
	uint32_t holder;
	int nl = diag_socket();

	holder = nl >= 0 ? registry_owner(nl, netns_inode(), port) : NO_UID;
	if (nl >= 0)
		smcr_sys_close(nl);
	if (fstat(listen_fd, &st) == 0 && holder == (uint32_t)st.st_uid)
		return true;
	smcr_warn("port %u: the smcr registry name is held by %s %u, not by this "
			  "listener's owner (uid %u); local clients will use TCP with it",
			  (unsigned)port, holder == NO_UID ? "unknown owner" : "uid",
			  holder == NO_UID ? 0u : (unsigned)holder, (unsigned)st.st_uid);
	return false;
}

int smcr_registry_add(int listen_fd, uint16_t port, struct smcr_registration *out)
{
	int rc;

	struct stat st;

	out->dir = NULL;
	out->socket_fd = -1;
	out->sibling_holds_port = false;
	out->socket_ino = fstat(listen_fd, &st) == 0 ? (unsigned long long)st.st_ino : 0;
	out->exclusive = listener_is_exclusive(listen_fd);
	rc = smcr_registry_claim(port, out);

	/* Taken: by our own user (prefork, SO_REUSEPORT) or squatted by another. */
	if (rc == -EADDRINUSE)
		out->sibling_holds_port = port_name_held_by_sibling(listen_fd, port);
	if (rc == 0 || rc == -EADDRINUSE) {
		/* An SO_REUSEPORT sibling names itself even where another holds the port's name. */
		claim_socket_name(netns_inode(), out);
		out->dir = smcr_rundir_register(listen_fd, port);
	}
	return rc;
}

int smcr_registry_claim(uint16_t port, struct smcr_registration *out)
{
	unsigned long long ns;
	int fd;

	out->owner_fd = out->probe_fd = -1;
	ns = netns_inode();
	/* Listening makes the name visible to the LISTEN-only diag dump; nobody connects. */
	fd = bind_registry_name(ns, SOCK_SEQPACKET, port);
	if (fd < 0)
		return fd;
	out->owner_fd = fd;
	/*
	 * The probe name only answers "is anybody registered?" cheaply.  If it is
	 * taken by someone else, it exists anyway, which is all a probe says;
	 * if it could not be made, clients would not look further, so the
	 * registration is not made either (the caller may try again).
	 */
	fd = bind_registry_name(ns, SOCK_DGRAM, port);
	if (fd < 0 && fd != -EADDRINUSE) {
		smcr_sys_close(out->owner_fd);
		out->owner_fd = -1;
		return fd;
	}
	out->probe_fd = fd >= 0 ? fd : -1;
	claim_socket_name(ns, out);
	return 0;
}

void smcr_registry_share(struct smcr_registration *r)
{
	int saved = errno;

	if (r->exclusive && r->socket_fd >= 0)
		smcr_libc.listen(r->socket_fd, SOCKET_NAME_SHARED);
	r->exclusive = false;
	errno = saved;
}

void smcr_registry_revoke(const struct smcr_registration *r)
{
	int saved = errno;

	if (r->owner_fd >= 0)
		smcr_libc.shutdown(r->owner_fd, SHUT_RDWR);
	if (r->socket_fd >= 0)
		smcr_libc.shutdown(r->socket_fd, SHUT_RDWR);
	smcr_rundir_revoke(r->dir);
	errno = saved;
}

void smcr_registry_remove(struct smcr_registration *r)
{
	if (r->owner_fd >= 0)
		smcr_sys_close(r->owner_fd);
	if (r->probe_fd >= 0)
		smcr_sys_close(r->probe_fd);
	if (r->socket_fd >= 0)
		smcr_sys_close(r->socket_fd);
	r->owner_fd = r->probe_fd = r->socket_fd = -1;
	smcr_rundir_remove(r->dir);
	r->dir = NULL;
}

/*
 * Nobody bound the probe name: not registered, decided with one connect()
 * instead of a diag dump (the usual answer for plain local servers).
 */
static bool probe_name_exists(unsigned long long ns, uint16_t port)
{
	struct sockaddr_un sa;
	socklen_t len = registry_sockaddr(ns, port, &sa);
	bool found;
	int fd;

	fd = smcr_libc.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true; /* cannot tell: let the full check decide */
	found = smcr_libc.connect(fd, (struct sockaddr *)&sa, len) == 0 || errno != ECONNREFUSED;
	smcr_sys_close(fd);
	return found;
}

/*
 * Ports found registered at their last lookup: their next lookup skips the
 * probe, which only ever saves work for plain servers (three system calls
 * more for a registered one).  A stale bit costs a diag dump, nothing else:
 * the dump decides either way.
 */
static _Atomic uint64_t seen_registered[65536 / 64];

static bool seen_get(uint16_t port)
{
	return (atomic_load_explicit(&seen_registered[port / 64], memory_order_relaxed) >>
		(port % 64)) & 1;
}

static void seen_set(uint16_t port, bool on)
{
	uint64_t bit = (uint64_t)1 << (port % 64);

	if (on)
		atomic_fetch_or_explicit(&seen_registered[port / 64], bit, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&seen_registered[port / 64], ~bit, memory_order_relaxed);
}

/*
 * Known listeners.  The full check above walks the kernel's listening TCP
 * hash twice (every bucket, for IPv4 and IPv6) and every unix socket once,
 * for every connection.  A verdict "yes" about a listener that is exclusive
 * (its socket name says so: no SO_REUSEPORT, no bound device, so the kernel
 * lets no other listener take its connections) and alone in reaching the
 * destination is kept, with the kernel's identities (inode and cookie) of the
 * TCP listener and of its two names.  The next connection to that
 * destination asks instead for the listener the kernel picks for it, by an
 * exact lookup that must answer with that very socket (its cookie), still
 * listening, owned by the same user; and dumps the listening unix sockets
 * once, where both names must still be those very sockets, of that user,
 * unrevoked, and the socket name must still say exclusive.  A cookie is never
 * reused, so neither a listener closed and another opened on the port nor a
 * name bound again can pass; anything unexpected drops the entry and the full
 * check decides.
 */
#define KNOWN_LISTENERS 16

struct known_listener {
	unsigned long long ns;
	struct addr16 dst;
	uint16_t port; /* 0: unused */
	uint32_t uid;
	unsigned long long tcp_ino;
	uint32_t tcp_cookie[2];
	struct unix_id reg;  /* the port's name */
	struct unix_id sock; /* the listener's socket name */
};

static struct known_listener known[KNOWN_LISTENERS];
static unsigned known_next;
/* Taken with trylock only: a busy table (or a fork in the middle) costs the full check. */
static atomic_flag known_busy = ATOMIC_FLAG_INIT;

static int known_find(unsigned long long ns, const struct addr16 *dst, uint16_t port)
{
	for (int i = 0; i < KNOWN_LISTENERS; i++)
		if (known[i].port == port && known[i].ns == ns &&
		    memcmp(&known[i].dst, dst, sizeof(*dst)) == 0)
			return i;
	return -1;
}

static bool known_get(unsigned long long ns, const struct addr16 *dst, uint16_t port,
		      struct known_listener *out)
{
	int i;

	if (atomic_flag_test_and_set_explicit(&known_busy, memory_order_acquire))
		return false;
	i = known_find(ns, dst, port);
	if (i >= 0)
		*out = known[i];
	atomic_flag_clear_explicit(&known_busy, memory_order_release);
	return i >= 0;
}

/* Keep `k` (k->port != 0), or forget the entry for its destination (k->port == 0 and `port`). */
static void known_put(unsigned long long ns, const struct addr16 *dst, uint16_t port,
		      const struct known_listener *k)
{
	int i;

	if (atomic_flag_test_and_set_explicit(&known_busy, memory_order_acquire))
		return;
	i = known_find(ns, dst, port);
	if (k) {
		if (i < 0)
			i = (int)(known_next++ % KNOWN_LISTENERS);
		known[i] = *k;
	} else if (i >= 0) {
		known[i].port = 0;
	}
	atomic_flag_clear_explicit(&known_busy, memory_order_release);
}

struct exact_inet {
	uint32_t cookie[2];
	uint32_t uid;
	bool listening;
};

static void exact_inet_visit(const struct nlmsghdr *nh, void *ctx)
{
	struct exact_inet *x = ctx;
	const struct inet_diag_msg *m = NLMSG_DATA(nh);

	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return;
	x->cookie[0] = m->id.idiag_cookie[0];
	x->cookie[1] = m->id.idiag_cookie[1];
	x->uid = m->idiag_uid;
	x->listening = m->idiag_state == DIAG_STATE_LISTEN;
}

/* The listener the kernel picks for a connection to dst:port is still k's. */
static bool known_tcp_listener_holds(int nl, const struct known_listener *k)
{
	bool v4 = addr16_is_v4(&k->dst);
	struct exact_inet x = { .uid = NO_UID };
	struct inet_diag_req_v2 req = {
		.sdiag_family = v4 ? AF_INET : AF_INET6,
		.sdiag_protocol = IPPROTO_TCP,
		.idiag_states = 1u << DIAG_STATE_LISTEN,
		.id = {
			.idiag_sport = htons(k->port),
			.idiag_cookie = { k->tcp_cookie[0], k->tcp_cookie[1] },
		},
	};

	/* No remote port: no established socket matches, the kernel's listener lookup answers. */
	memcpy(req.id.idiag_src, v4 ? k->dst.b + 12 : k->dst.b, v4 ? 4 : 16);
	return diag_query(nl, &req, sizeof(req), false, exact_inet_visit, &x) == 0 &&
	       x.listening && x.uid == k->uid && x.cookie[0] == k->tcp_cookie[0] &&
	       x.cookie[1] == k->tcp_cookie[1];
}

static bool same_unix_id(const struct unix_id *a, const struct unix_id *b)
{
	return a->ino == b->ino && a->cookie[0] == b->cookie[0] && a->cookie[1] == b->cookie[1];
}

static bool known_listener_holds(int nl, const struct known_listener *k)
{
	struct unix_owner_query names;
	bool all_served;

	/*
	 * One dump of the listening unix sockets answers for both names: the
	 * kernel walks every unix socket for an exact lookup too, so two of
	 * those would cost twice.
	 */
	return known_tcp_listener_holds(nl, k) &&
	       registry_owner_of(nl, k->ns, k->port, &k->tcp_ino, 1, &all_served, &names) ==
		       k->uid &&
	       all_served && same_unix_id(&names.id, &k->reg) &&
	       same_unix_id(&names.socket_id[0], &k->sock) && names.socket_exclusive[0];
}

bool smcr_registry_vouches(int tcp_fd, const struct sockaddr_storage *peer)
{
	uint16_t port = smcr_sockaddr_port(peer);
	struct addr16 dst = addr16_of(peer);
	struct listener_query found;
	struct unix_owner_query names;
	struct known_listener k;
	struct sockaddr_storage self;
	socklen_t self_len = sizeof(self);
	uint32_t registrant, listener;
	unsigned long long ns;
	bool all_served;
	int nl;

	ns = netns_inode();
	if (!seen_get(port) && !probe_name_exists(ns, port))
		return false;
	if (!socket_in_our_netns(tcp_fd, ns))
		return false;
	nl = diag_socket();
	if (nl < 0)
		return false;
	if (known_get(ns, &dst, port, &k)) {
		if (known_listener_holds(nl, &k)) {
			smcr_sys_close(nl);
			return true;
		}
		known_put(ns, &dst, port, NULL);
	}
	/*
	 * Which listener took the connection is not knowable (SO_REUSEPORT
	 * spreads them), so every one that can have taken it must be served.
	 */
	listener = listener_owner(nl, &dst, port, &found);
	registrant = registry_owner_of(nl, ns, port, found.inodes,
				       found.found < MAX_CANDIDATES ? found.found : MAX_CANDIDATES,
				       &all_served, &names);
	if (found.found == 0 && registrant != NO_UID &&
	    smcr_libc.getsockname(tcp_fd, (struct sockaddr *)&self, &self_len) == 0 &&
	    self.ss_family == peer->ss_family)
		/*
		 * The listener that took the connection has closed since (socat
		 * without fork): its registration and the accepted socket's owner
		 * decide.  A plain sibling that took it and closed its listener
		 * at once is not told apart.
		 */
		listener = server_end_owner(nl, &self, peer);
	smcr_sys_close(nl);
	seen_set(port, registrant != NO_UID);
	if (registrant == NO_UID)
		return false; /* not registered (the common case for plain servers) */
	if (listener != registrant || !smcr_registry_uid_is_distinct(listener)) {
		smcr_info("port %u: registry entry of uid %d does not match the TCP listener's "
			  "owner (uid %d): not proposing SMC",
			  (unsigned)port, (int)registrant, listener == NO_UID ? -1 : (int)listener);
		return false;
	}
	if (!all_served || found.found > MAX_CANDIDATES) {
		smcr_info("port %u: of the %u TCP listeners that can have taken the connection, "
			  "not every one is served by smcr (SO_REUSEPORT, another address): not "
			  "proposing SMC",
			  (unsigned)port, found.found);
		return false;
	}
	if (found.found == 1 && names.socket_exclusive[0]) {
		k = (struct known_listener){
			.ns = ns, .dst = dst, .port = port, .uid = listener,
			.tcp_ino = found.inodes[0],
			.tcp_cookie = { found.cookies[0][0], found.cookies[0][1] },
			.reg = names.id, .sock = names.socket_id[0],
		};
		known_put(ns, &dst, port, &k);
	}
	return true;
}
