#!/usr/bin/env python3
"""check_monitoring.py DPBUDGETD - the daemon's /metrics and deploy/monitoring, checked live.

Starts a real daemon (with a ledger and API keys) on an ephemeral port, drives some traffic
(a compute request, client PUTs, rounds with refusals, a 404, a 405, a 401), scrapes
/metrics and checks:
- `promtool check metrics` finds the exposition well formed (and lint-clean);
- the label defects stay fixed: no method="" and a 405 counted under the method sent;
- `promtool check rules` and `promtool test rules` pass on deploy/monitoring/alerts.yml;
- every metric name the alert rules and the Grafana dashboard reference exists in the scrape
  (histogram series by their _bucket/_sum/_count names; `up` is Prometheus's own);
- every line of the daemon's log is JSON with an RFC 3339 "ts", request lines a "method";
- against a real Prometheus (Debian's prometheus) scraping that daemon and an idle one once a
  second, every query of every Grafana panel returns data for the first (no panel shows "No
  data" for a daemon that simply had no errors: the 5xx ratio is 0, not empty), every panel
  has data for the idle one, and no query returns data for a job that is not scraped (no
  `or vector(0)` inventing a value for a daemon that is down).
Closing line `monitoring: N passed, M failed`; exit 1 if any check failed. Bounded: every
request and subprocess has a timeout.
"""
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MON = os.path.join(ROOT, "deploy", "monitoring")
PROMQL_WORDS = {
    "sum", "rate", "irate", "increase", "delta", "histogram_quantile", "by", "without", "on",
    "ignoring", "group_left", "group_right", "max", "min", "avg", "count", "time", "and", "or",
    "unless", "offset", "bool", "label_values", "clamp_min", "clamp_max", "abs", "topk",
    "bottomk", "humanize", "humanizeDuration", "humanizePercentage", "value", "labels", "le",
    "instance", "job", "status", "route", "method", "reason", "outcome", "accountant", "from",
    "to", "version", "up", "s", "m", "h", "d", "e", "inf", "nan", "Inf", "NaN",
}

passed = 0
failed = 0
DAEMON = None


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + what)
    return bool(ok)


def call(base, method, path, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric_names(expr):
    """Identifiers in a PromQL expression that are metric names (not functions, keywords,
    label names, label values or durations)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # matchers
    expr = re.sub(r"\[[^\]]*\]", "[]", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1()", expr)
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    return {n for n in names if n not in PROMQL_WORDS and not re.match(r"^\d", n)}


def main(argv):
    if len(argv) != 2:
        print("usage: check_monitoring.py PATH/TO/dpbudgetd", file=sys.stderr)
        check(False, "usage")
        return finish()
    global DAEMON
    DAEMON = os.path.abspath(argv[1])
    promtool = shutil.which("promtool")
    if not check(promtool, "promtool is installed (Debian package prometheus; scripts/deps.sh)"):
        return finish()
    tmp = tempfile.mkdtemp(prefix="dpb-mon-")
    token = "monitoring-test-token"
    keys = os.path.join(tmp, "keys")
    with open(keys, "w") as f:
        f.write("%s admin ops\n" % hashlib.sha256(token.encode()).hexdigest())
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "log"), "w")
    d = subprocess.Popen([os.path.abspath(argv[1]), "--port", "0", "--port-file", port_file,
                          "--data-dir", os.path.join(tmp, "data"), "--api-keys", keys,
                          "--open-compute", "--threads", "2"], stdout=log, stderr=log)
    try:
        for _ in range(100):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        base = "http://127.0.0.1:" + open(port_file).read().strip()
        call(base, "POST", "/v1/delta", {"event": {"class_name": "GaussianDpEvent",
                                                  "noise_multiplier": 1}, "epsilon": 1})
        call(base, "POST", "/v1/delta", {"event": {"class_name": "ShuffledDpSgdEpochDpEvent",
                                                  "noise_multiplier": 1, "rounds": 1000},
                                        "epsilon": 1})
        for i in range(3):
            call(base, "PUT", "/v1/clients/m%d" % i, {"budget": {"epsilon": 1, "delta": 1e-5}},
                 token)
        for k in range(3):
            call(base, "POST", "/v1/rounds",
                 {"round_id": "m%d" % k, "policy": "admit_eligible",
                  "participants": ["m0", "m1", "m2", "ghost"],
                  "event": {"class_name": "GaussianDpEvent", "noise_multiplier": 2}}, token)
        call(base, "GET", "/no/such/path", token=token)  # without a key: 401
        call(base, "DELETE", "/v1/summary", token=token)
        call(base, "GET", "/v1/summary")  # 401
        st, text = call(base, "GET", "/metrics")
        grafana_live(base, tmp)
    finally:
        d.terminate()
        try:
            d.wait(timeout=20)
        except subprocess.TimeoutExpired:
            d.kill()
        log.close()
        lines = open(os.path.join(tmp, "log"), encoding="utf-8").read().splitlines()
        shutil.rmtree(tmp, ignore_errors=True)
    # every log line is JSON with an RFC 3339 UTC timestamp; request lines name the method
    reqs = 0
    for line in lines:
        try:
            o = json.loads(line)
        except ValueError:
            check(False, "a log line is not JSON: %s" % line)
            continue
        check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", str(o.get("ts"))),
              "log line has an RFC 3339 ts: %s" % line)
        if o.get("msg") == "request":
            reqs += 1
            check(o.get("method") in ("GET", "POST", "PUT", "DELETE"),
                  "request log line names the method: %s" % line)
    check(reqs >= 10 and any(json.loads(x).get("method") == "DELETE" for x in lines),
          "the request log has the requests sent (%d lines)" % reqs)
    if not check(st == 200, "GET /metrics answers 200 (got %s)" % st):
        return finish()

    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, "promtool check metrics: %s" % (r.stdout + r.stderr).strip())
    check('method=""' not in text, "no request is counted with method=\"\"")
    check('route="/v1/summary",method="DELETE",status="405"' in text,
          "DELETE /v1/summary is counted as method=\"DELETE\",status=\"405\"")
    check('route="unmatched",method="GET",status="404"' in text,
          "an unmatched GET is counted as route=\"unmatched\",method=\"GET\"")
    check(re.search(r'^dpbudget_round_refusals_total\{reason="unknown_client"\} [1-9]', text,
                    re.M), "refusals by reason count the unknown client")

    alerts = os.path.join(MON, "alerts.yml")
    r = subprocess.run([promtool, "check", "rules", alerts], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, "promtool check rules: %s" % (r.stdout + r.stderr).strip())
    r = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=MON,
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "promtool test rules: %s" % (r.stdout + r.stderr).strip())

    scraped = set()
    types = {}
    for line in text.splitlines():
        m = re.match(r"^# TYPE (\S+) (\S+)", line)
        if m:
            types[m.group(1)] = m.group(2)
        elif line and not line.startswith("#"):
            scraped.add(re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    for n, t in types.items():
        if t == "histogram":
            scraped.add(n)  # as a family name (histogram_quantile over _bucket is normal)

    exprs = []
    import yaml  # python3-yaml (scripts/deps.sh)
    for g in yaml.safe_load(open(alerts)).get("groups", []):
        for rule in g.get("rules", []):
            exprs.append(("alerts.yml " + rule.get("alert", rule.get("record", "?")), rule["expr"]))
    dash = json.load(open(os.path.join(MON, "grafana-dashboard.json")))
    for p in dash.get("panels", []):
        for t in p.get("targets", []):
            if t.get("expr"):
                exprs.append(("grafana panel '%s'" % p.get("title"), t["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict) and q.get("query"):
            exprs.append(("grafana variable %s" % v.get("name"), q["query"]))
    used = 0
    for where, e in exprs:
        for n in sorted(metric_names(e)):
            used += 1
            check(n in scraped, "%s: metric %s is not in a live /metrics scrape" % (where, n))
    check(used >= 20, "the rules and the dashboard name %d metrics (expected at least 20)" % used)
    return finish()


def panel_queries():
    """(where, expr) of every query of every Grafana panel."""
    dash = json.load(open(os.path.join(MON, "grafana-dashboard.json")))
    out = []
    for p in dash.get("panels", []):
        for t in p.get("targets", []):
            if t.get("expr"):
                out.append(("grafana panel '%s' %s" % (p.get("title"), t.get("refId")), t["expr"]))
    return out


def prom_query(prom, expr, quiet=False):
    """The instant vector of expr (a list of results), or None when the query failed."""
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.loads(r.read().decode())
    except (urllib.error.URLError, ValueError) as e:
        if not quiet:
            print("  query failed: %s: %s" % (expr, e))
        return None
    if body.get("status") != "success":
        print("  query failed: %s: %s" % (expr, body))
        return None
    return body["data"]["result"]


def start_daemon(tmp, name, extra):
    """A daemon on an ephemeral port in tmp/name: (process, base URL, log file)."""
    port_file = os.path.join(tmp, name + ".port")
    log = open(os.path.join(tmp, name + ".log"), "w")
    d = subprocess.Popen([DAEMON, "--port", "0", "--port-file", port_file,
                          "--data-dir", os.path.join(tmp, name + "-data"), "--threads", "2"] + extra,
                         stdout=log, stderr=log)
    for _ in range(100):
        if os.path.exists(port_file) and open(port_file).read().strip():
            break
        time.sleep(0.05)
    return d, "http://127.0.0.1:" + open(port_file).read().strip(), log


def stop(proc, log=None):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    if log:
        log.close()


def grafana_live(base, tmp):
    """A real Prometheus scrapes the daemon at base (job busy: the traffic of main) and an idle
    daemon (job idle: nothing but the scrapes) every second. Every query of every panel
    returns data for busy; every panel has data for idle (a panel of counts or rates shows 0
    there, not "No data"); and no query returns data for a job nobody scrapes (no `or
    vector(0)` inventing a value for a daemon that is down)."""
    prometheus = shutil.which("prometheus")
    if not check(prometheus, "prometheus is installed (Debian package prometheus; scripts/deps.sh)"):
        return
    idle, ibase, ilog = start_daemon(tmp, "idle", [])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    pport = s.getsockname()[1]
    s.close()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n"
                "  - job_name: busy\n"
                "    static_configs: [{targets: ['%s']}]\n"
                "  - job_name: idle\n"
                "    static_configs: [{targets: ['%s']}]\n"
                % (base.split("//")[1], ibase.split("//")[1]))
    plog = open(os.path.join(tmp, "prometheus.log"), "w")
    prom = subprocess.Popen([prometheus, "--config.file=" + cfg,
                             "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % pport, "--log.level=warn"],
                            stdout=plog, stderr=plog)
    purl = "http://127.0.0.1:%d" % pport
    try:
        # ready once a few scrapes of both are in (rate() needs two samples in its window)
        ok = False
        for _ in range(300):
            time.sleep(0.1)
            if prom.poll() is not None:
                break
            try:
                r = prom_query(purl, "min(count_over_time(up[1m]))", quiet=True)
            except Exception:  # noqa: BLE001 (not listening yet)
                r = None
            n = prom_query(purl, "count(up)", quiet=True) if r else None
            if r and n and float(n[0]["value"][1]) == 2 and float(r[0]["value"][1]) >= 4:
                ok = True
                break
        if not check(ok, "Prometheus scraped both daemons 4 times within 30 s"):
            plog.flush()
            print(open(os.path.join(tmp, "prometheus.log")).read()[-2000:])
            return
        call(base, "GET", "/healthz")  # traffic between scrapes, still no 5xx
        time.sleep(1.5)
        n = 0
        panels = {}
        for where, expr in panel_queries():
            q = lambda job: expr.replace("$job", job).replace("$instance", ".*")  # noqa: E731
            res = prom_query(purl, q("busy"))
            n += 1
            check(res, "%s returns no data from a scraped daemon (Grafana shows \"No data\"): %s"
                  % (where, expr))
            gone = prom_query(purl, q("no-such-job"))
            check(gone == [], "%s returns data for a job nobody scrapes (%s): %s" % (where, gone, expr))
            if res and "5xx ratio" in where:
                v = float(res[0]["value"][1])
                check(v == 0, "%s is %s without a 5xx answer (expected 0)" % (where, v))
            title = where.rsplit(" ", 1)[0]
            panels[title] = panels.get(title, False) or bool(prom_query(purl, q("idle")))
        for title, has in panels.items():
            check(has, "%s shows \"No data\" for an idle daemon that is scraped" % title)
        check(n >= 25, "the dashboard has %d panel queries (expected at least 25)" % n)
    finally:
        stop(prom, plog)
        stop(idle, ilog)


def finish():
    print("monitoring: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
