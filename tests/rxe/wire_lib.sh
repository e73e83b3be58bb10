# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Packet and byte counters on veth0, the "wire" between the VM's two hosts
# (docs/rxe-vm.md: with one namespace and policy routing, TCP between
# 10.77.0.1 and 10.77.0.2 and RoCEv2 between rxe0 and rxe1 both cross the
# veth pair, so veth0 sees everything the "hosts" exchange).  tc flower
# filters count them by kind; sourced by selftest.sh and apps.sh.
# Filter prefs: 4 = RoCEv2 (UDP 4791) over IPv4, 6 = RoCEv2 over IPv6,
# 8 = TCP over IPv4, 10 = TCP over IPv6.
wire_setup() {
    local dir
    tc qdisc add dev veth0 clsact
    for dir in egress ingress; do
        tc filter add dev veth0 "$dir" pref 4 protocol ip flower ip_proto udp dst_port 4791 action pass
        tc filter add dev veth0 "$dir" pref 6 protocol ipv6 flower ip_proto udp dst_port 4791 action pass
        tc filter add dev veth0 "$dir" pref 8 protocol ip flower ip_proto tcp action pass
        tc filter add dev veth0 "$dir" pref 10 protocol ipv6 flower ip_proto tcp action pass
    done
}
counter() { # egress|ingress PREF bytes|pkt -> count so far
    tc -s filter show dev veth0 "$1" pref "$2" |
        awk -v unit="$3" '/Sent [0-9]+ bytes [0-9]+ pkt/ {
            for (i = 1; i < NF; i++) if ($(i + 1) == unit) print $i; exit }'
}
snapshot() { echo "$(counter egress "$1" "${2:-pkt}") $(counter ingress "$1" "${2:-pkt}")"; }
# wire_bytes: "ROCE TCP", bytes both ways over IPv4 and IPv6 so far
wire_bytes() {
    local roce=0 tcp=0 pref dir
    for dir in egress ingress; do
        for pref in 4 6; do roce=$((roce + $(counter "$dir" "$pref" bytes))); done
        for pref in 8 10; do tcp=$((tcp + $(counter "$dir" "$pref" bytes))); done
    done
    echo "$roce $tcp"
}
