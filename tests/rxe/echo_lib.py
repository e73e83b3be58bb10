# SPDX-License-Identifier: MIT
"""Helpers the rxe test clients share (link2.sh, kernel.sh copy this file next to their
inline scripts, which import it): an echo that sends and receives at once (a peer that
echoes while we still send must not block us), and this process's smcr-stat record of a
connection."""
import json, os, socket, subprocess


def echo(c, data):
    """Send data on c and read it back; True if what came back is data."""
    size, got, sent = len(data), b"", 0
    while len(got) < size:
        c.settimeout(0.01 if sent < size else 30)
        try:
            if sent < size:
                sent += c.send(data[sent:sent + 65536])
            b = c.recv(1 << 16)
        except socket.timeout:
            continue
        if not b:
            break
        got += b
    return got == data


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
