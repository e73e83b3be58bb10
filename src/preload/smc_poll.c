/* SPDX-License-Identifier: MIT */
/*
 * poll, ppoll, select and pselect with SMC sockets in the set (design §5).
 * An SMC socket's TCP fd goes quiet: the call waits on the engine's ready fd
 * (a doorbell) in its place and asks smcr_sock_poll() for the real mask
 * after a wake-up; a server handshake in progress is waited on through its
 * own fd; a candidate the kernel reports gets its decision before the
 * application hears of it.  select is poll over the same slots.  Apart from
 * epoll (smc_epoll.c) because these calls hold no state between calls: each
 * builds its slots, waits, and lets them go.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/select.h>
#include <time.h>

#include "common/spin.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

static bool entry_needs_translation(struct smcr_fd_entry *e)
{
	unsigned char mode = atomic_load_explicit(&e->mode, memory_order_relaxed);

	if (mode == SMCR_FD_SMC)
		return atomic_load_explicit(&e->sock, memory_order_relaxed) != NULL;
	/* a connecting client, or an accepted socket not classified yet */
	return mode == SMCR_FD_CANDIDATE &&
	       (atomic_load_explicit(&e->flags, memory_order_relaxed) &
		(SMCR_FD_F_CONNECTING | SMCR_FD_F_ACCEPTED));
}

bool smcr_smc_poll_needed(const struct pollfd *fds, nfds_t nfds)
{
	if (!smcr_smc_enabled || smcr_guard_inside())
		return false;
	for (nfds_t i = 0; i < nfds; i++) {
		struct smcr_fd_entry *e = smcr_fdtab_peek(fds[i].fd);

		if (e && entry_needs_translation(e))
			return true;
	}
	return false;
}

bool smcr_smc_select_needed(int nfds, const fd_set *r, const fd_set *w, const fd_set *x)
{
	if (!smcr_smc_enabled || smcr_guard_inside() || nfds <= 0)
		return false;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; fd < nfds; fd++) {
		struct smcr_fd_entry *e = smcr_fdtab_peek(fd);

		if (e && entry_needs_translation(e) &&
		    ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x))))
			return true;
	}
	return false;
}

struct poll_slot {
	struct smcr_fd_entry *e; /* reference held */
	struct smcr_sock *s;     /* SMC: wait on its ready fd */
	int hs_fd;               /* a server handshake in progress: wait on its fd */
	bool inherited;          /* a parent's SMC connection: reads as reset here */
};

/*
 * A forked child's copy of its parent's SMC connection: its data calls fail
 * with ECONNRESET (smc_data.c), so it polls as a reset socket does (readable,
 * writable, error, hang-up), never as the quiet TCP socket beneath, on which
 * a child waiting to read would sleep for ever.
 */
#define INHERITED_MASK (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP)

/* One governor per thread: the thread is what spins (common/spin.h). */
static __thread struct smcr_spin_gov poll_gov;

static bool slots_peer_running(const struct poll_slot *slots, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++)
		if (slots[i].s && smcr_sock_peer_running(slots[i].s))
			return true;
	return false;
}

static void slots_set_sleeping(struct poll_slot *slots, nfds_t nfds, bool sleeping)
{
	for (nfds_t i = 0; i < nfds; i++)
		if (slots[i].s)
			smcr_sock_set_sleeping(slots[i].s, sleeping);
}

static void poll_count(struct poll_slot *slot, short events, int delta)
{
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP))
		atomic_fetch_add_explicit(&slot->e->poll_in, (unsigned)delta, memory_order_relaxed);
	if (events & (POLLOUT | POLLWRNORM))
		atomic_fetch_add_explicit(&slot->e->poll_out, (unsigned)delta, memory_order_relaxed);
	smcr_smc_update_interest(slot->e, slot->s);
}

static short slot_revents(struct poll_slot *slot, short events)
{
	return (short)smcr_smc_wanted_mask(smcr_smc_sock_poll(slot->s), (uint16_t)events);
}

/*
 * A candidate's fd was reported: a connecting client became writable (its
 * handshake runs now), an accepted socket readable (a Proposal is answered
 * without waking the application) or its server handshake's fd (the
 * client's answer).  p->revents: what the kernel said of the fd it watched.
 */
static void slot_settle(struct poll_slot *slot, struct pollfd *p)
{
	struct smcr_fd_entry *e = slot->e;
	unsigned flags = atomic_load_explicit(&e->flags, memory_order_relaxed);
	bool was_hs = slot->hs_fd >= 0;

	if (atomic_load_explicit(&e->mode, memory_order_acquire) != SMCR_FD_CANDIDATE)
		return;
	if (flags & SMCR_FD_F_CONNECTING) {
		if (!was_hs && !(p->revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		smcr_smc_settle(p->fd, e, SMCR_IO_POLL, false);
	} else if (was_hs || (p->revents & (POLLIN | POLLERR | POLLHUP))) {
		smcr_smc_settle(p->fd, e, SMCR_IO_POLL, false);
	} else {
		return;
	}
	slot->s = smcr_smc_sock_of(e);
	slot->hs_fd = slot->s ? -1 : smcr_smc_handshake_fd(e);
	if (slot->s) {
		poll_count(slot, p->events, 1);
		p->revents = slot_revents(slot, p->events);
	} else if (slot->hs_fd >= 0 ||
		   atomic_load_explicit(&e->handshake, memory_order_acquire)) {
		p->revents = 0; /* the handshake goes on: nothing for the application */
	} else if (was_hs) {
		p->revents = (short)smcr_smc_tcp_mask(p->fd, (uint16_t)p->events);
	}
}

int smcr_smc_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		   const sigset_t *mask)
{
	struct poll_slot stack_slots[32], *slots = stack_slots;
	struct pollfd stack_copy[32], *copy = stack_copy;
	int64_t deadline = timeout ? smcr_now_ns() + timeout->tv_sec * 1000000000LL + timeout->tv_nsec
				   : -1;
	/* Opt-in spin: non-blocking rounds until this, while a peer runs. */
	int64_t spin_end = smcr_smc_spin_us > 0 && !(timeout && !timeout->tv_sec && !timeout->tv_nsec) &&
				   smcr_spin_gov_allow(&poll_gov)
				   ? smcr_now_ns() + (int64_t)smcr_smc_spin_us * 1000
				   : 0;
	bool spun = false, won = false;
	int rc = -1, err = 0;

	if (nfds > 32) {
		slots = calloc(nfds, sizeof(*slots));
		copy = calloc(nfds, sizeof(*copy));
		if (!slots || !copy) {
			free(slots == stack_slots ? NULL : slots);
			free(copy == stack_copy ? NULL : copy);
			errno = ENOMEM;
			return -1;
		}
	}
	for (nfds_t i = 0; i < nfds; i++) {
		slots[i].e = NULL;
		slots[i].s = NULL;
		slots[i].hs_fd = -1;
		slots[i].inherited = false;
		if (fds[i].fd < 0)
			continue;
		slots[i].e = smcr_fdtab_get(fds[i].fd);
		if (slots[i].e)
			slots[i].s = smcr_smc_sock_of(slots[i].e);
		if (slots[i].e && !slots[i].s)
			slots[i].inherited = smcr_smc_inherited(slots[i].e);
		if (slots[i].e && !slots[i].s)
			slots[i].hs_fd = smcr_smc_handshake_fd(slots[i].e);
		if (slots[i].s)
			poll_count(&slots[i], fds[i].events, 1);
	}
	for (;;) {
		struct timespec left, *tp = NULL;
		int ready = 0, count = 0;
		bool spinning = false, sleeping = false;

		for (nfds_t i = 0; i < nfds; i++) {
			copy[i] = fds[i];
			copy[i].revents = 0;
			fds[i].revents = 0;
			if (slots[i].s) {
				fds[i].revents = slot_revents(&slots[i], fds[i].events);
				ready += fds[i].revents != 0;
				copy[i].fd = smcr_sock_ready_fd(slots[i].s);
				copy[i].events = POLLIN;
			} else if (slots[i].inherited) {
				fds[i].revents = (short)smcr_smc_wanted_mask(INHERITED_MASK,
								    (uint16_t)fds[i].events);
				ready++;
				copy[i].fd = -1;
			} else if (slots[i].hs_fd >= 0) {
				copy[i].fd = slots[i].hs_fd;
				copy[i].events = POLLIN;
			}
		}
		if (!ready && spin_end) {
			spinning = smcr_now_ns() < spin_end && slots_peer_running(slots, nfds);
			if (!spinning)
				spin_end = 0;
			spun |= spinning;
		}
		if (ready || spinning) {
			left.tv_sec = 0;
			left.tv_nsec = 0;
			tp = &left;
		} else if (deadline >= 0) {
			int64_t ns = deadline - smcr_now_ns();

			if (ns < 0)
				ns = 0;
			left.tv_sec = ns / 1000000000;
			left.tv_nsec = ns % 1000000000;
			tp = &left;
		}
		if (smcr_smc_spin_us > 0 && !ready && !spinning) {
			/* Going to sleep: the peers should not spin on us meanwhile. */
			slots_set_sleeping(slots, nfds, true);
			sleeping = true;
		}
		rc = smcr_real.ppoll(copy, nfds, tp, mask);
		if (sleeping)
			slots_set_sleeping(slots, nfds, false);
		if (rc < 0) {
			err = errno;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			if (slots[i].s) {
				if (copy[i].revents)
					fds[i].revents = slot_revents(&slots[i], fds[i].events);
			} else if (!slots[i].inherited) {
				fds[i].revents = copy[i].revents;
				if (slots[i].e && copy[i].revents)
					slot_settle(&slots[i], &fds[i]);
			}
			count += fds[i].revents != 0;
		}
		if (rc > 0 && count == 0)
			smcr_stats_wakeup_empty();
		rc = count;
		won |= spinning && count;
		if (count || (deadline >= 0 && smcr_now_ns() >= deadline))
			break;
		if (spinning)
			smcr_cpu_relax();
		/* Only spurious doorbells: wait again for what is left of the time. */
	}
	if (spun)
		smcr_smc_spin_result(&poll_gov, won);
	for (nfds_t i = 0; i < nfds; i++) {
		if (slots[i].s)
			poll_count(&slots[i], fds[i].events, -1);
		smcr_fdtab_put(slots[i].e);
	}
	if (slots != stack_slots) {
		free(slots);
		free(copy);
	}
	if (rc < 0)
		errno = err;
	return rc;
}

int smcr_smc_pselect(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *timeout,
		     const sigset_t *mask)
{
	struct pollfd stack_fds[64], *fds = stack_fds;
	nfds_t n = 0;
	int rc, count = 0;

	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	if (nfds > 64) {
		fds = calloc((size_t)nfds, sizeof(*fds));
		if (!fds) {
			errno = ENOMEM;
			return -1;
		}
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (x && FD_ISSET(fd, x))
			ev |= POLLPRI;
		if (ev) {
			fds[n].fd = fd;
			fds[n].events = ev;
			fds[n].revents = 0;
			n++;
		}
	}
	rc = smcr_smc_ppoll(fds, n, timeout, mask);
	if (rc >= 0) {
		for (nfds_t i = 0; i < n; i++) {
			if (fds[i].revents & POLLNVAL) {
				rc = -1;
				errno = EBADF;
				break;
			}
		}
	}
	if (rc >= 0) {
		if (r)
			FD_ZERO(r);
		if (w)
			FD_ZERO(w);
		if (x)
			FD_ZERO(x);
		for (nfds_t i = 0; i < n; i++) {
			short re = fds[i].revents;

			if (r && (fds[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(fds[i].fd, r);
				count++;
			}
			if (w && (fds[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
				FD_SET(fds[i].fd, w);
				count++;
			}
			if (x && (fds[i].events & POLLPRI) && (re & POLLPRI)) {
				FD_SET(fds[i].fd, x);
				count++;
			}
		}
		rc = count;
	}
	if (fds != stack_fds)
		free(fds);
	return rc;
}
