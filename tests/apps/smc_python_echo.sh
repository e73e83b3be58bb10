#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A python echo server (thread per connection) and a python client that sends
# a large file while reading the echo, both under smc_run: sha256 of the echo
# equals the file's; the server's published stats (smcr-stat) show the SMC
# handshakes while it runs, and both logs say smc-shm.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

random_file "$work/data" $((48 * 1024 * 1024 + 77))
cat >"$work/server.py" <<'PY'
import socket, sys, threading
def serve(c):
    with c:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            c.sendall(b)
l = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
cat >"$work/client.py" <<'PY'
import hashlib, socket, sys, threading
data = open(sys.argv[2], "rb").read()
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def send():
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
h, n = hashlib.sha256(), 0
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    h.update(b)
    n += len(b)
t.join()
print(n, h.hexdigest())
PY

port=$(free_port 4)
mode=smcr
start_server smcr echo-server "$PYTHON" "$work/server.py" "$port"
pid=$server_pid
wait_listen "$pid" "$port"
for i in 1 2; do
    run_client smcr "echo-client$i" 60 "$PYTHON" "$work/client.py" "$port" "$work/data"
    [[ $exit_code -eq 0 ]] || fail "client $i exited $exit_code"
    read -r n digest <"$work/echo-client$i.smcr.out"
    [[ $n -eq $(stat -c %s "$work/data") && $digest == "$(sha "$work/data")" ]] ||
        fail "client $i: echo of $n bytes, sha256 $digest differs"
    assert_smc_log "echo-client$i" 1
done
assert_smc_stats "echo server" 2 "$pid"
assert_smc_log echo-server 2
