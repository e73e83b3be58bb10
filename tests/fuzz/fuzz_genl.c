// SPDX-License-Identifier: MIT
/*
 * libFuzzer entry for the generic netlink decoders (src/smcr/genl.c): one
 * datagram of a reply from the kernel, as the user EID table's dump and the
 * controller's family list read it.  No crash or over-read; every attribute
 * the walker hands out lies inside the input; every EID taken is valid
 * (A-Z 0-9 . - then blank padding), taken once, at most SMCR_CLC_MAX_EIDS.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smcr/genl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool eid_ok(const uint8_t *e)
{
	size_t n = 0;

	while (n < SMCR_CLC_EID_LEN && e[n] != ' ') {
		if (!((e[n] >= 'A' && e[n] <= 'Z') || (e[n] >= '0' && e[n] <= '9') ||
		      e[n] == '.' || e[n] == '-'))
			return false;
		n++;
	}
	for (size_t i = n; i < SMCR_CLC_EID_LEN; i++)
		if (e[i] != ' ')
			return false;
	return n > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smcr_genl_family f = { .name = "SMC_GEN_NETLINK" };
	struct smcr_genl_ueids t;
	enum smcr_genl_step step;
	const uint8_t *p = data, *d;
	size_t len = size, dlen;
	uint16_t type;

	memset(&t, 0, sizeof(t));
	step = smcr_genl_parse(data, size, smcr_genl_ueid_msg, &t);
	if (step != SMCR_GENL_MORE && step != SMCR_GENL_DONE && step != SMCR_GENL_FAIL)
		abort();
	if (t.n > SMCR_CLC_MAX_EIDS)
		abort();
	for (unsigned i = 0; i < t.n; i++) {
		if (!eid_ok(t.eid[i]))
			abort();
		for (unsigned j = 0; j < i; j++)
			if (!memcmp(t.eid[i], t.eid[j], SMCR_CLC_EID_LEN))
				abort();
	}
	(void)smcr_genl_parse(data, size, smcr_genl_family_msg, &f);
	/* the same bytes as one message's attributes */
	while (smcr_genl_attr(&p, &len, &type, &d, &dlen)) {
		if (d < data || d + dlen > data + size || p > data + size || len > size)
			abort();
	}
	return 0;
}
