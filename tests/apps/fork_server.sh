#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A python server that forks after accept (the child echoes, the parent goes
# back to accept), with 30 concurrent clients: every byte echoed, and the
# forked children, not only the parent, run with the library. Under smc_run
# every connection runs in SMC mode (same host), classified by the child that
# serves it: the client's and the children's logs say so (a child exits with
# its connection, and its published stats with it).
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
[[ -n $PYTHON ]] || skip "python3 is not installed"
# Many short connections to one destination: the learned policy would keep the
# later ones on TCP (SHORTFLOWS, tested by smc_learn.sh); every one is asserted SMC.
export SMCR_LEARN=0

workload() {
    local mode=$1 port pid children expect
    port=$(free_port 4)
    start_server "$mode" forkserver "$PYTHON" "$apps_dir/echo.py" server-fork 127.0.0.1 "$port"
    pid=$server_pid
    wait_listen "$pid" "$port"
    run_client "$mode" client 90 "$PYTHON" "$apps_dir/echo.py" client-asyncio 127.0.0.1 "$port" 30 50000
    result "client exit $exit_code: $(cat "$work/client.$mode.out")"
    assert_log_mode "$mode" client
    assert_process_mode "$mode" "$pid" "forking server"
    if [[ $mode == smcr ]]; then
        assert_smc_log client 30
        assert_smc_log forkserver 30
    fi
    stop_server "$pid"
    assert_log_mode "$mode" forkserver

    # Each child reported whether libsmcr.so was mapped in it.
    expect=$([[ $mode == smcr ]] && echo 1 || echo 0)
    children=$(grep -c "^child pid [0-9]* preload=$expect$" "$work/forkserver.$mode.err" || true)
    result "children that served a connection: $children"
    [[ $children -eq 30 ]] || fail "expected 30 forked children with preload=$expect, saw $children"
}

run_both workload
grep -q '^client exit 0: asyncio: 30 connections x 50000 bytes echoed' "$work/result.smcr" ||
    fail "the client did not get every echo"
