#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""confine_fork.py server PORT DIR | client PORT DIR INPUT OUTPUT

server: listens on 127.0.0.1:PORT and forks, as a pre-forking server does;
the parent only waits for the child (its listener stays registered for SMC:
it registered it).  The child confines its own system calls with
prctl(PR_SET_SECCOMP) (a filter that allows every call: the confinement is
what matters), prints "child PID", accepts one connection on the inherited
listener, echoes it to its end and prints "first HEX" with the first bytes it
read, then "echoed"; then it reads a second connection, non-blocking, until it
has 4 bytes, prints "second HEX" with them and echoes them.
client: connects, sends INPUT, reads the echo into OUTPUT, prints "pid PID"
and "done".
Each process then waits until DIR/release exists, so that its published
stats can be read while it still runs."""
import ctypes
import os
import select
import socket
import struct
import sys
import time

PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, SECCOMP_MODE_FILTER = 22, 38, 2
BPF_RET_K, SECCOMP_RET_ALLOW = 0x06, 0x7FFF0000


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def confine():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
    insns = ctypes.create_string_buffer(struct.pack("HBBI", BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    prog = SockFprog(1, ctypes.addressof(insns))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0):
        sys.exit(f"prctl: errno {ctypes.get_errno()}")


def wait_release(d):
    for _ in range(1200):
        if os.path.exists(os.path.join(d, "release")):
            return
        time.sleep(0.05)
    sys.exit("never released")


def server(port, d):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    pid = os.fork()
    if pid:
        s.close()
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    confine()
    print("child", os.getpid(), flush=True)
    c = s.accept()[0]
    first = None
    while b := c.recv(65536):
        if first is None:
            first = b[:8]
            print("first", first.hex(), flush=True)
        c.sendall(b)
    c.close()
    print("echoed", flush=True)
    # The second, as an event loop reads: non-blocking, after select.
    c = s.accept()[0]
    c.setblocking(False)
    got = b""
    while len(got) < 4:
        select.select([c], [], [], 30)
        try:
            b = c.recv(65536)
        except BlockingIOError:
            continue
        if not b:
            break
        got += b
    print("second", got.hex(), flush=True)
    c.setblocking(True)
    c.sendall(got)
    wait_release(d)
    c.close()


def client(port, d, inp, out):
    data = open(inp, "rb").read()
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    got = bytearray()
    while b := c.recv(65536):
        got += b
    open(out, "wb").write(got)
    print("pid", os.getpid(), flush=True)
    print("done", flush=True)
    wait_release(d)
    c.close()


if sys.argv[1] == "server":
    server(int(sys.argv[2]), sys.argv[3])
else:
    client(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
