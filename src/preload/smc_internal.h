/* SPDX-License-Identifier: MIT */
/* Between smc.c (decisions, data) and smc_poll.c (readiness). */
#ifndef SMCR_PRELOAD_SMC_INTERNAL_H
#define SMCR_PRELOAD_SMC_INTERNAL_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "preload/fdtab.h"

struct smcr_sock;

/* This process (set at start-up and in a forked child). */
extern pid_t smcr_smc_pid;

enum smcr_io_kind {
	SMCR_IO_READ,
	SMCR_IO_WRITE,
	SMCR_IO_POLL, /* poll/epoll saw the socket ready: decide if that is possible now */
};

/*
 * Decide a CANDIDATE's mode if this call can: a client once connected, a
 * server from the first bytes it received (or its own first write).
 * 0 (the call goes on, whatever the mode is now) or -errno for the call.
 */
int smcr_smc_settle(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind, bool may_block);

/* The engine socket of an SMC entry this process runs, else NULL. */
struct smcr_sock *smcr_smc_sock_of(struct smcr_fd_entry *e);
/* A forked child's copy of its parent's SMC connection (reads as reset here). */
bool smcr_smc_inherited(struct smcr_fd_entry *e);

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

/* smc_screen.c */
/*
 * An accepted connection of a confined process, TCP already: its reads
 * take a Proposal at its start off the stream (and decline it) before the
 * program sees a byte.
 */
void smcr_smc_screen_start(struct smcr_fd_entry *e);
/* A receive call on a SCREEN socket: as recvmsg(2). */
ssize_t smcr_smc_screen_recvmsg(int fd, struct msghdr *msg, int flags);
/* The entry is released: its bytes go. */
void smcr_smc_screen_release(struct smcr_fd_entry *e);

/* smc_poll.c */
/* The entry just reached SMC: its epoll registrations move to the doorbell. */
void smcr_smc_epoll_move(struct smcr_fd_entry *e, struct smcr_sock *s);
/* A server handshake began: registrations move to its fd; it ended on TCP: back. */
void smcr_smc_epoll_watch_handshake(struct smcr_fd_entry *e, int hs_fd);
void smcr_smc_epoll_watch_tcp(struct smcr_fd_entry *e);
/* The connection went on as plain TCP: its doorbell registrations move to the TCP socket. */
void smcr_smc_epoll_leave_doorbell(struct smcr_fd_entry *e, struct smcr_sock *s);
/* The entry is released: drop its records (and its doorbell registrations if s). */
void smcr_smc_epoll_forget(struct smcr_fd_entry *e, struct smcr_sock *s);
/* Tell the engine which events outside waiters want. */
void smcr_smc_update_interest(struct smcr_fd_entry *e, struct smcr_sock *s);
void smcr_smc_epoll_lock(void);
void smcr_smc_epoll_unlock(void);
void smcr_smc_epoll_reinit_child(void);

#endif /* SMCR_PRELOAD_SMC_INTERNAL_H */
