/* SPDX-License-Identifier: MIT */
/*
 * The SMC glue (see smc.h): what its parts share.  Here: the settings read
 * at start-up, the questions every part asks of an entry (does this process
 * run its connection?), the outcomes of a decision (SMC, TCP with a reason,
 * a reset) and smcr_smc_settle(), the one way into a decision.  The parts,
 * one concern each, share what smc_internal.h declares:
 *
 *   smc_client.c     a client: the policy before connect(), then its decision
 *   smc_server.c     an accepted connection's classification, also when it
 *                    leaves unread
 *   smc_handshake.c  a handshake under way across calls
 *   smc_listen.c     listeners, their registrations, accept()
 *   smc_data.c       the calls on an SMC socket
 *   smc_splice.c     splice() with an SMC socket on one side
 *   smc_close.c      the release at close; going on over TCP
 *   smc_confine.c    the decisions a seccomp filter must not meet
 *   smc_lifecycle.c  fork, exec, exit
 *   smc_ready.c      readiness as poll and epoll both see it
 *   smc_poll.c       poll and select
 *   smc_epoll.c      epoll registrations
 *   smc_epoll_wait.c what epoll_wait reports, the spin before it
 *   smc_screen.c     Proposals taken off a confined process's streams
 *
 * Every engine call runs inside the guard (smcr_guard_enter), so whatever
 * libc function the engine or its dependencies call reaches the kernel, not
 * a wrapper. errno belongs to the application: engine calls return -errno.
 *
 * The engine never sees the application's fd numbers: it works on its own
 * close-on-exec duplicate of the TCP socket (entry->engine_fd). The
 * application may close, dup2 over or reuse its numbers as it likes; the
 * socket the engine shuts down at the end is always the right one, and it
 * stays open until the engine has sent its last control message.
 *
 * Processes: the mode decision happens in whichever process does the first
 * I/O (accept-then-fork servers classify in the worker). A same-host SMC
 * connection follows fork (engine.h): every process that inherited it and
 * holds it runs it (entry->owner becomes the child at its first look), and
 * the last holder's close ends it. An SMC-R connection belongs to the
 * process that made it: a forked child's first use of it (a data call, a
 * wait for it, exec onto it) asks that process to go on over TCP, and the
 * child's copy is plain TCP from then on (smc_lifecycle.c); where it cannot
 * (a kernel SMC peer), the copy reads and polls as reset and the parent's
 * connection runs on.  No SMC connection crosses
 * exec (smc_lifecycle.c says what becomes of each); the engine's own fds
 * (its TCP duplicate, the shm rendezvous socket, rings, doorbells) are
 * close-on-exec.
 *
 * Known limit: a client and its server in one process stay TCP (the
 * handshake would wait for the server's first I/O on the same thread); for a
 * server that writes first see smc_server.c.
 */
#include "preload/smc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

bool smcr_smc_enabled;
int smcr_smc_spin_us;
pid_t smcr_smc_pid;
static struct smcr_sock_opts sock_opts;
static int tcp_rcvbuf_default; /* a new TCP socket's SO_RCVBUF (tcp_rmem[1]); 0 = unknown */

/* ---- small helpers ----------------------------------------------------------- */

/* poll one fd through libc; 1 ready, 0 timeout, -errno. */
int smcr_smc_wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int rc = smcr_real.poll(&p, 1, timeout_ms);

	return rc < 0 ? -errno : rc;
}

/*
 * Does this process run the connection `s` of entry `e`?  The process that
 * made it does; a forked child does if the engine lets it hold it (a
 * same-host connection follows fork): the child's first look takes it over,
 * later ones cost one compare.
 */
bool smcr_smc_entry_owns(struct smcr_fd_entry *e, struct smcr_sock *s)
{
	if (e->owner == smcr_smc_pid)
		return true;
	if (!s || !smcr_sock_held(s))
		return false;
	e->owner = smcr_smc_pid;
	return true;
}

struct smcr_sock *smcr_smc_sock_of(struct smcr_fd_entry *e)
{
	struct smcr_sock *s;

	if (smcr_fd_entry_mode(e) != SMCR_FD_SMC)
		return NULL;
	s = atomic_load_explicit(&e->sock, memory_order_acquire);
	return smcr_smc_entry_owns(e, s) ? s : NULL;
}

bool smcr_smc_inherited(struct smcr_fd_entry *e)
{
	struct smcr_sock *s = atomic_load_explicit(&e->sock, memory_order_acquire);

	if (smcr_fd_entry_mode(e) != SMCR_FD_SMC || s == NULL || smcr_smc_entry_owns(e, s))
		return false;
	return !smcr_smc_fork_follow(e, s);
}

bool smcr_smc_entry_is_conn(struct smcr_fd_entry *e)
{
	return smcr_smc_sock_of(e) != NULL;
}

/*
 * The decision is one thread's at a time; others wait for its outcome.
 * Bounded: a handshake is a few CLC round trips, though one whose peer is
 * late holds a blocking call as long as a read waits for data (design §4).
 */
bool smcr_smc_decision_lock(struct smcr_fd_entry *e)
{
	struct timespec pause = { 0, 100 * 1000 };

	for (int i = 0; i < 300000; i++) {
		if (!atomic_flag_test_and_set_explicit(&e->busy, memory_order_acquire))
			return true;
		nanosleep(&pause, NULL);
	}
	return false;
}

void smcr_smc_decision_unlock(struct smcr_fd_entry *e)
{
	atomic_flag_clear_explicit(&e->busy, memory_order_release);
}

/* A duplicate of the TCP socket for the engine, close-on-exec. */
int smcr_smc_engine_dup(int fd)
{
	int efd = smcr_engine_fd_dup(fd);

	if (efd >= 0) {
		smcr_preload_forget(efd); /* a stale entry there is not ours to keep */
		smcr_fdtab_label_set(efd, fd);
	}
	return efd;
}

void smcr_smc_engine_close(int efd)
{
	smcr_fdtab_label_set(efd, -1);
	smcr_real.close(efd);
}

/* An SO_RCVTIMEO or SO_SNDTIMEO in ms, 0 = none; `e` (or NULL) may know it is unset. */
int smcr_smc_timeval_ms(int fd, const struct smcr_fd_entry *e, int name)
{
	struct timeval tv = { 0, 0 };
	socklen_t len = sizeof(tv);

	if (e && (smcr_fd_entry_flags(e) & SMCR_FD_F_NO_TIMEO) && smcr_fdtab_same_fork(e))
		return 0;
	if (smcr_real.getsockopt(fd, SOL_SOCKET, name, &tv, &len) < 0)
		return 0;
	return (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
}

void smcr_smc_apply_timeouts(int fd, const struct smcr_fd_entry *e, struct smcr_sock *s)
{
	smcr_sock_set_timeouts(s, smcr_smc_timeval_ms(fd, e, SO_RCVTIMEO),
			       smcr_smc_timeval_ms(fd, e, SO_SNDTIMEO));
}

/* ---- outcomes of a decision ---------------------------------------------------- */

/*
 * The connection stays TCP for `reason`.  `peer`: its peer address if the
 * caller read it already (else the stats record asks the kernel).
 */
void smcr_smc_fallback_peer(int fd, struct smcr_fd_entry *e, uint32_t reason, bool count,
			    const char *role, const char *why, const struct sockaddr_storage *peer)
{
	char name[SMCR_CONN_NAME_MAX];

	e->fallback_reason = reason;
	if (count && reason)
		smcr_note_fallback((int)reason);
	/* A record of its own in the published stats: mode TCP, with the reason. */
	e->owner = smcr_smc_pid;
	e->tcp_record = smcr_stats_tcp_open_peer(fd, strcmp(role, "server") == 0, (int)reason,
						 smcr_smc_accepted_local(e), peer);
	atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
	smcr_info("fd %d: tcp-fallback (%s): reason 0x%08x %s%s%s; %s", fd, role, reason,
		  smcr_fallback_reason_str((int)reason), why ? ", " : "", why ? why : "",
		  smcr_conn_name(fd, name, sizeof(name)));
}

void smcr_smc_fallback(int fd, struct smcr_fd_entry *e, uint32_t reason, bool count,
		       const char *role, const char *why)
{
	struct sockaddr_storage peer;
	bool known = e->accepted_peer.sin6_family != AF_UNSPEC;

	if (known)
		memcpy(&peer, &e->accepted_peer, sizeof(e->accepted_peer));
	smcr_smc_fallback_peer(fd, e, reason, count, role, why, known ? &peer : NULL);
}

/*
 * connect(AF_UNSPEC) disconnects a TCP socket with an RST: the peer sees a
 * reset at once, and the kernel fails every further call on the socket.
 */
bool smcr_smc_tcp_reset(int fd)
{
	static const struct sockaddr unspec = { .sa_family = AF_UNSPEC };

	return smcr_real.connect(fd, &unspec, sizeof(unspec)) == 0;
}

/* A hard handshake error leaves the stream in an unknown state: reset it. */
void smcr_smc_fail_connection(int fd, struct smcr_fd_entry *e, int err, const char *role)
{
	char name[SMCR_CONN_NAME_MAX] = "";

	/* named while it still has a peer */
	if (smcr_log_enabled(SMCR_LOG_WARN))
		smcr_conn_name(fd, name, sizeof(name));
	smcr_smc_tcp_reset(fd);
	e->fallback_reason = err == ETIMEDOUT ? SMCR_CLC_DECL_TIMEOUT_CL : SMCR_CLC_DECL_INTERR;
	atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
	smcr_warn("fd %d: SMC handshake failed (%s): %s; connection reset; %s", fd, role,
		  strerror(err), name);
}

void smcr_smc_go_smc(int fd, struct smcr_fd_entry *e, int efd, struct smcr_sock *s,
		     const char *role)
{
	char name[SMCR_CONN_NAME_MAX];

	e->engine_fd = efd;
	e->owner = smcr_smc_pid;
	smcr_smc_apply_timeouts(fd, e, s);
	if (e->rcvlowat > 1)
		smcr_sock_set_rcvlowat(s, e->rcvlowat);
	if (e->peek_off >= 0)
		smcr_sock_set_peek_off(s, e->peek_off);
	atomic_store_explicit(&e->sock, s, memory_order_release);
	atomic_store_explicit(&e->mode, SMCR_FD_SMC, memory_order_release);
	smcr_smc_epoll_move(e, s);
	smcr_smc_update_interest(e, s);
	smcr_info("fd %d: %s (%s): rmb %u, peer rmb %u; %s", fd, smcr_sock_mode_name(s), role,
		  smcr_sock_rcvbuf(s), smcr_sock_sndbuf(s), smcr_conn_name(fd, name, sizeof(name)));
}

/* The result of smcr_sock_connect/accept on efd. Returns 0 or -errno to report. */
int smcr_smc_take_handshake(int fd, struct smcr_fd_entry *e, int efd, int rc, struct smcr_sock *s,
			    const char *role)
{
	if (rc == 0) {
		smcr_smc_go_smc(fd, e, efd, s, role);
		return 0;
	}
	smcr_smc_engine_close(efd);
	if (rc > 0) {
		smcr_smc_fallback(fd, e, (uint32_t)rc, false, role, NULL);
		return 0;
	}
	smcr_smc_fail_connection(fd, e, -rc, role);
	return -ECONNRESET;
}

/*
 * The options for one connection: an SO_RCVBUF the application set (on this
 * socket, or on the listener an accepted one inherits it from) sizes the ring,
 * as the kernel's SMC sizes its RMB from sk_rcvbuf (the doubled value); else
 * SMC_RCVBUF, else the transport's default.  "Set" means it differs from a new
 * TCP socket's size (no data has moved yet, so autotuning has not): a value
 * that happens to equal tcp_rmem[1] once doubled is not seen.
 */
struct smcr_sock_opts smcr_smc_conn_opts(int efd)
{
	struct smcr_sock_opts o = sock_opts;
	socklen_t len = sizeof(int);
	int v = 0;

	if (tcp_rcvbuf_default > 0 &&
	    smcr_real.getsockopt(efd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 && v > 0 &&
	    v != tcp_rcvbuf_default)
		o.rcvbuf = (uint32_t)v;
	return o;
}

static int read_tcp_rcvbuf_default(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_rmem", "re");
	int lo, def = 0;

	if (f) {
		if (fscanf(f, "%d %d", &lo, &def) != 2)
			def = 0;
		fclose(f);
	}
	return def;
}

/* ---- the decision --------------------------------------------------------------- */

/*
 * The program's read options on the kernel's socket would get in the way of
 * the decision's own reads: its SO_RCVLOWAT (e->rcvlowat) would hold back
 * every wait, for the first bytes and for each CLC message shorter than it;
 * its SO_PEEK_OFF would make each peek at a CLC message start further on.
 * So the decision reads with a mark of 1 and no peek offset, and the
 * program's are put back once the socket is decided, SMC or TCP.
 */
static bool read_options_set(const struct smcr_fd_entry *e)
{
	return e->rcvlowat > 1 || e->peek_off >= 0;
}

void smcr_smc_read_options_lend(int fd, struct smcr_fd_entry *e)
{
	int one = 1, off = -1;

	if (smcr_fd_entry_mode(e) != SMCR_FD_CANDIDATE)
		return;
	if (e->rcvlowat > 1)
		(void)smcr_real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	if (e->peek_off >= 0)
		(void)smcr_real.setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
	smcr_smc_add_flags(e, SMCR_FD_F_LOWAT_LENT);
}

static void read_options_return(int fd, struct smcr_fd_entry *e)
{
	if (!(smcr_fd_entry_flags(e) & SMCR_FD_F_LOWAT_LENT) ||
	    smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE)
		return;
	if (e->rcvlowat > 1)
		(void)smcr_real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &e->rcvlowat,
					   sizeof(e->rcvlowat));
	if (e->peek_off >= 0)
		(void)smcr_real.setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &e->peek_off,
					   sizeof(e->peek_off));
	smcr_smc_clear_flags(e, SMCR_FD_F_LOWAT_LENT);
}

int smcr_smc_settle(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind, bool may_block)
{
	int rcv_timeout = 0; /* ms; 0 = not read yet, -1 = none */
	int64_t deadline = 0;

	for (;;) {
		unsigned flags;
		int rc = SMCR_SMC_DECIDED;

		if (smcr_fd_entry_mode(e) != SMCR_FD_CANDIDATE || !smcr_smc_enabled)
			return 0;
		flags = smcr_fd_entry_flags(e);
		if ((flags & SMCR_FD_F_LISTENING) ||
		    !(flags & (SMCR_FD_F_ACCEPTED | SMCR_FD_F_CONNECTING)))
			return 0;
		if (!smcr_smc_decision_lock(e))
			/*
			 * Another thread's handshake still runs: the socket
			 * under it is not the application's stream yet.
			 */
			return -EAGAIN;
		smcr_guard_enter();
		if (smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE) {
			if (unlikely(read_options_set(e)) && !(flags & SMCR_FD_F_LOWAT_LENT))
				smcr_smc_read_options_lend(fd, e);
			smcr_engine_fd_scope_begin();
			if (flags & SMCR_FD_F_ACCEPTED)
				rc = smcr_smc_server_decide(fd, e, kind, may_block);
			else
				rc = smcr_smc_client_decide(fd, e, kind, may_block);
			smcr_engine_fd_scope_end();
			read_options_return(fd, e);
		}
		smcr_smc_drop_listener_ref(e);
		smcr_guard_leave();
		smcr_smc_decision_unlock(e);
		if (rc != SMCR_SMC_WAIT_DATA)
			return rc < 0 ? rc : 0;
		/*
		 * A blocking read before the client's first bytes: wait unlocked,
		 * as long as the kernel would (SO_RCVTIMEO, then EAGAIN).
		 */
		if (rcv_timeout == 0) {
			rcv_timeout = smcr_smc_timeval_ms(fd, e, SO_RCVTIMEO);
			if (rcv_timeout > 0)
				deadline = smcr_now_ms() + rcv_timeout;
			else
				rcv_timeout = -1;
		}
		rc = smcr_smc_wait_fd(
			fd, POLLIN,
			rcv_timeout < 0 ? -1
				: (int)(deadline > smcr_now_ms() ? deadline - smcr_now_ms() : 0));
		if (rc < 0)
			return rc;
		if (rc == 0)
			return -EAGAIN;
	}
}

/* ---- set-up --------------------------------------------------------------------------- */

void smcr_smc_init(void)
{
	const struct smcr_config *cfg = smcr_config_get();

	smcr_smc_pid = getpid();
	/* Anything to do at all: same-host SMC, or SMC-R that may be proposed or accepted. */
	smcr_smc_enabled = cfg->samehost || cfg->transport == SMCR_CONFIG_TRANSPORT_RDMA ||
			   (cfg->transport == SMCR_CONFIG_TRANSPORT_AUTO && cfg->n_peers > 0);
	smcr_smc_speak_first_wait_ms = (int)cfg->speak_first_wait_ms;
	sock_opts.rcvbuf = cfg->rcvbuf > UINT32_MAX ? UINT32_MAX : (uint32_t)cfg->rcvbuf;
	sock_opts.sndbuf = cfg->sndbuf > UINT32_MAX ? UINT32_MAX : (uint32_t)cfg->sndbuf;
	sock_opts.spin_us = (int)cfg->spin_us;
	smcr_smc_spin_us = sock_opts.spin_us;
	smcr_guard_enter();
	tcp_rcvbuf_default = read_tcp_rcvbuf_default();
	smcr_guard_leave();
	smcr_fdtab_release_hook = smcr_smc_release_entry;
	if (!smcr_smc_enabled)
		smcr_info("same-host SMC off (SMCR_SAMEHOST=0) and no SMC-R peers (SMCR_PEERS):"
			  " every connection stays TCP");
}
