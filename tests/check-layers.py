#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering rule of the source tree (docs/design.md §2), checked on the text.

The protocol engine (src/smcr/) knows nothing of interposition: it includes
nothing from src/preload/, nor the interposer's libc table or recursion guard
(src/common/real.h, guard.h), and names neither; it reaches libc through the
table its embedder hands to smcr_engine_init() (src/smcr/libc.h).  The
interposer (src/preload/) knows nothing of wire formats: it includes only the
engine's public headers (include/smcr/), never src/smcr/ internals.

usage: check-layers.py SOURCE_ROOT   (prints each violation; exit 1 if any)
"""
import pathlib
import re
import sys

ENGINE_FORBIDDEN = [
    (re.compile(r'#\s*include\s+"preload/'), 'includes the interposer'),
    (re.compile(r'#\s*include\s+"common/(real|guard)\.h"'), "includes the interposer's libc table or guard"),
    (re.compile(r'\bsmcr_real(\.|_bind\b|_is_bound\b)'), "calls the interposer's libc table"),
    (re.compile(r'\bsmcr_guard_(enter|leave|inside)\b'), "enters the interposer's recursion guard"),
    (re.compile(r'\b(pthread_atfork|atexit)\s*\('), 'registers a fork or exit handler of its own (engine.c calls the modules)'),
]
PRELOAD_FORBIDDEN = [
    (re.compile(r'#\s*include\s+"smcr/(?!engine\.h|stats_abi\.h)[a-z_]+\.h"'), 'includes an engine internal'),
]


def strip_comments(text):
    return re.sub(r'/\*.*?\*/|//[^\n]*', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)


# An embedder of the engine (for plain programs), kept beside it.
EMBEDDERS = {'src/smcr/standalone.c'}


def check(root, subdir, rules, problems):
    for path in sorted((root / subdir).glob('*.[ch]')):
        if str(path.relative_to(root)) in EMBEDDERS:
            continue
        code = strip_comments(path.read_text())
        for lineno, line in enumerate(code.splitlines(), 1):
            for rx, why in rules:
                if rx.search(line):
                    problems.append(f'{path.relative_to(root)}:{lineno}: {why}: {line.strip()}')


def main():
    root = pathlib.Path(sys.argv[1])
    problems = []
    check(root, 'src/smcr', ENGINE_FORBIDDEN, problems)
    check(root, 'src/preload', PRELOAD_FORBIDDEN, problems)
    for p in problems:
        print(p)
    if not (root / 'src/smcr/engine.c').exists():
        problems.append('src/smcr/engine.c missing')
    print(f'{len(problems)} layering violations')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
