#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An echo server and a client that sends a file while reading the echo back.

  echo_stream.py server PORT        thread per connection, on 127.0.0.1
  echo_stream.py client PORT FILE   prints "BYTES SHA256" of what came back

The server's loop is the rxe tests' (tests/rxe/echo_lib.py serve()).
"""
import hashlib
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rxe"))
import echo_lib  # noqa: E402 (found through the path above)


def server(port):
    listener = socket.create_server(("127.0.0.1", port))
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=echo_lib.serve, args=(conn,), daemon=True).start()


def client(port, path):
    with open(path, "rb") as f:
        data = f.read()
    conn = socket.create_connection(("127.0.0.1", port))

    def send():
        conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    sender.start()
    digest, total = hashlib.sha256(), 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        digest.update(chunk)
        total += len(chunk)
    sender.join()
    conn.close()
    print(total, digest.hexdigest())


if __name__ == "__main__":
    if sys.argv[1:2] == ["server"]:
        server(int(sys.argv[2]))
    elif sys.argv[1:2] == ["client"]:
        client(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(__doc__)
