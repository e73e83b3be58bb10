#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Node.js under smc_run (node_net.js): an http server with an http client,
# keep-alive (two connections carrying several requests) and Connection:
# close, and a net echo taking large writes and a corked writev, 3 MiB each
# way, every echo checked by sha256. Both ends under smc_run: every
# connection in SMC mode (the client's log, the server's stats). One end
# only, either way: the same bytes over TCP, the smcr end's stats or log
# saying PEERNOSMC.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need node

random_file "$work/data" $((3 * 1024 * 1024 + 17))
n=4
# keep-alive: 2 connections; Connection: close: n; net echo: n.
conns=$((2 + 2 * n))

# node_servers MODE NAME: both servers in one process; ports in $ports.
node_servers() {
    ports=("$(free_port 4)" "$(free_port 4)")
    start_server "$1" "$2" node "$apps_dir/node_net.js" servers "${ports[@]}"
    local port
    for port in "${ports[@]}"; do wait_listen "$server_pid" "$port" 20; done
}

# node_clients MODE NAME: the clients in one process against $ports; fails
# unless every echo came back intact.
node_clients() {
    run_client "$1" "$2" 60 node "$apps_dir/node_net.js" clients "${ports[@]}" "$work/data" "$n"
    [[ $exit_code -eq 0 ]] || fail "$2 ($1) exited $exit_code: $(tr '\n' ' ' <"$work/$2.$1.out") $(tail -n 3 "$work/$2.$1.err")"
    log "$2 ($1): $(tr '\n' ';' <"$work/$2.$1.out")"
}

# One end: a plain client to an smcr server (no Proposal comes: PEERNOSMC) ...
node_servers smcr server
pid=$server_pid
node_clients plain plain-client
assert_fallback_stats "node server, plain client" PEERNOSMC "$conns" "$pid"
# ... then both ends: SMC on every connection. Three rounds against the one
# server: libuv aborts the process when an epoll_ctl fails with an errno it
# does not expect, and a registration of a reused fd number meets the
# library's bookkeeping only now and then.
for round in 1 2 3; do
    node_clients smcr "client$round"
    assert_smc_log "client$round" "$conns"
done
read -r smc fallbacks _ <<<"$(mode_stats "$pid")"
[[ $smc -ge $((3 * conns)) && $fallbacks -eq $conns ]] ||
    fail "node server's stats: $smc SMC, $fallbacks fallback(s); expected $((3 * conns)) SMC more and no new fallback"
log "node server: $smc SMC handshake(s) in its stats with the smcr clients"
stop_server "$pid"

# One end, the other way: an smcr client to a plain server (no smcr listener
# registered on the port, so no Proposal is sent).
node_servers plain plain-server
node_clients smcr client-to-plain
assert_fallback_log client-to-plain PEERNOSMC "$conns"
