#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Two "containers" on one host: each its own network namespace, joined by a
# veth pair (10.201.0.1 and 10.201.0.2), an echo server in A and a client in
# B, both under smc_run. Abstract UNIX names (the registry, the rendezvous)
# do not cross network namespaces, so:
#   no-shared-dir  nothing shared: TCP, intact, with the reason the stats give
#   shared-dir     one directory bind-mounted into both (at different paths),
#                  named by SMCR_RUNDIR: shared memory on both ends (stats),
#                  256 MiB echoed intact
#   stale          a socket file of a dead server for a plain server's
#                  address and port: the client does not propose, TCP intact
#   squatted       the entry held by a live listener of another uid (the
#                  directory is sticky and world-writable): not believed,
#                  the client stays TCP, intact, and says why
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
[[ $(id -u) -eq 0 ]] || skip "network namespaces and veth pairs need root (ip netns)"
need ip setpriv

export SMCR_STAT STATS_DIR=$work/own-stats
mkdir -p "$STATS_DIR"
bytes=$((256 << 20))
a=smcr-ca-$$
b=smcr-cb-$$
veth_a=vca$$
veth_b=vcb$$
netns_cleanup() {
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
}
trap 'rc=$?; netns_cleanup; (exit $rc) || cleanup; cleanup' EXIT
ip netns add "$a" || skip "ip netns cannot create a network namespace here"
ip netns add "$b" || skip "ip netns cannot create a network namespace here"
ip link add "$veth_a" netns "$a" type veth peer name "$veth_b" netns "$b" ||
    skip "cannot create a veth pair between network namespaces"
ip -n "$a" addr add 10.201.0.1/24 dev "$veth_a"
ip -n "$b" addr add 10.201.0.2/24 dev "$veth_b"
for ns in "$a" "$b"; do
    ip -n "$ns" link set lo up
done
ip -n "$a" link set "$veth_a" up
ip -n "$b" link set "$veth_b" up
for ((i = 0; i < 100; i++)); do
    ip netns exec "$b" ping -c1 -W1 10.201.0.1 >/dev/null 2>&1 && break
    sleep 0.1
done

# The shared runtime directory, as a container runtime would mount it: the same
# directory at a different path in each container's mount namespace.
shared=$work/shared
mkdir -m 1777 "$shared"
mkdir -p "$work/ctr-a/run" "$work/ctr-b/run"

# ctr_prefix NS MOUNTPOINT: sets ctr, the prefix of a command in network
# namespace NS (ip netns exec gives it a mount namespace of its own), with
# $shared bind-mounted at MOUNTPOINT unless MOUNTPOINT is '-'.
ctr_prefix() {
    ctr=(ip netns exec "$1")
    # shellcheck disable=SC2016 # the inner shell expands them
    [[ $2 == - ]] || ctr+=(sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$shared" "$2")
}

# run_case NAME SERVER_MODE RUNDIR_A RUNDIR_B [BEFORE]: an echo server in A
# (SERVER_MODE smcr or plain), one client in B under smc_run sending $bytes; the
# client's stats are recorded as stats.NAME-client.*, the server's read while it
# runs. BEFORE, a command, runs with the port before the server starts.
run_case() {
    local name=$1 server_mode=$2 dir_a=$3 dir_b=$4 before=${5:-} port mnt_a=- mnt_b=-
    local -a env_a=(env) env_b=(env ECHO_HOST=10.201.0.1)
    port=$(free_port 4)
    [[ -z $before ]] || $before "$port"
    if [[ $dir_a != - ]]; then
        mnt_a=$dir_a
        env_a+=("SMCR_RUNDIR=$dir_a")
    fi
    if [[ $dir_b != - ]]; then
        mnt_b=$dir_b
        env_b+=("SMCR_RUNDIR=$dir_b")
    fi
    local -a prefix=()
    [[ $server_mode == smcr ]] && prefix=("${smcr_prefix[@]}")
    ctr_prefix "$a" "$mnt_a"
    start_server plain "$name-server" "${ctr[@]}" "${env_a[@]}" "${prefix[@]}" \
        "$PYTHON" "$apps_dir/echo.py" server-asyncio 10.201.0.1 "$port"
    for ((i = 0; i < 200; i++)); do
        [[ -n $(ip netns exec "$a" ss -Hltn "sport = :$port" 2>/dev/null) ]] && break
        kill -0 "$server_pid" 2>/dev/null || fail "$name: the server died: $(tail -n 3 "$work/$name-server.plain.err")"
        sleep 0.05
    done
    ctr_prefix "$b" "$mnt_b"
    run_client plain "$name-client" 120 "${ctr[@]}" "${env_b[@]}" "${smcr_prefix[@]}" \
        "$PYTHON" "$apps_dir/echo_once.py" "$port" "$bytes" "$name-client"
    [[ $exit_code -eq 0 ]] && grep -q '^intact ' "$work/$name-client.plain.out" ||
        fail "$name: $(cat "$work/$name-client.plain.out") (exit $exit_code; $(tail -n 2 "$work/$name-client.plain.err"))"
    log "$name: $((bytes >> 20)) MiB echoed intact (sha256 $(cut -c8-23 "$work/$name-client.plain.out")...)"
    client_outcome=$(own_outcome "$name-client")
    server_outcome=none
    if [[ $server_mode == smcr ]]; then
        server_outcome=$(mode_stats "$server_pid") || fail "$name: smcr-stat failed"
    fi
    stop_server "$server_pid"
}

# expect_stats WHO OUTCOME SMC REASON: OUTCOME ("SMC FALLBACKS REASONS") counts
# SMC handshakes and, if REASON is not '-', fallbacks with one of REASON's
# names (a|b); SMC 0 means no handshake may have ended in SMC.
expect_stats() {
    local who=$1 smc fb reasons want_smc=$3 want=$4
    read -r smc fb reasons <<<"$2"
    [[ $smc == none ]] && fail "$who: no stats (was smcr loaded?)"
    if [[ $want_smc -gt 0 ]]; then
        [[ $smc -ge $want_smc && $fb -eq 0 ]] || fail "$who: stats say $smc SMC, $fb fallback(s) ($reasons); expected SMC"
    else
        [[ $smc -eq 0 && $fb -ge 1 ]] || fail "$who: stats say $smc SMC, $fb fallback(s) ($reasons); expected TCP"
        grep -Eq "(^|,)($want):" <<<"$reasons" || fail "$who: fallback reasons $reasons, expected $want"
    fi
}

# 1. Nothing shared: abstract names stay in their namespace, TCP. The client
#    proposes only if the server's SYN-ACK announced SMC (RFC 7609 option mode,
#    when smc_run could attach its BPF program): then the server declines
#    NOTLOCAL; otherwise nothing is proposed (PEERNOSMC).
run_case no-shared-dir smcr - -
expect_stats "no-shared-dir client" "$client_outcome" 0 'PEERNOSMC|NOTLOCAL'
grep -q ': smc-shm (' "$work/no-shared-dir-server.plain.err" "$work/no-shared-dir-client.plain.err" &&
    fail "no-shared-dir: a connection ran over shared memory"
log "no-shared-dir: TCP; client stats: $client_outcome; server stats: $server_outcome"

# 2. The shared directory, at different paths in the two containers.
run_case shared-dir smcr "$work/ctr-a/run" "$work/ctr-b/run"
expect_stats "shared-dir client" "$client_outcome" 1 -
expect_stats "shared-dir server" "$server_outcome" 1 -
for who in server client; do
    grep -q ": smc-shm ($who)" "$work/shared-dir-$who.plain.err" ||
        fail "shared-dir: the $who's log has no smc-shm line"
done
log "shared-dir: shared memory on both ends; client stats: $client_outcome; server stats: $server_outcome"
leftover=$(find "$shared" -name 'rv-*' | wc -l)
[[ $leftover -eq 0 ]] || fail "shared-dir: $leftover rendezvous socket file(s) left in the directory"

# 3. A stale entry: the socket file of a dead listener, of this user, at the
#    address and port of a plain server. The connect to it is refused: the client
#    does not propose (PEERNOSMC; a Proposal would be the plain server's data).
stale_entry() {
    "$PYTHON" - "$shared/l-10.201.0.1-$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(1)
s.close()
PY
    [[ -S $shared/l-10.201.0.1-$1 ]] || fail "stale: no stale socket file was made"
}
run_case stale plain "$work/ctr-a/run" "$work/ctr-b/run" stale_entry
expect_stats "stale client" "$client_outcome" 0 PEERNOSMC
log "stale: a dead listener's entry made the client propose nothing; client stats: $client_outcome"

# 4. The attack: another uid (nobody) squats the entry of the smcr server's
#    address and port before the server starts, with a live listener, in the
#    sticky, world-writable directory. The server cannot register (it warns);
#    the client does not believe the squatter's entry (it says why) and does not
#    propose because of it: TCP with PEERNOSMC, or, where smc_run's RFC 7609
#    option program runs, the genuine server's SYN-ACK announced SMC and the
#    Proposal goes to it: it is proven by the secrets over the very TCP
#    connection (shared memory), never through the squatter.
squat_entry() {
    start_server plain squatter setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$PYTHON" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(16)
print("ready", flush=True)
time.sleep(600)
' "$shared/l-10.201.0.1-$1"
    squatter_pid=$server_pid
    for ((i = 0; i < 100; i++)); do
        grep -q ready "$work/squatter.plain.out" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "squatted: the squatter did not bind its entry ($(cat "$work/squatter.plain.err"))"
}
run_case squatted smcr "$work/ctr-a/run" "$work/ctr-b/run" squat_entry
stop_server "$squatter_pid"
grep -q 'belongs to uid [0-9]*, neither ours' "$work/squatted-client.plain.err" ||
    fail "squatted: the client did not say why it does not believe the entry: $(grep -m2 smcr "$work/squatted-client.plain.err")"
grep -q 'is held by uid' "$work/squatted-server.plain.err" ||
    fail "squatted: the server did not warn that its entry is held by another uid"
read -r smc _ <<<"$client_outcome"
if [[ $smc -eq 0 ]]; then
    expect_stats "squatted client" "$client_outcome" 0 PEERNOSMC
else
    grep -q 'announced SMC in its SYN-ACK' "$work/squatted-client.plain.err" ||
        fail "squatted: SMC without the server's SYN-ACK option: the squatter's entry was believed"
fi
log "squatted: entry of uid nobody not believed; client stats: $client_outcome"
