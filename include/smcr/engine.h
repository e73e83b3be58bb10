/* SPDX-License-Identifier: MIT */
/*
 * The engine seam: a socket-like API on an opaque SMC connection handle.
 *
 * The interposer (src/preload) calls only what is declared here; no wire,
 * CLC, CDC or transport type crosses this header.  The application's fd stays
 * the real TCP socket (design §3): the engine borrows it for the CLC handshake
 * and for teardown (FIN, or RST on abort), never closes it, and never looks at
 * its O_NONBLOCK flag: the caller says "do not block" with MSG_DONTWAIT.
 *
 * Return conventions (as net/smc's smc_connect_decline_fallback()):
 *   0        SMC mode established, *out holds the connection;
 *   > 0      fall back to TCP; the value is the SMC decline reason
 *            (SMCR_CLC_DECL_* of smcr/decline.h, e.g. PEERNOSMC: the
 *            engine and its embedder name reasons from that one list), and the
 *            TCP stream is clean: no CLC byte is left for the application;
 *   < 0      -errno, a hard error: the TCP stream state is unknown and the
 *            caller must fail (reset) the connection.
 * Data calls return bytes or -errno (never set errno themselves).
 *
 * Threads: every call on one struct smcr_sock may run concurrently with any
 * other call on it (per-connection lock), except smcr_sock_close() and
 * smcr_sock_abort(), which free it: the caller keeps a reference count and
 * calls them once no other call is running or can start.
 *
 * Readiness (design §5): smcr_sock_ready_fd() is a kernel-visible fd, owned by
 * the engine, that polls readable whenever the connection may have become
 * readable, writable (for an interest announced with smcr_sock_set_interest())
 * or closed/reset, including peer death with no goodbye.  It can go into the
 * application's epoll/poll/select set in place of the TCP fd with EPOLLIN;
 * after a wake-up call smcr_sock_poll() for the real event mask.  Wake-ups may
 * be spurious; smcr_sock_poll() also re-arms the fd, so level-triggered and
 * edge-triggered use both work.
 */
#ifndef SMCR_ENGINE_H
#define SMCR_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "smcr/decline.h"

struct smcr_sock;
struct smcr_listener;
struct epoll_event;
struct msghdr;
struct pollfd;

/* ---- the engine's environment --------------------------------------------- */

/*
 * The libc entry points the engine uses, as its embedder binds them.  An
 * interposer that wraps the public names (LD_PRELOAD) must hand the engine
 * the functions behind its wrappers, or every engine call would enter the
 * wrappers again; a plain program hands it libc's own (src/smcr/standalone.c).
 * X(return type, name, (parameter types)), the signatures of <sys/socket.h>,
 * <unistd.h>, <fcntl.h>, <poll.h>, <sys/epoll.h> and friends.
 */
#define SMCR_LIBC_FUNCS(X)                                                          \
	X(int, socket, (int, int, int))                                             \
	X(int, bind, (int, const struct sockaddr *, socklen_t))                     \
	X(int, listen, (int, int))                                                  \
	X(int, connect, (int, const struct sockaddr *, socklen_t))                  \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int))                 \
	X(int, shutdown, (int, int))                                                \
	X(int, getsockopt, (int, int, int, void *, socklen_t *))                    \
	X(int, setsockopt, (int, int, int, const void *, socklen_t))                \
	X(int, getsockname, (int, struct sockaddr *, socklen_t *))                  \
	X(int, getpeername, (int, struct sockaddr *, socklen_t *))                  \
	X(int, close, (int))                                                        \
	X(int, fcntl, (int, int, ...))                                              \
	X(int, ioctl, (int, unsigned long, ...))                                    \
	X(int, open, (const char *, int, ...))                                      \
	X(int, openat, (int, const char *, int, ...))                               \
	X(ssize_t, read, (int, void *, size_t))                                     \
	X(ssize_t, write, (int, const void *, size_t))                              \
	X(ssize_t, send, (int, const void *, size_t, int))                          \
	X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, \
			    socklen_t))                                             \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int))                      \
	X(ssize_t, recv, (int, void *, size_t, int))                                \
	X(ssize_t, recvmsg, (int, struct msghdr *, int))                            \
	X(int, poll, (struct pollfd *, unsigned long, int))                         \
	X(int, epoll_create1, (int))                                                \
	X(int, epoll_ctl, (int, int, int, struct epoll_event *))                    \
	X(int, eventfd, (unsigned int, int))                                        \
	X(int, pipe2, (int[2], int))                                                \
	X(int, memfd_create, (const char *, unsigned int))                          \
	X(int, timerfd_create, (int, int))                                          \
	X(int, inotify_init1, (int))                                                \
	X(int, prctl, (int, ...))                                                   \
	X(long, syscall, (long, ...))

#define SMCR_LIBC_MEMBER(ret, name, params) ret(*name) params;
struct smcr_libc {
	SMCR_LIBC_FUNCS(SMCR_LIBC_MEMBER)
};
#undef SMCR_LIBC_MEMBER

struct smcr_engine_env {
	struct smcr_libc libc; /* every member set */
	/*
	 * Around calls into third-party code that may call the public libc
	 * names itself (libibverbs and its providers, from the engine's own
	 * threads): an interposer lets such calls pass its wrappers untouched.
	 * NULL: nothing to do.
	 */
	void (*foreign_enter)(void);
	void (*foreign_leave)(void);
	/*
	 * The number the application knows an engine fd by (the engine works
	 * on duplicates of the application's sockets): what logs and stats
	 * records name.  NULL: the fd itself.
	 */
	int (*fd_label)(int fd);
};

/*
 * Before any other engine call, once per process image (idempotent: later
 * calls change nothing).  The engine keeps a copy of `env`.
 */
void smcr_engine_init(const struct smcr_engine_env *env);

/*
 * fork, from the embedder's one pthread_atfork registration: prepare takes
 * every engine lock in the engine's one order (after the embedder's own
 * locks), parent releases them, child re-creates them and forgets what the
 * parent's threads own (SMC-R link groups, helper threads).
 */
void smcr_engine_fork_prepare(void);
void smcr_engine_fork_parent(void);
void smcr_engine_fork_child(void);

/*
 * vfork: a child is about to run on this process's memory and may call the
 * engine (to settle a socket before its exec).  Whatever the engine creates
 * lazily that such a call needs (the stats file) is created now, in the
 * parent: the child's would carry the child's pid and vanish at its exec.
 */
void smcr_engine_vfork_prepare(void);

/*
 * seccomp (design §8): the process is about to confine its own system calls,
 * with a classic BPF filter program (prog, len), the strict mode (read, write,
 * exit, sigreturn), or a filter the embedder cannot see (inherited across
 * exec).  Called before the kernel applies it, while every call is still
 * allowed: the engine runs the program over each call it may still make,
 * publishes what it would publish lazily, and from then on makes only the
 * calls the filters allow (their denials add up, as the kernel stacks
 * filters); it makes no new connection.  The kernel refused the filter:
 * smcr_engine_confine_undo() forgets it again.
 */
struct sock_filter;
enum smcr_confine_kind { SMCR_CONFINE_FILTER, SMCR_CONFINE_STRICT, SMCR_CONFINE_UNKNOWN };
void smcr_engine_confine(enum smcr_confine_kind kind, const struct sock_filter *prog,
			 unsigned len);
void smcr_engine_confine_undo(void);
/*
 * A filter confined as SMCR_CONFINE_UNKNOWN (its program could not be read
 * safely before the kernel call: a filter in force may deny the one call
 * that reads it without the risk of a fault) has applied, with program
 * (prog, len), which the kernel has just read: the engine's denials become
 * what that program denies, added to those of the filters before it.
 * Called after the kernel applied it, so it makes no system call the
 * program may deny.
 */
void smcr_engine_confine_applied(const struct sock_filter *prog, unsigned len);
/*
 * Has the process confined its system calls?  (A new TCP socket then passes
 * through.)  Asked before the engine's first call that plain TCP would not
 * make: the first time, where the process runs under a seccomp filter it
 * inherited across exec, a child finds out what that filter allows
 * (src/smcr/confine_probe.c).
 */
bool smcr_engine_confined(void);
/* The same, from what is known already: for paths that make no call of the engine's own. */
bool smcr_engine_confined_known(void);
/*
 * Which of the calls that move a TCP socket's bytes the process's filter
 * lets through (the calls confine.c evaluates it for): read(2), write(2),
 * and sendto(2) with MSG_DONTWAIT | MSG_NOSIGNAL.  All of them while not
 * confined.
 */
enum smcr_engine_io { SMCR_ENGINE_IO_READ, SMCR_ENGINE_IO_WRITE, SMCR_ENGINE_IO_SEND };
bool smcr_engine_io_allowed(enum smcr_engine_io io);

/*
 * The engine's fds (rendezvous sockets, rings, doorbells, epoll sets, its
 * duplicates of TCP sockets) are close-on-exec and live above the program's
 * soft RLIMIT_NOFILE where the hard limit leaves room (the engine raises the
 * soft limit for the moment of each move): they never take a number the
 * program could have had, so a program near its limit meets EMFILE exactly
 * where it would on plain TCP, and a loop that closes the numbers below its
 * limit leaves them alone.  Where there is no room above, they live at or
 * above SMCR_ENGINE_FD_FLOOR, out of the program's low range (programs size
 * tables by their own fd count: wrk's event loop holds 10 + 3 x connections
 * entries), and the engine takes no new fd from the last quarter of the
 * program's numbers.
 */
#define SMCR_ENGINE_FD_FLOOR 256

/*
 * A close-on-exec copy of `fd` where the engine keeps its own fds (above);
 * -1 (errno set) if there is none to be had.
 */
int smcr_engine_fd_dup(int fd);
/*
 * The embedder holds this across the program's own changes of
 * RLIMIT_NOFILE (setrlimit, prlimit on itself) and across exec, so the
 * engine's momentary raise of the soft limit is never what the program
 * reads, keeps, or passes to the image it executes.
 */
void smcr_engine_fd_limit_lock(void);
void smcr_engine_fd_limit_unlock(void);
/*
 * Brackets one connection's set-up on the calling thread (they nest): its fd
 * moves after the first reuse the limits the first found where they leave
 * no room above the program's numbers, instead of asking the kernel again.
 */
void smcr_engine_fd_scope_begin(void);
void smcr_engine_fd_scope_end(void);

/* Per-connection choices; zero-initialise for the defaults. */
struct smcr_sock_opts {
	uint32_t rcvbuf;    /* own RMB size wish (rounded up to 16 KiB << n); 0 = 1 MiB
			     * over shared memory, 256 KiB over RDMA */
	uint32_t sndbuf;    /* reserved for transports with a send buffer; 0 = default */
	int handshake_ms;   /* CLC wait per message; 0 = 6000 (Linux's CLC_WAIT_TIME) */
	int spin_us;        /* before sleeping, poll up to this long while the peer
			     * is running on another CPU; 0 = never (the zero default;
			     * the preload passes SMCR_SPIN_US, default 20) */
	/* a client's smcr_sock_connect_plan(), taken for this socket; NULL = the
	 * client handshake asks the policy itself */
	const struct smcr_client_plan *plan;
	/* a server's Proposal the caller took off the stream itself (its
	 * program's first read, made straight into the program's buffer, costs
	 * no peek), proposal_len bytes; NULL = smcr_sock_accept_start() reads
	 * it from the socket */
	const void *proposal;
	size_t proposal_len;
};

/* ---- server side ---------------------------------------------------------- */

/*
 * Announce in the host-local registry that `listen_fd` (a listening TCP socket)
 * runs smcr, so local clients will propose SMC to it (design §4).  The entry
 * lives until smcr_listener_unregister() or until every process holding it has
 * exited (it is an abstract UNIX socket, close-on-exec).  0 or -errno;
 * -ECANCELED when a rule keeps the listener TCP (src/common/rules.h), with
 * *out its smcr_listener_unserved() (or NULL): nothing registered, unregister
 * it all the same.  A name that is taken, or that could not be made for want
 * of fds or memory, still gives a listener: smcr_listener_needs_claim() says
 * it has no name yet.
 */
int smcr_listener_register(int listen_fd, struct smcr_listener **out);
void smcr_listener_unregister(struct smcr_listener *l);
/*
 * A listener smcr does not serve (a rule, or a process that confines its
 * system calls): never registered nor announced; it only shows in smcr-stat
 * -l as not served, because of `why`, until smcr_listener_unregister() when
 * the socket closes.  No system call but getsockname, and none where the
 * process's filter denies it (the record then has no address).  NULL if not
 * a TCP socket or out of memory.  Keeps errno.
 */
struct smcr_listener *smcr_listener_unserved(int listen_fd, const char *why);
/*
 * A listener registered while another process held the name (prefork, or a
 * new nginx master while the old one lives), or while fds ran short, takes
 * the name now if it can: true if it did.  Nothing to do (false) once it holds it.  Keeps errno.
 */
bool smcr_listener_claim(struct smcr_listener *l);
/* Does the listener still have to claim the name (no system call)? */
bool smcr_listener_needs_claim(const struct smcr_listener *l);
/*
 * The listener's socket goes to a program that will not run smcr (exec,
 * spawn): no local client may propose to it any more, whichever process
 * holds the registration (every process it followed by fork), and its
 * SYN-ACKs stop announcing SMC.  `why` is shown by smcr-stat -l.  Keeps errno.
 */
void smcr_listener_revoke(struct smcr_listener *l, int listen_fd, const char *why);
/*
 * The listening socket took an option that lets other listeners share its
 * port (SO_REUSEPORT, a bound device): clients stop trusting what they
 * learnt about it and look at every listener on the port again.
 */
void smcr_listener_share(struct smcr_listener *l);

/*
 * A listener may soon take SMC-R Proposals: the transport's one-time set-up
 * (loading the RDMA libraries) starts now in the background, unless the
 * configuration rules SMC-R out.  Never blocks; cheap after the first call.
 */
void smcr_sock_listen_prepare(void);
struct sockaddr;
/*
 * A client socket is about to connect to `dst`: if it may become SMC-R (the
 * peer allow-list names `dst`, or the option mode marked the socket), the
 * same set-up starts now, so that the RDMA libraries load while the TCP
 * handshake runs rather than before the CLC Proposal.  Never blocks; cheap
 * after the first call that started it.
 */
void smcr_sock_connect_prepare(const struct sockaddr *dst);

/*
 * The learned policy (src/smcr/learn.h), before connect() to `dst` (`len`
 * bytes): 0 = the connection may be proposed SMC, or the reason it stays
 * TCP (SMCR_CLC_DECL_SHORTFLOWS: its destination's recent connections were
 * all too short for SMC to repay its set-up; SMCR_CLC_DECL_RULE: a rule of
 * the rules file says tcp). Costs no system call, and none
 * at all when SMCR_LEARN=0 or `dst` is neither on this host's loopback nor in
 * SMCR_PEERS.
 */
int smcr_sock_connect_learned(const struct sockaddr *dst, socklen_t len);

enum smcr_classify {
	SMCR_CLASSIFY_TCP = 0,       /* first bytes are not a CLC Proposal: plain TCP */
	SMCR_CLASSIFY_NEED_MORE = 1, /* a valid Proposal prefix so far, the rest in flight */
	SMCR_CLASSIFY_PROPOSAL = 2,  /* an exact, complete Proposal: run smcr_sock_accept() */
	SMCR_CLASSIFY_EOF = 3,       /* peer closed before sending anything */
	SMCR_CLASSIFY_NOTHING = 4,   /* no byte yet: the peek itself said EAGAIN */
};

/*
 * Peek (never consume) the first bytes of an accepted connection.  Never
 * blocks.  Returns enum smcr_classify, or -errno for a socket error.
 */
int smcr_sock_classify(int tcp_fd);

/*
 * The first bytes of an accepted connection as read off the stream, where
 * peeking is not an option (a confined process: smc.c's screen): TCP if
 * buf[0..avail) cannot begin a CLC Proposal; NEED_MORE while it may, *need
 * then how many bytes the message has as far as they tell (a header's
 * worth before the header is all there); PROPOSAL once it is a complete, valid
 * Proposal, *need its exact length (what follows it is the client's data).
 */
int smcr_clc_screen(const void *buf, size_t avail, size_t *need);

/* The longest CLC Proposal: a buffer of this size holds any. */
#define SMCR_CLC_SCREEN_MAX 652

/* A CLC Decline giving `reason`, encoded into buf[0..cap): its length, 0 if it does not fit. */
size_t smcr_clc_decline_encode(uint32_t reason, void *buf, size_t cap);

/*
 * Server handshake after SMCR_CLASSIFY_PROPOSAL, in steps that never wait
 * for the client (as the kernel's listen worker runs it beside the
 * application, design §4):
 *
 * smcr_sock_accept_start() consumes the Proposal and answers it: a Decline
 * (returns the reason: the stream is TCP from here on), or an Accept
 * (returns SMCR_HANDSHAKE_PENDING and *hs).  A same-host Proposal whose source
 * is not an address of this host is declined at once (SMCR_CLC_DECL_NOTLOCAL).
 * Nothing in it waits for the peer.
 *
 * smcr_handshake_step() takes what the peer sent since (a server's: the
 * client's Confirm or Decline, and the transport's own rendezvous; a
 * client's: smcr_sock_connect_start() below), waiting for it until
 * `deadline` (CLOCK_MONOTONIC ms; <= now: not at all).  SMCR_HANDSHAKE_PENDING
 * while the client has not finished; else the result as smcr_sock_accept()'s
 * (0 and *out, > 0 fallback, < 0 hard error).  A peer that has not sent its
 * next message by the CLC wait bound (opts->handshake_ms since the Accept; a
 * client's server, 10 s or that bound since the Proposal) does not end the
 * connection: SMC is given up (the transport's part released, the bound's
 * timer stopped) and the handshake goes on PENDING until that message comes,
 * which is then taken off the stream and answered with a Decline if it offers
 * SMC; the result is the fallback TIMEOUT_AL (server) or TIMEOUT_CL (client).
 * Either way the caller then calls smcr_handshake_free().
 *
 * smcr_handshake_fd() is a pollable fd (made on first use, owned by the
 * handshake) that turns readable when a step may make progress: the
 * client's next bytes or hang-up, the transport's rendezvous, or the wait
 * bound's end.  It can stand in the application's epoll set for the TCP fd
 * as smcr_sock_ready_fd() does.  -errno if it cannot be made.
 *
 * Threads: one call at a time on one handshake (the caller serialises).
 */
#define SMCR_HANDSHAKE_PENDING 1
struct smcr_handshake;
int smcr_sock_accept_start(int tcp_fd, const struct smcr_sock_opts *opts,
			   struct smcr_handshake **hs);
int smcr_handshake_step(struct smcr_handshake *hs, int64_t deadline, struct smcr_sock **out);
int smcr_handshake_fd(struct smcr_handshake *hs);
/* Release what the handshake holds (after a final step, or to give it up: sends nothing). */
void smcr_handshake_free(struct smcr_handshake *hs);
/* fork: a child's copy of its parent's handshake; let go of the child's copies only. */
void smcr_handshake_forget_inherited(struct smcr_handshake *hs);

/*
 * The whole server handshake in one call (start, then steps until done):
 * blocks until the client's last word (after the CLC wait bound, as a read
 * waits for data: see smcr_handshake_step()).  For callers that own a thread
 * for it.
 */
int smcr_sock_accept(int tcp_fd, const struct smcr_sock_opts *opts, struct smcr_sock **out);

/*
 * For a connection already classified TCP (e.g. the server wrote first): if a
 * complete CLC Proposal is at the head of the stream, consume it and send a
 * Decline so the application never sees it.  Returns 1 if one was declined,
 * 0 if none is there, -errno on error.  Never blocks.
 */
int smcr_sock_decline_late_proposal(int tcp_fd, uint32_t reason);
/*
 * The same for a Proposal the caller took off the stream itself: only the
 * Decline is sent (and counted).  0 or -errno.
 */
int smcr_sock_decline_taken_proposal(int tcp_fd, uint32_t reason);

/*
 * Is the peer of a connected TCP socket on this host: a loopback address, or
 * one of this host's own (the kernel routes such a connection over loopback
 * and makes that address the source too)?  At most two system calls.
 */
bool smcr_peer_is_local(int tcp_fd);

/*
 * Is the peer of an accepted connection a host listed in SMCR_PEERS (and not
 * denied), i.e. one that runs smcr and may propose SMC-R?  A server that
 * writes first waits for such a peer's Proposal as for a local one's.
 */
bool smcr_peer_may_propose(int tcp_fd);

/* ---- client side ---------------------------------------------------------- */

/*
 * Does the peer of a connected TCP socket run smcr on this host (registered
 * listener, local address)?  Only then may smcr_sock_connect() propose.
 */
bool smcr_peer_is_registered(int tcp_fd);
/* The same with the peer's address known (getpeername() of `tcp_fd`). */
bool smcr_peer_is_registered_at(int tcp_fd, const struct sockaddr_storage *peer);

/*
 * The client's policy (below) asked before the engine takes the socket: a
 * connection that stays TCP then costs no duplicate fd, no socket options
 * read, no connection state.  0 and *plan if it may propose, which
 * smcr_sock_connect() and smcr_sock_connect_start() then follow through
 * opts->plan without asking again; else the fallback reason, not counted
 * (the caller reports the fallback).  `peer`: the socket's peer address as
 * getpeername() gave it, or NULL to have it asked.
 */
struct smcr_client_plan {
	const struct smcr_transport_ops *ops;
};
int smcr_sock_connect_plan(int tcp_fd, const struct sockaddr_storage *peer,
			   struct smcr_client_plan *plan);

/*
 * Client handshake on a connected TCP socket: Proposal, Accept, Confirm.
 * Asks the transport policy first (src/smcr/policy.h: SMCR_TRANSPORT, the
 * registry via smcr_peer_is_registered(), SMCR_PEERS/SMCR_PEERS_DENY, the
 * negative cache): for a peer it may not propose to it returns the positive
 * reason (SMCR_CLC_DECL_PEERNOSMC; NOSMCRDEV when our address has no RDMA
 * device) without sending anything, so callers need not (and, on the
 * connection-setup path, should not) check twice.
 */
int smcr_sock_connect(int tcp_fd, const struct smcr_sock_opts *opts, struct smcr_sock **out);
/*
 * The same in steps that never wait for the server, for a socket whose
 * application must not block (a non-blocking one, or one it polls): the
 * policy's answer, or the Proposal sent and SMCR_HANDSHAKE_PENDING with *hs;
 * then smcr_handshake_step() takes the server's answer once it is all there
 * (Accept: attach and Confirm; Decline: the reason), and smcr_handshake_fd()
 * turns readable when it arrives or the wait bound ends (see the server's
 * handshake below for both).
 */
struct smcr_handshake;
int smcr_sock_connect_start(int tcp_fd, const struct smcr_sock_opts *opts,
			    struct smcr_handshake **hs);

/* ---- RFC 7609 option mode (src/smcr/tcpopt.c, design §4) ------------------- */

/*
 * When smcr's cgroup sock_ops program is attached (smc_run as root, or
 * smcr-bpf attach), SYN and SYN-ACK carry SMC's TCP option as the kernel's
 * AF_SMC sockets do.  Detected once per process (one bpf(2) call); when it is
 * not there every call below returns at once.  All keep errno.
 */
enum smcr_tcpopt_peer {
	SMCR_TCPOPT_UNKNOWN = 0, /* mode off, socket not marked, or not seen opening */
	SMCR_TCPOPT_NO = 1,      /* the peer's SYN / SYN-ACK had no SMC option */
	SMCR_TCPOPT_YES = 2,     /* the peer announced SMC */
};

bool smcr_tcpopt_enabled(void);

/*
 * Before connect() to `dst`: our SYN announces SMC, unless the policy would not
 * propose to `dst` (SMCR_TRANSPORT=shm, SMCR_PEERS_DENY, negative cache).  A
 * promise: a kernel SMC server that answers expects a CLC Proposal, and
 * smcr_sock_connect() then proposes (policy.c).
 */
struct sockaddr;
void smcr_tcpopt_mark_connect(int tcp_fd, const struct sockaddr *dst);

/* Before listen(): this listener's SYN-ACKs answer an announcing SYN. */
void smcr_tcpopt_mark_listen(int listen_fd);

/*
 * The listener is no longer served by smcr (before it is handed to an image
 * that may not run smcr: exec, fd passing): its SYN-ACKs stop announcing SMC
 * at once.  The mark also dies with the socket.  Keeps errno.
 */
void smcr_tcpopt_unserve(int listen_fd);

/* Connected or accepted socket: did the peer's SYN / SYN-ACK carry the option? */
enum smcr_tcpopt_peer smcr_tcpopt_peer(int tcp_fd);
const char *smcr_tcpopt_peer_str(enum smcr_tcpopt_peer p);

/* ---- data ------------------------------------------------------------------ */

/*
 * Send: flags MSG_DONTWAIT (partial result or -EAGAIN) and MSG_NOSIGNAL are
 * honoured; without MSG_DONTWAIT the call completes fully or fails (a short
 * count only if it was interrupted after some bytes by a reset).  -EPIPE after
 * shutdown(SHUT_WR)/close by us, -ECONNRESET after a reset; the caller raises
 * SIGPIPE unless MSG_NOSIGNAL.
 */
ssize_t smcr_sock_send(struct smcr_sock *s, const void *buf, size_t len, int flags);
ssize_t smcr_sock_sendv(struct smcr_sock *s, const struct iovec *iov, int iovcnt, int flags);

/*
 * Receive: MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT.  0 at EOF (peer shut down
 * writing and everything was read), -EAGAIN when nothing is there and the
 * caller must not block, -ECONNRESET after an abort.  MSG_OOB: -EINVAL.
 */
ssize_t smcr_sock_recvv(struct smcr_sock *s, const struct iovec *iov, int iovcnt, int flags);

/*
 * SO_RCVTIMEO / SO_SNDTIMEO in milliseconds (0 = block forever): a blocking
 * call that waited that long returns what it has, or -EAGAIN.
 */
void smcr_sock_set_timeouts(struct smcr_sock *s, int rcv_ms, int snd_ms);

/*
 * SO_RCVLOWAT as the application set it (1 = none): a blocking read waits
 * for that many bytes (at most what it asks for), and the connection polls
 * readable only once they are in (or at its end), as over TCP.  The ring
 * honours at most half its size, as Linux half a locked receive buffer.
 */
void smcr_sock_set_rcvlowat(struct smcr_sock *s, int lowat);

/*
 * SO_PEEK_OFF (< 0 = off, as Linux keeps it): a MSG_PEEK read starts that
 * far into the unread bytes and moves the offset on by what it returns; a
 * read that takes bytes moves it back by as many (not below 0).
 */
void smcr_sock_set_peek_off(struct smcr_sock *s, int off);
int smcr_sock_peek_off(struct smcr_sock *s);

/* ---- readiness and state --------------------------------------------------- */

int smcr_sock_ready_fd(const struct smcr_sock *s);

/* Events (POLLIN/POLLOUT) some waiter outside the engine waits for. */
void smcr_sock_set_interest(struct smcr_sock *s, unsigned events);

/*
 * Send and receive may leave the ready fd readable for what they consumed
 * (a spurious wake-up, cleared by the next smcr_sock_poll()).  A caller about
 * to wait on a set that holds the fd clears it first with this, and saves
 * the wake-up.
 */
void smcr_sock_settle(struct smcr_sock *s);

/*
 * Process pending control messages and return the current poll mask:
 * POLLIN (data or EOF), POLLOUT, POLLRDHUP (peer done writing), POLLHUP (both
 * directions shut), POLLERR (reset).  Never blocks.
 */
unsigned smcr_sock_poll(struct smcr_sock *s);

/*
 * Bounded spin for waiters outside the engine (poll, epoll): is the
 * peer on a CPU right now (false when unknown, e.g. over verbs), and tell the
 * peer we are about to sleep / are awake again so it does not spin on us.
 * Lock-free, no system call.
 */
bool smcr_sock_peer_running(const struct smcr_sock *s);
void smcr_sock_set_sleeping(struct smcr_sock *s, bool sleeping);

/* SO_ERROR: the pending error (positive errno) and clear it; 0 if none. */
int smcr_sock_take_error(struct smcr_sock *s);

/* FIONREAD / SIOCOUTQ: bytes readable now / bytes sent but not yet consumed. */
size_t smcr_sock_readable_bytes(struct smcr_sock *s);
/* TCP_INQ's TCP_CM_INQ after a read: bytes left, or 1 at the end of the stream if none. */
int smcr_sock_inq(struct smcr_sock *s);
size_t smcr_sock_unacked_bytes(struct smcr_sock *s);

/* SO_RCVBUF / SO_SNDBUF: own receive ring and the peer's ring we write into. */
uint32_t smcr_sock_rcvbuf(const struct smcr_sock *s);
uint32_t smcr_sock_sndbuf(const struct smcr_sock *s);

/* The connection's mode as logs and smcr-stat name it: "smc-shm" or "smc-r". */
const char *smcr_sock_mode_name(const struct smcr_sock *s);

/* Same host (shared memory), not SMC-R. */
bool smcr_sock_same_host(const struct smcr_sock *s);

/*
 * The connection's TCP socket leaves for a program or a process outside the
 * connection (exec of a program that inherits it, SCM_RIGHTS): this end goes
 * on over TCP from here, in both directions, and the peer follows without
 * losing or repeating a byte (design §8).  Every holder's copy becomes TCP.
 * 0, or -ENOTSUP when the transport or the peer cannot (the kernel's SMC;
 * an smcr peer of an older version): then only a reset ends it cleanly.
 * `reason` (an SMCR_CLC_DECL_* code: HANDOFF, OOB, ...) is why, for the
 * connection's stats record; the peer's record says PEERTCP.
 */
int smcr_sock_continue_on_tcp(struct smcr_sock *s, uint32_t reason);

/*
 * Is the connection plain TCP now (this end went on over TCP, or the peer
 * did and nothing of the rings is left to read or send again)?  Then the
 * interposer treats the socket as TCP and lets go of the connection with
 * smcr_sock_close().  No lock, no system call while it is not.
 */
bool smcr_sock_tcp_only(struct smcr_sock *s);

/* ---- teardown ---------------------------------------------------------------- */

/* SHUT_RD, SHUT_WR or SHUT_RDWR (protocol.md §7).  0 or -errno. */
int smcr_sock_shutdown(struct smcr_sock *s, int how);

/*
 * The process exits with the connection open (exit() without close(), which
 * the kernel turns into an orderly close for a TCP socket): what
 * smcr_sock_close() says to the peer (CDC closed, or abort if unread data
 * remains), and the TCP FIN, without freeing anything: other threads may
 * still be inside the engine.  Best effort: false, and nothing done, if
 * another thread holds the connection's lock.  If the peer had closed, its
 * TCP FIN is waited for first (at most 500 ms for the whole exit: a Linux
 * peer frees its connection before that FIN, and the DELETE LINK of
 * smcr_engine_exit() must not find it in the link group).  Then
 * smcr_engine_exit().  A connection another live process holds (it followed
 * fork) is only let go of: nothing is said to the peer.
 */
bool smcr_sock_exit(struct smcr_sock *s);

/*
 * Process exit, after smcr_sock_exit() on the open connections (the
 * embedder's one exit handler calls both, in that order): every SMC-R link
 * group flushes what was posted and tells its peer (DELETE LINK), then the
 * process's stats file goes.
 */
void smcr_engine_exit(void);

/*
 * The application closed its last reference: orderly SMC close (CDC closed,
 * or abort if unread data remains), then TCP FIN; frees everything the engine
 * owns.  Never closes tcp_fd.  `s` is invalid afterwards.  If another live
 * process holds the connection (fork), this process only lets go: its
 * copies are released, the connection runs on there.
 */
void smcr_sock_close(struct smcr_sock *s);

/*
 * Abortive end (fatal error, exec): CDC abort to the peer and an RST on the
 * TCP socket.  reset_now = false: SO_LINGER 0, the RST goes out when the
 * caller closes the fd.  reset_now = true: the RST goes out at once (TCP
 * disconnect, connect(AF_UNSPEC)), for an fd that lives on without the
 * engine, e.g. across exec: it then reads as a reset socket, never hangs.
 * Frees everything; `s` is invalid afterwards.
 */
void smcr_sock_abort(struct smcr_sock *s, bool reset_now);

/*
 * fork (design §8).  A same-host connection follows fork: its state is
 * shared between the processes, every process that inherited it holds it
 * and may use it as its own (each byte goes to whoever reads it, as on one
 * TCP socket), and the last holder's smcr_sock_close() or smcr_sock_exit()
 * is the connection's close; an earlier holder's only lets go of its hold.
 * A holder that vanished without a word (SIGKILL) is let go of by the next
 * one that closes.  An SMC-R connection does not follow fork (RDMA
 * resources are the process's): a child's copy is not held, and its first
 * use asks smcr_sock_fork_follow() to move the connection onto TCP.
 *
 * smcr_sock_held(): does this process hold `s` (it may use it)?  Costs no
 * system call.  A connection the process does not hold must be treated as
 * reset (EPIPE/ECONNRESET) unless smcr_sock_fork_follow() made it plain
 * TCP, never silently as plain TCP, and released with
 * smcr_sock_forget_inherited(): that releases only this process's copies
 * (fds, mappings, memory), sends nothing, and leaves the TCP socket and the
 * holders' connection alone.
 */
bool smcr_sock_held(struct smcr_sock *s);
void smcr_sock_forget_inherited(struct smcr_sock *s);

/*
 * A forked process's first use of an SMC-R connection it does not hold:
 * the process that runs it goes on over TCP (design §8), so this process's
 * copy is the plain TCP socket it shares with it: 0, then treat the socket
 * as TCP and release `s` with smcr_sock_forget_inherited() at its close.
 * -ECONNRESET: it cannot (the peer is the kernel's SMC, the process that
 * runs it is gone or did not answer within seconds; logged once): treat it
 * as reset.  May wait for that process's answer; later calls do not.
 */
int smcr_sock_fork_follow(struct smcr_sock *s);

/*
 * exec or exit of a forked process whose copy of an SMC-R connection it does
 * not hold goes with it (close-on-exec, or the whole process): the process
 * that runs the connection no longer counts it as a holder of the socket, so
 * its own close needs no move onto TCP for this one's sake.  Nothing else
 * is touched (another thread may still be inside the copy; exec and exit
 * wipe it).
 */
void smcr_sock_copy_gone(struct smcr_sock *s);

/*
 * exec with the connection open: the engine's state cannot cross into the
 * new image.  If another live process holds the connection, this process's
 * hold goes (true): nothing is sent, the connection runs on in the others,
 * and the caller must not reset it.  false: this process is its last holder
 * (nothing changed); the caller ends it (smcr_sock_abort(), or a reset).
 */
bool smcr_sock_release_hold(struct smcr_sock *s);

/* Name of a fallback reason ("PEERNOSMC"), or "unknown". */
const char *smcr_fallback_reason_str(int reason);

/*
 * "local ADDR:PORT, peer ADDR:PORT" of a TCP socket, into buf, for log lines
 * (two system calls: never on a data path).  Returns buf.
 */
#define SMCR_CONN_NAME_MAX 112
const char *smcr_conn_name(int tcp_fd, char *buf, size_t size);

/*
 * Count a fallback the engine did not decide itself (e.g. the server
 * classified a connection as plain TCP: SMCR_CLC_DECL_PEERNOSMC), so the
 * published stats show every fallback with its reason.
 */
void smcr_note_fallback(int reason);
/* Count a handshake the interposer ended with a reset, with the reason it had to. */
void smcr_note_handshake_failed(int reason);

/*
 * A connection that runs on plain TCP gets a stats record too (mode, fallback
 * reason, addresses), from the moment the interposer knows until it closes
 * the fd.  NULL if the record table is full (not an error).
 */
struct smcr_tcp_record;
struct smcr_tcp_record *smcr_stats_tcp_open(int tcp_fd, bool server, int reason);
/* The same with addresses known already (NULL: asked of the kernel, a system call each). */
struct smcr_tcp_record *smcr_stats_tcp_open_peer(int tcp_fd, bool server, int reason,
						 const struct sockaddr_storage *local,
						 const struct sockaddr_storage *peer);
/*
 * A client connection kept on TCP before connect() (smcr_sock_connect_learned):
 * its record from the destination alone, with no system call (the local
 * address stays unknown), or NULL.
 */
struct smcr_tcp_record *smcr_stats_tcp_open_dest(int tcp_fd, const struct sockaddr *dst,
						 int reason);
void smcr_stats_tcp_close(struct smcr_tcp_record *rec);

/*
 * This process's counters in one line (SMC connections, fallbacks by
 * reason, handshake errors, resets, bytes): what smcr-stat would have shown
 * of a process whose stats file is gone because it exited.
 */
void smcr_stats_report(char *out, size_t size);

/* A bounded spin (the engine's or the interposer's poll/epoll) ended: `won` if what it waited for came. */
void smcr_stats_spin(bool won);
/* A wait that an SMC socket's ready fd woke found nothing for the application. */
void smcr_stats_wakeup_empty(void);

/*
 * A configuration problem (a bad setting, a rules file not understood):
 * `message` at warn level once per user session rather than once per
 * process, so that a wrapper spawning many processes says it once (the
 * marker lives in the user's private stats directory, src/smcr/warn_once.c).
 * Needs no smcr_engine_init(): the interposer reports before it decides to act.
 */
void smcr_warn_once_per_session(const char *message);

#endif /* SMCR_ENGINE_H */
