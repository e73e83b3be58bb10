#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""smcr-stat against files written by the engine's own stats writer.

Usage: test_smcr_stat.py SMCR_STAT STATS_WRITER

stats-writer (tests/tools/stats_writer.c) publishes a known fixture through
src/smcr/stats.c; every case runs the built smcr-stat and checks its output
with the json module.  Each case has its own private XDG_RUNTIME_DIR, every
child process a timeout.  Exit 0 when all cases pass, 1 otherwise.
"""
import json
import os
import re
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

TIMEOUT = 20  # seconds for any one child step

TOOL, WRITER = sys.argv[1], sys.argv[2]


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def check_eq(got, want, what):
    if got != want:
        raise Failure(f"{what}: got {got!r}, want {want!r}")


class Case:
    """A private runtime directory and the processes started in it."""

    def __init__(self):
        self.rundir = tempfile.mkdtemp(prefix="smcr-stat-test.")
        os.chmod(self.rundir, 0o700)
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.rundir)
        self.env.pop("LD_PRELOAD", None)
        self.procs = []

    @property
    def statsdir(self):
        return os.path.join(self.rundir, "smcr")

    def start(self, *args, prefix=()):
        p = subprocess.Popen([*prefix, WRITER, *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=self.env, text=True)
        self.procs.append(p)
        line = read_line(p)
        return p, json.loads(line)

    def tool(self, *args, expect_rc=0):
        r = subprocess.run([TOOL, *args], env=self.env, capture_output=True, text=True,
                           timeout=TIMEOUT)
        check_eq(r.returncode, expect_rc, f"exit status of smcr-stat {' '.join(args)} "
                 f"(stderr: {r.stderr.strip()!r})")
        return r

    def tool_json(self, *args):
        r = self.tool(*args)
        try:
            return json.loads(r.stdout), r.stderr
        except json.JSONDecodeError as e:
            raise Failure(f"smcr-stat {' '.join(args)} printed invalid JSON ({e}):\n{r.stdout}")

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=TIMEOUT)
        shutil.rmtree(self.rundir, ignore_errors=True)


def read_line(p):
    """One line from a child, bounded in time (the child may have died)."""
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    if not sel.select(TIMEOUT):
        raise Failure("stats-writer did not answer in time")
    line = p.stdout.readline()
    check(line, f"stats-writer ended early (status {p.poll()})")
    return line


def conns_of(doc, pid):
    return [c for c in doc["connections"] if c["pid"] == pid]


def by_port(conns, port):
    found = [c for c in conns if c["local_port"] == port]
    check_eq(len(found), 1, f"records with local port {port}")
    return found[0]


# ---- cases ---------------------------------------------------------------------------

def case_empty(case):
    """No file at all: a message, an empty JSON list, exit 0."""
    r = case.tool("--dir", case.statsdir)
    check_eq(r.stdout.strip(), "no smcr processes", "table output without processes")
    check_eq(r.stderr, "", "stderr without processes")
    doc, _ = case.tool_json("--json", "--dir", case.statsdir)
    check_eq(doc["connections"], [], "connections without processes")
    check_eq(doc["process_count"], 0, "process count without processes")
    doc, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
    check_eq(doc["processes"], [], "stats without processes")
    check_eq(doc["total"]["handshakes"], 0, "total handshakes without processes")
    os.mkdir(case.statsdir, 0o700)  # the directory exists, still empty
    r = case.tool("-s", "--dir", case.statsdir)
    check_eq(r.stdout.strip(), "no smcr processes", "stats table without processes")


def check_fixture_conns(doc, w, with_closed):
    pid = w["pid"]
    conns = conns_of(doc, pid)
    # v4, tcp, the real pair's two ends; v6 when ::1 exists; the closed one with --all
    want = 4 + (1 if w["ipv6"] else 0) + (1 if with_closed else 0)
    check_eq(len(conns), want, "records of the writer")
    for c in conns:
        check_eq(c["program"], "stats-writer", "program")
        check_eq(c["link_group"], None, "link_group (same-host shm has none)")
        check_eq(c["device"], None, "device (same-host shm and TCP have no RDMA device)")
        check_eq(c["uid"], os.geteuid(), "uid")
        if c["local_port"] == w["tcp_local_port"]:
            check_eq(c["conn_state"], None, "conn_state of a TCP record")
            continue
        if c["state"] == "live":
            check_eq(c["conn_state"], "active", "conn_state of a live SMC record")
        check_eq(c["mode"], "smc-shm", "mode")
        check_eq(c["fallback_code"], None, "fallback_code of an SMC connection")
        check_eq(c["fallback_name"], None, "fallback_name of an SMC connection")
    tcp = by_port(conns, w["tcp_local_port"])
    check_eq((tcp["mode"], tcp["state"], tcp["role"], tcp["fd"]),
             ("tcp-fallback", "live", "server", w["tcp_fd"]), "TCP record")
    check_eq((tcp["fallback_code"], tcp["fallback_name"]), ("0x03010000", "PEERNOSMC"),
             "TCP record's reason")
    check_eq((tcp["bytes_sent"], tcp["rmb_size"]), (None, None), "TCP record: no SMC data")
    # The real engine pair: each end's record, bytes as moved through the rings.
    rc = by_port(conns, w["real_client_port"])
    rs = by_port(conns, w["real_server_port"])
    check_eq((rc["role"], rs["role"]), ("client", "server"), "real pair roles")
    check_eq((rc["peer_port"], rs["peer_port"]), (w["real_server_port"], w["real_client_port"]),
             "real pair peer ports")
    check_eq((rc["bytes_sent"], rc["bytes_received"]), (3000, 100), "real client bytes")
    check_eq((rs["bytes_sent"], rs["bytes_received"]), (100, 3000), "real server bytes")
    check_eq((rc["rmb_size"], rc["peer_rmb_size"]), (65536, 65536), "real client rings")
    check(rc["cdc_sent"] >= 1 and rs["cdc_received"] >= 1, "real pair exchanged CDCs")
    v4 = by_port(conns, w["v4_local_port"])
    check_eq((v4["state"], v4["role"], v4["family"]), ("live", "client", "ipv4"), "v4 record")
    check_eq((v4["local_address"], v4["peer_address"]), ("127.0.0.1", "127.0.0.1"),
             "v4 addresses")
    check_eq(v4["peer_port"], w["v4_peer_port"], "v4 peer port")
    check_eq(v4["fd"], w["v4_fd"], "v4 fd")
    check_eq((v4["bytes_sent"], v4["bytes_received"]), (1000, 2000), "v4 bytes")
    check_eq((v4["cdc_sent"], v4["cdc_received"]), (10, 11), "v4 CDCs")
    check_eq((v4["rmb_size"], v4["peer_rmb_size"]), (65536, 131072), "v4 ring sizes")
    if w["ipv6"]:
        v6 = by_port(conns, w["v6_local_port"])
        check_eq((v6["state"], v6["role"], v6["family"]), ("live", "server", "ipv6"),
                 "v6 record")
        check_eq((v6["local_address"], v6["peer_address"]), ("::1", "::1"), "v6 addresses")
        check_eq(v6["peer_port"], w["v6_peer_port"], "v6 peer port")
        check_eq((v6["bytes_sent"], v6["bytes_received"]), (5, 6), "v6 bytes")
        check_eq((v6["rmb_size"], v6["peer_rmb_size"]), (16384, 32768), "v6 ring sizes")
    if with_closed:
        cl = by_port(conns, w["closed_local_port"])
        check_eq(cl["state"], "closed", "state of the closed record")
        check_eq(cl["conn_state"], "aborted", "conn_state of the aborted record")
        check_eq((cl["bytes_sent"], cl["bytes_received"]), (777, 888), "closed bytes")


def check_fixture_counters(proc, handshakes_smc=5, fallbacks=3, errors=1, aborts=1,
                           reasons=None, waits=(2, 1, 4)):
    if reasons is None:
        reasons = {("0x03010000", "PEERNOSMC"): 2, ("0x03030000", "NOSMCDEV"): 1}
    check_eq(proc["program"], "stats-writer", "program in stats")
    check_eq(proc["handshakes_smc"], handshakes_smc, "handshakes_smc")
    check_eq(proc["fallbacks"], fallbacks, "fallbacks")
    check_eq(proc["handshake_errors"], errors, "handshake_errors")
    check_eq(proc["handshakes"], handshakes_smc + fallbacks + errors, "handshakes")
    check_eq(proc["aborts"], aborts, "aborts")
    check_eq((proc["spins_won"], proc["spins_lost"], proc["waits_slept"]), waits,
             "spins won/lost, waits slept")
    got = {(r["code"], r["name"]): r["count"] for r in proc["fallback_reasons"]}
    check_eq(got, reasons, "fallback reasons")


def case_fixture(case):
    """The engine's writer, read back field by field; table, -p, --all, stats."""
    p, w = case.start()
    pid = w["pid"]
    check(w["path"].startswith(case.statsdir + "/"), f"writer published in {w['path']}")

    # Default discovery (the writer's rule: $XDG_RUNTIME_DIR/smcr), filtered by pid.
    doc, err = case.tool_json("--json", "-p", str(pid))
    check_eq(err, "", "stderr of --json")
    check_eq(doc["format"], "smcr-stat", "format")
    check_eq(doc["version"], 1, "format version")
    check_fixture_conns(doc, w, with_closed=False)
    # `json` command, the directory named explicitly: only this writer is there.
    doc, _ = case.tool_json("json", "--dir", case.statsdir)
    check_eq(doc["process_count"], 1, "processes in the test directory")
    check_fixture_conns(doc, w, with_closed=False)
    doc, _ = case.tool_json("--json", "--all", "--dir", case.statsdir)
    check_fixture_conns(doc, w, with_closed=True)
    # -p of another pid: nothing.
    doc, _ = case.tool_json("--json", "-p", str(pid + 100000), "--dir", case.statsdir)
    check_eq(doc["connections"], [], "records for an unrelated pid")

    table = case.tool("--dir", case.statsdir).stdout
    check(f"127.0.0.1:{w['v4_local_port']}" in table, f"v4 endpoint in table:\n{table}")
    if w["ipv6"]:
        check(f"[::1]:{w['v6_local_port']}" in table, f"v6 endpoint in table:\n{table}")
    check("smc-shm" in table and "65536/131072" in table, f"mode, rings in table:\n{table}")
    check("closed" not in table, "closed record listed without --all")
    check("closed" in case.tool("-a", "--dir", case.statsdir).stdout, "--all lists closed")

    stats, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
    check_eq(len(stats["processes"]), 1, "processes in stats")
    proc = stats["processes"][0]
    check_eq(proc["pid"], pid, "pid in stats")
    check_fixture_counters(proc)
    live = 4 if w["ipv6"] else 3
    check_eq(proc["connections_open"], live, "connections_open")
    check_eq((proc["closed_bytes_sent"], proc["closed_bytes_received"]), (777, 888),
             "closed bytes")
    v6 = (5, 6) if w["ipv6"] else (0, 0)
    check_eq((proc["live_bytes_sent"], proc["live_bytes_received"]),
             (1000 + 3100 + v6[0], 2000 + 3100 + v6[1]), "live bytes")
    check_eq(stats["total"]["handshakes_smc"], 5, "total handshakes_smc")
    text = case.tool("-s", "--dir", case.statsdir).stdout
    check("PEERNOSMC" in text and "0x03010000" in text, f"reason in stats text:\n{text}")
    check(re.search(r"spins won +2\n +spins lost +1\n +slept +4 ", text),
          f"waits in stats text:\n{text}")

    # smcr-stat stats json (smc-tools word order) is the same document.
    doc, _ = case.tool_json("stats", "json", "--dir", case.statsdir)
    check_eq(doc["processes"][0]["handshakes_smc"], 5, "`stats json` handshakes_smc")

    # reset: prints what it zeroed, then the counters are zero; gauges and records stay.
    doc, _ = case.tool_json("reset", "--json", "-p", str(pid), "--dir", case.statsdir)
    check_eq(doc["reset"], True, "reset flag")
    check_fixture_counters(doc["processes"][0])
    stats, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
    check_fixture_counters(stats["processes"][0], 0, 0, 0, 0, reasons={}, waits=(0, 0, 0))
    check_eq(stats["processes"][0]["connections_open"], live, "connections_open after reset")
    check_eq(stats["processes"][0]["closed_bytes_sent"], 0, "closed bytes after reset")
    doc, _ = case.tool_json("--json", "--dir", case.statsdir)
    check_fixture_conns(doc, w, with_closed=False)

    # A normal exit removes the file: nothing left to list.
    p.stdin.write("exit\n")
    p.stdin.flush()
    check_eq(p.wait(timeout=TIMEOUT), 0, "exit status of stats-writer")
    check(not os.path.exists(w["path"]), "the writer's file outlived its normal exit")
    check_eq(case.tool("--dir", case.statsdir).stdout.strip(), "no smcr processes",
             "after the writer exited")


def case_bad_header(case):
    """Live processes whose files have a wrong version or magic: skipped, warned, kept."""
    _, good = case.start()
    _, badver = case.start("fake", hex(0x534D4353), "99")
    _, badmagic = case.start("fake", "0x12345678", "1")
    _, short = case.start("fake", hex(0x534D4353), "1", "4096")  # records cut off
    doc, err = case.tool_json("--json", "--dir", case.statsdir)
    pids = {c["pid"] for c in doc["connections"]}
    check_eq(pids, {good["pid"]}, "pids listed beside bad files")
    check_eq(doc["process_count"], 1, "processes counted beside bad files")
    check(f"stats.{badver['pid']}: stats layout version 99" in err,
          f"warning about the version in stderr: {err!r}")
    check(f"stats.{badmagic['pid']}: not an smcr stats file (magic 0x12345678)" in err,
          f"warning about the magic in stderr: {err!r}")
    check(f"stats.{short['pid']}: 4096 bytes, its header promises" in err,
          f"warning about the short file in stderr: {err!r}")
    check(os.path.exists(badver["path"]) and os.path.exists(badmagic["path"]),
          "files of live processes must never be removed")
    stats, err = case.tool_json("stats", "--json", "--dir", case.statsdir)
    check_eq([p["pid"] for p in stats["processes"]], [good["pid"]], "stats beside bad files")


def case_dead_pid(case):
    """A file whose process died without cleanup (SIGKILL): ignored and removed."""
    alive, a = case.start()
    dead, d = case.start()
    dead.send_signal(signal.SIGKILL)
    dead.wait(timeout=TIMEOUT)
    check(os.path.exists(d["path"]), "SIGKILL left the file behind (fixture)")
    # Valid files under a live pid nobody writes them for (as after exec, or pid
    # reuse).  Version 2: nobody holds the writer's flock, so stale and removed
    # although the pid lives.  Version 1 (no lock): the pid does not map it,
    # skipped but kept.
    with open(a["path"], "rb") as f:
        data = bytearray(f.read())
    unlocked = os.path.join(case.statsdir, f"stats.{os.getpid()}")
    struct.pack_into("<i", data, 20, os.getpid())  # header pid, after 5 u32 fields
    with open(unlocked, "wb") as f:
        f.write(data)
    os.chmod(unlocked, 0o600)
    v1_pid = os.getppid()
    unmapped_v1 = os.path.join(case.statsdir, f"stats.{v1_pid}")
    struct.pack_into("<I", data, 4, 1)  # layout version 1
    struct.pack_into("<i", data, 20, v1_pid)
    with open(unmapped_v1, "wb") as f:
        f.write(data)
    os.chmod(unmapped_v1, 0o600)

    doc, err = case.tool_json("--json", "--dir", case.statsdir)
    check_eq({c["pid"] for c in doc["connections"]}, {a["pid"]}, "pids beside a dead one")
    check_eq(err, "", "stderr beside stale files")
    check(not os.path.exists(d["path"]), "the dead process's file was not removed")
    check(not os.path.exists(unlocked), "a v2 file nobody holds locked was kept")
    check(os.path.exists(unmapped_v1), "a live pid's v1 file was removed")
    check(os.path.exists(a["path"]), "the live writer's file was removed")

    # Another user's stale file (root only): ignored, but never removed.
    if os.geteuid() == 0:
        dead2, d2 = case.start()
        dead2.send_signal(signal.SIGKILL)
        dead2.wait(timeout=TIMEOUT)
        os.chown(d2["path"], 65534, 65534)
        doc, _ = case.tool_json("--json", "--dir", case.statsdir)
        check_eq({c["pid"] for c in doc["connections"]}, {a["pid"]}, "pids, foreign stale")
        check(os.path.exists(d2["path"]), "another user's stale file was removed")
    alive.stdin.close()
    alive.wait(timeout=TIMEOUT)


def case_concurrent_writer(case):
    """Records reused as fast as the writer can while the tool reads them."""
    p, w = case.start()
    p.stdin.write("churn 1500\n")
    p.stdin.flush()
    reads, deadline = 0, time.monotonic() + 1.2
    while time.monotonic() < deadline:
        doc, _ = case.tool_json("--json", "--all", "--dir", case.statsdir)
        for c in doc["connections"]:
            check(c["mode"] in ("smc-shm", "smc-r", "tcp-fallback"), f"mode {c['mode']}")
            check(c["state"] in ("live", "closed"), f"state {c['state']}")
        stats, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
        check_eq(len(stats["processes"]), 1, "the churning process stays listed")
        reads += 1
    check(read_line(p).startswith("churned"), "churn finished")
    check(reads >= 3, f"only {reads} reads during the churn")
    # After the churn: the fixture's records are intact, churned ones all closed.
    doc, _ = case.tool_json("--json", "--dir", case.statsdir)
    check_fixture_conns(doc, w, with_closed=False)
    doc, _ = case.tool_json("--json", "-a", "--dir", case.statsdir)
    for c in doc["connections"]:
        if c["state"] == "closed" and c["rmb_size"] == 4096 and c["peer_rmb_size"] == 4096:
            check_eq(c["bytes_received"], 2 * c["bytes_sent"], "a churned record's bytes")


def case_forked_child(case):
    """A forked child publishes its own file at its first record (prefork servers)."""
    p, w = case.start()
    p.stdin.write("fork\n")
    p.stdin.flush()
    child = json.loads(read_line(p))
    cpid = child["child_pid"]
    check(not child["file_before_record"], "the child published before its first record")
    check_eq(child["path"], os.path.join(case.statsdir, f"stats.{cpid}"), "child's file")
    check(os.path.exists(child["path"]), "the child's file exists")
    doc, err = case.tool_json("--json", "--dir", case.statsdir)
    check_eq(err, "", "stderr with a forked child")
    mine = conns_of(doc, cpid)
    check_eq(len(mine), 1, "records listed for the child (its own only, none inherited)")
    check_eq((mine[0]["local_port"], mine[0]["mode"], mine[0]["bytes_sent"],
              mine[0]["bytes_received"], mine[0]["rmb_size"], mine[0]["peer_rmb_size"]),
             (child["child_port"], "smc-shm", 11, 22, 4096, 8192), "the child's record")
    check_fixture_conns(doc, w, with_closed=False)  # the parent's, unchanged
    stats, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
    procs = {q["pid"]: q for q in stats["processes"]}
    check_eq(set(procs), {w["pid"], cpid}, "processes in stats")
    check_eq(procs[cpid]["handshakes"], 1, "the child's handshakes (from zero at fork)")
    p.stdin.write("reap\n")
    p.stdin.flush()
    check_eq(read_line(p).strip(), "reaped 0", "the child's exit status")
    check(not os.path.exists(child["path"]), "the child's file outlived it")
    check(os.path.exists(w["path"]), "the parent's file was removed by its child")


def case_fork_reset(case):
    """A forked child whose copy of its parent's connection reads as reset (an SMC-R
    connection that could not go on over TCP): the child's file shows that connection,
    aborted, with FORKRESET, counts the reset, and moved no bytes of it; the parent's
    record is unchanged."""
    p, w = case.start()
    p.stdin.write("forkreset\n")
    p.stdin.flush()
    child = json.loads(read_line(p))
    cpid = child["child_pid"]
    doc, err = case.tool_json("--json", "--dir", case.statsdir)
    check_eq(err, "", "stderr with a reset forked copy")
    reset = by_port(conns_of(doc, cpid), w["v4_local_port"])
    check_eq((reset["state"], reset["mode"], reset["conn_state"], reset["fallback_name"],
              reset["fallback_code"], reset["bytes_sent"], reset["bytes_received"]),
             ("live", "smc-shm", "aborted", "FORKRESET", "0x0a0c0000", 0, 0),
             "the child's record of its reset copy")
    check_fixture_conns(doc, w, with_closed=False)  # the parent's, unchanged
    stats, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
    procs = {q["pid"]: q for q in stats["processes"]}
    check_eq(procs[cpid]["aborts"], 1, "the child's resets")
    check_eq([(r["name"], r["count"]) for r in procs[cpid]["fallback_reasons"]],
             [("FORKRESET", 1)], "the child's reasons")
    text = case.tool("-p", str(cpid), "--dir", case.statsdir).stdout
    check(re.search(r"live +smc-shm +client +127\.0\.0\.1:%d .* FORKRESET\(0x0a0c0000\) +0 +0 "
                    % w["v4_local_port"], text), f"the reset copy in the table:\n{text}")
    p.stdin.write("reap\n")
    p.stdin.flush()
    check_eq(read_line(p).strip(), "reaped 0", "the child's exit status")


def case_pid_namespace(case):
    """A writer in another pid namespace (its pid means nothing here) is live while it
    holds its flock, stale after it died."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        print("     pid_namespace: skipped (needs root and unshare)")
        return
    p, w = case.start(prefix=(unshare, "--pid", "--fork", "--kill-child"))
    check_eq(w["pid"], 1, "the writer's pid inside its namespace")
    doc, err = case.tool_json("--json", "--dir", case.statsdir)
    check_eq(err, "", "stderr with a writer in another pid namespace")
    check_fixture_conns(doc, w, with_closed=False)
    p.kill()  # unshare --kill-child takes the writer with it
    p.wait(timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        doc, _ = case.tool_json("--json", "--dir", case.statsdir)
        if not doc["connections"] and not os.path.exists(w["path"]):
            return
        time.sleep(0.05)
    raise Failure("the dead namespaced writer's file is still listed or present")


def case_file_shrinks(case):
    """A file cut short while being read (SIGBUS on the mapping): skipped, never a crash."""
    p, w = case.start("fake", hex(0x534D4353), "1", "flap")
    outcomes = set()
    for _ in range(40):
        doc, err = case.tool_json("--json", "--dir", case.statsdir)
        pids = {c["pid"] for c in doc["connections"]}
        check(pids <= {w["pid"]}, f"unexpected pids {pids}")
        if "shrank while being read" in err:
            outcomes.add("sigbus")
        elif "its header promises" in err:
            outcomes.add("short")
        elif pids:
            outcomes.add("read")
    p.stdin.close()
    check_eq(p.wait(timeout=TIMEOUT), 0, "exit status of the flapping writer")
    print(f"     file_shrinks outcomes: {sorted(outcomes)}")


def case_odd_program_name(case):
    """A process name with a quote, a backslash and a non-ASCII byte stays valid JSON."""
    _, w = case.start("name", os.fsdecode(b'we"ird\\\xff'))
    doc, _ = case.tool_json("--json", "--dir", case.statsdir)
    names = {c["program"] for c in conns_of(doc, w["pid"])}
    check_eq(names, {'we"ird\\134\\377'}, "escaped program name")
    stats, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
    check_eq(stats["processes"][0]["program"], 'we"ird\\134\\377', "name in stats")
    check('we"ird\\134\\377' in case.tool("--dir", case.statsdir).stdout, "name in table")


def command(p, line):
    """Send the writer one command, return the JSON line it answers."""
    p.stdin.write(line + "\n")
    p.stdin.flush()
    return json.loads(read_line(p))


def case_listeners(case):
    """Listeners as listener.c records them: served, revoked with its reason, name held,
    and a sibling on the same port at another address: served (its socket has its own name)."""
    p, w = case.start()
    lw = command(p, "listeners")
    doc, err = case.tool_json("-l", "--json", "--dir", case.statsdir)
    check_eq(err, "", "stderr of -l")
    mine = [l for l in doc["listeners"] if l["pid"] == w["pid"]]
    got = sorted((l["port"], l["fd"], l["status"], l["registered"], l["reason"]) for l in mine)
    want = sorted([
        (lw["served_port"], lw["served_fd"], "served", True, None),
        (lw["served_port"], lw["served_fd"], "name-held", False,
         "registry name held by another process"),
        (lw["revoked_port"], lw["revoked_fd"], "revoked", False,
         "exec of a program without smcr"),
        (lw["served_port"], lw["sibling_fd"], "served", True, None),
    ])
    check_eq(got, want, "listeners of the writer")
    for l in mine:
        address = "127.0.0.2" if l["fd"] == lw["sibling_fd"] else "127.0.0.1"
        check_eq((l["address"], l["program"], l["samehost"]), (address, "stats-writer", True),
                 "listener address, program, same-host")
    text = case.tool("listeners", "--dir", case.statsdir).stdout
    check(re.search(rf"127\.0\.0\.1:{lw['revoked_port']} +revoked +exec of a program "
                    "without smcr", text), f"revoked listener in the table:\n{text}")
    # The same socket's records in a forked child: it holds the listening sockets too.
    command(p, "fork")
    doc, _ = case.tool_json("listeners", "-j", "--dir", case.statsdir)
    check_eq(len(doc["listeners"]), 8, "listeners of the writer and of its forked child")
    p.stdin.write("reap\n")
    p.stdin.flush()
    check_eq(read_line(p).strip(), "reaped 0", "the child's exit status")


def case_tails(case):
    """SMC connections whose stream went on over TCP: mode kept, the reason and phase
    say so, in JSON and in the table (MODE smc-shm>tcp, FALLBACK the reason)."""
    p, w = case.start()
    tw = command(p, "tail")
    doc, err = case.tool_json("--json", "-a", "--dir", case.statsdir)
    check_eq(err, "", "stderr with tails")
    conns = conns_of(doc, w["pid"])
    live, closed = by_port(conns, tw["live_port"]), by_port(conns, tw["closed_port"])
    check_eq((live["state"], live["mode"], live["fallback_code"], live["fallback_name"],
              live["conn_state"], live["bytes_sent"]),
             ("live", "smc-shm", "0x0a030000", "HANDOFF", "on-tcp", 40), "live record gone on over TCP")
    check_eq((closed["state"], closed["mode"], closed["fallback_name"], closed["bytes_received"]),
             ("closed", "smc-shm", "PEERTCP", 70), "closed record that followed its peer onto TCP")
    text = case.tool("-a", "--dir", case.statsdir).stdout
    check(re.search(r"live +smc-shm>tcp +client +127\.0\.0\.1:%d .* HANDOFF\(0x0a030000\) +40 +50 "
                    % tw["live_port"], text), f"the live tail in the table:\n{text}")
    check(re.search(r"closed +smc-shm>tcp +server +127\.0\.0\.1:%d .* PEERTCP\(0x0a0b0000\) "
                    % tw["closed_port"], text), f"the closed tail in the table:\n{text}")
    check(re.search(r"live +smc-shm +client", text), f"plain SMC records keep their mode:\n{text}")
    dest = [c for c in conns if c["fd"] == tw["dest_fd"] and c["mode"] == "tcp-fallback"]
    check_eq([(c["fallback_name"], c["peer_port"], c["local_address"], c["local_port"]) for c in dest],
             [("SHORTFLOWS", 4711, None, None)], "a record made before connect: no local address")
    check(re.search(r"live +tcp-fallback +client +- +127\.0\.0\.1:4711 +SHORTFLOWS", text),
          f"its LOCAL is '-', not [::]:0:\n{text}")


def case_link_groups(case):
    """Link group records (lgr.c's) with their links, joined with their connections."""
    p, w = case.start()
    command(p, "lgr")
    doc, err = case.tool_json("linkgroup", "--json", "--dir", case.statsdir)
    check_eq(err, "", "stderr of linkgroup")
    groups = {g["id"]: g for g in doc["link_groups"]}
    check_eq(sorted(groups), [0x101, 0x202, 0x303, 0x404], "link group ids (shm records have none)")
    a, b, idle, norec = groups[0x101], groups[0x202], groups[0x303], groups[0x404]
    check_eq((a["role"], a["state"], a["max_links"], a["connections"], a["peers"], a["id_hex"],
              a["peer_id"]),
             ("client", "active", 2, 2, ["127.0.0.1"], "00000101", "1234020000000001"),
             "group 0x101")
    check_eq((a["bytes_sent"], a["bytes_received"]), (1100, 2200), "group 0x101 bytes")
    check_eq([(l["link_id"], l["state"], l["device"], l["port"], l["qp"], l["peer_qp"],
               l["connections"], l["gid"], l["peer_gid"]) for l in a["links"]],
             [(1, "up", "rxe0", 1, 17, 18, 1, "10.0.0.17", "10.0.0.18"),
              (2, "up", "rxe1", 1, 33, 34, 1, "10.0.0.33", "10.0.0.34")], "links of 0x101")
    check_eq(sorted(a["devices"]), ["rxe0", "rxe1"], "devices of 0x101")
    check_eq((b["role"], b["connections"], b["devices"], len(b["links"])), ("server", 1, ["rxe1"], 1),
             "group 0x202")
    check_eq((a["rmb_rescues"], b["rmb_rescues"], norec["rmb_rescues"]), (0, 3, None),
             "RMB rescues of 0x101, 0x202 and of a group without a record")
    check_eq((idle["connections"], idle["bytes_sent"], idle["links"][0]["qp"]), (0, 0, 65),
             "an idle group, listed by its record alone")
    check_eq((norec["state"], norec["links"], norec["connections"], norec["devices"]),
             (None, None, 1, ["rxe0"]), "a group known from its connections alone")
    text = case.tool("-g", "--dir", case.statsdir).stdout
    check(re.search(r"00000101 +client +active +2 +rxe0,rxe1 +127\.0\.0\.1\n +link 1 +up +"
                    r"rxe0/1 +QP 17 -> 18 +conns 1", text), f"group 0x101 in the table:\n{text}")
    check(re.search(r"00000202 +server +active .*\n +link 1 .*\n +rmb rescues 3 ", text) and
          text.count("rmb rescues") == 1, f"0x202's RMB rescues in the table, no other group's:\n{text}")
    doc, _ = case.tool_json("--json", "--dir", case.statsdir)
    r = [c for c in doc["connections"] if c["link_group"] == 0x101]
    check_eq({(c["mode"], c["device"]) for c in r}, {("smc-r", "rxe0")}, "connection view")


def case_command_filter(case):
    """-c NAME: the process name each file carries (comm, 15 bytes kept)."""
    _, plain = case.start()
    _, alpha = case.start("name", "alpha")
    _, long = case.start("name", "averyverylongprogramname")
    for name, pid in (("alpha", alpha["pid"]), ("stats-writer", plain["pid"]),
                      ("averyverylongprogramname", long["pid"]), ("averyverylongpr", long["pid"])):
        doc, _ = case.tool_json("--json", "-c", name, "--dir", case.statsdir)
        check_eq({c["pid"] for c in doc["connections"]}, {pid}, f"-c {name}")
        doc, _ = case.tool_json("stats", "--json", "--command", name, "--dir", case.statsdir)
        check_eq([q["pid"] for q in doc["processes"]], [pid], f"stats -c {name}")
    doc, _ = case.tool_json("-j", "-c", "alph", "--dir", case.statsdir)
    check_eq(doc["process_count"], 0, "-c is no prefix match")
    doc, _ = case.tool_json("-j", "-c", "alpha", "-p", str(plain["pid"]), "--dir", case.statsdir)
    check_eq(doc["process_count"], 0, "-c and -p together")


def case_fallbacks_total(case):
    """Fallback reasons added up over the processes, with how many had each."""
    case.start()
    case.start()
    doc, _ = case.tool_json("fallbacks", "--json", "--dir", case.statsdir)
    check_eq((doc["process_count"], doc["fallbacks"], doc["handshake_errors"]), (2, 6, 2),
             "fallbacks and errors of two writers")
    check_eq([(r["code"], r["name"], r["count"], r["processes"]) for r in doc["reasons"]],
             [("0x03010000", "PEERNOSMC", 4, 2), ("0x03030000", "NOSMCDEV", 2, 2)],
             "reasons, most frequent first")
    text = case.tool("fallbacks", "--dir", case.statsdir).stdout
    check(re.search(r"0x03010000 +PEERNOSMC +4 +2", text), f"reasons table:\n{text}")
    stats, _ = case.tool_json("stats", "--json", "--dir", case.statsdir)
    check_eq(stats["total"]["fallbacks"], 6, "total in stats")


def json_documents(text):
    dec, docs, i = json.JSONDecoder(), [], 0
    while text[i:].strip():
        while text[i].isspace():
            i += 1
        doc, i = dec.raw_decode(text, i)
        docs.append(doc)
    return docs


def case_watch(case):
    """-i/-n: N reports; stats with what grew between two of them."""
    p, w = case.start()
    r = case.tool("-j", "-i", "1", "-n", "2", "--dir", case.statsdir)
    docs = json_documents(r.stdout)
    check_eq([d["report"] for d in docs], [1, 2], "report numbers of -n 2")
    check_eq(len(docs[1]["connections"]), len(docs[0]["connections"]), "same records twice")
    text = case.tool("-s", "-n", "2", "-i", "1", "--dir", case.statsdir).stdout
    check_eq(len(re.findall(r"^-- report \d at ", text, re.M)), 2, f"two text reports:\n{text}")
    check("Last 1." in text or "Last 0." in text, f"growth line in the second report:\n{text}")

    # The writer churns between the two reads: the growth is the difference.
    tool = subprocess.Popen([TOOL, "stats", "-j", "-i", "3", "-n", "2", "--dir", case.statsdir],
                            stdout=subprocess.PIPE, env=case.env)
    try:
        first = b""
        while not first.endswith(b"}}\n"):  # unbuffered: the second report is not read yet
            sel = selectors.DefaultSelector()
            sel.register(tool.stdout, selectors.EVENT_READ)
            check(sel.select(TIMEOUT), "smcr-stat -i printed no first report in time")
            chunk = os.read(tool.stdout.fileno(), 65536)
            check(chunk, "smcr-stat -i ended before its first report")
            first += chunk
        p.stdin.write("churn 100\n")
        p.stdin.flush()
        churned = int(read_line(p).split()[1])
        rest, _ = tool.communicate(timeout=TIMEOUT)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
    a, b = json_documents((first + rest).decode())
    check_eq(a["processes"][0]["interval"], None, "no growth in the first report")
    g = b["processes"][0]["interval"]
    check_eq(g["handshakes_smc"], b["processes"][0]["handshakes_smc"] -
             a["processes"][0]["handshakes_smc"], "growth is the difference of the reports")
    check_eq(g["handshakes_smc"], 2 * churned, "growth: two records a churn round")
    check(g["bytes_sent"] > 0 and g["bytes_sent_per_second"] > 0, f"bytes grew: {g}")
    check_eq(b["total"]["interval"]["handshakes_smc"], 2 * churned, "growth of the total")
    case.tool("-i", "0", expect_rc=2)
    case.tool("-n", "x", expect_rc=2)


def case_usage(case):
    case.tool("bogus", expect_rc=2)
    case.tool("-p", "x", expect_rc=2)
    check("Usage:" in case.tool("--help").stdout, "--help prints usage")
    check("smcr-stat" in case.tool("-v").stdout, "-v prints the version")
    # The source tree's wrapper, told by SMCR_STAT to run itself: an error, not a loop.
    wrapper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                           "smcr-stat")
    r = subprocess.run([wrapper, "stats"], env=dict(case.env, SMCR_STAT=wrapper),
                       capture_output=True, text=True, timeout=10)
    check_eq(r.returncode, 2, f"the wrapper run as its own SMCR_STAT: {r.stderr}")
    check("is this wrapper" in r.stderr, f"it says why: {r.stderr}")


CASES = [case_empty, case_fixture, case_bad_header, case_dead_pid, case_concurrent_writer,
         case_forked_child, case_fork_reset, case_pid_namespace, case_file_shrinks, case_odd_program_name,
         case_listeners, case_link_groups, case_tails, case_command_filter, case_fallbacks_total, case_watch,
         case_usage]


def main():
    failed = 0
    for fn in CASES:
        case = Case()
        try:
            fn(case)
            print(f"ok   {fn.__name__}")
        except (Failure, subprocess.TimeoutExpired, KeyError, json.JSONDecodeError) as e:
            failed += 1
            print(f"FAIL {fn.__name__}: {type(e).__name__}: {e}")
        finally:
            case.close()
    print(f"{len(CASES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
