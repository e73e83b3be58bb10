// SPDX-License-Identifier: MIT
/*
 * LLC: the kernel's v2 messages decode to the right fields and re-encode to the
 * same bytes; v1 messages written by hand from the reference layouts decode;
 * every type round-trips in v1 and v2; malformed and hostile messages are
 * rejected with a reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "smcr/llc.h"
#include "testdata.h"

/* Both are large (rkey arrays): keep them off the stack. */
static struct smcr_llc_msg g_msg, g_msg2;

static enum smcr_wire_status decode_exact(const uint8_t *bytes, size_t n,
					  struct smcr_llc_msg *m, enum smcr_llc_err *err)
{
	uint8_t *copy = malloc(n ? n : 1);
	enum smcr_wire_status st;

	assert_non_null(copy);
	memcpy(copy, bytes, n);
	st = smcr_llc_decode(copy, n, m, err);
	free(copy);
	return st;
}

static struct smcr_llc_msg *expect_ok(const uint8_t *bytes, size_t n)
{
	enum smcr_llc_err err = SMCR_LLC_ERR_NONE;

	assert_int_equal(decode_exact(bytes, n, &g_msg, &err), SMCR_WIRE_OK);
	assert_int_equal(err, SMCR_LLC_ERR_NONE);
	return &g_msg;
}

#define expect_invalid(b, n, why) expect_invalid_at(b, n, why, __LINE__)

static void expect_invalid_at(const uint8_t *bytes, size_t n, enum smcr_llc_err why, int line)
{
	enum smcr_llc_err err = SMCR_LLC_ERR_NONE;

	if (decode_exact(bytes, n, &g_msg2, &err) != SMCR_WIRE_INVALID || err != why)
		fail_msg("line %d: want INVALID/%s, got %d (%s)", line, smcr_llc_err_str(why), err,
			 smcr_llc_err_str(err));
}

static void expect_reencodes(const struct smcr_llc_msg *m, const uint8_t *bytes, size_t n)
{
	uint8_t out[SMCR_LLC_V2_MAX_LEN];
	enum smcr_llc_err err;

	assert_int_equal(smcr_llc_encode(m, out, sizeof(out), &err), n);
	assert_memory_equal(out, bytes, n);
}

static const uint8_t mac_s[6] = { 0x2a, 0xcb, 0x86, 0xc8, 0x48, 0x02 };
static const uint8_t mac_c[6] = { 0xee, 0x5a, 0x95, 0x4e, 0x6f, 0xde };
static const uint8_t gid_c[16] = { [10] = 0xff, 0xff, 10, 77, 0, 1 };
static const uint8_t gid_s[16] = { [10] = 0xff, 0xff, 10, 77, 0, 2 };

/* smcr_llc_answer(REQ file, extra) must give exactly the kernel's RESP file. */
static void expect_answer(const char *req_file, uint8_t extra, const char *resp_file)
{
	uint8_t req[128], resp[128], out[SMCR_LLC_MSG_LEN];
	size_t n = load_bin(req_file, req, sizeof(req));
	size_t m = load_bin(resp_file, resp, sizeof(resp));

	assert_int_equal(m, SMCR_LLC_MSG_LEN);
	smcr_llc_answer(req, n, extra, out);
	assert_memory_equal(out, resp, SMCR_LLC_MSG_LEN);
	assert_non_null(expect_ok(out, sizeof(out)));
}

/* Our answers to a Linux peer's requests are the kernel's own, byte for byte. */
static void kernel_answers(void **state)
{
	uint8_t b[128], out[SMCR_LLC_MSG_LEN];
	struct smcr_llc_msg *m;
	size_t n;

	(void)state;
	/* the 88-byte ADD LINK v2 request -> the 44-byte reject `22 2c 00 c0` */
	expect_answer("llc-add-link-v2-req.bin", SMCR_LLC_FLAG_ADD_LINK_REJ,
		      "llc-add-link-v2-reject.bin");
	expect_answer("llc-confirm-rkey-v2-req.bin", 0, "llc-confirm-rkey-v2-resp.bin");
	expect_answer("llc-delete-rkey-v2-req.bin", 0, "llc-delete-rkey-v2-resp.bin");
	expect_answer("llc-test-link-v2-req.bin", 0, "llc-test-link-v2-resp.bin");
	/* a big-endian v2 request (s390) is answered big-endian */
	n = load_bin("llc-test-link-v2-req.bin", b, sizeof(b));
	assert_int_equal(n, SMCR_LLC_MSG_LEN);
	b[1] = 0x00, b[2] = 0x2c;
	smcr_llc_answer(b, n, 0, out);
	assert_int_equal(out[1], 0x00);
	assert_int_equal(out[2], 0x2c);
	/* v1: the reject reason "no alternate path" in byte 2 */
	n = load_bin("llc-add-link-v2-req.bin", b, sizeof(b));
	b[0] = SMCR_LLC_ADD_LINK, b[1] = SMCR_LLC_MSG_LEN, b[2] = 0;
	smcr_llc_answer(b, SMCR_LLC_MSG_LEN, SMCR_LLC_FLAG_ADD_LINK_REJ, out);
	m = expect_ok(out, sizeof(out));
	assert_int_equal(m->hdr.add_link_rej_rsn, SMCR_LLC_REJ_RSN_NO_ALT_PATH);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_RESP | SMCR_LLC_FLAG_ADD_LINK_REJ);
}

static void kernel_confirm_link(void **state)
{
	uint8_t b[128];
	size_t n = load_bin("llc-confirm-link-v2-req.bin", b, sizeof(b));
	struct smcr_llc_msg *m = expect_ok(b, n);

	assert_int_equal(m->hdr.type, SMCR_LLC_CONFIRM_LINK);
	assert_int_equal(m->hdr.version, 2);
	assert_int_equal(m->hdr.length, 44);
	assert_false(m->hdr.length_be); /* x86 Linux: "2c 00" */
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_NO_RMBE_EYEC);
	assert_memory_equal(m->confirm_link.mac, mac_s, 6);
	assert_memory_equal(m->confirm_link.gid, gid_s, 16);
	assert_int_equal(m->confirm_link.qpn, 0x11);
	assert_int_equal(m->confirm_link.link_num, 1);
	assert_int_equal(m->confirm_link.link_uid, 0x00000101);
	assert_int_equal(m->confirm_link.max_links, 2);
	assert_int_equal(m->confirm_link.max_conns, 255);
	expect_reencodes(m, b, n);

	n = load_bin("llc-confirm-link-v2-resp.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_RESP | SMCR_LLC_FLAG_NO_RMBE_EYEC);
	assert_memory_equal(m->confirm_link.mac, mac_c, 6);
	assert_memory_equal(m->confirm_link.gid, gid_c, 16);
	assert_int_equal(m->confirm_link.link_uid, 0x00000201);
	expect_reencodes(m, b, n);
	(void)state;
}

static void kernel_add_link(void **state)
{
	uint8_t b[128];
	size_t n = load_bin("llc-add-link-v2-req.bin", b, sizeof(b));
	struct smcr_llc_msg *m = expect_ok(b, n);

	assert_int_equal(n, 88);
	assert_int_equal(m->hdr.type, SMCR_LLC_ADD_LINK);
	assert_int_equal(m->hdr.length, 88);
	assert_int_equal(m->hdr.flags, 0);
	assert_memory_equal(m->add_link.mac, mac_s, 6);
	assert_memory_equal(m->add_link.gid, gid_s, 16);
	assert_int_equal(m->add_link.qpn, 0x12);
	assert_int_equal(m->add_link.link_num, 2);
	assert_int_equal(m->add_link.qp_mtu, 3);
	assert_int_equal(m->add_link.psn, 0x6632f8);
	assert_true(m->add_link.has_v2_ext);
	assert_true(m->add_link.v2_direct);
	assert_memory_equal(m->add_link.target_gid, gid_s, 16);
	assert_int_equal(m->add_link.num_rkeys, 1);
	assert_int_equal(m->add_link.rkeys[0].rkey, 0x34d);
	assert_int_equal(m->add_link.rkeys[0].rkey_new, 0x569);
	assert_int_equal(m->add_link.rkeys[0].vaddr_new, 0xffff888008190000ull);
	expect_reencodes(m, b, n);

	n = load_bin("llc-add-link-v2-reject.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.length, 44);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_RESP | SMCR_LLC_FLAG_ADD_LINK_REJ);
	assert_false(m->add_link.has_v2_ext);
	assert_int_equal(m->add_link.qpn, 0x12);
	expect_reencodes(m, b, n);
	(void)state;
}

/*
 * Our ADD LINK request as a server (lgr_llc.c's srv_add_link(), the kernel's
 * smc_llc_srv_add_link()): smcr_llc_add_link_v2() with the values of the
 * kernel's captured request and its one rkey triple encodes to exactly the
 * kernel's 88 bytes (type 0x22, little-endian length and count, flags 0, the
 * new link's MAC/GID/QPN/link/MTU/PSN, v2_direct, the new GID as target).
 */
static void add_link_v2_request_as_kernel(void **state)
{
	uint8_t req[128], out[256];
	size_t n = load_bin("llc-add-link-v2-req.bin", req, sizeof(req));
	struct smcr_llc_msg *m = &g_msg2;
	enum smcr_llc_err err;
	size_t len;

	smcr_llc_add_link_v2(m, false, false, mac_s, gid_s, 0x12, 0x6632f8, 2, 3, true);
	m->add_link.rkeys[0] = (struct smcr_llc_rkey_triple){ 0x34d, 0x569, 0xffff888008190000ull };
	m->add_link.num_rkeys = 1;
	len = smcr_llc_encode(m, out, sizeof(out), &err);
	assert_int_equal(n, 88);
	assert_int_equal(len, n);
	assert_memory_equal(out, req, n);
	/* no rkey at all (a group whose RMBs are not registered on the new link yet) */
	m->add_link.num_rkeys = 0;
	len = smcr_llc_encode(m, out, sizeof(out), &err);
	assert_int_equal(len, 44 + 28);
	assert_int_equal(out[1], 72);
	assert_int_equal(out[70] | out[71] << 8, 0);
	/* the values are clamped to their fields: 24-bit QPN/PSN, 4-bit MTU */
	smcr_llc_add_link_v2(m, false, true, mac_s, gid_s, 0xff000012, 0xff6632f8, 2, 0xf3, false);
	assert_int_equal(m->add_link.qpn, 0x12);
	assert_int_equal(m->add_link.psn, 0x6632f8);
	assert_int_equal(m->add_link.qp_mtu, 3);
	len = smcr_llc_encode(m, out, sizeof(out), &err);
	assert_int_equal(out[1] << 8 | out[2], 72); /* big-endian when asked (s390) */
	assert_int_equal(out[44] & 0x80, 0);       /* no v2_direct */
	(void)state;
}

/*
 * Our positive answer to that ADD LINK, as lgr_llc.c builds it (the kernel's
 * smc_llc_cli_add_link() v2 response): the new link's MAC/GID/QPN/PSN, the
 * request's link number, min MTU, the v2 extension with our new GID as
 * target and one rkey triple per RMB, little-endian length and count as x86
 * Linux writes them, one SEND of 44 + 28 + 16 n bytes.
 */
static void add_link_v2_positive_response(void **state)
{
	static const uint8_t mac_n[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x03 };
	static const uint8_t gid_n[16] = { [10] = 0xff, [11] = 0xff, 10, 77, 0, 3 };
	uint8_t req[128], out[256];
	size_t n = load_bin("llc-add-link-v2-req.bin", req, sizeof(req));
	struct smcr_llc_msg *r = expect_ok(req, n), *m = &g_msg2;
	enum smcr_llc_err err;
	size_t len;

	smcr_llc_add_link_v2(m, true, r->hdr.length_be, mac_n, gid_n, 0x11, 0xabcdef,
			     r->add_link.link_num, r->add_link.qp_mtu, r->add_link.v2_direct);
	m->add_link.num_rkeys = 2;
	m->add_link.rkeys[0] = (struct smcr_llc_rkey_triple){ 0x101, 0x201, 0x123456789000ull };
	m->add_link.rkeys[1] = (struct smcr_llc_rkey_triple){ 0x102, 0x202, 0x2000ull };
	len = smcr_llc_encode(m, out, sizeof(out), &err);
	assert_int_equal(len, 44 + 28 + 2 * 16);
	assert_int_equal(out[0], 0x22);
	assert_int_equal(out[1], 104); /* length, little-endian as the request's */
	assert_int_equal(out[2], 0);
	assert_int_equal(out[3], SMCR_LLC_FLAG_RESP); /* no 0x40: accepted */
	assert_memory_equal(out + 4, mac_n, 6);
	assert_memory_equal(out + 12, gid_n, 16);
	assert_int_equal(out[28] << 16 | out[29] << 8 | out[30], 0x11);
	assert_int_equal(out[31], 2);
	assert_int_equal(out[32] & 0x0f, 3);
	assert_int_equal(out[33] << 16 | out[34] << 8 | out[35], 0xabcdef);
	assert_int_equal(out[44] & 0x80, 0x80);          /* v2_direct */
	assert_memory_equal(out + 46, gid_n, 16);        /* target GID: our new one */
	assert_int_equal(out[70] | out[71] << 8, 2);     /* rkey count, little-endian */
	assert_int_equal(out[72 + 3], 0x01);             /* rkey on link 1, BE32 */
	assert_int_equal(out[76 + 2] << 8 | out[76 + 3], 0x201); /* rkey on link 2 */
	assert_int_equal(out[80 + 2] << 24 | out[80 + 3] << 16 | out[80 + 4] << 8 | out[80 + 5],
			 0x12345678);                    /* its address, BE64 */
	/* what the kernel decodes from it */
	r = expect_ok(out, len);
	assert_int_equal(r->hdr.flags, SMCR_LLC_FLAG_RESP);
	assert_true(r->add_link.has_v2_ext);
	assert_int_equal(r->add_link.num_rkeys, 2);
	assert_int_equal(r->add_link.rkeys[1].rkey, 0x102);
	assert_int_equal(r->add_link.rkeys[1].rkey_new, 0x202);
	assert_int_equal(r->add_link.rkeys[1].vaddr_new, 0x2000ull);
	(void)state;
}

/*
 * A positive ADD LINK answer with more rkey triples than lgr.c keeps (256
 * bytes, 11 triples): its 72-byte head decodes as the same answer with no
 * triple, in either byte order; anything else is refused.
 */
static void add_link_v2_head_of_long_answer(void **state)
{
	static uint8_t out[44 + 28 + 40 * 16];
	struct smcr_llc_msg *m = &g_msg2, d;
	enum smcr_llc_err err;
	size_t len;

	smcr_llc_add_link_v2(m, true, false, mac_c, gid_c, 0x33, 0x123456, 2, 3, true);
	for (unsigned i = 0; i < 40; i++)
		m->add_link.rkeys[i] = (struct smcr_llc_rkey_triple){ i + 1, 0x100 + i, 0x1000ull * i };
	m->add_link.num_rkeys = 40;
	len = smcr_llc_encode(m, out, sizeof(out), &err);
	assert_int_equal(len, sizeof(out));
	assert_int_equal(smcr_llc_decode_add_link_head(out, 256, len, &d, &err), SMCR_WIRE_OK);
	assert_int_equal(d.hdr.flags, SMCR_LLC_FLAG_RESP);
	assert_int_equal(d.hdr.length, 72);
	assert_memory_equal(d.add_link.mac, mac_c, 6);
	assert_memory_equal(d.add_link.gid, gid_c, 16);
	assert_int_equal(d.add_link.qpn, 0x33);
	assert_int_equal(d.add_link.psn, 0x123456);
	assert_int_equal(d.add_link.link_num, 2);
	assert_int_equal(d.add_link.qp_mtu, 3);
	assert_true(d.add_link.has_v2_ext);
	assert_int_equal(d.add_link.num_rkeys, 0);
	/* big-endian (s390) */
	m->hdr.length_be = true;
	len = smcr_llc_encode(m, out, sizeof(out), &err);
	assert_int_equal(smcr_llc_decode_add_link_head(out, 256, len, &d, &err), SMCR_WIRE_OK);
	assert_true(d.hdr.length_be);
	assert_int_equal(d.add_link.qpn, 0x33);
	/* refused: all of it at hand (decode it whole), a head cut short, another length, type */
	assert_int_equal(smcr_llc_decode_add_link_head(out, len, len, &d, &err), SMCR_WIRE_INVALID);
	assert_int_equal(smcr_llc_decode_add_link_head(out, 71, len, &d, &err), SMCR_WIRE_INVALID);
	assert_int_equal(smcr_llc_decode_add_link_head(out, 256, len + 1, &d, &err), SMCR_WIRE_INVALID);
	out[0] = 0x20 | SMCR_LLC_CONFIRM_RKEY;
	assert_int_equal(smcr_llc_decode_add_link_head(out, 256, len, &d, &err), SMCR_WIRE_INVALID);
	(void)state;
}

static void kernel_rkeys_test_delete(void **state)
{
	uint8_t b[128];
	size_t n;
	struct smcr_llc_msg *m;

	n = load_bin("llc-confirm-rkey-v2-req.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.type, SMCR_LLC_CONFIRM_RKEY);
	assert_int_equal(m->confirm_rkey.num_rkeys, 0);
	assert_int_equal(m->confirm_rkey.rkey, 0x34d);
	assert_int_equal(m->confirm_rkey.vaddr, 0xffff888008190000ull);
	expect_reencodes(m, b, n);
	n = load_bin("llc-confirm-rkey-v2-resp.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_RESP);
	expect_reencodes(m, b, n);

	n = load_bin("llc-delete-rkey-v2-req.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.type, SMCR_LLC_DELETE_RKEY);
	assert_int_equal(m->delete_rkey.num_rkeys, 1);
	assert_int_equal(m->delete_rkey.rkeys[0], 0x323);
	expect_reencodes(m, b, n);
	n = load_bin("llc-delete-rkey-v2-resp.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_RESP);
	assert_int_equal(m->delete_rkey.err_mask, 0);
	expect_reencodes(m, b, n);

	n = load_bin("llc-test-link-v2-req.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.type, SMCR_LLC_TEST_LINK);
	assert_int_equal(m->hdr.flags, 0);
	expect_reencodes(m, b, n);
	n = load_bin("llc-test-link-v2-resp.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_RESP);
	expect_reencodes(m, b, n);

	n = load_bin("llc-delete-link-v2-orderly.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.type, SMCR_LLC_DELETE_LINK);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_DEL_LINK_ALL | SMCR_LLC_FLAG_DEL_LINK_ORDERLY);
	assert_int_equal(m->delete_link.reason, SMCR_LLC_DEL_PROG_INIT_TERM);
	expect_reencodes(m, b, n);
	n = load_bin("llc-delete-link-v2.bin", b, sizeof(b));
	m = expect_ok(b, n);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_DEL_LINK_ALL);
	expect_reencodes(m, b, n);
	(void)state;
}

/* v1 messages laid out as protocol.md §5.2-5.8 describes them. */
static const uint8_t v1_confirm_link[44] = {
	0x01, 44, 0, 0x03, 1, 2, 3, 4, 5, 6,
	[10] = 0xfe, 0x80, [25] = 0x99,
	[26] = 0x00, 0x01, 0x02, /* qpn */
	[29] = 1, [30] = 0, 0, 1, 1, [34] = 2,
};
static const uint8_t v1_add_link_reject[44] = {
	0x02, 44, 0x01, 0xc0, [4] = 1, 2, 3, 4, 5, 6, [12] = 0xfe, 0x80,
	[28] = 0x00, 0x00, 0x13, [31] = 2, [32] = 0x05, [33] = 0x12, 0x34, 0x56,
};
static const uint8_t v1_add_link_cont[44] = {
	0x03, 44, 0, 0x80, 2, 3, 0, 0,
	[8] = 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0x10, 0,
	[24] = 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0x20, 0,
};
static const uint8_t v1_delete_link[44] = { 0x04, 44, 0, 0x20, 1, 0, 0x01, 0, 0 };
static const uint8_t v1_confirm_rkey[44] = {
	0x06, 44, 0, 0x00, 2,
	[5] = 0xaa, 0xbb, 0xcc, 0xdd, [9] = 0, 0, 0, 0, 0, 1, 0, 0,
	[17] = 2, 0, 0, 0, 0x22, 0, 0, 0, 0, 0, 2, 0, 0,
	[30] = 3, 0, 0, 0, 0x33, 0, 0, 0, 0, 0, 3, 0, 0,
};
static const uint8_t v1_confirm_rkey_cont[44] = {
	0x08, 44, 0, 0x00, 1, [5] = 2, 0, 0, 0, 0x44, [31] = 0,
};
static const uint8_t v1_delete_rkey[44] = {
	0x09, 44, 0, 0xa0, 3, 0x20, 0, 0,
	[8] = 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3,
};
static const uint8_t v1_test_link[44] = {
	0x07, 44, 0, 0x80, 'h', 'e', 'l', 'l', 'o', [19] = '!',
};

static void reference_v1(void **state)
{
	struct smcr_llc_msg *m;

	m = expect_ok(v1_confirm_link, 44);
	assert_int_equal(m->hdr.version, 1);
	assert_int_equal(m->confirm_link.qpn, 0x102);
	assert_int_equal(m->confirm_link.gid[15], 0x99);
	assert_int_equal(m->confirm_link.link_uid, 0x101);
	assert_int_equal(m->confirm_link.max_links, 2);
	expect_reencodes(m, v1_confirm_link, 44);

	m = expect_ok(v1_add_link_reject, 44);
	assert_int_equal(m->hdr.add_link_rej_rsn, SMCR_LLC_REJ_RSN_NO_ALT_PATH);
	assert_int_equal(m->add_link.qp_mtu, 5);
	assert_int_equal(m->add_link.qpn, 0x13);
	assert_int_equal(m->add_link.psn, 0x123456);
	expect_reencodes(m, v1_add_link_reject, 44);

	m = expect_ok(v1_add_link_cont, 44);
	assert_int_equal(m->add_link_cont.link_num, 2);
	assert_int_equal(m->add_link_cont.num_rkeys, 3);
	assert_int_equal(m->add_link_cont.rt[0].rkey, 1);
	assert_int_equal(m->add_link_cont.rt[0].rkey_new, 2);
	assert_int_equal(m->add_link_cont.rt[0].vaddr_new, 0x1000);
	assert_int_equal(m->add_link_cont.rt[1].rkey, 3);
	assert_int_equal(m->add_link_cont.rt[1].vaddr_new, 0x2000);
	expect_reencodes(m, v1_add_link_cont, 44);

	m = expect_ok(v1_delete_link, 44);
	assert_int_equal(m->delete_link.link_num, 1);
	assert_int_equal(m->delete_link.reason, SMCR_LLC_DEL_LOST_PATH);
	expect_reencodes(m, v1_delete_link, 44);

	m = expect_ok(v1_confirm_rkey, 44);
	assert_int_equal(m->confirm_rkey.num_rkeys, 2);
	assert_int_equal(m->confirm_rkey.rkey, 0xaabbccdd);
	assert_int_equal(m->confirm_rkey.vaddr, 0x10000);
	assert_int_equal(m->confirm_rkey.rt[0].link_id, 2);
	assert_int_equal(m->confirm_rkey.rt[0].rkey, 0x22);
	assert_int_equal(m->confirm_rkey.rt[0].vaddr, 0x20000);
	assert_int_equal(m->confirm_rkey.rt[1].link_id, 3);
	assert_int_equal(m->confirm_rkey.rt[1].vaddr, 0x30000);
	expect_reencodes(m, v1_confirm_rkey, 44);

	m = expect_ok(v1_confirm_rkey_cont, 44);
	assert_int_equal(m->confirm_rkey_cont.num_rkeys, 1);
	assert_int_equal(m->confirm_rkey_cont.rt[0].link_id, 2);
	assert_int_equal(m->confirm_rkey_cont.rt[0].rkey, 0x44);
	expect_reencodes(m, v1_confirm_rkey_cont, 44);

	m = expect_ok(v1_delete_rkey, 44);
	assert_int_equal(m->hdr.flags, SMCR_LLC_FLAG_RESP | SMCR_LLC_FLAG_RKEY_NEG);
	assert_int_equal(m->delete_rkey.num_rkeys, 3);
	assert_int_equal(m->delete_rkey.err_mask, 0x20);
	assert_int_equal(m->delete_rkey.rkeys[2], 3);
	expect_reencodes(m, v1_delete_rkey, 44);

	m = expect_ok(v1_test_link, 44);
	assert_memory_equal(m->test_link.user_data, "hello", 5);
	assert_int_equal(m->test_link.user_data[15], '!');
	expect_reencodes(m, v1_test_link, 44);
	(void)state;
}

static void round_trip(struct smcr_llc_msg *in, size_t want)
{
	static uint8_t b[SMCR_LLC_V2_MAX_LEN], b2[SMCR_LLC_V2_MAX_LEN];
	enum smcr_llc_err err;
	size_t n = smcr_llc_encode(in, b, sizeof(b), &err);

	assert_int_equal(err, SMCR_LLC_ERR_NONE);
	assert_int_equal(n, want);
	assert_int_equal(smcr_llc_encoded_len(in), n);
	assert_int_equal(decode_exact(b, n, &g_msg2, &err), SMCR_WIRE_OK);
	assert_int_equal(g_msg2.hdr.type, in->hdr.type);
	assert_int_equal(g_msg2.hdr.version, in->hdr.version);
	assert_int_equal(g_msg2.hdr.length, n);
	assert_int_equal(g_msg2.hdr.length_be, in->hdr.length_be);
	assert_int_equal(smcr_llc_encode(&g_msg2, b2, sizeof(b2), &err), n);
	assert_memory_equal(b, b2, n);
	assert_int_equal(smcr_llc_encode(in, b2, n - 1, &err), 0);
	assert_int_equal(err, SMCR_LLC_ERR_BUFFER);
}

static void round_trip_all_types(void **state)
{
	static const uint8_t types[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	struct smcr_llc_msg *m = &g_msg;
	unsigned t, v, be, i;

	for (v = 1; v <= 2; v++)
		for (be = 0; be <= (v == 2 ? 1u : 0u); be++)
			for (t = 0; t < sizeof(types); t++) {
				uint8_t type = types[t];

				if ((v == 1 && type == SMCR_LLC_REQ_ADD_LINK) ||
				    (v == 2 && (type == SMCR_LLC_ADD_LINK_CONT ||
						type == SMCR_LLC_CONFIRM_RKEY_CONT)))
					continue;
				memset(m, 0xa5, sizeof(*m)); /* every field non-zero */
				m->hdr.type = type;
				m->hdr.version = (uint8_t)v;
				m->hdr.length_be = be;
				m->hdr.flags = SMCR_LLC_FLAG_RESP;
				m->hdr.add_link_rej_rsn = 1;
				/* The union members overlap: set only this type's fields. */
				switch (type) {
				case SMCR_LLC_CONFIRM_LINK:
					m->confirm_link.qpn = 0xabcdef;
					break;
				case SMCR_LLC_ADD_LINK:
					m->add_link.qpn = 0x123456;
					m->add_link.psn = 0x654321;
					m->add_link.qp_mtu = 4;
					m->add_link.has_v2_ext = v == 2;
					m->add_link.v2_direct = true;
					m->add_link.num_rkeys = 3;
					break;
				case SMCR_LLC_CONFIRM_RKEY:
					m->confirm_rkey.num_rkeys = 2;
					break;
				case SMCR_LLC_REQ_ADD_LINK:
					m->req_add_link.gid_cnt = 2;
					break;
				case SMCR_LLC_DELETE_RKEY:
					m->delete_rkey.num_rkeys = v == 2 ? 20 : 8;
					break;
				default:
					break;
				}
				if (v == 2 && type == SMCR_LLC_ADD_LINK)
					round_trip(m, 44 + 28 + 3 * 16);
				else if (v == 2 && type == SMCR_LLC_REQ_ADD_LINK)
					round_trip(m, 28 + 2 * 16);
				else if (v == 2 && type == SMCR_LLC_DELETE_RKEY)
					round_trip(m, 8 + 20 * 4);
				else
					round_trip(m, 44);
			}
	/* The largest ADD LINK we take: 255 rkeys in one v2 message. */
	memset(m, 0, sizeof(*m));
	m->hdr.type = SMCR_LLC_ADD_LINK;
	m->hdr.version = 2;
	m->add_link.has_v2_ext = true;
	m->add_link.num_rkeys = SMCR_LLC_MAX_ADD_LINK_RKEYS;
	for (i = 0; i < SMCR_LLC_MAX_ADD_LINK_RKEYS; i++)
		m->add_link.rkeys[i].rkey = i;
	round_trip(m, 44 + 28 + 255 * 16);
	(void)state;
}

static void big_endian_v2_length_accepted(void **state)
{
	uint8_t b[128];
	size_t n = load_bin("llc-add-link-v2-req.bin", b, sizeof(b));
	struct smcr_llc_msg *m;

	/* What Wireshark and a big-endian Linux write: "00 58" and rkey count "00 01". */
	b[1] = 0x00;
	b[2] = 0x58;
	b[70] = 0x00;
	b[71] = 0x01;
	m = expect_ok(b, n);
	assert_true(m->hdr.length_be);
	assert_int_equal(m->hdr.length, 88);
	assert_int_equal(m->add_link.num_rkeys, 1);
	assert_int_equal(m->add_link.rkeys[0].rkey_new, 0x569);
	expect_reencodes(m, b, n);
	(void)state;
}

static void rejects(void **state)
{
	uint8_t b[256], c[256];
	size_t n;

	n = load_bin("llc-test-link-v2-req.bin", b, sizeof(b));
	expect_invalid(b, 43, SMCR_LLC_ERR_SHORT);
	expect_invalid(b, 0, SMCR_LLC_ERR_SHORT);

	memcpy(c, b, n);
	c[0] = 0x2a; /* unknown type */
	expect_invalid(c, n, SMCR_LLC_ERR_TYPE);
	c[0] = 0x23; /* ADD LINK CONT has no v2 form */
	expect_invalid(c, n, SMCR_LLC_ERR_TYPE);
	c[0] = 0x28;
	expect_invalid(c, n, SMCR_LLC_ERR_TYPE);
	c[0] = 0x20;
	expect_invalid(c, n, SMCR_LLC_ERR_TYPE);
	c[0] = 0x17; /* version nibble 1 */
	expect_invalid(c, n, SMCR_LLC_ERR_VERSION);
	c[0] = 0xfe; /* a CDC is not an LLC message */
	expect_invalid(c, n, SMCR_LLC_ERR_VERSION);

	memcpy(c, v1_test_link, 44);
	c[0] = 0x05; /* REQ ADD LINK needs the v2 header */
	expect_invalid(c, 44, SMCR_LLC_ERR_TYPE);
	c[0] = 0x0a;
	expect_invalid(c, 44, SMCR_LLC_ERR_TYPE);
	memcpy(c, v1_test_link, 44);
	c[1] = 45; /* v1 length must be 44 */
	expect_invalid(c, 44, SMCR_LLC_ERR_LENGTH);

	memcpy(c, b, n);
	c[1] = 43; /* v2 length below 44 in both byte orders */
	c[2] = 0;
	expect_invalid(c, n, SMCR_LLC_ERR_LENGTH);
	c[1] = 0x58; /* 88 claimed, 44 received */
	expect_invalid(c, n, SMCR_LLC_ERR_SHORT);
	c[1] = 0x01; /* 8193 */
	c[2] = 0x20;
	expect_invalid(c, n, SMCR_LLC_ERR_LENGTH);

	/*
	 * Counts the message cannot hold, but that Linux still answers (negative
	 * CONFIRM RKEY response) or clamps (DELETE RKEY v1: first 8): decoded, so
	 * the engine can answer; the list never reads past the message.
	 */
	memcpy(c, v1_confirm_rkey, 44);
	c[4] = 3;
	assert_int_equal(expect_ok(c, 44)->confirm_rkey.num_rkeys, 3);
	memcpy(c, v1_delete_rkey, 44);
	c[4] = 255;
	{
		struct smcr_llc_msg *m = expect_ok(c, 44);

		assert_int_equal(m->delete_rkey.num_rkeys, 255);
		assert_int_equal(m->delete_rkey.rkeys[2], 3);
		assert_int_equal(m->delete_rkey.rkeys[8], 0);
		expect_reencodes(m, c, 44);
	}
	n = load_bin("llc-delete-rkey-v2-req.bin", b, sizeof(b));
	memcpy(c, b, n);
	c[4] = 10; /* 8 + 40 > 44 */
	expect_invalid(c, n, SMCR_LLC_ERR_COUNT);

	n = load_bin("llc-add-link-v2-req.bin", b, sizeof(b));
	memcpy(c, b, n);
	c[70] = 2; /* two rkey triples claimed, one present */
	expect_invalid(c, n, SMCR_LLC_ERR_COUNT);
	c[70] = 0xff;
	c[71] = 0xff;
	expect_invalid(c, n, SMCR_LLC_ERR_COUNT);
	memcpy(c, b, n);
	c[1] = 60; /* extension header cut short */
	expect_invalid(c, 60, SMCR_LLC_ERR_LENGTH);

	/* REQ ADD LINK with too many GIDs. */
	memset(c, 0, sizeof(c));
	c[0] = 0x25;
	c[1] = 44;
	c[24] = 9;
	expect_invalid(c, 44, SMCR_LLC_ERR_COUNT);
	c[24] = 2; /* 28 + 32 > 44 */
	expect_invalid(c, 44, SMCR_LLC_ERR_COUNT);
	for (int i = 0; i <= SMCR_LLC_ERR_COUNT_; i++)
		assert_non_null(smcr_llc_err_str((enum smcr_llc_err)i));
	for (int i = 0; i < 16; i++)
		assert_non_null(smcr_llc_type_str((uint8_t)i));
	(void)state;
}

static void encoder_refuses_invalid(void **state)
{
	struct smcr_llc_msg *m = &g_msg;
	uint8_t b[64];
	enum smcr_llc_err err;

	memset(m, 0, sizeof(*m));
	m->hdr.type = SMCR_LLC_REQ_ADD_LINK;
	m->hdr.version = 1;
	assert_int_equal(smcr_llc_encode(m, b, sizeof(b), &err), 0);
	assert_int_equal(err, SMCR_LLC_ERR_TYPE);
	m->hdr.version = 3;
	assert_int_equal(smcr_llc_encode(m, b, sizeof(b), &err), 0);
	assert_int_equal(err, SMCR_LLC_ERR_VERSION);
	m->hdr.type = SMCR_LLC_ADD_LINK;
	m->hdr.version = 1;
	m->add_link.has_v2_ext = true; /* the rkey list exists only in v2 */
	assert_int_equal(smcr_llc_encode(m, b, sizeof(b), &err), 0);
	assert_int_equal(err, SMCR_LLC_ERR_TYPE);
	m->hdr.version = 2;
	m->add_link.num_rkeys = SMCR_LLC_MAX_ADD_LINK_RKEYS + 1;
	assert_int_equal(smcr_llc_encode(m, b, sizeof(b), &err), 0);
	assert_int_equal(err, SMCR_LLC_ERR_COUNT);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kernel_confirm_link),
		cmocka_unit_test(kernel_add_link),
		cmocka_unit_test(kernel_rkeys_test_delete),
		cmocka_unit_test(reference_v1),
		cmocka_unit_test(kernel_answers),
		cmocka_unit_test(add_link_v2_positive_response),
		cmocka_unit_test(add_link_v2_request_as_kernel),
		cmocka_unit_test(add_link_v2_head_of_long_answer),
		cmocka_unit_test(round_trip_all_types),
		cmocka_unit_test(big_endian_v2_length_accepted),
		cmocka_unit_test(rejects),
		cmocka_unit_test(encoder_refuses_invalid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
