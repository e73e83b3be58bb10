#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# System calls on paths that stay TCP, counted exactly (strace -c; no timing):
# each count is the difference between two runs of syscall_loop of different
# lengths, so start-up, the library's own set-up and exit cancel out.
#
#   - recv(MSG_DONTWAIT) on an accepted socket whose client has sent nothing
#     yet: one system call under smcr, as without it (the library's peek that
#     finds no byte is the call's EAGAIN);
#   - a client under smcr connecting to a plain server on this host: at most
#     MAX_CLIENT_EXTRA system calls per connection more than plain TCP's;
#   - a server under smcr whose client does not run smcr: at most
#     MAX_SERVER_EXTRA system calls per connection more than plain TCP's;
#     an event-driven one (non-blocking sockets, epoll, a buffer that holds
#     any Proposal, as nginx reads): none more.
#
# Each smcr run proves from its own published stats (smcr-stat) that the
# library decided those connections: TCP, reason PEERNOSMC, no SMC.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

need strace ss
[[ -z ${SMCR_SANITIZER_PRELOAD:-} ]] ||
    skip "a sanitizer runtime makes system calls of its own on allocation: counts are not exact"
loop=${SMCR_TEST_SYSCALL_LOOP:-}
[[ -x $loop ]] || skip "syscall_loop is not built (SMCR_TEST_SYSCALL_LOOP)"

# The RFC 7609 option mode (a bpf program smc_run attaches as root) is not
# the subject here: off, so the counts do not depend on who runs the test.
export SMCR_BPF=0

# What a client under smcr adds per connection to a plain local server: its
# peer's address, the netns of the registry's names (a stat), the registry's
# probe (socket, connect refused, close), and the local address for the
# connection's stats record (no peek for a server that spoke first: the
# policy's answer comes before it).
MAX_CLIENT_EXTRA=6

# What a server under smcr adds per connection that stays TCP: the peek at the
# client's first bytes (a Proposal must never reach the application). The
# addresses of the connection's stats record come from accept() and from the
# listener's own address, not from getpeername/getsockname.
MAX_SERVER_EXTRA=1

# The same for a server of non-blocking sockets under epoll that reads into a
# buffer a Proposal fits: its first read is the library's look at the client's
# first bytes (src/preload/smc_server.c, the first read), with no peek before.
MAX_SERVER_NB_EXTRA=0

# traced MODE NAME ARGS...: syscall_loop ARGS under strace -f -c (MODE smcr:
# under smc_run); sets traced_total, the run's system calls, and for smcr
# traced_stats, its stats (mode_stats) read while it still ran.
traced() {
    local mode=$1 name=$2 line rc=0
    shift 2
    local -a prefix=()
    [[ $mode == smcr ]] && prefix=("$SMC_RUN")
    coproc LOOP { "${prefix[@]}" strace -f -c -o "$work/$name.strace" "$loop" "$@" 2>"$work/$name.err"; }
    read -r -t 120 line <&"${LOOP[0]}" || fail "$name: no 'ready' line: $(cat "$work/$name.err")"
    traced_stats=
    if [[ $mode == smcr ]]; then
        traced_stats=$(mode_stats "${line#ready }") || fail "$name: smcr-stat stats --json failed"
    fi
    eval "exec ${LOOP[1]}>&-"
    wait "$LOOP_PID" || rc=$?
    [[ $rc -eq 0 ]] || fail "$name: exit status $rc: $(cat "$work/$name.err")"
    traced_total=$(awk '$NF == "total" { print $4 }' "$work/$name.strace")
    [[ -n $traced_total ]] || fail "$name: no strace summary in $work/$name.strace"
}

# per_call MODE NAME N1 N2 ARGS_BEFORE_N...: system calls per call, the
# difference of runs with N1 and N2 calls, to two decimals; in per_call_result.
# Sets per_call_stats to the N2 run's stats.
per_call() {
    local mode=$1 name=$2 n1=$3 n2=$4 t1
    shift 4
    traced "$mode" "$name-$n1" "$@" "$n1"
    t1=$traced_total
    traced "$mode" "$name-$n2" "$@" "$n2"
    per_call_stats=$traced_stats
    per_call_result=$(awk -v a="$t1" -v b="$traced_total" -v n=$((n2 - n1)) \
        'BEGIN { printf "%.2f", (b - a) / n }')
}

# expect_tcp WHAT N: per_call_stats count N fallbacks, all PEERNOSMC, and no SMC.
expect_tcp() {
    local smc fb reasons
    read -r smc fb reasons <<<"$per_call_stats"
    [[ $smc -eq 0 && $fb -eq $2 && $reasons == "PEERNOSMC:$2" ]] ||
        fail "$1: stats say $smc SMC, $fb fallback(s) ($reasons); expected $2 PEERNOSMC"
}

# recv EAGAIN on an accepted socket before its client's first byte.
per_call plain eagain-plain 1000 2000 eagain
plain=$per_call_result
per_call smcr eagain-smcr 1000 2000 eagain
with=$per_call_result
expect_tcp "recv EAGAIN, smcr" 1
log "recv EAGAIN before the first byte: $plain system call(s) per call plain, $with under smcr"
[[ $plain == 1.00 ]] || fail "plain recv EAGAIN costs $plain system calls per call, expected 1.00"
[[ $with == "$plain" ]] ||
    fail "recv EAGAIN under smcr costs $with system calls per call, plain $plain: see $work/eagain-smcr-*.strace"

# A client under smcr to a plain server on this host: stays TCP (PEERNOSMC).
port=$(free_port)
start_server plain echo "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
wait_listen "$server_pid" "$port"
per_call plain connect-plain 100 200 connect "$port"
plain=$per_call_result
per_call smcr connect-smcr 100 200 connect "$port"
with=$per_call_result
stop_server "$server_pid"
expect_tcp "smcr client to a plain server" 200
log "client to a plain server: $plain system calls per connection plain, $with under smcr"
awk -v p="$plain" -v w="$with" -v m="$MAX_CLIENT_EXTRA" 'BEGIN { exit !(w - p <= m) }' ||
    fail "an smcr client to a plain server makes $with system calls per connection, plain $plain" \
        "(more than $MAX_CLIENT_EXTRA added): compare $work/connect-*-200.strace"
# A server under smcr whose clients do not run smcr: stays TCP (PEERNOSMC).
per_call plain serve-plain 100 200 serve
plain=$per_call_result
per_call smcr serve-smcr 100 200 serve
with=$per_call_result
expect_tcp "smcr server, plain clients" 200
log "server, plain clients: $plain system calls per connection plain, $with under smcr"
awk -v p="$plain" -v w="$with" -v m="$MAX_SERVER_EXTRA" 'BEGIN { exit !(w - p <= m) }' ||
    fail "an smcr server makes $with system calls per connection with plain clients, plain" \
        "$plain (more than $MAX_SERVER_EXTRA added): compare $work/serve-*-200.strace"

# The same server as nginx reads: non-blocking, epoll, a 4 KiB buffer.
per_call plain serve-nb-plain 100 200 serve-nb
plain=$per_call_result
per_call smcr serve-nb-smcr 100 200 serve-nb
with=$per_call_result
expect_tcp "smcr event-driven server, plain clients" 200
log "event-driven server, plain clients: $plain system calls per connection plain, $with under smcr"
awk -v p="$plain" -v w="$with" -v m="$MAX_SERVER_NB_EXTRA" 'BEGIN { exit !(w - p <= m) }' ||
    fail "an smcr event-driven server makes $with system calls per connection with plain" \
        "clients, plain $plain (more than $MAX_SERVER_NB_EXTRA added): compare" \
        "$work/serve-nb-*-200.strace"

# A client under smcr to a server under smcr: SMC.  The registry's check of a
# listener the client already knows is an exact sock_diag lookup of the TCP
# listener (registry.c, known listeners), so only the first of its
# connections dumps the kernel's listening TCP sockets (one dump for IPv4 and
# one for IPv6, each a walk of the whole listening hash), where every
# connection made both before.  (Each connection still dumps the listening
# unix sockets, for the names.)
port=$(free_port)
start_server smcr echo-smc "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
wait_listen "$server_pid" "$port"
coproc LOOP {
    "$SMC_RUN" strace -f -e trace=sendto -e signal=none -o "$work/known.strace" \
        "$loop" connect "$port" 20 2>"$work/known.err"
}
read -r -t 120 line <&"${LOOP[0]}" || fail "known listener: no 'ready' line: $(cat "$work/known.err")"
stats=$(mode_stats "${line#ready }") || fail "known listener: smcr-stat stats --json failed"
eval "exec ${LOOP[1]}>&-"
wait "$LOOP_PID" || fail "known listener: syscall_loop failed: $(cat "$work/known.err")"
stop_server "$server_pid"
read -r smc fb reasons <<<"$stats"
[[ $smc -eq 20 && $fb -eq 0 ]] ||
    fail "known listener: stats say $smc SMC, $fb fallback(s) ($reasons); expected 20 SMC"
# strace names the flags of the IPv6 and unix dumps, and shows the IPv4 one's as a number
dumps=$(grep -E 'nlmsg_flags=NLM_F_REQUEST\|(NLM_F_DUMP|0x300)' "$work/known.strace" || true)
tcp_dumps=$(grep -vc 'sdiag_family=AF_UNIX' <<<"$dumps" || true)
log "client to an smcr server: 20 connections SMC, $tcp_dumps dump(s) of the listening TCP sockets"
[[ $tcp_dumps -ge 1 && $tcp_dumps -le 2 ]] ||
    fail "20 SMC connections to one listener made $tcp_dumps dumps of the listening TCP" \
        "sockets, expected 1 or 2 (the first connection's): see $work/known.strace"
log "PASS"
