/* SPDX-License-Identifier: MIT */
/*
 * smcr's cgroup sock_ops program: RFC 7609's TCP option for sockets that run
 * smcr (design §4, "RFC 7609 option mode").  The kernel writes and reads this
 * option only for AF_SMC sockets (tcp_output.c smc_set_option(),
 * smc_set_option_cond(); tcp_input.c smc_parse_options()); smcr's sockets are
 * plain TCP sockets, so this program does the same for the ones the library
 * marks, through the header-option callbacks:
 *
 * client   connect():  the library marked the socket SMCR_BPF_F_PROPOSE;
 *                      TCP_CONNECT_CB turns on the header-option callbacks for
 *                      it, HDR_OPT_LEN/WRITE_HDR_OPT put the option into its SYN
 *                      (and retransmitted SYNs), ACTIVE_ESTABLISHED reads the
 *                      SYN-ACK: SMCR_BPF_F_PEER if it carried the option.
 * server   listen():   the library marked the listener SMCR_BPF_F_SERVE;
 *                      TCP_LISTEN_CB asks the kernel to keep each SYN
 *                      (TCP_SAVE_SYN) and turns on the header-option callbacks
 *                      for the listener.  A SYN-ACK carries the option only
 *                      when the SYN did and the listener carries its mark at
 *                      that moment (not with syncookies: the kernel's SMC
 *                      leaves it out then too).  PASSIVE_ESTABLISHED records
 *                      in the accepted socket whether the SYN carried it and
 *                      the SYN-ACK answered.
 *
 * Every decision reads the storage of the socket it is about (the listener's
 * for a SYN-ACK), never state shared between sockets: a process can write the
 * storage only of sockets it holds an fd of (bpf(2) keys it by fd), so no user
 * can change what another user's listeners announce, nor use up anything
 * another user's sockets need; the storage goes with its socket.  Clearing
 * SMCR_BPF_F_SERVE withdraws a listener at its next SYN-ACK.
 *
 * A SYN-ACK's callback runs for the connection request, and its listener's
 * record is read through the kernel's own structures (listener_flags(): BTF
 * and bpf_probe_read_kernel()).  Built with SMCR_BPF_CLIENT_ONLY this program
 * announces SMC in marked clients' SYNs only, never in a SYN-ACK: smcr-bpf
 * loads that one where the kernel refuses the other (no BTF, or a lockdown
 * that forbids reading kernel memory), because a listener whose mark cannot
 * be read when its SYN-ACK leaves must not be announced (after an exec into
 * a program without smcr, a peer that believed it would send CLC bytes to
 * that program).
 *
 * Every other socket costs one call per connection set-up (connect, listen,
 * established), each a failed storage lookup at most; the per-segment
 * header-option callbacks run only for marked sockets until they are
 * established.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <stdbool.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "smcr/bpf_abi.h"

#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/*
 * BPF_F_CLONE: an accepted socket starts with a copy of its listener's
 * record, so PASSIVE_ESTABLISHED knows whether the listener was served.
 */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct smcr_bpf_sk);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} smcr_sk SEC(".maps");

/* kind, length, ExID: the 6 bytes of the kernel's option (without its 2 NOPs). */
struct smc_opt {
	__u8 kind;
	__u8 len;
	__u8 magic[4];
};

static __always_inline void smc_opt_init(struct smc_opt *o)
{
	o->kind = SMCR_TCPOPT_KIND;
	o->len = SMCR_TCPOPT_LEN;
	o->magic[0] = (SMCR_TCPOPT_MAGIC >> 24) & 0xff;
	o->magic[1] = (SMCR_TCPOPT_MAGIC >> 16) & 0xff;
	o->magic[2] = (SMCR_TCPOPT_MAGIC >> 8) & 0xff;
	o->magic[3] = SMCR_TCPOPT_MAGIC & 0xff;
}

/* Does the segment in skops (flags: 0) or the SYN (BPF_LOAD_HDR_OPT_TCP_SYN) carry it? */
static __always_inline int has_smc_opt(struct bpf_sock_ops *skops, __u64 flags)
{
	struct smc_opt o;

	smc_opt_init(&o);
	/* Searched by kind and the full 4-byte ExID; the result is the option. */
	return bpf_load_hdr_opt(skops, &o, sizeof(o), flags) == SMCR_TCPOPT_LEN;
}

/* The record of skops' own socket (a full socket: not for a SYN-ACK). */
static __always_inline struct smcr_bpf_sk *storage(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;

	if (!sk)
		return 0;
	return bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
}

static __always_inline void cb_flags(struct bpf_sock_ops *skops, __u32 set, __u32 clear)
{
	bpf_sock_ops_cb_flags_set(skops, (skops->bpf_sock_ops_cb_flags | set) & ~clear);
}

#ifndef SMCR_BPF_CLIENT_ONLY
/*
 * The kernel's structures, only the fields read here; CO-RE relocates them
 * by name, and a kernel without one of them refuses the program (smcr-bpf
 * then loads the SYN-only build).
 */
struct sock;
struct bpf_local_storage_map;
struct bpf_sock_ops_kern {
	struct sock *sk;
} __attribute__((preserve_access_index));
struct sock_common {
	struct sock *skc_listener; /* a request sock's listener */
} __attribute__((preserve_access_index));
struct request_sock {
	struct sock_common __req_common;
} __attribute__((preserve_access_index));
struct hlist_node {
	struct hlist_node *next;
} __attribute__((preserve_access_index));
struct hlist_head {
	struct hlist_node *first;
} __attribute__((preserve_access_index));
struct bpf_local_storage {
	struct hlist_head list; /* of bpf_local_storage_elem, by snode */
} __attribute__((preserve_access_index));
struct bpf_local_storage_data {
	struct bpf_local_storage_map *smap;
	__u8 data[];
} __attribute__((preserve_access_index));
struct bpf_local_storage_elem {
	struct hlist_node snode;
	struct bpf_local_storage_data sdata;
} __attribute__((preserve_access_index));
struct sock___storage {
	struct bpf_local_storage *sk_bpf_storage;
} __attribute__((preserve_access_index));

/* A socket has one storage element per socket-storage map that has a record of it. */
#define MAX_STORAGE_ELEMS 16

/*
 * The flags of the listener a SYN-ACK answers for, 0 if it has no record.
 *
 * The callback runs for the connection request (skops->sk is NULL: not a
 * full socket), and the verifier will not let a program hand the request's
 * listener to bpf_sk_storage_get(): through bpf_cast_to_kern_ctx() it is a
 * pointer 6.18 no longer trusts, and a member of a union 6.12 reads as an
 * integer.  So the record is read as bpf_sk_storage_get() would find it,
 * with bpf_probe_read_kernel(): the listener (the request's rsk_listener,
 * which holds a reference on it), its storage list, our map's element in it.
 * Read-only, under the RCU read lock the callback runs in; a read that
 * faults reads as "no record", and so does a listener with more than
 * MAX_STORAGE_ELEMS socket-storage maps before ours.
 */
static __always_inline __u32 listener_flags(struct bpf_sock_ops *skops)
{
	struct bpf_sock_ops_kern *kctx = (struct bpf_sock_ops_kern *)skops;
	struct bpf_local_storage_map *smap;
	struct bpf_local_storage *stg;
	struct request_sock *req;
	struct hlist_node *node;
	struct sock *listener;
	__u32 flags;

	/* Only a request's fields mean a listener (a simultaneous open's SYN-ACK has none). */
	if (skops->is_fullsock || skops->state != BPF_TCP_NEW_SYN_RECV)
		return 0;
	req = (struct request_sock *)BPF_CORE_READ(kctx, sk);
	listener = BPF_CORE_READ(req, __req_common.skc_listener);
	stg = BPF_CORE_READ((struct sock___storage *)listener, sk_bpf_storage);
	node = stg ? BPF_CORE_READ(stg, list.first) : 0;
	for (int i = 0; i < MAX_STORAGE_ELEMS && node; i++) {
		struct bpf_local_storage_elem *selem =
			(void *)((char *)node - bpf_core_field_offset(struct bpf_local_storage_elem,
								      snode));

		smap = BPF_CORE_READ(selem, sdata.smap);
		if (smap == (void *)&smcr_sk) {
			if (bpf_core_read(&flags, sizeof(flags), &selem->sdata.data))
				return 0;
			return flags;
		}
		node = BPF_CORE_READ(node, next);
	}
	return 0;
}

static __always_inline bool synack_wants_option(struct bpf_sock_ops *skops)
{
	/* args[0]: BPF_WRITE_HDR_TCP_SYNACK_COOKIE when no SYN is kept. */
	if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE)
		return false;
	return (listener_flags(skops) & SMCR_BPF_F_SERVE) &&
	       has_smc_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN);
}

static __always_inline void on_listen(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st = storage(skops);
	int on = 1;

	if (!st || !(st->flags & SMCR_BPF_F_SERVE))
		return;
	bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &on, sizeof(on));
	cb_flags(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, 0);
}

/*
 * The accepted socket's record is its listener's, copied when the final ACK
 * made it (BPF_F_CLONE): served then means our SYN-ACK, one round trip
 * earlier, answered an announcing SYN (unless the mark changed in between).
 * Only the program's own flags stay in it.
 */
static __always_inline void on_passive_established(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct smcr_bpf_sk *st;

	/* Children of a served listener inherit its callback flags. */
	if (!sk || !(skops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG))
		return;
	cb_flags(skops, 0, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st)
		return;
	if (!(st->flags & SMCR_BPF_F_SERVE)) {
		bpf_sk_storage_delete(&smcr_sk, sk);
		return;
	}
	/* The SYN, kept by TCP_SAVE_SYN. */
	st->flags = SMCR_BPF_F_SEEN;
	if (has_smc_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN))
		st->flags |= SMCR_BPF_F_PEER | SMCR_BPF_F_SENT;
}
#endif /* SMCR_BPF_CLIENT_ONLY */

/* SYN or SYN-ACK: shall the option go into this segment? */
static __always_inline bool want_option(struct bpf_sock_ops *skops)
{
	__u32 tcp_flags = skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK);
	struct smcr_bpf_sk *st;

	if (tcp_flags == TCPHDR_SYN) {
		st = storage(skops);
		return st && (st->flags & SMCR_BPF_F_PROPOSE);
	}
#ifndef SMCR_BPF_CLIENT_ONLY
	if (tcp_flags == (TCPHDR_SYN | TCPHDR_ACK))
		return synack_wants_option(skops);
#endif
	return false;
}

static __always_inline void on_active_established(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st = storage(skops);

	if (!st || !(st->flags & SMCR_BPF_F_PROPOSE))
		return;
	/* skops' segment is the SYN-ACK. */
	if (has_smc_opt(skops, 0))
		st->flags |= SMCR_BPF_F_PEER;
	st->flags |= SMCR_BPF_F_SEEN;
	cb_flags(skops, 0, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
}

/* Its name says which of the two it is (smcr-bpf status, bpf_prog_info.name). */
#ifdef SMCR_BPF_CLIENT_ONLY
#define PROGRAM smcr_client
#else
#define PROGRAM smcr_sockops
#endif

SEC("sockops")
int PROGRAM(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st;
	struct smc_opt o;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		st = storage(skops);
		if (st && (st->flags & SMCR_BPF_F_PROPOSE))
			cb_flags(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, 0);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if (want_option(skops))
			bpf_reserve_hdr_opt(skops, SMCR_TCPOPT_LEN, 0);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if (!want_option(skops))
			break;
		smc_opt_init(&o);
		if (bpf_store_hdr_opt(skops, &o, sizeof(o), 0) == 0 &&
		    skops->skb_tcp_flags == TCPHDR_SYN) {
			st = storage(skops);
			if (st)
				st->flags |= SMCR_BPF_F_SENT;
		}
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		on_active_established(skops);
		break;
#ifndef SMCR_BPF_CLIENT_ONLY
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		on_listen(skops);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_passive_established(skops);
		break;
#endif
	}
	return 1;
}
