#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Real programs over smcr's SMC-R, run INSIDE scripts/rxe-vm (-n pair) by the meson
# suite 'rxe': every server on 10.77.0.2 (rxe1), every client on 10.77.0.1 (rxe0), both
# under smc_run with SMCR_TRANSPORT=rdma (the two "hosts" share one kernel) and
# SMCR_PEERS naming the server. For each program:
#  - the data is intact (checksums, or the program's own counts);
#  - the connections were SMC-R: the clients' SMC_DEBUG lines say smc-r, and smcr-stat
#    --json (this build's tool) shows the server's records as smc-r on rxe1 with no
#    fallback, and a long-running client's records as smc-r on rxe0;
#  - RoCEv2 (UDP 4791) on veth0 carried at least the payload while TCP carried only the
#    CLC handshakes and the connections' open/close (a few KiB per connection): with
#    one namespace and policy routing both cross the veth pair (docs/rxe-vm.md).
# Plus: IPv6 (fd77::1 -> fd77::2) in SMC-R mode, and a capture on veth0 decoded by
# tshark: our CLC over TCP, CDC over RoCEv2.
# socat moves a 32 MiB file each way (RXE_SOCAT_MIB to change it): its ring of 256 KiB wraps
# 128 times, at about 4 MB/s over SMC-R with socat's 8 KiB writes under TCG on a loaded
# 2-core host (a file of more than ~400 MiB and its copy need rxe-vm -m for the tmpfs). Other durations stay small because QEMU's TCG
# makes soft-RoCE slow: iperf3 runs 1 s. Fail-fast, like the host's apps tests (lib.sh).
#   usage: apps.sh   (environment as tests/apps: SMC_RUN, SMCR_LIB, SMCR_BUILD_DIR)
source "$(dirname -- "${BASH_SOURCE[0]}")/../apps/smc_lib.sh"
source "$(dirname -- "${BASH_SOURCE[0]}")/wire_lib.sh"
[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || skip "run me inside 'scripts/rxe-vm -n pair'"
smc_mode=smc-r
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || fail "no smcr-stat in SMCR_BUILD_DIR"
# Both "hosts" run smcr: each lists the other (the server too: see socat_move).
export SMCR_TRANSPORT=rdma SMCR_PEERS=10.77.0.0/24,fd77::/64
A=10.77.0.1 B=10.77.0.2
wire_setup

# every log line says when (seconds since the start): the VM is slow, CI time is counted
log() { printf '[%s +%ss] %s\n' "$test_name" "$SECONDS" "$*"; }

# ---- evidence helpers ---------------------------------------------------------------

# wire_begin: remember veth0's counters before a case.
wire_begin() { read -r roce0 tcp0 <<<"$(wire_bytes)"; }

# wire_end NAME PAYLOAD CONNS: since wire_begin, RoCEv2 carried >= PAYLOAD bytes and TCP
# at most 6 KiB per connection (CLC ~1.3 KiB incl. headers, SYN/FIN/ACKs) + 16 KiB.
wire_end() {
    local name=$1 payload=$2 conns=$3 roce tcp
    read -r roce tcp <<<"$(wire_bytes)"
    roce=$((roce - roce0)) tcp=$((tcp - tcp0))
    [[ $roce -ge $payload ]] || fail "$name: RoCEv2 carried $roce bytes on veth0, less than the $payload bytes of payload"
    [[ $tcp -le $((conns * 6144 + 16384)) ]] ||
        fail "$name: TCP carried $tcp bytes on veth0 for $conns connection(s): not quiet"
    log "$name: veth0 carried $roce bytes of RoCEv2 and $tcp bytes of TCP ($conns connections)"
}

# stat_collect FILE PID...: the processes' smcr-stat --json -a records (live, and closed
# ones not yet reused) into FILE.
stat_collect() {
    local out=$1 pid
    shift
    for pid in "$@"; do "$stat_tool" --json -a -p "$pid"; done >"$out"
}

# stat_verify NAME FILE DEVICE MIN: the records in FILE are all smc-r on DEVICE, at least
# MIN of them.
stat_verify() {
    local name=$1 file=$2 dev=$3 min=$4
    "$PYTHON" - "$file" "$dev" "$min" <<'PY' || fail "$name: smcr-stat does not show SMC-R on $dev"
import json, sys
path, dev, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path).read()
conns, dec = [], json.JSONDecoder()
while text.strip():
    doc, end = dec.raw_decode(text.lstrip())
    text = text.lstrip()[end:]
    conns += doc["connections"]
bad = [c for c in conns if c["mode"] != "smc-r" or c["device"] != dev]
if bad:
    sys.exit("not smc-r on %s: %s" % (dev, [(c["mode"], c["device"], c["fallback_name"]) for c in bad]))
if len(conns) < want:
    sys.exit("%d smc-r record(s), expected at least %d" % (len(conns), want))
moved = sum(c["bytes_sent"] + c["bytes_received"] for c in conns)
print("%d smc-r record(s) on %s, %d bytes moved" % (len(conns), dev, moved))
PY
}

# stat_check NAME DEVICE MIN PID...: stat_verify on the processes' records now.
stat_check() {
    local name=$1 dev=$2 min=$3
    shift 3
    stat_collect "$work/$name.stat.json" "$@" || fail "$name: smcr-stat failed"
    stat_verify "$name" "$work/$name.stat.json" "$dev" "$min"
}
# stat_check_log: stat_check, its summary in the test's log.
stat_check_log() {
    local out
    out=$(stat_check "$@") || exit 1
    log "$1: smcr-stat: $out"
}

# sample_client NAME PID DEVICE MIN: while client PID runs, wait (<= 60 s) until its
# smcr-stat shows at least MIN SMC-R records, then check that same sample: the client
# may exit right after it (iperf3 -t 1), and its stats file goes with it.
sample_client() {
    local name=$1 pid=$2 dev=$3 min=$4 i n out file=$work/$1-client.stat.json
    for ((i = 0; i < 600; i++)); do
        stat_collect "$file" "$pid" 2>/dev/null || true
        n=$(grep -c '"mode": "smc-r"' "$file" || true)
        [[ $n -ge $min ]] && break
        kill -0 "$pid" 2>/dev/null || fail "$name: client $pid ended before its records were read"
        sleep 0.1
    done
    out=$(stat_verify "$name-client" "$file" "$dev" "$min") || exit 1
    log "$name-client: smcr-stat: $out"
}

mbps() { "$PYTHON" -c "import sys; print('%.1f' % (int(sys.argv[1]) / 1e6 / float(sys.argv[2])))" "$@"; }

need iperf3 sockperf redis-server redis-benchmark nginx curl socat tshark dumpcap

# ---- the wire, decoded by tshark: CLC over TCP, CDC over RoCEv2 -----------------------------------

port=$(free_port 4)
start_server smcr cap-server socat "TCP4-LISTEN:$port,bind=$B,reuseaddr" EXEC:cat
cpid=$server_pid
wait_listen "$cpid" "$port"
dumpcap -q -i veth0 -f "udp port 4791 or tcp port $port" -w "$work/cap.pcapng" >"$work/dumpcap.log" 2>&1 &
dpid=$!
for ((i = 0; i < 100; i++)); do grep -q 'Capturing on' "$work/dumpcap.log" && break; sleep 0.1; done
head -c 100000 /dev/urandom >"$work/cap.in"
run_client_in "$work/cap.in" smcr cap-client 60 socat -t 10 - "TCP4:$B:$port,bind=$A"
[[ $(sha "$work/cap-client.smcr.out") == "$(sha "$work/cap.in")" ]] || fail "capture echo differs"
assert_smc_log cap-client 1
sleep 1
kill -INT "$dpid"; wait "$dpid" || true
stop_server "$cpid"

# ---- half-close: the client shuts down writing (CDC "done writing"; between two smcr ends
# the TCP FIN waits for the close, since the stream may yet go on over TCP: design §8), the
# server answers 3 s later; a half-close is no reset ------------------------------------------

port=$(free_port 4)
start_server smcr halfclose-server "$PYTHON" -c '
import hashlib, socket, sys, time
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
c, _ = l.accept()
h = hashlib.sha256()
while (b := c.recv(65536)):
    h.update(b)
time.sleep(3)
c.sendall(h.hexdigest().encode() * 1000)
c.close()' "$B" "$port"
hpid=$server_pid
wait_listen "$hpid" "$port"
run_client_in "$work/cap.in" smcr halfclose-client 60 "$PYTHON" -c '
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), source_address=(sys.argv[3], 0))
s.sendall(sys.stdin.buffer.read())
s.shutdown(socket.SHUT_WR)
out = b""
while (b := s.recv(65536)):
    out += b
sys.stdout.write(out.decode())' "$B" "$port" "$A"
want=$(sha "$work/cap.in")
[[ $exit_code -eq 0 && $(head -c 64 "$work/halfclose-client.smcr.out") == "$want" &&
   $(stat -c %s "$work/halfclose-client.smcr.out") -eq 64000 ]] ||
    fail "half-close: the answer after the client's FIN did not arrive whole (exit $exit_code, $(stat -c %s "$work/halfclose-client.smcr.out") bytes; $(tail -2 "$work/halfclose-client.smcr.err"))"
grep -q 'smc-r (client)' "$work/halfclose-client.smcr.err" || fail "half-close: the client did not run SMC-R"
log "half-close: the server's answer 3 s after the client's FIN arrived whole over SMC-R"
stop_server "$hpid"
# kept for a look on the host (the build directory is shared with the guest)
cp "$work/cap.pcapng" "${SMCR_BUILD_DIR}/meson-logs/rxe-apps.pcapng" 2>/dev/null || true
# One tshark pass (each start costs tens of seconds under TCG).
tshark -r "$work/cap.pcapng" -T fields -E occurrence=f -e frame.number -e udp.dstport \
    -e smc.clc_msg -e smc.rmbe.ctrl.seqno -e smc.llc_msg -e _ws.malformed \
    -e _ws.expert.severity -e _ws.col.Info >"$work/cap.txt" || fail "tshark cannot read the capture"
"$PYTHON" - "$work/cap.txt" <<'PY' || fail "tshark does not show our CLC over TCP and CDC over RoCEv2 cleanly"
import sys
clc, cdc, llc, bad = [], 0, 0, []
for line in open(sys.argv[1]):
    f = (line.rstrip("\n").split("\t") + [""] * 8)[:8]
    frame, udp, clc_msg, seqno, llc_msg, malformed, severity, info = f
    if clc_msg:
        clc.append(int(clc_msg))
    if udp == "4791" and seqno:
        cdc += 1
    elif udp == "4791" and llc_msg:
        llc += 1
    # error-level expert items (severity 8388608 = error) or the malformed mark
    if malformed or (severity and int(severity, 0) >= 0x800000):
        bad.append((int(frame), udp, info))
print("CLC messages over TCP (1 Proposal, 2 Accept, 3 Confirm):", clc)
print("CDC messages over RoCEv2:", cdc, "; other SMC messages over RoCEv2 (LLC):", llc)
# tshark 4.0 cannot decode SMC-Rv2 LLC (CONFIRM LINK v2 is malformed to it, docs/rxe-vm.md):
# a malformed RoCEv2 frame that is no CDC is reported; anything else malformed fails.
llc_bad = [b for b in bad if b[1] == "4791"]
other_bad = [b for b in bad if b[1] != "4791"]
if llc_bad:
    print("RoCEv2 frames tshark 4.0 marks malformed (SMC-Rv2 LLC):", llc_bad)
ok = clc[:3] == [1, 2, 3] and cdc >= 2 and not other_bad
sys.exit(0 if ok else "missing CLC/CDC, or malformed frames %s" % other_bad)
PY
log "tshark on veth0: our CLC over TCP and CDC over RoCEv2 decode (details above)"

# ---- iperf3: both directions and 8 parallel streams --------------------------------------------

port=$(free_port 4)
start_server smcr iperf3-server iperf3 -s -B $B -p "$port"
ipid=$server_pid
wait_listen "$ipid" "$port"
conns=0
for run in "send:2:" "reverse:2:-R" "parallel:9:-P 8"; do
    name=${run%%:*} rest=${run#*:}
    min=${rest%%:*}
    read -ra flags <<<"${rest#*:}"
    wire_begin
    exit_code=0
    timeout -k 5 90 "${smcr_prefix[@]}" iperf3 -c $B -B $A -p "$port" -t 1 -J "${flags[@]}" \
        >"$work/iperf3-$name.smcr.out" 2>"$work/iperf3-$name.smcr.err" &
    tpid=$!
    [[ $name == parallel ]] && sample_client "iperf3-$name" "$(client_pid $tpid)" rxe0 8
    wait "$tpid" || exit_code=$?
    [[ $exit_code -eq 0 ]] || fail "iperf3 $name exited $exit_code"
    res=$(iperf3_check_json "$work/iperf3-$name.smcr.out") || fail "iperf3 $name: bad result"
    log "iperf3 $name over SMC-R: $res"
    recv=$(awk '{ print $4 }' <<<"$res")
    assert_smc_log "iperf3-$name" "$min"
    wire_end "iperf3 $name" "$recv" "$min"
    conns=$((conns + $(smc_lines "iperf3-$name")))
done
assert_smc_stats "iperf3 server" "$conns" "$ipid"
stat_check_log iperf3-server rxe1 9 "$ipid"
stop_server "$ipid"

# ---- sockperf ping-pong ---------------------------------------------------------------------

port=$(free_port 4)
start_server smcr sockperf-server sockperf sr --tcp -i $B -p "$port"
spid=$server_pid
wait_listen "$spid" "$port"
wire_begin
run_client smcr sockperf-pp 60 sockperf pp --tcp -i $B -p "$port" --client_ip $A -t 1 -m 14
[[ $exit_code -eq 0 ]] || fail "sockperf pp exited $exit_code"
grep -q 'Summary: Latency is' "$work/sockperf-pp.smcr.out" || fail "sockperf printed no latency"
log "sockperf ping-pong over SMC-R: $(grep -o 'Summary: Latency is.*' "$work/sockperf-pp.smcr.out"), p50 $(grep -oE 'percentile 50.000 = *[0-9.]+' "$work/sockperf-pp.smcr.out" | grep -oE '[0-9.]+$') usec"
assert_smc_log sockperf-pp 1
wire_end "sockperf ping-pong" 1000 2
assert_smc_stats "sockperf server" 1 "$spid"
stat_check_log sockperf-server rxe1 1 "$spid"
stop_server "$spid"

# ---- redis-benchmark against redis-server ----------------------------------------------------

port=$(free_port 4)
start_server smcr redis-server redis-server --bind $B --port "$port" --save '' --appendonly no --protected-mode no
rpid=$server_pid
wait_listen "$rpid" "$port"
wire_begin
run_client smcr redis-bench 120 redis-benchmark -h $B -p "$port" -c 4 -n 400 -t set,get -q
[[ $exit_code -eq 0 ]] || fail "redis-benchmark exited $exit_code"
grep -q 'GET: ' "$work/redis-bench.smcr.out" || fail "redis-benchmark reported no GET"
log "redis-benchmark over SMC-R: $(tr '\r' '\n' <"$work/redis-bench.smcr.out" | grep -oE '^(SET|GET): [0-9.]+ requests per second.*' | tr '\n' ' ')"
assert_smc_log redis-bench 8
nr=$(smc_lines redis-bench)
# 400 SETs + 400 GETs of 3-byte values: each request and reply is tens of bytes
wire_end "redis-benchmark" 20000 "$nr"
assert_smc_stats "redis-server" "$nr" "$rpid"
stat_check_log redis-server rxe1 1 "$rpid"
stop_server "$rpid"

# ---- curl against nginx: keep-alive and Connection: close --------------------------------------

port=$(free_port 4)
mkdir -p "$work/www"
random_file "$work/www/big.bin" $((1024 * 1024 + 11))
random_file "$work/www/small.bin" 1000
nginx_addr=$B write_nginx_conf "$port" 128
start_server smcr nginx nginx -p "$work" -e "$work/nginx-stderr.log" -c "$work/nginx.conf"
npid=$server_pid
wait_listen "$npid" "$port"
url=http://$B:$port
wire_begin
run_client smcr curl-keepalive 60 curl --noproxy '*' -sS -f --max-time 50 --interface $A \
    -o "$work/got.1" "$url/big.bin" -o "$work/got.2" "$url/small.bin" -o "$work/got.3" "$url/big.bin"
[[ $exit_code -eq 0 ]] || fail "curl keep-alive exited $exit_code"
for i in 1 3; do [[ $(sha "$work/got.$i") == "$(sha "$work/www/big.bin")" ]] || fail "keep-alive: big.bin sha256 differs"; done
[[ $(sha "$work/got.2") == "$(sha "$work/www/small.bin")" ]] || fail "keep-alive: small.bin differs"
[[ $(smc_lines curl-keepalive) -eq 1 ]] || fail "keep-alive: $(smc_lines curl-keepalive) SMC-R connections, expected 1 reused"
assert_smc_log curl-keepalive 1
wire_end "curl keep-alive (3 requests, 1 connection)" $((2 * 1024 * 1024)) 1
wire_begin
run_client smcr curl-close 60 curl --noproxy '*' -sS -f --max-time 50 --interface $A -H 'Connection: close' \
    -o "$work/got.4" "$url/big.bin" -o "$work/got.5" "$url/small.bin" -o "$work/got.6" "$url/small.bin"
[[ $exit_code -eq 0 ]] || fail "curl Connection: close exited $exit_code"
[[ $(sha "$work/got.4") == "$(sha "$work/www/big.bin")" ]] || fail "close: big.bin sha256 differs"
assert_smc_log curl-close 3
wire_end "curl Connection: close (3 requests, 3 connections)" $((1024 * 1024)) 3
assert_smc_stats "nginx workers" 4 $(descendants "$npid")
stat_check_log nginx-workers rxe1 1 $(descendants "$npid")
stop_server "$npid"

# ---- socat: a file each way, and over IPv6 ---------------------------------------------------------

# socat_move NAME DIRECTION FAMILY BYTES: up = client sends, down = server sends
socat_move() {
    local name=$1 dir=$2 fam=$3 size=$4 port listen connect t0 t1 pid want bound
    # one file per size, made and hashed once (256 MiB take a while under TCG)
    if [[ ! -f $work/file.$size ]]; then
        rm -f "$work"/file.*
        random_file "$work/file.$size" "$size"
        sha "$work/file.$size" >"$work/file.$size.sha"
    fi
    ln -sf "file.$size" "$work/file"
    want=$(<"$work/file.$size.sha")
    # a bound for slow machines: 1 MB/s at least, plus the handshake
    bound=$((240 + size / 1000000))
    port=$(free_port 4)
    if [[ $fam == 6 ]]; then
        listen="TCP6-LISTEN:$port,bind=[fd77::2],reuseaddr" connect="TCP6:[fd77::2]:$port,bind=[fd77::1]"
    else
        listen="TCP4-LISTEN:$port,bind=$B,reuseaddr" connect="TCP4:$B:$port,bind=$A"
    fi
    if [[ $dir == up ]]; then
        start_server smcr "$name-server" socat -u "$listen" "CREATE:$work/$name.got"
    else
        # A server that writes first waits SMCR_SPEAK_FIRST_WAIT_MS (50 ms) for the
        # Proposal of a client in SMCR_PEERS; under TCG the client's verbs set-up
        # before it takes up to ~1 s.
        start_server smcr "$name-server" env SMCR_SPEAK_FIRST_WAIT_MS=5000 \
            socat -u "OPEN:$work/file" "$listen"
    fi
    pid=$server_pid
    wait_listen "$pid" "$port"
    wire_begin
    t0=$(date +%s.%N)
    if [[ $dir == up ]]; then
        run_client smcr "$name" "$bound" socat -u "OPEN:$work/file" "$connect"
    else
        run_client smcr "$name" "$bound" socat -u "$connect" "CREATE:$work/$name.got"
    fi
    t1=$(date +%s.%N)
    [[ $exit_code -eq 0 ]] || fail "$name: client socat exited $exit_code"
    wait_exit "$pid" 30
    [[ $(sha "$work/$name.got") == "$want" ]] || fail "$name: sha256 differs"
    rm -f "$work/$name.got" # the guest's tmpfs holds the file and one copy at a time
    log "$name: $size bytes, sha256 equal, $(mbps "$size" "$("$PYTHON" -c "print($t1 - $t0)")") MB/s over SMC-R (IPv$fam)"
    assert_smc_log "$name" 1
    wire_end "$name" "$size" 1
}
socat_mib=${RXE_SOCAT_MIB:-32}
socat_move socat-up up 4 $((socat_mib * 1024 * 1024 + 5))
socat_move socat-down down 4 $((socat_mib * 1024 * 1024 + 5))

# IPv6, fd77::1 -> fd77::2: the same transfer, and the RoCEv2 went over IPv6 (filter pref 6)
v6_0=$(($(counter egress 6 bytes) + $(counter ingress 6 bytes)))
socat_move socat6-up up 6 $((2 * 1024 * 1024 + 3))
v6=$(($(counter egress 6 bytes) + $(counter ingress 6 bytes) - v6_0))
[[ $v6 -ge $((2 * 1024 * 1024)) ]] || fail "IPv6: only $v6 bytes of RoCEv2 over IPv6 on veth0"
log "IPv6: $v6 bytes of RoCEv2-over-IPv6 on veth0"

log "all SMC-R application checks passed"
