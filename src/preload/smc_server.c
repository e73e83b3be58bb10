/* SPDX-License-Identifier: MIT */
/*
 * An accepted connection's lazy classification (design §4): the server
 * looks at the client's first bytes when the program first reads, writes
 * or waits on the socket, in whichever process does so, and answers a
 * Proposal or goes on as TCP.  Also the same classification, bounded,
 * when the connection leaves unread (exec, SCM_RIGHTS, confinement), so
 * that its next owner reads a clean stream.  Apart from the client's side
 * (smc_client.c) because it waits for the peer where the client speaks.
 *
 * Known limit: a server that writes first waits SMCR_SPEAK_FIRST_WAIT_MS
 * (50 ms; 0 = not at all) for a local client's Proposal, and if it comes
 * later it is declined (the smcr client then fails that connection: its
 * reply was the server's banner); a plain local client of such a server
 * sees its banner that much later.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/* How long a partial CLC Proposal prefix may sit before it counts as data. */
#define PARTIAL_PROPOSAL_MS 2000

/* How long a server's first write waits for a local client's Proposal (set by smcr_smc_init). */
int smcr_smc_speak_first_wait_ms = SMCR_CONFIG_SPEAK_FIRST_WAIT_MS;

static int pending_bytes(int fd)
{
	int n = 0;

	if (smcr_real.ioctl(fd, FIONREAD, &n) < 0)
		return 0;
	return n;
}

/*
 * Decline the Proposal at the stream's start for `reason`: the connection
 * goes on as TCP, or is reset if the Decline cannot be sent.
 * SMCR_SMC_DECIDED or -ECONNRESET.
 */
static int decline(int fd, struct smcr_fd_entry *e, uint32_t reason, const char *why)
{
	int rc = smcr_sock_decline_late_proposal(fd, reason);

	if (rc < 0) {
		smcr_smc_fail_connection(fd, e, -rc, "server");
		return -ECONNRESET;
	}
	smcr_smc_fallback(fd, e, reason, false, "server", why);
	return SMCR_SMC_DECIDED;
}

/* What a server's decision keeps between its looks at the client's first bytes. */
struct server_look {
	bool spoke_first; /* the server wrote before the client's first byte */
	bool waited;      /* a write waited once for a local client's Proposal */
	int64_t partial_deadline; /* when a Proposal prefix stops being worth waiting for */
};

/* The steps' "look at the client's bytes again" (no return value of the decision). */
#define LOOK_AGAIN INT_MIN

static int server_proposal(int fd, struct smcr_fd_entry *e, const struct server_look *lk,
			   enum smcr_io_kind kind, bool may_block)
{
	const char *why;
	uint32_t opt_reason;
	int efd, rc;

	if (lk->spoke_first) /* the stream is TCP; the Proposal must not reach the app */
		return decline(fd, e, SMCR_CLC_DECL_SYNCERR, "declined a late Proposal");
	opt_reason = smcr_smc_option_keeps_tcp(e, &why);
	if (opt_reason)
		return decline(fd, e, opt_reason, why);
	efd = smcr_smc_engine_dup(fd);
	if (efd < 0) /* cannot run the engine: still answer (Decline) so the client goes on */
		return decline(fd, e, SMCR_CLC_DECL_MEM, "no fd for the engine");
	rc = smcr_smc_handshake_start(fd, e, efd, NULL, 0, kind, may_block);
	/* Pending: the client may have answered already. */
	return rc == SMCR_HANDSHAKE_PENDING ? LOOK_AGAIN : rc;
}

/* A valid Proposal prefix whose rest is in flight: the rest of the stream waits for it. */
static int server_partial(int fd, struct smcr_fd_entry *e, struct server_look *lk,
			  enum smcr_io_kind kind, bool may_block)
{
	int64_t now = smcr_now_ms();

	if (lk->partial_deadline < 0)
		lk->partial_deadline = now + PARTIAL_PROPOSAL_MS;
	if (now >= lk->partial_deadline) {
		smcr_smc_fallback(fd, e, SMCR_CLC_DECL_PEERNOSMC, true, "server",
				  "incomplete Proposal");
		return SMCR_SMC_DECIDED;
	}
	if (kind == SMCR_IO_POLL)
		return SMCR_SMC_DECIDED;
	if (kind == SMCR_IO_READ && !may_block)
		return -EAGAIN;
	/* The socket already polls readable: pace by time (1 ms), not a spin to the deadline. */
	nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
	return LOOK_AGAIN;
}

/*
 * Not a byte from the client yet (the peek's own EAGAIN said so, so a
 * non-blocking read costs one system call, as without us).  A write now
 * is the server speaking first, unless a client that will propose is
 * given a moment to.
 */
static int server_nothing_yet(int fd, struct smcr_fd_entry *e, struct server_look *lk,
			      enum smcr_io_kind kind, bool may_block)
{
	if (kind == SMCR_IO_WRITE) {
		if (lk->spoke_first)
			return SMCR_SMC_DECIDED;
		if (!lk->waited && smcr_smc_speak_first_wait_ms > 0 &&
		    ((smcr_fd_entry_flags(e) & SMCR_FD_F_PEER_SMC) || smcr_peer_is_local(fd) ||
		     smcr_peer_may_propose(fd))) {
			/*
			 * A local smcr client, or one whose SYN announced SMC,
			 * proposes right after connecting; so does one in
			 * SMCR_PEERS, after its verbs set-up.
			 */
			lk->waited = true;
			smcr_smc_wait_fd(fd, POLLIN, smcr_smc_speak_first_wait_ms);
			return LOOK_AGAIN;
		}
		smcr_smc_add_flags(e, SMCR_FD_F_SPOKE_FIRST);
		smcr_dbg("fd %d: server writes first; a late Proposal will be declined", fd);
		return SMCR_SMC_DECIDED;
	}
	if (kind == SMCR_IO_POLL)
		return SMCR_SMC_DECIDED;
	return may_block ? SMCR_SMC_WAIT_DATA : -EAGAIN;
}

/*
 * One step of the server's lazy classification (design §4). Returns SMCR_SMC_DECIDED,
 * SMCR_SMC_WAIT_DATA, or -errno for the call to return.
 */
int smcr_smc_server_decide(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind, bool may_block)
{
	struct server_look lk = {
		.spoke_first = smcr_fd_entry_flags(e) & SMCR_FD_F_SPOKE_FIRST,
		.partial_deadline = -1,
	};
	int rc = LOOK_AGAIN;

	while (rc == LOOK_AGAIN) {
		int c;

		if (atomic_load_explicit(&e->handshake, memory_order_acquire))
			return smcr_smc_handshake_step(fd, e, kind, may_block);
		c = smcr_sock_classify(fd);
		if (c == SMCR_CLASSIFY_PROPOSAL) {
			rc = server_proposal(fd, e, &lk, kind, may_block);
		} else if (c == SMCR_CLASSIFY_TCP || c == SMCR_CLASSIFY_EOF) {
			smcr_smc_fallback(fd, e, SMCR_CLC_DECL_PEERNOSMC, true, "server",
					  lk.spoke_first ? "after the server spoke first" : NULL);
			rc = SMCR_SMC_DECIDED;
		} else if (c < 0) { /* a socket error: the kernel reports it */
			atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
			rc = SMCR_SMC_DECIDED;
		} else if (c == SMCR_CLASSIFY_NEED_MORE && pending_bytes(fd) > 0) {
			rc = server_partial(fd, e, &lk, kind, may_block);
		} else {
			rc = server_nothing_yet(fd, e, &lk, kind, may_block);
		}
	}
	return rc;
}

/* ---- leaving unread ---------------------------------------------------------- */

/*
 * An accepted connection whose Proposal this process has not read is leaving
 * for a program that will not run smcr (exec of a static program, or of one
 * whose environment drops LD_PRELOAD), or for another process (SCM_RIGHTS).
 * Its new owner would read a Proposal as data, so it is settled here, in
 * either of two ways that leave a clean TCP stream at both ends: a Proposal
 * already there is declined (reason HANDOFF; CONFINED when the process is
 * about to confine its system calls instead); a client that may yet propose
 * (a local one, one whose SYN announced SMC, one in SMCR_PEERS) gets as long
 * to do so as when the server speaks first (SMCR_SPEAK_FIRST_WAIT_MS), which
 * is when an smcr client proposes: right after its connect() returns. Any
 * other client is a plain TCP peer: nothing to wait for.  A handshake already
 * under way is finished instead (FINISH_HANDSHAKE_MS at most): it may end in SMC,
 * which the caller then ends like any SMC connection that cannot follow.
 */
void smcr_smc_settle_unread(int fd, struct smcr_fd_entry *e, uint32_t reason, const char *why)
{
	int64_t deadline = smcr_now_ms() + smcr_smc_speak_first_wait_ms;
	bool may_propose;

	if (atomic_load_explicit(&e->handshake, memory_order_acquire)) {
		smcr_smc_finish_handshake(fd, e);
		return;
	}
	if (!smcr_smc_decision_lock(e))
		return;
	if (atomic_load_explicit(&e->handshake, memory_order_acquire)) {
		/* its thread answered a Proposal while this one waited for the lock */
		smcr_smc_decision_unlock(e);
		smcr_smc_finish_handshake(fd, e);
		return;
	}
	smcr_guard_enter();
	may_propose = (smcr_fd_entry_flags(e) & SMCR_FD_F_PEER_SMC) || smcr_peer_is_local(fd) ||
		      smcr_peer_may_propose(fd);
	while (smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE) {
		int c = smcr_sock_classify(fd);
		int64_t left = deadline - smcr_now_ms();

		if (c == SMCR_CLASSIFY_PROPOSAL) {
			decline(fd, e, reason, why);
		} else if (c == SMCR_CLASSIFY_TCP || c == SMCR_CLASSIFY_EOF || c < 0) {
			smcr_smc_fallback(fd, e, SMCR_CLC_DECL_PEERNOSMC, true, "server", why);
		} else if (may_propose && left > 0 && pending_bytes(fd) > 0) {
			/* A Proposal prefix: the rest is on its way (the socket polls readable). */
			nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
		} else if (!may_propose || left <= 0 ||
			   smcr_smc_wait_fd(fd, POLLIN, (int)left) <= 0) {
			/* Nothing came: whatever comes later is the new owner's, as TCP. */
			smcr_smc_fallback(fd, e,
					  pending_bytes(fd) > 0 ? SMCR_CLC_DECL_PEERNOSMC : reason,
					  true, "server", why);
		}
	}
	smcr_smc_drop_listener_ref(e);
	smcr_guard_leave();
	smcr_smc_decision_unlock(e);
}

void smcr_smc_settle_for_handoff(int fd, struct smcr_fd_entry *e, const char *why)
{
	smcr_smc_settle_unread(fd, e, SMCR_CLC_DECL_HANDOFF, why);
}

/* ---- the first read, straight into the program's buffer --------------------- */

/*
 * Where the program's first read of an accepted connection can be the look
 * at the client's first bytes, instead of a peek before it: a non-blocking
 * read (a blocking one waits for the first byte unlocked, smcr_smc_settle)
 * into one buffer that holds any Proposal whole, no flag but MSG_DONTWAIT
 * (MSG_PEEK and MSG_WAITALL ask for something else), before the server spoke
 * (a Proposal after that is declined where it lies), and no read option of
 * the program's that the decision would have to lend first (smc.c).
 */
static bool first_read_fits(const struct smcr_fd_entry *e, const struct msghdr *msg, int flags)
{
	unsigned f = smcr_fd_entry_flags(e);

	return (f & SMCR_FD_F_ACCEPTED) && !(f & (SMCR_FD_F_SPOKE_FIRST | SMCR_FD_F_LISTENING)) &&
	       flags == MSG_DONTWAIT && msg->msg_iovlen == 1 &&
	       msg->msg_iov[0].iov_len >= SMCR_CLC_SCREEN_MAX && e->rcvlowat <= 1 &&
	       e->peek_off < 0 && !atomic_load_explicit(&e->handshake, memory_order_acquire);
}

/* A Proposal taken off the stream is declined: 0 (the connection is TCP), or -ECONNRESET. */
static int decline_taken(int fd, struct smcr_fd_entry *e, uint32_t reason, const char *why)
{
	int rc = smcr_sock_decline_taken_proposal(fd, reason);

	if (rc < 0) {
		smcr_smc_fail_connection(fd, e, -rc, "server");
		return -ECONNRESET;
	}
	smcr_smc_fallback(fd, e, reason, false, "server", why);
	return 0;
}

/*
 * A whole Proposal taken off the stream: answered as one still in the socket
 * is (server_proposal).  Then the call goes on (*taken cleared) as any call
 * during a handshake, or after it, does.
 */
static ssize_t taken_proposal(int fd, struct smcr_fd_entry *e, const void *prop, size_t len,
			      bool *taken)
{
	const char *why = NULL;
	uint32_t reason = smcr_smc_option_keeps_tcp(e, &why);
	int efd = -1, rc;

	if (!reason) {
		efd = smcr_smc_engine_dup(fd);
		if (efd < 0) {
			reason = SMCR_CLC_DECL_MEM;
			why = "no fd for the engine";
		}
	}
	rc = reason ? decline_taken(fd, e, reason, why)
		    : smcr_smc_handshake_start(fd, e, efd, prop, len, SMCR_IO_READ, false);
	if (rc < 0)
		return rc;
	*taken = false;
	return 0;
}

/*
 * The start of a Proposal, n bytes at buf: its rest, if already there, is
 * read at once (a Proposal split by the network); one still in flight is
 * left to the screen, which declines it once whole (SYNCERR), or hands the
 * bytes out if they turn out to be data.
 */
static ssize_t taken_start(int fd, struct smcr_fd_entry *e, uint8_t *buf, size_t n, size_t need,
			   bool *taken)
{
	uint8_t whole[SMCR_CLC_SCREEN_MAX];
	size_t have = n;
	int c;

	memcpy(whole, buf, n);
	while (have < need) {
		ssize_t m = smcr_real.recvfrom(fd, whole + have, need - have, MSG_DONTWAIT, NULL, NULL);

		if (m <= 0)
			break;
		have += (size_t)m;
	}
	c = smcr_clc_screen(whole, have, &need);
	if (c == SMCR_CLASSIFY_PROPOSAL) {
		memset(buf, 0, n);
		return taken_proposal(fd, e, whole, have, taken);
	}
	if (c != SMCR_CLASSIFY_NEED_MORE) { /* data after all (or the client's end) */
		memcpy(buf, whole, have);
		smcr_smc_fallback(fd, e, SMCR_CLC_DECL_PEERNOSMC, true, "server", NULL);
		return (ssize_t)have;
	}
	memset(buf, 0, n);
	if (!smcr_smc_screen_take(e, whole, have, SMCR_CLC_DECL_SYNCERR)) {
		smcr_smc_fail_connection(fd, e, ENOMEM, "server");
		return -ECONNRESET;
	}
	smcr_smc_fallback(fd, e, SMCR_CLC_DECL_SYNCERR, true, "server", "a Proposal in pieces");
	return -EAGAIN;
}

/*
 * A failed first read that ends the stream.  Any other (EAGAIN, EINTR, the
 * program's bad buffer) leaves the client's first bytes in the socket, still
 * to be looked at: a Proposal among them must never reach the program.
 */
static bool first_read_ends_stream(int err)
{
	return err == ECONNRESET || err == ETIMEDOUT || err == ENOTCONN || err == EPIPE ||
	       err == EHOSTUNREACH || err == ENETUNREACH;
}

/* The first read itself, e decided by nobody yet and locked: bytes or -errno. */
static ssize_t first_read(int fd, struct smcr_fd_entry *e, struct msghdr *msg, int flags,
			  bool *taken)
{
	uint8_t *buf = msg->msg_iov[0].iov_base;
	ssize_t n = smcr_real.recvmsg(fd, msg, flags);
	size_t need = 0;
	int c, rc;

	if (n < 0) {
		rc = errno;
		if (first_read_ends_stream(rc)) /* the kernel's, for good */
			atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
		return -rc;
	}
	c = n ? smcr_clc_screen(buf, (size_t)n, &need) : SMCR_CLASSIFY_EOF;
	if (c == SMCR_CLASSIFY_PROPOSAL && (size_t)n == need) {
		rc = (int)taken_proposal(fd, e, buf, need, taken);
		memset(buf, 0, need);
		return rc;
	}
	if (c == SMCR_CLASSIFY_PROPOSAL) {
		/* A client that proposes waits for the answer: not one to answer SMC. */
		rc = decline_taken(fd, e, SMCR_CLC_DECL_SYNCERR, "data right after the Proposal");
		if (rc < 0)
			return rc;
		memmove(buf, buf + need, (size_t)n - need);
		return n - (ssize_t)need;
	}
	if (c == SMCR_CLASSIFY_NEED_MORE)
		return taken_start(fd, e, buf, (size_t)n, need, taken);
	smcr_smc_fallback(fd, e, SMCR_CLC_DECL_PEERNOSMC, true, "server", NULL);
	return n;
}

ssize_t smcr_smc_server_first_read(int fd, struct smcr_fd_entry *e, struct msghdr *msg,
				   int flags, bool *taken)
{
	ssize_t n = 0;

	*taken = false;
	if (!smcr_smc_enabled || !first_read_fits(e, msg, flags) || !smcr_smc_decision_lock(e))
		return 0;
	if (smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE && first_read_fits(e, msg, flags)) {
		*taken = true;
		smcr_guard_enter();
		smcr_engine_fd_scope_begin();
		n = first_read(fd, e, msg, flags, taken);
		smcr_engine_fd_scope_end();
		smcr_smc_drop_listener_ref(e);
		smcr_guard_leave();
	}
	smcr_smc_decision_unlock(e);
	return n;
}
