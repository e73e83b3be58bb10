#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# wrk against nginx (master + 2 workers), both under smc_run, with keep-alive
# and with 'Connection: close' (a new connection per request). A wrk script
# compares every response body with the served file (a checksum of sorts:
# byte for byte) and counts non-200s; wrk must report no socket error and no
# non-2xx/3xx response; the workers' published stats say SMC for every
# connection and no fallback, and wrk's log says smc-shm.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need nginx wrk

mkdir -p "$work/www"
random_file "$work/www/page.bin" 4096
port=$(free_port 4)
write_nginx_conf "$port" 256 'keepalive_requests 1000000;' backlog=512
write_wrk_checker "$work/www/page.bin"

mode=smcr
start_server smcr nginx nginx -p "$work" -e "$work/nginx-stderr.log" -c "$work/nginx.conf"
pid=$server_pid
wait_listen "$pid" "$port"

# check_wrk NAME MIN_CONNS: wrk's report is clean and every body was right.
check_wrk() {
    local name=$1 out=$work/$1.smcr.out good bad
    local connect=0 read=0 write=0 timeout=0
    if grep -q 'Socket errors' "$out"; then
        read -r connect read write timeout < <(sed -n \
            's/.*Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' "$out")
    fi
    # Connect errors included: wrk sizes its event loop for 10 + 3 x connections
    # fds and refuses sockets numbered past it, so this also proves that the
    # library keeps its own fds (rings, doorbells, epoll sets) out of that range.
    [[ $((connect + read + write + timeout)) -eq 0 ]] || fail "$name: $(grep 'Socket errors' "$out")"
    grep -q 'Non-2xx or 3xx' "$out" && fail "$name: $(grep 'Non-2xx or 3xx' "$out")"
    read -r good bad < <(sed -n 's/^checked: good \([0-9]*\) bad \([0-9]*\)$/\1 \2/p' "$out")
    [[ -n ${good:-} ]] || fail "$name: the check script reported nothing"
    [[ $bad -eq 0 ]] || fail "$name: $bad response(s) with a wrong status or body"
    [[ $good -ge 100 ]] || fail "$name: only $good good responses"
    log "$name: $good responses, every body equal to the file; $(grep -m1 'Requests/sec' "$out" | tr -s ' ')"
    assert_smc_log "$name" "$2"
}

workers() { ps -o pid= --ppid "$pid"; }
run_client smcr wrk-keepalive 30 wrk -t 2 -c 8 -d 1s -s "$work/check.lua" "http://127.0.0.1:$port/page.bin"
[[ $exit_code -eq 0 ]] || fail "wrk (keep-alive) exited $exit_code"
check_wrk wrk-keepalive 8
keepalive_conns=$(smc_lines wrk-keepalive)
# shellcheck disable=SC2046
assert_smc_stats "nginx workers (keep-alive)" "$keepalive_conns" $(workers)

run_client smcr wrk-close 30 wrk -t 2 -c 8 -d 1s -H 'Connection: close' -s "$work/check.lua" \
    "http://127.0.0.1:$port/page.bin"
[[ $exit_code -eq 0 ]] || fail "wrk (Connection: close) exited $exit_code"
check_wrk wrk-close 100
close_conns=$(smc_lines wrk-close)
# A new connection per request: the workers made one SMC handshake for each.
# When wrk's timer ends it closes the connections it has open, some of them
# connected but not yet written to: no Proposal ever reaches the server, which
# counts those as fallbacks (PEERNOSMC) when it sees the close. So: the server's
# fallbacks are at most the client sockets that never reached a decision.
opened=$(grep -c 'socket: fd [0-9]*: AF_INET TCP socket tracked' "$work/wrk-close.smcr.err" || true)
undecided=$((opened - close_conns))
# shellcheck disable=SC2046
stats=$(mode_stats $(workers)) || fail "nginx workers: smcr-stat stats --json failed"
read -r smc fb reasons <<<"$stats"
[[ $smc -ge $((keepalive_conns + close_conns)) ]] ||
    fail "nginx workers: $smc SMC handshakes, expected at least $((keepalive_conns + close_conns))"
[[ $fb -le $undecided ]] ||
    fail "nginx workers: $fb fallback(s), but only $undecided wrk socket(s) closed before deciding"
[[ $fb -eq 0 || $reasons == "PEERNOSMC:$fb" ]] ||
    fail "nginx workers: fallback reasons $reasons, expected only PEERNOSMC (sockets closed unused)"
log "nginx workers (Connection: close): $smc SMC handshakes; $fb fallback(s) ($reasons) for the $undecided socket(s) wrk closed unused at its end"
