#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The library's own fds never take a number the program could have had.  A
# server holding N SMC connections opens files until EMFILE; it must get
# exactly as many as the same program holding N plain TCP connections, with
# every connection SMC (its published stats) and every echo intact:
#   room      soft limit below the hard one: the library's fds live above
#             the soft limit, so the program's numbers are all its own;
#   no-room   soft equal to hard (no number above the limit): connections
#             beyond what the library may take fall back (MEM, or INTERR where
#             the last fd of a step was missing) cleanly, and
#             the last quarter of the program's numbers stays its own.
source "$(dirname -- "${BASH_SOURCE[0]}")/../apps/smc_lib.sh"

script=$(dirname -- "${BASH_SOURCE[0]}")/fd_room.py
conns=100

# serve MODE NAME SOFT HARD: one server and one client; sets room.
serve() {
    local mode=$1 name=$2 soft=$3 hard=$4 port
    port=$(free_port 4)
    start_server "$mode" "$name-server" "$PYTHON" "$script" server "$port" "$conns" "$soft" "$hard"
    wait_listen "$server_pid" "$port"
    run_client "$mode" "$name-client" 120 "$PYTHON" "$script" client "$port" "$conns"
    [[ $exit_code -eq 0 ]] || fail "$name ($mode): client exited $exit_code: $(tail -2 "$work/$name-client.$mode.err")"
    grep -qx "echoed $conns of $conns" "$work/$name-client.$mode.out" || fail "$name ($mode): not every echo intact"
    for _ in $(seq 100); do grep -qx ok "$work/$name-server.$mode.out" && break; sleep 0.1; done
    grep -qx ok "$work/$name-server.$mode.out" || fail "$name ($mode): the server did not finish: $(tail -2 "$work/$name-server.$mode.err")"
    room=$(sed -n 's/^room //p' "$work/$name-server.$mode.out")
}

(( $(ulimit -Hn) >= 4096 )) || skip "RLIMIT_NOFILE hard limit $(ulimit -Hn) is below the 4096 this test raises to"

# room: soft 1024, hard 4096
serve plain room 1024 4096
plain_room=$room
serve smcr room 1024 4096
smc_room=$room
assert_smc_log room-server "$conns"
assert_smc_log room-client "$conns"
log "room: the server opened $smc_room files under smcr holding $conns SMC connections, $plain_room on plain TCP"
[[ $smc_room -eq $plain_room ]] ||
    fail "room: the program got $smc_room fds for itself under smcr, $plain_room on plain TCP"

# no-room: soft = hard = 512; 100 SMC connections would need ~500 library fds
serve plain noroom 512 512
plain_room=$room
serve smcr noroom 512 512
smc_room=$room
read -r smc fb reasons <<<"$(grep -c ': smc-shm (server)' "$work/noroom-server.smcr.err") \
    $(grep -c ': tcp-fallback (server)' "$work/noroom-server.smcr.err") -"
(( smc + fb == conns )) || fail "no-room: $smc SMC and $fb fallback log lines for $conns connections"
(( fb > 0 && smc > 0 )) || fail "no-room: $smc SMC, $fb fallbacks: expected both"
! grep ': tcp-fallback (server)' "$work/noroom-server.smcr.err" | grep -qvE 'MEM|INTERR' ||
    fail "no-room: a fallback with another reason than MEM or INTERR: $(grep ': tcp-fallback (server)' "$work/noroom-server.smcr.err" | grep -vE 'MEM|INTERR' | head -1)"
log "no-room: $smc SMC, $fb TCP; the server opened $smc_room files, $plain_room on plain TCP"
(( smc_room >= 512 / 4 - fb )) || fail "no-room: the program got only $smc_room fds for itself (a quarter of 512 is 128, less $fb fallback sockets)"
