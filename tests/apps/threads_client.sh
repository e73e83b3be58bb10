#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A multi-threaded client (8 python threads, 5 sequential connections each,
# blocking sockets) against an echo server: every byte echoed, the same with
# and without smc_run on both ends.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
[[ -n $PYTHON ]] || skip "python3 is not installed"

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
    stop_server "$pid"
    assert_log_mode "$mode" server
}

run_both workload
