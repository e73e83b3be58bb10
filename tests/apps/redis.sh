#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# redis-benchmark (SET and GET, 2000 requests each, 10 clients) against a
# private redis-server on 127.0.0.1, every request counted by the server, and
# redis-cli SET/GET of a 200 KiB value compared by checksum; with and without
# smc_run on both ends. Under smc_run every connection runs in SMC mode (same
# host): the clients' logs and the server's stats (smcr-stat) say so.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
need redis-server redis-cli redis-benchmark

# A value of printable text (redis-cli -x keeps it byte for byte).
head -c $((150 * 1024)) /dev/urandom | base64 -w 0 >"$work/value"

# commands_processed MODE PORT: sets commands to the server's total_commands_processed.
commands_processed() {
    run_client "$1" "redis-info" 10 redis-cli -h 127.0.0.1 -p "$2" info stats
    [[ $exit_code -eq 0 ]] || fail "redis-cli info failed ($exit_code)"
    assert_log_mode "$1" redis-info
    commands=$(sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p' "$work/redis-info.$1.out")
    [[ $commands =~ ^[0-9]+$ ]] || fail "no total_commands_processed in redis INFO"
}

workload() {
    local mode=$1 port pid before after
    port=$(free_port 4)
    start_server "$mode" redis-server redis-server --port "$port" --bind 127.0.0.1 \
        --save '' --appendonly no --daemonize no --dir "$work" --logfile ''
    pid=$server_pid
    wait_listen "$pid" "$port"

    commands_processed "$mode" "$port"
    before=$commands
    run_client "$mode" benchmark 60 redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n 2000 -c 10 -q --csv
    commands_processed "$mode" "$port"
    after=$commands
    # The CSV header and one line per test; the rates differ from run to run.
    result "redis-benchmark exit $exit_code, tests: $(cut -d, -f1 "$work/benchmark.$mode.out" | tr '\n' ' ')"
    # 4000 requests, the 'info' itself, and redis-benchmark's own CONFIG GETs.
    result "requests seen by the server: $((after - before >= 4000 ? 1 : 0))"
    log "$mode: the server processed $((after - before)) commands during the benchmark"
    assert_log_mode "$mode" benchmark

    run_client_in "$work/value" "$mode" redis-set 10 redis-cli -h 127.0.0.1 -p "$port" -x SET smcr-test-key
    result "SET exit $exit_code: $(cat "$work/redis-set.$mode.out")"
    assert_log_mode "$mode" redis-set
    run_client "$mode" redis-get 10 redis-cli -h 127.0.0.1 -p "$port" --raw GET smcr-test-key
    # --raw ends the value with a newline.
    result "GET exit $exit_code: sha256 $(head -c -1 "$work/redis-get.$mode.out" | sha256sum | cut -d' ' -f1)"
    assert_log_mode "$mode" redis-get

    assert_process_mode "$mode" "$pid" "redis-server"
    if [[ $mode == smcr ]]; then
        # the benchmark's 10 clients (and its CONFIG GET), 2 infos, SET, GET
        assert_smc_log benchmark 10
        assert_smc_log redis-info 1
        assert_smc_log redis-set 1
        assert_smc_log redis-get 1
        assert_smc_stats redis-server 14 "$pid"
    fi
    stop_server "$pid"
    assert_log_mode "$mode" redis-server
}

run_both workload
grep -q "^GET exit 0: sha256 $(sha "$work/value")$" "$work/result.smcr" || fail "GET did not return the value SET"
grep -q '^requests seen by the server: 1$' "$work/result.smcr" || fail "the server did not see every request"
grep -q '^redis-benchmark exit 0, tests: "test" "SET" "GET" $' "$work/result.smcr" || fail "redis-benchmark did not complete"
