#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A link group's second link (SMC-Rv2, two RDMA devices per "host"), run INSIDE
# scripts/rxe-vm -n pair2 (kernel >= 6.12 with its SMC set up) by the meson suite 'rxe':
#   scripts/rxe-vm -n pair2 -- tests/rxe/link2.sh BUILD_DIR BUILD/tests/rxe/smc_echo [MIB]
# "Host A" is 10.77.0.1 (veth0/rxe0) with 10.77.0.3 (veth2/rxe2), "host B" 10.77.0.2
# (rxe1) with 10.77.0.4 (rxe3); PNET id RXEA for A's devices, RXEB for B's.
#   (k) kernel AF_SMC client (A) -> kernel AF_SMC server (B): the echo works and the
#       kernel's link dump (SMC_NETLINK_GET_LINK_SMCR) shows each side's link group with
#       two links, one on each of its devices: proof that this topology is what the
#       kernel needs for a second link (an alternate device with the group's PNET id whose
#       netdev has an address in the subnet of the group's own one, smc_ib_determine_gid_rcu()).
#   (a) smcr client (socat, A) -> kernel server (B), MIB MiB (default 16) echoed with equal
#       sha256 while the kernel server's group shows two links (rxe1, rxe3): smcr accepted
#       its ADD LINK on rxe2 (our log says so) instead of rejecting it;
#   (b) two connections of one smcr process (python, A) to one kernel server, the second
#       made while the first is open: the kernel puts it on its group's second link, and
#       smcr-stat shows both on one link group, the first on rxe0 and the second on rxe2;
#       both echoes are intact (CDCs and WRITEs of the second ride the second link);
#   (d) kernel AF_SMC client (A) -> smcr server (socat, B), MIB MiB echoed with equal sha256
#       while the kernel client's group shows two links (rxe0, rxe2): the smcr server offered
#       max_links 2 and added its second link on rxe3 (its log says "second link 2 up on rxe3");
#   (e) smcr client (python, A) -> smcr server (python, B), SMCR_TRANSPORT=rdma: both bring
#       the second link up, and two open connections of the client land on different links
#       (smcr-stat: rxe0/rxe2 on the client, rxe1/rxe3 on the server, one group each); the
#       second connection is made once the server's log says the link is up;
#   (f) (e) over IPv6, fd77::1 -> fd77::2 (the kernel's 6.12 has no SMC-Rv2 over IPv6: smcr
#       on both sides), the second link between fd77::3 and fd77::4;
#   (g) a kernel AF_SMC client (python under bench/afsmc.c's preload, A) with two open
#       connections to an smcr server (B): the second goes on the server's second link (smcr-
#       stat: rxe1 then rxe3; the kernel's link dump: one connection on each of its links),
#       both echoes intact;
#   (c) failover, our device: two connections of one smcr process, the second on the
#       group's second link (rxe2); 'rdma link delete rxe2' while it streams a MIB MiB echo:
#       the echo completes with equal sha256, smcr-stat shows it on rxe0 afterwards with a
#       link switch counted, our log says the second link went down and the connection
#       moved, and the kernel server's group carrying it goes on with one link (rxe1);
#   (h) (c) with the kernel server's device of the second link (rxe3) deleted: the
#       kernel moves its side and sends DELETE LINK, which we answer and follow.  Not in
#       the suite and no evidence of anything: a reproducer to run by hand
#       (LINK2_CASES=h), because the guest kernel can hang in that device removal
#       (kworkers and 'rdma link delete rxe3' blocked > 480 s, no stacks printed).
#   (i) failover as a server: a kernel AF_SMC client (python under bench/afsmc.c's preload,
#       A) with two open connections to an smcr server (python, B), the second on the
#       server's second link (rxe3); 'rdma link delete rxe3' while it streams a SRVMIB MiB
#       (default 16) echo: the echo completes with equal sha256, smcr-stat on the server shows
#       it on rxe1 afterwards with a link switch counted, the server's log says the second
#       link went down and the connection moved, and the kernel client's group carrying
#       them goes on with one link (rxe0): our DELETE LINK moved its side.  Then rxe3 is
#       added again: the server adds its second link again (its log) and the kernel
#       client's group has two links again (rxe0, rxe2).  The echo reads
#       nothing while its write waits, so when the kernel's consumer-cursor update is lost
#       with the link (protocol.md §6.6) only the server's RMB rescue lets it finish: the
#       rescues smcr-stat linkgroup counts are the ones the server's log names;
#   (j) (i) with an smcr client (python, A): its log shows its side moved too (after our
#       DELETE LINK, or its own QP error if that came first).
#   (i) and (j) run first, before any case with a kernel server: with a kernel server's
#   group on rxe3 (k, a and b leave theirs, idle for 10 min), 'rdma link delete rxe3' also
#   takes the kernel's link down, and the guest kernel hung there once (kworkers blocked
#   > 120 s, as in (h)); they are skipped (a TAP SKIP, not a pass) if the kernel has a
#   link on rxe3.  Each re-adds its device afterwards.
# LINK2_CASES (default "i j k a b d e f g c"; h only by hand) runs only some cases;
# LINK2_LOGS keeps the logs there (a directory the guest shares: inside the checkout).
# Prints TAP, one subtest per case (tests/rxe/case_lib.sh); skipped as a whole where the
# guest kernel's SMC is not set up.
set -u
build=${1:?usage: link2.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
ksmc=${2:?usage: link2.sh BUILD_DIR PATH/TO/smc_echo [MIB]}
mib=${3:-16}
A=10.77.0.1 B=10.77.0.2
smc_run=$build/scripts/smc_run
stat_tool=$build/src/tools/smcr-stat

[[ ${RXE_VM:-} == 1 && ${RXE_VM_NET:-} == pair2 ]] || {
    echo "link2.sh: run me inside 'scripts/rxe-vm -n pair2'" >&2
    exit 2
}
source "$(dirname -- "${BASH_SOURCE[0]}")/case_lib.sh"
[[ ${RXE_VM_SMC:-0} == 1 ]] || tap_skip_all "the guest kernel's SMC-R is not set up (kernel < 6.12?)"
logs=${LINK2_LOGS:-$(mktemp -d)}; mkdir -p "$logs"
cp "$(dirname -- "${BASH_SOURCE[0]}")/echo_lib.py" "$logs/" # the python clients import it
bytes=$((mib << 20))
export XDG_RUNTIME_DIR=$logs/run # smcr's stats files (the guest's /run is fresh)
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
export SMCR_UEID=RXE-VM          # the kernel's user EID (rxe-vm-smc ueid RXE-VM)
retry=retry=3,interval=1
# links_of ROLE: the devices of the kernel's links in its groups of ROLE, sorted, one
# line per group ("rxe0 rxe2")
links_of() {
    rxe-vm-smc links | awk -v r="$1" '
        /^lgr/ { if (g != "") print g; g = ""; mine = index($0, "role=" r) > 0; next }
        /^  link/ && mine { for (i = 1; i <= NF; i++) if ($i ~ /^dev=/) g = g " " substr($i, 5) }
        END { if (g != "") print g }' | while read -r l; do tr ' ' '\n' <<< "$l" | sort | xargs; done
}

# logged_switch WHO LOG: smcr's log (SMC_DEBUG) says a second link went down and a
# connection moved to the first
logged_switch() {
    grep -q "second link [0-9]* down .* move to the first link" "$2" && grep -q "moved to another link" "$2" &&
        pass "$1 log: $(grep -m1 -o 'second link [0-9]* down .*' "$2"); $(grep -m1 -o 'moved to another link.*' "$2")" ||
        { fail "$1 log: no link switch"; grep -iE ' link|ends' "$2" | tail -n 4 | sed 's/^/    log| /'; }
}
# used_links ROLE DUMP: the devices of the kernel's links, in a saved link dump, of its
# groups of ROLE that carry connections (conns > 0), sorted
used_links() {
    awk -v r="$1" '/^lgr/ { use = index($0, "role=" r) && $0 !~ / conns=0( |$)/; next }
        /^  link/ && use { for (i = 1; i <= NF; i++) if ($i ~ /^dev=/) print substr($i, 5) }' \
        "$2" 2>/dev/null | sort | xargs
}

cases=" ${LINK2_CASES:-i j k a b d e f g c} "
want_case() { [[ $cases == *" $1 "* ]]; }

SMC_DEBUG=1 "$smc_run" true 2> "$logs/attach.err" # attaches the option program

# the kernel's client of (g) and (i): python on AF_SMC through bench/afsmc.c's preload
if want_case g || want_case i; then
afsmc_c=$(dirname -- "${BASH_SOURCE[0]}")/../../bench/afsmc.c
[[ -f $afsmc_c ]] || afsmc_c=bench/afsmc.c
cc -O2 -fPIC -shared -o "$logs/afsmc.so" "$afsmc_c" -ldl 2> "$logs/afsmc.cc" ||
    { echo "    (cannot build afsmc.so)"; show "$logs/afsmc.cc" cc; }
fi
# the echo server of (e), (f), (g), (i), (j): python, two connections, each its smcr-stat record
if want_case e || want_case f || want_case g || want_case i || want_case j; then
cat > "$logs/esrv.py" <<'PY'
import json, os, socket, subprocess, sys, threading
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
host, port, smcr_stat = sys.argv[1], int(sys.argv[2]), sys.argv[3]
size = int(sys.argv[4]) if len(sys.argv) > 4 else 0 # (i)/(j): connection 2 streams size bytes
moved_file = sys.argv[5] if len(sys.argv) > 5 else None # (i)/(j): where its "moved 2" line goes too
l = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
print("listening", flush=True)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
said = threading.Lock()
def say(line): # one whole line at a time (print writes the newline on its own)
    with said:
        print(line, flush=True)
def stat(*args):
    return json.loads(subprocess.run([smcr_stat, *args, "-p", str(os.getpid())], env=env,
                                     capture_output=True, text=True, timeout=60).stdout)
def record(c): # while it is live: our record of it (mode, link group, device)
    mine = [r for r in stat("json")["connections"]
            if r.get("peer_port") == c.getpeername()[1] and r.get("state") == "live"]
    return (mine[0]["mode"], mine[0]["link_group"], mine[0]["device"]) if len(mine) == 1 else ()
def serve(c, i):
    rec, moved = None, None
    def each(done):
        nonlocal rec, moved
        if rec is None:
            rec = record(c)
        if size and i == 2 and moved is None and done >= size:
            # all of it echoed, before the client closes (it waits for this line)
            moved = record(c)
            sw = stat("stats", "--json")["total"].get("link_switches")
            res = sum(g.get("rmb_rescues", 0) for g in stat("linkgroups", "--json")["link_groups"])
            say(f"moved 2: {rec} -> {moved} switches={sw} rmb_rescues={res}")
            # also in a file of its own, written once: the guest's 9p share has shown this
            # output file (appended to while the client polls it) with the line as NULs
            with open(moved_file + ".tmp", "w") as f:
                f.write(f"moved 2: {rec} -> {moved} switches={sw} rmb_rescues={res}\n")
            os.replace(moved_file + ".tmp", moved_file)
    # (i)/(j): a plain echo: while its write waits for room in the client's RMB it reads
    # nothing, so the client's data fills ours (protocol.md §6.6)
    echo_lib.serve(c, each)
    say(f"served {i}: {rec}")
ts = []
for i in (1, 2):
    c, _ = l.accept()
    t = threading.Thread(target=serve, args=(c, i)); t.start(); ts.append(t)
for t in ts:
    t.join()
PY
fi

# ------------ (i)/(j) failover as a server: the smcr server's second device deleted ----
# srv_fail_over CASE PORT: an smcr server (python, B) with two open connections from one
# client (A): (i) a kernel AF_SMC client (python under bench/afsmc.c's preload), (j) an smcr
# client (python); the first on rxe1 (first contact), the second on the server's second
# link (rxe3, the link with fewer connections).  While the second streams a SRVMIB MiB
# echo, rxe3 is deleted, then re-added for later cases.
srv_fail_over() {
    local c=$1 port=$2 spid cpid crc drc dsecs used recs re added
    local -a pre=()
    if rxe-vm-smc links 2>/dev/null | grep -q ' dev=rxe3 '; then
        # a kernel server's group of an earlier case (idle ones live 10 min): deleting rxe3
        # then takes its link down in the kernel, which hung the guest as in (h)
        case_skip "the kernel has a link on rxe3; (i) and (j) must run before any kernel server case"
        return
    fi
    if [[ $c == i ]]; then
        pre=(env LD_PRELOAD="$logs/afsmc.so")
    else
        pre=(env SMCR_TRANSPORT=rdma "$smc_run" -d)
    fi
    SMCR_TRANSPORT=rdma timeout 300 "$smc_run" -d python3 "$logs/esrv.py" "$B" "$port" \
        "$stat_tool" "$srvbytes" "$logs/$c.moved" > "$logs/$c.srv" 2> "$logs/$c.srverr" &
    spid=$!
    wait_listening "$port" || echo "    (smcr server not listening)"
    [[ $c == i ]] && added=$logs/$c.added || added=
    timeout 300 "${pre[@]}" python3 "$logs/srvfailcli.py" "$B" "$port" "$srvbytes" \
        "$logs/$c.srverr" "$logs/$c.moved" "$logs/$c.links" $added > "$logs/$c.cli" 2> "$logs/$c.err" &
    cpid=$!
    delete_mid_stream rxe3 "$cpid" "$logs/$c.cli" ${added:+"readd_when_asked $logs/$c rxe3 add_rxe3"}
    wait "$spid"
    if grep -q "^echo ok" "$logs/$c.cli" && [[ $crc == 0 ]]; then
        pass "($c) rxe3 (the server's) deleted mid-stream: $(grep -m1 '^echo ok' "$logs/$c.cli"); delete done after ${dsecs}s"
    else
        fail "($c) rxe3 deleted mid-stream: client exit $crc, delete exit $drc: $(tail -n 3 "$logs/$c.cli" | head -c 400)"
        show "$logs/$c.err" err 4
        grep -E 'link|ends|moved|abort' "$logs/$c.srverr" | tail -n 6 | sed 's/^/    srv| /'
    fi
    recs=$(grep -am1 '^moved 2:' "$logs/$c.moved" | tr -d "(),'")
    re='^moved 2: smc-r ([0-9]+) rxe3 -> smc-r ([0-9]+) rxe1 switches=[1-9]'
    [[ $recs =~ $re && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] && grep -aq "^served 1: ('smc-r', [0-9]*, 'rxe1')" "$logs/$c.srv" &&
        pass "($c) smcr-stat on the server: the second connection moved from rxe3 to rxe1 (group ${BASH_REMATCH[1]}, the first on rxe1): $recs" ||
        { fail "($c) smcr-stat on the server: '$recs' (want smc-r on one group, rxe3 -> rxe1, switches > 0)"; show "$logs/$c.srv" srv; }
    logged_switch "($c) smcr server" "$logs/$c.srverr"
    # The echo reads nothing while its write waits.  A Linux client does not repeat a
    # consumer-cursor update lost with rxe3 (protocol.md §6.6): the server then holds its
    # unread data aside to give the client room, and says so in smcr-stat and its log alike.
    res=$(grep -am1 -o 'rmb_rescues=[0-9]*' "$logs/$c.moved"); res=${res#rmb_rescues=}
    nlog=$(grep -c 'unread bytes held aside' "$logs/$c.srverr")
    if [[ -n $res && $res == "$nlog" ]]; then
        pass "($c) RMB rescues on the server: $res in smcr-stat linkgroup, $nlog in its log$( ((nlog)) && echo ": $(grep -m1 -o 'unread bytes held aside.*' "$logs/$c.srverr")")"
    else
        fail "($c) RMB rescues on the server: smcr-stat linkgroup says '${res:-nothing}', its log $nlog"
    fi
    if [[ $c == i ]]; then
        # the kernel client's group that carries the connections has one link left
        used=$(used_links client "$logs/$c.links")
        [[ $used == rxe0 ]] &&
            pass "(i) the kernel client's group goes on with one link ($used)" ||
            { fail "(i) the kernel client's group has links on '$used' (want rxe0)"; show "$logs/$c.links" links 8
              dmesg | grep 'smc:' | tail -n 6 | sed 's/^/    dmesg| /'; }
        # rxe3 back: the smcr server adds its second link again, the kernel client takes it
        used=$(used_links client "$logs/$c.links2")
        [[ $used == "rxe0 rxe2" ]] &&
            pass "(i) rxe3 back: the kernel client's group has two links again ($used)" ||
            { fail "(i) rxe3 back: the kernel client's group has links on '$used' (want rxe0 rxe2)"
              show "$logs/$c.links2" links 8; }
        if grep -q "adding a second link on rxe3" "$logs/$c.srverr" &&
            (($(grep -c "second link [0-9]* up on rxe3" "$logs/$c.srverr") == 2)); then
            pass "(i) smcr server log: '$(grep -m1 -o 'adding a second link on rxe3.*' "$logs/$c.srverr")', then its second link up on rxe3 again"
        else
            fail "(i) smcr server log: no second link added again on rxe3"
            grep -E 'second link|attempt|appeared' "$logs/$c.srverr" | tail -n 6 | sed 's/^/    srv| /'
        fi
    else
        # (the server's DELETE LINK, or its own QP error if that came first)
        logged_switch "(j) smcr client" "$logs/$c.err"
    fi
    add_rxe3
}
add_rxe3() { # rxe3 back, with its PNET id and its GID for 10.77.0.4 (the next server's second link)
    local i
    rdma link add rxe3 type rxe netdev veth3 2>/dev/null
    rxe-vm-smc pnet RXEB veth3 rxe3 1 >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do
        grep -qs ':ffff:0a4d:0004' /sys/class/infiniband/rxe3/ports/1/gids/* && break
        sleep 0.1
    done
}
if want_case i || want_case j; then
srvbytes=$((${SRVMIB:-16} << 20))
cat > "$logs/srvfailcli.py" <<'PY'
import os, socket, subprocess, sys, time
host, port, size, srverr, moved, links = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
def wait_for(path, text, secs):
    for _ in range(int(secs * 10)):
        if os.path.exists(path) and text in open(path).read():
            return True
        time.sleep(0.1)
    return False
c1 = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
ok1 = echo_lib.echo(c1, os.urandom(1 << 16))
# the server adds its second link once the first is confirmed: the second connection goes
# there (the link with fewer connections) once the server says it is up
wait_for(srverr, " up on ", 30)
c2 = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
def under_way(got): # the test deletes rxe3 now
    print(f"streaming ({got} bytes echoed)", flush=True)
def before_end(): # the last eighth once the server moved (the kernel may be slow to tell it)
    print(f"server moved: {wait_for(srverr, 'move to the first link', 60)}", flush=True)
got, same, gap, gap_at = echo_lib.stream(c2, os.urandom(size), under_way, before_end)
if not ok1 or not same:
    sys.exit(f"FAIL: first echo {'ok' if ok1 else 'BAD'}; second: {got} of {size} bytes echoed, {'intact' if same else 'not the data'}")
print(f"echo ok: {size >> 20} MiB, sha256 equal; longest pause {gap:.2f}s (after {gap_at >> 10} KiB)", flush=True)
with open(links, "w") as f:
    subprocess.run(["rxe-vm-smc", "links"], env=env, stdout=f, stderr=subprocess.STDOUT, timeout=60)
wait_for(moved, "moved 2:", 60)  # the server's record first, while it is live
if len(sys.argv) > 7: # (i): rxe3 comes back (the test adds it once it reads this line)
    print("re-add the device", flush=True)
    wait_for(sys.argv[7], "added", 180)
    def used(): # the devices of the kernel's client groups that carry connections
        out, devs, use = subprocess.run(["rxe-vm-smc", "links"], env=env, capture_output=True,
                                        text=True, timeout=60).stdout, [], False
        for line in out.splitlines():
            if line.startswith("lgr"):
                use = "role=client" in line and " conns=0 " not in line + " "
            elif line.startswith("  link") and use:
                devs += [w[4:] for w in line.split() if w.startswith("dev=")]
        return sorted(devs), out
    for _ in range(300): # the server adds its second link again
        devs, out = used()
        if len(devs) == 2:
            break
        time.sleep(0.2)
    with open(links + "2", "w") as f:
        f.write(out)
    print(f"again: {devs}", flush=True)
c2.close()
c1.close()
PY
if want_case i; then # a kernel client: our DELETE LINK tells it
    case_begin "(i) failover as a server: the smcr server's rxe3 deleted under a kernel AF_SMC client's stream"
    srv_fail_over i 7916
fi
if want_case j; then # an smcr client: the same, followed by our client role
    case_begin "(j) failover as a server: the smcr server's rxe3 deleted under an smcr client's stream"
    srv_fail_over j 7917
fi
fi

# ------------------------------------------------ (k) kernel <-> kernel, two links ----
if want_case k; then
case_begin "(k) kernel AF_SMC client -> kernel AF_SMC server: two-link groups on both sides"
timeout 300 "$ksmc" server "$B" 7901 "$bytes" > "$logs/k.srv" 2>&1 &
spid=$!
wait_listening 7901 || echo "    (kernel server not listening)"
if timeout 300 "$ksmc" client "$B" 7901 "$bytes" "$A" > "$logs/k.cli" 2>&1; then
    pass "kernel client -> kernel server: $mib MiB echoed ($(grep -m1 -o 'mode=SMC-R ibdev=[a-z0-9]*' "$logs/k.cli"))"
else
    fail "kernel client -> kernel server: the echo failed"; show "$logs/k.cli" cli
fi
wait "$spid"
rxe-vm-smc links > "$logs/k.links" 2>&1
srv=$(links_of server) cli=$(links_of client)
[[ $srv == "rxe1 rxe3" && $cli == "rxe0 rxe2" ]] &&
    pass "the kernel built two-link groups: server on $srv, client on $cli" ||
    { fail "the kernel's link groups: server '$srv', client '$cli' (want rxe1 rxe3 / rxe0 rxe2)"
      show "$logs/k.links" links 12; dmesg | grep 'smc:' | tail -n 6 | sed 's/^/    dmesg| /'; }
fi

# ---------------------------------- (a) smcr client -> kernel server, two links ----
if want_case a; then
case_begin "(a) smcr client -> kernel server: the kernel's ADD LINK taken, ${mib} MiB echoed"
head -c "$bytes" /dev/urandom > "$logs/data"
want=$(sha "$logs/data")
timeout 300 "$ksmc" server "$B" 7902 "$bytes" > "$logs/a.srv" 2>&1 &
spid=$!
wait_listening 7902 || echo "    (kernel server not listening)"
t0=$SECONDS
timeout 300 "$smc_run" -d socat -t 5 -T 60 - "TCP4:$B:7902,bind=$A,$retry" < "$logs/data" \
    > "$logs/a.out" 2> "$logs/a.cli" &
cpid=$!
srv_links=
for ((i = 0; i < 300; i++)); do # while the echo runs: the kernel server's group
    srv_links=$(links_of server)
    [[ $srv_links == "rxe1 rxe3" ]] && break
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.2
done
rxe-vm-smc links > "$logs/a.links" 2>&1
rc=0; wait "$cpid" || rc=$?
wait "$spid"
secs=$((SECONDS - t0))
if [[ $rc == 0 && $(sha "$logs/a.out") == "$want" ]]; then
    pass "smcr client -> kernel server: $mib MiB echoed, sha256 equal (${secs}s)"
else
    fail "smcr client -> kernel server: exit $rc, echo sha256 differs or incomplete"
    show "$logs/a.cli" cli 12
fi
[[ $srv_links == "rxe1 rxe3" ]] &&
    pass "smcr client -> kernel server: the kernel server's group has two links ($srv_links)" ||
    { fail "smcr client -> kernel server: the kernel server's group has links on '$srv_links'"
      show "$logs/a.links" links 8; dmesg | grep 'smc:' | tail -n 4 | sed 's/^/    dmesg| /'; }
grep -q 'second link [0-9]* up' "$logs/a.cli" &&
    pass "smcr client: $(grep -m1 -o 'second link [0-9]* on .*' "$logs/a.cli")" ||
    { fail "smcr client: no second link in its log"; grep -i 'link' "$logs/a.cli" | tail -n 4 | sed 's/^/    cli| /'; }
fi

# ------------------------- (b) a connection on the second link (kernel's choice) ----
if want_case b; then
case_begin "(b) smcr client -> kernel server, 2 open connections: the second on the second link"
cat > "$logs/two.py" <<'PY'
import json, os, socket, subprocess, sys
host, port, smcr_stat, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
data = os.urandom(size)
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
def echo(c):
    return echo_lib.echo(c, data)
def record(c):
    return echo_lib.record(c, smcr_stat)
# the kernel server echoes one connection after the other, but makes each (CLC, its link)
# as it comes: the second, made while the first is open, goes on its other link
c1 = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
ok1 = echo(c1)
c2 = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
r1, r2 = record(c1), record(c2)
print(f"records: {r1} {r2}", flush=True)
c1.close()
ok2 = echo(c2)
c2.close()
print(f"connection 1: echo {'ok' if ok1 else 'BAD'} {r1}", flush=True)
print(f"connection 2: echo {'ok' if ok2 else 'BAD'} {r2}", flush=True)
if not (ok1 and ok2 and r1 and r2 and r1[0] == r2[0] == "smc-r" and r1[1] == r2[1]):
    sys.exit("FAIL: not two intact SMC-R echoes on one link group")
print(f"ok: link group {r1[1]}: connection 1 on {r1[2]}, connection 2 on {r2[2]}", flush=True)
PY
timeout 200 "$ksmc" server "$B" 7903 $((1 << 20)) 2 > "$logs/b.srv" 2>&1 &
spid=$!
wait_listening 7903 || echo "    (kernel server not listening)"
if timeout 200 "$smc_run" -d python3 "$logs/two.py" "$B" 7903 "$stat_tool" $((1 << 20)) \
    > "$logs/b.cli" 2> "$logs/b.err"; then
    pass "smcr client -> kernel server, 2 open connections: $(tail -n1 "$logs/b.cli")"
else
    fail "smcr client -> kernel server, 2 open connections"; show "$logs/b.cli" cli; show "$logs/b.err" err 8
    dmesg | grep 'smc' | tail -n 6 | sed 's/^/    dmesg| /'
fi
wait "$spid"
grep -q "ok: .* connection 1 on rxe0, connection 2 on rxe2" "$logs/b.cli" &&
    pass "smcr-stat: the second connection rides the second link (rxe2)" ||
    fail "smcr-stat: the connections are not on rxe0 and rxe2"
[[ $(grep -c 'mode=SMC-R' "$logs/b.srv") == 2 ]] &&
    pass "the kernel server's smc_diag says SMC-R for both: $(grep -o 'ibdev=rxe[0-9]' "$logs/b.srv" | xargs)" ||
    { fail "the kernel server's smc_diag"; show "$logs/b.srv" srv; }
fi

# -------------------- (d) kernel client (A) -> smcr server (B): the server adds the link ----
if want_case d; then
case_begin "(d) kernel AF_SMC client -> smcr server: the server adds its second link, ${mib} MiB echoed"
"$ksmc" pattern "$bytes" > "$logs/pattern"
kwant=$(sha "$logs/pattern"); rm -f "$logs/pattern"
timeout 300 "$smc_run" -d socat -T 60 "TCP4-LISTEN:7906,bind=$B,reuseaddr" \
    SYSTEM:"tee $logs/d.recv" > "$logs/d.srv" 2>&1 &
spid=$!
wait_listening 7906 || echo "    (smcr server not listening)"
t0=$SECONDS
timeout 300 "$ksmc" client "$B" 7906 "$bytes" "$A" > "$logs/d.cli" 2>&1 &
cpid=$!
cli_links=
for ((i = 0; i < 300; i++)); do # while the echo runs: the kernel client's group
    l=$(links_of client); [[ -z $l ]] || cli_links=$l
    [[ $cli_links == "rxe0 rxe2" ]] && break
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.2
done
rxe-vm-smc links > "$logs/d.links" 2>&1
rc=0; wait "$cpid" || rc=$?
secs=$((SECONDS - t0))
wait "$spid"
if [[ $rc == 0 && $(sha "$logs/d.recv") == "$kwant" ]] && grep -q 'mode=SMC-R' "$logs/d.cli"; then
    pass "kernel client -> smcr server: $mib MiB echoed and checked by the kernel client, the smcr server's bytes have its sha256 (${secs}s; $(grep -m1 -o 'mode=SMC-R ibdev=[a-z0-9]*' "$logs/d.cli"))"
else
    fail "kernel client -> smcr server: kernel client exit $rc, server got $(stat -c %s "$logs/d.recv" 2>/dev/null) bytes"
    show "$logs/d.cli" cli; show "$logs/d.srv" srv 12
fi
[[ $cli_links == "rxe0 rxe2" ]] &&
    pass "kernel client -> smcr server: the kernel client's group has two links ($cli_links)" ||
    { fail "kernel client -> smcr server: the kernel client's group has links on '$cli_links'"
      show "$logs/d.links" links 8; dmesg | grep 'smc:' | tail -n 4 | sed 's/^/    dmesg| /'; }
grep -q 'second link [0-9]* up on rxe3' "$logs/d.srv" &&
    pass "smcr server: $(grep -m1 -o 'ADD LINK [0-9]* sent.*' "$logs/d.srv"); $(grep -m1 -o 'second link [0-9]* up on .*' "$logs/d.srv")" ||
    { fail "smcr server: no second link in its log"; grep -iE 'link' "$logs/d.srv" | tail -n 4 | sed 's/^/    srv| /'; }
fi

# ------------- (e) smcr client (A) -> smcr server (B): two links, connections on both ----
# ------------------------------------------------- (f) the same over IPv6 (fd77::) ----
if want_case e || want_case f || want_case g; then
cat > "$logs/ecli.py" <<'PY'
import json, os, socket, subprocess, sys, time
host, port, smcr_stat, size, srvlog, src = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
data = os.urandom(size)
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
def echo(c):
    return echo_lib.echo(c, data)
def record(c):
    return echo_lib.record(c, smcr_stat)
c1 = socket.create_connection((host, port), source_address=(src, 0))
ok1 = echo(c1)
# the server adds its second link once the first is confirmed: the second connection
# is made once the server says it is up (else it goes on the first link, by design)
for _ in range(300):
    if " up on " in open(srvlog).read():
        break
    time.sleep(0.1)
c2 = socket.create_connection((host, port), source_address=(src, 0))
r1, r2 = record(c1), record(c2)
print(f"records: {r1} {r2}", flush=True)
c1.close()
ok2 = echo(c2)
c2.close()
print(f"connection 1: echo {'ok' if ok1 else 'BAD'} {r1}", flush=True)
print(f"connection 2: echo {'ok' if ok2 else 'BAD'} {r2}", flush=True)
if not (ok1 and ok2 and r1 and r2 and r1[0] == r2[0] == "smc-r" and r1[1] == r2[1]):
    sys.exit("FAIL: not two intact SMC-R echoes on one link group")
print(f"ok: link group {r1[1]}: connection 1 on {r1[2]}, connection 2 on {r2[2]}", flush=True)
PY
smcr_pair() { # NAME CLIENT_ADDR SERVER_ADDR PORT
    local n=$1 src=$2 dst=$3 port=$4 spid srecs lgr1
    SMCR_TRANSPORT=rdma timeout 200 "$smc_run" -d python3 "$logs/esrv.py" "$dst" "$port" "$stat_tool" \
        > "$logs/$n.srv" 2> "$logs/$n.srverr" &
    spid=$!
    wait_listening "$port" || echo "    (smcr server not listening)"
    if SMCR_TRANSPORT=rdma timeout 200 "$smc_run" -d python3 "$logs/ecli.py" "$dst" "$port" "$stat_tool" \
        $((1 << 20)) "$logs/$n.srverr" "$src" > "$logs/$n.cli" 2> "$logs/$n.err"; then
        pass "smcr client -> smcr server ($src -> $dst), 2 open connections: $(tail -n1 "$logs/$n.cli")"
    else
        fail "smcr client -> smcr server ($src -> $dst), 2 open connections"; show "$logs/$n.cli" cli; show "$logs/$n.err" err 8
    fi
    wait "$spid"
    grep -q "ok: .* connection 1 on rxe0, connection 2 on rxe2" "$logs/$n.cli" &&
        pass "($n) smcr client: smcr-stat shows connection 1 on rxe0 and connection 2 on rxe2 (the second link)" ||
        fail "($n) smcr client: the connections are not on rxe0 and rxe2"
    srecs=$(grep -o "served [12]: .*" "$logs/$n.srv" | sort | cut -d' ' -f3- | tr -d "(),'" | xargs)
    lgr1=$(awk '{print $2}' <<< "$srecs")
    [[ $srecs =~ ^smc-r\ ([0-9]+)\ rxe1\ smc-r\ ([0-9]+)\ rxe3$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] &&
        pass "($n) smcr server: smcr-stat shows both on link group $lgr1, connection 1 on rxe1, connection 2 on rxe3" ||
        { fail "($n) smcr server: smcr-stat records '$srecs' (want smc-r on one group, rxe1 then rxe3)"; show "$logs/$n.srv" srv; }
    grep -q 'second link [0-9]* up on rxe3' "$logs/$n.srverr" && grep -q 'second link [0-9]* up' "$logs/$n.err" &&
        pass "($n) both sides brought the second link up: server '$(grep -m1 -o 'second link [0-9]* up on [a-z0-9]*' "$logs/$n.srverr")', client '$(grep -m1 -o 'second link [0-9]* on [a-z0-9]*' "$logs/$n.err")'" ||
        { fail "($n) the second link is not up on both sides"; grep -iE ' link' "$logs/$n.srverr" | tail -n 3 | sed 's/^/    srv| /'
          grep -iE ' link' "$logs/$n.err" | tail -n 3 | sed 's/^/    cli| /'; }
}
if want_case e; then
    case_begin "(e) smcr client -> smcr server: both bring the second link up, a connection on each link"
    smcr_pair e "$A" "$B" 7907
fi
if want_case f; then
    case_begin "(f) (e) over IPv6, fd77::1 -> fd77::2"
    smcr_pair f fd77::1 fd77::2 7908
fi
fi

# ---- (g) kernel client (python over AF_SMC, A), 2 open connections -> smcr server (B) ----
if want_case g; then
case_begin "(g) kernel AF_SMC client, 2 open connections -> smcr server: one on each link"
cat > "$logs/gcli.py" <<'PY'
import os, socket, subprocess, sys, time
host, port, size, srvlog = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
data = os.urandom(size)
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
def echo(c):
    return echo_lib.echo(c, data)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
c1 = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
ok1 = echo(c1)
for _ in range(300):  # the server's second link up: the next connection may go there
    if " up on " in open(srvlog).read():
        break
    time.sleep(0.1)
c2 = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
ok2 = echo(c2)
links = subprocess.run(["rxe-vm-smc", "links"], env=env, capture_output=True, text=True,
                       timeout=30).stdout
print(links, flush=True)
c1.close(); c2.close()
print(f"echo 1 {'ok' if ok1 else 'BAD'}, echo 2 {'ok' if ok2 else 'BAD'}", flush=True)
sys.exit(0 if ok1 and ok2 else 1)
PY
SMCR_TRANSPORT=rdma timeout 200 "$smc_run" -d python3 "$logs/esrv.py" "$B" 7909 "$stat_tool" \
    > "$logs/g.srv" 2> "$logs/g.srverr" &
spid=$!
wait_listening 7909 || echo "    (smcr server not listening)"
if LD_PRELOAD=$logs/afsmc.so timeout 200 python3 "$logs/gcli.py" "$B" 7909 $((1 << 20)) \
    "$logs/g.srverr" > "$logs/g.cli" 2> "$logs/g.err"; then
    pass "kernel client (AF_SMC) -> smcr server, 2 open connections: $(tail -n1 "$logs/g.cli")"
else
    fail "kernel client (AF_SMC) -> smcr server, 2 open connections"; show "$logs/g.cli" cli; show "$logs/g.err" err
fi
wait "$spid"
srecs=$(grep -o "served [12]: .*" "$logs/g.srv" | sort | cut -d' ' -f3- | tr -d "(),'" | xargs)
[[ $srecs =~ ^smc-r\ ([0-9]+)\ rxe1\ smc-r\ ([0-9]+)\ rxe3$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] &&
    pass "(g) smcr server: smcr-stat shows connection 1 on rxe1, connection 2 on rxe3 (group ${BASH_REMATCH[1]})" ||
    { fail "(g) smcr server: smcr-stat records '$srecs' (want smc-r on one group, rxe1 then rxe3)"; show "$logs/g.srv" srv; }
klinks=$(awk '/^lgr/ { c = index($0, "role=client") && !index($0, " conns=0 ") } /^  link/ && c { d = ""; n = ""
    for (i = 1; i <= NF; i++) { if ($i ~ /^dev=/) d = substr($i, 5); if ($i ~ /^conns=/) n = substr($i, 7) }
    printf "%s:%s ", d, n }' "$logs/g.cli" | xargs)
[[ $klinks == "rxe0:1 rxe2:1" || $klinks == "rxe2:1 rxe0:1" ]] &&
    pass "(g) the kernel client's group: one connection on each link ($klinks)" ||
    { fail "(g) the kernel client's links (device:connections): '$klinks' (want rxe0:1 rxe2:1)"; show "$logs/g.cli" cli 8; }
fi

# ----------------- (c)/(h) failover: a second link's device deleted mid-stream ----
# fail_over CASE DEVICE PORT1 PORT2: two connections of one smcr process to two kernel echo
# servers, the first on rxe0 (first contact), the second on the group's second link (rxe2,
# the kernel's choice); while the second streams a MIB MiB echo, DEVICE (rxe2: ours, rxe3:
# the kernel server's) is deleted, then re-added for later cases
fail_over() {
    local c=$1 dev=$2 p1=$3 p2=$4 s1 s2 cpid crc drc dsecs used
    timeout 300 "$ksmc" server "$B" "$p1" $((1 << 20)) > "$logs/$c.srv1" 2>&1 &
    s1=$!
    timeout 300 "$ksmc" server "$B" "$p2" "$bytes" > "$logs/$c.srv2" 2>&1 &
    s2=$!
    wait_listening "$p1"; wait_listening "$p2"
    timeout 300 "$smc_run" -d python3 "$logs/failover.py" "$B" "$p1" "$p2" "$stat_tool" "$bytes" \
        "$logs/$c.links" > "$logs/$c.cli" 2> "$logs/$c.err" &
    cpid=$!
    delete_mid_stream "$dev" "$cpid" "$logs/$c.cli"
    # the servers end with their connections (timeout forwards the TERM if not)
    kill "$s1" "$s2" 2>/dev/null; wait "$s1" "$s2" 2>/dev/null
    if grep -q "^echo ok" "$logs/$c.cli" && [[ $crc == 0 ]]; then
        pass "$dev deleted mid-stream: $(grep -m1 '^echo ok' "$logs/$c.cli"); delete done after ${dsecs}s"
    else
        fail "$dev deleted mid-stream: client exit $crc, delete exit $drc: $(tail -n 3 "$logs/$c.cli" | head -c 400)"
        grep -E 'link|ends|moved|abort' "$logs/$c.err" | tail -n 6 | sed 's/^/    err| /'
    fi
    grep -q "^devices before: rxe0 rxe2" "$logs/$c.cli" && grep -q "^devices after: rxe0 rxe0 switches=[1-9]" "$logs/$c.cli" &&
        pass "smcr-stat: the connection moved from rxe2 to rxe0: $(grep -m1 '^devices after' "$logs/$c.cli")" ||
        fail "smcr-stat: $(grep '^devices' "$logs/$c.cli" | xargs)"
    logged_switch smcr "$logs/$c.err"
    # the kernel server's group that carries our connections has one link left
    used=$(used_links server "$logs/$c.links")
    [[ $used == rxe1 ]] &&
        pass "the kernel server's group goes on with one link ($used)" ||
        { fail "the kernel server's group has links on '$used' (want rxe1)"; show "$logs/$c.links" links 8
          dmesg | grep 'smc:' | tail -n 6 | sed 's/^/    dmesg| /'; }
    # back for the next case: the device and its PNET id
    rdma link add "$dev" type rxe netdev "veth${dev#rxe}" 2>/dev/null
    if [[ $dev == rxe2 ]]; then rxe-vm-smc pnet RXEA veth2 rxe2 1; else rxe-vm-smc pnet RXEB veth3 rxe3 1; fi >/dev/null 2>&1
    sleep 8 # our now single-link group ends (idle 5 s + 2 s), so the next case gets a new one
}
if want_case c || want_case h; then
cat > "$logs/failover.py" <<'PY'
import json, os, socket, subprocess, sys, time
host, p1, p2, smcr_stat, size, links = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
def stat():
    out = subprocess.run([smcr_stat, "json", "-p", str(os.getpid())], env=env,
                         capture_output=True, text=True, timeout=60).stdout
    return json.loads(out)
def devices(st, *cs):
    d = {r["local_port"]: r["device"] for r in st["connections"] if r.get("state") == "live"}
    return " ".join(str(d.get(c.getsockname()[1])) for c in cs)
# the kernel echo servers give up after 20 s without data: everything slow comes first
data = os.urandom(size)
def connect(port):
    # a loaded guest may load libibverbs past the kernel's CLC wait (a reset): try again
    for i in range(3):
        try:
            return socket.create_connection((host, port), source_address=("10.77.0.1", 0))
        except ConnectionResetError as e:
            print(f"connect {port}: {e!r}, again", flush=True)
            time.sleep(1)
    return socket.create_connection((host, port), source_address=("10.77.0.1", 0))
c1 = connect(p1)
c2 = connect(p2)
def under_way(got):
    print(f"devices before: {devices(stat(), c1, c2)}", flush=True)
    print(f"streaming ({got} bytes echoed)", flush=True)
got, same, gap, gap_at = echo_lib.stream(c2, data, under_way)
if not same:
    sys.exit(f"FAIL: {got} of {size} bytes echoed, not the data")
st = stat()
out = subprocess.run([smcr_stat, "stats", "--json", "-p", str(os.getpid())], env=env,
                     capture_output=True, text=True, timeout=60).stdout
tot = json.loads(out)["total"]
print(f"echo ok: {size >> 20} MiB, sha256 equal; longest pause {gap:.2f}s (after {gap_at >> 10} KiB)", flush=True)
print(f"devices after: {devices(st, c1, c2)} switches={tot.get('link_switches')} resent={tot.get('bytes_resent')}", flush=True)
with open(links, "w") as f:
    subprocess.run(["rxe-vm-smc", "links"], env=env, stdout=f, stderr=subprocess.STDOUT, timeout=60)
c2.close()
c1.close()
PY
fi
if want_case c; then # our device: local detection, we tell the server
    case_begin "(c) failover as a client: our rxe2 deleted mid-stream, the connection moves to rxe0"
    fail_over c rxe2 7904 7905
fi
if want_case h; then # the kernel's device: its DELETE LINK tells us
    case_begin "(h) failover as a client: the kernel server's rxe3 deleted mid-stream"
    fail_over h rxe3 7914 7915
fi

case_end
[[ -n ${LINK2_LOGS:-} ]] || rm -rf "$logs"
tap_done
