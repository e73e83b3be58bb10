#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memcached (worker threads on libevent, epoll), both ends under smc_run:
#   - a client stores 64 values of 1 B to 900 KiB and reads them back one by
#     one and in one multi-get, byte for byte;
#   - memcslap (libmemcached) runs 8 concurrent connections of sets;
# the client logs and memcached's own stats show SMC on every connection and
# no fallback. A client under smc_run against a plain memcached stays TCP
# (PEERNOSMC) with the same answers.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need memcached memcslap

cat >"$work/kv.py" <<'PY'
# kv.py PORT SEED: set 64 values, get each, then all in one multi-get; prints
# "ok N BYTES SHA256" over what came back (the same for the same SEED).
import hashlib, random, socket, sys

port, seed = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
sizes = [1, 2, 100, 4095, 4096, 65536, 65537, 900 * 1024] + [rng.randrange(1, 300000) for _ in range(56)]
values = {f"key{i}": rng.randbytes(n) for i, n in enumerate(sizes)}
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rwb")

def get_reply(keys):
    got = {}
    while True:
        line = f.readline()
        if line == b"END\r\n":
            return got
        parts = line.split()
        if parts[0] != b"VALUE":
            sys.exit(f"unexpected reply {line[:80]!r}")
        data = f.read(int(parts[3]) + 2)
        got[parts[1].decode()] = data[:-2]

for k, v in values.items():
    f.write(b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(v), v))
    f.flush()
    if f.readline() != b"STORED\r\n":
        sys.exit(f"set {k} failed")
h, total = hashlib.sha256(), 0
for k, v in values.items():
    f.write(b"get %s\r\n" % k.encode())
    f.flush()
    got = get_reply([k])
    if got.get(k) != v:
        sys.exit(f"get {k}: other bytes")
    h.update(got[k]); total += len(got[k])
f.write(b"get " + b" ".join(k.encode() for k in values) + b"\r\n")
f.flush()
got = get_reply(list(values))
if got != values:
    sys.exit("multi-get: other bytes")
print("ok", len(values), total, h.hexdigest())
PY

# memcached as root must be told a user to run as; root itself keeps its stats
# in this test's directory (a user it switched to would publish in its own).
as_user=()
[[ $(id -u) -ne 0 ]] || as_user=(-u root)
port=$(free_port 4)
# A plain memcached first: the answers every run must give.
start_server plain memcached memcached "${as_user[@]}" -l 127.0.0.1 -p "$port" -t 2 -m 256 -U 0
wait_listen "$server_pid" "$port"
run_client plain kv 60 "$PYTHON" "$work/kv.py" "$port" 7
[[ $exit_code -eq 0 ]] || fail "kv (plain) exited $exit_code: $(cat "$work/kv.plain.err")"
want=$(cat "$work/kv.plain.out")
run_client smcr kv-one-end 60 "$PYTHON" "$work/kv.py" "$port" 7
[[ $exit_code -eq 0 && $(cat "$work/kv-one-end.smcr.out") == "$want" ]] ||
    fail "kv with only the client under smc_run: exit $exit_code, $(cat "$work/kv-one-end.smcr.out" "$work/kv-one-end.smcr.err" | tail -n 3)"
assert_fallback_log kv-one-end PEERNOSMC 1
stop_server "$server_pid"

start_server smcr memcached memcached "${as_user[@]}" -l 127.0.0.1 -p "$port" -t 2 -m 256 -U 0
pid=$server_pid
wait_listen "$pid" "$port"
run_client smcr kv 60 "$PYTHON" "$work/kv.py" "$port" 7
[[ $exit_code -eq 0 ]] || fail "kv exited $exit_code: $(tail -n 3 "$work/kv.smcr.err")"
[[ $(cat "$work/kv.smcr.out") == "$want" ]] || fail "kv: $(cat "$work/kv.smcr.out"), over TCP: $want"
log "kv: $want"
assert_smc_log kv 1
run_client smcr memcslap 120 memcslap --servers="127.0.0.1:$port" --concurrency=8 --execute-number=2000
[[ $exit_code -eq 0 ]] || fail "memcslap exited $exit_code: $(tail -n 3 "$work/memcslap.smcr.err")"
log "memcslap: $(grep -m1 'Time total' "$work/memcslap.smcr.out" | tr -s ' ')"
assert_smc_log memcslap 8
assert_smc_stats memcached 9 "$pid"
