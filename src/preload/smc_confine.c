/* SPDX-License-Identifier: MIT */
/*
 * Confinement (wrap_seccomp.c): when the process installs a seccomp filter,
 * every decision it has left open is taken while every call is still
 * allowed, and none is taken later.  Apart because it is one flag and one
 * walk over the table that every other part only asks about
 * (smcr_smc_confined_now), and its ordering argument (below) is easier to
 * check in one place.
 */
#include <stdatomic.h>

#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/* Set when the process starts to confine its system calls (smcr_smc_before_confine). */
static atomic_bool confining;

/*
 * No new SMC decision: the process confines its system calls, or is about
 * to.  The caller has set the socket's flag that the confining thread's
 * walk reads (smcr_smc_before_confine says why the order matters).
 */
bool smcr_smc_confined_now(void)
{
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load(&confining) || smcr_engine_confined();
}

/*
 * The process is about to confine its system calls (wrap_seccomp.c), and
 * every call is still allowed: nothing that the filter might deny may be
 * left to do later.  An accepted connection not classified yet is settled
 * (reason CONFINED); a client socket whose handshake has not begun stays
 * TCP; a handshake under way is finished; the listeners this process
 * registered leave the registry, so local clients stop proposing to them.
 * SMC connections stay SMC.
 *
 * Other threads go on meanwhile.  The engine counts as confined only once
 * it has learned the filter, after this walk, so `confining` closes the gap:
 * set before the walk, it makes every decision taken after it (a client's
 * Proposal, a listener's registration, an accepted connection's
 * classification: smcr_smc_confined_now()) stay TCP, and a socket the walk has
 * passed before another thread made it a candidate is one whose decision
 * comes after.  Each side writes its own flag before it reads the other's
 * (a socket's CONNECTING, ACCEPTED or LISTENING, set before its decision):
 * at least one of the two sees the other.
 */
void smcr_smc_before_confine(void)
{
	if (!smcr_smc_enabled)
		return;
	atomic_store(&confining, true);
	atomic_thread_fence(memory_order_seq_cst);
	for (unsigned fd = 0, high = smcr_fdtab_high(); fd < high; fd++) {
		struct smcr_fd_entry *e = smcr_fdtab_get((int)fd);
		unsigned f;

		if (!e)
			continue;
		f = smcr_fd_entry_flags(e);
		if ((f & SMCR_FD_F_LISTENING) && smcr_smc_registered_here(e) &&
		    smcr_smc_decision_lock(e)) {
			/*
			 * Its accepted connections will not be classified (the filter
			 * may deny what that takes), so no local client may propose
			 * to it any more.  For good: a registration cannot be taken
			 * back once withdrawn, also if the kernel refuses the filter.
			 * One that followed fork stays its registrant's (design §8).
			 */
			smcr_smc_revoke_listener((int)fd, e, "the process confines its system calls");
			smcr_smc_decision_unlock(e);
		} else if (smcr_fd_entry_mode(e) != SMCR_FD_CANDIDATE ||
			   (f & SMCR_FD_F_LISTENING)) {
			/* decided already, or a listener of another process */
		} else if (atomic_load_explicit(&e->handshake, memory_order_acquire)) {
			smcr_smc_finish_handshake((int)fd, e);
		} else if (f & SMCR_FD_F_ACCEPTED) {
			smcr_smc_settle_unread((int)fd, e, SMCR_CLC_DECL_CONFINED,
					       "the process confines its system calls");
		} else if ((f & (SMCR_FD_F_CONNECTING | SMCR_FD_F_CONNECTED)) &&
			   smcr_smc_decision_lock(e)) {
			bool proposed;

			smcr_guard_enter();
			/* its thread may have proposed while this one waited for the lock */
			proposed = atomic_load_explicit(&e->handshake, memory_order_acquire);
			if (!proposed && smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE)
				smcr_smc_fallback((int)fd, e, SMCR_CLC_DECL_CONFINED, true, "client",
						  "the process confines its system calls");
			smcr_guard_leave();
			smcr_smc_decision_unlock(e);
			if (proposed)
				smcr_smc_finish_handshake((int)fd, e);
		}
		smcr_fdtab_put(e);
	}
}

void smcr_smc_confine_refused(void)
{
	atomic_store(&confining, false);
}
