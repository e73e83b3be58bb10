# SPDX-License-Identifier: MIT
# Shared helpers of the 'apps' suite: real programs on loopback, each workload
# run twice, first plain and then with both ends under smc_run, compared.
#
# Sourced by every test. Environment (set by tests/apps/meson.build):
#   SMC_RUN   the smc_run script under test (default: the source checkout's)
#   SMCR_LIB  the libsmcr.so to preload (smc_run reads it)
# Exit codes: 0 pass, 77 skip, anything else fail.

set -euo pipefail

apps_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SMC_RUN=${SMC_RUN:-$apps_dir/../../scripts/smc_run}
# Without SMCR_LIB (a test run by hand), the library smc_run itself would pick.
if [[ -z ${SMCR_LIB:-} ]]; then
    SMCR_LIB=$("$SMC_RUN" -v 2>/dev/null | sed -n 's/^library: \(\/.*\)/\1/p')
fi
if [[ -z $SMCR_LIB || ! -f $SMCR_LIB ]]; then
    echo "SKIP: libsmcr.so is not built (SMCR_LIB='$SMCR_LIB')"
    exit 77
fi
export SMCR_LIB

# nginx lives in /usr/sbin, which a normal user's PATH lacks on Debian.
case :$PATH: in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac

# The plain runs must really be plain, whatever the caller's environment has.
unset LD_PRELOAD SMC_DEBUG SMC_SNDBUF SMC_RCVBUF

# smcr_prefix: the command prefix of a run under smc_run. In a sanitized build
# the sanitizer runtime goes into LD_PRELOAD first (smc_run keeps it in front).
smcr_prefix=("$SMC_RUN" -d)
if [[ -n ${SMCR_SANITIZER_PRELOAD:-} ]]; then
    smcr_prefix=(env "LD_PRELOAD=$SMCR_SANITIZER_PRELOAD" "$SMC_RUN" -d)
fi
# Proxies from the environment must not capture loopback HTTP.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

test_name=$(basename -- "$0" .sh)
log() { printf '[%s] %s\n' "$test_name" "$*"; }
skip() {
    log "SKIP: $*"
    exit 77
}
fail() {
    log "FAIL: $*" >&2
    exit 1
}

# need PROGRAM...: skip the test unless every PROGRAM is installed.
need() {
    local p
    for p in "$@"; do
        command -v "$p" >/dev/null 2>&1 || skip "$p is not installed (scripts/install-deps)"
    done
}

# PYTHON: the real interpreter, not a version manager's shim script, so the
# process that runs the workload is the one that loads the library.
PYTHON=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || PYTHON=''
[[ -x $PYTHON ]] || PYTHON=$(command -v python3 || true)

work=$(mktemp -d "${TMPDIR:-/tmp}/smcr-$test_name.XXXXXX")
chmod 755 "$work" # servers that drop privileges (nginx workers) read files here
server_pids=()

# The stats every smcr process of this test publishes go to a directory of its own
# (include/smcr/stats_abi.h; smcr-stat reads them): what a test asserts about the mode
# of its connections comes from there, never from another test's processes.
export XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
# No rules file of the user's or the host's applies; a test that wants rules writes its own.
export XDG_CONFIG_HOME=$work/config SMCR_CONF=/dev/null
# smcr-stat of this build (meson sets SMCR_BUILD_DIR), else the checkout's wrapper.
SMCR_STAT=${SMCR_STAT:-${SMCR_BUILD_DIR:-}/src/tools/smcr-stat}
[[ -x $SMCR_STAT ]] || SMCR_STAT=$apps_dir/../../scripts/smcr-stat

# descendants PID: prints PID's descendant processes, deepest last.
descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        printf '%s\n' "$child"
        descendants "$child"
    done
}

# client_pid PID: the program smc_run exec'd under `timeout` (PID is timeout's),
# once timeout has started it.
client_pid() {
    local i p
    for ((i = 0; i < 200; i++)); do
        # (no child yet: ps fails, which must not end the test under pipefail)
        p=$(ps -o pid= --ppid "$1" | tr -d ' ') || true
        [[ -n $p ]] && { echo "$p"; return 0; }
        sleep 0.05
    done
    fail "the client process under pid $1 did not appear"
}

# kill_tree PID: stops PID and every process it started; TERM, then KILL after
# two seconds. Servers are this test's own children: nothing else is touched.
kill_tree() {
    local pid=$1 tree i
    tree=("$pid" $(descendants "$pid"))
    kill -TERM "${tree[@]}" 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
        kill -0 "${tree[@]}" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "${tree[@]}" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$? pid
    trap - EXIT
    for pid in "${server_pids[@]}"; do kill_tree "$pid"; done
    if [[ $rc -ne 0 && $rc -ne 77 && -d $work ]]; then
        # Leave the evidence in the test log.
        local f
        for f in "$work"/*.err "$work"/*.log; do
            [[ -s $f ]] || continue
            printf -- '--- %s (last 20 lines)\n' "${f##*/}" >&2
            tail -n 20 "$f" >&2
        done
    fi
    if [[ $rc -ne 0 && $rc -ne 77 && -n ${SMCR_TEST_KEEP:-} ]]; then
        echo "kept for inspection (SMCR_TEST_KEEP): $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# free_port [4|6]: an unused TCP port on the loopback address.
free_port() {
    local family=${1:-4}
    "$PYTHON" - "$family" <<'PY'
import socket, sys
family, host = (socket.AF_INET6, "::1") if sys.argv[1] == "6" else (socket.AF_INET, "127.0.0.1")
with socket.socket(family, socket.SOCK_STREAM) as s:
    s.bind((host, 0))
    print(s.getsockname()[1])
PY
}

# have_ipv6: the loopback has ::1.
have_ipv6() {
    "$PYTHON" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null
}

# wait_listen PID PORT [SECONDS]: waits until something listens on PORT, without
# connecting (a connection would be a client to servers that serve only one).
wait_listen() {
    local pid=$1 port=$2 seconds=${3:-10} i
    for ((i = 0; i < seconds * 20; i++)); do
        kill -0 "$pid" 2>/dev/null || fail "server (pid $pid) died before listening on port $port"
        [[ -n $(ss -Hltn "sport = :$port" 2>/dev/null) ]] && return 0
        sleep 0.05
    done
    fail "nothing listens on port $port after ${seconds}s"
}

# start_server MODE NAME COMMAND...: starts a server in the background, stdout
# and stderr in $work/NAME.MODE.{out,err}; sets server_pid.
start_server() {
    local mode=$1 name=$2
    shift 2
    local -a prefix=()
    [[ $mode == smcr ]] && prefix=("${smcr_prefix[@]}")
    "${prefix[@]}" "$@" >"$work/$name.$mode.out" 2>"$work/$name.$mode.err" </dev/null &
    server_pid=$!
    server_pids+=("$server_pid")
}

# stop_server PID: stops a server started with start_server.
stop_server() {
    local pid=$1 p keep=()
    kill_tree "$pid"
    for p in "${server_pids[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
    server_pids=("${keep[@]}")
}

# wait_exit PID SECONDS: waits for a background process to end by itself;
# sets exit_code. Fails the test if it does not end in time.
wait_exit() {
    local pid=$1 seconds=$2 i
    for ((i = 0; i < seconds * 20; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            exit_code=0
            wait "$pid" || exit_code=$?
            stop_server "$pid" # forget it
            return 0
        fi
        sleep 0.05
    done
    fail "process $pid did not end within ${seconds}s"
}

# run_client MODE NAME SECONDS COMMAND...: runs a client with a time bound,
# stdin from /dev/null unless redirected by the caller through run_client_in;
# stdout and stderr in $work/NAME.MODE.{out,err}; sets exit_code.
run_client() {
    run_client_in /dev/null "$@"
}

# run_client_in INPUT MODE NAME SECONDS COMMAND...: as run_client, stdin from INPUT.
run_client_in() {
    local input=$1 mode=$2 name=$3 seconds=$4
    shift 4
    local -a prefix=()
    [[ $mode == smcr ]] && prefix=("${smcr_prefix[@]}")
    exit_code=0
    timeout -k 5 "$seconds" "${prefix[@]}" "$@" \
        <"$input" >"$work/$name.$mode.out" 2>"$work/$name.$mode.err" || exit_code=$?
    if [[ $exit_code -eq 124 || $exit_code -eq 137 ]]; then
        fail "$name ($mode) timed out after ${seconds}s"
    fi
}

# ----------------------------------------------------------------------------
# Proof that the library was (or was not) loaded

# assert_process_mode MODE PID WHAT: the live process PID has libsmcr.so mapped
# if MODE is smcr, and has not if MODE is plain.
assert_process_mode() {
    local mode=$1 pid=$2 what=$3
    [[ -r /proc/$pid/maps ]] || fail "$what (pid $pid) is not running"
    if grep -q '/libsmcr\.so$' "/proc/$pid/maps"; then
        [[ $mode == smcr ]] || fail "$what (pid $pid) has libsmcr.so loaded in the plain run"
    else
        [[ $mode == plain ]] || fail "$what (pid $pid) does not have libsmcr.so loaded under smc_run"
    fi
}

# assert_log_mode MODE NAME: NAME's stderr has the library's startup line if
# MODE is smcr, and has none if MODE is plain.
assert_log_mode() {
    local mode=$1 name=$2 file="$work/$2.$1.err"
    if grep -q 'smcr: active in ' "$file"; then
        [[ $mode == smcr ]] || fail "$name logged 'smcr: active in' in the plain run"
    else
        [[ $mode == plain ]] || fail "$name did not log 'smcr: active in' under smc_run -d: the library was not loaded"
    fi
}

# ----------------------------------------------------------------------------
# Proof of the path each connection took, from the library's own reports:
#  - the SMC_DEBUG log of a run under smc_run -d, one line per connection:
#    "fd N: smc-shm (client|server): ..." or "fd N: tcp-fallback (ROLE): reason ...";
#  - the stats each live smcr process publishes, read with smcr-stat --json while
#    the process runs (a client that exits takes its stats file with it: its log
#    is then the evidence).

# smc_lines NAME: how many connections NAME's log (run with mode smcr) says ran SMC
# ($smc_mode: smc-shm on one host, smc-r in the VM's tests/rxe/apps.sh).
smc_mode=smc-shm
smc_lines() { grep -c ": $smc_mode (" "$work/$1.smcr.err" || true; }

# assert_smc_log NAME MIN: NAME (run with mode smcr) logged at least MIN SMC
# connections and no fallback.
assert_smc_log() {
    local name=$1 min=$2 n fallbacks unnamed
    n=$(smc_lines "$name")
    fallbacks=$(grep -c ': tcp-fallback (' "$work/$name.smcr.err" || true)
    if [[ $fallbacks -ne 0 ]]; then
        grep ': tcp-fallback (' "$work/$name.smcr.err" | head -3 >&2
        fail "$name: $fallbacks connection(s) fell back to TCP"
    fi
    [[ $n -ge $min ]] || fail "$name: $n connection(s) in SMC mode in its log, expected at least $min"
    # each line names the connection's addresses, not only its fd
    unnamed=$(grep ": $smc_mode (" "$work/$name.smcr.err" |
        grep -cvE '; local [^ ]+:[0-9]+, peer [^ ]+:[0-9]+$' || true)
    [[ $unnamed -eq 0 ]] || fail "$name: $unnamed SMC log line(s) without local and peer address"
    log "$name: $n connection(s) in SMC mode (SMC_DEBUG log), no fallback"
}

# assert_fallback_log NAME REASON MIN: NAME (run with mode smcr) logged at least MIN
# connections that stayed TCP with REASON (a decline name, e.g. PEERNOSMC) and none
# in SMC mode.
assert_fallback_log() {
    local name=$1 reason=$2 min=$3 n smc
    n=$(grep -c ": tcp-fallback (.*[ (]$reason\b" "$work/$name.smcr.err" || true)
    smc=$(grep -c ': smc-[a-z]* (' "$work/$name.smcr.err" || true)
    [[ $smc -eq 0 ]] || fail "$name: $smc connection(s) in SMC mode, expected TCP ($reason)"
    [[ $n -ge $min ]] || {
        grep ': tcp-fallback (' "$work/$name.smcr.err" | head -3 >&2
        fail "$name: $n connection(s) fell back with $reason in its log, expected at least $min"
    }
    log "$name: $n connection(s) stayed TCP with $reason (SMC_DEBUG log)"
}

# mode_stats PID...: one line from the processes' published stats (smcr-stat stats
# --json): "SMC FALLBACKS REASON:COUNT,..."; processes without stats count nothing.
mode_stats() {
    "$SMCR_STAT" stats --json --dir "$XDG_RUNTIME_DIR/smcr" |
        "$PYTHON" "$apps_dir/stats_summary.py" --pids "$*" -
}

# assert_smc_stats WHAT MIN PID...: the processes together made at least MIN SMC
# handshakes and no fallback, by their published stats.
assert_smc_stats() {
    local what=$1 min=$2 out smc fb reasons
    shift 2
    out=$(mode_stats "$@") || fail "$what: smcr-stat stats --json failed"
    read -r smc fb reasons <<<"$out"
    [[ $fb -eq 0 ]] || fail "$what: $fb fallback(s) in the stats ($reasons)"
    [[ $smc -ge $min ]] || fail "$what: $smc SMC handshake(s) in the stats, expected at least $min"
    log "$what: $smc SMC handshake(s) in its stats (smcr-stat), no fallback"
}

# assert_fallback_stats WHAT REASON MIN PID...: the processes' stats count at least
# MIN fallbacks with REASON, and no SMC handshake.
assert_fallback_stats() {
    local what=$1 reason=$2 min=$3 out smc fb reasons n
    shift 3
    out=$(mode_stats "$@") || fail "$what: smcr-stat stats --json failed"
    read -r smc fb reasons <<<"$out"
    [[ $smc -eq 0 ]] || fail "$what: $smc SMC handshake(s) in the stats, expected TCP ($reason)"
    n=$(tr ',' '\n' <<<"$reasons" | sed -n "s/^$reason://p")
    [[ ${n:-0} -ge $min ]] || fail "$what: fallbacks in the stats: ${reasons} (expected at least $min $reason)"
    log "$what: $n fallback(s) with $reason in its stats (smcr-stat), no SMC"
}

# assert_same WHAT FILE_A FILE_B: the two files are identical.
assert_same() {
    if ! cmp -s "$2" "$3"; then
        log "plain:" && sed 's/^/    /' "$2"
        log "smcr:" && sed 's/^/    /' "$3"
        fail "$1 differ between the plain run and the smc_run run"
    fi
}

# sha FILE: the sha256 of FILE.
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# random_file PATH BYTES: BYTES of random data.
random_file() { head -c "$2" /dev/urandom >"$1"; }

# echo_stream_server NAME PORT [PROGRAM]: echo_stream.py's echo server under smc_run
# on 127.0.0.1:PORT (PROGRAM: the python to run it, a link with a name of its own
# for instance); waits until it listens; its pid in $server_pid.
echo_stream_server() {
    start_server smcr "$1" "${3:-$PYTHON}" "$apps_dir/echo_stream.py" server "$2"
    wait_listen "$server_pid" "$2"
}

# echo_stream_client NAME PORT FILE: echo_stream.py's client under smc_run sends FILE
# to 127.0.0.1:PORT while reading the echo; fails unless it exited 0 and what came back
# is FILE (size and sha256).
echo_stream_client() {
    local name=$1 port=$2 file=$3 n digest
    run_client smcr "$name" 60 "$PYTHON" "$apps_dir/echo_stream.py" client "$port" "$file"
    [[ $exit_code -eq 0 ]] || fail "$name exited $exit_code"
    read -r n digest <"$work/$name.smcr.out"
    [[ $n -eq $(stat -c %s "$file") && $digest == "$(sha "$file")" ]] ||
        fail "$name: echo of $n bytes, sha256 $digest differs from the file's"
}

# run_both WORKLOAD: runs the function WORKLOAD plain, then under smc_run; each
# writes what it observed (exit codes, checksums) to "$work/result.$mode"; the
# two must be identical.
run_both() {
    local workload=$1 mode
    for mode in plain smcr; do
        log "$workload: $mode run"
        : >"$work/result.$mode"
        "$workload" "$mode"
    done
    assert_same "results of $workload" "$work/result.plain" "$work/result.smcr"
    log "results identical with and without smc_run:"
    sed 's/^/    /' "$work/result.smcr"
}

# result LINE...: appends a line to the current run's result file.
result() { printf '%s\n' "$*" >>"$work/result.$mode"; }
