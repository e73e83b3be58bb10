/* SPDX-License-Identifier: MIT */
/*
 * CDC (Connection Data Control) messages: the 44-byte SENDs that move the
 * producer and consumer cursors of one connection (RFC 7609 A.4; Linux
 * net/smc/smc_cdc.h).  smcr_cdc_encode()/smcr_cdc_decode() are the only places
 * where a CDC changes between host and wire form, and smcr_cdc_curs_check() is
 * the gate every cursor from a peer passes before the engine uses it.
 */
#ifndef SMCR_CDC_H
#define SMCR_CDC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smcr/ring.h"
#include "smcr/wire.h"

#define SMCR_CDC_MSG_TYPE 0xFE
#define SMCR_CDC_MSG_LEN 44

/* Wire offsets (the _Static_asserts in cdc.c pin the layout). */
#define SMCR_CDC_OFF_SEQNO 2
#define SMCR_CDC_OFF_TOKEN 4
#define SMCR_CDC_OFF_PROD 8
#define SMCR_CDC_OFF_CONS 16
#define SMCR_CDC_OFF_PROD_FLAGS 24
#define SMCR_CDC_OFF_CONN_FLAGS 25
#define SMCR_CDC_OFF_SMCR_FLAGS 26 /* reserved in RFC 7609 and Linux: smcr's own */
#define SMCR_CDC_CURS_LEN 8 /* 2 reserved, 2 wrap, 4 count */

/* Producer flags (byte 24). */
#define SMCR_CDC_PROD_WRITE_BLOCKED 0x80 /* sender has more data than we had room for */
#define SMCR_CDC_PROD_URG_PENDING 0x40
#define SMCR_CDC_PROD_URG_PRESENT 0x20
#define SMCR_CDC_PROD_CONS_UPD_REQ 0x10 /* please send a consumer-cursor update */
#define SMCR_CDC_PROD_FAILOVER 0x08     /* failover validation: no cursor content */

/* Connection-state flags (byte 25); sticky once sent. */
#define SMCR_CDC_CONN_DONE_WRITING 0x80 /* peer did shutdown(SHUT_WR) */
#define SMCR_CDC_CONN_CLOSED 0x40
#define SMCR_CDC_CONN_ABORT 0x20

/*
 * smcr's flags (byte 26, reserved elsewhere): sent only to a peer that said
 * in the CLC handshake that it is smcr and understands them (verbs.c); a
 * receiver acts on them only from such a peer.
 */
#define SMCR_CDC_SMCR_TCP_TAIL 0x01 /* the rest of the sender's stream is on TCP (tcp_tail.c) */

/* One CDC message in host form. */
struct smcr_cdc_msg {
	uint16_t seqno;        /* per connection and direction, first = 1, wraps */
	uint32_t token;        /* the receiver's alert token, never 0 */
	struct smcr_curs prod; /* sender's producer cursor in the receiver's RMBE */
	struct smcr_curs cons; /* sender's consumer cursor of its own RMBE */
	uint8_t prod_flags;    /* SMCR_CDC_PROD_* */
	uint8_t conn_flags;    /* SMCR_CDC_CONN_* */
	uint8_t smcr_flags;    /* SMCR_CDC_SMCR_* */
};

enum smcr_cdc_err {
	SMCR_CDC_ERR_NONE = 0,
	SMCR_CDC_ERR_SHORT,         /* fewer than 44 bytes */
	SMCR_CDC_ERR_TYPE,          /* byte 0 is not 0xFE */
	SMCR_CDC_ERR_LENGTH,        /* byte 1 is not 44 */
	SMCR_CDC_ERR_TOKEN,         /* alert token 0 */
	SMCR_CDC_ERR_CURS_RANGE,    /* cursor offset outside the ring */
	SMCR_CDC_ERR_CURS_BACKWARD, /* cursor behind the previous one */
	SMCR_CDC_ERR_CURS_AHEAD,    /* cursor beyond what the ring allows */
	SMCR_CDC_ERR_COUNT_
};

/* Short human-readable reason, never NULL. */
const char *smcr_cdc_err_str(enum smcr_cdc_err err);

/* Host to wire: writes exactly SMCR_CDC_MSG_LEN bytes, reserved bytes zero. */
void smcr_cdc_encode(const struct smcr_cdc_msg *msg, uint8_t out[SMCR_CDC_MSG_LEN]);

/*
 * Wire to host.  `len` is the received message size (the completion length);
 * bytes beyond 44 are ignored, as Linux does (Linux also takes completions of
 * 26..43 bytes; every sender sends 44, so shorter ones are INVALID here).  Returns SMCR_WIRE_OK or
 * SMCR_WIRE_INVALID with *err set; never reads more than min(len, 44) bytes.
 * Cursor plausibility needs connection state: see smcr_cdc_curs_check().
 */
enum smcr_wire_status smcr_cdc_decode(const void *buf, size_t len,
				      struct smcr_cdc_msg *msg, enum smcr_cdc_err *err);

/*
 * Validate a cursor received from the peer against the ring it refers to.
 * `next` must lie inside the ring, must not be behind `prev` (the last cursor
 * accepted for the same field) and must not be beyond `limit`, where `limit` is
 * at most one full ring ahead of `prev`:
 *  - producer cursor into our RMBE: limit = our consumer cursor advanced by
 *    the ring size (the peer cannot have written over unread data);
 *  - consumer cursor of the peer's RMBE: limit = our own producer cursor
 *    (the peer cannot have consumed what we did not write).
 * Returns SMCR_CDC_ERR_NONE if plausible.
 */
enum smcr_cdc_err smcr_cdc_curs_check(struct smcr_curs prev, struct smcr_curs next,
				      struct smcr_curs limit, uint32_t ring_size);

/* The same check with no tighter limit than "one ring ahead of prev". */
enum smcr_cdc_err smcr_cdc_curs_check_ring(struct smcr_curs prev, struct smcr_curs next,
					   uint32_t ring_size);

/*
 * Failover (the kernel's smc_switch_cursor): the connection moved to another
 * link, and whatever went over the old one after our last CDC known
 * delivered may be lost.  The peer surely has what that CDC (`fin`, its
 * producer cursor) announced and what it told us it consumed (`cons`); we
 * wrote up to `prod`.  Returns where resending starts, the later of fin and
 * cons (cons if fin is not between cons and prod: none delivered yet, or
 * the peer read past it), and *len, the bytes from there to prod.
 */
struct smcr_curs smcr_cdc_failover_start(struct smcr_curs fin, struct smcr_curs cons,
					 struct smcr_curs prod, uint32_t ring_size, uint32_t *len);

/*
 * The failover validation CDC (the kernel's smcr_cdc_msg_send_validation):
 * type, length, `seqno` (that of our last CDC known delivered), `token`, the
 * producer flag SMCR_CDC_PROD_FAILOVER, and nothing else (cursors zero).
 */
void smcr_cdc_encode_validation(uint16_t seqno, uint32_t token, uint8_t out[SMCR_CDC_MSG_LEN]);

/*
 * The receiver's side (the kernel's smc_cdc_msg_validate): the peer says its
 * last CDC that reached us is `seqno`; if we never saw it (it is after the
 * last one we took, `last`), something was lost and the connection must be
 * aborted.  True if it is fine.
 */
static inline bool smcr_cdc_validation_ok(uint16_t last, uint16_t seqno)
{
	return (int16_t)(uint16_t)(last - seqno) >= 0;
}

/* Sequence numbers: true if `a` is older than `b` (16-bit serial arithmetic). */
static inline bool smcr_cdc_seq_before(uint16_t a, uint16_t b)
{
	return (int16_t)(uint16_t)(a - b) < 0;
}

#endif /* SMCR_CDC_H */
