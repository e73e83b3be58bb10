/* SPDX-License-Identifier: MIT */
/*
 * An SMC-R connection across fork (fork_tail.c, design §8): a forked
 * process's use of its copy moves the connection onto TCP in the process that
 * runs it, so both go on with the one TCP socket they share.
 */
#ifndef SMCR_FORK_TAIL_H
#define SMCR_FORK_TAIL_H

#include <stdbool.h>

struct smcr_sock;

/* A new connection: tracked if it cannot follow fork itself (private, SMC-R). */
void smcr_fork_track(struct smcr_sock *s);
/* Its end in the process that runs it (conn.c's free; no connection lock held). */
void smcr_fork_untrack(struct smcr_sock *s);
/* A forked process lets go of its copy (it closed it, or it went on over TCP). */
void smcr_fork_forget_copy(struct smcr_sock *s);
/*
 * The process that runs it closes it: if a forked process may still hold the
 * socket, the connection goes on over TCP instead (TCP's close in one of the
 * processes that share a socket ends nothing).  Lock held.
 */
void smcr_fork_close_locked(struct smcr_sock *s);

/* The socket the link-group worker polls for requests (-1 none), and its work. */
int smcr_fork_request_fd(void);
void smcr_fork_serve(void);

/* engine.c's fork handlers */
void smcr_fork_tail_prepare(void);
void smcr_fork_tail_parent(void);
void smcr_fork_tail_child(void);

#endif /* SMCR_FORK_TAIL_H */
