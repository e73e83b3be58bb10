/* SPDX-License-Identifier: MIT */
/*
 * Per-process SMC counters and per-connection records, published in a
 * shared-memory file readable by the same user (include/smcr/stats_abi.h).
 * If the file cannot be created (no runtime directory) the same counters live
 * in private memory: the engine never fails because of stats.
 */
#ifndef SMCR_STATS_H
#define SMCR_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smcr/stats_abi.h"

struct smcr_sock;

/* Connection reached SMC mode: take a record (NULL if the table is full). */
struct smcr_stats_conn *smcr_stats_conn_open(const struct smcr_sock *s);
/* Copy the connection's byte/CDC counters into its record. */
void smcr_stats_conn_update(const struct smcr_sock *s);
void smcr_stats_conn_close(const struct smcr_sock *s, int aborted);
/* A forked process's copy of an SMC-R connection reads as reset in it (FORKRESET). */
void smcr_stats_conn_refused(const struct smcr_sock *s);
void smcr_stats_fallback(int reason);
void smcr_stats_handshake_error(void);
/* A handshake that ended neither in SMC nor on TCP (the connection is reset): why. */
void smcr_stats_handshake_failed(int reason);
/* A blocking wait inside the engine went to sleep. */
void smcr_stats_slept(void);
/* SMC-R failover moved s to another link and wrote `bytes_resent` again: count, show its device. */
void smcr_stats_conn_relink(const struct smcr_sock *s, uint32_t bytes_resent);

/*
 * A listening socket (listener.c's registry calls): a record in the process's
 * listener table (NULL if it is full), its status (and why, or NULL) as it
 * changes, its end.
 */
struct smcr_stats_listener *smcr_stats_listener_open(int listen_fd, uint32_t status,
						     uint32_t flags, const char *why);
void smcr_stats_listener_status(struct smcr_stats_listener *l, uint32_t status,
				const char *why);
void smcr_stats_listener_close(struct smcr_stats_listener *l);

/*
 * An SMC-R link group (lgr.c): a record in the link group table (NULL if it
 * is full), its fields as they change (`now`'s seqlock words are ignored),
 * its end.  A forked child's copies of its parent's groups write nothing.
 */
struct smcr_stats_lgr *smcr_stats_lgr_open(void);
void smcr_stats_lgr_update(struct smcr_stats_lgr *g, const struct smcr_stats_lgr *now);
void smcr_stats_lgr_close(struct smcr_stats_lgr *g);

/* The live area (tests and the future in-process tool). */
const struct smcr_stats_file *smcr_stats_area(void);
/* Path of this process's stats file, "" if stats are private. */
const char *smcr_stats_path(void);

/*
 * The user's stats directory (include/smcr/stats_dir.h: private, ours, not a
 * symlink; created if missing), where the stats files and the learned
 * policy's table live: false if there is none.
 */
bool smcr_stats_runtime_dir(char *out, size_t len);

/*
 * Process life cycle, called only by engine.c: fork (the child gets private
 * stats of its own) and exit (the process's stats file is removed).
 */
void smcr_stats_fork_prepare(void);
void smcr_stats_fork_parent(void);
void smcr_stats_fork_child(void);
/* After it: a connection the child holds keeps its record's slot (hold.c). */
void smcr_stats_fork_keep(struct smcr_stats_conn *c);
void smcr_stats_exit(void);
/* Before seccomp confinement (confine.c): the stats file is published now, if it is not yet. */
void smcr_stats_confine_prepare(void);
/*
 * A filter denies what the stats file needs (confine_probe.c): the process
 * keeps its stats in private memory, where smcr-stat cannot see them.
 */
void smcr_stats_keep_private(void);

#endif /* SMCR_STATS_H */
