/* SPDX-License-Identifier: MIT */
/*
 * RFC 7609 option mode: what the cgroup sock_ops program (src/bpf), the library
 * (src/smcr/tcpopt.c) and the admin tool (src/tools/smcr_bpf.c) share.
 *
 * The program writes SMC's experimental TCP option (kind 254, length 6,
 * ExID 0xE2D4C3D9: RFC 7609 §3.1, RFC 6994) into
 *   - the SYN of a socket the library marked SMCR_BPF_F_PROPOSE before connect();
 *   - the SYN-ACK of a listener the library marked SMCR_BPF_F_SERVE before
 *     listen(), while it carries that mark, and only when the SYN carried the
 *     option (as the kernel's tcp_synack_options() with ireq->smc_ok);
 * and records in the socket's storage whether the peer's SYN / SYN-ACK carried it.
 *
 * The socket-storage map is keyed by the socket: from user space, by an fd of it
 * (bpf(2) BPF_MAP_LOOKUP_ELEM / BPF_MAP_UPDATE_ELEM / BPF_MAP_DELETE_ELEM with
 * key = the fd, an int).  Every user may write it (each marks its own sockets),
 * and that is all it gives: no record names or counts another socket, and a
 * record goes with its socket.  Deleting a listener's record withdraws it
 * (smcr_tcpopt_unserve()).
 * Only the types of <linux/types.h> here: the BPF side includes this too.
 */
#ifndef SMCR_BPF_ABI_H
#define SMCR_BPF_ABI_H

#include <linux/types.h>

#define SMCR_BPF_PIN_DIR "/sys/fs/bpf/smcr"
/* Maps are pinned by name (libbpf's LIBBPF_PIN_BY_NAME under SMCR_BPF_PIN_DIR). */
#define SMCR_BPF_SK_MAP_NAME "smcr_sk"
#define SMCR_BPF_SK_MAP_PATH SMCR_BPF_PIN_DIR "/" SMCR_BPF_SK_MAP_NAME
#define SMCR_BPF_PROG_PATH SMCR_BPF_PIN_DIR "/sockops"
/*
 * The program's name (bpf_prog_info.name): SYN and SYN-ACK, or, where the
 * kernel cannot let it read a listener's mark when a SYN-ACK leaves, SYNs only.
 */
#define SMCR_BPF_PROG_NAME "smcr_sockops"
#define SMCR_BPF_PROG_NAME_CLIENT "smcr_client"

/* The option exactly as the kernel's smc_options_write() puts it on the wire. */
#define SMCR_TCPOPT_KIND 254 /* TCPOPT_EXP */
#define SMCR_TCPOPT_LEN 6    /* TCPOLEN_EXP_SMC_BASE */
#define SMCR_TCPOPT_MAGIC 0xE2D4C3D9u

/* struct smcr_bpf_sk.flags */
enum {
	SMCR_BPF_F_PROPOSE = 1u << 0, /* user: announce SMC in this socket's SYN */
	SMCR_BPF_F_SERVE = 1u << 1,   /* user: this listener serves SMC (its SYN-ACKs) */
	SMCR_BPF_F_SENT = 1u << 2,    /* bpf: our SYN / SYN-ACK carried the option */
	SMCR_BPF_F_PEER = 1u << 3,    /* bpf: the peer's SYN / SYN-ACK carried it */
	SMCR_BPF_F_SEEN = 1u << 4,    /* bpf: the program saw this connection open */
};

struct smcr_bpf_sk {
	__u32 flags;
	__u32 reserved; /* zero */
};

#endif /* SMCR_BPF_ABI_H */
