// SPDX-License-Identifier: MIT
/*
 * The rendezvous (design §7): each side presents its secret plus its memfd
 * (SCM_RIGHTS) over an abstract UNIX socket, and hands its memfd only to a
 * peer it has checked.  Only the two ends of the TCP connection know the
 * secrets (the CLC messages carry them, shm_clc.c).  Each message brings
 * its sender's credentials (SCM_CREDENTIALS), from which shm_peer.c proves
 * the sending process.  Here: the sockets, the proof in both directions,
 * the peer's ring mapped after checking what it is, and our own ring taken
 * just before its memfd goes out.
 */
#include "smcr/shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include "common/log.h"
#include "smcr/clc.h"
#include "smcr/libc.h"
#include "smcr/rundir.h"
#include "smcr/sys.h"
#include "smcr/wire.h"

#define SHM_MAGIC 0x534d4352u /* "SMCR" */
#define SHM_RV_BIND_TRIES 3

static void rv_abstract_name(uint64_t token, struct sockaddr_un *sa, socklen_t *len)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* Abstract namespace (leading NUL): no file, gone with the socket. */
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "smcr/rv/%016llx",
		     (unsigned long long)token);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/*
 * Within one network namespace an abstract name; to a peer that may be in
 * another (SMCR_RUNDIR, rundir.h) a socket file in the shared directory,
 * the only name both can reach.  Either way the name proves nothing: the
 * secrets and SO_PEERCRED do (design §7).
 */
int smcr_shm_rv_connect(const struct smcr_xconn *xc, int sock, uint64_t token)
{
	struct sockaddr_un sa;
	socklen_t salen;

	if (xc->rv_in_dir)
		return smcr_rundir_rv_connect(sock, token);
	rv_abstract_name(token, &sa, &salen);
	return smcr_libc.connect(sock, (struct sockaddr *)&sa, salen);
}

void smcr_shm_rv_close(struct smcr_xconn *xc)
{
	if (xc->rv_fd < 0)
		return;
	smcr_sys_close(xc->rv_fd);
	xc->rv_fd = -1;
	if (xc->rv_in_dir)
		smcr_rundir_rv_unlink(xc->rv_bound);
}

/*
 * Every rendezvous socket of ours asks for its peer's credentials with each
 * message (SCM_CREDENTIALS): the process that sent the proof, not the one
 * that once created a listener (SO_PEERCRED), identifies the peer
 * (smcr_shm_peer_prove).  A listener passes the option on to the sockets it
 * accepts.
 */
int smcr_shm_rv_passcred(int fd)
{
	int one = 1;

	return smcr_libc.setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
}

/*
 * A rendezvous listener under a fresh random name (*token), xc->rv_fd: 0 or
 * -errno.  It lives only for the handshake, inside one call of the
 * application's, so it stays in the low fd range rather than paying two
 * more system calls.
 */
int smcr_shm_rv_listen(struct smcr_xconn *xc, uint64_t *token)
{
	int err = -EADDRINUSE;

	for (int i = 0; i < SHM_RV_BIND_TRIES && err == -EADDRINUSE; i++) {
		struct sockaddr_un sa;
		socklen_t salen;
		int fd;

		if (smcr_sys_random(token, sizeof(*token)) < 0)
			return -EIO;
		fd = smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -errno;
		err = smcr_shm_rv_passcred(fd) < 0 ? -errno : 0;
		if (err == 0 && xc->rv_in_dir) {
			err = smcr_rundir_rv_bind(fd, *token);
		} else if (err == 0) {
			rv_abstract_name(*token, &sa, &salen);
			if (smcr_libc.bind(fd, (struct sockaddr *)&sa, salen) < 0)
				err = -errno;
		}
		if (err == 0 && smcr_libc.listen(fd, SHM_ACCEPT_ATTEMPTS) == 0) {
			xc->rv_fd = fd;
			xc->rv_bound = *token;
			return 0;
		}
		if (err == 0) {
			err = -errno;
			if (xc->rv_in_dir)
				smcr_rundir_rv_unlink(*token);
		}
		/* squatted: draw another name */
		smcr_sys_close(fd);
	}
	return err;
}

/*
 * The fallback reason for a system call that failed with `err`: a process
 * short of fds or memory is MEM (the operator's limit to raise, and what a
 * peer's stats show), anything else INTERR.
 */
int smcr_shm_shortage_reason(int err)
{
	switch (err) {
	case EMFILE:
	case ENFILE:
	case ENOMEM:
	case ENOBUFS:
		return SMCR_CLC_DECL_MEM;
	default:
		return SMCR_CLC_DECL_INTERR;
	}
}

/*
 * Our proof and our memfd, never anything else: the peer gets no file whose
 * open file description (O_NONBLOCK and all) it could change under us.
 * MSG_DONTWAIT: a peer that does not read cannot hold us here.
 */
int smcr_shm_send_proof(int sock, const uint8_t secret[SHM_SECRET_LEN], uint32_t ring_size,
			int memfd)
{
	struct smcr_rv_proof proof = { .ring_size = ring_size };
	uint8_t wire[SMCR_RV_PROOF_LEN];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = wire, .iov_len = sizeof(wire) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memcpy(proof.secret, secret, SHM_SECRET_LEN);
	smcr_rv_proof_encode(&proof, wire);
	memset(u.buf, 0, sizeof(u.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
	ssize_t n = smcr_libc.sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(wire) ? 0 : -EPROTO;
}

/*
 * Receive a proof with exactly one fd (the peer's memfd, *memfd) and its
 * sender's credentials (*cred): 0, -ETIMEDOUT, -EMFILE (the proof came, but
 * this process had no fd left for its memfd), or -EPROTO (fds closed).
 */
static int recv_proof(int sock, int64_t deadline, struct smcr_rv_proof *proof, int *memfd,
		      struct ucred *cred)
{
	union {
		char buf[SMCR_RV_ANC_SPACE];
		struct cmsghdr align;
	} u;
	uint8_t wire[SMCR_RV_PROOF_LEN + 1];
	struct iovec iov = { .iov_base = wire, .iov_len = sizeof(wire) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct smcr_rv_anc anc;
	bool decoded;
	int rc;
	ssize_t n;

	*memfd = -1;
	rc = smcr_sys_wait_fd(sock, POLLIN, deadline);
	if (rc <= 0)
		return rc == 0 ? -ETIMEDOUT : rc;
	n = smcr_libc.recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	smcr_rv_anc_parse(u.buf, mh.msg_controllen, &anc);
	decoded = smcr_rv_proof_decode(wire, (size_t)n, proof) == SMCR_WIRE_OK;
	if (!decoded || anc.nfds != 1 || anc.extra || !anc.has_cred ||
	    (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
		for (unsigned i = 0; i < anc.nfds; i++)
			smcr_sys_close(anc.fds[i]);
		/*
		 * The kernel drops the fds it cannot install (RLIMIT_NOFILE
		 * reached) and says so with MSG_CTRUNC: a well-formed proof
		 * whose memfd did not arrive is this process's shortage, which
		 * the end that hit it records as its own reason (MEM).
		 */
		if (decoded && anc.nfds == 0 && anc.has_cred && !(mh.msg_flags & MSG_TRUNC) &&
		    (mh.msg_flags & MSG_CTRUNC))
			return -EMFILE;
		return -EPROTO;
	}
	/* Lives only until attach_peer() maps it: no move above the floor. */
	*memfd = anc.fds[0];
	cred->pid = anc.pid;
	cred->uid = anc.uid;
	return 0;
}

/* Constant time: the comparison must not tell a stranger how close it got. */
bool smcr_shm_secret_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;

	for (int i = 0; i < SHM_SECRET_LEN; i++)
		d |= (uint8_t)(a[i] ^ b[i]);
	return d == 0;
}

/* Map the peer's memfd after checking what it is (closed either way). */
static int attach_peer(struct smcr_xconn *xc, int memfd, uint32_t ring_size)
{
	struct stat st;
	int seals;

	if (ring_size < smcr_clc_rmbe_size(0) || ring_size > smcr_clc_rmbe_size(SHM_MAX_CLASS) ||
	    smcr_clc_rmbe_size(smcr_shm_size_class(ring_size)) != ring_size)
		goto bad;
	/* Only shmem files take seals: sealed against shrinking, and large enough: no SIGBUS. */
	seals = smcr_libc.fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(memfd, &st) < 0 ||
	    st.st_size < (off_t)SHM_CTRL_LEN + ring_size)
		goto bad;
	xc->peer_dev = st.st_dev;
	xc->peer_ino = st.st_ino;
	xc->peer_base = smcr_shm_peer_map_get(st.st_dev, st.st_ino, ring_size, &xc->peer_map_len);
	/* Not pre-faulted: a short connection touches few of the peer's pages. */
	if (!xc->peer_base)
		xc->peer_base = smcr_shm_map_with_guard(memfd, ring_size, &xc->peer_map_len);
	if (!xc->peer_base) {
		int reason = smcr_shm_shortage_reason(errno);

		smcr_sys_close(memfd);
		return reason;
	}
	smcr_sys_close(memfd);
	xc->peer_ctrl = (struct shm_ctrl *)(void *)xc->peer_base;
	xc->peer_ring_size = ring_size;
	return 0;
bad:
	smcr_sys_close(memfd);
	return SMCR_CLC_DECL_INTERR;
}

/*
 * The peer's proof on `sock`: its secret must be the one the CLC exchange
 * gave us and its ring `size` (0: any size); then its ring is mapped and
 * its sender proven if it can be (xc->peer, for the pool).  0, -ETIMEDOUT or
 * -EPROTO (nothing usable came), -EMFILE (no fd left for the peer's memfd),
 * or a decline reason.
 */
int smcr_shm_take_proof(struct smcr_xconn *xc, int sock, int64_t deadline, uint32_t size)
{
	struct smcr_rv_proof proof;
	struct ucred cred = { 0 };
	int memfd, rc = recv_proof(sock, deadline, &proof, &memfd, &cred);

	if (rc < 0)
		return rc;
	if (!smcr_shm_secret_equal(proof.secret, xc->peer_secret) ||
	    (size && proof.ring_size != size)) {
		smcr_sys_close(memfd);
		smcr_warn("rendezvous: wrong secret from pid %d", (int)cred.pid);
		return SMCR_CLC_DECL_CNFERR;
	}
	rc = attach_peer(xc, memfd, proof.ring_size);
	if (rc)
		return rc;
	xc->peer = smcr_shm_peer_prove(cred.pid, cred.uid, xc->rv_since_ns);
	return 0;
}

/* Readiness fd: our doorbell and the peer link, in one pollable epoll fd. */
int smcr_shm_make_ready_fd(struct smcr_xconn *xc)
{
	struct epoll_event ev = { .events = EPOLLIN };

	xc->ep_fd = smcr_sys_fd_high(smcr_libc.epoll_create1(EPOLL_CLOEXEC));
	if (xc->ep_fd < 0)
		return -errno;
	ev.data.fd = xc->own_efd;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->own_efd, &ev) < 0)
		return -errno;
	ev.events = EPOLLIN | EPOLLRDHUP;
	ev.data.fd = xc->unix_fd;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->unix_fd, &ev) < 0)
		return -errno;
	return 0;
}

/*
 * Our ring, just before its memfd goes to the peer: `peer` is the process
 * it goes to if we know it for sure, else NULL (then never a region another
 * process had).
 */
int smcr_shm_own_region(struct smcr_xconn *xc, struct shm_peer *peer)
{
	if (xc->own)
		return 0;
	xc->own = smcr_shm_region_get(xc->want_size, peer);
	if (!xc->own)
		return SMCR_CLC_DECL_MEM;
	xc->own_ctrl = (struct shm_ctrl *)(void *)xc->own->base;
	xc->own_ctrl->magic = SHM_MAGIC;
	xc->own_ctrl->ring_size = xc->own->ring_size;
	atomic_store_explicit(&xc->own_ctrl->tcp_tail, 0, memory_order_relaxed);
	atomic_store_explicit(&xc->own_ctrl->bell_pipe, 0, memory_order_relaxed);
	atomic_store_explicit(&xc->own_ctrl->features, SHM_FEAT_TCP_TAIL | SHM_FEAT_PIPE_BELL,
			      memory_order_relaxed);
	/* Armed from the start: `armed == 0` then always means "the peer rang". */
	atomic_store_explicit(&xc->own_ctrl->armed, 1, memory_order_release);
	return 0;
}
