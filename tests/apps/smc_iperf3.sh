#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# iperf3 (client sends, -R server sends, -P 8 parallel streams) with both ends
# under smc_run: every connection (control and data) in SMC mode by the
# client's log and the server's published stats; iperf3's own byte counts
# must be sane.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need iperf3

port=$(free_port 4)
mode=smcr
start_server smcr iperf3-server iperf3 -s -B 127.0.0.1 -p "$port"
pid=$server_pid
wait_listen "$pid" "$port"
conns=0
for run in "send:2:" "reverse:2:-R" "parallel:9:-P 8"; do
    name=${run%%:*}
    rest=${run#*:}
    min=${rest%%:*} # the control connection and the data streams
    read -ra flags <<<"${rest#*:}"
    run_client smcr "iperf3-$name" 30 iperf3 -c 127.0.0.1 -p "$port" -t 1 -J "${flags[@]}"
    [[ $exit_code -eq 0 ]] || fail "iperf3 $name exited $exit_code"
    log "$name: $(iperf3_check_json "$work/iperf3-$name.smcr.out")" || fail "iperf3 $name: bad result"
    assert_smc_log "iperf3-$name" "$min"
    conns=$((conns + $(smc_lines "iperf3-$name")))
done
assert_smc_stats "iperf3 server" "$conns" "$pid"
