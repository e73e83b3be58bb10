#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# OpenSSH: sshd and ssh, both under smc_run, in sshd's default mode (it
# re-execs itself per connection, sshd -R) and with sshd -r (it forks).  Its
# privilege-separated child confines its system calls with a seccomp filter
# that kills the process on any call it does not allow, after the key
# exchange began over a connection that is already SMC: smcr must keep that
# connection running on the calls the filter allows (design §8).
# Per mode, plain and under smc_run, with results compared:
#  - 4 MiB of random data up (ssh host sha256sum < file) and 4 MiB down
#    (ssh host 'head -c 4M /dev/urandom | tee /dev/stderr | sha256sum'),
#    checksums and exit statuses;
#  - under smc_run: each connection SMC on both ends (logs: smc-shm, no
#    fallback), live smc-shm records of ssh and of sshd in smcr-stat while
#    the connections run, each privilege-separated child logged that it
#    confined itself and none was killed (no SIGSYS, no reset).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
sshd=/usr/sbin/sshd
[[ -x $sshd ]] || skip "$sshd is not installed (openssh-server)"
need ssh ssh-keygen

# sshd's privilege separation runs its child as the sshd user, chrooted here.
if [[ $(id -u) -eq 0 ]]; then
    mkdir -p /run/sshd
    chmod 755 /run/sshd
fi
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/user_key"
cp "$work/user_key.pub" "$work/authorized_keys"
random_file "$work/up.bin" $((4 * 1024 * 1024))
port=$(free_port 4)
cat >"$work/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PidFile $work/sshd.pid
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
CONF
ssh_opts=(-p "$port" -i "$work/user_key" -o BatchMode=yes -o StrictHostKeyChecking=no
          -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)

# watch_records NAME: while the connections run, smcr-stat's live smc-shm
# records, one "comm role" line each, into $work/NAME.records.
watch_records() {
    local name=$1
    : >"$work/$name.records"
    while :; do
        "$SMCR_STAT" --json --dir "$XDG_RUNTIME_DIR/smcr" 2>/dev/null | "$PYTHON" -c '
import json, sys
for c in json.load(sys.stdin)["connections"]:
    if c["state"] == "live" and c["mode"] == "smc-shm":
        try:
            comm = open("/proc/%d/comm" % c["pid"]).read().strip()
        except OSError:
            continue
        print(comm, c["role"])' >>"$work/$name.records" || true
        sleep 0.1
    done
}

# start_sshd MODE NAME ARGS...: sshd in the foreground, its stderr through a
# pipe (its privilege-separated child may not write a file: RLIMIT_FSIZE 0).
start_sshd() {
    local mode=$1 name=$2
    shift 2
    local -a prefix=()
    [[ $mode == smcr ]] && prefix=("${smcr_prefix[@]}")
    "${prefix[@]}" "$sshd" -D -e -f "$work/sshd_config" "$@" </dev/null \
        >"$work/$name.$mode.out" 2> >(cat >"$work/$name.$mode.err") &
    server_pid=$!
    server_pids+=("$server_pid")
    wait_listen "$server_pid" "$port"
}

# workload MODE (run_both): one sshd per sshd mode, an upload and a download each.
workload() {
    local mode=$1 smode watcher
    for smode in default r; do
        local name=sshd-$smode args=()
        [[ $smode == r ]] && args=(-r)
        start_sshd "$mode" "$name" "${args[@]}"
        if [[ $mode == smcr ]]; then
            watch_records "$name" &
            watcher=$!
        fi
        # The remote commands sleep a little after the data, so that the
        # watcher sees the connection live.
        run_client_in "$work/up.bin" "$mode" "$name-up" 60 ssh "${ssh_opts[@]}" 127.0.0.1 \
            'sha256sum; sleep 0.5'
        result "$smode up: exit $exit_code, $(cut -d' ' -f1 <"$work/$name-up.$mode.out")"
        run_client "$mode" "$name-down" 60 ssh "${ssh_opts[@]}" 127.0.0.1 \
            "cat '$work/down.bin'; sleep 0.5"
        result "$smode down: exit $exit_code, $(wc -c <"$work/$name-down.$mode.out") bytes, $(sha "$work/$name-down.$mode.out")"
        if [[ $mode == smcr ]]; then
            kill "$watcher" 2>/dev/null || true
            wait "$watcher" 2>/dev/null || true
        fi
        stop_server "$server_pid"
    done
}

random_file "$work/down.bin" $((4 * 1024 * 1024))
run_both workload
grep -q "up: exit 0, $(sha "$work/up.bin")" "$work/result.smcr" || fail "the upload's checksum or exit status is wrong"
grep -q "down: exit 0, 4194304 bytes, $(sha "$work/down.bin")" "$work/result.smcr" ||
    fail "the download's checksum or exit status is wrong"

for smode in default r; do
    name=sshd-$smode
    assert_smc_log "$name-up" 1
    assert_smc_log "$name-down" 1
    assert_smc_log "$name" 2
    # Every privilege-separated child confined itself with the SMC connection
    # it was given, and none was killed for a system call.
    n=$(grep -c 'the process confines its system calls (seccomp)' "$work/$name.smcr.err" || true)
    [[ $n -ge 2 ]] || fail "$name: $n process(es) logged their seccomp confinement, expected 2"
    ! grep -qi 'signal 31\|killed by signal\|terminated by signal\|connection reset\|Broken pipe' \
        "$work/$name.smcr.err" "$work/$name-up.smcr.err" "$work/$name-down.smcr.err" ||
        fail "$name: $(grep -hi -m1 'signal\|reset\|Broken pipe' "$work/$name.smcr.err" "$work/$name-up.smcr.err" "$work/$name-down.smcr.err")"
    log "$name: confined children: $n; smc-shm records seen in smcr-stat: $(sort "$work/$name.records" | uniq -c | tr -s ' \n' ' ')"
    grep -q '^ssh client$' "$work/$name.records" || fail "$name: no live smc-shm record of ssh (client) in smcr-stat"
    grep -q '^sshd server$' "$work/$name.records" || fail "$name: no live smc-shm record of sshd (server) in smcr-stat"
done
log "sshd (default mode and -r) over SMC same-host shared memory, seccomp-confined children included"
