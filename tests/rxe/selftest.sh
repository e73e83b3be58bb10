#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Soft-RoCE checks, run INSIDE scripts/rxe-vm (-n pair) by the meson suite 'rxe':
#   scripts/rxe-vm -- tests/rxe/selftest.sh \
#       BUILD/tests/rxe/{mr_access_probe,smc_echo,verbs_stream,verbs_engine}
# Proves the two-"host" setup the RDMA tests rely on: rxe0/rxe1 with RoCEv2 GIDs for their
# IPv4 and IPv6 addresses, verbs traffic rxe0 -> rxe1 that really crosses veth0 (UDP 4791),
# rdma_cm over IPv4 and IPv6, that the device enforces a memory region's access rights, and
# that the kernel's own SMC-R (AF_SMC) moves its data over RoCE, as rxe-vm configures it;
# then smcr's own verbs layer (src/smcr/ib.c, wr.c) and the engine over its verbs
# transport (src/smcr/verbs.c) between the two "hosts".
# Prints TAP, one subtest per check (tests/rxe/case_lib.sh).
set -u
probe=${1:?usage: selftest.sh PATH/TO/mr_access_probe PATH/TO/smc_echo}
smc_echo=${2:?usage: selftest.sh PATH/TO/mr_access_probe PATH/TO/smc_echo PATH/TO/verbs_stream}
usage="usage: selftest.sh PATH/TO/{mr_access_probe,smc_echo,verbs_stream,verbs_engine}"
verbs_stream=${3:?$usage}
verbs_engine=${4:?$usage}

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "selftest.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}

source "$(dirname -- "${BASH_SOURCE[0]}")/case_lib.sh"
check() { # NAME COMMAND...: pass if COMMAND succeeds
    local name=$1; shift
    if "$@"; then pass "$name"; else fail "$name"; fi
}
logs=$(mktemp -d)
show_log() { sed "s/^/    $2| /" "$logs/$1" | tail -n "${3:-8}"; }

# ---------------------------------------------------------------- devices and GIDs ----
gid_of() { # ADDRESS -> the GID sysfs spells for it (IPv4 as ::ffff:a.b.c.d)
    case $1 in
        10.77.0.*) printf '0000:0000:0000:0000:0000:ffff:0a4d:%04x\n' "${1##*.}" ;;
        fd77::*) printf 'fd77:0000:0000:0000:0000:0000:0000:%04x\n' "0x${1##*:}" ;;
    esac
}
gid_index() { # DEV ADDRESS -> index of its RoCE v2 GID, or nothing
    local want dir=/sys/class/infiniband/$1/ports/1 f i gid type
    want=$(gid_of "$2")
    for f in "$dir"/gids/*; do
        i=${f##*/}
        read -r gid < "$f" 2>/dev/null || continue
        [[ $gid == "$want" ]] || continue
        read -r type < "$dir/gid_attrs/types/$i" 2>/dev/null || continue
        [[ $type == "RoCE v2" ]] && { echo "$i"; return; }
    done
}

echo "== kernel $RXE_VM_KERNEL, $(rdma link show | tr -s ' ' | cut -d' ' -f2,4,8 | paste -sd,)"
for dev in rxe0 rxe1; do
    check "$dev exists and its port is ACTIVE" \
        grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state"
done
declare -A gid_idx
for pair in rxe0:10.77.0.1 rxe0:fd77::1 rxe1:10.77.0.2 rxe1:fd77::2; do
    dev=${pair%%:*} addr=${pair#*:}
    gid_idx[$pair]=$(gid_index "$dev" "$addr")
    if [[ -n ${gid_idx[$pair]} ]]; then
        pass "$dev has a RoCE v2 GID for $addr (index ${gid_idx[$pair]})"
    else
        fail "$dev has no RoCE v2 GID for $addr"
    fi
done

# --------------------------------------------- RoCE packet counters on the "wire" ----
# tc counts RoCEv2 packets (UDP destination port 4791) leaving and entering veth0, so a
# check can tell traffic that crossed the veth pair from traffic the kernel short-cut.
source "$(dirname -- "${BASH_SOURCE[0]}")/wire_lib.sh"
wire_setup
crossed() { # NAME FAMILY "EGRESS INGRESS" MIN: veth0 saw >= MIN more packets each way
    local name=$1 min=$4 out0 in0 out1 in1
    read -r out0 in0 <<< "$3"
    read -r out1 in1 <<< "$(snapshot "$2")"
    local d_out=$((out1 - out0)) d_in=$((in1 - in0))
    if [[ $d_out -ge $min && $d_in -ge $min ]]; then
        pass "$name: RoCEv2 packets crossed veth0 ($d_out out, $d_in in)"
    else
        fail "$name: too few RoCEv2 packets on veth0 ($d_out out, $d_in in; want >= $min each way)"
    fi
}

# ------------------------------------------------------------ server/client runner ----
# run_pair NAME SERVER_CMD CLIENT_CMD: server in the background, client after it is up;
# both bounded; the check passes when both exit 0.
wait_listening() { # TCP_PORT: until a socket listens on it (max ~5 s)
    local hex i
    hex=$(printf '%04X' "$1")
    for ((i = 0; i < 50; i++)); do
        grep -Eq ":$hex 0+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
wait_cm_listening() { # ADDR:PORT: until an rdma_cm id listens there (max ~5 s)
    local i
    for ((i = 0; i < 50; i++)); do
        rdma resource show cm_id | grep -q "state LISTEN .* src-addr $1 " && return 0
        sleep 0.1
    done
    return 1
}
wait_line() { # FILE TEXT: until FILE contains TEXT (max ~5 s)
    local i
    for ((i = 0; i < 50; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
run_pair() {
    local name=$1 server=$2 client=$3 ready=$4 spid crc src
    timeout 40 bash -c "$server" > "$logs/server" 2>&1 & spid=$!
    eval "$ready" || echo "    (server not ready in time)"
    timeout 30 bash -c "$client" > "$logs/client" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    if [[ $crc == 0 && $src == 0 ]]; then
        pass "$name"
    else
        fail "$name (client exit $crc, server exit $src)"
        show_log server srv
    fi
    show_log client cli 5
}

# --------------------------------------------------------------------- verbs: RC ----
g0=${gid_idx[rxe0:10.77.0.1]:-1} g1=${gid_idx[rxe1:10.77.0.2]:-1}
before=$(snapshot 4)
run_pair "ibv_rc_pingpong rxe0 (10.77.0.1) -> rxe1 (10.77.0.2), 100 round trips" \
    "ibv_rc_pingpong -d rxe1 -g $g1 -n 100" \
    "ibv_rc_pingpong -d rxe0 -g $g0 -n 100 10.77.0.2" \
    "wait_listening 18515"
crossed "ibv_rc_pingpong" 4 "$before" 100

# -------------------------------------------------------------------- rdma_cm: rping ----
before=$(snapshot 4)
run_pair "rping (rdma_cm) 10.77.0.1 -> 10.77.0.2" \
    "rping -s -a 10.77.0.2 -C 10" \
    "rping -c -a 10.77.0.2 -I 10.77.0.1 -C 10 -v" \
    "wait_cm_listening 10.77.0.2:7174"
crossed "rping IPv4" 4 "$before" 10
before=$(snapshot 6)
run_pair "rping (rdma_cm) fd77::1 -> fd77::2" \
    "rping -s -a fd77::2 -C 10" \
    "rping -c -a fd77::2 -I fd77::1 -C 10 -v" \
    "wait_cm_listening fd77::2:7174"
crossed "rping IPv6" 6 "$before" 10

# ------------------------------------------------ memory region access enforcement ----
run_pair "mr_access_probe: REMOTE_WRITE-only region refuses READ and out-of-bounds WRITE" \
    "'$probe' server 10.77.0.2 7471" \
    "'$probe' client 10.77.0.2 7471 10.77.0.1" \
    "wait_line '$logs/server' listening"
show_log server srv 3

# ------------------------------------------------------------------- kernel SMC-R ----
if [[ ${RXE_VM_SMC:-0} == 1 ]]; then
    # SMC-R proper, not its TCP fallback: the data crosses veth0 as RoCE while TCP (which
    # carries only the CLC handshake) stays small; a fallback would move it all over TCP.
    bytes=1048576
    read -r roce_out0 roce_in0 <<< "$(snapshot 4 bytes)"
    read -r tcp_out0 tcp_in0 <<< "$(snapshot 8 bytes)"
    run_pair "kernel AF_SMC echo of 1 MiB 10.77.0.1 -> 10.77.0.2" \
        "'$smc_echo' server 10.77.0.2 7472 $bytes" \
        "'$smc_echo' client 10.77.0.2 7472 $bytes 10.77.0.1" \
        "wait_listening 7472"
    read -r roce_out1 roce_in1 <<< "$(snapshot 4 bytes)"
    read -r tcp_out1 tcp_in1 <<< "$(snapshot 8 bytes)"
    roce=$((roce_out1 - roce_out0))/$((roce_in1 - roce_in0))
    tcp=$((tcp_out1 - tcp_out0 + tcp_in1 - tcp_in0))
    if [[ $((roce_out1 - roce_out0)) -ge $bytes && $((roce_in1 - roce_in0)) -ge $bytes &&
          $tcp -lt $((bytes / 8)) ]]; then
        pass "kernel SMC-R carried it: RoCE bytes out/in $roce, TCP bytes $tcp"
    else
        fail "kernel SMC-R did not carry it: RoCE bytes out/in $roce, TCP bytes $tcp"
    fi
    smc_configured() {
        rxe-vm-smc show > "$logs/smc" 2>&1 &&
            grep -q '^ueid RXE-VM' "$logs/smc" &&
            grep -q '^pnet RXEA netdev n/a ibdev rxe0 port 1' "$logs/smc" &&
            grep -q '^pnet RXEB netdev n/a ibdev rxe1 port 1' "$logs/smc"
    }
    check "kernel SMC-R configured (user EID, PNET ids veth0/rxe0 and veth1/rxe1)" smc_configured
fi

# ------------------------------------ smcr's verbs layer: src/smcr/ib.c and wr.c ----
# verbs_stream: one endpoint per "host" finds its RDMA port and RoCE v2 GID from its TCP
# socket's local address, both trade QP number/PSN/GID/MAC and RMB address/rkey over that
# TCP connection (as CLC does), then 500 round trips of a 44-byte SEND and a stream by RDMA
# WRITE into the peer's 256 KiB RMB (wrapping) plus CDC-like SENDs, every byte checked.
# The stream must cross veth0 as RoCEv2 while the TCP connection stays quiet.

# A rogue peer: after a correct set-up, one RDMA WRITE just past the end of the server's
# RMB (the rkey is the real one). The server's NIC refuses it (remote access error at the
# client) and puts that QP in error, so the server sees its link fail instead of garbage.
rogue_check() {
    local spid crc
    "$verbs_stream" server 10.77.0.2 7479 $((1 << 20)) $((256 << 10)) > "$logs/server" 2>&1 &
    spid=$!
    wait_line "$logs/server" listening || echo "    (server not ready in time)"
    timeout 30 "$verbs_stream" client 10.77.0.2 7479 10.77.0.1 $((1 << 20)) $((256 << 10)) \
        rogue > "$logs/client" 2>&1
    crc=$?
    wait "$spid"
    if [[ $crc == 0 ]] && grep -q 'FAIL: link failed' "$logs/server"; then
        pass "verbs_stream: a WRITE past the RMB's end is refused by the NIC, the link ends"
    else
        fail "verbs_stream: rogue WRITE past the RMB (client exit $crc)"
        show_log server srv
    fi
    show_log client cli 1
    show_log server srv 1
}
rogue_check
#
# verbs_engine: the engine's own data path (CDC, cursors, flow control, close) over the
# verbs transport, its CLC flow driven by the test with smcr_verbs_ops (connect.c does not
# select that transport yet); every byte checked, the stream must go as RoCEv2.
verbs_run() { # NAME PREF(4|6) SERVER_ADDR CLIENT_ADDR PORT BYTES -- SERVER_ARGS -- CLIENT_ARGS
    local name=$1 pref=$2 srv=$3 cli=$4 port=$5 bytes=$6 prog
    local out0 in0 out1 in1 tcp0 tcp1 tcp roce
    prog=$([[ $name == verbs_stream ]] && echo "$verbs_stream" || echo "$verbs_engine")
    local extra=''
    [[ $name == verbs_stream ]] && extra=" $((256 << 10))"
    read -r out0 in0 <<< "$(snapshot "$pref" bytes)"
    read -r tcp0 _ <<< "$(snapshot 8 bytes)"
    run_pair "$name $cli -> $srv: $((bytes >> 20)) MiB through a 256 KiB RMB, every byte checked" \
        "'$prog' server $srv $port $bytes$extra" \
        "'$prog' client $srv $port $cli $bytes$extra" \
        "wait_line '$logs/server' listening"
    read -r out1 in1 <<< "$(snapshot "$pref" bytes)"
    read -r tcp1 _ <<< "$(snapshot 8 bytes)"
    roce=$((out1 - out0)) tcp=$((tcp1 - tcp0))
    # pref 8 counts IPv4 TCP only: the IPv6 runs check RoCE bytes alone
    if [[ $roce -ge $bytes && ( $pref == 6 || $tcp -lt 65536 ) ]]; then
        pass "$name $cli -> $srv crossed veth0 as RoCEv2 ($roce bytes out; IPv4 TCP $tcp bytes)"
    else
        fail "$name $cli -> $srv: RoCEv2 bytes out $roce (want >= $bytes), IPv4 TCP $tcp"
    fi
}
verbs_run verbs_stream 4 10.77.0.2 10.77.0.1 7473 $((64 << 20))
verbs_run verbs_stream 6 fd77::2 fd77::1 7474 $((8 << 20))
verbs_run verbs_engine 4 10.77.0.2 10.77.0.1 7475 $((16 << 20))
verbs_run verbs_engine 6 fd77::2 fd77::1 7476 $((4 << 20))

# Link groups (src/smcr/lgr.c): 100 short connections one after the other between the
# same two processes run on one link group and one QP on each side (from the transport's
# info(), what smcr-stat shows, and from `rdma resource show qp`); then 4 at a time from 4
# threads on the group, 4 MiB each, every byte checked; after 3 s without connections
# the group is deleted (LLC DELETE LINK) and the QP is gone on both sides.
# (verbs_engine keeps an unused group for 3 s, the library 5 s.)
lgr_run() { # NAME PORT BYTES CONNS PARALLEL PINGS
    run_pair "$1" \
        "'$verbs_engine' server 10.77.0.2 $2 $3 $4 $6" \
        "'$verbs_engine' clients 10.77.0.2 $2 10.77.0.1 $3 $4 $5 $6" \
        "wait_line '$logs/server' listening"
    grep -h '^ok: .*\(link group\|handshake\|torn down\|one QP\|memory regions\)' \
        "$logs/client" "$logs/server" |
        sed 's/^/    /'
    grep -h 'mr: ' "$logs/client" "$logs/server" | sed 's/^/    /'
}
lgr_run "verbs_engine: 100 sequential connections share one link group and QP" \
    7482 4096 100 1 4
lgr_run "verbs_engine: 4 connections at once from 4 threads on one link group, 4 MiB each" \
    7483 $((4 << 20)) 5 4 20

# Security on a link group: while an honest client streams 64 MiB to the server, two rogue
# peers complete a real handshake (each its own process, so its own link group) and then
# misuse their group's QP with the server's RMB rkey and address from the CLC Accept: an
# RDMA READ of the RMB, an RDMA WRITE just past its end. The server's NIC refuses both
# (remote access error at the rogue); on the server only the rogue's link group ends (its
# connection resets), the honest connection, on its own group, finishes intact.
lgr_rogue() {
    local spid hpid r1 r2 hrc src
    VERBS_EXPECT_FAILURES=2 timeout 60 "$verbs_engine" server 10.77.0.2 7486 $((64 << 20)) 3 200 \
        > "$logs/server" 2>&1 &
    spid=$!
    wait_line "$logs/server" listening || echo "    (server not ready in time)"
    timeout 60 "$verbs_engine" client 10.77.0.2 7486 10.77.0.1 $((64 << 20)) \
        > "$logs/client" 2>&1 &
    hpid=$!
    wait_line "$logs/client" "handshake done" || echo "    (honest client not connected in time)"
    timeout 30 "$verbs_engine" rogue 10.77.0.2 7486 10.77.0.1 read > "$logs/rogue1" 2>&1
    r1=$?
    timeout 30 "$verbs_engine" rogue 10.77.0.2 7486 10.77.0.1 write > "$logs/rogue2" 2>&1
    r2=$?
    wait "$hpid"
    hrc=$?
    wait "$spid"
    src=$?
    if [[ $r1 == 0 && $r2 == 0 && $hrc == 0 && $src == 0 ]]; then
        pass "verbs_engine: rogue READ of an RMB and WRITE past it refused by the NIC; only the rogue's link group ended, the honest stream went through"
    else
        fail "verbs_engine: rogue peers (read $r1, write $r2, honest client $hrc, server $src)"
        show_log client cli 6
    fi
    grep -h '^ok: rogue' "$logs/rogue1" "$logs/rogue2" | sed 's/^/    /'
    grep -h 'FAIL' "$logs/rogue1" "$logs/rogue2" | sed 's/^/    /'
    show_log server srv 8
}
lgr_rogue

# Failure while data flows: the server process is killed, or its veth goes down (rxe1's
# port turns DOWN, the client's packets go nowhere). The client, blocked in the engine's
# send, must see ECONNRESET within 10 s, never hang. (`rdma link delete rxe1` with the
# library: tests/rxe/robust.sh. rxe cannot disassociate a user context, so the delete
# sends no device event and waits until every process closed the device; smcr notices
# the device node's removal instead, src/smcr/ib.h.)
verbs_break() { # NAME PORT ACTION (a command line; $spid is the server)
    local name=$1 port=$2 action=$3 spid cpid t0 ms i
    "$verbs_engine" server 10.77.0.2 "$port" $((1 << 30)) > "$logs/server" 2>&1 &
    spid=$!
    wait_line "$logs/server" listening || echo "    (server not ready in time)"
    "$verbs_engine" client 10.77.0.2 "$port" 10.77.0.1 $((1 << 30)) expect-reset \
        > "$logs/client" 2>&1 &
    cpid=$!
    wait_line "$logs/client" streaming && sleep 1
    t0=$(date +%s%N)
    eval "$action"
    for ((i = 0; i < 100; i++)); do
        kill -0 "$cpid" 2> /dev/null || break
        sleep 0.1
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
    kill -9 "$cpid" "$spid" 2> /dev/null
    if wait "$cpid" && grep -q 'as expected' "$logs/client"; then
        pass "verbs_engine: $name while streaming: the client got a reset within $ms ms"
    else
        fail "verbs_engine: $name while streaming: no clean reset within $ms ms"
        show_log server srv
    fi
    wait "$spid" 2> /dev/null
    show_log client cli 1
}
verbs_break "server killed" 7477 'kill -9 $spid'
verbs_break "server's veth down" 7478 'ip link set veth1 down'
ip link set veth1 up

# The same with 4 connections on one link group (the first made the group): every one of
# them must end with ECONNRESET/EPIPE, none may hang.
lgr_break() { # NAME PORT ACTION
    local name=$1 port=$2 action=$3 spid cpid t0 ms i
    "$verbs_engine" server 10.77.0.2 "$port" $((1 << 30)) 4 0 > "$logs/server" 2>&1 &
    spid=$!
    wait_line "$logs/server" listening || echo "    (server not ready in time)"
    "$verbs_engine" clients 10.77.0.2 "$port" 10.77.0.1 $((1 << 30)) 4 4 0 expect-reset \
        > "$logs/client" 2>&1 &
    cpid=$!
    for ((i = 0; i < 50; i++)); do
        [[ $(grep -c streaming "$logs/client") -ge 4 ]] && break
        sleep 0.1
    done
    sleep 1
    t0=$(date +%s%N)
    eval "$action"
    for ((i = 0; i < 150; i++)); do
        kill -0 "$cpid" 2> /dev/null || break
        sleep 0.1
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
    kill -9 "$cpid" "$spid" 2> /dev/null
    if wait "$cpid" && [[ $(grep -c 'as expected' "$logs/client") == 4 ]]; then
        pass "verbs_engine: $name: all 4 connections of the link group reset within $ms ms"
    else
        fail "verbs_engine: $name: not every connection of the group reset cleanly ($ms ms)"
        show_log client cli 12
        show_log server srv
    fi
    wait "$spid" 2> /dev/null
}
lgr_break "server killed, 4 connections" 7484 'kill -9 $spid'
lgr_break "server's veth down, 4 connections" 7485 'ip link set veth1 down'
ip link set veth1 up

rm -rf "$logs"
tap_done
