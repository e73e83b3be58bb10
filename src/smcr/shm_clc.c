// SPDX-License-Identifier: MIT
/*
 * The CLC hooks (design §7, who may attach): the client sends a 128-bit
 * secret Sc inside its CLC Proposal (SMC-Dv2 ISM GID fields), the server
 * answers with its own Ss in the Accept; each then proves itself with it
 * over a rendezvous socket (shm_rv.c).  Two orders, because the one wake-up
 * fewer matters for short connections:
 *
 *   knocked (the client offers it, a server that knows it takes it): the
 *   client binds its own rendezvous before the Proposal and names it in a
 *   second ISM GID entry.  The server connects to it, checks with
 *   SO_PEERCRED that its creator is the pid the Proposal announced, leaves
 *   Ss and its memfd there, then sends the Accept with DMBE index 1.  The
 *   client takes the knock that carries the Accept's Ss (strangers may have
 *   knocked too: the name is visible in /proc/net/unix), answers on it with
 *   Sc and its memfd, and sends the Confirm; the server checks Sc.  Nobody
 *   waits on the UNIX socket: Proposal, Accept, Confirm is the whole chain.
 *
 *   classic (any client): the server binds a rendezvous named after the
 *   token in the Accept (DMB token field) *before* sending it, so the name
 *   cannot be squatted.  The client connects and presents Sc and its memfd;
 *   the server checks Sc and SO_PEERCRED's pid against the Proposal, then
 *   answers with Ss and its memfd: two more wake-ups.
 */
#include "smcr/shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/clc.h"
#include "smcr/libc.h"
#include "smcr/sys.h"
#include "smcr/wire.h"

#define SHM_CHID 0xFFFFu /* emulated-ISM CHID, as loopback-ism uses */
/*
 * Accept's DMBE index (an ISM DMB element number, 0 in the classic order):
 * "I connected to the rendezvous your Proposal named, and my proof is waiting
 * there" (see smcr_shm_client_propose).
 */
#define SHM_DMBE_IDX_SERVER_KNOCKED 1

/* The UEID both ends put in their CLC messages: identifies this transport. */
static const char shm_ueid[SMCR_CLC_EID_LEN + 1] = "SMCR-USERSPACE-SAMEHOST-SHM     ";

static void put_secret(const uint8_t s[SHM_SECRET_LEN], uint64_t *hi, uint64_t *lo)
{
	*hi = smcr_get_be64(s);
	*lo = smcr_get_be64(s + 8);
}

static void get_secret(uint8_t s[SHM_SECRET_LEN], uint64_t hi, uint64_t lo)
{
	smcr_put_be64(s, hi);
	smcr_put_be64(s + 8, lo);
}

static void fill_common(struct smcr_clc_msg *m, uint8_t type)
{
	m->hdr.type = type;
	m->hdr.version = SMCR_CLC_V2;
}

int smcr_shm_client_propose(struct smcr_xconn *xc, struct smcr_clc_msg *prop)
{
	struct smcr_clc_proposal *p = &prop->proposal;
	uint64_t hi, lo;

	fill_common(prop, SMCR_CLC_PROPOSAL);
	prop->hdr.typev1 = SMCR_CLC_PATH_NONE;
	prop->hdr.typev2 = SMCR_CLC_PATH_D;
	/* Peer ID: our pid (checked against SO_PEERCRED), then random instance bytes. */
	smcr_put_be32(p->peer_id, (uint32_t)getpid());
	memcpy(p->peer_id + 4, xc->own_secret + 12, 4);
	put_secret(xc->own_secret, &hi, &lo);
	p->smcd_area = true;
	p->ism_gid = hi;
	p->ism_chid = SHM_CHID;
	p->release = 1;
	p->eid_cnt = 1;
	memcpy(p->eid[0], shm_ueid, SMCR_CLC_EID_LEN);
	p->ism_gid_cnt = 1;
	p->ism_gids[0].gid = lo;
	p->ism_gids[0].chid = SHM_CHID;
	/*
	 * Our own rendezvous, named in a second GID entry: a server that knows
	 * this order knocks on it and leaves its proof there before it sends the
	 * Accept, and ours follows just before the Confirm.  That saves the two
	 * wake-ups of the classic order (we knock, the server answers), a good
	 * part of a short connection's setup.  Without it (bind failed, older
	 * server) the classic order still works.
	 */
	xc->rv_since_ns = smcr_shm_boottime_ns();
	if (smcr_shm_rv_listen(xc, &xc->rv_token) == 0) {
		p->ism_gid_cnt = 2;
		p->ism_gids[1].gid = xc->rv_token;
		p->ism_gids[1].chid = SHM_CHID;
	}
	return 0;
}

static bool offers_rendezvous(const struct smcr_clc_proposal *p)
{
	return p->ism_gid_cnt >= 2 && p->ism_gids[1].chid == SHM_CHID;
}

bool smcr_shm_offer_is_ours(const struct smcr_clc_msg *prop)
{
	const struct smcr_clc_proposal *p = &prop->proposal;

	return prop->hdr.version >= SMCR_CLC_V2 &&
	       (prop->hdr.typev2 == SMCR_CLC_PATH_D || prop->hdr.typev2 == SMCR_CLC_PATH_BOTH) &&
	       p->eid_cnt >= 1 && memcmp(p->eid[0], shm_ueid, SMCR_CLC_EID_LEN) == 0 &&
	       p->ism_chid == SHM_CHID && p->ism_gid_cnt >= 1 &&
	       p->ism_gids[0].chid == SHM_CHID;
}

/*
 * Accept and Confirm carry the same SMC-Dv2 fields about the sender: its
 * secret in the ISM GID fields, the connection's token, its ring's size class.
 */
static void fill_own_dmb(const struct smcr_xconn *xc, struct smcr_clc_msg *m, uint8_t type)
{
	struct smcr_clc_accept *a = &m->accept;
	uint64_t hi, lo;

	fill_common(m, type);
	m->hdr.typev1 = SMCR_CLC_PATH_D;
	put_secret(xc->own_secret, &hi, &lo);
	a->ism_gid = hi;
	a->gid_ext = lo;
	a->ism_chid = SHM_CHID;
	a->dmb_token = xc->token;
	a->dmbe_idx = 0;
	/* Our ring may not exist yet: it is taken only when we know who gets it. */
	a->dmbe_size = (uint8_t)smcr_shm_size_class(xc->want_size);
	memcpy(a->eid, shm_ueid, SMCR_CLC_EID_LEN);
}

/*
 * In the knocked order the client commits to SMC as soon as it has our proof:
 * it sends its own and then its Confirm, and waits for nothing more.  So
 * nothing we still need after our proof goes out may fail for want of a
 * resource: the readiness fd is made now, and a free fd slot is kept for
 * the memfd the client's proof carries (with none free, the kernel drops it
 * from the message and the connection would be lost, not fall back).  Near
 * RLIMIT_NOFILE this turns a lost connection into a plain TCP one.
 */
static int knocked_ready(struct smcr_xconn *xc, int sock)
{
	xc->unix_fd = sock;
	if (smcr_shm_make_ready_fd(xc) < 0)
		return -1;
	xc->spare_fd = smcr_sys_fd_high(smcr_libc.fcntl(xc->own_efd, F_DUPFD_CLOEXEC, 0));
	return xc->spare_fd < 0 ? -1 : 0;
}

/* Undoes knocked_ready(): the socket stays the caller's. */
static void knocked_unready(struct smcr_xconn *xc)
{
	smcr_sys_close(xc->spare_fd);
	smcr_sys_close(xc->ep_fd);
	xc->spare_fd = xc->ep_fd = xc->unix_fd = -1;
}

/*
 * Knock on the rendezvous the Proposal named and leave our proof and memfd
 * there: 0, or -1 (then the classic order).  They go only to the proposer:
 * the listener's creator must be the pid the Proposal announced (a name
 * squatted by another process fails that), and the client uses them only
 * after it checked our secret against the Accept.  Non-blocking connect: a
 * backlog a stranger filled must not stall us.
 *
 * The client's own proof comes later on this socket; until then we know
 * only a pid that may have changed hands since the listener was made.  So
 * a ring that was shared before goes out here only if the process we
 * proved under that pid still lives (then nobody else can have it), and
 * the ring is kept afterwards only if the client's proof shows that same
 * process (smcr_shm_region_put).
 */
static int server_knock(struct smcr_xconn *xc, uint64_t name)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct shm_peer *known;
	int sock, rc;

	xc->rv_since_ns = smcr_shm_boottime_ns();
	sock = smcr_sys_fd_high(
		smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (sock < 0)
		return -1;
	if (smcr_shm_rv_passcred(sock) < 0 || smcr_shm_rv_connect(xc, sock, name) < 0 ||
	    smcr_libc.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
		goto classic;
	if (!smcr_shm_cred_is_proposer(&cred, xc->peer_pid)) {
		smcr_warn("rendezvous: offered by pid %d uid %u, not the proposer %d", (int)cred.pid,
			  (unsigned)cred.uid, (int)xc->peer_pid);
		goto classic;
	}
	known = smcr_shm_peer_known_alive(cred.pid, cred.uid);
	rc = smcr_shm_own_region(xc, known);
	smcr_shm_peer_unref(known);
	if (rc || knocked_ready(xc, sock) < 0 ||
	    smcr_shm_send_proof(sock, xc->own_secret, xc->own->ring_size, xc->own->fd) < 0)
		goto classic;
	return 0;
classic:
	knocked_unready(xc);
	smcr_sys_close(sock);
	return -1;
}

int smcr_shm_server_accept(struct smcr_xconn *xc, const struct smcr_clc_msg *prop,
			   struct smcr_clc_msg *acc)
{
	const struct smcr_clc_proposal *p = &prop->proposal;
	int rc;

	if (!smcr_shm_offer_is_ours(prop))
		return SMCR_CLC_DECL_NOSMCD2DEV;
	get_secret(xc->peer_secret, p->ism_gid, p->ism_gids[0].gid);
	xc->peer_pid = (pid_t)smcr_get_be32(p->peer_id);
	if (xc->peer_pid <= 0)
		return SMCR_CLC_DECL_CNFERR;
	if (offers_rendezvous(p) && smcr_sys_random(&xc->token, sizeof(xc->token)) == 0 &&
	    server_knock(xc, p->ism_gids[1].gid) == 0) {
		fill_own_dmb(xc, acc, SMCR_CLC_ACCEPT);
		acc->accept.dmbe_idx = SHM_DMBE_IDX_SERVER_KNOCKED;
		return 0;
	}
	/* Classic order: our rendezvous, named by the token; the client knocks. */
	xc->rv_since_ns = smcr_shm_boottime_ns();
	rc = smcr_shm_rv_listen(xc, &xc->token);
	if (rc < 0)
		return smcr_shm_shortage_reason(-rc);
	fill_own_dmb(xc, acc, SMCR_CLC_ACCEPT);
	return 0;
}

static bool accept_is_ours(const struct smcr_clc_msg *m)
{
	return m->hdr.version >= SMCR_CLC_V2 && m->hdr.typev1 == SMCR_CLC_PATH_D &&
	       m->accept.ism_chid == SHM_CHID &&
	       memcmp(m->accept.eid, shm_ueid, SMCR_CLC_EID_LEN) == 0 &&
	       m->accept.dmbe_size <= SHM_MAX_CLASS;
}

/* Check the server's proof (its secret from the Accept, the ring it named) and map its ring. */
static int client_take_proof(struct smcr_xconn *xc, int sock, int64_t deadline, uint32_t size)
{
	int rc = smcr_shm_take_proof(xc, sock, deadline, size);

	if (rc == -EMFILE)
		return smcr_shm_shortage_reason(-rc);
	if (rc < 0)
		return rc == -ETIMEDOUT ? SMCR_CLC_DECL_TIMEOUT_AL : SMCR_CLC_DECL_PEERDECL;
	return rc;
}

/*
 * Our ring (see smcr_shm_own_region for `to`), and our proof with its memfd
 * on unix_fd.
 */
static int client_give_proof(struct smcr_xconn *xc, struct shm_peer *to)
{
	int rc = smcr_shm_own_region(xc, to);

	if (rc)
		return rc;
	rc = smcr_shm_send_proof(xc->unix_fd, xc->own_secret, xc->own->ring_size, xc->own->fd);
	/* A server that hung up its end has given the handshake up (its CLC bound passed). */
	if (rc == -EPIPE || rc == -ECONNRESET)
		return SMCR_CLC_DECL_PEERDECL;
	return rc < 0 ? smcr_shm_shortage_reason(-rc) : 0;
}

/*
 * Classic order: knock on the server's rendezvous, prove ourselves, take its
 * answer.  Never blocks on the server: a rendezvous that does not take our
 * knock at once (its backlog full: it does not accept) is given up, and its
 * answer is awaited only until the CLC wait bound; either way TCP it is
 * (TIMEOUT_AL in the stats).  Our ring goes out before the server's proof
 * comes, as in server_knock: one that was shared before only to the process
 * we proved under the listener's pid, if it still lives.
 */
static int client_knock(struct smcr_xconn *xc, uint64_t name, uint32_t size)
{
	int64_t deadline = smcr_sys_deadline(xc->timeout_ms);
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct shm_peer *known;
	int rc;

	xc->rv_since_ns = smcr_shm_boottime_ns();
	xc->unix_fd = smcr_sys_fd_high(
		smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (xc->unix_fd < 0 || smcr_shm_rv_passcred(xc->unix_fd) < 0)
		return smcr_shm_shortage_reason(errno);
	if (smcr_shm_rv_connect(xc, xc->unix_fd, name) < 0) {
		if (errno == EAGAIN) {
			smcr_warn("rendezvous: the server's does not accept: TCP");
			return SMCR_CLC_DECL_TIMEOUT_AL;
		}
		return SMCR_CLC_DECL_NOSMCD2DEV;
	}
	if (smcr_libc.getsockopt(xc->unix_fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
		return SMCR_CLC_DECL_INTERR;
	xc->peer_pid = cred.pid;
	known = smcr_shm_peer_known_alive(cred.pid, cred.uid);
	rc = client_give_proof(xc, known);
	smcr_shm_peer_unref(known);
	if (rc)
		return rc;
	/* The server answers only once it has committed to this connection. */
	return client_take_proof(xc, xc->unix_fd, deadline, size);
}

/*
 * The server knocked on our rendezvous before it sent the Accept, so its
 * proof is queued there already (nothing to wait for).  A stranger may have
 * knocked too (the name is visible in /proc/net/unix): each knock must carry
 * the server's secret; only then do our proof and fds go back on it.
 */
static int client_take_knock(struct smcr_xconn *xc, uint32_t size)
{
	int rc = SMCR_CLC_DECL_CNFERR;

	for (int attempt = 0; xc->rv_fd >= 0 && attempt < SHM_ACCEPT_ATTEMPTS; attempt++) {
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		int sock = smcr_libc.accept4(xc->rv_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (sock < 0) {
			/* nobody (else) knocked: the Accept was wrong; or no fd for the knock */
			if (smcr_shm_shortage_reason(errno) == SMCR_CLC_DECL_MEM)
				rc = SMCR_CLC_DECL_MEM;
			break;
		}
		sock = smcr_sys_fd_high(sock);
		if (sock < 0) {
			/* no room to keep it: the knock is lost, the shortage ours */
			rc = smcr_shm_shortage_reason(errno);
			break;
		}
		if (smcr_libc.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
			smcr_sys_close(sock);
			continue;
		}
		rc = client_take_proof(xc, sock, smcr_now_ms(), size);
		if (rc == 0) {
			xc->unix_fd = sock;
			xc->peer_pid = cred.pid;
			break;
		}
		smcr_sys_close(sock);
		if (rc == SMCR_CLC_DECL_MEM)
			break; /* the server's proof, its memfd dropped for want of an fd */
		rc = SMCR_CLC_DECL_CNFERR;
	}
	if (rc)
		return rc;
	/* The server's proof came first: our ring goes to the process it proved. */
	return client_give_proof(xc, xc->peer);
}

int smcr_shm_client_attach(struct smcr_xconn *xc, const struct smcr_clc_msg *acc,
			   struct smcr_clc_msg *conf, uint32_t *peer_ring_size)
{
	uint32_t size;
	int rc;

	if (!accept_is_ours(acc))
		return SMCR_CLC_DECL_MODEUNSUPP;
	get_secret(xc->peer_secret, acc->accept.ism_gid, acc->accept.gid_ext);
	xc->token = acc->accept.dmb_token;
	size = smcr_clc_rmbe_size(acc->accept.dmbe_size);
	if (acc->accept.dmbe_idx == SHM_DMBE_IDX_SERVER_KNOCKED)
		rc = client_take_knock(xc, size);
	else
		rc = client_knock(xc, acc->accept.dmb_token, size);
	/* Our rendezvous is needed no longer (or never was): nobody else may knock. */
	smcr_shm_rv_close(xc);
	if (rc)
		return rc;
	rc = smcr_shm_make_ready_fd(xc);
	if (rc)
		return smcr_shm_shortage_reason(-rc);

	fill_own_dmb(xc, conf, SMCR_CLC_CONFIRM);
	*peer_ring_size = size;
	return 0;
}

/* One knock on the rendezvous socket: 0 attached, > 0 stranger or bad proof. */
static int server_try_one(struct smcr_xconn *xc, int sock, int64_t deadline)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int rc;

	if (smcr_libc.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
	    !smcr_shm_cred_is_proposer(&cred, xc->peer_pid)) {
		smcr_warn("rendezvous: pid %d uid %u is not the proposer %d", (int)cred.pid,
			  (unsigned)cred.uid, (int)xc->peer_pid);
		return SMCR_CLC_DECL_CNFERR;
	}
	rc = smcr_shm_take_proof(xc, sock, deadline, 0);
	if (rc == -EMFILE)
		return smcr_shm_shortage_reason(-rc);
	if (rc)
		return rc < 0 ? SMCR_CLC_DECL_CNFERR : rc;
	/* Everything that can fail comes before the answer: the answer commits us. */
	xc->unix_fd = sock;
	rc = smcr_shm_own_region(xc, xc->peer);
	if (!rc)
		rc = smcr_shm_make_ready_fd(xc);
	if (!rc)
		rc = smcr_shm_send_proof(sock, xc->own_secret, xc->own->ring_size, xc->own->fd);
	if (rc) {
		xc->unix_fd = -1;
		return rc > 0 ? rc : smcr_shm_shortage_reason(-rc);
	}
	return 0;
}

/*
 * Nothing here waits: the engine calls again when the socket we wait on
 * (smcr_shm_server_wait_fd) or the client's TCP stream turns readable, and
 * gives up at its own deadline.
 */

/* A proof queued on `sock` now?  1 yes, 0 not yet, -1 the other end hung up without one. */
static int proof_queued(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };

	if (smcr_libc.poll(&p, 1, 0) <= 0)
		return 0;
	return (p.revents & POLLIN) ? 1 : -1;
}

/*
 * We knocked (server_knock): the client's proof comes back on that socket,
 * sent just before its Confirm, so it is there by the time the Confirm is.
 */
static int server_take_proof(struct smcr_xconn *xc)
{
	int rc = proof_queued(xc->unix_fd);

	if (rc == 0)
		return -EAGAIN;
	if (rc < 0) /* it hung up: declined, most likely (its Decline follows) */
		return SMCR_CLC_DECL_PEERDECL;
	/* The slot knocked_ready() kept is for the memfd that comes now. */
	smcr_sys_close(xc->spare_fd);
	xc->spare_fd = -1;
	rc = smcr_shm_take_proof(xc, xc->unix_fd, smcr_now_ms(), 0);
	if (rc == -EMFILE)
		return smcr_shm_shortage_reason(-rc);
	return rc < 0 ? SMCR_CLC_DECL_CNFERR : rc;
}

/*
 * Classic order: the client knocks on our rendezvous and presents its proof
 * there.  A knock is taken as soon as it comes (strangers may knock too: up
 * to SHM_ACCEPT_ATTEMPTS of them), its proof whenever it follows.
 */
static int server_take_knock(struct smcr_xconn *xc)
{
	int rc;

	while (xc->knock_fd < 0) {
		int sock;

		if (xc->knocks >= SHM_ACCEPT_ATTEMPTS)
			return SMCR_CLC_DECL_CNFERR;
		sock = smcr_libc.accept4(xc->rv_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (sock < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
				       ? -EAGAIN : smcr_shm_shortage_reason(errno);
		xc->knocks++;
		/* no room above the program's numbers: the knock is lost, the shortage ours */
		xc->knock_fd = smcr_sys_fd_high(sock);
		if (xc->knock_fd < 0)
			return smcr_shm_shortage_reason(errno);
	}
	rc = proof_queued(xc->knock_fd);
	if (rc == 0)
		return -EAGAIN;
	rc = rc < 0 ? SMCR_CLC_DECL_CNFERR : server_try_one(xc, xc->knock_fd, smcr_now_ms());
	if (rc == 0) {
		xc->knock_fd = -1; /* unix_fd now */
		return 0;
	}
	smcr_sys_close(xc->knock_fd);
	xc->knock_fd = -1;
	/*
	 * Attached but could not answer, or the proposer's proof (its
	 * credentials were checked first) could not be taken for want of an
	 * fd: give up, with our own reason.
	 */
	if (xc->peer_base || rc == SMCR_CLC_DECL_MEM)
		return rc;
	return -EAGAIN; /* a stranger's: wait for the next knock */
}

int smcr_shm_server_attach(struct smcr_xconn *xc, int tcp_fd, uint32_t *peer_ring_size)
{
	int rc;

	(void)tcp_fd; /* the engine watches it */
	rc = xc->rv_fd < 0 ? server_take_proof(xc) : server_take_knock(xc);
	if (rc == -EAGAIN)
		return rc;
	/* The name is needed no longer: nobody else may knock. */
	smcr_shm_rv_close(xc);
	if (rc)
		return rc;
	*peer_ring_size = xc->peer_ring_size;
	return 0;
}

int smcr_shm_server_wait_fd(const struct smcr_xconn *xc)
{
	if (xc->rv_fd < 0)
		return xc->unix_fd;
	return xc->knock_fd >= 0 ? xc->knock_fd : xc->rv_fd;
}

int smcr_shm_server_confirm(struct smcr_xconn *xc, const struct smcr_clc_msg *conf)
{
	uint8_t s[SHM_SECRET_LEN];

	if (!accept_is_ours(conf))
		return SMCR_CLC_DECL_MODEUNSUPP;
	get_secret(s, conf->accept.ism_gid, conf->accept.gid_ext);
	if (!smcr_shm_secret_equal(s, xc->peer_secret) ||
	    smcr_clc_rmbe_size(conf->accept.dmbe_size) != xc->peer_ring_size)
		return SMCR_CLC_DECL_CNFERR;
	return 0;
}
