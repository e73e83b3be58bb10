/* SPDX-License-Identifier: MIT */
/*
 * The same-host rendezvous message (shm_rv.c): what each end presents over the
 * UNIX socket to the other end of the TCP connection, and what the kernel
 * says about it in the ancillary data (the fds it carries, its sender's
 * credentials).  Pure functions over bytes, fuzzed (tests/fuzz/fuzz_rv.c).
 *
 * Both ends run on one host, so the proof is in host byte order.
 */
#ifndef SMCR_RENDEZVOUS_H
#define SMCR_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "smcr/wire.h"

#define SMCR_RV_SECRET_LEN 16
#define SMCR_RV_PROOF_LEN 32
#define SMCR_RV_PROOF_MAGIC 0x534d5250u
/*
 * 2: one fd (the memfd); doorbells ride on the rendezvous socket itself.
 * A version-1 peer (memfd and eventfd) is declined: TCP between the two.
 */
#define SMCR_RV_PROOF_VERSION 2u
/* The smallest and largest ring a proof may name (16 KiB << 0 .. << 15). */
#define SMCR_RV_RING_MIN (16u * 1024)
#define SMCR_RV_RING_MAX_CLASS 15u

struct smcr_rv_proof {
	uint8_t secret[SMCR_RV_SECRET_LEN];
	uint32_t ring_size; /* the sender's ring: 16 KiB << n, n <= 15 */
};

/* What came with a message: its fds (all closed by the caller) and its sender. */
#define SMCR_RV_ANC_MAX_FDS 16
struct smcr_rv_anc {
	int fds[SMCR_RV_ANC_MAX_FDS];
	unsigned nfds;  /* fds stored */
	unsigned extra; /* fds seen beyond those (never in a buffer we size) */
	bool has_cred;  /* SCM_CREDENTIALS present */
	pid_t pid;      /* the sender's process at the time it sent */
	uid_t uid;
};

/* Room for the ancillary data of one proof: creds and up to 4 fds. */
#define SMCR_RV_ANC_SPACE 64

void smcr_rv_proof_encode(const struct smcr_rv_proof *p, uint8_t out[SMCR_RV_PROOF_LEN]);

/*
 * Exactly one proof, current magic and version, zero reserved word, a ring
 * size of the form 16 KiB << n (n <= 15): SMCR_WIRE_OK, else SMCR_WIRE_INVALID.
 */
enum smcr_wire_status smcr_rv_proof_decode(const uint8_t *buf, size_t len,
					   struct smcr_rv_proof *out);

/*
 * Walk the ancillary data of a received message (`control`, `len` bytes as
 * recvmsg filled them): SCM_RIGHTS fds and SCM_CREDENTIALS.  Never reads
 * outside the buffer whatever its headers claim; a header that does not fit
 * ends the walk.
 */
void smcr_rv_anc_parse(const void *control, size_t len, struct smcr_rv_anc *out);

#endif /* SMCR_RENDEZVOUS_H */
