#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A server that answers late, and an event-loop client that must not wait for it.

    late_server.py server PORT        listen, say "listening", stop itself
                                      (SIGSTOP); once continued, echo one
                                      connection's payload
    late_server.py client PORT WAIT   non-blocking connect, then an event loop
                                      (WAIT: epoll or poll) with 0.2 s ticks;
                                      after 5 ticks with nothing to do it says
                                      "looping", then waits to be writable,
                                      echoes a payload and checks it
"""
import os
import select
import signal
import socket
import sys

PAYLOAD = 64 * 1024 + 3


def server(port):
    lsn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind(("127.0.0.1", port))
    lsn.listen(4)
    print("listening", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    conn, _ = lsn.accept()
    got = bytearray()
    while len(got) < PAYLOAD:
        chunk = conn.recv(PAYLOAD - len(got))
        if not chunk:
            sys.exit("error: EOF before the whole payload")
        got += chunk
    conn.sendall(got)
    conn.close()


class Waiter:
    """One fd, waited on with epoll or poll (both go through the library)."""

    def __init__(self, how, fd):
        self.fd = fd
        self.how = how
        self.obj = select.epoll() if how == "epoll" else select.poll()
        self.obj.register(fd, select.EPOLLOUT if how == "epoll" else select.POLLOUT)

    def want(self, mask):
        self.obj.modify(self.fd, mask)

    def wait(self, seconds):
        if self.how == "epoll":
            return [ev for _, ev in self.obj.poll(seconds)]
        return [ev for _, ev in self.obj.poll(int(seconds * 1000))]


def client(port, how):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.connect_ex(("127.0.0.1", port))
    waiter = Waiter(how, sock.fileno())
    idle = 0
    while True:
        events = waiter.wait(0.2)
        if events and events[0] & (select.POLLERR | select.POLLHUP):
            sys.exit(f"error: the connection failed (events {events[0]:#x})")
        if events:
            break
        idle += 1
        if idle == 5:
            print("looping", flush=True)
    if idle < 5:
        sys.exit(f"error: writable after {idle} idle ticks, before the server ran")
    data = os.urandom(PAYLOAD)
    sent = 0
    while sent < len(data):
        try:
            sent += sock.send(data[sent:])
        except BlockingIOError:
            waiter.wait(1.0)
    waiter.want(select.POLLIN)
    got = bytearray()
    while len(got) < PAYLOAD:
        waiter.wait(1.0)
        try:
            chunk = sock.recv(PAYLOAD - len(got))
        except BlockingIOError:
            continue
        if not chunk:
            sys.exit(f"error: EOF after {len(got)} bytes")
        got += chunk
    if bytes(got) != data:
        sys.exit("error: the echo differs")
    print(f"echoed {PAYLOAD} bytes after {idle} idle ticks", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    else:
        client(int(sys.argv[2]), sys.argv[3])
