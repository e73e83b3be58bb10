// SPDX-License-Identifier: MIT
/*
 * libFuzzer entry for what the same-host rendezvous parses (rendezvous.h):
 * a peer's proof and the ancillary data its message came with.
 * Input: one length byte n, then n bytes of proof, then the control buffer.
 *  - Proof: no crash or over-read; an accepted proof re-encodes to the input.
 *  - Ancillary data (copied to a buffer of exactly its size, so ASan sees
 *    any read past it): no crash; the fds found, stored plus counted, are
 *    never more than the buffer could hold.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smcr/rendezvous.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_proof(const uint8_t *p, size_t n)
{
	struct smcr_rv_proof proof;
	uint8_t out[SMCR_RV_PROOF_LEN];

	if (smcr_rv_proof_decode(p, n, &proof) != SMCR_WIRE_OK)
		return;
	if (n != SMCR_RV_PROOF_LEN)
		abort();
	smcr_rv_proof_encode(&proof, out);
	if (memcmp(out, p, SMCR_RV_PROOF_LEN) != 0)
		abort();
}

static void check_anc(const uint8_t *c, size_t n)
{
	struct smcr_rv_anc anc;
	uint8_t *copy = malloc(n ? n : 1);

	if (!copy)
		return;
	memcpy(copy, c, n);
	smcr_rv_anc_parse(copy, n, &anc);
	if (anc.nfds > SMCR_RV_ANC_MAX_FDS || (size_t)(anc.nfds + anc.extra) * sizeof(int) > n)
		abort();
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n;

	if (size < 1)
		return 0;
	n = data[0];
	if (n > size - 1)
		n = size - 1;
	check_proof(data + 1, n);
	check_anc(data + 1 + n, size - 1 - n);
	return 0;
}
