#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check that tshark (an independent SMC decoder) reads our messages right.

  check-tshark.py ours CLC_PCAP_PROGRAM
      Generate a pcap of our encoded CLC (TCP) and LLC/CDC (RoCEv2) messages
      plus a manifest of expected
      fields (clc_pcap.c), dissect it with tshark and compare field by field.
      Fails on any mismatch, on any TCP payload not decoded as SMC, and on any
      malformed/error mark (except frames the manifest lists as a known
      dissector limitation).
  check-tshark.py kernel KERNEL_DATA_DIR
      Baseline: the kernel's own captures decode to the CLC and CDC messages
      recorded in tests/data/kernel-smcr/README.md.

Exit 0 pass, 1 fail, 77 skip (no tshark).
"""
import os
import shutil
import subprocess
import sys
import tempfile

TSHARK_TIMEOUT = 120


def tshark(*args):
    res = subprocess.run(["tshark", *args], capture_output=True, text=True,
                         timeout=TSHARK_TIMEOUT)
    if res.returncode != 0:
        sys.exit(f"tshark {' '.join(args)} failed: {res.stderr}")
    return res.stdout


def fields(pcap, names, display_filter="smc"):
    """{frame number: {field: value}} for frames matching display_filter."""
    args = ["-r", pcap, "-Y", display_filter, "-T", "fields", "-e", "frame.number",
            "-E", "occurrence=a", "-E", "aggregator=,"]
    for name in names:
        args += ["-e", name]
    out = {}
    for line in tshark(*args).splitlines():
        parts = line.split("\t")
        out[int(parts[0])] = dict(zip(names, parts[1:]))
    return out


def bad_frames(pcap):
    """Frames tshark marks malformed or with an error-level expert item."""
    out = tshark("-r", pcap, "-Y", "_ws.malformed || _ws.expert.severity == error",
                 "-T", "fields", "-e", "frame.number")
    return {int(x) for x in out.split()}


def check_ours(generator):
    errors = []
    with tempfile.TemporaryDirectory(prefix="smcr-wire-") as tmp:
        pcap, manifest = os.path.join(tmp, "clc.pcap"), os.path.join(tmp, "clc.manifest")
        subprocess.run([generator, pcap, manifest], check=True, timeout=60)
        expected, allowed_bad = [], {}
        with open(manifest, encoding="ascii") as f:
            for line in f:
                frame, name, value = line.rstrip("\n").split("\t")
                if name == "_allow_malformed":
                    allowed_bad[int(frame)] = value
                else:
                    expected.append((int(frame), name, value))
        names = sorted({name for _, name, _ in expected})
        got = fields(pcap, names)
        for frame, name, value in expected:
            actual = got.get(frame, {}).get(name)
            if actual != value:
                errors.append(f"frame {frame}: {name} = {actual!r}, want {value!r}")
        # Every frame carrying payload must have been taken by the SMC dissector.
        payload = fields(pcap, ["smc.clc_msg"], "tcp.len > 0")
        for frame, f in sorted(payload.items()):
            if not f["smc.clc_msg"]:
                errors.append(f"frame {frame}: TCP payload not decoded as SMC CLC")
        roce = fields(pcap, ["smc.llc_msg"], "udp.port == 4791")
        for frame, f in sorted(roce.items()):
            if not f["smc.llc_msg"]:
                errors.append(f"frame {frame}: RoCE SEND not decoded as SMC LLC/CDC")
        for frame in sorted(bad_frames(pcap)):
            if frame in allowed_bad:
                print(f"frame {frame}: malformed as expected ({allowed_bad[frame]})")
            else:
                errors.append(f"frame {frame}: tshark reports malformed/error")
        print(f"{len(payload)} CLC and {len(roce)} LLC/CDC messages, {len(expected)} field "
              f"checks, {len(errors)} errors")
    return errors


# What tests/data/kernel-smcr/README.md records for each capture.
KERNEL_CLC = {
    "a-first-contact.pcapng": {4: ("1", "156"), 6: ("2", "160"), 8: ("3", "180")},
    "b-second-conn.pcapng": {4: ("1", "156"), 10: ("2", "108"), 16: ("3", "108")},
    "c-server-decline.pcapng": {4: ("1", "156"), 6: ("4", "44")},
    "c2-client-decline.pcapng": {4: ("4", "28")},
}
# capture a: CDC frame -> (seqno, token)
KERNEL_CDC_A = {82: ("0x0001", "0x00000001"), 85: ("0x0001", "0x00000002"),
                121: ("0x0002", "0x00000001"), 124: ("0x0002", "0x00000002"),
                127: ("0x0003", "0x00000002"), 130: ("0x0003", "0x00000001"),
                133: ("0x0004", "0x00000002")}


def check_kernel(data_dir):
    errors = []
    for name, want in KERNEL_CLC.items():
        pcap = os.path.join(data_dir, name)
        got = fields(pcap, ["smc.clc_msg", "smc.length"], "smc.clc_msg")
        if set(got) != set(want):
            errors.append(f"{name}: CLC frames {sorted(got)}, want {sorted(want)}")
        for frame, (typ, length) in want.items():
            g = got.get(frame, {})
            if (g.get("smc.clc_msg"), g.get("smc.length")) != (typ, length):
                errors.append(f"{name} frame {frame}: {g}, want type {typ} length {length}")
            if frame in bad_frames(pcap):
                errors.append(f"{name} frame {frame}: CLC frame marked malformed")
    pcap = os.path.join(data_dir, "a-first-contact.pcapng")
    got = fields(pcap, ["smc.rmbe.ctrl.seqno", "smc.rmbe.ctrl.alert.token"],
                 "smc.rmbe.ctrl.seqno")
    for frame, want in KERNEL_CDC_A.items():
        g = got.get(frame, {})
        if (g.get("smc.rmbe.ctrl.seqno"), g.get("smc.rmbe.ctrl.alert.token")) != want:
            errors.append(f"a frame {frame}: CDC {g}, want seqno/token {want}")
    print(f"kernel captures: {sum(map(len, KERNEL_CLC.values()))} CLC and "
          f"{len(KERNEL_CDC_A)} CDC frames checked, {len(errors)} errors")
    return errors


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("ours", "kernel"):
        sys.exit(__doc__)
    if shutil.which("tshark") is None:
        print("tshark not installed: skip")
        return 77
    errors = check_ours(sys.argv[2]) if sys.argv[1] == "ours" else check_kernel(sys.argv[2])
    for e in errors:
        print("FAIL:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
