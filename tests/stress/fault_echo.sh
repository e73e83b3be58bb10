#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The library's own resources failing at every step of a connection's set-up
# (fault_shim.so, preloaded behind libsmcr.so, fails every Nth memfd_create,
# eventfd, shared mmap, AF_UNIX socket or timerfd_create of the library):
# every connection of an epoll echo server and a client opening all its
# connections at once still echoes intact, with no error either program
# sees, and both ends agree on each connection's mode (an end in SMC whose
# peer fell back would be a lost connection); the failures were injected
# (counted by the shim).  Whether a failure costs a connection its SMC mode
# depends on the step (a ring the pool cannot make is made again for the
# next connection); the fallbacks are counted, with their reasons.  One run
# per kind of call, in the server, in the client and in both.
source "$(dirname -- "${BASH_SOURCE[0]}")/../apps/smc_lib.sh"
source "$(dirname -- "${BASH_SOURCE[0]}")/stress_lib.sh"

#   fault_echo.sh FAULT_SHIM_SO
shim=${1:-}
[[ -f $shim ]] || fail "fault_shim.so is not built ('$shim')"
script=$(dirname -- "${BASH_SOURCE[0]}")/echo_many.py
conns=60
nbytes=4096
deadline=60
# The shim's LD_PRELOAD replaces the one smc_run set: in a sanitized build the
# sanitizer runtime must stay first in it (SMCR_SANITIZER_PRELOAD, lib.sh), or
# the runtime refuses to start.
preload="${SMCR_SANITIZER_PRELOAD:+$SMCR_SANITIZER_PRELOAD:}$SMCR_LIB:$shim"

# fault_run NAME WHERE SPEC: WHERE is server, client or both.
fault_run() {
    local name=$1 where=$2 spec=$3 injected smc fb reasons
    local -a with=(env "LD_PRELOAD=$preload" "SMCR_FAULT=$spec" "SMCR_FAULT_LOG=$work/$name.faults")
    server_pre=() client_pre=()
    [[ $where == client ]] || server_pre=("${with[@]}")
    [[ $where == server ]] || client_pre=("${with[@]}")
    log "$name: every Nth call failing ($spec) in the $where"
    run_echo smcr "$name" "$conns"
    assert_echoed "$name" smcr "$conns"
    stop_server "$server_pid"
    injected=$(wc -l <"$work/$name.faults" 2>/dev/null || echo 0)
    (( injected > 0 )) || fail "$name: no failure was injected ($(cat "$work/$name.faults" 2>/dev/null))"
    read -r smc fb reasons <<<"$(modes_agree "$name")" || fail "$name: the two ends disagree"
    (( smc + fb / 2 == conns )) || fail "$name: $smc SMC and $fb fallback log lines for $conns connections"
    log "$name: $injected failures injected; $smc SMC, $((fb / 2)) TCP, both ends agreeing ($reasons)"
}

fault_run memfd-server server memfd:3
fault_run memfd-client client memfd:3
fault_run eventfd-both both eventfd:4
fault_run mmap-both both mmap:5
fault_run unix-server server unix:2
fault_run unix-client client unix:2
fault_run timerfd-both both timerfd:2
fault_run all-both both memfd:7,eventfd:7,mmap:7,unix:7,timerfd:7

# The listener's registry name cannot be made when it starts listening (its
# first AF_UNIX socket fails): the listener takes the name at an accept, so
# the clients of the first burst stay TCP (PEERNOSMC, both ends agreeing) and
# every connection of the next burst is SMC.
registry_retry() {
    local name=registry-retry port round smc
    local -a with=(env "LD_PRELOAD=$preload" "SMCR_FAULT=unix:=1" "SMCR_FAULT_LOG=$work/$name.faults")
    log "$name: the listener's first registry socket fails"
    port=$(free_port 4)
    start_server smcr "$name-server" "${with[@]}" "$PYTHON" "$script" server 127.0.0.1 "$port"
    wait_listen "$server_pid" "$port"
    for round in 1 2; do
        run_client smcr "$name$round-client" $((deadline + 60)) \
            "$PYTHON" "$script" client 127.0.0.1 "$port" "$conns" "$nbytes" "$deadline" "$server_pid"
        assert_echoed "$name$round" smcr "$conns"
    done
    stop_server "$server_pid"
    [[ $(wc -l <"$work/$name.faults") -eq 1 ]] || fail "$name: the failure was not injected once"
    grep -q 'cannot register the listener' "$work/$name-server.smcr.err" &&
        fail "$name: the listener gave up its registration"
    smc=$(grep -c ': smc-shm (client)' "$work/${name}2-client.smcr.err" || true)
    (( smc == conns )) || fail "$name: $smc of the second burst's $conns connections are SMC"
    log "$name: second burst $smc of $conns SMC"
}
registry_retry
