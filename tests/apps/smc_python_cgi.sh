#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CGI: python3 -m http.server --cgi reads the request from an SMC connection,
# then gives the connection's socket to a CGI program (fork, dup2 onto 0 and 1,
# exec), which reads a POST body from it and writes the answer into it. Under
# smc_run on both ends every connection starts in SMC mode and goes on over
# TCP when its socket leaves for the CGI program: curl gets every answer
# intact, the same statuses and checksums as without smc_run, and both logs
# say that the connection went on over TCP (none was reset).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need curl
[[ -z ${SMCR_SANITIZER_PRELOAD:-} ]] || skip "curl cannot run with libasan preloaded (a sanitized build)"

mkdir -p "$work/www/cgi-bin"
cat >"$work/www/cgi-bin/hello.sh" <<'SH'
#!/bin/sh
printf 'Content-Type: application/octet-stream\n\n'
head -c 300000 /dev/zero | tr '\0' 'a'
SH
cat >"$work/www/cgi-bin/sum.sh" <<'SH'
#!/bin/sh
printf 'Content-Type: text/plain\n\n'
head -c "$CONTENT_LENGTH" | sha256sum
SH
chmod +x "$work/www/cgi-bin/"*.sh
random_file "$work/body.bin" $((3 * 1000 * 1000))
body_sum=$(sha "$work/body.bin")
hello_sum=$(head -c 300000 /dev/zero | tr '\0' 'a' | sha256sum | cut -d' ' -f1)

workload() {
    local mode=$1 port pid i n name
    port=$(free_port 4)
    start_server "$mode" cgiserver "$PYTHON" -m http.server --cgi --bind 127.0.0.1 \
        --directory "$work/www" "$port"
    pid=$server_pid
    wait_listen "$pid" "$port"
    for i in 1 2 3; do
        run_client "$mode" "get-$i" 30 curl --noproxy '*' -sS -f --max-time 20 \
            -o "$work/got.$i" -w '%{http_code}\n' "http://127.0.0.1:$port/cgi-bin/hello.sh"
        result "GET $i: exit $exit_code, status $(cat "$work/get-$i.$mode.out"), sha256 $(sha "$work/got.$i")"
        run_client "$mode" "post-$i" 30 curl --noproxy '*' -sS -f --max-time 20 \
            --data-binary "@$work/body.bin" -H 'Content-Type: application/octet-stream' \
            "http://127.0.0.1:$port/cgi-bin/sum.sh"
        result "POST $i: exit $exit_code, answer $(cut -d' ' -f1 "$work/post-$i.$mode.out")"
        if [[ $mode == smcr ]]; then
            assert_smc_log "get-$i" 1
            assert_smc_log "post-$i" 1
            for name in "get-$i" "post-$i"; do
                grep -q 'the peer goes on over TCP' "$work/$name.smcr.err" ||
                    fail "$name: curl's log does not say that it followed the server onto TCP"
            done
        fi
    done
    assert_process_mode "$mode" "$pid" "http.server"
    stop_server "$pid"
    assert_log_mode "$mode" cgiserver
    if [[ $mode == smcr ]]; then
        n=$(grep -c 'this end goes on over TCP' "$work/cgiserver.smcr.err" || true)
        [[ $n -eq 6 ]] || fail "the server's log says $n connection(s) went on over TCP, expected 6"
        ! grep -q 'SMC connection reset' "$work/cgiserver.smcr.err" ||
            fail "the server reset a connection: $(grep 'SMC connection reset' "$work/cgiserver.smcr.err" | head -1)"
    fi
}

run_both workload
for i in 1 2 3; do
    grep -q "^GET $i: exit 0, status 200, sha256 $hello_sum$" "$work/result.smcr" ||
        fail "GET $i: the CGI program's answer did not arrive intact"
    grep -q "^POST $i: exit 0, answer $body_sum$" "$work/result.smcr" ||
        fail "POST $i: the CGI program did not get the 3 MB body intact"
done
log "CGI over SMC: 3 GETs of 300 kB and 3 POSTs of 3 MB intact; every connection went on over TCP"
