#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Link groups taken over by a peer that copies a victim's CLC fields (docs/security.md,
# "Link groups"), run INSIDE scripts/rxe-vm (-n pair) by the meson suite 'rxe':
#   scripts/rxe-vm -- tests/rxe/lgr_attack.sh BUILD_DIR
# The victim: a python client under smc_run on 10.77.0.1 with two SMC-R connections to a
# python echo server under smc_run on 10.77.0.2 (one link group on each side). The
# attacker sniffs veth0 (AF_PACKET, as anyone on the path could) for the victim's CLC
# Proposal and for the server's Accept of the second connection, which reuses the group.
#   (a) server side: from 10.77.0.5, the attacker sends the victim's own Proposal (its
#       peer id, GID, MAC, EIDs, byte for byte) to the server. It must not be put on the
#       victim's group: a Decline, or an Accept with the first-contact flag (a group of its
#       own), and the server's smcr-stat record of that connection refused by the server
#       itself (GIDNOTPEER) or SMC-R on another group. Had it been put on the victim's
#       group, its Decline SYNCERR, sent next, would end that group.
#   (b) client side: the victim connects to the attacker's server on 10.77.0.6, which
#       answers with the server's reuse Accept (its peer id, GID, the group's QP number)
#       and a bogus rkey. The victim must not take it: a Decline to the attacker, the
#       victim's smcr-stat record of that connection not on its group. Had it been taken,
#       the victim's first write there would go over the shared QP with that rkey, and the
#       server's NIC would end the link under every connection of the group.
#   Both: the victim's first connection then echoes 1 MiB intact, still SMC-R on its group.
# Prints TAP, one subtest per case (tests/rxe/case_lib.sh).
set -u
build=${1:?usage: lgr_attack.sh BUILD_DIR}
top=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
smc_run=$top/scripts/smc_run
stat_tool=${SMCR_STAT:-$build/src/tools/smcr-stat}
[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "lgr_attack.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}
source "$top/tests/rxe/case_lib.sh"
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
port=7493 evil_port=7494 VICTIM=10.77.0.1 SERVER=10.77.0.2 EVIL_CLIENT=10.77.0.5 EVIL_SERVER=10.77.0.6

# the attacker's addresses, one on each "host"'s interface
ip addr add $EVIL_CLIENT/32 dev veth0
ip addr add $EVIL_SERVER/32 dev veth1

cat > "$work/clc.py" <<'PY'
"""CLC messages as an attacker handles them: found in sniffed frames, read off a socket."""
import struct
EYE = b"\xe2\xd4\xc3\xd9"
NAMES = {1: "Proposal", 2: "Accept", 3: "Confirm", 4: "Decline"}

def find(frame):
    """Every whole CLC message (eyecatcher, length, trailer) in a frame."""
    out, i = [], frame.find(EYE)
    while i >= 0:
        if i + 8 <= len(frame) and frame[i + 4] in NAMES:
            n = struct.unpack(">H", frame[i + 5:i + 7])[0]
            if n >= 12 and frame[i + n - 4:i + n] == EYE:
                out.append(frame[i:i + n])
        i = frame.find(EYE, i + 1)
    return out

def read(s):
    """The next CLC message on socket s (b'' at EOF)."""
    b = b""
    while len(b) < 7 or len(b) < struct.unpack(">H", b[5:7])[0]:
        more = s.recv(4096)
        if not more:
            return b""
        b += more
    return b

def first_contact(m):
    return bool(m[7] & 0x08)

def describe(m):
    if not m:
        return "nothing (connection closed)"
    if m[4] == 4:
        return "Decline 0x%08x" % struct.unpack(">I", m[16:20])[0]
    if m[4] in (2, 3):
        return "%s, %s" % (NAMES[m[4]], "first contact" if first_contact(m) else "group reused")
    return NAMES.get(m[4], "type %d" % m[4])

def decline(peer_id, diag):
    """A version-1 Decline (28 bytes) naming diag."""
    return EYE + bytes([4]) + struct.pack(">H", 28) + bytes([0x10]) + peer_id + \
        struct.pack(">I", diag) + bytes(4) + EYE
PY

# The sniffer: every CLC message seen on veth0 (both directions), in order.
cat > "$work/sniff.py" <<'PY'
import os, socket, sys
sys.path.insert(0, os.path.dirname(sys.argv[0])); import clc
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
print("sniffing", flush=True)
n = 0
while True:
    for m in clc.find(s.recv(1 << 17)):
        kind = clc.NAMES[m[4]] + ("-first" if m[4] in (2, 3) and clc.first_contact(m) else "")
        with open(os.path.join(sys.argv[2], "%03d-%s" % (n, kind)), "wb") as f:
            f.write(m)
        n += 1
PY

cat > "$work/server.py" <<'PY'
import os, socket, sys, threading
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=echo_lib.serve, args=(c,), daemon=True).start()
PY
cp "$top/tests/rxe/echo_lib.py" "$work/"

# The victim. Steps wait for files the script creates: go-a after the attack on the
# server, go-b once the attacker's server listens. Prints "NAME MODE LINK_GROUP DEVICE"
# records and "echo NAME ok|FAIL ..." lines.
cat > "$work/victim.py" <<'PY'
import os, socket, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
work, server, port, evil, evil_port, stat = sys.argv[1:7]
def wait_for(name):
    while not os.path.exists(os.path.join(work, name)):
        time.sleep(0.05)
def show(name, c):
    r = echo_lib.record(c, stat)
    print(name, *(r if r else ("none", None, None)), flush=True)
def echo(name, c, size):
    got, ok, _, _ = echo_lib.stream(c, os.urandom(size))
    print("echo", name, "ok" if ok else "FAIL", got, flush=True)
conns = []
for name in ("conn1", "conn2"):
    c = socket.create_connection((server, int(port)), source_address=("10.77.0.1", 0))
    echo(name, c, 65536)
    show(name, c)
    conns.append(c)
open(os.path.join(work, "ready"), "w").close()
wait_for("go-a")
try:
    echo("after-a", conns[0], 1 << 20)
except OSError as e:
    print("echo after-a FAIL", e, flush=True)
show("after-a", conns[0])
wait_for("go-b")
c3 = socket.create_connection((evil, int(evil_port)), source_address=("10.77.0.1", 0))
show("conn3", c3)
try:  # the write that would go over the shared QP with the attacker's rkey
    c3.settimeout(2)
    c3.sendall(os.urandom(65536))
except OSError as e:
    print("conn3 send:", e, flush=True)
time.sleep(2)
try:
    echo("after-b", conns[0], 1 << 20)
except OSError as e:
    print("echo after-b FAIL", e, flush=True)
show("after-b", conns[0])
PY

# The attacker as a client: the victim's Proposal from its own address.
cat > "$work/evil_client.py" <<'PY'
import os, socket, sys
sys.path.insert(0, os.path.dirname(sys.argv[0])); import clc
prop = open(sys.argv[1], "rb").read()
s = socket.socket()
s.bind((sys.argv[2], 0))
s.connect((sys.argv[3], int(sys.argv[4])))
s.settimeout(20)
s.sendall(prop)
m = clc.read(s)
print("answer:", clc.describe(m), flush=True)
if m and m[4] == 2:
    # on the victim's group this ends it (the server fails a group its client declines
    # SYNCERR on); on a group of our own it harms nobody
    s.sendall(clc.decline(prop[8:16], 0x04000000))
s.close()
PY

# The attacker as a server: the server's reuse Accept for the victim, with a bogus rkey.
cat > "$work/evil_server.py" <<'PY'
import os, socket, struct, sys
sys.path.insert(0, os.path.dirname(sys.argv[0])); import clc
acc = bytearray(open(sys.argv[1], "rb").read())
acc[41:45] = struct.pack(">I", 0x0BADC0DE)  # the RMB's rkey (after peer id, GID, MAC, QPN)
l = socket.create_server((sys.argv[2], int(sys.argv[3])))
print("listening", flush=True)
c, _ = l.accept()
c.settimeout(20)
m = clc.read(c)
print("got:", clc.describe(m), flush=True)
c.sendall(acc)
m = clc.read(c)
print("answer:", clc.describe(m), flush=True)
try:  # a connection that fell back: echo what comes, over TCP
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
except OSError:
    pass
PY

export XDG_RUNTIME_DIR=$work/run SMCR_TRANSPORT=rdma SMCR_PEERS=10.77.0.0/24 SMCR_LEARN=0
mkdir -m 700 "$XDG_RUNTIME_DIR" "$work/sniffed"
python3 "$work/sniff.py" veth0 "$work/sniffed" > "$work/sniff.log" 2>&1 &
pids+=($!)
SMC_DEBUG=1 "$smc_run" python3 "$work/server.py" $SERVER $port > "$work/server.log" 2>&1 &
spid=$!
pids+=($spid)
for ((i = 0; i < 300; i++)); do # python under TCG: seconds
    grep -q listening "$work/server.log" 2>/dev/null && grep -q sniffing "$work/sniff.log" && break
    sleep 0.1
done
SMC_DEBUG=1 timeout 300 "$smc_run" python3 "$work/victim.py" "$work" $SERVER $port $EVIL_SERVER \
    $evil_port "$stat_tool" > "$work/victim.out" 2> "$work/victim.log" &
vpid=$!
pids+=($vpid)
for ((i = 0; i < 1200; i++)); do
    [[ -e $work/ready ]] && break
    kill -0 $vpid 2>/dev/null || break
    sleep 0.1
done
sleep 0.5 # the sniffer's last frames
kill "${pids[0]}" 2>/dev/null

# victim_field NAME N: field N (2: mode, 3: link group) of the victim's record NAME
victim_field() { awk -v n="$1" -v f="$2" '$1 == n { print $f; exit }' "$work/victim.out"; }
# server_record PEER: the server's last connection from PEER (live, or closed and not yet
# reused) as "mode link_group fallback_name"
server_record() {
    "$stat_tool" json -a -p "$spid" 2>/dev/null | python3 -c '
import json, sys
rs = [r for r in json.load(sys.stdin)["connections"] if r["peer_address"] == sys.argv[1]]
print(" ".join(str(rs[-1][k]) for k in ("mode", "link_group", "fallback_name")) if rs else "none")
' "$1"
}

case_begin "(setup) the victim's two connections share one SMC-R link group"
victim_lg=$(victim_field conn1 3)
if [[ $(victim_field conn1 2) == smc-r && $(victim_field conn2 2) == smc-r &&
    $victim_lg == "$(victim_field conn2 3)" && $victim_lg != None ]]; then
    pass "conn1 and conn2 are SMC-R on link group $victim_lg"
else
    fail "the victim's connections: $(grep conn "$work/victim.out" | tr '\n' ';')"
fi
server_lg=$(server_record $VICTIM | awk '{ print $2 }')
echo "the server's link group with the victim: $server_lg"
prop=$(ls "$work/sniffed" | grep -m1 Proposal)
reuse=$(ls "$work/sniffed" | grep -m1 -x '[0-9]*-Accept')
[[ -n $prop && -n $reuse ]] && pass "sniffed on veth0: the victim's Proposal and the server's reuse Accept" ||
    fail "sniffed: $(ls "$work/sniffed" | tr '\n' ' ')"
case_end

case_begin "(a) the victim's Proposal replayed from $EVIL_CLIENT does not join its group"
if [[ -z $prop ]]; then
    fail "no Proposal to replay"
else
    timeout 60 python3 "$work/evil_client.py" "$work/sniffed/$prop" $EVIL_CLIENT $SERVER $port \
        > "$work/evil_client.out" 2>&1
    answer=$(sed -n 's/^answer: //p' "$work/evil_client.out")
    case $answer in
    Decline* | *"first contact") pass "the server answered the attacker: $answer" ;;
    *) fail "the server answered the attacker: ${answer:-$(cat "$work/evil_client.out")}" ;;
    esac
    sleep 1
    read -r mode lg why <<< "$(server_record $EVIL_CLIENT)"
    if [[ $mode == none ]]; then
        fail "the server has no record of the attacker's connection"
        "$stat_tool" json -a -p "$spid" | tail -n 12
    elif [[ $why == GIDNOTPEER || ($mode == smc-r && $lg != "$server_lg") ]]; then
        # (a fallback for the attacker's own Decline, PEERDECL, says nothing: the server
        # had put it on the victim's group first)
        pass "the server's record of it: $mode, link group $lg (the victim's: $server_lg), reason $why"
    else
        fail "the server's record of it: $mode, link group $lg (the victim's: $server_lg), reason $why"
    fi
fi
touch "$work/go-a"
for ((i = 0; i < 600; i++)); do
    grep -q '^after-a' "$work/victim.out" && break
    kill -0 $vpid 2>/dev/null || break
    sleep 0.1
done
if grep -q '^echo after-a ok' "$work/victim.out" &&
    [[ $(victim_field after-a 2) == smc-r && $(victim_field after-a 3) == "$victim_lg" ]]; then
    pass "the victim's conn1 then echoed 1 MiB intact, SMC-R on link group $victim_lg"
else
    fail "the victim's conn1 afterwards: $(grep after-a "$work/victim.out" | tr '\n' ';')"
fi
grep -h 'GIDNOTPEER\|not its TCP address' "$work/server.log" | tail -n 2
case_end

case_begin "(b) the server's reuse Accept replayed by $EVIL_SERVER is not taken"
if [[ -z $reuse ]]; then
    fail "no reuse Accept to replay"
    touch "$work/go-b"
else
    python3 "$work/evil_server.py" "$work/sniffed/$reuse" $EVIL_SERVER $evil_port \
        > "$work/evil_server.out" 2>&1 &
    epid=$!
    pids+=($epid)
    for ((i = 0; i < 300; i++)); do
        grep -q listening "$work/evil_server.out" && break
        sleep 0.1
    done
    touch "$work/go-b"
    for ((i = 0; i < 900; i++)); do
        grep -q '^after-b' "$work/victim.out" && break
        kill -0 $vpid 2>/dev/null || break
        sleep 0.1
    done
    answer=$(sed -n 's/^answer: //p' "$work/evil_server.out")
    case $answer in
    Decline*) pass "the victim answered the attacker's Accept: $answer" ;;
    *) fail "the victim answered the attacker's Accept: ${answer:-$(cat "$work/evil_server.out")}" ;;
    esac
    if [[ $(victim_field conn3 3) != "$victim_lg" ]]; then
        pass "the victim's record of that connection: $(victim_field conn3 2), link group $(victim_field conn3 3)"
    else
        fail "the victim put that connection on its link group $victim_lg"
    fi
    if grep -q '^echo after-b ok' "$work/victim.out" &&
        [[ $(victim_field after-b 2) == smc-r && $(victim_field after-b 3) == "$victim_lg" ]]; then
        pass "the victim's conn1 then echoed 1 MiB intact, SMC-R on link group $victim_lg"
    else
        fail "the victim's conn1 afterwards: $(grep 'after-b\|conn3' "$work/victim.out" | tr '\n' ';')"
    fi
    grep -h 'reuses a link group\|link group .* ends' "$work/victim.log" | tail -n 2
fi
case_end
wait $vpid 2>/dev/null
tap_done
