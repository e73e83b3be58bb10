#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A python asyncio echo server (one thread, epoll, non-blocking sockets,
# lazily classified connections) and an asyncio client with 200 concurrent
# connections (non-blocking connects finished through epoll), then 4 threads
# x 10 blocking connections: every connection in SMC mode by the client logs
# and the server's published stats; echo.py checks every byte.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

port=$(free_port 4)
mode=smcr
start_server smcr asyncio-server "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
pid=$server_pid
wait_listen "$pid" "$port"
run_client smcr asyncio-client 90 "$PYTHON" "$apps_dir/echo.py" client-asyncio 127.0.0.1 "$port" 200 20000
[[ $exit_code -eq 0 ]] || fail "asyncio client exited $exit_code"
grep -q '^asyncio: 200 connections x 20000 bytes echoed' "$work/asyncio-client.smcr.out" ||
    fail "asyncio client: $(cat "$work/asyncio-client.smcr.out")"
assert_smc_log asyncio-client 200
run_client smcr threads-client 90 "$PYTHON" "$apps_dir/echo.py" client-threads 127.0.0.1 "$port" 4 10 50000
[[ $exit_code -eq 0 ]] || fail "threads client exited $exit_code: $(cat "$work/threads-client.smcr.out")"
assert_smc_log threads-client 40
assert_smc_stats "asyncio server" 240 "$pid"
