#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A pre-forking server whose child confines its own system calls
# (prctl(PR_SET_SECCOMP)) and accepts on the listener it inherited.  The
# listener stays registered for SMC (the parent registered it, and a
# registration that followed fork stays its registrant's), so a local
# client under smc_run proposes; the confined child must not hand the CLC
# Proposal to its program as data (the attack), but take it off the stream
# and decline it, so that the client goes on over TCP with its data intact.
# Proven from the bytes the child's program read first, the echo's checksum,
# and both ends' published stats (smcr-stat): the client fell back with the
# child's decline reason (CONFINED), the child with CONFINED, no SMC.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
port=$(free_port 4)
random_file "$work/data" $((256 * 1024 + 7))

start_server smcr server "$PYTHON" "$apps_dir/confine_fork.py" server "$port" "$work"
parent_pid=$server_pid
for ((i = 0; i < 200; i++)); do
    grep -q '^child ' "$work/server.smcr.out" 2>/dev/null && break
    sleep 0.05
done
child=$(sed -n 's/^child //p' "$work/server.smcr.out")
[[ -n $child ]] || fail "the child did not confine itself: $(tail -n 3 "$work/server.smcr.err")"
"${smcr_prefix[@]}" "$PYTHON" "$apps_dir/confine_fork.py" client "$port" "$work" "$work/data" \
    "$work/echo" >"$work/client.smcr.out" 2>"$work/client.smcr.err" </dev/null &
client_bg=$!
server_pids+=("$client_bg")
for ((i = 0; i < 600; i++)); do
    grep -q '^done' "$work/client.smcr.out" 2>/dev/null && grep -q '^echoed' "$work/server.smcr.out" &&
        break
    kill -0 "$client_bg" 2>/dev/null || break
    sleep 0.05
done
first=$(sed -n 's/^first //p' "$work/server.smcr.out")
[[ $first == "$(head -c 8 "$work/data" | od -An -tx1 | tr -d ' \n')" ]] ||
    fail "the child's program read '$first' first, not the client's bytes (e2d4c3d9: a CLC Proposal)"
grep -q '^done' "$work/client.smcr.out" ||
    fail "the client did not finish: $(tail -n 3 "$work/client.smcr.err")"
[[ $(sha "$work/echo") == "$(sha "$work/data")" ]] || fail "the echo differs (sha256)"
client=$(sed -n 's/^pid //p' "$work/client.smcr.out")
assert_fallback_stats client CONFINED 1 "$client"
assert_fallback_stats "confined child" CONFINED 1 "$child"

# A Proposal in two pieces with the client's data right behind it, to a
# program that reads non-blocking: exactly the Proposal is taken off.
hostile=${SMCR_TEST_HOSTILE_CLC:-}
[[ -x $hostile ]] || fail "hostile_clc helper not built (SMCR_TEST_HOSTILE_CLC)"
HOSTILE_CLC_SPLIT_MS=200 timeout 30 "$hostile" 127.0.0.1 "$port" 3000 >"$work/split.out" 2>"$work/split.err" ||
    fail "hostile_clc failed: $(tail -n 2 "$work/split.err")"
grep -qx 'reply decline 0x0a040000' "$work/split.out" ||
    fail "the split Proposal's answer: '$(head -n 1 "$work/split.out")', not a Decline with CONFINED"
second=$(sed -n 's/^second //p' "$work/server.smcr.out")
[[ $second == "$(printf tail | od -An -tx1 | tr -d ' \n')" ]] ||
    fail "the child's program read '$second' on the second connection, not the client's 'tail'"
grep -qx 'end data' "$work/split.out" || fail "the client did not get its data echoed: $(tail -n 1 "$work/split.out")"
assert_fallback_stats "confined child" CONFINED 2 "$child"
touch "$work/release"
wait_exit "$client_bg" 10
[[ $exit_code -eq 0 ]] || fail "the client exited $exit_code: $(tail -n 2 "$work/client.smcr.err")"
wait_exit "$parent_pid" 10
[[ $exit_code -eq 0 ]] || fail "the server exited $exit_code: $(tail -n 2 "$work/server.smcr.err")"
grep -q 'declined a CLC Proposal (CONFINED)' "$work/server.smcr.err" ||
    fail "the child's log does not say it declined the Proposal"
log "256 KiB echoed intact; the confined child read the client's bytes first ($first), not a Proposal; a split one was taken off too ($second)"
