#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# curl fetches files from python3 -m http.server on ::1 (127.0.0.1 if the host
# has no IPv6): same bytes, statuses and exit codes with and without smc_run.
# Under smc_run every connection runs in SMC mode (same host): curl's logs and
# the server's stats (smcr-stat) say so.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
need curl
# curl with libasan preloaded hangs in setlocale() even without smcr.
[[ -z ${SMCR_SANITIZER_PRELOAD:-} ]] || skip "curl cannot run with libasan preloaded (a sanitized build)"
[[ -n $PYTHON ]] || skip "python3 is not installed"

mkdir -p "$work/www"
random_file "$work/www/big.bin" $((2 * 1024 * 1024 + 3))
random_file "$work/www/small.bin" 4096
family=4 host=127.0.0.1 url_host=127.0.0.1
if have_ipv6; then family=6 host=::1 url_host='[::1]'; fi

workload() {
    local mode=$1 port pid name got
    port=$(free_port "$family")
    start_server "$mode" httpserver "$PYTHON" -m http.server --bind "$host" --directory "$work/www" "$port"
    pid=$server_pid
    wait_listen "$pid" "$port"
    for name in big small missing; do
        rm -f "$work/got.$name"
        run_client "$mode" "curl-$name" 30 curl --noproxy '*' -g -sS -f --max-time 20 \
            -o "$work/got.$name" -w '%{http_code} %{size_download}\n' "http://$url_host:$port/$name.bin"
        got=missing
        [[ -f $work/got.$name ]] && got=$(sha "$work/got.$name")
        result "$name: exit $exit_code, status+size $(cat "$work/curl-$name.$mode.out"), sha256 $got"
        assert_log_mode "$mode" "curl-$name"
        [[ $mode == plain ]] || assert_smc_log "curl-$name" 1
    done
    assert_process_mode "$mode" "$pid" "http.server"
    [[ $mode == plain ]] || assert_smc_stats http.server 3 "$pid"
    stop_server "$pid"
    assert_log_mode "$mode" httpserver
}

run_both workload
for name in big small; do
    grep -q "^$name: exit 0, status+size 200 [0-9]*, sha256 $(sha "$work/www/$name.bin")$" "$work/result.smcr" ||
        fail "$name.bin was not fetched intact"
done
grep -q '^missing: exit 22, status+size 404' "$work/result.smcr" || fail "the missing file did not give 404"
