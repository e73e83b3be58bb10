#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The learned policy (src/smcr/learn.h) and a server that declines every
# Proposal: a prefork server under smc_run whose parent accepts and hands each
# connection to a worker over SCM_RIGHTS before reading it (as node's cluster
# module does), so smcr declines each Proposal with HANDOFF and the
# connection is TCP. Each declined Proposal cost the client a CLC round trip
# for nothing; the policy counts it as a short connection, so a client under
# smc_run making 20 connections proposes SMC on its first eight only
# (SMCR_LEARN_TCP_ON) and keeps the other twelve on TCP before connect()
# (SHORTFLOWS, no CLC byte), but for a probe. With SMCR_LEARN=0 it proposes
# again (HANDOFF). Every echo is checked.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
export SMCR_LEARN=1 # the default, which smc_lib.sh turns off for the other tests

cat >"$work/server.py" <<'PY'
# server.py PORT: accepts, passes each connection to a worker over SCM_RIGHTS.
import os, socket, sys
ls = socket.create_server(("127.0.0.1", int(sys.argv[1])))
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
if os.fork() == 0:
    ls.close()
    ours.close()
    while True:
        _, fds, _, _ = socket.recv_fds(theirs, 16, 1)
        if not fds:
            os._exit(0)
        with socket.socket(fileno=fds[0]) as conn:
            while data := conn.recv(65536):
                conn.sendall(data)
theirs.close()
while True:
    conn, _ = ls.accept()
    socket.send_fds(ours, [b"c"], [conn.fileno()])
    conn.close()
PY
cat >"$work/client.py" <<'PY'
# client.py PORT N: N connections one after another, each echoing 4 KiB.
import os, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    data = os.urandom(4096)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    if got != data:
        sys.exit(f"connection {i}: the echo differs")
print("ok")
PY

port=$(free_port 4)
start_server smcr server "$PYTHON" "$work/server.py" "$port"
wait_listen "$server_pid" "$port"

# reasons NAME: the fallback reasons of client NAME's connections, one per line.
reasons() { grep -o 'tcp-fallback (client): reason 0x[0-9a-f]* [A-Z]*' "$work/$1.smcr.err" | awk '{print $NF}'; }

run_client smcr learn 120 "$PYTHON" "$work/client.py" "$port" 20
[[ $exit_code -eq 0 && $(cat "$work/learn.smcr.out") == ok ]] ||
    fail "client exited $exit_code: $(tail -n 3 "$work/learn.smcr.err")"
handoff=$(reasons learn | grep -c '^HANDOFF$' || true)
short=$(reasons learn | grep -c '^SHORTFLOWS$' || true)
smc=$(grep -c ': smc-shm (client)' "$work/learn.smcr.err" || true)
log "20 connections: $handoff declined (HANDOFF), $short kept on TCP (SHORTFLOWS), $smc SMC"
[[ $smc -eq 0 && $((handoff + short)) -eq 20 ]] || fail "every connection must be TCP with a reason"
# The first eight are proposed and declined; a probe may add one more.
[[ $handoff -ge 8 && $handoff -le 9 ]] || fail "$handoff Proposals declined, expected 8 (9 with a probe)"
[[ $(reasons learn | head -n 8 | sort -u) == HANDOFF ]] || fail "the first eight were not all proposed"

SMCR_LEARN=0 run_client smcr nolearn 60 "$PYTHON" "$work/client.py" "$port" 1
[[ $exit_code -eq 0 ]] || fail "client (SMCR_LEARN=0) exited $exit_code"
[[ $(reasons nolearn) == HANDOFF ]] || fail "with SMCR_LEARN=0 the Proposal is made: $(reasons nolearn)"
log "SMCR_LEARN=0: proposed again, declined HANDOFF"
stop_server "$server_pid"
