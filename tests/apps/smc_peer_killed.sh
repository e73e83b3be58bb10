#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A peer killed with SIGKILL in the middle of a transfer, real programs on
# both ends under smc_run (socat streaming /dev/zero): the connection is in
# SMC mode and moving bytes (smcr-stat --json of the survivor, read live),
# then one end is killed; the other must notice promptly (EOF or ECONNRESET,
# socat exits by itself within 2 s) and not hang. Both directions: the
# sender killed (the receiver sees the end of the stream) and the receiver
# killed (the sender's writes fail).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need socat
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || stat_tool=$apps_dir/../../scripts/smcr-stat
mode=smcr

# live_smc_bytes PID: bytes sent + received by PID's live smc-shm connections
# (smcr-stat --json); fails if PID has a connection in another mode.
live_smc_bytes() {
    "$stat_tool" --json -p "$1" | "$PYTHON" -c '
import json, sys
conns = json.load(sys.stdin)["connections"]
if any(c["mode"] != "smc-shm" for c in conns):
    sys.exit("a connection not in smc-shm mode: %s" % [c["mode"] for c in conns])
print(sum(c["bytes_sent"] + c["bytes_received"] for c in conns if c["state"] == "live"))'
}

# wait_moving PID: waits (at most 10 s) until PID's SMC connection has moved
# more than 64 MiB: the transfer is under way in SMC mode.
wait_moving() {
    local i n=0
    for ((i = 0; i < 200; i++)); do
        n=$(live_smc_bytes "$1") || fail "smcr-stat: $n"
        [[ $n -gt $((64 << 20)) ]] && { log "pid $1: $n bytes moved over smc-shm so far"; return 0; }
        sleep 0.05
    done
    fail "pid $1: only $n bytes over SMC after 10 s"
}

# kill_and_time VICTIM SURVIVOR WHAT: SIGKILL VICTIM, then SURVIVOR must end
# within 2 s; logs how long it took and SURVIVOR's exit status.
kill_and_time() {
    local victim=$1 survivor=$2 what=$3 t0 i
    t0=$(date +%s%N)
    kill -KILL "$victim"
    for ((i = 0; i < 40; i++)); do
        kill -0 "$survivor" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$survivor" 2>/dev/null && fail "$what: the survivor (pid $survivor) still runs 2 s after its peer was killed"
    survivor_rc=0
    wait "$survivor" || survivor_rc=$?
    log "$what: the survivor ended $(( ($(date +%s%N) - t0) / 1000000 )) ms after SIGKILL of its peer, exit status $survivor_rc"
}

# 1. The sending client is killed: the receiving server sees the stream end.
port=$(free_port 4)
start_server smcr rx-server socat -u "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" /dev/null
server=$server_pid
wait_listen "$server" "$port"
start_server smcr tx-client socat -u /dev/zero "TCP4:127.0.0.1:$port"
client=$server_pid
wait_moving "$server"
kill_and_time "$client" "$server" "sender killed"
[[ $survivor_rc -eq 0 ]] || fail "the receiver did not end at the stream's end (exit $survivor_rc)"
stop_server "$client"
stop_server "$server"
assert_smc_log rx-server 1
assert_smc_log tx-client 1

# 2. The receiving server is killed: the sending client's writes fail.
port=$(free_port 4)
start_server smcr tx-server socat -u /dev/zero "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr"
server=$server_pid
wait_listen "$server" "$port"
start_server smcr rx-client socat -u "TCP4:127.0.0.1:$port" /dev/null
client=$server_pid
wait_moving "$server"
kill_and_time "$client" "$server" "receiver killed"
[[ $survivor_rc -ne 0 ]] || fail "the sender's writes to a killed receiver did not fail"
grep -qE 'Connection reset by peer|Broken pipe' "$work/tx-server.smcr.err" || fail "the sender saw no ECONNRESET/EPIPE"
log "the sender said: $(grep -v '^smcr' "$work/tx-server.smcr.err" | head -1)"
stop_server "$client"
stop_server "$server"
assert_smc_log tx-server 1
assert_smc_log rx-client 1
