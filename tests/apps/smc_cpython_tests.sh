#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPython's own socket test suites (test_socket, test_epoll, test_selectors and
# the socket tests of test_asyncio: Debian's libpython3.11-testsuite) run
# plain, then under smc_run: every test that passes plain must pass under
# smc_run. Their clients and servers live in one process (threads, or one
# thread that connects and then accepts), and smcr keeps a connection between
# two sockets of one process on TCP (a single-threaded pair would wait for
# itself in the handshake): the suite's own published stats (recorded at its
# exit) must show that smcr classified its connections (at least 100), each
# stayed TCP with a reason, and none ended in a handshake error or an abort.
# What the suites add is coverage of the interposer's every wrapper, candidate
# sockets in epoll/select/poll, non-blocking connects, fallbacks; the SMC data
# path has the smc_* tests of real two-process programs.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"

# The interpreter whose standard library the test package belongs to.
cpython=${SMCR_TEST_CPYTHON:-/usr/bin/python3}
[[ -x $cpython ]] && "$cpython" -c 'import test.libregrtest' 2>/dev/null ||
    skip "CPython's test suite is not installed for $cpython (libpython3.11-testsuite)"
tests=(test_socket test_epoll test_selectors test_asyncio.test_sock_lowlevel
       test_asyncio.test_selector_events test_asyncio.test_sendfile test_asyncio.test_sslproto)
# The VSOCK tests wait for ever on a host with /dev/vsock but no vsock
# transport, with or without smcr: not this test's subject.
ignore=(-i '*VSOCK*')

# The runner records its own smcr stats as it exits (they go with the process).
cat >"$work/run_tests.py" <<'PY'
import atexit, os, subprocess, sys
stats_out = sys.argv[1]
def record_stats():
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    r = subprocess.run([os.environ["SMCR_STAT"], "stats", "--json", "-p", str(os.getpid())],
                       env=env, capture_output=True, text=True)
    with open(stats_out, "w") as f:
        f.write(r.stdout)
atexit.register(record_stats)
from test.libregrtest import main
sys.argv = [sys.argv[0]] + sys.argv[2:]
main()
PY
export SMCR_STAT

# passed XML: the ids of the test cases that passed (not failed, errored or skipped).
passed() {
    "$PYTHON" - "$1" <<'PY' | sort
import sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).iter("testcase"):
    if not any(child.tag in ("failure", "error", "skipped") for child in case):
        print(f"{case.get('classname', '')}.{case.get('name')}")
PY
}

for mode in plain smcr; do
    log "$mode run: ${tests[*]}"
    run_client "$mode" cpython 280 "$cpython" "$work/run_tests.py" "$work/stats.$mode" \
        --junit-xml "$work/junit.$mode.xml" --tempdir "$work/tmp.$mode" "${ignore[@]}" "${tests[@]}"
    [[ -s $work/junit.$mode.xml ]] || fail "$mode run wrote no results (exit $exit_code): $(tail -5 "$work/cpython.$mode.out")"
    passed "$work/junit.$mode.xml" >"$work/passed.$mode"
    log "$mode run: $(wc -l <"$work/passed.$mode") test cases passed (exit $exit_code)"
done
[[ $(wc -l <"$work/passed.plain") -ge 500 ]] || fail "only $(wc -l <"$work/passed.plain") test cases passed plain"
lost=$(comm -23 "$work/passed.plain" "$work/passed.smcr")
if [[ -n $lost ]]; then
    sed 's/^/    /' <<<"$lost" >&2
    grep -E '^(FAIL|ERROR):' -A12 "$work/cpython.smcr.out" | head -60 >&2 || true
    fail "$(wc -l <<<"$lost") test case(s) pass plain and fail under smc_run"
fi
log "every test case that passes plain passes under smc_run"

"$PYTHON" - "$work/stats.smcr" <<'PY' || fail "the suite's smcr stats: see above"
import json, sys
text = open(sys.argv[1]).read().strip()
if not text:
    sys.exit("no smcr stats recorded by the suite's process (smcr not loaded?)")
procs = json.loads(text)["processes"]
if len(procs) != 1:
    sys.exit(f"{len(procs)} stats records for the suite's process")
p = procs[0]
reasons = ", ".join(f"{r['name']} {r['count']}" for r in p["fallback_reasons"]) or "none"
print(f"[smc_cpython_tests] suite under smc_run: {p['handshakes']} connections classified, "
      f"{p['handshakes_smc']} SMC, {p['fallbacks']} TCP ({reasons}), "
      f"{p['handshake_errors']} handshake errors, {p['aborts']} aborts")
if p["handshakes"] < 100:
    sys.exit("smcr classified fewer than 100 of the suite's connections")
if p["handshake_errors"] or p["aborts"]:
    sys.exit("handshake errors or aborts under smc_run")
if p["handshakes_smc"] + p["fallbacks"] != p["handshakes"]:
    sys.exit("connections neither SMC nor TCP with a reason")
PY
