// SPDX-License-Identifier: MIT
/*
 * Who holds a connection that follows fork (conn.h, design §8).
 *
 * A process holds a shared connection from its creation (the creator) or
 * from its fork (a child of a holder) until it closes its last fd of it,
 * exits, or execs.  fork: the parent reserves a slot per connection in its
 * prepare handler (-its pid: "my child's"), so a close in the parent right
 * after fork, before the child's handler ran, already counts the child; the
 * child takes the slot in its own handler.  Holders are named by pid and
 * start time: one killed without a word (SIGKILL), or whose pid was reused,
 * is let go of by the next holder that closes, or that takes the lock the
 * dead one held (the lock is robust).  The last holder's close is the
 * connection's close.
 *
 * This process's list of the shared connections it holds is private memory:
 * a child inherits it as it was at fork, which is exactly what it holds.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "smcr/conn.h"
#include "smcr/libc.h"
#include "smcr/share.h"
#include "smcr/stats.h"

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smcr_sock **held;
static unsigned n_held, cap_held;
static pid_t forking_pid; /* the forking process, for its child's handler */

/* A process that holds no slot still counts somewhere (stats, waiters): here. */
static __thread struct smcr_holder stray;

static bool holder_is_gone(const struct smcr_holder *h)
{
	if (h->pid > 0)
		return !smcr_share_alive(h->pid, h->start);
	/* Reserved for a child: gone with its parent (the child takes it at once). */
	return h->pid < 0 && !smcr_share_alive(-h->pid, 0);
}

static void holder_clear(struct smcr_sock *s, struct smcr_holder *h)
{
	s->waiters_rd -= h->waiters_rd < s->waiters_rd ? h->waiters_rd : s->waiters_rd;
	s->waiters_wr -= h->waiters_wr < s->waiters_wr ? h->waiters_wr : s->waiters_wr;
	memset(h, 0, sizeof(*h));
	smcr_hold_sum_interest(s);
}

/* Holders that died (or whose reservation's parent died) let go of.  Lock held. */
static void prune_dead(struct smcr_sock *s, pid_t me)
{
	for (unsigned i = 0; i < SMCR_HOLDERS_MAX; i++) {
		struct smcr_holder *h = &s->holders[i];

		if (h->pid != 0 && h->pid != me && holder_is_gone(h)) {
			smcr_dbg("fd %d: holder pid %d is gone", smcr_fd_label(s->tcp_fd),
				 (int)(h->pid > 0 ? h->pid : -h->pid));
			holder_clear(s, h);
		}
	}
}

void smcr_conn_lock(struct smcr_sock *s)
{
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) {
		/*
		 * A holder died inside the engine.  What it was doing is at
		 * worst half done the way a reset half-does it: a cursor moved
		 * without its CDC (the next CDC carries it), bytes taken that it
		 * never delivered (as from a killed process's socket).
		 */
		pthread_mutex_consistent(&s->lock);
		smcr_warn("fd %d: a process died inside this connection's engine",
			  smcr_fd_label(s->tcp_fd));
		prune_dead(s, smcr_share_pid());
	}
}

bool smcr_conn_trylock(struct smcr_sock *s)
{
	int rc = pthread_mutex_trylock(&s->lock);

	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&s->lock);
		prune_dead(s, smcr_share_pid());
		return true;
	}
	return rc == 0;
}

void smcr_conn_unlock(struct smcr_sock *s)
{
	pthread_mutex_unlock(&s->lock);
}

static void held_add(struct smcr_sock *s)
{
	pthread_mutex_lock(&held_lock);
	if (n_held == cap_held) {
		unsigned cap = cap_held ? cap_held * 2 : 16;
		struct smcr_sock **n = realloc(held, cap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&held_lock);
			/* Not listed: a child will not take it and reads it as reset. */
			return;
		}
		held = n;
		cap_held = cap;
	}
	held[n_held++] = s;
	pthread_mutex_unlock(&held_lock);
}

void smcr_hold_each(void (*fn)(const struct smcr_sock *s))
{
	pthread_mutex_lock(&held_lock);
	for (unsigned i = 0; i < n_held; i++) {
		smcr_conn_lock(held[i]);
		fn(held[i]);
		smcr_conn_unlock(held[i]);
	}
	pthread_mutex_unlock(&held_lock);
}

void smcr_hold_forget(struct smcr_sock *s)
{
	if (!s->shared)
		return;
	pthread_mutex_lock(&held_lock);
	for (unsigned i = 0; i < n_held; i++) {
		if (held[i] == s) {
			held[i] = held[--n_held];
			break;
		}
	}
	pthread_mutex_unlock(&held_lock);
}

void smcr_hold_init(struct smcr_sock *s)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	if (s->shared) {
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	}
	pthread_mutex_init(&s->lock, &a);
	pthread_mutexattr_destroy(&a);
	/* The start time is read when it first matters: at this process's first fork. */
	s->holders[0].pid = smcr_share_pid();
	if (s->shared)
		held_add(s);
}

struct smcr_holder *smcr_hold_self(struct smcr_sock *s)
{
	pid_t me = smcr_share_pid();

	for (unsigned i = 0; i < SMCR_HOLDERS_MAX; i++)
		if (s->holders[i].pid == me)
			return &s->holders[i];
	return &stray;
}

void smcr_hold_sum_interest(struct smcr_sock *s)
{
	unsigned ev = 0;

	for (unsigned i = 0; i < SMCR_HOLDERS_MAX; i++)
		if (s->holders[i].pid > 0)
			ev |= s->holders[i].interest;
	s->interest = ev;
}

bool smcr_hold_others_live(struct smcr_sock *s)
{
	pid_t me = smcr_share_pid();

	if (!s->shared)
		return false;
	prune_dead(s, me);
	for (unsigned i = 0; i < SMCR_HOLDERS_MAX; i++)
		if (s->holders[i].pid != 0 && s->holders[i].pid != me)
			return true;
	return false;
}

void smcr_hold_drop(struct smcr_sock *s)
{
	struct smcr_holder *mine = smcr_hold_self(s);

	if (mine != &stray)
		holder_clear(s, mine);
}

bool smcr_hold_is_holder(struct smcr_sock *s)
{
	pid_t me = smcr_share_pid();

	for (unsigned i = 0; i < SMCR_HOLDERS_MAX; i++)
		if (__atomic_load_n(&s->holders[i].pid, __ATOMIC_RELAXED) == me)
			return true;
	return false;
}

void smcr_hold_forget_copies(struct smcr_sock *s)
{
	smcr_hold_forget(s);
	s->ops->forget(s->xc);
}

/* ---- fork -------------------------------------------------------------------- */

/*
 * Reserve a slot for the child in every held connection.  Each connection's
 * lock is taken only briefly: nothing is held across fork but held_lock.
 */
void smcr_hold_fork_prepare(void)
{
	pid_t me = smcr_share_pid();
	uint64_t start = n_held ? smcr_share_start_time() : 0;

	pthread_mutex_lock(&held_lock);
	forking_pid = me;
	for (unsigned k = 0; k < n_held; k++) {
		struct smcr_sock *s = held[k];
		struct smcr_holder *free_slot = NULL;

		smcr_conn_lock(s);
		for (unsigned i = 0; i < SMCR_HOLDERS_MAX; i++) {
			struct smcr_holder *h = &s->holders[i];

			if (h->pid == me && h->start == 0)
				h->start = start;
			if (h->pid == 0 && !free_slot)
				free_slot = h;
		}
		if (free_slot)
			free_slot->pid = -me;
		smcr_conn_unlock(s);
	}
}

void smcr_hold_fork_parent(void)
{
	pthread_mutex_unlock(&held_lock);
}

/*
 * After smcr_share_fork_child() (smcr_share_pid() is the child's) and
 * smcr_stats_fork_child() (the child's own stats area).
 */
void smcr_hold_fork_child(void)
{
	pid_t me = smcr_share_pid();
	uint64_t start = n_held ? smcr_share_start_time() : 0;
	unsigned k = 0;

	pthread_mutex_unlock(&held_lock);
	while (k < n_held) {
		struct smcr_sock *s = held[k];
		bool taken = false;

		smcr_conn_lock(s);
		for (unsigned i = 0; i < SMCR_HOLDERS_MAX && !taken; i++) {
			struct smcr_holder *h = &s->holders[i];

			if (h->pid == -forking_pid) {
				memset(h, 0, sizeof(*h));
				h->pid = me;
				h->start = start;
				taken = true;
				smcr_stats_fork_keep(s->stats);
			}
		}
		smcr_conn_unlock(s);
		if (taken) {
			k++;
		} else {
			/* No slot was free: this child's copy reads as reset, as over SMC-R. */
			held[k] = held[--n_held];
		}
	}
}
