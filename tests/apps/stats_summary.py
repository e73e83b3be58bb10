#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""stats_summary.py [--pids "PID ..."] [--none] SOURCE...: one line, "SMC FALLBACKS
REASONS", summed over the processes of `smcr-stat stats --json` documents.

  SOURCE     a file (empty ones are skipped: a process without smcr) or - (stdin)
  --pids     count only these processes (an empty list counts none)
  --none     print "none" when no process was in any document (smcr not loaded)

REASONS is NAME:COUNT,... sorted by name, or "-".
"""
import json
import sys

args = sys.argv[1:]
pids = None
say_none = False
sources = []
while args:
    a = args.pop(0)
    if a == "--pids":
        pids = {int(p) for p in args.pop(0).split()}
    elif a == "--none":
        say_none = True
    else:
        sources.append(a)
smc = fb = seen = 0
reasons = {}
for source in sources:
    text = (sys.stdin.read() if source == "-" else open(source).read()).strip()
    if not text:
        continue
    for p in json.loads(text)["processes"]:
        if pids is not None and p["pid"] not in pids:
            continue
        seen += 1
        smc += p["handshakes_smc"]
        fb += p["fallbacks"]
        for r in p["fallback_reasons"]:
            reasons[r["name"]] = reasons.get(r["name"], 0) + r["count"]
if say_none and not seen:
    print("none")
else:
    print(smc, fb, ",".join(f"{k}:{v}" for k, v in sorted(reasons.items())) or "-")
