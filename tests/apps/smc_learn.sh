#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The learned policy (src/smcr/learn.h) with real programs: nginx under
# smc_run listens on two ports. Port A only ever gets what SMC cannot help:
# curl processes, one short request and connection each. Port B gets long
# connections: wrk keep-alive. No curl knows what the earlier ones saw but
# through the user's shared table, so the first SMCR_LEARN_TCP_ON (8) curls
# are SMC and the later ones stay TCP (but for a probe), decided before
# connect: their logs say "tcp-fallback (client): reason 0x0a010000
# SHORTFLOWS" and nothing else. Then one python client connects to both ports and holds both
# connections while smcr-stat --json reads its live records: port A's is
# tcp-fallback SHORTFLOWS, port B's smc-shm. With SMCR_LEARN=0 a curl to
# port A is SMC again. Every body is checked (sha256).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need nginx curl wrk
export SMCR_LEARN=1 # the default, which smc_lib.sh turns off for the other tests
[[ -z ${SMCR_SANITIZER_PRELOAD:-} ]] || skip "curl cannot run with libasan preloaded (a sanitized build)"
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || stat_tool=$apps_dir/../../scripts/smcr-stat

mkdir -p "$work/www"
random_file "$work/www/page.bin" 2000
port_a=$(free_port 4)
port_b=$(free_port 4)
write_nginx_conf "$port_a" 256 "server { listen 127.0.0.1:$port_b; root $work/www; }"
start_server smcr nginx nginx -p "$work" -e "$work/nginx-stderr.log" -c "$work/nginx.conf"
wait_listen "$server_pid" "$port_a"
wait_listen "$server_pid" "$port_b"

# curl_a N [ENV...]: curl number N fetches the page from port A; prints
# "smc" or the fallback reason its log gives.
curl_a() {
    local n=$1
    shift
    run_client smcr "curl-$n" 30 env "$@" curl --noproxy '*' -sS -f --max-time 20 \
        -o "$work/got.$n" "http://127.0.0.1:$port_a/page.bin"
    [[ $exit_code -eq 0 ]] || fail "curl $n exited $exit_code"
    [[ $(sha "$work/got.$n") == "$(sha "$work/www/page.bin")" ]] || fail "curl $n: sha256 differs"
    if grep -q ': smc-shm (client)' "$work/curl-$n.smcr.err"; then
        echo smc
    else
        grep -o 'tcp-fallback (client): .*' "$work/curl-$n.smcr.err" || echo none
    fi
}

# Short is counted in bytes and control messages (and a 1 s bound), so the
# machine's load does not decide it; only the policy's probes (one connection
# in 16, and one a minute) may still be SMC after the eighth.
tcp=0
for n in $(seq 1 20); do
    got=$(curl_a "$n")
    if [[ $got == smc ]]; then
        [[ $n -le 8 ]] && continue
        log "curl $n: SMC (a probe)"
    else
        [[ $n -gt 8 ]] || fail "curl $n: '$got': nothing was learnt yet, it should be SMC"
        [[ $got == *'reason 0x0a010000 SHORTFLOWS, decided before connect' ]] ||
            fail "curl $n: '$got', not SMC nor the learned policy's fallback"
        tcp=$((tcp + 1))
    fi
done
[[ $tcp -ge 10 ]] || fail "only $tcp of curls 9-20 stayed TCP: the destination was not learnt"
log "port A: curls 1-8 SMC, $tcp of 9-20 TCP: $(grep -o 'tcp-fallback (client): .*' "$work/curl-20.smcr.err")"

run_client smcr wrk-b 30 wrk -t1 -c4 -d1s "http://127.0.0.1:$port_b/page.bin"
[[ $exit_code -eq 0 ]] || fail "wrk exited $exit_code"
! grep -q 'Socket errors\|Non-2xx' "$work/wrk-b.smcr.out" || fail "wrk: $(cat "$work/wrk-b.smcr.out")"
assert_smc_log wrk-b 4

# One process, one connection to each port, held while smcr-stat reads them.
"${smcr_prefix[@]}" "$PYTHON" - "$port_a" "$port_b" "$work/holder.ready" \
    >"$work/holder.smcr.out" 2>"$work/holder.smcr.err" <<'PY' &
import socket, sys, time
conns = []
for port in sys.argv[1:3]:
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.sendall(b"GET /page.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while len(got) < 2000 or b"\r\n\r\n" not in got:
        got += s.recv(65536)
    conns.append(s)
open(sys.argv[3], "w").close()
time.sleep(20)
PY
holder=$!
for ((i = 0; i < 200; i++)); do [[ -e $work/holder.ready ]] && break; sleep 0.05; done
[[ -e $work/holder.ready ]] || fail "the holding client did not connect"
records=$("$stat_tool" --json -p "$holder" | "$PYTHON" -c '
import json, sys
for c in json.load(sys.stdin)["connections"]:
    if c["state"] == "live":
        print(c["peer_port"], c["mode"], c["fallback_name"])')
kill "$holder"
wait "$holder" 2>/dev/null || true
log "the holding client's records in smcr-stat: $(tr '\n' ';' <<<"$records")"
grep -q "^$port_a tcp-fallback SHORTFLOWS\$" <<<"$records" ||
    fail "port A's connection is not tcp-fallback SHORTFLOWS in smcr-stat"
grep -q "^$port_b smc-shm None\$" <<<"$records" ||
    fail "port B's connection is not smc-shm in smcr-stat"

# SMCR_EXIT_REPORT: a wrk `Connection: close` run at the default log level writes nothing
# per connection and, at its exit, one line of counts: every connection, SMC (the policy's
# probes) or TCP for the learned policy's reason alone.
env SMCR_EXIT_REPORT=1 "$SMC_RUN" wrk -t1 -c2 -d1s -H "Connection: close" \
    "http://127.0.0.1:$port_a/page.bin" >"$work/wrk-report.out" 2>"$work/wrk-report.err" ||
    fail "wrk (Connection: close) exited $?"
requests=$(grep -o '[0-9]* requests in' "$work/wrk-report.out" | cut -d' ' -f1)
report=$(cat "$work/wrk-report.err")
log "wrk: $requests requests; its log: $report"
[[ $(grep -c . "$work/wrk-report.err") -eq 1 ]] || fail "wrk's log holds more than its exit report"
re='^smcr\[wrk [0-9]+\] exit: ([0-9]+) SMC, ([0-9]+) TCP \(SHORTFLOWS ([0-9]+)\), 0 handshake errors, 0 resets, '
[[ $report =~ $re ]] || fail "wrk's exit report is not SMC plus SHORTFLOWS only: $report"
smc=${BASH_REMATCH[1]} tcp=${BASH_REMATCH[2]} shortflows=${BASH_REMATCH[3]}
((tcp == shortflows && tcp > 0)) || fail "the report's TCP count $tcp is not its SHORTFLOWS $shortflows"
((smc + tcp >= requests && requests > 0)) ||
    fail "the report counts $((smc + tcp)) connections for $requests requests"

[[ $(curl_a off SMCR_LEARN=0) == smc ]] || fail "with SMCR_LEARN=0 a curl to port A is not SMC"
log "SMCR_LEARN=0: port A is SMC again"
