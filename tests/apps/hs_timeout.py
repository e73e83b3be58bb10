#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An echo over one connection whose handshake the test stalls (smc_hs_timeout.sh).

    hs_timeout.py server PORT GO DONE      listen, say "listening", accept one
                                           connection, touch nothing of it until
                                           the file GO exists; then echo it to
                                           its EOF, print "server got N SHA",
                                           and wait for the file DONE
    hs_timeout.py client PORT FORM DONE    connect (FORM: "block", a blocking
                                           socket; "epoll", a non-blocking one
                                           in an epoll loop with 0.2 s ticks),
                                           send PAYLOAD bytes, shut down the
                                           sending side, read the echo to EOF,
                                           print "client ok N SHA" if it is the
                                           payload, and wait for the file DONE

Both wait for DONE so that their stats can be read while they live.  Any
error (a reset, a short or different echo) exits non-zero with "error: ...".
"""
import hashlib
import os
import random
import select
import socket
import sys
import time

PAYLOAD = 1024 * 1024 + 7


def wait_file(path):
    while not os.path.exists(path):
        time.sleep(0.05)


def server(port, go, done):
    lsn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind(("127.0.0.1", port))
    lsn.listen(4)
    print("listening", flush=True)
    conn, _ = lsn.accept()
    print("accepted", flush=True)
    wait_file(go)
    got = hashlib.sha256()
    n = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        got.update(chunk)
        n += len(chunk)
        conn.sendall(chunk)
    conn.close()
    print(f"server got {n} {got.hexdigest()}", flush=True)
    wait_file(done)


def payload():
    return random.Random(7).randbytes(PAYLOAD)


def client_block(sock, data):
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    back = bytearray()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return bytes(back)
        back += chunk


def client_epoll(sock, data):
    sock.setblocking(False)
    ep = select.epoll()
    ep.register(sock.fileno(), select.EPOLLIN | select.EPOLLOUT)
    sent = 0
    back = bytearray()
    while True:
        for _, ev in ep.poll(0.2):
            if ev & select.EPOLLOUT and sent < len(data):
                try:
                    sent += sock.send(data[sent:sent + 65536])
                except BlockingIOError:
                    pass
                if sent == len(data):
                    sock.shutdown(socket.SHUT_WR)
                    ep.modify(sock.fileno(), select.EPOLLIN)
            if ev & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return bytes(back)
                back += chunk


def client(port, form, done):
    data = payload()
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        back = client_block(sock, data) if form == "block" else client_epoll(sock, data)
    except OSError as e:
        sys.exit(f"error: {e!r}")
    sock.close()
    if back != data:
        sys.exit(f"error: echo of {len(back)} bytes differs from the {len(data)} sent")
    print(f"client ok {len(back)} {hashlib.sha256(back).hexdigest()}", flush=True)
    wait_file(done)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        client(int(sys.argv[2]), sys.argv[3], sys.argv[4])
