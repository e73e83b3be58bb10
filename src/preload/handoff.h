/* SPDX-License-Identifier: MIT */
/*
 * Sockets that leave this program image (exec) or this process (SCM_RIGHTS):
 * what their next owner must know, handed over or settled (handoff.c).
 */
#ifndef SMCR_PRELOAD_HANDOFF_H
#define SMCR_PRELOAD_HANDOFF_H

#include <stdbool.h>
#include <sys/socket.h>

struct smcr_handoff {
	char var[4096]; /* "SMCR_INHERIT=..." */
};

/*
 * exec is about to start a program image; `keeps_smcr`: it will load smcr
 * (wrap_exec.c decides). Hands over or settles every socket that survives the
 * exec. Returns the environment entry to add (in h), or NULL for none.
 */
const char *smcr_handoff_before_exec(struct smcr_handoff *h, bool keeps_smcr);

/* One dup2 of a spawn's file actions: the parent's `fd` is the child's `newfd`. */
struct smcr_spawn_dup2 {
	int fd, newfd;
};

/*
 * posix_spawn is about to start a program image in a child, and this process
 * keeps its sockets. `dups` are the dup2s of its file actions, `dups_known`
 * false when some were not recorded (then every unsettled connection counts
 * as crossing, to an fd not known). Hands over (keeps_smcr) or settles every
 * unsettled accepted connection the child inherits, and hands over the
 * registered listeners it inherits. Returns the environment entry to add (in
 * h), or NULL for none.
 */
const char *smcr_handoff_before_spawn(struct smcr_handoff *h, bool keeps_smcr,
				      const struct smcr_spawn_dup2 *dups, unsigned n_dups,
				      bool dups_known);

/*
 * Will an exec with environment `envp` load this library again, active
 * (LD_PRELOAD names it, or /etc/ld.so.preload did; no SMCR_DISABLE)?
 * The program file itself is wrap_exec.c's to judge.
 */
bool smcr_handoff_env_keeps(char *const envp[]);

/* vfork is about to run (the parent): note what its child's exec must find. */
void smcr_handoff_note_vfork(void);
/* The vfork child's exec failed (it may try another file, or exit). */
void smcr_handoff_exec_failed(void);
/* The parent again (vfork.S): what the child's exec left for it to do. */
void smcr_handoff_after_vfork(void);

/* wrap_exec.c's lock of recorded spawn file actions, for init.c's fork handler. */
void smcr_spawn_fork_prepare(void);
void smcr_spawn_fork_parent(void);
void smcr_spawn_fork_child(void);

/* sendmsg with SCM_RIGHTS: settle every socket it passes. */
void smcr_handoff_before_send_fds(const struct msghdr *msg);

/* The new image, before main(): take up SMCR_INHERIT and LISTEN_FDS. */
void smcr_handoff_adopt(void);

#endif /* SMCR_PRELOAD_HANDOFF_H */
