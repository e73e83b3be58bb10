#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A reader's check: every document citation in the tree resolves.

  check-doc-refs.py [SOURCE_ROOT]

Scans src/ include/ tests/ bench/ scripts/ docs/ and README.md (text files;
tests/data is captured wire data, not prose) for

  design §N               docs/design.md must have a heading numbered N
  NAME.md §N[, §M][-K]    NAME.md must exist (next to the citing file, at the
                          top, or in docs/) and have headings numbered N, M, K
  NAME.md section N       the same
  docs/FILE, PATH.md      the file must exist
  [text](target#anchor)   in Markdown: the target must exist, the anchor must
                          be one of its headings
  a bare §N               inside docs/NAME.md: a section of NAME.md itself;
                          anywhere else: an error (which document?), unless it
                          follows an RFC number ("RFC 7609 §3.1")

A heading is numbered N when it reads "## N. Title" or "### N.M Title".
Prints every unresolved citation as FILE:LINE: problem, and exits 1 if there
was one, else 0.
"""
import os
import re
import sys

SCAN_DIRS = ("src", "include", "tests", "bench", "scripts", "docs")
SCAN_FILES = ("README.md",)
SKIP_DIRS = {os.path.join("tests", "data"), "build", ".git"}
BINARY_EXT = (".bin", ".pcap", ".pcapng", ".o", ".so", ".a", ".png")

SEC = r"§\s?(\d+(?:\.\d+)*)(?:\s*[-–]\s*(\d+(?:\.\d+)*))?"
# A run of further section numbers after the first one: ", §5.1 and §13".
SEC_LIST_TAIL = r"(?:\s*(?:,|and|or)?\s*(?:[*#/]+\s*)*" + SEC + r")*"
MD_NAME = r"[A-Za-z0-9_][A-Za-z0-9_./-]*\.md"
# What a § may follow: a document, "design", or an RFC (not ours to check).
DESIGNATOR = re.compile(
    r"(?P<md>" + MD_NAME + r")|(?P<design>\bdesign\b)|(?P<rfc>\bRFC\s?\d+)")
SEC_RE = re.compile(SEC)
# Between a designator and its first §: spaces, a comment's continuation
# marks, at most a short word like "section"/"see".
GAP_RE = re.compile(r"^[\s*#/()\]`]*(?:section\s+)?$")
SECTION_WORD_RE = re.compile(r"(" + MD_NAME + r")\s+section\s+(\d+(?:\.\d+)*)")
DOCS_PATH_RE = re.compile(r"(?<![\w./-])((?:\.\./)*docs/[A-Za-z0-9_.-]*[A-Za-z0-9_])")
MD_PATH_RE = re.compile(r"(?<![\w./-])((?:\.\./)*" + MD_NAME + r")(?![\w/])")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
HEADING_RE = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s")
SELF = os.path.join("tests", "check-doc-refs.py")


def text_files(root):
    for top in SCAN_FILES:
        path = os.path.join(root, top)
        if os.path.isfile(path):
            yield top
    for top in SCAN_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            rel_dir = os.path.relpath(dirpath, root)
            dirnames[:] = sorted(d for d in dirnames
                                 if os.path.join(rel_dir, d) not in SKIP_DIRS)
            for name in sorted(filenames):
                path = os.path.join(rel_dir, name)
                # This file's own text describes the forms; it cites nothing.
                if not name.endswith(BINARY_EXT) and path != SELF:
                    yield path


def read_text(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


class Tree:
    def __init__(self, root):
        self.root = root
        self.sections = {}
        self.anchors = {}

    def resolve(self, citing, name):
        """The tree-relative path `name` means when `citing` names it, or None."""
        if "://" in name:
            return None
        base = os.path.dirname(citing)
        tries = [os.path.normpath(os.path.join(base, name)), os.path.normpath(name)]
        if "/" not in name:
            tries.append(os.path.join("docs", name))
        for path in tries:
            if not path.startswith("..") and os.path.exists(os.path.join(self.root, path)):
                return path
        return None

    def headings(self, path):
        if path not in self.sections:
            numbers, anchors = set(), set()
            text = read_text(self.root, path) or ""
            in_code = False
            for line in text.splitlines():
                if line.startswith("```"):
                    in_code = not in_code
                    continue
                if in_code or not line.startswith("#"):
                    continue
                m = HEADING_RE.match(line)
                if m:
                    numbers.add(m.group(1))
                anchors.add(github_anchor(line.lstrip("#").strip()))
            self.sections[path] = numbers
            self.anchors[path] = anchors
        return self.sections[path]

    def has_anchor(self, path, anchor):
        self.headings(path)
        return anchor in self.anchors[path]


def github_anchor(title):
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to '-'."""
    title = re.sub(r"[`*_]", "", title.lower())
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def designator_before(text, pos):
    """The designator a § at `pos` belongs to: (kind, value) or None."""
    window = text[max(0, pos - 400):pos]
    # Strip earlier § numbers of the same list: "design §3, §4" -> "design".
    tail = re.search(r"(?:" + SEC + r"\s*(?:,|and|or)?[\s*#/]*)+$", window)
    if tail:
        window = window[:tail.start()]
    best = None
    for m in DESIGNATOR.finditer(window):
        best = m
    if best is None or not GAP_RE.match(window[best.end():]):
        return None
    return best.lastgroup, best.group(best.lastgroup)


def check_file(tree, rel, text, problems):
    in_doc = rel.startswith("docs" + os.sep) and rel.endswith(".md")

    def section_ok(doc, numbers, pos, what):
        have = tree.headings(doc)
        for n in numbers:
            if n and n not in have:
                problems.append(f"{rel}:{line_of(text, pos)}: {what}: {doc} has no section {n}")

    for m in SEC_RE.finditer(text):
        numbers = (m.group(1), m.group(2))
        found = designator_before(text, m.start())
        if found is None:
            if in_doc:
                section_ok(rel, numbers, m.start(), "§" + m.group(1))
            else:
                problems.append(f"{rel}:{line_of(text, m.start())}: §{m.group(1)} names no "
                                "document (write design §N or protocol.md §N)")
            continue
        kind, value = found
        if kind == "rfc":
            continue
        if kind == "design":
            section_ok(os.path.join("docs", "design.md"), numbers, m.start(), "design §" + m.group(1))
            continue
        doc = tree.resolve(rel, value)
        if doc is None:
            problems.append(f"{rel}:{line_of(text, m.start())}: {value} is not in the tree")
        else:
            section_ok(doc, numbers, m.start(), f"{value} §{m.group(1)}")

    for m in SECTION_WORD_RE.finditer(text):
        doc = tree.resolve(rel, m.group(1))
        if doc is not None:
            section_ok(doc, (m.group(2),), m.start(), f"{m.group(1)} section {m.group(2)}")

    seen = set()
    for regex in (DOCS_PATH_RE, MD_PATH_RE):
        for m in regex.finditer(text):
            name = m.group(1).rstrip(".")
            if (m.start(), name) in seen or tree.resolve(rel, name) is not None:
                continue
            seen.add((m.start(), name))
            problems.append(f"{rel}:{line_of(text, m.start())}: {name} is not in the tree")

    if rel.endswith(".md"):
        for m in LINK_RE.finditer(text):
            target = m.group(1)
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            doc = tree.resolve(rel, path) if path else rel
            if doc is None:
                problems.append(f"{rel}:{line_of(text, m.start())}: link to {path}: not in the tree")
            elif anchor and doc.endswith(".md") and not tree.has_anchor(doc, anchor):
                problems.append(f"{rel}:{line_of(text, m.start())}: link to {target}: no such heading")


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.abspath(root)
    tree = Tree(root)
    problems = []
    files = 0
    for rel in text_files(root):
        text = read_text(root, rel)
        if text is None:
            continue
        files += 1
        check_file(tree, rel, text, problems)
    problems = list(dict.fromkeys(problems))
    for p in problems:
        print(p)
    print(f"check-doc-refs: {files} files, {len(problems)} unresolved citation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
