/* SPDX-License-Identifier: MIT */
/*
 * fd table: tracking, dup sharing one refcounted entry, close of one dup
 * keeping the other, stale reset when a number is reused, out-of-range
 * fds, and concurrent readers and writers (entry accounting must balance
 * and no reader may ever hold a released entry).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "preload/fdtab.h"

#define SLOTS 2048

static int setup(void **state)
{
	return smcr_fdtab_init(SLOTS) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	smcr_fdtab_fini();
	return 0;
}

static unsigned refs(const struct smcr_fd_entry *entry)
{
	return atomic_load(&entry->refcnt);
}

static void test_track_and_lookup(void **state)
{
	struct smcr_fd_entry *entry = smcr_fdtab_track(5, AF_INET6, SMCR_FD_CANDIDATE, 0);

	assert_non_null(entry);
	assert_ptr_equal(smcr_fdtab_peek(5), entry);
	assert_int_equal(entry->domain, AF_INET6);
	assert_int_equal(atomic_load(&entry->mode), SMCR_FD_CANDIDATE);
	assert_int_equal(refs(entry), 1);
	assert_null(smcr_fdtab_peek(4));
	assert_null(smcr_fdtab_peek(6));
	assert_false(smcr_fdtab_is_smc(5));
	atomic_store(&entry->mode, SMCR_FD_SMC);
	assert_true(smcr_fdtab_is_smc(5));
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
}

static void test_dup_shares_entry(void **state)
{
	struct smcr_fd_entry *entry = smcr_fdtab_track(5, AF_INET, SMCR_FD_CANDIDATE, 0);

	smcr_fdtab_dup(5, 9);
	assert_ptr_equal(smcr_fdtab_peek(9), entry);
	assert_int_equal(refs(entry), 2);
	/* A change made through one fd is seen through the other. */
	atomic_store(&entry->mode, SMCR_FD_FALLBACK);
	assert_int_equal(atomic_load(&smcr_fdtab_peek(9)->mode), SMCR_FD_FALLBACK);
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
}

static void test_close_of_one_dup_keeps_other(void **state)
{
	struct smcr_fd_entry *entry = smcr_fdtab_track(5, AF_INET, SMCR_FD_CANDIDATE, 0);

	smcr_fdtab_dup(5, 9);
	smcr_fdtab_dup(9, 12);
	assert_int_equal(refs(entry), 3);
	smcr_fdtab_forget(5);
	assert_null(smcr_fdtab_peek(5));
	assert_ptr_equal(smcr_fdtab_peek(9), entry);
	assert_ptr_equal(smcr_fdtab_peek(12), entry);
	assert_int_equal(refs(entry), 2);
	smcr_fdtab_forget(12);
	assert_int_equal(refs(entry), 1);
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
	smcr_fdtab_forget(9);
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
	/* Forgetting twice (close of a closed fd) is harmless. */
	smcr_fdtab_forget(9);
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
}

static void test_dup_over_tracked_fd_releases_it(void **state)
{
	struct smcr_fd_entry *a = smcr_fdtab_track(5, AF_INET, SMCR_FD_CANDIDATE, 0);
	struct smcr_fd_entry *b = smcr_fdtab_track(6, AF_INET6, SMCR_FD_CANDIDATE, 0);

	assert_ptr_not_equal(a, b);
	assert_int_equal(smcr_fdtab_entries_in_use(), 2);
	smcr_fdtab_dup(5, 6); /* dup2(5, 6): the kernel closed 6 */
	assert_ptr_equal(smcr_fdtab_peek(6), a);
	assert_int_equal(refs(a), 2);
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
	/* dup2(fd, fd) changes nothing. */
	smcr_fdtab_dup(5, 5);
	assert_int_equal(refs(a), 2);
}

static void test_dup_of_untracked_clears_target(void **state)
{
	smcr_fdtab_track(6, AF_INET, SMCR_FD_CANDIDATE, 0);
	smcr_fdtab_dup(3, 6); /* dup2(file, 6) */
	assert_null(smcr_fdtab_peek(6));
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
}

static void test_stale_entry_reset_on_reuse(void **state)
{
	struct smcr_fd_entry *old = smcr_fdtab_track(7, AF_INET, SMCR_FD_CANDIDATE,
						     SMCR_FD_F_LISTENING);
	struct smcr_fd_entry *fresh;

	atomic_store(&old->mode, SMCR_FD_SMC);
	/* libc closed 7 behind our back; the kernel hands 7 out for a new socket. */
	fresh = smcr_fdtab_track(7, AF_INET6, SMCR_FD_CANDIDATE, 0);
	assert_non_null(fresh);
	assert_ptr_equal(smcr_fdtab_peek(7), fresh);
	assert_int_equal(atomic_load(&fresh->mode), SMCR_FD_CANDIDATE);
	assert_int_equal(atomic_load(&fresh->flags), 0);
	assert_int_equal(fresh->domain, AF_INET6);
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
	/* ... or for a file: the number is simply forgotten. */
	smcr_fdtab_forget(7);
	assert_null(smcr_fdtab_peek(7));
	assert_false(smcr_fdtab_is_smc(7));
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
}

static void test_out_of_range_fds_pass_through(void **state)
{
	assert_null(smcr_fdtab_track(SLOTS, AF_INET, SMCR_FD_CANDIDATE, 0));
	assert_null(smcr_fdtab_track(-1, AF_INET, SMCR_FD_CANDIDATE, 0));
	assert_null(smcr_fdtab_track(INT_MAX, AF_INET, SMCR_FD_CANDIDATE, 0));
	assert_null(smcr_fdtab_peek(-1));
	assert_null(smcr_fdtab_peek(SLOTS));
	assert_null(smcr_fdtab_peek(INT_MIN));
	assert_null(smcr_fdtab_get(-7));
	assert_false(smcr_fdtab_is_smc(SLOTS + 1));
	smcr_fdtab_forget(-1);
	smcr_fdtab_forget(SLOTS);
	smcr_fdtab_track(SLOTS - 1, AF_INET, SMCR_FD_CANDIDATE, 0);
	smcr_fdtab_dup(SLOTS - 1, SLOTS + 5); /* new fd beyond the table: untracked */
	assert_null(smcr_fdtab_peek(SLOTS + 5));
	smcr_fdtab_dup(SLOTS + 5, 3);         /* copy of an untracked fd */
	assert_null(smcr_fdtab_peek(3));
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
	smcr_fdtab_forget_range(0, UINT_MAX);
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
}

static void test_forget_range(void **state)
{
	for (int fd = 10; fd < 20; fd++)
		smcr_fdtab_track(fd, AF_INET, SMCR_FD_CANDIDATE, 0);
	smcr_fdtab_forget_range(12, 15);
	for (int fd = 10; fd < 20; fd++) {
		if (fd >= 12 && fd <= 15)
			assert_null(smcr_fdtab_peek(fd));
		else
			assert_non_null(smcr_fdtab_peek(fd));
	}
	assert_int_equal(smcr_fdtab_entries_in_use(), 6);
	smcr_fdtab_forget_range(17, 5000);
	assert_int_equal(smcr_fdtab_entries_in_use(), 3);
}

static void test_get_holds_entry_after_close(void **state)
{
	struct smcr_fd_entry *entry = smcr_fdtab_track(8, AF_INET, SMCR_FD_CANDIDATE, 0);
	struct smcr_fd_entry *held = smcr_fdtab_get(8);

	assert_ptr_equal(held, entry);
	assert_int_equal(refs(entry), 2);
	smcr_fdtab_forget(8);
	/* Still ours: not back in the pool, so a new socket gets another entry. */
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
	assert_ptr_not_equal(smcr_fdtab_track(8, AF_INET, SMCR_FD_CANDIDATE, 0), held);
	smcr_fdtab_put(held);
	assert_int_equal(smcr_fdtab_entries_in_use(), 1);
	assert_null(smcr_fdtab_get(9));
}

static void test_pool_grows_and_recycles(void **state)
{
	const int n = 3 * SMCR_FDTAB_CHUNK + 17;

	for (int fd = 0; fd < n; fd++)
		assert_non_null(smcr_fdtab_track(fd, AF_INET, SMCR_FD_CANDIDATE, 0));
	assert_int_equal(smcr_fdtab_entries_in_use(), n);
	for (int fd = 0; fd < n; fd++)
		smcr_fdtab_forget(fd);
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
	for (int fd = 0; fd < n; fd++)
		smcr_fdtab_track(fd, AF_INET, SMCR_FD_CANDIDATE, 0);
	assert_int_equal(smcr_fdtab_entries_in_use(), n);
}

static void test_errno_untouched(void **state)
{
	errno = 4242;
	smcr_fdtab_track(5, AF_INET, SMCR_FD_CANDIDATE, 0);
	smcr_fdtab_dup(5, 6);
	smcr_fdtab_forget(5);
	smcr_fdtab_forget_range(0, 100);
	smcr_fdtab_put(smcr_fdtab_get(6));
	assert_int_equal(errno, 4242);
}

/* ---- concurrency ------------------------------------------------------ */

#define RACE_FDS 48
#define RACE_WRITERS 3
#define RACE_READERS 2
#define RACE_OPS 200000

static atomic_bool race_stop;
static atomic_uint race_bad_reads;

static uint32_t next_random(uint32_t *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return *seed >> 8;
}

/* socket, dup2 and close on a shared range of fds, as racing threads do. */
static void *race_writer(void *arg)
{
	uint32_t seed = (uint32_t)(uintptr_t)arg;

	for (int i = 0; i < RACE_OPS; i++) {
		int fd = (int)(next_random(&seed) % RACE_FDS);

		switch (next_random(&seed) % 3) {
		case 0:
			smcr_fdtab_track(fd, (i & 1) ? AF_INET : AF_INET6, SMCR_FD_CANDIDATE, 0);
			break;
		case 1:
			smcr_fdtab_dup(fd, (int)(next_random(&seed) % RACE_FDS));
			break;
		default:
			smcr_fdtab_forget(fd);
			break;
		}
	}
	return NULL;
}

/* A referenced entry must always look alive and well formed. */
static void *race_reader(void *arg)
{
	unsigned fd = 0;

	while (!atomic_load(&race_stop)) {
		struct smcr_fd_entry *entry = smcr_fdtab_get((int)(fd++ % RACE_FDS));

		(void)smcr_fdtab_is_smc((int)(fd % RACE_FDS));
		if (!entry)
			continue;
		if (atomic_load(&entry->refcnt) == 0 ||
		    atomic_load(&entry->mode) != SMCR_FD_CANDIDATE ||
		    (entry->domain != AF_INET && entry->domain != AF_INET6))
			atomic_fetch_add(&race_bad_reads, 1);
		smcr_fdtab_put(entry);
	}
	return NULL;
}

static void test_concurrent_readers_and_writers(void **state)
{
	pthread_t writers[RACE_WRITERS], readers[RACE_READERS];

	atomic_store(&race_stop, false);
	atomic_store(&race_bad_reads, 0);
	for (int i = 0; i < RACE_READERS; i++)
		assert_int_equal(pthread_create(&readers[i], NULL, race_reader, NULL), 0);
	for (int i = 0; i < RACE_WRITERS; i++)
		assert_int_equal(pthread_create(&writers[i], NULL, race_writer,
						(void *)(uintptr_t)(i * 7919 + 1)), 0);
	for (int i = 0; i < RACE_WRITERS; i++)
		pthread_join(writers[i], NULL);
	atomic_store(&race_stop, true);
	for (int i = 0; i < RACE_READERS; i++)
		pthread_join(readers[i], NULL);

	assert_int_equal(atomic_load(&race_bad_reads), 0);
	/* Every entry in use is referenced by exactly the slots pointing to it. */
	unsigned referenced = 0, distinct = 0;
	for (int fd = 0; fd < RACE_FDS; fd++) {
		struct smcr_fd_entry *entry = smcr_fdtab_peek(fd);
		bool seen = false;

		if (!entry)
			continue;
		referenced++;
		for (int other = 0; other < fd; other++)
			seen = seen || smcr_fdtab_peek(other) == entry;
		if (!seen) {
			unsigned slots = 0;

			distinct++;
			for (int other = 0; other < RACE_FDS; other++)
				slots += smcr_fdtab_peek(other) == entry;
			assert_int_equal(refs(entry), slots);
		}
	}
	assert_int_equal(smcr_fdtab_entries_in_use(), distinct);
	smcr_fdtab_forget_range(0, RACE_FDS);
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
	(void)referenced;
}

/*
 * get() must never hand out an entry that belongs to another fd: a reader
 * that loaded a slot just before the entry was released and reused must
 * notice. Here each entry's domain field names its fd, and no dup mixes
 * them, so a reader can tell.
 */
#define EXACT_FDS 8
#define EXACT_OPS 600000

static void *exact_writer(void *arg)
{
	uint32_t seed = (uint32_t)(uintptr_t)arg;

	for (int i = 0; i < EXACT_OPS; i++) {
		int fd = (int)(next_random(&seed) % EXACT_FDS);

		if (next_random(&seed) & 1)
			smcr_fdtab_track(fd, 1000 + fd, SMCR_FD_CANDIDATE, 0);
		else
			smcr_fdtab_forget(fd);
	}
	return NULL;
}

static void *exact_reader(void *arg)
{
	unsigned fd = 0;

	while (!atomic_load(&race_stop)) {
		int want = (int)(fd++ % EXACT_FDS);
		struct smcr_fd_entry *entry = smcr_fdtab_get(want);

		if (!entry)
			continue;
		if (entry->domain != 1000 + want)
			atomic_fetch_add(&race_bad_reads, 1);
		smcr_fdtab_put(entry);
	}
	return NULL;
}

static void test_concurrent_get_returns_own_entry(void **state)
{
	pthread_t writers[2], readers[2];

	atomic_store(&race_stop, false);
	atomic_store(&race_bad_reads, 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&readers[i], NULL, exact_reader, NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&writers[i], NULL, exact_writer,
						(void *)(uintptr_t)(i * 104729 + 3)), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(writers[i], NULL);
	atomic_store(&race_stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(readers[i], NULL);
	assert_int_equal(atomic_load(&race_bad_reads), 0);
	smcr_fdtab_forget_range(0, EXACT_FDS);
	assert_int_equal(smcr_fdtab_entries_in_use(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_track_and_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dup_shares_entry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_of_one_dup_keeps_other, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dup_over_tracked_fd_releases_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dup_of_untracked_clears_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_entry_reset_on_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_range_fds_pass_through, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forget_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_holds_entry_after_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_grows_and_recycles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errno_untouched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_readers_and_writers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_get_returns_own_entry, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("fdtab", tests, NULL, NULL);
}
