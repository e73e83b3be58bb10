#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# smcr-stat against real processes: a python echo server (named echo-srv) and a
# client holding four echoed connections, both under smc_run.  -c and -p pick
# each end's records, -l shows the server's listener as served by the same-host
# registry, stats -i 1 -n 2 prints two reports (the second with what grew), and
# a plain client's fallback is counted by reason over the processes.  A listener
# that a rule keeps on TCP (or a rules file not understood) is listed as
# not-served with the rule's file:line, for as long as the socket is open: it
# stays through a dup2 and its first fd's close, and goes with its last fd.
# Records and log lines name the fds the program knows (never the library's
# duplicates of them).
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
print("ready", ",".join(str(c.fileno()) for c in conns), flush=True)
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

# One numbering: the records and every log line name the fds the program knows,
# never the library's own duplicates of them.
cfds=$(awk '/^ready/ {print $2}' "$work/client.smcr.out")
check "-p CLIENT: the records name the client's own fds ($cfds)" "
fds = {int(f) for f in '$cfds'.split(',')}
assert {c['fd'] for c in docs[0]['connections']} == fds, docs[0]['connections']" "$work/by-pid.json"
logfds=$(grep -Eo '\bfd [0-9]+' "$work/client.smcr.err" | awk '{print $2}' | sort -un | paste -sd, -)
[[ $logfds == "$(tr ',' '\n' <<<"$cfds" | sort -un | paste -sd, -)" ]] ||
    fail "the client's log names fds $logfds, the program knows $cfds"
log "the client's log names only its own fds ($logfds)"

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

# Listeners that smcr does not serve: one process with a rule `tcp port=EXCL`
# listening on EXCL and on SERVED, another whose rules file is not understood.
# Each moves its first listener to fd 40 (dup2, close), then closes fd 40, one
# step at a time, saying what it did.
cat >"$work/listeners.py" <<'PY'
import os, socket, sys, time
step = sys.argv[1]
def listen(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s
def wait(name):
    while not os.path.exists(step + "." + name):
        time.sleep(0.05)
first, second = listen(int(sys.argv[2])), listen(int(sys.argv[3]))
print("listening", first.fileno(), second.fileno(), flush=True)
wait("dup")
os.dup2(first.fileno(), 40)
first.close()
print("moved", flush=True)
wait("close")
os.close(40)
print("closed", flush=True)
wait("exit")
PY
# said NAME WORD: waits until the listener script NAME printed WORD.
said() {
    local i
    for ((i = 0; i < 600; i++)); do
        grep -q "^$2" "$work/$1.smcr.out" 2>/dev/null && return 0
        kill -0 "$3" 2>/dev/null || fail "$1 died: $(cat "$work/$1.smcr.err")"
        sleep 0.05
    done
    fail "$1 did not say '$2' in 30s: $(cat "$work/$1.smcr.err")"
}
excl=$(free_port 4)
served=$(free_port 4)
while [[ $served == "$excl" ]]; do served=$(free_port 4); done
bad1=$(free_port 4)
bad2=$(free_port 4)
printf '%s\n' '# smc_stat' "tcp port=$excl" >"$work/rules.conf"
printf '%s\n' 'smc port=1' 'rdma peer=10.0.0.0/33' >"$work/bad.conf"
start_server smcr ruled env "SMCR_CONF=$work/rules.conf" "$PYTHON" "$work/listeners.py" \
    "$work/ruled" "$excl" "$served"
rpid=$server_pid
start_server smcr broken env "SMCR_CONF=$work/bad.conf" "$PYTHON" "$work/listeners.py" \
    "$work/broken" "$bad1" "$bad2"
bpid=$server_pid
said ruled listening "$rpid"
said broken listening "$bpid"
read -r _ rfd sfd <"$work/ruled.smcr.out"
read -r _ bfd1 bfd2 <"$work/broken.smcr.out"
grep -q "listener on port $excl kept TCP by a rule (reason RULE)" "$work/ruled.smcr.err" ||
    fail "the ruled server's log does not say its listener was kept TCP by a rule"

# listeners_are FILE WHAT EXPECTED_PYTHON_LIST: the ruled and broken servers'
# listeners in -l --json FILE, as (pid, fd, port, status, registered, reason).
listeners_are() {
    check "$2" "$py_why
rpid, bpid = $rpid, $bpid
got = sorted((l['pid'], l['fd'], l['port'], l['status'], l['registered'], l['reason'])
             for l in docs[0]['listeners'] if l['pid'] in (rpid, bpid))
want = sorted($3)
assert got == want, (got, want)" "$1"
}
# (a record keeps 79 bytes of why)
export WHY_RULE="rule $work/rules.conf:2: tcp port=$excl"
export WHY_BROKEN="rules file not understood: $work/bad.conf:2: 'peer=10.0.0.0/33': prefix length out of range"
WHY_RULE=${WHY_RULE:0:79} WHY_BROKEN=${WHY_BROKEN:0:79}
py_why='import os; rule, broken = os.environ["WHY_RULE"], os.environ["WHY_BROKEN"]'
stat_json -l >"$work/unserved.json"
listeners_are "$work/unserved.json" \
    "-l --json: the excluded listener is not-served by its rule, the other served, a broken file's not-served" "[
    (rpid, $rfd, $excl, 'not-served', False, rule),
    (rpid, $sfd, $served, 'served', True, None),
    (bpid, $bfd1, $bad1, 'not-served', False, broken),
    (bpid, $bfd2, $bad2, 'not-served', False, broken)]"
"$SMCR_STAT" -l -p "$rpid" --dir "$XDG_RUNTIME_DIR/smcr" >"$work/unserved.txt" ||
    fail "smcr-stat -l -p $rpid failed"
row=$(grep -E "^ *$rpid .* $rfd +127\.0\.0\.1:$excl +not-served +" "$work/unserved.txt") ||
    fail "-l: no not-served row for port $excl: $(cat "$work/unserved.txt")"
[[ $row == *" $WHY_RULE" ]] || fail "-l: the excluded listener's row does not end in '$WHY_RULE': $row"
grep -Eq "^ *$rpid .* $sfd +127\.0\.0\.1:$served +served +-\$" "$work/unserved.txt" ||
    fail "-l: the served listener's row: $(cat "$work/unserved.txt")"
log "-l: $(tr -s ' ' <<<"$row")"

# A dup2 of the excluded listener and the close of its first fd: still listening, still listed.
touch "$work/ruled.dup" "$work/broken.dup"
said ruled moved "$rpid"
said broken moved "$bpid"
stat_json -l >"$work/moved.json"
listeners_are "$work/moved.json" "-l after dup2 and close of the first fd: the same records" "[
    (rpid, $rfd, $excl, 'not-served', False, rule),
    (rpid, $sfd, $served, 'served', True, None),
    (bpid, $bfd1, $bad1, 'not-served', False, broken),
    (bpid, $bfd2, $bad2, 'not-served', False, broken)]"

# Its last fd closed: the record goes with it; the other listeners stay.
touch "$work/ruled.close" "$work/broken.close"
said ruled closed "$rpid"
said broken closed "$bpid"
stat_json -l >"$work/closed.json"
listeners_are "$work/closed.json" "-l after the last fd's close: the excluded listener is gone" "[
    (rpid, $sfd, $served, 'served', True, None),
    (bpid, $bfd2, $bad2, 'not-served', False, broken)]"

# The process gone: none of its listeners.
touch "$work/ruled.exit" "$work/broken.exit"
wait_exit "$rpid" 30
[[ $exit_code -eq 0 ]] || fail "the ruled server exited $exit_code: $(cat "$work/ruled.smcr.err")"
wait_exit "$bpid" 30
[[ $exit_code -eq 0 ]] || fail "the broken server exited $exit_code: $(cat "$work/broken.smcr.err")"
stat_json -l >"$work/exited.json"
listeners_are "$work/exited.json" "-l after both servers exited: none of their listeners" "[]"
