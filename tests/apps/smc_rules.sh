#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The rules file (smcr(7), RULES) on real connections: socat echo servers and
# clients, both under smc_run, one rule at a time.  A rule that excludes the
# client's program, the port or the peer's prefix keeps the connection TCP
# with reason RULE; one that names something else leaves it SMC; a server
# rule `tcp` leaves its listener unregistered, so a local client finds no
# SMC there.  The user's file comes before the system's ($SMCR_CONF); the
# environment wins over both.  A file not understood says one error, once
# per session across a wrapper's processes, and every connection stays TCP.
# Every echo is checked by sha256, every path by the library's own log;
# smc_run --explain names the deciding line.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need socat

random_file "$work/data" $((64 * 1024 + 3))
want=$(sha "$work/data")
mkdir -p "$XDG_CONFIG_HOME"

# rules FILE LINE...: writes a rules file.
rules() {
    local file=$1
    shift
    printf '%s\n' "# written by $test_name" "$@" >"$file"
}

# echo_case NAME EXPECT SERVER_ENV CLIENT_ENV: one echo through socat, both ends under
# smc_run with their own environment (space-separated NAME=VALUE lists).
echo_case() {
    socat_echo_case "$1" "$2" "$case_port" smcr "$3" "$4"
}

rule_tcp='tcp-fallback (client): reason 0x0a060000 RULE'
shm='smc-shm (client)'
conf=$work/smcr.conf
case_port=$(free_port 4)

# One program excluded: the client is socat.
rules "$conf" 'tcp program=socat role=client'
echo_case program-excluded "$rule_tcp" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"
rules "$conf" 'tcp program=sshd' 'smc *'
echo_case program-other "$shm" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"

# One port excluded.
rules "$conf" "tcp port=$case_port"
echo_case port-excluded "$rule_tcp" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"
rules "$conf" "tcp port=$((case_port == 65535 ? 1 : case_port + 1))"
echo_case port-other "$shm" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"

# One peer prefix excluded (peer= and addr= are one key).
rules "$conf" 'tcp peer=127.0.0.0/8'
echo_case prefix-excluded "$rule_tcp" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"
rules "$conf" 'tcp addr=10.0.0.0/8' 'tcp addr=::1/128'
echo_case prefix-other "$shm" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"

# A server rule: the listener is not registered; a local client proposes nothing.
rules "$conf" "tcp role=server port=$case_port"
echo_case server-tcp 'tcp-fallback (client): reason 0x03010000 PEERNOSMC' \
    "SMCR_CONF=$conf" "SMCR_CONF=/dev/null"
grep -q "listener on port $case_port kept TCP by a rule (reason RULE)" "$work/server-tcp-server.smcr.err" ||
    fail "server-tcp: the server's log does not say its listener was kept TCP by a rule"
grep -q 'smc-shm' "$work/server-tcp-server.smcr.err" && fail "server-tcp: the server logged an SMC connection"
log "server-tcp: the server's log: $(grep -m1 -o 'listener on port.*' "$work/server-tcp-server.smcr.err")"

# A Proposal that reaches such a server anyway (a genuine one, from the engine's own
# encoder) is declined with what a server without SMC says; its stats say RULE.
if [[ -x ${SMCR_TEST_HOSTILE_CLC:-} ]]; then
    start_server smcr proposal-server env "SMCR_CONF=$conf" \
        "$PYTHON" "$apps_dir/echo.py" server-asyncio 127.0.0.1 "$case_port"
    wait_listen "$server_pid" "$case_port"
    timeout 30 "$SMCR_TEST_HOSTILE_CLC" 127.0.0.1 "$case_port" 200 >"$work/proposal.out" 2>&1 ||
        fail "the Proposal's client failed: $(cat "$work/proposal.out")"
    reply=$(head -n1 "$work/proposal.out")
    [[ $reply == "reply decline 0x03030000" ]] || fail "server-tcp Proposal: the server answered '$reply', expected a Decline NOSMCDEV"
    for ((i = 0; i < 100; i++)); do
        grep -q 'tcp-fallback (server): reason 0x0a060000 RULE' "$work/proposal-server.smcr.err" && break
        sleep 0.05
    done
    grep -q 'tcp-fallback (server): reason 0x0a060000 RULE' "$work/proposal-server.smcr.err" ||
        fail "server-tcp Proposal: the server's log does not say RULE: $(grep -m2 'fd [0-9]*:' "$work/proposal-server.smcr.err")"
    out=$(mode_stats "$server_pid") || fail "smcr-stat stats --json failed"
    [[ $out == *RULE:1* ]] || fail "server-tcp Proposal: the server's stats: '$out', expected RULE:1"
    stop_server "$server_pid"
    log "server-tcp Proposal: $reply on the wire; the server's stats: $out"
fi

# The user's file comes first; the environment wins over every rule.
rules "$XDG_CONFIG_HOME/smcr.conf" "smc port=$case_port"
rules "$conf" 'tcp *'
echo_case user-first "$shm" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"
rm "$XDG_CONFIG_HOME/smcr.conf"
echo_case system-tcp "$rule_tcp" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf"
echo_case env-wins "$shm" "SMCR_CONF=/dev/null" "SMCR_CONF=$conf SMCR_TRANSPORT=shm"

# A file not understood: one error naming file:line, the value and what was
# expected, said once by the five clients of one wrapper; every connection TCP.
rules "$work/bad.conf" 'smc *' 'rdma peer=10.0.0.0/33'
start_server smcr bad-server socat "TCP4-LISTEN:$case_port,bind=127.0.0.1,reuseaddr,fork" EXEC:cat
wait_listen "$server_pid" "$case_port"
timeout 60 "${smcr_prefix[@]}" env "SMCR_CONF=$work/bad.conf" bash -c '
    for i in 1 2 3 4 5; do
        socat -t 5 - "TCP4:127.0.0.1:$1" <"$2" >"$3.$i" || exit 1
    done' wrapper "$case_port" "$work/data" "$work/bad.out" \
    >"$work/bad-wrapper.out" 2>"$work/bad-wrapper.err" || fail "the wrapper's clients failed: $(tail -n 3 "$work/bad-wrapper.err")"
stop_server "$server_pid"
for i in 1 2 3 4 5; do
    [[ $(sha "$work/bad.out.$i") == "$want" ]] || fail "bad file: client $i's echo differs (sha256)"
done
error="$work/bad.conf:3: 'peer=10.0.0.0/33': prefix length out of range: expected /0../32 for IPv4; every connection stays TCP"
n=$(grep -cF -- "$error (said once per session)" "$work/bad-wrapper.err" || true)
[[ $n -eq 1 ]] || fail "bad file: the error was said $n times by 6 processes, expected once: $(grep -m2 'smcr.conf\|bad.conf' "$work/bad-wrapper.err")"
n=$(grep -c "$rule_tcp" "$work/bad-wrapper.err" || true)
[[ $n -eq 5 ]] || fail "bad file: $n of 5 connections stayed TCP with RULE"
grep -q "$shm" "$work/bad-wrapper.err" && fail "bad file: a connection ran SMC"
log "bad file: 5 echoes intact over TCP (RULE), said once: $error"

# The system's file at its default path, /etc/smcr.conf, with no SMCR_CONF: read in a
# mount namespace of the test's own, where an overlay over /etc holds it, so that no
# other program on the machine sees it. Root only (mounts); said so otherwise.
# $work/in_etc_ns COMMAND...: COMMAND in such a namespace, /etc/smcr.conf = $work/etc.conf
# (a script, so that timeout can run it).
mkdir -p "$work/etc-ns/up" "$work/etc-ns/work"
cat >"$work/in_etc_ns" <<SH
#!/usr/bin/env bash
exec unshare -m bash -c '
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$work/etc-ns/up,workdir=$work/etc-ns/work" /etc ||
        { echo "in_etc_ns: cannot mount an overlay over /etc" >&2; exit 97; }
    cp "$work/etc.conf" /etc/smcr.conf
    exec env -u SMCR_CONF "\$@"' in_etc_ns "\$@"
SH
chmod +x "$work/in_etc_ns"
if [[ $(id -u) -eq 0 ]]; then
    rules "$work/etc.conf" "tcp port=$case_port role=client"
    start_server smcr etc-server socat "TCP4-LISTEN:$case_port,bind=127.0.0.1,reuseaddr" EXEC:cat
    wait_listen "$server_pid" "$case_port"
    run_client_in "$work/data" plain etc-client 30 "$work/in_etc_ns" "${smcr_prefix[@]}" \
        socat -t 5 - "TCP4:127.0.0.1:$case_port"
    [[ $exit_code -eq 0 ]] || fail "/etc/smcr.conf: the client exited $exit_code: $(tail -n 2 "$work/etc-client.plain.err")"
    wait_exit "$server_pid" 10
    [[ $(sha "$work/etc-client.plain.out") == "$want" ]] || fail "/etc/smcr.conf: the echo differs (sha256)"
    grep -q "$rule_tcp" "$work/etc-client.plain.err" ||
        fail "/etc/smcr.conf: the client's log does not say '$rule_tcp': $(grep -m1 -o 'fd [0-9]*: .*' "$work/etc-client.plain.err")"
    "$work/in_etc_ns" "$SMC_RUN" --explain "127.0.0.1:$case_port" >"$work/etc-explain.out" 2>&1 ||
        fail "/etc/smcr.conf: smc_run --explain: $(cat "$work/etc-explain.out")"
    grep -qx 'rules file: /etc/smcr.conf' "$work/etc-explain.out" &&
        grep -qx "decided by: /etc/smcr.conf:2 (tcp role=client port=$case_port)" "$work/etc-explain.out" ||
        fail "/etc/smcr.conf: --explain says: $(cat "$work/etc-explain.out")"
    [[ -e $work/etc-ns/up/smcr.conf ]] ||
        fail "/etc/smcr.conf: the file was not written to the overlay (did it reach the machine's /etc?)"
    log "/etc/smcr.conf (default path, no SMCR_CONF): echo intact over TCP (RULE); --explain names /etc/smcr.conf:2"
else
    log "/etc/smcr.conf at its default path: not checked (mounting an overlay over /etc needs root)"
fi

# --explain: the deciding line, or the setting, and the outcome.
explain() {
    "$SMC_RUN" --explain "$@" >"$work/explain.out" 2>&1 || fail "smc_run --explain $*: exit $?: $(cat "$work/explain.out")"
}
rules "$conf" 'tcp program=sshd' 'tcp port=5432' 'shm role=server port=6379' \
    'rdma peer=10.0.0.0/8' 'rdma peer=fd77::/64' 'smc *'
export SMCR_CONF=$conf
explain 10.1.2.3:5432 --program psql
grep -qx "decided by: $conf:3 (tcp port=5432)" "$work/explain.out" || fail "explain port: $(cat "$work/explain.out")"
grep -qx 'outcome: tcp (.*)' "$work/explain.out" || fail "explain port: $(cat "$work/explain.out")"
explain 192.0.2.1:22 --program sshd
grep -qx "decided by: $conf:2 (tcp program=sshd)" "$work/explain.out" || fail "explain program: $(cat "$work/explain.out")"
explain '[fd77::5]:5201' --role client
grep -qx "decided by: $conf:6 (rdma addr=fd77::/64)" "$work/explain.out" || fail "explain IPv6: $(cat "$work/explain.out")"
grep -qx 'outcome: rdma (.*)' "$work/explain.out" || fail "explain IPv6: $(cat "$work/explain.out")"
explain 127.0.0.1:6379 --role server
grep -qx "decided by: $conf:4 (shm role=server port=6379)" "$work/explain.out" || fail "explain server: $(cat "$work/explain.out")"
SMCR_PEERS=10.1.0.0/16 explain 10.1.2.3:5432
grep -qx 'decided by: environment SMCR_PEERS=10.1.0.0/16' "$work/explain.out" || fail "explain env: $(cat "$work/explain.out")"
SMCR_CONF=$work/bad.conf explain 10.1.2.3:80
grep -qxF "decided by: $error" "$work/explain.out" || fail "explain bad file: $(cat "$work/explain.out")"
grep -qx 'outcome: tcp (.*)' "$work/explain.out" || fail "explain bad file: $(cat "$work/explain.out")"
log "smc_run --explain: port, program, IPv6 prefix, server role, environment, bad file"
