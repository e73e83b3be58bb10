#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An SMC-R connection whose socket leaves for another program image or process goes on
# over TCP at both ends from where the stream had got to (design §8, "The rest of a stream
# on TCP"), between two smcr ends; against the kernel's SMC it is reset, visibly. Run
# INSIDE scripts/rxe-vm (-n pair) by the meson suite 'rxe':
#   scripts/rxe-vm -- tests/rxe/tail.sh BUILD_DIR [MIB]
# The server (tests/rxe/tail.py, on 10.77.0.2) reads the first 64 KiB over SMC-R, waits
# until 128 KiB more of the client's are in its ring unread, sends a 200 KiB banner, and
# hands the connection over while the client (10.77.0.1) keeps sending MIB MiB (default
# 8) and reading:
#   (a) inetd style: Popen(['cat'], stdin=conn, stdout=conn), then the server closes its
#       copy; the client gets the banner and its own bytes back exactly (sha256), both
#       logs say SMC-R then TCP (the server: "this end goes on over TCP", the client: "the
#       peer goes on over TCP" with the 128 KiB it sends again), smcr-stat showed the
#       connection as smc-r, nobody reset it;
#   (b) SCM_RIGHTS: the same with the connection passed to a process that execs cat;
#   (c) a kernel AF_SMC client against the inetd server: the server's log says SMC-R,
#       then that it reset the connection because the peer cannot go on over TCP; the
#       client sees the end of its stream (no hang) and every byte it got is one it
#       expected (no garbage). Skipped where the guest kernel's SMC is not set up.
# Prints TAP (tests/rxe/case_lib.sh). TAIL_LOGS=DIR keeps the logs; TAIL_ONLY=ac runs
# just those cases.
set -u
build=${1:?usage: tail.sh BUILD_DIR [MIB]}
mib=${2:-8}
smc_run=$build/scripts/smc_run
stat_tool=$build/src/tools/smcr-stat
A=10.77.0.1 B=10.77.0.2
here=$(dirname -- "${BASH_SOURCE[0]}")

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "tail.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}
source "$here/case_lib.sh"
logs=${TAIL_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
export XDG_RUNTIME_DIR=$logs/run # smcr's stats files (the guest's /run is fresh)
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
# both "hosts" run smcr and list each other; the kernel's UEID, so (c) finds one in common
export SMCR_TRANSPORT=rdma SMCR_PEERS=10.77.0.0/24 SMCR_UEID=RXE-VM
size=$((mib << 20))
port=7900

# server NAME MODE: tail.py's server under smc_run on B, listening when this returns
server() {
    port=$((port + 1))
    timeout 300 "$smc_run" -d python3 "$here/tail.py" server "$B" "$port" "$2" "$size" \
        > "$logs/$1.srv" 2> "$logs/$1.srv.err" &
    srv_pid=$!
    wait_listening "$port"
}

# stat_mode PID: the mode smcr-stat shows for PID's first connection ("none" if none yet)
stat_mode() {
    local i out
    for ((i = 0; i < 100; i++)); do
        out=$("$stat_tool" --json -a -p "$1" 2>/dev/null | tr -d '\n' |
            grep -o '"mode": "[^"]*"' | head -n1 | sed -E 's/.*"mode": "([^"]*)"/\1/')
        [[ -n $out ]] && { echo "$out"; return; }
        kill -0 "$1" 2>/dev/null || break
        sleep 0.2
    done
    echo none
}

# smcr_pair NAME MODE: (a) and (b)
smcr_pair() {
    local name=$1 want n
    server "$name" "$2"
    # (no timeout wrapper: smcr-stat is asked about this very pid; the VM's -t bounds it)
    "$smc_run" -d python3 "$here/tail.py" client "$B" "$port" "$size" "$A" \
        > "$logs/$name.cli" 2> "$logs/$name.cli.err" &
    local cli=$!
    local mode
    mode=$(stat_mode "$cli")
    wait "$cli"
    wait "$srv_pid"
    want=$(python3 -c '
import sys; sys.path.insert(0, sys.argv[1]); import hashlib, tail
print(hashlib.sha256(tail.BANNER + tail.pattern(int(sys.argv[2]))[tail.HEAD:]).hexdigest())' \
        "$here" "$size")
    if grep -qx "intact $want" "$logs/$name.cli"; then
        pass "$name: the client got the banner and its $mib MiB back intact (sha256 $want)"
    else
        fail "$name: the client says: $(cat "$logs/$name.cli")"
        show "$logs/$name.cli.err" cli 10
    fi
    grep -qx 'head ok' "$logs/$name.srv" && grep -qx 'cat exit 0' "$logs/$name.srv" &&
        pass "$name: the server read the first 64 KiB intact over SMC-R, cat ended well" ||
        fail "$name: the server says: $(tr '\n' ' ' < "$logs/$name.srv")"
    [[ $mode == smc-r ]] && pass "$name: smcr-stat showed the client's connection as smc-r" ||
        fail "$name: smcr-stat showed the client's connection as $mode"
    n=$(grep -c 'this end goes on over TCP' "$logs/$name.srv.err")
    [[ $n -eq 1 ]] && pass "$name: the server's log: $(grep -m1 -o 'this end goes on over TCP.*' "$logs/$name.srv.err")" ||
        fail "$name: the server's log says $n time(s) that it went on over TCP"
    # at least the 128 KiB the server waited for (more may have come since)
    n=$(sed -n 's/.*the peer goes on over TCP.*: [0-9]* bytes left to read here, \([0-9]*\) of ours it never read go again over TCP.*/\1/p' "$logs/$name.cli.err" | head -n1)
    if [[ ${n:-0} -ge 131072 ]]; then
        pass "$name: the client's log: $(grep -m1 -o 'the peer goes on over TCP.*' "$logs/$name.cli.err")"
    else
        fail "$name: the client's log does not say it followed the server onto TCP with at least 128 KiB to send again"
        show "$logs/$name.cli.err" cli 10
    fi
    grep -q 'smc-r' "$logs/$name.cli.err" && grep -q 'smc-r' "$logs/$name.srv.err" &&
        pass "$name: both logs say smc-r" || fail "$name: a log does not say smc-r"
    ! grep -h 'reset' "$logs/$name.cli.err" "$logs/$name.srv.err" | grep -qi 'SMC connection reset' &&
        pass "$name: nobody reset the connection" ||
        fail "$name: $(grep -h 'SMC connection reset' "$logs/$name.cli.err" "$logs/$name.srv.err" | head -1)"
}

only=${TAIL_ONLY:-abc}
[[ $only == *a* ]] && case_begin "(a) inetd style: Popen(['cat'], stdin=conn, stdout=conn) between two smcr hosts"
[[ $only == *a* ]] && smcr_pair inetd inetd
[[ $only == *b* ]] && case_begin "(b) SCM_RIGHTS of a live SMC-R connection to a process that execs cat"
[[ $only == *b* ]] && smcr_pair scm scm

[[ $only == *c* ]] && case_begin "(c) a kernel AF_SMC client: reset, visibly"
if [[ $only != *c* ]]; then
    :
elif [[ ${RXE_VM_SMC:-0} != 1 ]]; then
    case_skip "the guest kernel's SMC-R is not set up"
else
    SMC_DEBUG=1 "$smc_run" true 2> "$logs/attach.err" # attaches the option program
    # the server as the kernel's SMC finds it: by the option in SYN-ACK, not by SMCR_PEERS
    SMCR_PEERS= server kernel inetd
    timeout 120 python3 "$here/tail.py" client "$B" "$port" "$size" "$A" afsmc \
        > "$logs/kernel.cli" 2> "$logs/kernel.cli.err"
    rc=$?
    kill "$srv_pid" 2>/dev/null # it ends by itself when the client connected
    wait "$srv_pid"
    [[ $rc -eq 0 ]] && grep -q '^short [0-9]*: ' "$logs/kernel.cli" &&
        pass "the kernel client's stream ended early, every byte it got as expected: $(cat "$logs/kernel.cli")" ||
        { fail "the kernel client (exit $rc) says: $(cat "$logs/kernel.cli")"; show "$logs/kernel.cli.err" cli 10; }
    grep -q 'smc-r' "$logs/kernel.srv.err" && pass "the server's log says smc-r" ||
        { fail "the server's log does not say smc-r"; show "$logs/kernel.srv.err" srv 10; }
    grep -q 'SMC connection reset: exec of a program that inherits it, and it cannot go on over TCP (the transport or the peer cannot)\|SMC connection reset: spawn of a program that inherits it, and it cannot go on over TCP (the transport or the peer cannot)' "$logs/kernel.srv.err" &&
        pass "the server's log: $(grep -m1 -o 'SMC connection reset.*cannot)' "$logs/kernel.srv.err")" ||
        { fail "the server's log does not say it reset the connection"; show "$logs/kernel.srv.err" srv 10; }
fi
tap_done
