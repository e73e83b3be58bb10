// SPDX-License-Identifier: MIT
/*
 * The peer processes we proved (struct shm_peer in shm_int.h says how): a
 * region shared with one goes back to nobody but that same live process.
 * One record per process, counted: the regions it owns and the
 * connections that proved it.
 */
#include "smcr/shm_int.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "smcr/libc.h"
#include "smcr/sys.h"

static struct shm_peer *peers; /* every record; under smcr_shm_pool_lock */

int64_t smcr_shm_boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * When `pid` had started at the latest (/proc/PID/stat field 22, clock
 * ticks since boot, rounded down by the kernel: one tick added), or -1.
 */
static int64_t proc_started_by_ns(pid_t pid)
{
	char path[48], buf[512];
	const char *p;
	long hz = sysconf(_SC_CLK_TCK);
	unsigned long long ticks;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (smcr_sys_read_text(path, buf, sizeof(buf)) < 0 || hz <= 0)
		return -1;
	/* After the command name's last ')': state is field 3, starttime 22. */
	p = strrchr(buf, ')');
	for (int field = 2; p && field < 21; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &ticks) != 1 || ticks > (1ull << 40))
		return -1;
	return (int64_t)((ticks + 1) * (1000000000ull / (unsigned long long)hz));
}

/* Still the process we opened? (A pidfd turns readable when it exits.) */
static bool peer_alive(struct shm_peer *p)
{
	struct pollfd pfd = { .fd = p->pidfd, .events = POLLIN };

	if (!p->dead && smcr_libc.poll(&pfd, 1, 0) != 0)
		p->dead = true;
	return !p->dead;
}

void smcr_shm_peer_unref_locked(struct shm_peer *p)
{
	struct shm_peer **pp;

	if (!p || --p->refs > 0)
		return;
	for (pp = &peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	smcr_sys_close(p->pidfd);
	free(p);
}

void smcr_shm_peer_unref(struct shm_peer *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&smcr_shm_pool_lock);
	smcr_shm_peer_unref_locked(p);
	pthread_mutex_unlock(&smcr_shm_pool_lock);
}

static struct shm_peer *peer_find_locked(pid_t pid)
{
	for (struct shm_peer *p = peers; p; p = p->next)
		if (p->pid == pid && !p->dead)
			return p;
	return NULL;
}

/* A new record for whatever process has `pid` now (not yet proven to be anyone). */
static struct shm_peer *peer_open(pid_t pid, uid_t uid)
{
	struct shm_peer *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = pid;
	p->uid = uid;
	p->refs = 1;
	p->pidfd = smcr_sys_fd_high((int)syscall(SYS_pidfd_open, pid, 0));
	p->started_by_ns = p->pidfd >= 0 ? proc_started_by_ns(pid) : -1;
	if (p->started_by_ns < 0) {
		smcr_sys_close(p->pidfd);
		free(p);
		return NULL;
	}
	return p;
}

/*
 * The live record for `pid` if we have one (a reference), for a region we
 * hand over before the peer's proof arrives: only its pooled regions may go
 * to the process that has that number now.
 */
struct shm_peer *smcr_shm_peer_known_alive(pid_t pid, uid_t uid)
{
	struct shm_peer *p;

	pthread_mutex_lock(&smcr_shm_pool_lock);
	p = peer_find_locked(pid);
	if (p && p->uid == uid)
		p->refs++;
	else
		p = NULL;
	pthread_mutex_unlock(&smcr_shm_pool_lock);
	if (p && !peer_alive(p)) {
		smcr_shm_peer_unref(p);
		p = NULL;
	}
	return p;
}

/*
 * The process that sent a proof as (pid, uid) at some moment after
 * `since_ns`, if that can be proven (a reference), else NULL.  Costs one
 * poll() for a process we know, a pidfd_open() and a /proc read the first
 * time.
 */
struct shm_peer *smcr_shm_peer_prove(pid_t pid, uid_t uid, int64_t since_ns)
{
	struct shm_peer *p, *known;

	if (pid <= 0)
		return NULL;
	p = smcr_shm_peer_known_alive(pid, uid);
	if (p) {
		/* Started before the proof could be sent, alive after: its sender. */
		if (p->started_by_ns <= since_ns)
			return p;
		smcr_shm_peer_unref(p);
		return NULL;
	}
	p = peer_open(pid, uid);
	if (!p)
		return NULL;
	if (p->started_by_ns > since_ns || !peer_alive(p)) {
		smcr_shm_peer_unref(p);
		return NULL;
	}
	pthread_mutex_lock(&smcr_shm_pool_lock);
	/* One record per process: two threads may have proven it at once. */
	known = peer_find_locked(pid);
	if (known && known->started_by_ns == p->started_by_ns && known->uid == uid) {
		known->refs++;
		pthread_mutex_unlock(&smcr_shm_pool_lock);
		smcr_shm_peer_unref(p);
		return known;
	}
	p->next = peers;
	peers = p;
	pthread_mutex_unlock(&smcr_shm_pool_lock);
	return p;
}

/* The pid `pid` (of our pid namespace) has in its own, innermost one (NSpid), or -1. */
static pid_t innermost_pid(pid_t pid)
{
	char path[48], buf[2048];
	const char *line, *last = NULL;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (smcr_sys_read_text(path, buf, sizeof(buf)) < 0)
		return -1;
	line = strstr(buf, "\nNSpid:");
	if (!line)
		return -1;
	for (const char *q = line + strlen("\nNSpid:"); *q && *q != '\n'; q++)
		if ((*q == ' ' || *q == '\t') && q[1] >= '0' && q[1] <= '9')
			last = q + 1;
	return last ? (pid_t)strtol(last, NULL, 10) : -1;
}

/*
 * The kernel translates a peer's pid into our pid namespace: the same
 * number when we share one; its number here when it runs in a namespace
 * below ours, where it announced its own (the last of NSpid in
 * /proc/PID/status); 0 when it runs in one we cannot see (a sibling
 * container of the same network namespace, as a pod's, or one above us).
 * Then no pid can tell who it is, and only a process of our own uid is
 * believed: one that squats the rendezvous name with our uid could as
 * well read our memory, another uid never passes.
 */
bool smcr_shm_cred_is_proposer(const struct ucred *cred, pid_t announced)
{
	if (announced <= 0)
		return false;
	if (cred->pid == announced)
		return true;
	if (cred->pid == 0)
		return cred->uid == geteuid();
	return innermost_pid(cred->pid) == announced;
}
