#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# socat pipes a file both ways (client to server on 127.0.0.1, server to
# client on ::1): the checksums match, with and without smc_run on both ends.
# Under smc_run both transfers run in SMC mode (same host), as both ends' logs
# say (socat exits with its connection, and its published stats with it).
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
need socat
[[ -n $PYTHON ]] || skip "python3 is not installed"

random_file "$work/upload" $((5 * 1024 * 1024 + 123))
random_file "$work/download" $((4 * 1024 * 1024 + 7))
family=4 listen=TCP4-LISTEN bind=127.0.0.1 connect=TCP4:127.0.0.1
if have_ipv6; then family=6 listen=TCP6-LISTEN bind='[::1]' connect='TCP6:[::1]'; fi

workload() {
    local mode=$1 port pid
    # Upload: the client reads the file and sends it; the server writes it.
    port=$(free_port 4)
    rm -f "$work/uploaded"
    start_server "$mode" socat-up-server socat -u "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" \
        "CREATE:$work/uploaded"
    pid=$server_pid
    wait_listen "$pid" "$port"
    assert_process_mode "$mode" "$pid" "socat upload server"
    run_client "$mode" socat-up-client 30 socat -u "OPEN:$work/upload" "TCP4:127.0.0.1:$port"
    result "upload client exit $exit_code"
    wait_exit "$pid" 20
    result "upload server exit $exit_code, sha256 $(sha "$work/uploaded")"
    assert_log_mode "$mode" socat-up-client
    assert_log_mode "$mode" socat-up-server

    # Download: the server reads the file and sends it; the client writes it.
    port=$(free_port "$family")
    rm -f "$work/downloaded"
    start_server "$mode" socat-down-server socat -u "OPEN:$work/download" \
        "$listen:$port,bind=$bind,reuseaddr"
    pid=$server_pid
    wait_listen "$pid" "$port"
    assert_process_mode "$mode" "$pid" "socat download server"
    run_client "$mode" socat-down-client 30 socat -u "$connect:$port" "CREATE:$work/downloaded"
    result "download client exit $exit_code, sha256 $(sha "$work/downloaded")"
    wait_exit "$pid" 20
    result "download server exit $exit_code"
    assert_log_mode "$mode" socat-down-client
    assert_log_mode "$mode" socat-down-server
    if [[ $mode == smcr ]]; then
        local name
        for name in socat-up-client socat-up-server socat-down-client socat-down-server; do
            assert_smc_log "$name" 1
        done
    fi
}

run_both workload
grep -q "^upload server exit 0, sha256 $(sha "$work/upload")$" "$work/result.smcr" || fail "upload corrupted"
grep -q "^download client exit 0, sha256 $(sha "$work/download")$" "$work/result.smcr" || fail "download corrupted"
