# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Helpers shared by the rxe test scripts that count PASS/FAIL lines (kernel.sh,
# tcpopt.sh): results, log excerpts, checksums, and waiting for processes.
passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
show() { sed "s/^/    $2| /" "$1" | tail -n "${3:-6}"; }
sha() { sha256sum < "$1" | cut -d' ' -f1; }
# wait_listening PORT: a TCP listener on PORT, IPv4 or IPv6 (a loaded TCG guest
# may take a minute to start a server under smc_run)
wait_listening() {
    local hex i
    hex=$(printf '%04X' "$1")
    for ((i = 0; i < 600; i++)); do
        # /proc/net/tcp6 spells the unspecified peer with 32 zeros, /proc/net/tcp with 8
        grep -Eq ":$hex 0+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
child_of() { # PID of timeout's child (smc_run exec's the program); "" once timeout is gone
    local i pid
    # (each ps takes a second or more in a loaded guest: do not poll for an exited one)
    for ((i = 0; i < 100; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        pid=$(ps -o pid= --ppid "$1" | tr -d ' ')
        [[ -n $pid ]] && { echo "$pid"; return; }
        sleep 0.05
    done
}
