#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Programs written for the kernel's SMC (tests/apps/smc_sockets.c: socket(AF_SMC, ...)
# and socket(AF_INET, SOCK_STREAM, IPPROTO_SMC)) under smc_run between the rxe VM's two
# "hosts", run INSIDE scripts/rxe-vm -n pair (kernel >= 6.12 with its SMC set up) by the
# meson suite 'rxe':
#   scripts/rxe-vm -- tests/rxe/afsmc.sh BUILD_DIR BUILD/tests/rxe/smc_echo [MIB]
# This kernel has SMC, so smcr leaves such sockets to it unless SMCR_AF_SMC=smcr:
#   (a) by default, under smc_run, the kernel serves them (smcr's log names none),
#       or, for IPPROTO_SMC on a kernel without it, smcr does;
#   (b) SMCR_AF_SMC=smcr: an AF_SMC client served by smcr -> the kernel's AF_SMC server
#       (smc_echo): MIB MiB echoed and checked, SMC-R by smcr's log and the kernel's
#       smc_diag;
#   (c) SMCR_AF_SMC=smcr: the kernel's AF_SMC client (smc_echo) -> an IPPROTO_SMC
#       server served by smcr: echoed and checked by the kernel client, SMC-R by
#       smc_diag and smcr's log;
#   (d) SMCR_AF_SMC=smcr: IPPROTO_SMC client -> AF_SMC server, both smcr: SMC-R.
# As tests/rxe/kernel.sh: smc_run as root attaches the RFC 7609 option program,
# SMCR_UEID=RXE-VM is the kernel's user EID. Prints TAP (tests/rxe/case_lib.sh).
set -u
build=${1:?usage: afsmc.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
ksmc=${2:?usage: afsmc.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
mib=${3:-4}
smc_run=$build/scripts/smc_run
prog=$build/tests/apps/smc_sockets
A=10.77.0.1 B=10.77.0.2

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair ]] || {
    echo "afsmc.sh: run me inside 'scripts/rxe-vm -n pair'" >&2
    exit 2
}
source "$(dirname -- "${BASH_SOURCE[0]}")/case_lib.sh"
[[ ${RXE_VM_SMC:-0} == 1 ]] || tap_skip_all "the guest kernel's SMC-R is not set up (kernel < 6.12?)"
[[ -x $prog ]] || tap_skip_all "smc_sockets is not built ($prog)"
logs=${AFSMC_LOGS:-$(mktemp -d)}; mkdir -p "$logs"
export XDG_RUNTIME_DIR=$logs/run SMCR_UEID=RXE-VM
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
bytes=$((mib << 20))
"$smc_run" true 2> "$logs/attach.err" # attaches the option program

# ------------------------------------------------------------------ (a) default ----
case_begin "(a) by default smcr leaves AF_SMC and IPPROTO_SMC sockets to a kernel that serves them"
for kind in afsmc ipproto; do
    plain=$("$prog" probe "$kind" 4 2>&1)
    got=$(timeout 120 "$smc_run" -d "$prog" probe "$kind" 4 2> "$logs/a-$kind.err")
    if [[ $plain == ok && $got == ok ]] && ! grep -q 'served by smcr' "$logs/a-$kind.err"; then
        pass "$kind: the kernel's socket under smc_run, as without it"
    elif [[ $plain != ok && $got == ok ]] && grep -q 'served by smcr' "$logs/a-$kind.err"; then
        pass "$kind: this kernel refuses it ($plain); under smc_run smcr serves it"
    else
        fail "$kind: the kernel says '$plain', under smc_run '$got'"; show "$logs/a-$kind.err" probe
    fi
done

# ------------------------------------------- (b) smcr AF_SMC client -> kernel server ----
case_begin "(b) SMCR_AF_SMC=smcr: AF_SMC client served by smcr -> kernel AF_SMC server, ${mib} MiB"
timeout 300 "$ksmc" server "$B" 7901 "$bytes" > "$logs/b.srv" 2>&1 &
spid=$!
wait_listening 7901 || echo "    (kernel server not listening)"
rc=0
SMCR_AF_SMC=smcr SMC_SOCKETS_ADDR=$B SMC_SOCKETS_LOCAL=$A timeout 300 "$smc_run" -d \
    "$prog" client afsmc 4 7901 "$bytes" > "$logs/b.out" 2> "$logs/b.cli" || rc=$?
wait "$spid"; src=$?
[[ $rc == 0 ]] && pass "the AF_SMC client's echo of $bytes bytes is intact" ||
    { fail "the AF_SMC client exited $rc"; show "$logs/b.cli" cli 8; }
grep -q 'served by smcr' "$logs/b.cli" && grep -q ': smc-r (client)' "$logs/b.cli" &&
    pass "smcr's log: served by smcr, $(grep -m1 -o 'smc-r (client).*' "$logs/b.cli")" ||
    { fail "smcr's log does not say served by smcr and smc-r"; show "$logs/b.cli" cli 8; }
[[ $src == 0 ]] && grep -q 'mode=SMC-R' "$logs/b.srv" &&
    pass "the kernel server's smc_diag: $(grep -m1 -o 'mode=SMC-R.*' "$logs/b.srv")" ||
    { fail "the kernel server (exit $src) does not report SMC-R"; show "$logs/b.srv" srv; }

# ------------------------------------------ (c) kernel client -> smcr IPPROTO_SMC server ----
case_begin "(c) SMCR_AF_SMC=smcr: kernel AF_SMC client -> IPPROTO_SMC server served by smcr, ${mib} MiB"
SMCR_AF_SMC=smcr SMC_SOCKETS_ADDR=$B timeout 300 "$smc_run" -d \
    "$prog" server ipproto 4 1 > "$logs/c.out" 2> "$logs/c.srv" &
spid=$!
for ((i = 0; i < 600; i++)); do grep -q '^port ' "$logs/c.out" && break; sleep 0.1; done
port=$(sed -n 's/^port //p' "$logs/c.out")
rc=0
timeout 300 "$ksmc" client "$B" "${port:-1}" "$bytes" "$A" > "$logs/c.cli" 2>&1 || rc=$?
for ((i = 0; i < 100; i++)); do grep -q '^done$' "$logs/c.out" && break; sleep 0.1; done
kill "$(child_of "$spid")" 2>/dev/null; wait "$spid" 2>/dev/null
[[ $rc == 0 ]] && grep -q 'mode=SMC-R' "$logs/c.cli" &&
    pass "the kernel client checked the echo; its smc_diag: $(grep -m1 -o 'mode=SMC-R.*' "$logs/c.cli")" ||
    { fail "the kernel client exited $rc or does not report SMC-R"; show "$logs/c.cli" cli; show "$logs/c.srv" srv 8; }
grep -q 'served by smcr' "$logs/c.srv" && grep -q ': smc-r (server)' "$logs/c.srv" &&
    pass "smcr's log: served by smcr, $(grep -m1 -o 'smc-r (server).*' "$logs/c.srv")" ||
    { fail "smcr's server log does not say served by smcr and smc-r"; show "$logs/c.srv" srv 8; }

# ---------------------------------------------------------- (d) smcr <-> smcr ----
case_begin "(d) SMCR_AF_SMC=smcr: IPPROTO_SMC client -> AF_SMC server, both smcr, ${mib} MiB"
SMCR_AF_SMC=smcr SMC_SOCKETS_ADDR=$B timeout 300 "$smc_run" -d \
    "$prog" server afsmc 4 1 > "$logs/d.out" 2> "$logs/d.srv" &
spid=$!
for ((i = 0; i < 600; i++)); do grep -q '^port ' "$logs/d.out" && break; sleep 0.1; done
port=$(sed -n 's/^port //p' "$logs/d.out")
rc=0
SMCR_AF_SMC=smcr SMC_SOCKETS_ADDR=$B SMC_SOCKETS_LOCAL=$A timeout 300 "$smc_run" -d \
    "$prog" client ipproto 4 "${port:-1}" "$bytes" > "$logs/d.cout" 2> "$logs/d.cli" || rc=$?
for ((i = 0; i < 100; i++)); do grep -q '^done$' "$logs/d.out" && break; sleep 0.1; done
kill "$(child_of "$spid")" 2>/dev/null; wait "$spid" 2>/dev/null
sent=$(sed -n 's/^sent //p' "$logs/d.cout") received=$(sed -n 's/^received //p' "$logs/d.out")
[[ $rc == 0 && -n $sent && $sent == "$received" ]] &&
    pass "echo intact, the server received what the client sent ($sent)" ||
    { fail "client exit $rc, sent '$sent', received '$received'"; show "$logs/d.cli" cli 8; }
grep -q ': smc-r (client)' "$logs/d.cli" && grep -q ': smc-r (server)' "$logs/d.srv" &&
    pass "both logs say smc-r" ||
    { fail "not SMC-R on both ends"; show "$logs/d.cli" cli 6; show "$logs/d.srv" srv 6; }

case_end
[[ -n ${AFSMC_LOGS:-} ]] || rm -rf "$logs"
tap_done
