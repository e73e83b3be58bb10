# SPDX-License-Identifier: MIT
"""The programs of tests/rxe/tail.sh: a server whose accepted connection leaves it for
another program image or process while data flows both ways, and its client.

  tail.py server HOST PORT inetd|scm SIZE
  tail.py client HOST PORT SIZE BIND [afsmc]

The client sends SIZE bytes of a fixed pattern (random.Random(7)) and reads everything the
other end sends until EOF. The server reads the first HEAD bytes itself and checks them,
waits until the client's next PEEK bytes are in (unread: in its receive buffer), sends a
BANNER, then hands the connection over with the rest of the stream in flight both ways:
  inetd: subprocess.Popen(['cat'], stdin=conn, stdout=conn), then closes its copy;
  scm:   passes it over SCM_RIGHTS to a process it forked before accepting, which execs cat
         with it as stdin and stdout, then closes its copy.
cat echoes the rest, so the client must get BANNER + pattern[HEAD:] exactly; it prints
"intact SHA256" when it did, "short N: ERROR" when the stream ended early (N bytes, all of
them the expected ones), "garbage at N" when a byte differs. afsmc: the client is the
kernel's own SMC (IPPROTO_SMC), no smcr in it."""
import os, random, socket, subprocess, sys

from echo_lib import read_exactly, send_and_check

HEAD = 64 << 10
PEEK = 128 << 10
BANNER = bytes(range(256)) * 800  # 200 KiB


def pattern(size):
    return random.Random(7).randbytes(size)


def server(host, port, mode, size):
    data = pattern(size)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(1)
    child = None
    if mode == "scm":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child = os.fork()
        if child == 0:  # holds no connection: it gets one as a plain fd
            ours.close()
            ls.close()
            _, fds, _, _ = socket.recv_fds(theirs, 1, 1)
            os.dup2(fds[0], 0)
            os.dup2(fds[0], 1)
            os.execvp("cat", ["cat"])
        theirs.close()
    print("listening", flush=True)
    c, _ = ls.accept()
    head = read_exactly(c, HEAD)
    print("head", "ok" if head == data[:HEAD] else "BAD", flush=True)
    # the client's next bytes are here, unread: the handover finds them in our ring
    c.recv(PEEK, socket.MSG_PEEK | socket.MSG_WAITALL)
    c.sendall(BANNER)
    if mode == "inetd":
        p = subprocess.Popen(["cat"], stdin=c, stdout=c)
        c.close()
        print("cat exit", p.wait(), flush=True)
    else:
        socket.send_fds(ours, [b"x"], [c.fileno()])
        c.close()
        print("cat exit", os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), flush=True)


def client(host, port, size, bind, afsmc):
    data = pattern(size)
    want = BANNER + data[HEAD:]
    # the kernel's SMC: IPPROTO_SMC (Linux >= 6.11), which takes AF_INET addresses
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 256 if afsmc else 0)
    c.bind((bind, 0))
    c.connect((host, port))
    # HEAD + PEEK fit in the server's ring: no read needed before they are sent
    try:
        c.sendall(data[:HEAD + PEEK])
    except OSError as e:
        print("short 0: %s" % e, flush=True)
        return
    send_and_check(c, data, HEAD + PEEK, want)

if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "server":
        server(a[1], int(a[2]), a[3], int(a[4]))
    else:
        client(a[1], int(a[2]), int(a[3]), a[4], len(a) > 5 and a[5] == "afsmc")
