#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Socket activation: systemd-socket-activate listens, then hands its
# listener to the service (exec, LISTEN_FDS=1, fd 3), or with --accept
# accepts each connection itself and hands the connection to a fresh
# service process (fork, exec: fd 3 is the connection). The service is a
# python echo; the client sends 4 MiB and checks the sha256 of what comes back.
# Every process of a service and every client records its own published
# stats just before it exits (smcr-stat -p PID), and the test reads the
# outcome from there:
#  - both ends under smc_run, with and without --accept: SMC (the listener
#    and the connection reach the new image through exec, and it goes on
#    as the old one would have);
#  - only one end under smc_run: plain TCP, intact, no SMC handshake.
# Usage: smc_socket_activate.sh [exec|dropped-accept|dropped-listen|one-end|all]
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need systemd-socket-activate
activate=$(command -v systemd-socket-activate)
bytes=$((4 << 20))

# own_stats.py (the service imports it from beside itself)
cp "$apps_dir/own_stats.py" "$work/"

cat >"$work/service.py" <<'PY'
# service.py listen|accept: a socket-activated echo service. fd 3 is the
# listener (listen: serves two connections, then exits) or the connection (accept).
import os, socket, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from own_stats import own_stats
how = sys.argv[1]
if os.environ.get("LISTEN_FDS") != "1" or int(os.environ["LISTEN_PID"]) != os.getpid():
    sys.exit(f"service: LISTEN_FDS={os.environ.get('LISTEN_FDS')} LISTEN_PID={os.environ.get('LISTEN_PID')}")
s = socket.socket(fileno=3)
for i in range(1 if how == "accept" else 2):
    c = s if how == "accept" else s.accept()[0]
    try:
        while b := c.recv(65536):
            c.sendall(b)
    except OSError as e:
        print(f"service: {e.__class__.__name__}: {e}", file=sys.stderr, flush=True)
    c.close()
own_stats("service")
PY

export SMCR_STAT STATS_DIR

# outcome WHO: "SMC FALLBACKS REASONS" summed over WHO's recorded stats, or
# "none" when no such process recorded any (smcr was not loaded in it).
outcome() { own_outcome "$1"; }

# The service's environment is what systemd-socket-activate gives it: LISTEN_*
# and what -E names, nothing else. These let it record its stats.
plumbing=(-E SMCR_STAT -E STATS_DIR -E XDG_RUNTIME_DIR -E SMCR_LIB -E SMCR_LEARN)

# run_case NAME FORM CMODE [--accept]: two connections, one after the other,
# through a fresh activator (the first is the one that starts the service).
#   inner:   systemd-socket-activate ... smc_run service (smcr in the service only)
#   outer:   smc_run systemd-socket-activate -E LD_PRELOAD -E SMC_DEBUG ... service
#            (smcr in the activator, and in the service through exec)
#   dropped: smc_run systemd-socket-activate ... service (the activator drops
#            LD_PRELOAD from the service's environment: smcr in the activator only)
#   plain:   neither
run_case() {
    local name=$1 form=$2 cmode=$3 accept=${4:-} port how=listen i k nservices=1
    local -a cmd
    [[ -n $accept ]] && how=accept nservices=2
    case_name=$name
    port=$(free_port 4)
    STATS_DIR=$work/stats-$name
    mkdir "$STATS_DIR"
    cmd=("$activate" ${accept:+"$accept"} -l "127.0.0.1:$port" "${plumbing[@]}")
    case $form in
    inner) cmd+=("${smcr_prefix[@]}") ;;
    outer) cmd=("${smcr_prefix[@]}" "${cmd[@]}" -E LD_PRELOAD -E SMC_DEBUG) ;;
    dropped) cmd=("${smcr_prefix[@]}" "${cmd[@]}") ;;
    esac
    cmd+=("$PYTHON" "$work/service.py" "$how")
    start_server plain "$name-server" "${cmd[@]}"
    wait_listen "$server_pid" "$port"
    [[ -n ${slow_activator:-} ]] && first_client_before_exec "$name" "$cmode" "$port"
    for k in 1 2; do
        [[ -n ${slow_activator:-} && $k -eq 1 ]] && continue
        run_client "$cmode" "$name-client$k" 60 "$PYTHON" "$apps_dir/echo_once.py" "$port" "$bytes" "client$k"
        [[ $exit_code -eq 0 ]] && grep -q '^intact ' "$work/$name-client$k.$cmode.out" ||
            fail "$name: client $k did not get its data back intact: $(cat "$work/$name-client$k.$cmode.out") (exit $exit_code)"
    done
    # a service records its stats once it has echoed its last client's end of stream
    for ((i = 0; i < 100; i++)); do
        [[ $(compgen -G "$STATS_DIR/stats.service.*" | wc -l) -ge $nservices ]] && break
        sleep 0.1
    done
    # the activator's own (it accepts with --accept), while it runs
    activator_outcome=$(mode_stats "$server_pid" 2>/dev/null) || activator_outcome=none
    stop_server "$server_pid"
    log "$name: 2 x $((bytes >> 20)) MiB echoed intact; stats (SMC handshakes, fallbacks, reasons):" \
        "client 1: $(outcome client1); client 2: $(outcome client2); service: $(outcome service);" \
        "activator: $activator_outcome"
}

# first_client_before_exec NAME CMODE PORT: client 1 connects while the
# activator is stopped, so that it looks the listener up (and proposes, if
# smcr serves the listener) before the activator execs the service: as a
# client of a busy host may. Sets exit_code as run_client does.
first_client_before_exec() {
    local name=$1 cmode=$2 port=$3 prefix=() client i
    [[ $cmode == smcr ]] && prefix=("${smcr_prefix[@]}")
    kill -STOP "$server_pid"
    timeout -k 5 60 "${prefix[@]}" "$PYTHON" "$apps_dir/echo_once.py" "$port" "$bytes" client1 \
        </dev/null >"$work/$name-client1.$cmode.out" 2>"$work/$name-client1.$cmode.err" &
    client=$!
    # its Proposal sent (it then waits for the answer), or its decision made
    for ((i = 0; i < 200; i++)); do
        grep -qE 'Proposal sent|tcp-fallback' "$work/$name-client1.$cmode.err" && break
        sleep 0.05
    done
    kill -CONT "$server_pid"
    exit_code=0
    wait "$client" || exit_code=$?
    [[ $exit_code -eq 0 ]] && grep -q '^intact ' "$work/$name-client1.$cmode.out" ||
        fail "$name: client 1 did not get its data back intact: $(cat "$work/$name-client1.$cmode.out") (exit $exit_code)"
}

# expect WHO OUTCOME [WHY]: WHO's stats (client1, client2, service: "SMC
# FALLBACKS REASONS" summed over its processes, or "none" when smcr made no
# stats in them) are exactly OUTCOME.
expect() {
    local who=$1 want=$2 why=${3:-} got
    got=$(outcome "$who")
    [[ $got == "$want" ]] || fail "$case_name: $who's stats: '$got', expected '$want'${why:+ ($why)}"
}

# expect_no_smc WHO: WHO made no SMC connection (or no stats at all).
expect_no_smc() {
    local got
    got=$(outcome "$1")
    [[ $got == none || $got == "0 "* ]] || fail "$case_name: $1's stats: '$got', expected no SMC"
}

group_exec() {
    # Both ends under smc_run. The listener is smcr's from the start (outer): every
    # connection SMC, through the exec into the service (a pending connection, the
    # listener, or with --accept the accepted connection).
    run_case outer-listen outer smcr
    # The first connection is what makes the activator exec the service: a client
    # that looks the listener up while the new image registers it again finds no
    # entry and stays TCP (its bytes intact either way).
    [[ $(outcome client1) == "1 0 -" || $(outcome client1) == "0 1 PEERNOSMC:1" ]] ||
        fail "$case_name: client1's stats: '$(outcome client1)', expected SMC or TCP (PEERNOSMC)"
    expect client2 "1 0 -"
    [[ $(outcome service) == "$(($(outcome client1 | cut -d' ' -f1) + 1)) "* ]] ||
        fail "$case_name: service stats '$(outcome service)' do not match its clients'"
    run_case outer-accept outer smcr --accept
    expect client1 "1 0 -"
    expect client2 "1 0 -"
    expect service "2 0 -"
    # smcr in the service only (inner): the first connection arrives before the
    # service exists, and a listener smcr is not in is never advertised: TCP. The
    # service adopts its LISTEN_FDS listener: the second is SMC. With --accept the
    # listener stays the activator's: TCP.
    run_case inner-listen inner smcr
    expect client1 "0 1 PEERNOSMC:1" "nobody served the listener when it connected"
    expect client2 "1 0 -"
    run_case inner-accept inner smcr --accept
    expect client1 "0 1 PEERNOSMC:1" "the listener is the activator's, without smcr"
    expect client2 "0 1 PEERNOSMC:1" "the listener is the activator's, without smcr"
}

# The service's environment without smcr (dropped): TCP, and never a Proposal
# reaching it.
group_dropped_accept() {
    run_case dropped-accept dropped smcr --accept
    expect service none
    expect client1 "0 1 HANDOFF:1" "declined before the connection left for a program without smcr"
    expect client2 "0 1 HANDOFF:1"
}

# A listener that goes to a program without smcr while a connection waits in
# its backlog: that connection's client looked the listener up while smcr still
# served it, and proposed; its Proposal then reaches the service as data. (The
# activator is stopped while the first client connects, so that the client
# always looks before the exec; otherwise which comes first is a race.) What
# would keep it TCP (settling connections still in the backlog before the exec,
# or a registry entry the client cannot see once the listener is leaving) is not
# built yet: this group is a known failure (tests/apps/meson.build).
group_dropped_listen() {
    slow_activator=1 run_case dropped-listen dropped smcr
    expect service none
    expect client1 "0 1 PEERNOSMC:1"
    expect client2 "0 1 PEERNOSMC:1"
}

group_one_end() {
    # One end only: plain TCP.
    run_case plain-server-client-smcr plain smcr --accept
    expect client1 "0 1 PEERNOSMC:1"
    expect service none
    run_case smcr-server-client-plain outer plain
    expect client1 none
    expect_no_smc service
    run_case smcr-accept-client-plain outer plain --accept
    expect client1 none
    expect_no_smc service
}

case ${1:-all} in
exec) group_exec ;;
dropped-accept) group_dropped_accept ;;
dropped-listen) group_dropped_listen ;;
one-end) group_one_end ;;
all) group_exec; group_dropped_accept; group_dropped_listen; group_one_end ;;
*) fail "unknown group $1" ;;
esac
