/* SPDX-License-Identifier: MIT */
/*
 * fd table: what the library knows about each fd number.
 *
 * A dense array indexed by fd holds a pointer to a refcounted entry; the
 * fds that share one open socket (dup, dup2, dup3, F_DUPFD) point to the
 * same entry. fds at or above the table size are never tracked: they pass
 * through untouched (programs that close every fd up to a huge limit stay
 * cheap).
 *
 * Concurrency, without locks on any path a wrapper takes:
 * - lookups are one acquire load of the slot (smcr_fdtab_peek);
 * - slot updates are atomic exchanges, entry lifetimes atomic refcounts;
 * - entries live in a pool that is never unmapped (type-stable memory), so
 *   a racing reader that loaded a pointer just before the entry was
 *   released reads stale but valid memory, never freed memory. Code that
 *   keeps an entry beyond one read takes a reference (smcr_fdtab_get).
 * The only lock guards the pool's growth (one mmap per
 * SMCR_FDTAB_CHUNK entries); it is taken with signals blocked and listed
 * in the fork handlers.
 *
 * Because every path is a single atomic step on one slot, a fork() at any
 * moment leaves the child with a consistent table (at worst one entry is
 * leaked in the child).
 */
#ifndef SMCR_PRELOAD_FDTAB_H
#define SMCR_PRELOAD_FDTAB_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"

/* What the library does with the socket; values match smc_preload.h. */
enum smcr_fd_mode {
	SMCR_FD_PASSTHROUGH = 1, /* tracked, but the library leaves it alone */
	SMCR_FD_CANDIDATE = 2,   /* TCP stream socket that may move to SMC */
	SMCR_FD_SMC = 3,         /* data path diverted to the engine */
	SMCR_FD_FALLBACK = 4,    /* tried SMC, stays plain TCP for good */
	SMCR_FD_SCREEN = 5,      /* TCP, but a Proposal at its start is taken off (smc_screen.c) */
};

/* Entry flags. */
#define SMCR_FD_F_LISTENING (1u << 0) /* listen() succeeded */
#define SMCR_FD_F_ACCEPTED (1u << 1)  /* came out of accept() */
#define SMCR_FD_F_CONNECTING (1u << 2) /* connect() was called */
#define SMCR_FD_F_NONBLOCK (1u << 3)  /* O_NONBLOCK, as last set through a wrapper */
#define SMCR_FD_F_SPOKE_FIRST (1u << 4) /* server wrote before the client's first bytes */
#define SMCR_FD_F_CONNECTED (1u << 5) /* client: the TCP connection is established */
#define SMCR_FD_F_PEER_SMC (1u << 6)  /* accepted: the client's SYN announced SMC (RFC 7609) */
/*
 * The program asked for SMC itself (af_smc.c): it made the socket with
 * socket(AF_SMC, ...) or with IPPROTO_SMC, and smcr serves it as the TCP
 * socket underneath; accepted sockets inherit it from their listener.
 */
#define SMCR_FD_F_AF_SMC (1u << 7)
#define SMCR_FD_F_IPPROTO_SMC (1u << 8)
#define SMCR_FD_F_ASKED_SMC (SMCR_FD_F_AF_SMC | SMCR_FD_F_IPPROTO_SMC)
#define SMCR_FD_F_SMC_LIMIT_HS (1u << 9) /* its SOL_SMC SMC_LIMIT_HS is set */
/* SO_ZEROCOPY is on (its own, or its listener's when accepted): the connection stays TCP */
#define SMCR_FD_F_ZEROCOPY (1u << 10)
/*
 * SO_LINGER is on with a zero timeout (its own, or its listener's when
 * accepted): the program's close is abortive, which the peer must see as a
 * reset, as over TCP, not as the end of the stream
 */
#define SMCR_FD_F_LINGER_ZERO (1u << 11)
/* TCP_INQ is on (its own, or its listener's): each recvmsg() tells the bytes left (TCP_CM_INQ) */
#define SMCR_FD_F_INQ (1u << 12)
/*
 * Timestamps are on (SO_TIMESTAMP, SO_TIMESTAMPNS, SO_TIMESTAMPING; its own,
 * or its listener's): the connection stays TCP
 */
#define SMCR_FD_F_TIMESTAMP (1u << 13)
/*
 * Its SO_RCVLOWAT is 1 and its SO_PEEK_OFF off on the kernel's socket while
 * its decision reads there (smc.c)
 */
#define SMCR_FD_F_LOWAT_LENT (1u << 14)
/*
 * Its SO_RCVTIMEO and SO_SNDTIMEO are known to be unset: socket() made it
 * here (or accept() from such a listener: the kernel's accepted socket has
 * its listener's) and no setsockopt set either since, so a connection
 * going SMC need not ask the kernel for them.  A socket from elsewhere
 * (another image, SCM_RIGHTS) lacks the flag and is asked; so is one made
 * before the process last forked (smcr_fdtab_same_fork()) or one it sent
 * over SCM_RIGHTS (the receiver shares the socket).
 */
#define SMCR_FD_F_NO_TIMEO (1u << 15)

struct smcr_fd_entry {
	atomic_uint refcnt;        /* fds pointing here + temporary references */
	_Atomic unsigned char mode; /* enum smcr_fd_mode */
	atomic_uint flags;         /* SMCR_FD_F_* */
	int domain;                /* AF_INET or AF_INET6 */
	_Atomic(void *) sock;      /* the engine's socket, once it has one */
	/*
	 * SMC state, owned by the SMC glue, src/preload/smc*.c (all zero for a fresh entry):
	 * the engine works on its own close-on-exec duplicate of the TCP
	 * socket (engine_fd), so the application's fd numbers never matter to
	 * it; owner is the process that created the engine socket or listener
	 * registration (a forked child must not tear down its parent's).
	 */
	int engine_fd;             /* -1 = none */
	/*
	 * pid.  Atomic: in a forked child, the threads that first use an
	 * inherited connection at once all take it over (the same store).
	 */
	_Atomic int owner;
	uint32_t fallback_reason;  /* why the connection stayed TCP */
	int rcvlowat;              /* SO_RCVLOWAT as the kernel took it; 0 = never set */
	int peek_off;              /* SO_PEEK_OFF as the program set it; < 0 = off */
	void *tcp_record;          /* its stats record in TCP mode (engine.h), or NULL */
	void *listener;            /* listener registration (smc_listen.c): of a listener, or
				    * of the listener of an unclassified accepted socket */
	void *unserved;            /* a listener smcr does not serve: its smcr_listener_unserved() */
	void *screen;              /* SCREEN: the bytes read so far (smc_screen.c), or NULL */
	uint16_t listen_port;      /* a listener's port */
	/* accepted: the peer's address as accept() returned it (AF_UNSPEC: not kept) */
	struct sockaddr_in6 accepted_peer;
	_Atomic(void *) handshake; /* accepted: the server handshake in progress (engine.h) */
	_Atomic int handshake_fd;  /* ... its smcr_handshake_fd() once made, else -1 */
	atomic_uint poll_in;       /* threads in poll/select waiting for POLLIN */
	atomic_uint poll_out;      /* ... for POLLOUT */
	unsigned epoll_events;     /* EPOLLIN|EPOLLOUT of its epoll registrations */
	uint32_t epoll_regs;       /* index + 1 of its first epoll record, 0 = none */
	atomic_flag busy;          /* serialises the CANDIDATE -> SMC/FALLBACK decision */
	unsigned fork_gen;         /* the process's fork generation when it was made */
	/* pool bookkeeping */
	uint32_t index;
	_Atomic uint32_t next_free; /* index + 1 of the next free entry, 0 = end */
};

#define SMCR_FDTAB_CHUNK 256u

/* Published by smcr_fdtab_init() before any wrapper can look (see init.c). */
extern _Atomic(struct smcr_fd_entry *) *smcr_fdtab_slots;
extern unsigned smcr_fdtab_nslots;

/* Maps nslots slots. Returns 0 or -errno. errno is preserved. */
int smcr_fdtab_init(unsigned nslots);
/* Releases everything (tests; the library lets process exit do it). */
void smcr_fdtab_fini(void);

/*
 * The engine works on duplicates of the application's sockets: the number the
 * application knows one by, for logs and stats (`fd` < 0 forgets it), and the
 * number to show for any fd (itself unless it is such a duplicate).
 */
void smcr_fdtab_label_set(int engine_fd, int fd);
int smcr_fdtab_label_of(int fd);

/* Hot path: the entry for fd, or NULL. No reference taken. */
/* An entry's SMCR_FD_F_* flags, and its mode (acquire: what the decider published with it). */
static inline unsigned smcr_fd_entry_flags(const struct smcr_fd_entry *e)
{
	return atomic_load_explicit(&e->flags, memory_order_relaxed);
}

static inline unsigned char smcr_fd_entry_mode(const struct smcr_fd_entry *e)
{
	return atomic_load_explicit(&e->mode, memory_order_acquire);
}

static inline struct smcr_fd_entry *smcr_fdtab_peek(int fd)
{
	if (unlikely((unsigned)fd >= smcr_fdtab_nslots))
		return NULL;
	return atomic_load_explicit(&smcr_fdtab_slots[fd], memory_order_acquire);
}

/* Hot path: is fd a socket whose data goes to the engine? Almost always no. */
static inline bool smcr_fdtab_is_smc(int fd)
{
	struct smcr_fd_entry *entry = smcr_fdtab_peek(fd);

	return unlikely(entry != NULL) &&
	       atomic_load_explicit(&entry->mode, memory_order_relaxed) == SMCR_FD_SMC;
}

/*
 * A fresh entry for a socket the kernel just handed out as fd, replacing
 * whatever stale entry that number had. NULL when fd is out of range or
 * memory ran out (the fd then passes through). The table holds the
 * reference; the pointer is valid until the fd is forgotten.
 */
struct smcr_fd_entry *smcr_fdtab_track(int fd, int domain, enum smcr_fd_mode mode,
				       unsigned flags);

/* The kernel closed fd, or handed its number out for something untracked. */
void smcr_fdtab_forget(int fd);

/* Forget every fd in [first, last] (close_range, closefrom). */
void smcr_fdtab_forget_range(unsigned first, unsigned last);

/* newfd now refers to the same open socket as oldfd (dup family). */
void smcr_fdtab_dup(int oldfd, int newfd);

/* The entry for fd with a reference taken, or NULL. Pair with _put. */
struct smcr_fd_entry *smcr_fdtab_get(int fd);
void smcr_fdtab_put(struct smcr_fd_entry *entry);

/*
 * Called when the last reference to an entry goes, before it is reused:
 * the SMC glue ends the engine socket there. NULL in unit tests.
 */
extern void (*smcr_fdtab_release_hook)(struct smcr_fd_entry *entry);

/* One more than the highest fd that ever held an entry (walks over every entry). */
unsigned smcr_fdtab_high(void);
/* Number of entries in use (tests, stats). */
unsigned smcr_fdtab_entries_in_use(void);

/* Fork handlers (called from init.c's lock list). */
void smcr_fdtab_lock(void);
void smcr_fdtab_unlock(void);
void smcr_fdtab_reinit_child(void);
/*
 * Was the entry made since this process last forked (or was forked)?  What
 * it knows of its socket's options it learnt from this process's calls
 * alone only then: after a fork another process may set them on the same
 * socket.  smcr_fdtab_forked() (both fork handlers) starts a generation.
 */
bool smcr_fdtab_same_fork(const struct smcr_fd_entry *e);
void smcr_fdtab_forked(void);

#endif /* SMCR_PRELOAD_FDTAB_H */
