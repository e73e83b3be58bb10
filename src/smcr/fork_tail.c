// SPDX-License-Identifier: MIT
/*
 * An SMC-R connection across fork (design §8, "fork").
 *
 * A same-host connection follows fork (hold.c); an SMC-R one cannot: its
 * verbs objects are this process's, a forked child's copy of them is dead.
 * Yet the child holds the TCP socket, and TCP programs use it: rsync's
 * receiver forks a generator that writes the socket while the parent reads
 * it, an inetd-style server forks and execs a program onto it, a parent
 * closes its copy right after fork and leaves the connection to the child.
 * So when a forked process first uses its copy, it asks the process that
 * runs the connection (the "owner") to go on over TCP (tcp_tail.c); the
 * peer follows, and from then on every process holding the socket shares
 * one plain TCP socket, exactly as without smcr.
 *
 * Lazily: a forked child that never touches the connection (a BGSAVE-style
 * child, a worker that serves other sockets) leaves it on SMC-R.  Only the
 * owner's close while a forked process may still hold the socket moves it
 * too, since TCP's close in one of the processes sharing a socket ends
 * nothing.
 *
 * Each tracked connection has a cell in fork-shared memory (share.h): the
 * child's request, the owner's answer, and how many processes have a copy.
 * The child reaches the owner through a datagram to an abstract UNIX name
 * made of the owner's pid and start time (no inherited fd to lose, a
 * grandchild reaches it the same way, and a gone owner refuses at once);
 * the owner's link-group worker polls that socket (lgr_worker.c) and
 * answers.  The child waits for the answer on the cell (futex), bounded:
 * without one (the owner gone, or stuck) its copy reads as reset, as
 * before, and says why.
 *
 * Locks: fork_mu (this process's tracked connections) comes after share.c's
 * arena lock and before the link-group list (engine.c); a connection's lock
 * is taken under it (the worker's answer), never the other way round.
 */
#include "smcr/fork_tail.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "smcr/conn.h"
#include "smcr/libc.h"
#include "smcr/share.h"
#include "smcr/stats.h"
#include "smcr/sys.h"
#ifdef SMCR_HAVE_VERBS
#include "smcr/lgr_int.h"
#endif

/* How long a forked process waits for the owner's answer (it moves one CDC). */
#define FORK_ANSWER_MS 5000

enum fork_outcome {
	FORK_RUNNING = 0,  /* on SMC-R in the owner */
	FORK_ON_TCP = 1,   /* the owner went on over TCP: every copy is plain TCP */
	FORK_CANNOT = 2,   /* the peer cannot go on over TCP (the kernel's SMC) */
	FORK_ENDED = 3,    /* the owner ended it */
};

struct smcr_fork_cell {
	_Atomic uint32_t want_tcp; /* a forked process uses its copy */
	_Atomic uint32_t outcome;  /* enum fork_outcome; a futex */
	_Atomic uint32_t copies;   /* processes with a copy, the owner's included */
	int32_t owner_pid;
	uint64_t owner_start;
};

static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static struct smcr_sock *tracked; /* the connections this process runs */
static int request_fd = -1;       /* bound to this process's name, polled by the worker */

/* ---- the cell ----------------------------------------------------------------------- */

static void cell_settle(struct smcr_fork_cell *c, enum fork_outcome o)
{
	uint32_t running = FORK_RUNNING;

	if (atomic_compare_exchange_strong(&c->outcome, &running, (uint32_t)o))
		syscall(SYS_futex, &c->outcome, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void cell_wait(struct smcr_fork_cell *c, int64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	syscall(SYS_futex, &c->outcome, FUTEX_WAIT, FORK_RUNNING, &ts, NULL, 0);
}

static void cell_drop(struct smcr_sock *s)
{
	struct smcr_fork_cell *c = s->fork_cell;

	s->fork_cell = NULL;
	if (c && atomic_fetch_sub(&c->copies, 1) == 1)
		smcr_share_free(c);
}

/* The abstract name the owner `pid` (started at `start`) takes requests on. */
static socklen_t request_name(struct sockaddr_un *sa, pid_t pid, uint64_t start)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "smcr-fork-%d-%llu", (int)pid,
		     (unsigned long long)start);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* ---- the process that runs the connection ----------------------------------------------- */

void smcr_fork_track(struct smcr_sock *s)
{
	struct smcr_fork_cell *c;

	if (s->shared || !s->ops->continue_on_tcp)
		return;
	c = smcr_share_alloc(sizeof(*c));
	if (!c)
		return; /* a forked copy then reads as reset, and says why */
	c->owner_pid = smcr_share_pid();
	c->owner_start = smcr_share_start_time();
	atomic_store(&c->copies, 1);
	s->fork_cell = c;
	pthread_mutex_lock(&fork_mu);
	s->fork_next = tracked;
	tracked = s;
	pthread_mutex_unlock(&fork_mu);
}

void smcr_fork_untrack(struct smcr_sock *s)
{
	if (!s->fork_cell)
		return;
	pthread_mutex_lock(&fork_mu);
	for (struct smcr_sock **p = &tracked; *p; p = &(*p)->fork_next) {
		if (*p == s) {
			*p = s->fork_next;
			break;
		}
	}
	pthread_mutex_unlock(&fork_mu);
	cell_settle(s->fork_cell, FORK_ENDED);
	cell_drop(s);
}

void smcr_fork_close_locked(struct smcr_sock *s)
{
	struct smcr_fork_cell *c = s->fork_cell;
	int rc = -ENOTSUP;

	if (!c || atomic_load(&c->copies) <= 1 || atomic_load(&c->outcome) != FORK_RUNNING)
		return;
	if (smcr_tail_possible(s))
		rc = smcr_tail_continue_locked(s, SMCR_CLC_DECL_HANDOFF,
					       "this process closes it while a forked process"
					       " may still hold the socket");
	cell_settle(c, rc == 0 ? FORK_ON_TCP : FORK_CANNOT);
}

int smcr_fork_request_fd(void)
{
	return __atomic_load_n(&request_fd, __ATOMIC_ACQUIRE);
}

/* Only from a thread that holds no connection's lock (the link-group worker). */
void smcr_fork_serve(void)
{
	char buf[16];

	while (smcr_libc.recv(request_fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		;
	pthread_mutex_lock(&fork_mu);
	for (struct smcr_sock *s = tracked; s; s = s->fork_next) {
		struct smcr_fork_cell *c = s->fork_cell;
		int rc;

		if (!atomic_load(&c->want_tcp) || atomic_load(&c->outcome) != FORK_RUNNING)
			continue;
		rc = smcr_sock_continue_on_tcp_why(s, SMCR_CLC_DECL_HANDOFF, "a forked process uses it");
		if (rc != 0)
			smcr_warn("fd %d: a forked process uses this SMC-R connection and it cannot"
				  " go on over TCP (%s): that process sees it reset, this one"
				  " goes on over SMC-R",
				  smcr_fd_label(s->tcp_fd),
				  rc == -ENOTSUP ? "the peer cannot" : strerror(-rc));
		cell_settle(c, rc == 0 ? FORK_ON_TCP : FORK_CANNOT);
	}
	pthread_mutex_unlock(&fork_mu);
}

/* fork_mu held: the socket forked processes ask on, made at the first fork that needs it. */
static void request_socket_locked(void)
{
	struct sockaddr_un sa;
	socklen_t len = request_name(&sa, smcr_share_pid(), smcr_share_start_time());
	int fd;

	if (request_fd >= 0 || !tracked)
		return;
	fd = smcr_libc.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	if (smcr_libc.bind(fd, (struct sockaddr *)&sa, len) < 0) {
		smcr_warn("no socket for forked processes' requests (%s): their copies of SMC-R"
			  " connections read as reset", strerror(errno));
		smcr_sys_close(fd);
		return;
	}
	__atomic_store_n(&request_fd, smcr_sys_fd_high(fd), __ATOMIC_RELEASE);
}

/* ---- fork -------------------------------------------------------------------------------- */

void smcr_fork_tail_prepare(void)
{
	pthread_mutex_lock(&fork_mu);
	request_socket_locked();
	for (struct smcr_sock *s = tracked; s; s = s->fork_next)
		atomic_fetch_add(&s->fork_cell->copies, 1);
}

void smcr_fork_tail_parent(void)
{
	bool any = tracked != NULL;

	pthread_mutex_unlock(&fork_mu);
#ifdef SMCR_HAVE_VERBS
	if (any) /* the worker polls the request socket from its next round */
		smcr_lgr_worker_wake();
#else
	(void)any;
#endif
}

/* The parent's connections are not the child's to run; their copies stay in its fds. */
void smcr_fork_tail_child(void)
{
	tracked = NULL;
	if (request_fd >= 0)
		smcr_sys_close(request_fd);
	request_fd = -1;
	pthread_mutex_unlock(&fork_mu);
}

/* ---- a forked process's copy ---------------------------------------------------------- */

void smcr_fork_forget_copy(struct smcr_sock *s)
{
	cell_drop(s);
}

static int ask_owner(const struct smcr_fork_cell *c)
{
	struct sockaddr_un sa;
	socklen_t len = request_name(&sa, c->owner_pid, c->owner_start);
	int fd = smcr_libc.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (smcr_libc.sendto(fd, "f", 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sa,
			     len) < 0)
		rc = -errno;
	smcr_sys_close(fd);
	return rc;
}

/* NULL: the owner went on over TCP; else why this copy reads as reset. */
static const char *follow_owner(struct smcr_fork_cell *c)
{
	int64_t deadline = smcr_now_ms() + FORK_ANSWER_MS;
	uint32_t o = atomic_load(&c->outcome);

	if (o == FORK_RUNNING) {
		atomic_store(&c->want_tcp, 1);
		if (ask_owner(c) < 0 && atomic_load(&c->outcome) == FORK_RUNNING)
			return smcr_share_alive(c->owner_pid, c->owner_start)
				       ? "the process that runs it takes no requests"
				       : "the process that runs it is gone";
	}
	while ((o = atomic_load(&c->outcome)) == FORK_RUNNING) {
		int64_t left = deadline - smcr_now_ms();

		if (!smcr_share_alive(c->owner_pid, c->owner_start))
			return "the process that runs it is gone";
		if (left <= 0)
			return "the process that runs it did not answer";
		cell_wait(c, left < 100 ? left : 100);
	}
	switch (o) {
	case FORK_ON_TCP:
		return NULL;
	case FORK_CANNOT:
		return "its peer cannot go on over TCP (the kernel's SMC)";
	default:
		return "the process that ran it ended it";
	}
}

int smcr_sock_fork_follow(struct smcr_sock *s)
{
	const char *why;

	if (s->fork_refused)
		return -ECONNRESET;
	if (s->fork_cell)
		why = follow_owner(s->fork_cell);
	else
		why = s->shared ? "more processes hold it than it has room for"
				: "it has no record for forked processes (no shared memory)";
	if (!why) {
		smcr_info("fd %d: the SMC-R connection this process inherited goes on over TCP"
			  " (a forked process uses it)", smcr_fd_label(s->tcp_fd));
		return 0;
	}
	s->fork_refused = true;
	smcr_stats_conn_refused(s);
	smcr_warn("fd %d: the SMC-R connection this process inherited reads as reset here: %s",
		  smcr_fd_label(s->tcp_fd), why);
	return -ECONNRESET;
}
