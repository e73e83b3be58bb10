#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# iperf3 (client sends, -R server sends, -P 8 parallel streams) with both ends
# under smc_run: every connection (control and data) in SMC mode by the
# client's log and the server's published stats; iperf3's own byte counts
# must be sane.  smcr-stat's views of the server after the -P 8 run: its
# connection records (JSON and the table, closed ones with -a, picked by -c
# and -p) hold the 9 connections as smc-shm, whose data streams carried at least
# what iperf3 says it received; no fallback by reason over the processes.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need iperf3

port=$(free_port 4)
mode=smcr
start_server smcr iperf3-server iperf3 -s -B 127.0.0.1 -p "$port"
pid=$server_pid
wait_listen "$pid" "$port"
conns=0
for run in "send:2:" "reverse:2:-R" "parallel:9:-P 8"; do
    name=${run%%:*}
    rest=${run#*:}
    min=${rest%%:*} # the control connection and the data streams
    read -ra flags <<<"${rest#*:}"
    run_client smcr "iperf3-$name" 30 iperf3 -c 127.0.0.1 -p "$port" -t 1 -J "${flags[@]}"
    [[ $exit_code -eq 0 ]] || fail "iperf3 $name exited $exit_code"
    log "$name: $(iperf3_check_json "$work/iperf3-$name.smcr.out")" || fail "iperf3 $name: bad result"
    assert_smc_log "iperf3-$name" "$min"
    conns=$((conns + $(smc_lines "iperf3-$name")))
done
assert_smc_stats "iperf3 server" "$conns" "$pid"

# The -P 8 run's connections are the last 9 the server opened (the slots of the earlier
# runs' records may be reused; the newest stay).
received=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bytes"])' \
    "$work/iperf3-parallel.smcr.out")
for filter in "-p $pid" "-c iperf3"; do
    # shellcheck disable=SC2086
    "$SMCR_STAT" --json -a $filter --dir "$XDG_RUNTIME_DIR/smcr" >"$work/records.json" ||
        fail "smcr-stat --json -a $filter failed"
    summary=$("$PYTHON" - "$work/records.json" "$pid" <<'PY'
import json, sys
conns = [c for c in json.load(open(sys.argv[1]))["connections"] if c["pid"] == int(sys.argv[2])]
modes = {c["mode"] for c in conns}
last = sorted(conns, key=lambda c: -c["bytes_received"])[:8]
print(len(conns), ",".join(sorted(modes)), sum(c["bytes_received"] for c in last),
      sum(1 for c in conns if c["fallback_name"]))
PY
)
    read -r n modes bytes fallbacks <<<"$summary"
    [[ $n -ge 9 && $modes == smc-shm && $fallbacks -eq 0 ]] ||
        fail "smcr-stat $filter: the server's records are '$summary', not >= 9 smc-shm without fallback"
    [[ $bytes -ge $received ]] ||
        fail "smcr-stat $filter: the 8 busiest records received $bytes bytes, iperf3 says $received"
    log "smcr-stat --json -a $filter: $n records, all smc-shm; the 8 data streams received $bytes bytes (iperf3: $received)"
done
table=$("$SMCR_STAT" -a -p "$pid" --dir "$XDG_RUNTIME_DIR/smcr")
rows=$(grep -cE "^ *$pid +iperf3 +closed +smc-shm +server " <<<"$table" || true)
[[ $rows -ge 9 ]] || fail "smcr-stat -a -p: $rows closed smc-shm server rows, expected >= 9:
$table"
"$SMCR_STAT" fallbacks --json --dir "$XDG_RUNTIME_DIR/smcr" >"$work/fallbacks.json" ||
    fail "smcr-stat fallbacks failed"
"$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(d["fallbacks"] != 0 or d["reasons"] != [])' \
    "$work/fallbacks.json" || fail "smcr-stat fallbacks counts some: $(cat "$work/fallbacks.json")"
log "smcr-stat table: $rows closed smc-shm server rows; fallbacks by reason over the processes: none"
