#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Same host, same network namespace, different pid namespaces: the containers of
# one pod, which share the pod's network but not, by default, its processes. The
# rendezvous proves the proposer by its pid, and pids differ between pid
# namespaces: a client in a namespace below the server's announces its own pid
# there, a sibling's pid is not visible at all. Each topology must still get
# shared memory, on both ends (their logs), with the data intact:
#   child-server   the server in a pid namespace of its own, the client here
#   child-client   the client in one, the server here
#   siblings       each in one of its own (neither sees the other's pid)
# and where no pid can prove the proposer, a process of another uid is not
# believed (the attack: a sibling of another uid): TCP, intact.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
[[ $(id -u) -eq 0 ]] || skip "pid namespaces need root here (unshare -p)"
need unshare setpriv socat
bytes=$((4 << 20))
newpid=(unshare -p -f --mount-proc)

# run_case NAME SERVER_PREFIX CLIENT_PREFIX [socat]: an echo server (python's, or
# socat's where the server's uid cannot read this user's python) and one client,
# each under smc_run -d behind its prefix (a bash array's name).
run_case() {
    local name=$1 port
    local -n sp=$2 cp=$3
    local -a server
    port=$(free_port 3)
    server=("$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port")
    [[ ${4:-} == socat ]] && server=(socat "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" EXEC:cat)
    start_server plain "$name-server" "${sp[@]}" "${smcr_prefix[@]}" "${server[@]}"
    wait_listen "$server_pid" "$port"
    run_client plain "$name-client" 60 "${cp[@]}" "${smcr_prefix[@]}" \
        "$PYTHON" "$apps_dir/echo_once.py" "$port" "$bytes"
    [[ $exit_code -eq 0 ]] && grep -q '^intact ' "$work/$name-client.plain.out" ||
        fail "$name: $(cat "$work/$name-client.plain.out") (exit $exit_code; $(tail -n 2 "$work/$name-client.plain.err"))"
    for ((i = 0; i < 100; i++)); do
        grep -q ': smc-shm (server)\|: tcp-fallback (server)' "$work/$name-server.plain.err" && break
        sleep 0.05
    done
    stop_server "$server_pid"
}

# expect_shm NAME: both ends logged their connection in SMC mode, and nobody
# doubted the proposer.
expect_shm() {
    local name=$1 who
    for who in server client; do
        grep -q ": smc-shm ($who)" "$work/$name-$who.plain.err" ||
            fail "$name: the $who's log has no smc-shm line: $(grep -m1 -o 'fd [0-9]*: .*' "$work/$name-$who.plain.err")"
    done
    grep -h 'not the proposer' "$work/$name-server.plain.err" "$work/$name-client.plain.err" &&
        fail "$name: the rendezvous doubted the proposer"
    log "$name: $((bytes >> 20)) MiB echoed intact over shared memory (both ends' logs)"
}

none=()
run_case child-server newpid none
expect_shm child-server
run_case child-client none newpid
expect_shm child-client
run_case siblings newpid newpid
expect_shm siblings

# A sibling of another uid: no pid proves it, so its uid must be ours.
nobody=("${newpid[@]}" setpriv --reuid=nobody --regid=nogroup --clear-groups)
run_case other-uid nobody newpid socat
grep -q ': tcp-fallback (client)' "$work/other-uid-client.plain.err" ||
    fail "other-uid: the client's log has no TCP fallback: $(grep -m1 -o 'fd [0-9]*: .*' "$work/other-uid-client.plain.err")"
grep -q ': smc-shm (' "$work/other-uid-server.plain.err" "$work/other-uid-client.plain.err" &&
    fail "other-uid: a connection ran over shared memory with a process of another uid"
grep -q 'not the proposer' "$work/other-uid-server.plain.err" "$work/other-uid-client.plain.err" ||
    fail "other-uid: nobody said the rendezvous was refused"
log "other-uid: echo intact over TCP ($(grep -m1 -o 'tcp-fallback (client): reason [^;]*' "$work/other-uid-client.plain.err")); the rendezvous refused the other uid"
