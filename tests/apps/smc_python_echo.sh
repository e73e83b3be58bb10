#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A python echo server (thread per connection) and a python client that sends
# a large file while reading the echo, both under smc_run: sha256 of the echo
# equals the file's; the server's published stats (smcr-stat) show the SMC
# handshakes while it runs, and both logs say smc-shm.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

random_file "$work/data" $((48 * 1024 * 1024 + 77))
port=$(free_port 4)
echo_stream_server echo-server "$port"
pid=$server_pid
for i in 1 2; do
    echo_stream_client "echo-client$i" "$port" "$work/data"
    assert_smc_log "echo-client$i" 1
done
assert_smc_stats "echo server" 2 "$pid"
assert_smc_log echo-server 2
