# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Helpers shared by the rxe test scripts: results as TAP, log excerpts, checksums, and
# waiting for processes.
#
# Results: the scripts print TAP, which tests/rxe/vm-tap.sh hands to meson (protocol
# 'tap'), so that meson reports every case on its own while one VM boot runs them all
# (a boot costs 8-15 s, minutes on a loaded host; the cases share the set-up).
#   case_begin NAME   opens a case (e.g. "(a) smcr client -> kernel server"): the checks
#                     until case_end (or the next case_begin) are its lines; the case is
#                     one TAP subtest: ok when at least one check passed and none failed,
#                     not ok when a check failed or none passed (a case that proved
#                     nothing is no pass), SKIP after case_skip REASON with no failure;
#   pass/fail MSG     one check; outside a case each check is a subtest of its own;
#   tap_done          closes the open case, prints the plan and exits 0 (the verdict is
#                     in the TAP lines); no subtest at all is a failure;
#   tap_skip_all MSG  the whole script skipped (meson: SKIP), e.g. no kernel SMC.
# Every other line a script prints is a comment to TAP (vm-tap.sh prefixes it with #).
passed=0 failed=0 tap_n=0 case_name=''
tap_line() { # ok|"not ok" DESCRIPTION [DIRECTIVE]
    local d=${2//#/} # a '#' in the description would start a TAP directive
    tap_n=$((tap_n + 1))
    echo "$1 $tap_n - $d${3:+ # $3}"
}
case_begin() {
    [[ -z $case_name ]] || case_end
    case_name=$1 case_passed=0 case_failed=0 case_skipped='' case_t0=$SECONDS
    echo "---- $1"
}
case_skip() {
    case_skipped=$*
    echo "SKIP: $*"
}
case_end() {
    local name=$case_name took=$((SECONDS - ${case_t0:-0}))
    [[ -n $name ]] || return 0
    case_name=''
    if ((case_failed > 0)); then
        tap_line "not ok" "$name: $case_failed of $((case_passed + case_failed)) checks failed (${took}s)"
    elif [[ -n $case_skipped ]]; then
        tap_line ok "$name" "SKIP ${case_skipped//#/}"
    elif ((case_passed == 0)); then
        tap_line "not ok" "$name: no check passed (${took}s)"
    else
        tap_line ok "$name: $case_passed checks passed (${took}s)"
    fi
}
pass() { check_line ok PASS "$*"; }
fail() { check_line "not ok" FAIL "$*"; }
check_line() { # ok|"not ok" PASS|FAIL MESSAGE: a check's result
    if [[ $2 == PASS ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    if [[ -z $case_name ]]; then
        tap_line "$1" "$3"
        return
    fi
    echo "$2: $3"
    if [[ $2 == PASS ]]; then
        case_passed=$((case_passed + 1))
    else
        case_failed=$((case_failed + 1))
    fi
}
tap_done() {
    case_end
    ((tap_n > 0)) || tap_line "not ok" "no case ran (none selected?)"
    echo "1..$tap_n"
    echo "$passed checks passed, $failed failed (${SECONDS}s in the guest)"
    exit 0
}
tap_skip_all() {
    echo "1..0 # SKIP ${*//#/}"
    exit 0
}
show() { sed "s/^/    $2| /" "$1" | tail -n "${3:-6}"; }
sha() { sha256sum < "$1" | cut -d' ' -f1; }
# wait_listening PORT: a TCP listener on PORT, IPv4 or IPv6 (a loaded TCG guest
# may take a minute to start a server under smc_run)
wait_listening() {
    local hex i
    hex=$(printf '%04X' "$1")
    for ((i = 0; i < 600; i++)); do
        # /proc/net/tcp6 spells the unspecified peer with 32 zeros, /proc/net/tcp with 8
        grep -Eq ":$hex 0+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# delete_mid_stream DEV PID OUT [THEN]: once the client PID printed "streaming" into OUT,
# 'rdma link delete DEV'; then the command THEN, if given (it sees the delete's pid as
# $dpid: it must not wait for it); then both waited for: crc and drc (their exit codes),
# dsecs (from the delete)
delete_mid_stream() {
    local dev=$1 pid=$2 out=$3 then=${4:-} dpid t0 i
    for ((i = 0; i < 3000; i++)); do
        grep -q '^streaming' "$out" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    t0=$SECONDS
    timeout 120 rdma link delete "$dev" & dpid=$!
    [[ -z $then ]] || $then
    crc=0; wait "$pid" || crc=$?
    drc=0; wait "$dpid" || drc=$?
    dsecs=$((SECONDS - t0))
}
# readd_when_asked LOGS DEV CMD...: a THEN of delete_mid_stream for a device that comes back:
# once the client asks (in LOGS.cli) and the delete ($dpid) is done, CMD... brings DEV back;
# then LOGS.added says so to the client ($cpid)
readd_when_asked() {
    local at=$1 dev=$2 i
    shift 2
    for ((i = 0; i < 3000; i++)); do
        grep -q '^re-add the device' "$at.cli" && break
        kill -0 "$cpid" 2>/dev/null || return 0
        sleep 0.1
    done
    for ((i = 0; i < 1200; i++)); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
    "$@"
    echo "    $dev added again"
    echo added > "$at.added"
}
child_of() { # PID of timeout's child (smc_run exec's the program); "" once timeout is gone
    local i pid
    # (each ps takes a second or more in a loaded guest: do not poll for an exited one)
    for ((i = 0; i < 100; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        pid=$(ps -o pid= --ppid "$1" | tr -d ' ')
        [[ -n $pid ]] && { echo "$pid"; return; }
        sleep 0.05
    done
}
