#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nginx's binary upgrade under load, as its documentation gives it: USR2 (the
# master forks and execs a new master, which inherits the listeners), WINCH
# (the old workers finish), QUIT (the old master leaves). A client under
# smc_run keeps making one request per connection throughout. nginx keeps only
# the environment its configuration names, so the new master runs without
# smcr unless `env LD_PRELOAD;` is configured. The case (first argument):
#  - drop: nginx's default environment, the new master without smcr: every
#    request is answered intact (no client's CLC Proposal ever reaches the
#    new workers, which would answer it with a 400), the log says the
#    listener is no longer served by smcr;
#  - keep: `env LD_PRELOAD;`: every request is answered intact;
#  - keep-smc: as keep, and the new workers' connections are SMC again once
#    the old master has left (the registry name is free again, which the new
#    workers notice when they accept, within a second), every connection after
#    that too; before it, any fallback is PEERNOSMC (the client saw no
#    registration: TCP, never a Proposal nobody reads).
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need nginx
[[ -n $PYTHON ]] || skip "python3 is not installed"

mkdir -p "$work/www"
random_file "$work/www/small.bin" 3000
small_sum=$(sha "$work/www/small.bin")

# The client: requests on new connections until told to stop; every answer checked.
cat >"$work/client.py" <<'PY'
import hashlib, http.client, os, sys, time
port, want, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ok = bad = 0
while not os.path.exists(stop) or ok + bad < 20:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/small.bin")
        r = c.getresponse()
        body = r.read()
        c.close()
        if r.status == 200 and hashlib.sha256(body).hexdigest() == want:
            ok += 1
        else:
            bad += 1
            print(f"bad answer: status {r.status}, {len(body)} bytes", flush=True)
    except Exception as e:
        bad += 1
        print(f"error: {e.__class__.__name__}: {e}", flush=True)
    time.sleep(0.01)
print(f"requests ok {ok} bad {bad}", flush=True)
PY

# wait_for COND SECONDS WHAT: polls the shell condition COND.
wait_for() {
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        eval "$1" && return 0
        sleep 0.05
    done
    fail "$3 after $2 s"
}

upgrade() {
    local keep=$1 port pid new client_pid
    port=$(free_port 4)
    # (a daemon nginx sends its stderr, our log lines too, to its error log)
    rm -f "$work/nginx.pid" "$work/nginx.pid.oldbin" "$work/stop" "$work/nginx-error.log"
    write_nginx_conf "$port" 128
    if [[ $keep == keep* ]]; then
        sed -i 's/^env XDG_RUNTIME_DIR;/env XDG_RUNTIME_DIR;\nenv LD_PRELOAD;\nenv SMC_DEBUG;\nenv SMCR_LEARN;/' "$work/nginx.conf"
    fi
    # nginx ignores USR2 in a master that is not a daemon
    sed -i 's/^daemon off;/daemon on;/' "$work/nginx.conf"
    # nginx execs argv[0] for the new binary: a full path
    "${smcr_prefix[@]}" "$(command -v nginx)" -p "$work" -e "$work/nginx-stderr-$keep.log" -c "$work/nginx.conf" \
        >"$work/nginx-$keep.out" 2>"$work/nginx-$keep.err" || fail "nginx did not start"
    wait_for '[[ -s $work/nginx.pid ]]' 10 "no nginx.pid"
    pid=$(cat "$work/nginx.pid")
    server_pids+=("$pid")
    wait_listen "$pid" "$port"
    "${smcr_prefix[@]}" "$PYTHON" "$work/client.py" "$port" "$small_sum" "$work/stop" \
        >"$work/client-$keep.out" 2>"$work/client-$keep.err" &
    client_pid=$!
    sleep 0.5
    kill -USR2 "$pid"
    wait_for '[[ -s $work/nginx.pid.oldbin && -s $work/nginx.pid ]]' 10 "no new master"
    new=$(cat "$work/nginx.pid")
    server_pids+=("$new")
    wait_for '[[ $(ps -o pid= --ppid "$new" | wc -l) -ge 2 ]]' 10 "the new master has no workers"
    sleep 0.5
    kill -WINCH "$pid"
    sleep 0.5
    kill -QUIT "$pid"
    wait_for '! kill -0 "$pid" 2>/dev/null' 10 "the old master did not leave"
    sleep 2.5
    : >"$work/stop"
    wait_exit "$client_pid" 60
    [[ $exit_code -eq 0 ]] || fail "$keep: the client exited $exit_code: $(tail -3 "$work/client-$keep.err")"
    grep -q '^requests ok [0-9]* bad 0$' "$work/client-$keep.out" ||
        fail "$keep: requests failed during the upgrade: $(head -5 "$work/client-$keep.out")"
    log "$keep: $(tail -1 "$work/client-$keep.out") across USR2, WINCH, QUIT"
    if [[ $keep == drop ]]; then
        grep -q 'listener on port [0-9]* no longer served by smcr: exec of a program without smcr' \
            "$work/nginx-error.log" ||
            fail "drop: the log does not say that the listener is no longer served by smcr"
    fi
    if [[ $keep == keep-smc ]]; then
        local smc fb reasons last
        # shellcheck disable=SC2046
        read -r smc fb reasons <<<"$(mode_stats $(ps -o pid= --ppid "$new"))"
        [[ $smc -ge 1 ]] || fail "keep-smc: no SMC connection in the new workers' stats"
        [[ $fb -eq 0 || $reasons == PEERNOSMC:$fb ]] ||
            fail "keep-smc: fallbacks other than PEERNOSMC in the new workers' stats: $reasons"
        # the client's last 20 connections came after the old master had left
        last=$(grep -E ': (smc-shm|tcp-fallback) \(client\)' "$work/client-$keep.err" | tail -20 |
            grep -c ': smc-shm (client)' || true)
        [[ $last -eq 20 ]] ||
            fail "keep-smc: only $last of the client's last 20 connections were SMC"
        log "keep-smc: the new workers ran $smc SMC connection(s), $fb PEERNOSMC fallback(s) before they took the registry name; the last 20 were SMC"
    fi
    kill -QUIT "$new"
    wait_for '! kill -0 "$new" 2>/dev/null' 10 "the new master did not leave"
}

case ${1:-} in
drop | keep | keep-smc) upgrade "$1" ;;
*) fail "usage: smc_nginx_upgrade.sh drop|keep|keep-smc" ;;
esac
