#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A program that sets up io_uring itself, through libc's syscall() (as Rust's
# io-uring crate does, without liburing), after one of its connections is
# SMC already, against an echo server, both under smc_run. io_uring's reads
# and writes never pass the library's wrappers: at the io_uring_setup call
# the library must step aside. Connection A, SMC before the call, goes on
# over TCP at both ends and echoes through io_uring; connection B, made after
# it, stays TCP (reason IOURING in the client's log); every byte checked.
# The server's own stats: A SMC, B plain TCP (PEERNOSMC).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
client=${SMCR_TEST_RAW_URING_CLIENT:-}
[[ -x $client ]] || skip "raw_uring_client is not built (SMCR_TEST_RAW_URING_CLIENT)"

port=$(free_port 4)
start_server smcr server "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
pid=$server_pid
wait_listen "$pid" "$port"

bytes=$((256 << 10))
run_client smcr raw 60 "$client" "$port" "$bytes"
err="$work/raw.smcr.err"
[[ $exit_code -eq 0 ]] || fail "raw_uring_client exited $exit_code: $(tail -n 3 "$err")"
[[ $(cat "$work/raw.smcr.out") == "ok $bytes" ]] || fail "raw_uring_client: $(cat "$work/raw.smcr.out")"
grep -q ': smc-shm' "$err" || fail "connection A was not SMC before io_uring: $(head -n 5 "$err")"
grep -q 'io_uring set up at run time' "$err" || fail "the client's log does not say why smcr stepped aside"
grep -q 'goes on over TCP: the program set up io_uring' "$err" ||
    fail "connection A did not go on over TCP at the io_uring_setup call"
grep -q 'tcp-fallback (client): reason 0x0a090000 IOURING' "$err" ||
    fail "connection B is not TCP with reason IOURING: $(grep -i fallback "$err" | head -n 3)"
read -r smc fallbacks reasons <<<"$(mode_stats "$pid")"
[[ $smc -eq 1 && $fallbacks -eq 1 && $reasons == PEERNOSMC:1 ]] ||
    fail "the server's stats: $smc SMC, $fallbacks fallback(s) ($reasons); expected 1 and 1 (PEERNOSMC)"
log "raw io_uring client: A SMC, then on over TCP at io_uring_setup; B TCP (IOURING); $bytes bytes echoed each way three times"
