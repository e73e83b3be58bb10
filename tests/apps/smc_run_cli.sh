#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# smc_run itself: how it builds LD_PRELOAD, its options, what it runs without
# smcr and what it refuses, and why, exit codes and signals passed through, where it finds the library
# (source checkout, configured build copy, installed copy).
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# These checks run unsanitized programs with the library alone in LD_PRELOAD.
[[ -z ${SMCR_SANITIZER_PRELOAD:-} ]] || skip "smc_run's checks need an unsanitized build"

lib=$SMCR_LIB
checks=0

# expect WHAT EXPECTED ACTUAL
expect() {
    [[ $2 == "$3" ]] || fail "$1: expected '$2', got '$3'"
    checks=$((checks + 1))
}

# smc STDOUT_FILE STDERR_FILE ARGS...: runs smc_run; sets rc.
smc() {
    local out=$1 err=$2
    shift 2
    rc=0
    timeout -k 2 20 "$SMC_RUN" "$@" >"$out" 2>"$err" || rc=$?
}

# preload_for VALUE: the LD_PRELOAD the command sees when smc_run starts with VALUE.
preload_for() {
    if [[ $1 == '<unset>' ]]; then
        env -u LD_PRELOAD "$SMC_RUN" printenv LD_PRELOAD 2>/dev/null
    else
        LD_PRELOAD=$1 "$SMC_RUN" printenv LD_PRELOAD 2>/dev/null
    fi
}

log "LD_PRELOAD is built cleanly"
expect "unset" "$lib" "$(preload_for '<unset>')"
expect "empty" "$lib" "$(preload_for '')"
expect "preset" "$lib:/x/a.so" "$(preload_for /x/a.so)"
expect "stray separators" "$lib:/x/a.so:/y/b.so" "$(preload_for ' :/x/a.so:: /y/b.so: ')"
expect "already there" "$lib" "$(preload_for "$lib")"
expect "already there, not first" "$lib:/x/a.so" "$(preload_for "/x/a.so:$lib")"
expect "another libsmcr.so" "$lib:/x/a.so" "$(preload_for "/elsewhere/libsmcr.so:/x/a.so")"
expect "sanitizer stays first" "/x/libasan.so.8:$lib:/x/a.so" "$(preload_for "/x/a.so:/x/libasan.so.8")"

log "options set the library's variables"
smc "$work/o" "$work/e" -d printenv SMC_DEBUG
expect "-d sets SMC_DEBUG" "0 1" "$rc $(cat "$work/o")"
grep -q '^smcr: active in printenv' "$work/e" || fail "-d: the library did not log 'smcr: active in printenv'"
smc "$work/o" "$work/e" printenv SMC_DEBUG
expect "no -d, no SMC_DEBUG" "1 " "$rc $(cat "$work/o")"
smc "$work/o" "$work/e" -r 256k -t 1M printenv SMC_RCVBUF SMC_SNDBUF
expect "-r and -t" "0 256k 1M" "$rc $(tr '\n' ' ' <"$work/o" | sed 's/ $//')"
smc "$work/o" "$work/e" --rcvbuf=65536 --sndbuf 32768 printenv SMC_RCVBUF SMC_SNDBUF
expect "--rcvbuf= and --sndbuf" "0 65536 32768" "$rc $(tr '\n' ' ' <"$work/o" | sed 's/ $//')"
smc "$work/o" "$work/e" -r lots printenv SMC_RCVBUF
expect "invalid size refused" 125 "$rc"
grep -q "invalid size" "$work/e" || fail "invalid size: no message"
smc "$work/o" "$work/e" --frobnicate true
expect "unknown option refused" 125 "$rc"
smc "$work/o" "$work/e" -- printenv SMCR_LIB
expect "-- ends the options" "0 $lib" "$rc $(cat "$work/o")"
smc "$work/o" "$work/e"
expect "no command" 125 "$rc"
smc "$work/o" "$work/e" -h
expect "-h" 0 "$rc"
grep -q '^Usage: smc_run' "$work/o" || fail "-h: no usage text"

# A relative SMCR_LIB becomes absolute: the program may change directory.
ln -s "$lib" "$work/link-libsmcr.so"
expect "relative SMCR_LIB made absolute" "$work/link-libsmcr.so" \
    "$(cd "$work" && SMCR_LIB=link-libsmcr.so "$SMC_RUN" printenv LD_PRELOAD)"

log "-v prints the version and the library"
smc "$work/o" "$work/e" -v
expect "-v exit" 0 "$rc"
grep -Eq '^smc_run \(smcr\) [0-9]+\.[0-9]+' "$work/o" || fail "-v: no version line: $(cat "$work/o")"
expect "-v library" "library: $lib" "$(sed -n 2p "$work/o")"

log "exit codes and signals pass through; smc_run exec's the command"
smc "$work/o" "$work/e" sh -c 'exit 42'
expect "exit code" 42 "$rc"
smc "$work/o" "$work/e" false
expect "false" 1 "$rc"
smc "$work/o" "$work/e" sh -c 'kill -TERM $$'
expect "killed by SIGTERM" 143 "$rc"
pids=$(bash -c 'echo $$; exec "$0" sh -c "echo \$\$"' "$SMC_RUN")
expect "same process (exec, no fork)" 1 "$(uniq <<<"$pids" | wc -l)"
printf 'through stdin\n' | "$SMC_RUN" cat >"$work/o"
expect "stdin passes through" "through stdin" "$(cat "$work/o")"
smc "$work/o" "$work/e" printf '%s|' 'two words' '' '*'
expect "arguments kept verbatim" "two words||*|" "$(cat "$work/o")"

# expect_one_warning WHAT REASON: smc_run's stderr is exactly one line, which says
# that the command runs without smcr and why (REASON: a grep pattern).
expect_one_warning() {
    expect "$1: lines of stderr" 1 "$(wc -l <"$work/e")"
    grep -q "^smc_run: running .* without smcr: .*$2" "$work/e" ||
        fail "$1: no 'running ... without smcr: REASON' warning: $(cat "$work/e")"
}

log "what smc_run cannot run is refused; what smcr cannot work in runs without it, or is refused with --strict"
smc "$work/o" "$work/e" no-such-command-smcr
expect "not found" 127 "$rc"
grep -q 'no-such-command-smcr: command not found' "$work/e" || fail "not found: no message"

smc "$work/o" "$work/e" "$work"
expect "a directory" 126 "$rc"

printf 'plain text\n' >"$work/not-executable"
smc "$work/o" "$work/e" "$work/not-executable"
expect "not executable" 126 "$rc"
# --force cannot run it either: one line says why, and no shell error follows it.
smc "$work/o" "$work/e" --force "$work/not-executable"
expect "--force, not executable" 126 "$rc"
[[ $(cat "$work/e") == "smc_run: $work/not-executable is not executable" ]] ||
    fail "--force on a file that is not executable: its stderr is not one line saying so: $(cat "$work/e")"

cp "$(type -P true)" "$work/setuid-true"
chmod u+s "$work/setuid-true"
smc "$work/o" "$work/e" "$work/setuid-true"
expect "setuid runs without smcr" 0 "$rc"
expect_one_warning setuid 'setuid/setgid: the dynamic loader ignores LD_PRELOAD'
smc "$work/o" "$work/e" --strict "$work/setuid-true"
expect "--strict refuses setuid" 125 "$rc"
grep -q 'setuid/setgid: the dynamic loader ignores LD_PRELOAD' "$work/e" || fail "--strict setuid: no reason given: $(cat "$work/e")"
grep -q 'not running .*(--strict)' "$work/e" || fail "--strict setuid: does not say it refused: $(cat "$work/e")"
smc "$work/o" "$work/e" --check "$work/setuid-true"
expect "--check setuid" 1 "$rc"
grep -q '^verdict: smcr cannot work in' "$work/o" || fail "--check setuid: no verdict"
smc "$work/o" "$work/e" --force "$work/setuid-true"
expect "--force runs a setuid program" 0 "$rc"
grep -q 'without smcr' "$work/e" || fail "--force: no warning"

cp "$(type -P true)" "$work/setgid-true"
chmod g+s "$work/setgid-true"
smc "$work/o" "$work/e" -s "$work/setgid-true"
expect "-s refuses setgid" 125 "$rc"

if [[ -n ${SMCR_TEST_STATIC:-} ]]; then
    # static_hello prints "static hello" and exits 3.
    smc "$work/o" "$work/e" "$SMCR_TEST_STATIC"
    expect "a static program runs without smcr, its exit code kept" "3 static hello" "$rc $(cat "$work/o")"
    expect_one_warning static 'statically linked'
    smc "$work/o" "$work/e" --strict "$SMCR_TEST_STATIC"
    expect "--strict refuses a static program, which does not run" "125 " "$rc $(cat "$work/o")"
    grep -q 'statically linked' "$work/e" || fail "--strict static: no reason given: $(cat "$work/e")"
    smc "$work/o" "$work/e" --check "$SMCR_TEST_STATIC"
    expect "--check static" 1 "$rc"
    grep -q '^problem: .*statically linked' "$work/o" || fail "--check static: no reason"
    smc "$work/o" "$work/e" -f "$SMCR_TEST_STATIC"
    expect "-f runs the static program, its exit code kept" "3 static hello" "$rc $(cat "$work/o")"
    printf '#!%s\n' "$SMCR_TEST_STATIC" >"$work/static-script"
    chmod +x "$work/static-script"
    smc "$work/o" "$work/e" "$work/static-script"
    expect "script with a static interpreter runs without smcr" 3 "$rc"
    expect_one_warning "static interpreter" 'statically linked'
    smc "$work/o" "$work/e" --strict "$work/static-script"
    expect "--strict refuses a script with a static interpreter" 125 "$rc"
else
    log "no static libc: the static-program checks are skipped"
fi

smc "$work/o" "$work/e" --check "$(type -P printenv)"
expect "--check dynamic program" 0 "$rc"
grep -q '^verdict: smcr can work in' "$work/o" || fail "--check dynamic: no positive verdict"
grep -q 'dynamically linked' "$work/o" || fail "--check dynamic: no ELF description"
printf '#!/usr/bin/env sh\nexit 5\n' >"$work/env-script"
chmod +x "$work/env-script"
smc "$work/o" "$work/e" --check "$work/env-script"
expect "--check follows #!/usr/bin/env" 0 "$rc"
grep -q 'script run by .*/sh$' "$work/o" || fail "--check script: interpreter not followed: $(cat "$work/o")"
smc "$work/o" "$work/e" "$work/env-script"
expect "script runs" 5 "$rc"

SMCR_LIB=$work/no-such-lib.so smc "$work/o" "$work/e" true
expect "missing library refused" 125 "$rc"
grep -q 'no-such-lib.so does not exist' "$work/e" || fail "missing library: no reason"
printf 'not a library\n' >"$work/libsmcr.so"
SMCR_LIB=$work/libsmcr.so smc "$work/o" "$work/e" true
expect "broken library refused" 125 "$rc"
grep -q 'dynamic loader rejects' "$work/e" || fail "broken library: no reason: $(cat "$work/e")"

log "the library is found without SMCR_LIB"
# Through a symlink to the source checkout's script, as without one.
ln -s "$SMC_RUN" "$work/smc_run-link"
expect "symlinked smc_run finds the same library" \
    "$(env -u SMCR_LIB "$SMC_RUN" -v | sed -n 2p)" "$(env -u SMCR_LIB "$work/smc_run-link" -v | sed -n 2p)"
if [[ -n ${SMC_RUN_CONFIGURED:-} && -n ${SMCR_BUILD_DIR:-} ]]; then
    # The copy meson configured into the build tree finds that build's library.
    found=$(env -u SMCR_LIB "$SMC_RUN_CONFIGURED" -v | sed -n 's/^library: //p')
    expect "configured copy finds its build's library" \
        "$(realpath "$SMCR_BUILD_DIR/src/preload/libsmcr.so")" "$(realpath "$found")"
    ! grep -q '@SMCR_' "$SMC_RUN_CONFIGURED" || fail "configured smc_run still has placeholders"
    # meson install puts the library where the installed smc_run looks for it.
    if timeout 60 meson install -C "$SMCR_BUILD_DIR" --no-rebuild --quiet \
        --destdir "$work/dest" >"$work/install.log" 2>&1; then
        installed_run=$(find "$work/dest" -path '*/bin/smc_run' | head -n 1)
        [[ -x $installed_run ]] || fail "meson install did not install smc_run"
        [[ -f $work/dest$SMCR_INSTALLED_LIBRARY ]] ||
            fail "meson install did not put libsmcr.so at $SMCR_INSTALLED_LIBRARY"
        found=$(env -u SMCR_LIB "$installed_run" -v | sed -n 's/^library: //p')
        expect "installed copy finds the library installed beside it" \
            "$(realpath "$work/dest$SMCR_INSTALLED_LIBRARY")" "$(realpath "$found")"
        # Without that library, it names the configured installed path.
        rm "$work/dest$SMCR_INSTALLED_LIBRARY"
        env -u SMCR_LIB "$installed_run" -v >"$work/o"
        grep -qxF "installed library expected at $SMCR_INSTALLED_LIBRARY" "$work/o" ||
            fail "installed copy without a library: $(cat "$work/o")"
        [[ -n $(find "$work/dest" -name smc_run.8) ]] || fail "the man page was not installed"
    else
        cat "$work/install.log" >&2
        fail "meson install --destdir failed"
    fi
fi

log "PASS: $checks checks"
