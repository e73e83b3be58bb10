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

/* The slots of one call, and what the kernel waits on in their place. */
#define POLL_STACK_SLOTS 32

struct poll_call {
	struct pollfd *fds;      /* the application's */
	nfds_t nfds;
	struct poll_slot *slots;
	struct pollfd *copy;     /* what the kernel waits on */
	int64_t deadline;        /* -1: none */
	int64_t spin_end;        /* opt-in spin: non-blocking rounds until this while a peer runs */
	bool spun, won;
	struct poll_slot stack_slots[POLL_STACK_SLOTS];
	struct pollfd stack_copy[POLL_STACK_SLOTS];
};

static int64_t poll_deadline(const struct timespec *timeout)
{
	if (!timeout)
		return -1;
	return smcr_now_ns() + timeout->tv_sec * 1000000000LL + timeout->tv_nsec;
}

/* When the opt-in spin ends, or 0: no spin (a zero timeout never spins). */
static int64_t poll_spin_end(const struct timespec *timeout)
{
	if (smcr_smc_spin_us <= 0 || (timeout && !timeout->tv_sec && !timeout->tv_nsec) ||
	    !smcr_spin_gov_allow(&poll_gov))
		return 0;
	return smcr_now_ns() + (int64_t)smcr_smc_spin_us * 1000;
}

/* What slot i waits on, with a reference to its entry. */
static void slot_init(struct poll_slot *slot, const struct pollfd *p)
{
	slot->e = NULL;
	slot->s = NULL;
	slot->hs_fd = -1;
	slot->inherited = false;
	if (p->fd < 0)
		return;
	slot->e = smcr_fdtab_get(p->fd);
	if (slot->e)
		slot->s = smcr_smc_sock_of(slot->e);
	if (slot->e && !slot->s)
		slot->inherited = smcr_smc_inherited(slot->e);
	if (slot->e && !slot->s)
		slot->hs_fd = smcr_smc_handshake_fd(slot->e);
	if (slot->s)
		poll_count(slot, p->events, 1);
}

/* The call's slots, on the stack for small sets; -1 with errno. */
static int poll_call_start(struct poll_call *c, struct pollfd *fds, nfds_t nfds,
			   const struct timespec *timeout)
{
	c->fds = fds;
	c->nfds = nfds;
	c->slots = c->stack_slots;
	c->copy = c->stack_copy;
	if (nfds > POLL_STACK_SLOTS) {
		c->slots = calloc(nfds, sizeof(*c->slots));
		c->copy = calloc(nfds, sizeof(*c->copy));
		if (!c->slots || !c->copy) {
			free(c->slots);
			free(c->copy);
			errno = ENOMEM;
			return -1;
		}
	}
	c->deadline = poll_deadline(timeout);
	c->spin_end = poll_spin_end(timeout);
	c->spun = false;
	c->won = false;
	for (nfds_t i = 0; i < nfds; i++)
		slot_init(&c->slots[i], &fds[i]);
	return 0;
}

static void poll_call_end(struct poll_call *c)
{
	if (c->spun)
		smcr_smc_spin_result(&poll_gov, c->won);
	for (nfds_t i = 0; i < c->nfds; i++) {
		if (c->slots[i].s)
			poll_count(&c->slots[i], c->fds[i].events, -1);
		smcr_fdtab_put(c->slots[i].e);
	}
	if (c->slots != c->stack_slots) {
		free(c->slots);
		free(c->copy);
	}
}

/*
 * Before a wait: what the application is told already (an SMC socket's
 * mask, an inherited one's reset), and in c->copy what the kernel waits on
 * in each slot's place.  Returns how many are ready now.
 */
static int slots_prepare(struct poll_call *c)
{
	struct pollfd *fds = c->fds, *copy = c->copy;
	struct poll_slot *slots = c->slots;
	int ready = 0;

	for (nfds_t i = 0; i < c->nfds; i++) {
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
	return ready;
}

/* After the wait: what the kernel said, translated.  Returns how many are ready. */
static int slots_collect(struct poll_call *c)
{
	struct pollfd *fds = c->fds, *copy = c->copy;
	struct poll_slot *slots = c->slots;
	int count = 0;

	for (nfds_t i = 0; i < c->nfds; i++) {
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
	return count;
}

/* Nothing ready yet: spin this round (non-blocking) while the spin lasts and a peer runs? */
static bool poll_spin_round(struct poll_call *c)
{
	bool spinning;

	if (!c->spin_end)
		return false;
	spinning = smcr_now_ns() < c->spin_end && slots_peer_running(c->slots, c->nfds);
	if (!spinning)
		c->spin_end = 0;
	c->spun |= spinning;
	return spinning;
}

/* The kernel's timeout for a round: none if `now`, else what is left, or NULL (for ever). */
static struct timespec *round_timeout(const struct poll_call *c, bool now, struct timespec *left)
{
	int64_t ns;

	if (now) {
		left->tv_sec = 0;
		left->tv_nsec = 0;
		return left;
	}
	if (c->deadline < 0)
		return NULL;
	ns = c->deadline - smcr_now_ns();
	if (ns < 0)
		ns = 0;
	left->tv_sec = ns / 1000000000;
	left->tv_nsec = ns % 1000000000;
	return left;
}

/*
 * The kernel's wait on c->copy.  A wait that may sleep tells the peers,
 * which should not spin on this thread meanwhile.
 */
static int kernel_wait(struct poll_call *c, bool now, const sigset_t *mask)
{
	struct timespec left;
	bool sleeping = smcr_smc_spin_us > 0 && !now;
	int rc, err;

	if (sleeping)
		slots_set_sleeping(c->slots, c->nfds, true);
	rc = smcr_real.ppoll(c->copy, c->nfds, round_timeout(c, now, &left), mask);
	err = errno;
	if (sleeping)
		slots_set_sleeping(c->slots, c->nfds, false);
	errno = err;
	return rc;
}

/* Rounds of waiting until something is ready or the time is up: the count, or -1 with errno. */
static int poll_call_wait(struct poll_call *c, const sigset_t *mask)
{
	for (;;) {
		int ready = slots_prepare(c), rc, count;
		bool spinning = !ready && poll_spin_round(c);

		rc = kernel_wait(c, ready || spinning, mask);
		if (rc < 0)
			return -1;
		count = slots_collect(c);
		if (rc > 0 && count == 0)
			smcr_stats_wakeup_empty();
		c->won |= spinning && count;
		if (count || (c->deadline >= 0 && smcr_now_ns() >= c->deadline))
			return count;
		if (spinning)
			smcr_cpu_relax();
		/* Only spurious doorbells: wait again for what is left of the time. */
	}
}

int smcr_smc_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		   const sigset_t *mask)
{
	struct poll_call c;
	int rc, err;

	if (poll_call_start(&c, fds, nfds, timeout) < 0)
		return -1;
	rc = poll_call_wait(&c, mask);
	err = errno;
	poll_call_end(&c);
	if (rc < 0)
		errno = err;
	return rc;
}

/* The fds of select's sets as a poll array; returns its length. */
static nfds_t fdsets_to_poll(int nfds, const fd_set *r, const fd_set *w, const fd_set *x,
			     struct pollfd *fds)
{
	nfds_t n = 0;

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
	return n;
}

/* select answers EBADF for a closed fd in its sets, where poll reports POLLNVAL. */
static bool poll_any_invalid(const struct pollfd *fds, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		if (fds[i].revents & POLLNVAL)
			return true;
	return false;
}

/* poll's answer as select's sets; returns the count select reports. */
static int poll_to_fdsets(const struct pollfd *fds, nfds_t n, fd_set *r, fd_set *w, fd_set *x)
{
	int count = 0;

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
	return count;
}

int smcr_smc_pselect(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *timeout,
		     const sigset_t *mask)
{
	struct pollfd stack_fds[64], *fds = stack_fds;
	nfds_t n;
	int rc;

	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	if (nfds > 64) {
		fds = calloc((size_t)nfds, sizeof(*fds));
		if (!fds) {
			errno = ENOMEM;
			return -1;
		}
	}
	n = fdsets_to_poll(nfds, r, w, x, fds);
	rc = smcr_smc_ppoll(fds, n, timeout, mask);
	if (rc >= 0 && poll_any_invalid(fds, n)) {
		rc = -1;
		errno = EBADF;
	}
	if (rc >= 0)
		rc = poll_to_fdsets(fds, n, r, w, x);
	if (fds != stack_fds)
		free(fds);
	return rc;
}
