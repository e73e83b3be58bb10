#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The attack: a client sends one genuine same-host CLC Proposal to an
# event-loop server (redis-server under smc_run) and then stays silent, never
# confirming.  The server answers the Proposal and goes on serving everybody
# else: a plain TCP client's PING is answered within 100 ms while the silent
# handshake hangs (the attacker holds it for 10 s, so a server that waited for
# it at all would miss that bound by seconds), an smcr client still gets SMC,
# and once the CLC wait bound (6 s) has passed the server gives SMC up on the
# silent connection (its transport state let go) but not the connection: the
# attacker sees neither a reset nor a byte, as from an idle TCP server, and
# when it leaves, the server's stats count a fallback TIMEOUT_AL, no handshake
# error.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need redis-server redis-cli
hostile=${SMCR_TEST_HOSTILE_CLC:-}
[[ -x $hostile ]] || skip "hostile_clc helper not built (SMCR_TEST_HOSTILE_CLC)"
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || stat_tool=$apps_dir/../../scripts/smcr-stat

port=$(free_port 4)
start_server smcr redis-server redis-server --port "$port" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$work"
pid=$server_pid
wait_listen "$pid" "$port"

# The attacker, plain (no library): Proposal, then 10 s of silence.
"$hostile" 127.0.0.1 "$port" 10000 >"$work/hostile.out" 2>"$work/hostile.err" &
hostile_pid=$!
server_pids+=("$hostile_pid")
for ((i = 0; i < 200; i++)); do
    [[ -s $work/hostile.out ]] && break
    sleep 0.05
done
reply=$(head -n1 "$work/hostile.out")
[[ $reply == "reply accept" ]] || fail "the server did not accept the Proposal: '$reply'"
log "attacker: Proposal sent, server answered: $reply; silent from now on"

# A plain client, while the attacker's handshake hangs: best of 3 PINGs, each
# on a new connection with a 2 s bound (a blocked server misses all three).
"$PYTHON" - "$port" >"$work/ping.out" <<'PY' || fail "plain client: $(cat "$work/ping.out")"
import socket, sys, time
port = int(sys.argv[1])
best = None
for attempt in range(3):
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"PING\r\n")
            got = b""
            while not got.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    break
                got += chunk
        ok = got == b"+PONG\r\n"
    except OSError as e:
        ok, got = False, repr(e).encode()
    ms = (time.monotonic() - t0) * 1000
    print(f"attempt {attempt}: {ms:.1f} ms, {got!r}")
    if ok and (best is None or ms < best):
        best = ms
print(f"best {best}")
sys.exit(0 if best is not None and best < 100 else 1)
PY
log "plain client during the silent handshake: $(tr '\n' ';' <"$work/ping.out")"
kill -0 "$hostile_pid" 2>/dev/null || fail "the attacker's connection ended too early: $(cat "$work/hostile.out")"

# An smcr client meanwhile: SMC as usual.
run_client smcr ping 20 redis-cli -h 127.0.0.1 -p "$port" PING
[[ $exit_code -eq 0 && $(cat "$work/ping.smcr.out") == PONG ]] || fail "smcr client: no PONG"
assert_smc_log ping 1

# The server gives SMC up at its CLC wait bound and keeps the connection.
wait_exit "$hostile_pid" 20
end=$(sed -n 2p "$work/hostile.out")
[[ $end == "end open" ]] || fail "the silent connection did not stay open past the server's bound: '$end'"
grep -q 'no Confirm after our Accept within [0-9]* ms: SMC given up (TIMEOUT_AL), the connection goes on over TCP' \
    "$work/redis-server.smcr.err" || fail "the server's log does not say it gave SMC up"
log "server log: $(grep -m1 'SMC given up' "$work/redis-server.smcr.err" | sed 's/.*smcr[^:]*: //')"
log "attacker: $end after its 10 s of silence"
# The server takes the attacker's leaving as the end of that TCP connection.
for ((i = 0; i < 200; i++)); do
    "$stat_tool" stats --json -p "$pid" >"$work/stats.json" || fail "smcr-stat failed"
    grep -q '"TIMEOUT_AL"' "$work/stats.json" && break
    sleep 0.05
done
"$PYTHON" - "$work/stats.json" <<'PY' || fail "stats: $(cat "$work/stats.json")"
import json, sys
t = json.load(open(sys.argv[1]))["total"]
reasons = {r["name"]: r["count"] for r in t["fallback_reasons"]}
assert t["handshake_errors"] == 0, t
assert reasons.get("TIMEOUT_AL", 0) >= 1, reasons
assert t["handshakes_smc"] >= 1, t
PY
log "server stats: $(tr -d '\n ' <"$work/stats.json" | grep -o '"total":.*' | head -c 300)"
