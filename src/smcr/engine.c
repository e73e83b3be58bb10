// SPDX-License-Identifier: MIT
/*
 * The engine's process life cycle (include/smcr/engine.h): its environment,
 * fork and exit, in one place and one order.
 *
 * Modules never register pthread_atfork or atexit handlers of their own:
 * with lazy registrations the lock order at fork would depend on which code
 * happened to run first, and exit work would run in an order nobody chose.
 * The embedder calls these from its one fork handler and its one exit
 * handler, after its own locks and after closing its connections.
 *
 * Lock order at fork (outermost first; code that holds two of these takes
 * them in this order too):
 *   0. hold.c  held_lock   the shared connections this process holds; each
 *                          one's own lock is taken under it, briefly, to
 *                          reserve the child's holder slot (and the stats
 *                          lock is taken under a connection's, never the
 *                          other way round)
 *      share.c arena_lock  this process's fork-shared arenas
 *      fork_tail.c fork_mu the SMC-R connections this process runs, for
 *                          forked processes' requests; a connection's lock
 *                          is taken under it (the worker's answer)
 *   1. lgr.c   smcr_lgrs.mu the SMC-R link groups (lgr_int.h); a group's
 *                          own lock (smcr_lgr.mu) is taken under it, and
 *                          under a connection's lock (smcr_conn_lock), never
 *                          the other way round
 *   2. shm_pool.c smcr_shm_pool_lock  the same-host ring pool, peer records
 *                          and mapping cache (shm_int.h)
 *   3. stats_area.c smcr_stats_lock  publishing the stats file
 *   4. eid.c   kernel_mu   the kernel's UEID table, read once
 *   5. ib.c    prep_mu     the background load of libibverbs
 *   6. sys.c   fd_window_lock  a momentary raise of RLIMIT_NOFILE: a leaf,
 *                          nothing is taken under it
 * The eid and ib locks are never held together (ib.c reads the UEID table
 * before it takes prep_mu); their order here is only the order of taking.
 */
#include "smcr/engine.h"

#include "smcr/conn.h"
#include "smcr/eid.h"
#include "smcr/fork_tail.h"
#include "smcr/libc.h"
#include "smcr/share.h"
#include "smcr/shm.h"
#include "smcr/stats.h"
#include "smcr/sys.h"
#ifdef SMCR_HAVE_VERBS
#include "smcr/ib.h"
#include "smcr/lgr.h"
#endif

void smcr_engine_init(const struct smcr_engine_env *env)
{
	smcr_libc_install(env);
}

int smcr_engine_fd_dup(int fd)
{
	return smcr_sys_fd_copy(fd);
}

void smcr_engine_fd_limit_lock(void)
{
	smcr_sys_fd_window_lock();
	smcr_sys_fd_limits_changing();
}

void smcr_engine_fd_limit_unlock(void)
{
	smcr_sys_fd_window_unlock();
}

void smcr_engine_fd_scope_begin(void)
{
	smcr_sys_fd_scope_begin();
}

void smcr_engine_fd_scope_end(void)
{
	smcr_sys_fd_scope_end();
}

void smcr_engine_fork_prepare(void)
{
	smcr_hold_fork_prepare();
	smcr_share_fork_prepare();
	smcr_fork_tail_prepare();
#ifdef SMCR_HAVE_VERBS
	smcr_lgr_fork_prepare();
#endif
	smcr_shm_fork_prepare();
	smcr_stats_fork_prepare();
	smcr_eid_fork_prepare();
#ifdef SMCR_HAVE_VERBS
	smcr_ib_fork_prepare();
#endif
	smcr_sys_fd_window_lock(); /* a child must not keep a raised fd limit */
}

void smcr_engine_fork_parent(void)
{
	smcr_sys_fd_window_unlock();
#ifdef SMCR_HAVE_VERBS
	smcr_ib_fork_done();
#endif
	smcr_eid_fork_done();
	smcr_stats_fork_parent();
	smcr_shm_fork_parent();
#ifdef SMCR_HAVE_VERBS
	smcr_lgr_fork_parent();
#endif
	smcr_fork_tail_parent();
	smcr_share_fork_parent();
	smcr_hold_fork_parent();
}

/*
 * Only system calls and plain stores below (see each module's handler), but
 * for the shared connections' locks hold.c takes: those live in memory the
 * parent shares, so a parent thread that held one at fork releases it there.
 */
void smcr_engine_fork_child(void)
{
	smcr_sys_fd_window_unlock();
	smcr_sys_random_fork_child(); /* before anything draws a secret */
	smcr_share_fork_child(); /* the child's own pid, before the rest */
	smcr_fork_tail_child();
#ifdef SMCR_HAVE_VERBS
	smcr_ib_fork_done();
#endif
	smcr_eid_fork_done();
	smcr_stats_fork_child();
	smcr_hold_fork_child(); /* after the child's pid and stats area */
	smcr_shm_fork_child();
#ifdef SMCR_HAVE_VERBS
	smcr_lgr_fork_child();
#endif
}

void smcr_engine_vfork_prepare(void)
{
	(void)smcr_stats_area();
}

/*
 * Link groups first: their DELETE LINK may still count in the stats; the
 * stats file goes last.
 */
void smcr_engine_exit(void)
{
#ifdef SMCR_HAVE_VERBS
	smcr_lgr_exit();
#endif
	smcr_stats_exit();
}
