#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# iperf3 in both directions (client sends, then -R: server sends) on
# 127.0.0.1: exit code 0 and sane byte counts, with and without smc_run. Under
# smc_run the control and data connections run in SMC mode (same host): the
# clients' logs and the server's stats (smcr-stat) say so.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
need iperf3
[[ -n $PYTHON ]] || skip "python3 is not installed"

# check_json FILE: prints a verdict line that is the same in every sane run.
check_json() {
    "$PYTHON" - "$1" <<'PY'
import json, sys
try:
    with open(sys.argv[1]) as f:
        doc = json.load(f)
except ValueError as exc:
    print(f"unparsable iperf3 output: {exc}")
    sys.exit(0)
if "error" in doc:
    print(f"iperf3 error: {doc['error']}")
    sys.exit(0)
sent = doc["end"]["sum_sent"]["bytes"]
received = doc["end"]["sum_received"]["bytes"]
# 1 second on loopback moves hundreds of MB; 8 MB is a floor that no working
# run misses and no broken one reaches by accident.
sane = received >= 8 * 1024 * 1024 and sent >= received
print(f"bytes sane: {sane}" + ("" if sane else f" (sent {sent}, received {received})"))
print(f"{sent} bytes sent, {received} received", file=sys.stderr)
PY
}

workload() {
    local mode=$1 port pid direction
    port=$(free_port 4)
    start_server "$mode" iperf3-server iperf3 -s -B 127.0.0.1 -p "$port"
    pid=$server_pid
    wait_listen "$pid" "$port"
    for direction in forward reverse; do
        local -a flags=()
        [[ $direction == reverse ]] && flags=(-R)
        run_client "$mode" "iperf3-$direction" 30 iperf3 -c 127.0.0.1 -p "$port" -t 1 -J "${flags[@]}"
        result "$direction: exit $exit_code, $(check_json "$work/iperf3-$direction.$mode.out" 2>>"$work/iperf3-bytes.log")"
        assert_log_mode "$mode" "iperf3-$direction"
        # the control connection and the data stream
        [[ $mode == plain ]] || assert_smc_log "iperf3-$direction" 2
    done
    assert_process_mode "$mode" "$pid" "iperf3 server"
    [[ $mode == plain ]] || assert_smc_stats "iperf3 server" 4 "$pid"
    stop_server "$pid"
    assert_log_mode "$mode" iperf3-server
}

run_both workload
grep -c '^[a-z]*: exit 0, bytes sane: True$' "$work/result.smcr" | grep -qx 2 || fail "iperf3 runs were not sane"
sed 's/^/    /' "$work/iperf3-bytes.log"
