#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Services started under a seccomp filter they inherit (systemd's
# SystemCallFilter=, a container runtime's profile): the filter is installed
# before the exec, where smcr cannot see it installed, and its answer to a call
# it does not allow is often SIGSYS. A program that works on plain TCP under
# such a filter must work the same under smc_run: smcr asks before its first
# call of its own what the filter allows, and where it denies anything smcr
# needs, every connection stays TCP with reason CONFINED. Where the filter
# allows everything smcr uses, the connections are SMC as without a filter.
#
# The attack: both ends under smc_run inside seccomp_exec (tests/apps), which
# kills the process at the first bpf() or memfd_create() (which a plain echo
# never makes), answers EPERM, or kills at flock() (the stats file's lock).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
[[ $(uname -m) == x86_64 ]] || skip "seccomp_exec's filter is written for x86_64"
launcher=${SMCR_TEST_SECCOMP_EXEC:-}
[[ -x $launcher ]] || fail "SMCR_TEST_SECCOMP_EXEC is not set to the built seccomp_exec"
bytes=$((1 << 20))
export SMCR_STAT STATS_DIR=$work/own-stats
mkdir -p "$STATS_DIR"

cat >"$work/server.py" <<'PY'
# server.py PORT N: echoes N connections, one after another, then records its
# own stats (own_stats.py) and exits.
import os, socket, sys
sys.path.insert(0, os.environ["APPS_DIR"])
from own_stats import own_stats
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
for _ in range(int(sys.argv[2])):
    c = s.accept()[0]
    while b := c.recv(65536):
        c.sendall(b)
    c.close()
own_stats("server")
PY
export APPS_DIR=$apps_dir


# run_case NAME MODE ACTION CALLS: a server and two clients, each under
# seccomp_exec ACTION CALLS (MODE smcr: inside smc_run); every client's data
# must come back intact and every process must end by itself, exit status 0.
run_case() {
    local name=$1 mode=$2 action=$3 calls=$4 port k
    port=$(free_port 3)
    rm -f "$STATS_DIR"/stats.*
    start_server "$mode" "$name-server" "$launcher" "$action" "$calls" "$PYTHON" "$work/server.py" "$port" 2
    wait_listen "$server_pid" "$port"
    for k in 1 2; do
        run_client "$mode" "$name-client$k" 60 "$launcher" "$action" "$calls" \
            "$PYTHON" "$apps_dir/echo_once.py" "$port" "$bytes" client$k
        [[ $exit_code -eq 0 ]] && grep -q '^intact ' "$work/$name-client$k.$mode.out" ||
            fail "$name ($mode): client $k: $(cat "$work/$name-client$k.$mode.out") (exit $exit_code; $(tail -2 "$work/$name-client$k.$mode.err"))"
    done
    wait_exit "$server_pid" 30
    [[ $exit_code -eq 0 ]] ||
        fail "$name ($mode): the server ended with status $exit_code ($(tail -2 "$work/$name-server.$mode.err"))"
}

# expect_confined NAME CALL: both ends stayed TCP with reason CONFINED, by
# their own stats, and the server said which call the filter denies.
expect_confined() {
    local name=$1 call=$2 who
    for who in server client1 client2; do
        case $who in
        server) want="0 2 CONFINED:2" ;;
        *) want="0 1 CONFINED:1" ;;
        esac
        [[ $(own_outcome "$who") == "$want" ]] ||
            fail "$name: $who's stats: '$(own_outcome "$who")', expected '$want'"
    done
    grep -q "seccomp filter the process inherited denies what smcr needs (.*$call" \
        "$work/$name-server.smcr.err" "$work/$name-client1.smcr.err" ||
        fail "$name: no warning names $call as denied"
    log "$name: 2 x $((bytes >> 20)) MiB echoed intact; every connection TCP with reason CONFINED (stats); warned: $call"
}

# The filter alone does not hurt the program on plain TCP.
run_case kill-bpf plain kill bpf
log "kill-bpf: plain TCP under the filter: intact"

# bpf() (the RFC 7609 option program's map) and memfd_create() (shared
# memory rings): SIGSYS at the first call.
run_case kill-bpf smcr kill bpf
expect_confined kill-bpf bpf
run_case kill-memfd smcr kill memfd_create
expect_confined kill-memfd memfd_create
# The same answered with EPERM, and a SIGSYS the program does not handle.
run_case errno-memfd smcr errno memfd_create
expect_confined errno-memfd memfd_create
run_case trap-eventfd smcr trap eventfd2
expect_confined trap-eventfd eventfd2

# flock() (the stats file's lock): the process keeps its stats in private
# memory, so its log is the evidence; nothing may die.
run_case kill-flock smcr kill flock
assert_fallback_log kill-flock-server CONFINED 2
[[ $(own_outcome server) == none || $(own_outcome server) == "0 0 -" ]] ||
    fail "kill-flock: the server published stats although flock() is denied: '$(own_outcome server)'"

# A filter that denies nothing smcr uses: SMC, as without a filter.
run_case kill-acct smcr kill acct
for who in server client1 client2; do
    case $who in server) want="2 0 -" ;; *) want="1 0 -" ;; esac
    [[ $(own_outcome "$who") == "$want" ]] ||
        fail "kill-acct: $who's stats: '$(own_outcome "$who")', expected '$want' (SMC)"
done
log "kill-acct: a filter that allows what smcr uses: every connection SMC (stats)"
