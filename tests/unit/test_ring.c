// SPDX-License-Identifier: MIT
/*
 * Cursor arithmetic, exhaustively for small rings: every cursor position, every
 * advance, every pair of cursors around the 16-bit wrap-counter overflow,
 * compared with a model that treats cursors as positions on a line of
 * 65536 * size bytes.  Plus the edges of the largest ring.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "smcr/ring.h"

#define MAX_SMALL_RING 9

static const uint16_t edge_wraps[] = { 0xfffe, 0xffff, 0, 1, 2, 0x7fff, 0x8000 };
#define N_WRAPS (sizeof(edge_wraps) / sizeof(edge_wraps[0]))

static uint64_t span(uint32_t size)
{
	return 65536ull * size;
}

static uint64_t abs_pos(struct smcr_curs c, uint32_t size)
{
	return (uint64_t)c.wrap * size + c.count;
}

static struct smcr_curs from_abs(uint64_t pos, uint32_t size)
{
	pos %= span(size);
	return (struct smcr_curs){ .wrap = (uint16_t)(pos / size), .count = (uint32_t)(pos % size) };
}

static void valid(void **state)
{
	assert_false(smcr_curs_valid((struct smcr_curs){ 0, 0 }, 0));
	assert_true(smcr_curs_valid((struct smcr_curs){ 0, 0 }, 1));
	assert_false(smcr_curs_valid((struct smcr_curs){ 0, 1 }, 1));
	assert_true(smcr_curs_valid((struct smcr_curs){ 0xffff, 65535 }, 65536));
	assert_false(smcr_curs_valid((struct smcr_curs){ 0, 65536 }, 65536));
	assert_true(smcr_curs_valid((struct smcr_curs){ 0, SMCR_RING_MAX_SIZE - 1 },
				    SMCR_RING_MAX_SIZE));
	assert_false(smcr_curs_valid((struct smcr_curs){ 0, 0 }, SMCR_RING_MAX_SIZE + 1));
	(void)state;
}

static void advance_exhaustive(void **state)
{
	uint32_t size, count, n;
	size_t w;

	for (size = 1; size <= MAX_SMALL_RING; size++)
		for (w = 0; w < N_WRAPS; w++)
			for (count = 0; count < size; count++)
				for (n = 0; n <= size; n++) {
					struct smcr_curs c = { edge_wraps[w], count };
					struct smcr_curs got = smcr_curs_advance(c, n, size);
					struct smcr_curs want = from_abs(abs_pos(c, size) + n, size);

					assert_int_equal(got.wrap, want.wrap);
					assert_int_equal(got.count, want.count);
					assert_true(smcr_curs_valid(got, size));
				}
	(void)state;
}

static void diff_and_cmp_exhaustive(void **state)
{
	uint32_t size, ca, cb;
	size_t wa, wb;

	for (size = 1; size <= MAX_SMALL_RING; size++)
		for (wa = 0; wa < N_WRAPS; wa++)
			for (ca = 0; ca < size; ca++)
				for (wb = 0; wb < N_WRAPS; wb++)
					for (cb = 0; cb < size; cb++) {
						struct smcr_curs a = { edge_wraps[wa], ca };
						struct smcr_curs b = { edge_wraps[wb], cb };
						uint64_t fwd = (abs_pos(b, size) + span(size) - abs_pos(a, size)) %
							       span(size);
						uint64_t back = (span(size) - fwd) % span(size);
						uint32_t dist = 0xdeadbeef;
						bool ok = smcr_curs_diff(a, b, size, &dist);
						int cmp = smcr_curs_cmp(a, b);

						/* diff: defined exactly when b is 0..size ahead of a. */
						assert_int_equal(ok, fwd <= size);
						if (ok)
							assert_int_equal(dist, fwd);
						/* cmp: sign by wrap (serial arithmetic), then count. */
						if (fwd == 0)
							assert_int_equal(cmp, 0);
						else if (fwd <= size)
							assert_true(cmp < 0);
						else if (back <= size)
							assert_true(cmp > 0);
						/* Antisymmetry everywhere except the 2^15-wrap ambiguity. */
						if ((uint16_t)(a.wrap - b.wrap) != 0x8000)
							assert_int_equal(cmp, -smcr_curs_cmp(b, a));
					}
	(void)state;
}

static void out_of_ring_cursors_have_no_distance(void **state)
{
	uint32_t dist;

	assert_false(smcr_curs_diff((struct smcr_curs){ 0, 4 }, (struct smcr_curs){ 0, 5 }, 4, &dist));
	assert_false(smcr_curs_diff((struct smcr_curs){ 0, 0 }, (struct smcr_curs){ 0, 4 }, 4, &dist));
	assert_false(smcr_curs_diff((struct smcr_curs){ 0, 0 }, (struct smcr_curs){ 0, 0 }, 0, &dist));
	(void)state;
}

static void largest_ring_edges(void **state)
{
	const uint32_t size = SMCR_RING_MAX_SIZE;
	struct smcr_curs c = { 0xffff, size - 1 };
	uint32_t dist;

	c = smcr_curs_advance(c, 1, size);
	assert_int_equal(c.wrap, 0);
	assert_int_equal(c.count, 0);
	c = smcr_curs_advance((struct smcr_curs){ 3, size - 1 }, size, size);
	assert_int_equal(c.wrap, 4);
	assert_int_equal(c.count, size - 1);
	assert_true(smcr_curs_diff((struct smcr_curs){ 3, size - 1 }, c, size, &dist));
	assert_int_equal(dist, size);
	assert_true(smcr_curs_diff((struct smcr_curs){ 0xffff, size - 1 }, (struct smcr_curs){ 0, 0 },
				   size, &dist));
	assert_int_equal(dist, 1);
	/* 64 KiB RMB written full from (0,0): (1,0), as in the kernel capture. */
	c = smcr_curs_advance((struct smcr_curs){ 0, 0 }, 65536, 65536);
	assert_int_equal(c.wrap, 1);
	assert_int_equal(c.count, 0);
	(void)state;
}

static void split_exhaustive(void **state)
{
	uint32_t size, pos, len, first, second;

	for (size = 1; size <= 16; size++)
		for (pos = 0; pos < size; pos++)
			for (len = 0; len <= size; len++) {
				smcr_ring_split(pos, len, size, &first, &second);
				assert_int_equal(first + second, len);
				assert_true(pos + first <= size);
				/* A second chunk exists only if the first reaches the end. */
				if (second)
					assert_int_equal(pos + first, size);
				assert_true(second <= pos || (pos == 0 && second == 0));
			}
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(valid),
		cmocka_unit_test(advance_exhaustive),
		cmocka_unit_test(diff_and_cmp_exhaustive),
		cmocka_unit_test(out_of_ring_cursors_have_no_distance),
		cmocka_unit_test(largest_ring_edges),
		cmocka_unit_test(split_exhaustive),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
