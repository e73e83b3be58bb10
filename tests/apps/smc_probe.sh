#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# smc_run --explain HOST:PORT --connect: a peer check in the manner of IBM's
# smc_chk -C. It connects as a client under smcr would, runs the handshake the
# policy allows and says what came of it. Checked against what the server's
# own stats say happened: an SMC handshake where the probe says SMC, none where
# it says TCP; over IPv4 and IPv6, to a server under smcr and to a plain one,
# with a rule that keeps the port on TCP, and to a port nobody listens on.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

# probe NAME TARGET [ENV...]: runs the check; its output in $work/NAME.probe,
# its exit status in probe_rc.
probe() {
    local name=$1 target=$2
    shift 2
    probe_rc=0
    env "$@" "$SMC_RUN" --explain "$target" --connect >"$work/$name.probe" 2>&1 || probe_rc=$?
}

# expect_line NAME REGEX: the check's "connect:" line matches REGEX.
expect_line() {
    grep -qE "^connect: $2" "$work/$1.probe" || fail "$1: expected 'connect: $2', got: $(cat "$work/$1.probe")"
}

port=$(free_port 3)

# A server under smcr: the check says smc-shm, and the server counts one SMC
# handshake (the check's connection), no fallback.
start_server smcr v4-server "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
wait_listen "$server_pid" "$port"
probe v4 "127.0.0.1:$port"
[[ $probe_rc -eq 0 ]] || fail "v4: exit $probe_rc: $(cat "$work/v4.probe")"
expect_line v4 'smc-shm: the peer runs SMC'
assert_smc_stats "v4: the server, after the check" 1 "$server_pid"

# A rule that keeps the port on TCP: the check says so, and nothing reaches the
# server but TCP (its SMC count stays 1).
printf 'tcp port=%s\n' "$port" >"$work/tcp.conf"
probe rule "127.0.0.1:$port" "SMCR_CONF=$work/tcp.conf"
expect_line rule 'tcp, reason RULE \(0x0a060000\)'
read -r smc _ <<<"$(mode_stats "$server_pid")"
[[ $smc -eq 1 ]] || fail "rule: the server counts $smc SMC handshakes after a check the rules keep on TCP"
stop_server "$server_pid"
log "IPv4 to an smcr server: $(grep '^connect:' "$work/v4.probe"); with a tcp rule: $(grep '^connect:' "$work/rule.probe")"

# IPv6 loopback.
start_server smcr v6-server "$PYTHON" "$apps_dir/echo.py" server-asyncio ::1 "$port"
wait_listen "$server_pid" "$port"
probe v6 "[::1]:$port"
[[ $probe_rc -eq 0 ]] || fail "v6: exit $probe_rc: $(cat "$work/v6.probe")"
expect_line v6 'smc-shm: the peer runs SMC'
assert_smc_stats "v6: the server, after the check" 1 "$server_pid"
stop_server "$server_pid"

# A plain server: TCP, reason PEERNOSMC, and not a CLC byte sent (an echo
# server would echo a Proposal back: the check would then not say PEERNOSMC).
start_server plain plain-server "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$port"
wait_listen "$server_pid" "$port"
probe plain "127.0.0.1:$port"
[[ $probe_rc -eq 0 ]] || fail "plain: exit $probe_rc: $(cat "$work/plain.probe")"
expect_line plain 'tcp, reason PEERNOSMC \(0x03010000\)'
stop_server "$server_pid"
log "IPv6 to an smcr server: $(grep '^connect:' "$work/v6.probe"); to a plain server: $(grep '^connect:' "$work/plain.probe")"

# Nobody listens: exit 1, as a TCP client's failure.
probe refused "127.0.0.1:$port"
[[ $probe_rc -eq 1 ]] || fail "refused: exit $probe_rc, expected 1: $(cat "$work/refused.probe")"
expect_line refused 'failed: Connection refused'
log "a closed port: exit 1, $(grep '^connect:' "$work/refused.probe")"
