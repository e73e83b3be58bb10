// SPDX-License-Identifier: MIT
/* CLC messages: framing, encode, decode, validate; see clc.h. */
#include "smcr/clc.h"

#include <string.h>

/* Header (RFC 7609 A.2, Linux struct smc_clc_msg_hdr). */
enum {
	HDR_EYE = 0, HDR_TYPE = 4, HDR_LEN = 5, HDR_VER = 7,
};
#define VER_SHIFT 4
#define FLAG_BIT 0x08
#define TYPEV2_SHIFT 2

/* Proposal. */
enum {
	P_PEER_ID = 8, P_GID = 16, P_MAC = 32, P_IPAREA_OFF = 38,
	P_SMCD = 40,                       /* SMC-D/v2 area */
	PD_ISM_GID = 0, PD_CHID = 8, PD_V2_EXT_OFF = 10,
	P_V2_EXT_BASE = 52,                /* v2_ext_offset counts from here */
	PX_V4 = 0, PX_V4_LEN = 4, PX_V6_CNT = 7, PX_V6 = 8,
	V2_EID_CNT = 0, V2_ISM_GID_CNT = 1, V2_FLAG = 3, V2_SMCD_OFF = 6, V2_ROCE_GID = 8,
	V2_MAX_CONNS = 24, V2_MAX_LINKS = 25, V2_FEATURES = 26, V2_EIDS = 40,
	V2_SMCD_BASE = 8,                  /* smcd_v2_ext_offset counts from V + 8 */
	D2_SEID = 0, D2_GID_CHID = 48,
};

/*
 * Largest offsets Linux accepts (smc_get_clc_v2_ext, smc_get_clc_smcd_v2_ext):
 * the v2 extension may follow at most a full prefix area, the SMC-Dv2
 * extension at most the full UEID list.
 */
#define V2_EXT_OFF_MAX                                                                        \
	(80 - P_V2_EXT_BASE + SMCR_CLC_PROP_PREFIX_LEN +                                       \
	 SMCR_CLC_MAX_IPV6_PREFIXES * SMCR_CLC_IPV6_PREFIX_LEN)
#define SMCD_V2_EXT_OFF_MAX (V2_EIDS - V2_SMCD_BASE + SMCR_CLC_MAX_EIDS * SMCR_CLC_EID_LEN)

/* Accept / Confirm. */
enum {
	A_PEER_ID = 8, A_GID = 16, A_MAC = 32, A_QPN = 38, A_RKEY = 41, A_RMBE_IDX = 45,
	A_TOKEN = 46, A_SIZE_MTU = 50, A_DMA_ADDR = 52, A_PSN = 61,
	A_EID = 64, A_SMCR = 96, A_SMCR_FEATURES = 100, A_FCE = 104, A_GID_LIST = 156,
	AD_GID = 8, AD_TOKEN = 16, AD_DMBE_IDX = 24, AD_DMBE_SIZE = 25, AD_LINK_ID = 28,
	AD_CHID = 32, AD_EID = 34, AD_GID_EXT = 66, AD_FCE = 74,
	F_FLAGS = 0, F_OS_REL = 1, F_HOSTNAME = 4, F_MAX_CONNS = 36, F_MAX_LINKS = 37,
	F_FEATURES = 38, F_VENDOR = 40,
};

/* Decline. */
enum { DC_PEER_ID = 8, DC_DIAG = 16, DC_OS = 20, DC_DIAG_V2 = 24 };

_Static_assert(SMCR_CLC_HDR_LEN == 8 && SMCR_CLC_TRL_LEN == 4, "header and trailer sizes");
_Static_assert(P_IPAREA_OFF + 2 == SMCR_CLC_PROP_BASE_LEN, "Proposal base is 40 bytes");
_Static_assert(P_SMCD + PD_V2_EXT_OFF + 2 == P_V2_EXT_BASE, "v2_ext_offset counts from 52");
_Static_assert(P_SMCD + SMCR_CLC_PROP_SMCD_AREA_LEN == 80, "SMC-D/v2 area ends at 80");
_Static_assert(V2_EIDS == SMCR_CLC_V2_EXT_LEN, "EIDs follow the 40-byte v2 extension");
_Static_assert(D2_GID_CHID == SMCR_CLC_SMCD_V2_EXT_LEN, "GID/CHID list follows SEID+16");
_Static_assert(80 + SMCR_CLC_PROP_PREFIX_LEN +
			       SMCR_CLC_MAX_IPV6_PREFIXES * SMCR_CLC_IPV6_PREFIX_LEN +
			       SMCR_CLC_V2_EXT_LEN + SMCR_CLC_MAX_EIDS * SMCR_CLC_EID_LEN +
			       SMCR_CLC_SMCD_V2_EXT_LEN +
			       SMCR_CLC_MAX_ISM_GIDS * SMCR_CLC_GID_CHID_LEN + SMCR_CLC_TRL_LEN ==
		       SMCR_CLC_PROP_MAX_LEN,
	       "largest Proposal is Linux's smc_clc_msg_proposal_area (652)");
_Static_assert(A_PSN + 3 + SMCR_CLC_TRL_LEN == SMCR_CLC_ACC_R_V1_LEN, "SMC-R Accept v1: 68");
_Static_assert(A_FCE + SMCR_CLC_TRL_LEN == SMCR_CLC_ACC_R_V2_LEN, "SMC-R Accept v2: 108");
_Static_assert(A_FCE + SMCR_CLC_FCE_LEN == A_GID_LIST, "GID list follows the 52-byte FCE");
_Static_assert(AD_LINK_ID + 4 + 12 + SMCR_CLC_TRL_LEN == SMCR_CLC_ACC_D_V1_LEN,
	       "SMC-D Accept v1: 48");
_Static_assert(AD_FCE + SMCR_CLC_TRL_LEN == SMCR_CLC_ACC_D_V2_LEN, "SMC-D Accept v2: 78");
_Static_assert(F_VENDOR + 4 + 8 == SMCR_CLC_FCE_LEN, "FCE v2.1 is 52 bytes");
_Static_assert(F_MAX_CONNS == SMCR_CLC_FCE_V20_SMCD_LEN, "v2.0 FCE ends before max_conns");
_Static_assert(DC_DIAG_V2 + SMCR_CLC_TRL_LEN == SMCR_CLC_DECL_V1_LEN, "Decline v1: 28");
_Static_assert(DC_DIAG_V2 + 16 + SMCR_CLC_TRL_LEN == SMCR_CLC_DECL_V2_LEN, "Decline v2: 44");
_Static_assert(SMCR_CLC_ACC_MAX_LEN == 196, "largest Accept/Confirm");
/* Key offsets, as listed in protocol.md §2 and Linux smc_clc.h. */
_Static_assert(HDR_TYPE == 4 && HDR_LEN == 5 && HDR_VER == 7, "header: type, length, version");
_Static_assert(P_PEER_ID == 8 && P_GID == 16 && P_MAC == 32, "Proposal: peer id, GID, MAC");
_Static_assert(P_SMCD + PD_V2_EXT_OFF == 50, "Proposal: v2_ext_offset at 50");
_Static_assert(V2_ROCE_GID == 8 && V2_MAX_CONNS == 24 && V2_FEATURES == 26,
	       "v2 extension: RoCEv2 GID, max_conns, feature mask");
_Static_assert(A_QPN == 38 && A_RKEY == 41 && A_RMBE_IDX == 45 && A_TOKEN == 46,
	       "SMC-R Accept: QPN, rkey, RMBE index, alert token");
_Static_assert(A_SIZE_MTU == 50 && A_DMA_ADDR == 52 && A_PSN == 61,
	       "SMC-R Accept: size/MTU, RMB address, PSN");
_Static_assert(A_EID == 64 && A_FCE == 104 && A_GID_LIST == 156, "SMC-R Accept v2 parts");
_Static_assert(A_EID + SMCR_CLC_EID_LEN == A_SMCR && A_SMCR_FEATURES + 4 == A_FCE,
	       "smcr's word: the 8 bytes Linux reserves between the EID and the FCE");
_Static_assert(AD_TOKEN == 16 && AD_LINK_ID == 28 && AD_CHID == 32 && AD_EID == 34 &&
		       AD_GID_EXT == 66,
	       "SMC-D Accept: DMB token, link id, CHID, EID, GID extension");
_Static_assert(F_HOSTNAME == 4 && F_MAX_CONNS == 36 && F_FEATURES == 38 && F_VENDOR == 40,
	       "first-contact extension fields");
_Static_assert(DC_DIAG == 16 && DC_OS == 20, "Decline: diagnosis, OS type");
_Static_assert(V2_EXT_OFF_MAX == 172 && SMCD_V2_EXT_OFF_MAX == 288,
	       "Linux's offset limits for the v2 and SMC-Dv2 extensions");

static const char *const clc_err_names[SMCR_CLC_ERR_COUNT_] = {
	[SMCR_CLC_ERR_NONE] = "ok",
	[SMCR_CLC_ERR_EYECATCHER] = "header eyecatcher is not SMCR/SMCD",
	[SMCR_CLC_ERR_TRAILER] = "trailer eyecatcher is not SMCR/SMCD",
	[SMCR_CLC_ERR_TYPE] = "unknown CLC message type",
	[SMCR_CLC_ERR_VERSION] = "CLC version 0",
	[SMCR_CLC_ERR_TOO_SHORT] = "length below the minimum for the type",
	[SMCR_CLC_ERR_TOO_LONG] = "length above the maximum for the type",
	[SMCR_CLC_ERR_LENGTH] = "length does not match the content",
	[SMCR_CLC_ERR_OFFSET] = "offset field points outside the message",
	[SMCR_CLC_ERR_COUNT] = "prefix/EID/GID count above the limit",
	[SMCR_CLC_ERR_PATH] = "SMC-R/SMC-D type combination not allowed",
	[SMCR_CLC_ERR_BUFFER] = "output buffer too small",
};

const char *smcr_clc_err_str(enum smcr_clc_err err)
{
	if ((unsigned)err >= SMCR_CLC_ERR_COUNT_)
		return "unknown CLC error";
	return clc_err_names[err];
}

const char *smcr_clc_type_str(uint8_t type)
{
	switch (type) {
	case SMCR_CLC_PROPOSAL: return "Proposal";
	case SMCR_CLC_ACCEPT: return "Accept";
	case SMCR_CLC_CONFIRM: return "Confirm";
	case SMCR_CLC_DECLINE: return "Decline";
	default: return "unknown";
	}
}

uint32_t smcr_clc_rmbe_size(uint8_t compressed)
{
	return UINT32_C(16384) << (compressed & 0x0f);
}

uint8_t smcr_clc_rmbe_compress(uint32_t size, uint8_t max_c)
{
	uint8_t c = 0;

	while (c < max_c && c < 15 && smcr_clc_rmbe_size(c) < size)
		c++;
	return c;
}

/* ---- sizes of the variable parts ---------------------------------------- */

static bool path_has_d(uint8_t path)
{
	return path == SMCR_CLC_PATH_D || path == SMCR_CLC_PATH_BOTH;
}

static size_t prefix_area_len(const struct smcr_clc_proposal *p)
{
	return SMCR_CLC_PROP_PREFIX_LEN + (size_t)p->ipv6_prefix_cnt * SMCR_CLC_IPV6_PREFIX_LEN;
}

static size_t v2_ext_len(const struct smcr_clc_proposal *p)
{
	return SMCR_CLC_V2_EXT_LEN + (size_t)p->eid_cnt * SMCR_CLC_EID_LEN;
}

static size_t smcd_v2_ext_len(const struct smcr_clc_proposal *p)
{
	return SMCR_CLC_SMCD_V2_EXT_LEN + (size_t)p->ism_gid_cnt * SMCR_CLC_GID_CHID_LEN;
}

/* The length Linux's smc_clc_msg_prop_valid() requires. */
static size_t proposal_len(const struct smcr_clc_hdr *h, const struct smcr_clc_proposal *p)
{
	size_t len = SMCR_CLC_PROP_BASE_LEN;

	if (h->version < SMCR_CLC_V2) {
		if (p->smcd_area)
			len += SMCR_CLC_PROP_SMCD_AREA_LEN;
		return len + prefix_area_len(p) + SMCR_CLC_TRL_LEN;
	}
	len += SMCR_CLC_PROP_SMCD_AREA_LEN;
	if (h->typev1 != SMCR_CLC_PATH_NONE)
		len += prefix_area_len(p);
	if (h->typev2 != SMCR_CLC_PATH_NONE)
		len += v2_ext_len(p);
	if (path_has_d(h->typev2))
		len += smcd_v2_ext_len(p);
	return len + SMCR_CLC_TRL_LEN;
}

static size_t fce_len(const struct smcr_clc_hdr *h, const struct smcr_clc_accept *a)
{
	if (h->typev1 == SMCR_CLC_PATH_D && a->fce.release == 0)
		return SMCR_CLC_FCE_V20_SMCD_LEN;
	return SMCR_CLC_FCE_LEN;
}

static size_t accept_len(const struct smcr_clc_hdr *h, const struct smcr_clc_accept *a)
{
	bool smcd = h->typev1 == SMCR_CLC_PATH_D;
	size_t len;

	if (h->version < SMCR_CLC_V2)
		return smcd ? SMCR_CLC_ACC_D_V1_LEN : SMCR_CLC_ACC_R_V1_LEN;
	len = smcd ? SMCR_CLC_ACC_D_V2_LEN : SMCR_CLC_ACC_R_V2_LEN;
	if (!h->flag)
		return len;
	len += fce_len(h, a);
	if (!smcd && h->type == SMCR_CLC_CONFIRM)
		len += SMCR_CLC_GID_LIST_HDR_LEN + (size_t)a->gid_cnt * SMCR_CLC_GID_LEN;
	return len;
}

static size_t decline_len(const struct smcr_clc_hdr *h)
{
	return h->version < SMCR_CLC_V2 ? SMCR_CLC_DECL_V1_LEN : SMCR_CLC_DECL_V2_LEN;
}

/* ---- validation shared by encoder and decoder ---------------------------- */

static enum smcr_clc_err validate_proposal(const struct smcr_clc_hdr *h,
					   const struct smcr_clc_proposal *p)
{
	if (p->ipv6_prefix_cnt > SMCR_CLC_MAX_IPV6_PREFIXES)
		return SMCR_CLC_ERR_COUNT;
	if (h->version < SMCR_CLC_V2) {
		/* RFC form: something must be offered; SMC-D needs its area. */
		if (h->typev1 == SMCR_CLC_PATH_NONE)
			return SMCR_CLC_ERR_PATH;
		if (path_has_d(h->typev1) && !p->smcd_area)
			return SMCR_CLC_ERR_PATH;
		return SMCR_CLC_ERR_NONE;
	}
	if (h->typev2 != SMCR_CLC_PATH_NONE && p->eid_cnt > SMCR_CLC_MAX_EIDS)
		return SMCR_CLC_ERR_COUNT;
	if (path_has_d(h->typev2) && p->ism_gid_cnt > SMCR_CLC_MAX_ISM_GIDS)
		return SMCR_CLC_ERR_COUNT;
	return SMCR_CLC_ERR_NONE;
}

static enum smcr_clc_err validate_hdr(const struct smcr_clc_hdr *h)
{
	if (h->type < SMCR_CLC_PROPOSAL || h->type > SMCR_CLC_DECLINE)
		return SMCR_CLC_ERR_TYPE;
	if (h->version == 0 || h->version > 15)
		return SMCR_CLC_ERR_VERSION;
	if (h->typev1 > 3 || h->typev2 > 3)
		return SMCR_CLC_ERR_PATH;
	return SMCR_CLC_ERR_NONE;
}

enum smcr_clc_err smcr_clc_validate(const struct smcr_clc_msg *msg)
{
	const struct smcr_clc_hdr *h = &msg->hdr;
	enum smcr_clc_err e = validate_hdr(h);

	if (e != SMCR_CLC_ERR_NONE)
		return e;
	switch (h->type) {
	case SMCR_CLC_PROPOSAL:
		return validate_proposal(h, &msg->proposal);
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		/* Linux: the accepted/confirmed path is exactly R or D. */
		if (h->typev1 != SMCR_CLC_PATH_R && h->typev1 != SMCR_CLC_PATH_D)
			return SMCR_CLC_ERR_PATH;
		if (msg->accept.gid_cnt > SMCR_CLC_MAX_CONFIRM_GIDS)
			return SMCR_CLC_ERR_COUNT;
		return SMCR_CLC_ERR_NONE;
	default:
		return SMCR_CLC_ERR_NONE;
	}
}

size_t smcr_clc_encoded_len(const struct smcr_clc_msg *msg)
{
	if (smcr_clc_validate(msg) != SMCR_CLC_ERR_NONE)
		return 0;
	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		return proposal_len(&msg->hdr, &msg->proposal);
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		return accept_len(&msg->hdr, &msg->accept);
	default:
		return decline_len(&msg->hdr);
	}
}

/* ---- encoding ------------------------------------------------------------ */

static uint8_t hdr_byte7(const struct smcr_clc_hdr *h)
{
	uint8_t b = (uint8_t)(h->version << VER_SHIFT);

	switch (h->type) {
	case SMCR_CLC_PROPOSAL:
		if (h->version >= SMCR_CLC_V2)
			b |= (uint8_t)(h->typev2 << TYPEV2_SHIFT);
		return b | h->typev1;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		return b | (h->flag ? FLAG_BIT : 0) | h->typev1;
	default:
		return b | (h->flag ? FLAG_BIT : 0);
	}
}

static void encode_proposal(const struct smcr_clc_hdr *h, const struct smcr_clc_proposal *p,
			    uint8_t *b)
{
	bool linux_form = h->version >= SMCR_CLC_V2 || p->smcd_area;
	size_t pos = SMCR_CLC_PROP_BASE_LEN;
	unsigned i;

	memcpy(b + P_PEER_ID, p->peer_id, sizeof(p->peer_id));
	memcpy(b + P_GID, p->gid, sizeof(p->gid));
	memcpy(b + P_MAC, p->mac, sizeof(p->mac));
	if (linux_form) {
		uint8_t *d = b + P_SMCD;

		smcr_put_be64(d + PD_ISM_GID, p->ism_gid);
		smcr_put_be16(d + PD_CHID, p->ism_chid);
		pos += SMCR_CLC_PROP_SMCD_AREA_LEN;
	}
	if (h->version < SMCR_CLC_V2 || h->typev1 != SMCR_CLC_PATH_NONE) {
		uint8_t *x = b + pos;

		smcr_put_be16(b + P_IPAREA_OFF, (uint16_t)(pos - SMCR_CLC_PROP_BASE_LEN));
		smcr_put_be32(x + PX_V4, p->ipv4_prefix);
		x[PX_V4_LEN] = p->ipv4_prefix_len;
		x[PX_V6_CNT] = p->ipv6_prefix_cnt;
		for (i = 0; i < p->ipv6_prefix_cnt; i++) {
			uint8_t *e = x + PX_V6 + i * SMCR_CLC_IPV6_PREFIX_LEN;

			memcpy(e, p->ipv6_prefix[i].prefix, 16);
			e[16] = p->ipv6_prefix[i].prefix_len;
		}
		pos += prefix_area_len(p);
	}
	if (h->version < SMCR_CLC_V2 || h->typev2 == SMCR_CLC_PATH_NONE)
		return;

	uint8_t *v = b + pos;

	smcr_put_be16(b + P_SMCD + PD_V2_EXT_OFF, (uint16_t)(pos - P_V2_EXT_BASE));
	v[V2_EID_CNT] = p->eid_cnt;
	v[V2_ISM_GID_CNT] = path_has_d(h->typev2) ? p->ism_gid_cnt : 0;
	v[V2_FLAG] = (uint8_t)(p->release << 4 | (p->seid_present ? 1 : 0));
	memcpy(v + V2_ROCE_GID, p->roce_gid, sizeof(p->roce_gid));
	v[V2_MAX_CONNS] = p->max_conns;
	v[V2_MAX_LINKS] = p->max_links;
	smcr_put_be16(v + V2_FEATURES, p->feature_mask);
	for (i = 0; i < p->eid_cnt; i++)
		memcpy(v + V2_EIDS + i * SMCR_CLC_EID_LEN, p->eid[i], SMCR_CLC_EID_LEN);
	pos += v2_ext_len(p);
	if (!path_has_d(h->typev2))
		return;

	uint8_t *d2 = b + pos;

	smcr_put_be16(v + V2_SMCD_OFF, (uint16_t)(d2 - (v + V2_SMCD_BASE)));
	memcpy(d2 + D2_SEID, p->seid, sizeof(p->seid));
	for (i = 0; i < p->ism_gid_cnt; i++) {
		uint8_t *e = d2 + D2_GID_CHID + i * SMCR_CLC_GID_CHID_LEN;

		smcr_put_be64(e, p->ism_gids[i].gid);
		smcr_put_be16(e + 8, p->ism_gids[i].chid);
	}
}

static void encode_fce(const struct smcr_clc_fce *f, uint8_t *x, size_t len)
{
	x[F_FLAGS] = f->v2_direct ? 0x80 : 0;
	x[F_OS_REL] = (uint8_t)((f->os_type & 0x0f) << 4 | (f->release & 0x0f));
	memcpy(x + F_HOSTNAME, f->hostname, sizeof(f->hostname));
	if (len < SMCR_CLC_FCE_LEN)
		return;
	x[F_MAX_CONNS] = f->max_conns;
	x[F_MAX_LINKS] = f->max_links;
	smcr_put_be16(x + F_FEATURES, f->feature_mask);
	smcr_put_be32(x + F_VENDOR, f->vendor_exp_options);
}

static void encode_accept(const struct smcr_clc_hdr *h, const struct smcr_clc_accept *a,
			  uint8_t *b)
{
	unsigned i;

	if (h->typev1 == SMCR_CLC_PATH_D) {
		smcr_put_be64(b + AD_GID, a->ism_gid);
		smcr_put_be64(b + AD_TOKEN, a->dmb_token);
		b[AD_DMBE_IDX] = a->dmbe_idx;
		b[AD_DMBE_SIZE] = (uint8_t)(a->dmbe_size << 4);
		smcr_put_be32(b + AD_LINK_ID, a->link_id);
		if (h->version < SMCR_CLC_V2)
			return;
		smcr_put_be16(b + AD_CHID, a->ism_chid);
		memcpy(b + AD_EID, a->eid, sizeof(a->eid));
		smcr_put_be64(b + AD_GID_EXT, a->gid_ext);
		if (h->flag)
			encode_fce(&a->fce, b + AD_FCE, fce_len(h, a));
		return;
	}
	memcpy(b + A_PEER_ID, a->peer_id, sizeof(a->peer_id));
	memcpy(b + A_GID, a->gid, sizeof(a->gid));
	memcpy(b + A_MAC, a->mac, sizeof(a->mac));
	smcr_put_be24(b + A_QPN, a->qpn);
	smcr_put_be32(b + A_RKEY, a->rmb_rkey);
	b[A_RMBE_IDX] = a->rmbe_idx;
	smcr_put_be32(b + A_TOKEN, a->rmbe_alert_token);
	b[A_SIZE_MTU] = (uint8_t)((a->rmbe_size & 0x0f) << 4 | (a->qp_mtu & 0x0f));
	smcr_put_be64(b + A_DMA_ADDR, a->rmb_dma_addr);
	smcr_put_be24(b + A_PSN, a->psn);
	if (h->version < SMCR_CLC_V2)
		return;
	memcpy(b + A_EID, a->eid, sizeof(a->eid));
	if (a->smcr_features) {
		smcr_put_be32(b + A_SMCR, SMCR_CLC_SMCR_MAGIC);
		smcr_put_be32(b + A_SMCR_FEATURES, a->smcr_features);
	}
	if (!h->flag)
		return;
	encode_fce(&a->fce, b + A_FCE, SMCR_CLC_FCE_LEN);
	if (h->type != SMCR_CLC_CONFIRM)
		return;
	b[A_GID_LIST] = a->gid_cnt;
	for (i = 0; i < a->gid_cnt; i++)
		memcpy(b + A_GID_LIST + SMCR_CLC_GID_LIST_HDR_LEN + i * SMCR_CLC_GID_LEN,
		       a->gid_list[i], SMCR_CLC_GID_LEN);
}

static void encode_decline(const struct smcr_clc_hdr *h, const struct smcr_clc_decline *d,
			   uint8_t *b)
{
	unsigned i;

	memcpy(b + DC_PEER_ID, d->peer_id, sizeof(d->peer_id));
	smcr_put_be32(b + DC_DIAG, d->diag);
	if (h->version < SMCR_CLC_V2)
		return;
	b[DC_OS] = (uint8_t)(d->os_type << 4);
	for (i = 0; i < 4; i++)
		smcr_put_be32(b + DC_DIAG_V2 + 4 * i, d->diag_v2[i]);
}

size_t smcr_clc_encode(const struct smcr_clc_msg *msg, void *buf, size_t cap,
		       enum smcr_clc_err *err)
{
	const struct smcr_clc_hdr *h = &msg->hdr;
	uint8_t *b = buf;
	uint32_t eye = SMCR_CLC_EYECATCHER_R;
	size_t len;

	*err = smcr_clc_validate(msg);
	if (*err != SMCR_CLC_ERR_NONE)
		return 0;
	len = smcr_clc_encoded_len(msg);
	if (len > cap) {
		*err = SMCR_CLC_ERR_BUFFER;
		return 0;
	}
	memset(b, 0, len);
	/* Linux sends "SMCD" only in SMC-D Accept/Confirm. */
	if ((h->type == SMCR_CLC_ACCEPT || h->type == SMCR_CLC_CONFIRM) &&
	    h->typev1 == SMCR_CLC_PATH_D)
		eye = SMCR_CLC_EYECATCHER_D;
	smcr_put_be32(b + HDR_EYE, eye);
	b[HDR_TYPE] = h->type;
	smcr_put_be16(b + HDR_LEN, (uint16_t)len);
	b[HDR_VER] = hdr_byte7(h);
	switch (h->type) {
	case SMCR_CLC_PROPOSAL:
		encode_proposal(h, &msg->proposal, b);
		break;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		encode_accept(h, &msg->accept, b);
		break;
	default:
		encode_decline(h, &msg->decline, b);
		break;
	}
	smcr_put_be32(b + len - SMCR_CLC_TRL_LEN, eye);
	return len;
}

/* ---- framing and decoding ------------------------------------------------ */

static bool eyecatcher_ok(uint32_t v)
{
	return v == SMCR_CLC_EYECATCHER_R || v == SMCR_CLC_EYECATCHER_D;
}

/* Could the first `n` (< 4) bytes still become an eyecatcher? */
static bool eyecatcher_prefix_ok(const uint8_t *b, size_t n)
{
	static const uint8_t r[4] = { 0xE2, 0xD4, 0xC3, 0xD9 }, d[4] = { 0xE2, 0xD4, 0xC3, 0xC4 };

	return memcmp(b, r, n) == 0 || memcmp(b, d, n) == 0;
}

static void type_len_bounds(uint8_t type, size_t *min, size_t *max)
{
	switch (type) {
	case SMCR_CLC_PROPOSAL:
		*min = SMCR_CLC_PROP_BASE_LEN + SMCR_CLC_PROP_PREFIX_LEN + SMCR_CLC_TRL_LEN;
		*max = SMCR_CLC_PROP_MAX_LEN;
		break;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		*min = SMCR_CLC_ACC_D_V1_LEN;
		*max = SMCR_CLC_ACC_MAX_LEN;
		break;
	default:
		*min = SMCR_CLC_DECL_V1_LEN;
		*max = SMCR_CLC_DECL_V2_LEN;
		break;
	}
}

static enum smcr_wire_status clc_invalid(enum smcr_clc_err *err, enum smcr_clc_err why)
{
	*err = why;
	return SMCR_WIRE_INVALID;
}

enum smcr_wire_status smcr_clc_frame(const void *buf, size_t avail, size_t *len,
				     enum smcr_clc_err *err)
{
	const uint8_t *b = buf;
	size_t min, max, msg_len;

	*err = SMCR_CLC_ERR_NONE;
	if (avail < 4 && !eyecatcher_prefix_ok(b, avail))
		return clc_invalid(err, SMCR_CLC_ERR_EYECATCHER);
	if (avail >= 4 && !eyecatcher_ok(smcr_get_be32(b + HDR_EYE)))
		return clc_invalid(err, SMCR_CLC_ERR_EYECATCHER);
	if (avail > HDR_TYPE && (b[HDR_TYPE] < SMCR_CLC_PROPOSAL || b[HDR_TYPE] > SMCR_CLC_DECLINE))
		return clc_invalid(err, SMCR_CLC_ERR_TYPE);
	if (avail < SMCR_CLC_HDR_LEN) {
		*len = SMCR_CLC_HDR_LEN;
		return SMCR_WIRE_NEED_MORE;
	}
	if ((b[HDR_VER] >> VER_SHIFT) == 0)
		return clc_invalid(err, SMCR_CLC_ERR_VERSION);
	type_len_bounds(b[HDR_TYPE], &min, &max);
	msg_len = smcr_get_be16(b + HDR_LEN);
	if (msg_len < min)
		return clc_invalid(err, SMCR_CLC_ERR_TOO_SHORT);
	if (msg_len > max)
		return clc_invalid(err, SMCR_CLC_ERR_TOO_LONG);
	*len = msg_len;
	return avail < msg_len ? SMCR_WIRE_NEED_MORE : SMCR_WIRE_OK;
}

int smcr_clc_peek_type(const void *buf, size_t avail)
{
	enum smcr_clc_err err;
	size_t len;

	if (smcr_clc_frame(buf, avail, &len, &err) == SMCR_WIRE_INVALID)
		return -1;
	return avail < SMCR_CLC_HDR_LEN ? 0 : ((const uint8_t *)buf)[HDR_TYPE];
}

/* The message is b[0..end) without trailer; every read checks against it. */
struct cursor_area {
	const uint8_t *b;
	size_t end;
};

static bool fits(const struct cursor_area *m, size_t off, size_t n)
{
	return off <= m->end && n <= m->end - off;
}

static enum smcr_clc_err decode_prefix_area(const struct cursor_area *m, size_t pos,
					    struct smcr_clc_proposal *p)
{
	const uint8_t *x = m->b + pos;
	unsigned i;

	if (!fits(m, pos, SMCR_CLC_PROP_PREFIX_LEN))
		return SMCR_CLC_ERR_OFFSET;
	p->ipv4_prefix = smcr_get_be32(x + PX_V4);
	p->ipv4_prefix_len = x[PX_V4_LEN];
	p->ipv6_prefix_cnt = x[PX_V6_CNT];
	if (p->ipv6_prefix_cnt > SMCR_CLC_MAX_IPV6_PREFIXES)
		return SMCR_CLC_ERR_COUNT;
	if (!fits(m, pos, prefix_area_len(p)))
		return SMCR_CLC_ERR_LENGTH;
	for (i = 0; i < p->ipv6_prefix_cnt; i++) {
		const uint8_t *e = x + PX_V6 + i * SMCR_CLC_IPV6_PREFIX_LEN;

		memcpy(p->ipv6_prefix[i].prefix, e, 16);
		p->ipv6_prefix[i].prefix_len = e[16];
	}
	return SMCR_CLC_ERR_NONE;
}

static enum smcr_clc_err decode_smcd_v2_ext(const struct cursor_area *m, size_t pos,
					    struct smcr_clc_proposal *p)
{
	const uint8_t *d2 = m->b + pos;
	unsigned i;

	if (p->ism_gid_cnt > SMCR_CLC_MAX_ISM_GIDS)
		return SMCR_CLC_ERR_COUNT;
	if (!fits(m, pos, smcd_v2_ext_len(p)))
		return SMCR_CLC_ERR_OFFSET;
	memcpy(p->seid, d2 + D2_SEID, sizeof(p->seid));
	for (i = 0; i < p->ism_gid_cnt; i++) {
		const uint8_t *e = d2 + D2_GID_CHID + i * SMCR_CLC_GID_CHID_LEN;

		p->ism_gids[i].gid = smcr_get_be64(e);
		p->ism_gids[i].chid = smcr_get_be16(e + 8);
	}
	return SMCR_CLC_ERR_NONE;
}

static enum smcr_clc_err decode_v2_ext(const struct cursor_area *m, const struct smcr_clc_hdr *h,
				       struct smcr_clc_proposal *p)
{
	size_t pos = P_V2_EXT_BASE + (size_t)smcr_get_be16(m->b + P_SMCD + PD_V2_EXT_OFF);
	const uint8_t *v = m->b + pos;
	size_t off;
	unsigned i;

	/* Linux: 0 means "no extension"; it cannot lie past the largest prefix area. */
	if (pos == P_V2_EXT_BASE || pos > P_V2_EXT_BASE + V2_EXT_OFF_MAX)
		return SMCR_CLC_ERR_OFFSET;
	if (!fits(m, pos, SMCR_CLC_V2_EXT_LEN))
		return SMCR_CLC_ERR_OFFSET;
	p->eid_cnt = v[V2_EID_CNT];
	p->ism_gid_cnt = v[V2_ISM_GID_CNT];
	p->release = v[V2_FLAG] >> 4;
	p->seid_present = (v[V2_FLAG] & 1) != 0;
	memcpy(p->roce_gid, v + V2_ROCE_GID, sizeof(p->roce_gid));
	p->max_conns = v[V2_MAX_CONNS];
	p->max_links = v[V2_MAX_LINKS];
	p->feature_mask = smcr_get_be16(v + V2_FEATURES);
	if (p->eid_cnt > SMCR_CLC_MAX_EIDS)
		return SMCR_CLC_ERR_COUNT;
	if (!fits(m, pos, v2_ext_len(p)))
		return SMCR_CLC_ERR_OFFSET;
	for (i = 0; i < p->eid_cnt; i++)
		memcpy(p->eid[i], v + V2_EIDS + i * SMCR_CLC_EID_LEN, SMCR_CLC_EID_LEN);
	if (!path_has_d(h->typev2)) {
		p->ism_gid_cnt = 0; /* not meaningful without an SMC-Dv2 offer */
		return SMCR_CLC_ERR_NONE;
	}
	off = smcr_get_be16(v + V2_SMCD_OFF);
	if (off == 0 || off > SMCD_V2_EXT_OFF_MAX)
		return SMCR_CLC_ERR_OFFSET;
	return decode_smcd_v2_ext(m, pos + V2_SMCD_BASE + off, p);
}

static enum smcr_clc_err decode_proposal(const struct cursor_area *m,
					 const struct smcr_clc_hdr *h,
					 struct smcr_clc_proposal *p)
{
	size_t iparea = smcr_get_be16(m->b + P_IPAREA_OFF);
	enum smcr_clc_err e;

	memcpy(p->peer_id, m->b + P_PEER_ID, sizeof(p->peer_id));
	memcpy(p->gid, m->b + P_GID, sizeof(p->gid));
	memcpy(p->mac, m->b + P_MAC, sizeof(p->mac));
	if (h->version < SMCR_CLC_V2) {
		if (h->typev1 == SMCR_CLC_PATH_NONE)
			return SMCR_CLC_ERR_PATH;
		/* Linux: iparea_offset <= 40, and exactly 40 if SMC-D is offered. */
		if (iparea > SMCR_CLC_PROP_SMCD_AREA_LEN)
			return SMCR_CLC_ERR_OFFSET;
		if (path_has_d(h->typev1) && iparea != SMCR_CLC_PROP_SMCD_AREA_LEN)
			return SMCR_CLC_ERR_OFFSET;
		p->smcd_area = iparea == SMCR_CLC_PROP_SMCD_AREA_LEN;
	} else {
		/*
		 * Linux checks iparea_offset <= 40 whatever is offered, and its v2
		 * length formula places the prefix area right after the 40-byte
		 * area, so an SMC-Rv1/SMC-Dv1 offer needs exactly 40.
		 */
		p->smcd_area = true;
		if (iparea > SMCR_CLC_PROP_SMCD_AREA_LEN)
			return SMCR_CLC_ERR_OFFSET;
		if (h->typev1 != SMCR_CLC_PATH_NONE && iparea != SMCR_CLC_PROP_SMCD_AREA_LEN)
			return SMCR_CLC_ERR_OFFSET;
	}
	if (p->smcd_area) {
		if (!fits(m, P_SMCD, SMCR_CLC_PROP_SMCD_AREA_LEN))
			return SMCR_CLC_ERR_LENGTH;
		p->ism_gid = smcr_get_be64(m->b + P_SMCD + PD_ISM_GID);
		p->ism_chid = smcr_get_be16(m->b + P_SMCD + PD_CHID);
	}
	if (h->version < SMCR_CLC_V2 || h->typev1 != SMCR_CLC_PATH_NONE) {
		e = decode_prefix_area(m, SMCR_CLC_PROP_BASE_LEN + iparea, p);
		if (e != SMCR_CLC_ERR_NONE)
			return e;
	}
	if (h->version >= SMCR_CLC_V2 && h->typev2 != SMCR_CLC_PATH_NONE) {
		e = decode_v2_ext(m, h, p);
		if (e != SMCR_CLC_ERR_NONE)
			return e;
	}
	/* v1 keeps any iparea_offset <= 40: the formula uses the real one. */
	if (h->version < SMCR_CLC_V2) {
		size_t want = SMCR_CLC_PROP_BASE_LEN + iparea + prefix_area_len(p);

		return want == m->end ? SMCR_CLC_ERR_NONE : SMCR_CLC_ERR_LENGTH;
	}
	return proposal_len(h, p) == h->length ? SMCR_CLC_ERR_NONE : SMCR_CLC_ERR_LENGTH;
}

static void decode_fce(const uint8_t *x, size_t len, struct smcr_clc_fce *f)
{
	f->v2_direct = (x[F_FLAGS] & 0x80) != 0;
	f->os_type = x[F_OS_REL] >> 4;
	f->release = x[F_OS_REL] & 0x0f;
	memcpy(f->hostname, x + F_HOSTNAME, sizeof(f->hostname));
	if (len < SMCR_CLC_FCE_LEN)
		return;
	f->max_conns = x[F_MAX_CONNS];
	f->max_links = x[F_MAX_LINKS];
	f->feature_mask = smcr_get_be16(x + F_FEATURES);
	f->vendor_exp_options = smcr_get_be32(x + F_VENDOR);
}

/* An SMC-D Accept or Confirm's own fields. */
static enum smcr_clc_err decode_accept_d(const struct cursor_area *m,
					 const struct smcr_clc_hdr *h, struct smcr_clc_accept *a)
{
	const uint8_t *b = m->b;

	if (h->length < (h->version < SMCR_CLC_V2 ? SMCR_CLC_ACC_D_V1_LEN : SMCR_CLC_ACC_D_V2_LEN))
		return SMCR_CLC_ERR_LENGTH;
	a->ism_gid = smcr_get_be64(b + AD_GID);
	a->dmb_token = smcr_get_be64(b + AD_TOKEN);
	a->dmbe_idx = b[AD_DMBE_IDX];
	a->dmbe_size = b[AD_DMBE_SIZE] >> 4;
	a->link_id = smcr_get_be32(b + AD_LINK_ID);
	if (h->version < SMCR_CLC_V2)
		return SMCR_CLC_ERR_NONE;
	a->ism_chid = smcr_get_be16(b + AD_CHID);
	memcpy(a->eid, b + AD_EID, sizeof(a->eid));
	a->gid_ext = smcr_get_be64(b + AD_GID_EXT);
	if (h->flag) {
		/* FCE length depends on its own release field. */
		if (!fits(m, AD_FCE, 2))
			return SMCR_CLC_ERR_LENGTH;
		a->fce.release = b[AD_FCE + F_OS_REL] & 0x0f;
		if (!fits(m, AD_FCE, fce_len(h, a)))
			return SMCR_CLC_ERR_LENGTH;
		decode_fce(b + AD_FCE, fce_len(h, a), &a->fce);
	}
	return SMCR_CLC_ERR_NONE;
}

/* A v2 SMC-R Confirm's list of the server's further GIDs. */
static enum smcr_clc_err decode_confirm_gids(const struct cursor_area *m,
					     struct smcr_clc_accept *a)
{
	const uint8_t *b = m->b;

	if (!fits(m, A_GID_LIST, SMCR_CLC_GID_LIST_HDR_LEN))
		return SMCR_CLC_ERR_LENGTH;
	a->gid_cnt = b[A_GID_LIST];
	if (a->gid_cnt > SMCR_CLC_MAX_CONFIRM_GIDS)
		return SMCR_CLC_ERR_COUNT;
	for (unsigned i = 0; i < a->gid_cnt && fits(m, A_GID_LIST + 4 + i * 16, 16); i++)
		memcpy(a->gid_list[i], b + A_GID_LIST + 4 + i * 16, 16);
	return SMCR_CLC_ERR_NONE;
}

/* An SMC-R Accept or Confirm's own fields. */
static enum smcr_clc_err decode_accept_r(const struct cursor_area *m,
					 const struct smcr_clc_hdr *h, struct smcr_clc_accept *a)
{
	const uint8_t *b = m->b;

	if (h->length < (h->version < SMCR_CLC_V2 ? SMCR_CLC_ACC_R_V1_LEN : SMCR_CLC_ACC_R_V2_LEN))
		return SMCR_CLC_ERR_LENGTH;
	memcpy(a->peer_id, b + A_PEER_ID, sizeof(a->peer_id));
	memcpy(a->gid, b + A_GID, sizeof(a->gid));
	memcpy(a->mac, b + A_MAC, sizeof(a->mac));
	a->qpn = smcr_get_be24(b + A_QPN);
	a->rmb_rkey = smcr_get_be32(b + A_RKEY);
	a->rmbe_idx = b[A_RMBE_IDX];
	a->rmbe_alert_token = smcr_get_be32(b + A_TOKEN);
	a->rmbe_size = b[A_SIZE_MTU] >> 4;
	a->qp_mtu = b[A_SIZE_MTU] & 0x0f;
	a->rmb_dma_addr = smcr_get_be64(b + A_DMA_ADDR);
	a->psn = smcr_get_be24(b + A_PSN);
	if (h->version < SMCR_CLC_V2)
		return SMCR_CLC_ERR_NONE;
	memcpy(a->eid, b + A_EID, sizeof(a->eid));
	if (smcr_get_be32(b + A_SMCR) == SMCR_CLC_SMCR_MAGIC)
		a->smcr_features = smcr_get_be32(b + A_SMCR_FEATURES);
	if (!h->flag)
		return SMCR_CLC_ERR_NONE;
	if (!fits(m, A_FCE, SMCR_CLC_FCE_LEN))
		return SMCR_CLC_ERR_LENGTH;
	decode_fce(b + A_FCE, SMCR_CLC_FCE_LEN, &a->fce);
	return h->type == SMCR_CLC_CONFIRM ? decode_confirm_gids(m, a) : SMCR_CLC_ERR_NONE;
}

static enum smcr_clc_err decode_accept(const struct cursor_area *m, const struct smcr_clc_hdr *h,
				       struct smcr_clc_accept *a)
{
	enum smcr_clc_err err;

	if (h->typev1 != SMCR_CLC_PATH_R && h->typev1 != SMCR_CLC_PATH_D)
		return SMCR_CLC_ERR_PATH;
	/* Fixed part first: the bounds below only need the length checked at the end. */
	err = h->typev1 == SMCR_CLC_PATH_D ? decode_accept_d(m, h, a) : decode_accept_r(m, h, a);
	if (err != SMCR_CLC_ERR_NONE)
		return err;
	return accept_len(h, a) == h->length ? SMCR_CLC_ERR_NONE : SMCR_CLC_ERR_LENGTH;
}

static enum smcr_clc_err decode_decline(const struct smcr_clc_hdr *h, const uint8_t *b,
					struct smcr_clc_decline *d)
{
	unsigned i;

	if (h->length != decline_len(h))
		return SMCR_CLC_ERR_LENGTH;
	memcpy(d->peer_id, b + DC_PEER_ID, sizeof(d->peer_id));
	d->diag = smcr_get_be32(b + DC_DIAG);
	if (h->version < SMCR_CLC_V2)
		return SMCR_CLC_ERR_NONE;
	d->os_type = b[DC_OS] >> 4;
	for (i = 0; i < 4; i++)
		d->diag_v2[i] = smcr_get_be32(b + DC_DIAG_V2 + 4 * i);
	return SMCR_CLC_ERR_NONE;
}

static void decode_hdr(const uint8_t *b, struct smcr_clc_hdr *h)
{
	uint8_t v = b[HDR_VER];

	h->type = b[HDR_TYPE];
	h->length = smcr_get_be16(b + HDR_LEN);
	h->version = v >> VER_SHIFT;
	h->smcd_eyecatcher = smcr_get_be32(b + HDR_EYE) == SMCR_CLC_EYECATCHER_D;
	h->typev1 = v & 0x03;
	if (h->type == SMCR_CLC_PROPOSAL) {
		/* Bits 3-2 are typev2 in SMCv2 Proposals, reserved in v1 ones. */
		h->typev2 = h->version >= SMCR_CLC_V2 ? (v >> TYPEV2_SHIFT) & 0x03
						      : SMCR_CLC_PATH_NONE;
	} else {
		h->typev2 = SMCR_CLC_PATH_NONE;
		h->flag = (v & FLAG_BIT) != 0;
		if (h->type == SMCR_CLC_DECLINE)
			h->typev1 = 0;
	}
}

enum smcr_wire_status smcr_clc_decode(const void *buf, size_t avail, struct smcr_clc_msg *msg,
				      size_t *len, enum smcr_clc_err *err)
{
	const uint8_t *b = buf;
	enum smcr_wire_status st = smcr_clc_frame(buf, avail, len, err);
	struct cursor_area m;
	enum smcr_clc_err e;

	if (st != SMCR_WIRE_OK)
		return st;
	memset(msg, 0, sizeof(*msg));
	decode_hdr(b, &msg->hdr);
	if (!eyecatcher_ok(smcr_get_be32(b + *len - SMCR_CLC_TRL_LEN)))
		return clc_invalid(err, SMCR_CLC_ERR_TRAILER);
	m.b = b;
	m.end = *len - SMCR_CLC_TRL_LEN;
	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		e = decode_proposal(&m, &msg->hdr, &msg->proposal);
		break;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		e = decode_accept(&m, &msg->hdr, &msg->accept);
		break;
	default:
		e = decode_decline(&msg->hdr, b, &msg->decline);
		break;
	}
	if (e != SMCR_CLC_ERR_NONE)
		return clc_invalid(err, e);
	return SMCR_WIRE_OK;
}
