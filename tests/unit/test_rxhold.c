// SPDX-License-Identifier: MIT
/*
 * The holding buffer of unread bytes moved out of an RMB (src/smcr/rxhold.c):
 * bytes come out in the order they went in, across puts of two ring pieces
 * and across the move to the front; a peek consumes nothing; reads of any
 * size into iovecs of any shape; never more than the bound; the memory goes
 * once drained.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "smcr/rxhold.h"

/* Byte i of the test stream. */
static uint8_t stream_byte(uint32_t i)
{
	return (uint8_t)(i * 7u + (i >> 8) + 1u);
}

static void fill(uint8_t *p, uint32_t from, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = stream_byte(from + i);
}

static uint32_t peek_all(const struct smcr_rxhold *h, uint8_t *out, size_t max)
{
	struct iovec iov = { .iov_base = out, .iov_len = max };

	return (uint32_t)smcr_rxhold_peek(h, &iov, 1, 0, max);
}

static void assert_stream(const uint8_t *p, uint32_t from, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(p[i], stream_byte(from + i));
}

static void test_order_two_pieces(void **state)
{
	struct smcr_rxhold h = { 0 };
	uint8_t a[100], b[50], c[30], out[256];

	(void)state;
	fill(a, 0, sizeof(a));
	fill(b, 100, sizeof(b));
	fill(c, 150, sizeof(c));
	/* a ring's two pieces (up to its end, then from offset 0), then one more */
	assert_int_equal(smcr_rxhold_put(&h, 256, a, sizeof(a), b, sizeof(b)), 0);
	assert_int_equal(smcr_rxhold_put(&h, 256, c, sizeof(c), NULL, 0), 0);
	assert_int_equal(smcr_rxhold_len(&h), 180);
	assert_int_equal(peek_all(&h, out, sizeof(out)), 180);
	assert_stream(out, 0, 180);
	smcr_rxhold_free(&h);
	assert_null(h.buf);
}

static void test_peek_consumes_nothing(void **state)
{
	struct smcr_rxhold h = { 0 };
	uint8_t a[64], out[64];

	(void)state;
	fill(a, 0, sizeof(a));
	assert_int_equal(smcr_rxhold_put(&h, 64, a, sizeof(a), NULL, 0), 0);
	for (int round = 0; round < 2; round++) {
		memset(out, 0, sizeof(out));
		assert_int_equal(peek_all(&h, out, 10), 10);
		assert_stream(out, 0, 10);
		assert_int_equal(smcr_rxhold_len(&h), 64);
	}
	smcr_rxhold_drop(&h, 10);
	assert_int_equal(peek_all(&h, out, 10), 10);
	assert_stream(out, 10, 10);
	smcr_rxhold_free(&h);
}

/* Reads of every size into three uneven iovecs, each starting `done` bytes in. */
static void test_partial_reads_iovec(void **state)
{
	uint8_t a[200];

	(void)state;
	fill(a, 0, sizeof(a));
	for (uint32_t step = 1; step <= 37; step += 3) {
		struct smcr_rxhold h = { 0 };
		uint32_t at = 0;

		assert_int_equal(smcr_rxhold_put(&h, 200, a, 150, a + 150, 50), 0);
		while (smcr_rxhold_len(&h) > 0) {
			uint8_t x[5], y[11], z[64];
			struct iovec iov[3] = { { x, sizeof(x) }, { y, sizeof(y) }, { z, sizeof(z) } };
			uint8_t flat[80];
			size_t done = step % 7, n;

			memset(x, 0, sizeof(x));
			memset(y, 0, sizeof(y));
			memset(z, 0, sizeof(z));
			n = smcr_rxhold_peek(&h, iov, 3, done, step);
			assert_true(n == step || n == smcr_rxhold_len(&h));
			memcpy(flat, x, sizeof(x));
			memcpy(flat + sizeof(x), y, sizeof(y));
			memcpy(flat + sizeof(x) + sizeof(y), z, sizeof(z));
			assert_stream(flat + done, at, (uint32_t)n);
			smcr_rxhold_drop(&h, (uint32_t)n);
			at += (uint32_t)n;
		}
		assert_int_equal(at, 200);
		assert_null(h.buf); /* drained: freed */
	}
}

static void test_bound(void **state)
{
	struct smcr_rxhold h = { 0 };
	uint8_t a[300], out[300];

	(void)state;
	fill(a, 0, sizeof(a));
	assert_int_equal(smcr_rxhold_room(&h, 256), 256);
	/* nothing and no memory for an empty put */
	assert_int_equal(smcr_rxhold_put(&h, 256, a, 0, NULL, 0), 0);
	assert_null(h.buf);
	/* more than the bound: refused whole */
	assert_int_equal(smcr_rxhold_put(&h, 256, a, 200, a + 200, 57), -ENOSPC);
	assert_int_equal(smcr_rxhold_len(&h), 0);
	assert_int_equal(smcr_rxhold_put(&h, 256, a, 200, NULL, 0), 0);
	assert_int_equal(smcr_rxhold_room(&h, 256), 56);
	assert_int_equal(smcr_rxhold_put(&h, 256, a + 200, 57, NULL, 0), -ENOSPC);
	assert_int_equal(smcr_rxhold_len(&h), 200);
	/* the size of the first put bounds the later ones */
	assert_int_equal(smcr_rxhold_room(&h, 4096), 56);
	assert_int_equal(smcr_rxhold_put(&h, 4096, a + 200, 57, NULL, 0), -ENOSPC);
	assert_int_equal(smcr_rxhold_put(&h, 256, a + 200, 56, NULL, 0), 0);
	assert_int_equal(smcr_rxhold_room(&h, 256), 0);
	assert_int_equal(peek_all(&h, out, sizeof(out)), 256);
	assert_stream(out, 0, 256);
	smcr_rxhold_drop(&h, 256);
	assert_null(h.buf);
	assert_int_equal(smcr_rxhold_room(&h, 256), 256);
}

/* Reads free room at the front: later puts move what is left there, order kept. */
static void test_put_after_partial_read(void **state)
{
	struct smcr_rxhold h = { 0 };
	uint8_t a[1000], out[64];
	uint32_t in = 0, at = 0;

	(void)state;
	fill(a, 0, sizeof(a));
	while (at < sizeof(a)) {
		uint32_t room = smcr_rxhold_room(&h, 64), n = (uint32_t)sizeof(a) - in;
		uint32_t got;

		if (n > room)
			n = room;
		if (n > 1) /* two pieces, as from a ring */
			assert_int_equal(smcr_rxhold_put(&h, 64, a + in, n / 2, a + in + n / 2,
							 n - n / 2), 0);
		else if (n)
			assert_int_equal(smcr_rxhold_put(&h, 64, a + in, n, NULL, 0), 0);
		in += n;
		assert_true(smcr_rxhold_len(&h) <= 64);
		got = peek_all(&h, out, 13 + at % 29);
		assert_stream(out, at, got);
		smcr_rxhold_drop(&h, got);
		at += got;
	}
	assert_int_equal(in, sizeof(a));
	assert_null(h.buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_two_pieces),
		cmocka_unit_test(test_peek_consumes_nothing),
		cmocka_unit_test(test_partial_reads_iovec),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_put_after_partial_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
