#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A link group's second link (SMC-Rv2, two RDMA devices per "host"), run INSIDE
# scripts/rxe-vm -n pair2 (kernel >= 6.12 with its SMC set up) by the meson suite 'rxe':
#   scripts/rxe-vm -n pair2 -- tests/rxe/link2.sh BUILD_DIR BUILD/tests/rxe/smc_echo [MIB]
# "Host A" is 10.77.0.1 (veth0/rxe0) with 10.77.0.3 (veth2/rxe2), "host B" 10.77.0.2
# (rxe1) with 10.77.0.4 (rxe3); PNET id RXEA for A's devices, RXEB for B's.
#   (k) kernel AF_SMC client (A) -> kernel AF_SMC server (B): the echo works and the
#       kernel's link dump (SMC_NETLINK_GET_LINK_SMCR) shows each side's link group with
#       two links, one on each of its devices: proof that this topology is what the
#       kernel needs for a second link (an alternate device with the group's PNET id whose
#       netdev has an address in the subnet of the group's own one, smc_ib_determine_gid_rcu()).
# Prints one line per check and "N passed, N failed"; exit 0 only if all passed.
set -u
build=${1:?usage: link2.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
ksmc=${2:?usage: link2.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
mib=${3:-64}
A=10.77.0.1 B=10.77.0.2

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair2 ]] || {
    echo "link2.sh: run me inside 'scripts/rxe-vm -n pair2'" >&2
    exit 2
}
if [[ ${RXE_VM_SMC:-0} != 1 ]]; then
    echo "link2.sh: the guest kernel's SMC-R is not set up (kernel < 6.12?): skipped"
    exit 77
fi
source "$(dirname -- "${BASH_SOURCE[0]}")/case_lib.sh"
logs=${LINK2_LOGS:-$(mktemp -d)}; mkdir -p "$logs"
bytes=$((mib << 20))
# links_of ROLE: the devices of the kernel's links in its groups of ROLE, sorted, one
# line per group ("rxe0 rxe2")
links_of() {
    rxe-vm-smc links | awk -v r="$1" '
        /^lgr/ { if (g != "") print g; g = ""; mine = index($0, "role=" r) > 0; next }
        /^  link/ && mine { for (i = 1; i <= NF; i++) if ($i ~ /^dev=/) g = g " " substr($i, 5) }
        END { if (g != "") print g }' | while read -r l; do tr ' ' '\n' <<< "$l" | sort | xargs; done
}

# ------------------------------------------------ (k) kernel <-> kernel, two links ----
timeout 300 "$ksmc" server "$B" 7901 "$bytes" > "$logs/k.srv" 2>&1 &
spid=$!
wait_listening 7901 || echo "    (kernel server not listening)"
if timeout 300 "$ksmc" client "$B" 7901 "$bytes" "$A" > "$logs/k.cli" 2>&1; then
    pass "kernel client -> kernel server: $mib MiB echoed ($(grep -m1 -o 'mode=SMC-R ibdev=[a-z0-9]*' "$logs/k.cli"))"
else
    fail "kernel client -> kernel server: the echo failed"; show "$logs/k.cli" cli
fi
wait "$spid"
rxe-vm-smc links > "$logs/k.links" 2>&1
srv=$(links_of server) cli=$(links_of client)
[[ $srv == "rxe1 rxe3" && $cli == "rxe0 rxe2" ]] &&
    pass "the kernel built two-link groups: server on $srv, client on $cli" ||
    { fail "the kernel's link groups: server '$srv', client '$cli' (want rxe1 rxe3 / rxe0 rxe2)"
      show "$logs/k.links" links 12; dmesg | grep 'smc:' | tail -n 6 | sed 's/^/    dmesg| /'; }

[[ -n ${LINK2_LOGS:-} ]] || rm -rf "$logs"
echo "$passed passed, $failed failed (${SECONDS}s in the guest)"
[[ $failed == 0 ]]
