// SPDX-License-Identifier: MIT
/*
 * Shared arenas and process identity (share.h).
 *
 * An arena is one MAP_SHARED anonymous mapping: a header page of slot marks,
 * then SHARE_SLOTS slots of SMCR_SHARE_SLOT_SIZE bytes.  fork hands it to
 * the child at the same address, which is what lets pointers between shared
 * objects (a connection and its transport state) stay valid in both.  Only
 * its creator allocates from it (the mark is claimed by compare-and-swap, so
 * a free from another process never races with it); a child that inherits
 * it keeps it mapped, for the connections it holds, and makes its own arena
 * at its first connection.  Arenas are never unmapped: a slot is a page,
 * and a process rarely has more than a few arenas.
 */
#include "smcr/share.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "smcr/confine.h"
#include "smcr/libc.h"
#include "smcr/sys.h"

#if defined(__SANITIZE_ADDRESS__)
#define SHARE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARE_LSAN 1
#endif
#endif
#ifdef SHARE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#define SHARE_SLOTS 63u
#define SHARE_MAX_ARENAS 1024u

struct share_arena {
	pid_t creator;                   /* the only process that allocates here */
	_Atomic uint8_t used[SHARE_SLOTS];
};
_Static_assert(sizeof(struct share_arena) <= SMCR_SHARE_SLOT_SIZE, "header fits its page");

#define ARENA_LEN ((size_t)SMCR_SHARE_SLOT_SIZE * (SHARE_SLOTS + 1))

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
/* Every arena this process maps: its own and inherited ones. */
static struct share_arena *arenas[SHARE_MAX_ARENAS];
static unsigned n_arenas;
static pid_t self_pid;
static uint64_t self_start;

pid_t smcr_share_pid(void)
{
	pid_t p = __atomic_load_n(&self_pid, __ATOMIC_RELAXED);

	if (p == 0) {
		p = getpid();
		__atomic_store_n(&self_pid, p, __ATOMIC_RELAXED);
	}
	return p;
}

/* Field 22 of /proc/PID/stat, after the command name (which may hold anything). */
static uint64_t start_time_of(pid_t pid)
{
	char path[48], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = smcr_libc.open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = smcr_libc.read(fd, buf, sizeof(buf) - 1);
	smcr_sys_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* ") S ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
	 *  utime stime cutime cstime priority nice threads itrealvalue starttime" */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d"
			 " %*d %*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

uint64_t smcr_share_start_time(void)
{
	uint64_t s = __atomic_load_n(&self_start, __ATOMIC_RELAXED);

	if (s == 0) {
		s = start_time_of(smcr_share_pid());
		__atomic_store_n(&self_start, s, __ATOMIC_RELAXED);
	}
	return s;
}

bool smcr_share_alive(pid_t pid, uint64_t start)
{
	uint64_t now;

	if (pid <= 0)
		return false;
	/* Confined (confine.h): kill and /proc may be denied; a holder stays believed. */
	if (smcr_confined())
		return true;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	if (start == 0)
		return true;
	now = start_time_of(pid);
	/* Unreadable (another pid namespace's /proc): believe the pid. */
	return now == 0 || now == start;
}

static struct share_arena *arena_new(void)
{
	struct share_arena *a;

	if (n_arenas >= SHARE_MAX_ARENAS)
		return NULL;
	a = mmap(NULL, ARENA_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return NULL;
	a->creator = smcr_share_pid();
#ifdef SHARE_LSAN
	/*
	 * The leak checker scans the heap, not mappings: objects in an arena
	 * point at heap memory (a connection's ring record) that would
	 * otherwise read as leaked while the connection is alive.
	 */
	__lsan_register_root_region(a, ARENA_LEN);
#endif
	arenas[n_arenas] = a;
	__atomic_store_n(&n_arenas, n_arenas + 1, __ATOMIC_RELEASE);
	return a;
}

static void *slot_at(struct share_arena *a, unsigned i)
{
	return (uint8_t *)a + (size_t)SMCR_SHARE_SLOT_SIZE * (i + 1);
}

static void *arena_take(struct share_arena *a)
{
	for (unsigned i = 0; i < SHARE_SLOTS; i++) {
		uint8_t expect = 0;

		if (atomic_load_explicit(&a->used[i], memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&a->used[i], &expect, 1)) {
			void *p = slot_at(a, i);

			memset(p, 0, SMCR_SHARE_SLOT_SIZE);
			return p;
		}
	}
	return NULL;
}

void *smcr_share_alloc(size_t size)
{
	pid_t me = smcr_share_pid();
	void *p = NULL;

	if (size > SMCR_SHARE_SLOT_SIZE)
		return NULL;
	pthread_mutex_lock(&arena_lock);
	for (unsigned k = 0; k < n_arenas && !p; k++)
		if (arenas[k]->creator == me)
			p = arena_take(arenas[k]);
	if (!p) {
		struct share_arena *a = arena_new();

		if (a)
			p = arena_take(a);
	}
	pthread_mutex_unlock(&arena_lock);
	return p;
}

void smcr_share_free(void *p)
{
	uintptr_t at = (uintptr_t)p;

	if (!p)
		return;
	/* Lock-free: the arena list only grows, and its entries never move. */
	for (unsigned k = 0, n = __atomic_load_n(&n_arenas, __ATOMIC_ACQUIRE); k < n; k++) {
		uintptr_t base = (uintptr_t)arenas[k];

		if (at >= base + SMCR_SHARE_SLOT_SIZE && at < base + ARENA_LEN) {
			unsigned i = (unsigned)((at - base) / SMCR_SHARE_SLOT_SIZE) - 1;

			atomic_store_explicit(&arenas[k]->used[i], 0, memory_order_release);
			return;
		}
	}
}

void smcr_share_fork_prepare(void)
{
	pthread_mutex_lock(&arena_lock);
}

void smcr_share_fork_parent(void)
{
	pthread_mutex_unlock(&arena_lock);
}

/* Only system calls and plain stores: the child's identity is new, its arenas are inherited. */
void smcr_share_fork_child(void)
{
	pthread_mutex_unlock(&arena_lock);
	self_pid = (pid_t)getpid();
	self_start = 0; /* read again when first needed */
}
