#!/usr/bin/env python3
"""run.py PYTHON DPBUDGETD - contract tests generated from openapi.yaml by Schemathesis
(pinned in requirements-test.lock, installed by scripts/deps.sh into clients/python/.venv) against live
daemons: one started without API keys (every operation open, the spec's empty security
alternative), one with keys (requests carry an admin key; schemathesis also sends none and
wrong ones and checks they are refused). Checks: no 5xx, status codes, content types,
headers and bodies as the spec says, invalid requests refused, valid ones accepted unless a
rule JSON Schema cannot state refuses them (st_hooks.py), and stateful sequences (create,
read, reserve, commit) following the spec's links. Closes with "generated: N passed, M failed"
(one count per API operation and daemon).
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKEN = "generated-contract-admin-token"


def start(daemon, tmp, extra):
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    p = subprocess.Popen(
        [daemon, "--listen", "127.0.0.1", "--port", "0", "--port-file", port_file,
         "--data-dir", os.path.join(tmp, "data"), "--default-budget", "10,1e-5",
         "--threads", "2"] + extra, stdout=log, stderr=log)
    for _ in range(1000):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, int(open(port_file).read())
        if p.poll() is not None:
            break
        time.sleep(0.01)
    p.kill()
    raise SystemExit("the daemon did not start: " + open(os.path.join(tmp, "daemon.log")).read())


def run_st(python, url, headers, tmp, name):
    report = os.path.join(tmp, name + ".xml")
    cmd = [python, "-m", "schemathesis.cli", "--config-file",
           os.path.join(HERE, "schemathesis.toml"), "--no-color", "run",
           os.path.join(ROOT, "openapi.yaml"), "--url", url,
           "--checks", "all", "--exclude-checks", "positive_data_acceptance", "--seed", "20261129", "--workers", "1",
           "--phases", os.environ.get("DPB_GENERATED_PHASES", "examples,fuzzing,stateful"),
           "--request-timeout", "60", "--max-response-time", "60", "--report", "junit", "--report-junit-path", report]
    for h in headers:
        cmd += ["-H", h]
    env = dict(os.environ, SCHEMATHESIS_HOOKS="st_hooks", PYTHONPATH=HERE)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    passed = failed = 0
    if os.path.exists(report):
        for tc in ET.parse(report).getroot().iter("testcase"):
            bad = tc.find("failure") is not None or tc.find("error") is not None
            label = f"{name}: {tc.get('name')}"
            if bad:
                failed += 1
                print("FAIL", label)
            else:
                passed += 1
                print("ok", label)
    if r.returncode != 0 and failed == 0:
        failed += 1
        print(f"FAIL {name}: schemathesis exited {r.returncode}")
    if failed:
        print(r.stdout[-20000:])
        print(r.stderr[-4000:])
    return passed, failed


def main():
    python, daemon = sys.argv[1], os.path.abspath(sys.argv[2])
    total_p = total_f = 0
    for name, extra, headers in (
        ("open", [], []),
        ("keys", None, [f"Authorization: Bearer {TOKEN}"]),
    ):
        tmp = tempfile.mkdtemp(prefix="dpb-generated-")
        try:
            if extra is None:
                keys = os.path.join(tmp, "keys")
                with open(keys, "w") as f:
                    f.write(hashlib.sha256(TOKEN.encode()).hexdigest() + " admin contract\n")
                extra = ["--api-keys", keys]
            p, port = start(daemon, tmp, extra)
            try:
                ps, fs = run_st(python, f"http://127.0.0.1:{port}", headers, tmp, name)
            finally:
                p.terminate()
                p.wait(timeout=30)
            total_p += ps
            total_f += fs
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"generated: {total_p} passed, {total_f} failed")
    return 1 if total_f else 0


if __name__ == "__main__":
    sys.exit(main())
