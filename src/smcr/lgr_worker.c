// SPDX-License-Identifier: MIT
/*
 * The link groups' one thread, the worker (see lgr.h): idle teardown,
 * keepalive, LLC requests no application thread takes, and forked
 * processes' requests to move a connection onto TCP (fork_tail.c).
 *
 * Why a thread: a group nobody uses has no
 * connection, so no application call and no readiness wake-up ever comes
 * through it, yet it must be torn down after its idle time (LLC DELETE LINK
 * to the peer, QP and memory freed), and an idle link must send TEST LINK
 * (the kernel's keepalive, which also makes the NIC notice a vanished peer
 * host) and answer the peer's.  So while at least one group exists, one
 * detached thread sleeps until the next of those deadlines, does that work
 * and exits with the last group.  It runs with every signal blocked and
 * touches groups only, but for a forked process's request: then, with no
 * group lock held, it moves the connection onto TCP (fork_tail.c).
 *
 * LLC requests (TEST LINK, CONFIRM/DELETE RKEY, DELETE LINK) want their
 * answer within 2 s whether or not an application thread looks, and are
 * answered when they arrive: the worker sleeps in poll() on the channel fd
 * (g->epfd, every link's completion channel) of each group that no
 * application thread drained for SMCR_LGR_LLC_WATCH_MS, beside its own
 * eventfd (kicks), the device's event and removal fds and an inotify fd
 * on /dev/infiniband (a device appearing: lgr_readd.c).  An idle process
 * thus sleeps until a message, a device event or a deadline (keepalive,
 * teardown): no periodic wake-up.  While application threads take a
 * group's completions, the worker leaves its channel alone (no herd: they
 * would all wake for every data completion) and only looks again when they
 * have been quiet for SMCR_LGR_LLC_WATCH_MS; a request that comes while an
 * application thread is busy elsewhere waits at most that long.
 *
 * The invariant that makes this safe, with application threads and the
 * worker taking completions from the same channel (a channel event nobody
 * reads is a lost wake-up; wr.c's due-event counting prevents it):
 * while the worker sleeps on a watched group, for each link either its
 * receive CQ is armed (the next message or failure raises an event and
 * g->epfd turns readable) or an event sits in the channel already (g->epfd
 * readable), and the group's LLC queue is empty.  (Our own send completions
 * are on a channel of their own that only wr.c's waits sleep on, with the
 * group mutex held: they wake neither the worker nor any connection's
 * waiter, and are taken by whichever call comes next; wr.c.)
 *  - Whoever takes completions dispatches all of them: CDCs to their
 *    connection's queue and doorbell (level-triggered eventfd: its owner
 *    sees it whoever took the event), LLC messages to the group's queue.
 *  - Only smcr_wr_arm() reads the receive channel's events, and it leaves
 *    the CQ armed again; a thread that takes completions without arming
 *    leaves the event the spent arm raised in the channel (or due, wr.c),
 *    so the first half holds after any thread's call.  The worker arms and
 *    drains twice before it sleeps (the second arm re-arms what the first
 *    drain spent).
 *  - smcr_lgr_drain_locked() empties the LLC queue.  The paths that take completions
 *    and return without it (wr.c's waits for send-queue room or for a
 *    flush) may leave a message queued: on_message() then kicks the worker
 *    if it watches the group.
 * An event one thread reads is therefore never lost to another: a waiter
 * the channel woke finds its CDC behind its doorbell, and an LLC request is
 * handled by the first thread to come (the worker or an application thread
 * that drains).  Nobody takes a group mutex in the worker's poll(): it
 * tries each group's mutex and counts a held one as in use (looked at again
 * SMCR_LGR_LLC_WATCH_MS later), so it never waits on a sender blocked in
 *
 * It holds the list mutex while it walks the groups (lgr_int.h: the list
 * mutex before a group's).
 */
#include "smcr/lgr.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "common/config.h"
#include "common/log.h"
#include "smcr/fork_tail.h"
#include "smcr/libc.h"
#include "smcr/llc.h"
#include "smcr/lgr_int.h"
#include "smcr/sys.h"

#define LGR_CLIENT_IDLE_EXTRA_MS 2000 /* see tick_locked() */
#define LGR_DEV_SETTLE_MS 1000 /* a device just appeared: its GIDs and port come up */
#define LGR_WATCH_FDS 4 /* poll entries per watched group, at most (watch_fds_locked) */

static void *worker(void *arg);

/* Wake the worker (any thread; a write to an eventfd never blocks). */
void smcr_lgr_worker_wake(void)
{
	uint64_t one = 1;
	int fd = __atomic_load_n(&smcr_lgrs.worker_kick_fd, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		(void)!smcr_libc.write(fd, &one, sizeof(one));
}

/* List mutex held: make sure the worker runs (it exits with the last group). */
void smcr_lgr_worker_start_locked(void)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;

	if (smcr_lgrs.worker_running) {
		smcr_lgr_worker_wake();
		return;
	}
	if (smcr_lgrs.worker_kick_fd < 0) {
		int fd = smcr_sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

		if (fd >= 0)
			__atomic_store_n(&smcr_lgrs.worker_kick_fd, smcr_sys_fd_high(fd), __ATOMIC_RELEASE);
		else
			smcr_warn("verbs: no eventfd for the link-group thread; it wakes on timers only");
	}
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, &attr, worker, NULL) == 0)
		smcr_lgrs.worker_running = true;
	else
		smcr_warn("verbs: no link-group timer thread; idle groups stay until exit");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

/* SMCR_TESTLINK_TIME, else SMCR_LGR_KEEPALIVE_MS (the kernel's default) */
static int64_t keepalive_ms(void)
{
	unsigned s = smcr_config_get()->testlink_s;

	return s ? (int64_t)s * 1000 : SMCR_LGR_KEEPALIVE_MS;
}

/* CDCs handed to g's connections so far (did the worker's drain bring any?) */
static uint64_t delivered_locked(const struct smcr_lgr *g)
{
	uint64_t n = 0;

	for (const struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		n += c->delivered;
	return n;
}

/*
 * One group's timers, both mutexes held.  True if the group must go now
 * (unused and idle long enough, or dead and unused).  *watch: no application
 * thread took its completions for SMCR_LGR_LLC_WATCH_MS, so the worker
 * sleeps on its channel.
 */
static bool tick_locked(struct smcr_lgr *g, int64_t now, int64_t *next, bool *watch)
{
	int64_t due, keepalive;

	*watch = false;
	smcr_lgr_poll_locked(g); /* what others left: completions, LLC work */
	smcr_lgr_device_events_locked(g);
	if (g->connected && g->state != SMCR_LGR_DEAD) {
		due = g->last_drain_ms + SMCR_LGR_LLC_WATCH_MS;
		if (now >= due)
			*watch = true;
		else if (due < *next)
			*next = due;
	}
	if (g->refs == 0) {
		/*
		 * The client keeps an unused group longer than the server, as the
		 * kernel does (SMC_LGR_FREE_DELAY_CLNT = _SERV + 10 s): the server
		 * ends it first, so it never offers a group the client has just
		 * deleted (its DELETE LINK still on the wire or in the server's
		 * completion queue; rxe VM: IPv4 fell back SYNCERR after 5 s of IPv6).
		 */
		int64_t keep = smcr_lgrs.idle_ms + (g->key.role == SMCR_LGR_CLIENT ? LGR_CLIENT_IDLE_EXTRA_MS : 0);

		if (g->state == SMCR_LGR_DEAD || now - g->idle_since_ms >= keep)
			return true;
		due = g->idle_since_ms + keep;
		if (due < *next)
			*next = due;
	}
	if (g->state != SMCR_LGR_ACTIVE)
		return false;
	/* the server's second link: its ADD LINK or CONFIRM LINK unanswered in time */
	if ((g->alt.state == SMCR_LGR_LINK_ADDING || g->alt.state == SMCR_LGR_LINK_PENDING) &&
	    g->alt.since_ms && g->key.role == SMCR_LGR_SERVER) {
		due = g->alt.since_ms + (g->alt.state == SMCR_LGR_LINK_ADDING ? SMCR_LGR_LLC_WAIT_MS
									  : SMCR_LGR_LLC_FIRST_WAIT_MS);
		if (now >= due)
			smcr_lgr_llc_alt_timeout(g);
		else if (due < *next)
			*next = due;
	}
	smcr_lgr_readd_tick_locked(g, now, next); /* a second link again, lgr_readd.c */
	keepalive = keepalive_ms();
	if (g->testlink_sent_ms) {
		if (g->last_rx_ms > g->testlink_sent_ms) {
			g->testlink_sent_ms = 0;
		} else if (now - g->testlink_sent_ms >= keepalive) {
			smcr_lgr_fail_locked(g, "TEST LINK not answered");
			return g->refs == 0;
		}
	}
	if (!g->testlink_sent_ms && now - g->last_rx_ms >= keepalive) {
		if (smcr_lgr_llc_send_test_link(g) == 0)
			g->testlink_sent_ms = now;
	}
	due = (g->testlink_sent_ms ? g->testlink_sent_ms : g->last_rx_ms) + keepalive;
	if (due < *next)
		*next = due;
	return false;
}

/*
 * Before the worker sleeps on g (see the invariant at the top): arm and
 * drain, twice.  The drain after an arm takes what completed before it (that
 * raised no event); the second arm re-arms a receive CQ whose arm the first
 * drain spent (a message that came meanwhile, or the failure of an answer
 * it sent: the QP in error flushes our receives, wr.c).  An answer's own
 * completion needs no event.  False if the group died meanwhile.  Group mutex held throughout: nobody else takes
 * completions until the worker sleeps.
 */
static bool watch_locked(struct smcr_lgr *g)
{
	for (int i = 0; i < 2 && g->state != SMCR_LGR_DEAD; i++) {
		if (smcr_lgr_arm_locked(g) < 0)
			smcr_lgr_fail_locked(g, "cannot arm the completion queue");
		else
			smcr_lgr_poll_locked(g);
	}
	/* from here on others' takes of an LLC message kick us (we hold the mutex till then) */
	g->watched = g->state != SMCR_LGR_DEAD;
	return g->watched;
}

/* The fds whose readiness needs the worker for watched group g: poll entries. */
static size_t watch_fds_locked(const struct smcr_lgr *g, struct pollfd *p)
{
	size_t n = 0;

	p[n++] = (struct pollfd){ .fd = g->epfd, .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = g->port->ctx->async_fd, .events = POLLIN };
	if (g->port->removal_fd >= 0)
		p[n++] = (struct pollfd){ .fd = g->port->removal_fd, .events = POLLIN };
	if (g->alt.port && g->alt.port->removal_fd >= 0)
		p[n++] = (struct pollfd){ .fd = g->alt.port->removal_fd, .events = POLLIN };
	return n;
}

/* One pass over the groups: when to wake next, and the fds to sleep on. */
struct worker_round {
	int64_t now;
	int64_t next;         /* the earliest deadline seen */
	struct pollfd *pfd;   /* [0]: the kick eventfd, then each watched group's */
	size_t n, cap;
	int devwatch;         /* pfd's entry for devices appearing, or -1 */
	bool dev_added;       /* one appeared (smcr_lgrs.devs_added counts it at the next round) */
};

static void wake_by(struct worker_round *r, int64_t at)
{
	if (at < r->next)
		r->next = at;
}

/*
 * One group, list mutex held: its timers and LLC work, and whether the
 * worker sleeps on its channel.  True if it must be freed now.
 */
static bool visit(struct worker_round *r, struct smcr_lgr *g)
{
	uint64_t seen;
	bool go, watch;

	if (pthread_mutex_trylock(&g->mu)) {
		/* an application thread is in it: in use, looked at again later */
		wake_by(r, r->now + SMCR_LGR_LLC_WATCH_MS);
		return false;
	}
	seen = delivered_locked(g);
	/* (a group an application thread held when it appeared: the next visit that gets in) */
	if (g->devs_seen != smcr_lgrs.devs_added) {
		g->devs_seen = smcr_lgrs.devs_added;
		smcr_lgr_readd_arm_locked(g, LGR_DEV_SETTLE_MS, "an RDMA device appeared");
	}
	go = tick_locked(g, r->now, &r->next, &watch);
	if (go && g->state != SMCR_LGR_DEAD && g->connected) {
		/* idle: tell the peer, as the kernel (all links, orderly) */
		smcr_lgr_llc_send_delete_link(g, SMCR_LLC_DEL_PROG_INIT_TERM, true);
		(void)smcr_wr_flush(g->link, LGR_EXIT_FLUSH_MS);
		g->state = SMCR_LGR_DEAD;
	}
	if (watch && delivered_locked(g) != seen) {
		/* we took CDCs: their readers come for them (and for the rest) */
		g->last_drain_ms = r->now;
		watch = false;
		wake_by(r, r->now + SMCR_LGR_LLC_WATCH_MS);
	}
	g->watched = false;
	smcr_lgr_publish_locked(g); /* timers: an ADD LINK sent or given up, a group ended */
	if (!go && watch && g->state != SMCR_LGR_DEAD && watch_locked(g)) {
		if (r->n + LGR_WATCH_FDS <= r->cap)
			r->n += watch_fds_locked(g, r->pfd + r->n);
		else /* no memory: a timer */
			wake_by(r, r->now + SMCR_LGR_LLC_WATCH_MS);
	}
	pthread_mutex_unlock(&g->mu);
	return go;
}

/* Room for the kick fd and every group's watch fds (on no memory: what there is). */
static void round_start(struct worker_round *r)
{
	size_t want = 3 + LGR_WATCH_FDS * (size_t)smcr_lgrs.num;
	int requests = smcr_fork_request_fd();

	/* no deadline anywhere: a day; a wake-up is an event, a kick or a deadline */
	r->now = smcr_now_ms();
	r->next = r->now + 86400000;
	r->n = 0;
	if (r->dev_added) /* single-link groups try a second link again (visit) */
		smcr_lgrs.devs_added++;
	r->dev_added = false;
	if (want > r->cap) {
		struct pollfd *bigger = realloc(r->pfd, want * sizeof(*r->pfd));

		if (bigger) {
			r->pfd = bigger;
			r->cap = want;
		}
	}
	if (r->cap)
		r->pfd[r->n++] = (struct pollfd){ .fd = smcr_lgrs.worker_kick_fd, .events = POLLIN };
	/* forked processes' requests for the connections this process runs (fork_tail.c) */
	if (r->cap > 1 && requests >= 0)
		r->pfd[r->n++] = (struct pollfd){ .fd = requests, .events = POLLIN };
	/* devices appearing (`rdma link add`): a group left with one link tries again */
	r->devwatch = -1;
	if (smcr_lgrs.devwatch_fd == -1) { /* -2: cannot be watched here, not tried again */
		int fd = smcr_ib_watch_additions();

		smcr_lgrs.devwatch_fd = fd >= 0 ? fd : -2;
	}
	if (r->cap > 2 && smcr_lgrs.devwatch_fd >= 0) {
		r->devwatch = (int)r->n;
		r->pfd[r->n++] = (struct pollfd){ .fd = smcr_lgrs.devwatch_fd, .events = POLLIN };
	}
}

/* List mutex dropped: until the next deadline, a kick or a watched fd's event. */
static void round_sleep(struct worker_round *r)
{
	int64_t now = smcr_now_ms();
	int timeout = 0;

	if (r->next > now)
		timeout = r->next - now > 86400000 ? 86400000 : (int)(r->next - now);
	/* n == 0 (no memory): a plain sleep */
	r->dev_added = false;
	if (smcr_libc.poll(r->pfd, r->n, timeout) <= 0)
		return;
	if (r->devwatch >= 0 && (r->pfd[r->devwatch].revents & POLLIN))
		r->dev_added = smcr_ib_additions_read(r->pfd[r->devwatch].fd);
	if (r->pfd[0].revents & POLLIN) {
		uint64_t v;

		(void)!smcr_libc.read(r->pfd[0].fd, &v, sizeof(v));
	}
	/* no group lock held here: the answer takes connections' locks */
	if (r->n > 1 && r->pfd[1].fd == smcr_fork_request_fd() && (r->pfd[1].revents & POLLIN))
		smcr_fork_serve();
}

static void *worker(void *arg)
{
	struct worker_round r = { 0 };

	(void)arg;
	(void)pthread_setname_np(pthread_self(), "smcr-lgr");
	pthread_mutex_lock(&smcr_lgrs.mu);
	while (smcr_lgrs.head) {
		round_start(&r);
		for (struct smcr_lgr **p = &smcr_lgrs.head; *p;) {
			struct smcr_lgr *g = *p;

			if (!visit(&r, g)) {
				p = &g->next_lgr;
				continue;
			}
			*p = g->next_lgr;
			smcr_lgrs.num--;
			smcr_dbg("verbs: link group %u freed", g->id);
			smcr_lgr_free(g);
		}
		if (!smcr_lgrs.head)
			break;
		if (r.n == 0 || r.pfd[0].fd < 0) /* no kick can reach us: look every so often */
			wake_by(&r, r.now + SMCR_LGR_LLC_WATCH_MS);
		pthread_mutex_unlock(&smcr_lgrs.mu);
		round_sleep(&r);
		pthread_mutex_lock(&smcr_lgrs.mu);
	}
	smcr_lgrs.worker_running = false;
	pthread_mutex_unlock(&smcr_lgrs.mu);
	free(r.pfd);
	return NULL;
}
