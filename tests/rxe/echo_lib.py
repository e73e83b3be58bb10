# SPDX-License-Identifier: MIT
"""Helpers the rxe test programs share (link2.sh, kernel.sh copy this file next to their
inline scripts, which import it): an echo that sends and receives at once (a peer that
echoes while we still send must not block us), the echo server's loop, and this process's
smcr-stat record of a connection.  tests/apps/echo_stream.py (the apps and package suites)
imports it from here for the server's loop."""
import hashlib, json, os, socket, subprocess, time


def echo(c, data):
    """Send data on c and read it back; True if what came back is data."""
    return stream(c, data)[1]


def stream(c, data, under_way=None, before_end=None):
    """echo() with what a test that disturbs a long stream wants to know: (bytes back,
    True if they are data, the longest pause between two reads in s, bytes back when it
    ended).  What comes back is hashed, not kept; under_way(bytes back) is called once an
    eighth is back (the test acts then), and the pauses are measured from there;
    before_end() once before the last eighth is sent (it may wait for what the test did).
    Gives up 60 s after the last send with nothing more back."""
    size, h, sent, got = len(data), hashlib.sha256(), 0, 0
    told, held = under_way is None, before_end is None
    last, gap, gap_at = time.monotonic(), 0.0, 0
    while got < size:
        if not held and size - sent <= size // 8:
            before_end()
            held, last = True, time.monotonic()
        waited = sent >= size  # (a short timeout while sending, the last send included)
        c.settimeout(60 if waited else 0.01)
        if sent < size:
            try:
                sent += c.send(data[sent:sent + 65536])
            except socket.timeout:
                pass  # full: read on, or the peer's echo waits for our reads while we wait for its
        try:
            b = c.recv(1 << 16)
        except socket.timeout:
            if waited:
                break
            continue
        if not b:
            break
        h.update(b)
        got += len(b)
        now = time.monotonic()
        if now - last > gap:
            gap, gap_at = now - last, got
        last = now
        if not told and got >= size // 8:
            under_way(got)
            told, last, gap = True, time.monotonic(), 0.0
    return got, got == size and h.digest() == hashlib.sha256(data).digest(), gap, gap_at


def _echo(c, pieces, each):
    """Send every piece back on c, then close c; each(bytes echoed so far) after every one."""
    done = 0
    with c:
        for b in pieces:
            c.sendall(b)
            done += len(b)
            if each:
                each(done)


def serve(c, each=None):
    """Echo what comes on c until the peer's end, then close c; each(bytes echoed so far)
    after every piece."""
    _echo(c, iter(lambda: c.recv(1 << 16), b""), each)


def read_exactly(c, n):
    """n bytes from c, or fewer if the stream ends first."""
    got = bytearray()
    while len(got) < n:
        b = c.recv(n - len(got))
        if not b:
            break
        got += b
    return bytes(got)


def send_and_check(c, data, sent, want, eof_ends=True):
    """Send data[sent:] on c (then SHUT_WR) while reading what comes back, and print the
    verdict a test greps: "intact SHA256" if exactly want came back, "garbage at N" at the
    first byte that is not want's, else "short N: why".  eof_ends=False: the peer's end of
    its stream before ours is sent does not stop us (a peer whose reading half still runs).
    Gives up 60 s after the last send with nothing more back."""
    total, h, got, bad, err = len(data), hashlib.sha256(), 0, -1, None
    try:
        while True:
            c.settimeout(0.01 if sent < total else 60)
            if sent < total:
                try:
                    sent += c.send(data[sent:sent + 65536])
                except socket.timeout:
                    pass
                if sent >= total:
                    c.shutdown(socket.SHUT_WR)
            try:
                b = c.recv(1 << 16)
            except socket.timeout:
                if sent >= total:
                    err = "nothing for 60 s"
                    break
                continue
            if not b:
                if eof_ends or sent >= total:
                    break
                continue
            if bad < 0 and b != want[got:got + len(b)]:
                bad = got + next(i for i in range(len(b)) if got + i >= len(want) or b[i] != want[got + i])
            h.update(b)
            got += len(b)
    except OSError as e:
        err = "%s" % e
    if bad >= 0:
        print("garbage at", bad, flush=True)
    elif got == len(want) and err is None:
        print("intact", h.hexdigest(), flush=True)
    else:
        print("short %d: %s" % (got, err or "EOF"), flush=True)


def live_records(c, smcr_stat):
    """smcr-stat's live records of connection c (this process), and its raw output."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([smcr_stat, "json", "-p", str(os.getpid())], env=env,
                         capture_output=True, text=True, timeout=30).stdout
    return [r for r in json.loads(out)["connections"]
            if r.get("local_port") == c.getsockname()[1] and r.get("state") == "live"], out


def record(c, smcr_stat):
    """(mode, link_group, device) of connection c, or None unless exactly one live record."""
    mine, _ = live_records(c, smcr_stat)
    return (mine[0]["mode"], mine[0]["link_group"], mine[0]["device"]) if len(mine) == 1 else None
