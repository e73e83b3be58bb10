// SPDX-License-Identifier: MIT
/*
 * The per-record seqlock of the stats file (include/smcr/stats_abi.h, writer
 * in src/smcr/stats.c): a reader using smcr_stats_conn_read() never sees a
 * torn record while writer threads update, claim and free records.
 *
 * Every record the writers make is internally consistent by construction:
 *   bytes_received == 3 * bytes_sent, cdc_sent == ~bytes_sent,
 *   cdc_received == bytes_sent + 7, rmb_size == peer_rmb_size.
 * Each write touches several fields, so a reader without the seqlock sees
 * half-written records (a torn read breaks one of the equalities).
 *
 * The retry itself is shown without threads: smcr_stats_seq_read() with a copy
 * function during which a simulated writer completes an update, so the first
 * copy is torn for certain and only a retry gives a consistent one.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "smcr/conn.h"
#include "smcr/stats.h"

#define RUN_MS 800

static volatile int stop;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_consistent(struct smcr_sock *s, uint64_t k)
{
	s->bytes_sent = k;
	s->bytes_received = 3 * k;
	s->cdc_sent = ~k;
	s->cdc_received = k + 7;
}

static struct smcr_sock *fake_sock(uint32_t rings)
{
	struct smcr_sock *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->tcp_fd = -1;
	s->ops = &smcr_shm_ops; /* its info() reads no state */
	s->rmb_size = rings;
	s->peer_size = rings;
	return s;
}

/* One long-lived record, its counters rewritten as fast as possible. */
static void *updater(void *arg)
{
	struct smcr_sock *s = arg;

	for (uint64_t k = 1; !__atomic_load_n(&stop, __ATOMIC_RELAXED); k++) {
		set_consistent(s, k);
		smcr_stats_conn_update(s);
	}
	return NULL;
}

/* Records claimed, updated and freed again: slots change occupant under the reader. */
static void *churner(void *arg)
{
	(void)arg;
	for (uint32_t k = 1; !__atomic_load_n(&stop, __ATOMIC_RELAXED); k++) {
		struct smcr_sock *s = fake_sock(k);

		s->stats = smcr_stats_conn_open(s);
		set_consistent(s, k * 1000003ull);
		smcr_stats_conn_update(s);
		smcr_stats_conn_close(s, 0);
		free(s);
	}
	return NULL;
}

static const char *torn(const struct smcr_stats_conn *r)
{
	if (r->rmb_size != r->peer_rmb_size)
		return "ring sizes of two occupants";
	if (r->bytes_sent == 0 && r->bytes_received == 0 && r->cdc_sent == 0 &&
	    r->cdc_received == 0)
		return NULL; /* just claimed, not updated yet */
	if (r->bytes_received != 3 * r->bytes_sent || r->cdc_sent != ~r->bytes_sent ||
	    r->cdc_received != r->bytes_sent + 7)
		return "counters of two updates";
	return NULL;
}

/* A record of two words a writer keeps equal, under its own seq. */
struct pair_record {
	uint32_t seq;
	uint32_t a;
	uint32_t b;
};

static int copies;      /* calls of copy_under_writer() */
static int writes_left; /* copies during which the writer completes an update */

/* Copies a, lets the writer update the whole record if it has writes left, copies b. */
static void copy_under_writer(const void *from, void *to)
{
	struct pair_record *src = (struct pair_record *)(uintptr_t)from;
	struct pair_record *dst = to;

	copies++;
	dst->a = __atomic_load_n(&src->a, __ATOMIC_RELAXED);
	if (writes_left > 0) {
		writes_left--;
		__atomic_store_n(&src->seq, src->seq + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&src->a, src->a + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&src->b, src->b + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&src->seq, src->seq + 1, __ATOMIC_RELEASE);
	}
	dst->b = __atomic_load_n(&src->b, __ATOMIC_RELAXED);
}

/* smcr_stats_seq_read() of src while the writer completes `writes` updates; copies counted. */
static int read_pair(struct pair_record *src, int writes, struct pair_record *dst, uint32_t *seq)
{
	copies = 0;
	writes_left = writes;
	*seq = 0;
	memset(dst, 0, sizeof(*dst));
	return smcr_stats_seq_read(&src->seq, seq, copy_under_writer, src, dst);
}

static void test_torn_copy_is_retried(void **state)
{
	struct pair_record src = { .seq = 4, .a = 10, .b = 10 }, dst;
	uint32_t seq;

	(void)state;
	assert_int_equal(read_pair(&src, 1, &dst, &seq), 1);
	/* The first copy was a = 10, b = 11: read again, after the update. */
	assert_int_equal(copies, 2);
	assert_int_equal(dst.a, 11);
	assert_int_equal(dst.b, 11);
	assert_int_equal(seq, 6);
}

static void test_busy_record_is_not_copied(void **state)
{
	struct pair_record src = { .seq = 7, .a = 1, .b = 1 }, dst;
	uint32_t seq;

	(void)state;
	assert_int_equal(read_pair(&src, 0, &dst, &seq), 0);
	assert_int_equal(copies, 0);
	assert_int_equal(seq, 0);
}

static void test_reader_gives_up_on_constant_writes(void **state)
{
	struct pair_record src = { .seq = 2, .a = 1, .b = 1 }, dst;
	uint32_t seq;

	(void)state;
	assert_int_equal(read_pair(&src, 1000, &dst, &seq), 0);
	assert_int_equal(copies, SMCR_STATS_READ_TRIES);
	assert_int_equal(seq, 0);
}

static void fill(void *p, size_t size)
{
	for (size_t i = 0; i < size; i++)
		((uint8_t *)p)[i] = (uint8_t)(i * 7 + 1);
}

/* Each record reader copies its whole record when it is quiet and nothing when it is busy. */
static void test_record_readers_copy_whole_records(void **state)
{
	struct smcr_stats_conn conn, conn_copy;
	struct smcr_stats_listener lis, lis_copy;
	struct smcr_stats_lgr lgr, lgr_copy;

	(void)state;
	fill(&conn, sizeof(conn));
	conn.seq = 8;
	memset(&conn_copy, 0, sizeof(conn_copy));
	assert_int_equal(smcr_stats_conn_read(&conn, &conn_copy), 1);
	assert_memory_equal(&conn, &conn_copy, sizeof(conn));

	fill(&lis, sizeof(lis));
	lis.seq = 8;
	lis.why[sizeof(lis.why) - 1] = 'x';
	memset(&lis_copy, 0, sizeof(lis_copy));
	lis_copy.reserved = lis.reserved; /* not part of the snapshot */
	assert_int_equal(smcr_stats_listener_read(&lis, &lis_copy), 1);
	assert_int_equal(lis_copy.why[sizeof(lis_copy.why) - 1], '\0');
	lis_copy.why[sizeof(lis_copy.why) - 1] = 'x';
	assert_memory_equal(&lis, &lis_copy, sizeof(lis));

	fill(&lgr, sizeof(lgr));
	lgr.seq = 8;
	memset(&lgr_copy, 0, sizeof(lgr_copy));
	assert_int_equal(smcr_stats_lgr_read(&lgr, &lgr_copy), 1);
	assert_memory_equal(&lgr, &lgr_copy, sizeof(lgr));

	conn.seq = lis.seq = lgr.seq = 9;
	memset(&conn_copy, 0, sizeof(conn_copy));
	memset(&lis_copy, 0, sizeof(lis_copy));
	memset(&lgr_copy, 0, sizeof(lgr_copy));
	assert_int_equal(smcr_stats_conn_read(&conn, &conn_copy), 0);
	assert_int_equal(smcr_stats_listener_read(&lis, &lis_copy), 0);
	assert_int_equal(smcr_stats_lgr_read(&lgr, &lgr_copy), 0);
	assert_int_equal(conn_copy.seq, 0);
	assert_int_equal(lis_copy.seq, 0);
	assert_int_equal(lgr_copy.seq, 0);
}

static void test_reader_never_sees_torn_record(void **state)
{
	const struct smcr_stats_file *f = smcr_stats_area();
	struct smcr_sock *fixed = fake_sock(65536);
	unsigned long reads = 0, busy = 0, live_seen = 0;
	pthread_t up, churn;
	int64_t end;

	(void)state;
	assert_non_null(f);
	fixed->stats = smcr_stats_conn_open(fixed);
	assert_non_null(fixed->stats);
	assert_int_equal(pthread_create(&up, NULL, updater, fixed), 0);
	assert_int_equal(pthread_create(&churn, NULL, churner, NULL), 0);
	end = now_ms() + RUN_MS;
	while (now_ms() < end) {
		for (unsigned i = 0; i < 8; i++) { /* the slots the writers use */
			struct smcr_stats_conn copy;
			const char *why;

			if (!smcr_stats_conn_read(&f->conns[i], &copy)) {
				busy++;
				continue;
			}
			reads++;
			if (copy.state != SMCR_STATS_CONN_LIVE)
				continue;
			live_seen++;
			why = torn(&copy);
			if (why) {
				__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
				pthread_join(up, NULL);
				pthread_join(churn, NULL);
				fail_msg("slot %u torn (%s): sent %llu received %llu cdc %llu/%llu "
					 "rings %u/%u after %lu reads",
					 i, why, (unsigned long long)copy.bytes_sent,
					 (unsigned long long)copy.bytes_received,
					 (unsigned long long)copy.cdc_sent,
					 (unsigned long long)copy.cdc_received, copy.rmb_size,
					 copy.peer_rmb_size, reads);
			}
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	assert_int_equal(pthread_join(up, NULL), 0);
	assert_int_equal(pthread_join(churn, NULL), 0);
	printf("# %lu consistent reads (%lu live), %lu gave up on a busy record\n", reads,
	       live_seen, busy);
	assert_true(live_seen > 1000);
	smcr_stats_conn_close(fixed, 0);
	free(fixed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_torn_copy_is_retried),
		cmocka_unit_test(test_busy_record_is_not_copied),
		cmocka_unit_test(test_reader_gives_up_on_constant_writes),
		cmocka_unit_test(test_record_readers_copy_whole_records),
		cmocka_unit_test(test_reader_never_sees_torn_record),
	};
	char dir[] = "/tmp/smcr-seqlock-test.XXXXXX";
	int rc;

	/* Publish into a private runtime directory, not the user's. */
	if (!mkdtemp(dir))
		return 1;
	setenv("XDG_RUNTIME_DIR", dir, 1);
	alarm(60);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	{
		char path[300];

		/* The file goes at exit; the directories are ours to remove after. */
		snprintf(path, sizeof(path), "%s", smcr_stats_path());
		if (path[0])
			unlink(path);
		snprintf(path, sizeof(path), "%s/smcr", dir);
		rmdir(path);
		rmdir(dir);
	}
	return rc;
}
