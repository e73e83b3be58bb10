/* SPDX-License-Identifier: MIT */
/*
 * CLC (Connection Layer Control) messages: the SMC handshake carried as the
 * first bytes of the TCP stream (RFC 7609 A.2; Linux net/smc/smc_clc.[ch]).
 * Proposal, Accept, Confirm and Decline, versions 1 and 2, SMC-R and SMC-D
 * forms.  Wire layouts: docs/protocol.md §2.
 *
 * Stream decoding: smcr_clc_decode() looks at the bytes received so far and
 * answers NEED_MORE (with the total length once the header is known), OK (one
 * message of *len bytes; the caller consumes exactly that much) or INVALID (with
 * a reason).  It never reads beyond `avail`.
 *
 * The checks are Linux's (smc_clc_msg_hdr_valid and friends) with two
 * deliberate tightenings, both of which every Linux sender satisfies: a
 * Decline's trailer is checked (Linux skips it), and a v2 Accept/Confirm must
 * have exactly the length its flags imply (Linux only wants a minimum).
 * Oversized messages are INVALID rather than drained: the caller then treats
 * the connection as failed (Linux: EPROTO, no fallback).
 */
#ifndef SMCR_CLC_H
#define SMCR_CLC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smcr/decline.h"
#include "smcr/wire.h"

/* "SMCR" and "SMCD" in EBCDIC, at the start and end of every message. */
#define SMCR_CLC_EYECATCHER_R 0xE2D4C3D9u
#define SMCR_CLC_EYECATCHER_D 0xE2D4C3C4u

enum smcr_clc_type {
	SMCR_CLC_PROPOSAL = 1,
	SMCR_CLC_ACCEPT = 2,
	SMCR_CLC_CONFIRM = 3,
	SMCR_CLC_DECLINE = 4,
};

/* typev1 / typev2 values of header byte 7. */
enum smcr_clc_path {
	SMCR_CLC_PATH_R = 0,
	SMCR_CLC_PATH_D = 1,
	SMCR_CLC_PATH_NONE = 2,
	SMCR_CLC_PATH_BOTH = 3,
};

#define SMCR_CLC_V1 1
#define SMCR_CLC_V2 2

/* Sizes (bytes). */
#define SMCR_CLC_HDR_LEN 8
#define SMCR_CLC_TRL_LEN 4
#define SMCR_CLC_PEER_ID_LEN 8
#define SMCR_CLC_GID_LEN 16
#define SMCR_CLC_MAC_LEN 6
#define SMCR_CLC_EID_LEN 32
#define SMCR_CLC_HOSTNAME_LEN 32
#define SMCR_CLC_PROP_BASE_LEN 40      /* header + peer id + GID + MAC + iparea_offset */
#define SMCR_CLC_PROP_SMCD_AREA_LEN 40 /* ISM GID, CHID, v2_ext_offset, vendor, reserved */
#define SMCR_CLC_PROP_PREFIX_LEN 8     /* IPv4 prefix, length, reserved, IPv6 count */
#define SMCR_CLC_IPV6_PREFIX_LEN 17
#define SMCR_CLC_V2_EXT_LEN 40         /* before the EIDs */
#define SMCR_CLC_SMCD_V2_EXT_LEN 48    /* SEID + reserved, before the GID/CHID list */
#define SMCR_CLC_GID_CHID_LEN 10
#define SMCR_CLC_PROP_MAX_LEN 652      /* Linux: sizeof(struct smc_clc_msg_proposal_area) */
#define SMCR_CLC_ACC_R_V1_LEN 68
#define SMCR_CLC_ACC_D_V1_LEN 48
#define SMCR_CLC_ACC_R_V2_LEN 108      /* without first-contact extension */
#define SMCR_CLC_ACC_D_V2_LEN 78
#define SMCR_CLC_FCE_LEN 52            /* v2.1 form; SMC-R pads release 0 to this too */
#define SMCR_CLC_FCE_V20_SMCD_LEN 36   /* SMC-D first-contact extension, release 0 */
#define SMCR_CLC_GID_LIST_HDR_LEN 4
#define SMCR_CLC_DECL_V1_LEN 28
#define SMCR_CLC_DECL_V2_LEN 44

/* Limits (Linux's; larger counts are rejected). */
#define SMCR_CLC_MAX_IPV6_PREFIXES 8
#define SMCR_CLC_MAX_EIDS 8
#define SMCR_CLC_MAX_ISM_GIDS 8
#define SMCR_CLC_MAX_CONFIRM_GIDS 2
#define SMCR_CLC_ACC_MAX_LEN                                                              \
	(SMCR_CLC_ACC_R_V2_LEN + SMCR_CLC_FCE_LEN + SMCR_CLC_GID_LIST_HDR_LEN +                \
	 SMCR_CLC_MAX_CONFIRM_GIDS * SMCR_CLC_GID_LEN)
#define SMCR_CLC_MAX_LEN SMCR_CLC_PROP_MAX_LEN /* a receive buffer of this size always fits */

/* Decline reason codes and their names: smcr/decline.h (include/, shared with smcr-stat). */

/* OS types in Decline v2 and the first-contact extension. */
/* smcr's word in an SMC-R v2 Accept/Confirm (smcr_clc_accept.smcr_features). */
#define SMCR_CLC_SMCR_MAGIC 0x736d6372u /* "smcr" */
#define SMCR_CLC_SMCR_TCP_TAIL 0x1u     /* the rest of a stream on TCP (tcp_tail.c) */

#define SMCR_CLC_OS_ZOS 1
#define SMCR_CLC_OS_LINUX 2
#define SMCR_CLC_OS_AIX 3

/* Header in host form. */
struct smcr_clc_hdr {
	uint8_t type;      /* enum smcr_clc_type */
	uint16_t length;   /* decode: from the wire; encode: ignored (computed) */
	uint8_t version;   /* 1..15; 2 selects the SMCv2 layouts */
	bool flag;         /* bit 3: first contact (Accept/Confirm), out of sync (Decline) */
	uint8_t typev2;    /* Proposal, version >= 2: SMCv2 offer (enum smcr_clc_path) */
	uint8_t typev1;    /* Proposal: SMCv1 offer; Accept/Confirm: R or D */
	bool smcd_eyecatcher; /* decode: the header said "SMCD" */
};

struct smcr_clc_ipv6_prefix {
	uint8_t prefix[16];
	uint8_t prefix_len;
};

struct smcr_clc_ism_gid_chid {
	uint64_t gid;
	uint16_t chid;
};

struct smcr_clc_proposal {
	uint8_t peer_id[SMCR_CLC_PEER_ID_LEN];
	uint8_t gid[SMCR_CLC_GID_LEN];  /* SMC-Rv1: RoCE v1 GID */
	uint8_t mac[SMCR_CLC_MAC_LEN];
	/* SMC-D/v2 area (offset 40): always in version >= 2 ("Linux form"); in a
	 * version-1 Proposal only if smcd_area is set (iparea_offset 40). */
	bool smcd_area;
	uint64_t ism_gid;
	uint16_t ism_chid;
	/* IP prefix area: present iff typev1 != NONE. */
	uint32_t ipv4_prefix;           /* network address, host order (0 for IPv6) */
	uint8_t ipv4_prefix_len;
	uint8_t ipv6_prefix_cnt;
	struct smcr_clc_ipv6_prefix ipv6_prefix[SMCR_CLC_MAX_IPV6_PREFIXES];
	/* v2 extension: present iff version >= 2 and typev2 != NONE. */
	uint8_t eid_cnt;
	uint8_t ism_gid_cnt;
	uint8_t release;                /* 0 = v2.0, 1 = v2.1 */
	bool seid_present;
	uint8_t roce_gid[SMCR_CLC_GID_LEN]; /* RoCEv2 GID (IPv4-mapped) */
	uint8_t max_conns;
	uint8_t max_links;
	uint16_t feature_mask;
	uint8_t eid[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN]; /* UEIDs */
	/* SMC-Dv2 extension: present iff typev2 is D or BOTH. */
	uint8_t seid[SMCR_CLC_EID_LEN];
	struct smcr_clc_ism_gid_chid ism_gids[SMCR_CLC_MAX_ISM_GIDS];
};

/* First-contact extension (v2 Accept/Confirm with hdr.flag). */
struct smcr_clc_fce {
	bool v2_direct;
	uint8_t os_type;        /* SMCR_CLC_OS_* */
	uint8_t release;
	uint8_t hostname[SMCR_CLC_HOSTNAME_LEN]; /* blank padded, not NUL terminated */
	/* release >= 1 only (zero and, for SMC-D, absent with release 0): */
	uint8_t max_conns;
	uint8_t max_links;
	uint16_t feature_mask;
	uint32_t vendor_exp_options;
};

/* Accept and Confirm share the layout; each side describes its own end. */
struct smcr_clc_accept {
	/* SMC-R (hdr.typev1 == R) */
	uint8_t peer_id[SMCR_CLC_PEER_ID_LEN];
	uint8_t gid[SMCR_CLC_GID_LEN];
	uint8_t mac[SMCR_CLC_MAC_LEN];
	uint32_t qpn;           /* 24 bits */
	uint32_t rmb_rkey;
	uint8_t rmbe_idx;       /* 1-based */
	uint32_t rmbe_alert_token;
	uint8_t rmbe_size;      /* compressed: 16 KiB << n */
	uint8_t qp_mtu;         /* IB MTU enum, 4 bits */
	uint64_t rmb_dma_addr;
	uint32_t psn;           /* 24 bits */
	/* SMC-D (hdr.typev1 == D) */
	uint64_t ism_gid;
	uint64_t dmb_token;
	uint8_t dmbe_idx;
	uint8_t dmbe_size;
	uint32_t link_id;
	uint16_t ism_chid;      /* v2 */
	uint64_t gid_ext;       /* v2: second half of a 128-bit emulated-ISM GID */
	/* version >= 2 */
	uint8_t eid[SMCR_CLC_EID_LEN];
	/*
	 * SMC-R v2: what an smcr end understands beyond SMC-R (SMCR_CLC_SMCR_*),
	 * in 8 bytes Linux reserves and never reads (offset 96: "smcr", then the
	 * bits); 0 = none, or not smcr.  Sent only to a peer that is smcr (verbs.c).
	 */
	uint32_t smcr_features;
	struct smcr_clc_fce fce;   /* iff hdr.flag (first contact) */
	/* SMC-R v2 Confirm with first contact: the client's GIDs for more links */
	uint8_t gid_cnt;
	uint8_t gid_list[SMCR_CLC_MAX_CONFIRM_GIDS][SMCR_CLC_GID_LEN];
};

struct smcr_clc_decline {
	uint8_t peer_id[SMCR_CLC_PEER_ID_LEN];
	uint32_t diag;          /* enum smcr_clc_decl */
	uint8_t os_type;        /* v2 */
	uint32_t diag_v2[4];    /* v2: additional diagnosis codes */
};

struct smcr_clc_msg {
	struct smcr_clc_hdr hdr;
	union {
		struct smcr_clc_proposal proposal;
		struct smcr_clc_accept accept; /* Accept and Confirm */
		struct smcr_clc_decline decline;
	};
};

enum smcr_clc_err {
	SMCR_CLC_ERR_NONE = 0,
	SMCR_CLC_ERR_EYECATCHER,  /* header eyecatcher neither SMCR nor SMCD */
	SMCR_CLC_ERR_TRAILER,     /* trailer eyecatcher neither SMCR nor SMCD */
	SMCR_CLC_ERR_TYPE,        /* type not 1..4 */
	SMCR_CLC_ERR_VERSION,     /* version nibble 0 */
	SMCR_CLC_ERR_TOO_SHORT,   /* length below the minimum for the type */
	SMCR_CLC_ERR_TOO_LONG,    /* length above the maximum for the type */
	SMCR_CLC_ERR_LENGTH,      /* length does not match the content */
	SMCR_CLC_ERR_OFFSET,      /* an offset field points outside the message */
	SMCR_CLC_ERR_COUNT,       /* prefix/EID/GID count above the limit */
	SMCR_CLC_ERR_PATH,        /* SMC-R/D/none combination not allowed */
	SMCR_CLC_ERR_BUFFER,      /* encode: output buffer too small */
	SMCR_CLC_ERR_COUNT_
};

const char *smcr_clc_err_str(enum smcr_clc_err err);
const char *smcr_clc_type_str(uint8_t type);

/*
 * Framing only: check the header of the bytes received so far.  Returns
 * NEED_MORE (*len = total bytes needed if known, else SMCR_CLC_HDR_LEN),
 * OK (*len = message length, all of it available) or INVALID (*err).
 */
enum smcr_wire_status smcr_clc_frame(const void *buf, size_t avail, size_t *len,
				     enum smcr_clc_err *err);

/*
 * The type (SMCR_CLC_PROPOSAL..SMCR_CLC_DECLINE) of the message that
 * buf[0..avail) begins, once a sound header is there; 0 while fewer bytes
 * than a header have arrived; -1 if they cannot begin a CLC message.
 */
int smcr_clc_peek_type(const void *buf, size_t avail);

/* Frame, parse and validate one message at the start of buf[0..avail). */
enum smcr_wire_status smcr_clc_decode(const void *buf, size_t avail, struct smcr_clc_msg *msg,
				      size_t *len, enum smcr_clc_err *err);

/* Can `msg` be encoded?  The checks a decoder would apply to the result. */
enum smcr_clc_err smcr_clc_validate(const struct smcr_clc_msg *msg);

/* Wire length `msg` encodes to (0 if it fails smcr_clc_validate()). */
size_t smcr_clc_encoded_len(const struct smcr_clc_msg *msg);

/*
 * Encode into buf[0..cap).  Lengths and offsets are computed from the content;
 * hdr.length is ignored.  Returns bytes written, or 0 with *err set.
 */
size_t smcr_clc_encode(const struct smcr_clc_msg *msg, void *buf, size_t cap,
		       enum smcr_clc_err *err);

/* RMBE/DMBE size encoding: size = 16 KiB << c (c = 0..15). */
uint32_t smcr_clc_rmbe_size(uint8_t compressed);
/* Smallest c whose size is >= `size`, capped at `max_c`. */
uint8_t smcr_clc_rmbe_compress(uint32_t size, uint8_t max_c);

#endif /* SMCR_CLC_H */
