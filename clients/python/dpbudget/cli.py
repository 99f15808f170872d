"""python3 -m dpbudget: the command-line client.

    python3 -m dpbudget [--url URL] [--token T | --token-file F] [--cafile PEM] [--json]
                        COMMAND ...

Commands: delta, epsilon, calibrate, curve, accountants (compute); client
put/get/list/import/history, eligibility, round charge/reserve/commit/release/get, event
put/get/list, summary (ledger). Human-readable output by default, the daemon's JSON with
--json. Exit status: 0 done, 1 the daemon answered an error (its code and detail are
printed), 2 usage, 3 no answer (connection), 4 a round refused someone (round
charge/reserve with --strict).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import errors
from .client import Client
from .events import Event, dp_sgd, gaussian, self_composed
from .models import ClientRecord, Report, Round

#: What a command returns: the JSON printed with --json, and the lines printed without.
Output = Tuple[Any, List[str]]

# ---------------------------------------------------------------- formatting


def num(x: Any) -> str:
    """A number as people write it: the shortest repr, inf as "infinite"."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isinf(x):
            return "infinite" if x > 0 else "-infinite"
        return repr(x)
    return str(x)


def table(rows: Iterable[Sequence[Any]], head: Sequence[str]) -> str:
    cols = [head] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cols) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in cols)


def report_line(r: Report) -> str:
    s = "%s, %s" % (r.accountant, r.guarantee)
    if r.value_discretization_interval is not None:
        s += ", grid %s" % num(r.value_discretization_interval)
    return s


def warn_lines(r: Report) -> List[str]:
    out = []
    for c in r.conditions:
        if not c.holds:
            out.append("condition %s fails: %s" % (c.name, c.statement))
    for w in r.warnings:
        out.append("warning: " + w)
    return out


# ---------------------------------------------------------------- arguments


def load_json_arg(s: str, what: str) -> Any:
    """JSON text, @FILE or - (stdin)."""
    try:
        if s == "-":
            return json.load(sys.stdin)
        if s.startswith("@"):
            with open(s[1:]) as f:
                return json.load(f)
        return json.loads(s)
    except (OSError, ValueError) as e:
        raise UsageError("%s: %s" % (what, e))


def id_list(s: str, what: str) -> List[str]:
    """a,b,c or @FILE (one id per line, or a JSON array)."""
    if s.startswith("@"):
        try:
            with open(s[1:]) as f:
                text = f.read()
        except OSError as e:
            raise UsageError("%s: %s" % (what, e))
        if text.lstrip().startswith("["):
            ids: List[str] = load_json_arg(s, what)
            return ids
        return [x.strip() for x in text.splitlines() if x.strip()]
    return [x for x in s.split(",") if x]


def labels(pairs: Optional[Sequence[str]]) -> Dict[str, str]:
    out = {}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        if not sep:
            raise UsageError("--label %r: write key=value" % p)
        if k in out:
            raise UsageError("--label %s given twice" % k)
        out[k] = v
    return out


class UsageError(Exception):
    pass


def event_of(a: argparse.Namespace) -> Optional[Event]:
    """The event from --event, or the DP-SGD shorthand --sigma/--q/--steps."""
    if getattr(a, "event", None):
        ev: Event = load_json_arg(a.event, "--event")
        return ev
    if getattr(a, "sigma", None) is not None:
        if a.q is None:  # unsampled Gaussians
            g = gaussian(a.sigma)
            return g if a.steps == 1 else self_composed(g, a.steps)
        return dp_sgd(a.q, a.sigma, a.steps)
    if getattr(a, "event_name", None):
        return None
    raise UsageError("give the event: --event JSON|@FILE, or --sigma S [--q Q] [--steps N]")


def add_event_args(p: argparse.ArgumentParser, named: bool = False) -> None:
    p.add_argument("--event", metavar="JSON|@FILE", help="the event (dp_accounting vocabulary)")
    p.add_argument("--sigma", type=float, help="shorthand: DP-SGD noise multiplier ...")
    p.add_argument("--q", type=float, help="... Poisson sampling probability ...")
    p.add_argument("--steps", type=int, default=1, help="... and steps (default 1)")
    if named:
        p.add_argument("--event-name", help="an event registered by name (event put)")


def add_compute_args(p: argparse.ArgumentParser) -> None:
    add_event_args(p)
    p.add_argument("--accountant", help="auto (default), rdp, pld, gdp_exact, ...")
    p.add_argument("--relation", help="add_or_remove_one (default) or replace_one")
    p.add_argument("--grid", type=float, help="pld value_discretization_interval")


def floats(s: str) -> List[float]:
    try:
        return [float(x) for x in s.split(",") if x]
    except ValueError:
        raise UsageError("%r: a comma list of numbers" % s)


# ---------------------------------------------------------------- commands


def cmd_delta(c: Client, a: argparse.Namespace) -> Output:
    r = c.delta(event_of(a), epsilons=floats(a.epsilon), accountant=a.accountant,
                neighboring_relation=a.relation, value_discretization_interval=a.grid)
    lines = ["delta = %s at epsilon = %s%s" % (num(p.delta), num(p.epsilon),
             " (order %s)" % num(p.rdp_order) if p.rdp_order is not None else "")
             for p in r.results]
    return r.raw, lines + ["(%s)" % report_line(r)] + warn_lines(r)


def cmd_epsilon(c: Client, a: argparse.Namespace) -> Output:
    r = c.epsilon(event_of(a), deltas=floats(a.delta), accountant=a.accountant,
                  neighboring_relation=a.relation, value_discretization_interval=a.grid)
    lines = ["epsilon = %s at delta = %s%s%s" % (
        num(p.epsilon), num(p.delta), "" if p.certified else " (not certified)",
        " (order %s)" % num(p.rdp_order) if p.rdp_order is not None else "") for p in r.results]
    return r.raw, lines + ["(%s)" % report_line(r)] + warn_lines(r)


def cmd_calibrate(c: Client, a: argparse.Namespace) -> Output:
    r = c.calibrate(event_of(a), a.solve_for, a.target_epsilon, a.target_delta,
                    accountant=a.accountant, neighboring_relation=a.relation,
                    value_discretization_interval=a.grid)
    lines = ["%s = %s" % (r.solve_for, num(r.value)),
             "achieves epsilon = %s, delta = %s (target %s, %s)" % (
                 num(r.achieved.get("epsilon")), num(r.achieved.get("delta")),
                 num(r.target.get("epsilon")), num(r.target.get("delta")))]
    if r.interval:
        lines.append("feasible interval [%s, %s]" % (num(r.interval.get("min")),
                                                     num(r.interval.get("max"))))
    return r.raw, lines + ["(%s)" % report_line(r)] + warn_lines(r)


def cmd_curve(c: Client, a: argparse.Namespace) -> Output:
    if (a.epsilons is None) == (a.range is None):
        raise UsageError("give --epsilons or --range MIN:MAX:POINTS")
    rng = None
    if a.range:
        parts = a.range.split(":")
        if len(parts) != 3:
            raise UsageError("--range MIN:MAX:POINTS")
        try:
            rng = (float(parts[0]), float(parts[1]), int(parts[2]))
        except ValueError:
            raise UsageError("--range MIN:MAX:POINTS (numbers)")
    r = c.curve(event_of(a), epsilons=floats(a.epsilons) if a.epsilons else None,
                epsilon_range=rng, tradeoff_points=a.tradeoff_points, accountant=a.accountant,
                neighboring_relation=a.relation, value_discretization_interval=a.grid)
    lines = [table([(num(p.epsilon), num(p.delta)) for p in r.curve], ["epsilon", "delta"])]
    if r.tradeoff:
        lines.append(table([(num(p.alpha), num(p.beta)) for p in r.tradeoff], ["alpha", "beta"]))
    return r.raw, lines + ["(%s)" % report_line(r)] + warn_lines(r)


def cmd_accountants(c: Client, a: argparse.Namespace) -> Output:
    d = c.accountants()
    lines = [table([(x["name"], x["guarantee"]) for x in d.get("accountants", [])],
                   ["accountant", "guarantee"]),
             "events: " + ", ".join(e["class_name"] for e in d.get("events", []))]
    return d, lines


def client_lines(r: ClientRecord) -> List[str]:
    lab = ",".join("%s=%s" % kv for kv in sorted(r.labels.items()))
    return ["%s: %s, spent epsilon %s of %s (delta %s), remaining %s, %d rounds, %s%s" % (
        r.id, r.status, num(r.spent.epsilon), num(r.budget.epsilon), num(r.budget.delta),
        num(r.remaining_epsilon), r.rounds, r.accounting, " [%s]" % lab if lab else "")]


def cmd_client_put(c: Client, a: argparse.Namespace) -> Output:
    r = c.put_client(a.id, a.epsilon, a.delta, accounting=a.accounting,
                     neighboring_relation=a.relation, labels=labels(a.label) or None)
    return r.raw, client_lines(r)


def cmd_client_get(c: Client, a: argparse.Namespace) -> Output:
    r = c.get_client(a.id)
    return r.raw, client_lines(r)


def cmd_client_list(c: Client, a: argparse.Namespace) -> Output:
    lab = a.label
    if a.all:
        recs = list(c.iter_clients(status=a.status, label=lab, sort=a.sort, order=a.order))
        raw = {"clients": [r.raw for r in recs], "total": len(recs), "next_cursor": None}
        total, cursor = len(recs), None
    else:
        page = c.list_clients(status=a.status, label=lab, sort=a.sort, order=a.order,
                              limit=a.limit, cursor=a.cursor)
        recs, total, cursor = page.clients, page.total, page.next_cursor
        raw = {"clients": [r.raw for r in recs], "total": total, "next_cursor": cursor}
    rows = [(r.id, r.status, num(r.spent.epsilon), num(r.budget.epsilon), r.rounds)
            for r in recs]
    lines = [table(rows, ["id", "status", "spent", "budget", "rounds"]),
             "%d of %d clients%s" % (len(recs), total, "; next: --cursor %s" % cursor
                                     if cursor else "")]
    return raw, lines


def read_clients_file(path: str, fmt: Optional[str]) -> List[Dict[str, Any]]:
    """Clients from JSON (a list, or {"clients": [...]}) or CSV (header: id, epsilon, delta
    and optional accounting, neighboring_relation, label.KEY columns)."""
    try:
        text = sys.stdin.read() if path == "-" else open(path).read()
    except OSError as e:
        raise UsageError("%s: %s" % (path, e))
    if fmt is None:
        fmt = "json" if text.lstrip()[:1] in ("[", "{") else "csv"
    if fmt == "json":
        try:
            d = json.loads(text)
        except ValueError as e:
            raise UsageError("%s: %s" % (path, e))
        items = d.get("clients") if isinstance(d, dict) else d
        if not isinstance(items, list):
            raise UsageError("%s: a JSON list of clients, or {\"clients\": [...]}" % path)
        return items
    out = []
    rd = csv.DictReader(io.StringIO(text))
    if not rd.fieldnames or not {"id", "epsilon", "delta"} <= set(rd.fieldnames):
        raise UsageError("%s: the CSV header needs id, epsilon, delta" % path)
    known = {"id", "epsilon", "delta", "accounting", "neighboring_relation"}
    for col in rd.fieldnames:
        if col not in known and not col.startswith("label."):
            raise UsageError("%s: unknown column %r (id, epsilon, delta, accounting, "
                             "neighboring_relation, label.KEY)" % (path, col))
    for n, row in enumerate(rd, start=2):
        if None in row or any(v is None for v in row.values()):
            raise UsageError("%s:%d: not as many fields as the header" % (path, n))
        try:
            item = {"id": row["id"], "epsilon": float(row["epsilon"]),
                    "delta": float(row["delta"])}
        except ValueError:
            raise UsageError("%s:%d: epsilon and delta must be numbers" % (path, n))
        for k in ("accounting", "neighboring_relation"):
            if row.get(k):
                item[k] = row[k]
        lab = {k[6:]: v for k, v in row.items() if k and k.startswith("label.") and v}
        if lab:
            item["labels"] = lab
        out.append(item)
    return out


def cmd_client_import(c: Client, a: argparse.Namespace) -> Output:
    items = read_clients_file(a.file, a.format)
    r = c.register_clients(items, batch_size=a.batch_size)
    raw = {"results": [vars(x) for x in r.results], "created": r.created,
           "updated": r.updated, "unchanged": r.unchanged, "conflicts": r.conflicts}
    lines = ["%d clients: %d created, %d updated, %d unchanged, %d conflicts" % (
        len(r.results), r.created, r.updated, r.unchanged, r.conflicts)]
    lines += ["conflict %s: %s" % (x.id, x.detail) for x in r.conflicted]
    return raw, lines


def cmd_client_history(c: Client, a: argparse.Namespace) -> Output:
    if a.all:
        charges = list(c.iter_history(a.id))
        raw: Dict[str, Any] = {"charges": [vars(x) for x in charges], "next_cursor": None}
        cursor, page = None, None
    else:
        page = c.history(a.id, limit=a.limit, cursor=a.cursor)
        charges, cursor = page.charges, page.next_cursor
        raw = {"charges": [vars(x) for x in charges], "next_cursor": cursor,
               "complete": page.complete, "total": page.total,
               "aggregate": page.aggregate}
    rows = [(x.round_id, num(x.seq), x.state, num(x.spent_after), x.time or "-") for x in charges]
    lines = [table(rows, ["round", "seq", "state", "spent_after", "time"])]
    if page is not None and not page.complete:
        lines.append("older rounds summarized (the daemon keeps the last %s)" %
                     num(page.history_limit))
    if cursor:
        lines.append("next: --cursor %s" % cursor)
    return raw, lines


def cmd_eligibility(c: Client, a: argparse.Namespace) -> Output:
    ev = event_of(a)
    ids = id_list(a.clients, "--clients") if a.clients else None
    r = c.eligibility(ids, event=ev, event_name=a.event_name if ev is None else None,
                      label=a.label, max_rounds=a.max_rounds)
    raw = {"eligible": r.eligible, "ineligible": r.ineligible,
           "clients": [dict(vars(x), id=x.client) for x in r.clients]}  # id: as before
    rows = [(x.id, "yes" if x.eligible else "no",
             "%s%s" % (num(x.affordable_rounds), "+" if x.affordable_rounds_capped else ""),
             x.reason or "-") for x in r.clients]
    return raw, [table(rows, ["id", "eligible", "rounds", "reason"]),
                 "%d eligible, %d not" % (r.eligible, r.ineligible)]


def round_lines(r: Round) -> List[str]:
    state = r.state or ("charged" if r.phase == "charge" else r.phase)
    lines = ["round %s %s: %d of %d admitted, %d charged%s%s" % (
        r.round_id, state, len(r.admitted), r.participants, r.charged,
        ", %d reserved" % r.reserved if r.reserved else "",
        " (replayed)" if r.replayed else "")]
    if r.dry_run:
        lines[0] += " (dry run: nothing stored)"
    if r.expires_at and r.state == "reserved":
        lines.append("reservation expires at %s" % r.expires_at)
    reported = set(r.reported or [])
    for x in r.admitted:
        spend = "spent %s -> %s" % (num(x.spent_before), num(x.spent_after))
        if r.phase == "charge":
            lines.append("  admitted %s: %s" % (x.client, spend))
        elif r.state == "committed":
            lines.append("  charged %s: %s" % (x.client, spend) if x.client in reported else
                         "  released %s: did not report" % x.client)
        elif r.state == "reserved":
            lines.append("  reserved %s: %s" % (x.client, spend))
        else:
            lines.append("  released %s (%s)" % (x.client, r.state))
    for y in r.refused:
        extra = ""
        if y.would_spend is not None:
            extra = " (spent %s, would spend %s)" % (num(y.spent_before), num(y.would_spend))
        lines.append("  refused %s: %s%s" % (y.client, y.reason, extra))
    return lines


def cmd_round_start(c: Client, a: argparse.Namespace, phase: str) -> Output:
    ev = event_of(a)
    parts = id_list(a.participants, "--participants")
    kw = dict(event_name=a.event_name if ev is None else None, round_id=a.round_id,
              policy=a.policy, dry_run=a.dry_run)
    if phase == "charge":
        r = c.charge(parts, ev, already_ran=a.already_ran, **kw)
    else:
        r = c.reserve(parts, ev, ttl=a.ttl, **kw)
    if a.strict:
        r.raise_for_refused()
    return r.raw, round_lines(r)


def cmd_round_commit(c: Client, a: argparse.Namespace) -> Output:
    r = c.commit(a.id, id_list(a.reported, "--reported") if a.reported else [])
    return r.raw, round_lines(r)


def cmd_round_release(c: Client, a: argparse.Namespace) -> Output:
    r = c.release(a.id)
    return r.raw, round_lines(r)


def cmd_round_get(c: Client, a: argparse.Namespace) -> Output:
    r = c.get_round(a.id)
    return r.raw, round_lines(r)


def cmd_event_put(c: Client, a: argparse.Namespace) -> Output:
    r = c.put_event(a.name, event_of(a))
    return {"name": r.name, "event": r.event, "created_seq": r.created_seq}, [
        "event %s %s" % (r.name, "registered" if r.created else "already registered")]


def cmd_event_get(c: Client, a: argparse.Namespace) -> Output:
    r = c.get_event(a.name)
    return {"name": r.name, "event": r.event, "created_seq": r.created_seq}, [
        "%s: %s" % (r.name, json.dumps(r.event))]


def cmd_event_list(c: Client, a: argparse.Namespace) -> Output:
    p = c.list_events(limit=a.limit, cursor=a.cursor)
    return {"events": [vars(e) for e in p.events], "next_cursor": p.next_cursor}, [
        "%s: %s" % (e.name, json.dumps(e.event)) for e in p.events]


def cmd_summary(c: Client, a: argparse.Namespace) -> Output:
    s = c.summary()
    st = s.by_status
    lines = ["%d clients: %s" % (s.clients, ", ".join("%d %s" % (v, k) for k, v in st.items())),
             "%d rounds, log %d bytes, version %d%s" % (s.rounds, s.log_bytes, s.version,
                                                        ", READ-ONLY" if s.read_only else "")]
    return s.raw, lines


# ---------------------------------------------------------------- the parser

EPILOG = """events: --event JSON or --event @FILE (dp_accounting's vocabulary), or the shorthand
--sigma S [--q Q] [--steps N]: N steps of Gaussian noise S, Poisson-sampled at Q if given.
Rounds: without --round-id a fresh id is made up; it is printed when no answer came, so the
command can be repeated with that --round-id and apply the round at most once.

exit status: 0 done, 1 the daemon answered an error (code and detail on stderr), 2 usage,
3 no answer (connection, timeout), 4 a round refused someone (with --strict)."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m dpbudget", description="Command-line client of the dpbudget daemon.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("--url", default=os.environ.get("DPBUDGET_URL", "http://127.0.0.1:8080"),
                   help="the daemon (default $DPBUDGET_URL or http://127.0.0.1:8080)")
    p.add_argument("--token", help="API key (default $DPBUDGET_TOKEN)")
    p.add_argument("--token-file", help="read the API key from this file")
    p.add_argument("--cafile", default=os.environ.get("DPBUDGET_CAFILE"),
                   help="PEM CA file for https (default $DPBUDGET_CAFILE)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--retries", type=int, default=4, help="retries of idempotent calls (4)")
    p.add_argument("--json", action="store_true", help="print the daemon's JSON answer")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser("delta", help="delta(epsilon) of an event")
    add_compute_args(s)
    s.add_argument("--epsilon", required=True, help="epsilon, or a comma list")
    s.set_defaults(func=cmd_delta)
    s = sub.add_parser("epsilon", help="epsilon(delta) of an event")
    add_compute_args(s)
    s.add_argument("--delta", required=True, help="delta, or a comma list")
    s.set_defaults(func=cmd_epsilon)
    s = sub.add_parser("calibrate", help="solve a parameter for a target (epsilon, delta)")
    add_compute_args(s)
    s.add_argument("--solve-for", required=True,
                   help="noise_multiplier, rounds, count, sampling_probability, ...")
    s.add_argument("--target-epsilon", type=float, required=True)
    s.add_argument("--target-delta", type=float, required=True)
    s.set_defaults(func=cmd_calibrate)
    s = sub.add_parser("curve", help="delta(epsilon) over a range; trade-off points")
    add_compute_args(s)
    s.add_argument("--epsilons", help="comma list")
    s.add_argument("--range", help="MIN:MAX:POINTS")
    s.add_argument("--tradeoff-points", type=int)
    s.set_defaults(func=cmd_curve)
    s = sub.add_parser("accountants", help="the daemon's accountants and events")
    s.set_defaults(func=cmd_accountants)

    cl = sub.add_parser("client", help="clients: put, get, list, import, history")
    cs = cl.add_subparsers(dest="sub", metavar="ACTION")
    cs.required = True
    s = cs.add_parser("put", help="create or update a client's budget")
    s.add_argument("id")
    s.add_argument("--epsilon", type=float, required=True)
    s.add_argument("--delta", type=float, required=True)
    s.add_argument("--accounting", help="rdp (default), pld, rdp_filter, gdp_filter")
    s.add_argument("--relation")
    s.add_argument("--label", action="append", metavar="KEY=VALUE")
    s.set_defaults(func=cmd_client_put)
    s = cs.add_parser("get", help="one client")
    s.add_argument("id")
    s.set_defaults(func=cmd_client_get)
    s = cs.add_parser("list", help="clients, filtered and paginated")
    s.add_argument("--status", help="active, exhausted, uncertified")
    s.add_argument("--label", metavar="KEY=VALUE", help="clients with this label")
    s.add_argument("--sort", help="id, spent, remaining")
    s.add_argument("--order", help="asc, desc")
    s.add_argument("--limit", type=int)
    s.add_argument("--cursor")
    s.add_argument("--all", action="store_true", help="follow the cursors to the end")
    s.set_defaults(func=cmd_client_list)
    s = cs.add_parser("import", help="register clients in bulk from JSON or CSV")
    s.add_argument("file", help="JSON (list of clients) or CSV (id,epsilon,delta,...); - stdin")
    s.add_argument("--format", choices=["json", "csv"])
    s.add_argument("--batch-size", type=int, default=10000)
    s.set_defaults(func=cmd_client_import)
    s = cs.add_parser("history", help="a client's charges, newest first")
    s.add_argument("id")
    s.add_argument("--limit", type=int)
    s.add_argument("--cursor")
    s.add_argument("--all", action="store_true")
    s.set_defaults(func=cmd_client_history)

    s = sub.add_parser("eligibility", help="who can afford an event now (charges nothing)")
    add_event_args(s, named=True)
    s.add_argument("--clients", help="a,b,c or @FILE")
    s.add_argument("--label", help="KEY=VALUE: every client with that label")
    s.add_argument("--max-rounds", type=int)
    s.set_defaults(func=cmd_eligibility)

    rd = sub.add_parser("round", help="rounds: charge, reserve, commit, release, get")
    rs = rd.add_subparsers(dest="sub", metavar="ACTION")
    rs.required = True
    for name, hlp in (("charge", "admit and charge at once"),
                      ("reserve", "admit and reserve (two-phase round)")):
        s = rs.add_parser(name, help=hlp)
        add_event_args(s, named=True)
        s.add_argument("--participants", required=True, help="a,b,c or @FILE")
        s.add_argument("--round-id", help="default: a fresh one")
        s.add_argument("--policy", help="all_or_nothing (default) or admit_eligible")
        s.add_argument("--dry-run", action="store_true")
        s.add_argument("--strict", action="store_true", help="exit 4 if anyone was refused")
        if name == "charge":
            s.add_argument("--already-ran", action="store_true")
        else:
            s.add_argument("--ttl", type=int, help="reservation lifetime in seconds")
        s.set_defaults(func=lambda c, a, ph=name: cmd_round_start(c, a, ph))
    s = rs.add_parser("commit", help="charge the reported, release the dropouts")
    s.add_argument("id")
    s.add_argument("--reported", required=True, help="a,b,c or @FILE")
    s.set_defaults(func=cmd_round_commit)
    s = rs.add_parser("release", help="release a reserved round")
    s.add_argument("id")
    s.set_defaults(func=cmd_round_release)
    s = rs.add_parser("get", help="a round's answer and state")
    s.add_argument("id")
    s.set_defaults(func=cmd_round_get)

    ev = sub.add_parser("event", help="named events: put, get, list")
    es = ev.add_subparsers(dest="sub", metavar="ACTION")
    es.required = True
    s = es.add_parser("put", help="register an event by name")
    s.add_argument("name")
    add_event_args(s)
    s.set_defaults(func=cmd_event_put)
    s = es.add_parser("get")
    s.add_argument("name")
    s.set_defaults(func=cmd_event_get)
    s = es.add_parser("list")
    s.add_argument("--limit", type=int)
    s.add_argument("--cursor")
    s.set_defaults(func=cmd_event_list)

    s = sub.add_parser("summary", help="the ledger's counts")
    s.set_defaults(func=cmd_summary)
    return p


def main(argv: Optional[Sequence[str]] = None, out: Optional[IO[str]] = None,
         err: Optional[IO[str]] = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    p = parser()
    a = p.parse_args(argv)
    token = a.token
    try:
        if a.token_file:
            with open(a.token_file) as f:
                token = f.read().strip()
        elif token is None:
            token = os.environ.get("DPBUDGET_TOKEN") or None
        c = Client(a.url, token, cafile=a.cafile, timeout=a.timeout, retries=a.retries)
    except (OSError, ValueError) as e:
        print("dpbudget: %s" % e, file=err)
        return 2
    try:
        raw, lines = a.func(c, a)
    except UsageError as e:
        print("dpbudget: %s" % e, file=err)
        return 2
    except errors.RoundRefused as e:
        if a.json:
            print(json.dumps(e.round.raw, separators=(",", ":")), file=out)
        else:
            print("\n".join(round_lines(e.round)), file=out)
        print("dpbudget: %s" % e, file=err)
        return 4
    except errors.ApiError as e:
        if a.json:
            print(json.dumps(e.problem, separators=(",", ":")), file=out)
        print("dpbudget: %d %s: %s%s" % (e.status, e.code, e.detail,
                                         " (field %s)" % e.field if e.field else ""), file=err)
        if e.status >= 500 and e.round_id:
            print("dpbudget: repeat with --round-id %s: the round is applied at most once"
                  % e.round_id, file=err)
        return 1
    except errors.TransportError as e:
        print("dpbudget: no answer from %s: %s" % (a.url, e), file=err)
        if e.round_id:
            print("dpbudget: repeat with --round-id %s: the round is applied at most once"
                  % e.round_id, file=err)
        return 3
    except (TypeError, ValueError) as e:
        print("dpbudget: %s" % e, file=err)
        return 2
    finally:
        c.close()
    if a.json:
        print(json.dumps(raw, separators=(",", ":")), file=out)
    else:
        print("\n".join(lines), file=out)
    return 0


def main_exit() -> None:
    """The `dpbudget` console script (pip install)."""
    sys.exit(main())
