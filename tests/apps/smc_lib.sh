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
