#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configuration as a user meets it: every bad setting says the variable, the
# value and what was expected, once per user session rather than once per
# process (a shell wrapper that starts 35 processes, as pyenv's python3 shim
# does, says it once); a SMCR_DISABLE that is not understood keeps smcr out
# of the way.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

# wrapper_warnings ENV...: runs a bash wrapper that starts 35 programs, all
# under smc_run with ENV; prints how many times SMCR_PEERS's warning was said.
wrapper_warnings() {
    timeout 60 "$SMC_RUN" env "$@" bash -c 'for i in $(seq 35); do /bin/true; done' \
        >"$work/wrapper.out" 2>"$work/wrapper.err" || fail "the wrapper failed: $(tail -n 3 "$work/wrapper.err")"
    grep -c "SMCR_PEERS: 'garbage'" "$work/wrapper.err" || true
}

n=$(wrapper_warnings SMCR_PEERS=garbage)
[[ $n -eq 1 ]] || fail "SMCR_PEERS=garbage through a wrapper of 35 processes: warned $n times, expected once"
grep -q "SMCR_PEERS: 'garbage': not an IPv4 or IPv6 address; expected ADDR\[/LEN\]\[:PORT\]" "$work/wrapper.err" ||
    fail "the warning does not say what was wrong: $(grep -m1 SMCR_PEERS "$work/wrapper.err")"
log "SMCR_PEERS=garbage, 36 processes: warned once: $(grep -m1 -o "SMCR_PEERS: .*" "$work/wrapper.err")"
# Later in the same session: said already.
n=$(wrapper_warnings SMCR_PEERS=garbage)
[[ $n -eq 0 ]] || fail "the same warning again in the same session: said $n times"
# Another session (its own runtime directory): said again, once.
XDG_RUNTIME_DIR=$work/run2
mkdir -m 700 "$XDG_RUNTIME_DIR"
n=$(wrapper_warnings SMCR_PEERS=garbage)
[[ $n -eq 1 ]] || fail "a new session: warned $n times, expected once"
log "the same session: not again; a new session: once more"
XDG_RUNTIME_DIR=$work/run

# A prefix length out of range says so, not a generic syntax message.
timeout 30 "$SMC_RUN" env SMCR_PEERS=10.0.0.0/99 /bin/true 2>"$work/prefix.err" || fail "/bin/true failed"
grep -q "SMCR_PEERS: '10.0.0.0/99': prefix length out of range: expected /0../32 for IPv4" "$work/prefix.err" ||
    fail "SMCR_PEERS=10.0.0.0/99: $(cat "$work/prefix.err")"
log "SMCR_PEERS=10.0.0.0/99: $(grep -o "prefix length.*IPv4" "$work/prefix.err")"

# SMCR_DISABLE: yes disables (on/off words are accepted everywhere); a value not
# understood is said, and smcr stays out of the way.
for value in yes maybe; do
    timeout 30 "$SMC_RUN" -d env SMCR_DISABLE=$value /bin/true 2>"$work/disable-$value.err" || fail "/bin/true failed"
    grep -q 'not active: SMCR_DISABLE is set' "$work/disable-$value.err" ||
        fail "SMCR_DISABLE=$value: smcr did not stay out of the way: $(head -n 3 "$work/disable-$value.err")"
done
grep -q 'SMCR_DISABLE=maybe: expected 0 or 1 (or yes/no, true/false, on/off); smcr stays out of the way' \
    "$work/disable-maybe.err" || fail "SMCR_DISABLE=maybe: $(head -n 3 "$work/disable-maybe.err")"
grep -q 'SMCR_DISABLE=' "$work/disable-yes.err" && fail "SMCR_DISABLE=yes was reported as a bad value"
log "SMCR_DISABLE=yes: out of the way, no warning; SMCR_DISABLE=maybe: said, out of the way"

# SMCR_TRANSPORT=rdma on a host with no RDMA device for the address (this one: loopback,
# no rxe): each connection to an smcr server stays TCP for NOSMCRDEV, said at the default
# log level once per session, not only in the info log; the exit report counts it.
port=$(free_port 4)
echo_stream_server rdma-server "$port"
for i in 1 2; do
    timeout 60 "$SMC_RUN" env SMCR_TRANSPORT=rdma SMCR_EXIT_REPORT=1 "$PYTHON" \
        "$apps_dir/echo_once.py" "$port" 4096 >"$work/rdma-$i.out" 2>"$work/rdma-$i.err" ||
        fail "client $i with SMCR_TRANSPORT=rdma failed: $(tail -n 3 "$work/rdma-$i.err")"
    grep -q '^intact ' "$work/rdma-$i.out" || fail "client $i: the echo is not intact"
    grep -q 'exit: 0 SMC, 1 TCP (NOSMCRDEV 1)' "$work/rdma-$i.err" ||
        fail "client $i: not one TCP connection for NOSMCRDEV by its exit report: $(cat "$work/rdma-$i.err")"
done
n=$(cat "$work/rdma-1.err" "$work/rdma-2.err" | grep -c 'no RDMA device serves' || true)
[[ $n -eq 1 ]] || fail "SMCR_TRANSPORT=rdma without an RDMA device: warned $n times in two clients, expected once"
grep -q 'no RDMA device serves' "$work/rdma-1.err" || fail "the first client did not say it"
log "SMCR_TRANSPORT=rdma, no RDMA device: TCP (NOSMCRDEV), said once: $(grep -o 'SMC-R is configured.*' "$work/rdma-1.err")"
