#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The attack: a same-host (shared-memory) CLC Proposal from another host.  A
# network namespace of this test's own plays the other host, joined to this
# one by a veth pair; redis-server runs under smc_run on this side's veth
# address.  The attacker's genuine same-host Proposal from the namespace is
# declined at once with smcr's reason NOTLOCAL (0x0a020000), counted in the
# server's stats, and a plain client from there is still served over TCP.
# The same Proposal from this host (to the same address) is accepted: the
# check is on the source, not on the address the server listens on.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need redis-server redis-cli ip
hostile=${SMCR_TEST_HOSTILE_CLC:-}
[[ -x $hostile ]] || skip "hostile_clc helper not built (SMCR_TEST_HOSTILE_CLC)"
[[ $(id -u) -eq 0 ]] || skip "needs root (a network namespace and a veth pair)"
stat_tool=${SMCR_BUILD_DIR:-}/src/tools/smcr-stat
[[ -x $stat_tool ]] || stat_tool=$apps_dir/../../scripts/smcr-stat

ns=smcr-nl-$$
here=vnl$$a
there=vnl$$b
net=10.213.$((RANDOM % 250)).
netns_cleanup() {
    ip netns del "$ns" 2>/dev/null || true
    ip link del "$here" 2>/dev/null || true
}
trap 'rc=$?; netns_cleanup; (exit $rc) || cleanup; cleanup' EXIT
ip netns add "$ns" || skip "cannot create a network namespace"
ip link add "$here" type veth peer name "$there" || skip "cannot create a veth pair"
ip link set "$there" netns "$ns"
ip addr add "${net}1/24" dev "$here"
ip link set "$here" up
ip -n "$ns" addr add "${net}2/24" dev "$there"
ip -n "$ns" link set "$there" up
ip -n "$ns" link set lo up
for ((i = 0; i < 100; i++)); do
    ip netns exec "$ns" ping -c1 -W1 "${net}1" >/dev/null 2>&1 && break
    sleep 0.1
done

port=$(free_port 4)
start_server smcr redis-server redis-server --port "$port" --bind "${net}1" --protected-mode no --save '' \
    --appendonly no --dir "$work"
pid=$server_pid
wait_listen "$pid" "$port"

# From the other "host": declined at once, NOTLOCAL.
run_client plain hostile-remote 20 ip netns exec "$ns" "$hostile" "${net}1" "$port" 0
reply=$(head -n1 "$work/hostile-remote.plain.out")
[[ $reply == "reply decline 0x0a020000" ]] ||
    fail "a same-host Proposal from ${net}2 got '$reply', not a Decline NOTLOCAL"
log "same-host Proposal from the other namespace (${net}2): $reply"

# The plain client there is served over TCP as ever.
run_client plain ping-remote 20 ip netns exec "$ns" redis-cli -h "${net}1" -p "$port" PING
[[ $exit_code -eq 0 && $(cat "$work/ping-remote.plain.out") == PONG ]] ||
    fail "a plain client from the namespace got no PONG"

# From this host, to the same address: accepted (then the attacker leaves).
run_client plain hostile-local 20 "$hostile" "${net}1" "$port" 0
reply=$(head -n1 "$work/hostile-local.plain.out")
[[ $reply == "reply accept" ]] || fail "a same-host Proposal from this host got '$reply'"
log "the same Proposal from this host's own address: $reply"

"$stat_tool" stats --json -p "$pid" >"$work/stats.json" || fail "smcr-stat failed"
"$PYTHON" - "$work/stats.json" <<'PY' || fail "stats: $(cat "$work/stats.json")"
import json, sys
t = json.load(open(sys.argv[1]))["total"]
reasons = {r["name"]: r["count"] for r in t["fallback_reasons"]}
assert reasons.get("NOTLOCAL", 0) == 1, reasons
PY
log "server stats: NOTLOCAL counted once"
