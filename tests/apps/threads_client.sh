#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Multi-threaded clients against an echo server: 8 python threads with 5
# sequential connections each (blocking sockets), and a C client
# (mt_client.c) whose 16 threads run socket calls truly in parallel, on ::1
# when the host has it: every byte echoed, the same with and without smc_run
# on both ends. Under smc_run every connection runs in SMC mode (same host):
# the clients' logs and the servers' stats (smcr-stat) say so.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
[[ -n $PYTHON ]] || skip "python3 is not installed"
# Many short connections to one destination: the learned policy would keep the
# later ones on TCP (SHORTFLOWS, tested by smc_learn.sh); every one is asserted SMC.
export SMCR_LEARN=0

workload() {
    local mode=$1 port pid
    port=$(free_port 4)
    start_server "$mode" server "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
    pid=$server_pid
    wait_listen "$pid" "$port"
    run_client "$mode" threads 90 "$PYTHON" "$apps_dir/echo.py" client-threads 127.0.0.1 "$port" 8 5 30000
    result "threads exit $exit_code: $(cat "$work/threads.$mode.out")"
    assert_log_mode "$mode" threads
    assert_process_mode "$mode" "$pid" "echo server"
    if [[ $mode == smcr ]]; then
        assert_smc_log threads 40
        assert_smc_stats "echo server (python threads)" 40 "$pid"
    fi
    stop_server "$pid"
    assert_log_mode "$mode" server

    if [[ -n ${SMCR_TEST_MT_CLIENT:-} ]]; then
        local host=127.0.0.1 family=4
        if have_ipv6; then host=::1 family=6; fi
        port=$(free_port "$family")
        start_server "$mode" server "$PYTHON" "$apps_dir/echo.py" server-asyncio "$host" "$port"
        pid=$server_pid
        wait_listen "$pid" "$port"
        run_client "$mode" mt_client 90 "$SMCR_TEST_MT_CLIENT" "$host" "$port" 16 10 20000
        result "mt_client exit $exit_code: $(cat "$work/mt_client.$mode.out")"
        assert_log_mode "$mode" mt_client
        assert_process_mode "$mode" "$pid" "echo server"
        if [[ $mode == smcr ]]; then
            assert_smc_log mt_client 160
            assert_smc_stats "echo server (C threads)" 160 "$pid"
        fi
    fi
    stop_server "$pid"
    assert_log_mode "$mode" server
}

run_both workload
grep -q '^threads exit 0: 8 threads: 40 connections' "$work/result.smcr" ||
    fail "the python threads did not get every echo"
if [[ -n ${SMCR_TEST_MT_CLIENT:-} ]]; then
    grep -q '^mt_client exit 0: C, 16 threads: 160 connections' "$work/result.smcr" ||
        fail "the C threads did not get every echo"
fi
