/* SPDX-License-Identifier: MIT */
/*
 * Byte-order helpers for the SMC wire formats.
 *
 * Every SMC-R integer on the wire is big-endian except two SMC-Rv2 LLC fields
 * that x86 Linux writes little-endian (see llc.h), so both families are here.
 * All accessors work on unaligned byte pointers and never assume host order:
 * the encoders and decoders in clc.c, llc.c and cdc.c use nothing else.
 */
#ifndef SMCR_WIRE_H
#define SMCR_WIRE_H

#include <stdint.h>

/* Outcome of every stream or message decoder in the engine. */
enum smcr_wire_status {
	SMCR_WIRE_NEED_MORE = 0, /* a valid prefix: give me more bytes */
	SMCR_WIRE_OK = 1,        /* one complete, valid message */
	SMCR_WIRE_INVALID = 2,   /* never valid, whatever follows */
};

static inline uint8_t smcr_get8(const uint8_t *p) { return p[0]; }

static inline uint16_t smcr_get_be16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline uint32_t smcr_get_be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t smcr_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t smcr_get_be64(const uint8_t *p)
{
	return (uint64_t)smcr_get_be32(p) << 32 | smcr_get_be32(p + 4);
}

static inline uint16_t smcr_get_le16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[1] << 8 | p[0]);
}

static inline void smcr_put8(uint8_t *p, uint8_t v) { p[0] = v; }

static inline void smcr_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void smcr_put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void smcr_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void smcr_put_be64(uint8_t *p, uint64_t v)
{
	smcr_put_be32(p, (uint32_t)(v >> 32));
	smcr_put_be32(p + 4, (uint32_t)v);
}

static inline void smcr_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

#endif /* SMCR_WIRE_H */
