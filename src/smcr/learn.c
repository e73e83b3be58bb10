// SPDX-License-Identifier: MIT
/*
 * The learned policy's table and rules (see learn.h).
 *
 * The table is SMCR_LEARN_SLOTS pairs of 64-bit words: a destination's key
 * and its packed state. A key lives in one of SMCR_LEARN_WAYS slots from its
 * hash; every update is a compare-and-swap of the state word, so processes
 * sharing the file need no lock (a slot taken over by another key between
 * reading the key and swapping the state costs one wrong update, a hint).
 */
#include "smcr/learn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

#define LEARN_MAGIC 0x4e52454cu /* "LERN" */
#define LEARN_VERSION 1u

struct learn_slot {
	_Atomic uint64_t key;   /* 0 = free */
	_Atomic uint64_t state; /* see the STATE_ accessors */
};

struct learn_table {
	_Atomic uint32_t magic;
	uint32_t version;
	uint32_t slots;
	uint32_t reserved;
	struct learn_slot slot[SMCR_LEARN_SLOTS];
};

/*
 * State word: bits 0-3 score, bit 4 "stays TCP", bits 5-7 probe shift, bits
 * 8-23 connections kept on TCP since the last probe, bits 32-63 the second
 * (CLOCK_MONOTONIC) of the last result or probe.
 */
#define SCORE(st) ((unsigned)((st) & 0xfu))
#define TCP(st) (((st) >> 4) & 1u)
#define SHIFT(st) ((unsigned)(((st) >> 5) & 0x7u))
#define SKIPPED(st) ((unsigned)(((st) >> 8) & 0xffffu))
#define STAMP(st) ((uint32_t)((st) >> 32))

static uint64_t state_of(unsigned score, unsigned tcp, unsigned shift, unsigned skipped,
			 uint32_t stamp)
{
	return (uint64_t)(score & 0xfu) | (uint64_t)(tcp & 1u) << 4 | (uint64_t)(shift & 7u) << 5 |
	       (uint64_t)(skipped & 0xffffu) << 8 | (uint64_t)stamp << 32;
}

static struct learn_table private_table;
static _Atomic(struct learn_table *) table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static bool private_only; /* tests: never the shared file */

/* The shared file if it can be had and is ours and well-formed, else NULL. */
static struct learn_table *map_shared(void)
{
	char dir[240], path[256];
	struct learn_table *t;
	struct stat st;
	uint32_t zero = 0;
	int fd;

	if (!smcr_stats_runtime_dir(dir, sizeof(dir)))
		return NULL;
	snprintf(path, sizeof(path), "%s/learn", dir);
	fd = smcr_libc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	/* Ours, a plain file, of our size (a new one is grown to it, zero-filled). */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
	    (st.st_mode & 077) != 0 ||
	    (st.st_size != (off_t)sizeof(*t) &&
	     (st.st_size != 0 || ftruncate(fd, (off_t)sizeof(*t)) < 0))) {
		smcr_sys_close(fd);
		return NULL;
	}
	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	smcr_sys_close(fd);
	if (t == MAP_FAILED)
		return NULL;
	/* A fresh file is all zero: the first process to get here stamps it. */
	if (atomic_load(&t->magic) == 0) {
		t->version = LEARN_VERSION;
		t->slots = SMCR_LEARN_SLOTS;
		atomic_compare_exchange_strong(&t->magic, &zero, LEARN_MAGIC);
	}
	if (atomic_load(&t->magic) != LEARN_MAGIC || t->version != LEARN_VERSION ||
	    t->slots != SMCR_LEARN_SLOTS) {
		munmap(t, sizeof(*t));
		return NULL;
	}
	return t;
}

static void attach(void)
{
	struct learn_table *t = private_only ? NULL : map_shared();

	if (!t)
		smcr_dbg("learned policy: no shared table, this process learns alone");
	atomic_store(&table, t ? t : &private_table);
}

static struct learn_table *get_table(void)
{
	struct learn_table *t = atomic_load_explicit(&table, memory_order_acquire);

	if (t)
		return t;
	pthread_once(&table_once, attach);
	return atomic_load(&table);
}

void smcr_learn_use_private(void)
{
	private_only = true;
	pthread_once(&table_once, attach);
	memset(&private_table, 0, sizeof(private_table));
	atomic_store(&table, &private_table);
}

uint64_t smcr_learn_key(unsigned family, const unsigned char addr[16], uint16_t port)
{
	/* FNV-1a over the destination; 0 marks a free slot, so never 0. */
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned char bytes[19];

	bytes[0] = (unsigned char)family;
	memcpy(bytes + 1, addr, 16);
	bytes[17] = (unsigned char)(port >> 8);
	bytes[18] = (unsigned char)port;
	for (size_t i = 0; i < sizeof(bytes); i++) {
		h ^= bytes[i];
		h *= 0x100000001b3ull;
	}
	return h ? h : 1;
}

static struct learn_slot *find(struct learn_table *t, uint64_t key)
{
	for (unsigned i = 0; i < SMCR_LEARN_WAYS; i++) {
		struct learn_slot *s = &t->slot[(key + i) % SMCR_LEARN_SLOTS];

		if (atomic_load_explicit(&s->key, memory_order_acquire) == key)
			return s;
	}
	return NULL;
}

static uint32_t seconds(int64_t now_ms)
{
	return (uint32_t)(now_ms / 1000);
}

/* The state as of now: an entry untouched for too long starts afresh. */
static uint64_t current(uint64_t st, uint32_t now_s)
{
	if (st && now_s - STAMP(st) >= SMCR_LEARN_FORGET_S)
		return 0;
	return st;
}

bool smcr_learn_keep_tcp(uint64_t key, int64_t now_ms)
{
	struct learn_table *t = get_table();
	struct learn_slot *s = find(t, key);
	uint32_t now_s = seconds(now_ms);
	uint64_t st, next;
	bool keep;

	if (!s)
		return false;
	st = atomic_load_explicit(&s->state, memory_order_relaxed);
	do {
		uint64_t cur = current(st, now_s);
		unsigned skipped = SKIPPED(cur) + 1;

		if (!TCP(cur))
			return false;
		/* A probe: one connection in PROBE_EVERY << shift, and one every PROBE_S. */
		keep = skipped < (SMCR_LEARN_PROBE_EVERY << SHIFT(cur)) &&
		       now_s - STAMP(cur) < SMCR_LEARN_PROBE_S;
		next = keep ? state_of(SCORE(cur), 1, SHIFT(cur), skipped, STAMP(cur))
			    : state_of(SCORE(cur), 1, SHIFT(cur), 0, now_s);
	} while (!atomic_compare_exchange_weak_explicit(&s->state, &st, next, memory_order_relaxed,
							memory_order_relaxed));
	return keep;
}

/* The slot for key: its own, else a free one, else the least recently used one. */
static struct learn_slot *claim(struct learn_table *t, uint64_t key, uint32_t now_s)
{
	struct learn_slot *victim = NULL;
	uint32_t oldest = 0;

	for (unsigned i = 0; i < SMCR_LEARN_WAYS; i++) {
		struct learn_slot *s = &t->slot[(key + i) % SMCR_LEARN_SLOTS];
		uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
		uint32_t age;

		if (k == key)
			return s;
		age = k ? now_s - STAMP(atomic_load_explicit(&s->state, memory_order_relaxed))
			: UINT32_MAX;
		if (!victim || age > oldest) {
			victim = s;
			oldest = age;
		}
	}
	atomic_store_explicit(&victim->state, 0, memory_order_relaxed);
	atomic_store_explicit(&victim->key, key, memory_order_release);
	return victim;
}

/* The learning rule (see learn.h) applied to one state. */
static uint64_t learnt(uint64_t cur, bool is_short, uint32_t now_s)
{
	unsigned score = SCORE(cur), tcp = TCP(cur), shift = SHIFT(cur);

	if (is_short) {
		score = score < SMCR_LEARN_SCORE_MAX ? score + 1 : score;
		if (tcp && shift < SMCR_LEARN_PROBE_SHIFT_MAX)
			shift++; /* a probe that came back short: probe more rarely */
	} else {
		score = score > SMCR_LEARN_LONG_WEIGHT ? score - SMCR_LEARN_LONG_WEIGHT : 0;
	}
	if (!tcp && score >= SMCR_LEARN_TCP_ON) {
		tcp = 1;
		shift = 0;
	} else if (tcp && score <= SMCR_LEARN_TCP_OFF) {
		tcp = 0;
		shift = 0;
	}
	return state_of(score, tcp, shift, tcp ? SKIPPED(cur) : 0, now_s);
}

void smcr_learn_result(uint64_t key, uint64_t bytes, uint64_t messages, int64_t lifetime_ms,
		       int64_t now_ms)
{
	struct learn_table *t = get_table();
	uint32_t now_s = seconds(now_ms);
	bool is_short = bytes < SMCR_LEARN_SHORT_BYTES && messages < SMCR_LEARN_SHORT_MSGS &&
			lifetime_ms < SMCR_LEARN_SHORT_MS;
	struct learn_slot *s = claim(t, key, now_s);
	uint64_t st = atomic_load_explicit(&s->state, memory_order_relaxed), next;

	do {
		next = learnt(current(st, now_s), is_short, now_s);
	} while (!atomic_compare_exchange_weak_explicit(&s->state, &st, next, memory_order_relaxed,
							memory_order_relaxed));
	if (TCP(next) != TCP(current(st, now_s)))
		smcr_dbg("learned policy: a destination now %s (score %u)",
			 TCP(next) ? "stays TCP: its connections are too short for SMC"
				   : "gets SMC again",
			 SCORE(next));
}
