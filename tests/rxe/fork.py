# SPDX-License-Identifier: MIT
"""The programs of tests/rxe/fork.sh: a server that forks with a live SMC-R connection and
lets the child use it, and its client.

  fork.py server HOST PORT split|exec|close|spawn SIZE
  fork.py client HOST PORT SIZE BIND [afsmc]

The client sends HEAD + SIZE bytes of a fixed pattern (random.Random(7)) and reads what the
other end sends until EOF, while it sends. The server reads the first HEAD bytes itself,
checks them and answers BANNER (all of it over SMC-R), then forks:
  split: the child writes SIZE bytes of a second pattern (random.Random(8)), shuts down
         for writing and exits, while the parent reads the client's SIZE bytes: rsync's
         receiver and generator. The parent prints "got SHA256" of what it read;
  exec:  the child puts the socket on its stdin and stdout (dup2) and execs cat, which
         echoes the rest; the parent keeps its copy until cat ends;
  close: the parent closes its copy at once; the child echoes the rest itself;
  spawn: a child execs `true` without the socket, another exits; the parent echoes the rest.
The client must get BANNER + the second pattern (split) or BANNER + pattern[HEAD:] (exec,
close, spawn); it prints "intact SHA256" when it did, "short N: ERROR" when the stream ended early
(all N bytes the expected ones), "garbage at N" when a byte differs. afsmc: the client is
the kernel's own SMC (IPPROTO_SMC), no smcr in it."""
import hashlib, os, random, socket, sys

from echo_lib import read_exactly, send_and_check

HEAD = 64 << 10
BANNER = bytes(range(256)) * 64  # 16 KiB


def pattern(size, seed=7):
    return random.Random(seed).randbytes(size)


def expected(mode, size):
    """What the client must read."""
    return BANNER + (pattern(size, 8) if mode == "split" else pattern(HEAD + size)[HEAD:])


def child_exits(pid):
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def spawn_then_echo(c):
    """Two children that never use the connection and go with their copies: one execs a
    program that does not inherit the socket (close-on-exec, Python's default), one exits
    normally; then this process echoes the rest and closes."""
    pid = os.fork()
    if pid == 0:
        os.execvp("true", ["true"])
    print("child exit", child_exits(pid), flush=True)
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    print("child exit", child_exits(pid), flush=True)
    while b := c.recv(1 << 16):
        c.sendall(b)
    c.close()


def server(host, port, mode, size):
    data = pattern(HEAD + size)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(1)
    print("listening", flush=True)
    c, _ = ls.accept()
    ls.close()
    head = read_exactly(c, HEAD)
    print("head", "ok" if head == data[:HEAD] else "BAD", flush=True)
    c.sendall(BANNER)
    if mode == "spawn":
        spawn_then_echo(c)
        return
    pid = os.fork()
    if pid == 0:
        try:
            if mode == "split":
                c.sendall(pattern(size, 8))
                c.shutdown(socket.SHUT_WR)
            elif mode == "exec":
                os.dup2(c.fileno(), 0)
                os.dup2(c.fileno(), 1)
                os.execvp("cat", ["cat"])
            else:
                while True:
                    b = c.recv(1 << 16)
                    if not b:
                        break
                    c.sendall(b)
            os._exit(0)
        except OSError as e:
            print("child:", e, file=sys.stderr, flush=True)
            sys.exit(1)  # a normal exit: its exit handlers (smcr's report) run
    if mode == "split":
        h, n = hashlib.sha256(), 0
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            h.update(b)
            n += len(b)
        print("got", n, h.hexdigest(), flush=True)
    elif mode == "close":
        c.close()
    print("child exit", child_exits(pid), flush=True)
    c.close()


def client(host, port, size, bind, mode, afsmc):
    data = pattern(HEAD + size)
    want = expected(mode, size)
    # the kernel's SMC: IPPROTO_SMC (Linux >= 6.11), which takes AF_INET addresses
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 256 if afsmc else 0)
    c.bind((bind, 0))
    c.connect((host, port))
    try:
        c.sendall(data[:HEAD])
    except OSError as e:
        print("short 0: %s" % e, flush=True)
        return
    # the server's end of its stream may come first: ours goes on
    send_and_check(c, data, HEAD, want, eof_ends=False)

if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "server":
        server(a[1], int(a[2]), a[3], int(a[4]))
    elif a[0] == "want":
        print(hashlib.sha256(expected(a[1], int(a[2]))).hexdigest())
    elif a[0] == "sent":
        print(int(a[1]), hashlib.sha256(pattern(HEAD + int(a[1]))[HEAD:]).hexdigest())
    else:
        client(a[1], int(a[2]), int(a[3]), a[4], a[5], len(a) > 6 and a[6] == "afsmc")
