/* SPDX-License-Identifier: MIT */
/*
 * Stepping aside: when the process installs a seccomp filter
 * (wrap_seccomp.c), every decision it has left open is taken while every
 * call is still allowed, and none is taken later; when it sets up io_uring
 * at run time (wrap_seccomp.c's syscall()), whose reads and writes of its
 * sockets no wrapper sees, the same, and its SMC connections go on over
 * TCP.  Apart because it is one flag and one walk over the table that every
 * other part only asks about (smcr_smc_confined_now), and its ordering
 * argument (below) is easier to check in one place.
 */
#include <stdatomic.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/*
 * Why no new SMC decision is taken, 0 while they are: CONFINED from when the
 * process starts to confine its system calls (smcr_smc_before_confine),
 * IOURING for good once it set up io_uring (smcr_smc_after_io_uring).
 */
static _Atomic uint32_t aside;

/*
 * No new SMC decision: the process confines its system calls, or is about
 * to.  The caller has set the socket's flag that the confining thread's
 * walk reads (smcr_smc_before_confine says why the order matters).
 */
bool smcr_smc_confined_now(void)
{
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load(&aside) || smcr_engine_confined();
}

uint32_t smcr_smc_aside_reason(const char **why)
{
	bool uring = atomic_load(&aside) == SMCR_CLC_DECL_IOURING;

	if (why)
		*why = uring ? "the program set up io_uring" : "the process confines its system calls";
	return uring ? SMCR_CLC_DECL_IOURING : SMCR_CLC_DECL_CONFINED;
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
static void settle_all(uint32_t reason, const char *why)
{
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
			smcr_smc_revoke_listener((int)fd, e, why);
			smcr_smc_decision_unlock(e);
		} else if (smcr_fd_entry_mode(e) != SMCR_FD_CANDIDATE ||
			   (f & SMCR_FD_F_LISTENING)) {
			/* decided already, or a listener of another process */
		} else if (atomic_load_explicit(&e->handshake, memory_order_acquire)) {
			smcr_smc_finish_handshake((int)fd, e);
		} else if (f & SMCR_FD_F_ACCEPTED) {
			smcr_smc_settle_unread((int)fd, e, reason, why);
		} else if ((f & (SMCR_FD_F_CONNECTING | SMCR_FD_F_CONNECTED)) &&
			   smcr_smc_decision_lock(e)) {
			bool proposed;

			smcr_guard_enter();
			/* its thread may have proposed while this one waited for the lock */
			proposed = atomic_load_explicit(&e->handshake, memory_order_acquire);
			if (!proposed && smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE)
				smcr_smc_fallback((int)fd, e, reason, true, "client", why);
			smcr_guard_leave();
			smcr_smc_decision_unlock(e);
			if (proposed)
				smcr_smc_finish_handshake((int)fd, e);
		}
		smcr_fdtab_put(e);
	}
}

void smcr_smc_before_confine(void)
{
	uint32_t none = 0;

	if (!smcr_smc_enabled)
		return;
	(void)atomic_compare_exchange_strong(&aside, &none, SMCR_CLC_DECL_CONFINED);
	atomic_thread_fence(memory_order_seq_cst);
	settle_all(SMCR_CLC_DECL_CONFINED, "the process confines its system calls");
}

/*
 * io_uring reads and writes the fds it is given in the kernel, where no
 * wrapper sees the calls: an SMC connection's bytes are in its rings, so such
 * a read would wait for ever on the TCP socket.  Which fds the program will
 * give it cannot be known, so the process steps aside for good, as where it
 * is linked with liburing (init.c): every decision left open is taken (TCP,
 * reason IOURING), its listeners leave the registry, every connection made
 * from now on stays TCP, and its SMC connections go on over TCP at both ends
 * from where their streams had got to.  Called in the io_uring_setup call,
 * before the program can hand the ring a single fd.
 */
void smcr_smc_after_io_uring(void)
{
	const char *why = "the program set up io_uring";

	if (!smcr_smc_enabled || smcr_engine_confined() ||
	    atomic_exchange(&aside, SMCR_CLC_DECL_IOURING) == SMCR_CLC_DECL_IOURING)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	smcr_warn_once_per_session("io_uring set up at run time: sockets it reads and writes bypass"
				   " smcr, so from now on every connection of this process is"
				   " plain TCP (reason IOURING) and its SMC connections go on over TCP");
	settle_all(SMCR_CLC_DECL_IOURING, why);
	smcr_guard_enter();
	for (unsigned fd = 0, high = smcr_fdtab_high(); fd < high; fd++) {
		struct smcr_fd_entry *e = smcr_fdtab_get((int)fd);

		if (!e)
			continue;
		if (smcr_fd_entry_mode(e) == SMCR_FD_SMC && e->engine_fd >= 0 &&
		    smcr_smc_entry_owns(e, atomic_load(&e->sock)))
			smcr_smc_continue_on_tcp((int)fd, e, SMCR_CLC_DECL_IOURING, why);
		smcr_fdtab_put(e);
	}
	smcr_guard_leave();
}

void smcr_smc_confine_refused(void)
{
	uint32_t confined = SMCR_CLC_DECL_CONFINED;

	(void)atomic_compare_exchange_strong(&aside, &confined, 0);
}
