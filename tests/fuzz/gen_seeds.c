// SPDX-License-Identifier: MIT
/*
 * Writes valid CLC, LLC and CDC messages of every form into a directory, as
 * fuzzer seeds next to the kernel captures: gen_seeds clc|llc|cdc|genl|rv DIR.
 * For genl (netlink replies) only the ends of a reply: the kernel's captured
 * dumps (tests/data/kernel-smcr/genl-*.bin) are the seeds with content.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netlink.h>

#include "smcr/cdc.h"
#include "smcr/clc.h"
#include "smcr/llc.h"
#include "smcr/rendezvous.h"

#include <sys/socket.h>

static const char *out_dir;
static unsigned seed_no;

static void write_seed(const char *kind, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	if (len == 0) {
		fprintf(stderr, "gen_seeds: %s seed %u failed to encode\n", kind, seed_no);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/gen-%s-%03u.bin", out_dir, kind, seed_no++);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void clc_seed(const struct smcr_clc_msg *m)
{
	uint8_t b[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;

	write_seed("clc", b, smcr_clc_encode(m, b, sizeof(b), &err));
}

static void gen_clc(void)
{
	static struct smcr_clc_msg m;
	uint8_t v, t1, t2, ty;

	for (v = 1; v <= 2; v++)
		for (t1 = 0; t1 <= 3; t1++)
			for (t2 = 0; t2 <= (v == 2 ? 3 : 0); t2++) {
				memset(&m, 0, sizeof(m));
				m.hdr.type = SMCR_CLC_PROPOSAL;
				m.hdr.version = v;
				m.hdr.typev1 = t1;
				m.hdr.typev2 = v == 2 ? t2 : SMCR_CLC_PATH_NONE;
				m.proposal.smcd_area = v == 2 || t1 == 1 || t1 == 3;
				m.proposal.ipv4_prefix = 0x7f000000;
				m.proposal.ipv4_prefix_len = 8;
				m.proposal.ipv6_prefix_cnt = t1 == 3 ? 2 : 0;
				m.proposal.eid_cnt = 1;
				memcpy(m.proposal.eid[0], "SMCR-USERSPACE", 14);
				m.proposal.ism_gid_cnt = 2;
				m.proposal.ism_gids[0].chid = 0xffff;
				m.proposal.ism_gids[1].chid = 0xffff;
				m.proposal.release = 1;
				if (v == 1 && t1 == SMCR_CLC_PATH_NONE)
					continue;
				clc_seed(&m);
			}
	for (ty = SMCR_CLC_ACCEPT; ty <= SMCR_CLC_CONFIRM; ty++)
		for (v = 1; v <= 2; v++)
			for (t1 = 0; t1 <= 1; t1++) {
				memset(&m, 0, sizeof(m));
				m.hdr.type = ty;
				m.hdr.version = v;
				m.hdr.typev1 = t1;
				m.hdr.flag = true;
				m.accept.qpn = 0x11;
				m.accept.rmbe_alert_token = 1;
				m.accept.fce.release = 1;
				m.accept.gid_cnt = ty == SMCR_CLC_CONFIRM ? 2 : 0;
				clc_seed(&m);
				m.hdr.flag = false;
				clc_seed(&m);
			}
	for (v = 1; v <= 2; v++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = SMCR_CLC_DECLINE;
		m.hdr.version = v;
		m.decline.diag = SMCR_CLC_DECL_SYNCERR;
		m.hdr.flag = true;
		clc_seed(&m);
	}
}

static void gen_llc(void)
{
	static struct smcr_llc_msg m;
	uint8_t b[SMCR_LLC_V2_MAX_LEN];
	enum smcr_llc_err err;
	uint8_t v, t;

	for (v = 1; v <= 2; v++)
		for (t = 1; t <= 9; t++) {
			if ((v == 1 && t == SMCR_LLC_REQ_ADD_LINK) ||
			    (v == 2 && (t == SMCR_LLC_ADD_LINK_CONT || t == SMCR_LLC_CONFIRM_RKEY_CONT)))
				continue;
			memset(&m, 0, sizeof(m));
			m.hdr.type = t;
			m.hdr.version = v;
			if (t == SMCR_LLC_ADD_LINK && v == 2) {
				m.add_link.has_v2_ext = true;
				m.add_link.num_rkeys = 2;
			}
			if (t == SMCR_LLC_REQ_ADD_LINK)
				m.req_add_link.gid_cnt = 2;
			if (t == SMCR_LLC_DELETE_RKEY)
				m.delete_rkey.num_rkeys = v == 2 ? 12 : 8;
			if (t == SMCR_LLC_CONFIRM_RKEY)
				m.confirm_rkey.num_rkeys = 2;
			write_seed("llc", b, smcr_llc_encode(&m, b, sizeof(b), &err));
		}
}

static void gen_cdc(void)
{
	uint8_t b[SMCR_CDC_MSG_LEN];
	struct smcr_cdc_msg m = { .seqno = 0xffff, .token = 1, .prod = { 0xffff, 15 },
				  .cons = { 0, 16383 }, .prod_flags = 0x90, .conn_flags = 0x80 };

	smcr_cdc_encode(&m, b);
	write_seed("cdc", b, sizeof(b));
	m.prod_flags = SMCR_CDC_PROD_FAILOVER;
	m.conn_flags = SMCR_CDC_CONN_ABORT;
	smcr_cdc_encode(&m, b);
	write_seed("cdc", b, sizeof(b));
}

/* NLMSG_DONE (a dump's end, 0 or its error) and NLMSG_ERROR (an errno, or 0: an ack). */
static void gen_genl(void)
{
	static const int32_t errs[] = { 0, -1 };
	struct {
		struct nlmsghdr h;
		int32_t err;
	} m;

	for (unsigned t = 0; t < 2; t++)
		for (unsigned e = 0; e < 2; e++) {
			memset(&m, 0, sizeof(m));
			m.h.nlmsg_len = sizeof(m);
			m.h.nlmsg_type = t ? NLMSG_ERROR : NLMSG_DONE;
			m.h.nlmsg_flags = NLM_F_MULTI;
			m.err = errs[e];
			write_seed("genl", &m, sizeof(m));
		}
}

/*
 * Rendezvous (fuzz_rv's layout: proof length, proof, control buffer): a
 * proof with its memfd and its sender's credentials, as recvmsg fills them.
 */
static void gen_rv(void)
{
	struct smcr_rv_proof p = { .ring_size = 16u * 1024 << 4 };
	uint8_t b[1 + SMCR_RV_PROOF_LEN + SMCR_RV_ANC_SPACE];
	union {
		uint8_t buf[SMCR_RV_ANC_SPACE];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;
	struct ucred cred = { .pid = 4242, .uid = 1000, .gid = 1000 };
	int fd = 7;

	memset(&u, 0, sizeof(u));
	memset(p.secret, 0x5a, sizeof(p.secret));
	b[0] = SMCR_RV_PROOF_LEN;
	smcr_rv_proof_encode(&p, b + 1);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_CREDENTIALS;
	cm->cmsg_len = CMSG_LEN(sizeof(cred));
	memcpy(CMSG_DATA(cm), &cred, sizeof(cred));
	cm = CMSG_NXTHDR(&mh, cm);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fd));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	memcpy(b + 1 + SMCR_RV_PROOF_LEN, u.buf, sizeof(u.buf));
	write_seed("rv", b, sizeof(b));
	write_seed("rv", b, 1 + SMCR_RV_PROOF_LEN); /* no ancillary data */
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gen_seeds clc|llc|cdc|genl|rv DIR\n");
		return 2;
	}
	out_dir = argv[2];
	if (strcmp(argv[1], "clc") == 0)
		gen_clc();
	else if (strcmp(argv[1], "llc") == 0)
		gen_llc();
	else if (strcmp(argv[1], "cdc") == 0)
		gen_cdc();
	else if (strcmp(argv[1], "genl") == 0)
		gen_genl();
	else if (strcmp(argv[1], "rv") == 0)
		gen_rv();
	else
		return 2;
	return 0;
}
