#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Java under smc_run (JavaNet.java): an HTTP server on a thread pool
# (com.sun.net.httpserver) with java.net.http.HttpClient, a blocking
# java.net.Socket echo with read timeouts (its reads wait in poll), and an NIO
# Selector echo (epoll), 4 concurrent connections each moving 3 MiB both ways,
# every echo checked by sha256. Both ends under smc_run: every connection in
# SMC mode (the client's log, the server's stats). One end only, either way:
# the same bytes over TCP, the smcr end's stats or log saying PEERNOSMC.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need java javac

javac -d "$work" "$apps_dir/JavaNet.java" || fail "javac failed"
random_file "$work/data" $((3 * 1024 * 1024 + 17))
n=4
# A Java client makes one connection per exchange: n for each of the three kinds.
conns=$((3 * n))

# java_servers MODE NAME: the three servers in one JVM; ports in $ports.
java_servers() {
    ports=("$(free_port 4)" "$(free_port 4)" "$(free_port 4)")
    start_server "$1" "$2" java -cp "$work" JavaNet servers "${ports[@]}"
    local port
    for port in "${ports[@]}"; do wait_listen "$server_pid" "$port" 20; done
}

# java_clients MODE NAME: the three clients in one JVM against $ports; fails
# unless every echo came back intact.
java_clients() {
    run_client "$1" "$2" 60 java -cp "$work" JavaNet clients "${ports[@]}" "$work/data" "$n"
    [[ $exit_code -eq 0 ]] || fail "$2 ($1) exited $exit_code: $(tr '\n' ' ' <"$work/$2.$1.out")"
    log "$2 ($1): $(tr '\n' ';' <"$work/$2.$1.out")"
}

# One end: a plain client to an smcr server (no Proposal comes: PEERNOSMC) ...
java_servers smcr server
pid=$server_pid
java_clients plain plain-client
assert_fallback_stats "java server, plain client" PEERNOSMC "$conns" "$pid"
# ... then both ends: SMC on every connection.
java_clients smcr client
assert_smc_log client "$conns"
read -r smc fallbacks _ <<<"$(mode_stats "$pid")"
[[ $smc -ge $conns && $fallbacks -eq $conns ]] ||
    fail "java server's stats: $smc SMC, $fallbacks fallback(s); expected $conns SMC more and no new fallback"
log "java server: $smc SMC handshake(s) in its stats with the smcr client"
stop_server "$pid"

# One end, the other way: an smcr client to a plain server (no smcr listener
# registered on the port, so no Proposal is sent).
java_servers plain plain-server
java_clients smcr client-to-plain
assert_fallback_log client-to-plain PEERNOSMC "$conns"
