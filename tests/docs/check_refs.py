#!/usr/bin/env python3
"""check_refs.py [--daemon DPBUDGETD] [ROOT] - the repository stands alone: nothing it tracks points outside it.

Checks every file `git ls-files` lists (text files; binary files are skipped):
- no path outside the repository: the parent directory's notes and papers (see OUTSIDE),
  absolute paths of a home or work directory;
- every Markdown file name mentioned (`MATH.md`, `docs/OPERATIONS.md`, ...) exists, either
  relative to the mentioning file's directory or to the repository root; so a bare
  `MATH.md` in a source comment, which names no file of the repository, fails;
- every relative link of a Markdown file (`[text](docs/MATH.md#1-normal-tails)`) resolves to
  a tracked file, and its `#anchor`, when given, to a heading of that file (GitHub's
  slugs: lower case, punctuation dropped, spaces as hyphens); `#anchor` alone refers to
  the file itself;
- the documents the README points to exist (docs/MATH.md, docs/ARCHITECTURE.md,
  docs/OPERATIONS.md, and the pages its text moved to: docs/API.md, docs/ACCOUNTING.md,
  docs/LEDGER.md, docs/NETWORK.md, docs/PYTHON.md, docs/PERFORMANCE.md, docs/DEVELOPING.md);
- with --daemon: the operator's guide and the binary agree on the options: every option
  `DPBUDGETD --help` lists is described in docs/OPERATIONS.md, and every option of the
  guide's table (rows starting with `--name`) is one the binary has.
Prints `FAIL file:line: ...` per problem and one closing line `docs: N passed, M failed`
(one check per file, plus one per link); exits 1 on any failure.
"""
import os
import re
import subprocess
import sys

# spelled in pieces so that this checker does not itself match the patterns it looks for
_SH = "sha" + "red"
OUTSIDE = re.compile(r"\.\./" + _SH + "|" + _SH + r"/(?:design|seeds)" + r"|(?<![\w.])/(?:work|home|root)/")
MD_NAME = re.compile(r"(?<![\w./-])([\w./-]*[\w-]\.md)\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
REQUIRED = ["docs/MATH.md", "docs/ARCHITECTURE.md", "docs/OPERATIONS.md", "docs/API.md", "docs/ACCOUNTING.md",
            "docs/LEDGER.md", "docs/NETWORK.md", "docs/PYTHON.md", "docs/PERFORMANCE.md", "docs/DEVELOPING.md"]
# This file describes the patterns it looks for: it is not checked against them.
SELF = "tests/docs/check_refs.py"

passed = 0
failed = 0


def fail(msg):
    global failed
    failed += 1
    print("FAIL " + msg)


def slug(heading):
    """GitHub's anchor for a heading."""
    h = heading.strip().lower()
    h = re.sub(r"[`*_~]", lambda m: "_" if m.group(0) == "_" else "", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    out, seen = set(), {}
    fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
                continue
            m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def check_options(root, daemon):
    """docs/OPERATIONS.md and `daemon --help` name the same options."""
    global passed
    helptext = subprocess.run([daemon, "--help"], capture_output=True, text=True).stdout
    have = set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", helptext, re.M))
    if not have:
        fail("%s --help lists no options" % daemon)
        return
    with open(os.path.join(root, "docs", "OPERATIONS.md"), encoding="utf-8") as f:
        guide = f.read()
    mentioned = set(re.findall(r"(--[a-z][a-z0-9-]*)", guide))
    table = set(re.findall(r"^\|\s*`(--[a-z][a-z0-9-]*)", guide, re.M))
    for opt in sorted(have):
        if opt in mentioned:
            passed += 1
        else:
            fail("docs/OPERATIONS.md: option %s of dpbudgetd --help is not described" % opt)
    for opt in sorted(table - have):
        fail("docs/OPERATIONS.md: the table describes %s, which dpbudgetd --help does not list" % opt)


def main():
    global passed
    args = sys.argv[1:]
    daemon = None
    if len(args) >= 2 and args[0] == "--daemon":
        daemon = args[1]
        args = args[2:]
    root = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if daemon:
        check_options(root, daemon)
    files = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    files = [f for f in files if f]
    tracked = set(files)
    for req in REQUIRED:
        if req in tracked:
            passed += 1
        else:
            fail("%s: not in the repository (README.md points to it)" % req)
    for rel in files:
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:  # a tracked file deleted in the work tree
            fail("%s: cannot be read: %s" % (rel, e))
            continue
        if b"\0" in data or rel == SELF:
            continue
        text = data.decode("utf-8", errors="replace")
        before = failed
        here = os.path.dirname(rel)
        for n, line in enumerate(text.split("\n"), 1):
            m = OUTSIDE.search(line)
            if m:
                fail("%s:%d: a path outside the repository: %r" % (rel, n, m.group(0)))
            for m in MD_NAME.finditer(line):
                name = m.group(1)
                if "://" in line[max(0, m.start() - 200):m.start()] and re.search(
                        r"https?://\S*$", line[:m.start()]):
                    continue  # part of a URL
                cands = [os.path.normpath(os.path.join(here, name)), os.path.normpath(name)]
                if not any(c in tracked for c in cands):
                    fail("%s:%d: names %s, which is not a file of the repository" % (rel, n, name))
            if rel.endswith(".md"):
                for m in LINK.finditer(line):
                    target = m.group(1)
                    if re.match(r"[a-z]+:", target):
                        continue  # https:, mailto:
                    file_part, _, anchor = target.partition("#")
                    dest = os.path.normpath(os.path.join(here, file_part)) if file_part else rel
                    if dest not in tracked and not any(t.startswith(dest + "/") for t in tracked):
                        fail("%s:%d: link to %s: no such file" % (rel, n, target))
                        continue
                    if anchor and dest.endswith(".md") and anchor not in anchors(os.path.join(root, dest)):
                        fail("%s:%d: link to %s: no heading with that anchor in %s" % (rel, n, target, dest))
                        continue
                    passed += 1
        if failed == before:
            passed += 1
    print("docs: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
