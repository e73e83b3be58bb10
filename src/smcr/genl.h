/* SPDX-License-Identifier: MIT */
/*
 * Generic netlink, as far as the engine talks it to the kernel's SMC: the
 * controller's list of families, and dumps of the SMC families' tables
 * (SMC_PNETID's PNET table for ib.c, SMC_GEN_NETLINK's user EID table for
 * eid.c).  No libnl: a request is one message, a reply a few datagrams.
 *
 * The decoders (smcr_genl_parse and the per-message callbacks) are pure
 * functions over bytes, fed by smcr_genl_talk() one datagram at a time, and
 * by the unit tests and the fuzzer (tests/fuzz/fuzz_genl.c) directly: a
 * reply is outside input, read with every length checked.
 */
#ifndef SMCR_GENL_H
#define SMCR_GENL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smcr/clc.h"

/* Where one datagram of a reply leaves the exchange. */
enum smcr_genl_step {
	SMCR_GENL_MORE, /* a multi-part reply goes on in the next datagram */
	SMCR_GENL_DONE, /* NLMSG_DONE, an acknowledgement, or a single-message reply */
	SMCR_GENL_FAIL, /* an error message, or bytes that are no netlink message */
};

/* Called with one generic netlink message's attributes (after its genl header). */
typedef void smcr_genl_msg_fn(const uint8_t *attrs, size_t len, void *arg);

/* One datagram of a reply: each generic netlink message in it to fn. */
enum smcr_genl_step smcr_genl_parse(const void *buf, size_t len, smcr_genl_msg_fn *fn,
				    void *arg);

/*
 * The next attribute of the *len bytes at *p: its type (flags masked off),
 * payload and payload length, and moves *p and *len past it.  False at the end,
 * or at an attribute whose length is impossible (the rest is not read).
 */
bool smcr_genl_attr(const uint8_t **p, size_t *len, uint16_t *type, const uint8_t **data,
		    size_t *dlen);

/* A string attribute's payload into out[cap] (cap > 0), NUL-terminated, cut to fit. */
void smcr_genl_str(const uint8_t *data, size_t dlen, char *out, size_t cap);

/* The controller's family list (CTRL_CMD_GETFAMILY dump): the id of `name`, or 0. */
struct smcr_genl_family {
	const char *name;
	uint16_t id;
};
smcr_genl_msg_fn smcr_genl_family_msg; /* arg: struct smcr_genl_family */

/*
 * The kernel's user EID table (SMC_NETLINK_DUMP_UEID: one message per entry,
 * its SMC_NLA_EID_TABLE_ENTRY a string of up to 32 characters, blank padded
 * as the kernel stores it).  Each valid entry (the kernel's rule: A-Z 0-9 .
 * -) is kept blank padded as CLC carries it, once, up to SMCR_CLC_MAX_EIDS;
 * anything else counts in `bad`.
 */
struct smcr_genl_ueids {
	uint8_t eid[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN];
	unsigned n;
	unsigned bad;
};
smcr_genl_msg_fn smcr_genl_ueid_msg; /* arg: struct smcr_genl_ueids */

/* ---- talking to the kernel (through the real libc table) ----------------------- */

/* A generic netlink socket (close-on-exec), receives cut off at timeout_ms: fd or -1. */
int smcr_genl_open(int timeout_ms);
/* Close it, keeping errno. */
void smcr_genl_close(int fd);
/*
 * One request (command `cmd` of `family`, netlink `flags` such as
 * NLM_F_DUMP), then each reply message to fn until the kernel says it is
 * done: 0, or -1 (the request failed, the kernel answered an error, or a
 * receive timed out; fn may have seen part of the reply).
 */
int smcr_genl_talk(int fd, uint16_t family, uint8_t cmd, uint16_t flags,
		   smcr_genl_msg_fn *fn, void *arg);
/*
 * The id of the generic netlink family `name`, 0 if the kernel has none.
 * Read from the controller's list of all families: asking for one family by
 * name makes the kernel load the module that provides it (smc.ko has such
 * aliases), for any caller, and a library has no business loading modules.
 */
uint16_t smcr_genl_family(int fd, const char *name);

#endif /* SMCR_GENL_H */
