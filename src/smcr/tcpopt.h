/* SPDX-License-Identifier: MIT */
/*
 * RFC 7609 option mode, the library's side (design §4): marks sockets for the
 * cgroup sock_ops program (src/bpf) and reads what it learnt, through the
 * socket-storage map it pins (include/smcr/bpf_abi.h), with raw bpf(2) calls
 * (no libbpf in the library).  The public calls are in include/smcr/engine.h
 * (smcr_tcpopt_*); this header adds the seams the unit test uses.
 *
 * Detection happens once per process, at the first mark or question: one
 * BPF_OBJ_GET of the pinned map.  When it fails (nothing attached, no
 * privilege, no bpffs, no BPF) the mode is off for the process, logged once at
 * info, and every later call returns at once without a system call.
 */
#ifndef SMCR_TCPOPT_H
#define SMCR_TCPOPT_H

#include <stdint.h>

#include "smcr/engine.h"

/* What one record's flags (struct smcr_bpf_sk) say about the peer. */
enum smcr_tcpopt_peer smcr_tcpopt_verdict(uint32_t flags);

/* ---- for tests ------------------------------------------------------------------- */

/* The bpf(2) system call; tests substitute a fake map. NULL restores the real one. */
typedef long (*smcr_tcpopt_bpf_fn)(int cmd, void *attr, unsigned int size);
void smcr_tcpopt_set_bpf_for_test(smcr_tcpopt_bpf_fn fn);

/* Forget the detection (and close the map fd) so the next call detects again. */
void smcr_tcpopt_reset_for_test(void);

#endif /* SMCR_TCPOPT_H */
