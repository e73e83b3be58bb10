#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Robustness of smcr's SMC-R path with unmodified programs, run INSIDE scripts/rxe-vm
# (-n pair) by the meson suite 'rxe' (its own boot: it deletes rxe1 at the end).  Python
# programs (tests/rxe/robust.py) under scripts/smc_run, servers on 10.77.0.2 / fd77::2
# (rxe1), clients on 10.77.0.1 / fd77::1 (rxe0), SMCR_TRANSPORT=rdma:
#  1. IPv4 and IPv6 in turn, under CPU load: ROUNDS x (IPv4, IPv6) echoes of 2 MiB, the
#     client reading its own live smcr-stat record while the data flows; each must be
#     SMC-R over rxe0 with the right family.
#  2. fork with a live SMC-R connection (design §8): (a) a child that exits without
#     touching it, (b) a child that sends and receives on a second one (the parent
#     goes on over TCP, the child's I/O works there), the parent's connections intact
#     and live afterwards; (c) exec: both smcr ends go on
#     over TCP, the new image's inherited fd echoes 1 MiB intact and the server sees
#     its orderly close; an accept-then-fork server whose children classify and serve
#     2 clients over SMC-R.
#  4. RLIMIT_MEMLOCK too small for an RMB in a process without CAP_IPC_LOCK (so
#     ibv_reg_mr fails), as a client and as a server: each connection falls back to TCP
#     with the kernel's reason ERR_REGBUF at the limited end (PEERDECL at a server whose
#     client declined), its echo intact, and the limited server goes on serving the next
#     client the same way (run before part 3).
#  3. `rdma link delete rxe1` while 4 connections stream: every connection ends with
#     a reset on both ends within 10 s of rxe1's uverbs node leaving /dev/infiniband (the
#     `rdma` command may take seconds to start on a loaded guest); per connection the
#     receiver's count R and the sender's count S (what send() reported) satisfy
#     R <= S <= R + the receiver's RMB size, and the received bytes are exactly the
#     stream's first R bytes; the delete
#     completes while the server still runs (it closed the device); a new connection
#     to the same server then falls back to TCP, NOSMCRDEV in smcr-stat on both ends.
# Prints TAP, one subtest per part (tests/rxe/case_lib.sh).
#   tests/rxe/robust.sh [ROUNDS]      (environment: SMCR_LIB, SMCR_STAT as lgr_app.sh)
set -u
rounds=${1:-3}
top=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
py=$top/tests/rxe/robust.py
smc_run=$top/scripts/smc_run
stat_tool=${SMCR_STAT:-$top/build/src/tools/smcr-stat}
[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "robust.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}
work=${ROBUST_LOGS:-$(mktemp -d)} # ROBUST_LOGS=DIR keeps the logs there
mkdir -p "$work"
declare -a pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
    [[ -n ${ROBUST_LOGS:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
export XDG_RUNTIME_DIR=$work/run SMCR_TRANSPORT=rdma SMCR_PEERS=10.77.0.0/24,fd77::/64
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
source "$top/tests/rxe/case_lib.sh"
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

# server NAME ROLE ARGS...: start `robust.py ROLE ARGS` under smc_run -d, wait for it to
# listen (python under TCG: seconds); sets spid.
server() {
    local name=$1 i
    shift
    "$smc_run" -d python3 "$py" "$@" > "$work/$name.out" 2> "$work/$name.err" &
    spid=$!
    pids+=("$spid")
    for ((i = 0; i < 600; i++)); do
        [[ $(grep -c listening "$work/$name.out" 2> /dev/null) -ge ${want_listening:-1} ]] &&
            return 0
        sleep 0.1
    done
    fail "$name did not start listening"
    show "$work/$name.err" "$name"
}
client() { # NAME TIMEOUT ROLE ARGS...: run to its end; sets rc
    local name=$1 t=$2
    shift 2
    timeout "$t" "$smc_run" -d python3 "$py" "$@" > "$work/$name.out" 2> "$work/$name.err"
    rc=$?
}

# ROBUST_LINK_ONLY=1: only part 3 (iterating on it)
if [[ -z ${ROBUST_LINK_ONLY:-} ]]; then
# ------------------------------------------------------------- 1. IPv4 and IPv6 ----
case_begin "(1) IPv4 and IPv6 SMC-R echoes in turn under CPU load, smcr-stat read live"
server echo4 echo-server 10.77.0.2 7701
server echo6 echo-server fd77::2 7701
load=()
for i in 1 2; do
    nice -n 10 bash -c 'while :; do :; done' &
    load+=($!)
done
pids+=("${load[@]}")
client families 600 families "$rounds" 10.77.0.1 10.77.0.2 fd77::1 fd77::2 7701 "$stat_tool"
kill "${load[@]}" 2> /dev/null
if [[ $rc == 0 && $(grep -c '^ok: round' "$work/families.out") == $((2 * rounds)) ]]; then
    pass "$rounds rounds of IPv4 then IPv6 SMC-R echoes under CPU load, smcr-stat read live"
else
    fail "IPv4/IPv6 rounds (exit $rc$([[ $rc == 124 ]] && echo ': HUNG'))"
    show "$work/families.err" cli 12
fi
sed 's/^/    /' "$work/families.out"

# --------------------------------------------------------------------- 2. fork ----
case_begin "(2) fork and exec across a live SMC-R connection, an accept-then-fork server"
client fork 300 fork-client 10.77.0.2 10.77.0.1 7701 "$stat_tool"
sed 's/^/    /' "$work/fork.out"
grep -q '^ok: (a)' "$work/fork.out" && pass "fork (a): a child exited, the parent's SMC-R connection carried on" ||
    fail "fork (a)"
grep -q '^ok: (b)' "$work/fork.out" && pass "fork (b): the child's I/O on an inherited connection moved it onto TCP, the parent's carried on there" ||
    fail "fork (b)"
read -r _ eport etime <<< "$(grep -m1 '^exec ' "$work/fork.out")"
if [[ $rc == 0 ]] && grep -q '^ok: (c)' "$work/fork.out" &&
    grep -q 'this end goes on over TCP' "$work/fork.err"; then
    pass "exec (c): both smcr ends go on over TCP; the new image's fd: $(grep -o '1 MiB echo -> .*' "$work/fork.out")"
else
    fail "exec (c): exit $rc$([[ $rc == 124 ]] && echo ': HUNG')"
    show "$work/fork.err" cli
fi
end=''
for ((i = 0; i < 100 && ${#eport} > 0; i++)); do
    end=$(grep -m1 "^end $eport " "$work/echo4.out")
    [[ -n $end ]] && break
    sleep 0.1
done
read -r _ _ ehow etime2 <<< "$end"
if [[ $ehow == EOF ]]; then
    pass "exec (c): the server's connection ended in order when the new image closed it ($(ms_between "$etime" "$etime2") ms after the exec)"
else
    fail "exec (c): the server's connection: '${end:-no end within 10 s}' (exec at ${etime:-?})"
fi

# accept-then-fork: each connection is classified by the child that serves it
server fserv fork-server 10.77.0.2 7703
ok=0
for i in 1 2; do
    client "once$i" 300 echo-once 10.77.0.2 10.77.0.1 7703 "$stat_tool"
    grep -q '^record .*"mode": "smc-r"' "$work/once$i.out" && ok=$((ok + 1))
done
nsrv=$(grep -c ': smc-r (server)' "$work/fserv.err")
if [[ $ok == 2 && $nsrv -ge 2 ]] && ! grep -q 'tcp-fallback' "$work/fserv.err"; then
    pass "accept-then-fork: 2 connections served over SMC-R by the forked children ($nsrv smc-r server lines)"
else
    fail "accept-then-fork: $ok SMC-R clients, $nsrv smc-r lines in the server's log"
    show "$work/fserv.err" srv
    show "$work/once1.out" cli 3
fi
for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
pids=()

# ------------------------------------------------------- 4. RLIMIT_MEMLOCK ----
case_begin "(4) RLIMIT_MEMLOCK too small for an RMB (no CAP_IPC_LOCK): TCP with ERR_REGBUF, intact"
# 64 KiB of locked memory for a 256 KiB RMB; root keeps every capability but the one
# that exempts it from the limit.
limited=(setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock prlimit --memlock=65536:65536)
# regbuf_once NAME PORT [PREFIX...]: one echo-once client; passes when its record says
# tcp-fallback ERR_REGBUF (the echo itself is checked by robust.py: exit 0)
regbuf_once() {
    local name=$1 port=$2
    shift 2
    timeout 300 "$@" "$smc_run" -d python3 "$py" echo-once 10.77.0.2 10.77.0.1 "$port" "$stat_tool" \
        > "$work/$name.out" 2> "$work/$name.err"
    rc=$?
    if [[ $rc == 0 ]] && grep -q '^record .*"mode": "tcp-fallback".*"fallback_name": "ERR_REGBUF"' "$work/$name.out"; then
        pass "$name: echo intact over TCP, the client's record says ERR_REGBUF"
    else
        fail "$name: exit $rc$([[ $rc == 124 ]] && echo ': HUNG'): $(grep -o '"mode": "[^"]*"\|"fallback_name": "[^"]*"' "$work/$name.out" | tr '\n' ' ')"
        show "$work/$name.err" cli
    fi
}
server mlserv echo-server 10.77.0.2 7706
regbuf_once memlock-client 7706 "${limited[@]}"
# (the client declines after the server's Accept: PEERDECL on the server, as Linux
# records it, with the client's own reason in the client's record)
n=$(grep -c 'tcp-fallback (server): reason 0x05000000 PEERDECL' "$work/mlserv.err")
[[ $n == 1 ]] && pass "the server's log: the limited client's connection TCP, PEERDECL" ||
    { fail "the server's log has $n PEERDECL fallbacks, want 1"; show "$work/mlserv.err" srv; }
kill "$spid" 2> /dev/null
# the server limited (`server` starts servers without a prefix)
"${limited[@]}" "$smc_run" -d python3 "$py" echo-server 10.77.0.2 7708 > "$work/mlserv3.out" 2> "$work/mlserv3.err" &
spid=$!
pids+=("$spid")
for ((i = 0; i < 600; i++)); do
    grep -q listening "$work/mlserv3.out" 2> /dev/null && break
    sleep 0.1
done
for i in 1 2; do
    regbuf_once "memlock-server$i" 7708
done
n=$(grep -c 'tcp-fallback (server): reason 0x09990003 ERR_REGBUF' "$work/mlserv3.err")
[[ $n == 2 ]] && pass "the limited server's log: both connections TCP, ERR_REGBUF; it kept serving" ||
    { fail "the limited server's log has $n ERR_REGBUF fallbacks, want 2"; show "$work/mlserv3.err" srv; }
for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
pids=()

fi

# ------------------------------------------------- 3. rdma link delete rxe1 ----
case_begin "(3) rdma link delete rxe1 while 4 connections stream: resets, exact counts, then NOSMCRDEV"
want_listening=2 server sink sink-server 10.77.0.2 7704 7705
sink_pid=$spid
timeout 200 "$smc_run" -d python3 "$py" stream 10.77.0.2 10.77.0.1 7704 4 150 "$stat_tool" \
    > "$work/stream.out" 2> "$work/stream.err" &
cpid=$!
pids+=("$cpid")
for ((i = 0; i < 600; i++)); do
    grep -q '^streaming' "$work/stream.out" && break
    sleep 0.1
done
sleep 2
# rxe1's uverbs node: it leaves /dev/infiniband when the unregistration begins
node=''
for d in /sys/class/infiniband_verbs/uverbs*; do
    [[ $(cat "$d/ibdev" 2> /dev/null) == rxe1 ]] && node=/dev/infiniband/${d##*/}
done
tcmd=$(date +%s.%N)
# it returns when every process closed the device: its end time, taken by itself
{ rdma link delete rxe1; date +%s.%N > "$work/deleted"; } &
dpid=$!
# the detection times count from the node's removal (under a loaded TCG guest the
# rdma command itself may take seconds to start)
while [[ -n $node && -e $node ]] && kill -0 "$dpid" 2> /dev/null; do :; done
t0=$(date +%s.%N)
echo "    rdma link delete issued, ${node:-the uverbs node} gone $(ms_between "$tcmd" "$t0") ms later"
for ((i = 0; i < 300; i++)); do
    kill -0 "$cpid" 2> /dev/null || break
    sleep 0.1
done
wait "$cpid"
crc=$?
for ((i = 0; i < 100; i++)); do
    [[ $(grep -c '^recv ' "$work/sink.out") -ge 4 ]] && break
    sleep 0.1
done
for ((i = 0; i < 300; i++)); do
    kill -0 "$dpid" 2> /dev/null || break
    sleep 0.1
done
if kill -0 "$dpid" 2> /dev/null; then
    fail "rdma link delete rxe1 still blocked $(ms_between "$t0" "$(date +%s.%N)") ms later (a process keeps the device open)"
else
    kill -0 "$sink_pid" 2> /dev/null && alive="the server still running" || alive="the server gone"
    pass "rdma link delete rxe1 completed $(ms_between "$t0" "$(cat "$work/deleted")") ms after rxe1's node went, $alive"
fi
sed 's/^/    /' "$work/stream.out" "$work/sink.out" | grep -v '^    listening'
# per connection: the client's "sent PORT S HOW T RMB", the server's "recv PORT R HOW T"
python3 - "$work/stream.out" "$work/sink.out" "$t0" "$tcmd" <<'PY' && pass "link deleted: $(cat "$work/verdict")" || { fail "link deleted: $(cat "$work/verdict")"; }
import sys
sent = {l.split()[1]: l.split()[2:] for l in open(sys.argv[1]) if l.startswith("sent ")}
recv = {l.split()[1]: l.split()[2:] for l in open(sys.argv[2]) if l.startswith("recv ")}
t0, tcmd, bad, worst, worst_cmd = float(sys.argv[3]), float(sys.argv[4]), [], -1e9, 0
for port, (s, shw, st, rmb) in sent.items():
    r, rhw, rt = recv.get(port, ("-1", "missing", "0"))
    s, r, rmb = int(s), int(r), int(rmb)
    ds, dr = float(st) - t0, float(rt) - t0
    worst = max(worst, ds, dr)
    worst_cmd = max(worst_cmd, float(st) - tcmd, float(rt) - tcmd)
    if shw not in ("ECONNRESET", "EPIPE") or rhw != "ECONNRESET":
        bad.append(f"port {port}: sender {shw}, receiver {rhw}")
    if not (0 <= r <= s <= r + rmb):
        bad.append(f"port {port}: received {r}, sent {s}, receiver's RMB {rmb}")
    if ds > 10 or dr > 10:
        bad.append(f"port {port}: reset after {ds:.1f} s (sender), {dr:.1f} s (receiver)")
ok = len(sent) == 4 and not bad
msg = (f"{len(sent)} connections, every one reset on both ends {worst_cmd * 1000:.0f} ms "
       f"after the command was issued at the latest (the shell saw the node go after "
       f"{(t0 - tcmd) * 1000:.0f} ms; the last reset: {worst * 1000:+.0f} ms from then); "
       f"R <= S <= R + RMB for each (S - R: "
       + ", ".join(str(int(v[0]) - int(recv.get(p, ('0',))[0])) for p, v in sent.items())
       + " bytes)") if ok else "; ".join(bad) or f"{len(sent)} connections reported"
open(sys.argv[1].rsplit("/", 1)[0] + "/verdict", "w").write(msg)
sys.exit(0 if ok else 1)
PY
[[ $crc == 0 ]] || { fail "the streaming client exited $crc"; show "$work/stream.err" cli; }
grep -q 'RDMA device is being removed' "$work/sink.err" &&
    pass "the server's log: $(grep -m1 -o 'link group .*removed' "$work/sink.err")" ||
    { fail "the server's log does not say the device went"; show "$work/sink.err" srv; }
grep -q 'DELETE LINK' "$work/stream.err" &&
    pass "the client's log: $(grep -m1 -o 'link group .*DELETE LINK.*' "$work/stream.err")" ||
    { fail "the client's log does not show the peer's DELETE LINK"; show "$work/stream.err" cli; }

# a new connection to the same server process now falls back, and says why
client after 300 echo-once 10.77.0.2 10.77.0.1 7705 "$stat_tool"
rec=$(grep -m1 '^record ' "$work/after.out")
srec=$(env -u LD_PRELOAD "$stat_tool" --json -a -p "$sink_pid" | tr -d '\n' |
    grep -o '"mode": "tcp-fallback"[^}]*"fallback_name": "[A-Z_]*"' | tail -n1 |
    grep -o '"fallback_name": "[A-Z_]*"')
if [[ $rc == 0 && $rec == *'"mode": "tcp-fallback"'* && $rec == *NOSMCRDEV* && $srec == *NOSMCRDEV* ]]; then
    pass "after the delete a new connection fell back to TCP: client $(grep -o '"fallback_name": "[A-Z_]*"' <<< "$rec"), server $srec (smcr-stat)"
else
    fail "after the delete: exit $rc, client record: ${rec:-none}, server: ${srec:-none}"
    show "$work/after.err" cli
fi
rdma link add rxe1 type rxe netdev veth1 2> /dev/null
tap_done
