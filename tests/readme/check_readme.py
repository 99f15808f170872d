#!/usr/bin/env python3
"""check_readme.py DPBUDGETD [PAGE...] - run the examples of the README and the docs pages that
show the API (PAGES: README.md, docs/API.md, docs/PYTHON.md) against a fresh daemon each.

Every ```console block of a page is an example; each page in PAGES must hold at least one. Its lines starting with `$ ` are
commands (a command continues on the next lines while its quotes are open or its line ends
in a backslash); the lines after a command, up to the next command or the end of the block,
are the answer it shows. For each page, the test starts DPBUDGETD on an ephemeral loopback
port with a data directory of its own (a page's examples run against a fresh daemon, as a
reader would run them), runs each block's commands in order in one bash (so `EV=...` carries
over to the block's later commands; blocks share the daemon, so a client registered in one
block exists in the next), with `localhost:8080` replaced by the daemon's address, and
compares each command's output with the answer shown.

The comparison (documented in docs/API.md, "Examples (real answers)"):
- An answer is JSON in which `...` is an elision:
  - `...` in place of object members (`{"a":1, ... "b":2}` or `{"a":1,...,"b":2}`) means
    "any further members"; the members shown must be present with the values shown, in
    any order. An object without `...` must have exactly the members shown.
  - `...` in place of array elements (`[...]`, `[x, ...]`) means "any number of further
    elements here"; the elements shown must appear in the order shown.
  - `...` inside a string (`"Theorem 4.1 bounds total variation only: ..."`) stands for
    any text. A long string may be broken across lines: the line break and the
    indentation after it read as one space.
  - An answer that starts with `...` shows members of the top-level object only, as if it
    were wrapped in `{... }`.
- Numbers are compared as printed: equal when the printed number and the answer's number
  are the same double, or when the answer's number rounds to the printed digits (6.2e-20
  matches 6.2049435144355121e-20, not 6.3e-20). Integers must be equal. Strings, booleans
  and null compare exactly.
- A command that shows no answer must print nothing.
- A block preceded by the line `<!-- readme-test: skip -->` is not run (for examples whose
  computation takes long); its commands must still parse.

Prints `FAIL page:line: ...` with the difference per failed example and one closing line
`readme: N passed, M failed` (N + M = the examples run, on every page); exits 1 if any failed.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP_MARK = "<!-- readme-test: skip -->"
SEP = "@@readme-test-end-of-command@@"
DEADLINE_S = 120  # every page, including the daemons' starts
# The pages whose examples run by default, relative to the repository's root.
PAGES = ["README.md", "docs/API.md", "docs/PYTHON.md"]


class Ellipsis_:
    def __repr__(self):
        return "..."


ELL = Ellipsis_()


class Num:
    """A number as printed in a page: its text and its value."""

    def __init__(self, text):
        self.text = text
        self.value = float(text) if re.search(r"[.eE]", text) else int(text)

    def __repr__(self):
        return self.text


class Glob:
    """A string with `...` in it: the parts in order, anything between."""

    def __init__(self, s):
        self.parts = s.split("...")

    def match(self, s):
        pat = ".*".join(re.escape(p) for p in self.parts)
        return re.fullmatch(pat, s, re.S) is not None

    def __repr__(self):
        return repr("...".join(self.parts))


# ---------------------------------------------------------------- blocks and commands


def blocks(text, name="README.md"):
    """[(line number, skip, [(command, shown answer)])] of a page's console blocks."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            skip = i > 0 and lines[i - 1].strip() == SKIP_MARK
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            out.append((start, skip, commands(lines[start:j], start, name)))
            i = j + 1
        else:
            i += 1
    return out


def complete(cmd):
    if cmd.endswith("\\"):
        return False
    try:
        shlex.split(cmd)
    except ValueError:
        return False
    return True


def commands(lines, first_line, name="README.md"):
    cmds = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise SystemExit("%s:%d: a console block must start with `$ `" % (name, first_line + i + 1))
        cmd = lines[i][2:]
        i += 1
        while not complete(cmd) and i < len(lines):
            cmd += "\n" + lines[i]
            i += 1
        ans = []
        while i < len(lines) and not lines[i].startswith("$ "):
            ans.append(lines[i])
            i += 1
        cmds.append((cmd, "\n".join(ans).strip()))
    return cmds


# ---------------------------------------------------------------- the pattern language


class Parser:
    """JSON with `...` elisions (see the module comment)."""

    def __init__(self, s):
        self.s = s
        self.i = 0

    def err(self, what):
        raise ValueError("%s at offset %d: %r" % (what, self.i, self.s[self.i:self.i + 30]))

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1

    def peek(self, lit):
        self.ws()
        return self.s.startswith(lit, self.i)

    def eat(self, lit):
        if not self.peek(lit):
            self.err("expected %r" % lit)
        self.i += len(lit)

    def value(self):
        self.ws()
        if self.i >= len(self.s):
            self.err("unexpected end")
        c = self.s[self.i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            return self.string(glob=True)
        for lit, v in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(lit, self.i):
                self.i += len(lit)
                return v
        m = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?").match(self.s, self.i)
        if not m:
            self.err("expected a value")
        self.i = m.end()
        return Num(m.group(0))

    def string(self, glob):
        m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(self.s, self.i)
        if not m:
            self.err("bad string")
        self.i = m.end()
        import json

        v = json.loads(re.sub(r"\n[ \t]*", " ", m.group(0)))
        return Glob(v) if glob and "..." in v else v

    def members(self, close):
        """Members up to `close` (None: the end of the text): (dict, has_ellipsis)."""
        d, ell = {}, False
        while True:
            self.ws()
            if close is None and self.i >= len(self.s):
                return d, ell
            if close is not None and self.peek(close):
                self.i += 1
                return d, ell
            if self.peek(","):
                self.i += 1
                continue
            if self.peek("..."):
                self.i += 3
                ell = True
                continue
            if not self.peek('"'):
                self.err("expected a member")
            k = self.string(glob=False)
            self.eat(":")
            d[k] = self.value()

    def obj(self):
        self.eat("{")
        d, ell = self.members("}")
        return ("obj", d, ell)

    def arr(self):
        self.eat("[")
        items = []
        while True:
            self.ws()
            if self.peek("]"):
                self.i += 1
                return ("arr", items)
            if self.peek(","):
                self.i += 1
                continue
            if self.peek("..."):
                self.i += 3
                items.append(ELL)
                continue
            items.append(self.value())


def parse_pattern(text):
    p = Parser(text)
    if text.startswith("..."):
        d, _ = p.members(None)
        return ("obj", d, True)
    v = p.value()
    p.ws()
    if p.i != len(p.s):
        p.err("trailing text")
    return v


def num_match(shown, actual):
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        return False
    if isinstance(shown.value, int) and isinstance(actual, int):
        return shown.value == actual
    if float(shown.value) == float(actual):
        return True
    # to the printed digits: half a unit in the last printed place
    m = re.fullmatch(r"-?(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?", shown.text)
    decimals = len(m.group(2) or "")
    exp = int(m.group(3) or 0)
    half = 0.5 * 10.0 ** (exp - decimals)
    return abs(float(actual) - float(shown.value)) <= half * (1 + 1e-12)


def match(pat, act, path="$"):
    """None if act matches pat, else a sentence saying where and how it differs."""
    if isinstance(pat, Num):
        return None if num_match(pat, act) else "%s: shown %s, answered %r" % (path, pat.text, act)
    if isinstance(pat, Glob):
        if isinstance(act, str) and pat.match(act):
            return None
        return "%s: shown %r, answered %r" % (path, pat, act)
    if isinstance(pat, tuple) and pat[0] == "obj":
        _, d, ell = pat
        if not isinstance(act, dict):
            return "%s: shown an object, answered %r" % (path, act)
        for k, v in d.items():
            if k not in act:
                return "%s: shown member %r is missing" % (path, k)
            e = match(v, act[k], "%s.%s" % (path, k))
            if e:
                return e
        if not ell:
            extra = sorted(set(act) - set(d))
            if extra:
                return "%s: members %s are not shown (write `...` to elide them)" % (path, extra)
        return None
    if isinstance(pat, tuple) and pat[0] == "arr":
        if not isinstance(act, list):
            return "%s: shown an array, answered %r" % (path, act)
        return match_seq(pat[1], act, path, 0)
    if pat is None or isinstance(pat, (bool, str)):
        if type(pat) is type(act) and pat == act:
            return None
        return "%s: shown %r, answered %r" % (path, pat, act)
    return "%s: unknown pattern %r" % (path, pat)


def match_seq(pats, acts, path, k):
    """Match the element patterns (with ELL gaps) against acts[k:], in order."""
    if not pats:
        return None if k == len(acts) else "%s: %d more elements than shown" % (path, len(acts) - k)
    if pats[0] is ELL:
        last = None
        for j in range(k, len(acts) + 1):
            last = match_seq(pats[1:], acts, path, j)
            if last is None:
                return None
        return last
    if k >= len(acts):
        return "%s: fewer elements than shown" % path
    e = match(pats[0], acts[k], "%s[%d]" % (path, k))
    return e or match_seq(pats[1:], acts, path, k + 1)


def compare(shown, out):
    """None if the output matches the answer shown, else the difference."""
    import json

    out = out.strip()
    if not shown:
        return None if not out else "no answer shown, but the command printed %r" % out[:200]
    try:
        pat = parse_pattern(shown)
    except ValueError as e:
        # not JSON: compare the text, `...` eliding any text
        if Glob(" ".join(shown.split())).match(" ".join(out.split())):
            return None
        return "the shown text (not JSON: %s) differs from %r" % (e, out[:300])
    try:
        act = json.loads(out)
    except ValueError:
        return "the answer is not JSON: %r" % out[:300]
    return match(pat, act)


SELF_TESTS = [  # (shown, answer, matches): the elision rules on their own
    ('{"a":1,"b":[1,2]}', '{"b":[1,2],"a":1}', True),
    ('{"a":1}', '{"a":1,"b":2}', False),
    ('{"a":1, ...}', '{"a":1,"b":2}', True),
    ('{"a":1,...,"c":3}', '{"a":1,"b":2,"c":3}', True),
    ('{"a":1, ... "c":4}', '{"a":1,"b":2,"c":3}', False),
    ('... "c":3', '{"a":1,"b":2,"c":3}', True),
    ('[...]', '[1,2,3]', True),
    ('[1, ...]', '[1,2,3]', True),
    ('[..., 3]', '[1,2,3]', True),
    ('[1, 3]', '[1,2,3]', False),
    ('[2, ...]', '[1,2,3]', False),
    ('{"s":"Theorem 4.1..."}', '{"s":"Theorem 4.1, with B = 0.4748"}', True),
    ('{"s":"Theorem 5.2 ..."}', '{"s":"Theorem 4.1, with B = 0.4748"}', False),
    ('{"s":"two\n   lines"}', '{"s":"two lines"}', True),
    ('{"x":6.2e-20}', '{"x":6.2049435144355121e-20}', True),
    ('{"x":6.3e-20}', '{"x":6.2049435144355121e-20}', False),
    ('{"x":0.05}', '{"x":0.050000000000000003}', True),
    ('{"x":1.2141452107893538}', '{"x":1.2141452107894914}', False),
    ('{"n":2730}', '{"n":2731}', False),
    ('{"v":null}', '{"v":0}', False),
    ('{"v":"infinite"}', '{"v":"infinite"}', True),
    ('', '', True),
    ('', '{"a":1}', False),
]


def self_test():
    """Check the comparison itself; returns the failures."""
    bad = []
    for shown, answer, want in SELF_TESTS:
        if (compare(shown, answer) is None) != want:
            bad.append("self-test: %r against %r should %s" % (shown, answer, "match" if want else "differ"))
    return bad


# ---------------------------------------------------------------- the daemon


def start_daemon(binary, tmp):
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPBUDGET_")}
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1", "--port", "0", "--port-file", port_file,
                             "--data-dir", os.path.join(tmp, "data"), "--no-request-log"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 10
    while time.time() < deadline:
        if os.path.exists(port_file):
            with open(port_file) as f:
                p = f.read().strip()
            if p.isdigit():
                return proc, int(p)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("readme: the daemon did not start (see %s)" % log.name)


def run_block(cmds, port, timeout):
    """Run the commands in one bash; returns their outputs (or None when bash failed)."""
    script = ["set -u"]
    for cmd, _ in cmds:
        script.append(cmd.replace("localhost:8080", "127.0.0.1:%d" % port))
        script.append("printf '\\n%s\\n'" % SEP)
    try:
        r = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %.0f s" % timeout
    outs = r.stdout.split("\n%s\n" % SEP)
    if len(outs) != len(cmds) + 1:
        return None, "bash exited %d: %s" % (r.returncode, r.stderr.strip()[:300])
    return outs[:-1], r.stderr.strip()


def run_page(binary, name, bl, deadline):
    """Run one page's blocks against a daemon of its own: (passed, failed, skipped)."""
    passed = failed = skipped = 0
    tmp = tempfile.mkdtemp(prefix="readme-test-")
    proc, port = start_daemon(binary, tmp)
    try:
        for line, skip, cmds in bl:
            for cmd, shown in cmds:  # the patterns must parse even when skipped
                if shown:
                    try:
                        parse_pattern(shown)
                    except ValueError:
                        pass  # plain text is allowed
            if skip:
                skipped += len(cmds)
                continue
            outs, err = run_block(cmds, port, max(1.0, deadline - time.time()))
            if outs is None:
                failed += len(cmds)
                print("FAIL %s:%d: the block did not run: %s" % (name, line, err))
                continue
            for (cmd, shown), out in zip(cmds, outs):
                diff = compare(shown, out)
                first = cmd.split("\n")[0][:70]
                if diff is None:
                    passed += 1
                else:
                    failed += 1
                    print("FAIL %s:%d: $ %s\n     %s" % (name, line, first, diff))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return passed, failed, skipped


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check_readme.py DPBUDGETD [PAGE...]")
    binary = os.path.abspath(sys.argv[1])
    pages = sys.argv[2:] or [os.path.join(ROOT, p) for p in PAGES]
    parsed = []
    passed = failed = skipped = 0
    for page in pages:
        full = os.path.abspath(page)
        name = os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else page
        with open(page) as f:
            bl = blocks(f.read(), name)
        if not bl:
            failed += 1
            print("FAIL %s: no ```console block: the page shows no example to run" % name)
        parsed.append((name, bl))
    for msg in self_test():
        failed += 1
        print("FAIL " + msg)
    deadline = time.time() + DEADLINE_S
    for name, bl in parsed:
        if not bl:
            continue
        p, f, s = run_page(binary, name, bl, deadline)
        passed += p
        failed += f
        skipped += s
    if skipped:
        print("readme: %d commands in blocks marked skip" % skipped)
    print("readme: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
