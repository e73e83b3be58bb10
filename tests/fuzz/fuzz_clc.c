// SPDX-License-Identifier: MIT
/*
 * libFuzzer entry for the CLC stream decoder.  Besides "no crash, no
 * over-read" (ASan, UBSan) it checks that the decoder's answers are
 * consistent: a valid message re-encodes, the re-encoding decodes and encodes
 * to the same bytes, and every shorter prefix asks for more bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smcr/clc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct smcr_clc_msg msg, msg2;
static uint8_t enc[SMCR_CLC_MAX_LEN], enc2[SMCR_CLC_MAX_LEN];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum smcr_clc_err err, err2;
	size_t len = 0, len2 = 0, n, n2;
	enum smcr_wire_status st = smcr_clc_decode(data, size, &msg, &len, &err);

	if (st == SMCR_WIRE_INVALID && smcr_clc_err_str(err) == NULL)
		abort();
	if (st == SMCR_WIRE_NEED_MORE && (len <= size || len > SMCR_CLC_MAX_LEN))
		abort();
	/* The header peek agrees with the decoder's verdict on the same bytes. */
	if (st == SMCR_WIRE_OK && smcr_clc_peek_type(data, size) != msg.hdr.type)
		abort();
	if (st == SMCR_WIRE_NEED_MORE && smcr_clc_peek_type(data, size) < 0)
		abort();
	if (st != SMCR_WIRE_OK)
		return 0;
	if (len > size || len < SMCR_CLC_DECL_V1_LEN || len != msg.hdr.length)
		abort();
	/* One byte less of the same message is an incomplete message. */
	if (smcr_clc_frame(data, len - 1, &len2, &err2) != SMCR_WIRE_NEED_MORE || len2 != len)
		abort();

	n = smcr_clc_encode(&msg, enc, sizeof(enc), &err);
	if (n == 0)
		abort();
	if (smcr_clc_decode(enc, n, &msg2, &len2, &err2) != SMCR_WIRE_OK || len2 != n)
		abort();
	n2 = smcr_clc_encode(&msg2, enc2, sizeof(enc2), &err2);
	if (n2 != n || memcmp(enc, enc2, n) != 0)
		abort();
	return 0;
}
