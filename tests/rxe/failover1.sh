#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Failover of a link group's FIRST link (SMC-Rv2, two RDMA devices per "host"), run INSIDE
# scripts/rxe-vm -n pair2 by the meson suite 'rxe':
#   scripts/rxe-vm -n pair2 -- tests/rxe/failover1.sh BUILD_DIR [MIB]
# "Host A" is 10.77.0.1 (veth0/rxe0) with 10.77.0.3 (veth2/rxe2), "host B" 10.77.0.2
# (veth1/rxe1) with 10.77.0.4 (veth3/rxe3).  One smcr client process (python, A) and one
# smcr server process (python, B, listening on every address), SMCR_TRANSPORT=rdma: the
# first connection (10.77.0.1 -> 10.77.0.2) builds the link group on rxe0/rxe1, the server
# adds its second link (rxe2/rxe3), and the second connection, made once the server says
# that link is up, goes on it.  While the FIRST connection (on the first link) streams a
# MIB MiB echo (default 16), the first link's device is deleted:
#   (a) the client's rxe0 (the client finds its device gone, moves, tells the server);
#   (b) the server's rxe1 (the server finds it, moves, tells the client).
# Each case checks: the stream completes with equal sha256 and the second connection
# still echoes; smcr-stat on the side that lost its device shows the first connection
# moved (rxe0 -> rxe2 on the client, rxe1 -> rxe3 on the server) with a link switch
# counted, and the link group alive with one link, on the second device; the other
# side's connection moved too (its log); and a third connection, 10.77.0.3 -> 10.77.0.4
# (the only device pair left), reuses that same group on both sides.  The device is
# re-added (with its PNET id) once the client asks: the server adds the group's second link
# again (its log; smcr-stat on both sides: two links, the new one on the device that came
# back), and a fourth connection, 10.77.0.3 -> 10.77.0.4, reuses the group on that link.
# FAILOVER1_CASES (default "a b") runs only some; FAILOVER1_LOGS keeps the logs there (a
# directory the guest shares: inside the checkout).  Prints TAP (tests/rxe/case_lib.sh).
set -u
build=${1:?usage: failover1.sh BUILD_DIR [MIB]}
mib=${2:-16}
smc_run=$build/scripts/smc_run
stat_tool=$build/src/tools/smcr-stat

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair2 ]] || {
    echo "failover1.sh: run me inside 'scripts/rxe-vm -n pair2'" >&2
    exit 2
}
source "$(dirname -- "${BASH_SOURCE[0]}")/case_lib.sh"
logs=${FAILOVER1_LOGS:-$(mktemp -d)}; mkdir -p "$logs"
cp "$(dirname -- "${BASH_SOURCE[0]}")/echo_lib.py" "$logs/" # the python programs import it
bytes=$((mib << 20))
export XDG_RUNTIME_DIR=$logs/run # smcr's stats files (the guest's /run is fresh)
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
export SMCR_UEID=RXE-VM
cases=" ${FAILOVER1_CASES:-a b} "

# The server: four connections, each echoed; for each, its smcr-stat record (mode, link
# group, device) at its first bytes (the fourth's with the server's link groups then), and
# for the first also once `moved_at` bytes are echoed (before the client closes it: the
# client waits for that line) with its link groups and the process's link switches.
cat > "$logs/fsrv.py" <<'PY'
import json, os, socket, subprocess, sys, threading
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
port, smcr_stat, moved_at, moved_file = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
l = socket.create_server(("0.0.0.0", port))
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
said = threading.Lock()
def say(line):
    with said:
        print(line, flush=True)
def stat(*args):
    return json.loads(subprocess.run([smcr_stat, *args, "-p", str(os.getpid())], env=env,
                                     capture_output=True, text=True, timeout=60).stdout)
def record(c):
    mine = [r for r in stat("json")["connections"]
            if r.get("peer_port") == c.getpeername()[1] and r.get("state") == "live"]
    return (mine[0]["mode"], mine[0]["link_group"], mine[0]["device"]) if len(mine) == 1 else ()
def groups():
    return [(g["id"], g["state"], [k["device"] for k in g["links"] or []])
            for g in stat("linkgroups", "--json")["link_groups"]]
def serve(c, i):
    rec, moved, grp = None, None, ""
    def each(done):
        nonlocal rec, moved, grp
        if rec is None:
            rec = record(c)
            grp = f" groups={groups()}" if i == 4 else ""

        if i == 1 and moved is None and done >= moved_at:
            moved = record(c)
            sw = stat("stats", "--json")["total"].get("link_switches")
            line = f"moved 1: {rec} -> {moved} switches={sw} groups={groups()}"
            say(line)
            with open(moved_file + ".tmp", "w") as f: # (one write: the 9p share and appends)
                f.write(line + "\n")
            os.replace(moved_file + ".tmp", moved_file)
    echo_lib.serve(c, each)
    say(f"served {i}: {rec}{grp}")
print("listening", flush=True)
ts = []
for i in (1, 2, 3, 4):
    c, _ = l.accept()
    t = threading.Thread(target=serve, args=(c, i)); t.start(); ts.append(t)
for t in ts:
    t.join()
PY

cat > "$logs/fcli.py" <<'PY'
import json, os, socket, subprocess, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
port, smcr_stat, size, srvlog, moved, added = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
def stat(*args):
    return json.loads(subprocess.run([smcr_stat, *args, "-p", str(os.getpid())], env=env,
                                     capture_output=True, text=True, timeout=60).stdout)
def record(c):
    return echo_lib.record(c, smcr_stat)
def groups():
    return [(g["id"], g["state"], [k["device"] for k in g["links"] or []])
            for g in stat("linkgroups", "--json")["link_groups"]]
def wait_for(path, text, secs):
    for _ in range(int(secs * 10)):
        if os.path.exists(path) and text in open(path).read():
            return True
        time.sleep(0.1)
    return False
small = os.urandom(1 << 16)
c1 = socket.create_connection(("10.77.0.2", port), source_address=("10.77.0.1", 0))
ok = echo_lib.echo(c1, small)
# the server adds its second link once the first is confirmed; the second connection
# goes there (the link with fewer connections) once the server says it is up
wait_for(srvlog, " up on ", 30)
c2 = socket.create_connection(("10.77.0.2", port), source_address=("10.77.0.1", 0))
ok = echo_lib.echo(c2, small) and ok
print(f"before: {record(c1)} {record(c2)} groups={groups()}", flush=True)
def under_way(got): # the test deletes the first link's device now
    print(f"streaming ({got} bytes echoed)", flush=True)
got, same, gap, gap_at = echo_lib.stream(c1, os.urandom(size), under_way)
if not same:
    sys.exit(f"FAIL: {got} of {size} bytes echoed on the first connection, not the data")
ok2 = echo_lib.echo(c2, small)
sw = stat("stats", "--json")["total"].get("link_switches")
print(f"after: {record(c1)} {record(c2)} switches={sw} groups={groups()}", flush=True)
wait_for(moved, "moved 1:", 60) # the server's record of it first, while it is live
# a new connection on the device pair left: the same group on both sides
c3 = socket.create_connection(("10.77.0.4", port), source_address=("10.77.0.3", 0))
ok3 = echo_lib.echo(c3, small)
print(f"third: {record(c3)} echo {'ok' if ok3 else 'BAD'} groups={groups()}", flush=True)
# the device comes back (the test adds it once it reads this line): the server adds the
# second link again; a fourth connection on the pair left reuses the group, on the new
# link (the one with fewer connections)
print("re-add the device", flush=True)
wait_for(added, "added", 180)
r3 = record(c3)
lgr = r3[1] if r3 else None
for _ in range(600):
    if [g for g in groups() if g[0] == lgr and len(g[2]) == 2]:
        break
    time.sleep(0.1)
print(f"again: groups={groups()}", flush=True)
c4 = socket.create_connection(("10.77.0.4", port), source_address=("10.77.0.3", 0))
ok4 = echo_lib.echo(c4, small)
print(f"fourth: {record(c4)} echo {'ok' if ok4 else 'BAD'} groups={groups()}", flush=True)
c4.close(); c3.close(); c2.close(); c1.close()
if not (ok and ok2 and ok3 and ok4):
    sys.exit(f"FAIL: small echoes: before {ok}, second connection after {ok2}, third {ok3}, fourth {ok4}")
print(f"echo ok: {size >> 20} MiB, sha256 equal; longest pause {gap:.2f}s (after {gap_at >> 10} KiB); the second connection echoes after it", flush=True)
PY

# fields LINE: LINE with the python tuple and list punctuation gone
fields() { tr -d "(),'[]" <<< "$1"; }

fail_first() { # CASE DEVICE PORT: the first link's DEVICE deleted while connection 1 streams
    local c=$1 dev=$2 port=$3 spid cpid crc drc dsecs line re lgr clgr i mydir side
    if [[ $dev == rxe0 ]]; then side=client; else side=server; fi
    SMCR_TRANSPORT=rdma timeout 300 "$smc_run" -d python3 "$logs/fsrv.py" "$port" "$stat_tool" \
        $(((1 << 16) + bytes)) "$logs/$c.moved" > "$logs/$c.srv" 2> "$logs/$c.srverr" &
    spid=$!
    wait_listening "$port" || echo "    (smcr server not listening)"
    # (the second connection is made once the server's log says "second link 2 up on rxe3")
    SMCR_TRANSPORT=rdma timeout 300 "$smc_run" -d python3 "$logs/fcli.py" "$port" "$stat_tool" \
        "$bytes" "$logs/$c.srverr" "$logs/$c.moved" "$logs/$c.added" > "$logs/$c.cli" 2> "$logs/$c.err" &
    cpid=$!
    delete_mid_stream "$dev" "$cpid" "$logs/$c.cli" "readd_when_asked $logs/$c $dev restore $dev"
    # the server ends with the client's connections; one whose client failed early waits
    # for a connection that never comes
    for ((i = 0; i < 100; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill "$spid" 2>/dev/null
    wait "$spid"
    echo "    client: $(grep -E '^(before|after|third)' "$logs/$c.cli" | tr '\n' ';')"
    echo "    server: $(grep -aE '^(moved|served)' "$logs/$c.srv" | tr '\n' ';')"
    if grep -q "^echo ok" "$logs/$c.cli" && [[ $crc == 0 ]]; then
        pass "($c) $dev deleted mid-stream: $(grep -m1 '^echo ok' "$logs/$c.cli"); delete done after ${dsecs}s"
    else
        fail "($c) $dev deleted mid-stream: client exit $crc, delete exit $drc: $(tail -n 2 "$logs/$c.cli" | head -c 300)"
        grep -E 'link|ends|moved|abort|reset' "$logs/$c.err" | tail -n 6 | sed 's/^/    cli| /'
        grep -E 'link|ends|moved|abort|reset' "$logs/$c.srverr" | tail -n 6 | sed 's/^/    srv| /'
    fi
    # the client's view: connection 1 on rxe0 then rxe2, connection 2 on rxe2 throughout
    line=$(fields "$(grep -m1 '^before:' "$logs/$c.cli")")
    re='^before: smc-r ([0-9]+) rxe0 smc-r ([0-9]+) rxe2 '
    if [[ $line =~ $re && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]; then
        lgr=${BASH_REMATCH[1]}
        pass "($c) client before: connection 1 on rxe0, connection 2 on rxe2, one group ($lgr)"
    else
        lgr=none
        fail "($c) client before: '$line' (want smc-r on one group, rxe0 and rxe2)"
    fi
    line=$(fields "$(grep -m1 '^after:' "$logs/$c.cli")")
    re="^after: smc-r $lgr rxe2 smc-r $lgr rxe2 switches=([0-9]+) groups= *$lgr active rxe2 *\$"
    if [[ $line =~ $re ]] && ((BASH_REMATCH[1] > 0)); then
        pass "($c) client after: both connections on rxe2, group $lgr alive with one link (rxe2): $line"
    else
        fail "($c) client after: '$line' (want both on rxe2 in group $lgr, switches > 0, the group active on rxe2 alone)"
    fi
    line=$(fields "$(grep -m1 '^third:' "$logs/$c.cli")")
    [[ $line =~ ^third:\ smc-r\ $lgr\ rxe2\ echo\ ok ]] &&
        pass "($c) client: a third connection (10.77.0.3 -> 10.77.0.4) reuses group $lgr on rxe2" ||
        fail "($c) client third connection: '$line' (want smc-r in group $lgr on rxe2)"
    clgr=$lgr
    # the server's view: connection 1 on rxe1 then rxe3, the others on rxe3, one group
    line=$(fields "$(grep -am1 '^moved 1:' "$logs/$c.moved")")
    re='^moved 1: smc-r ([0-9]+) rxe1 -> smc-r ([0-9]+) rxe3 switches=([0-9]+) groups= *([0-9]+) active rxe3 *$'
    if [[ $line =~ $re && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" && ${BASH_REMATCH[1]} == "${BASH_REMATCH[4]}" ]] &&
        ((BASH_REMATCH[3] > 0)); then
        lgr=${BASH_REMATCH[1]}
        pass "($c) server: connection 1 moved from rxe1 to rxe3, group $lgr alive with one link (rxe3): $line"
    else
        lgr=none
        fail "($c) server: '$line' (want rxe1 -> rxe3 in one group, switches > 0, active on rxe3 alone)"
    fi
    [[ $(grep -ac "^served [23]: ('smc-r', $lgr, 'rxe3')" "$logs/$c.srv") == 2 ]] &&
        pass "($c) server: connections 2 and 3 on rxe3 in group $lgr (the third reused it)" ||
        { fail "($c) server: connections 2 and 3 not both on rxe3 in group $lgr"; show "$logs/$c.srv" srv; }
    # the logs: the side that lost its device took the first link down, both moved
    if [[ $side == client ]]; then mydir=$logs/$c.err; else mydir=$logs/$c.srverr; fi
    grep -q "first link [0-9]* down .* now the group's only link" "$mydir" &&
        pass "($c) $side log: $(grep -m1 -o 'first link [0-9]* down .*' "$mydir")" ||
        { fail "($c) $side log: the first link was not taken down"; grep -E ' link|ends' "$mydir" | tail -n 4 | sed 's/^/    log| /'; }
    grep -q "moved to another link" "$logs/$c.err" && grep -q "moved to another link" "$logs/$c.srverr" &&
        pass "($c) both sides moved the connection: client '$(grep -m1 -o 'moved to another link.*' "$logs/$c.err")', server '$(grep -m1 -o 'moved to another link.*' "$logs/$c.srverr")'" ||
        fail "($c) not both sides logged the move"
    # the device back: the server added the second link again, and the fourth connection
    # reused the group on it (the link with fewer connections)
    line=$(fields "$(grep -m1 '^again:' "$logs/$c.cli")")
    re="groups=.*$clgr active rxe2 rxe0( |\$)"
    [[ $line =~ $re ]] &&
        pass "($c) client: $dev back, group $clgr has two links again (rxe2, rxe0): $line" ||
        fail "($c) client after $dev came back: '$line' (want group $clgr active on rxe2 and rxe0)"
    line=$(fields "$(grep -m1 '^fourth:' "$logs/$c.cli")")
    [[ $line =~ ^fourth:\ smc-r\ $clgr\ rxe0\ echo\ ok ]] &&
        pass "($c) client: a fourth connection reuses group $clgr on its new link (rxe0)" ||
        fail "($c) client fourth connection: '$line' (want smc-r in group $clgr on rxe0)"
    line=$(fields "$(grep -am1 '^served 4:' "$logs/$c.srv")")
    re="^served 4: smc-r $lgr rxe1 groups= *$lgr active rxe3 rxe1 *\$"
    [[ $line =~ $re ]] &&
        pass "($c) server: the fourth connection on rxe1 in group $lgr, two links again: $line" ||
        fail "($c) server fourth connection: '$line' (want rxe1 in group $lgr, active on rxe3 and rxe1)"
    if grep -q "adding a second link on rxe1" "$logs/$c.srverr" &&
        grep -q "second link [0-9]* up on rxe1" "$logs/$c.srverr"; then
        pass "($c) server log: '$(grep -m1 -o 'adding a second link on rxe1.*' "$logs/$c.srverr")', '$(grep -m1 -o 'second link [0-9]* up on rxe1.*' "$logs/$c.srverr")'"
    else
        fail "($c) server log: no second link added again on rxe1"
        grep -E 'second link|attempt|appeared' "$logs/$c.srverr" | tail -n 6 | sed 's/^/    srv| /'
    fi
    restore "$dev" # (done already, unless the client never asked)
}
restore() { # DEVICE: back for the next case, with its PNET id and its GID
    local dev=$1 i
    rdma link add "$dev" type rxe netdev "veth${dev#rxe}" 2>/dev/null
    if [[ $dev == rxe0 ]]; then rxe-vm-smc pnet RXEA veth0 rxe0 1; else rxe-vm-smc pnet RXEB veth1 rxe1 1; fi >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do
        grep -qs ":ffff:0a4d:000$((${dev#rxe} + 1))" /sys/class/infiniband/"$dev"/ports/1/gids/* 2>/dev/null && break
        sleep 0.1
    done
}

if [[ $cases == *" a "* ]]; then
    case_begin "(a) failover of the first link as a client: our rxe0 deleted under a stream on it"
    fail_first a rxe0 7931
fi
if [[ $cases == *" b "* ]]; then
    case_begin "(b) failover of the first link as a server: our rxe1 deleted under a stream on it"
    fail_first b rxe1 7932
fi
case_end
[[ -n ${FAILOVER1_LOGS:-} ]] || rm -rf "$logs"
tap_done
