#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering rule of the source tree (docs/design.md §2), checked on the text.

The protocol engine (src/smcr/) knows nothing of interposition: it includes
nothing from src/preload/ (by path or by a header name only src/preload/ has),
nor the interposer's libc table or recursion guard (src/common/real.h,
guard.h), and names neither; it reaches libc through the table its embedder
hands to smcr_engine_init() (src/smcr/libc.h).  It asks a transport what it
is through struct smcr_transport_ops, never by comparing ops pointers.  The
interposer (src/preload/) knows nothing of wire formats: it includes only the
engine's public headers (include/smcr/), never src/smcr/ internals, and names
a decline reason only as SMCR_CLC_DECL_* (include/smcr/decline.h), never by
its number.

usage: check-layers.py SOURCE_ROOT   (prints each violation; exit 1 if any)
       check-layers.py --self-test   (each rule fires on a tree made to break it)
"""
import pathlib
import re
import sys
import tempfile

ENGINE_FORBIDDEN = [
    (re.compile(r'#\s*include\s+"(\.\./)*preload/'), 'includes the interposer'),
    (re.compile(r'#\s*include\s+"common/(real|guard)\.h"'), "includes the interposer's libc table or guard"),
    (re.compile(r'\bsmcr_real(\.|_bind\b|_is_bound\b)'), "calls the interposer's libc table"),
    (re.compile(r'\bsmcr_guard_(enter|leave|inside)\b'), "enters the interposer's recursion guard"),
    (re.compile(r'\b(pthread_atfork|atexit)\s*\('), 'registers a fork or exit handler of its own (engine.c calls the modules)'),
    (re.compile(r'(==|!=)\s*&\s*\w+_ops\b|&\s*\w+_ops\s*(==|!=)'),
     'compares transport ops pointers (ask the transport: a field of smcr_transport_ops)'),
]
PRELOAD_FORBIDDEN = [
    (re.compile(r'#\s*include\s+"smcr/(?!engine\.h|stats_abi\.h|decline\.h)[a-z_]+\.h"'), 'includes an engine internal'),
]

INCLUDE = re.compile(r'#\s*include\s+"([^"]+)"')
NUMBER = re.compile(r'\b(0[xX][0-9A-Fa-f]+|\d+)[uUlL]*\b')
DECLINE = re.compile(r'\b(SMCR_CLC_DECL_\w+)\s*=\s*(0[xX][0-9A-Fa-f]+|\d+)')


def strip_comments(text):
    return re.sub(r'/\*.*?\*/|//[^\n]*', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)


def strip_strings(code):
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', code)


def literal_value(text):
    if text[:2] in ('0x', '0X'):
        return int(text, 16)
    if len(text) > 1 and text[0] == '0':
        return int(text, 8) if all(c in '01234567' for c in text) else None
    return int(text)


# An embedder of the engine (for plain programs), kept beside it.
EMBEDDERS = {'src/smcr/standalone.c'}


def sources(root, subdir):
    for path in sorted((root / subdir).glob('*.[ch]')):
        if str(path.relative_to(root)) not in EMBEDDERS:
            yield path, strip_comments(path.read_text()).splitlines()


def report(problems, root, path, lineno, why, line):
    problems.append(f'{path.relative_to(root)}:{lineno}: {why}: {line.strip()}')


def check(root, subdir, rules, problems):
    for path, lines in sources(root, subdir):
        for lineno, line in enumerate(lines, 1):
            for rx, why in rules:
                if rx.search(line):
                    report(problems, root, path, lineno, why, line)


def check_engine_includes(root, problems):
    """A quoted include that resolves only in src/preload/ (an include path would find it)."""
    preload_only = {p.name for p in (root / 'src/preload').glob('*.h')}
    for path, lines in sources(root, 'src/smcr'):
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE.search(line)
            if not m or 'preload/' in m.group(1):
                continue  # none, or the path rule says it
            name = m.group(1)
            found = [d / name for d in (path.parent, root / 'src', root / 'include')]
            if pathlib.PurePath(name).name in preload_only and not any(f.exists() for f in found):
                report(problems, root, path, lineno, 'includes an interposer header by name', line)


def check_decline_numbers(root, problems):
    header = root / 'include/smcr/decline.h'
    codes = {}
    for name, value in DECLINE.findall(strip_comments(header.read_text()) if header.exists() else ''):
        codes[literal_value(value)] = name
    if not codes:
        problems.append('include/smcr/decline.h: no SMCR_CLC_DECL_* codes found')
        return
    for path, lines in sources(root, 'src/preload'):
        for lineno, line in enumerate(lines, 1):
            for m in NUMBER.finditer(strip_strings(line)):
                value = literal_value(m.group(1))
                if value in codes:
                    report(problems, root, path, lineno,
                           f'spells decline code {m.group(1)} (use {codes[value]})', line)


def run(root):
    problems = []
    check(root, 'src/smcr', ENGINE_FORBIDDEN, problems)
    check_engine_includes(root, problems)
    check(root, 'src/preload', PRELOAD_FORBIDDEN, problems)
    check_decline_numbers(root, problems)
    if not (root / 'src/smcr/engine.c').exists():
        problems.append('src/smcr/engine.c missing')
    return problems


def self_test():
    """Each rule must be able to fail: a tree that breaks it once, and a clean tree."""
    files = {
        'include/smcr/decline.h': 'enum d { SMCR_CLC_DECL_PEERNOSMC = 0x03010000, };\n',
        'include/smcr/engine.h': '#include "smcr/decline.h"\n',
        'src/preload/fdtab.h': '\n',
        'src/preload/ok.c': '#include "smcr/engine.h"\nint r = SMCR_CLC_DECL_PEERNOSMC; /* 0x03010000 */\n'
                            'const char *s = "0x03010000";\n',
        'src/smcr/engine.c': '#include "smcr/engine.h"\nint ok(const struct o *ops) { return ops->same_host; }\n',
    }
    broken = {
        'src/smcr/inc_path.c': ('#include "../preload/fdtab.h"\n', 'includes the interposer'),
        'src/smcr/inc_name.c': ('#include "fdtab.h"\n', 'includes an interposer header by name'),
        'src/smcr/ops_eq.c': ('int f(void) { return ops == &smcr_shm_ops; }\n', 'compares transport ops'),
        'src/smcr/ops_ne.c': ('int f(void) { return &smcr_verbs_ops != s->ops; }\n', 'compares transport ops'),
        'src/preload/hex.c': ('#define REASON_PEERNOSMC 0x03010000u\n', 'spells decline code'),
        'src/preload/dec.c': ('int r = 50397184;\n', 'spells decline code'),
        'src/preload/internal.c': ('#include "smcr/clc.h"\n', 'includes an engine internal'),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)

        def write(rel, text):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)

        for rel, text in files.items():
            write(rel, text)
        clean = run(root)
        if clean:
            print('clean tree reported:', *clean, sep='\n  ')
            failures += 1
        for rel, (text, expect) in broken.items():
            write(rel, text)
            found = [p for p in run(root) if p.startswith(rel) and expect in p]
            print(f'{"ok  " if found else "MISS"} {rel}: {expect}')
            failures += not found
            (root / rel).unlink()
    print(f'{failures} rules that did not fire')
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    root = pathlib.Path(sys.argv[1])
    problems = run(root)
    for p in problems:
        print(p)
    print(f'{len(problems)} layering violations')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
