/* SPDX-License-Identifier: MIT */
/* fd table (see fdtab.h for the concurrency rules). */
#include "preload/fdtab.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

_Atomic(struct smcr_fd_entry *) *smcr_fdtab_slots;
unsigned smcr_fdtab_nslots;
/* Per engine duplicate: 1 + the application's fd it stands for; 0 = none. */
static _Atomic int32_t *labels;
void (*smcr_fdtab_release_hook)(struct smcr_fd_entry *entry);

/*
 * Entry pool: chunks of SMCR_FDTAB_CHUNK entries, mapped on demand and
 * never unmapped while the library runs. An entry is named by its index
 * (chunk * SMCR_FDTAB_CHUNK + offset).
 */
#define POOL_MAX_CHUNKS 65536u
static _Atomic(struct smcr_fd_entry *) pool_chunks[POOL_MAX_CHUNKS];
static atomic_uint pool_nchunks;
static atomic_uint pool_in_use;

/*
 * Free list: a Treiber stack whose head packs a generation counter (high
 * 32 bits) with index + 1 of the top entry (low 32 bits, 0 = empty). The
 * generation changes on every push and pop, so a pop that raced with a
 * pop-then-push of the same entry fails its compare-and-swap (no ABA).
 */
static _Atomic uint64_t pool_free_head;

/* Serialises pool growth only. Listed in init.c's fork lock list. */
static pthread_mutex_t pool_grow_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * One more than the highest fd that ever held an entry: bulk forgets
 * (closefrom(3) with a table of a million slots) stop there.
 */
static atomic_uint fdtab_high;

static struct smcr_fd_entry *entry_at(uint32_t index)
{
	struct smcr_fd_entry *chunk = atomic_load_explicit(&pool_chunks[index / SMCR_FDTAB_CHUNK],
							   memory_order_acquire);

	return &chunk[index % SMCR_FDTAB_CHUNK];
}

static uint64_t pack_head(uint64_t old_head, uint32_t top_plus_one)
{
	return (((old_head >> 32) + 1) << 32) | top_plus_one;
}

static void pool_push(struct smcr_fd_entry *entry)
{
	uint64_t head = atomic_load_explicit(&pool_free_head, memory_order_relaxed);

	do {
		atomic_store_explicit(&entry->next_free, (uint32_t)head, memory_order_relaxed);
	} while (!atomic_compare_exchange_weak_explicit(&pool_free_head, &head,
							pack_head(head, entry->index + 1),
							memory_order_release, memory_order_relaxed));
}

static struct smcr_fd_entry *pool_pop(void)
{
	uint64_t head = atomic_load_explicit(&pool_free_head, memory_order_acquire);
	struct smcr_fd_entry *entry;

	do {
		uint32_t top = (uint32_t)head;

		if (top == 0)
			return NULL;
		entry = entry_at(top - 1);
	} while (!atomic_compare_exchange_weak_explicit(
		&pool_free_head, &head,
		pack_head(head, atomic_load_explicit(&entry->next_free, memory_order_relaxed)),
		memory_order_acquire, memory_order_acquire));
	return entry;
}

/*
 * Maps one more chunk and pushes its entries. Signals are blocked while
 * the lock is held: a handler that creates a socket on this thread must
 * not wait for a lock its own thread holds.
 */
static void pool_grow(void)
{
	sigset_t all, old;
	unsigned n;
	struct smcr_fd_entry *chunk;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_mutex_lock(&pool_grow_lock);

	n = atomic_load_explicit(&pool_nchunks, memory_order_relaxed);
	if ((uint32_t)atomic_load(&pool_free_head) != 0 || n >= POOL_MAX_CHUNKS)
		goto out; /* someone else grew it meanwhile, or we are full */
	chunk = mmap(NULL, SMCR_FDTAB_CHUNK * sizeof(*chunk), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (chunk == MAP_FAILED)
		goto out;
	for (unsigned i = 0; i < SMCR_FDTAB_CHUNK; i++)
		chunk[i].index = n * SMCR_FDTAB_CHUNK + i;
	atomic_store_explicit(&pool_chunks[n], chunk, memory_order_release);
	atomic_store_explicit(&pool_nchunks, n + 1, memory_order_release);
	for (unsigned i = SMCR_FDTAB_CHUNK; i-- > 0;)
		pool_push(&chunk[i]);
out:
	pthread_mutex_unlock(&pool_grow_lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static struct smcr_fd_entry *entry_alloc(void)
{
	struct smcr_fd_entry *entry = pool_pop();

	if (!entry) {
		pool_grow();
		entry = pool_pop();
	}
	if (entry)
		atomic_fetch_add_explicit(&pool_in_use, 1, memory_order_relaxed);
	return entry;
}

void smcr_fdtab_put(struct smcr_fd_entry *entry)
{
	unsigned before;

	if (!entry)
		return;
	before = atomic_fetch_sub_explicit(&entry->refcnt, 1, memory_order_acq_rel);
	if (before != 1) {
		/* An underflow means a double release: memory would be reused live. */
		if (unlikely(before == 0))
			abort();
		return;
	}
	if (smcr_fdtab_release_hook)
		smcr_fdtab_release_hook(entry);
	atomic_store_explicit(&entry->sock, NULL, memory_order_relaxed);
	atomic_store_explicit(&entry->mode, 0, memory_order_relaxed);
	atomic_store_explicit(&entry->flags, 0, memory_order_relaxed);
	atomic_fetch_sub_explicit(&pool_in_use, 1, memory_order_relaxed);
	pool_push(entry);
}

/* Puts entry into slot fd and releases whatever the slot held before. */
static void slot_replace(int fd, struct smcr_fd_entry *entry)
{
	struct smcr_fd_entry *old;
	unsigned high;

	if (entry) {
		high = atomic_load_explicit(&fdtab_high, memory_order_relaxed);
		while (high <= (unsigned)fd &&
		       !atomic_compare_exchange_weak_explicit(&fdtab_high, &high, (unsigned)fd + 1,
							      memory_order_relaxed,
							      memory_order_relaxed))
			;
	}
	old = atomic_exchange_explicit(&smcr_fdtab_slots[fd], entry, memory_order_acq_rel);
	smcr_fdtab_put(old);
}

static bool in_range(int fd)
{
	return (unsigned)fd < smcr_fdtab_nslots;
}

static atomic_uint fork_gen; /* smcr_fdtab_same_fork() */

struct smcr_fd_entry *smcr_fdtab_track(int fd, int domain, enum smcr_fd_mode mode,
				       unsigned flags)
{
	struct smcr_fd_entry *entry;
	int saved_errno = errno;

	if (!in_range(fd))
		return NULL;
	entry = entry_alloc();
	if (entry) {
		entry->domain = domain;
		atomic_store_explicit(&entry->flags, flags, memory_order_relaxed);
		atomic_store_explicit(&entry->sock, NULL, memory_order_relaxed);
		entry->engine_fd = -1;
		entry->owner = 0;
		entry->fallback_reason = 0;
		entry->rcvlowat = 0;
		entry->peek_off = -1;
		entry->tcp_record = NULL;
		entry->listener = NULL;
		entry->unserved = NULL;
		entry->listen_port = 0;
		entry->accepted_peer.sin6_family = AF_UNSPEC;
		atomic_store_explicit(&entry->handshake, NULL, memory_order_relaxed);
		atomic_store_explicit(&entry->handshake_fd, -1, memory_order_relaxed);
		atomic_store_explicit(&entry->poll_in, 0, memory_order_relaxed);
		atomic_store_explicit(&entry->poll_out, 0, memory_order_relaxed);
		entry->epoll_events = 0;
		entry->epoll_regs = 0;
		atomic_flag_clear_explicit(&entry->busy, memory_order_relaxed);
		entry->fork_gen = atomic_load_explicit(&fork_gen, memory_order_relaxed);
		atomic_store_explicit(&entry->mode, (unsigned char)mode, memory_order_relaxed);
		atomic_store_explicit(&entry->refcnt, 1, memory_order_release);
	}
	/* No entry (out of memory): at least drop the stale one. */
	slot_replace(fd, entry);
	errno = saved_errno;
	return entry;
}

void smcr_fdtab_forget(int fd)
{
	if (!in_range(fd))
		return;
	/* Cheap check first: most fds a program closes were never tracked. */
	if (!atomic_load_explicit(&smcr_fdtab_slots[fd], memory_order_relaxed))
		return;
	slot_replace(fd, NULL);
}

void smcr_fdtab_forget_range(unsigned first, unsigned last)
{
	unsigned high = atomic_load_explicit(&fdtab_high, memory_order_relaxed);

	if (first >= high)
		return;
	if (last >= high)
		last = high - 1;
	for (unsigned fd = first; fd <= last; fd++)
		smcr_fdtab_forget((int)fd);
}

unsigned smcr_fdtab_high(void)
{
	return atomic_load_explicit(&fdtab_high, memory_order_relaxed);
}

/* Takes a reference unless the count already dropped to zero. */
static bool ref_unless_zero(struct smcr_fd_entry *entry)
{
	unsigned count = atomic_load_explicit(&entry->refcnt, memory_order_relaxed);

	do {
		if (count == 0)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&entry->refcnt, &count, count + 1,
							memory_order_acquire, memory_order_relaxed));
	return true;
}

struct smcr_fd_entry *smcr_fdtab_get(int fd)
{
	/* Bounded: each retry means another thread changed this very slot. */
	for (int attempt = 0; attempt < 64; attempt++) {
		struct smcr_fd_entry *entry = smcr_fdtab_peek(fd);

		if (!entry)
			return NULL;
		if (!ref_unless_zero(entry))
			continue;
		/*
		 * The entry may have been released and reused for another fd
		 * between the load and the reference: it is ours only if the
		 * slot still points to it.
		 */
		if (smcr_fdtab_peek(fd) == entry)
			return entry;
		smcr_fdtab_put(entry);
	}
	return NULL;
}

void smcr_fdtab_dup(int oldfd, int newfd)
{
	struct smcr_fd_entry *entry;
	int saved_errno = errno;

	if (!in_range(newfd) || oldfd == newfd)
		return;
	entry = smcr_fdtab_get(oldfd); /* the reference becomes newfd's */
	slot_replace(newfd, entry);
	errno = saved_errno;
}

unsigned smcr_fdtab_entries_in_use(void)
{
	return atomic_load_explicit(&pool_in_use, memory_order_relaxed);
}

int smcr_fdtab_init(unsigned nslots)
{
	int saved_errno = errno;
	void *slots;
	int ret = 0;

	slots = mmap(NULL, (size_t)nslots * sizeof(*smcr_fdtab_slots), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (slots == MAP_FAILED) {
		ret = -errno;
	} else {
		smcr_fdtab_slots = slots;
		smcr_fdtab_nslots = nslots;
		/* Untouched pages cost nothing; without them logs show engine numbers. */
		slots = mmap(NULL, (size_t)nslots * sizeof(*labels), PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		labels = slots == MAP_FAILED ? NULL : slots;
	}
	errno = saved_errno;
	return ret;
}

void smcr_fdtab_label_set(int engine_fd, int fd)
{
	if (labels && engine_fd >= 0 && (unsigned)engine_fd < smcr_fdtab_nslots)
		atomic_store_explicit(&labels[engine_fd], fd < 0 ? 0 : fd + 1,
				      memory_order_relaxed);
}

int smcr_fdtab_label_of(int fd)
{
	int32_t v;

	if (!labels || fd < 0 || (unsigned)fd >= smcr_fdtab_nslots)
		return fd;
	v = atomic_load_explicit(&labels[fd], memory_order_relaxed);
	return v ? v - 1 : fd;
}

void smcr_fdtab_fini(void)
{
	unsigned nchunks = atomic_load(&pool_nchunks);

	if (labels)
		munmap((void *)labels, (size_t)smcr_fdtab_nslots * sizeof(*labels));
	labels = NULL;
	if (smcr_fdtab_slots)
		munmap((void *)smcr_fdtab_slots, (size_t)smcr_fdtab_nslots * sizeof(*smcr_fdtab_slots));
	smcr_fdtab_slots = NULL;
	smcr_fdtab_nslots = 0;
	for (unsigned i = 0; i < nchunks; i++) {
		munmap(atomic_load(&pool_chunks[i]), SMCR_FDTAB_CHUNK * sizeof(struct smcr_fd_entry));
		atomic_store(&pool_chunks[i], NULL);
	}
	atomic_store(&pool_nchunks, 0);
	atomic_store(&pool_free_head, 0);
	atomic_store(&pool_in_use, 0);
	atomic_store(&fdtab_high, 0);
}

void smcr_fdtab_lock(void)
{
	pthread_mutex_lock(&pool_grow_lock);
}

void smcr_fdtab_unlock(void)
{
	pthread_mutex_unlock(&pool_grow_lock);
}

void smcr_fdtab_reinit_child(void)
{
	pthread_mutex_unlock(&pool_grow_lock);
}

bool smcr_fdtab_same_fork(const struct smcr_fd_entry *e)
{
	return e->fork_gen == atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

void smcr_fdtab_forked(void)
{
	atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
}
