/* SPDX-License-Identifier: MIT */
/*
 * epoll registrations of SMC sockets and candidates (design §5): the records
 * (smc_epoll.h), epoll_ctl() on them, and the moves of a registration when
 * its socket's mode changes.  Apart from what epoll_wait reports
 * (smc_epoll_wait.c) because this side keeps the bookkeeping, that side
 * only reads it.
 *
 * In SMC mode the TCP socket goes quiet: the engine's ready fd (an eventfd
 * doorbell) sits in the application's own epoll set in place of the TCP fd,
 * with the application's flags (EPOLLET, EPOLLONESHOT, EPOLLEXCLUSIVE), so
 * one fd in several sets, nested epoll fds and epoll fds shared across fork
 * all keep the kernel's semantics.
 *
 * The kernel holds a record's address as its data, so epoll_wait can
 * recognise its own reports (an address inside the record arena) and a
 * candidate that turns SMC later (lazy classification) can be moved over to
 * the doorbell. Records of one entry are chained from the entry. One mutex
 * guards all records; it is never held across a blocking call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_epoll.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

#define EP_MAX_RECORDS (1u << 20)
#define EP_PASS_FLAGS (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE | EPOLLWAKEUP)
/* What Linux lets an exclusive registration ask for (EPOLLEXCLUSIVE_OK_BITS). */
#define EP_EXCLUSIVE_OK                                                                        \
	(EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | EPOLLWRBAND | EPOLLERR | \
	 EPOLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE)

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

struct ep_rec *smcr_smc_epoll_rec_of(uint64_t data, bool *stale)
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


/*
 * What the kernel should watch for a record: the doorbell, a server
 * handshake's fd (both stand for the TCP fd: EPOLLIN means "look"), or the
 * TCP fd.
 */
static int rec_kernel_ctl(struct ep_rec *r, int op, struct smcr_sock *s)
{
	struct epoll_event ev = { .data.u64 = (uint64_t)(uintptr_t)r };

	if (r->on_doorbell || r->hs_fd >= 0) {
		/*
		 * Not exclusive there: Linux refuses EPOLLEXCLUSIVE on an epoll fd,
		 * which the doorbell is.  One connection's doorbell has one reader
		 * in practice; any other epoll instance on it wakes too, spuriously.
		 */
		ev.events = (r->disarmed ? 0 : EPOLLIN) |
			    (r->events & EP_PASS_FLAGS & ~(uint32_t)EPOLLEXCLUSIVE);
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

int smcr_smc_epoll_rearm(struct ep_rec *r, struct smcr_sock *s)
{
	return rec_kernel_ctl(r, EPOLL_CTL_MOD, s);
}

/*
 * Move record r from where the kernel has it (on the doorbell of `from`, if
 * it is there) to the doorbell of `to`, the handshake fd `hs_fd` (>= 0) or
 * the TCP fd (neither).  ep_lock held.
 */
static void rec_move(struct smcr_fd_entry *e, struct ep_rec *r, struct smcr_sock *from,
		     struct smcr_sock *to, int hs_fd, const char *what)
{
	if (rec_kernel_del(r, from) < 0 && rec_gone_errno(r, EPOLL_CTL_DEL, errno)) {
		/*
		 * Its epoll instance was closed: registering it again would put
		 * the application's old data into whatever epoll fd has its
		 * number now.
		 */
		rec_unlink(e, r);
		rec_free(r);
		return;
	}
	r->on_doorbell = to != NULL;
	r->hs_fd = to ? -1 : hs_fd;
	if (rec_kernel_ctl(r, EPOLL_CTL_ADD, to) < 0)
		smcr_warn("fd %d: cannot move its epoll registration (epfd %d) to %s: %s",
			  r->fd, r->epfd, what, strerror(errno));
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
		rec_move(e, r, NULL, s, hs_fd, what);
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
		if (r->on_doorbell)
			rec_move(e, r, s, NULL, -1, "the TCP socket");
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

/* EPOLL_CTL_ADD of a tracked fd: a record, registered where its mode says.  ep_lock held. */
static int rec_add(struct smcr_fd_entry *e, int epfd, int fd, const struct epoll_event *event,
		   struct smcr_sock *s)
{
	struct ep_rec *r;

	if (!event) {
		errno = EFAULT;
		return -1;
	}
	if ((event->events & EPOLLEXCLUSIVE) && (event->events & ~(uint32_t)EP_EXCLUSIVE_OK)) {
		errno = EINVAL; /* as Linux, wherever the record is registered */
		return -1;
	}
	r = rec_alloc();
	if (!r) {
		errno = ENOMEM;
		return -1;
	}
	r->entry = e;
	r->epfd = epfd;
	r->fd = fd;
	r->events = event->events;
	r->data = event->data.u64;
	r->on_doorbell = s != NULL;
	if (!s) /* a server handshake in progress: its fd stands for the TCP fd */
		r->hs_fd = atomic_load_explicit(&e->handshake_fd, memory_order_acquire);
	if (rec_kernel_ctl(r, EPOLL_CTL_ADD, s) < 0) {
		int err = errno;

		rec_free(r);
		errno = err;
		return -1;
	}
	r->next = e->epoll_regs;
	e->epoll_regs = rec_index(r) + 1;
	return 0;
}

/* EPOLL_CTL_MOD of a record: the application's new events and data, armed again. */
static int rec_mod(struct ep_rec *r, const struct epoll_event *event, struct smcr_sock *s)
{
	if (!event) {
		errno = EFAULT;
		return -1;
	}
	/* An exclusive wakeup is set by ADD only; Linux refuses to MOD it in or out. */
	if ((event->events | r->events) & EPOLLEXCLUSIVE) {
		errno = EINVAL;
		return -1;
	}
	r->events = event->events;
	r->data = event->data.u64;
	r->disarmed = false;
	return rec_kernel_ctl(r, EPOLL_CTL_MOD, s);
}

/* EPOLL_CTL_DEL of a record, or an invalid op the kernel rejects.  ep_lock held. */
static int rec_del(struct smcr_fd_entry *e, struct ep_rec *r, int op, struct smcr_sock *s)
{
	int rc = rec_kernel_ctl(r, op, s), err = errno;

	if (op != EPOLL_CTL_DEL)
		return rc;
	rec_unlink(e, r);
	rec_free(r);
	errno = err;
	/* Already gone from the kernel (the fd was closed): still a success. */
	if (rc < 0 && (errno == ENOENT || errno == EBADF))
		rc = 0;
	return rc;
}

/*
 * The entry's record for (epfd, fd), or NULL.  An ADD finds none where a
 * record is left over from a closed epoll instance whose number came back.
 * ep_lock held.
 */
static struct ep_rec *rec_current(struct smcr_fd_entry *e, int epfd, int fd, int op,
				  struct smcr_sock *s)
{
	struct ep_rec *r = rec_find(e, epfd, fd);

	if (r && op == EPOLL_CTL_ADD && rec_gone(r, s)) {
		rec_unlink(e, r);
		rec_free(r);
		r = NULL;
	}
	return r;
}

int smcr_smc_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	struct smcr_fd_entry *e;
	struct smcr_sock *s = NULL;
	struct ep_rec *r;
	unsigned char mode;
	int rc, err;

	if (!smcr_smc_enabled || smcr_guard_inside() || !smcr_preload_table_writable())
		return smcr_real.epoll_ctl(epfd, op, fd, event);
	e = smcr_fdtab_get(fd);
	if (!e)
		return smcr_real.epoll_ctl(epfd, op, fd, event);
	mode = atomic_load_explicit(&e->mode, memory_order_acquire);
	if (mode == SMCR_FD_SMC) {
		s = smcr_smc_sock_of(e);
		if (!s) { /* the parent's (its first use goes on over TCP), or no engine socket */
			(void)smcr_smc_inherited(e);
			mode = SMCR_FD_FALLBACK;
		}
	}
	pthread_mutex_lock(&ep_lock);
	r = rec_current(e, epfd, fd, op, s);
	if (!r && (op != EPOLL_CTL_ADD || (mode != SMCR_FD_CANDIDATE && mode != SMCR_FD_SMC))) {
		pthread_mutex_unlock(&ep_lock);
		smcr_fdtab_put(e);
		return smcr_real.epoll_ctl(epfd, op, fd, event);
	}
	if (op == EPOLL_CTL_ADD && r) {
		errno = EEXIST;
		rc = -1;
	} else if (op == EPOLL_CTL_ADD) {
		rc = rec_add(e, epfd, fd, event, s);
	} else if (op == EPOLL_CTL_MOD) {
		rc = rec_mod(r, event, s);
	} else {
		rc = rec_del(e, r, op, s);
	}
	err = errno;
	e->epoll_events = entry_epoll_events(e);
	pthread_mutex_unlock(&ep_lock);
	if (s) {
		smcr_smc_update_interest(e, s);
		smcr_smc_note_io(fd);
	}
	smcr_fdtab_put(e);
	/*
	 * The answer's errno, not one of the bookkeeping's: libuv aborts when an
	 * ADD fails with anything but EEXIST (it then retries as MOD).
	 */
	errno = err;
	return rc;
}
