#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Programs written for the kernel's SMC under smc_run: smc_sockets (this
# directory) makes its sockets with socket(AF_SMC, SOCK_STREAM, SMCPROTO_SMC or
# SMCPROTO_SMC6) and socket(AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_SMC), and
# checks on each what the kernel's SMC socket reports (SO_DOMAIN, SO_PROTOCOL,
# AF_INET/AF_INET6 addresses, SOL_SMC SMC_LIMIT_HS).
#
#  - without smc_run, and under smc_run with SMCR_AF_SMC=kernel, the program
#    gets what the kernel answers (on a host without the smc module: its error);
#  - under smc_run, where the kernel refuses such sockets (or with
#    SMCR_AF_SMC=smcr where it would serve them), smcr serves them: client and
#    server of either kind, IPv4 and IPv6, echo a file over same-host SMC (the
#    echo checked byte for byte, both ends' logs and the server's stats say
#    smc-shm, and that smcr served the socket);
#  - an AF_SMC client under smc_run to a plain TCP server (no smcr) falls back
#    with PEERNOSMC, read from its live smcr-stat record and its log, and the
#    server receives exactly the bytes the client sent (no CLC byte); a plain
#    TCP client of an AF_SMC server under smc_run: the server falls back
#    (no Proposal came) and the echo is intact.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
prog=${SMCR_TEST_SMC_SOCKETS:-${SMCR_BUILD_DIR:-}/tests/apps/smc_sockets}
[[ -x $prog ]] || fail "smc_sockets is not built (SMCR_TEST_SMC_SOCKETS='$prog')"

bytes=$((4 * 1024 * 1024 + 77))
families=(4)
if have_ipv6; then families+=(6); else log "no ::1 on the loopback: the IPv6 cases are not run"; fi

# What the kernel answers each request, without smcr.
declare -A kernel
for kind in afsmc ipproto; do
    for fam in "${families[@]}"; do
        kernel[$kind$fam]=$("$prog" probe "$kind" "$fam") || fail "probe $kind $fam failed plain"
        log "plain: socket() of kind $kind, IPv$fam: ${kernel[$kind$fam]}"
    done
done

# served_env KIND FAM: the settings under which smcr serves that request: none
# where the kernel refuses it, SMCR_AF_SMC=smcr where the kernel has SMC.
served_env() {
    if [[ ${kernel[$1$2]:-} == ok ]]; then echo SMCR_AF_SMC=smcr; else echo SMCR_AF_SMC=auto; fi
}

# probe_smcr NAME SETTING KIND FAM: the probe under smc_run; prints its answer.
probe_smcr() {
    run_client smcr "$1" 20 env "$2" "$prog" probe "$3" "$4"
    [[ $exit_code -eq 0 ]] || fail "$1: probe exited $exit_code"
    cat "$work/$1.smcr.out"
}

for kind in afsmc ipproto; do
    for fam in "${families[@]}"; do
        plain=${kernel[$kind$fam]}
        got=$(probe_smcr "probe-kernel-$kind$fam" SMCR_AF_SMC=kernel "$kind" "$fam")
        [[ $got == "$plain" ]] ||
            fail "$kind IPv$fam with SMCR_AF_SMC=kernel: '$got', the kernel's answer is '$plain'"
        ! grep -q 'served by smcr' "$work/probe-kernel-$kind$fam.smcr.err" ||
            fail "$kind IPv$fam: smcr served the socket with SMCR_AF_SMC=kernel"
        got=$(probe_smcr "probe-auto-$kind$fam" SMCR_AF_SMC=auto "$kind" "$fam")
        [[ $got == ok ]] || fail "$kind IPv$fam under smc_run: '$got', expected a socket"
        if [[ $plain == ok ]]; then
            ! grep -q 'served by smcr' "$work/probe-auto-$kind$fam.smcr.err" ||
                fail "$kind IPv$fam: smcr took the socket although the kernel serves it"
            log "$kind IPv$fam: the kernel serves it under smc_run too (it has SMC)"
        else
            grep -q "served by smcr .*(the kernel: " "$work/probe-auto-$kind$fam.smcr.err" ||
                fail "$kind IPv$fam: no 'served by smcr' line in the log"
            log "$kind IPv$fam: the kernel says $plain; under smc_run smcr serves it (SMCR_AF_SMC=kernel: $plain again)"
        fi
    done
done

# wait_line FILE PATTERN PID: waits (at most 20 s) for a line matching PATTERN in FILE.
wait_line() {
    local i
    for ((i = 0; i < 400; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        kill -0 "$3" 2>/dev/null || { grep -q "$2" "$1" 2>/dev/null && return 0; fail "pid $3 ended before '$2' (${1##*/})"; }
        sleep 0.05
    done
    fail "no '$2' in ${1##*/} after 20 s"
}

# start_echo_server NAME MODE KIND FAM [CONNECTIONS]: sets server_pid and port.
start_echo_server() {
    local name=$1 mode=$2 kind=$3 fam=$4 connections=${5:-1}
    start_server "$mode" "$name" env "$(served_env "$kind" "$fam")" "$prog" server "$kind" "$fam" "$connections"
    wait_line "$work/$name.$mode.out" '^port ' "$server_pid"
    port=$(sed -n 's/^port //p' "$work/$name.$mode.out")
}

# same_stream NAME CLIENT_OUT SERVER_OUT: the server received exactly what the client sent.
same_stream() {
    local sent received
    sent=$(sed -n 's/^sent \([0-9]*\) fnv \([0-9a-f]*\)$/\1 \2/p' "$2")
    received=$(sed -n 's/^received \([0-9]*\) fnv \([0-9a-f]*\)$/\1 \2/p' "$3")
    [[ -n $sent && $sent == "$received" ]] ||
        fail "$1: the client sent '$sent' (bytes fnv), the server received '$received'"
}

# smc_echo NAME SERVER_KIND CLIENT_KIND FAM: both under smc_run, same-host SMC.
smc_echo() {
    local name=$1 skind=$2 ckind=$3 fam=$4 side
    start_echo_server "$name-server" smcr "$skind" "$fam"
    run_client smcr "$name-client" 60 env "$(served_env "$ckind" "$fam")" \
        "$prog" client "$ckind" "$fam" "$port" "$bytes"
    [[ $exit_code -eq 0 ]] || fail "$name: the client exited $exit_code"
    wait_line "$work/$name-server.smcr.out" '^done$' "$server_pid"
    same_stream "$name" "$work/$name-client.smcr.out" "$work/$name-server.smcr.out"
    for side in server client; do
        grep -q 'served by smcr' "$work/$name-$side.smcr.err" ||
            fail "$name: the $side's socket was not served by smcr"
        assert_smc_log "$name-$side" 1
    done
    assert_smc_stats "$name server" 1 "$server_pid"
    stop_server "$server_pid"
    log "$name: $bytes bytes echoed intact, server of kind $skind, client of kind $ckind (IPv$fam)"
}

for fam in "${families[@]}"; do
    smc_echo "afsmc-afsmc-$fam" afsmc afsmc "$fam"
    smc_echo "ipproto-ipproto-$fam" ipproto ipproto "$fam"
done
smc_echo "afsmc-ipproto-${families[-1]}" afsmc ipproto "${families[-1]}"

# An AF_SMC client under smc_run to a plain TCP server: it must not propose.
fam=${families[-1]}
start_echo_server plain-server plain tcp "$fam"
"${smcr_prefix[@]}" env "$(served_env afsmc "$fam")" "$prog" client afsmc "$fam" "$port" "$bytes" 1500 \
    >"$work/afsmc-client.smcr.out" 2>"$work/afsmc-client.smcr.err" </dev/null &
client=$!
wait_line "$work/afsmc-client.smcr.out" '^exchanged$' "$client"
record=$("$SMCR_STAT" --json -p "$client" | "$PYTHON" -c '
import json, sys
for c in json.load(sys.stdin)["connections"]:
    if c["state"] == "live":
        print(c["mode"], "%s(%s)" % (c["fallback_name"], c["fallback_code"]))
        break')
rc=0
wait "$client" || rc=$?
[[ $rc -eq 0 ]] || fail "afsmc client to a plain server: exited $rc"
wait_line "$work/plain-server.plain.out" '^done$' "$server_pid"
same_stream "afsmc client to a plain server" "$work/afsmc-client.smcr.out" "$work/plain-server.plain.out"
[[ $record == 'tcp-fallback PEERNOSMC('* ]] ||
    fail "afsmc client to a plain server: its smcr-stat record is '$record', not tcp-fallback PEERNOSMC"
assert_fallback_log afsmc-client PEERNOSMC 1
stop_server "$server_pid"
log "afsmc client to a plain server (IPv$fam): echo intact, the server got exactly the client's bytes; smcr-stat: $record"

# A plain TCP client of an AF_SMC server under smc_run: no Proposal, the server stays TCP.
start_echo_server afsmc-server smcr afsmc "$fam"
run_client plain plain-client 60 "$prog" client tcp "$fam" "$port" "$bytes"
[[ $exit_code -eq 0 ]] || fail "plain client of an afsmc server: exited $exit_code"
wait_line "$work/afsmc-server.smcr.out" '^done$' "$server_pid"
same_stream "plain client of an afsmc server" "$work/plain-client.plain.out" "$work/afsmc-server.smcr.out"
assert_fallback_log afsmc-server PEERNOSMC 1
assert_fallback_stats "afsmc server, plain client" PEERNOSMC 1 "$server_pid"
stop_server "$server_pid"
log "plain client of an afsmc server (IPv$fam): echo intact, the server fell back with PEERNOSMC"

# The learned policy keeps short connections of programs that did not ask for SMC
# on TCP; a program that asked gets SMC tried on each. A plain-socket client under
# smc_run makes short connections until the policy keeps one on TCP (SHORTFLOWS);
# three AF_SMC clients to the same destination then still run SMC.
export SMCR_LEARN=1
fam=${families[0]}
start_echo_server learn-server smcr afsmc "$fam" 0
learned=0
for n in $(seq 1 16); do
    run_client smcr "learn-tcp-$n" 30 "$prog" client tcp "$fam" "$port" 2000
    [[ $exit_code -eq 0 ]] || fail "short plain-socket client $n exited $exit_code"
    if grep -q 'tcp-fallback (client): .*SHORTFLOWS' "$work/learn-tcp-$n.smcr.err"; then
        learned=$n
        break
    fi
done
[[ $learned -gt 0 ]] || fail "16 short connections and the learned policy kept none on TCP"
log "learned policy: plain-socket client $learned stayed TCP (SHORTFLOWS)"
for n in 1 2 3; do
    run_client smcr "learn-afsmc-$n" 30 env "$(served_env afsmc "$fam")" \
        "$prog" client afsmc "$fam" "$port" 2000
    [[ $exit_code -eq 0 ]] || fail "short AF_SMC client $n exited $exit_code"
    assert_smc_log "learn-afsmc-$n" 1
done
stop_server "$server_pid"
log "three short AF_SMC clients to the same destination: SMC each time"
