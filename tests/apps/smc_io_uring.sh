#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A program that does its socket I/O through io_uring (liburing's
# IORING_OP_SEND / IORING_OP_RECV) against an echo server, both under
# smc_run. io_uring's reads and writes never pass the library's wrappers, so
# an SMC connection would leave them on a TCP socket that carries nothing: the
# library must stay out of such a program (its log says why, once) and the
# connection must be plain TCP with every byte echoed; the server's own stats
# show no SMC. The same client without liburing's library in it (a python
# client) still gets SMC from the same server.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
client=${SMCR_TEST_URING_CLIENT:-}
[[ -x $client ]] || skip "uring_client is not built (liburing-dev: scripts/install-deps)"

port=$(free_port 4)
start_server smcr server "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
pid=$server_pid
wait_listen "$pid" "$port"

run_client smcr uring 60 "$client" "$port" $((4 << 20))
[[ $exit_code -eq 0 ]] || fail "uring_client exited $exit_code: $(tail -n 3 "$work/uring.smcr.err")"
[[ $(cat "$work/uring.smcr.out") == "ok $((4 << 20))" ]] || fail "uring_client: $(cat "$work/uring.smcr.out")"
grep -q 'not active in a program linked with liburing' "$work/uring.smcr.err" ||
    fail "uring_client's log does not say why smcr stayed out: $(head -n 3 "$work/uring.smcr.err")"
grep -q ': smc-' "$work/uring.smcr.err" && fail "uring_client logged an SMC connection"
read -r smc _ <<<"$(mode_stats "$pid")"
[[ $smc -eq 0 ]] || fail "the server made $smc SMC handshake(s) with the io_uring client"
log "io_uring client: 4 MiB echoed over plain TCP; smcr stayed out of it and said why"

run_client smcr python 60 "$PYTHON" "$apps_dir/echo.py" client-asyncio 127.0.0.1 "$port" 1 65536
[[ $exit_code -eq 0 ]] || fail "the python client exited $exit_code"
read -r smc fallbacks reasons <<<"$(mode_stats "$pid")"
[[ $smc -eq 1 && $fallbacks -eq 1 && $reasons == PEERNOSMC:1 ]] ||
    fail "the server's stats: $smc SMC, $fallbacks fallback(s) ($reasons); expected 1 and 1 (PEERNOSMC)"
log "python client: SMC; the server's stats: 1 SMC, the io_uring client's connection TCP (PEERNOSMC)"
