#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A server that registered its listener and then confines its own system
# calls (prctl(PR_SET_SECCOMP), as a sandboxed service does once it is set
# up): its accepted connections are not classified any more (the filter may
# deny what that takes), so its listener must leave the same-host registry
# before the filter applies. Otherwise a local client proposes and the
# server application reads the CLC Proposal as data (the attack: a client
# under smc_run, both ends on one host). Proven from the bytes the server
# read, both ends' logs, and the data echoed intact.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
port=$(free_port 4)
random_file "$work/data" $((256 * 1024 + 7))

start_server smcr server "$PYTHON" "$apps_dir/confine_listener.py" "$port"
for ((i = 0; i < 200; i++)); do
    grep -q '^confined' "$work/server.smcr.out" 2>/dev/null && break
    sleep 0.05
done
grep -q '^confined' "$work/server.smcr.out" || fail "the server did not confine itself: $(tail -n 3 "$work/server.smcr.err")"
run_client_in "$work/data" smcr client 30 socat -t 5 - "TCP4:127.0.0.1:$port"
[[ $exit_code -eq 0 ]] || fail "the client exited $exit_code: $(tail -n 2 "$work/client.smcr.err")"
wait_exit "$server_pid" 10
[[ $(sha "$work/client.smcr.out") == "$(sha "$work/data")" ]] || fail "the echo differs (sha256)"
first=$(sed -n 's/^first //p' "$work/server.smcr.out")
[[ $first == "$(head -c 8 "$work/data" | od -An -tx1 | tr -d ' \n')" ]] ||
    fail "the server application's first bytes were '$first', not the client's (e2d4c3d9: a CLC Proposal)"
grep -q "listener on port $port no longer served by smcr: the process confines its system calls" "$work/server.smcr.err" ||
    fail "the server's log does not say its listener left the registry"
assert_fallback_log client PEERNOSMC 1
assert_fallback_log server CONFINED 1
log "256 KiB echoed intact; the confined server read the client's bytes first ($first), not a Proposal"
