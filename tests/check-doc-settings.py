#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every environment setting the library parses is documented where users look.

  check-doc-settings.py [SOURCE_ROOT]

The settings are the quoted "SMC_*"/"SMCR_*" names in src/common/config.c and
src/common/rules.c (the places the library reads its configuration). Each must appear in
docs/smcr.7 (installed) and docs/usage.md. Exits 1 and names what is missing.
"""
import os
import re
import sys

SOURCES = (os.path.join("src", "common", "config.c"), os.path.join("src", "common", "rules.c"))
DOCS = (os.path.join("docs", "smcr.7"), os.path.join("docs", "usage.md"))


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = {}
    for source in SOURCES:
        with open(os.path.join(root, source), encoding="utf-8") as f:
            for name in re.findall(r'"(SMCR?_[A-Z_]+)"', f.read()):
                found.setdefault(name, source)
    names = sorted(found)
    if not names:
        print(f"check-doc-settings: no settings found in {', '.join(SOURCES)}")
        return 1
    missing = 0
    for doc in DOCS:
        try:
            with open(os.path.join(root, doc), encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            print(f"{doc}: {e.strerror}")
            missing += len(names)
            continue
        for name in names:
            if not re.search(r"(?<![A-Z_])" + re.escape(name) + r"(?![A-Z_])", text):
                print(f"{doc}: {name} (read by {found[name]}) is not documented")
                missing += 1
    print(f"check-doc-settings: {len(names)} settings, {missing} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
