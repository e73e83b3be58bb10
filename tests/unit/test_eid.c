/* SPDX-License-Identifier: MIT */
/*
 * The kernel's user EID table as smcr reads it: a DUMP_UEID reply
 * decoded from bytes (src/smcr/genl.c; the kernel's own replies captured in
 * the rxe VM, tests/data/kernel-smcr/genl-*.bin, and replies built here as
 * the kernel builds them: one message per entry, NLM_F_MULTI, then
 * NLMSG_DONE), hostile and cut replies, the controller's family list, and
 * the merge rule of src/smcr/eid.c (SMCR_UEID's entries first, then the
 * kernel's not yet listed, then our own, at most 8).  Last, the real kernel
 * of the machine running the test: the controller is found by name in its
 * family list, and the EID list ends with our own whatever the kernel has.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>

#include "smcr/eid.h"
#include "smcr/genl.h"
#include "testdata.h"

#define EID(s) ((const uint8_t *)(s "                                "))

static const char own[] = "SMCR-USERSPACE-VERBS            ";

/* A reply under construction: netlink messages back to back, as in one datagram. */
struct nlbuf {
	uint8_t b[8192];
	size_t len, msg; /* the open message's start */
};

static void put(struct nlbuf *nb, const void *p, size_t n)
{
	assert_true(nb->len + n <= sizeof(nb->b));
	memcpy(nb->b + nb->len, p, n);
	nb->len += n;
	while (nb->len % 4)
		nb->b[nb->len++] = 0;
}

static void msg_begin(struct nlbuf *nb, uint16_t type, uint16_t flags, uint8_t cmd)
{
	struct nlmsghdr h = {.nlmsg_type = type, .nlmsg_flags = flags};
	struct genlmsghdr g = {.cmd = cmd, .version = 1};

	nb->msg = nb->len;
	put(nb, &h, sizeof(h));
	put(nb, &g, sizeof(g));
}

static void msg_end(struct nlbuf *nb)
{
	uint32_t n = (uint32_t)(nb->len - nb->msg);

	memcpy(nb->b + nb->msg + offsetof(struct nlmsghdr, nlmsg_len), &n, sizeof(n));
}

static void attr(struct nlbuf *nb, uint16_t type, const void *data, size_t len)
{
	struct nlattr a = {.nla_len = (uint16_t)(NLA_HDRLEN + len), .nla_type = type};

	put(nb, &a, sizeof(a));
	put(nb, data, len);
}

/* One entry as smc_nl_ueid_dumpinfo() sends it: the 32 stored bytes and a NUL. */
static void ueid_msg(struct nlbuf *nb, uint16_t family, const char *text)
{
	char s[SMCR_CLC_EID_LEN + 1];

	memset(s, ' ', SMCR_CLC_EID_LEN);
	memcpy(s, text,
	       strlen(text) < SMCR_CLC_EID_LEN ? strlen(text) : SMCR_CLC_EID_LEN);
	s[SMCR_CLC_EID_LEN] = '\0';
	msg_begin(nb, family, NLM_F_MULTI, SMC_NETLINK_DUMP_UEID);
	attr(nb, SMC_NLA_EID_TABLE_ENTRY, s, sizeof(s));
	msg_end(nb);
}

static void done_msg(struct nlbuf *nb, uint16_t type, int32_t err)
{
	struct nlmsghdr h = {.nlmsg_type = type, .nlmsg_flags = NLM_F_MULTI};

	nb->msg = nb->len;
	put(nb, &h, sizeof(h));
	put(nb, &err, sizeof(err));
	msg_end(nb);
}

/* nb decoded on its own, ending with `want`: the entries taken. */
static struct smcr_genl_ueids decoded(const struct nlbuf *nb, enum smcr_genl_step want)
{
	struct smcr_genl_ueids t;

	memset(&t, 0, sizeof(t));
	assert_int_equal(smcr_genl_parse(nb->b, nb->len, smcr_genl_ueid_msg, &t), want);
	return t;
}

/* n entries taken, `bad` refused, the last one `last`. */
static void assert_eids(const struct smcr_genl_ueids *t, unsigned n, unsigned bad,
			const uint8_t *last)
{
	assert_int_equal(t->n, n);
	assert_int_equal(t->bad, bad);
	if (n > 0)
		assert_memory_equal(t->eid[n - 1], last, SMCR_CLC_EID_LEN);
}

static void test_reply(void **state)
{
	struct smcr_genl_ueids t;
	struct nlbuf nb = {.len = 0};
	uint8_t *odd;

	(void)state;
	ueid_msg(&nb, 0x1f, "RXE-VM");
	ueid_msg(&nb, 0x1f, "SMC.EID-2");
	done_msg(&nb, NLMSG_DONE, 0);
	t = decoded(&nb, SMCR_GENL_DONE);
	assert_eids(&t, 2, 0, EID("SMC.EID-2"));
	assert_memory_equal(t.eid[0], EID("RXE-VM"), SMCR_CLC_EID_LEN);

	/* the same bytes at an odd address: headers are not read in place */
	odd = malloc(nb.len + 1);
	assert_non_null(odd);
	memcpy(odd + 1, nb.b, nb.len);
	memset(&t, 0, sizeof(t));
	assert_int_equal(smcr_genl_parse(odd + 1, nb.len, smcr_genl_ueid_msg, &t),
			 SMCR_GENL_DONE);
	assert_eids(&t, 2, 0, EID("SMC.EID-2"));
	free(odd);

	/* an empty table: NLMSG_DONE alone */
	nb.len = 0;
	done_msg(&nb, NLMSG_DONE, 0);
	t = decoded(&nb, SMCR_GENL_DONE);
	assert_eids(&t, 0, 0, NULL);
}

/* A reply in two datagrams: the first says MORE, the entries add up, the second DONE. */
static void test_multipart(void **state)
{
	struct smcr_genl_ueids t;
	struct nlbuf a = {.len = 0}, b = {.len = 0};

	(void)state;
	ueid_msg(&a, 0x1f, "A1");
	ueid_msg(&a, 0x1f, "A2");
	ueid_msg(&b, 0x1f, "B1");
	done_msg(&b, NLMSG_DONE, 0);
	t = decoded(&a, SMCR_GENL_MORE);
	assert_int_equal(smcr_genl_parse(b.b, b.len, smcr_genl_ueid_msg, &t),
			 SMCR_GENL_DONE);
	assert_eids(&t, 3, 0, EID("B1"));
}

/* After an entry: an errno, a failed dump's DONE, OVERRUN fail; an ack (errno 0) ends. */
static void test_errors(void **state)
{
	static const struct {
		uint16_t type;
		int32_t err;
		enum smcr_genl_step want;
	} ends[] = {
	    {NLMSG_ERROR, -EPERM, SMCR_GENL_FAIL},
	    {NLMSG_ERROR, 0, SMCR_GENL_DONE},
	    {NLMSG_DONE, -EMSGSIZE, SMCR_GENL_FAIL},
	    {NLMSG_OVERRUN, 0, SMCR_GENL_FAIL},
	};
	struct nlbuf nb = {.len = 0};

	(void)state;
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		nb.len = 0;
		ueid_msg(&nb, 0x1f, "RXE-VM");
		done_msg(&nb, ends[i].type, ends[i].err);
		(void)decoded(&nb, ends[i].want);
	}
	/* an error message too short for its errno, and an empty datagram */
	nb.len = 0;
	msg_begin(&nb, NLMSG_ERROR, 0, 0);
	nb.len = NLMSG_HDRLEN;
	msg_end(&nb);
	(void)decoded(&nb, SMCR_GENL_FAIL);
	nb.len = 0;
	(void)decoded(&nb, SMCR_GENL_FAIL);
}

/* Lengths that lie: nothing is read past the datagram, the message or the attribute. */
static void test_hostile(void **state)
{
	struct smcr_genl_ueids t;
	struct nlbuf nb = {.len = 0};
	uint16_t big = 200;
	uint32_t n;

	(void)state;
	ueid_msg(&nb, 0x1f, "RXE-VM");
	done_msg(&nb, NLMSG_DONE, 0);
	/* every cut: no over-read (the ASan build), never DONE before the end */
	for (size_t cut = 0; cut < nb.len; cut++) {
		memset(&t, 0, sizeof(t));
		assert_int_not_equal(smcr_genl_parse(nb.b, cut, smcr_genl_ueid_msg, &t),
				     SMCR_GENL_DONE);
	}
	/* a message longer than the datagram, or shorter than its header */
	n = (uint32_t)nb.len + 4;
	memcpy(nb.b, &n, sizeof(n));
	(void)decoded(&nb, SMCR_GENL_FAIL);
	n = NLMSG_HDRLEN - 1;
	memcpy(nb.b, &n, sizeof(n));
	(void)decoded(&nb, SMCR_GENL_FAIL);

	/* an attribute longer than its message: not taken, the next message still read */
	nb.len = 0;
	msg_begin(&nb, 0x1f, NLM_F_MULTI, SMC_NETLINK_DUMP_UEID);
	attr(&nb, SMC_NLA_EID_TABLE_ENTRY, "RXE-VM", 7);
	msg_end(&nb);
	memcpy(nb.b + NLMSG_HDRLEN + GENL_HDRLEN, &big, sizeof(big));
	ueid_msg(&nb, 0x1f, "NEXT");
	done_msg(&nb, NLMSG_DONE, 0);
	t = decoded(&nb, SMCR_GENL_DONE);
	assert_eids(&t, 1, 0, EID("NEXT"));
}

/* What the kernel would never store is not taken: bad characters, empty, too long. */
static void test_entries(void **state)
{
	struct smcr_genl_ueids t;
	struct nlbuf nb = {.len = 0};
	char long_eid[40];

	(void)state;
	memset(long_eid, 'L', sizeof(long_eid) - 1);
	long_eid[sizeof(long_eid) - 1] = '\0';
	msg_begin(&nb, 0x1f, NLM_F_MULTI, SMC_NETLINK_DUMP_UEID);
	attr(&nb, SMC_NLA_EID_TABLE_ENTRY, "BAD_EID", 8);
	attr(&nb, SMC_NLA_EID_TABLE_ENTRY, "", 1);
	attr(&nb, SMC_NLA_EID_TABLE_ENTRY, "        ", 9);
	attr(&nb, SMC_NLA_EID_TABLE_ENTRY, long_eid, sizeof(long_eid));
	attr(&nb, SMC_NLA_EID_TABLE_ENTRY, "NO-NUL", 6); /* cut at the attribute's end */
	attr(&nb, SMC_NLA_EID_TABLE_UNSPEC, "IGNORED", 8);
	/* the type without its flags */
	attr(&nb, SMC_NLA_EID_TABLE_ENTRY | NLA_F_NESTED, "FLAGGED", 8);
	msg_end(&nb);
	ueid_msg(&nb, 0x1f, "NO-NUL"); /* twice: kept once */
	done_msg(&nb, NLMSG_DONE, 0);
	t = decoded(&nb, SMCR_GENL_DONE);
	assert_eids(&t, 2, 4, EID("FLAGGED"));
	assert_memory_equal(t.eid[0], EID("NO-NUL"), SMCR_CLC_EID_LEN);

	/* more entries than a Proposal carries: the first 8 */
	nb.len = 0;
	for (int i = 0; i < 12; i++) {
		char e[8];

		snprintf(e, sizeof(e), "E%d", i);
		ueid_msg(&nb, 0x1f, e);
	}
	done_msg(&nb, NLMSG_DONE, 0);
	t = decoded(&nb, SMCR_GENL_DONE);
	assert_eids(&t, SMCR_CLC_MAX_EIDS, 0, EID("E7"));
}

/*
 * The kernel's own replies (rxe VM, Debian 6.12, `rxe-vm-smc ueid RXE-VM`), each
 * datagram as received: the controller's family list in two, SMC_GEN_NETLINK id 35
 * in it; the UEID dump in two, the entry (its messages typed 35), then NLMSG_DONE.
 */
static void test_kernel_capture(void **state)
{
	struct smcr_genl_family f = {.name = SMC_GENL_FAMILY_NAME};
	struct smcr_genl_ueids t;
	uint8_t buf[8192];
	uint16_t type;
	size_t n;

	(void)state;
	n = load_bin("genl-family-dump-1.bin", buf, sizeof(buf));
	assert_int_equal(smcr_genl_parse(buf, n, smcr_genl_family_msg, &f),
			 SMCR_GENL_MORE);
	n = load_bin("genl-family-dump-2.bin", buf, sizeof(buf));
	assert_int_equal(smcr_genl_parse(buf, n, smcr_genl_family_msg, &f),
			 SMCR_GENL_DONE);
	assert_int_equal(f.id, 35);

	memset(&t, 0, sizeof(t));
	n = load_bin("genl-ueid-dump-1.bin", buf, sizeof(buf));
	memcpy(&type, buf + offsetof(struct nlmsghdr, nlmsg_type), sizeof(type));
	assert_int_equal(type, f.id);
	assert_int_equal(smcr_genl_parse(buf, n, smcr_genl_ueid_msg, &t), SMCR_GENL_MORE);
	n = load_bin("genl-ueid-dump-2.bin", buf, sizeof(buf));
	assert_int_equal(smcr_genl_parse(buf, n, smcr_genl_ueid_msg, &t), SMCR_GENL_DONE);
	assert_eids(&t, 1, 0, EID("RXE-VM"));
}

/* The controller's family list: the id of the family whose message names it. */
static void test_family(void **state)
{
	struct smcr_genl_family f = {.name = SMC_GENL_FAMILY_NAME};
	struct nlbuf nb = {.len = 0};
	uint16_t id;

	(void)state;
	msg_begin(&nb, GENL_ID_CTRL, NLM_F_MULTI, CTRL_CMD_NEWFAMILY);
	id = GENL_ID_CTRL;
	attr(&nb, CTRL_ATTR_FAMILY_ID, &id, sizeof(id));
	attr(&nb, CTRL_ATTR_FAMILY_NAME, "nlctrl", 7);
	msg_end(&nb);
	msg_begin(&nb, GENL_ID_CTRL, NLM_F_MULTI, CTRL_CMD_NEWFAMILY);
	attr(&nb, CTRL_ATTR_FAMILY_NAME, SMC_GENL_FAMILY_NAME,
	     sizeof(SMC_GENL_FAMILY_NAME));
	id = 0x23;
	attr(&nb, CTRL_ATTR_FAMILY_ID, &id, sizeof(id));
	msg_end(&nb);
	msg_begin(&nb, GENL_ID_CTRL, NLM_F_MULTI, CTRL_CMD_NEWFAMILY);
	id = 0x24;
	attr(&nb, CTRL_ATTR_FAMILY_ID, &id, sizeof(id));
	attr(&nb, CTRL_ATTR_FAMILY_NAME, "SMC_GEN_NETLINK_NOT", 20);
	msg_end(&nb);
	done_msg(&nb, NLMSG_DONE, 0);
	assert_int_equal(smcr_genl_parse(nb.b, nb.len, smcr_genl_family_msg, &f),
			 SMCR_GENL_DONE);
	assert_int_equal(f.id, 0x23);
}

/* SMCR_UEID's entries, then the kernel's not listed yet, then ours; 8 at most, ours last.
 */
static void test_merge(void **state)
{
	const uint8_t(*o)[SMCR_CLC_EID_LEN] = (const void *)own;
	uint8_t expl[8][SMCR_CLC_EID_LEN], kern[4][SMCR_CLC_EID_LEN];
	uint8_t out[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN];
	unsigned n;

	(void)state;
	/* nothing set, nothing in the kernel: ours alone */
	n = smcr_eid_merge(NULL, 0, NULL, 0, o[0], out);
	assert_int_equal(n, 1);
	assert_memory_equal(out[0], own, SMCR_CLC_EID_LEN);
	/* the kernel's alone (no SMCR_UEID): nothing configured on either side */
	memcpy(kern[0], EID("RXE-VM"), SMCR_CLC_EID_LEN);
	n = smcr_eid_merge(NULL, 0, (const void *)kern, 1, o[0], out);
	assert_int_equal(n, 2);
	assert_memory_equal(out[0], EID("RXE-VM"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[1], own, SMCR_CLC_EID_LEN);
	/* both: explicit first, the kernel's duplicate dropped, duplicates within one
	 * list too */
	memcpy(expl[0], EID("SITE-A"), SMCR_CLC_EID_LEN);
	memcpy(expl[1], EID("RXE-VM"), SMCR_CLC_EID_LEN);
	memcpy(expl[2], EID("SITE-A"), SMCR_CLC_EID_LEN);
	memcpy(kern[1], EID("SITE-B"), SMCR_CLC_EID_LEN);
	n = smcr_eid_merge((const void *)expl, 3, (const void *)kern, 2, o[0], out);
	assert_int_equal(n, 4);
	assert_memory_equal(out[0], EID("SITE-A"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[1], EID("RXE-VM"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[2], EID("SITE-B"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[3], own, SMCR_CLC_EID_LEN);
	/* ours named in a list: still once, still last */
	memcpy(expl[0], own, SMCR_CLC_EID_LEN);
	n = smcr_eid_merge((const void *)expl, 2, (const void *)kern, 2, o[0], out);
	assert_int_equal(n, 3);
	assert_memory_equal(out[0], EID("RXE-VM"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[1], EID("SITE-B"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[2], own, SMCR_CLC_EID_LEN);
	/* the cap: 7 explicit ones leave no room for the kernel's, ours is the 8th */
	for (int i = 0; i < 7; i++) {
		char e[8];

		snprintf(e, sizeof(e), "X%d", i);
		memset(expl[i], ' ', SMCR_CLC_EID_LEN);
		memcpy(expl[i], e, strlen(e));
	}
	memcpy(kern[0], EID("K0"), SMCR_CLC_EID_LEN);
	n = smcr_eid_merge((const void *)expl, 7, (const void *)kern, 2, o[0], out);
	assert_int_equal(n, SMCR_CLC_MAX_EIDS);
	assert_memory_equal(out[6], expl[6], SMCR_CLC_EID_LEN);
	assert_memory_equal(out[7], own, SMCR_CLC_EID_LEN);
	/* 5 explicit, 4 from the kernel: 2 of the kernel's fit */
	memcpy(kern[2], EID("K2"), SMCR_CLC_EID_LEN);
	memcpy(kern[3], EID("K3"), SMCR_CLC_EID_LEN);
	n = smcr_eid_merge((const void *)expl, 5, (const void *)kern, 4, o[0], out);
	assert_int_equal(n, SMCR_CLC_MAX_EIDS);
	assert_memory_equal(out[5], EID("K0"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[6], EID("SITE-B"), SMCR_CLC_EID_LEN);
	assert_memory_equal(out[7], own, SMCR_CLC_EID_LEN);
	assert_int_equal(smcr_eid_len(EID("RXE-VM")), 6);
	assert_int_equal(smcr_eid_len(expl[0]), 2);
}

/* This machine's kernel: the controller is in its own list; our EID always ends the list.
 */
static void test_live(void **state)
{
	uint8_t out[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN];
	int fd = smcr_genl_open(1000);
	unsigned n;

	(void)state;
	if (fd < 0) {
		print_message("no generic netlink socket here (%s): live part skipped\n",
			      strerror(errno));
		return;
	}
	assert_int_equal(smcr_genl_family(fd, "nlctrl"), GENL_ID_CTRL);
	assert_int_equal(smcr_genl_family(fd, "SMCR-NO-SUCH-FAMILY"), 0);
	smcr_genl_close(fd);
	n = smcr_eid_list((const uint8_t *)own, out);
	assert_in_range(n, 1, SMCR_CLC_MAX_EIDS);
	assert_memory_equal(out[n - 1], own, SMCR_CLC_EID_LEN);
	print_message("this kernel's user EIDs: %u\n", n - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reply),   cmocka_unit_test(test_multipart),
	    cmocka_unit_test(test_errors),  cmocka_unit_test(test_hostile),
	    cmocka_unit_test(test_entries), cmocka_unit_test(test_kernel_capture),
	    cmocka_unit_test(test_family),  cmocka_unit_test(test_merge),
	    cmocka_unit_test(test_live),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
