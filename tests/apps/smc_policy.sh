#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Transport policy on this host (which has no RDMA device): an smcr client
# proposes SMC-R only to SMCR_PEERS, never to SMCR_PEERS_DENY, and without a
# device for its local address falls back (NOSMCRDEV) before sending a single
# CLC byte, so a plain server echoes exactly the client's data.  And the
# same-host path is unchanged by SMCR_PEERS: a registered local listener
# still gets shm, unless SMCR_TRANSPORT=rdma.  Each case: sha256 of the echo
# and the client's SMC_DEBUG line.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need socat

random_file "$work/data" $((256 * 1024 + 7))
want=$(sha "$work/data")

# echo_case NAME SERVER_MODE EXPECT ENV...: one echo through socat; the
# client's log must contain EXPECT ("smc-shm (client)" or a fallback reason).
echo_case() {
    local name=$1 server_mode=$2 expect=$3 port
    shift 3
    port=$(free_port 4)
    start_server "$server_mode" "$name-server" socat "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" EXEC:cat
    wait_listen "$server_pid" "$port"
    run_client_in "$work/data" smcr "$name-client" 30 env "$@" \
        socat -t 5 - "TCP4:127.0.0.1:$port"
    [[ $exit_code -eq 0 ]] || fail "$name: the client exited $exit_code"
    wait_exit "$server_pid" 10
    [[ $(sha "$work/$name-client.smcr.out") == "$want" ]] || fail "$name: the echo differs (sha256)"
    grep -q -- "$expect" "$work/$name-client.smcr.err" ||
        fail "$name: the client's log does not say '$expect': $(grep -m1 -o 'fd [0-9]*: .*' "$work/$name-client.smcr.err")"
    log "$name: echo intact; client: $(grep -m1 -o -- "$expect.*" "$work/$name-client.smcr.err")"
}

# A plain server in SMCR_PEERS: no RDMA device for 127.0.0.1, so no Proposal.
echo_case rdma-no-device plain 'tcp-fallback (client): reason 0x03030002 NOSMCRDEV' \
    SMCR_TRANSPORT=rdma SMCR_PEERS=127.0.0.0/8
echo_case auto-no-device plain 'NOSMCRDEV' SMCR_PEERS=127.0.0.1
# Not in the allow list, or denied (the deny list wins): nothing proposed.
echo_case rdma-not-allowed plain 'PEERNOSMC' SMCR_TRANSPORT=rdma SMCR_PEERS=10.0.0.0/8
echo_case rdma-denied plain 'PEERNOSMC' SMCR_TRANSPORT=rdma SMCR_PEERS=127.0.0.0/8 \
    SMCR_PEERS_DENY=127.0.0.1
echo_case rdma-other-port plain 'PEERNOSMC' SMCR_TRANSPORT=rdma SMCR_PEERS=127.0.0.1:1
# A registered smcr listener: shm in auto mode even with SMCR_PEERS naming it ...
echo_case auto-samehost smcr 'smc-shm (client)' SMCR_PEERS=127.0.0.1
# ... SMC-R forced: tried (no device here), never shm.
echo_case rdma-samehost smcr 'NOSMCRDEV' SMCR_TRANSPORT=rdma
# shm only: SMCR_PEERS is not used.
echo_case shm-only plain 'PEERNOSMC' SMCR_TRANSPORT=shm SMCR_PEERS=127.0.0.1
