#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A forked process that uses its parent's SMC-R connection moves it onto TCP, and both go
# on with the one TCP socket they share (design §8, "fork"), between two smcr ends;
# against the kernel's SMC the child's copy reads as reset, never hangs. Run INSIDE
# scripts/rxe-vm (-n pair) by the meson suite 'rxe':
#   scripts/rxe-vm -- tests/rxe/fork.sh BUILD_DIR [MIB]
# The server (tests/rxe/fork.py, on 10.77.0.2) reads 64 KiB and answers 16 KiB over SMC-R,
# then forks while the client (10.77.0.1) sends MIB MiB (default 8) and reads:
#   (a) the child writes MIB MiB while the parent reads the client's (rsync's receiver
#       and generator): both arrive intact (sha256), the server's log says SMC-R, then
#       that it went on over TCP because a forked process uses the connection, the
#       client's that the peer went on over TCP; nobody reset it;
#   (b) the child dup2's the socket onto stdin and stdout and execs cat: the client gets
#       its bytes back intact;
#   (c) the parent closes its copy right after fork, the child echoes: intact, and the
#       server's log says it went on over TCP at its close;
#   (d) rsync: a daemon on one host, rsync -a rsync://B/mod/ on the other, both under
#       smc_run: the copy is identical (diff -r), the connection was SMC-R, then TCP;
#   (e) a kernel AF_SMC client: the child's copy reads as reset (logged with the reason,
#       counted in its stats as a reset with FORKRESET),
#       the parent's connection runs on, nothing hangs. Skipped where the guest kernel's
#       SMC is not set up.
#   (f) the server forks a child that execs a program without the socket (close-on-exec)
#       and one that exits, then echoes the rest itself and closes: intact, and the
#       connection stays on SMC-R to its close (the children's copies went with them).
# Prints TAP (tests/rxe/case_lib.sh). FORK_LOGS=DIR keeps the logs; FORK_ONLY=ac runs
# just those cases.
set -u
build=${1:?usage: fork.sh BUILD_DIR [MIB]}
mib=${2:-8}
smc_run=$build/scripts/smc_run
A=10.77.0.1 B=10.77.0.2
here=$(dirname -- "${BASH_SOURCE[0]}")

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "fork.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}
source "$here/case_lib.sh"
logs=${FORK_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
export XDG_RUNTIME_DIR=$logs/run # smcr's stats files (the guest's /run is fresh)
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
export SMCR_TRANSPORT=rdma SMCR_PEERS=10.77.0.0/24 SMCR_UEID=RXE-VM
size=$((mib << 20))
port=7950

# server NAME MODE: fork.py's server under smc_run on B, listening when this returns
server() {
    port=$((port + 1))
    timeout 300 "$smc_run" -d python3 "$here/fork.py" server "$B" "$port" "$2" "$size" \
        > "$logs/$1.srv" 2> "$logs/$1.srv.err" &
    srv_pid=$!
    wait_listening "$port"
}

no_reset() { # NAME LOG...: nobody reset the connection
    local name=$1
    shift
    if grep -h 'reset' "$@" | grep -qi 'SMC connection reset\|reads as reset'; then
        fail "$name: $(grep -h 'SMC connection reset\|reads as reset' "$@" | head -1)"
    else
        pass "$name: nobody reset the connection"
    fi
}

# smcr_pair NAME MODE WHY: (a) to (c); WHY: the reason the server's log gives for TCP
smcr_pair() {
    local name=$1 mode=$2 why=$3 want line
    server "$name" "$mode"
    timeout 240 "$smc_run" -d python3 "$here/fork.py" client "$B" "$port" "$size" "$A" "$mode" \
        > "$logs/$name.cli" 2> "$logs/$name.cli.err"
    wait "$srv_pid"
    want=$(python3 "$here/fork.py" want "$mode" "$size")
    if grep -qx "intact $want" "$logs/$name.cli"; then
        pass "$name: the client got what the server's side sent, intact (sha256 $want)"
    else
        fail "$name: the client says: $(cat "$logs/$name.cli")"
        show "$logs/$name.cli.err" cli 10
        show "$logs/$name.srv.err" srv 10
    fi
    grep -qx 'head ok' "$logs/$name.srv" && grep -qx 'child exit 0' "$logs/$name.srv" &&
        pass "$name: the server read the first 64 KiB intact over SMC-R, its child ended well" ||
        fail "$name: the server says: $(tr '\n' ' ' < "$logs/$name.srv")"
    if [[ $mode == split ]]; then
        line="got $(python3 "$here/fork.py" sent "$size")"
        grep -qx "$line" "$logs/$name.srv" &&
            pass "$name: the parent read the client's $mib MiB intact while the child wrote" ||
            fail "$name: the parent says: $(grep '^got' "$logs/$name.srv"), want $line"
    fi
    grep -q 'smc-r' "$logs/$name.cli.err" && grep -q 'smc-r' "$logs/$name.srv.err" &&
        pass "$name: both logs say smc-r" || fail "$name: a log does not say smc-r"
    line=$(grep -m1 -o "this end goes on over TCP ($why).*" "$logs/$name.srv.err")
    [[ -n $line ]] && pass "$name: the server's log: $line" ||
        { fail "$name: the server's log does not say it went on over TCP ($why)"; show "$logs/$name.srv.err" srv 10; }
    line=$(grep -m1 -o 'the peer goes on over TCP.*' "$logs/$name.cli.err")
    [[ -n $line ]] && pass "$name: the client's log: $line" ||
        fail "$name: the client's log does not say it followed the server onto TCP"
    no_reset "$name" "$logs/$name.cli.err" "$logs/$name.srv.err"
}

rsync_pair() {
    local src=$logs/rsync-src dst=$logs/rsync-dst conf=$logs/rsyncd.conf i rc line
    port=$((port + 1))
    mkdir -p "$src/sub" "$dst"
    for ((i = 0; i < 300; i++)); do
        head -c $(((i * 7919) % 40000 + 1)) /dev/urandom > "$src/f$i"
    done
    head -c $((4 << 20)) /dev/urandom > "$src/sub/big"
    printf '[mod]\n  path = %s\n  read only = true\n  use chroot = false\n' "$src" > "$conf"
    # The daemon runs as nobody: run as root, rsync changes its credentials (setgid,
    # setgroups) after the connection went SMC-R, and rxe's verbs (write() on the uverbs
    # fd) refuse a process whose credentials changed after it opened the device.
    chmod -R a+rX "$logs"
    mkdir -p -m 0700 "$logs/run-nobody"
    chown 65534:65534 "$logs/run-nobody"
    "$smc_run" true 2> /dev/null # attaches the option program, as root
    ulimit -l unlimited # the RDMA buffers are pinned
    XDG_RUNTIME_DIR=$logs/run-nobody timeout 300 setpriv --reuid=65534 --regid=65534 \
        --clear-groups "$smc_run" -d rsync --daemon --no-detach --config="$conf" \
        --address="$B" --port="$port" > "$logs/rsync.srv" 2> "$logs/rsync.srv.err" &
    srv_pid=$!
    wait_listening "$port"
    timeout 240 "$smc_run" -d rsync -a --address="$A" "rsync://$B:$port/mod/" "$dst/" \
        > "$logs/rsync.cli" 2> "$logs/rsync.cli.err"
    rc=$?
    kill "$srv_pid" 2>/dev/null
    wait "$srv_pid"
    if [[ $rc -eq 0 ]] && diff -r "$src" "$dst" > "$logs/rsync.diff" 2>&1; then
        pass "rsync: exit 0, the copy of 301 files is identical (diff -r)"
    else
        fail "rsync: exit $rc: $(grep -v '^\[smcr' "$logs/rsync.cli.err" | head -3 | tr '\n' ' ') $(head -2 "$logs/rsync.diff")"
        show "$logs/rsync.cli.err" cli 10
        show "$logs/rsync.srv.err" srv 10
    fi
    grep -q 'smc-r' "$logs/rsync.cli.err" && grep -q 'smc-r' "$logs/rsync.srv.err" &&
        pass "rsync: both logs say smc-r" || fail "rsync: a log does not say smc-r"
    line=$(grep -h -m1 -o 'this end goes on over TCP (a forked process uses it).*' "$logs/rsync.cli.err" "$logs/rsync.srv.err" | head -1)
    [[ -n $line ]] && pass "rsync: a log says: $line" ||
        fail "rsync: no log says a forked process's use moved the connection onto TCP"
    no_reset rsync "$logs/rsync.cli.err" "$logs/rsync.srv.err"
}

# spawn_pair: (f); the connection stays on SMC-R to its end
spawn_pair() {
    local name=spawn want line
    server "$name" spawn
    timeout 240 "$smc_run" -d python3 "$here/fork.py" client "$B" "$port" "$size" "$A" spawn \
        > "$logs/$name.cli" 2> "$logs/$name.cli.err"
    wait "$srv_pid"
    want=$(python3 "$here/fork.py" want spawn "$size")
    grep -qx "intact $want" "$logs/$name.cli" &&
        pass "$name: the client got its echo, intact (sha256 $want)" ||
        { fail "$name: the client says: $(cat "$logs/$name.cli")"; show "$logs/$name.srv.err" srv 10; }
    [[ $(grep -cx 'child exit 0' "$logs/$name.srv") == 2 ]] &&
        pass "$name: both children ended well" ||
        fail "$name: the server says: $(tr '\n' ' ' < "$logs/$name.srv")"
    grep -q 'smc-r' "$logs/$name.cli.err" && grep -q 'smc-r' "$logs/$name.srv.err" &&
        pass "$name: both logs say smc-r" || fail "$name: a log does not say smc-r"
    line=$(grep -h -m1 -o 'goes on over TCP.*' "$logs/$name.srv.err" "$logs/$name.cli.err" | head -1)
    [[ -z $line ]] && pass "$name: the connection stayed on SMC-R to its close (no log says TCP)" ||
        fail "$name: the children's copies were gone, yet: $line"
    no_reset "$name" "$logs/$name.cli.err" "$logs/$name.srv.err"
}

only=${FORK_ONLY:-abcdef}
if [[ $only == *a* ]]; then
    case_begin "(a) after fork the child writes while the parent reads (rsync's receiver and generator)"
    smcr_pair split split 'a forked process uses it'
fi
if [[ $only == *b* ]]; then
    case_begin "(b) fork, dup2 onto stdin and stdout, exec cat"
    smcr_pair exec exec 'a forked process uses it'
fi
if [[ $only == *c* ]]; then
    case_begin "(c) the parent closes its copy right after fork, the child echoes"
    smcr_pair close close '[^)]*'
fi
if [[ $only == *d* ]]; then
    case_begin "(d) rsync daemon and client, both under smc_run"
    if command -v rsync > /dev/null; then
        rsync_pair
    else
        case_skip "no rsync (scripts/packages-rxe.txt)"
    fi
fi
if [[ $only == *e* ]]; then
    case_begin "(e) a kernel AF_SMC client: the child's copy reads as reset, nothing hangs"
    if [[ ${RXE_VM_SMC:-0} != 1 ]]; then
        case_skip "the guest kernel's SMC-R is not set up"
    else
        SMC_DEBUG=1 "$smc_run" true 2> "$logs/attach.err" # attaches the option program
        SMCR_PEERS= SMCR_EXIT_REPORT=1 server kernel split
        timeout 120 python3 "$here/fork.py" client "$B" "$port" "$size" "$A" split afsmc \
            > "$logs/kernel.cli" 2> "$logs/kernel.cli.err"
        rc=$?
        wait "$srv_pid"
        # (how the kernel's SMC ends it, EOF or an error of its own, is the kernel's)
        [[ $rc -eq 0 ]] && grep -q '^short [0-9]*: ' "$logs/kernel.cli" &&
            pass "the kernel client ended within its time (no hang), every byte it got as expected: $(cat "$logs/kernel.cli")" ||
            { fail "the kernel client (exit $rc) says: $(cat "$logs/kernel.cli")"; show "$logs/kernel.cli.err" cli 10; }
        grep -q 'smc-r' "$logs/kernel.srv.err" && pass "the server's log says smc-r" ||
            { fail "the server's log does not say smc-r"; show "$logs/kernel.srv.err" srv 10; }
        line=$(grep -m1 -o 'inherited reads as reset here: its peer cannot go on over TCP.*' "$logs/kernel.srv.err")
        [[ -n $line ]] && pass "the child's log: $line" ||
            { fail "the child's log does not say why its copy reads as reset"; show "$logs/kernel.srv.err" srv 10; }
        # the child's counters at its exit: the reset counted, with its reason
        line=$(grep -m1 -o 'exit: .*(FORKRESET 1), [0-9]* handshake errors, 1 resets.*' "$logs/kernel.srv.err")
        [[ -n $line ]] && pass "the child's stats count it: $line" ||
            { fail "the child's exit report does not count the reset (FORKRESET)"; grep 'exit:' "$logs/kernel.srv.err"; }
    fi
fi
if [[ $only == *f* ]]; then
    case_begin "(f) children that exec without the socket or exit, then the parent's close"
    spawn_pair
fi
tap_done
