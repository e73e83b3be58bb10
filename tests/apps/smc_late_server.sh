#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A client's event loop never waits for a server that answers late.  The
# server (under smc_run) stops itself right after listen(), so the client's
# Proposal sits unanswered; the client (under smc_run, a non-blocking socket
# in an epoll, then a poll, loop with 0.2 s ticks) must go on ticking with
# nothing to report, and say so, while the server is stopped.  Only then is
# the server continued: the handshake completes, the echo is intact, and
# both ends' logs show the connection in SMC mode.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

script=$(dirname -- "${BASH_SOURCE[0]}")/late_server.py

for how in epoll poll; do
    port=$(free_port 4)
    start_server smcr "$how-server" "$PYTHON" "$script" server "$port"
    for _ in $(seq 200); do
        [[ $(ps -o stat= -p "$server_pid" 2>/dev/null) == T* ]] && break
        sleep 0.05
    done
    [[ $(ps -o stat= -p "$server_pid") == T* ]] || fail "$how: the server did not stop itself"
    "${smcr_prefix[@]}" "$PYTHON" "$script" client "$port" "$how" \
        >"$work/$how-client.smcr.out" 2>"$work/$how-client.smcr.err" &
    client=$!
    for _ in $(seq 600); do
        grep -qx looping "$work/$how-client.smcr.out" && break
        kill -0 "$client" 2>/dev/null || break
        sleep 0.05
    done
    grep -qx looping "$work/$how-client.smcr.out" ||
        fail "$how: the client's loop did not tick while the server was stopped: $(tail -1 "$work/$how-client.smcr.err")"
    grep -q 'Proposal sent' "$work/$how-client.smcr.err" ||
        fail "$how: the client did not propose before the server ran"
    kill -CONT "$server_pid"
    exit_code=0
    timeout 60 tail --pid="$client" -f /dev/null || fail "$how: the client did not finish"
    wait "$client" || exit_code=$?
    [[ $exit_code -eq 0 ]] || fail "$how: the client exited $exit_code: $(grep -m1 '^error' "$work/$how-client.smcr.err")"
    wait_exit "$server_pid" 30
    [[ $exit_code -eq 0 ]] || fail "$how: the server exited $exit_code"
    assert_smc_log "$how-client" 1
    assert_smc_log "$how-server" 1
    log "$how: $(cat "$work/$how-client.smcr.out" | tail -1)"
done
