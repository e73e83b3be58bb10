#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Echo servers and clients for the 'apps' suite: ordinary Python socket
programs, the kind of unmodified application smcr must not disturb.

  echo.py server-asyncio HOST PORT        asyncio echo server
  echo.py server-fork HOST PORT           accept, fork, the child echoes
  echo.py client-asyncio HOST PORT CONNS BYTES
                                          CONNS concurrent connections
  echo.py client-threads HOST PORT THREADS CONNS BYTES
                                          THREADS threads, CONNS connections each

Clients send deterministic data (seeded by connection number) in chunks of
varying size, check that every byte comes back, and print one summary line that
is the same in every correct run. Every process reports on stderr whether
libsmcr.so is mapped into it ("preload=1"), so a test can prove the library
was in the very process that did the work, forked children included.
"""

import asyncio
import hashlib
import os
import random
import signal
import socket
import sys
import threading

CHUNK_SIZES = (1, 7, 100, 1460, 4096, 16384, 65536)
DEADLINE_SECONDS = 60


def preload_state():
    with open("/proc/self/maps") as maps:
        return "1" if any(line.rstrip().endswith("/libsmcr.so") for line in maps) else "0"


def report(role):
    # One write(2), so the lines of concurrent children never interleave.
    sys.stderr.flush()
    os.write(2, f"{role} pid {os.getpid()} preload={preload_state()}\n".encode())


def payload(conn_index, nbytes):
    return random.Random(conn_index).randbytes(nbytes)


def chunks(conn_index, data):
    """Splits data into chunks whose sizes vary with the connection."""
    rng = random.Random(1000 + conn_index)
    pos = 0
    while pos < len(data):
        size = rng.choice(CHUNK_SIZES)
        yield data[pos:pos + size]
        pos += size


def summary(kind, conns, nbytes, digests):
    total = hashlib.sha256("".join(digests).encode()).hexdigest()
    return f"{kind}: {conns} connections x {nbytes} bytes echoed, digest {total}"


# --------------------------------------------------------------------------
# Servers

async def echo_connection(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def asyncio_server(host, port):
    server = await asyncio.start_server(echo_connection, host, port, reuse_address=True)
    async with server:
        await server.serve_forever()


def echo_blocking(conn):
    while True:
        data = conn.recv(65536)
        if not data:
            return
        conn.sendall(data)


def fork_server(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    while True:
        conn, _ = listener.accept()
        pid = os.fork()
        if pid == 0:
            listener.close()
            report("child")
            signal.alarm(DEADLINE_SECONDS)
            try:
                echo_blocking(conn)
            finally:
                conn.close()
                os._exit(0)
        conn.close()


# --------------------------------------------------------------------------
# Clients

async def asyncio_one(host, port, index, nbytes):
    reader, writer = await asyncio.open_connection(host, port)
    data = payload(index, nbytes)
    received = bytearray()
    for chunk in chunks(index, data):
        writer.write(chunk)
        await writer.drain()
        received += await reader.readexactly(len(chunk))
    writer.write_eof()
    if await reader.read() != b"":
        raise RuntimeError(f"connection {index}: extra bytes after the echo")
    writer.close()
    await writer.wait_closed()
    if bytes(received) != data:
        raise RuntimeError(f"connection {index}: echo differs")
    return hashlib.sha256(received).hexdigest()


async def asyncio_client(host, port, conns, nbytes):
    tasks = [asyncio_one(host, port, i, nbytes) for i in range(conns)]
    digests = await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_SECONDS)
    print(summary("asyncio", conns, nbytes, digests))


def recv_exactly(sock, nbytes):
    buf = bytearray()
    while len(buf) < nbytes:
        data = sock.recv(nbytes - len(buf))
        if not data:
            raise RuntimeError("connection closed early")
        buf += data
    return bytes(buf)


def thread_worker(host, port, first, count, nbytes, digests, errors):
    try:
        for index in range(first, first + count):
            with socket.create_connection((host, port), timeout=DEADLINE_SECONDS) as sock:
                data = payload(index, nbytes)
                received = bytearray()
                for chunk in chunks(index, data):
                    sock.sendall(chunk)
                    received += recv_exactly(sock, len(chunk))
                sock.shutdown(socket.SHUT_WR)
                if sock.recv(1) != b"":
                    raise RuntimeError(f"connection {index}: extra bytes after the echo")
                if bytes(received) != data:
                    raise RuntimeError(f"connection {index}: echo differs")
                digests[index] = hashlib.sha256(received).hexdigest()
    except Exception as exc:  # reported by the main thread
        errors.append(f"thread starting at {first}: {exc!r}")


def threads_client(host, port, nthreads, conns_each, nbytes):
    total = nthreads * conns_each
    digests = [""] * total
    errors = []
    threads = [threading.Thread(target=thread_worker,
                                args=(host, port, t * conns_each, conns_each, nbytes, digests, errors))
               for t in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_SECONDS)
        if t.is_alive():
            errors.append("a thread did not finish in time")
            break
    if errors:
        for e in errors:
            print(e, file=sys.stderr)
        sys.exit(1)
    print(summary(f"{nthreads} threads", total, nbytes, digests))


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    mode, host, port = argv[1], argv[2], int(argv[3])
    report("client" if mode.startswith("client") else "server")
    signal.alarm(DEADLINE_SECONDS * 2 if mode.startswith("client") else 0)
    if mode == "server-asyncio":
        asyncio.run(asyncio_server(host, port))
    elif mode == "server-fork":
        fork_server(host, port)
    elif mode == "client-asyncio":
        asyncio.run(asyncio_client(host, port, int(argv[4]), int(argv[5])))
    elif mode == "client-threads":
        threads_client(host, port, int(argv[4]), int(argv[5]), int(argv[6]))
    else:
        print(f"unknown mode {mode}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
