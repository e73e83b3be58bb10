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
#  - SO_REUSEPORT, both servers under smc_run: 30 connections, all SMC;
#  - a listener under smc_run on 127.0.0.1 without SO_REUSEPORT, which a
#    client has already connected to (SMC, so it knows the listener:
#    registry.c, known listeners), takes SO_REUSEPORT after listen() and a
#    plain server of the same user listens on the wildcard address of that
#    port: the same client process's next 30 connections are TCP
#    (PEERNOSMC), as for a client that never knew the listener.  (A
#    wildcard sibling, as the kernel prefers the listener bound to the
#    address itself: a sibling on 127.0.0.1 would be the one the kernel's
#    lookup names or not, by a hash, and the answer would not depend on the
#    listener telling its clients.)
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

cat >"$work/server.py" <<'PY'
# server.py ADDR PORT: an echo server on an SO_REUSEPORT listener; one line per
# connection on stdout: "ok" when its first bytes are the client's, else "BAD".
import socket, sys
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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

cat >"$work/late_share.py" <<'PY'
# late_share.py ADDR PORT N MARK: server.py's echo, on a listener without
# SO_REUSEPORT until it has served N connections; then it sets SO_REUSEPORT
# on the listening socket and creates the file MARK.  SO_REUSEADDR, as most
# servers set it: without it, the TIME_WAITs of the connections it served
# would hold the port against the sibling.
import socket, sys
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(64)
served = 0
while True:
    conn, _ = ls.accept()
    with conn:
        data = conn.recv(100)
        print("ok" if data.startswith(b"PING") else "BAD %r" % data[:8], flush=True)
        conn.sendall(data)
    served += 1
    if served == int(sys.argv[3]):
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        open(sys.argv[4], "w").close()
PY
cat >"$work/phases.py" <<'PY'
# phases.py ADDR PORT N1 GO N2: client.py's N1 connections, then, once the
# file GO exists, N2 more from the same process.
import os, socket, sys, time
def conns(n, base):
    for i in range(base, base + n):
        with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as s:
            s.sendall(b"PING%04d" % i)
            if s.recv(100) != b"PING%04d" % i:
                sys.exit(f"connection {i}: the echo differs")
conns(int(sys.argv[3]), 0)
while not os.path.exists(sys.argv[4]):
    time.sleep(0.02)
conns(int(sys.argv[5]), 1000)
print("ok")
PY
port3=$(free_port 4)
start_server smcr f "$PYTHON" "$work/late_share.py" 127.0.0.1 "$port3" 5 "$work/shared"
wait_listen "$server_pid" "$port3"
start_server smcr phases "$PYTHON" "$work/phases.py" 127.0.0.1 "$port3" 5 "$work/go" 30
phases_pid=$server_pid
for ((i = 0; i < 600; i++)); do
    [[ -e $work/shared ]] && break
    sleep 0.05
done
[[ -e $work/shared ]] || fail "the server did not take SO_REUSEPORT after 5 connections"
start_server plain g "$PYTHON" "$work/server.py" 0.0.0.0 "$port3"
wait_listeners "$port3" 2
touch "$work/go"
wait_exit "$phases_pid" 60
[[ $exit_code -eq 0 && $(cat "$work/phases.smcr.out") == ok ]] ||
    fail "phases: client exited $exit_code: $(tail -n 3 "$work/phases.smcr.err")"
[[ $(smc_lines phases) -eq 5 ]] ||
    fail "phases: $(smc_lines phases) SMC connection(s) in its log, expected the first 5"
n=$(grep -c ': tcp-fallback (.*[ (]PEERNOSMC\b' "$work/phases.smcr.err" || true)
[[ $n -eq 30 ]] || fail "phases: $n connection(s) PEERNOSMC in its log, expected 30"
saw=$(servers_saw f.smcr g.plain)
[[ $saw -eq 35 ]] || fail "the servers saw $saw connections, not 35"
log "SO_REUSEPORT taken after listen by a listener a client knew, then a plain sibling: the client's next 30 connections TCP (PEERNOSMC), intact"
