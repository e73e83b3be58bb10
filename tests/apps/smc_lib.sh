# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared by the smc_*.sh tests: real programs under smc_run on both ends of a
# loopback connection, each test asserting that the connections ran in SMC
# mode (same-host shared memory) from what the library itself reports:
#  - the SMC_DEBUG log (smc_run -d): one line per connection,
#    "fd N: smc-shm (client|server): ..." or "fd N: tcp-fallback (...): reason";
#  - the stats each smcr process publishes (include/smcr/stats_abi.h), read
#    while the server is alive (a private XDG_RUNTIME_DIR per test run).
# The data is checked by checksums. Sourced after lib.sh's conventions.
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

export XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
# Every test here asserts SMC on each connection it makes; the learned policy
# would keep a workload of short connections on TCP after its first eight,
# and has its own test (smc_learn.sh, which turns it back on).
export SMCR_LEARN=0
[[ -n $PYTHON ]] || skip "python3 is not installed"

# smc_lines NAME: how many connections NAME's log says ran SMC ($smc_mode:
# smc-shm here, smc-r in the VM's tests/rxe/apps.sh).
smc_mode=smc-shm
smc_lines() { grep -c ": $smc_mode (" "$work/$1.smcr.err" || true; }

# assert_smc_log NAME MIN: NAME (run with mode smcr) logged at least MIN SMC
# connections and no fallback.
assert_smc_log() {
    local name=$1 min=$2 n fallbacks
    n=$(smc_lines "$name")
    fallbacks=$(grep -c ': tcp-fallback (' "$work/$name.smcr.err" || true)
    if [[ $fallbacks -ne 0 ]]; then
        grep ': tcp-fallback (' "$work/$name.smcr.err" | head -3 >&2
        fail "$name: $fallbacks connection(s) fell back to TCP"
    fi
    [[ $n -ge $min ]] || fail "$name: $n connection(s) in SMC mode in its log, expected at least $min"
    log "$name: $n connection(s) in SMC mode (SMC_DEBUG log), no fallback"
}

# stats_of PID FIELD: a counter of live smcr process PID, read from the stats
# file it publishes (include/smcr/stats_abi.h: magic, version, sizes, pid,
# comm[16], then 64-bit handshakes_smc, conns_open, fallbacks, ...); -1 if the
# process publishes none. Read directly, so the test depends on the ABI only.
stats_of() {
    "$PYTHON" - "$XDG_RUNTIME_DIR/smcr/stats.$1" "$2" <<'PY'
import struct, sys
fields = ["handshakes_smc", "conns_open", "fallbacks", "handshake_errors", "aborts"]
try:
    head = open(sys.argv[1], "rb").read(40 + 8 * len(fields))
except OSError:
    print(-1)
    sys.exit(0)
magic, version = struct.unpack_from("<II", head, 0)
if magic != 0x534D4353 or version not in (1, 2):  # 2: v1 + per-record seqlock
    sys.exit(f"{sys.argv[1]}: not an smcr stats file (magic {magic:#x}, version {version})")
print(struct.unpack_from("<Q", head, 40 + 8 * fields.index(sys.argv[2]))[0])
PY
}

# assert_smc_stats WHAT MIN PID...: the processes together made at least MIN SMC
# handshakes and no fallback, by their published stats.
assert_smc_stats() {
    local what=$1 min=$2 pid smc=0 fb=0 n
    shift 2
    for pid in "$@"; do
        n=$(stats_of "$pid" handshakes_smc)
        [[ $n -ge 0 ]] || continue
        smc=$((smc + n))
        fb=$((fb + $(stats_of "$pid" fallbacks)))
    done
    [[ $fb -eq 0 ]] || fail "$what: $fb fallback(s) in the stats"
    [[ $smc -ge $min ]] || fail "$what: $smc SMC handshake(s) in the stats, expected at least $min"
    log "$what: $smc SMC handshake(s) in its stats, no fallback"
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
