#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""echo_once.py PORT BYTES [STATS_NAME]: one connection to 127.0.0.1:PORT (or
$ECHO_HOST:PORT) that sends BYTES of random data, half-closes, and reads
everything the echo server sends back. Prints "intact SHA256", or "corrupt: ..." (exit 1), or
"error: CLASS: MESSAGE" when the connection fails (exit 2). With STATS_NAME,
the process records its own published stats under that name before it exits
(own_stats.py, for tests whose clients' stats files vanish with them)."""
import hashlib
import os
import socket
import sys
import threading

port, n = int(sys.argv[1]), int(sys.argv[2])
stats_name = sys.argv[3] if len(sys.argv) > 3 else None
data = os.urandom(n)
s = socket.create_connection((os.environ.get("ECHO_HOST", "127.0.0.1"), port))
s.settimeout(30)


def send():
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass


t = threading.Thread(target=send)
t.start()
got = bytearray()
try:
    while b := s.recv(65536):
        got += b
except OSError as e:
    print(f"error: {e.__class__.__name__}: {e}")
    sys.exit(2)
t.join()
if stats_name:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from own_stats import own_stats
    own_stats(stats_name)
want, have = hashlib.sha256(data).hexdigest(), hashlib.sha256(got).hexdigest()
if have != want:
    print(f"corrupt: {len(got)} of {n} bytes, sha256 {have[:16]}, sent {want[:16]}")
    sys.exit(1)
print("intact", have)
