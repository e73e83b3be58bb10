#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A handshake that outlasts its bound costs SMC, never the connection: both
# ends under smc_run, one echo of 1 MiB per case, each case in a blocking and
# in a non-blocking (epoll) client.
#
# slow-server: the server accepts and touches the connection only once the
#   client has given up waiting for the answer to its Proposal (its 10 s
#   first-reply bound; a server whose worker takes the socket late).  The
#   client's stats count a fallback TIMEOUT_CL, the server's the same (the
#   client's Decline answers its late Accept).
# stopped-client: the client is stopped (SIGSTOP) right after its Proposal,
#   the server answers it, gives up waiting for the Confirm at its CLC bound
#   (6 s), and only then is the client continued.  The server's stats count a
#   fallback TIMEOUT_AL.
#
# Either way the echo is the payload, intact (so neither program read a byte
# of CLC: the server echoes what it got), and nobody saw a reset.  The order
# of events comes from the logs (the client's "Proposal sent", each side's
# "SMC given up"), never from timing.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

script=$(dirname -- "${BASH_SOURCE[0]}")/hs_timeout.py

wait_log() { # FILE PATTERN SECONDS WHAT
    local i
    for ((i = 0; i < $3 * 20; i++)); do
        grep -q -- "$2" "$1" && return 0
        sleep 0.05
    done
    fail "$4: no '$2' in $(basename -- "$1") within $3 s"
}

# one CASE FORM
one() {
    local case=$1 form=$2 name="$1-$2" port client out sums
    local go=$work/$name.go done=$work/$name.done
    port=$(free_port 4)
    start_server smcr "$name-server" "$PYTHON" "$script" server "$port" "$go" "$done"
    local server=$server_pid
    wait_log "$work/$name-server.smcr.out" listening 10 "$name"
    "${smcr_prefix[@]}" "$PYTHON" "$script" client "$port" "$form" "$done" \
        >"$work/$name-client.smcr.out" 2>"$work/$name-client.smcr.err" &
    client=$!
    server_pids+=("$client")
    wait_log "$work/$name-client.smcr.err" 'Proposal sent' 10 "$name"
    if [[ $case == slow-server ]]; then
        wait_log "$work/$name-client.smcr.err" 'SMC given up (TIMEOUT_CL)' 30 "$name"
        touch "$go"
    else
        kill -STOP "$client"
        touch "$go"
        wait_log "$work/$name-server.smcr.err" 'SMC given up (TIMEOUT_AL)' 30 "$name"
        kill -CONT "$client"
    fi
    wait_log "$work/$name-client.smcr.out" '^client ok\|^error' 60 "$name"
    wait_log "$work/$name-server.smcr.out" '^server got' 30 "$name"
    out=$(cat "$work/$name-client.smcr.out")
    grep -q '^client ok' <<<"$out" ||
        fail "$name: client: $out $(grep -m1 '^error' "$work/$name-client.smcr.err" || true)"
    sums=$(sed -n 's/^client ok //p' "$work/$name-client.smcr.out")
    [[ $(sed -n 's/^server got //p' "$work/$name-server.smcr.out") == "$sums" ]] ||
        fail "$name: the server got other bytes than the client sent: $(cat "$work/$name-server.smcr.out")"
    if [[ $case == slow-server ]]; then
        assert_fallback_stats "$name client" TIMEOUT_CL 1 "$client"
        assert_fallback_stats "$name server" TIMEOUT_CL 1 "$server"
        assert_fallback_log "$name-client" TIMEOUT_CL 1
    else
        assert_fallback_stats "$name server" TIMEOUT_AL 1 "$server"
        assert_fallback_log "$name-server" TIMEOUT_AL 1
    fi
    log "$name: client: $(grep -h -m1 ': tcp-fallback (\|declined after our Confirm\|: smc-' \
        "$work/$name-client.smcr.err" | sed 's/.*smcr[^:]*: //')"
    if grep -q 'connection reset\|SMC handshake failed' "$work/$name-client.smcr.err" \
        "$work/$name-server.smcr.err"; then
        fail "$name: a handshake failed: $(grep -h 'connection reset\|SMC handshake failed' \
            "$work/$name-client.smcr.err" "$work/$name-server.smcr.err" | head -2)"
    fi
    log "$name: echo intact ($sums), $(grep -h -m1 'SMC given up' "$work/$name-client.smcr.err" \
        "$work/$name-server.smcr.err" | sed 's/.*smcr[^:]*: //')"
    touch "$done"
    wait_exit "$client" 10
    [[ $exit_code -eq 0 ]] || fail "$name: the client exited $exit_code"
    wait_exit "$server" 10
    [[ $exit_code -eq 0 ]] || fail "$name: the server exited $exit_code"
}

for case in slow-server stopped-client; do
    for form in block epoll; do
        one "$case" "$form"
    done
done
