// SPDX-License-Identifier: MIT
/* LLC messages: encode, decode, validate; see llc.h for the framing rules. */
#include "smcr/llc.h"

#include <string.h>

/* Byte offsets inside the 44-byte bodies (Linux smc_llc.c, RFC 7609 A.3). */
enum {
	OFF_TYPE = 0,
	OFF_LEN = 1,       /* v1: 1 byte; v2: 2 bytes */
	OFF_REJ_RSN = 2,   /* v1 ADD LINK: low nibble */
	OFF_FLAGS = 3,
	OFF_BODY = 4,

	CL_MAC = 4, CL_GID = 10, CL_QPN = 26, CL_LINK_NUM = 29, CL_LINK_UID = 30,
	CL_MAX_LINKS = 34, CL_MAX_CONNS = 35,

	AL_MAC = 4, AL_GID = 12, AL_QPN = 28, AL_LINK_NUM = 31, AL_MTU = 32, AL_PSN = 33,
	AL_EXT = 44,                      /* v2 extension starts after the v1 body */
	ALX_FLAGS = 0, ALX_TARGET_GID = 2, ALX_NUM_RKEYS = 26, ALX_RKEYS = 28,
	RKEY_TRIPLE_LEN = 16,

	ALC_LINK_NUM = 4, ALC_NUM_RKEYS = 5, ALC_RT = 8,

	DL_LINK_NUM = 4, DL_REASON = 5,

	RAL_GID_CNT = 24, RAL_GIDS = 28,

	CR_NUM_RKEYS = 4, CR_RKEY = 5, CR_VADDR = 9, CR_RT = 17, RTOKEN_LEN = 13,
	CRC_NUM_RKEYS = 4, CRC_RT = 5,

	DR_NUM_RKEYS = 4, DR_ERR_MASK = 5, DR_RKEYS = 8,

	TL_USER_DATA = 4,
};

_Static_assert(CL_GID == 10 && CL_QPN == 26 && CL_LINK_NUM == 29 && CL_LINK_UID == 30 &&
		       CL_MAX_LINKS == 34,
	       "CONFIRM LINK offsets (protocol.md §5.2)");
_Static_assert(AL_GID == 12 && AL_QPN == 28 && AL_LINK_NUM == 31 && AL_MTU == 32,
	       "ADD LINK offsets (protocol.md §5.3)");
_Static_assert(AL_EXT + ALX_NUM_RKEYS == 70, "ADD LINK v2 rkey count at message offset 70");
_Static_assert(CR_RKEY == 5 && CR_VADDR == 9 && CR_RT == 17,
	       "CONFIRM RKEY offsets (protocol.md §5.6)");
_Static_assert(CL_MAX_CONNS + 1 + 8 == SMCR_LLC_MSG_LEN, "CONFIRM LINK: 8 reserved bytes end it");
_Static_assert(AL_PSN + 3 + 8 == SMCR_LLC_MSG_LEN, "ADD LINK: 8 reserved bytes end it");
_Static_assert(ALX_RKEYS == 28, "ADD LINK v2 extension header is 28 bytes");
_Static_assert(ALC_RT + 2 * RKEY_TRIPLE_LEN + 4 == SMCR_LLC_MSG_LEN, "ADD LINK CONT: 2 triples");
_Static_assert(DL_REASON + 4 + 35 == SMCR_LLC_MSG_LEN, "DELETE LINK: 35 reserved bytes");
_Static_assert(CR_RT + 2 * RTOKEN_LEN + 1 == SMCR_LLC_MSG_LEN, "CONFIRM RKEY: 2 rtokens + 1");
_Static_assert(CRC_RT + 3 * RTOKEN_LEN == SMCR_LLC_MSG_LEN, "CONFIRM RKEY CONT: 3 rtokens");
_Static_assert(DR_RKEYS + 4 * SMCR_LLC_DEL_RKEY_V1_MAX + 4 == SMCR_LLC_MSG_LEN,
	       "DELETE RKEY v1: 8 rkeys + 4 reserved");
_Static_assert(TL_USER_DATA + 16 + 24 == SMCR_LLC_MSG_LEN, "TEST LINK: 24 reserved bytes");
_Static_assert(AL_EXT + ALX_RKEYS + SMCR_LLC_MAX_ADD_LINK_RKEYS * RKEY_TRIPLE_LEN <=
		       SMCR_LLC_V2_MAX_LEN,
	       "the largest ADD LINK we accept fits the v2 buffer");

static const char *const llc_err_names[SMCR_LLC_ERR_COUNT_] = {
	[SMCR_LLC_ERR_NONE] = "ok",
	[SMCR_LLC_ERR_SHORT] = "message shorter than its minimum or stated length",
	[SMCR_LLC_ERR_TYPE] = "unknown LLC type for this version",
	[SMCR_LLC_ERR_VERSION] = "unknown LLC version nibble",
	[SMCR_LLC_ERR_LENGTH] = "impossible length field",
	[SMCR_LLC_ERR_COUNT] = "count exceeds the message or the protocol limit",
	[SMCR_LLC_ERR_BUFFER] = "output buffer too small",
};

const char *smcr_llc_err_str(enum smcr_llc_err err)
{
	if ((unsigned)err >= SMCR_LLC_ERR_COUNT_)
		return "unknown LLC error";
	return llc_err_names[err];
}

const char *smcr_llc_type_str(uint8_t type)
{
	switch (type) {
	case SMCR_LLC_CONFIRM_LINK: return "CONFIRM LINK";
	case SMCR_LLC_ADD_LINK: return "ADD LINK";
	case SMCR_LLC_ADD_LINK_CONT: return "ADD LINK CONT";
	case SMCR_LLC_DELETE_LINK: return "DELETE LINK";
	case SMCR_LLC_REQ_ADD_LINK: return "REQ ADD LINK";
	case SMCR_LLC_CONFIRM_RKEY: return "CONFIRM RKEY";
	case SMCR_LLC_TEST_LINK: return "TEST LINK";
	case SMCR_LLC_CONFIRM_RKEY_CONT: return "CONFIRM RKEY CONT";
	case SMCR_LLC_DELETE_RKEY: return "DELETE RKEY";
	default: return "unknown";
	}
}

/* Types Linux registers receive handlers for, per header version (protocol.md §4.3). */
static bool type_known(uint8_t type, uint8_t version)
{
	switch (type) {
	case SMCR_LLC_CONFIRM_LINK:
	case SMCR_LLC_ADD_LINK:
	case SMCR_LLC_DELETE_LINK:
	case SMCR_LLC_CONFIRM_RKEY:
	case SMCR_LLC_TEST_LINK:
	case SMCR_LLC_DELETE_RKEY:
		return true;
	case SMCR_LLC_ADD_LINK_CONT:
	case SMCR_LLC_CONFIRM_RKEY_CONT:
		return version == 1;
	case SMCR_LLC_REQ_ADD_LINK:
		return version == 2;
	default:
		return false;
	}
}

static void put_triple(uint8_t *p, const struct smcr_llc_rkey_triple *t)
{
	smcr_put_be32(p, t->rkey);
	smcr_put_be32(p + 4, t->rkey_new);
	smcr_put_be64(p + 8, t->vaddr_new);
}

static void get_triple(const uint8_t *p, struct smcr_llc_rkey_triple *t)
{
	t->rkey = smcr_get_be32(p);
	t->rkey_new = smcr_get_be32(p + 4);
	t->vaddr_new = smcr_get_be64(p + 8);
}

static void put_rtoken(uint8_t *p, const struct smcr_llc_rtoken *t)
{
	p[0] = t->link_id;
	smcr_put_be32(p + 1, t->rkey);
	smcr_put_be64(p + 5, t->vaddr);
}

static void get_rtoken(const uint8_t *p, struct smcr_llc_rtoken *t)
{
	t->link_id = p[0];
	t->rkey = smcr_get_be32(p + 1);
	t->vaddr = smcr_get_be64(p + 5);
}

static uint16_t get_u16_order(const uint8_t *p, bool be)
{
	return be ? smcr_get_be16(p) : smcr_get_le16(p);
}

static void put_u16_order(uint8_t *p, uint16_t v, bool be)
{
	if (be)
		smcr_put_be16(p, v);
	else
		smcr_put_le16(p, v);
}

static size_t at_least_44(size_t len)
{
	return len < SMCR_LLC_MSG_LEN ? SMCR_LLC_MSG_LEN : len;
}

size_t smcr_llc_encoded_len(const struct smcr_llc_msg *msg)
{
	if (!type_known(msg->hdr.type, msg->hdr.version))
		return 0;
	if (msg->hdr.version != 2)
		return SMCR_LLC_MSG_LEN;
	switch (msg->hdr.type) {
	case SMCR_LLC_ADD_LINK:
		if (!msg->add_link.has_v2_ext)
			return SMCR_LLC_MSG_LEN;
		if (msg->add_link.num_rkeys > SMCR_LLC_MAX_ADD_LINK_RKEYS)
			return 0;
		return AL_EXT + ALX_RKEYS + (size_t)msg->add_link.num_rkeys * RKEY_TRIPLE_LEN;
	case SMCR_LLC_REQ_ADD_LINK:
		if (msg->req_add_link.gid_cnt > SMCR_LLC_MAX_REQ_GIDS)
			return 0;
		return at_least_44(RAL_GIDS + (size_t)msg->req_add_link.gid_cnt *
						      SMCR_LLC_GID_LEN);
	case SMCR_LLC_DELETE_RKEY:
		return at_least_44(DR_RKEYS + (size_t)msg->delete_rkey.num_rkeys * 4);
	default:
		return SMCR_LLC_MSG_LEN;
	}
}

/* Checks that do not depend on the header version's framing. */
static enum smcr_llc_err check_counts(const struct smcr_llc_msg *msg)
{
	if (msg->hdr.type == SMCR_LLC_ADD_LINK && msg->add_link.has_v2_ext &&
	    msg->hdr.version != 2)
		return SMCR_LLC_ERR_TYPE;
	return SMCR_LLC_ERR_NONE;
}

/* rkeys a DELETE RKEY carries in its list: v1 has room for 8 whatever the count says. */
static unsigned del_rkey_listed(const struct smcr_llc_msg *msg)
{
	unsigned n = msg->delete_rkey.num_rkeys;

	if (msg->hdr.version == 1 && n > SMCR_LLC_DEL_RKEY_V1_MAX)
		n = SMCR_LLC_DEL_RKEY_V1_MAX;
	return n;
}

static void encode_confirm_link(const struct smcr_llc_confirm_link *m, uint8_t *p)
{
	memcpy(p + CL_MAC, m->mac, sizeof(m->mac));
	memcpy(p + CL_GID, m->gid, sizeof(m->gid));
	smcr_put_be24(p + CL_QPN, m->qpn);
	p[CL_LINK_NUM] = m->link_num;
	smcr_put_be32(p + CL_LINK_UID, m->link_uid);
	p[CL_MAX_LINKS] = m->max_links;
	p[CL_MAX_CONNS] = m->max_conns;
}

static void encode_add_link(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_add_link *m = &msg->add_link;
	uint8_t *x;

	memcpy(p + AL_MAC, m->mac, sizeof(m->mac));
	memcpy(p + AL_GID, m->gid, sizeof(m->gid));
	smcr_put_be24(p + AL_QPN, m->qpn);
	p[AL_LINK_NUM] = m->link_num;
	p[AL_MTU] = m->qp_mtu & 0x0f;
	smcr_put_be24(p + AL_PSN, m->psn);
	if (!m->has_v2_ext)
		return;
	x = p + AL_EXT;
	x[ALX_FLAGS] = m->v2_direct ? 0x80 : 0;
	memcpy(x + ALX_TARGET_GID, m->target_gid, sizeof(m->target_gid));
	put_u16_order(x + ALX_NUM_RKEYS, m->num_rkeys, msg->hdr.length_be);
	for (unsigned i = 0; i < m->num_rkeys; i++)
		put_triple(x + ALX_RKEYS + i * RKEY_TRIPLE_LEN, &m->rkeys[i]);
}

static void encode_body(const struct smcr_llc_msg *msg, uint8_t *p)
{
	unsigned i;

	switch (msg->hdr.type) {
	case SMCR_LLC_CONFIRM_LINK:
		encode_confirm_link(&msg->confirm_link, p);
		break;
	case SMCR_LLC_ADD_LINK:
		encode_add_link(msg, p);
		break;
	case SMCR_LLC_ADD_LINK_CONT:
		p[ALC_LINK_NUM] = msg->add_link_cont.link_num;
		p[ALC_NUM_RKEYS] = msg->add_link_cont.num_rkeys;
		for (i = 0; i < 2; i++)
			put_triple(p + ALC_RT + i * RKEY_TRIPLE_LEN, &msg->add_link_cont.rt[i]);
		break;
	case SMCR_LLC_DELETE_LINK:
		p[DL_LINK_NUM] = msg->delete_link.link_num;
		smcr_put_be32(p + DL_REASON, msg->delete_link.reason);
		break;
	case SMCR_LLC_REQ_ADD_LINK:
		p[RAL_GID_CNT] = msg->req_add_link.gid_cnt;
		for (i = 0; i < msg->req_add_link.gid_cnt; i++)
			memcpy(p + RAL_GIDS + i * SMCR_LLC_GID_LEN, msg->req_add_link.gid[i],
			       SMCR_LLC_GID_LEN);
		break;
	case SMCR_LLC_CONFIRM_RKEY:
		p[CR_NUM_RKEYS] = msg->confirm_rkey.num_rkeys;
		smcr_put_be32(p + CR_RKEY, msg->confirm_rkey.rkey);
		smcr_put_be64(p + CR_VADDR, msg->confirm_rkey.vaddr);
		for (i = 0; i < 2; i++)
			put_rtoken(p + CR_RT + i * RTOKEN_LEN, &msg->confirm_rkey.rt[i]);
		break;
	case SMCR_LLC_CONFIRM_RKEY_CONT:
		p[CRC_NUM_RKEYS] = msg->confirm_rkey_cont.num_rkeys;
		for (i = 0; i < 3; i++)
			put_rtoken(p + CRC_RT + i * RTOKEN_LEN, &msg->confirm_rkey_cont.rt[i]);
		break;
	case SMCR_LLC_DELETE_RKEY:
		p[DR_NUM_RKEYS] = msg->delete_rkey.num_rkeys;
		p[DR_ERR_MASK] = msg->delete_rkey.err_mask;
		for (i = 0; i < del_rkey_listed(msg); i++)
			smcr_put_be32(p + DR_RKEYS + i * 4, msg->delete_rkey.rkeys[i]);
		break;
	case SMCR_LLC_TEST_LINK:
		memcpy(p + TL_USER_DATA, msg->test_link.user_data,
		       sizeof(msg->test_link.user_data));
		break;
	}
}

size_t smcr_llc_encode(const struct smcr_llc_msg *msg, void *buf, size_t cap,
		       enum smcr_llc_err *err)
{
	uint8_t *p = buf;
	size_t len;

	if (msg->hdr.version != 1 && msg->hdr.version != 2) {
		*err = SMCR_LLC_ERR_VERSION;
		return 0;
	}
	*err = check_counts(msg);
	if (*err != SMCR_LLC_ERR_NONE)
		return 0;
	len = smcr_llc_encoded_len(msg);
	if (len == 0) {
		*err = type_known(msg->hdr.type, msg->hdr.version) ? SMCR_LLC_ERR_COUNT
								    : SMCR_LLC_ERR_TYPE;
		return 0;
	}
	if (len > SMCR_LLC_V2_MAX_LEN) {
		*err = SMCR_LLC_ERR_COUNT;
		return 0;
	}
	if (cap < len) {
		*err = SMCR_LLC_ERR_BUFFER;
		return 0;
	}
	memset(p, 0, len);
	if (msg->hdr.version == 2) {
		p[OFF_TYPE] = (uint8_t)(0x20 | msg->hdr.type);
		put_u16_order(p + OFF_LEN, (uint16_t)len, msg->hdr.length_be);
	} else {
		p[OFF_TYPE] = msg->hdr.type;
		p[OFF_LEN] = SMCR_LLC_MSG_LEN;
		if (msg->hdr.type == SMCR_LLC_ADD_LINK)
			p[OFF_REJ_RSN] = msg->hdr.add_link_rej_rsn & 0x0f;
	}
	p[OFF_FLAGS] = msg->hdr.flags;
	encode_body(msg, p);
	return len;
}

static enum smcr_wire_status llc_invalid(enum smcr_llc_err *err, enum smcr_llc_err why)
{
	*err = why;
	return SMCR_WIRE_INVALID;
}

static bool v2_len_plausible(uint16_t v, size_t avail)
{
	return v >= SMCR_LLC_MSG_LEN && v <= SMCR_LLC_V2_MAX_LEN && v <= avail;
}

/*
 * Read the header.  v2 length: x86 Linux writes it little-endian; a peer that
 * follows the (network-order) spec, like s390 Linux, writes it big-endian.  We
 * take little-endian when that is plausible and fall back to big-endian.
 */
static enum smcr_llc_err decode_hdr(const uint8_t *p, size_t len, struct smcr_llc_hdr *hdr)
{
	uint8_t version = p[OFF_TYPE] >> 4;

	memset(hdr, 0, sizeof(*hdr));
	hdr->type = p[OFF_TYPE] & 0x0f;
	hdr->flags = p[OFF_FLAGS];
	if (version == 0) {
		hdr->version = 1;
		if (p[OFF_LEN] != SMCR_LLC_MSG_LEN)
			return SMCR_LLC_ERR_LENGTH;
		hdr->length = SMCR_LLC_MSG_LEN;
		if (hdr->type == SMCR_LLC_ADD_LINK)
			hdr->add_link_rej_rsn = p[OFF_REJ_RSN] & 0x0f;
	} else if (version == 2) {
		uint16_t le = smcr_get_le16(p + OFF_LEN), be = smcr_get_be16(p + OFF_LEN);

		hdr->version = 2;
		if (v2_len_plausible(le, len)) {
			hdr->length = le;
		} else if (v2_len_plausible(be, len)) {
			hdr->length = be;
			hdr->length_be = true;
		} else {
			return le >= SMCR_LLC_MSG_LEN && le <= SMCR_LLC_V2_MAX_LEN
				       ? SMCR_LLC_ERR_SHORT
				       : SMCR_LLC_ERR_LENGTH;
		}
	} else {
		return SMCR_LLC_ERR_VERSION;
	}
	if (!type_known(hdr->type, hdr->version))
		return SMCR_LLC_ERR_TYPE;
	return SMCR_LLC_ERR_NONE;
}

static enum smcr_llc_err decode_add_link_ext(const uint8_t *p, struct smcr_llc_msg *msg)
{
	struct smcr_llc_add_link *m = &msg->add_link;
	const uint8_t *x = p + AL_EXT;
	unsigned i;

	if (msg->hdr.length < AL_EXT + ALX_RKEYS)
		return SMCR_LLC_ERR_LENGTH;
	m->has_v2_ext = true;
	m->v2_direct = (x[ALX_FLAGS] & 0x80) != 0;
	memcpy(m->target_gid, x + ALX_TARGET_GID, sizeof(m->target_gid));
	m->num_rkeys = get_u16_order(x + ALX_NUM_RKEYS, msg->hdr.length_be);
	if (m->num_rkeys > SMCR_LLC_MAX_ADD_LINK_RKEYS ||
	    AL_EXT + ALX_RKEYS + (size_t)m->num_rkeys * RKEY_TRIPLE_LEN > msg->hdr.length)
		return SMCR_LLC_ERR_COUNT;
	for (i = 0; i < m->num_rkeys; i++)
		get_triple(x + ALX_RKEYS + i * RKEY_TRIPLE_LEN, &m->rkeys[i]);
	return SMCR_LLC_ERR_NONE;
}

static void decode_confirm_link(const uint8_t *p, struct smcr_llc_confirm_link *m)
{
	memcpy(m->mac, p + CL_MAC, sizeof(m->mac));
	memcpy(m->gid, p + CL_GID, sizeof(m->gid));
	m->qpn = smcr_get_be24(p + CL_QPN);
	m->link_num = p[CL_LINK_NUM];
	m->link_uid = smcr_get_be32(p + CL_LINK_UID);
	m->max_links = p[CL_MAX_LINKS];
	m->max_conns = p[CL_MAX_CONNS];
}

static enum smcr_llc_err decode_add_link(const uint8_t *p, struct smcr_llc_msg *msg)
{
	struct smcr_llc_add_link *m = &msg->add_link;

	memcpy(m->mac, p + AL_MAC, sizeof(m->mac));
	memcpy(m->gid, p + AL_GID, sizeof(m->gid));
	m->qpn = smcr_get_be24(p + AL_QPN);
	m->link_num = p[AL_LINK_NUM];
	m->qp_mtu = p[AL_MTU] & 0x0f;
	m->psn = smcr_get_be24(p + AL_PSN);
	/* A v2 reject is the echoed 44-byte request without extension. */
	if (msg->hdr.version == 2 && msg->hdr.length > SMCR_LLC_MSG_LEN)
		return decode_add_link_ext(p, msg);
	return SMCR_LLC_ERR_NONE;
}

static enum smcr_llc_err decode_req_add_link(const uint8_t *p, struct smcr_llc_msg *msg)
{
	struct smcr_llc_req_add_link *m = &msg->req_add_link;

	m->gid_cnt = p[RAL_GID_CNT];
	if (m->gid_cnt > SMCR_LLC_MAX_REQ_GIDS ||
	    RAL_GIDS + (size_t)m->gid_cnt * SMCR_LLC_GID_LEN > msg->hdr.length)
		return SMCR_LLC_ERR_COUNT;
	for (unsigned i = 0; i < m->gid_cnt; i++)
		memcpy(m->gid[i], p + RAL_GIDS + i * SMCR_LLC_GID_LEN, SMCR_LLC_GID_LEN);
	return SMCR_LLC_ERR_NONE;
}

static enum smcr_llc_err decode_delete_rkey(const uint8_t *p, struct smcr_llc_msg *msg)
{
	struct smcr_llc_delete_rkey *m = &msg->delete_rkey;

	m->num_rkeys = p[DR_NUM_RKEYS];
	m->err_mask = p[DR_ERR_MASK];
	/* v1: Linux uses at most 8 whatever the count; v2: the list must fit. */
	if (msg->hdr.version == 2 && m->num_rkeys > (msg->hdr.length - DR_RKEYS) / 4)
		return SMCR_LLC_ERR_COUNT;
	for (unsigned i = 0; i < del_rkey_listed(msg); i++)
		m->rkeys[i] = smcr_get_be32(p + DR_RKEYS + i * 4);
	return SMCR_LLC_ERR_NONE;
}

static enum smcr_llc_err decode_body(const uint8_t *p, struct smcr_llc_msg *msg)
{
	unsigned i;

	switch (msg->hdr.type) {
	case SMCR_LLC_CONFIRM_LINK:
		decode_confirm_link(p, &msg->confirm_link);
		return SMCR_LLC_ERR_NONE;
	case SMCR_LLC_ADD_LINK:
		return decode_add_link(p, msg);
	case SMCR_LLC_ADD_LINK_CONT:
		msg->add_link_cont.link_num = p[ALC_LINK_NUM];
		msg->add_link_cont.num_rkeys = p[ALC_NUM_RKEYS];
		for (i = 0; i < 2; i++)
			get_triple(p + ALC_RT + i * RKEY_TRIPLE_LEN, &msg->add_link_cont.rt[i]);
		return SMCR_LLC_ERR_NONE;
	case SMCR_LLC_DELETE_LINK:
		msg->delete_link.link_num = p[DL_LINK_NUM];
		msg->delete_link.reason = smcr_get_be32(p + DL_REASON);
		return SMCR_LLC_ERR_NONE;
	case SMCR_LLC_REQ_ADD_LINK:
		return decode_req_add_link(p, msg);
	case SMCR_LLC_CONFIRM_RKEY:
		msg->confirm_rkey.num_rkeys = p[CR_NUM_RKEYS];
		msg->confirm_rkey.rkey = smcr_get_be32(p + CR_RKEY);
		msg->confirm_rkey.vaddr = smcr_get_be64(p + CR_VADDR);
		for (i = 0; i < 2; i++)
			get_rtoken(p + CR_RT + i * RTOKEN_LEN, &msg->confirm_rkey.rt[i]);
		/* More than 2 further rtokens cannot be in this message; Linux answers
		 * such a request negatively (NEG|RETRY), so it is decoded, not dropped. */
		return SMCR_LLC_ERR_NONE;
	case SMCR_LLC_CONFIRM_RKEY_CONT:
		msg->confirm_rkey_cont.num_rkeys = p[CRC_NUM_RKEYS];
		for (i = 0; i < 3; i++)
			get_rtoken(p + CRC_RT + i * RTOKEN_LEN, &msg->confirm_rkey_cont.rt[i]);
		return SMCR_LLC_ERR_NONE;
	case SMCR_LLC_DELETE_RKEY:
		return decode_delete_rkey(p, msg);
	case SMCR_LLC_TEST_LINK:
		memcpy(msg->test_link.user_data, p + TL_USER_DATA,
		       sizeof(msg->test_link.user_data));
		return SMCR_LLC_ERR_NONE;
	}
	return SMCR_LLC_ERR_TYPE;
}

enum smcr_wire_status smcr_llc_decode(const void *buf, size_t len, struct smcr_llc_msg *msg,
				      enum smcr_llc_err *err)
{
	const uint8_t *p = buf;
	enum smcr_llc_err e;

	/* Linux drops completions shorter than 44 bytes before looking at them. */
	if (len < SMCR_LLC_MSG_LEN)
		return llc_invalid(err, SMCR_LLC_ERR_SHORT);
	memset(msg, 0, sizeof(*msg));
	e = decode_hdr(p, len, &msg->hdr);
	if (e == SMCR_LLC_ERR_NONE)
		e = decode_body(p, msg);
	if (e != SMCR_LLC_ERR_NONE)
		return llc_invalid(err, e);
	*err = SMCR_LLC_ERR_NONE;
	return SMCR_WIRE_OK;
}

void smcr_llc_answer(const uint8_t *req, size_t len, uint8_t extra,
		     uint8_t out[SMCR_LLC_MSG_LEN])
{
	uint8_t type = req[OFF_TYPE] & 0x0f, version = req[OFF_TYPE] >> 4;

	(void)len;
	memcpy(out, req, SMCR_LLC_MSG_LEN);
	out[OFF_FLAGS] |= SMCR_LLC_FLAG_RESP | extra;
	if (version == 2) {
		/* read little-endian, a big-endian length is absurd (44 -> 11264) */
		bool be = smcr_get_le16(req + OFF_LEN) > SMCR_LLC_V2_MAX_LEN;

		put_u16_order(out + OFF_LEN, SMCR_LLC_MSG_LEN, be);
	} else if (type == SMCR_LLC_ADD_LINK && (extra & SMCR_LLC_FLAG_ADD_LINK_REJ)) {
		out[OFF_REJ_RSN] = (uint8_t)((out[OFF_REJ_RSN] & 0xf0) | SMCR_LLC_REJ_RSN_NO_ALT_PATH);
	}
	if (type == SMCR_LLC_DELETE_RKEY) {
		out[DR_ERR_MASK] = 0;
		if (version == 2)
			memset(out + DR_RKEYS, 0, SMCR_LLC_MSG_LEN - DR_RKEYS);
	}
}

void smcr_llc_add_link_v2(struct smcr_llc_msg *m, bool response, bool length_be,
			  const uint8_t mac[SMCR_LLC_MAC_LEN], const uint8_t gid[SMCR_LLC_GID_LEN],
			  uint32_t qpn, uint32_t psn, uint8_t link_num, uint8_t qp_mtu,
			  bool v2_direct)
{
	memset(m, 0, sizeof(*m));
	m->hdr.type = SMCR_LLC_ADD_LINK;
	m->hdr.version = 2;
	m->hdr.flags = response ? SMCR_LLC_FLAG_RESP : 0;
	m->hdr.length_be = length_be;
	memcpy(m->add_link.mac, mac, SMCR_LLC_MAC_LEN);
	memcpy(m->add_link.gid, gid, SMCR_LLC_GID_LEN);
	m->add_link.qpn = qpn & 0xffffffu;
	m->add_link.psn = psn & 0xffffffu;
	m->add_link.link_num = link_num;
	m->add_link.qp_mtu = qp_mtu & 0x0fu;
	m->add_link.has_v2_ext = true;
	m->add_link.v2_direct = v2_direct;
	memcpy(m->add_link.target_gid, gid, SMCR_LLC_GID_LEN);
}

enum smcr_wire_status smcr_llc_decode_add_link_head(const void *buf, size_t kept, size_t len,
						    struct smcr_llc_msg *msg,
						    enum smcr_llc_err *err)
{
	const uint8_t *b = buf;
	uint8_t head[AL_EXT + ALX_RKEYS];
	bool be;

	if (kept < sizeof(head) || kept >= len) {
		*err = SMCR_LLC_ERR_SHORT;
		return SMCR_WIRE_INVALID;
	}
	if (b[OFF_TYPE] != (0x20 | SMCR_LLC_ADD_LINK)) {
		*err = SMCR_LLC_ERR_TYPE;
		return SMCR_WIRE_INVALID;
	}
	memcpy(head, b, sizeof(head));
	/* the stated length in either byte order (x86 Linux little-endian, s390 big) */
	be = (size_t)(b[OFF_LEN] << 8 | b[OFF_LEN + 1]) == len &&
	     (size_t)(b[OFF_LEN + 1] << 8 | b[OFF_LEN]) != len;
	if (!be && (size_t)(b[OFF_LEN + 1] << 8 | b[OFF_LEN]) != len) {
		*err = SMCR_LLC_ERR_LENGTH;
		return SMCR_WIRE_INVALID;
	}
	head[OFF_LEN] = be ? 0 : (uint8_t)sizeof(head);
	head[OFF_LEN + 1] = be ? (uint8_t)sizeof(head) : 0;
	head[AL_EXT + ALX_NUM_RKEYS] = head[AL_EXT + ALX_NUM_RKEYS + 1] = 0;
	return smcr_llc_decode(head, sizeof(head), msg, err);
}
