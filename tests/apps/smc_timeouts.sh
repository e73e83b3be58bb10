#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SO_RCVTIMEO and SO_SNDTIMEO reach an SMC connection however the program set
# them, so a blocking recv on a silent peer ends with EAGAIN after the timeout,
# as on TCP, instead of waiting for ever.  The library asks the kernel for them
# only where it cannot know they are unset; each way a timeout can be set is a
# case here, both ends under smc_run and each connection SMC (both logs):
#   listener  set on the server's listener before accept (the accepted socket
#             has it, as the kernel's has its listener's)
#   accepted  set on the accepted socket
#   client    set on the client's socket before connect
#   forked    the server forks after listen(); the parent sets it on the
#             listener, and the child accepts: what the child's copy of the
#             library knew of the listener before the fork is stale
#   passed    the client passes its socket over SCM_RIGHTS to another process
#             (started apart, not forked), which sets it; then connects
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

cat >"$work/timeouts.py" <<'PY'
# timeouts.py server CASE PORT READY | client CASE PORT [HOLDER] | holder PATH READY
import errno, os, socket, struct, sys, time
role = sys.argv[1]
tv = struct.pack("ll", 0, 300 * 1000)  # 0.3 s

def silent_recv(conn, who):
    """The peer said its 4 bytes and then nothing: the next recv must time out."""
    assert conn.recv(4, socket.MSG_WAITALL) == b"ping", who
    try:
        data = conn.recv(1)
    except OSError as e:
        if e.errno == errno.EAGAIN:
            print(f"{who}: recv timed out (EAGAIN)", flush=True)
            return
        raise
    sys.exit(f"{who}: recv returned {data!r} instead of timing out")

if role == "holder":
    # takes a socket over SCM_RIGHTS, sets its receive timeout, says so
    path = sys.argv[2]
    u = socket.socket(socket.AF_UNIX)
    u.bind(path)
    u.listen(1)
    open(sys.argv[3], "w").close()
    conn, _ = u.accept()
    _, fds, _, _ = socket.recv_fds(conn, 16, 1)
    theirs = socket.socket(fileno=fds[0])
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    conn.sendall(b"set")
    conn.recv(1)  # until the client is done
    sys.exit(0)

case, port = sys.argv[2], int(sys.argv[3])
if role == "server":
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(4)
    if case == "forked":
        rd, wr = os.pipe()
        pid = os.fork()
        if pid:
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            os.write(wr, b"x")
            _, status = os.waitpid(pid, 0)
            sys.exit(os.waitstatus_to_exitcode(status))
        os.read(rd, 1)  # the parent has set it
    if case == "listener":
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    open(sys.argv[4], "w").close()  # listening, options set
    conn, _ = lst.accept()
    if case == "accepted":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    if case in ("client", "passed"):
        assert conn.recv(4, socket.MSG_WAITALL) == b"ping"
        conn.recv(1)  # silent until the client, whose recv timed out, closes
        sys.exit(0)
    silent_recv(conn, "server")
    conn.sendall(b"done")
    conn.recv(1)  # until the client closes
else:
    c = socket.socket()
    if case == "client":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    if case == "passed":
        u = socket.socket(socket.AF_UNIX)
        u.connect(sys.argv[4])
        socket.send_fds(u, [b"fd"], [c.fileno()])
        assert u.recv(3, socket.MSG_WAITALL) == b"set"
    c.connect(("127.0.0.1", port))
    c.sendall(b"ping")
    if case in ("client", "passed"):
        try:
            data = c.recv(1)
            sys.exit(f"client: recv returned {data!r} instead of timing out")
        except OSError as e:
            if e.errno != errno.EAGAIN:
                raise
        print("client: recv timed out (EAGAIN)", flush=True)
    else:
        assert c.recv(4, socket.MSG_WAITALL) == b"done"
    c.close()
PY

# wait_file PATH WHAT: until a process says it is ready by making PATH.
wait_file() {
    local i
    for ((i = 0; i < 200; i++)); do [[ -e $1 ]] && return 0; sleep 0.05; done
    fail "$2 did not start"
}

for case in listener accepted client forked passed; do
    port=$(free_port 4)
    rm -f "$work/ready" "$work/holder.ready" "$work/holder.sock"
    if [[ $case == passed ]]; then
        start_server smcr holder "$PYTHON" "$work/timeouts.py" holder "$work/holder.sock" \
            "$work/holder.ready"
        wait_file "$work/holder.ready" "the holder"
    fi
    start_server smcr "$case-server" "$PYTHON" "$work/timeouts.py" server "$case" "$port" "$work/ready"
    wait_file "$work/ready" "$case: the server"
    run_client smcr "$case-client" 30 "$PYTHON" "$work/timeouts.py" client "$case" "$port" \
        "$work/holder.sock"
    [[ $exit_code -eq 0 ]] || fail "$case: the client exited $exit_code: $(tail -n 3 "$work/$case-client.smcr.err")"
    wait "$server_pid" || fail "$case: the server exited $?: $(tail -n 3 "$work/$case-server.smcr.err")"
    assert_smc_log "$case-client" 1
    assert_smc_log "$case-server" 1
    if [[ $case == client || $case == passed ]]; then
        grep -q 'client: recv timed out' "$work/$case-client.smcr.out" || fail "$case: no timeout seen"
    else
        grep -q 'server: recv timed out' "$work/$case-server.smcr.out" || fail "$case: no timeout seen"
    fi
    log "$case: SMC at both ends, the recv on the silent peer timed out (EAGAIN)"
done
