/* SPDX-License-Identifier: MIT */
/*
 * Cursor arithmetic for SMC ring buffers (RMBEs and send buffers).
 *
 * A cursor is a position in a ring of `size` bytes plus a 16-bit count of how
 * often the ring wrapped (RFC 7609 A.4, Linux smc_cdc.h).  Everything here is a
 * pure function of its arguments so it can be tested exhaustively: no state,
 * no I/O, no allocation.  Ring sizes are any value in 1..2^31 (SMC-R uses
 * 16 KiB << n, the same-host transport may use others).
 */
#ifndef SMCR_RING_H
#define SMCR_RING_H

#include <stdbool.h>
#include <stdint.h>

struct smcr_curs {
	uint16_t wrap;  /* number of times the ring wrapped, modulo 2^16 */
	uint32_t count; /* byte offset inside the ring, < size */
};

/* Largest ring the cursor functions accept. */
#define SMCR_RING_MAX_SIZE (UINT32_C(1) << 31)

/* true if `size` is a usable ring size and `c.count` lies inside it. */
bool smcr_curs_valid(struct smcr_curs c, uint32_t size);

/*
 * `c` moved forward by `n` bytes (n <= size), wrapping at `size`.
 * Precondition: smcr_curs_valid(c, size).
 */
struct smcr_curs smcr_curs_advance(struct smcr_curs c, uint32_t n, uint32_t size);

/*
 * Bytes from `from` forward to `to`.  Returns false if `to` is not between 0 and
 * `size` bytes ahead of `from` (behind it, more than one ring ahead, or either
 * cursor outside the ring): such a pair cannot occur between the cursors of a
 * well-behaved peer.  On success *dist is in 0..size.
 */
bool smcr_curs_diff(struct smcr_curs from, struct smcr_curs to, uint32_t size,
		    uint32_t *dist);

/*
 * Order of two cursors of the same ring: <0 if a is before b, 0 if equal, >0 if
 * after.  Wrap counts compare modulo 2^16 (serial-number arithmetic), so the
 * result is meaningful while the two are less than 2^15 wraps apart.
 */
int smcr_curs_cmp(struct smcr_curs a, struct smcr_curs b);

/*
 * Split `len` bytes starting at offset `pos` of a ring of `size` bytes into the
 * part up to the end of the ring (*first) and the part continuing at offset 0
 * (*second).  Precondition: pos < size, len <= size.  This is where two RDMA
 * writes (or two memcpy calls) are needed instead of one.
 */
void smcr_ring_split(uint32_t pos, uint32_t len, uint32_t size, uint32_t *first,
		     uint32_t *second);

#endif /* SMCR_RING_H */
