/* SPDX-License-Identifier: MIT */
/*
 * Between the files of the SMC glue (smc.h): what the decision, the
 * handshake, the listeners, the data calls and the endings share, and what
 * readiness (smc_ready.c, smc_poll.c, smc_epoll*.c) and the screen
 * (smc_screen.c) need from them.
 * Nothing here leaves the library (the wrappers are built hidden).
 */
#ifndef SMCR_PRELOAD_SMC_INTERNAL_H
#define SMCR_PRELOAD_SMC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "preload/fdtab.h"

struct smcr_handshake;
struct smcr_sock;
struct smcr_sock_opts;

/* This process (set at start-up and in a forked child). */
extern pid_t smcr_smc_pid;

enum smcr_io_kind {
	SMCR_IO_READ,
	SMCR_IO_WRITE,
	SMCR_IO_POLL, /* poll/epoll saw the socket ready: decide if that is possible now */
};

/* ---- smc.c: state and outcomes every part uses ------------------------------ */

/*
 * Decide a CANDIDATE's mode if this call can: a client once connected, a
 * server from the first bytes it received (or its own first write).
 * 0 (the call goes on, whatever the mode is now) or -errno for the call.
 */
int smcr_smc_settle(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind, bool may_block);

/* The engine socket of an SMC entry this process runs, else NULL. */
struct smcr_sock *smcr_smc_sock_of(struct smcr_fd_entry *e);
/*
 * A forked child's copy of its parent's SMC connection that reads as reset
 * here.  Its first use asks the parent to go on over TCP (smc_lifecycle.c):
 * then it is plain TCP and this says false.
 */
bool smcr_smc_inherited(struct smcr_fd_entry *e);
/* That request: true if `e` is plain TCP now (smc_lifecycle.c). */
bool smcr_smc_fork_follow(struct smcr_fd_entry *e, struct smcr_sock *s);

/* poll one fd through libc; 1 ready, 0 timeout, -errno. */
int smcr_smc_wait_fd(int fd, short events, int timeout_ms);

static inline void smcr_smc_add_flags(struct smcr_fd_entry *e, unsigned flags)
{
	atomic_fetch_or_explicit(&e->flags, flags, memory_order_relaxed);
}

static inline void smcr_smc_clear_flags(struct smcr_fd_entry *e, unsigned flags)
{
	atomic_fetch_and_explicit(&e->flags, ~flags, memory_order_relaxed);
}

/* The decision reads with SO_RCVLOWAT 1 and no SO_PEEK_OFF on the kernel's socket (smc.c). */
void smcr_smc_read_options_lend(int fd, struct smcr_fd_entry *e);

/*
 * A socket option the program set that keeps the connection TCP: its reason
 * (SO_ZEROCOPY: ZEROCOPY, timestamps: TIMESTAMP) and in *why (if not NULL)
 * what the log says; 0 if none.
 */
uint32_t smcr_smc_option_keeps_tcp(const struct smcr_fd_entry *e, const char **why);

/* Does this process run the connection `s` of entry `e`? (may take it over: a forked child) */
bool smcr_smc_entry_owns(struct smcr_fd_entry *e, struct smcr_sock *s);
/* The entry's decision is one thread's at a time: false if it stays busy too long. */
bool smcr_smc_decision_lock(struct smcr_fd_entry *e);
void smcr_smc_decision_unlock(struct smcr_fd_entry *e);
/* A close-on-exec duplicate of the TCP socket for the engine, or -1. */
int smcr_smc_engine_dup(int fd);
/* Closes a duplicate smcr_smc_engine_dup() made (and forgets its label). */
void smcr_smc_engine_close(int efd);
/* SO_RCVTIMEO / SO_SNDTIMEO in ms, 0 = none. */
int smcr_smc_timeval_ms(int fd, const struct smcr_fd_entry *e, int name);
/* The socket's timeouts, for the engine's blocking calls. */
void smcr_smc_apply_timeouts(int fd, const struct smcr_fd_entry *e, struct smcr_sock *s);
/* The options for one connection's engine socket efd. */
struct smcr_sock_opts smcr_smc_conn_opts(int efd);

/*
 * The connection stays TCP for `reason` (counted in the stats if `count`);
 * `peer`: its peer address if the caller read it already.
 */
void smcr_smc_fallback_peer(int fd, struct smcr_fd_entry *e, uint32_t reason, bool count,
			    const char *role, const char *why,
			    const struct sockaddr_storage *peer);
void smcr_smc_fallback(int fd, struct smcr_fd_entry *e, uint32_t reason, bool count,
		       const char *role, const char *why);
/* Reset the TCP connection of fd (connect(AF_UNSPEC)): true if the kernel did. */
bool smcr_smc_tcp_reset(int fd);
/* A hard handshake error: the connection is reset. */
void smcr_smc_fail_connection(int fd, struct smcr_fd_entry *e, int err, const char *role);
/* The handshake on efd succeeded: the entry runs SMC on `s`. */
void smcr_smc_go_smc(int fd, struct smcr_fd_entry *e, int efd, struct smcr_sock *s,
		     const char *role);
/* The result of smcr_sock_connect/accept on efd. Returns 0 or -errno to report. */
int smcr_smc_take_handshake(int fd, struct smcr_fd_entry *e, int efd, int rc,
			    struct smcr_sock *s, const char *role);

/* What one step of a decision tells smcr_smc_settle(); else -errno for the call. */
enum {
	SMCR_SMC_DECIDED = 0,   /* or undecided for now: the call goes on */
	SMCR_SMC_WAIT_DATA = 1, /* a blocking read must wait for the client's first bytes */
};

/* ---- smc_client.c, smc_server.c: the decision's two sides -------------------- */

/* SMCR_SPEAK_FIRST_WAIT_MS: a server's first write waits this long for a Proposal. */
extern int smcr_smc_speak_first_wait_ms;

int smcr_smc_client_decide(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind,
			   bool may_block);
int smcr_smc_server_decide(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind,
			   bool may_block);
/*
 * An accepted connection not classified yet leaves this process's hands
 * (`reason`: HANDOFF or CONFINED): settled so that its next owner reads a
 * clean TCP stream.
 */
void smcr_smc_settle_unread(int fd, struct smcr_fd_entry *e, uint32_t reason, const char *why);

/* ---- smc_handshake.c: the handshake in steps --------------------------------- */

/*
 * An accepted socket whose server handshake is in progress (this process
 * runs it): the fd that stands for it in poll/epoll sets (made now if need
 * be), else -1.  The handshake's result comes at the next smcr_smc_settle().
 */
int smcr_smc_handshake_fd(struct smcr_fd_entry *e);
/*
 * Before the socket leaves this image (exec, SCM_RIGHTS): a server handshake
 * still in progress ends now, waiting for the client up to the engine's
 * bound, as SMC, TCP or a reset, so that no later owner can read the
 * client's Confirm as data.
 */
void smcr_smc_finish_handshake(int fd, struct smcr_fd_entry *e);

/* A handshake is under way: take the peer's answer if it has come. */
int smcr_smc_handshake_step(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind,
			    bool may_block);
/*
 * A Proposal is in (in the socket, or `prop_len` bytes at `prop` the caller
 * took off it): answer it.  SMCR_HANDSHAKE_PENDING, or what the call returns.
 */
int smcr_smc_handshake_start(int fd, struct smcr_fd_entry *e, int efd, const void *prop,
			     size_t prop_len, enum smcr_io_kind kind, bool may_block);
/* The entry keeps the handshake hs on efd; what the caller returns now. */
int smcr_smc_handshake_wait(int fd, struct smcr_fd_entry *e, int efd, struct smcr_handshake *hs,
			    enum smcr_io_kind kind, bool may_block);
/* The entry is released with its handshake in progress: give it up. */
void smcr_smc_handshake_release(struct smcr_fd_entry *e);

/*
 * A server's first read of an accepted connection, made straight into the
 * program's buffer (smc_server.c): bytes or -errno with *taken set, else
 * the call goes on as any other (a handshake may be under way).
 */
ssize_t smcr_smc_server_first_read(int fd, struct smcr_fd_entry *e, struct msghdr *msg,
				   int flags, bool *taken);

/* ---- smc_listen.c: listeners ------------------------------------------------- */

struct listener_reg;
/* Is a peer at this address a listener of this process? */
bool smcr_smc_peer_in_this_process(const struct sockaddr_storage *peer);
/* One reference to a listener's registration goes; the last unregisters it. */
void smcr_smc_listener_put(struct listener_reg *r);
/* A decided connection no longer keeps its listener registered. */
void smcr_smc_drop_listener_ref(struct smcr_fd_entry *e);
/* Is the entry a listener that this process registered (not one that followed fork)? */
bool smcr_smc_registered_here(const struct smcr_fd_entry *e);
/* Fork handlers: the table of this process's listeners. */
void smcr_smc_listeners_lock(void);
void smcr_smc_listeners_unlock(void);

/* ---- smc_close.c: endings ---------------------------------------------------- */

/* The fd table's release hook (fdtab.h): the last reference to an entry is gone. */
void smcr_smc_release_entry(struct smcr_fd_entry *e);

/* ---- smc_confine.c ------------------------------------------------------------ */

/*
 * No new SMC decision: the process confines its system calls, or is about to,
 * or set up io_uring.
 */
bool smcr_smc_confined_now(void);
/* Then: the reason its connections stay TCP for (CONFINED, IOURING), and *why in words. */
uint32_t smcr_smc_aside_reason(const char **why);

/* ---- smc_screen.c ------------------------------------------------------------- */

/*
 * An accepted connection of a confined process, TCP already: its reads
 * take a Proposal at its start off the stream (and decline it) before the
 * program sees a byte.
 */
void smcr_smc_screen_start(struct smcr_fd_entry *e);
/*
 * The start of a Proposal (n bytes, fewer than its length) that a server's
 * first read took off the stream: the socket's reads now take its rest and
 * decline it for `reason` (or hand the bytes out as data if they turn out
 * not to be one).  The connection is TCP (the caller recorded why).  False:
 * no memory to keep them, nothing changed.
 */
bool smcr_smc_screen_take(struct smcr_fd_entry *e, const void *start, size_t n, uint32_t reason);
/* A receive call on a SCREEN socket: as recvmsg(2). */
ssize_t smcr_smc_screen_recvmsg(int fd, struct msghdr *msg, int flags);
/* The entry is released: its bytes go. */
void smcr_smc_screen_release(struct smcr_fd_entry *e);

/* ---- smc_ready.c: readiness as poll and epoll both see it --------------------- */

/* An engine poll mask, cut to what a waiter asked for (errors always). */
uint32_t smcr_smc_wanted_mask(unsigned mask, uint32_t events);
/* The engine's poll mask of s. */
unsigned smcr_smc_sock_poll(struct smcr_sock *s);
/* The kernel's own readiness of a TCP fd now, cut to `want`. */
uint32_t smcr_smc_tcp_mask(int fd, uint32_t want);
/* Tell the engine which events outside waiters want. */
void smcr_smc_update_interest(struct smcr_fd_entry *e, struct smcr_sock *s);
struct smcr_spin_gov;
/* A spin ended (won: it found something): the governor learns, the stats count. */
void smcr_smc_spin_result(struct smcr_spin_gov *gov, bool won);

/* ---- smc_epoll.c: epoll registrations ------------------------------------------ */

/* The entry just reached SMC: its epoll registrations move to the doorbell. */
void smcr_smc_epoll_move(struct smcr_fd_entry *e, struct smcr_sock *s);
/* A server handshake began: registrations move to its fd; it ended on TCP: back. */
void smcr_smc_epoll_watch_handshake(struct smcr_fd_entry *e, int hs_fd);
void smcr_smc_epoll_watch_tcp(struct smcr_fd_entry *e);
/* The connection went on as plain TCP: its doorbell registrations move to the TCP socket. */
void smcr_smc_epoll_leave_doorbell(struct smcr_fd_entry *e, struct smcr_sock *s);
/* The entry is released: drop its records (and its doorbell registrations if s). */
void smcr_smc_epoll_forget(struct smcr_fd_entry *e, struct smcr_sock *s);
/* The lock every use of an epoll record holds; never across a blocking call. */
void smcr_smc_epoll_lock(void);
void smcr_smc_epoll_unlock(void);
void smcr_smc_epoll_reinit_child(void);

#endif /* SMCR_PRELOAD_SMC_INTERNAL_H */
