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

# echo_case NAME SERVER_MODE EXPECT CLIENT_ENV: one echo through socat on a port of its own.
echo_case() {
    socat_echo_case "$1" "$3" "$(free_port 4)" "$2" "" "$4"
}

# A plain server in SMCR_PEERS: no RDMA device for 127.0.0.1, so no Proposal.
echo_case rdma-no-device plain 'tcp-fallback (client): reason 0x03030002 NOSMCRDEV' \
    'SMCR_TRANSPORT=rdma SMCR_PEERS=127.0.0.0/8'
echo_case auto-no-device plain 'NOSMCRDEV' 'SMCR_PEERS=127.0.0.1'
# Not in the allow list, or denied (the deny list wins): nothing proposed.
echo_case rdma-not-allowed plain 'PEERNOSMC' 'SMCR_TRANSPORT=rdma SMCR_PEERS=10.0.0.0/8'
echo_case rdma-denied plain 'PEERNOSMC' \
    'SMCR_TRANSPORT=rdma SMCR_PEERS=127.0.0.0/8 SMCR_PEERS_DENY=127.0.0.1'
echo_case rdma-other-port plain 'PEERNOSMC' 'SMCR_TRANSPORT=rdma SMCR_PEERS=127.0.0.1:1'
# A registered smcr listener: shm in auto mode even with SMCR_PEERS naming it ...
echo_case auto-samehost smcr 'smc-shm (client)' 'SMCR_PEERS=127.0.0.1'
# ... SMC-R forced: tried (no device here), never shm.
echo_case rdma-samehost smcr 'NOSMCRDEV' 'SMCR_TRANSPORT=rdma'
# shm only: SMCR_PEERS is not used.
echo_case shm-only plain 'PEERNOSMC' 'SMCR_TRANSPORT=shm SMCR_PEERS=127.0.0.1'
