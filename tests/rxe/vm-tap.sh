#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs scripts/rxe-vm with the given arguments for a test script that prints TAP
# (tests/rxe/case_lib.sh) and hands meson (protocol 'tap') a clean TAP stream:
#   tests/rxe/vm-tap.sh [rxe-vm options] -- SCRIPT ARGS...
# - every line that is not TAP (the scripts' check lines, log excerpts) becomes a TAP
#   comment, so meson keeps it in its log and does not warn about it; the lines of a
#   case that failed are also copied to stderr, which is what meson prints of a TAP test
#   (meson test --print-errorlogs: the console then says why);
# - rxe-vm's 77 (QEMU cannot run here) becomes "1..0 # SKIP", which meson reports as a
#   skip, not as a pass;
# - a VM that timed out (124), a boot or set-up failure (125), a script that crashed or
#   ended without its plan becomes "Bail out!" and a non-zero exit: meson's ERROR.
set -uo pipefail
top=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
plan_seen=$(mktemp)
trap 'rm -f "$plan_seen"' EXIT

"$top/scripts/rxe-vm" "$@" | {
    lines=() # the comments since the last subtest: the current case's
    while IFS= read -r line || [[ -n $line ]]; do
        case $line in
            'TAP version '* | 'Bail out!'*) ;;
            1..[0-9]*) echo plan > "$plan_seen" ;;
            ok\ [0-9]*) lines=() ;;
            not\ ok\ [0-9]*)
                printf '%s\n' "${lines[@]}" "$line" >&2
                lines=() ;;
            *) lines+=("$line"); line="# $line" ;;
        esac
        printf '%s\n' "$line"
    done
    # a script that stopped in the middle of a case: its last lines
    [[ -s $plan_seen || ${#lines[@]} == 0 ]] || printf '%s\n' "${lines[@]}" >&2
}
rc=${PIPESTATUS[0]}

case $rc in
    0) [[ -s $plan_seen ]] && exit 0
       echo "Bail out! the script ended without a TAP plan (it stopped before tap_done)" ;;
    77) [[ -s $plan_seen ]] || echo "1..0 # SKIP scripts/rxe-vm cannot run QEMU on this host"
        exit 0 ;;
    124) echo "Bail out! rxe-vm: the VM timed out (see rxe-vm's message on stderr)" ;;
    125) echo "Bail out! rxe-vm: the VM failed before the script ran (stderr has its console)" ;;
    *) echo "Bail out! the script exited $rc" ;;
esac
exit "$((rc == 0 ? 1 : rc))"
