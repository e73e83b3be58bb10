/* SPDX-License-Identifier: MIT */
/*
 * LLC (Link Layer Control) messages exchanged as SENDs on a link's QP
 * (RFC 7609 A.3; Linux net/smc/smc_llc.c).
 *
 * SMC-Rv1 messages are 44 bytes: byte 0 type, byte 1 length 44.  In an SMC-Rv2
 * link group every message (except ADD LINK CONT, which v2 does not use) has
 * byte 0 = 0x20 | type and a 16-bit length in bytes 1-2 that x86 Linux writes
 * little-endian (the kernel stores a host-order u16; see protocol.md
 * §5.1, §13).  We send little-endian like x86 Linux and accept both orders on
 * receipt.  Only ADD LINK (with its rkey list), REQ ADD LINK and DELETE RKEY
 * may be longer than 44 bytes, up to 8192.
 */
#ifndef SMCR_LLC_H
#define SMCR_LLC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smcr/wire.h"

#define SMCR_LLC_MSG_LEN 44       /* every v1 message; the v2 minimum */
#define SMCR_LLC_V2_MAX_LEN 8192  /* SMC_WR_BUF_V2_SIZE */
#define SMCR_LLC_GID_LEN 16
#define SMCR_LLC_MAC_LEN 6

enum smcr_llc_type {
	SMCR_LLC_CONFIRM_LINK = 0x01,
	SMCR_LLC_ADD_LINK = 0x02,
	SMCR_LLC_ADD_LINK_CONT = 0x03,
	SMCR_LLC_DELETE_LINK = 0x04,
	SMCR_LLC_REQ_ADD_LINK = 0x05, /* v2 only */
	SMCR_LLC_CONFIRM_RKEY = 0x06,
	SMCR_LLC_TEST_LINK = 0x07,
	SMCR_LLC_CONFIRM_RKEY_CONT = 0x08,
	SMCR_LLC_DELETE_RKEY = 0x09,
};

/* Byte 3 flags. */
#define SMCR_LLC_FLAG_RESP 0x80
#define SMCR_LLC_FLAG_NO_RMBE_EYEC 0x03   /* CONFIRM LINK: Linux requires one of them */
#define SMCR_LLC_FLAG_ADD_LINK_REJ 0x40   /* ADD LINK response: rejected */
#define SMCR_LLC_FLAG_DEL_LINK_ALL 0x40   /* DELETE LINK: terminate the link group */
#define SMCR_LLC_FLAG_DEL_LINK_ORDERLY 0x20
#define SMCR_LLC_FLAG_RKEY_NEG 0x20       /* CONFIRM/DELETE RKEY response: failed */
#define SMCR_LLC_FLAG_RKEY_RETRY 0x10     /* CONFIRM RKEY response: try again */

/* ADD LINK reject reason (v1 only: the v2 length overwrites the nibble). */
#define SMCR_LLC_REJ_RSN_NO_ALT_PATH 1

/* DELETE LINK reasons (BE32 at offset 5). */
#define SMCR_LLC_DEL_LOST_PATH 0x00010000u
#define SMCR_LLC_DEL_OP_INIT_TERM 0x00020000u
#define SMCR_LLC_DEL_PROG_INIT_TERM 0x00030000u
#define SMCR_LLC_DEL_PROT_VIOL 0x00040000u
#define SMCR_LLC_DEL_NO_ASYM_NEEDED 0x00050000u
#define SMCR_LLC_DEL_NOLNK 0x00100000u
#define SMCR_LLC_DEL_NOLGR 0x00200000u

/* Limits of the host structs (larger counts are rejected as hostile). */
#define SMCR_LLC_MAX_ADD_LINK_RKEYS 255 /* one per RMB; Linux: SMC_RMBS_PER_LGR_MAX */
#define SMCR_LLC_MAX_REQ_GIDS 8
#define SMCR_LLC_DEL_RKEY_V1_MAX 8
#define SMCR_LLC_DEL_RKEY_V2_MAX 255

struct smcr_llc_hdr {
	uint8_t type;     /* enum smcr_llc_type, without the version nibble */
	uint8_t version;  /* 1 or 2 */
	uint16_t length;  /* whole message; 44 for v1 */
	uint8_t flags;    /* SMCR_LLC_FLAG_* */
	uint8_t add_link_rej_rsn; /* v1 ADD LINK only */
	bool length_be;   /* v2: length (and ADD LINK rkey count) big-endian on the wire */
};

struct smcr_llc_confirm_link {
	uint8_t mac[SMCR_LLC_MAC_LEN];
	uint8_t gid[SMCR_LLC_GID_LEN];
	uint32_t qpn;       /* 24 bits */
	uint8_t link_num;
	uint32_t link_uid;
	uint8_t max_links;
	uint8_t max_conns;  /* v2.1; 0 otherwise */
};

struct smcr_llc_rkey_triple {
	uint32_t rkey;      /* on the existing link */
	uint32_t rkey_new;  /* on the new link */
	uint64_t vaddr_new;
};

struct smcr_llc_add_link {
	uint8_t mac[SMCR_LLC_MAC_LEN];
	uint8_t gid[SMCR_LLC_GID_LEN];
	uint32_t qpn;       /* 24 bits, of the new link */
	uint8_t link_num;
	uint8_t qp_mtu;     /* 4 bits, IB MTU enum */
	uint32_t psn;       /* 24 bits */
	/* v2 extension (request and positive response of a v2 lgr) */
	bool has_v2_ext;
	bool v2_direct;
	uint8_t target_gid[SMCR_LLC_GID_LEN];
	uint16_t num_rkeys;
	struct smcr_llc_rkey_triple rkeys[SMCR_LLC_MAX_ADD_LINK_RKEYS];
};

struct smcr_llc_add_link_cont {
	uint8_t link_num;
	uint8_t num_rkeys;  /* still to send, counting this message */
	struct smcr_llc_rkey_triple rt[2];
};

struct smcr_llc_delete_link {
	uint8_t link_num;
	uint32_t reason;    /* SMCR_LLC_DEL_* */
};

struct smcr_llc_req_add_link {
	uint8_t gid_cnt;
	uint8_t gid[SMCR_LLC_MAX_REQ_GIDS][SMCR_LLC_GID_LEN];
};

struct smcr_llc_rtoken {
	uint8_t link_id;
	uint32_t rkey;
	uint64_t vaddr;
};

struct smcr_llc_confirm_rkey {
	uint8_t num_rkeys;  /* additional rtokens, 0..2; > 2: answer NEG|RETRY as Linux does */
	uint32_t rkey;      /* on the link carrying the message */
	uint64_t vaddr;
	struct smcr_llc_rtoken rt[2];
};

struct smcr_llc_confirm_rkey_cont {
	uint8_t num_rkeys;
	struct smcr_llc_rtoken rt[3];
};

struct smcr_llc_delete_rkey {
	uint8_t num_rkeys;  /* v1: only the first 8 are in the message (Linux clamps too) */
	uint8_t err_mask;   /* v1: bit (7-i) = rkey i unknown; v2: number unknown */
	uint32_t rkeys[SMCR_LLC_DEL_RKEY_V2_MAX];
};

struct smcr_llc_test_link {
	uint8_t user_data[16];
};

struct smcr_llc_msg {
	struct smcr_llc_hdr hdr;
	union {
		struct smcr_llc_confirm_link confirm_link;
		struct smcr_llc_add_link add_link;
		struct smcr_llc_add_link_cont add_link_cont;
		struct smcr_llc_delete_link delete_link;
		struct smcr_llc_req_add_link req_add_link;
		struct smcr_llc_confirm_rkey confirm_rkey;
		struct smcr_llc_confirm_rkey_cont confirm_rkey_cont;
		struct smcr_llc_delete_rkey delete_rkey;
		struct smcr_llc_test_link test_link;
	};
};

enum smcr_llc_err {
	SMCR_LLC_ERR_NONE = 0,
	SMCR_LLC_ERR_SHORT,      /* fewer bytes than the minimum / the stated length */
	SMCR_LLC_ERR_TYPE,       /* unknown type, or a type not valid in this version */
	SMCR_LLC_ERR_VERSION,    /* version nibble neither 0 (v1) nor 2 */
	SMCR_LLC_ERR_LENGTH,     /* length field impossible */
	SMCR_LLC_ERR_COUNT,      /* a count exceeds the message or our limits */
	SMCR_LLC_ERR_BUFFER,     /* encode: output buffer too small */
	SMCR_LLC_ERR_COUNT_
};

const char *smcr_llc_err_str(enum smcr_llc_err err);
const char *smcr_llc_type_str(uint8_t type);

/*
 * Decode one received LLC message of `len` bytes (the completion length).
 * Returns SMCR_WIRE_OK or SMCR_WIRE_INVALID (*err says why); reads at most
 * `len` bytes.  Unknown types are INVALID/SMCR_LLC_ERR_TYPE: Linux drops them
 * silently and so should the engine.
 */
enum smcr_wire_status smcr_llc_decode(const void *buf, size_t len, struct smcr_llc_msg *msg,
				      enum smcr_llc_err *err);

/*
 * Encode `msg` into buf[0..cap).  The length field is computed from the content
 * (hdr.length is ignored); hdr.version selects the v1 or v2 header.  Returns the
 * number of bytes written, or 0 with *err set.
 */
size_t smcr_llc_encode(const struct smcr_llc_msg *msg, void *buf, size_t cap,
		       enum smcr_llc_err *err);

/*
 * The response Linux sends to a request of `len` (>= 44) bytes, into out[44]:
 * the request's first 44 bytes with flags |= RESP | `extra`; a v2 length of
 * 44 in the byte order the request used (an 88-byte ADD LINK v2 is rejected
 * with `22 2c 00 c0`); a v1 ADD LINK reject carries reason 1 "no alternate
 * path" in byte 2; a DELETE RKEY answer says every rkey was known (byte 5 =
 * 0, the v2 list zeroed).  See testdata/kernel-smcr's llc-*-resp.bin.
 */
void smcr_llc_answer(const uint8_t *req, size_t len, uint8_t extra,
		     uint8_t out[SMCR_LLC_MSG_LEN]);

/*
 * The head of a v2 ADD LINK of `len` bytes of which only the first `kept`
 * are at hand (an answer with more rkey triples than the caller keeps: a
 * server needs only the new link's parameters), decoded as if it carried no
 * triple: num_rkeys 0, hdr.length that of the head (72).  Reads at most
 * `kept` bytes.  SMCR_WIRE_OK, or SMCR_WIRE_INVALID (*err) for anything but
 * a v2 ADD LINK cut after its 72-byte head (kept < len).
 */
enum smcr_wire_status smcr_llc_decode_add_link_head(const void *buf, size_t kept, size_t len,
						    struct smcr_llc_msg *msg,
						    enum smcr_llc_err *err);

/*
 * A v2 ADD LINK for a new link as Linux's smc_llc_send_add_link() fills it:
 * the server's request (flags 0, the new link's MTU) or the client's positive
 * answer (flags RESP, the smaller of both MTUs: pass it), the new link's MAC,
 * GID, QP number, initial PSN and link number, and the v2 extension with
 * v2_direct and the new GID as target; no rkey triple yet (the caller adds
 * one per RMB: {rkey on the link carrying the message, rkey and address on
 * the new link}).  length_be: the byte order of length and rkey count.
 */
void smcr_llc_add_link_v2(struct smcr_llc_msg *m, bool response, bool length_be,
			  const uint8_t mac[SMCR_LLC_MAC_LEN], const uint8_t gid[SMCR_LLC_GID_LEN],
			  uint32_t qpn, uint32_t psn, uint8_t link_num, uint8_t qp_mtu,
			  bool v2_direct);

/* Wire length `msg` will encode to (0 if its counts are out of range). */
size_t smcr_llc_encoded_len(const struct smcr_llc_msg *msg);

#endif /* SMCR_LLC_H */
