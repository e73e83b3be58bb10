#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# socat moves a large file both ways (client to server, server to client)
# with both ends under smc_run: SMC mode on both ends (SMC_DEBUG logs) and
# equal sha256.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need socat

size=$(( ${SMCR_TEST_FILE_MB:-128} * 1024 * 1024 + 4099 ))
random_file "$work/upload" "$size"
random_file "$work/download" "$size"
mode=smcr

port=$(free_port 4)
start_server smcr up-server socat -u "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" "CREATE:$work/uploaded"
wait_listen "$server_pid" "$port"
run_client smcr up-client 60 socat -u "OPEN:$work/upload" "TCP4:127.0.0.1:$port"
[[ $exit_code -eq 0 ]] || fail "upload client exited $exit_code"
wait_exit "$server_pid" 30
[[ $exit_code -eq 0 ]] || fail "upload server exited $exit_code"
[[ $(sha "$work/uploaded") == "$(sha "$work/upload")" ]] || fail "upload: sha256 differs"
assert_smc_log up-client 1
assert_smc_log up-server 1

port=$(free_port 4)
start_server smcr down-server socat -u "OPEN:$work/download" "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr"
wait_listen "$server_pid" "$port"
run_client smcr down-client 60 socat -u "TCP4:127.0.0.1:$port" "CREATE:$work/downloaded"
[[ $exit_code -eq 0 ]] || fail "download client exited $exit_code"
wait_exit "$server_pid" 30
[[ $(sha "$work/downloaded") == "$(sha "$work/download")" ]] || fail "download: sha256 differs"
assert_smc_log down-client 1
assert_smc_log down-server 1
log "$size bytes each way over SMC, sha256 equal"
