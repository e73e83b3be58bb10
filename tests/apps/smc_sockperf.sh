#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sockperf server and client both under smc_run: ping-pong (14-byte messages)
# and throughput (65000-byte messages, sockperf's largest TCP size near
# 64 KiB). Asserts behaviour, not timing: sockperf's own sequence checks
# report no dropped, duplicated or out-of-order message, the client's log and
# the server's published stats say SMC for every connection, and the server's
# smcr-stat record of the throughput connection holds the bytes.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need sockperf
# The server's smcr-stat record (while it lives) is read through this build's tool.
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || stat_tool=$apps_dir/../../scripts/smcr-stat

port=$(free_port 4)
mode=smcr
start_server smcr sockperf-server sockperf sr --tcp -i 127.0.0.1 -p "$port"
pid=$server_pid
wait_listen "$pid" "$port"

run_client smcr sockperf-pp 30 sockperf pp --tcp -i 127.0.0.1 -p "$port" -m 14 -t 1
[[ $exit_code -eq 0 ]] || fail "sockperf ping-pong exited $exit_code"
out=$work/sockperf-pp.smcr.out
grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$out" ||
    fail "ping-pong: messages lost or reordered: $(grep -m1 'dropped messages' "$out")"
received=$(sed -n 's/.*\[Valid Duration\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$out")
[[ ${received:-0} -gt 100 ]] || fail "ping-pong: only '${received:-none}' replies received"
log "ping-pong: $received replies, none dropped, duplicated or out of order; $(grep -m1 -o 'Latency is [0-9.]* usec' "$out")"
assert_smc_log sockperf-pp 1

# Throughput: the client streams, the server counts. While the server lives,
# its record of the connection (closed by now) is in its stats file.
run_client smcr sockperf-tp 30 sockperf tp --tcp -i 127.0.0.1 -p "$port" -m 65000 -t 1
[[ $exit_code -eq 0 ]] || fail "sockperf throughput exited $exit_code"
out=$work/sockperf-tp.smcr.out
grep -q 'ERROR' "$out" "$work/sockperf-tp.smcr.err" && fail "throughput: sockperf reported an error: $(grep -h -m1 ERROR "$out" "$work/sockperf-tp.smcr.err")"
grep -q 'Summary: BandWidth is' "$out" || fail "throughput: no bandwidth summary"
log "throughput: $(grep -m1 -o 'BandWidth is .*' "$out")"
assert_smc_log sockperf-tp 1
grep -q 'ERROR' "$work/sockperf-server.smcr.out" && fail "sockperf server reported an error: $(grep -m1 ERROR "$work/sockperf-server.smcr.out")"
assert_smc_stats "sockperf server" 2 "$pid"

# smcr-stat --json -a: the server's records are smc-shm, and together they
# received at least what the client reports it sent in the throughput run.
sent=$(sed -n 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p' "$out")
XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR "$stat_tool" --json -a -p "$pid" >"$work/stat.json" || fail "smcr-stat failed"
"$PYTHON" - "$work/stat.json" "$((${sent:-1} * 65000))" <<'PY' || fail "smcr-stat: the server's records do not show the transfer"
import json, sys
doc = json.load(open(sys.argv[1]))
conns = doc["connections"]
modes = sorted({c["mode"] for c in conns})
got = max((c["bytes_received"] or 0) for c in conns) if conns else 0
print(f"[smc_sockperf] server records: {len(conns)}, modes {modes}, largest received {got} bytes")
if modes != ["smc-shm"]:
    sys.exit("a record not in smc-shm mode")
if got < 0.9 * int(sys.argv[2]):
    sys.exit(f"received {got} < 90% of the {sys.argv[2]} bytes sockperf sent")
PY
