#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An echo server and a client that sends a file while reading the echo back.

  echo.py server PORT        thread per connection, on 127.0.0.1
  echo.py client PORT FILE   prints "BYTES SHA256" of what came back
"""
import hashlib
import socket
import sys
import threading


def serve(conn):
    with conn:
        while True:
            data = conn.recv(1 << 16)
            if not data:
                return
            conn.sendall(data)


def server(port):
    listener = socket.create_server(("127.0.0.1", port))
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


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
