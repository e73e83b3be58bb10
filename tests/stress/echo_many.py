#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Many concurrent connections for the 'stress' suite: an epoll echo server and
a client that opens all its non-blocking connections at once, echoes a
checksummed payload on each, holds them all open, then closes them.

  echo_many.py server HOST PORT
      level-triggered epoll echo server, one process, non-blocking sockets;
      prints "listening" once it listens.  SMCR_STRESS_NOFILE in its
      environment sets its RLIMIT_NOFILE (else raised to the hard limit).
  echo_many.py client HOST PORT CONNS BYTES DEADLINE SERVER_PID
      CONNS connections of BYTES each; fails on any connection not echoed
      intact within DEADLINE seconds, on any error an epoll event or a call
      reports, and on any byte after the echo. Prints the resources (fds, RSS,
      memfd mappings, live heap) of itself and of the server before, while
      all the connections are open, and after they closed, one line each:
        resources PHASE client fds=N rss_kib=N memfd_maps=N heap=N server fds=N ...

heap is the bytes the AddressSanitizer allocator counts as allocated and not
freed (blocks in its quarantine not included), -1 in a process without that
allocator.  The server reports its own on SIGUSR1, into a file in
SMCR_STRESS_HEAP_DIR (both ends need it in their environment).

Every line that reports a problem starts with "error:"; the exit status is 0
only when every connection echoed intact and no error was seen.
"""

import ctypes
import errno
import hashlib
import os
import random
import resource
import select
import signal
import socket
import sys
import time

LISTEN_BACKLOG = 4096
# fds a server may keep after its connections closed (the library's pools of
# ring memory); the test states and checks its own tolerance.
SERVER_FD_SLACK = 64
# memfd mappings it may keep (its pool of idle rings and cache of the peer's
# mappings): many_echo.sh sets the number it judges by.
SERVER_MAPS_MAX = int(os.environ.get("SMCR_STRESS_MAPS_MAX", "64"))


def set_fd_limit():
    """RLIMIT_NOFILE: SMCR_STRESS_NOFILE if set (to run a process out of
    fds on purpose), else raised to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = int(os.environ.get("SMCR_STRESS_NOFILE") or hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))


def own_heap():
    """Bytes the AddressSanitizer allocator holds allocated in this process, or
    -1 without it (a process without libasan loaded)."""
    try:
        f = ctypes.CDLL(None).__sanitizer_get_current_allocated_bytes
    except (AttributeError, OSError):
        return -1
    f.restype = ctypes.c_size_t
    return int(f())


def heap_file(pid):
    directory = os.environ.get("SMCR_STRESS_HEAP_DIR")
    return os.path.join(directory, f"heap.{pid}") if directory else None


# The server's heap file, open from its start: a server that ran out of fds
# still answers.  Each answer is one fixed-size record "SEQ HEAP" at offset 0.
heap_fd = -1
heap_seq = 0


def publish_heap(signum, frame):
    """SIGUSR1 in the server: its heap, with the answer's sequence number."""
    global heap_seq
    heap_seq += 1
    os.pwrite(heap_fd, f"{heap_seq:20d} {own_heap():20d}\n".encode(), 0)


def read_heap_file(path):
    """(SEQ, HEAP) of the server's last answer, or None if none is whole."""
    try:
        with open(path) as f:
            seq, heap = f.read().split()
        return int(seq), int(heap)
    except (FileNotFoundError, ValueError):
        return None


def server_heap(pid):
    """The server's heap as it answers SIGUSR1; -1 if it cannot."""
    path = heap_file(pid)
    if not path or own_heap() < 0:
        return -1
    before = read_heap_file(path)
    if before is None:
        return -1
    os.kill(pid, signal.SIGUSR1)
    for _ in range(100):
        now = read_heap_file(path)
        if now is not None and now[0] > before[0]:
            return now[1]
        time.sleep(0.1)
    return -1


def resources(pid, heap=True):
    """fds, RSS (KiB), memfd mappings and, if asked, heap (bytes) of a live
    process."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    with open(f"/proc/{pid}/maps") as f:
        memfd = sum(1 for line in f if "/memfd:" in line)
    if heap:
        heap = own_heap() if pid == os.getpid() else server_heap(pid)
    return fds, rss, memfd, heap


def report(phase, server_pid):
    """Prints one "resources" line; returns the server's fd count."""
    parts = [f"resources {phase}"]
    for role, pid in (("client", os.getpid()), ("server", server_pid)):
        fds, rss, memfd, heap = resources(pid)
        parts.append(f"{role} fds={fds} rss_kib={rss} memfd_maps={memfd} heap={heap}")
    print(" ".join(parts), flush=True)
    return fds


# --------------------------------------------------------------------------
# Server

def server(host, port):
    global heap_fd
    if heap_file(os.getpid()) and own_heap() >= 0:
        heap_fd = os.open(heap_file(os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        publish_heap(0, None)
        signal.signal(signal.SIGUSR1, publish_heap)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(LISTEN_BACKLOG)
    listener.setblocking(False)
    ep = select.epoll()
    ep.register(listener.fileno(), select.EPOLLIN)
    conns = {}      # fd -> socket
    pending = {}    # fd -> bytes not yet echoed
    print("listening", flush=True)
    while True:
        for fd, ev in ep.poll():
            if fd == listener.fileno():
                while True:
                    try:
                        c, _ = listener.accept()
                    except BlockingIOError:
                        break
                    except OSError as e:
                        print(f"error: accept: {e!r}", flush=True)
                        break
                    c.setblocking(False)
                    conns[c.fileno()] = c
                    pending[c.fileno()] = b""
                    ep.register(c.fileno(), select.EPOLLIN)
                continue
            c = conns[fd]
            done = False
            if ev & select.EPOLLERR:
                err = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                print(f"error: server fd {fd}: EPOLLERR (SO_ERROR {err})", flush=True)
                done = True
            if not done and ev & (select.EPOLLIN | select.EPOLLHUP) and not pending[fd]:
                try:
                    data = c.recv(65536)
                    if not data:
                        done = True
                    else:
                        pending[fd] = data
                except BlockingIOError:
                    pass
                except OSError as e:
                    print(f"error: server fd {fd}: recv: {e!r}", flush=True)
                    done = True
            if not done and pending[fd]:
                try:
                    n = c.send(pending[fd])
                    pending[fd] = pending[fd][n:]
                except BlockingIOError:
                    pass
                except OSError as e:
                    print(f"error: server fd {fd}: send: {e!r}", flush=True)
                    done = True
                if not done:
                    # Read again only once everything read went back out.
                    ep.modify(fd, select.EPOLLOUT if pending[fd] else select.EPOLLIN)
            if done:
                ep.unregister(fd)
                del conns[fd], pending[fd]
                c.close()


# --------------------------------------------------------------------------
# Client

class Conn:
    __slots__ = ("index", "sock", "data", "sent", "received", "state")

    def __init__(self, index, sock, nbytes):
        self.index = index
        self.sock = sock
        self.data = random.Random(index).randbytes(nbytes)
        self.sent = 0
        self.received = bytearray()
        self.state = "connecting"   # -> "echoing" -> "echoed"


def client(host, port, nconns, nbytes, deadline_s, server_pid):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    errors = []
    server_fds_before = report("before", server_pid)
    ep = select.epoll()
    conns = {}
    for i in range(nconns):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS):
            errors.append(f"connection {i}: connect: {os.strerror(rc)}")
            s.close()
            continue
        c = Conn(i, s, nbytes)
        conns[s.fileno()] = c
        ep.register(s.fileno(), select.EPOLLOUT)
    echoed = 0
    deadline = time.monotonic() + deadline_s
    while echoed + len(errors) < nconns and time.monotonic() < deadline and len(errors) < 20:
        for fd, ev in ep.poll(1.0):
            c = conns[fd]
            if ev & select.EPOLLERR:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                errors.append(f"connection {c.index} ({c.state}): EPOLLERR, SO_ERROR {err} "
                              f"({os.strerror(err) if err else 'none'})")
                ep.unregister(fd)
                continue
            try:
                if c.state == "connecting" and ev & select.EPOLLOUT:
                    err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, os.strerror(err))
                    c.state = "echoing"
                if c.state == "echoing" and c.sent < nbytes and ev & select.EPOLLOUT:
                    c.sent += c.sock.send(c.data[c.sent:])
                    if c.sent == nbytes:
                        ep.modify(fd, select.EPOLLIN)
                if c.state == "echoing" and ev & (select.EPOLLIN | select.EPOLLHUP):
                    b = c.sock.recv(65536)
                    if not b:
                        raise OSError(0, f"EOF after {len(c.received)} of {nbytes} bytes")
                    c.received += b
                    if len(c.received) > nbytes:
                        raise OSError(0, "more bytes than were sent")
                    if len(c.received) == nbytes:
                        if hashlib.sha256(c.received).digest() != hashlib.sha256(c.data).digest():
                            raise OSError(0, "echo differs from what was sent")
                        c.state = "echoed"
                        echoed += 1
                        ep.unregister(fd)
            except BlockingIOError:
                pass
            except OSError as e:
                errors.append(f"connection {c.index} ({c.state}): {e!r}")
                ep.unregister(fd)
    stuck = [c for c in conns.values() if c.state != "echoed"]
    print(f"echoed {echoed} of {nconns}", flush=True)
    if stuck and not errors:
        errors.append(f"{len(stuck)} connection(s) not echoed within {deadline_s}s")
    for c in stuck[:10]:
        print(f"unfinished: connection {c.index} fd {c.sock.fileno()} state {c.state} "
              f"sent {c.sent} received {len(c.received)} local {c.sock.getsockname()}",
              flush=True)
    report("during", server_pid)
    # Every connection ends cleanly: EOF to the server, which closes its end;
    # the client reads that EOF before closing its own.
    for c in conns.values():
        if c.state == "echoed":
            c.sock.setblocking(True)
            c.sock.settimeout(max(1.0, deadline - time.monotonic()))
            try:
                c.sock.shutdown(socket.SHUT_WR)
                b = c.sock.recv(1)
                if b:
                    errors.append(f"connection {c.index}: bytes after the echo")
            except OSError as e:
                errors.append(f"connection {c.index}: closing: {e!r}")
        c.sock.close()
    ep.close()
    conns.clear()
    # Resources once both ends closed: the server's fds and mappings are back
    # when it has seen every EOF, which takes a busy machine a while; this
    # waits for that (a leak stays past the wait), and the test judges the
    # numbers.
    settle = time.monotonic() + 30
    while time.monotonic() < settle:
        fds, _, maps, _ = resources(server_pid, heap=False)
        if fds <= server_fds_before + SERVER_FD_SLACK and maps <= SERVER_MAPS_MAX:
            break
        time.sleep(0.2)
    report("after", server_pid)
    for e in errors:
        print(f"error: {e}", flush=True)
    return 1 if errors or stuck else 0


def main(argv):
    set_fd_limit()
    if len(argv) >= 4 and argv[1] == "server":
        server(argv[2], int(argv[3]))
        return 0
    if len(argv) == 8 and argv[1] == "client":
        return client(argv[2], int(argv[3]), int(argv[4]), int(argv[5]),
                      float(argv[6]), int(argv[7]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
