#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# RFC 7609 option mode (design §4), run INSIDE scripts/rxe-vm (-n pair) by the
# meson suite 'rxe':
#   scripts/rxe-vm -- tests/rxe/tcpopt.sh BUILD_DIR BUILD/tests/rxe/smc_echo
# "Host A" is 10.77.0.1 (clients), "host B" 10.77.0.2 (servers); their TCP crosses
# veth0, where dumpcap records every SYN and SYN-ACK. scripts/smc_run, run as
# root on this cgroup-v2-only guest, attaches smcr's sock_ops program by itself.
#   (attach) smc_run as root attaches the program, and a second attach is a no-op;
#   (a) smcr client -> smcr server, IPv4 and IPv6: the echo is intact, the client's
#       smcr-stat record says smc-r (the server's SYN-ACK announced SMC: an SMC-R peer
#       on another "host"), and its log says the option mode was on;
#   (b) plain client -> smcr server and smcr client -> plain server: the plain
#       side receives exactly what the other side sent (sha256; no CLC byte), the
#       smcr side's smcr-stat --json record says tcp-fallback with a reason;
#   (c) the kernel's AF_SMC client -> smcr server: the kernel's CLC Proposal is
#       declined with a reason it knows, the echo is intact over TCP, and the kernel's
#       smc_diag says fallback and why;
#   (d) smcr client -> the kernel's AF_SMC server: our client learns "peer announced
#       SMC" (its log) and proposes; the kernel declines, both go on over TCP, the
#       echo is intact;
#   (e) the kernel's fallback statistics (SMC_NETLINK_GET_FBACK_STATS) count (c) and
#       (d): its client our Decline (as PEERDECL, with our code in smc_diag), its server
#       the reason it gave;
#   (f) the segments of (a)-(d) on veth0: SYN and SYN-ACK between two smcr programs,
#       and between smcr and the kernel's SMC, carry SMC's option (kind 254, ExID
#       0xE2D4C3D9); a plain client's SYN does not, and neither does our SYN-ACK to it.
#   (c), (d) and (e) are skipped where the guest kernel's SMC is not set up.
#   In (c) and (d) smcr does not read the kernel's UEID table (SMCR_KERNEL_UEID=0):
#   with it, smcr and the kernel agree on SMC-Rv2 (tests/rxe/kernel.sh (i)), and these
#   cases are about a peer the kernel sees as SMC that has no EID in common with it.
# Prints TAP, one subtest per case (tests/rxe/case_lib.sh).
set -u
build=${1:?usage: tcpopt.sh BUILD_DIR PATH/TO/smc_echo}
ksmc=${2:?usage: tcpopt.sh BUILD_DIR PATH/TO/smc_echo}
smc_run=$build/scripts/smc_run
stat_tool=$build/src/tools/smcr-stat
bpf_tool=$build/src/tools/smcr-bpf
A=10.77.0.1 B=10.77.0.2

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "tcpopt.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}
source "$(dirname -- "${BASH_SOURCE[0]}")/case_lib.sh"
logs=${TCPOPT_LOGS:-$(mktemp -d)}; mkdir -p "$logs"
export XDG_RUNTIME_DIR=$logs/run # smcr's stats files (the guest's /run is fresh)
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
head -c $((1 << 20)) /dev/urandom > "$logs/data"
head -c 333 /dev/urandom >> "$logs/data"
bytes=$(stat -c %s "$logs/data")
want=$(sha "$logs/data")

# ------------------------------------------------------------------ attachment ----
# smc_run attaches on its first run as root; a second run finds it in effect.
case_begin "(attach) smc_run as root attaches the sock_ops program, once"
SMC_DEBUG=1 "$smc_run" true 2> "$logs/attach.err"
if "$bpf_tool" status > "$logs/status" 2>&1; then
    pass "smc_run as root attached the sock_ops program: $(tail -n1 "$logs/status")"
else
    fail "smc_run did not attach the program"
    show "$logs/status" st
    show "$logs/attach.err" err
fi
"$bpf_tool" attach > "$logs/again" 2>&1
grep -q 'already' "$logs/again" && pass "attaching again is a no-op: $(cat "$logs/again")" ||
    fail "second attach: $(cat "$logs/again")"

# -------------------------------------------------------------------- capture ----
dumpcap -q -i veth0 -f 'tcp[tcpflags] & (tcp-syn|tcp-rst) != 0 or (ip6 and ip6[6] == 6 and ip6[53] & 0x06 != 0)' -w "$logs/syn.pcapng" \
    > "$logs/dumpcap.err" 2>&1 &
cap=$!
for ((i = 0; i < 100; i++)); do
    grep -q 'Capturing on' "$logs/dumpcap.err" && break
    sleep 0.1
done

# live_record PID: the first connection of PID in smcr-stat --json (live, or closed
# already: a kernel client closes right after its echo), as
# "mode fallback_name(code)" (waits up to 10 s; sed, not python: each program
# start costs ~50-70 ms in the guest, python3 ~1 s).
live_record() {
    local i out
    for ((i = 0; i < 50; i++)); do
        out=$("$stat_tool" --json -p "$1" 2>/dev/null | tr -d '\n' |
            grep -o '"state": "[a-z]*", "mode": "[^"]*"[^}]*"fallback_name": [^,]*' | head -n1 |
            sed -E 's/.*"mode": "([^"]*)".*"fallback_code": "?([^",]*)"?, "fallback_name": "?([^"]*)"?/\1 \3(\2)/')
        [[ -n $out ]] && { echo "$out"; return; }
        # a process that is gone publishes nothing more (its log then says why)
        [[ -n $1 ]] && kill -0 "$1" 2>/dev/null || break
        sleep 0.2
    done
    echo none
}

# echo_case NAME PORT SERVER(smcr|plain|kernel) CLIENT(smcr|plain|kernel) RECORD_SIDE(server|client|none)
# One echo of $logs/data from A to B. A socat server tees what it received into
# $logs/NAME.recv. Sets rec (the smcr side's record) and checks the data.
echo_case() {
    local name=$1 port=$2 server=$3 client=$4 side=$5 spid cpid rc=0 srv_pid
    local f=${FAM:-4} sa=$B ca=$A
    [[ $f == 6 ]] && sa='[fd77::2]' ca='[fd77::1]'
    local -a pre=()
    rec=''
    case $server in
    kernel) timeout 120 "$ksmc" server "$B" "$port" "$bytes" > "$logs/$name.srv" 2>&1 & ;;
    *)
        [[ $server == smcr ]] && pre=("$smc_run" -d) || pre=()
        timeout 120 "${pre[@]}" socat -T 90 "TCP$f-LISTEN:$port,bind=$sa,reuseaddr" \
            SYSTEM:"tee $logs/$name.recv" > "$logs/$name.srv" 2>&1 &
        ;;
    esac
    spid=$!
    wait_listening "$port" || echo "    (server not listening)"
    case $client in
    kernel)
        timeout 90 "$ksmc" client "$B" "$port" "$bytes" "$A" > "$logs/$name.cli" 2>&1 &
        ;;
    *)
        [[ $client == smcr ]] && pre=("$smc_run" -d) || pre=()
        # the client holds its end open 4 s after sending: the live record is read then
        { cat "$logs/data"; sleep 4; } |
            timeout 90 "${pre[@]}" socat -t 10 - "TCP$f:$sa:$port,bind=$ca" \
                > "$logs/$name.out" 2> "$logs/$name.cli" &
        ;;
    esac
    cpid=$!
    case $side in
    server) srv_pid=$(child_of "$spid"); rec=$(live_record "$srv_pid") ;;
    client) rec=$(live_record "$(child_of "$cpid")") ;;
    esac
    wait "$cpid" || rc=$?
    wait "$spid" || true
    # A quick peer (the kernel's smc_echo) can end the connection, and with it the smcr
    # process and its published stats, before they were read: then its own log says why.
    if [[ $rec == none ]]; then
        local side_log=$logs/$name.srv
        [[ $side == client ]] && side_log=$logs/$name.cli
        rec=$(grep -m1 -o "tcp-fallback ($side): reason 0x[0-9a-f]* [A-Z_0-9]*" "$side_log" |
            sed -E 's/tcp-fallback \(.*\): reason 0x([0-9a-f]*) (.*)/tcp-fallback \2(0x\1) (from its log)/')
        [[ -n $rec ]] || rec=none
    fi
    if [[ $client == kernel ]]; then
        [[ $rc == 0 ]] && pass "$name: the kernel client's echo of $bytes bytes is intact" ||
            { fail "$name: the kernel client failed (exit $rc)"; show "$logs/$name.cli" cli; show "$logs/$name.srv" srv; }
    else
        if [[ $rc == 0 && $(sha "$logs/$name.out") == "$want" ]]; then
            pass "$name: the client got back exactly the $bytes bytes it sent (sha256)"
        else
            fail "$name: echo differs or client failed (exit $rc)"
            show "$logs/$name.cli" cli
            show "$logs/$name.srv" srv
        fi
    fi
    if [[ $server != kernel && $client != kernel ]]; then
        [[ -f $logs/$name.recv && $(sha "$logs/$name.recv") == "$want" ]] &&
            pass "$name: the $server server received exactly the client's bytes (no CLC among them)" ||
            fail "$name: the $server server received $(stat -c %s "$logs/$name.recv" 2>/dev/null) bytes, not the client's $bytes"
    fi
}

case_begin "(a) smcr client -> smcr server, IPv4 and IPv6: SMC after the option"
# Two "hosts" (their own addresses): the server's SYN-ACK announced SMC, so SMC-R.
echo_case smcr-smcr 7601 smcr smcr client
[[ $rec == smc-r\ * ]] && pass "smcr-smcr: the client's record: $rec" ||
    fail "smcr-smcr: the client's record: $rec (want smc-r)"
grep -q 'announced SMC\|option mode on' "$logs/smcr-smcr.cli" &&
    pass "smcr-smcr: the client's log: $(grep -m1 -o 'RFC 7609 option mode on.*' "$logs/smcr-smcr.cli")" ||
    { fail "smcr-smcr: the client did not turn the option mode on"; show "$logs/smcr-smcr.cli" cli; }

# IPv6 after IPv4 (wait_listening reads /proc/net/tcp6's spelling of a listener).
FAM=6 echo_case smcr6-smcr6 7606 smcr smcr client
[[ $rec == smc-r\ * ]] && pass "IPv6 smcr-smcr: the client's record: $rec" ||
    fail "IPv6 smcr-smcr: the client's record: $rec (want smc-r)"

case_begin "(b) plain client -> smcr server, smcr client -> plain server: TCP with a reason, bytes exact"
echo_case plain-smcr 7602 smcr plain server
[[ $rec == tcp-fallback\ * && $rec != *'None('* ]] &&
    pass "plain client -> smcr server: the server's record: $rec" ||
    fail "plain client -> smcr server: the server's record: '$rec'"

echo_case smcr-plain 7603 plain smcr client
[[ $rec == tcp-fallback\ * && $rec != *'None('* ]] &&
    pass "smcr client -> plain server: the client's record: $rec" ||
    fail "smcr client -> plain server: the client's record: '$rec'"

# fback_count STATS NAME: NAME's count in `smc_echo stats` output STATS (0 if absent)
fback_count() { awk -v n="$2" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }' <<< "$1"; }
# diag_code LOG FIELD: FIELD (reason / peer_diagnosis) of the smc_diag line in LOG
diag_code() { grep -m1 -o "$2=0x[0-9a-f]*" "$1" | cut -d= -f2; }

no_ksmc="the guest kernel's SMC-R is not set up (kernel < 6.12?)"
case_begin "(c) kernel AF_SMC client -> smcr server: declined with a reason the kernel knows"
if [[ ${RXE_VM_SMC:-0} != 1 ]]; then
    case_skip "$no_ksmc"
    case_begin "(d) smcr client -> kernel AF_SMC server: proposed after its option, declined"
    case_skip "$no_ksmc"
    case_begin "(e) the kernel's fallback statistics count (c) and (d)"
    case_skip "$no_ksmc"
else
    fb0=$("$ksmc" stats 2>&1)
    SMCR_KERNEL_UEID=0 echo_case kernel-smcr 7604 smcr kernel server
    kernel_smcr_rec=$rec
    [[ $rec == tcp-fallback\ * && $rec != *'None('* ]] &&
        pass "kernel AF_SMC client -> smcr server: the server's record: $rec" ||
        fail "kernel AF_SMC client -> smcr server: the server's record: '$rec'"
    grep -q 'mode=TCP-fallback' "$logs/kernel-smcr.cli" &&
        pass "kernel AF_SMC client -> smcr server: the kernel's smc_diag: $(grep -m1 -o 'mode=.*' "$logs/kernel-smcr.cli")" ||
        { fail "kernel AF_SMC client: smc_diag does not report a fallback"; show "$logs/kernel-smcr.cli" cli; }

    case_begin "(d) smcr client -> kernel AF_SMC server: proposed after its option, declined"
    SMCR_KERNEL_UEID=0 echo_case smcr-kernel 7605 kernel smcr client
    [[ $rec == tcp-fallback\ * && $rec != *'None('* ]] &&
        pass "smcr client -> kernel AF_SMC server: the client's record: $rec" ||
        fail "smcr client -> kernel AF_SMC server: the client's record: '$rec'"
    grep -q 'announced SMC' "$logs/smcr-kernel.cli" &&
        pass "smcr client -> kernel AF_SMC server: $(grep -m1 -o 'the server announced SMC.*' "$logs/smcr-kernel.cli")" ||
        { fail "smcr client -> kernel AF_SMC server: no 'announced SMC' in the client's log"; show "$logs/smcr-kernel.cli" cli 12; }
    grep -q 'mode=TCP-fallback' "$logs/smcr-kernel.srv" &&
        pass "smcr client -> kernel AF_SMC server: the kernel's smc_diag: $(grep -m1 -o 'mode=.*' "$logs/smcr-kernel.srv")" ||
        { fail "kernel AF_SMC server: smc_diag does not report a fallback"; show "$logs/smcr-kernel.srv" srv; }

    # (e) the kernel's own fallback statistics (SMC_NETLINK_GET_FBACK_STATS) show why.
    # Its client counts our Decline as PEERDECL (0x05000000; smc_diag carries our code as
    # peer_diagnosis), its server counts the reason it declined our Proposal with.
    # (6.12's dump stops at the first server slot without a reason, so the client's
    # counters show only once the server has one: hence both cases before reading.)
    case_begin "(e) the kernel's fallback statistics count (c) and (d)"
    fb1=$("$ksmc" stats 2>&1)
    ours=$(sed -nE 's/.*\((0x[0-9a-f]+)\).*/\1/p' <<< "$kernel_smcr_rec")
    peer_diag=$(diag_code "$logs/kernel-smcr.cli" peer_diagnosis)
    c0=$(fback_count "$fb0" fallback_client_0x05000000) c1=$(fback_count "$fb1" fallback_client_0x05000000)
    [[ -n $ours && $((ours)) == $((peer_diag)) && $c1 -gt $c0 ]] &&
        pass "the kernel client's fallback statistics: PEERDECL $c0 -> $c1, smc_diag peer_diagnosis $peer_diag = our Decline's $ours" ||
        { fail "the kernel client's fallback statistics: PEERDECL $c0 -> $c1, peer_diagnosis '$peer_diag', our Decline '$ours'"; echo "$fb1" | sed 's/^/    stats| /'; }
    kreason=$(diag_code "$logs/smcr-kernel.srv" reason)
    k0=$(fback_count "$fb0" "fallback_server_$kreason") k1=$(fback_count "$fb1" "fallback_server_$kreason")
    s0=$(fback_count "$fb0" fallback_server_count) s1=$(fback_count "$fb1" fallback_server_count)
    [[ -n $kreason && $k1 -gt $k0 && $s1 -gt $s0 ]] &&
        pass "the kernel server's fallback statistics: reason $kreason $k0 -> $k1 (all server fallbacks $s0 -> $s1)" ||
        { fail "the kernel server's fallback statistics: reason '$kreason' $k0 -> $k1, all $s0 -> $s1"; echo "$fb1" | sed 's/^/    stats| /'; }
fi

# --------------------------------------------------------------- the segments ----
case_begin "(f) SMC's option in the SYNs and SYN-ACKs of (a)-(d), none to or from a plain program"
sleep 0.5
kill -INT "$cap" 2>/dev/null
wait "$cap" 2>/dev/null
# One line per SYN / SYN-ACK: "srcport dstport ack exid data"
tshark -r "$logs/syn.pcapng" -Y 'tcp.flags.syn == 1' -T fields -E separator=' ' \
    -e tcp.srcport -e tcp.dstport -e tcp.flags.ack -e tcp.options.experimental.exid \
    -e tcp.options.experimental.data > "$logs/syn.txt" 2> "$logs/tshark.err"
tshark -r "$logs/syn.pcapng" -Y 'tcp.flags.reset == 1' > "$logs/rst.txt" 2>/dev/null
tshark -r "$logs/syn.pcapng" -Y 'tcp.options.experimental' -V 2>/dev/null |
    grep -m2 -A4 'Experimental' > "$logs/tshark.v"
seg() { # PORT SYN|SYNACK -> the exid/data of the first such segment, or "-"
    local port=$1 ack=0 col=2
    [[ $2 == SYNACK ]] && ack=1 col=1
    awk -v p="$port" -v a="$ack" -v c="$col" '$c == p && $3 == a {
        print ($4 == "" ? "-" : $4 " " $5); exit }' "$logs/syn.txt"
}
opt='0xe2d4 c3d9'
expect() { # NAME PORT KIND WANT(opt|none)
    local got
    got=$(seg "$2" "$3")
    if [[ $4 == opt && $got == "$opt" ]] || [[ $4 == none && $got == - ]]; then
        if [[ $4 == opt ]]; then pass "$1: the $3 carries SMC's option (ExID, data: $got)"
        else pass "$1: the $3 carries no SMC option"; fi
    else
        fail "$1: the $3 should carry ${4/none/no option}: tshark saw '${got:-no such segment}'"
    fi
}
expect "smcr -> smcr" 7601 SYN opt
expect "smcr -> smcr" 7601 SYNACK opt
expect "plain -> smcr" 7602 SYN none
expect "plain -> smcr" 7602 SYNACK none
expect "smcr -> plain" 7603 SYN opt
expect "smcr -> plain" 7603 SYNACK none
expect "IPv6 smcr -> smcr" 7606 SYN opt
expect "IPv6 smcr -> smcr" 7606 SYNACK opt
if [[ ${RXE_VM_SMC:-0} == 1 ]]; then
    expect "kernel -> smcr" 7604 SYN opt
    expect "kernel -> smcr" 7604 SYNACK opt
    expect "smcr -> kernel" 7605 SYN opt
    expect "smcr -> kernel" 7605 SYNACK opt
fi
echo "    tshark, the first SMC option it decoded:"
sed 's/^/    | /' "$logs/tshark.v"
[[ ! -s $logs/rst.txt ]] || sed 's/^/    resets| /' "$logs/rst.txt"
sed 's/^/    segments| /' "$logs/syn.txt"
cp "$logs/syn.pcapng" "${TCPOPT_PCAP:-/dev/null}" 2>/dev/null || true

case_end
[[ -n ${TCPOPT_LOGS:-} ]] || rm -rf "$logs"
tap_done
