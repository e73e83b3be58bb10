#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""confine_listener.py PORT: listens on 127.0.0.1:PORT, then confines its own
system calls with prctl(PR_SET_SECCOMP) (a filter that allows every call: the
confinement itself is what matters), then echoes one connection and prints
"first HEX" with the first bytes it read, as a sandboxed server would."""
import ctypes
import socket
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, SECCOMP_MODE_FILTER = 22, 38, 2
BPF_RET_K, SECCOMP_RET_ALLOW = 0x06, 0x7FFF0000


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
insns = ctypes.create_string_buffer(struct.pack("HBBI", BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
prog = SockFprog(1, ctypes.addressof(insns))
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or \
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0):
    sys.exit(f"prctl: errno {ctypes.get_errno()}")
print("confined", flush=True)
c = s.accept()[0]
got = bytearray()
while b := c.recv(65536):
    if not got:
        print("first", b[:8].hex(), flush=True)
    got += b
    c.sendall(b)
c.close()
