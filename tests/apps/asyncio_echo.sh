#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A python asyncio echo server and an asyncio client with 100 concurrent
# connections, on 127.0.0.1 and on ::1: every byte echoed, the same with and
# without smc_run on both ends. Under smc_run every connection runs in SMC mode
# (same host): the client's log and the server's stats (smcr-stat) say so.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
[[ -n $PYTHON ]] || skip "python3 is not installed"
# Many short connections to one destination: the learned policy would keep the
# later ones on TCP (SHORTFLOWS, tested by smc_learn.sh); every one is asserted SMC.
export SMCR_LEARN=0

# echo_round MODE HOST FAMILY: one server, one client run, on one address.
echo_round() {
    local mode=$1 host=$2 family=$3 port
    local tag="asyncio$family"
    port=$(free_port "$family")
    start_server "$mode" "server$family" "$PYTHON" "$apps_dir/echo.py" server-asyncio "$host" "$port"
    local pid=$server_pid
    wait_listen "$pid" "$port"
    run_client "$mode" "$tag" 90 "$PYTHON" "$apps_dir/echo.py" client-asyncio "$host" "$port" 100 20000
    result "$tag exit $exit_code: $(cat "$work/$tag.$mode.out")"
    grep -q "^client pid [0-9]* preload=$([[ $mode == smcr ]] && echo 1 || echo 0)$" "$work/$tag.$mode.err" ||
        fail "client's own preload report is wrong in the $mode run"
    assert_log_mode "$mode" "$tag"
    assert_process_mode "$mode" "$pid" "asyncio echo server"
    if [[ $mode == smcr ]]; then
        assert_smc_log "$tag" 100
        assert_smc_stats "asyncio echo server (IPv$family)" 100 "$pid"
    fi
    stop_server "$pid"
    assert_log_mode "$mode" "server$family"
}

workload() {
    local mode=$1
    echo_round "$mode" 127.0.0.1 4
    if have_ipv6; then echo_round "$mode" ::1 6; fi
}

run_both workload
! grep -v ' exit 0: asyncio: 100 connections x 20000 bytes echoed' "$work/result.smcr" ||
    fail "not every client run echoed all its data"
