#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Accepted connections that leave the program image or the process before
# their first byte is read: an inetd-style server hands each connection to a
# child program as its stdin and stdout (subprocess.Popen, which uses vfork;
# fork + dup2 + exec; and posix_spawn, whose file actions dup2 the
# close-on-exec connection onto 0 and 1), or passes it to a worker process over a UNIX
# socket (SCM_RIGHTS). The child is cat (dynamically linked: it loads smcr
# again and takes the connection over) or static_cat (linked -static: smcr can
# never be in it). Each client sends 1 MiB and checks that every byte comes
# back. With both ends under smc_run:
#  - into cat: SMC (the child's and the client's logs say smc-shm);
#  - into static_cat, or over SCM_RIGHTS: plain TCP, reason HANDOFF in both
#    logs and in the server's published stats (the Proposal was declined
#    before the socket left);
#  - an SMC connection (its first bytes echoed by the server) whose socket then
#    goes to a child program (also one forked by a server whose soft
#    RLIMIT_NOFILE is below the hard one, and which closes every fd below it
#    with close() before its exec) or over SCM_RIGHTS: both ends go on over
#    TCP from there, every byte intact (both logs say so);
# and with only one end under smc_run, every case is plain TCP and intact.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
static_cat=${SMCR_TEST_STATIC_CAT:-}
[[ -x $static_cat ]] || skip "static_cat is not built (no libc.a for -static)"
SMCR_STAT=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $SMCR_STAT ]] || SMCR_STAT=$apps_dir/../../scripts/smcr-stat

cat >"$work/server.py" <<'PY'
# server.py HOW PORT [PROG]: serves connections one at a time.
#   popen: Popen(PROG, stdin=conn, stdout=conn)  fork: fork, dup2 onto 0/1, exec PROG
#   spawn: posix_spawnp(PROG) with file actions dup2ing the connection onto 0/1
#   pass: the connection goes over SCM_RIGHTS to a worker that echoes it
#   pass_smc: the first 4 bytes are read here (the handshake runs), then it is passed
#   listener_out: the listener itself goes over SCM_RIGHTS to a worker without smcr
#   forkloop: fork, dup2 onto 0/1, close() every other fd below the soft limit (1024, set
#     first, below the hard one), exec PROG
#   smc_popen, smc_popenfork, smc_fork, smc_forkloop, smc_spawn: the first 4 bytes are read and echoed
#     here (an SMC connection by then), then the child program gets the rest, as a CGI
#     program does
import os, socket, subprocess, sys
how, port, prog = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
if how.endswith("forkloop"):
    # the limits of a login session or a systemd service (soft 1024, hard above it)
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(8)
if how == "listener_out":
    # The listener goes over SCM_RIGHTS to a worker without smcr that serves it
    # (a reload that hands listeners to a new process, as HAProxy's does); this
    # process keeps its copy open meanwhile.
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    worker = '''
import socket, sys
ls = socket.socket(fileno=socket.recv_fds(socket.socket(fileno=int(sys.argv[1])), 16, 1)[1][0])
while True:
    c, _ = ls.accept()
    while b := c.recv(65536):
        c.sendall(b)
    c.close()
'''
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    w = subprocess.Popen([sys.executable, "-c", worker, str(theirs.fileno())],
                         pass_fds=[theirs.fileno()], env=env)
    socket.send_fds(ours, [b"L"], [ls.fileno()])
    w.wait()
    sys.exit(0)
if how.startswith("pass"):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.fork() == 0:
        ours.close()
        while True:
            msg, fds, _, _ = socket.recv_fds(theirs, 16, 1)
            if not fds:
                os._exit(0)
            c = socket.socket(fileno=fds[0])
            try:
                head = msg[4:]
                if head:
                    c.sendall(head)
                while b := c.recv(65536):
                    c.sendall(b)
                print("worker: connection ended cleanly", file=sys.stderr, flush=True)
            except OSError as e:
                print(f"worker: connection error: {e}", file=sys.stderr, flush=True)
            c.close()
    theirs.close()
while True:
    conn, _ = ls.accept()
    child = how
    if how.startswith("smc_"):
        conn.sendall(conn.recv(4, socket.MSG_WAITALL))
        child = how[4:]
    if child == "popen":
        subprocess.Popen(prog, stdin=conn, stdout=conn).wait()
    elif child == "popenfork":
        # a preexec_fn makes subprocess fork (not vfork); close_fds then closes
        # every fd from 3 up in the child, the library's own among them
        subprocess.Popen(prog, stdin=conn, stdout=conn, preexec_fn=lambda: None).wait()
    elif child == "fork":
        pid = os.fork()
        if pid == 0:
            os.dup2(conn.fileno(), 0)
            os.dup2(conn.fileno(), 1)
            os.execvp(prog[0], prog)
        os.waitpid(pid, 0)
    elif child == "forkloop":
        # a daemon-style child: closes every fd number below its limit one by one
        pid = os.fork()
        if pid == 0:
            os.dup2(conn.fileno(), 0)
            os.dup2(conn.fileno(), 1)
            import resource
            for fd in range(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0]):
                try:
                    os.close(fd)
                except OSError:
                    pass
            os.execvp(prog[0], prog)
        os.waitpid(pid, 0)
    elif child == "spawn":
        dup = [(os.POSIX_SPAWN_DUP2, conn.fileno(), 0), (os.POSIX_SPAWN_DUP2, conn.fileno(), 1)]
        pid = os.posix_spawnp(prog[0], prog, os.environ, file_actions=dup)
        os.waitpid(pid, 0)
    else:
        head = conn.recv(4, socket.MSG_WAITALL) if how == "pass_smc" else b""
        socket.send_fds(ours, [b"conn" + head], [conn.fileno()])
    conn.close()
PY


# serve SMODE CMODE NAME HOW [PROG]: one connection of 1 MiB through a fresh server.
serve() {
    local smode=$1 cmode=$2 name=$3 how=$4 port
    shift 4
    port=$(free_port 4)
    start_server "$smode" "$name-server" "$PYTHON" "$work/server.py" "$how" "$port" "$@"
    wait_listen "$server_pid" "$port"
    run_client "$cmode" "$name-client" 60 "$PYTHON" "$apps_dir/echo_once.py" "$port" $((1 << 20))
    # the server's stats while it still runs (its children have exited)
    mode_stats "$server_pid" $(descendants "$server_pid") >"$work/$name.stats" 2>/dev/null || true
    "$SMCR_STAT" --json -a -p "$server_pid" --dir "$XDG_RUNTIME_DIR/smcr" >"$work/$name.records" \
        2>/dev/null || true
    stop_server "$server_pid"
}

# intact NAME: the client got its megabyte back.
intact() {
    [[ $exit_code -eq 0 ]] && grep -q '^intact ' "$work/$1-client.$cmode_used.out" ||
        fail "$1: the client did not get its data back intact: $(cat "$work/$1-client.$cmode_used.out") (exit $exit_code)"
    log "$1: 1 MiB echoed intact ($(cat "$work/$1-client.$cmode_used.out"))"
}

# smc_both NAME: both ends' logs say smc-shm, and no fallback.
smc_both() {
    assert_smc_log "$1-server" 1
    assert_smc_log "$1-client" 1
}

# handoff_both NAME: both ends fell back with HANDOFF (logs), the server counts it (stats).
handoff_both() {
    local n
    assert_fallback_log "$1-server" HANDOFF 1
    assert_fallback_log "$1-client" HANDOFF 1
    n=$(tr ',' '\n' <<<"$(cut -d' ' -f3 "$work/$1.stats")" | sed -n 's/^HANDOFF://p')
    [[ ${n:-0} -ge 1 ]] || fail "$1: the server's stats do not count the HANDOFF fallback: $(cat "$work/$1.stats")"
    log "$1: the server's published stats count $n HANDOFF fallback(s)"
}

cmode_used=smcr
serve smcr smcr popen-cat popen cat;              intact popen-cat;    smc_both popen-cat
serve smcr smcr fork-cat fork cat;                intact fork-cat;     smc_both fork-cat
serve smcr smcr popen-static popen "$static_cat"; intact popen-static; handoff_both popen-static
serve smcr smcr fork-static fork "$static_cat";   intact fork-static
assert_fallback_log fork-static-server HANDOFF 1
assert_fallback_log fork-static-client HANDOFF 1
serve smcr smcr spawn-cat spawn cat;              intact spawn-cat;    smc_both spawn-cat
serve smcr smcr spawn-static spawn "$static_cat"; intact spawn-static; handoff_both spawn-static
serve smcr smcr pass pass;                        intact pass;         handoff_both pass

# The listener itself passed over SCM_RIGHTS to a worker without smcr, the sender keeping
# its copy: the registration is revoked, so the client does not propose (plain TCP, intact).
serve smcr smcr listener-out listener_out
intact listener-out
assert_fallback_log listener-out-client PEERNOSMC 1
grep -q 'no longer served by smcr: passed to another process over SCM_RIGHTS' \
    "$work/listener-out-server.smcr.err" ||
    fail "listener-out: the server's log does not say that the listener is no longer served"
log "listener-out: the listener passed over SCM_RIGHTS is no longer served by smcr; plain TCP, intact"

# went_on_tcp NAME: an SMC connection whose socket left for a child program or another
# process went on over TCP at both ends (their logs say so), every byte intact.
went_on_tcp() {
    smc_both "$1"
    grep -q 'this end goes on over TCP' "$work/$1-server.smcr.err" ||
        fail "$1: the server's log does not say that its end went on over TCP"
    grep -q 'the peer goes on over TCP' "$work/$1-client.smcr.err" ||
        fail "$1: the client's log does not say that it followed its peer onto TCP"
    # The server's record of the connection (closed by now): SMC, then TCP for HANDOFF.
    record=$("$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1]))["connections"]:
    if c["role"] == "server":
        print(c["mode"], c["fallback_name"], c["state"], c["conn_state"], c["bytes_received"])' "$work/$1.records")
    [[ $record == "smc-shm HANDOFF "* ]] ||
        fail "$1: the server's stats record is not smc-shm gone on over TCP for HANDOFF: '$record'"
    log "$1: SMC first, then both ends went on over TCP; the server's record: $record"
}

(( $(ulimit -Hn) > 1024 )) ||
    fail "the hard RLIMIT_NOFILE ($(ulimit -Hn)) leaves no room above a soft limit of 1024 for smc-forkloop"
# SMC connections whose socket then leaves: to a child program (as a CGI program's stdin and
# stdout, with smcr in it or not) or to another process over SCM_RIGHTS.
for how in "smc_popen cat" "smc_popenfork cat" "smc_fork cat" "smc_forkloop cat" "smc_spawn cat" "smc_popen $static_cat" "pass_smc"; do
    name=${how%% *}
    [[ $how == *static_cat ]] && name=$name-static
    name=${name//_/-}
    # shellcheck disable=SC2086
    serve smcr smcr "$name" $how
    intact "$name"
    went_on_tcp "$name"
done

# Only one end under smc_run: plain TCP, intact.
for pair in "smcr plain" "plain smcr"; do
    read -r smode cmode <<<"$pair"
    cmode_used=$cmode
    for how in "popen cat" "fork $static_cat" "spawn cat" "pass"; do
        name=one-$smode-${how%% *}
        # shellcheck disable=SC2086
        serve "$smode" "$cmode" "$name" $how
        intact "$name"
        side=$([[ $smode == smcr ]] && echo server || echo client)
        n=$(grep -c ': smc-[a-z]* (' "$work/$name-$side.smcr.err" || true)
        [[ $n -eq 0 ]] || fail "$name: SMC with only one end under smc_run"
    done
done
log "with one end under smc_run every case stayed TCP and intact"
