// SPDX-License-Identifier: MIT
/* Cursor arithmetic for SMC ring buffers; see ring.h. */
#include "smcr/ring.h"

bool smcr_curs_valid(struct smcr_curs c, uint32_t size)
{
	return size > 0 && size <= SMCR_RING_MAX_SIZE && c.count < size;
}

struct smcr_curs smcr_curs_advance(struct smcr_curs c, uint32_t n, uint32_t size)
{
	/* 64-bit sum: count + n cannot overflow even for the largest ring. */
	uint64_t pos = (uint64_t)c.count + n;

	if (pos >= size) {
		pos -= size;
		c.wrap++;
	}
	c.count = (uint32_t)pos;
	return c;
}

bool smcr_curs_diff(struct smcr_curs from, struct smcr_curs to, uint32_t size,
		    uint32_t *dist)
{
	if (!smcr_curs_valid(from, size) || !smcr_curs_valid(to, size))
		return false;
	if (to.wrap == from.wrap) {
		if (to.count < from.count)
			return false;
		*dist = to.count - from.count;
		return true;
	}
	/* One wrap ahead: at most a full ring, so `to` may not pass `from`. */
	if (to.wrap == (uint16_t)(from.wrap + 1) && to.count <= from.count) {
		*dist = size - from.count + to.count;
		return true;
	}
	return false;
}

int smcr_curs_cmp(struct smcr_curs a, struct smcr_curs b)
{
	int16_t wraps = (int16_t)(uint16_t)(a.wrap - b.wrap);

	if (wraps != 0)
		return wraps < 0 ? -1 : 1;
	if (a.count != b.count)
		return a.count < b.count ? -1 : 1;
	return 0;
}

void smcr_ring_split(uint32_t pos, uint32_t len, uint32_t size, uint32_t *first,
		     uint32_t *second)
{
	uint32_t to_end = size - pos;

	*first = len < to_end ? len : to_end;
	*second = len - *first;
}
