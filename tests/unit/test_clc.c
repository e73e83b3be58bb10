// SPDX-License-Identifier: MIT
/*
 * CLC: kernel-captured messages decode to the right fields and re-encode to the
 * same bytes; hand-written bytes from the reference layouts decode; every form
 * round-trips; truncated, oversized and hostile messages are rejected with a
 * reason; the stream decoder asks for more bytes on every valid prefix.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "smcr/clc.h"
#include "testdata.h"

/* Decode from an exactly sized heap copy so ASan sees any over-read. */
static enum smcr_wire_status decode_exact(const uint8_t *bytes, size_t n, struct smcr_clc_msg *m,
					  size_t *len, enum smcr_clc_err *err)
{
	uint8_t *copy = malloc(n ? n : 1);
	enum smcr_wire_status st;

	assert_non_null(copy);
	memcpy(copy, bytes, n);
	st = smcr_clc_decode(copy, n, m, len, err);
	free(copy);
	return st;
}

static void expect_ok(const uint8_t *bytes, size_t n, struct smcr_clc_msg *m)
{
	enum smcr_clc_err err = SMCR_CLC_ERR_NONE;
	size_t len = 0;

	assert_int_equal(decode_exact(bytes, n, m, &len, &err), SMCR_WIRE_OK);
	assert_int_equal(err, SMCR_CLC_ERR_NONE);
	assert_int_equal(len, n);
}

#define expect_invalid(b, n, why) expect_invalid_at(b, n, why, __LINE__)

static void expect_invalid_at(const uint8_t *bytes, size_t n, enum smcr_clc_err why, int line)
{
	struct smcr_clc_msg m;
	enum smcr_clc_err err = SMCR_CLC_ERR_NONE;
	size_t len = 0;

	if (decode_exact(bytes, n, &m, &len, &err) != SMCR_WIRE_INVALID || err != why)
		fail_msg("line %d: want INVALID/%s, got err %d (%s)", line, smcr_clc_err_str(why),
			 err, smcr_clc_err_str(err));
}

/* Encoding the decoded message must give back exactly the input bytes. */
static void expect_reencodes(const struct smcr_clc_msg *m, const uint8_t *bytes, size_t n)
{
	uint8_t out[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;

	assert_int_equal(smcr_clc_encode(m, out, sizeof(out), &err), n);
	assert_memory_equal(out, bytes, n);
}

static const uint8_t zero16[16];
static const uint8_t gid_client[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1 };
static const uint8_t gid_server[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2 };
static const uint8_t peer_id_ab[8] = { 0xfc, 0x1d, 0xee, 0x5a, 0x95, 0x4e, 0x6f, 0xde };
static const uint8_t peer_id_c[8] = { 0x2d, 0xfe, 0xc2, 0x33, 0x80, 0x7d, 0x42, 0x2e };
static const uint8_t eid_rxe[32] = "RXE-VM                          ";
static const uint8_t host_rxe[32] = "rxe-vm                          ";

/* ---- kernel captures ------------------------------------------------------ */

static void kernel_proposal_v2(void **state)
{
	uint8_t b[1024];
	size_t n = load_bin("clc-proposal-v2.bin", b, sizeof(b));
	struct smcr_clc_msg m;
	const struct smcr_clc_proposal *p = &m.proposal;

	assert_int_equal(n, 156);
	expect_ok(b, n, &m);
	assert_int_equal(m.hdr.type, SMCR_CLC_PROPOSAL);
	assert_int_equal(m.hdr.length, 156);
	assert_int_equal(m.hdr.version, 2);
	assert_int_equal(m.hdr.typev2, SMCR_CLC_PATH_R);
	assert_int_equal(m.hdr.typev1, SMCR_CLC_PATH_NONE);
	assert_memory_equal(p->peer_id, zero16, 8);
	assert_true(p->smcd_area);
	assert_int_equal(p->ism_gid, 0);
	assert_int_equal(p->eid_cnt, 1);
	assert_int_equal(p->release, 1);
	assert_false(p->seid_present);
	assert_memory_equal(p->roce_gid, gid_client, 16);
	assert_int_equal(p->max_conns, 255);
	assert_int_equal(p->max_links, 2);
	assert_int_equal(p->feature_mask, 1);
	assert_memory_equal(p->eid[0], eid_rxe, 32);
	expect_reencodes(&m, b, n);
	(void)state;
}

static void check_accept_common(const struct smcr_clc_accept *a, bool server)
{
	static const uint8_t mac_s[6] = { 0x2a, 0xcb, 0x86, 0xc8, 0x48, 0x02 };
	static const uint8_t mac_c[6] = { 0xee, 0x5a, 0x95, 0x4e, 0x6f, 0xde };

	assert_memory_equal(a->peer_id, peer_id_ab, 8);
	assert_memory_equal(a->gid, server ? gid_server : gid_client, 16);
	assert_memory_equal(a->mac, server ? mac_s : mac_c, 6);
	assert_int_equal(a->qpn, 0x11);
	assert_int_equal(a->rmb_rkey, server ? 0x34d : 0x323);
	assert_int_equal(a->rmbe_idx, 1);
	assert_int_equal(a->rmbe_size, 2);
	assert_int_equal(smcr_clc_rmbe_size(a->rmbe_size), 65536);
	assert_int_equal(a->qp_mtu, 3);
	assert_int_equal(a->rmb_dma_addr, server ? 0xffff888008190000ull : 0xffff888009160000ull);
	assert_int_equal(a->psn, server ? 0x79e179 : 0x91bcd4);
	assert_memory_equal(a->eid, eid_rxe, 32);
}

static void check_fce(const struct smcr_clc_fce *f)
{
	assert_true(f->v2_direct);
	assert_int_equal(f->os_type, SMCR_CLC_OS_LINUX);
	assert_int_equal(f->release, 1);
	assert_memory_equal(f->hostname, host_rxe, 32);
	assert_int_equal(f->max_conns, 255);
	assert_int_equal(f->max_links, 2);
	assert_int_equal(f->feature_mask, 1);
	assert_int_equal(f->vendor_exp_options, 0);
}

static void kernel_accept_confirm_v2(void **state)
{
	uint8_t b[1024];
	size_t n;
	struct smcr_clc_msg m;

	n = load_bin("clc-accept-v2.bin", b, sizeof(b));
	assert_int_equal(n, 160);
	expect_ok(b, n, &m);
	assert_int_equal(m.hdr.type, SMCR_CLC_ACCEPT);
	assert_int_equal(m.hdr.version, 2);
	assert_true(m.hdr.flag);
	assert_int_equal(m.hdr.typev1, SMCR_CLC_PATH_R);
	assert_int_equal(m.accept.smcr_features, 0); /* Linux's reserved bytes */
	check_accept_common(&m.accept, true);
	assert_int_equal(m.accept.rmbe_alert_token, 1);
	check_fce(&m.accept.fce);
	expect_reencodes(&m, b, n);

	n = load_bin("clc-confirm-v2.bin", b, sizeof(b));
	assert_int_equal(n, 180);
	expect_ok(b, n, &m);
	assert_int_equal(m.hdr.type, SMCR_CLC_CONFIRM);
	assert_true(m.hdr.flag);
	check_accept_common(&m.accept, false);
	assert_int_equal(m.accept.rmbe_alert_token, 2);
	check_fce(&m.accept.fce);
	assert_int_equal(m.accept.gid_cnt, 1);
	assert_memory_equal(m.accept.gid_list[0], gid_client, 16);
	expect_reencodes(&m, b, n);
	(void)state;
}

static void kernel_accept_confirm_reuse(void **state)
{
	uint8_t b[1024];
	size_t n;
	struct smcr_clc_msg m;

	n = load_bin("clc-accept-v2-reuse.bin", b, sizeof(b));
	assert_int_equal(n, 108);
	expect_ok(b, n, &m);
	assert_int_equal(m.hdr.type, SMCR_CLC_ACCEPT);
	assert_false(m.hdr.flag);
	check_accept_common(&m.accept, true);
	assert_int_equal(m.accept.rmbe_alert_token, 3);
	expect_reencodes(&m, b, n);

	n = load_bin("clc-confirm-v2-reuse.bin", b, sizeof(b));
	assert_int_equal(n, 108);
	expect_ok(b, n, &m);
	assert_int_equal(m.hdr.type, SMCR_CLC_CONFIRM);
	assert_false(m.hdr.flag);
	check_accept_common(&m.accept, false);
	assert_int_equal(m.accept.rmbe_alert_token, 4);
	expect_reencodes(&m, b, n);
	(void)state;
}

static void kernel_declines(void **state)
{
	uint8_t b[1024];
	size_t n;
	struct smcr_clc_msg m;

	n = load_bin("clc-decline.bin", b, sizeof(b));
	assert_int_equal(n, 44);
	expect_ok(b, n, &m);
	assert_int_equal(m.hdr.type, SMCR_CLC_DECLINE);
	assert_int_equal(m.hdr.version, 2);
	assert_false(m.hdr.flag);
	assert_memory_equal(m.decline.peer_id, peer_id_c, 8);
	assert_int_equal(m.decline.diag, SMCR_CLC_DECL_NOSMCRDEV);
	assert_string_equal(smcr_clc_decl_name(m.decline.diag), "NOSMCRDEV");
	assert_int_equal(m.decline.os_type, SMCR_CLC_OS_LINUX);
	expect_reencodes(&m, b, n);

	n = load_bin("clc-decline-v1.bin", b, sizeof(b));
	assert_int_equal(n, 28);
	expect_ok(b, n, &m);
	assert_int_equal(m.hdr.version, 1);
	assert_int_equal(m.decline.diag, SMCR_CLC_DECL_NOSMCDEV);
	assert_int_equal(m.decline.os_type, 0);
	expect_reencodes(&m, b, n);
	(void)state;
}

/* ---- hand-written bytes laid out as protocol.md §2.4-2.6 describes them ----- */

/* Linux client, SMC-Rv1 only, source 10.1.2.3/24: 92 bytes, byte 7 0x28. */
static const uint8_t linux_v1_only[92] = {
	0xe2, 0xd4, 0xc3, 0xd9, 0x01, 0x00, 0x5c, 0x28,
	1, 2, 3, 4, 5, 6, 7, 8,                                           /* peer id */
	0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42,          /* gid */
	0x02, 0, 0, 0, 0, 0x42,                                           /* mac */
	0x00, 0x28,                                                       /* iparea 40 */
	[80] = 0x0a, 0x01, 0x02, 0x00, 0x18, 0, 0, 0,                     /* 10.1.2.0/24 */
	[88] = 0xe2, 0xd4, 0xc3, 0xd9,
};

/* RFC 7609 v1 form, IPv6 with two prefixes: 40 + 8 + 34 + 4 = 86 bytes. */
static const uint8_t rfc_v1_ipv6[86] = {
	0xe2, 0xd4, 0xc3, 0xd9, 0x01, 0x00, 0x56, 0x10,
	[8] = 9, 9, 9, 9, 9, 9, 9, 9,
	[38] = 0x00, 0x00,
	[40] = 0, 0, 0, 0, 0, 0, 0, 2,
	[48] = 0x20, 0x01, 0x0d, 0xb8, [64] = 64,
	[65] = 0xfd, 0x00, [81] = 48,
	[82] = 0xe2, 0xd4, 0xc3, 0xd9,
};

/* SMC-R v1 Accept, first contact (protocol.md §2.5): 68 bytes, byte 7 0x18. */
static const uint8_t accept_v1[68] = {
	0xe2, 0xd4, 0xc3, 0xd9, 0x02, 0x00, 0x44, 0x18,
	[8] = 0xaa, 0xbb, 1, 2, 3, 4, 5, 6,
	[16] = 0xfe, 0x80, [31] = 0x01,
	[32] = 0x02, 0x11, 0x22, 0x33, 0x44, 0x55,
	[38] = 0x00, 0x01, 0x07,                 /* qpn 0x107 */
	[41] = 0xde, 0xad, 0xbe, 0xef,           /* rkey */
	[45] = 1,                                /* rmbe idx */
	[46] = 0, 0, 0, 5,                       /* token */
	[50] = 0x25,                             /* size 2, mtu 5 */
	[52] = 0, 0, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x9a,
	[61] = 0xab, 0xcd, 0xef,
	[64] = 0xe2, 0xd4, 0xc3, 0xd9,
};

static void reference_bytes(void **state)
{
	struct smcr_clc_msg m;
	static const uint8_t v6a[16] = { 0x20, 0x01, 0x0d, 0xb8 };
	static const uint8_t v6b[16] = { 0xfd, 0x00 };

	expect_ok(linux_v1_only, sizeof(linux_v1_only), &m);
	assert_int_equal(m.hdr.version, 2);
	assert_int_equal(m.hdr.typev2, SMCR_CLC_PATH_NONE);
	assert_int_equal(m.hdr.typev1, SMCR_CLC_PATH_R);
	assert_int_equal(m.proposal.ipv4_prefix, 0x0a010200);
	assert_int_equal(m.proposal.ipv4_prefix_len, 24);
	assert_int_equal(m.proposal.ipv6_prefix_cnt, 0);
	assert_int_equal(m.proposal.mac[5], 0x42);
	expect_reencodes(&m, linux_v1_only, sizeof(linux_v1_only));

	expect_ok(rfc_v1_ipv6, sizeof(rfc_v1_ipv6), &m);
	assert_int_equal(m.hdr.version, 1);
	assert_false(m.proposal.smcd_area);
	assert_int_equal(m.proposal.ipv6_prefix_cnt, 2);
	assert_memory_equal(m.proposal.ipv6_prefix[0].prefix, v6a, 16);
	assert_int_equal(m.proposal.ipv6_prefix[0].prefix_len, 64);
	assert_memory_equal(m.proposal.ipv6_prefix[1].prefix, v6b, 16);
	assert_int_equal(m.proposal.ipv6_prefix[1].prefix_len, 48);
	expect_reencodes(&m, rfc_v1_ipv6, sizeof(rfc_v1_ipv6));

	expect_ok(accept_v1, sizeof(accept_v1), &m);
	assert_int_equal(m.hdr.version, 1);
	assert_true(m.hdr.flag);
	assert_int_equal(m.accept.qpn, 0x107);
	assert_int_equal(m.accept.rmb_rkey, 0xdeadbeef);
	assert_int_equal(m.accept.rmbe_alert_token, 5);
	assert_int_equal(m.accept.rmbe_size, 2);
	assert_int_equal(m.accept.qp_mtu, 5);
	assert_int_equal(m.accept.rmb_dma_addr, 0x7f123456789aull);
	assert_int_equal(m.accept.psn, 0xabcdef);
	expect_reencodes(&m, accept_v1, sizeof(accept_v1));
	(void)state;
}

/* ---- round trips ---------------------------------------------------------- */

static void round_trip(const struct smcr_clc_msg *in, size_t want_len)
{
	uint8_t b[SMCR_CLC_MAX_LEN], b2[SMCR_CLC_MAX_LEN];
	struct smcr_clc_msg out;
	enum smcr_clc_err err;
	size_t n = smcr_clc_encode(in, b, sizeof(b), &err);

	assert_int_equal(err, SMCR_CLC_ERR_NONE);
	assert_int_equal(n, want_len);
	assert_int_equal(smcr_clc_encoded_len(in), n);
	expect_ok(b, n, &out);
	assert_int_equal(out.hdr.type, in->hdr.type);
	assert_int_equal(out.hdr.version, in->hdr.version);
	assert_int_equal(out.hdr.length, n);
	assert_int_equal(smcr_clc_encode(&out, b2, sizeof(b2), &err), n);
	assert_memory_equal(b, b2, n);
	/* Too small an output buffer is refused, not overrun. */
	assert_int_equal(smcr_clc_encode(in, b2, n - 1, &err), 0);
	assert_int_equal(err, SMCR_CLC_ERR_BUFFER);
}

static void fill_proposal(struct smcr_clc_msg *m, uint8_t version, uint8_t typev1,
			  uint8_t typev2, uint8_t n6, uint8_t neid, uint8_t nism)
{
	struct smcr_clc_proposal *p = &m->proposal;
	unsigned i;

	memset(m, 0, sizeof(*m));
	m->hdr.type = SMCR_CLC_PROPOSAL;
	m->hdr.version = version;
	m->hdr.typev1 = typev1;
	m->hdr.typev2 = typev2;
	memset(p->peer_id, 0x11, 8);
	memset(p->gid, 0x22, 16);
	memset(p->mac, 0x33, 6);
	p->smcd_area = version >= 2 || typev1 == SMCR_CLC_PATH_D || typev1 == SMCR_CLC_PATH_BOTH;
	p->ism_gid = 0x0102030405060708ull;
	p->ism_chid = 0xffff;
	p->ipv4_prefix = n6 ? 0 : 0x7f000000;
	p->ipv4_prefix_len = 8;
	p->ipv6_prefix_cnt = n6;
	for (i = 0; i < n6 && i < SMCR_CLC_MAX_IPV6_PREFIXES; i++) {
		memset(p->ipv6_prefix[i].prefix, (int)(0xa0 + i), 16);
		p->ipv6_prefix[i].prefix_len = (uint8_t)(64 + i);
	}
	p->eid_cnt = neid;
	p->ism_gid_cnt = nism;
	p->release = 1;
	p->seid_present = nism > 0;
	memcpy(p->roce_gid, gid_client, 16);
	p->max_conns = 255;
	p->max_links = 2;
	p->feature_mask = 1;
	for (i = 0; i < neid; i++)
		memset(p->eid[i], (int)('A' + i), 32);
	memset(p->seid, 'S', 32);
	for (i = 0; i < nism; i++) {
		p->ism_gids[i].gid = 0x1000 + i;
		p->ism_gids[i].chid = 0xffff;
	}
}

static void round_trip_proposals(void **state)
{
	struct smcr_clc_msg m;
	uint8_t t1, t2, n6, ne, ni;

	/* RFC v1 form, every offer, IPv4 and 1..8 IPv6 prefixes. */
	for (t1 = 0; t1 <= 3; t1++) {
		if (t1 == SMCR_CLC_PATH_NONE)
			continue;
		for (n6 = 0; n6 <= 8; n6++) {
			fill_proposal(&m, 1, t1, SMCR_CLC_PATH_NONE, n6, 0, 0);
			round_trip(&m, 40 + (m.proposal.smcd_area ? 40 : 0) + 8 + 17u * n6 + 4);
		}
	}
	/* Linux form: every typev1 x typev2 combination and counts at the limits. */
	for (t1 = 0; t1 <= 3; t1++)
		for (t2 = 0; t2 <= 3; t2++)
			for (n6 = 0; n6 <= 8; n6 += 8)
				for (ne = 0; ne <= 8; ne += 4)
					for (ni = 0; ni <= 8; ni += 2) {
						size_t len = 80 + 4;

						fill_proposal(&m, 2, t1, t2, n6, ne, ni);
						if (t1 != SMCR_CLC_PATH_NONE)
							len += 8 + 17u * n6;
						if (t2 != SMCR_CLC_PATH_NONE)
							len += 40 + 32u * ne;
						if (t2 == SMCR_CLC_PATH_D || t2 == SMCR_CLC_PATH_BOTH)
							len += 48 + 10u * ni;
						round_trip(&m, len);
					}
	/* The largest Proposal Linux accepts. */
	fill_proposal(&m, 2, SMCR_CLC_PATH_R, SMCR_CLC_PATH_BOTH, 8, 8, 8);
	round_trip(&m, SMCR_CLC_PROP_MAX_LEN);
	/* Loopback-ism SMC-Dv2 + SMC-Rv2 with one UEID: 156 + 68 (protocol.md §2.4). */
	fill_proposal(&m, 2, SMCR_CLC_PATH_NONE, SMCR_CLC_PATH_BOTH, 0, 1, 2);
	round_trip(&m, 224);
	(void)state;
}

static void fill_accept(struct smcr_clc_msg *m, uint8_t type, uint8_t version, uint8_t path,
			bool fc, uint8_t release, uint8_t ngid)
{
	struct smcr_clc_accept *a = &m->accept;

	memset(m, 0, sizeof(*m));
	m->hdr.type = type;
	m->hdr.version = version;
	m->hdr.typev1 = path;
	m->hdr.flag = fc;
	memcpy(a->peer_id, peer_id_ab, 8);
	memcpy(a->gid, gid_server, 16);
	memset(a->mac, 0x5a, 6);
	a->qpn = 0xabcdef;
	a->rmb_rkey = 0x12345678;
	a->rmbe_idx = 1;
	a->rmbe_alert_token = 77;
	a->rmbe_size = 15;
	a->qp_mtu = 5;
	a->rmb_dma_addr = 0xffffffffffffffffull;
	a->psn = 0xffffff;
	a->ism_gid = 0x1111;
	a->dmb_token = 0x2222;
	a->dmbe_idx = 1;
	a->dmbe_size = 6;
	a->link_id = 0x3333;
	a->ism_chid = 0xffff;
	a->gid_ext = 0x4444;
	memcpy(a->eid, eid_rxe, 32);
	a->fce.v2_direct = true;
	a->fce.os_type = SMCR_CLC_OS_LINUX;
	a->fce.release = release;
	memcpy(a->fce.hostname, host_rxe, 32);
	if (release) {
		a->fce.max_conns = 255;
		a->fce.max_links = 2;
		a->fce.feature_mask = 1;
	}
	a->gid_cnt = ngid;
	memcpy(a->gid_list[0], gid_client, 16);
	memcpy(a->gid_list[1], gid_server, 16);
}

static void round_trip_accept_confirm(void **state)
{
	struct smcr_clc_msg m;
	uint8_t type, g;

	for (type = SMCR_CLC_ACCEPT; type <= SMCR_CLC_CONFIRM; type++) {
		fill_accept(&m, type, 1, SMCR_CLC_PATH_R, true, 0, 0);
		round_trip(&m, 68);
		fill_accept(&m, type, 1, SMCR_CLC_PATH_R, false, 0, 0);
		round_trip(&m, 68);
		fill_accept(&m, type, 1, SMCR_CLC_PATH_D, true, 0, 0);
		round_trip(&m, 48);
		fill_accept(&m, type, 2, SMCR_CLC_PATH_R, false, 1, 0);
		round_trip(&m, 108);
		fill_accept(&m, type, 2, SMCR_CLC_PATH_D, false, 1, 0);
		round_trip(&m, 78);
		fill_accept(&m, type, 2, SMCR_CLC_PATH_D, true, 0, 0);
		round_trip(&m, 78 + 36);
		fill_accept(&m, type, 2, SMCR_CLC_PATH_D, true, 1, 0);
		round_trip(&m, 78 + 52);
	}
	fill_accept(&m, SMCR_CLC_ACCEPT, 2, SMCR_CLC_PATH_R, true, 1, 0);
	round_trip(&m, 160);
	for (g = 0; g <= 2; g++) {
		fill_accept(&m, SMCR_CLC_CONFIRM, 2, SMCR_CLC_PATH_R, true, 1, g);
		round_trip(&m, 164 + 16u * g);
	}
	/* SMC-D Accept/Confirm carry "SMCD" eyecatchers, as Linux sends them. */
	{
		uint8_t b[SMCR_CLC_MAX_LEN];
		enum smcr_clc_err err;
		size_t n;

		fill_accept(&m, SMCR_CLC_ACCEPT, 2, SMCR_CLC_PATH_D, false, 1, 0);
		n = smcr_clc_encode(&m, b, sizeof(b), &err);
		assert_int_equal(b[3], 0xc4);
		assert_int_equal(b[n - 1], 0xc4);
	}
	(void)state;
}

/*
 * smcr's word: "smcr" and the feature bits at 96..103 of an SMC-R v2
 * Accept/Confirm, the 8 bytes Linux reserves; the length does not change,
 * and bytes that are not "smcr" there mean no features.
 */
static void smcr_word(void **state)
{
	uint8_t b[SMCR_CLC_MAX_LEN];
	struct smcr_clc_msg m, out;
	enum smcr_clc_err err;
	size_t n;

	fill_accept(&m, SMCR_CLC_ACCEPT, 2, SMCR_CLC_PATH_R, true, 1, 0);
	n = smcr_clc_encode(&m, b, sizeof(b), &err);
	assert_int_equal(n, 160);
	assert_int_equal(smcr_get_be32(b + 96) | smcr_get_be32(b + 100), 0);
	m.accept.smcr_features = SMCR_CLC_SMCR_TCP_TAIL;
	round_trip(&m, 160);
	assert_int_equal(smcr_clc_encode(&m, b, sizeof(b), &err), 160);
	assert_memory_equal(b + 96, "smcr", 4);
	assert_int_equal(smcr_get_be32(b + 100), SMCR_CLC_SMCR_TCP_TAIL);
	expect_ok(b, 160, &out);
	assert_int_equal(out.accept.smcr_features, SMCR_CLC_SMCR_TCP_TAIL);
	b[96] = 'S';
	expect_ok(b, 160, &out);
	assert_int_equal(out.accept.smcr_features, 0);
	fill_accept(&m, SMCR_CLC_CONFIRM, 2, SMCR_CLC_PATH_R, false, 1, 0);
	m.accept.smcr_features = SMCR_CLC_SMCR_TCP_TAIL;
	round_trip(&m, 108);
	(void)state;
}

static void round_trip_declines(void **state)
{
	struct smcr_clc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_DECLINE;
	m.hdr.version = 1;
	m.decline.diag = SMCR_CLC_DECL_PEERNOSMC;
	round_trip(&m, 28);
	m.hdr.version = 2;
	m.hdr.flag = true;
	m.decline.diag = SMCR_CLC_DECL_SYNCERR;
	m.decline.os_type = SMCR_CLC_OS_LINUX;
	m.decline.diag_v2[3] = 0xdeadbeef;
	round_trip(&m, 44);
	(void)state;
}

/* ---- stream behaviour and rejects ----------------------------------------- */

static void stream_prefixes_need_more(void **state)
{
	static const char *const files[] = { "clc-proposal-v2.bin", "clc-accept-v2.bin",
					     "clc-confirm-v2.bin", "clc-decline.bin",
					     "clc-decline-v1.bin" };
	uint8_t b[1024];
	size_t f, n, k, len;
	struct smcr_clc_msg m;
	enum smcr_clc_err err;

	for (f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		n = load_bin(files[f], b, sizeof(b));
		for (k = 0; k < n; k++) {
			assert_int_equal(decode_exact(b, k, &m, &len, &err), SMCR_WIRE_NEED_MORE);
			assert_int_equal(len, k < 8 ? 8 : n);
		}
		/* Application bytes after the message are not part of it. */
		memset(b + n, 'x', 32);
		assert_int_equal(decode_exact(b, n + 32, &m, &len, &err), SMCR_WIRE_OK);
		assert_int_equal(len, n);
	}
	(void)state;
}

static void rejects(void **state)
{
	uint8_t b[1024], c[1024];
	size_t n = load_bin("clc-proposal-v2.bin", b, sizeof(b));

	/* Not SMC at all: plain application data is rejected from byte 0. */
	expect_invalid((const uint8_t *)"GET / HTTP/1.1\r\n", 16, SMCR_CLC_ERR_EYECATCHER);
	expect_invalid((const uint8_t *)"G", 1, SMCR_CLC_ERR_EYECATCHER);
	expect_invalid((const uint8_t *)"\xe2\xd4\xc3\xda", 4, SMCR_CLC_ERR_EYECATCHER);

	memcpy(c, b, n);
	c[n - 1] = 0;
	expect_invalid(c, n, SMCR_CLC_ERR_TRAILER);

	memcpy(c, b, n);
	c[4] = 5;
	expect_invalid(c, 5, SMCR_CLC_ERR_TYPE);
	c[4] = 0;
	expect_invalid(c, n, SMCR_CLC_ERR_TYPE);

	memcpy(c, b, n);
	c[7] = 0x02; /* version 0 */
	expect_invalid(c, n, SMCR_CLC_ERR_VERSION);

	/* Oversized: beyond Linux's 652-byte Proposal area. */
	memcpy(c, b, n);
	c[5] = 0x02;
	c[6] = 0x8d; /* 653 */
	expect_invalid(c, 8, SMCR_CLC_ERR_TOO_LONG);
	c[5] = 0;
	c[6] = 51;
	expect_invalid(c, 8, SMCR_CLC_ERR_TOO_SHORT);

	/* Length one byte shorter than the content: the UEID runs into the trailer. */
	memcpy(c, b, n);
	c[6] = (uint8_t)(n - 1);
	memcpy(c + n - 5, "\xe2\xd4\xc3\xd9", 4);
	expect_invalid(c, n - 1, SMCR_CLC_ERR_OFFSET);
	/* Four bytes longer than the content says. */
	memcpy(c, b, n);
	c[6] = (uint8_t)(n + 4);
	memset(c + n - 4, 0, 4);
	memcpy(c + n, "\xe2\xd4\xc3\xd9", 4);
	expect_invalid(c, n + 4, SMCR_CLC_ERR_LENGTH);

	/* Hostile counts and offsets. */
	memcpy(c, b, n);
	c[80] = 9; /* eid_cnt */
	expect_invalid(c, n, SMCR_CLC_ERR_COUNT);
	memcpy(c, b, n);
	c[50] = 0x7f; /* v2_ext_offset far beyond the message */
	expect_invalid(c, n, SMCR_CLC_ERR_OFFSET);
	memcpy(c, b, n);
	c[80] = 2; /* two EIDs claimed, room for one */
	expect_invalid(c, n, SMCR_CLC_ERR_OFFSET);

	memcpy(c, b, n);
	c[50] = 0; /* SMC-Rv2 offered, v2_ext_offset 0 = "no extension" (Linux: EPROTO) */
	c[51] = 0;
	expect_invalid(c, n, SMCR_CLC_ERR_OFFSET);
	memcpy(c, b, n);
	c[39] = 41; /* iparea_offset > 40 is rejected by Linux even without a v1 offer */
	expect_invalid(c, n, SMCR_CLC_ERR_OFFSET);

	memcpy(c, linux_v1_only, sizeof(linux_v1_only));
	c[87] = 9; /* nine IPv6 prefixes */
	expect_invalid(c, sizeof(linux_v1_only), SMCR_CLC_ERR_COUNT);
	memcpy(c, linux_v1_only, sizeof(linux_v1_only));
	c[87] = 1; /* one prefix claimed, none present */
	expect_invalid(c, sizeof(linux_v1_only), SMCR_CLC_ERR_LENGTH);
	memcpy(c, linux_v1_only, sizeof(linux_v1_only));
	c[39] = 0; /* v2 with an SMC-Rv1 offer needs iparea_offset 40 */
	expect_invalid(c, sizeof(linux_v1_only), SMCR_CLC_ERR_OFFSET);

	memcpy(c, rfc_v1_ipv6, sizeof(rfc_v1_ipv6));
	c[7] = 0x12; /* v1 offering nothing */
	expect_invalid(c, sizeof(rfc_v1_ipv6), SMCR_CLC_ERR_PATH);
	memcpy(c, rfc_v1_ipv6, sizeof(rfc_v1_ipv6));
	c[39] = 41;
	expect_invalid(c, sizeof(rfc_v1_ipv6), SMCR_CLC_ERR_OFFSET);
	memcpy(c, rfc_v1_ipv6, sizeof(rfc_v1_ipv6));
	c[7] = 0x11; /* SMC-D offered without the SMC-D area */
	expect_invalid(c, sizeof(rfc_v1_ipv6), SMCR_CLC_ERR_OFFSET);

	/* SMC-Dv2 offered with smcd_v2_ext_offset 0 or beyond Linux's limit (288). */
	{
		struct smcr_clc_msg m;
		enum smcr_clc_err err;
		size_t len;

		fill_proposal(&m, 2, SMCR_CLC_PATH_NONE, SMCR_CLC_PATH_BOTH, 0, 1, 2);
		len = smcr_clc_encode(&m, c, sizeof(c), &err);
		assert_int_equal(len, 224);
		assert_int_equal(c[80 + 7], 64); /* 32 + 32 * eid_cnt */
		c[80 + 7] = 0;
		expect_invalid(c, len, SMCR_CLC_ERR_OFFSET);
		c[80 + 6] = 0x01;
		c[80 + 7] = 0x21; /* 289 */
		expect_invalid(c, len, SMCR_CLC_ERR_OFFSET);
	}

	/* Accept: wrong length, wrong path, too many GIDs, oversized. */
	memcpy(c, accept_v1, sizeof(accept_v1));
	c[6] = 70;
	memcpy(c + 66, "\xe2\xd4\xc3\xd9", 4);
	expect_invalid(c, 70, SMCR_CLC_ERR_LENGTH);
	memcpy(c, accept_v1, sizeof(accept_v1));
	c[7] = 0x1b; /* typev1 = both */
	expect_invalid(c, sizeof(accept_v1), SMCR_CLC_ERR_PATH);
	n = load_bin("clc-confirm-v2.bin", b, sizeof(b));
	memcpy(c, b, n);
	c[156] = 3;
	expect_invalid(c, n, SMCR_CLC_ERR_COUNT);
	memcpy(c, b, n);
	c[156] = 2; /* two GIDs claimed, one present */
	expect_invalid(c, n, SMCR_CLC_ERR_LENGTH);
	c[5] = 0;
	c[6] = 197;
	expect_invalid(c, 8, SMCR_CLC_ERR_TOO_LONG);

	/* Decline: only 28 (v1) or 44 (v2). */
	n = load_bin("clc-decline-v1.bin", b, sizeof(b));
	memcpy(c, b, n);
	c[7] = 0x20;
	expect_invalid(c, n, SMCR_CLC_ERR_LENGTH);
	c[6] = 45;
	expect_invalid(c, 8, SMCR_CLC_ERR_TOO_LONG);
	(void)state;
}

static void encoder_refuses_invalid(void **state)
{
	struct smcr_clc_msg m;
	uint8_t b[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;

	fill_proposal(&m, 2, SMCR_CLC_PATH_R, SMCR_CLC_PATH_R, 9, 0, 0);
	assert_int_equal(smcr_clc_encode(&m, b, sizeof(b), &err), 0);
	assert_int_equal(err, SMCR_CLC_ERR_COUNT);
	fill_proposal(&m, 1, SMCR_CLC_PATH_NONE, SMCR_CLC_PATH_NONE, 0, 0, 0);
	assert_int_equal(smcr_clc_encode(&m, b, sizeof(b), &err), 0);
	assert_int_equal(err, SMCR_CLC_ERR_PATH);
	fill_accept(&m, SMCR_CLC_CONFIRM, 2, SMCR_CLC_PATH_R, true, 1, 3);
	assert_int_equal(smcr_clc_encode(&m, b, sizeof(b), &err), 0);
	assert_int_equal(err, SMCR_CLC_ERR_COUNT);
	m.hdr.type = 9;
	assert_int_equal(smcr_clc_validate(&m), SMCR_CLC_ERR_TYPE);
	(void)state;
}

static void decline_names_and_sizes(void **state)
{
	static const uint32_t codes[] = {
		0x01010000, 0x02010000, 0x02020000, 0x03000000, 0x03010000, 0x03020000,
		0x03030000, 0x03030001, 0x03030002, 0x03030003, 0x03030004, 0x03030005,
		0x03030006, 0x03030007, 0x03030008, 0x03030009, 0x0303000A, 0x0303000B,
		0x03040000, 0x03050000, 0x03060000, 0x03070000, 0x03080000, 0x03090000,
		0x030A0000, 0x030B0000, 0x030C0000, 0x030D0000, 0x030E0000, 0x030F0000,
		0x04000000, 0x05000000, 0x09990000, 0x09990001, 0x09990002, 0x09990003,
	};
	size_t i, j;

	assert_int_equal(sizeof(codes) / sizeof(codes[0]), 36);
	for (i = 0; i < 36; i++) {
		assert_non_null(smcr_clc_decl_name(codes[i]));
		for (j = 0; j < i; j++)
			assert_string_not_equal(smcr_clc_decl_name(codes[i]),
						smcr_clc_decl_name(codes[j]));
	}
	assert_null(smcr_clc_decl_name(0));
	assert_null(smcr_clc_decl_name(0x99990000));
	assert_string_equal(smcr_clc_decl_name(SMCR_CLC_DECL_SYNCERR), "SYNCERR");
	/* RMBE size encoding (protocol.md §6.3). */
	assert_int_equal(smcr_clc_rmbe_compress(1, 15), 0);
	assert_int_equal(smcr_clc_rmbe_compress(16384, 15), 0);
	assert_int_equal(smcr_clc_rmbe_compress(16385, 15), 1);
	assert_int_equal(smcr_clc_rmbe_compress(65536, 15), 2);
	assert_int_equal(smcr_clc_rmbe_compress(UINT32_MAX, 5), 5);
	assert_int_equal(smcr_clc_rmbe_size(15), 512u << 20);
	for (i = 0; i < SMCR_CLC_ERR_COUNT_ + 1; i++)
		assert_non_null(smcr_clc_err_str((enum smcr_clc_err)i));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kernel_proposal_v2),
		cmocka_unit_test(kernel_accept_confirm_v2),
		cmocka_unit_test(kernel_accept_confirm_reuse),
		cmocka_unit_test(kernel_declines),
		cmocka_unit_test(reference_bytes),
		cmocka_unit_test(round_trip_proposals),
		cmocka_unit_test(round_trip_accept_confirm),
		cmocka_unit_test(smcr_word),
		cmocka_unit_test(round_trip_declines),
		cmocka_unit_test(stream_prefixes_need_more),
		cmocka_unit_test(rejects),
		cmocka_unit_test(encoder_refuses_invalid),
		cmocka_unit_test(decline_names_and_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
