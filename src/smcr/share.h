/* SPDX-License-Identifier: MIT */
/*
 * Memory that fork shares, and the processes that share it (design §8).
 *
 * A same-host connection keeps working in every process that holds it after
 * fork: its state (struct smcr_sock, the shm transport's struct smcr_xconn)
 * is carved from a MAP_SHARED arena, so parent and child see one copy at one
 * address, and its lock is process-shared and robust.  Each process maps the
 * arenas it made and those it inherited; it allocates only from its own (a
 * child starts a new one), any process frees a slot it holds.
 *
 * Processes are named by pid and start time, so that a holder killed without
 * a word, or whose pid was reused, is recognised as gone.
 */
#ifndef SMCR_SHARE_H
#define SMCR_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Largest object an arena slot holds. */
#define SMCR_SHARE_SLOT_SIZE 4096u

/* A zeroed slot of shared memory (size <= SMCR_SHARE_SLOT_SIZE), or NULL. */
void *smcr_share_alloc(size_t size);
/* Give a slot back (from any process that maps it).  NULL: nothing. */
void smcr_share_free(void *p);

/* This process: its pid (no system call) and its start time (clock ticks since boot). */
pid_t smcr_share_pid(void);
uint64_t smcr_share_start_time(void);
/* Does process `pid` that started at `start` (0: unknown) still run? */
bool smcr_share_alive(pid_t pid, uint64_t start);

/* fork, from engine.c's handlers: the child allocates from arenas of its own. */
void smcr_share_fork_prepare(void);
void smcr_share_fork_parent(void);
void smcr_share_fork_child(void);

#endif /* SMCR_SHARE_H */
