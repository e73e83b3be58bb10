# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared by the smc_*.sh tests: real programs under smc_run on both ends of a
# loopback connection, each test asserting that the connections ran in SMC
# mode (same-host shared memory) from what the library itself reports (lib.sh's
# assert_smc_log, assert_smc_stats). The data is checked by checksums.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

# Every test here asserts SMC on each connection it makes; the learned policy
# would keep a workload of short connections on TCP after its first eight,
# and has its own test (smc_learn.sh, which turns it back on).
export SMCR_LEARN=0
[[ -n $PYTHON ]] || skip "python3 is not installed"

# socat_echo_case NAME EXPECT PORT SERVER_MODE SERVER_ENV CLIENT_ENV: $work/data echoed
# once by a socat server (SERVER_MODE: smcr or plain) on 127.0.0.1:PORT to a socat
# client under smc_run, each run with its own environment (space-separated NAME=VALUE
# lists); fails unless the echo's sha256 is the file's and the client's log contains
# EXPECT ("smc-shm (client)" or a fallback reason).
socat_echo_case() {
    local name=$1 expect=$2 port=$3 server_mode=$4
    local -a server_env client_env
    read -r -a server_env <<<"$5"
    read -r -a client_env <<<"$6"
    start_server "$server_mode" "$name-server" env "${server_env[@]}" \
        socat "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" EXEC:cat
    wait_listen "$server_pid" "$port"
    run_client_in "$work/data" smcr "$name-client" 30 env "${client_env[@]}" \
        socat -t 5 - "TCP4:127.0.0.1:$port"
    [[ $exit_code -eq 0 ]] || fail "$name: the client exited $exit_code"
    wait_exit "$server_pid" 10
    [[ $(sha "$work/$name-client.smcr.out") == "$(sha "$work/data")" ]] || fail "$name: the echo differs (sha256)"
    grep -q -- "$expect" "$work/$name-client.smcr.err" ||
        fail "$name: the client's log does not say '$expect': $(grep -m1 -o 'fd [0-9]*: .*' "$work/$name-client.smcr.err")"
    log "$name: echo intact; client: $(grep -m1 -o -- "$expect.*" "$work/$name-client.smcr.err")"
}

# iperf3_check_json FILE: "sent N received N bytes, R Mbit/s" from iperf3 -J's
# output; fails unless the counts are sane (something received, no more than sent).
iperf3_check_json() {
    "$PYTHON" - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
if "error" in doc:
    sys.exit(f"iperf3 error: {doc['error']}")
end = doc["end"]
sent, recv = end["sum_sent"]["bytes"], end["sum_received"]["bytes"]
print(f"sent {sent} received {recv} bytes, {end['sum_received']['bits_per_second'] / 1e6:.1f} Mbit/s")
sys.exit(0 if recv > 0 and sent >= recv else "bytes not sane")
PY
}

# write_nginx_conf PORT WORKER_CONNECTIONS [EXTRA_HTTP_LINE [LISTEN_OPTIONS]]:
# $work/nginx.conf for a foreground nginx (master + 2 workers, which inherit
# XDG_RUNTIME_DIR so their stats files land in this test's directory)
# serving $work/www on ${nginx_addr:-127.0.0.1}:PORT.
write_nginx_conf() {
    local port=$1 conns=$2 extra=${3:-} listen_opts=${4:-}
    cat >"$work/nginx.conf" <<CONF
$([[ $(id -u) -eq 0 ]] && echo 'user root;')
daemon off;
master_process on;
worker_processes 2;
env XDG_RUNTIME_DIR;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections $conns; }
http {
    access_log off;
    sendfile on;
    $extra
    default_type application/octet-stream;
    client_body_temp_path $work/tmp-body;
    proxy_temp_path $work/tmp-proxy;
    fastcgi_temp_path $work/tmp-fastcgi;
    uwsgi_temp_path $work/tmp-uwsgi;
    scgi_temp_path $work/tmp-scgi;
    server {
        listen ${nginx_addr:-127.0.0.1}:$port${listen_opts:+ $listen_opts};
        root $work/www;
    }
}
CONF
}

# write_wrk_checker FILE: $work/check.lua, a wrk script that counts the
# responses whose status is 200 and whose body equals FILE ("good") and the
# others ("bad"), summed over wrk's threads on a line "checked: good G bad B".
write_wrk_checker() {
    cat >"$work/check.lua" <<LUA
local f = assert(io.open("$1", "rb"))
local expected = f:read("*a")
f:close()
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) good = 0; bad = 0 end
function response(status, headers, body)
    if status == 200 and body == expected then good = good + 1 else bad = bad + 1 end
end
function done(summary, latency, requests)
    local g, b = 0, 0
    for _, t in ipairs(threads) do g = g + t:get("good"); b = b + t:get("bad") end
    io.write(string.format("checked: good %d bad %d\n", g, b))
end
LUA
}

# own_outcome WHO: "SMC FALLBACKS REASONS" summed over the stats that processes
# recorded themselves as $STATS_DIR/stats.WHO.* (own_stats.py: a process's stats
# file vanishes when it exits), or "none" when none recorded any (smcr not loaded).
own_outcome() {
    local files
    files=$(compgen -G "$STATS_DIR/stats.$1.*") || files=
    # shellcheck disable=SC2086 # the names are this test's own, without blanks
    "$PYTHON" "$apps_dir/stats_summary.py" --none $files
}
