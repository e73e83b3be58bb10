#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Many concurrent connections between two processes, both under smc_run: an
# epoll echo server and a client that opens all its non-blocking connections
# at once, echoes a checksummed payload on each and holds them all open
# (echo_many.py).  Three runs:
#   plain     the same workload without smcr: it must pass, and its memory
#             after the close is the baseline smcr's is held to;
#   smc       every connection SMC (logs and the server's published stats), no
#             fallback, every echo intact, no error;
#   fd-limit  the server's RLIMIT_NOFILE runs out while connections are made,
#             at each of the points of the handshake where an fd is taken:
#             every echo still intact, no error, and both ends agree on every
#             connection's mode (an end in SMC whose peer fell back is a lost
#             connection); the server's published stats count each of its
#             fallbacks with its own reason, MEM (the shortage is its own),
#             never PEERDECL (the client's Decline of a handshake the server
#             lost).
# Resources (fds, RSS, memfd mappings) of both processes before, during and
# after are logged; after the close they must be back at the baseline, within
# what the library keeps on purpose: its pool of idle rings and its cache of
# the peer's mappings (32 each at the default ring size).
# Under AddressSanitizer (a sanitized build preloads libasan into the Python
# processes, plain runs included) RSS says nothing of what is held: the
# allocator's quarantine keeps up to 256 MiB of freed blocks resident, so RSS
# after the close grows with what the run freed.  There the live heap the
# allocator counts (allocated, not freed; the quarantine not included) is held
# to the plain run's instead, and RSS is only logged.
#
#   many_echo.sh [CONNS]      CONNS connections (default 1000; SMCR_STRESS_CONNS), at
#                             least 200: with fewer, the fd-limit runs' limits leave
#                             the server no fd above the library's floor (256), and
#                             no handshake there starts at all
source "$(dirname -- "${BASH_SOURCE[0]}")/../apps/smc_lib.sh"
source "$(dirname -- "${BASH_SOURCE[0]}")/stress_lib.sh"

need prlimit
conns=${1:-${SMCR_STRESS_CONNS:-1000}}
(( conns >= 200 )) || fail "$conns connections: the fd-limit runs need at least 200 (see the usage above)"
nbytes=4096
deadline=120 # seconds for every connection of a run to echo: a bound, not a measure
script=$(dirname -- "${BASH_SOURCE[0]}")/echo_many.py
# What the library may keep after every connection closed (see above), and the
# RSS that may come with it: 32 pooled rings (their pre-faulted first 64 KiB
# and the 4 KiB the workload wrote), 32 cached peer mappings, allocator slack.
fd_slack=40
memfd_maps_max=64
export SMCR_STRESS_MAPS_MAX=$memfd_maps_max # echo_many.py waits for the server to get there
rss_slack_kib=$((32 * 1024))
# Under ASan: the heap the library may keep (its pools' bookkeeping) beyond
# the plain run's: its per-connection state is in fixed tables and mappings, not on
# the heap, so a leak of a quarter of a KiB per connection of a 1000-connection run
# exceeds it.
heap_slack=$((256 * 1024))
asan=0
if [[ ${SMCR_SANITIZER_PRELOAD:-} == *libasan* ]]; then
    asan=1
    export SMCR_STRESS_HEAP_DIR=$work # echo_many.py: the server's heap, on request
fi

(( $(ulimit -Hn) >= 6 * conns + 256 )) ||
    skip "RLIMIT_NOFILE hard limit $(ulimit -Hn) is below the $((6 * conns + 256)) fds $conns SMC connections need"

# role_numbers NAME MODE PHASE ROLE: "FDS RSS_KIB MEMFD_MAPS HEAP" of ROLE
# (client or server) at PHASE, from the client's report (HEAP -1: not known).
role_numbers() {
    sed -n "s/^resources $3 //p" "$work/$1-client.$2.out" |
        sed -n "s/.*$4 fds=\([0-9]*\) rss_kib=\([0-9]*\) memfd_maps=\([0-9]*\) heap=\(-\{0,1\}[0-9]*\).*/\1 \2 \3 \4/p"
}

# growth NAME MODE ROLE FIELD: how much field FIELD (0-based, as role_numbers
# prints them) of ROLE grew from before to after the run.
growth() {
    local b a
    read -r -a b <<<"$(role_numbers "$1" "$2" before "$3")"
    read -r -a a <<<"$(role_numbers "$1" "$2" after "$3")"
    [[ ${#b[@]} -eq 4 && ${#a[@]} -eq 4 ]] || fail "$1 ($2): no resource report for $3"
    if (( $4 == 3 && (b[3] < 0 || a[3] < 0) )); then
        fail "$1 ($2): no heap in the resource report of $3 under ASan"
    fi
    echo $(( a[$4] - b[$4] ))
}

# assert_baseline NAME MODE ROLE PLAIN_RSS_GROWTH_KIB PLAIN_HEAP_GROWTH: the
# ROLE's fds, memfd mappings and RSS (under ASan: heap) after the close are
# back at their level before, within the slack beyond the plain run's growth.
assert_baseline() {
    local name=$1 mode=$2 role=$3 plain_rss=$4 plain_heap=$5 b d a
    read -r -a b <<<"$(role_numbers "$name" "$mode" before "$role")"
    read -r -a d <<<"$(role_numbers "$name" "$mode" during "$role")"
    read -r -a a <<<"$(role_numbers "$name" "$mode" after "$role")"
    [[ ${#b[@]} -eq 4 && ${#d[@]} -eq 4 && ${#a[@]} -eq 4 ]] || fail "$name ($mode): no resource report for $role"
    log "$name ($mode) $role: fds ${b[0]} -> ${d[0]} -> ${a[0]}, RSS ${b[1]} -> ${d[1]} -> ${a[1]} KiB," \
        "memfd mappings ${b[2]} -> ${d[2]} -> ${a[2]}, heap ${b[3]} -> ${d[3]} -> ${a[3]} bytes;" \
        "per connection while open: $(( (d[0] - b[0]) / conns_of_run )) fds, $(( (d[1] - b[1]) / conns_of_run )) KiB"
    (( a[0] <= b[0] + fd_slack )) || fail "$name ($mode) $role: ${a[0]} fds after the close, ${b[0]} before (slack $fd_slack)"
    (( a[2] <= memfd_maps_max )) || fail "$name ($mode) $role: ${a[2]} memfd mappings after the close (at most $memfd_maps_max)"
    if (( asan )); then
        (( b[3] >= 0 && a[3] >= 0 )) || fail "$name ($mode) $role: no heap in the resource report under ASan"
        (( a[3] - b[3] <= plain_heap + heap_slack )) ||
            fail "$name ($mode) $role: the heap grew by $(( a[3] - b[3] )) bytes over the run, the plain run's by $plain_heap (slack $heap_slack)"
        log "$name ($mode) $role: RSS not judged under ASan (its quarantine keeps freed blocks resident); heap growth" \
            "$(( a[3] - b[3] )) bytes, the plain run's $plain_heap"
        return
    fi
    (( a[1] - b[1] <= plain_rss + rss_slack_kib )) ||
        fail "$name ($mode) $role: RSS grew by $(( a[1] - b[1] )) KiB over the run, allowed $(( plain_rss + rss_slack_kib )) KiB"
}

# 1. plain: the workload itself passes; its RSS (under ASan: heap) growth is
# the baseline.  Under ASan the plain processes run on its allocator too.
conns_of_run=$conns
log "plain: $conns connections"
(( asan )) && server_pre=(env "LD_PRELOAD=$SMCR_SANITIZER_PRELOAD") client_pre=("${server_pre[@]}")
run_echo plain many "$conns"
server_pre=() client_pre=()
assert_echoed many plain "$conns"
plain_server_rss=$(growth many plain server 1)
plain_client_rss=$(growth many plain client 1)
plain_server_heap=0 plain_client_heap=0
if (( asan )); then
    plain_server_heap=$(growth many plain server 3)
    plain_client_heap=$(growth many plain client 3)
fi
stop_server "$server_pid"

# 2. smc: every connection SMC, nothing lost, back to the baseline.
log "smc: $conns connections"
run_echo smcr many "$conns"
assert_echoed many smcr "$conns"
assert_smc_stats "echo server" "$conns" "$server_pid"
stop_server "$server_pid"
assert_smc_log many-client "$conns"
assert_smc_log many-server "$conns"
assert_baseline many smcr server "$plain_server_rss" "$plain_server_heap"
assert_baseline many smcr client "$plain_client_rss" "$plain_client_heap"

# 3. fd-limit: the server runs out of fds after about 3/4 of the connections.
# An SMC connection holds 6 fds in the server; each of 6 consecutive limits
# leaves it short at a different step of a handshake, with the limit set
# before the program starts and by the program itself.
small=$(( conns / 2 ))
conns_of_run=$small
for k in 0 1 2 3 4 5; do
    nofile=$(( 64 + 6 * small * 3 / 4 + k ))
    how=$([[ $((k % 2)) -eq 0 ]] && echo exec || echo self)
    log "fd-limit: $small connections, server RLIMIT_NOFILE $nofile ($how)"
    run_echo smcr "fdlimit$k" "$small" "$how:$nofile"
    assert_echoed "fdlimit$k" smcr "$small"
    # The server ran short itself: its own stats count each fallback with its
    # own reason, MEM, never the client's Decline of a handshake it lost (PEERDECL).
    read -r ssmc sfb sreasons <<<"$(mode_stats "$server_pid")" || fail "fdlimit$k: smcr-stat stats --json failed"
    stop_server "$server_pid"
    read -r smc fb reasons <<<"$(modes_agree "fdlimit$k")" || fail "fdlimit$k: the two ends disagree"
    (( smc + fb / 2 == small )) || fail "fdlimit$k: $smc SMC and $fb fallback log lines for $small connections"
    (( fb > 0 )) || fail "fdlimit$k: no fallback although the server had fds for fewer connections"
    (( ssmc == smc && sfb == fb / 2 )) ||
        fail "fdlimit$k: the server's stats count $ssmc SMC and $sfb fallbacks ($sreasons), its log $smc and $((fb / 2))"
    smem=$(tr ',' '\n' <<<"$sreasons" | sed -n 's/^MEM://p')
    (( ${smem:-0} > 0 )) || fail "fdlimit$k: no fallback with reason MEM in the server's stats ($sreasons)"
    ! tr ',' '\n' <<<"$sreasons" | grep -q '^PEERDECL:' ||
        fail "fdlimit$k: the server's stats blame the client (PEERDECL) for its own shortage ($sreasons)"
    log "fdlimit$k: $smc SMC, $((fb / 2)) TCP, both ends agreeing ($reasons); the server's stats: $sreasons"
    assert_baseline "fdlimit$k" smcr server "$plain_server_rss" "$plain_server_heap"
done
