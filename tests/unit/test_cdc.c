// SPDX-License-Identifier: MIT
/*
 * CDC: kernel-captured messages decode to the right cursors and flags, and
 * encoding those fields gives back the kernel's exact bytes; round trips;
 * malformed messages rejected; the cursor validator checked against an
 * independent model for every cursor combination of small rings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "smcr/cdc.h"
#include "testdata.h"

static enum smcr_wire_status decode_exact(const uint8_t *bytes, size_t n,
					  struct smcr_cdc_msg *m, enum smcr_cdc_err *err)
{
	uint8_t *copy = malloc(n ? n : 1);
	enum smcr_wire_status st;

	assert_non_null(copy);
	memcpy(copy, bytes, n);
	st = smcr_cdc_decode(copy, n, m, err);
	free(copy);
	return st;
}

struct kernel_cdc {
	const char *file;
	struct smcr_cdc_msg want;
};

/* Fields as listed in tests/data/kernel-smcr/README.md, capture a. */
static const struct kernel_cdc kernel_cdcs[] = {
	{ "cdc-data-wblk.bin", { 1, 1, { 1, 0 }, { 0, 0 }, SMCR_CDC_PROD_WRITE_BLOCKED, 0 } },
	{ "cdc-cons-update.bin", { 1, 2, { 0, 0 }, { 1, 0 }, 0, 0 } },
	{ "cdc-data.bin", { 2, 1, { 1, 34464 }, { 0, 0 }, 0, 0 } },
	{ "cdc-close.bin", { 3, 1, { 1, 34464 }, { 0, 10 }, 0, SMCR_CDC_CONN_CLOSED } },
};

static void kernel_messages(void **state)
{
	size_t i;

	for (i = 0; i < sizeof(kernel_cdcs) / sizeof(kernel_cdcs[0]); i++) {
		const struct smcr_cdc_msg *w = &kernel_cdcs[i].want;
		uint8_t b[64], out[SMCR_CDC_MSG_LEN];
		size_t n = load_bin(kernel_cdcs[i].file, b, sizeof(b));
		struct smcr_cdc_msg m;
		enum smcr_cdc_err err;

		assert_int_equal(n, 44);
		assert_int_equal(decode_exact(b, n, &m, &err), SMCR_WIRE_OK);
		assert_int_equal(m.seqno, w->seqno);
		assert_int_equal(m.token, w->token);
		assert_int_equal(m.prod.wrap, w->prod.wrap);
		assert_int_equal(m.prod.count, w->prod.count);
		assert_int_equal(m.cons.wrap, w->cons.wrap);
		assert_int_equal(m.cons.count, w->cons.count);
		assert_int_equal(m.prod_flags, w->prod_flags);
		assert_int_equal(m.conn_flags, w->conn_flags);
		assert_int_equal(m.smcr_flags, 0); /* Linux's reserved byte */
		/* Host -> wire from the expected fields gives the kernel's bytes. */
		smcr_cdc_encode(w, out);
		assert_memory_equal(out, b, 44);
	}
	(void)state;
}

/* smcr's own flags live in byte 26, the first reserved one, and survive a round trip. */
static void smcr_flags_byte(void **state)
{
	struct smcr_cdc_msg in = { .seqno = 9, .token = 5, .smcr_flags = SMCR_CDC_SMCR_TCP_TAIL },
			    out;
	uint8_t b[SMCR_CDC_MSG_LEN], zero[SMCR_CDC_MSG_LEN - 27] = { 0 };
	enum smcr_cdc_err err;

	smcr_cdc_encode(&in, b);
	assert_int_equal(b[26], SMCR_CDC_SMCR_TCP_TAIL);
	assert_memory_equal(b + 27, zero, sizeof(zero));
	assert_int_equal(decode_exact(b, sizeof(b), &out, &err), SMCR_WIRE_OK);
	assert_int_equal(out.smcr_flags, SMCR_CDC_SMCR_TCP_TAIL);
	in.smcr_flags = 0;
	smcr_cdc_encode(&in, b);
	assert_int_equal(b[26], 0);
	(void)state;
}

static void round_trip(void **state)
{
	static const uint32_t counts[] = { 0, 1, 0x7fffffff, 0xffffffff };
	static const uint16_t wraps[] = { 0, 1, 0x8000, 0xffff };
	size_t i, j;

	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++) {
			struct smcr_cdc_msg in = {
				.seqno = wraps[j], .token = counts[i] | 1,
				.prod = { wraps[i], counts[j] }, .cons = { wraps[j], counts[i] },
				.prod_flags = (uint8_t)(0xf8 >> i), .conn_flags = (uint8_t)(0xe0 >> j),
			}, out;
			uint8_t b[SMCR_CDC_MSG_LEN + 4];
			enum smcr_cdc_err err;

			smcr_cdc_encode(&in, b);
			assert_int_equal(b[0], 0xfe);
			assert_int_equal(b[1], 44);
			/* Extra bytes after the 44 (a larger receive buffer) are ignored. */
			memset(b + 44, 0xee, 4);
			assert_int_equal(decode_exact(b, sizeof(b), &out, &err), SMCR_WIRE_OK);
			assert_int_equal(in.prod.wrap, out.prod.wrap);
			assert_int_equal(in.prod.count, out.prod.count);
			assert_int_equal(in.seqno, out.seqno);
			assert_int_equal(in.token, out.token);
			assert_int_equal(in.cons.wrap, out.cons.wrap);
			assert_int_equal(in.cons.count, out.cons.count);
			assert_int_equal(in.prod_flags, out.prod_flags);
			assert_int_equal(in.conn_flags, out.conn_flags);
		}
	(void)state;
}

static void rejects(void **state)
{
	uint8_t b[64], c[64];
	size_t n = load_bin("cdc-data.bin", b, sizeof(b)), k;
	struct smcr_cdc_msg m;
	enum smcr_cdc_err err;

	for (k = 0; k < 44; k++) {
		assert_int_equal(decode_exact(b, k, &m, &err), SMCR_WIRE_INVALID);
		assert_int_equal(err, SMCR_CDC_ERR_SHORT);
	}
	memcpy(c, b, n);
	c[0] = 0x01;
	assert_int_equal(decode_exact(c, n, &m, &err), SMCR_WIRE_INVALID);
	assert_int_equal(err, SMCR_CDC_ERR_TYPE);
	memcpy(c, b, n);
	c[1] = 45;
	assert_int_equal(decode_exact(c, n, &m, &err), SMCR_WIRE_INVALID);
	assert_int_equal(err, SMCR_CDC_ERR_LENGTH);
	memcpy(c, b, n);
	memset(c + 4, 0, 4);
	assert_int_equal(decode_exact(c, n, &m, &err), SMCR_WIRE_INVALID);
	assert_int_equal(err, SMCR_CDC_ERR_TOKEN);
	/* The reserved cursor bytes are ignored, as the RFC says. */
	memcpy(c, b, n);
	c[8] = 0xff;
	assert_int_equal(decode_exact(c, n, &m, &err), SMCR_WIRE_OK);
	for (k = 0; k <= SMCR_CDC_ERR_COUNT_; k++)
		assert_non_null(smcr_cdc_err_str((enum smcr_cdc_err)k));
	(void)state;
}

/* Independent model: cursors as positions on a line of 65536 * size bytes. */
static uint64_t abs_pos(struct smcr_curs c, uint32_t size)
{
	return (uint64_t)c.wrap * size + c.count;
}

static uint64_t ahead(struct smcr_curs from, struct smcr_curs to, uint32_t size)
{
	uint64_t span = 65536ull * size;

	return (abs_pos(to, size) + span - abs_pos(from, size)) % span;
}

static void cursor_validator_exhaustive(void **state)
{
	static const uint16_t wraps[] = { 0xfffe, 0xffff, 0, 1 };
	uint32_t size;
	unsigned long checked = 0;

	for (size = 1; size <= 6; size++) {
		uint32_t pc, nc, lc;
		size_t pw, nw, lw;

		for (pw = 0; pw < 4; pw++)
			for (pc = 0; pc < size; pc++)
				for (nw = 0; nw < 4; nw++)
					for (nc = 0; nc <= size; nc++)
						for (lw = 0; lw < 4; lw++)
							for (lc = 0; lc < size; lc++) {
								struct smcr_curs prev = { wraps[pw], pc };
								struct smcr_curs next = { wraps[nw], nc };
								struct smcr_curs lim = { wraps[lw], lc };
								enum smcr_cdc_err got = smcr_cdc_curs_check(prev, next, lim, size);
								bool ok;

								if (nc >= size) {
									assert_int_equal(got, SMCR_CDC_ERR_CURS_RANGE);
									continue;
								}
								/* Valid iff prev <= next <= lim and lim <= prev + size. */
								ok = ahead(prev, lim, size) <= size &&
								     ahead(prev, next, size) <= ahead(prev, lim, size);
								if (ok)
									assert_int_equal(got, SMCR_CDC_ERR_NONE);
								else
									assert_int_not_equal(got, SMCR_CDC_ERR_NONE);
								checked++;
							}
	}
	assert_true(checked > 10000);
	(void)state;
}

static void cursor_validator_ring_form(void **state)
{
	struct smcr_curs prev = { 7, 100 };
	const uint32_t size = 65536;

	/* Same place, forward, exactly one ring (RMB written full, as in capture a). */
	assert_int_equal(smcr_cdc_curs_check_ring(prev, prev, size), SMCR_CDC_ERR_NONE);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 7, 65535 }, size),
			 SMCR_CDC_ERR_NONE);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 8, 100 }, size),
			 SMCR_CDC_ERR_NONE);
	assert_int_equal(smcr_cdc_curs_check_ring((struct smcr_curs){ 0, 0 },
						  (struct smcr_curs){ 1, 0 }, size),
			 SMCR_CDC_ERR_NONE);
	/* Impossible: beyond one ring, behind, outside the ring. */
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 8, 101 }, size),
			 SMCR_CDC_ERR_CURS_AHEAD);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 9, 0 }, size),
			 SMCR_CDC_ERR_CURS_AHEAD);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 7, 99 }, size),
			 SMCR_CDC_ERR_CURS_BACKWARD);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 6, 65535 }, size),
			 SMCR_CDC_ERR_CURS_BACKWARD);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 7, 65536 }, size),
			 SMCR_CDC_ERR_CURS_RANGE);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, (struct smcr_curs){ 7, 0xffffffff }, size),
			 SMCR_CDC_ERR_CURS_RANGE);
	assert_int_equal(smcr_cdc_curs_check_ring(prev, prev, 0), SMCR_CDC_ERR_CURS_RANGE);
	/* Wrap counter wraps too. */
	assert_int_equal(smcr_cdc_curs_check_ring((struct smcr_curs){ 0xffff, 10 },
						  (struct smcr_curs){ 0, 5 }, 16),
			 SMCR_CDC_ERR_NONE);
	(void)state;
}

static void sequence_numbers(void **state)
{
	assert_true(smcr_cdc_seq_before(1, 2));
	assert_false(smcr_cdc_seq_before(2, 2));
	assert_false(smcr_cdc_seq_before(2, 1));
	assert_true(smcr_cdc_seq_before(0xffff, 0));
	assert_false(smcr_cdc_seq_before(0, 0xffff));
	assert_true(smcr_cdc_seq_before(0x8001, 1));
	(void)state;
}

/*
 * The failover validation CDC as the kernel builds it (smcr_cdc_msg_send_validation):
 * type, length, the last completed seqno, the token, producer flags with only
 * failover_validation (the fifth bit from the top in the kernel's big-endian
 * bitfield order: 0x08), everything else zero.
 */
static void failover_validation_bytes(void **state)
{
	uint8_t got[SMCR_CDC_MSG_LEN], want[SMCR_CDC_MSG_LEN];
	struct smcr_cdc_msg m;
	enum smcr_cdc_err err;

	memset(want, 0, sizeof(want));
	want[0] = 0xfe;
	want[1] = 44;
	want[2] = 0x12, want[3] = 0x34;                               /* seqno */
	want[4] = 0xa1, want[5] = 0xb2, want[6] = 0xc3, want[7] = 0xd4; /* token */
	want[24] = 0x08;
	memset(got, 0x5a, sizeof(got));
	smcr_cdc_encode_validation(0x1234, 0xa1b2c3d4, got);
	assert_memory_equal(got, want, sizeof(want));
	assert_int_equal(SMCR_CDC_PROD_FAILOVER, 0x08);
	assert_int_equal(smcr_cdc_decode(got, sizeof(got), &m, &err), SMCR_WIRE_OK);
	assert_int_equal(m.prod_flags, SMCR_CDC_PROD_FAILOVER);
	assert_int_equal(m.seqno, 0x1234);
	(void)state;
}

/* The receiver's check (smc_cdc_msg_validate): the named CDC must be one it saw. */
static void failover_validation_check(void **state)
{
	assert_true(smcr_cdc_validation_ok(10, 10));
	assert_true(smcr_cdc_validation_ok(10, 9));
	assert_true(smcr_cdc_validation_ok(10, 0));     /* nothing delivered yet */
	assert_false(smcr_cdc_validation_ok(10, 11));   /* one we never got: lost */
	assert_true(smcr_cdc_validation_ok(2, 0xfffe)); /* across the wrap */
	assert_false(smcr_cdc_validation_ok(0xfffe, 2));
	assert_false(smcr_cdc_validation_ok(0, 1));
	(void)state;
}

static struct smcr_curs C(uint16_t wrap, uint32_t count)
{
	return (struct smcr_curs){ .wrap = wrap, .count = count };
}

/* Where resending starts after a link switch (the kernel's smc_switch_cursor). */
static void failover_start(void **state)
{
	const uint32_t size = 1000;
	struct smcr_curs st;
	uint32_t len;

	/* the usual case: consumed <= last delivered <= written */
	st = smcr_cdc_failover_start(C(3, 500), C(3, 200), C(3, 900), size, &len);
	assert_int_equal(st.wrap, 3), assert_int_equal(st.count, 500), assert_int_equal(len, 400);
	/* the peer read past what our last delivered CDC said (a later one arrived unacknowledged) */
	st = smcr_cdc_failover_start(C(3, 500), C(3, 700), C(3, 900), size, &len);
	assert_int_equal(st.count, 700), assert_int_equal(len, 200);
	/* nothing delivered yet on that link (fin 0/0) with a wrapped ring: from cons */
	st = smcr_cdc_failover_start(C(0, 0), C(5, 10), C(5, 990), size, &len);
	assert_int_equal(st.wrap, 5), assert_int_equal(st.count, 10), assert_int_equal(len, 980);
	/* across the ring's end: fin 900 of wrap 3, prod 100 of wrap 4 */
	st = smcr_cdc_failover_start(C(3, 900), C(3, 800), C(4, 100), size, &len);
	assert_int_equal(st.wrap, 3), assert_int_equal(st.count, 900), assert_int_equal(len, 200);
	/* everything delivered: nothing to resend */
	st = smcr_cdc_failover_start(C(4, 100), C(3, 800), C(4, 100), size, &len);
	assert_int_equal(st.count, 100), assert_int_equal(len, 0);
	/* a full ring unread: all of it again */
	st = smcr_cdc_failover_start(C(2, 0), C(2, 0), C(3, 0), size, &len);
	assert_int_equal(st.wrap, 2), assert_int_equal(len, size);
	/* exhaustively on a small ring: start between cons and prod, never before fin or cons */
	for (uint32_t c = 0; c < 8; c++)
		for (uint32_t f = 0; f < 16; f++)
			for (uint32_t p = c; p <= c + 8; p++) {
				struct smcr_curs cons = C((uint16_t)(c / 8), c % 8);
				struct smcr_curs fin = C((uint16_t)(f / 8), f % 8);
				struct smcr_curs prod = C((uint16_t)(p / 8), p % 8);
				uint32_t want_start = f >= c && f <= p ? f : c;

				st = smcr_cdc_failover_start(fin, cons, prod, 8, &len);
				assert_int_equal(st.wrap * 8u + st.count, want_start);
				assert_int_equal(len, p - want_start);
			}
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kernel_messages),
		cmocka_unit_test(round_trip),
		cmocka_unit_test(smcr_flags_byte),
		cmocka_unit_test(rejects),
		cmocka_unit_test(cursor_validator_exhaustive),
		cmocka_unit_test(cursor_validator_ring_form),
		cmocka_unit_test(sequence_numbers),
		cmocka_unit_test(failover_validation_bytes),
		cmocka_unit_test(failover_validation_check),
		cmocka_unit_test(failover_start),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
