#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How many fds a program still gets for itself while it holds connections.

    fd_room.py server PORT N SOFT HARD   accept N connections, echo a payload on
        each, then open /dev/null until EMFILE and print "room K"; close those,
        echo a second payload on each and print "ok"
    fd_room.py client PORT N             make N connections, two echoes on each

The server sets its own RLIMIT_NOFILE to SOFT:HARD when it starts, as a
program does that lowers or raises it itself.
"""
import errno
import os
import resource
import socket
import sys

PAYLOAD = 4096


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise SystemExit(f"error: EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def echo_all(conns):
    for c in conns:
        c.sendall(recv_exact(c, PAYLOAD))


def room():
    fds = []
    try:
        while True:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
    for fd in fds:
        os.close(fd)
    return len(fds)


def server(port, n, soft, hard):
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    lsn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind(("127.0.0.1", port))
    lsn.listen(n)
    conns = []
    for _ in range(n):
        conns.append(lsn.accept()[0])
        echo_all(conns[-1:])
    print(f"room {room()}", flush=True)
    echo_all(conns)
    print("ok", flush=True)
    for c in conns:
        c.close()


def client(port, n):
    conns = []
    for i in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        data = os.urandom(PAYLOAD)
        c.sendall(data)
        if recv_exact(c, PAYLOAD) != data:
            raise SystemExit(f"error: connection {i}: echo differs")
        conns.append(c)
    for i, c in enumerate(conns):
        data = os.urandom(PAYLOAD)
        c.sendall(data)
        if recv_exact(c, PAYLOAD) != data:
            raise SystemExit(f"error: connection {i}: second echo differs")
    print(f"echoed {n} of {n}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(*map(int, sys.argv[2:6]))
    else:
        client(int(sys.argv[2]), int(sys.argv[3]))
