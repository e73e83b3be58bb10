#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# smcr <-> the Linux kernel's own SMC-R (SMC-Rv2 over rxe), run INSIDE scripts/rxe-vm
# (-n pair, kernel >= 6.12 with its SMC set up: UEID RXE-VM, PNET ids) by the meson
# suite 'rxe':
#   scripts/rxe-vm -- tests/rxe/kernel.sh BUILD_DIR BUILD/tests/rxe/smc_echo [MIB]
# smcr programs run under scripts/smc_run as root (the RFC 7609 option program is
# attached by smc_run itself: the kernel's SMC proposes and accepts only after the
# option in SYN/SYN-ACK) with SMCR_UEID=RXE-VM, the kernel's user EID: nothing else is
# configured on either side. "Host A" is 10.77.0.1 (clients), "host B" 10.77.0.2.
#   (a) smcr client (socat) -> kernel AF_SMC server (smc_echo): an echo of MIB MiB
#       (default 16) with equal sha256, the kernel's smc_diag says SMC-R on rxe1,
#       smcr-stat says smc-r;
#   (b) kernel AF_SMC client -> smcr server (socat, tee): the same the other way; the
#       server's received bytes have the sha256 of the kernel client's pattern;
#   (c) the kernel's SMC statistics (SMC_NETLINK_GET_STATS) count one more successful
#       SMC-Rv2 connection as client and as server;
#   (d) a second connection on the same link group, both ways (the kernel reuses its
#       group: CONFIRM RKEY before its Accept/Confirm, DELETE RKEY after each close):
#       one smcr process (python) makes two connections to one kernel server process,
#       one kernel client process makes two to one smcr server (python): smcr-stat
#       shows both on one link group, smc_diag says SMC-R for each, and the capture
#       holds the v2 CONFIRM RKEY / DELETE RKEY exchanges;
#   (e) a kernel program killed mid-transfer (SIGKILL) ends the smcr side promptly
#       (< 10 s) with ECONNRESET (EPIPE if the kernel side had read everything), as client
#       and as server;
#   (f) the v2 LLC messages on the wire, counted by type (tshark cannot decode x86
#       Linux's v2 LLC: see tests/data/kernel-smcr/README.md): CONFIRM LINK, ADD LINK and
#       its 44-byte reject, TEST LINK none needed.
#   (g) TEST LINK on an idle link, both roles: with net.smc.smcr_testlink_time at 2 s
#       the kernel probes a connection held idle 9 s, smcr answers (its helper thread:
#       the application sleeps), and data still flows on the same link group; then
#       with the kernel's off and SMCR_TESTLINK_TIME=2, smcr probes and the kernel
#       answers; smcr's link-group worker thread wakes for those messages only, not on a timer
#       (its wake-ups while idle are bounded by the LLC requests, not by the time);
#   (h) tshark decodes the CLC v2 Proposal/Accept/Confirm of smcr<->smcr, smcr ->
#       kernel and kernel -> smcr with no malformed or warning mark, and SMC's option
#       in every SYN and SYN-ACK;
#   (i) no SMCR_UEID at all (nothing configured on either side): smcr reads the
#       kernel's UEID table itself, a short echo each way runs over SMC-Rv2 with the
#       EID RXE-VM (smcr's log), as smc_diag, smcr-stat and the kernel's v2 success
#       counters say (a library that did not read the table would fall back to TCP).
# KERNEL_ONLY=testlink,tshark runs just (g) and (h) (noueid: (i)); KERNEL_LOGS=DIR keeps
# the logs.
# Prints TAP, one subtest per case ((g) as g1-g4, (e) as e1 and e2; tests/rxe/case_lib.sh);
# skipped as a whole where the guest kernel's SMC is not set up.
set -u
build=${1:?usage: kernel.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
ksmc=${2:?usage: kernel.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
mib=${3:-16}
smc_run=$build/scripts/smc_run
stat_tool=$build/src/tools/smcr-stat
A=10.77.0.1 B=10.77.0.2

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "kernel.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}
source "$(dirname -- "${BASH_SOURCE[0]}")/case_lib.sh"
[[ ${RXE_VM_SMC:-0} == 1 ]] || tap_skip_all "the guest kernel's SMC-R is not set up (kernel < 6.12?)"
logs=${KERNEL_LOGS:-$(mktemp -d)}; mkdir -p "$logs"
cp "$(dirname -- "${BASH_SOURCE[0]}")/echo_lib.py" "$logs/" # client.py and server.py import it
# live_record PID [STATE]: the mode of PID's first live connection in smcr-stat --json
# (STATE: a grep pattern for its state instead, '[a-z]*' for any: a short echo closes
# before it is read)
live_record() {
    local i out
    for ((i = 0; i < 100; i++)); do
        out=$("$stat_tool" --json -p "$1" 2>/dev/null | tr -d '\n' |
            grep -o "\"state\": \"${2:-live}\", \"mode\": \"[^\"]*\"" | head -n1 | sed -E 's/.*"mode": "([^"]*)"/\1/')
        [[ -n $out ]] && { echo "$out"; return; }
        [[ -n $1 ]] && kill -0 "$1" 2>/dev/null || break # gone: it publishes nothing more
        sleep 0.2
    done
    echo none
}
# A connect refused: the server had given up already (smc_echo waited 60 s for a client
# that, under smc_run on a TCG guest at load 19, started later than that; it waits 300 s
# now). socat and client.py still retry a few times; the retries are reported at the end.
retry=retry=3,interval=1
kstat() { # NAME: the kernel's counter NAME (SMC_NETLINK_GET_STATS)
    "$ksmc" stats 2>/dev/null | awk -v n="$1" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }'
}

export XDG_RUNTIME_DIR=$logs/run # smcr's stats files (the guest's /run is fresh)
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
export SMCR_UEID=RXE-VM          # the kernel's user EID (rxe-vm-smc ueid RXE-VM)
bytes=$((mib << 20))
head -c "$bytes" /dev/urandom > "$logs/data"
want=$(sha "$logs/data")
"$ksmc" pattern "$bytes" > "$logs/pattern"
kwant=$(sha "$logs/pattern")
rm -f "$logs/pattern"
SMC_DEBUG=1 "$smc_run" true 2> "$logs/attach.err" # attaches the option program

# LLC SENDs (RoCE SEND Only, BTH opcode 4) in a capture: "source message-hex" per line
llc_lines() {
    tshark -r "$1" -Y 'udp.dstport == 4791 and udp.payload[0] == 4' -T fields -e ip.src -e udp.payload 2>/dev/null |
        awk '{ print $1, substr($2, 25) }'
}
count_in() { awk -v s="$2" -v t="$3" '$1 == s && substr($2, 1, length(t)) == t' "$1" | wc -l; }
capture_start() { # FILE FILTER: dumpcap on veth0 until capture_stop
    dumpcap -q -i veth0 -f "$2" -w "$1" > "$1.err" 2>&1 &
    cap_pid=$!
    for ((i = 0; i < 100; i++)); do
        grep -q 'Capturing on' "$1.err" && return
        sleep 0.1
    done
}
capture_stop() { sleep 0.5; kill -INT "$cap_pid" 2>/dev/null; wait "$cap_pid" 2>/dev/null; }

# ------------------------------------------- (g) TEST LINK on an idle link, both ways ----
# The kernel sends TEST LINK on a link idle for net.smc.smcr_testlink_time and takes
# the link down when it has no answer within 2 s; smcr's link-group worker thread sleeps on an idle
# group's completion channel and answers at once (an application asleep in time.sleep()
# takes no completion). With
# the time at 2 s, a connection held idle 9 s sees ~4 of them; afterwards data must
# still flow over SMC-R on the same link group. Then the other way: smcr's own TEST
# LINK (SMCR_TESTLINK_TIME=2) with the kernel's off, answered by the kernel.
# Voluntary context switches of every thread but the main one: smcr's link-group worker thread
# (the only other thread of these programs; its sleeps are the wake-ups counted).
cat > "$logs/helper_wakeups.py" <<'PY'
import os, re
def snapshot():
    me, out = os.getpid(), {}
    for t in os.listdir("/proc/self/task"):
        if int(t) == me:
            continue
        try:
            st = open(f"/proc/self/task/{t}/status").read()
        except OSError:
            continue
        out[t] = int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", st).group(1))
    return out
def since(before):  # wake-ups since `before` (threads born meanwhile: all of theirs)
    return sum(v - before.get(t, 0) for t, v in snapshot().items())
PY
cat > "$logs/idle_client.py" <<'PY'
import json, os, socket, subprocess, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0])); import helper_wakeups
host, port, smcr_stat, idle = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
def record(c):
    out = subprocess.run([smcr_stat, "json", "-p", str(os.getpid())], env=env,
                         capture_output=True, text=True, timeout=60).stdout
    mine = [r for r in json.loads(out)["connections"]
            if r.get("local_port") == c.getsockname()[1] and r.get("state") == "live"]
    return f"{mine[0]['mode']}:{mine[0]['link_group']}" if len(mine) == 1 else "none"
def echo(c, data):
    c.sendall(data)
    got = b""
    while len(got) < len(data):
        b = c.recv(1 << 16)
        if not b:
            break
        got += b
    return "ok" if got == data else f"short({len(got)})"
for attempt in range(4):  # see 'retry' above: a reset to a first SYN, rarely
    try:
        c = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
        break
    except ConnectionRefusedError:
        print("Connection refused, retrying", flush=True)
        time.sleep(1)
c.settimeout(60)
data = bytes(range(256)) * 16
e1 = echo(c, data); before = record(c)
w = helper_wakeups.snapshot()
time.sleep(idle)
print(f"helper wake-ups while idle: {helper_wakeups.since(w)}", flush=True)
try:
    e2 = echo(c, data)
except OSError as exc:
    e2 = f"error({exc})"
after = record(c)
c.close()
print(f"echo before idle {e1}, after {e2}; link group before {before}, after {after}", flush=True)
PY
cat > "$logs/idle_server.py" <<'PY'
import json, os, socket, subprocess, sys
sys.path.insert(0, os.path.dirname(sys.argv[0])); import helper_wakeups
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
c, _ = l.accept()
recs, w, idle_wakeups = [], None, 0
with c:
    while True:
        try:
            b = c.recv(1 << 16)
        except OSError as exc:
            print(f"recv: {exc}", flush=True)
            break
        if not b:
            break
        if w is not None:  # from the first data to the last: the kernel client's idle time
            idle_wakeups = helper_wakeups.since(w)
        c.sendall(b)
        out = subprocess.run([sys.argv[3], "json", "-p", str(os.getpid())], env=env,
                             capture_output=True, text=True, timeout=60).stdout
        mine = [r for r in json.loads(out)["connections"]
                if r.get("peer_port") == c.getpeername()[1] and r.get("state") == "live"]
        recs.append(f"{mine[0]['mode']}:{mine[0]['link_group']}" if len(mine) == 1 else "none")
        if w is None:
            w = helper_wakeups.snapshot()
print(f"helper wake-ups while idle: {idle_wakeups}", flush=True)
print(f"link group at the first data {recs[0] if recs else 'none'}, at the last {recs[-1] if recs else 'none'}", flush=True)
PY
idle_s=9
# testlink_case NAME PORT ROLE(smcr-client|smcr-server) KERNEL_SECS SMCR_SECS(-: default)
testlink_case() {
    local name=$1 port=$2 role=$3 ksecs=$4 ssecs=$5 spid cpid ok=1 k s
    local -a tl=()
    case_begin "(${name%%-*}) TEST LINK on a connection idle ${idle_s}s: ${name#*-}"
    [[ $ssecs == - ]] || tl=(env SMCR_TESTLINK_TIME="$ssecs")
    sysctl -qw net.smc.smcr_testlink_time="$ksecs" # read by each new link group
    capture_start "$logs/$name.pcapng" 'udp port 4791 and udp[8] == 4'
    if [[ $role == smcr-client ]]; then
        k=$B s=$A
        timeout 120 "$ksmc" server "$B" "$port" 8192 > "$logs/$name.k" 2>&1 &
        spid=$!
        wait_listening "$port" || echo "    (kernel server not listening)"
        timeout 120 "${tl[@]}" "$smc_run" python3 "$logs/idle_client.py" "$B" "$port" \
            "$stat_tool" "$idle_s" > "$logs/$name.s" 2>&1
        wait "$spid"
        grep -q 'before idle ok, after ok; link group before smc-r:\([0-9]*\), after smc-r:\1$' "$logs/$name.s" || ok=0
    else
        k=$A s=$B
        timeout 120 "${tl[@]}" "$smc_run" python3 "$logs/idle_server.py" "$B" "$port" \
            "$stat_tool" > "$logs/$name.s" 2>&1 &
        spid=$!
        wait_listening "$port" || echo "    (smcr server not listening)"
        SMC_ECHO_IDLE_S=$idle_s timeout 120 "$ksmc" client "$B" "$port" 4096 "$A" > "$logs/$name.k" 2>&1 || ok=0
        wait "$spid"
        grep -q 'first data smc-r:\([0-9]*\), at the last smc-r:\1$' "$logs/$name.s" || ok=0
    fi
    capture_stop
    # after the idle time the kernel's side still runs over its link
    grep -Eq '^(client|server): smc_diag mode=SMC-R' "$logs/$name.k" || ok=0
    llc_lines "$logs/$name.pcapng" > "$logs/$name.llc"
    local kreq kresp sreq sresp
    kreq=$(count_in "$logs/$name.llc" "$k" 272c0000) kresp=$(count_in "$logs/$name.llc" "$k" 272c0080)
    sreq=$(count_in "$logs/$name.llc" "$s" 272c0000) sresp=$(count_in "$logs/$name.llc" "$s" 272c0080)
    local what="TEST LINK requests/answers: kernel $kreq/$kresp, smcr $sreq/$sresp" wake
    # The link-group worker thread sleeps on an idle group's completion channel and wakes for its
    # messages (and deadlines such as our own TEST LINK), not on a timer: while the
    # application sleeps, its wake-ups are bounded by the LLC requests exchanged (at
    # most 4 each: the request's event, our answer's completion, a kick, a retry), not
    # by the idle time (the old 250 ms timer: ~36 in 9 s).
    wake=$(grep -o 'helper wake-ups while idle: [0-9-]*' "$logs/$name.s" | grep -o '[0-9-]*$')
    [[ -n $wake && $wake -le $((4 * (kreq + sreq) + 4)) ]] || ok=0
    what+="; smcr's link-group worker thread woke ${wake:-?} times while idle (at most $((4 * (kreq + sreq) + 4)))"
    # An unanswered TEST LINK ends the link within 2 s (the kernel) or SMCR_TESTLINK_TIME
    # (smcr), and the echo after the idle time with it: so the echo above proves every
    # probe was answered in time; the capture shows that there were probes and answers.
    # (Requests to older, dead groups may be in it too: not compared one to one.)
    if [[ $ksecs != 0 ]]; then # the kernel probes, we answer
        [[ $kreq -ge 2 && $sresp -ge 2 ]] || ok=0
    else                       # we probe, the kernel answers
        [[ $sreq -ge 2 && $kresp -ge 2 ]] || ok=0
    fi
    if [[ $ok == 1 ]]; then
        pass "$name: idle ${idle_s}s (kernel testlink ${ksecs}s, smcr ${ssecs/-/30}s): $what; $(tail -n1 "$logs/$name.s"); kernel after the idle time: $(grep -E '^(client|server): smc_diag' "$logs/$name.k" | grep -o 'mode=SMC-R ibdev=[a-z0-9]*.*link_id=[0-9]*' | sed 's/ gid=.*peer_gid=[^ ]*//')"
    else
        fail "$name: idle ${idle_s}s (kernel testlink ${ksecs}s, smcr ${ssecs/-/30}s): $what"
        show "$logs/$name.s" smcr 6; show "$logs/$name.k" kernel 6
        awk '{ print $1, substr($2, 1, 8) }' "$logs/$name.llc" | sort | uniq -c | sed 's/^/    llc| /'
    fi
}
case_testlink() {
    local saved
    saved=$(sysctl -n net.smc.smcr_testlink_time)
    testlink_case g1-kernel-probes-smcr-client 7811 smcr-client 2 -
    testlink_case g2-kernel-probes-smcr-server 7812 smcr-server 2 -
    testlink_case g3-smcr-client-probes-kernel 7813 smcr-client 0 2
    testlink_case g4-smcr-server-probes-kernel 7814 smcr-server 0 2
    sysctl -qw net.smc.smcr_testlink_time="$saved"
}

# ------------------------------------------------ (h) tshark reads our CLC v2 ----
# A full capture of three SMC-Rv2 handshakes: smcr <-> smcr, smcr client -> kernel
# server, kernel client -> smcr server. tshark must decode each Proposal, Accept and
# Confirm as SMC-Rv2, raise no malformed or warning/error expert mark on any frame,
# and find SMC's option (ExID 0xE2D4C3D9) in every SYN and SYN-ACK (smc_run attached
# the option program).
case_tshark() {
    local spid f=$logs/clc.pcapng
    case_begin "(h) tshark decodes the CLC v2 of smcr<->smcr, smcr->kernel, kernel->smcr; the option in every SYN"
    # (with the RoCE SENDs: when our DELETE LINK went, for the close check below)
    capture_start "$f" 'tcp portrange 7821-7823 or (udp port 4791 and udp[8] == 4)'
    SMCR_TRANSPORT=rdma timeout 120 "$smc_run" -d socat -T 30 "TCP4-LISTEN:7821,bind=$B,reuseaddr" SYSTEM:cat \
        > /dev/null 2> "$logs/h1.srv" &
    spid=$!
    wait_listening 7821
    head -c 1000 /dev/zero | SMCR_TRANSPORT=rdma timeout 120 "$smc_run" -d socat -t 5 - "TCP4:$B:7821,bind=$A" \
        > /dev/null 2> "$logs/h1.cli"
    wait "$spid"
    timeout 120 "$ksmc" server "$B" 7822 1000 > "$logs/h2.srv" 2>&1 &
    spid=$!
    wait_listening 7822
    head -c 1000 /dev/zero | timeout 120 "$smc_run" -d socat -t 5 - "TCP4:$B:7822,bind=$A" \
        > /dev/null 2> "$logs/h2.cli"
    wait "$spid"
    timeout 120 "$smc_run" -d socat -T 30 "TCP4-LISTEN:7823,bind=$B,reuseaddr" SYSTEM:cat \
        > /dev/null 2> "$logs/h3.srv" &
    spid=$!
    wait_listening 7823
    timeout 120 "$ksmc" client "$B" 7823 1000 "$A" > "$logs/h3.cli" 2>&1
    wait "$spid"
    capture_stop
    local port msgs want
    for port in 7821 7822 7823; do
        msgs=$(tshark -r "$f" -Y "smc and tcp.port == $port" -T fields -e _ws.col.Info 2>/dev/null |
            grep -o 'SMC-Rv2-[A-Za-z]*' | tr '\n' ' ')
        want='SMC-Rv2-Proposal SMC-Rv2-Accept SMC-Rv2-Confirm '
        [[ $msgs == "$want" ]] &&
            pass "tshark decodes port $port's CLC: $msgs" ||
            { fail "tshark decodes port $port's CLC as '$msgs', not '$want'"; show "$logs/h${port: -1}.cli" cli 4; }
    done
    # (TCP's own expert marks are not about CLC; RoCE frames are not judged here.)
    # A close like TCP's, and the kernel's FIN before our DELETE LINK. socat exits with
    # its connection open; our exit handler sends the closing CDC, and the engine's exit
    # work then LLC DELETE LINK for the whole group (the process's QP dies with it). In the
    # smcr client -> kernel server flow the kernel program had closed already (after our
    # shutdown(SHUT_WR)): on our CDC the kernel frees its connection and only then releases
    # its TCP socket with a FIN. It handles the CDC (close work) and the DELETE LINK (LLC
    # work: every connection still in the group killed, its TCP socket aborted) on different
    # work queues, so when our DELETE LINK came right after the CDC, it sometimes won and the
    # kernel sent a RST instead of its FIN (about 1 in 6 such flows; neither program saw an
    # error: the kernel's had read EOF and closed, ours had exited). So our exit waits for
    # the peer's FIN first when the peer had closed; on the wire: the kernel's FIN, then our
    # DELETE LINK. (Frame order on veth0 is the order of events there; its timestamps mix
    # two clocks: rxe's own frames keep a monotonic stamp.) Without that wait the race is
    # lost only about 1 in 6 times, so one run of this check may pass without it.
    local fr
    fr=$(tshark -r "$f" -T fields -e frame.number -e ip.src -e tcp.srcport -e tcp.dstport \
        -e tcp.flags.syn -e tcp.flags.ack -e tcp.flags.fin -e tcp.flags.reset -e udp.payload 2>/dev/null |
        awk -F'\t' -v A="$A" '
            $4 == 7822 && $5 == 1 && $6 == 0 { on = 1 }
            $4 == 7823 && $5 == 1 && $6 == 0 { on = 0 }
            !on { next }
            $3 == 7822 && $8 == 1 && !rst { rst = $1 }
            $3 == 7822 && $7 == 1 && !fin { fin = $1 }
            $2 == A && $3 == "" && substr($9, 25, 2) == "24" && !dl { dl = $1 }
            END { printf "%d %d %d", fin, rst, dl }')
    local kfin krst kdl
    read -r kfin krst kdl <<< "$fr"
    if [[ $krst == 0 && $kfin -gt 0 && ( $kdl == 0 || $kfin -lt $kdl ) ]]; then
        pass "smcr client -> kernel server, closed at exit: the kernel's FIN (frame $kfin) before our DELETE LINK (frame $kdl), no reset"
    else
        fail "smcr client -> kernel server, closed at exit: kernel FIN frame $kfin, RST frame $krst, our DELETE LINK frame $kdl (want a FIN before the DELETE LINK, no RST)"
    fi
    local marks
    marks=$(tshark -r "$f" -Y 'tcp and (_ws.malformed or (smc and _ws.expert.severity >= 0x00600000))' 2>/dev/null)
    [[ -z $marks ]] && pass "tshark: no malformed TCP frame, no warning or error mark on an SMC frame ($(tshark -r "$f" -Y 'tcp and smc' 2>/dev/null | wc -l) frames; TCP resets: $(tshark -r "$f" -Y 'tcp.flags.reset == 1' 2>/dev/null | wc -l))" ||
        { fail "tshark marks frames:"; echo "$marks" | head -n 8 | sed 's/^/    | /'; }
    local syns
    syns=$(tshark -r "$f" -Y 'tcp.flags.syn == 1' -T fields -e tcp.srcport -e tcp.dstport \
        -e tcp.options.experimental.exid 2>/dev/null | sort -u)
    [[ $(wc -l <<< "$syns") == 6 && $(grep -c '0xe2d4$' <<< "$syns") == 6 ]] &&
        pass "tshark: SMC's option (ExID) in all 3 SYNs and 3 SYN-ACKs" ||
        { fail "tshark: SMC's option not in every SYN/SYN-ACK"; sed 's/^/    syn| /' <<< "$syns"; }
    # for the record: tshark's reading of our Accept beside the kernel's (only the
    # per-connection values should differ, and our max_links 1 and feature mask 0)
    tshark -r "$f" -Y 'tcp.srcport == 7823 and tcp.len == 160' -O smc -V 2>/dev/null |
        sed -n '/^Shared Memory Communications/,$p' > "$logs/h-accept-smcr.txt"
    tshark -r "$f" -Y 'tcp.srcport == 7822 and tcp.len == 160' -O smc -V 2>/dev/null |
        sed -n '/^Shared Memory Communications/,$p' > "$logs/h-accept-kernel.txt"
    echo "    tshark, our Accept against the kernel's, the lines that differ:"
    diff "$logs/h-accept-smcr.txt" "$logs/h-accept-kernel.txt" | grep '^[<>]' | sed 's/^/    | /'
}

# ------------------------------- (i) no SMCR_UEID: smcr reads the kernel's UEID table ----
# Every other case sets SMCR_UEID=RXE-VM; here nothing is set on either side. smcr must
# read the kernel's table (RXE-VM, `rxe-vm-smc ueid`) over generic netlink, offer it as a
# client and find it in the kernel client's Proposal as a server. SMC-Rv2, not a fallback:
# the kernel's smc_diag (SMC-R on its device), smcr-stat (smc-r), the kernel's
# smcr_{server,client}_v2_success counters (+1), and smcr's log (the table read, the
# Confirm or Accept naming EID RXE-VM). The smcr program keeps its side open until its
# smcr-stat record is read (a flag file; a short echo is over before a loaded guest's
# ps and smcr-stat find it).
# noueid_end NAME DIRECTION SMCR_JOB CLIENT_JOB SERVER_JOB COUNTER K0 GOT WANT SMCR_LOG
#            KERNEL_LOG IBDEV CLC
# The smcr program's record (then $logs/NAME.read lets it end), both jobs' ends, the
# kernel's COUNTER against K0, and the checks: file GOT equal to WANT, the kernel's
# smc_diag SMC-R on IBDEV, smcr-stat smc-r, and in smcr's log the table and the CLC
# (Confirm or Accept) with EID RXE-VM.
noueid_end() {
    local name=$1 dir=$2 sjob=$3 cjob=$4 srvjob=$5 counter=$6 k0=$7 got=$8 want=$9
    local slog=${10} klog=${11} ibdev=${12} clc=${13} rec rc=0 k1 ok=1 what diag table msg
    rec=$(live_record "$(child_of "$sjob")" '[a-z]*')
    touch "$logs/$name.read"
    wait "$cjob" || rc=$?
    wait "$srvjob"
    k1=$(kstat "$counter")
    diag=$(grep -m1 -oE 'mode=[^ ]*( ibdev=[a-z0-9]*| reason=[0-9a-fx]*)?' "$klog")
    table=$(grep -m1 -o "the kernel's user EID table: [^(]*" "$slog")
    msg=$(grep -m1 -o "$clc (first contact, EID [^)]*)" "$slog")
    [[ $rc == 0 && $(sha "$got") == $(sha "$want") ]] && what="echo intact" ||
        { ok=0; what="echo broken (client exit $rc)"; }
    [[ $diag == "mode=SMC-R ibdev=$ibdev" && $rec == smc-r && $((k1 - k0)) -ge 1 &&
        $table == "the kernel's user EID table: RXE-VM " &&
        $msg == "$clc (first contact, EID RXE-VM)" ]] || ok=0
    what+=", kernel smc_diag ${diag:-none}, smcr-stat $rec, $counter $k0 -> $k1;"
    what+=" smcr's log: ${table% }, $msg"
    if [[ $ok == 1 ]]; then
        pass "$name: no SMCR_UEID (kernel: ueid $ktable), $dir over SMC-Rv2: $what"
    else
        fail "$name: no SMCR_UEID (kernel: ueid $ktable), $dir: $what"
        show "$slog" smcr 8; show "$klog" kernel 3
    fi
}
case_noueid() {
    local kpid spid cpid k0s k0c ktable t0=$SECONDS
    case_begin "(i) no SMCR_UEID: smcr reads the kernel's UEID table, SMC-Rv2 both ways"
    ktable=$(rxe-vm-smc show 2>&1 | awk '$1 == "ueid" { printf "%s%s", s, $2; s = " " }')
    head -c 4096 /dev/urandom > "$logs/i.data"
    "$ksmc" pattern 4096 > "$logs/i.pattern"
    k0s=$(kstat smcr_server_v2_success) k0c=$(kstat smcr_client_v2_success)
    # both servers at once: the kernel's for (i1) and smcr's for (i2), whose smc_run start
    # (seconds in a loaded guest) overlaps (i1)
    timeout 120 "$ksmc" server "$B" 7831 4096 > "$logs/i1.srv" 2>&1 &
    kpid=$!
    env -u SMCR_UEID timeout 180 "$smc_run" -d socat -t 60 -T 60 \
        "TCP4-LISTEN:7832,bind=$B,reuseaddr" \
        SYSTEM:"tee $logs/i2.recv; while [ ! -e $logs/i2.read ]; do sleep 0.2; done" \
        > "$logs/i2.srv" 2>&1 &
    spid=$!
    # (i1) smcr client -> kernel server
    wait_listening 7831 || echo "    (kernel server not listening)"
    { cat "$logs/i.data"; while [[ ! -e $logs/i1.read ]]; do sleep 0.2; done; } |
        env -u SMCR_UEID timeout 120 "$smc_run" -d socat -t 60 - "TCP4:$B:7831,bind=$A,$retry" \
            > "$logs/i1.out" 2> "$logs/i1.cli" &
    cpid=$!
    noueid_end i1 "smcr client -> kernel server" "$cpid" "$cpid" "$kpid" \
        smcr_server_v2_success "$k0s" "$logs/i1.out" "$logs/i.data" "$logs/i1.cli" \
        "$logs/i1.srv" rxe1 Confirm
    # (i2) kernel client -> smcr server
    wait_listening 7832 || echo "    (smcr server not listening)"
    timeout 120 "$ksmc" client "$B" 7832 4096 "$A" > "$logs/i2.cli" 2>&1 &
    cpid=$!
    noueid_end i2 "kernel client -> smcr server" "$spid" "$cpid" "$spid" \
        smcr_client_v2_success "$k0c" "$logs/i2.recv" "$logs/i.pattern" "$logs/i2.srv" \
        "$logs/i2.cli" rxe0 Accept
    echo "    (i) took $((SECONDS - t0)) s in the guest"
}

if [[ -n ${KERNEL_ONLY:-} ]]; then # e.g. KERNEL_ONLY=testlink,tshark: just those cases
    for c in ${KERNEL_ONLY//,/ }; do "case_$c"; done
    case_end
    [[ -n ${KERNEL_LOGS:-} ]] || rm -rf "$logs"
    tap_done
fi
case_testlink
case_tshark
case_noueid # after (g) and (h): the first SMC-R programs of a boot pay its cold file cache
case_end


dumpcap -q -i veth0 -s 160 -f '(udp port 4791 and udp[8] == 4) or (tcp[tcpflags] & (tcp-syn|tcp-rst|tcp-fin) != 0)' \
    -w "$logs/llc.pcapng" > "$logs/dumpcap.err" 2>&1 &
cap=$!
for ((i = 0; i < 100; i++)); do
    grep -q 'Capturing on' "$logs/dumpcap.err" && break
    sleep 0.1
done

# ------------------------------------------ (d) a second connection on one link group ----
cat > "$logs/client.py" <<'PY'
import os, socket, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
host, port, conns, smcr_stat, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
def pat(n):  # smc_echo's pattern: the kernel server just echoes, any bytes would do
    return bytes((i * 7 + i // 251) & 0xff for i in range(n))
data, groups = pat(size), []
for i in range(conns):
    for attempt in range(4):  # see 'retry' in kernel.sh: a reset to a first SYN, rarely
        try:
            c = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
            break
        except ConnectionRefusedError:
            print(f"connection {i + 1}: Connection refused, retrying", flush=True)
            time.sleep(1)
    intact = echo_lib.echo(c, data)
    mine, out = echo_lib.live_records(c, smcr_stat)
    c.close()
    if not intact:
        sys.exit(f"FAIL: connection {i + 1}: the echo differs")
    if len(mine) != 1:
        sys.exit(f"FAIL: connection {i + 1}: {len(mine)} live records: {out[:300]}")
    groups.append((mine[0]["mode"], mine[0]["link_group"]))
    print(f"connection {i + 1}: {mine[0]['mode']} link group {mine[0]['link_group']}", flush=True)
if len(set(groups)) != 1 or groups[0][0] != "smc-r":
    sys.exit(f"FAIL: not one SMC-R link group: {groups}")
print(f"ok: {conns} connections on SMC-R link group {groups[0][1]}", flush=True)
PY
cat > "$logs/server.py" <<'PY'
import os, socket, sys
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
for i in range(int(sys.argv[3])):
    c, _ = l.accept()
    rec = ["none"]
    def note(_done, c=c, rec=rec):
        if rec[0] == "none":  # while it is live: our record of it
            mine, _ = echo_lib.live_records(c, sys.argv[4])
            rec[0] = f"{mine[0]['mode']}:{mine[0]['link_group']}" if len(mine) == 1 else "none"
    echo_lib.serve(c, note)
    print(f"served {i + 1}: {rec[0]}", flush=True)
PY
case_begin "(d) a second connection on one link group, both ways"
timeout 200 "$ksmc" server "$B" 7803 $((1 << 20)) 2 > "$logs/d1.srv" 2>&1 &
spid=$!
wait_listening 7803 || echo "    (kernel server not listening)"
if timeout 200 "$smc_run" python3 "$logs/client.py" "$B" 7803 2 "$stat_tool" $((1 << 20)) \
    > "$logs/d1.cli" 2>&1; then
    pass "smcr client -> kernel server, 2 connections: $(tail -n1 "$logs/d1.cli")"
else
    fail "smcr client -> kernel server, 2 connections"; show "$logs/d1.cli" cli
    ss -ltnp 2>/dev/null | grep -E ':7803|State' | sed 's/^/    ss| /'
    nstat -az 2>/dev/null | grep -E 'TcpOutRsts|ListenDrops|ListenOverflows|TCPReqQFull' |
        sed 's/^/    nstat| /'
fi
wait "$spid"
[[ $(grep -c 'mode=SMC-R' "$logs/d1.srv") == 2 ]] &&
    pass "smcr client -> kernel server, 2 connections: smc_diag says SMC-R for both" ||
    { fail "smcr client -> kernel server: the kernel server's smc_diag"; show "$logs/d1.srv" srv; }

timeout 200 "$smc_run" python3 "$logs/server.py" "$B" 7804 2 "$stat_tool" > "$logs/d2.srv" 2>&1 &
spid=$!
wait_listening 7804 || echo "    (smcr server not listening)"
if timeout 200 "$ksmc" client "$B" 7804 $((1 << 20)) "$A" 2 > "$logs/d2.cli" 2>&1 &&
    [[ $(grep -c 'mode=SMC-R' "$logs/d2.cli") == 2 ]]; then
    pass "kernel client -> smcr server, 2 connections from one process: smc_diag says SMC-R for both"
else
    fail "kernel client -> smcr server, 2 connections"; show "$logs/d2.cli" cli; show "$logs/d2.srv" srv
fi
wait "$spid"
groups=$(grep -o 'served [0-9]*: .*' "$logs/d2.srv" | cut -d' ' -f3 | sort | uniq -c)
[[ $(wc -l <<< "$groups") == 1 && $groups == *' 2 smc-r:'[0-9]* ]] &&
    pass "kernel client -> smcr server: smcr-stat shows both connections on one link group ($(echo $groups))" ||
    { fail "kernel client -> smcr server: smcr-stat records: $(echo $groups)"; show "$logs/d2.srv" srv; }

# ------------------------------------------------------ (e) a kernel program killed ----
# kill_case NAME: the kernel side of a 1 GiB echo is killed after 4 s; the smcr side
# must end within 10 s, having seen ECONNRESET.
kill_case() {
    local name=$1 port=$2 kside=$3 kpid spid t0 rc=0
    case_begin "($name) the kernel $kside killed mid-transfer: the smcr side ends with a reset"
    if [[ $kside == server ]]; then
        timeout 120 "$ksmc" server "$B" "$port" $((1 << 30)) > "$logs/$name.k" 2>&1 &
        kpid=$!
        wait_listening "$port"
        head -c $((1 << 30)) /dev/zero |
            timeout 120 "$smc_run" -d socat -T 60 - "TCP4:$B:$port,bind=$A,$retry" > /dev/null 2> "$logs/$name.s" &
        spid=$!
    else
        timeout 120 "$smc_run" -d socat -T 60 "TCP4-LISTEN:$port,bind=$B,reuseaddr" \
            SYSTEM:cat > /dev/null 2> "$logs/$name.s" &
        spid=$!
        wait_listening "$port"
        timeout 120 "$ksmc" client "$B" "$port" $((1 << 30)) "$A" > "$logs/$name.k" 2>&1 &
        kpid=$!
    fi
    # the transfer runs over SMC-R (smcr-stat), then a moment more
    local mode
    mode=$(live_record "$(child_of "$spid")")
    if [[ $mode != smc-r ]]; then # no SMC-R transfer to interrupt: do not wait for timeouts
        fail "kernel $kside killed mid-transfer: the transfer never ran over SMC-R ($mode)"
        show "$logs/$name.s" smcr 4; show "$logs/$name.k" kernel 2
        kill "$(child_of "$spid")" "$(child_of "$kpid")" 2>/dev/null
        wait "$spid" "$kpid" 2>/dev/null
        return
    fi
    sleep 2
    t0=$SECONDS
    kill -KILL "$(child_of "$kpid")" 2>/dev/null
    wait "$spid" || rc=$?
    local secs=$((SECONDS - t0))
    # ECONNRESET, or EPIPE when the killed kernel side had read everything: it then
    # closes normally (CDC "closed", abort only when our next data arrives), and a TCP
    # writer would see the same after the peer's FIN
    if [[ $mode == smc-r && $rc != 0 && $secs -lt 10 ]] &&
        grep -qE 'Connection reset by peer|Broken pipe' "$logs/$name.s"; then
        pass "kernel $kside killed mid-transfer over SMC-R: the smcr side ended after ${secs}s: $(grep -m1 -oE '[a-z]*\([0-9]*, [^)]*\): (Connection reset by peer|Broken pipe)' "$logs/$name.s")"
    else
        fail "kernel $kside killed mid-transfer ($mode): the smcr side ended after ${secs}s, exit $rc"
        show "$logs/$name.s" smcr 8
        show "$logs/$name.k" kernel 4
        dmesg | tail -n 5 | sed 's/^/    dmesg| /'
    fi
    wait "$kpid" 2>/dev/null
}
kill_case e1 7805 server
kill_case e2 7806 client

# ---------------------------------------------- (a) smcr client -> kernel server ----
# (the big echoes last: a loaded host's TCG guest moves them at 0.3-1 MB/s)
case_begin "(a) smcr client -> kernel AF_SMC server: ${mib} MiB echoed over SMC-Rv2"
cli0=$(kstat smcr_client_v2_success) srv0=$(kstat smcr_server_v2_success)
timeout 300 "$ksmc" server "$B" 7801 "$bytes" > "$logs/a.srv" 2>&1 &
spid=$!
wait_listening 7801 || echo "    (kernel server not listening)"
t0=$SECONDS
timeout 300 "$smc_run" -d socat -t 5 -T 60 - "TCP4:$B:7801,bind=$A,$retry" < "$logs/data" \
    > "$logs/a.out" 2> "$logs/a.cli" &
cpid=$!
rec=$(live_record "$(child_of "$cpid")")
rc=0; wait "$cpid" || rc=$?
wait "$spid"; src=$?
secs=$((SECONDS - t0))
if [[ $rc == 0 && $(sha "$logs/a.out") == "$want" ]]; then
    pass "smcr client -> kernel server: $mib MiB echoed, sha256 equal (${secs}s)"
else
    fail "smcr client -> kernel server: exit $rc, echo sha256 differs or incomplete"
    show "$logs/a.cli" cli 12
fi
[[ $src == 0 ]] && grep -q 'mode=SMC-R ibdev=rxe1' "$logs/a.srv" &&
    pass "smcr client -> kernel server: the kernel's smc_diag: $(grep -m1 -o 'mode=SMC-R.*' "$logs/a.srv")" ||
    { fail "smcr client -> kernel server: the kernel server (exit $src) does not report SMC-R"; show "$logs/a.srv" srv; }
[[ $rec == smc-r ]] && pass "smcr client -> kernel server: smcr-stat says $rec" ||
    fail "smcr client -> kernel server: smcr-stat says '$rec'"

# ---------------------------------------------- (b) kernel client -> smcr server ----
case_begin "(b) kernel AF_SMC client -> smcr server: ${mib} MiB echoed over SMC-Rv2"
timeout 300 "$smc_run" -d socat -T 60 "TCP4-LISTEN:7802,bind=$B,reuseaddr" \
    SYSTEM:"tee $logs/b.recv" > "$logs/b.srv" 2>&1 &
spid=$!
wait_listening 7802 || echo "    (smcr server not listening)"
t0=$SECONDS
timeout 300 "$ksmc" client "$B" 7802 "$bytes" "$A" > "$logs/b.cli" 2>&1 &
cpid=$!
rec=$(live_record "$(child_of "$spid")")
rc=0; wait "$cpid" || rc=$?
secs=$((SECONDS - t0))
wait "$spid"
if [[ $rc == 0 && $(sha "$logs/b.recv") == "$kwant" ]]; then
    pass "kernel client -> smcr server: $mib MiB echoed and checked by the kernel client, the smcr server's bytes have its sha256 (${secs}s)"
else
    fail "kernel client -> smcr server: kernel client exit $rc, server got $(stat -c %s "$logs/b.recv" 2>/dev/null) bytes"
    show "$logs/b.cli" cli; show "$logs/b.srv" srv 12
fi
grep -q 'mode=SMC-R ibdev=rxe0' "$logs/b.cli" &&
    pass "kernel client -> smcr server: the kernel's smc_diag: $(grep -m1 -o 'mode=SMC-R.*' "$logs/b.cli")" ||
    { fail "kernel client -> smcr server: the kernel client does not report SMC-R"; show "$logs/b.cli" cli; }
[[ $rec == smc-r ]] && pass "kernel client -> smcr server: smcr-stat says $rec" ||
    fail "kernel client -> smcr server: smcr-stat says '$rec'"

# ------------------------------------------------------- (c) the kernel's counters ----
case_begin "(c) the kernel's SMC statistics count (a) and (b) as SMC-Rv2 successes"
cli1=$(kstat smcr_client_v2_success) srv1=$(kstat smcr_server_v2_success)
[[ $((srv1 - srv0)) -ge 1 && $((cli1 - cli0)) -ge 1 ]] &&
    pass "the kernel's SMC statistics: smcr_server_v2_success $srv0 -> $srv1, smcr_client_v2_success $cli0 -> $cli1" ||
    { fail "the kernel's SMC statistics: server v2 $srv0 -> $srv1, client v2 $cli0 -> $cli1"; "$ksmc" stats | sed 's/^/    stats| /'; }

# ------------------------------------------------------ (f) the v2 LLC messages ----
case_begin "(f) the v2 LLC messages of (a)-(e) on the wire: ADD LINK rejected, CONFIRM/DELETE RKEY both ways"
sleep 0.5
kill -INT "$cap" 2>/dev/null
wait "$cap" 2>/dev/null
# every RoCE SEND Only (BTH opcode 0x04, the capture filter): source, then the message
# after the 12-byte BTH (type byte, v2 length, flags)
tshark -r "$logs/llc.pcapng" -Y udp -T fields -e ip.src -e udp.payload 2>/dev/null |
    awk '{ print $1, substr($2, 25) }' > "$logs/llc.txt"
count() { awk -v s="$1" -v t="$2" '$1 == s && substr($2, 1, length(t)) == t' "$logs/llc.txt" | wc -l; }
echo "    LLC SENDs seen (from $A / from $B): CONFIRM LINK $(count $A 21) / $(count $B 21)," \
    "ADD LINK $(count $A 22) / $(count $B 22), CONFIRM RKEY $(count $A 26) / $(count $B 26)," \
    "DELETE RKEY $(count $A 29) / $(count $B 29), TEST LINK $(count $A 27) / $(count $B 27)," \
    "DELETE LINK $(count $A 24) / $(count $B 24)"
[[ $(count $B 225800) -ge 1 && $(count $A 222c00c0) -ge 1 ]] &&
    pass "the kernel server's 88-byte ADD LINK v2 was rejected with the kernel's own 44-byte answer (22 2c 00 c0)" ||
    fail "no ADD LINK v2 request from the kernel server and our 44-byte reject on the wire"
[[ $(count $B 262c0000) -ge 1 && $(count $A 262c0080) -ge 1 &&
    $(count $A 262c0000) -ge 1 && $(count $B 262c0080) -ge 1 ]] &&
    pass "CONFIRM RKEY v2 requests and answers both ways (a reused link group)" ||
    fail "CONFIRM RKEY v2 not exchanged both ways"
[[ $(count $A 292c0000) -ge 1 && $(count $B 292c0080) -ge 1 &&
    $(count $B 292c0000) -ge 1 && $(count $A 292c0080) -ge 1 ]] &&
    pass "DELETE RKEY v2 requests and answers both ways (after each close)" ||
    fail "DELETE RKEY v2 not exchanged both ways"

refused=$(cat "$logs"/*.cli "$logs"/*.s 2>/dev/null | grep -c 'Connection refused')
[[ $refused == 0 ]] || tshark -r "$logs/llc.pcapng" -Y 'tcp.flags.reset == 1' 2>/dev/null |
    head -n 4 | sed 's/^/    resets| /'
[[ $refused == 0 ]] || echo "    note: $refused connect(s) to a kernel listener were refused and retried"
case_end
[[ -n ${KERNEL_LOGS:-} ]] || rm -rf "$logs"
tap_done
