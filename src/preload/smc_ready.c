/* SPDX-License-Identifier: MIT */
/*
 * Readiness of an SMC socket, as poll, select and epoll all see it
 * (design §5): the engine's mask cut to what a waiter asked for, the
 * kernel's for a TCP fd, the interest told to the engine, the doorbells the
 * data path left readable, and the spin's accounting.  Apart so that the
 * poll side (smc_poll.c) and the epoll side (smc_epoll.c, smc_epoll_wait.c)
 * answer the same question the same way.
 *
 * In SMC mode the TCP socket goes quiet; the engine's ready fd (an eventfd
 * doorbell) becomes readable whenever the connection may have changed state
 * for the events announced with smcr_sock_set_interest().  A wake-up may be
 * spurious: what a waiter is told always comes from smcr_sock_poll().
 */
#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "common/spin.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

void smcr_smc_update_interest(struct smcr_fd_entry *e, struct smcr_sock *s)
{
	unsigned ev = e->epoll_events;

	if (atomic_load_explicit(&e->poll_in, memory_order_relaxed))
		ev |= POLLIN;
	if (atomic_load_explicit(&e->poll_out, memory_order_relaxed))
		ev |= POLLOUT;
	smcr_guard_enter();
	smcr_sock_set_interest(s, ev);
	smcr_guard_leave();
}

/* An engine poll mask, cut to what a waiter asked for (errors always). */
uint32_t smcr_smc_wanted_mask(unsigned mask, uint32_t events)
{
	uint32_t want = (events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLRDNORM |
				   EPOLLWRNORM)) |
			EPOLLERR | EPOLLHUP;
	uint32_t m = mask & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLERR | EPOLLHUP);

	if (mask & EPOLLIN)
		m |= EPOLLRDNORM;
	if (mask & EPOLLOUT)
		m |= EPOLLWRNORM;
	return m & want;
}

unsigned smcr_smc_sock_poll(struct smcr_sock *s)
{
	unsigned m;

	smcr_guard_enter();
	m = smcr_sock_poll(s);
	smcr_guard_leave();
	return m;
}

/* The kernel's own readiness of a TCP fd now, cut to `want`. */
uint32_t smcr_smc_tcp_mask(int fd, uint32_t want)
{
	struct pollfd p = { .fd = fd, .events = (short)(want & (EPOLLIN | EPOLLOUT | EPOLLRDHUP |
								 EPOLLPRI)) };

	if (smcr_real.poll(&p, 1, 0) <= 0)
		return 0;
	return smcr_smc_wanted_mask((uint16_t)p.revents, want) | (p.revents & EPOLLPRI & want);
}

/* ---- doorbells left readable by the data path ---------------------------------------- */

/*
 * SMC sockets this thread sent or received on since its last epoll wait.
 * The engine may leave their doorbells readable for what was consumed
 * (smcr_sock_settle()): a client that reads its answer and then waits for
 * writability has the doorbell stand for that at no cost.  Whatever is
 * still not ready is settled before the thread waits, so the kernel does
 * not report it at once only for the filter to find nothing.  By fd number:
 * one closed meanwhile is skipped, one whose number came back is settled,
 * which never hurts.
 */
#define UNSETTLED_MAX 64

static __thread struct {
	int n;
	int fds[UNSETTLED_MAX];
} unsettled;

void smcr_smc_settle_io(void)
{
	int n = unsettled.n;

	unsettled.n = 0;
	for (int i = 0; i < n; i++) {
		struct smcr_fd_entry *e = smcr_fdtab_get(unsettled.fds[i]);
		struct smcr_sock *s = e ? smcr_smc_sock_of(e) : NULL;

		if (s) {
			smcr_guard_enter();
			smcr_sock_settle(s);
			smcr_guard_leave();
		}
		smcr_fdtab_put(e);
	}
}

void smcr_smc_note_io(int fd)
{
	for (int i = unsettled.n - 1; i >= 0; i--)
		if (unsettled.fds[i] == fd)
			return;
	if (unsettled.n == UNSETTLED_MAX)
		smcr_smc_settle_io();
	unsettled.fds[unsettled.n++] = fd;
}

/* ---- bounded spin (SMCR_SPIN_US, benchmarks.md §2) ------------------------------- */

/* The governor learns the outcome, and the published stats count it. */
void smcr_smc_spin_result(struct smcr_spin_gov *gov, bool won)
{
	smcr_spin_gov_result(gov, won);
	smcr_stats_spin(won);
}
