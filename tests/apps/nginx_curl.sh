#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# curl fetches files from nginx (a private instance: master + worker, not a
# daemon, own config in a temp dir, ephemeral port, 127.0.0.1 and ::1): the
# same bytes, statuses and exit codes with and without smc_run on both ends.
# Under smc_run every connection runs in SMC mode (same host): curl's logs and
# the nginx workers' stats (smcr-stat) say so.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
need nginx curl
# curl with libasan preloaded hangs in setlocale() even without smcr.
[[ -z ${SMCR_SANITIZER_PRELOAD:-} ]] || skip "curl cannot run with libasan preloaded (a sanitized build)"
[[ -n $PYTHON ]] || skip "python3 is not installed"

mkdir -p "$work/www"
random_file "$work/www/big.bin" $((3 * 1024 * 1024 + 17))
random_file "$work/www/small.bin" 1000
: >"$work/www/empty.bin"

# nginx_config PORT: a config that writes nothing outside $work.
nginx_config() {
    local port=$1 listen6=''
    have_ipv6 && listen6="listen [::1]:$port;"
    cat <<CONF
$([[ $(id -u) -eq 0 ]] && echo 'user root;')
daemon off;
master_process on;
worker_processes 2;
env XDG_RUNTIME_DIR;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 128; }
http {
    access_log off;
    default_type application/octet-stream;
    client_body_temp_path $work/tmp-body;
    proxy_temp_path $work/tmp-proxy;
    fastcgi_temp_path $work/tmp-fastcgi;
    uwsgi_temp_path $work/tmp-uwsgi;
    scgi_temp_path $work/tmp-scgi;
    server {
        listen 127.0.0.1:$port;
        $listen6
        root $work/www;
    }
}
CONF
}

# fetch MODE NAME URL: curl URL into $work/got.NAME; records status and checksum.
fetch() {
    local mode=$1 name=$2 url=$3
    rm -f "$work/got.$name"
    run_client "$mode" "curl-$name" 30 curl --noproxy '*' -sS -f --max-time 20 \
        -o "$work/got.$name" -w '%{http_code} %{size_download}\n' "$url"
    local got=missing
    [[ -f $work/got.$name ]] && got=$(sha "$work/got.$name")
    result "$name: exit $exit_code, status+size $(cat "$work/curl-$name.$mode.out"), sha256 $got"
    assert_log_mode "$mode" "curl-$name"
    [[ $mode == plain ]] || assert_smc_log "curl-$name" 1
}

workload() {
    local mode=$1 port pid file
    port=$(free_port 4)
    nginx_config "$port" >"$work/nginx.conf"
    start_server "$mode" nginx nginx -p "$work" -e "$work/nginx-stderr.log" -c "$work/nginx.conf"
    pid=$server_pid
    wait_listen "$pid" "$port"
    for file in big small empty; do
        fetch "$mode" "$file" "http://127.0.0.1:$port/$file.bin"
    done
    fetch "$mode" missing "http://127.0.0.1:$port/no-such-file"
    if have_ipv6; then
        fetch "$mode" big6 "http://[::1]:$port/big.bin"
    fi
    # Keep-alive: several files over one connection.
    run_client "$mode" curl-keepalive 30 curl --noproxy '*' -sS -f --max-time 20 \
        -o /dev/null -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\n' \
        "http://127.0.0.1:$port/big.bin" "http://127.0.0.1:$port/small.bin" "http://127.0.0.1:$port/big.bin"
    result "keep-alive: exit $exit_code, status+connects: $(tr '\n' ' ' <"$work/curl-keepalive.$mode.out")"
    assert_log_mode "$mode" curl-keepalive
    # one connection for the three files
    [[ $mode == plain ]] || assert_smc_log curl-keepalive 1

    assert_process_mode "$mode" "$pid" "nginx master"
    local worker workers
    workers=$(ps -o pid= --ppid "$pid")
    for worker in $workers; do
        assert_process_mode "$mode" "$worker" "nginx worker"
    done
    # big, small, empty, missing, (big6,) keep-alive
    [[ $mode == plain ]] || assert_smc_stats "nginx workers" 5 $workers
    stop_server "$pid"
    assert_log_mode "$mode" nginx
}

run_both workload
for file in big small empty; do
    grep -q "^$file: exit 0, status+size 200 [0-9]*, sha256 $(sha "$work/www/$file.bin")$" "$work/result.smcr" ||
        fail "$file.bin was not fetched intact"
done
grep -q '^missing: exit 22, status+size 404' "$work/result.smcr" || fail "the missing file did not give 404"
