#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# PostgreSQL, a server that accepts in one process and forks a backend per
# connection (the backend alone reads and writes the socket), with psql and
# pgbench as clients:
#   - both ends under smc_run: pgbench's transactions all succeed, and each of
#     its connections ran SMC by its log; a live backend's own stats show its
#     connection in SMC mode; a table of a few MiB comes back through COPY with
#     the same sha256 as over plain TCP;
#   - only the client under smc_run (the server plain): TCP with PEERNOSMC, and
#     the same bytes.
# PostgreSQL refuses to run as root: when the test runs as root, the server and
# its clients run as the user 'postgres' (the package creates it), with a stats
# directory of that user's.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need pgbench psql setpriv
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $bindir/postgres && -x $bindir/initdb ]] || skip "postgres is not installed (scripts/install-deps)"

as_user=()
if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || skip "no user 'postgres' to run the server as"
    as_user=(setpriv --reuid=postgres --regid=postgres --init-groups)
    # The processes publish their stats where that user may write.
    chown postgres: "$XDG_RUNTIME_DIR"
    # ...and load the library from where that user may read it (the build
    # directory may be under root's home).
    mkdir -m 755 "$work/lib"
    cp "$SMCR_LIB" "$work/lib/libsmcr.so"
    chmod 755 "$work/lib/libsmcr.so"
    export SMCR_LIB=$work/lib/libsmcr.so
fi
data=$work/pgdata
mkdir -m 700 "$data"
[[ ${#as_user[@]} -eq 0 ]] || chown postgres: "$data"
"${as_user[@]}" "$bindir/initdb" -D "$data" -A trust -U bench --no-sync \
    >"$work/initdb.log" 2>&1 || fail "initdb failed: $(tail -n 5 "$work/initdb.log")"

port=$(free_port 4)
# server MODE: the server, its unix socket in the data directory, TCP on the
# loopback only; fsync off: the disk is not the subject.
server() {
    start_server "$1" postgres "${as_user[@]}" "$bindir/postgres" -D "$data" -k "$data" \
        -h 127.0.0.1 -p "$port" -c fsync=off -c max_connections=40
    wait_listen "$server_pid" "$port" 30
}
# client MODE NAME SECONDS PROGRAM ARGS...: a client as the server's user.
client() {
    local mode=$1 name=$2 seconds=$3
    shift 3
    run_client "$mode" "$name" "$seconds" "${as_user[@]}" "$@" -h 127.0.0.1 -p "$port" -U bench
    [[ $exit_code -eq 0 ]] || fail "$name ($mode) exited $exit_code: $(tail -n 5 "$work/$name.$mode.err")"
}
# copy_out MODE NAME: the test table through COPY TO STDOUT; its sha256.
copy_out() {
    client "$1" "$2" 60 psql -X -q -d postgres -c 'COPY blobs TO STDOUT'
    sha "$work/$2.$1.out"
}

# A table of ~4 MiB that no run changes: what every COPY must bring back.
server plain
client plain create 60 psql -X -q -d postgres -v ON_ERROR_STOP=1 -c \
    "CREATE TABLE blobs AS SELECT i, md5(i::text) || repeat(md5((i * 7)::text), 30) AS v
     FROM generate_series(1, 4000) AS i"
want=$(copy_out plain copy)
[[ $(stat -c %s "$work/copy.plain.out") -gt 3000000 ]] || fail "COPY of the test table is too small"
log "COPY over plain TCP: $(stat -c %s "$work/copy.plain.out") bytes"

# Only the client under smc_run: the server does not speak SMC.
got=$(copy_out smcr copy-one-end)
[[ $got == "$want" ]] || fail "COPY with only the client under smc_run: other bytes"
assert_fallback_log copy-one-end PEERNOSMC 1
stop_server "$server_pid"

# Both ends under smc_run.
server smcr
pid=$server_pid
got=$(copy_out smcr copy-smc)
[[ $got == "$want" ]] || fail "COPY with both ends under smc_run: other bytes"
assert_smc_log copy-smc 1

client smcr pgbench-init 120 pgbench -i -s 2 -q postgres
assert_smc_log pgbench-init 1
client smcr pgbench 120 pgbench -c 6 -j 2 -t 300 postgres
grep -q '^number of failed transactions: 0 ' "$work/pgbench.smcr.out" ||
    fail "pgbench: $(grep -E 'failed|processed' "$work/pgbench.smcr.out")"
grep -q '^number of transactions actually processed: 1800/1800' "$work/pgbench.smcr.out" ||
    fail "pgbench: $(grep processed "$work/pgbench.smcr.out")"
assert_smc_log pgbench 6
log "pgbench: $(grep -E '^tps' "$work/pgbench.smcr.out")"

# The backend forked for a connection holds it in SMC mode, by its own stats.
"${smcr_prefix[@]}" "${as_user[@]}" psql -X -q -h 127.0.0.1 -p "$port" -U bench -d postgres \
    -c 'SELECT pg_sleep(30)' >"$work/sleeper.out" 2>"$work/sleeper.err" &
sleeper=$!
server_pids+=("$sleeper")
backend=
for ((i = 0; i < 200; i++)); do
    backend=$("$SMCR_STAT" show --json --dir "$XDG_RUNTIME_DIR/smcr" | "$PYTHON" -c '
import json, sys
for c in json.load(sys.stdin).get("connections", []):
    if c.get("program") == "postgres" and c.get("role") == "server" and c.get("state") == "live":
        print(c["pid"], c["mode"]); break' 2>/dev/null || true)
    [[ -z $backend ]] || break
    sleep 0.05
done
[[ -n $backend ]] || fail "no live postgres backend connection in the stats"
read -r bpid bmode <<<"$backend"
[[ $bmode == smc-shm && $bpid != "$pid" ]] ||
    fail "the backend's connection: pid $bpid (postmaster $pid), mode $bmode"
log "backend $bpid (forked by postmaster $pid) holds its connection in mode $bmode"
stop_server "$sleeper"
