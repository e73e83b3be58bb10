/* SPDX-License-Identifier: MIT */
/*
 * What epoll_wait reports of SMC sockets and candidates (design §5): each
 * report of a record (smc_epoll.h) is filtered through smcr_sock_poll() and
 * carries the application's data; a candidate's report waits for its
 * decision first; and the bounded spin before a wait.  Apart from the
 * registrations (smc_epoll.c) because this runs on every wake-up, on the
 * thread that waits, and only reads the records.
 */
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>

#include "common/spin.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_epoll.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/* ---- the reports of one wait ------------------------------------------------------ */

/*
 * The SMC sockets the thread's last epoll_wait reported, the ones its next
 * wait most likely waits for: the spin looks at their peers (a request/response
 * loop waits on the connection that just answered).  Kept per thread, so a
 * wait never scans all registrations (a server may hold 100000).
 */
static __thread struct {
	int epfd, n;
	int fds[SMCR_SMC_SPIN_SET_MAX];
} spin_recent = { .epfd = -1 };

static void spin_recent_note(int epfd, const int *fds, int n)
{
	if (n == 0)
		return; /* only plain fds were ready: keep what the spin knew */
	spin_recent.epfd = epfd;
	spin_recent.n = n;
	memcpy(spin_recent.fds, fds, (size_t)n * sizeof(*fds));
}

/*
 * A candidate the kernel reported: does its report need a decision first?
 * A connecting client seen writable (its handshake), a blocking accepted
 * socket seen readable (the client's first bytes may be a Proposal:
 * answering it is no news for the application, whose read would wait), a
 * server handshake's fd (the client's answer).  A non-blocking accepted
 * socket is reported as the kernel sees it: its first read looks at the
 * bytes itself (smcr_smc_server_first_read), with no peek before it, and
 * reads EAGAIN where they were a Proposal, as a read during any handshake.
 */
static bool report_needs_settle(struct ep_rec *r, struct smcr_fd_entry *e, uint32_t got)
{
	unsigned flags;

	if (!smcr_smc_enabled ||
	    atomic_load_explicit(&e->mode, memory_order_acquire) != SMCR_FD_CANDIDATE)
		return false;
	if (r->hs_fd >= 0)
		return true;
	flags = atomic_load_explicit(&e->flags, memory_order_relaxed);
	if (flags & SMCR_FD_F_CONNECTING)
		return (got & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0;
	return (flags & SMCR_FD_F_ACCEPTED) && !(flags & SMCR_FD_F_NONBLOCK) &&
	       (got & (EPOLLIN | EPOLLERR | EPOLLHUP));
}


/*
 * After the decision: what to report for an entry, given the kernel's report
 * `got` on the fd it watched.  0: nothing (a handshake goes on).
 */
static uint32_t report_after_settle(int fd, struct smcr_fd_entry *e, uint32_t want, uint32_t got,
				    bool watched_tcp)
{
	struct smcr_sock *s = smcr_smc_sock_of(e);

	if (s)
		return smcr_smc_wanted_mask(smcr_smc_sock_poll(s), want);
	if (atomic_load_explicit(&e->handshake, memory_order_acquire))
		return 0;
	/* TCP: what the kernel said if it watched the TCP fd, else ask it */
	return watched_tcp ? got : smcr_smc_tcp_mask(fd, want);
}

/* Candidates whose report waits for a decision, made after the lock. */
struct later_report {
	int slot, fd;
	uint32_t want;
	bool watched_tcp;
	bool oneshot;
	struct ep_rec *r;
};

#define LATER_BATCH 64

/* The decisions `later` waited for, and what each report becomes. */
static void settle_later(struct epoll_event *events, const struct later_report *later, int nlater)
{
	for (int k = 0; k < nlater; k++) {
		int slot = later[k].slot, fd = later[k].fd;
		struct smcr_fd_entry *e = smcr_fdtab_get(fd);

		if (!e)
			continue;
		/* a step, never a wait: the peer's answer comes as a report of its own */
		smcr_smc_settle(fd, e, SMCR_IO_POLL, false);
		events[slot].events = report_after_settle(fd, e, later[k].want, events[slot].events,
							  later[k].watched_tcp);
		if (!events[slot].events && later[k].oneshot) {
			/* nothing for the application: a one-shot stays armed */
			smcr_smc_epoll_lock();
			if (later[k].r->in_use && later[k].r->entry == e) {
				later[k].r->disarmed = false;
				smcr_smc_epoll_rearm(later[k].r, smcr_smc_sock_of(e));
			}
			smcr_smc_epoll_unlock();
		}
		smcr_fdtab_put(e);
	}
}

/* One wait's reports, translated in place: events[in] read, events[out] written. */
struct report_filter {
	struct epoll_event *events;
	int n, in, out;
	int smc_fds[SMCR_SMC_SPIN_SET_MAX], nsmc;  /* SMC sockets reported, for the spin */
	struct later_report later[LATER_BATCH];
	int nlater;
};

/* A report of a record on the doorbell: the socket's mask, or 0 (spurious).  Lock held. */
static uint32_t doorbell_report(struct ep_rec *r)
{
	struct smcr_sock *s = smcr_smc_sock_of(r->entry);
	uint32_t m = s ? smcr_smc_wanted_mask(smcr_smc_sock_poll(s), r->events) : 0;

	if (!m) {
		smcr_stats_wakeup_empty();
		/* Spurious: a one-shot registration must stay armed. */
		if (s && (r->events & EPOLLONESHOT))
			smcr_smc_epoll_rearm(r, s);
		return 0;
	}
	if (r->events & EPOLLONESHOT)
		r->disarmed = true;
	return m;
}

/* The report of a record on the TCP or handshake fd; a candidate's may wait for its decision. */
static void kernel_report(struct report_filter *f, struct ep_rec *r, uint32_t got)
{
	struct later_report *l = &f->later[f->nlater];

	if (r->events & EPOLLONESHOT)
		r->disarmed = true;
	f->events[f->out].events = got;
	if (!report_needs_settle(r, r->entry, got))
		return;
	l->slot = f->out;
	l->fd = r->fd;
	l->want = r->events;
	l->watched_tcp = r->hs_fd < 0;
	l->oneshot = (r->events & EPOLLONESHOT) != 0;
	l->r = r;
	f->nlater++;
}

/* Translate reports until LATER_BATCH of them wait for a decision.  Lock held. */
static void filter_batch(struct report_filter *f)
{
	for (; f->in < f->n && f->nlater < LATER_BATCH; f->in++) {
		struct epoll_event *ev = &f->events[f->in];
		bool stale;
		struct ep_rec *r = smcr_smc_epoll_rec_of(ev->data.u64, &stale);

		if (!r) {
			if (!stale)
				f->events[f->out++] = *ev;
			continue;
		}
		if (r->on_doorbell) {
			uint32_t m = doorbell_report(r);

			if (!m)
				continue;
			f->events[f->out].events = m;
			if (f->nsmc < SMCR_SMC_SPIN_SET_MAX)
				f->smc_fds[f->nsmc++] = r->fd;
		} else {
			kernel_report(f, r, ev->events);
		}
		f->events[f->out].data.u64 = r->data;
		f->out++;
	}
}

/* Drop the reports that turned out to be nothing for the application. */
static int drop_empty(struct epoll_event *events, int n)
{
	int kept = 0;

	for (int i = 0; i < n; i++)
		if (events[i].events)
			events[kept++] = events[i];
	return kept;
}

int smcr_smc_epoll_filter(int epfd, struct epoll_event *events, int n)
{
	struct report_filter f; /* not zeroed: it is on every wait's path */
	int settled = 0;

	f.events = events;
	f.n = n;
	f.in = 0;
	f.out = 0;
	f.nsmc = 0;

	/* In batches: every candidate's decision is made before it is reported. */
	while (f.in < n) {
		f.nlater = 0;
		smcr_smc_epoll_lock();
		filter_batch(&f);
		smcr_smc_epoll_unlock();
		settle_later(events, f.later, f.nlater);
		settled += f.nlater;
	}
	spin_recent_note(epfd, f.smc_fds, f.nsmc);
	return settled ? drop_empty(events, f.out) : f.out;
}

/* One governor per thread: the thread is what spins (common/spin.h). */
static __thread struct smcr_spin_gov epoll_gov;

static bool spin_set_peer_running(const struct smcr_smc_spin_set *set)
{
	for (int i = 0; i < set->n; i++) {
		struct smcr_sock *s = smcr_smc_sock_of(set->e[i]);

		if (s && smcr_sock_peer_running(s))
			return true;
	}
	return false;
}

static void spin_set_sleeping(struct smcr_smc_spin_set *set, bool sleeping)
{
	for (int i = 0; i < set->n; i++) {
		struct smcr_sock *s = smcr_smc_sock_of(set->e[i]);

		if (s)
			smcr_sock_set_sleeping(s, sleeping);
	}
}

/* The SMC sockets of spin_recent still open (references taken). */
static void spin_set_collect(int epfd, struct smcr_smc_spin_set *set)
{
	set->n = 0;
	if (spin_recent.epfd != epfd)
		return;
	for (int i = 0; i < spin_recent.n; i++) {
		struct smcr_fd_entry *e = smcr_fdtab_get(spin_recent.fds[i]);

		if (e && smcr_smc_sock_of(e))
			set->e[set->n++] = e;
		else
			smcr_fdtab_put(e);
	}
}

int smcr_smc_epoll_spin(int epfd, struct epoll_event *events, int maxevents,
			const sigset_t *mask, bool pwait, struct smcr_smc_spin_set *set)
{
	int64_t end = smcr_now_ns() + (int64_t)smcr_smc_spin_us * 1000;
	bool spun = false, allow;

	spin_set_collect(epfd, set);
	allow = set->n && smcr_spin_gov_allow(&epoll_gov);
	while (allow && spin_set_peer_running(set)) {
		int n = pwait ? smcr_real.epoll_pwait(epfd, events, maxevents, 0, mask)
			      : smcr_real.epoll_wait(epfd, events, maxevents, 0);

		if (n > 0)
			n = smcr_smc_epoll_filter(epfd, events, n);
		if (n != 0) {
			if (spun)
				smcr_smc_spin_result(&epoll_gov, n > 0);
			return n;
		}
		spun = true;
		if (smcr_now_ns() > end)
			break;
		smcr_cpu_relax();
	}
	if (spun)
		smcr_smc_spin_result(&epoll_gov, false);
	/* Going to sleep: the peers should not spin on us meanwhile. */
	spin_set_sleeping(set, true);
	return 0;
}

void smcr_smc_epoll_spin_end(struct smcr_smc_spin_set *set)
{
	spin_set_sleeping(set, false);
	for (int i = 0; i < set->n; i++)
		smcr_fdtab_put(set->e[i]);
	set->n = 0;
}
