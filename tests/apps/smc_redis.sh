#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# redis-benchmark (SET, GET) and redis-cli SET/GET of a large value against a
# redis-server, all under smc_run: the server's published stats count one SMC
# handshake per client connection and no fallback; the value comes back with
# the same sha256.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need redis-server redis-cli redis-benchmark

"$PYTHON" -c 'import base64, os; print(base64.b64encode(os.urandom(3 << 20)).decode(), end="")' >"$work/value"
port=$(free_port 4)
mode=smcr
start_server smcr redis-server redis-server --port "$port" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$work"
pid=$server_pid
wait_listen "$pid" "$port"
run_client smcr benchmark 60 redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n 5000 -c 8 -q --csv
[[ $exit_code -eq 0 ]] || fail "redis-benchmark exited $exit_code"
log "redis-benchmark: $(tr '\n' ' ' <"$work/benchmark.smcr.out")"
assert_smc_log benchmark 8
run_client_in "$work/value" smcr redis-set 20 redis-cli -h 127.0.0.1 -p "$port" -x SET smcr-key
[[ $exit_code -eq 0 && $(cat "$work/redis-set.smcr.out") == OK ]] || fail "SET failed"
run_client smcr redis-get 20 redis-cli -h 127.0.0.1 -p "$port" --raw GET smcr-key
[[ $exit_code -eq 0 ]] || fail "GET failed"
head -c -1 "$work/redis-get.smcr.out" >"$work/got" # redis-cli --raw adds a newline
[[ $(sha "$work/got") == "$(sha "$work/value")" ]] || fail "GET returned other bytes"
assert_smc_log redis-set 1
assert_smc_log redis-get 1
assert_smc_stats "redis-server" 10 "$pid"
