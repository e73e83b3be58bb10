#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# socat moves a 1 GiB file each way (client to server, then server to client),
# both ends under smc_run: equal size and sha256, SMC mode on both ends by
# their SMC_DEBUG logs. The file is 16 copies of 64 MiB of random data plus an
# odd tail (fast to make; a repeat is 64 MiB away, far beyond any ring, so
# misplaced or stale ring bytes still change the checksum). Disk: the 1 GiB
# file plus one received copy at a time, deleted once checked. About 25 s on
# 2 cores (SMCR_TEST_BIG_MB=N for another size, a multiple of 64).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need socat

mib=${SMCR_TEST_BIG_MB:-1024}
random_file "$work/chunk" $((64 * 1024 * 1024))
for ((i = 0; i < mib / 64; i++)); do cat "$work/chunk"; done >"$work/big"
head -c 12345 /dev/urandom >>"$work/big" # a tail that is not a multiple of anything
rm -f "$work/chunk"
size=$(stat -c %s "$work/big")
want=$(sha "$work/big")
mode=smcr

started=$SECONDS
port=$(free_port 4)
start_server smcr up-server socat -u "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" "CREATE:$work/got"
wait_listen "$server_pid" "$port"
t0=$SECONDS
run_client smcr up-client 60 socat -u "OPEN:$work/big" "TCP4:127.0.0.1:$port"
[[ $exit_code -eq 0 ]] || fail "upload client exited $exit_code"
wait_exit "$server_pid" 30
[[ $exit_code -eq 0 ]] || fail "upload server exited $exit_code"
[[ $(stat -c %s "$work/got") -eq $size && $(sha "$work/got") == "$want" ]] || fail "upload: size or sha256 differs"
log "upload: $size bytes in $((SECONDS - t0)) s, sha256 equal"
rm -f "$work/got"
assert_smc_log up-client 1
assert_smc_log up-server 1

port=$(free_port 4)
start_server smcr down-server socat -u "OPEN:$work/big" "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr"
wait_listen "$server_pid" "$port"
t0=$SECONDS
run_client smcr down-client 60 socat -u "TCP4:127.0.0.1:$port" "CREATE:$work/got"
[[ $exit_code -eq 0 ]] || fail "download client exited $exit_code"
wait_exit "$server_pid" 30
[[ $exit_code -eq 0 ]] || fail "download server exited $exit_code"
[[ $(stat -c %s "$work/got") -eq $size && $(sha "$work/got") == "$want" ]] || fail "download: size or sha256 differs"
log "download: $size bytes in $((SECONDS - t0)) s, sha256 equal"
rm -f "$work/got"
assert_smc_log down-client 1
assert_smc_log down-server 1
log "1 GiB each way over SMC, sha256 equal; whole test $((SECONDS - started)) s after making the file"
