// SPDX-License-Identifier: MIT
/* CDC messages: host<->wire conversion and cursor validation; see cdc.h. */
#include "smcr/cdc.h"

#include <string.h>

/* The layout of RFC 7609 A.4 / Linux struct smc_cdc_msg. */
_Static_assert(SMCR_CDC_MSG_LEN == 44, "CDC is one 44-byte SEND (SMC_WR_TX_SIZE)");
_Static_assert(SMCR_CDC_OFF_PROD + SMCR_CDC_CURS_LEN == SMCR_CDC_OFF_CONS,
	       "consumer cursor follows producer cursor");
_Static_assert(SMCR_CDC_OFF_CONS + SMCR_CDC_CURS_LEN == SMCR_CDC_OFF_PROD_FLAGS,
	       "flags follow the cursors");
_Static_assert(SMCR_CDC_OFF_CONN_FLAGS == 25, "18 reserved bytes end the message");
_Static_assert(SMCR_CDC_OFF_SMCR_FLAGS == SMCR_CDC_OFF_CONN_FLAGS + 1, "smcr's: the first of them");

static const char *const cdc_err_names[SMCR_CDC_ERR_COUNT_] = {
	[SMCR_CDC_ERR_NONE] = "ok",
	[SMCR_CDC_ERR_SHORT] = "message shorter than 44 bytes",
	[SMCR_CDC_ERR_TYPE] = "type byte is not 0xFE",
	[SMCR_CDC_ERR_LENGTH] = "length byte is not 44",
	[SMCR_CDC_ERR_TOKEN] = "alert token is 0",
	[SMCR_CDC_ERR_CURS_RANGE] = "cursor offset outside the ring",
	[SMCR_CDC_ERR_CURS_BACKWARD] = "cursor moved backwards",
	[SMCR_CDC_ERR_CURS_AHEAD] = "cursor ahead of what the ring allows",
};

const char *smcr_cdc_err_str(enum smcr_cdc_err err)
{
	if ((unsigned)err >= SMCR_CDC_ERR_COUNT_)
		return "unknown CDC error";
	return cdc_err_names[err];
}

static void put_curs(uint8_t *p, struct smcr_curs c)
{
	smcr_put_be16(p, 0); /* reserved */
	smcr_put_be16(p + 2, c.wrap);
	smcr_put_be32(p + 4, c.count);
}

static struct smcr_curs get_curs(const uint8_t *p)
{
	/* The two reserved bytes are ignored on receipt (RFC 7609 A.2 rules). */
	return (struct smcr_curs){ .wrap = smcr_get_be16(p + 2),
				   .count = smcr_get_be32(p + 4) };
}

void smcr_cdc_encode(const struct smcr_cdc_msg *msg, uint8_t out[SMCR_CDC_MSG_LEN])
{
	memset(out, 0, SMCR_CDC_MSG_LEN);
	out[0] = SMCR_CDC_MSG_TYPE;
	out[1] = SMCR_CDC_MSG_LEN;
	smcr_put_be16(out + SMCR_CDC_OFF_SEQNO, msg->seqno);
	smcr_put_be32(out + SMCR_CDC_OFF_TOKEN, msg->token);
	put_curs(out + SMCR_CDC_OFF_PROD, msg->prod);
	put_curs(out + SMCR_CDC_OFF_CONS, msg->cons);
	out[SMCR_CDC_OFF_PROD_FLAGS] = msg->prod_flags;
	out[SMCR_CDC_OFF_CONN_FLAGS] = msg->conn_flags;
	out[SMCR_CDC_OFF_SMCR_FLAGS] = msg->smcr_flags;
}

static enum smcr_wire_status cdc_invalid(enum smcr_cdc_err *err, enum smcr_cdc_err why)
{
	*err = why;
	return SMCR_WIRE_INVALID;
}

enum smcr_wire_status smcr_cdc_decode(const void *buf, size_t len,
				      struct smcr_cdc_msg *msg, enum smcr_cdc_err *err)
{
	const uint8_t *p = buf;

	if (len < SMCR_CDC_MSG_LEN)
		return cdc_invalid(err, SMCR_CDC_ERR_SHORT);
	if (p[0] != SMCR_CDC_MSG_TYPE)
		return cdc_invalid(err, SMCR_CDC_ERR_TYPE);
	if (p[1] != SMCR_CDC_MSG_LEN)
		return cdc_invalid(err, SMCR_CDC_ERR_LENGTH);

	msg->seqno = smcr_get_be16(p + SMCR_CDC_OFF_SEQNO);
	msg->token = smcr_get_be32(p + SMCR_CDC_OFF_TOKEN);
	msg->prod = get_curs(p + SMCR_CDC_OFF_PROD);
	msg->cons = get_curs(p + SMCR_CDC_OFF_CONS);
	msg->prod_flags = p[SMCR_CDC_OFF_PROD_FLAGS];
	msg->conn_flags = p[SMCR_CDC_OFF_CONN_FLAGS];
	msg->smcr_flags = p[SMCR_CDC_OFF_SMCR_FLAGS];
	if (msg->token == 0)
		return cdc_invalid(err, SMCR_CDC_ERR_TOKEN);
	*err = SMCR_CDC_ERR_NONE;
	return SMCR_WIRE_OK;
}

enum smcr_cdc_err smcr_cdc_curs_check(struct smcr_curs prev, struct smcr_curs next,
				      struct smcr_curs limit, uint32_t ring_size)
{
	uint32_t advance, room;

	if (!smcr_curs_valid(next, ring_size) || !smcr_curs_valid(prev, ring_size) ||
	    !smcr_curs_valid(limit, ring_size))
		return SMCR_CDC_ERR_CURS_RANGE;
	if (!smcr_curs_diff(prev, limit, ring_size, &room))
		return SMCR_CDC_ERR_CURS_AHEAD; /* caller's limit is not reachable */
	if (!smcr_curs_diff(prev, next, ring_size, &advance)) {
		/* Not within one ring ahead: behind prev if it compares lower. */
		return smcr_curs_cmp(next, prev) < 0 ? SMCR_CDC_ERR_CURS_BACKWARD
						     : SMCR_CDC_ERR_CURS_AHEAD;
	}
	if (advance > room)
		return SMCR_CDC_ERR_CURS_AHEAD;
	return SMCR_CDC_ERR_NONE;
}

enum smcr_cdc_err smcr_cdc_curs_check_ring(struct smcr_curs prev, struct smcr_curs next,
					   uint32_t ring_size)
{
	if (!smcr_curs_valid(prev, ring_size))
		return SMCR_CDC_ERR_CURS_RANGE;
	return smcr_cdc_curs_check(prev, next, smcr_curs_advance(prev, ring_size, ring_size),
				   ring_size);
}

struct smcr_curs smcr_cdc_failover_start(struct smcr_curs fin, struct smcr_curs cons,
					 struct smcr_curs prod, uint32_t ring_size, uint32_t *len)
{
	struct smcr_curs start = cons;
	uint32_t a, b;

	if (smcr_curs_valid(fin, ring_size) && smcr_curs_diff(cons, fin, ring_size, &a) &&
	    smcr_curs_diff(fin, prod, ring_size, &b) && smcr_curs_diff(cons, prod, ring_size, len) &&
	    a + b == *len)
		start = fin;
	if (!smcr_curs_diff(start, prod, ring_size, len))
		*len = 0; /* cons beyond prod: rx.c never accepts that */
	return start;
}

void smcr_cdc_encode_validation(uint16_t seqno, uint32_t token, uint8_t out[SMCR_CDC_MSG_LEN])
{
	struct smcr_cdc_msg m = {
		.seqno = seqno,
		.token = token,
		.prod_flags = SMCR_CDC_PROD_FAILOVER,
	};

	smcr_cdc_encode(&m, out);
}
