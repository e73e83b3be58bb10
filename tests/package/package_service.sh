#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The systemd drop-ins of examples/systemd, each applied to a real service the way
# systemd runs it, with the files of the Debian package (unpacked with dpkg -x):
#   smcr.conf       Environment=LD_PRELOAD=/usr/$LIB/smcr/libsmcr.so
#   smcr-exec.conf  ExecStart= /usr/bin/smc_run COMMAND
# The service is python's http.server; curl under the packaged smc_run fetches a
# file twice. The sha256 of each copy equals the file's, the service maps the
# packaged library, and its stats (the packaged smcr-stat, which finds them
# wherever a service without a login session publishes) and curl's log show SMC.
#
#   package_service.sh env       always: the service's environment reproduced: env -i
#                                with systemd's PATH and what the drop-in sets, its
#                                limits, / as working directory, stdin /dev/null
#   package_service.sh systemd   systemd-run, when systemd is PID 1 (else exit 77);
#                                needs root (system units)
#
# Paths under /usr the drop-ins name are taken from the unpacked root instead; nothing
# else is changed. A setting the test does not know how to apply fails it.
source "$(dirname -- "${BASH_SOURCE[0]}")/package_lib.sh"

how=${1:-env}
case $how in
env) ;;
systemd)
    # sd_booted(3): systemd is the init system.
    [[ -d /run/systemd/system ]] || skip "systemd is not PID 1 here ($(ps -o comm= -p 1)); the env variant reproduces the service"
    [[ $(id -u) -eq 0 ]] || skip "transient system units need root"
    need systemd-run systemctl
    ;;
*) fail "usage: package_service.sh env|systemd" ;;
esac
need curl prlimit
unpack_package
examples=$apps_dir/../../examples/systemd
systemd_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# dropin_settings FILE: the [Service] settings of a drop-in, one "KEY VALUE" line each
# (VALUE as written, but one line per assignment of an Environment= line; an empty
# assignment has no VALUE), the paths of the package under /usr moved into $root.
dropin_settings() {
    "$PYTHON" - "$1" "$root" "$multiarch" <<'PY'
import os, re, shlex, sys
path, root, multiarch = sys.argv[1:]
def relocate(token):
    # A path the package provides ($LIB as the dynamic loader expands it).
    if token.startswith("/usr/") and os.path.exists(root + token.replace("$LIB", "lib/" + multiarch)):
        return root + token
    return token
section = None
for line in open(path):
    line = line.strip()
    if not line or line[0] in "#;":
        continue
    if line.startswith("["):
        section = line.strip("[]")
        continue
    key, _, value = line.partition("=")
    if section != "Service":
        sys.exit(f"{path}: {key} outside [Service]")
    key, value = key.strip(), re.sub(r"(?<![^\s=\"'])/usr/\S+", lambda m: relocate(m.group(0)), value)
    # Environment= holds assignments quoted as in a shell, systemd.exec(5)
    for item in shlex.split(value) if key == "Environment" else [value.strip()]:
        print(key, item)
PY
}

# memlock_value LIMIT: a systemd LimitMEMLOCK= value as prlimit's SOFT:HARD.
memlock_value() {
    local v=${1//infinity/unlimited}
    [[ $v == *:* ]] || v=$v:$v
    printf '%s\n' "$v"
}

units=()
stop_units() {
    local u
    for u in "${units[@]}"; do systemctl stop "$u" >/dev/null 2>&1 || true; done
}
trap 'rc=$?; stop_units; (exit $rc); cleanup' EXIT

# start_service DROPIN NAME PORT: the http.server service with DROPIN applied; sets
# service_pid (the service's main process) and service_memlock (the SOFT:HARD
# locked-memory limit it runs with, empty if the drop-in sets none or it could
# not be applied).
start_service() {
    local dropin=$1 name=$2 port=$3 key value
    local -a env_assign=() props=() exec_prefix=() memlock=() words
    local -a command=("$PYTHON" -m http.server --bind 127.0.0.1 --directory "$work/www" "$port")
    service_memlock=''
    while read -r key value; do
        case $key in
        Environment)
            env_assign+=("$value")
            props+=(-p "Environment=$value")
            ;;
        LimitMEMLOCK)
            service_memlock=$(memlock_value "$value")
            memlock=(prlimit "--memlock=$service_memlock" --)
            props+=(-p "LimitMEMLOCK=$value")
            ;;
        ExecStart)
            # The empty assignment resets the unit's own; the drop-in's is smc_run,
            # its options, then the unit's command: that command is this test's server.
            [[ -n $value ]] || continue
            read -r -a words <<<"$value"
            [[ ${words[0]} == "$SMC_RUN" ]] || fail "$dropin: ExecStart does not start with /usr/bin/smc_run: $value"
            exec_prefix=("${words[0]}")
            for w in "${words[@]:1}"; do
                [[ $w == -* ]] || break
                exec_prefix+=("$w")
            done
            ;;
        *) fail "$dropin: the test does not know how systemd applies $key" ;;
        esac
    done < <(dropin_settings "$dropin")
    log "$name: ${props[*]:-no properties}${exec_prefix[*]:+, ExecStart=${exec_prefix[*]} ...}"

    if [[ $how == systemd ]]; then
        local unit=smcr-package-test-$$-$name
        units+=("$unit")
        systemd-run --quiet --collect --unit="$unit" -p WorkingDirectory=/ "${props[@]}" \
            -- "${exec_prefix[@]}" "${command[@]}" || fail "systemd-run $unit failed"
        local i
        for ((i = 0; i < 100; i++)); do
            service_pid=$(systemctl show -P MainPID "$unit")
            [[ $service_pid -gt 0 ]] && break
            sleep 0.1
        done
        [[ $service_pid -gt 0 ]] || fail "$unit has no main process"
    else
        local why
        if ((${#memlock[@]} > 0)) && ! why=$("${memlock[@]}" true 2>&1); then
            log "$name: LimitMEMLOCK not reproduced, the service runs with the current limit: $why"
            memlock=()
            service_memlock=''
        fi
        # exec all the way (prlimit, env, smc_run): the background pid is the service's.
        (cd / && exec "${memlock[@]}" env -i "PATH=$systemd_path" "${env_assign[@]}" \
            "${exec_prefix[@]}" "${command[@]}" </dev/null >"$work/$name.out" 2>"$work/$name.err") &
        service_pid=$!
        server_pids+=("$service_pid")
    fi
}

# assert_memlock NAME PID SOFT:HARD: the process runs with that locked-memory limit
# (nothing to check when empty).
assert_memlock() {
    local name=$1 pid=$2 want=$3 soft hard
    [[ -n $want ]] || return 0
    read -r soft hard < <(awk '/^Max locked memory/ { print $4, $5 }' "/proc/$pid/limits")
    [[ $soft:$hard == "$want" ]] || fail "$name: locked-memory limit $soft:$hard, the drop-in sets $want"
    log "$name: locked-memory limit $want as the drop-in sets"
}

# assert_service_smc NAME PID MIN: the service's own stats (found by the packaged
# smcr-stat without being told where) count at least MIN SMC handshakes, no fallback.
assert_service_smc() {
    local name=$1 pid=$2 min=$3 out smc fb
    out=$("$SMCR_STAT" stats --json --pid "$pid" | "$PYTHON" -c '
import json, sys
procs = json.load(sys.stdin)["processes"]
print(sum(p["handshakes_smc"] for p in procs), sum(p["fallbacks"] for p in procs))') ||
        fail "$name: smcr-stat stats --json --pid $pid failed"
    read -r smc fb <<<"$out"
    [[ $fb -eq 0 ]] || fail "$name: $fb fallback(s) in its stats"
    [[ $smc -ge $min ]] || fail "$name: $smc SMC handshake(s) in its stats, expected at least $min"
    log "$name: $smc SMC handshake(s) in its stats (packaged smcr-stat), no fallback"
}

# fetch_twice NAME PORT: curl under the packaged smc_run gets the file twice (two
# connections: http.server speaks HTTP/1.0); both copies are checked.
fetch_twice() {
    local name=$1 port=$2 url="http://127.0.0.1:$2/data" copy
    if [[ $how == systemd ]]; then
        exit_code=0
        # (a transient unit: this test's environment, SMCR_LEARN=0 included, stays here)
        timeout -k 5 60 systemd-run --quiet --collect --wait --pipe -p WorkingDirectory=/ \
            -p Environment=SMCR_LEARN=0 -- "${smcr_prefix[@]}" curl -sS -o "$work/$name.1" "$url" -o "$work/$name.2" "$url" \
            </dev/null >"$work/$name.smcr.out" 2>"$work/$name.smcr.err" || exit_code=$?
    else
        run_client smcr "$name" 60 curl -sS -o "$work/$name.1" "$url" -o "$work/$name.2" "$url"
    fi
    [[ $exit_code -eq 0 ]] || fail "$name: curl exited $exit_code"
    for copy in "$work/$name.1" "$work/$name.2"; do
        [[ $(sha "$copy") == "$(sha "$work/www/data")" ]] || fail "$name: ${copy##*/} differs from the file"
    done
    assert_smc_log "$name" 2
}

mkdir -p "$work/www"
random_file "$work/www/data" $((8 * 1024 * 1024 + 13))
for dropin in smcr.conf smcr-exec.conf; do
    name=service-${dropin%.conf}
    port=$(free_port 4)
    start_service "$examples/$dropin" "$name" "$port"
    wait_listen "$service_pid" "$port"
    assert_packaged_library "$service_pid" "$name"
    assert_memlock "$name" "$service_pid" "$service_memlock"
    fetch_twice "curl-$name" "$port"
    assert_service_smc "$name" "$service_pid" 2
    if [[ $how == systemd ]]; then
        systemctl stop "${units[-1]}"
    else
        stop_server "$service_pid"
    fi
    # Stopped by SIGTERM, as systemd stops it, the service leaves its stats file
    # behind in the user's shared runtime directory; smcr-stat removes stale ones.
    "$SMCR_STAT" stats --pid "$service_pid" >/dev/null 2>&1 || true
done
log "both drop-ins: service and client on SMC, with the packaged files ($how)"
