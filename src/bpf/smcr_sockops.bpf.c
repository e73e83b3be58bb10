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
 *                      TCP_LISTEN_CB counts its port as served (per netns), asks
 *                      the kernel to keep each SYN (TCP_SAVE_SYN) and turns on
 *                      the callbacks; a SYN-ACK carries the option only when the
 *                      SYN did and the port is served (not with syncookies: the
 *                      kernel's SMC leaves it out then too); PASSIVE_ESTABLISHED
 *                      records in the accepted socket whether the SYN carried it.
 *                      STATE_CB uncounts the port when the listener closes.
 *
 * Every other socket costs one call per connection set-up (connect, listen,
 * established), each a failed storage lookup at most; the per-segment
 * header-option callbacks run only for marked sockets until they are
 * established.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <stdbool.h>
#include <bpf/bpf_helpers.h>

#include "smcr/bpf_abi.h"

#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct smcr_bpf_sk);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} smcr_sk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct smcr_bpf_port_key);
	__type(value, __u32); /* listeners serving it */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} smcr_ports SEC(".maps");

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

static __always_inline struct smcr_bpf_sk *storage(struct bpf_sock_ops *skops, bool create)
{
	struct bpf_sock *sk = skops->sk;

	if (!sk)
		return 0;
	return bpf_sk_storage_get(&smcr_sk, sk, 0, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void port_key(struct bpf_sock_ops *skops, struct smcr_bpf_port_key *k)
{
	k->netns = bpf_get_netns_cookie(skops);
	k->port = skops->local_port;
	k->pad = 0;
}

static __always_inline bool port_served(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_port_key k;
	__u32 *n;

	port_key(skops, &k);
	n = bpf_map_lookup_elem(&smcr_ports, &k);
	return n && *n > 0;
}

static __always_inline void cb_flags(struct bpf_sock_ops *skops, __u32 set, __u32 clear)
{
	bpf_sock_ops_cb_flags_set(skops, (skops->bpf_sock_ops_cb_flags | set) & ~clear);
}

/* SYN or SYN-ACK: shall the option go into this segment? */
static __always_inline bool want_option(struct bpf_sock_ops *skops)
{
	__u32 tcp_flags = skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK);
	struct smcr_bpf_sk *st;

	if (tcp_flags == TCPHDR_SYN) {
		st = storage(skops, false);
		return st && (st->flags & SMCR_BPF_F_PROPOSE);
	}
	if (tcp_flags == (TCPHDR_SYN | TCPHDR_ACK)) {
		/* args[0]: BPF_WRITE_HDR_TCP_SYNACK_COOKIE when no SYN is kept. */
		if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE)
			return false;
		return port_served(skops) && has_smc_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN);
	}
	return false;
}

static __always_inline void on_listen(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st = storage(skops, false);
	struct smcr_bpf_port_key k;
	__u32 one = 1, *n;
	int on = 1;

	if (!st || !(st->flags & SMCR_BPF_F_SERVE))
		return;
	port_key(skops, &k);
	n = bpf_map_lookup_elem(&smcr_ports, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&smcr_ports, &k, &one, BPF_NOEXIST);
	bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &on, sizeof(on));
	cb_flags(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG, 0);
}

static __always_inline void on_listener_close(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st = storage(skops, false);
	struct smcr_bpf_port_key k;
	__u32 *n;

	if (!st || !(st->flags & SMCR_BPF_F_SERVE))
		return;
	port_key(skops, &k);
	n = bpf_map_lookup_elem(&smcr_ports, &k);
	if (!n)
		return;
	__sync_fetch_and_add(n, -1);
	if ((int)*n <= 0)
		bpf_map_delete_elem(&smcr_ports, &k);
}

static __always_inline void on_active_established(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st = storage(skops, false);

	if (!st || !(st->flags & SMCR_BPF_F_PROPOSE))
		return;
	/* skops' segment is the SYN-ACK. */
	if (has_smc_opt(skops, 0))
		st->flags |= SMCR_BPF_F_PEER;
	st->flags |= SMCR_BPF_F_SEEN;
	cb_flags(skops, 0, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
}

static __always_inline void on_passive_established(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st;

	/* The child inherited the served listener's callback flags. */
	if (!(skops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG))
		return;
	cb_flags(skops, 0, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG);
	if (!port_served(skops))
		return;
	st = storage(skops, true);
	if (!st)
		return;
	/* The SYN, kept by TCP_SAVE_SYN; our SYN-ACK carried the option iff it did. */
	if (has_smc_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN))
		st->flags |= SMCR_BPF_F_PEER | SMCR_BPF_F_SENT;
	st->flags |= SMCR_BPF_F_SEEN;
}

SEC("sockops")
int smcr_sockops(struct bpf_sock_ops *skops)
{
	struct smcr_bpf_sk *st;
	struct smc_opt o;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		st = storage(skops, false);
		if (st && (st->flags & SMCR_BPF_F_PROPOSE))
			cb_flags(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, 0);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		on_listen(skops);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[0] == BPF_TCP_LISTEN && skops->args[1] == BPF_TCP_CLOSE)
			on_listener_close(skops);
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
			st = storage(skops, false);
			if (st)
				st->flags |= SMCR_BPF_F_SENT;
		}
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		on_active_established(skops);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_passive_established(skops);
		break;
	}
	return 1;
}
