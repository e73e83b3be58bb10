#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Link groups seen from an unmodified program, inside scripts/rxe-vm (-n pair): a python
# echo server on 10.77.0.2 and a python client on 10.77.0.1, both under scripts/smc_run
# with SMCR_TRANSPORT=rdma, the client making CONNS short connections one after the
# other (each echoes 1000 bytes, checked). While its first, middle and last connection
# are open the client asks smcr-stat (json, its own pid) for that connection: SMC-R, and
# the same link group and device every time; then the kernel (`rdma resource show
# qp`) must list exactly one RC QP on rxe0. Prints "ok: ..." lines; exit 0 on success.
#   tests/rxe/lgr_app.sh [CONNS]
set -u
conns=${1:-100}
top=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'kill $spid 2>/dev/null; rm -rf "$work"' EXIT
port=7490

cp "$top/tests/rxe/echo_lib.py" "$work/" # server.py imports it
cat > "$work/server.py" <<'PY'
import os, socket, sys, threading
sys.path.insert(0, os.path.dirname(sys.argv[0])); import echo_lib
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=echo_lib.serve, args=(c,), daemon=True).start()
PY
cat > "$work/client.py" <<'PY'
import json, os, socket, subprocess, sys, time
host, port, conns, smcr_stat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
seen, times = [], []
for i in range(conns):
    t0 = time.monotonic()
    c = socket.create_connection((host, port), source_address=("10.77.0.1", 0))
    data = os.urandom(1000)
    c.sendall(data)
    got = b""
    while len(got) < len(data):
        b = c.recv(4096)
        if not b:
            break
        got += b
    times.append(time.monotonic() - t0)
    if got != data:
        sys.exit(f"FAIL: connection {i}: echo differs ({len(got)} bytes)")
    if i in (0, conns // 2, conns - 1):
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        out = subprocess.run([smcr_stat, "json", "-p", str(os.getpid())], env=env,
                             capture_output=True, text=True, timeout=30).stdout
        port_ = c.getsockname()[1]
        mine = [r for r in json.loads(out)["connections"]
                if r.get("local_port") == port_ and r.get("state") == "live"]
        if len(mine) != 1:
            sys.exit(f"FAIL: connection {i}: smcr-stat shows {len(mine)} live records "
                     f"for port {port_}: {out[:400]}")
        r = mine[0]
        seen.append((r["mode"], r["link_group"], r["device"]))
        print(f"connection {i}: {r['mode']} link group {r['link_group']} on {r['device']}",
              flush=True)
    c.close()
if len(set(seen)) != 1 or seen[0][0] != "smc-r" or seen[0][1] is None:
    sys.exit(f"FAIL: not one SMC-R link group: {seen}")
print(f"ok: {conns} connections, the first, middle and last SMC-R on link group "
      f"{seen[0][1]} ({seen[0][2]}) per smcr-stat; first {times[0]*1e3:.0f} ms, "
      f"then {sum(times[1:])/max(1, len(times)-1)*1e3:.1f} ms per connection", flush=True)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
out = subprocess.run(["rdma", "resource", "show", "qp"], env=env, capture_output=True,
                     text=True, timeout=30).stdout
rc = [l for l in out.splitlines() if l.startswith("link rxe0/") and " type RC " in l
      and " comm [" not in l]
if len(rc) != 1:
    sys.exit(f"FAIL: {len(rc)} RC QPs on rxe0, want 1:\n" + "\n".join(rc))
print("ok: the kernel lists exactly one RC QP on rxe0 (ours)", flush=True)
PY

# the stats files live in the runtime directory, which the VM's root does not have;
# CONNS short connections to one destination are what the learned policy keeps on
# TCP after the first 8 (tests/apps/smc_learn.sh): here each one must be SMC-R
export XDG_RUNTIME_DIR=$work/run SMCR_TRANSPORT=rdma SMCR_PEERS=10.77.0.2 SMCR_LEARN=0
mkdir -m 700 "$XDG_RUNTIME_DIR"
stat_tool=${SMCR_STAT:-$top/build/src/tools/smcr-stat}
"$top/scripts/smc_run" python3 "$work/server.py" 10.77.0.2 $port > "$work/server.log" 2>&1 &
spid=$!
for ((i = 0; i < 300; i++)); do # python under TCG: a few seconds
    grep -q listening "$work/server.log" 2>/dev/null && break
    sleep 0.1
done
timeout 150 "$top/scripts/smc_run" python3 "$work/client.py" 10.77.0.2 $port "$conns" \
    "$stat_tool"
rc=$?
[[ $rc == 0 ]] || sed 's/^/    server| /' "$work/server.log" | tail -5
exit $rc
