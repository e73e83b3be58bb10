#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# curl fetches files from nginx (master + 2 workers, epoll, sendfile), both
# under smc_run: one connection per file and a keep-alive connection for
# three; sha256 equal; curl's log and the workers' published stats say SMC.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need nginx curl
[[ -z ${SMCR_SANITIZER_PRELOAD:-} ]] || skip "curl cannot run with libasan preloaded (a sanitized build)"

mkdir -p "$work/www"
random_file "$work/www/big.bin" $((20 * 1024 * 1024 + 17))
random_file "$work/www/small.bin" 1000
port=$(free_port 4)
write_nginx_conf "$port" 128
mode=smcr
start_server smcr nginx nginx -p "$work" -e "$work/nginx-stderr.log" -c "$work/nginx.conf"
pid=$server_pid
wait_listen "$pid" "$port"
for file in big small; do
    run_client smcr "curl-$file" 30 curl --noproxy '*' -sS -f --max-time 20 \
        -o "$work/got.$file" "http://127.0.0.1:$port/$file.bin"
    [[ $exit_code -eq 0 ]] || fail "curl $file exited $exit_code"
    [[ $(sha "$work/got.$file") == "$(sha "$work/www/$file.bin")" ]] || fail "$file: sha256 differs"
    assert_smc_log "curl-$file" 1
done
run_client smcr curl-keepalive 30 curl --noproxy '*' -sS -f --max-time 20 \
    -o "$work/ka1" -o "$work/ka2" -o "$work/ka3" -w '%{num_connects} ' \
    "http://127.0.0.1:$port/big.bin" "http://127.0.0.1:$port/small.bin" "http://127.0.0.1:$port/big.bin"
[[ $exit_code -eq 0 ]] || fail "keep-alive curl exited $exit_code"
[[ $(tr -d ' \n' <"$work/curl-keepalive.smcr.out") == 100 ]] || fail "keep-alive: not one connection ($(cat "$work/curl-keepalive.smcr.out"))"
for f in ka1 ka3; do [[ $(sha "$work/$f") == "$(sha "$work/www/big.bin")" ]] || fail "keep-alive $f differs"; done
[[ $(sha "$work/ka2") == "$(sha "$work/www/small.bin")" ]] || fail "keep-alive small differs"
assert_smc_log curl-keepalive 1
# shellcheck disable=SC2046
assert_smc_stats "nginx workers" 3 $(ps -o pid= --ppid "$pid")
