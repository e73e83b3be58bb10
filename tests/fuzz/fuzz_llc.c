// SPDX-License-Identifier: MIT
/*
 * libFuzzer entry for the LLC decoder: no crash or over-read, and every
 * accepted message re-encodes to bytes that decode and re-encode identically.
 * The answer we send to a peer's request (smcr_llc_answer, also to messages
 * the decoder refused, as a cut ADD LINK) reads only its 44 bytes and is
 * itself a valid message when a 44-byte request was.  The head of a cut ADD
 * LINK answer decodes as an ADD LINK with no rkey or not at all.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smcr/llc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct smcr_llc_msg msg, msg2;
static uint8_t enc[SMCR_LLC_V2_MAX_LEN], enc2[SMCR_LLC_V2_MAX_LEN];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum smcr_llc_err err, err2;
	uint8_t ans[SMCR_LLC_MSG_LEN];
	size_t n, n2;

	if (size >= SMCR_LLC_MSG_LEN)
		smcr_llc_answer(data, size, SMCR_LLC_FLAG_ADD_LINK_REJ, ans);
	/* the same bytes as the kept head of a longer ADD LINK (the stated length in bytes 1-2) */
	if (size >= 3 && smcr_llc_decode_add_link_head(data, size, (size_t)(data[2] << 8 | data[1]),
						       &msg, &err) == SMCR_WIRE_OK &&
	    (msg.hdr.type != SMCR_LLC_ADD_LINK || msg.add_link.num_rkeys != 0))
		abort();
	if (smcr_llc_decode(data, size, &msg, &err) != SMCR_WIRE_OK) {
		if (smcr_llc_err_str(err) == NULL)
			abort();
		return 0;
	}
	if (msg.hdr.length < SMCR_LLC_MSG_LEN || msg.hdr.length > size)
		abort();
	/* a 44-byte request gets an answer its sender can decode */
	if (size == SMCR_LLC_MSG_LEN && !(msg.hdr.flags & SMCR_LLC_FLAG_RESP) &&
	    smcr_llc_decode(ans, sizeof(ans), &msg2, &err2) != SMCR_WIRE_OK)
		abort();
	/* v2 lengths may include bytes past the content: the re-encoding may be shorter. */
	n = smcr_llc_encode(&msg, enc, sizeof(enc), &err);
	if (n == 0 || n > msg.hdr.length || (msg.hdr.version == 1 && n != SMCR_LLC_MSG_LEN))
		abort();
	if (smcr_llc_decode(enc, n, &msg2, &err2) != SMCR_WIRE_OK)
		abort();
	n2 = smcr_llc_encode(&msg2, enc2, sizeof(enc2), &err2);
	if (n2 != n || memcmp(enc, enc2, n) != 0)
		abort();
	return 0;
}
