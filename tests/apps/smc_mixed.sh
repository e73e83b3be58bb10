#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Mixed ends with real programs: an smcr client to a plain server, and a plain
# client to an smcr server (socat on both ends, the server echoing through
# cat). The data must come back intact (sha256), and the smcr end's live
# record in smcr-stat --json must say tcp-fallback with the reason PEERNOSMC
# (the client: no smcr listener on that port, so nothing proposed; the server:
# no Proposal came), read while the connection is open (the client keeps it
# open a moment after sending), and its log must say the same.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need socat
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || stat_tool=$apps_dir/../../scripts/smcr-stat

random_file "$work/data" $((8 * 1024 * 1024 + 333))
want=$(sha "$work/data")

# fallback_record PID: waits (at most 5 s) for a live connection of PID in
# smcr-stat --json, then prints "mode reason(code)"; fails if none appears.
fallback_record() {
    local i line
    for ((i = 0; i < 100; i++)); do
        line=$("$stat_tool" --json -p "$1" | "$PYTHON" -c '
import json, sys
for c in json.load(sys.stdin)["connections"]:
    if c["state"] == "live":
        print(c["mode"], "%s(%s)" % (c["fallback_name"], c["fallback_code"]))
        break')
        [[ -n $line ]] && { printf '%s\n' "$line"; return 0; }
        sleep 0.05
    done
    fail "pid $1: no live connection in smcr-stat after 5 s"
}

# mixed NAME SERVER_MODE CLIENT_MODE SMCR_SIDE: one echo transfer.
mixed() {
    local name=$1 server_mode=$2 client_mode=$3 side=$4 port server client record
    port=$(free_port 4)
    start_server "$server_mode" "$name-server" socat "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" EXEC:cat
    server=$server_pid
    wait_listen "$server" "$port"
    # The client sends the file, then holds its end open 1.5 s (stdin still open)
    # while the record is read, then half-closes; the echo then ends.
    local -a prefix=()
    [[ $client_mode == smcr ]] && prefix=("${smcr_prefix[@]}")
    { cat "$work/data"; sleep 1.5; } |
        timeout -k 5 30 "${prefix[@]}" socat -t 10 - "TCP4:127.0.0.1:$port" \
            >"$work/$name.out" 2>"$work/$name-client.$client_mode.err" &
    client=$!
    if [[ $side == server ]]; then record=$(fallback_record "$server"); else
        # $! is timeout's pid; socat (smc_run exec's it) is its child.
        local pid
        pid=$(client_pid "$client")
        record=$(fallback_record "$pid")
    fi
    local rc=0
    wait "$client" || rc=$?
    [[ $rc -eq 0 ]] || fail "$name: the client exited $rc"
    wait_exit "$server" 10
    [[ $(sha "$work/$name.out") == "$want" ]] || fail "$name: the echo differs (sha256)"
    [[ $record == 'tcp-fallback PEERNOSMC('* ]] ||
        fail "$name: the $side's record is '$record', not tcp-fallback with PEERNOSMC"
    log "$name: echo of $(stat -c %s "$work/data") bytes intact; the smcr $side's smcr-stat --json record: $record"
    assert_fallback_log "$name-$side" PEERNOSMC 1
    log "$name: its log says: $(grep -m1 -o 'tcp-fallback (.*' "$work/$name-$side.smcr.err")"
}

mixed smcr-client-plain-server plain smcr client
mixed plain-client-smcr-server smcr plain server
