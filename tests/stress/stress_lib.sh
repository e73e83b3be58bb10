# SPDX-License-Identifier: MIT
# Shared by the stress suite's scripts: one echo_many.py server and client
# under smc_run (or plain), and what the two ends' logs say of each
# connection.  The caller sets script (echo_many.py), nbytes and deadline.
server_pre=()
client_pre=()

# run_echo MODE NAME CONNS [SERVER_LIMIT]: one server and one client; the
# client's report in $work/NAME-client.MODE.out; sets server_pid (still
# running) and exit_code.  SERVER_LIMIT is the server's RLIMIT_NOFILE: "exec:N"
# set before it starts (the library starts under it), "self:N" set by the
# program once running (a program that lowers its own limit).  The arrays
# server_pre and client_pre, if set, prefix the server's and the client's
# command (under smc_run: e.g. env VAR=VALUE).
run_echo() {
    local mode=$1 name=$2 n=$3 limit=${4:-} port
    local -a pre=("${server_pre[@]}")
    case $limit in
    exec:*) pre+=(prlimit "--nofile=${limit#exec:}:${limit#exec:}" --) ;;
    self:*) pre+=(env "SMCR_STRESS_NOFILE=${limit#self:}") ;;
    esac
    port=$(free_port 4)
    start_server "$mode" "$name-server" "${pre[@]}" "$PYTHON" "$script" server 127.0.0.1 "$port"
    wait_listen "$server_pid" "$port"
    run_client "$mode" "$name-client" $((deadline + 60)) "${client_pre[@]}" \
        "$PYTHON" "$script" client 127.0.0.1 "$port" "$n" "$nbytes" "$deadline" "$server_pid"
    sed 's/^/    /' "$work/$name-client.$mode.out"
}

# assert_echoed NAME MODE N: the client echoed all N connections, no error line.
assert_echoed() {
    local out="$work/$1-client.$2.out"
    [[ $exit_code -eq 0 ]] || fail "$1 ($2): client exited $exit_code: $(grep -m3 '^error:' "$out" | tr '\n' ' ')"
    grep -qx "echoed $3 of $3" "$out" || fail "$1 ($2): not every connection echoed"
    ! grep -q '^error:' "$out" "$work/$1-server.$2.out" || fail "$1 ($2): errors reported"
}

# modes_agree NAME: every connection has the same mode at both ends (by port,
# from the two SMC_DEBUG logs); prints "SMC FALLBACKS REASON:COUNT,...".
modes_agree() {
    "$PYTHON" - "$work/$1-client.smcr.err" "$work/$1-server.smcr.err" <<'PY'
import collections, re, sys
line = re.compile(r": (smc-shm|tcp-fallback) \((client|server)\): (?:reason 0x[0-9a-f]+ (\w+))?"
                  r".*; local [^ ]+:(\d+), peer [^ ]+:(\d+)$")
def modes(path, port_group):
    out = {}
    for l in open(path, errors="replace"):
        m = line.search(l.rstrip())
        if m:
            out[int(m.group(port_group))] = (m.group(1), m.group(3))
    return out
client, server = modes(sys.argv[1], 4), modes(sys.argv[2], 5)
# a client whose server declined after its Confirm went on over TCP from the start
late = re.compile(r"the server declined after our Confirm \((\w+)\).*; local [^ ]+:(\d+), peer [^ ]+:(\d+)$")
for l in open(sys.argv[1], errors="replace"):
    m = late.search(l.rstrip())
    if m and int(m.group(2)) in client:
        client[int(m.group(2))] = ("tcp-fallback", m.group(1))
bad = [p for p in client if p not in server or client[p][0] != server[p][0]]
bad += [p for p in server if p not in client]
for p in bad[:5]:
    print(f"port {p}: client {client.get(p)}, server {server.get(p)}", file=sys.stderr)
if bad:
    sys.exit(f"{len(bad)} connection(s) whose ends disagree on the mode (or one end did not log)")
reasons = collections.Counter(f"{end}:{r}" for end, d in (("client", client), ("server", server))
                              for mode, r in d.values() if mode == "tcp-fallback")
smc = sum(1 for m, _ in client.values() if m == "smc-shm")
print(smc, sum(reasons.values()), ",".join(f"{k}={v}" for k, v in sorted(reasons.items())) or "-")
PY
}

