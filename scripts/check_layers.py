#!/usr/bin/env python3
"""check_layers.py BUILD - the direction of the arrows between the project's files
(make check-layers).

An arrow A -> B means that A.c uses a function or variable that B.c defines: read from the
objects the build made (`nm`: A.o's undefined symbols that B.o defines), so it holds whatever
header declared the name. This checks:
  1. core/ includes no HTTP, JSON or curl header; only core/ledger/store_pg.c includes libpq;
  2. folders call only downward: server -> core/ledger -> core/dp -> core/common;
  3. no circle of files calling each other anywhere in core/ or server/;
  4. inside a folder with declared layers (LAYERS below), a file calls only files of its own
     layer or lower ones.
Prints one line per violation and exits 1 if there is any.
"""
import os
import re
import subprocess
import sys

ROOT = os.getcwd()  # the repository root (make runs it there)
FOLDERS = ["server", "core/ledger", "core/dp", "core/common"]  # top to bottom
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

# Layers inside a folder, top to bottom: a module may include its own layer or lower ones.
# A module not named here is refused, so that a new file is placed on purpose.
LAYERS = {
    "core/ledger": [
        ("open", ["ledger_open"]),
        ("verbs", ["ledger_clients", "ledger_events", "ledger_rounds", "ledger_resolve",
                   "ledger_elig", "ledger_refine", "ledger_tlog"]),
        ("transaction", ["ledger_txn", "ledger_prefetch"]),
        ("records", ["ledger_snapfmt", "ledger_record"]),
        ("state", ["ledger_view", "ledger_apply", "ledger_undo", "ledger_series", "ledger_spendof",
                   "ledger_index", "ledger_names"]),
        ("affordability", ["afford"]),
        ("spend", ["spend", "spend_memo", "spend_eval", "spend_cache", "spend_kept"]),
        ("stores", ["store_file", "store_pg", "store_tree", "refine"]),
        ("log", ["wal", "snapshot"]),
        ("io", ["fs", "crc32c", "tlog"]),
    ],
    "core/dp": [
        ("queries and calibration", ["account", "calibrate"]),
        ("calibration steps", ["calibrate_thm41", "calibrate_probe"]),
        ("dispatch", ["dispatch"]),
        ("profiles", ["profile", "profile_scalar", "profile_rdp", "profile_pld",
                      "profile_pld_leaf", "profile_common"]),
        ("mechanisms", ["shuffle", "shuffle_exact", "pnsgd", "proactive", "sgld", "sampling",
                        "rdp"]),
        ("pld engine", ["pld_compose", "pld_leaf", "pld_window", "pld_transform", "pld_fft",
                        "pld"]),
        ("vocabulary and tails", ["accountant", "event", "report", "normal"]),
    ],
    "server": [
        ("process", ["main", "config", "daemonlog", "healthcheck", "admin"]),
        ("routing table", ["routes"]),
        ("handlers", ["accountants", "compute", "ops", "ui", "res_clients", "res_rounds",
                      "res_events", "res_eligibility", "res_summary", "res_log", "res_sth"]),
        ("handler helpers", ["res_ledger"]),
        ("transport", ["http", "httproute", "edge", "mhdwrap", "workpool", "cpuprio", "auth", "tls",
                       "reqlog", "cors", "tracectx"]),
        ("replies", ["httpreply"]),
        ("codec", ["codec_encode", "codec_event", "codec"]),
        ("signing", ["signer", "jcs"]),
        ("json, problems, metrics", ["jsonin", "jsonout", "problem", "metrics", "textfile"]),
    ],
}


def system_includes():
    """{file: {<header> it includes}} for every .c and .h of core/ and server/."""
    out = {}
    for folder in FOLDERS:
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith((".c", ".h")):
                f = folder + "/" + name
                text = open(os.path.join(ROOT, f), encoding="utf-8").read()
                out[f] = {inc for kind, inc in INCLUDE.findall(text) if kind == "<"}
    return out


def arrows(build):
    """{module: {modules whose symbols it uses}}, a module being 'folder/basename' of a .c."""
    defined, used = {}, {}
    for folder in FOLDERS:
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith(".c"):
                continue
            mod = folder + "/" + name[:-2]
            obj = os.path.join(build, mod + ".o")
            if not os.path.exists(obj):
                sys.exit(f"check-layers: {obj} is missing (build first)")
            syms = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True,
                                  text=True, check=True).stdout.split("\n")
            for line in syms:
                parts = line.split()
                if len(parts) == 3:
                    defined.setdefault(parts[2], mod)
            und = subprocess.run(["nm", "-u", obj], capture_output=True, text=True,
                                 check=True).stdout.split()
            used[mod] = {u for u in und if u != "U"}
    return {mod: {defined[s] for s in syms if s in defined and defined[s] != mod}
            for mod, syms in used.items()}


def circles(graph):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, comps, n = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = n[0]
                n[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return comps


def violations(graph, system, layers):
    """Every violation, one sentence each, of a call graph and the system includes."""
    bad = []
    for f, incs in sorted(system.items()):
        if f.startswith("core/"):
            for inc in sorted(incs):
                if inc in ("microhttpd.h", "jansson.h", "curl/curl.h"):
                    bad.append(f"{f}: core/ must not include <{inc}> (HTTP, JSON and curl live in server/)")
        if "libpq-fe.h" in incs and f != "core/ledger/store_pg.c":
            bad.append(f"{f}: only core/ledger/store_pg.c speaks to PostgreSQL (libpq)")
    rank = {folder: i for i, folder in enumerate(FOLDERS)}
    for src, dsts in sorted(graph.items()):
        fs = os.path.dirname(src)
        for dst in sorted(dsts):
            fd = os.path.dirname(dst)
            if rank[fd] < rank[fs]:
                bad.append(f"{src} -> {dst}: {fs}/ may not call up into {fd}/")
    for folder, order in layers.items():
        level = {}
        for i, (_, names) in enumerate(order):
            for name in names:
                level[folder + "/" + name] = i
        for src in sorted(m for m in graph if os.path.dirname(m) == folder):
            if src not in level:
                bad.append(f"{src}.c: not placed in a layer of {folder}/ (scripts/check_layers.py, LAYERS)")
                continue
            for dst in sorted(graph[src]):
                if dst in level and level[dst] < level[src]:
                    bad.append(f"{src} ({order[level[src]][0]}) -> {dst} ({order[level[dst]][0]}): "
                               f"a call up the layers of {folder}/")
    for comp in circles(graph):
        bad.append("a circle of files calling each other: " + " <-> ".join(comp))
    return bad


def self_test():
    """The checks must catch what they are for: a made-up tree with one fault of each kind."""
    layers = {"core/ledger": [("top", ["a"]), ("bottom", ["b", "c"])]}
    graph = {"core/ledger/a": {"core/ledger/b"}, "core/ledger/b": {"core/ledger/c", "core/ledger/a"},
             "core/ledger/c": {"core/ledger/b"}, "core/ledger/d": set(),
             "core/dp/x": {"server/y"}, "server/y": {"core/dp/x"}}
    system = {"core/dp/x.c": {"jansson.h"}, "server/y.c": {"libpq-fe.h"}}
    bad = violations(graph, system, layers)
    want = ["core/ must not include <jansson.h>", "only core/ledger/store_pg.c speaks",
            "core/dp/x -> server/y: core/dp/ may not call up", "core/ledger/d.c: not placed",
            "core/ledger/b (bottom) -> core/ledger/a (top)",
            "circle of files calling each other: core/ledger/a <-> core/ledger/b <-> core/ledger/c",
            "circle of files calling each other: core/dp/x <-> server/y"]
    missed = [w for w in want if not any(w in line for line in bad)]
    if missed or len(bad) != len(want):
        sys.exit("check-layers: the self-test failed: missed " + repr(missed) + ", found " + repr(bad))
    clean = {"core/ledger/a": {"core/ledger/b"}, "core/ledger/b": {"core/ledger/c"},
             "core/ledger/c": set(), "server/y": {"core/dp/x"}, "core/dp/x": set()}
    if violations(clean, {}, layers):
        sys.exit("check-layers: the self-test failed: a clean tree was refused")


def main():
    self_test()
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    graph = arrows(build)
    bad = violations(graph, system_includes(), LAYERS)
    for line in bad:
        print("check-layers: " + line)
    if bad:
        return 1
    print(f"check-layers: {len(graph)} files in {', '.join(FOLDERS)}: calls run downward, by layer, no circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
