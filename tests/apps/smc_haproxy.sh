#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# haproxy in front of nginx, every process under smc_run: haproxy accepts its
# clients and connects to nginx, and forwards bodies with splice() through
# pipes (`option splice-auto`, splice-request, splice-response), which must
# carry an SMC connection's bytes as they carry TCP's. curl fetches a 3 MiB
# file (sha256 equal to the file's), wrk checks every keep-alive response byte
# for byte; haproxy's own stats show SMC on both sides and no fallback, and
# nginx's workers served their connections in SMC mode too.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need haproxy nginx wrk curl

mkdir -p "$work/www"
random_file "$work/www/big.bin" $((3 << 20))
random_file "$work/www/page.bin" 16384
nginx_port=$(free_port 4)
port=$(free_port 4)
write_nginx_conf "$nginx_port" 256 'keepalive_requests 1000000;'
cat >"$work/haproxy.cfg" <<CFG
global
    maxconn 512
defaults
    mode http
    option splice-auto
    option splice-request
    option splice-response
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:$port
    default_backend be
backend be
    http-reuse always
    server nginx 127.0.0.1:$nginx_port
CFG
write_wrk_checker "$work/www/page.bin"

start_server smcr nginx nginx -p "$work" -e "$work/nginx-stderr.log" -c "$work/nginx.conf"
nginx_pid=$server_pid
wait_listen "$nginx_pid" "$nginx_port"
start_server smcr haproxy haproxy -f "$work/haproxy.cfg" -db
haproxy_pid=$server_pid
wait_listen "$haproxy_pid" "$port"

for i in 1 2; do
    run_client smcr "curl$i" 60 curl -sS -o "$work/got$i" "http://127.0.0.1:$port/big.bin"
    [[ $exit_code -eq 0 ]] || fail "curl$i exited $exit_code: $(cat "$work/curl$i.smcr.err" | tail -n 3)"
    [[ $(sha "$work/got$i") == "$(sha "$work/www/big.bin")" ]] ||
        fail "curl$i: $(stat -c %s "$work/got$i") bytes, not the file (sha256)"
    assert_smc_log "curl$i" 1
done
log "3 MiB through haproxy's splice twice, intact"

run_client smcr wrk 60 wrk -t 2 -c 8 -d 3s -s "$work/check.lua" "http://127.0.0.1:$port/page.bin"
[[ $exit_code -eq 0 ]] || fail "wrk exited $exit_code"
grep -q 'Socket errors' "$work/wrk.smcr.out" && fail "wrk: $(grep 'Socket errors' "$work/wrk.smcr.out")"
grep -q 'Non-2xx or 3xx' "$work/wrk.smcr.out" && fail "wrk: $(grep 'Non-2xx or 3xx' "$work/wrk.smcr.out")"
read -r good bad < <(sed -n 's/^checked: good \([0-9]*\) bad \([0-9]*\)$/\1 \2/p' "$work/wrk.smcr.out")
[[ -n ${good:-} && $bad -eq 0 && $good -ge 100 ]] ||
    fail "wrk: good ${good:-none}, bad ${bad:-none}"
log "wrk: $good responses of 16 KiB, every body equal to the file; $(grep -m1 'Requests/sec' "$work/wrk.smcr.out" | tr -s ' ')"
assert_smc_log wrk 8

# haproxy: its clients' connections and its own to nginx (at least one).
assert_smc_stats haproxy 11 "$haproxy_pid"
roles=$("$SMCR_STAT" show --json -a --dir "$XDG_RUNTIME_DIR/smcr" | "$PYTHON" -c '
import json, sys
pid = int(sys.argv[1])
print(" ".join(sorted({c["role"] for c in json.load(sys.stdin)["connections"]
                       if c["pid"] == pid and c["mode"] == "smc-shm"})))' "$haproxy_pid")
[[ $roles == "client server" ]] || fail "haproxy's SMC connections have roles '$roles'"
assert_smc_stats "nginx workers" 1 $(ps -o pid= --ppid "$nginx_pid")
