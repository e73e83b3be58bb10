/* SPDX-License-Identifier: MIT */
/*
 * Readiness of SMC sockets for poll, select and epoll (design §5).
 *
 * In SMC mode the TCP socket goes quiet; the engine's ready fd (an eventfd
 * doorbell) becomes readable whenever the connection may have changed state
 * for the events announced with smcr_sock_set_interest(). So:
 * - poll/select wait on the ready fd in place of the TCP fd and ask
 *   smcr_sock_poll() for the real mask after a wake-up;
 * - epoll: the ready fd sits in the application's own epoll set in place of
 *   the TCP fd, with the application's flags (EPOLLET, EPOLLONESHOT,
 *   EPOLLEXCLUSIVE), so one fd in several sets, nested epoll fds and epoll
 *   fds shared across fork all keep the kernel's semantics. What epoll_wait
 *   reports for it is filtered through smcr_sock_poll() (wake-ups may be
 *   spurious) and carries the application's data.
 *
 * epoll records: every registration of a tracked candidate or SMC socket gets
 * a record holding the application's events and data; the kernel holds the
 * record's address as its data, so epoll_wait can recognise its own reports
 * (an address inside the record arena) and a candidate that turns SMC later
 * (lazy classification) can be moved over to the doorbell. Records of one
 * entry are chained from the entry. One mutex guards all records; it is
 * never held across a blocking call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/log.h"
#include "common/spin.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

struct ep_rec {
	uint64_t data;               /* the application's */
	struct smcr_fd_entry *entry;
	int epfd;
	int fd;                      /* the application's fd number */
	uint32_t events;             /* the application's */
	uint32_t next;               /* index + 1 of the entry's next record */
	bool in_use;
	bool on_doorbell;            /* registered as the engine's ready fd */
	bool disarmed;               /* EPOLLONESHOT that fired */
	int hs_fd;                   /* >= 0: registered as this server handshake fd */
};

#define EP_MAX_RECORDS (1u << 20)
#define EP_PASS_FLAGS (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE | EPOLLWAKEUP)

static struct ep_rec *ep_arena;          /* EP_MAX_RECORDS, reserved, never unmapped */
static _Atomic uint32_t ep_high;         /* records ever handed out */
static uint32_t ep_free;                 /* index + 1 of the first free record */
static atomic_uint ep_live;              /* records in use */
static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;

bool smcr_smc_epoll_active(void)
{
	return atomic_load_explicit(&ep_live, memory_order_relaxed) != 0;
}

void smcr_smc_epoll_lock(void)
{
	pthread_mutex_lock(&ep_lock);
}

void smcr_smc_epoll_unlock(void)
{
	pthread_mutex_unlock(&ep_lock);
}

void smcr_smc_epoll_reinit_child(void)
{
	pthread_mutex_unlock(&ep_lock);
}

static uint32_t rec_index(const struct ep_rec *r)
{
	return (uint32_t)(r - ep_arena);
}

static struct ep_rec *rec_at(uint32_t index_plus_one)
{
	return index_plus_one ? &ep_arena[index_plus_one - 1] : NULL;
}

/*
 * The record behind a reported data value, or NULL (the application's own).
 * *stale: the value is a record that was freed (a report that raced with the
 * socket's release): it must not reach the application.
 */
static struct ep_rec *rec_from_data(uint64_t data, bool *stale)
{
	uintptr_t base = (uintptr_t)ep_arena, p = (uintptr_t)data;
	uint32_t high = atomic_load_explicit(&ep_high, memory_order_acquire);

	*stale = false;
	if (!ep_arena || p < base || p >= base + (uintptr_t)high * sizeof(struct ep_rec) ||
	    (p - base) % sizeof(struct ep_rec))
		return NULL;
	if (((struct ep_rec *)p)->in_use)
		return (struct ep_rec *)p;
	*stale = true;
	return NULL;
}

/* ep_lock held. */
static struct ep_rec *rec_alloc(void)
{
	struct ep_rec *r;

	if (!ep_arena) {
		void *p = mmap(NULL, (size_t)EP_MAX_RECORDS * sizeof(struct ep_rec),
			       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);

		if (p == MAP_FAILED)
			return NULL;
		ep_arena = p;
	}
	if (ep_free) {
		r = rec_at(ep_free);
		ep_free = r->next;
	} else {
		uint32_t high = atomic_load_explicit(&ep_high, memory_order_relaxed);

		if (high >= EP_MAX_RECORDS)
			return NULL;
		r = &ep_arena[high];
		atomic_store_explicit(&ep_high, high + 1, memory_order_release);
	}
	memset(r, 0, sizeof(*r));
	r->in_use = true;
	r->hs_fd = -1;
	atomic_fetch_add_explicit(&ep_live, 1, memory_order_relaxed);
	return r;
}

/* ep_lock held; r is already unlinked from its entry. */
static void rec_free(struct ep_rec *r)
{
	r->in_use = false;
	r->entry = NULL;
	r->next = ep_free;
	ep_free = rec_index(r) + 1;
	atomic_fetch_sub_explicit(&ep_live, 1, memory_order_relaxed);
}

static struct ep_rec *rec_find(struct smcr_fd_entry *e, int epfd, int fd)
{
	for (struct ep_rec *r = rec_at(e->epoll_regs); r; r = rec_at(r->next))
		if (r->epfd == epfd && r->fd == fd)
			return r;
	return NULL;
}

static void rec_unlink(struct smcr_fd_entry *e, struct ep_rec *r)
{
	uint32_t *link = &e->epoll_regs;

	while (*link) {
		struct ep_rec *cur = rec_at(*link);

		if (cur == r) {
			*link = r->next;
			return;
		}
		link = &cur->next;
	}
}

/* EPOLLIN|EPOLLOUT wanted by the entry's registrations.  ep_lock held. */
static unsigned entry_epoll_events(struct smcr_fd_entry *e)
{
	unsigned ev = 0;

	for (struct ep_rec *r = rec_at(e->epoll_regs); r; r = rec_at(r->next))
		if (!r->disarmed)
			ev |= r->events & (EPOLLIN | EPOLLOUT);
	return ev;
}

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

/*
 * What the kernel should watch for a record: the doorbell, a server
 * handshake's fd (both stand for the TCP fd: EPOLLIN means "look"), or the
 * TCP fd.
 */
static int rec_kernel_ctl(struct ep_rec *r, int op, struct smcr_sock *s)
{
	struct epoll_event ev = { .data.u64 = (uint64_t)(uintptr_t)r };

	if (r->on_doorbell || r->hs_fd >= 0) {
		ev.events = (r->disarmed ? 0 : EPOLLIN) | (r->events & EP_PASS_FLAGS);
		if (op == EPOLL_CTL_MOD)
			ev.events &= ~(uint32_t)EPOLLEXCLUSIVE; /* ADD only */
		return smcr_real.epoll_ctl(r->epfd, op,
					   r->on_doorbell ? smcr_sock_ready_fd(s) : r->hs_fd, &ev);
	}
	ev.events = r->events;
	if (op == EPOLL_CTL_MOD)
		ev.events &= ~(uint32_t)EPOLLEXCLUSIVE;
	return smcr_real.epoll_ctl(r->epfd, op, r->fd, &ev);
}

/*
 * Take a record out of the kernel's set, wherever it is registered now.
 * Returns what the kernel said.  ep_lock held.
 */
static int rec_kernel_del(struct ep_rec *r, struct smcr_sock *s)
{
	struct epoll_event dummy = { 0 };

	if (r->on_doorbell)
		return smcr_real.epoll_ctl(r->epfd, EPOLL_CTL_DEL, smcr_sock_ready_fd(s), &dummy);
	return smcr_real.epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->hs_fd >= 0 ? r->hs_fd : r->fd,
				   &dummy);
}

/*
 * The kernel's answer `err` for a record's own registration says the epoll
 * instance the record was made for is gone: its fd was closed (EBADF), or
 * its number now names another epoll instance (ENOENT) or no epoll at all
 * (EINVAL; a one-shot exclusive registration that exists answers MOD with
 * EINVAL too).  A record is keyed by the epfd's number, which the kernel
 * reuses: such a record must die, as the kernel's registration did.
 */
static bool rec_gone_errno(const struct ep_rec *r, int op, int err)
{
	if (err == EBADF || err == ENOENT)
		return true;
	return err == EINVAL && !(op == EPOLL_CTL_MOD && (r->events & EPOLLEXCLUSIVE));
}

/*
 * Does the kernel still hold the registration behind record r?  Asked only
 * when the application adds its fd to an epfd of the same number again: a
 * MOD with what is registered now changes nothing (at most an edge-triggered
 * registration that is ready reports once more, which epoll allows).
 * ep_lock held.
 */
static bool rec_gone(struct ep_rec *r, struct smcr_sock *s)
{
	int saved = errno;
	bool gone;

	if (r->on_doorbell && !s)
		return false; /* no doorbell to ask about here */
	gone = rec_kernel_ctl(r, EPOLL_CTL_MOD, s) < 0 && rec_gone_errno(r, EPOLL_CTL_MOD, errno);
	errno = saved;
	return gone;
}

/*
 * Re-register every record of the entry: on the doorbell of `s`, on the
 * handshake fd `hs_fd` (>= 0), or on the TCP fd (neither).
 */
static void entry_rewatch(struct smcr_fd_entry *e, struct smcr_sock *s, int hs_fd,
			  const char *what)
{
	int saved = errno;

	pthread_mutex_lock(&ep_lock);
	for (struct ep_rec *r = rec_at(e->epoll_regs), *next; r; r = next) {
		next = rec_at(r->next);
		if ((r->on_doorbell == (s != NULL) && r->hs_fd == hs_fd) || (r->on_doorbell && !s))
			continue; /* there already (or on the doorbell: SMC is for good) */
		if (rec_kernel_del(r, NULL) < 0 && rec_gone_errno(r, EPOLL_CTL_DEL, errno)) {
			/*
			 * Its epoll instance was closed: registering it again would put
			 * the application's old data into whatever epoll fd has its
			 * number now.
			 */
			rec_unlink(e, r);
			rec_free(r);
			continue;
		}
		r->on_doorbell = s != NULL;
		r->hs_fd = s ? -1 : hs_fd;
		if (rec_kernel_ctl(r, EPOLL_CTL_ADD, s) < 0)
			smcr_warn("fd %d: cannot move its epoll registration (epfd %d) to %s: %s",
				  r->fd, r->epfd, what, strerror(errno));
	}
	e->epoll_events = entry_epoll_events(e);
	pthread_mutex_unlock(&ep_lock);
	errno = saved;
}

void smcr_smc_epoll_move(struct smcr_fd_entry *e, struct smcr_sock *s)
{
	entry_rewatch(e, s, -1, "the SMC doorbell");
}

void smcr_smc_epoll_watch_handshake(struct smcr_fd_entry *e, int hs_fd)
{
	if (e->epoll_regs)
		entry_rewatch(e, NULL, hs_fd, "the handshake");
}

void smcr_smc_epoll_leave_doorbell(struct smcr_fd_entry *e, struct smcr_sock *s)
{
	int saved = errno;

	if (!e->epoll_regs)
		return;
	pthread_mutex_lock(&ep_lock);
	for (struct ep_rec *r = rec_at(e->epoll_regs), *next; r; r = next) {
		next = rec_at(r->next);
		if (!r->on_doorbell)
			continue;
		if (rec_kernel_del(r, s) < 0 && rec_gone_errno(r, EPOLL_CTL_DEL, errno)) {
			rec_unlink(e, r);
			rec_free(r);
			continue;
		}
		r->on_doorbell = false;
		r->hs_fd = -1;
		if (rec_kernel_ctl(r, EPOLL_CTL_ADD, NULL) < 0)
			smcr_warn("fd %d: cannot move its epoll registration (epfd %d) to the TCP"
				  " socket: %s", r->fd, r->epfd, strerror(errno));
	}
	e->epoll_events = entry_epoll_events(e);
	pthread_mutex_unlock(&ep_lock);
	errno = saved;
}

void smcr_smc_epoll_watch_tcp(struct smcr_fd_entry *e)
{
	if (e->epoll_regs)
		entry_rewatch(e, NULL, -1, "the TCP socket");
}

static SMCR_COLD __attribute__((noinline)) void forget_records(struct smcr_fd_entry *e,
								   struct smcr_sock *s)
{
	pthread_mutex_lock(&ep_lock);
	while (e->epoll_regs) {
		struct ep_rec *r = rec_at(e->epoll_regs);
		struct epoll_event dummy = { 0 };

		/* The doorbell outlives the socket's fds: take it out ourselves. */
		if (r->on_doorbell && s)
			smcr_real.epoll_ctl(r->epfd, EPOLL_CTL_DEL, smcr_sock_ready_fd(s), &dummy);
		else if (r->hs_fd >= 0)
			smcr_real.epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->hs_fd, &dummy);
		e->epoll_regs = r->next;
		rec_free(r);
	}
	e->epoll_events = 0;
	pthread_mutex_unlock(&ep_lock);
}

void smcr_smc_epoll_forget(struct smcr_fd_entry *e, struct smcr_sock *s)
{
	/*
	 * Read unlocked: the entry's last reference is gone, and registering it
	 * takes one, so nothing can add a record now. Most sockets never had
	 * one, and their close then takes no lock.
	 */
	if (e->epoll_regs)
		forget_records(e, s);
	else
		e->epoll_events = 0;
}

int smcr_smc_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	struct smcr_fd_entry *e;
	struct smcr_sock *s = NULL;
	struct ep_rec *r;
	unsigned char mode;
	int rc;

	if (!smcr_smc_enabled || smcr_guard_inside() || !smcr_preload_table_writable())
		return smcr_real.epoll_ctl(epfd, op, fd, event);
	e = smcr_fdtab_get(fd);
	if (!e)
		return smcr_real.epoll_ctl(epfd, op, fd, event);
	mode = atomic_load_explicit(&e->mode, memory_order_acquire);
	if (mode == SMCR_FD_SMC) {
		s = smcr_smc_sock_of(e);
		if (!s) /* inherited from the parent, or no engine socket: the kernel's */
			mode = SMCR_FD_FALLBACK;
	}
	pthread_mutex_lock(&ep_lock);
	r = rec_find(e, epfd, fd);
	if (r && op == EPOLL_CTL_ADD && rec_gone(r, s)) {
		/* left over from a closed epoll instance whose number came back */
		rec_unlink(e, r);
		rec_free(r);
		r = NULL;
	}
	if (!r && (op != EPOLL_CTL_ADD || (mode != SMCR_FD_CANDIDATE && mode != SMCR_FD_SMC))) {
		pthread_mutex_unlock(&ep_lock);
		smcr_fdtab_put(e);
		return smcr_real.epoll_ctl(epfd, op, fd, event);
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (r) {
			errno = EEXIST;
			rc = -1;
			break;
		}
		if (!event) {
			errno = EFAULT;
			rc = -1;
			break;
		}
		r = rec_alloc();
		if (!r) {
			errno = ENOMEM;
			rc = -1;
			break;
		}
		r->entry = e;
		r->epfd = epfd;
		r->fd = fd;
		r->events = event->events;
		r->data = event->data.u64;
		r->on_doorbell = s != NULL;
		if (!s) /* a server handshake in progress: its fd stands for the TCP fd */
			r->hs_fd = atomic_load_explicit(&e->handshake_fd, memory_order_acquire);
		rc = rec_kernel_ctl(r, EPOLL_CTL_ADD, s);
		if (rc < 0) {
			int err = errno;

			rec_free(r);
			errno = err;
			break;
		}
		r->next = e->epoll_regs;
		e->epoll_regs = rec_index(r) + 1;
		break;
	case EPOLL_CTL_MOD:
		if (!event) {
			errno = EFAULT;
			rc = -1;
			break;
		}
		r->events = event->events;
		r->data = event->data.u64;
		r->disarmed = false;
		rc = rec_kernel_ctl(r, EPOLL_CTL_MOD, s);
		break;
	default: /* EPOLL_CTL_DEL, or an invalid op the kernel rejects */
		rc = rec_kernel_ctl(r, op, s);
		if (op == EPOLL_CTL_DEL) {
			int err = errno;

			rec_unlink(e, r);
			rec_free(r);
			errno = err;
			/* Already gone from the kernel (the fd was closed): still a success. */
			if (rc < 0 && (errno == ENOENT || errno == EBADF))
				rc = 0;
		}
		break;
	}
	e->epoll_events = entry_epoll_events(e);
	pthread_mutex_unlock(&ep_lock);
	if (s) {
		smcr_smc_update_interest(e, s);
		smcr_smc_note_io(fd);
	}
	smcr_fdtab_put(e);
	return rc;
}

/* An engine poll mask, cut to what a waiter asked for (errors always). */
static uint32_t wanted_mask(unsigned mask, uint32_t events)
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

static unsigned sock_poll(struct smcr_sock *s)
{
	unsigned m;

	smcr_guard_enter();
	m = smcr_sock_poll(s);
	smcr_guard_leave();
	return m;
}

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
 * A connecting client seen writable (its handshake), an accepted socket seen
 * readable (the client's first bytes may be a Proposal: answering it is no
 * news for the application), a server handshake's fd (the client's answer).
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
	return (flags & SMCR_FD_F_ACCEPTED) && (got & (EPOLLIN | EPOLLERR | EPOLLHUP));
}

/* The kernel's own readiness of a TCP fd now, cut to `want`. */
static uint32_t tcp_mask(int fd, uint32_t want)
{
	struct pollfd p = { .fd = fd, .events = (short)(want & (EPOLLIN | EPOLLOUT | EPOLLRDHUP |
								 EPOLLPRI)) };

	if (smcr_real.poll(&p, 1, 0) <= 0)
		return 0;
	return wanted_mask((uint16_t)p.revents, want) | (p.revents & EPOLLPRI & want);
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
		return wanted_mask(sock_poll(s), want);
	if (atomic_load_explicit(&e->handshake, memory_order_acquire))
		return 0;
	/* TCP: what the kernel said if it watched the TCP fd, else ask it */
	return watched_tcp ? got : tcp_mask(fd, want);
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
			pthread_mutex_lock(&ep_lock);
			if (later[k].r->in_use && later[k].r->entry == e) {
				later[k].r->disarmed = false;
				rec_kernel_ctl(later[k].r, EPOLL_CTL_MOD, smcr_smc_sock_of(e));
			}
			pthread_mutex_unlock(&ep_lock);
		}
		smcr_fdtab_put(e);
	}
}

int smcr_smc_epoll_filter(int epfd, struct epoll_event *events, int n)
{
	int out = 0, smc_fds[SMCR_SMC_SPIN_SET_MAX], nsmc = 0, settled = 0;
	struct later_report later[LATER_BATCH];

	/* In batches: every candidate's decision is made before it is reported. */
	for (int i = 0; i < n;) {
		int nlater = 0;

		pthread_mutex_lock(&ep_lock);
		for (; i < n && nlater < LATER_BATCH; i++) {
			bool stale;
			struct ep_rec *r = rec_from_data(events[i].data.u64, &stale);
			struct smcr_fd_entry *e;

			if (!r) {
				if (!stale)
					events[out++] = events[i];
				continue;
			}
			e = r->entry;
			if (r->on_doorbell) {
				struct smcr_sock *s = smcr_smc_sock_of(e);
				uint32_t m = s ? wanted_mask(sock_poll(s), r->events) : 0;

				if (!m) {
					smcr_stats_wakeup_empty();
					/* Spurious: a one-shot registration must stay armed. */
					if (s && (r->events & EPOLLONESHOT))
						rec_kernel_ctl(r, EPOLL_CTL_MOD, s);
					continue;
				}
				if (r->events & EPOLLONESHOT)
					r->disarmed = true;
				events[out].events = m;
				if (nsmc < SMCR_SMC_SPIN_SET_MAX)
					smc_fds[nsmc++] = r->fd;
			} else {
				if (r->events & EPOLLONESHOT)
					r->disarmed = true;
				events[out].events = events[i].events;
				if (report_needs_settle(r, e, events[i].events)) {
					later[nlater].slot = out;
					later[nlater].fd = r->fd;
					later[nlater].want = r->events;
					later[nlater].watched_tcp = r->hs_fd < 0;
					later[nlater].oneshot = (r->events & EPOLLONESHOT) != 0;
					later[nlater].r = r;
					nlater++;
				}
			}
			events[out].data.u64 = r->data;
			out++;
		}
		pthread_mutex_unlock(&ep_lock);
		settle_later(events, later, nlater);
		settled += nlater;
	}
	spin_recent_note(epfd, smc_fds, nsmc);
	if (settled) {
		/* drop what turned out to be nothing for the application */
		int kept = 0;

		for (int i = 0; i < out; i++)
			if (events[i].events)
				events[kept++] = events[i];
		out = kept;
	}
	return out;
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

/* One governor per thread: the thread is what spins (common/spin.h). */
static __thread struct smcr_spin_gov poll_gov, epoll_gov;

/* The governor learns the outcome, and the published stats count it. */
static void spin_result(struct smcr_spin_gov *gov, bool won)
{
	smcr_spin_gov_result(gov, won);
	smcr_stats_spin(won);
}

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
				spin_result(&epoll_gov, n > 0);
			return n;
		}
		spun = true;
		if (smcr_now_ns() > end)
			break;
		smcr_cpu_relax();
	}
	if (spun)
		spin_result(&epoll_gov, false);
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

/* ---- poll and select ---------------------------------------------------------------- */

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
	return (short)wanted_mask(sock_poll(slot->s), (uint16_t)events);
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
		p->revents = (short)tcp_mask(p->fd, (uint16_t)p->events);
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
				fds[i].revents = (short)wanted_mask(INHERITED_MASK,
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
		spin_result(&poll_gov, won);
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
