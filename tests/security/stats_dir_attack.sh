#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where an smcr process publishes its stats (include/smcr/stats_dir.h), attacked:
#   chmod     XDG_RUNTIME_DIR names a shared 0755 directory: a run under smc_run
#             leaves its mode alone, and its connection shows in smcr-stat;
#   no XDG    a non-root user without XDG_RUNTIME_DIR or /run/user/UID (runuser,
#             cron, a container): its SMC connection shows in smcr-stat, its
#             own and root's, without options;
#   squat     another user created the places that user would take
#             (/dev/shm/smcr-UID, /tmp/smcr-UID, $XDG_RUNTIME_DIR/smcr in a
#             shared runtime directory): nothing lands in them, and the
#             connection still shows;
#   symlink   another user planted symlinks at those names, to a directory of
#             its own: nothing is created or changed there, the connection shows.
# Each connection is a same-host SMC echo between two python processes of the
# user under smc_run, held open while smcr-stat looks.
#   stats_dir_attack.sh SMC_RUN LIBSMCR SMCR_STAT
# Needs root (two local users are created when missing: smcr-victim,
# smcr-attacker); 77 otherwise.
set -uo pipefail
smc_run=${1:?usage: stats_dir_attack.sh SMC_RUN LIBSMCR SMCR_STAT}
lib=${2:?} stat_tool=${3:?}
python=/usr/bin/python3

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (a second and a third local user)"
[[ -x $python ]] || skip "no $python"
for u in smcr-victim smcr-attacker; do
    id -u "$u" >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin "$u" ||
        skip "cannot create the user $u"
done
victim=$(id -u smcr-victim) attacker=$(id -u smcr-attacker)

failed=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# Everything the users run, where they can read it (the checkout may be private).
work=$(mktemp -d /tmp/smcr-stats-attack.XXXXXX)
chmod 755 "$work"
cp "$smc_run" "$work/smc_run"
cp "$lib" "$work/libsmcr.so"
cp "$stat_tool" "$work/smcr-stat"
cat > "$work/server.py" <<'PY'
import socket, sys
l = socket.create_server(("127.0.0.1", 0))
print(l.getsockname()[1], flush=True)
c, _ = l.accept()
while (b := c.recv(65536)):
    c.sendall(b)
PY
cat > "$work/client.py" <<'PY'
import os, socket, sys, time
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"ping")
assert c.recv(4) == b"ping"
print("connected", os.getpid(), flush=True)
while not os.path.exists(sys.argv[2]):  # held open until the test has looked
    time.sleep(0.05)
PY
chmod 644 "$work"/*.py
chmod 755 "$work/smc_run" "$work/smcr-stat"
chmod 644 "$work/libsmcr.so"

squats=()
cleanup() {
    rm -rf "$work" "${squats[@]}"
    rm -rf /dev/shm/smcr-"$victim" /dev/shm/smcr-"$victim".* /tmp/smcr-"$victim" /tmp/smcr-"$victim".*
}
trap cleanup EXIT

# as USER CMD...: run CMD as USER (root: as is), without the caller's XDG_RUNTIME_DIR
# unless XDG is set for it.
as() {
    local user=$1
    shift
    if [[ $user == root ]]; then
        env -u XDG_RUNTIME_DIR ${XDG:+XDG_RUNTIME_DIR=$XDG} "$@"
    else
        runuser -u "$user" -- env -u XDG_RUNTIME_DIR ${XDG:+XDG_RUNTIME_DIR=$XDG} "$@"
    fi
}

# connection USER: starts a same-host SMC echo of USER's, held open; sets
# server_pid, client_pid (what we started), smc_pid (the client's python, which
# publishes the stats), release (touch it to end the client).
connection() {
    local user=$1 port i
    release=$work/release.$RANDOM
    rm -f "$work/port" "$work/connected"
    as "$user" SMCR_LIB="$work/libsmcr.so" SMCR_BPF=0 "$work/smc_run" -d "$python" "$work/server.py" \
        > "$work/port" 2> "$work/server.err" &
    server_pid=$!
    for ((i = 0; i < 200; i++)); do
        port=$(head -n1 "$work/port" 2>/dev/null)
        [[ -n $port ]] && break
        sleep 0.05
    done
    as "$user" SMCR_LIB="$work/libsmcr.so" SMCR_BPF=0 "$work/smc_run" -d "$python" "$work/client.py" \
        "$port" "$release" > "$work/connected" 2> "$work/client.err" &
    client_pid=$!
    for ((i = 0; i < 200; i++)); do
        smc_pid=$(sed -n 's/^connected //p' "$work/connected" 2>/dev/null)
        [[ -n $smc_pid ]] && return 0
        sleep 0.05
    done
    echo "    the echo did not connect:"; sed 's/^/    | /' "$work/server.err" "$work/client.err" | tail -n 8
    return 1
}

finish() {
    touch "$release"
    wait "$client_pid" "$server_pid" 2>/dev/null
}

# smc_seen_by USER: does USER's smcr-stat (no options) list the client's SMC connection?
smc_seen_by() {
    local out
    out=$(as "$1" "$work/smcr-stat" --json -p "$smc_pid" 2>"$work/stat.err")
    grep -q '"mode": "smc' <<< "$out"
}

# visible WHAT: the connection shows in the victim's and in root's smcr-stat.
visible() {
    if smc_seen_by smcr-victim; then pass "$1: the victim's smcr-stat lists its SMC connection"
    else fail "$1: the victim's smcr-stat does not list its SMC connection"; sed 's/^/    | /' "$work/stat.err" "$work/client.err" | tail -n 6; fi
    if XDG= smc_seen_by root; then pass "$1: root's smcr-stat lists it too"
    else fail "$1: root's smcr-stat does not list it"; sed 's/^/    | /' "$work/stat.err" | tail -n 4; fi
}

# ---- chmod: XDG_RUNTIME_DIR on a shared directory -------------------------------------
shared=$(mktemp -d /tmp/smcr-shared.XXXXXX)
squats+=("$shared")
chmod 0755 "$shared"
if XDG=$shared connection root; then
    mode=$(stat -c %a "$shared")
    [[ $mode == 755 ]] && pass "chmod: the shared XDG_RUNTIME_DIR kept its mode 0755" ||
        fail "chmod: the shared XDG_RUNTIME_DIR's mode became $mode"
    sub=$(stat -c '%a %U' "$shared/smcr" 2>/dev/null)
    [[ $sub == '700 root' ]] && pass "chmod: the stats went into a private subdirectory ($sub)" ||
        fail "chmod: its smcr subdirectory is '$sub', not '700 root'"
    XDG=$shared smc_seen_by root && pass "chmod: smcr-stat lists the SMC connection" ||
        fail "chmod: smcr-stat does not list the SMC connection"
    finish
else
    fail "chmod: no connection"
fi

# ---- no XDG_RUNTIME_DIR, no /run/user/UID ---------------------------------------------
[[ ! -e /run/user/$victim ]] || echo "    (/run/user/$victim exists here)"
if connection smcr-victim; then
    visible "no XDG"
    finish
else
    fail "no XDG: no connection"
fi
cleanup_victim() { rm -rf /dev/shm/smcr-"$victim"* /tmp/smcr-"$victim"*; }
cleanup_victim

# ---- squat: the attacker made the victim's places first --------------------------------
for d in /dev/shm/smcr-"$victim" /tmp/smcr-"$victim"; do
    runuser -u smcr-attacker -- mkdir -m 0777 "$d"
    squats+=("$d")
done
runtime=$(mktemp -d /tmp/smcr-runtime.XXXXXX)   # a shared runtime directory of the victim's
squats+=("$runtime")
chown smcr-victim "$runtime"
chmod 1777 "$runtime"
runuser -u smcr-attacker -- mkdir -m 0777 "$runtime/smcr"
if XDG=$runtime connection smcr-victim; then
    visible "squat"
    n=$(find /dev/shm/smcr-"$victim" /tmp/smcr-"$victim" "$runtime/smcr" -mindepth 1 | wc -l)
    [[ $n == 0 ]] && pass "squat: nothing was written into the attacker's directories" ||
        fail "squat: $n file(s) in the attacker's directories"
    mode=$(stat -c %a "$runtime")
    [[ $mode == 1777 ]] && pass "squat: the shared runtime directory kept its mode 1777" ||
        fail "squat: the shared runtime directory's mode became $mode"
    finish
else
    fail "squat: no connection"
fi
rm -rf /dev/shm/smcr-"$victim" /tmp/smcr-"$victim" "$runtime/smcr"
cleanup_victim

# ---- symlink: the attacker's links at the victim's names --------------------------------
chmod 1777 "$runtime" # as the setup made it, whatever the run before did to it
target=$(mktemp -d /tmp/smcr-target.XXXXXX)
squats+=("$target")
chown smcr-attacker "$target"
chmod 0777 "$target"
for d in /dev/shm/smcr-"$victim" /tmp/smcr-"$victim" "$runtime/smcr"; do
    runuser -u smcr-attacker -- ln -s "$target" "$d"
done
if XDG=$runtime connection smcr-victim; then
    visible "symlink"
    n=$(find "$target" -mindepth 1 | wc -l)
    mode=$(stat -c '%a %U' "$target")
    [[ $n == 0 && $mode == '777 smcr-attacker' ]] &&
        pass "symlink: the link target is untouched (empty, $mode)" ||
        fail "symlink: the link target has $n entries, mode $mode"
    finish
else
    fail "symlink: no connection"
fi
rm -f /dev/shm/smcr-"$victim" /tmp/smcr-"$victim" "$runtime/smcr"

echo "$failed failed"
[[ $failed == 0 ]]
