#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The RFC 7609 option program attacked by another local uid (tcpopt_attack.c):
#   tcpopt_attack.sh SMCR_BPF TCPOPT_ATTACK
# Sets up what the attack needs without touching the host's own option mode: a
# private mount namespace with its own bpffs (the pins of smcr-bpf attach land
# there), a cgroup v2 of its own that only this test's processes join, the
# program attached to it, and a second local user (smcr-attacker, created when
# missing). Exit: the attack program's (0 passed, 1 failed, 77 skipped: no
# root, no cgroup v2, no BPF here, or a kernel that takes only the program that
# announces SMC in SYNs; the rxe suite runs it under Debian's 6.12 kernel too).
set -u
smcr_bpf=${1:?usage: tcpopt_attack.sh SMCR_BPF TCPOPT_ATTACK}
attack=${2:?usage: tcpopt_attack.sh SMCR_BPF TCPOPT_ATTACK}
skip() { echo "SKIP: $*"; exit 77; }

if [[ ${1:-} != --inner ]]; then
    [[ $(id -u) == 0 ]] || skip "needs root (BPF, a cgroup, a second user)"
    id -u smcr-attacker >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin smcr-attacker ||
        skip "cannot create the user smcr-attacker"
    exec unshare --mount --propagation private -- "$0" --inner "$@"
fi
shift
smcr_bpf=$1 attack=$2

cg_root=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[[ -n $cg_root ]] || skip "no cgroup v2 mounted"
mount -t bpf bpf /sys/fs/bpf 2>/dev/null || skip "cannot mount a bpffs"
cg=$cg_root/smcr-tcpopt-attack.$$
mkdir "$cg" || skip "cannot create a cgroup under $cg_root"
parent=$(sed -n 's/^0:://p' /proc/self/cgroup)
cleanup() {
    echo $$ > "$cg_root$parent/cgroup.procs" 2>/dev/null || echo $$ > "$cg_root/cgroup.procs"
    "$smcr_bpf" -q detach "$cg" 2>/dev/null
    rmdir "$cg"
}
trap cleanup EXIT
echo $$ > "$cg/cgroup.procs" || skip "cannot join a cgroup of our own"
"$smcr_bpf" attach "$cg"
case $? in
0) ;;
3) skip "smcr-bpf cannot attach here" ;;
*) echo "smcr-bpf attach failed"; exit 1 ;;
esac
"$attack" "$(id -u smcr-attacker)" "$(id -g smcr-attacker)"
