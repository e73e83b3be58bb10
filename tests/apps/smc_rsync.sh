#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rsync daemon (rsync://), download and upload of a tree of a few hundred
# files.  rsync's daemon forks per connection, and the receiving side forks
# its generator, which writes to the socket while the receiver reads it: the
# same-host SMC connection must keep working in every process that holds it.
#  - both ends under smc_run: SMC on both ends (logs), smc-shm records in
#    smcr-stat --json from more than one process of each transfer while it
#    runs, no fallback, no reset; the trees are identical (diff -r);
#  - only one end under smc_run (client, then daemon): plain TCP with its
#    reason in the smcr end's log, and identical trees.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need rsync
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || stat_tool=$apps_dir/../../scripts/smcr-stat

# The tree: 300 files of 1 B .. 64 KiB in 10 directories, one of 4 MiB.
"$PYTHON" - "$work/src" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(7)
for d in range(10):
    os.makedirs(os.path.join(root, f"dir{d}"), exist_ok=True)
    for f in range(30):
        with open(os.path.join(root, f"dir{d}", f"file{f}.bin"), "wb") as out:
            out.write(os.urandom(rnd.randint(1, 64 * 1024)))
with open(os.path.join(root, "big.bin"), "wb") as out:
    out.write(os.urandom(4 * 1024 * 1024))
PY
mkdir "$work/upload"
cat >"$work/rsyncd.conf" <<CONF
use chroot = no
$([[ $(id -u) -eq 0 ]] && printf 'uid = root\ngid = root\n')
pid file = $work/rsyncd.pid
[src]
    path = $work/src
    read only = yes
[up]
    path = $work/upload
    read only = no
CONF

# watch_records NAME: while the transfer runs, smcr-stat's live smc-shm
# records, one "pid mode" line each, into $work/NAME.records.
watch_records() {
    local name=$1
    : >"$work/$name.records"
    while :; do
        "$stat_tool" --json 2>/dev/null | "$PYTHON" -c '
import json, sys
for c in json.load(sys.stdin)["connections"]:
    if c["state"] == "live" and c["mode"] == "smc-shm":
        print(c["pid"], c["mode"])' >>"$work/$name.records" || true
        sleep 0.1
    done
}

# transfer MODE_DAEMON MODE_CLIENT NAME DIRECTION: one rsync run, a tree each way.
transfer() {
    local dmode=$1 cmode=$2 name=$3 dir=$4 port watcher
    port=$(free_port 4)
    start_server "$dmode" "$name-daemon" rsync --daemon --no-detach --config="$work/rsyncd.conf" \
        --address=127.0.0.1 --port="$port"
    wait_listen "$server_pid" "$port"
    watch_records "$name" &
    watcher=$!
    rm -rf "$work/upload"/* "$work/download"
    # A bandwidth limit keeps the transfer open long enough to be watched.
    if [[ $dir == download ]]; then
        run_client "$cmode" "$name-client" 90 rsync -a --bwlimit=4000 \
            "rsync://127.0.0.1:$port/src/" "$work/download/"
        [[ $exit_code -eq 0 ]] || fail "$name: rsync exited $exit_code: $(tail -3 "$work/$name-client.$cmode.err")"
        diff -r "$work/src" "$work/download" >/dev/null || fail "$name: the downloaded tree differs"
    else
        run_client "$cmode" "$name-client" 90 rsync -a --bwlimit=4000 \
            "$work/src/" "rsync://127.0.0.1:$port/up/"
        [[ $exit_code -eq 0 ]] || fail "$name: rsync exited $exit_code: $(tail -3 "$work/$name-client.$cmode.err")"
        diff -r "$work/src" "$work/upload" >/dev/null || fail "$name: the uploaded tree differs"
    fi
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    stop_server "$server_pid"
    log "$name: $(find "$work/src" -type f | wc -l) files, $(du -sb "$work/src" | cut -f1) bytes, identical (diff -r)"
}

# No process may have seen its SMC connection as reset.
assert_no_reset() {
    local f
    for f in "$work/$1-client.smcr.err" "$work/$1-daemon.smcr.err"; do
        ! grep -qi 'connection reset\|connection unexpectedly closed\|error in socket IO\|SMC handshake failed' "$f" ||
            fail "$1: $(grep -i -m1 'reset\|unexpectedly\|socket IO\|handshake failed' "$f")"
    done
}

# Both ends under smc_run.
for dir in download upload; do
    transfer smcr smcr "smc-$dir" "$dir"
    assert_smc_log "smc-$dir-client" 1
    assert_smc_log "smc-$dir-daemon" 1
    assert_no_reset "smc-$dir"
    procs=$(sort -u "$work/smc-$dir.records" | wc -l)
    log "smc-$dir: smc-shm records seen in smcr-stat from $procs process(es): $(sort -u "$work/smc-$dir.records" | tr '\n' ';')"
    # The receiving side's two processes (receiver and generator) hold the
    # connection, and so does the other end: at least three processes.
    [[ $procs -ge 3 ]] || fail "smc-$dir: smc-shm records from only $procs process(es) in smcr-stat"
done

# Only the client under smc_run: the daemon is not registered, the client stays TCP.
transfer plain smcr client-only download
n=$(smc_lines client-only-client)
[[ $n -eq 0 ]] || fail "client-only: $n SMC connection(s) with a plain daemon"
grep -q 'tcp-fallback (client): reason 0x03010000 PEERNOSMC' "$work/client-only-client.smcr.err" ||
    fail "client-only: no PEERNOSMC fallback in the client's log"

# Only the daemon under smc_run: the client proposes nothing, the daemon keeps TCP.
transfer smcr plain daemon-only upload
n=$(smc_lines daemon-only-daemon)
[[ $n -eq 0 ]] || fail "daemon-only: $n SMC connection(s) with a plain client"
grep -q 'tcp-fallback (server)' "$work/daemon-only-daemon.smcr.err" ||
    fail "daemon-only: no tcp-fallback in the daemon's log"
log "one end under smc_run: plain TCP with its reason, trees identical"
