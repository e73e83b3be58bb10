#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A port that several TCP listeners of one user share, not all of them under
# smc_run: which one takes a connection is the kernel's choice, so a client
# under smc_run may only propose SMC when every listener that can take it is
# served by smcr (registry.c: each served listener has a name of its own).
#  - SO_REUSEPORT, one server under smc_run and one without (a rolling restart
#    that drops smcr): 30 connections, every echo intact, every one TCP
#    (PEERNOSMC), and the plain server never reads a CLC byte;
#  - the port registered on 127.0.0.1 by a server under smc_run, and a plain
#    server of the same user on 127.0.0.2: connections to the plain one are
#    TCP, intact;
#  - SO_REUSEPORT, both servers under smc_run: 30 connections, all SMC.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

cat >"$work/server.py" <<'PY'
# server.py ADDR PORT: an echo server on an SO_REUSEPORT listener; one line per
# connection on stdout: "ok" when its first bytes are the client's, else "BAD".
import socket, sys
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(64)
while True:
    conn, _ = ls.accept()
    with conn:
        data = conn.recv(100)
        print("ok" if data.startswith(b"PING") else "BAD %r" % data[:8], flush=True)
        conn.sendall(data)
PY
cat >"$work/client.py" <<'PY'
# client.py ADDR PORT N: N connections, each echoing its own 8 bytes.
import socket, sys
for i in range(int(sys.argv[3])):
    with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as s:
        s.sendall(b"PING%04d" % i)
        if s.recv(100) != b"PING%04d" % i:
            sys.exit(f"connection {i}: the echo differs")
print("ok")
PY

# servers_saw NAME...: connections the servers saw; fails on a CLC byte read as data.
servers_saw() {
    local total=0 name
    for name in "$@"; do
        ! grep -q BAD "$work/$name.out" || fail "$name read a Proposal as data: $(grep -m1 BAD "$work/$name.out")"
        total=$((total + $(grep -c '^ok$' "$work/$name.out" || true)))
    done
    echo "$total"
}

# client NAME ADDR PORT: 30 connections under smc_run; fails unless every echo is intact.
client() {
    run_client smcr "$1" 60 "$PYTHON" "$work/client.py" "$2" "$3" 30
    [[ $exit_code -eq 0 && $(cat "$work/$1.smcr.out") == ok ]] ||
        fail "$1: client exited $exit_code: $(tail -n 3 "$work/$1.smcr.err")"
}

# wait_listeners PORT N: until N TCP listeners share PORT (at most 5 s).
wait_listeners() {
    local i
    for ((i = 0; i < 100; i++)); do
        [[ $(ss -Hltn "sport = :$1" | wc -l) -ge $2 ]] && return 0
        sleep 0.05
    done
    fail "fewer than $2 listeners on port $1 after 5 s"
}

port=$(free_port 4)
start_server smcr a "$PYTHON" "$work/server.py" 127.0.0.1 "$port"
wait_listen "$server_pid" "$port"
start_server plain b "$PYTHON" "$work/server.py" 127.0.0.1 "$port"
plain_pid=$server_pid
wait_listeners "$port" 2
client mixed 127.0.0.1 "$port"
assert_fallback_log mixed PEERNOSMC 30
grep -q 'not every one is served by smcr' "$work/mixed.smcr.err" || fail "the client's log does not say why"
saw=$(servers_saw a.smcr b.plain)
[[ $saw -eq 30 ]] || fail "the servers saw $saw connections, not 30"
log "SO_REUSEPORT with a plain sibling: 30 connections TCP (PEERNOSMC), intact, no CLC byte read as data ($(grep -c '^ok$' "$work/b.plain.out") by the plain server)"
stop_server "$plain_pid"

port2=$(free_port 4)
start_server smcr c "$PYTHON" "$work/server.py" 127.0.0.1 "$port2"
wait_listen "$server_pid" "$port2"
start_server plain d "$PYTHON" "$work/server.py" 127.0.0.2 "$port2"
wait_listeners "$port2" 2
client other-address 127.0.0.2 "$port2"
assert_fallback_log other-address PEERNOSMC 30
[[ $(servers_saw d.plain) -eq 30 ]] || fail "the plain server on 127.0.0.2 did not see every connection"
log "a plain server on another address of a registered port: 30 connections TCP, intact"

start_server smcr e "$PYTHON" "$work/server.py" 127.0.0.1 "$port"
wait_listeners "$port" 2
client all-smcr 127.0.0.1 "$port"
assert_smc_log all-smcr 30
log "SO_REUSEPORT, every listener under smc_run: 30 connections SMC"
