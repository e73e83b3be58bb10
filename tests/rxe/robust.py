# SPDX-License-Identifier: MIT
# Unmodified python programs for tests/rxe/robust.sh (run under scripts/smc_run inside
# scripts/rxe-vm): echo and sink servers, and clients that alternate IPv4 and IPv6, fork
# and exec across a live SMC-R connection, or stream until the link dies.  Every line a
# role prints that the shell checks starts with a keyword; times are time.time() (the
# guest's CLOCK_REALTIME, as `date +%s.%N`).
#   robust.py echo-server ADDR PORT          threaded echo; "end PORT HOW T" per connection
#   robust.py fork-server ADDR PORT          accept, fork, the child serves (and classifies)
#   robust.py sink-server ADDR PORT ECHO_PORT  counts and checks a pattern stream per
#                                            connection; echoes on ECHO_PORT
#   robust.py families ROUNDS A4 B4 A6 B6 PORT SMCR_STAT
#   robust.py fork-client ADDR SRC PORT SMCR_STAT
#   robust.py exec-child FD                  (run by fork-client's exec: echoes over TCP)
#   robust.py stream ADDR SRC PORT CONNS SECONDS SMCR_STAT
#   robust.py echo-once ADDR SRC PORT SMCR_STAT   one echo, prints its smcr-stat record
import errno, json, os, socket, subprocess, sys, threading, time

PATTERN = bytes(i % 251 for i in range(251 * 1024))  # byte k of a stream is k % 251


def now():
    return f"{time.time():.3f}"


def how(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else type(e).__name__


_say_lock = threading.Lock()


def say(*a):
    # one write per line: print() from several threads interleaves its pieces
    with _say_lock:
        sys.stdout.write(" ".join(str(x) for x in a) + "\n")
        sys.stdout.flush()


def fail(msg):
    say("FAIL:", msg)
    sys.exit(1)


def family_of(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def listen(addr, port):
    l = socket.socket(family_of(addr))
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((addr, port))
    l.listen(64)
    say("listening")
    return l


def connect(addr, src, port, timeout=60):
    c = socket.socket(family_of(addr))
    c.settimeout(timeout)
    c.bind((src, 0))
    c.connect((addr, port))
    return c


def stat_record(smcr_stat, sock, want_live=True):
    """This process's smcr-stat --json record for sock's local port (None if none)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([smcr_stat, "json", "-a", "-p", str(os.getpid())], env=env,
                         capture_output=True, text=True, timeout=60).stdout
    port = sock.getsockname()[1]
    mine = [r for r in json.loads(out)["connections"] if r.get("local_port") == port
            and (r.get("state") == "live" or not want_live)]
    return mine[-1] if mine else None


def echo_check(c, n, chunk=65536):
    """Send n bytes of the pattern from one thread, read the echo back in this one."""
    data = (PATTERN * (n // len(PATTERN) + 1))[:n]
    err = []

    def writer():
        try:
            c.sendall(data)
        except OSError as e:
            err.append(e)

    t = threading.Thread(target=writer)
    t.start()
    got = bytearray()
    while len(got) < n:
        b = c.recv(chunk)
        if not b:
            break
        got += b
    t.join()
    if err:
        raise err[0]
    return bytes(got) == data


# ---- servers ------------------------------------------------------------------------

def serve_echo(c, peer):
    h = "EOF"
    try:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            c.sendall(b)
    except OSError as e:
        h = how(e)
    say("end", peer[1], h, now())
    c.close()


def echo_server(addr, port):
    l = listen(addr, int(port))
    while True:
        c, peer = l.accept()
        threading.Thread(target=serve_echo, args=(c, peer), daemon=True).start()


def fork_server(addr, port):
    l = listen(addr, int(port))
    while True:
        c, peer = l.accept()
        pid = os.fork()
        if pid == 0:
            l.close()
            serve_echo(c, peer)  # the first I/O happens here: the child classifies
            os._exit(0)
        c.close()  # the parent's copy of a connection it never used
        say("forked", pid, "for", peer[1])
        # reap finished children, without blocking
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def sink(c, peer):
    n, h = 0, "EOF"
    try:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            off = n % 251
            if b != PATTERN[off:off + len(b)]:
                h = "CORRUPT"
                break
            n += len(b)
    except OSError as e:
        h = how(e)
    say("recv", peer[1], n, h, now())
    c.close()


def sink_server(addr, port, echo_port):
    e = listen(addr, int(echo_port))
    threading.Thread(target=lambda: [threading.Thread(target=serve_echo, args=e.accept(),
                                                      daemon=True).start()
                                     for _ in iter(int, 1)], daemon=True).start()
    l = listen(addr, int(port))
    while True:
        c, peer = l.accept()
        threading.Thread(target=sink, args=(c, peer), daemon=True).start()


# ---- clients -------------------------------------------------------------------------

def families(rounds, a4, b4, a6, b6, port, smcr_stat):
    """IPv4 then IPv6 SMC-R connections in turn, smcr-stat reading the live record while
    the echo runs; a stall shows as a socket timeout."""
    for r in range(int(rounds)):
        for srv, src, fam in ((b4, a4, "ipv4"), (b6, a6, "ipv6")):
            t0 = time.monotonic()
            c = connect(srv, src, int(port))
            rec, ok = [], []
            t = threading.Thread(target=lambda: ok.append(echo_check(c, 2 << 20)))
            t.start()
            while t.is_alive() and not rec:  # read the record while data flows
                x = stat_record(smcr_stat, c)
                if x:
                    rec.append(x)
            t.join()
            if not ok or not ok[0]:
                fail(f"round {r} {fam}: echo of 2 MiB differs")
            x = rec[0] if rec else stat_record(smcr_stat, c)
            if not x or x["mode"] != "smc-r" or x["family"] != fam or x["device"] != "rxe0":
                fail(f"round {r} {fam}: not SMC-R over rxe0 per smcr-stat: {x}")
            c.close()
            say(f"ok: round {r} {fam}: 2 MiB echoed over SMC-R (smcr-stat read live: "
                f"{'yes' if rec else 'no'}, link group {x['link_group']}), "
                f"{time.monotonic() - t0:.1f} s")


def fork_client(addr, src, port, smcr_stat):
    c = connect(addr, src, int(port))
    if not echo_check(c, 65536):
        fail("first echo differs")
    x = stat_record(smcr_stat, c)
    if not x or x["mode"] != "smc-r":
        fail(f"not SMC-R: {x}")
    say(f"ok: connection on port {c.getsockname()[1]} is SMC-R (link group {x['link_group']})")

    # (a) a child that never touches the connection and exits normally (atexit runs)
    pid = os.fork()
    if pid == 0:
        raise SystemExit(0)
    os.waitpid(pid, 0)
    if not echo_check(c, 1 << 20):
        fail("(a) after a child exited, the parent's echo differs")
    say("ok: (a) a child exited without touching it; the parent's connection moved 1 MiB intact")

    # (b) a child that uses an inherited connection (a second one: the first stays
    # SMC-R for (c)): the parent goes on over TCP, and both share the TCP socket
    c2 = connect(addr, src, int(port))
    if not echo_check(c2, 65536):
        fail("(b) the second connection's first echo differs")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        res = []
        try:
            c2.sendall(b"x")
            res.append("worked")
            res.append("worked" if c2.recv(1) == b"x" else "wrong byte")
        except OSError as e:
            res.append(how(e))
        c2.close()
        os.write(w, " ".join(res).encode())
        raise SystemExit(0)
    os.close(w)
    res = os.read(r, 100).decode()
    os.waitpid(pid, 0)
    if res != "worked worked":
        fail(f"(b) the child's send/recv on the inherited connection: {res}")
    if not echo_check(c2, 1 << 20):
        fail("(b) after the child's use, the parent's echo differs")
    x = stat_record(smcr_stat, c2)
    if not x or x["mode"] != "smc-r" or x.get("conn_state") != "on-tcp":
        fail(f"(b) the parent's record does not say SMC-R gone on over TCP: {x}")
    c2.close()
    x = stat_record(smcr_stat, c)
    if not x or x["mode"] != "smc-r" or x.get("conn_state") == "on-tcp":
        fail(f"(b) the first connection's record is no longer live SMC-R: {x}")
    say("ok: (b) the child's send and recv worked over TCP, the parent's connection "
        "went on over TCP and moved 1 MiB intact; the other stayed SMC-R")

    # (c) exec with the live connection: both smcr ends go on over TCP, so the new
    # image's fd carries the stream on from where it was
    os.set_inheritable(c.fileno(), True)
    say("exec", c.getsockname()[1], now())
    os.execv(sys.executable, [sys.executable, __file__, "exec-child", str(c.fileno())])


def exec_child(fd):
    s = socket.socket(fileno=int(fd))
    s.settimeout(30)
    t0 = time.monotonic()
    try:
        res = "echo intact" if echo_check(s, 1 << 20) else "echo differs"
    except OSError as e:
        res = how(e)
    ms = (time.monotonic() - t0) * 1000
    say(f"after exec: 1 MiB echo -> {res} after {ms:.0f} ms")
    if res != "echo intact":
        fail(f"(c) after exec the inherited fd's echo: {res}")
    s.close()
    say("ok: (c) after exec the inherited fd echoes 1 MiB over TCP, intact")


def stream(addr, src, port, conns, seconds, smcr_stat):
    """CONNS connections stream the pattern until an error; per connection one line
    'sent PORT BYTES HOW T PEER_RMB_SIZE'."""
    socks = [connect(addr, src, int(port), timeout=120) for _ in range(int(conns))]
    sizes = {}
    for c in socks:
        c.sendall(PATTERN[:1000])
        x = stat_record(smcr_stat, c)
        if not x or x["mode"] != "smc-r":
            fail(f"not SMC-R: {x}")
        sizes[c] = x["peer_rmb_size"]
    done = []

    def run(c):
        n, h = 1000, "done"
        end = time.monotonic() + float(seconds)
        try:
            while time.monotonic() < end:
                off = n % 251
                n += c.send(PATTERN[off:off + 65536])
        except OSError as e:
            h = how(e)
        say("sent", c.getsockname()[1], n, h, now(), sizes[c])
        done.append(c)

    say("streaming", len(socks))
    ts = [threading.Thread(target=run, args=(c,)) for c in socks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def echo_once(addr, src, port, smcr_stat):
    c = connect(addr, src, int(port))
    if not echo_check(c, 100000):
        fail("echo differs")
    x = stat_record(smcr_stat, c)
    c.close()
    say("record", json.dumps(x))


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    {"echo-server": echo_server, "fork-server": fork_server, "sink-server": sink_server,
     "families": families, "fork-client": fork_client, "exec-child": exec_child,
     "stream": stream, "echo-once": echo_once}[role](*args)
