// SPDX-License-Identifier: MIT
/*
 * libFuzzer entry for the CDC decoder and the cursor validator.
 *  - CDC: no crash or over-read; an accepted message re-encodes to the input
 *    bytes except the reserved ones.
 *  - Cursors: the input's bytes also form (ring size, prev, next, limit); the
 *    validator's verdict is checked against plain 64-bit arithmetic.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smcr/cdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool reserved_byte(size_t i)
{
	return i == 8 || i == 9 || i == 16 || i == 17 || i >= 26;
}

static void check_cdc(const uint8_t *data, size_t size)
{
	struct smcr_cdc_msg m;
	enum smcr_cdc_err err;
	uint8_t out[SMCR_CDC_MSG_LEN];
	size_t i;

	if (smcr_cdc_decode(data, size, &m, &err) != SMCR_WIRE_OK) {
		if (smcr_cdc_err_str(err) == NULL)
			abort();
		return;
	}
	smcr_cdc_encode(&m, out);
	for (i = 0; i < SMCR_CDC_MSG_LEN; i++)
		if (!reserved_byte(i) && out[i] != data[i])
			abort();
}

static struct smcr_curs curs_at(const uint8_t *p)
{
	return (struct smcr_curs){ .wrap = smcr_get_be16(p), .count = smcr_get_be32(p + 2) };
}

static uint64_t ahead(struct smcr_curs from, struct smcr_curs to, uint32_t size)
{
	uint64_t span = 65536ull * size;

	return ((uint64_t)to.wrap * size + to.count + span - ((uint64_t)from.wrap * size + from.count)) %
	       span;
}

static void check_cursors(const uint8_t *p, size_t size)
{
	uint32_t ring;
	struct smcr_curs prev, next, limit;
	enum smcr_cdc_err got;
	bool in_ring, want;

	if (size < 22)
		return;
	/* Small rings are where wrap bugs live: fold most sizes down. */
	ring = smcr_get_be32(p);
	if (!(p[0] & 0x80))
		ring &= 0xff;
	prev = curs_at(p + 4);
	next = curs_at(p + 10);
	limit = curs_at(p + 16);
	got = smcr_cdc_curs_check(prev, next, limit, ring);
	in_ring = ring > 0 && ring <= SMCR_RING_MAX_SIZE && prev.count < ring && next.count < ring &&
		  limit.count < ring;
	if (!in_ring) {
		if (got != SMCR_CDC_ERR_CURS_RANGE)
			abort();
		return;
	}
	want = ahead(prev, limit, ring) <= ring &&
	       ahead(prev, next, ring) <= ahead(prev, limit, ring);
	if (want != (got == SMCR_CDC_ERR_NONE))
		abort();
	/* Advancing a valid cursor by its distance lands on the target. */
	if (want) {
		uint32_t d;
		struct smcr_curs back;

		if (!smcr_curs_diff(prev, next, ring, &d))
			abort();
		back = smcr_curs_advance(prev, d, ring);
		if (back.wrap != next.wrap || back.count != next.count)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_cdc(data, size);
	check_cursors(data, size);
	return 0;
}
