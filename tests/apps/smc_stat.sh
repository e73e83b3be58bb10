#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# smcr-stat against real processes: a python echo server (named echo-srv) and a
# client holding four echoed connections, both under smc_run.  -c and -p pick
# each end's records, -l shows the server's listener as served by the same-host
# registry, stats -i 1 -n 2 prints two reports (the second with what grew), and
# a plain client's fallback is counted by reason over the processes.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

# Four connections, each echoes 1 MiB; held open until the release file exists.
cat >"$work/client.py" <<'PY'
import os, socket, sys, time
port, release = int(sys.argv[1]), sys.argv[2]
data = os.urandom(1 << 20)
conns = []
for _ in range(4):
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(data)
    got = b""
    while len(got) < len(data):
        got += c.recv(1 << 16)
    assert got == data, "echo differs"
    conns.append(c)
print("ready", flush=True)
while not os.path.exists(release):
    time.sleep(0.05)
PY
# A client without smcr: its first bytes are data, so the server goes on over TCP.
cat >"$work/plain.py" <<'PY'
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"plain")
assert c.recv(16) == b"plain"
PY
# Keep the server's process name distinct from the client's (both are python).
ln -s "$(command -v "$PYTHON")" "$work/echo-srv"

stat_json() { "$SMCR_STAT" "$@" --json --dir "$XDG_RUNTIME_DIR/smcr"; }

port=$(free_port 4)
echo_stream_server echo-srv "$port" "$work/echo-srv"
spid=$server_pid
start_server smcr client "$PYTHON" "$work/client.py" "$port" "$work/release"
cpid=$server_pid
for ((i = 0; i < 600; i++)); do
    grep -q ready "$work/client.smcr.out" 2>/dev/null && break
    kill -0 "$cpid" 2>/dev/null || fail "the client died: $(cat "$work/client.smcr.err")"
    sleep 0.05
done
grep -q ready "$work/client.smcr.out" || fail "the client's connections were not echoed in 30s"

# check WHAT PYTHON_ASSERTIONS JSON_FILE...: the assertions (on docs[0..]) hold.
check() {
    local what=$1 code=$2
    shift 2
    "$PYTHON" - "$@" <<PY || fail "$what"
import json, sys
docs = []
for path in sys.argv[1:]:
    text, dec, i = open(path).read(), json.JSONDecoder(), 0
    while text[i:].strip():
        while text[i].isspace():
            i += 1
        d, i = dec.raw_decode(text, i)
        docs.append(d)
spid, cpid, port = $spid, $cpid, $port
$code
PY
    log "$what"
}

stat_json -c echo-srv >"$work/by-name.json"
check "-c echo-srv: the server's four SMC connections, nothing of the client" '
conns = docs[0]["connections"]
assert len(conns) == 4, conns
assert {(c["pid"], c["mode"], c["role"], c["state"], c["local_port"]) for c in conns} == \
    {(spid, "smc-shm", "server", "live", port)}, conns' "$work/by-name.json"

stat_json -p "$cpid" >"$work/by-pid.json"
check "-p CLIENT: the client's four SMC connections, 1 MiB each way" '
conns = docs[0]["connections"]
assert len(conns) == 4, conns
for c in conns:
    assert (c["pid"], c["mode"], c["role"], c["peer_port"]) == (cpid, "smc-shm", "client", port), c
    assert c["bytes_sent"] == c["bytes_received"] == 1 << 20, c' "$work/by-pid.json"

stat_json -l -c echo-srv >"$work/listeners.json"
check "-l: the server's listener is served by the same-host registry" '
ls = docs[0]["listeners"]
assert [(l["pid"], l["port"], l["address"], l["status"], l["registered"], l["reason"])
        for l in ls] == [(spid, port, "127.0.0.1", "served", True, None)], ls' "$work/listeners.json"

stat_json stats -c echo-srv -i 1 -n 2 >"$work/watch.json"
check "stats -i 1 -n 2: two reports, the second with what grew meanwhile (nothing)" '
assert [d["report"] for d in docs] == [1, 2], docs
a, b = docs[0]["processes"], docs[1]["processes"]
assert [p["pid"] for p in a] == [p["pid"] for p in b] == [spid], (a, b)
assert a[0]["interval"] is None and a[0]["handshakes_smc"] == 4, a
g = b[0]["interval"]
assert g["seconds"] > 0 and g["handshakes_smc"] == 0 and g["fallbacks"] == 0, g' "$work/watch.json"

run_client plain plain 30 "$PYTHON" "$work/plain.py" "$port"
[[ $exit_code -eq 0 ]] || fail "the plain client exited $exit_code"
stat_json fallbacks >"$work/fallbacks.json"
stat_json fallbacks -c echo-srv >"$work/fallbacks-srv.json"
check "fallbacks: the plain client's PEERNOSMC, in the server only" '
every, srv = docs
assert srv["process_count"] == 1 and srv["fallbacks"] == 1, srv
assert [(r["name"], r["count"], r["processes"]) for r in srv["reasons"]] == \
    [("PEERNOSMC", 1, 1)], srv
assert every["process_count"] >= 2, every
assert ("PEERNOSMC", 1, 1) in [(r["name"], r["count"], r["processes"])
                               for r in every["reasons"]], every' \
    "$work/fallbacks.json" "$work/fallbacks-srv.json"

touch "$work/release"
wait_exit "$cpid" 30
[[ $exit_code -eq 0 ]] || fail "the client exited $exit_code: $(cat "$work/client.smcr.err")"
assert_smc_log client 4
