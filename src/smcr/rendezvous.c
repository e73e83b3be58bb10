// SPDX-License-Identifier: MIT
/*
 * The same-host rendezvous message: see rendezvous.h.
 */
#include "smcr/rendezvous.h"

#include <string.h>
#include <sys/socket.h>

/* Layout: magic, version, secret[16], ring size, reserved (0). */
#define OFF_MAGIC 0
#define OFF_VERSION 4
#define OFF_SECRET 8
#define OFF_RING 24
#define OFF_RESERVED 28

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

void smcr_rv_proof_encode(const struct smcr_rv_proof *p, uint8_t out[SMCR_RV_PROOF_LEN])
{
	memset(out, 0, SMCR_RV_PROOF_LEN);
	put_u32(out + OFF_MAGIC, SMCR_RV_PROOF_MAGIC);
	put_u32(out + OFF_VERSION, SMCR_RV_PROOF_VERSION);
	memcpy(out + OFF_SECRET, p->secret, SMCR_RV_SECRET_LEN);
	put_u32(out + OFF_RING, p->ring_size);
}

static bool ring_size_valid(uint32_t size)
{
	for (unsigned n = 0; n <= SMCR_RV_RING_MAX_CLASS; n++)
		if (size == SMCR_RV_RING_MIN << n)
			return true;
	return false;
}

enum smcr_wire_status smcr_rv_proof_decode(const uint8_t *buf, size_t len,
					   struct smcr_rv_proof *out)
{
	if (len != SMCR_RV_PROOF_LEN || get_u32(buf + OFF_MAGIC) != SMCR_RV_PROOF_MAGIC ||
	    get_u32(buf + OFF_VERSION) != SMCR_RV_PROOF_VERSION ||
	    get_u32(buf + OFF_RESERVED) != 0 || !ring_size_valid(get_u32(buf + OFF_RING)))
		return SMCR_WIRE_INVALID;
	memcpy(out->secret, buf + OFF_SECRET, SMCR_RV_SECRET_LEN);
	out->ring_size = get_u32(buf + OFF_RING);
	return SMCR_WIRE_OK;
}

static void take_fds(const uint8_t *data, size_t len, struct smcr_rv_anc *out)
{
	for (size_t off = 0; len - off >= sizeof(int); off += sizeof(int)) {
		int fd;

		memcpy(&fd, data + off, sizeof(fd));
		if (out->nfds < SMCR_RV_ANC_MAX_FDS)
			out->fds[out->nfds++] = fd;
		else
			out->extra++;
	}
}

void smcr_rv_anc_parse(const void *control, size_t len, struct smcr_rv_anc *out)
{
	const uint8_t *buf = control;
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	/* Offsets, not pointers: a hostile cmsg_len must not move us past the end. */
	while (len - off >= sizeof(struct cmsghdr)) {
		struct cmsghdr h;
		const uint8_t *data = buf + off + CMSG_LEN(0);
		size_t dlen, step;

		memcpy(&h, buf + off, sizeof(h));
		if (h.cmsg_len < CMSG_LEN(0) || h.cmsg_len > len - off)
			break;
		dlen = h.cmsg_len - CMSG_LEN(0);
		if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
			take_fds(data, dlen, out);
		} else if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_CREDENTIALS &&
			   dlen >= sizeof(struct ucred)) {
			struct ucred c;

			memcpy(&c, data, sizeof(c));
			out->has_cred = true;
			out->pid = c.pid;
			out->uid = c.uid;
		}
		step = CMSG_ALIGN(h.cmsg_len);
		if (step == 0 || step > len - off)
			break;
		off += step;
	}
}
