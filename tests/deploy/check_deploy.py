#!/usr/bin/env python3
"""check_deploy.py DPBUDGETD - check the Dockerfile and deploy/ against the daemon itself.

No container runtime or cluster is needed: the files are parsed (every YAML file under deploy/,
multi-document aware) and cross-checked against facts taken from the real binary (its --help
flags and defaults, --version, the shared libraries it links) and from server/routes.c:
- every flag in the Dockerfile CMD, the Kubernetes args, env and config file, the compose
  environment and the systemd ExecStart/Environment is a flag of `dpbudgetd --help`
  (an environment variable DPBUDGET_FOO_BAR and a config line `foo-bar = value` stand for
  --foo-bar);
- the port given to the daemon is the one exposed, published, probed and scraped;
- probe, healthcheck and scrape paths are GET routes of server/routes.c;
- the data directory given to the daemon is the volume / mount / state directory;
- the image of the manifests is the one the Dockerfile tags, its version is `--version`;
- the runtime image installs the package of every library the binary links, and no
  compiler or -dev package; users, keys files and hardening settings are as documented;
- the replicated deployments (deploy/compose/replicated, deploy/k8s/replicated): every
  replica gets --ledger-url (a PostgreSQL url without a literal password: an .env variable,
  a Secret) and no --data-dir, PostgreSQL 15 keeps its data on a volume and is health-checked
  before the replicas start, the proxy's configuration (in the directory) balances over the
  three replicas at their --port and health-checks them with GET /readyz; the Deployment
  reads the url from a Secret of its kustomization, probes /healthz and /readyz, rolls
  without downtime, and its Service and PodDisruptionBudget select its pods (and no Service
  of the single-node StatefulSet does); the kustomization lists every file of its directory;
- the image starts as documented (check_image_start): the binary staged by `make install
  PREFIX=/usr/local DESTDIR=...` as the build stage does, run with the final stage's ENV,
  ENTRYPOINT and CMD (only --port and --data-dir changed: a free port, a temporary
  directory), refuses to start without a keys file naming the file and the variable, and
  with the file the documented `docker run` mounts serves, passes its HEALTHCHECK and
  stops on SIGTERM;
- deploy/monitoring: alert rules loaded where compose's Prometheus looks, every alert
  unit-tested, the Kubernetes scrape job and ServiceMonitor select deploy/k8s's Service and
  a port it names, the Grafana dashboard is JSON with a query per panel.
Prints `FAIL ...` per failed check (with -v also `ok ...` per passed one) and one closing
line `deploy: N passed, M failed`; exits 1 if any check failed.
"""
import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
ROUTES_C = os.path.join(ROOT, "server", "routes.c")
LOOPBACK = {"::1", "localhost"}  # and 127.0.0.0/8
# Packages of every Debian image, slim included: a library of theirs needs no apt-get install.
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
SCOPES = {"read", "charge", "admin"}
SWITCH_VALUES = {"1", "0", "true", "false", "yes", "no", "on", "off"}

passed = 0
failed = 0
verbose = False


def check(ok, what):
    """Count one check; print it if it failed (or always with -v). Returns ok."""
    global passed, failed
    if ok:
        passed += 1
        if verbose:
            print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what)
    return bool(ok)


def rel(path):
    return os.path.relpath(path, ROOT)


# ---------------------------------------------------------------- facts from the daemon


class Daemon:
    """What `dpbudgetd --help` / `--version` say: flags, whether they take a value, defaults."""

    def __init__(self, binary):
        self.binary = binary
        self.flags = {}  # "--port" -> "N" (metavar) or None (no value)
        self.defaults = {}  # "--port" -> "8080"
        self.version = None
        help_text = run([binary, "--help"])
        self.help = help_text or ""
        check(help_text is not None and "--help" in help_text, "%s --help runs" % binary)
        self._parse_help(help_text or "")
        out = run([binary, "--version"]) or ""
        m = re.match(r"^dpbudgetd (\S+)\s*$", out)
        check(m, "%s --version prints 'dpbudgetd VERSION' (got %r)" % (binary, out.strip()))
        self.version = m.group(1) if m else None

    def _parse_help(self, text):
        last = None
        for line in text.splitlines():
            m = re.match(r"^\s{1,4}(--[a-z0-9][a-z0-9-]*)(?:[ =](\S+))?(.*)$", line)
            if m:
                last = m.group(1)
                meta = m.group(2)
                rest = m.group(3)
                # a metavar is upper case (ADDR, N, E,D); else it began the description
                if meta and not re.fullmatch(r"[A-Z][A-Z0-9_,.:=-]*", meta):
                    rest, meta = meta + rest, None
                self.flags[last] = meta
                desc = rest
            elif last and re.match(r"^\s{8,}\S", line):
                desc = line  # continuation of the last flag's description
            else:
                last = None
                continue
            d = re.search(r"\(default:? ([^;)]+)", desc)
            if d and last not in self.defaults:
                self.defaults[last] = d.group(1).strip()

    def takes_value(self, flag, next_token):
        if flag in self.flags:
            return self.flags[flag] is not None
        # not in --help (yet): assume a value when one follows
        return next_token is not None and not next_token.startswith("--")


def run(argv):
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.decode("utf-8", "replace") if r.returncode == 0 else None


def get_routes():
    """GET routes of server/routes.c: {"/healthz", ...}."""
    try:
        src = open(ROUTES_C, encoding="utf-8").read()
    except OSError:
        check(False, "%s is readable" % rel(ROUTES_C))
        return set()
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    routes = {p for m, p in re.findall(r'\{\s*"([A-Z]+)"\s*,\s*"([^"]*)"', src) if m == "GET"}
    check(routes, "%s has GET routes" % rel(ROUTES_C))
    return routes


def linked_packages(binary):
    """Debian packages of the libraries the binary links directly (NEEDED), or None."""
    dyn = run(["readelf", "-d", binary]) or run(["objdump", "-p", binary])
    ldd = run(["ldd", binary])
    if dyn is None or ldd is None:
        return None
    needed = re.findall(r"(?:Shared library: \[|NEEDED\s+)([^\]\s]+)", dyn)
    where = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, flags=re.M))
    pkgs = {}
    for soname in needed:
        pkg = None
        path = where.get(soname)
        if path:
            for p in (path, os.path.realpath(path), re.sub(r"^/usr/", "/", path),
                      re.sub(r"^/lib", "/usr/lib", path)):
                out = run(["dpkg", "-S", p])
                if out:
                    pkg = out.split(":", 1)[0].strip()
                    break
        pkgs[soname] = pkg
    return pkgs


def with_depends(pkgs):
    """pkgs and what apt-get install brings along with them (Depends, as dpkg knows them here)."""
    out = set()
    todo = list(pkgs)
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.add(p)
        dep = run(["dpkg-query", "-W", "-f", "${Depends}\n${Pre-Depends}", p]) or ""
        for alt in re.split(r"[,\n]", dep):
            name = alt.split("|")[0].strip().split(" ")[0].split(":")[0]
            if name:
                todo.append(name)
    return out


# ---------------------------------------------------------------- settings of one deployment


def parse_args(argv, d, where):
    """Flags of an argument list -> {flag: value or True}; each flag checked against --help."""
    out = {}
    i = 0
    while i < len(argv):
        a = str(argv[i])
        if not a.startswith("--"):
            check(False, "%s: '%s' is not a flag" % (where, a))
            i += 1
            continue
        val = None
        if "=" in a:
            check(False, "%s: '%s': dpbudgetd takes '--flag value', not '--flag=value'" % (where, a))
            a, val = a.split("=", 1)
        elif d.takes_value(a, str(argv[i + 1]) if i + 1 < len(argv) else None):
            val = str(argv[i + 1]) if i + 1 < len(argv) else None
            check(val is not None, "%s: %s has its value" % (where, a))
            i += 1
        check(a in d.flags, "%s: %s is a flag of dpbudgetd --help" % (where, a))
        out[a] = True if val is None else val
        i += 1
    return out


def env_flag(name):
    """DPBUDGET_FOO_BAR -> --foo-bar; None for a variable that is not a setting."""
    if not name.startswith("DPBUDGET_") or name == "DPBUDGET_":
        return None
    return "--" + name[len("DPBUDGET_"):].lower().replace("_", "-")


def parse_env(env, d, where):
    out = {}
    if any(env_flag(n) for n in env):
        check("DPBUDGET_" in d.help, "%s: dpbudgetd --help documents DPBUDGET_* variables" % where)
    for name, value in env.items():
        flag = env_flag(name)
        if flag:
            check(flag in d.flags, "%s: %s is %s, a flag of dpbudgetd --help" % (where, name, flag))
            value = str(value)
            if flag in d.flags and d.flags[flag] is None:  # a switch: 1 or 0
                check(value.lower() in SWITCH_VALUES, "%s: %s is a switch, 1 or 0 (got %r)"
                      % (where, name, value))
                if value.lower() in ("0", "false", "no", "off"):
                    continue
                value = True
            out[flag] = value
    return out


def parse_config(text, d, where):
    """A --config file as server/main.c reads it: `name = value`, or `name` for a switch;
    '#' starts a comment."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        m = re.match(r"^([a-z0-9][a-z0-9-]*)\s*(?:=\s*(.*))?$", s)
        if not check(m, "%s line %d: 'name = value' or 'name' (got %r)" % (where, n, s)):
            continue
        flag = "--" + m.group(1)
        if not check(flag in d.flags, "%s line %d: %s is a flag of dpbudgetd --help"
                     % (where, n, flag)):
            continue
        val = m.group(2)
        if d.flags[flag] is None:  # a switch: 'name' alone, or 'name = 1|0'
            check(val is None or val.lower() in SWITCH_VALUES,
                  "%s line %d: %s is a switch, no value or 1|0 (got %r)" % (where, n, flag, val))
            if val is not None and val.lower() in ("0", "false", "no", "off"):
                out.pop(flag, None)
                continue
            val = True
        else:
            check(val, "%s line %d: %s needs a value" % (where, n, flag))
        out[flag] = val
    return out


def effective(d, *layers):
    """Precedence flags > environment > config file > defaults: layers from strongest."""
    out = {}
    for layer in reversed(layers):
        out.update(layer)
    for flag in ("--listen", "--port", "--data-dir"):
        out.setdefault(flag, d.defaults.get(flag))
    return out


def check_keys_file(text, where):
    """An --api-keys file as server/auth.c reads it: '<sha256 hex> <scopes> [name]' lines,
    '#' comments; the daemon refuses a file with no key."""
    keys = 0
    for n, line in enumerate((text or "").splitlines(), 1):
        toks = line.split("#", 1)[0].split()
        if not toks:
            continue
        keys += 1
        ok = (len(toks) >= 2 and re.fullmatch(r"[0-9a-fA-F]{64}", toks[0]) is not None
              and set(toks[1].split(",")) <= SCOPES and "" not in toks[1].split(","))
        check(ok, "%s line %d: '<sha256 hex of token> <scopes> [name]' with scopes a comma "
              "list of read,charge,admin (got %r)" % (where, n, line))
    check(keys, "%s: the API keys file has a key" % where)


def check_settings(s, d, where, need_nonloopback=True):
    """The settings every container deployment needs; returns (port, data_dir)."""
    if need_nonloopback:
        check(s.get("--listen") not in LOOPBACK and not str(s.get("--listen")).startswith("127."),
              "%s: --listen is not loopback in a container (got %s)" % (where, s.get("--listen")))
    check(("--tls-cert" in s) == ("--tls-key" in s), "%s: --tls-cert and --tls-key go together" % where)
    port = s.get("--port")
    check(port and str(port).isdigit() and 0 < int(port) < 65536,
          "%s: --port is a fixed port (got %s)" % (where, port))
    data_dir = s.get("--data-dir")
    check(data_dir and str(data_dir).startswith("/"),
          "%s: --data-dir is an absolute path (got %s)" % (where, data_dir))
    return (int(port) if port and str(port).isdigit() else None), data_dir


# ---------------------------------------------------------------- YAML


def load_yaml_files():
    """{path: [documents]} of every .yml/.yaml under deploy/, each file checked to parse."""
    try:
        import yaml  # python3-yaml
    except ImportError:
        check(False, "python3-yaml is installed (import yaml)")
        return {}

    files = {}
    for dirpath, _, names in sorted(os.walk(DEPLOY)):
        for name in sorted(names):
            if not name.endswith((".yml", ".yaml")):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path, encoding="utf-8") as f:
                    docs = [x for x in yaml.safe_load_all(f) if x is not None]
                check(docs, "%s parses as YAML" % rel(path))
            except (OSError, yaml.YAMLError) as e:
                check(False, "%s parses as YAML: %s" % (rel(path), str(e).replace("\n", " ")))
                docs = []
            files[path] = docs
    check(files, "deploy/ has YAML files")
    return files


# ---------------------------------------------------------------- Dockerfile


class Dockerfile:
    def __init__(self, path):
        self.path = path
        self.comments = []
        self.stages = []  # [{"from": str, "name": str|None, "instr": [(INSTR, args)]}]
        text = open(path, encoding="utf-8").read()
        cur = ""
        for line in text.splitlines():
            s = line.strip()
            if s.startswith("#"):
                self.comments.append(s)
                continue  # comment lines are dropped, even inside a continuation
            if not s and not cur:
                continue
            if s.endswith("\\"):
                cur += s[:-1] + " "
                continue
            self._add(cur + s)
            cur = ""
        if cur.strip():
            self._add(cur)

    def _add(self, line):
        m = re.match(r"^([A-Za-z]+)\s*(.*)$", line.strip())
        if not m:
            return
        instr, args = m.group(1).upper(), m.group(2).strip()
        if instr == "FROM":
            f = re.match(r"^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", args, re.I)
            self.stages.append({"from": f.group(1), "name": f.group(2), "instr": []})
        elif self.stages:
            self.stages[-1]["instr"].append((instr, args))

    def all(self, instr, stage=None):
        stages = self.stages if stage is None else [stage]
        return [a for s in stages for i, a in s["instr"] if i == instr]

    @staticmethod
    def exec_form(args):
        try:
            v = json.loads(args)
            return v if isinstance(v, list) and all(isinstance(x, str) for x in v) else None
        except ValueError:
            return None

    def labels(self, stage):
        out = {}
        for a in self.all("LABEL", stage):
            for tok in shlex.split(a):
                if "=" in tok:
                    k, v = tok.split("=", 1)
                    out[k] = v
        return out


def apt_packages(run_args):
    """Package names of the apt-get/apt install commands in a RUN line."""
    pkgs = []
    for cmd in re.split(r"&&|;|\|\|", run_args):
        toks = cmd.split()
        for i, t in enumerate(toks):
            if t in ("apt-get", "apt") and "install" in toks[i + 1:]:
                after = toks[toks.index("install", i) + 1:]
                pkgs += [x for x in after if not x.startswith("-")]
                break
    return pkgs


def check_dockerfile(d, routes, linked):
    """Returns (image tag, CMD settings, uid) for the other checks."""
    path = os.path.join(ROOT, "Dockerfile")
    if not check(os.path.isfile(path), "Dockerfile exists"):
        return None, {}, None
    df = Dockerfile(path)
    W = "Dockerfile"
    check(len(df.stages) >= 2, "%s: multi-stage (got %d stages)" % (W, len(df.stages)))
    if not df.stages:
        return None, {}, None
    build, final = df.stages[0], df.stages[-1]
    check(all(s["from"].startswith("debian:12") for s in df.stages),
          "%s: every stage is debian:12 (bookworm) (got %s)" % (W, [s["from"] for s in df.stages]))
    check(final["from"] == "debian:12-slim",
          "%s: the final stage is debian:12-slim (got %s)" % (W, final["from"]))

    # build stage: deps.sh, make, make install PREFIX=/usr/local DESTDIR=X
    runs = " && ".join(df.all("RUN", build))
    check("scripts/deps.sh" in runs,
          "%s: the build stage installs its packages with scripts/deps.sh" % W)
    # the scripts deps.sh runs are copied with it (it runs before the rest is copied)
    deps_copy = [c for c in df.all("COPY", build) if "scripts/deps.sh" in c]
    with open(os.path.join(ROOT, "scripts/deps.sh")) as f:
        helpers = sorted(set(re.findall(r"scripts/([\w.-]+\.sh)", f.read())) - {"deps.sh"})
    for helper in helpers:
        check(any("scripts/" + helper in c for c in deps_copy),
              "%s: scripts/%s, which deps.sh runs, is copied with it (%s)" % (W, helper, deps_copy))
    m = re.search(r"make install\b[^&;]*", runs)
    inst = m.group(0) if m else ""
    prefix = re.search(r"PREFIX=(\S+)", inst)
    destdir = re.search(r"DESTDIR=(\S+)", inst)
    check(prefix and prefix.group(1) == "/usr/local" and destdir,
          "%s: the build stage runs make install PREFIX=/usr/local DESTDIR=... (got %r)" % (W, inst))
    if destdir:
        src = destdir.group(1).rstrip("/") + "/usr/local"
        copies = [a for a in df.all("COPY", final) if re.search(r"--from=", a)]
        check(any(src in a and re.search(r"\s/usr/local/?$", a) for a in copies),
              "%s: the final stage copies %s/ to /usr/local/ (got %s)" % (W, src, copies))

    # final stage: the runtime libraries of the binary, no toolchain
    final_pkgs = [p for a in df.all("RUN", final) for p in apt_packages(a)]
    bad = [p for p in final_pkgs if p.endswith("-dev") or p in
           ("build-essential", "gcc", "cc", "clang", "make", "pkg-config")]
    check(not bad, "%s: no compiler or -dev package in the final stage (got %s)" % (W, bad))
    if check(linked, "the libraries %s links are known to dpkg (readelf, ldd, dpkg -S)" % d.binary):
        present = with_depends(set(final_pkgs) | BASE_PACKAGES)
        for soname, pkg in sorted(linked.items()):
            if re.match(r"^lib(a|ub|l|t|hwa)san\.", soname):
                continue  # a sanitizer build (build-san/): not what the image builds
            check(pkg in present, "%s: the final stage installs %s (or a package that depends "
                  "on it), the package of %s that dpbudgetd links" % (W, pkg, soname))

    # user, entrypoint, command
    users = df.all("USER", final)
    uid = users[-1].split(":")[0] if users else None
    check(uid and uid.isdigit() and uid != "0",
          "%s: USER is a numeric non-root uid (runAsNonRoot can verify it) (got %s)" % (W, uid))
    ep = df.exec_form((df.all("ENTRYPOINT", final) or [""])[-1])
    check(ep and os.path.basename(ep[0]) == "dpbudgetd",
          "%s: ENTRYPOINT is [\"dpbudgetd\"] in exec form (got %s)" % (W, ep))
    cmd = df.exec_form((df.all("CMD", final) or [""])[-1])
    check(cmd is not None, "%s: CMD is in exec form" % W)
    cmd_flags = parse_args(cmd or [], d, W + " CMD")
    port, data_dir = check_settings(effective(d, cmd_flags), d, W + " CMD")

    exposed = " ".join(df.all("EXPOSE", final)).split()
    check(port and ("%d" % port in exposed or "%d/tcp" % port in exposed),
          "%s: EXPOSE %s, the --port of CMD (got %s)" % (W, port, exposed))
    vols = []
    for a in df.all("VOLUME", final):
        vols += df.exec_form(a) or a.split()
    check(data_dir in vols, "%s: VOLUME %s, the --data-dir of CMD (got %s)" % (W, data_dir, vols))
    # the HEALTHCHECK is the daemon's own probe (GET /healthz over HTTP or TLS, as the
    # environment configures the daemon), in exec form, on the port of CMD
    hc = " ".join(df.all("HEALTHCHECK", final))
    hc_cmd = df.exec_form(re.sub(r"^.*?\bCMD\s+", "", hc)) if re.search(r"\bCMD\s", hc) else None
    check(hc_cmd and os.path.basename(hc_cmd[0]) == "dpbudgetd" and "--healthcheck" in hc_cmd,
          "%s: the HEALTHCHECK is [\"dpbudgetd\", \"--healthcheck\", ...] in exec form (got %s)"
          % (W, hc_cmd))
    check("--healthcheck" in d.help, "%s --help documents --healthcheck" % d.binary)
    check("/healthz" in routes, "server/routes.c: /healthz (the --healthcheck probe) is a GET route")
    hc_port = None
    if hc_cmd and "--port" in hc_cmd[:-1]:
        hc_port = hc_cmd[hc_cmd.index("--port") + 1]
    check(port and hc_port == "%d" % port,
          "%s: the HEALTHCHECK probes --port %s, the --port of CMD (got %s)" % (W, port, hc_port))
    check(not re.search(r"/dev/tcp|\bcurl\b|\bwget\b", hc),
          "%s: the HEALTHCHECK needs no shell, curl or wget (it is dpbudgetd --healthcheck)" % W)

    # image name and version
    tags = []
    for c in df.comments:
        tags += re.findall(r"docker build\b.*?(?:-t|--tag)[ =](\S+)", c)
    labels = df.labels(final)
    if labels.get("org.opencontainers.image.ref.name"):
        tags.append(labels["org.opencontainers.image.ref.name"])
    check(len(set(tags)) == 1, "%s: one image tag in a `docker build -t` comment (got %s)" % (W, tags))
    tag = tags[0] if tags else None
    if tag:
        check(":" in tag and tag.rsplit(":", 1)[1] == d.version,
              "%s: the image tag %s has the daemon's version %s" % (W, tag, d.version))
    check(labels.get("org.opencontainers.image.version") == d.version,
          "%s: LABEL org.opencontainers.image.version is the daemon's version %s (got %s)"
          % (W, d.version, labels.get("org.opencontainers.image.version")))
    return tag, cmd_flags, uid


def dockerfile_env(df, stage):
    """The ENV of a stage: {name: value} (ENV K=V [K2=V2 ...] or ENV K V)."""
    env = {}
    for a in df.all("ENV", stage):
        toks = shlex.split(a)
        if toks and all("=" in t for t in toks):
            env.update(t.split("=", 1) for t in toks)
        elif toks:
            env[toks[0]] = " ".join(toks[1:])
    return env


def with_values(argv, values):
    """argv with the value after each flag of values replaced (appended when absent)."""
    out = list(argv)
    for flag, v in values.items():
        if flag in out[:-1]:
            out[out.index(flag) + 1] = v
        else:
            out += [flag, v]
    return out


def http_status(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def check_image_start(d):
    """The container's start path, without a container runtime: the binary as the image
    holds it (make install), its ENV, ENTRYPOINT and CMD from the Dockerfile."""
    W = "Dockerfile"
    df = Dockerfile(os.path.join(ROOT, "Dockerfile"))
    if not df.stages:
        return
    final = df.stages[-1]
    env_img = dockerfile_env(df, final)
    ep = df.exec_form((df.all("ENTRYPOINT", final) or [""])[-1]) or []
    cmd = df.exec_form((df.all("CMD", final) or [""])[-1]) or []
    hc = " ".join(df.all("HEALTHCHECK", final))
    hc_cmd = df.exec_form(re.sub(r"^.*?\bCMD\s+", "", hc)) if re.search(r"\bCMD\s", hc) else None
    keys_path = env_img.get("DPBUDGET_API_KEYS")
    check(keys_path and keys_path.startswith("/"),
          "%s: ENV DPBUDGET_API_KEYS names where the image reads its API keys file (got %s)"
          % (W, keys_path))
    # the documented docker run mounts the keys file where the image reads it
    runs = " ".join(c.lstrip("#").strip() for c in df.comments)
    mounts = re.findall(r"-v\s+\"?[^\s\"]*:(/[^\s\":]+)(?::ro)?\"?", runs)
    check(keys_path in mounts, "%s: the documented `docker run` mounts the keys file at %s "
          "(ENV DPBUDGET_API_KEYS) (mounts %s)" % (W, keys_path, mounts))
    if not ep or not cmd:
        check(False, "%s: ENTRYPOINT and CMD in exec form, to run them" % W)
        return
    tmp = tempfile.mkdtemp(prefix="dpb-image-")
    procs = []
    try:
        root = os.path.join(tmp, "root")
        build = os.path.dirname(d.binary)
        # DAEMON= the binary under test and -o it: installed as it is, never rebuilt
        r = subprocess.run(["make", "-s", "-C", ROOT, "-o", d.binary, "install", "BUILD=" + build,
                            "DAEMON=" + d.binary, "PREFIX=/usr/local", "DESTDIR=" + root],
                           capture_output=True, text=True, timeout=120)
        bindir = os.path.join(root, "usr", "local", "bin")
        if not check(r.returncode == 0 and os.path.isfile(os.path.join(bindir, "dpbudgetd")),
                     "make install PREFIX=/usr/local DESTDIR=... stages bin/dpbudgetd (%s)"
                     % r.stderr.strip()[-200:]):
            return
        # the container's environment: the image's ENV and a PATH, nothing of ours
        env = {"PATH": bindir + ":/usr/bin:/bin", **env_img}
        exe = shutil.which(ep[0], path=env["PATH"])
        check(exe and exe.startswith(bindir), "%s: ENTRYPOINT %s is the installed binary" % (W, ep[0]))
        if not exe:
            return
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        port_file = os.path.join(tmp, "port")
        argv = [exe] + ep[1:] + with_values(cmd, {"--port": "0", "--data-dir": data})
        argv += ["--port-file", port_file, "--shutdown-grace", "0"]

        # nothing mounted: a refusal that says which file and which variable
        if os.path.exists(keys_path or "/"):
            check(True, "%s exists on this machine: the refusal without it is not tried" % keys_path)
        else:
            r = subprocess.run(argv, env=env, cwd=data, capture_output=True, text=True, timeout=30)
            check(r.returncode == 2 and keys_path in r.stderr and "DPBUDGET_API_KEYS" in r.stderr
                  and "mount" in r.stderr,
                  "%s: without its keys file the image's command exits 2 naming %s, "
                  "DPBUDGET_API_KEYS and the mount (got %d: %s)"
                  % (W, keys_path, r.returncode, r.stderr.strip()[:300]))

        # the keys file mounted (here: given by DPBUDGET_API_KEYS, as docker run -e would)
        token = "image-start-token"
        keys = os.path.join(tmp, "api-keys")
        with open(keys, "w") as f:
            f.write("%s read,charge,admin image-test\n" % hashlib.sha256(token.encode()).hexdigest())
        env_keys = dict(env, DPBUDGET_API_KEYS=keys)
        log = open(os.path.join(tmp, "stderr"), "w+")
        p = subprocess.Popen(argv, env=env_keys, cwd=data, stdout=log, stderr=log)
        procs.append(p)
        port = None
        for _ in range(100):
            if os.path.exists(port_file) and open(port_file).read().strip().isdigit():
                port = int(open(port_file).read().strip())
                break
            if p.poll() is not None:
                break
            time.sleep(0.05)
        log.seek(0)
        out = log.read()
        if not check(port, "%s: with a keys file the image's command starts listening (%s)"
                     % (W, out.strip()[-300:])):
            return
        base = "http://127.0.0.1:%d" % port
        check(http_status(base + "/healthz") == 200, "%s: GET /healthz answers 200" % W)
        check(http_status(base + "/v1/summary") == 401, "%s: the ledger needs a key" % W)
        check(http_status(base + "/v1/summary", token) == 200, "%s: the mounted key is accepted" % W)
        if hc_cmd:
            hr = subprocess.run([shutil.which(hc_cmd[0], path=env["PATH"]) or hc_cmd[0]] +
                                with_values(hc_cmd[1:], {"--port": str(port)}),
                                env=env_keys, capture_output=True, text=True, timeout=30)
            check(hr.returncode == 0, "%s: the HEALTHCHECK command passes against it (%d: %s)"
                  % (W, hr.returncode, (hr.stdout + hr.stderr).strip()[:200]))
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, "%s: the image's command stops on SIGTERM (STOPSIGNAL) with 0 (got %s)" % (W, rc))
        log.seek(0)
        check(token not in log.read(), "%s: the daemon never prints a token" % W)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- Kubernetes


def quantity_cpu(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def check_stop(d, st, pod, c, C, after_s):
    """Issue 34: the pod's stop budget covers the daemon's drain. terminationGracePeriodSeconds
    >= --shutdown-grace + --shutdown-deadline + after_s (the final snapshot, or a margin), and
    the grace covers the readiness probe's noticing (periodSeconds x failureThreshold), so that
    no load balancer still routes to a daemon that stopped accepting."""
    def num(flag):
        try:
            return float(st.get(flag, d.defaults.get(flag)))
        except (TypeError, ValueError):
            return None
    grace, deadline = num("--shutdown-grace"), num("--shutdown-deadline")
    if not check(grace is not None and deadline is not None,
                 "%s: --shutdown-grace and --shutdown-deadline are known (given, or the --help "
                 "defaults: %s %s)" % (C, grace, deadline)):
        return
    tgps = pod.get("terminationGracePeriodSeconds", 30)
    check(tgps >= grace + deadline + after_s,
          "%s: terminationGracePeriodSeconds %s covers --shutdown-grace %g + --shutdown-deadline "
          "%g + %g s" % (C, tgps, grace, deadline, after_s))
    rp = c.get("readinessProbe") or {}
    notice = rp.get("periodSeconds", 10) * rp.get("failureThreshold", 3)
    check(grace >= notice, "%s: --shutdown-grace %g covers the readinessProbe's noticing "
          "(periodSeconds x failureThreshold = %g s)" % (C, grace, notice))


def check_k8s(files, d, routes, image, uid):
    k8s_dir = os.path.join(DEPLOY, "k8s")
    docs = [(p, x) for p, ds in files.items() if p.startswith(k8s_dir + os.sep)
            for x in ds if isinstance(x, dict)]
    kinds = {}
    for p, x in docs:
        kinds.setdefault(x.get("kind"), []).append((p, x))
    for kind in ("StatefulSet", "Service", "Secret", "ConfigMap"):
        check(kind in kinds, "deploy/k8s has a %s" % kind)

    def named(kind, name):
        return next((x for _, x in kinds.get(kind, []) if x["metadata"].get("name") == name), None)

    def path_of(doc):
        return next((rel(p) for p, x in docs if x is doc), "deploy/k8s")

    for p, sts in kinds.get("StatefulSet", []):
        W = "%s StatefulSet/%s" % (rel(p), sts["metadata"].get("name"))
        spec = sts.get("spec", {})
        check(spec.get("replicas") == 1, "%s: replicas is 1 (one file ledger)" % W)
        pod = spec.get("template", {}).get("spec", {})
        labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
        psc = pod.get("securityContext", {})
        vcts = {v["metadata"]["name"] for v in spec.get("volumeClaimTemplates", [])}
        check(vcts, "%s: has a volumeClaimTemplate" % W)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        ctrs = [c for c in pod.get("containers", []) if "dpbudgetd" in str(c.get("image"))]
        if not check(len(ctrs) == 1, "%s: one dpbudgetd container" % W):
            continue
        c = ctrs[0]
        C = "%s container %s" % (W, c.get("name"))
        check(c.get("image") == image, "%s: image is %s, the Dockerfile's tag (got %s)"
              % (C, image, c.get("image")))
        check(not c.get("command"), "%s: no command: the image's ENTRYPOINT runs" % C)
        args = parse_args(c.get("args", []), d, C + " args")
        env = {e["name"]: e.get("value", "") for e in c.get("env", []) if "name" in e}
        for ef in c.get("envFrom", []):
            cm = ef.get("configMapRef", {}).get("name")
            if cm and named("ConfigMap", cm):
                env.update(named("ConfigMap", cm).get("data", {}))
        envs = parse_env(env, d, C + " env")

        def mounted(path):
            """(volume, key in it) of the file at path in the container, or (None, None)."""
            for m in c.get("volumeMounts", []):
                mp = m["mountPath"].rstrip("/")
                if m.get("subPath") and path == mp:
                    return volumes.get(m["name"]), m["subPath"]
                if not m.get("subPath") and path.startswith(mp + "/"):
                    return volumes.get(m["name"]), path[len(mp) + 1:]
            return None, None

        conf = {}
        cfg_path = args.get("--config") or envs.get("--config")
        if cfg_path:
            vol, key = mounted(cfg_path)
            cm = named("ConfigMap", (vol or {}).get("configMap", {}).get("name"))
            text = (cm or {}).get("data", {}).get(key)
            if check(text is not None,
                     "%s: --config %s is a key of a mounted ConfigMap" % (C, cfg_path)):
                conf = parse_config(text, d, "%s ConfigMap/%s %s"
                                    % (path_of(cm), cm["metadata"]["name"], key))
        s = effective(d, args, envs, conf)
        port, data_dir = check_settings(s, d, C)
        check_stop(d, s, pod, c, C, 15)

        keys = s.get("--api-keys")
        if check(keys, "%s: --api-keys is given (a non-loopback daemon needs keys)" % C):
            vol, key = mounted(keys)
            sname = (vol or {}).get("secret", {}).get("secretName")
            sec = named("Secret", sname)
            text = None
            if sec is not None:
                text = (sec.get("stringData") or {}).get(key)
                if text is None and key in (sec.get("data") or {}):
                    text = base64.b64decode(sec["data"][key]).decode("utf-8", "replace")
            if check(text is not None,
                     "%s: --api-keys %s is a key of a mounted Secret" % (C, keys)):
                check_keys_file(text, "%s Secret/%s %s" % (path_of(sec), sname, key))

        # ports and probes
        cports = {x.get("name"): x.get("containerPort") for x in c.get("ports", [])}
        check(port in cports.values(), "%s: containerPort %s, the --port (got %s)"
              % (C, port, list(cports.values())))

        def port_of(ref):
            return cports.get(ref) if isinstance(ref, str) else ref

        tls = "--tls-cert" in s
        want = {"livenessProbe": ["/healthz"], "readinessProbe": ["/readyz"],
                "startupProbe": ["/healthz", "/readyz"]}
        for probe, paths in want.items():
            pr = c.get(probe, {}).get("httpGet")
            if not check(pr, "%s: %s is an httpGet probe" % (C, probe)):
                continue
            check(pr.get("path") in paths, "%s: %s path is %s (got %s)"
                  % (C, probe, " or ".join(paths), pr.get("path")))
            check(pr.get("path") in routes, "server/routes.c: %s (%s %s) is a GET route"
                  % (pr.get("path"), C, probe))
            check(port_of(pr.get("port")) == port, "%s: %s port is the --port %s" % (C, probe, port))
            check(pr.get("scheme", "HTTP") == ("HTTPS" if tls else "HTTP"),
                  "%s: %s scheme is %s" % (C, probe, "HTTPS with --tls-cert" if tls else "HTTP"))

        # data volume
        dm = [m for m in c.get("volumeMounts", [])
              if m["mountPath"].rstrip("/") == str(data_dir).rstrip("/")]
        check(dm and dm[0]["name"] in vcts and not dm[0].get("readOnly"),
              "%s: a volumeClaimTemplate is mounted read-write at the --data-dir %s" % (C, data_dir))

        # resources
        res = c.get("resources", {})
        for k in ("requests", "limits"):
            check(all(r in res.get(k, {}) for r in ("cpu", "memory")),
                  "%s: resources.%s has cpu and memory" % (C, k))
        threads = s.get("--threads")
        cpu_limit = res.get("limits", {}).get("cpu")
        if cpu_limit is not None:
            most = max(1, round(quantity_cpu(cpu_limit)))
            check(str(threads).isdigit() and 0 < int(threads) <= most,
                  "%s: --threads is set, at most the CPU limit %s (0 would count the node's "
                  "CPUs) (got %s)" % (C, cpu_limit, threads))

        # security
        csc = c.get("securityContext", {})
        check(csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, "%s: runAsNonRoot" % C)
        ruid = csc.get("runAsUser", psc.get("runAsUser"))
        check(ruid is None or str(ruid) == str(uid),
              "%s: runAsUser is the image's uid %s (got %s)" % (C, uid, ruid))
        check(csc.get("readOnlyRootFilesystem") is True, "%s: readOnlyRootFilesystem" % C)
        check(csc.get("allowPrivilegeEscalation") is False,
              "%s: allowPrivilegeEscalation is false" % C)
        check("ALL" in csc.get("capabilities", {}).get("drop", []), "%s: capabilities drop ALL" % C)

        # services
        svcs = [x for _, x in kinds.get("Service", [])
                if x.get("spec", {}).get("selector") and
                all(labels.get(k) == v for k, v in x["spec"]["selector"].items())]
        check(svcs, "%s: a Service selects the pod" % W)
        check(spec.get("serviceName") in [x["metadata"]["name"] for x in svcs],
              "%s: serviceName is a Service of the pod" % W)
        for svc in svcs:
            S = "Service/%s" % svc["metadata"]["name"]
            sp = svc["spec"].get("ports", [])
            check(any(x.get("port") == port and port_of(x.get("targetPort", x.get("port"))) == port
                      for x in sp),
                  "%s: port and targetPort are the --port %s (got %s)" % (S, port, sp))
        if pod.get("enableServiceLinks", True) is not False:
            for _, svc in kinds.get("Service", []):
                n = svc["metadata"]["name"].upper().replace("-", "_") + "_"
                check(not n.startswith("DPBUDGET_"), "%s: with service links, Service/%s injects "
                      "%s* variables, read as settings" % (W, svc["metadata"]["name"], n))


# ---------------------------------------------------------------- compose and Prometheus


def check_compose(files, d, routes, image, cmd_flags):
    path = os.path.join(DEPLOY, "compose", "docker-compose.yml")
    if not check(path in files and files[path], "%s exists" % rel(path)):
        return
    W = rel(path)
    comp = files[path][0]
    here = os.path.dirname(path)
    services = comp.get("services", {})
    dpb = [(n, s) for n, s in services.items() if "dpbudgetd" in str(s.get("image"))]
    if not check(len(dpb) == 1, "%s: one dpbudgetd service" % W):
        return
    name, svc = dpb[0]
    S = "%s service %s" % (W, name)
    check(svc.get("image") == image,
          "%s: image is %s, the Dockerfile's tag (got %s)" % (S, image, svc.get("image")))
    b = svc.get("build")
    ctx = b.get("context", ".") if isinstance(b, dict) else b
    if ctx is not None:
        check(os.path.normpath(os.path.join(here, ctx)) == ROOT,
              "%s: build context is the repository root (got %s)" % (S, ctx))
    check(not svc.get("entrypoint"), "%s: no entrypoint: the image's runs" % S)
    cmd = svc.get("command")
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    args = parse_args(cmd, d, S + " command") if cmd is not None else cmd_flags
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    s = effective(d, args, parse_env(env, d, S + " environment"))
    port, data_dir = check_settings(s, d, S)

    published = []
    for p in svc.get("ports", []):
        target = p.get("target") if isinstance(p, dict) else str(p).split("/")[0].split(":")[-1]
        published.append(int(target))
    check(port in published,
          "%s: publishes the container port %s, the --port (got %s)" % (S, port, published))
    targets = []
    for v in svc.get("volumes", []):
        if isinstance(v, dict):
            targets.append(v.get("target"))
        else:
            targets.append((str(v).split(":") + [""])[1] or str(v))
    check(data_dir in targets,
          "%s: a volume is mounted at the --data-dir %s (got %s)" % (S, data_dir, targets))

    keys = s.get("--api-keys")
    if check(keys, "%s: --api-keys is given (a non-loopback daemon needs keys)" % S):
        m = re.match(r"^/run/secrets/(.+)$", str(keys))
        sec = (comp.get("secrets") or {}).get(m.group(1)) if m else None
        f = os.path.join(here, sec["file"]) if sec and "file" in sec else None
        if check(f and os.path.isfile(f),
                 "%s: --api-keys %s is a compose secret from a file" % (S, keys)):
            check_keys_file(open(f, encoding="utf-8").read(), rel(f))

    # Prometheus
    proms = [(n, x) for n, x in services.items() if "prometheus" in str(x.get("image"))]
    if not check(proms, "%s: a Prometheus service" % W):
        return
    pn, prom = proms[0]
    P = "%s service %s" % (W, pn)
    cfg = None
    for v in prom.get("volumes", []):
        if isinstance(v, dict):
            src, dst = v.get("source"), v.get("target")
        else:
            src, dst = (str(v).split(":") + [""])[:2]
        if src and dst and dst.endswith("prometheus.yml"):
            cfg = os.path.normpath(os.path.join(here, src))
    if not check(cfg and cfg in files and files[cfg], "%s: mounts a prometheus.yml of deploy/" % P):
        return
    pc = files[cfg][0]
    target = "%s:%s" % (name, port)
    jobs = [j for j in pc.get("scrape_configs", [])
            if any(target in sc.get("targets", []) for sc in j.get("static_configs", []))]
    check(jobs, "%s: a scrape job targets %s, the dpbudgetd service and its --port"
          % (rel(cfg), target))
    for j in jobs:
        mp = j.get("metrics_path", "/metrics")
        check(mp in routes, "server/routes.c: %s (%s job %s metrics_path) is a GET route"
              % (mp, rel(cfg), j.get("job_name")))
        check(j.get("scheme", "http") == ("https" if "--tls-cert" in s else "http"),
              "%s: job %s scheme matches the daemon's TLS setting" % (rel(cfg), j.get("job_name")))


# ---------------------------------------------------------------- replicated (PostgreSQL)


def check_ledger_url(url, where, literal_password_ok=False):
    """A --ledger-url value: a PostgreSQL url, no literal password (a ${VAR} substitution or
    none at all)."""
    url = str(url or "")
    check(re.match(r"^postgres(ql)?://", url), "%s: --ledger-url is a postgresql:// url (got %r)"
          % (where, url))
    m = re.match(r"^postgres(?:ql)?://([^@/]*)@", url)
    pw = m.group(1).split(":", 1)[1] if m and ":" in m.group(1) else None
    check(literal_password_ok or pw is None or re.fullmatch(r"\$\{[A-Z_]+(:?\?[^}]*)?\}", pw),
          "%s: the ledger url holds no literal password (got %r)" % (where, pw))
    host = re.match(r"^postgres(?:ql)?://(?:[^@/]*@)?([^:/?]+)", url)
    return host.group(1) if host else None


def check_compose_replicated(files, d, routes, image):
    path = os.path.join(DEPLOY, "compose", "replicated", "docker-compose.yml")
    if not check(path in files and files[path], "%s exists" % rel(path)):
        return
    W = rel(path)
    here = os.path.dirname(path)
    comp = files[path][0]
    services = comp.get("services", {})
    pgs = [(n, x) for n, x in services.items() if str(x.get("image", "")).startswith("postgres:")]
    if check(len(pgs) == 1, "%s: one postgres service" % W):
        pn, pgsvc = pgs[0]
        check(pgsvc.get("image") == "postgres:15", "%s: PostgreSQL 15 (got %s)" % (W, pgsvc.get("image")))
        vols = [str(v.get("target") if isinstance(v, dict) else (str(v).split(":") + [""])[1])
                for v in pgsvc.get("volumes", [])]
        check("/var/lib/postgresql/data" in vols,
              "%s: the postgres service keeps its data on a volume (got %s)" % (W, vols))
        check((pgsvc.get("healthcheck") or {}).get("test"), "%s: postgres has a healthcheck" % W)
    else:
        pn = None
    reps = [(n, x) for n, x in services.items() if "dpbudgetd" in str(x.get("image"))]
    check(len(reps) == 3, "%s: three dpbudgetd replicas (got %d)" % (W, len(reps)))
    ports = set()
    for name, svc in reps:
        S = "%s service %s" % (W, name)
        check(svc.get("image") == image, "%s: image is %s (got %s)" % (S, image, svc.get("image")))
        b = svc.get("build")
        ctx = b.get("context", ".") if isinstance(b, dict) else b
        if ctx is not None:
            check(os.path.normpath(os.path.join(here, ctx)) == ROOT,
                  "%s: build context is the repository root (got %s)" % (S, ctx))
        cmd = svc.get("command")
        if isinstance(cmd, str):
            cmd = shlex.split(cmd)
        check(cmd is not None, "%s: a command replaces the image's CMD (which names a --data-dir)" % S)
        args = parse_args(cmd or [], d, S + " command")
        env = svc.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
        st = effective(d, args, parse_env(env, d, S + " environment"))
        check("--data-dir" in d.flags and "--data-dir" not in args and
              "DPBUDGET_DATA_DIR" not in env,
              "%s: no --data-dir (the ledger is in PostgreSQL; both are refused)" % S)
        host = check_ledger_url(st.get("--ledger-url"), S)
        check(pn and host == pn, "%s: --ledger-url names the postgres service %s (got %s)"
              % (S, pn, host))
        dep = svc.get("depends_on") or {}
        cond = dep.get(pn, {}).get("condition") if isinstance(dep, dict) and pn else None
        check(cond == "service_healthy",
              "%s: starts once postgres is healthy (depends_on condition service_healthy)" % S)
        port = st.get("--port")
        check(port and str(port).isdigit(), "%s: --port is a fixed port (got %s)" % (S, port))
        ports.add(str(port))
        check(not str(st.get("--listen")).startswith("127."), "%s: --listen is not loopback" % S)
        keys = st.get("--api-keys")
        if check(keys, "%s: --api-keys is given (a non-loopback daemon needs keys)" % S):
            m = re.match(r"^/run/secrets/(.+)$", str(keys))
            sec = (comp.get("secrets") or {}).get(m.group(1)) if m else None
            f = os.path.join(here, sec["file"]) if sec and "file" in sec else None
            if check(f and os.path.isfile(f), "%s: --api-keys %s is a compose secret from a file"
                     % (S, keys)):
                check_keys_file(open(f, encoding="utf-8").read(), rel(f))
        vols = svc.get("volumes") or []
        check(not vols, "%s: no volume (replicas keep no ledger files) (got %s)" % (S, vols))
    check(len(ports) == 1, "%s: the replicas listen on one --port (got %s)" % (W, sorted(ports)))
    # the proxy: its configuration file is in the directory, balances over the three
    # replicas at their port and health-checks GET /readyz
    proxies = [(n, x) for n, x in services.items()
               if re.search(r"haproxy|nginx|envoy|traefik", str(x.get("image")))]
    if not check(len(proxies) == 1, "%s: one proxy service" % W):
        return
    xn, proxy = proxies[0]
    cfgs = []
    for v in proxy.get("volumes", []):
        src = v.get("source") if isinstance(v, dict) else str(v).split(":")[0]
        if src and src.startswith("."):
            cfgs.append(os.path.normpath(os.path.join(here, src)))
    cfg = next((c for c in cfgs if os.path.isfile(c)), None)
    if not check(cfg and os.path.dirname(cfg) == here,
                 "%s service %s: mounts its configuration from %s (got %s)"
                 % (W, xn, rel(here), [rel(c) for c in cfgs])):
        return
    text = open(cfg, encoding="utf-8").read()
    port = next(iter(ports), None)
    for name, _ in reps:
        check(re.search(r"\b%s:%s\b" % (re.escape(name), port), text),
              "%s: balances over %s:%s" % (rel(cfg), name, port))
    hc = re.search(r"(?:httpchk|health_check|health)\s+(?:GET\s+)?(/\S+)", text)
    check(hc and hc.group(1) == "/readyz" and "/readyz" in routes,
          "%s: health-checks the replicas with GET /readyz, a GET route (got %s)"
          % (rel(cfg), hc and hc.group(1)))
    published = [str(p.get("target") if isinstance(p, dict) else str(p).split(":")[-1])
                 for p in proxy.get("ports", [])]
    check(published, "%s service %s: publishes a port" % (W, xn))


def check_k8s_replicated(files, d, routes, image, uid):
    rdir = os.path.join(DEPLOY, "k8s", "replicated")
    kpath = os.path.join(rdir, "kustomization.yaml")
    if not check(kpath in files and files[kpath], "%s exists" % rel(kpath)):
        return
    listed = [os.path.normpath(os.path.join(rdir, r)) for r in files[kpath][0].get("resources", [])]
    here = sorted(p for p in files if os.path.dirname(p) == rdir and p != kpath)
    check(sorted(listed) == here, "%s: lists every manifest of its directory (lists %s, has %s)"
          % (rel(kpath), [rel(p) for p in listed], [rel(p) for p in here]))
    docs = [x for p in here for x in files[p] if isinstance(x, dict)]

    def named(kind, name):
        return next((x for x in docs if x.get("kind") == kind and
                     x["metadata"].get("name") == name), None)

    deps = [x for x in docs if x.get("kind") == "Deployment"]
    if not check(len(deps) == 1, "%s: one Deployment" % rel(rdir)):
        return
    dep = deps[0]
    W = "%s Deployment/%s" % (rel(rdir), dep["metadata"].get("name"))
    spec = dep.get("spec", {})
    check((spec.get("replicas") or 0) >= 2, "%s: replicas >= 2 (got %s)" % (W, spec.get("replicas")))
    ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    check(spec.get("strategy", {}).get("type", "RollingUpdate") == "RollingUpdate" and
          str(ru.get("maxUnavailable")) == "0",
          "%s: rolls without downtime (RollingUpdate, maxUnavailable 0)" % W)
    pod = spec.get("template", {}).get("spec", {})
    labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    psc = pod.get("securityContext", {})
    check(pod.get("enableServiceLinks") is False, "%s: enableServiceLinks is false" % W)
    ctrs = [c for c in pod.get("containers", []) if "dpbudgetd" in str(c.get("image"))]
    if not check(len(ctrs) == 1, "%s: one dpbudgetd container" % W):
        return
    c = ctrs[0]
    C = "%s container %s" % (W, c.get("name"))
    check(c.get("image") == image, "%s: image is %s (got %s)" % (C, image, c.get("image")))
    check(not c.get("command"), "%s: no command: the image's ENTRYPOINT runs" % C)
    args = parse_args(c.get("args", []), d, C + " args")
    env, secret_env = {}, {}
    for e in c.get("env", []):
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            sec = named("Secret", ref.get("name"))
            val = ((sec or {}).get("stringData") or {}).get(ref.get("key"))
            if val is None and ref.get("key") in ((sec or {}).get("data") or {}):
                val = base64.b64decode(sec["data"][ref["key"]]).decode("utf-8", "replace")
            check(val is not None, "%s: env %s is a key of a Secret of the kustomization"
                  % (C, e.get("name")))
            env[e["name"]] = val or ""
            secret_env[e["name"]] = True
        else:
            env[e["name"]] = e.get("value", "")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    def mounted(path):
        for m in c.get("volumeMounts", []):
            mp = m["mountPath"].rstrip("/")
            if not m.get("subPath") and path.startswith(mp + "/"):
                return volumes.get(m["name"]), path[len(mp) + 1:]
        return None, None

    conf = {}
    cfg_path = args.get("--config")
    if cfg_path:
        vol, key = mounted(cfg_path)
        cm = named("ConfigMap", (vol or {}).get("configMap", {}).get("name"))
        text = (cm or {}).get("data", {}).get(key)
        if check(text is not None, "%s: --config %s is a key of a mounted ConfigMap of the "
                 "kustomization" % (C, cfg_path)):
            conf = parse_config(text, d, "%s %s" % (rel(rdir), key))
    st = effective(d, args, parse_env(env, d, C + " env"), conf)
    check_stop(d, st, pod, c, C, 5)
    check("--data-dir" not in args and "DPBUDGET_DATA_DIR" not in env and "--data-dir" not in conf,
          "%s: no --data-dir (the ledger is in PostgreSQL; both are refused)" % C)
    check(secret_env.get("DPBUDGET_LEDGER_URL"), "%s: DPBUDGET_LEDGER_URL comes from a Secret" % C)
    check_ledger_url(st.get("--ledger-url"), C)
    check(not [v for v in pod.get("volumes", []) if "persistentVolumeClaim" in v],
          "%s: no persistent volume (replicas keep no ledger files)" % W)
    port = st.get("--port")
    check(port and str(port).isdigit(), "%s: --port is a fixed port (got %s)" % (C, port))
    port = int(port) if port and str(port).isdigit() else None
    check(not str(st.get("--listen")).startswith("127."), "%s: --listen is not loopback" % C)
    keys = st.get("--api-keys")
    if check(keys, "%s: --api-keys is given" % C):
        vol, key = mounted(keys)
        sec = named("Secret", (vol or {}).get("secret", {}).get("secretName"))
        text = ((sec or {}).get("stringData") or {}).get(key)
        if check(text is not None, "%s: --api-keys %s is a key of a mounted Secret" % (C, keys)):
            check_keys_file(text, "%s Secret %s" % (rel(rdir), key))
    cports = {x.get("name"): x.get("containerPort") for x in c.get("ports", [])}
    check(port in cports.values(), "%s: containerPort is the --port %s" % (C, port))
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        pr = (c.get(probe) or {}).get("httpGet") or {}
        pp = cports.get(pr.get("port")) if isinstance(pr.get("port"), str) else pr.get("port")
        check(pr.get("path") == path and path in routes and pp == port,
              "%s: %s is GET %s on the --port (got %s)" % (C, probe, path, pr))
    csc = c.get("securityContext", {})
    check(csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, "%s: runAsNonRoot" % C)
    ruid = csc.get("runAsUser", psc.get("runAsUser"))
    check(ruid is None or str(ruid) == str(uid), "%s: runAsUser is the image's uid %s" % (C, uid))
    check(csc.get("readOnlyRootFilesystem") is True and csc.get("allowPrivilegeEscalation") is False
          and "ALL" in csc.get("capabilities", {}).get("drop", []),
          "%s: read-only root, no privilege escalation, capabilities dropped" % C)
    res = c.get("resources", {})
    check(all(r in res.get(k, {}) for k in ("requests", "limits") for r in ("cpu", "memory")),
          "%s: resources requests and limits have cpu and memory" % C)

    def selects(sel):
        return sel and all(labels.get(k) == v for k, v in sel.items())

    svcs = [x for x in docs if x.get("kind") == "Service" and selects(x["spec"].get("selector"))]
    if check(svcs, "%s: a Service of the kustomization selects the pods" % W):
        for svc in svcs:
            sp = svc["spec"].get("ports", [])
            check(any(x.get("port") == port and cports.get(x.get("targetPort"), x.get("targetPort"))
                      == port for x in sp),
                  "Service/%s: port and targetPort are the --port %s" % (svc["metadata"]["name"], port))
    pdbs = [x for x in docs if x.get("kind") == "PodDisruptionBudget" and
            selects(x["spec"].get("selector", {}).get("matchLabels"))]
    check(pdbs, "%s: a PodDisruptionBudget selects the pods" % W)
    # the single-node StatefulSet's Services must not select the replicas (two ledgers behind
    # one Service)
    k8s_dir = os.path.join(DEPLOY, "k8s")
    others = [x for p, ds in files.items() if os.path.dirname(p) == k8s_dir for x in ds
              if isinstance(x, dict) and x.get("kind") == "Service"]
    check(not [x for x in others if selects(x["spec"].get("selector"))],
          "%s: no Service of deploy/k8s (the single-node ledger) selects the replicas" % W)


# ---------------------------------------------------------------- monitoring


def check_monitoring(files, routes):
    """deploy/monitoring: the alert rules are loaded where Prometheus runs (compose mounts
    them where its rule_files point), the Kubernetes scrape job and ServiceMonitor select the
    Service of deploy/k8s and a port it names, scrape paths are GET routes, the Grafana
    dashboard is JSON with a query per panel. (promtool and a live scrape check the rules'
    and the dashboard's expressions and metric names: tests/monitoring/check_monitoring.py.)"""
    mon = os.path.join(DEPLOY, "monitoring")
    alerts = os.path.join(mon, "alerts.yml")
    if check(alerts in files and files[alerts], "%s exists" % rel(alerts)):
        rules = [r for g in files[alerts][0].get("groups", []) for r in g.get("rules", [])]
        names = {r.get("alert") for r in rules}
        for want in ("DpbudgetLedgerReadOnly", "DpbudgetFsyncSlow", "DpbudgetHigh5xxRate",
                     "DpbudgetClientsExhaustingFast", "DpbudgetRateLimited"):
            check(want in names, "%s: an alert %s" % (rel(alerts), want))
        for r in rules:
            check(r.get("expr") and (r.get("labels") or {}).get("severity")
                  and (r.get("annotations") or {}).get("summary"),
                  "%s: alert %s has an expr, a severity and a summary" % (rel(alerts), r.get("alert")))
        tests = os.path.join(mon, "alerts_test.yml")
        t = files.get(tests) or [{}]
        tested = {a.get("alertname") for x in t[0].get("tests", []) for a in x.get("alert_rule_test", [])}
        check("alerts.yml" in t[0].get("rule_files", []) and names <= tested,
              "%s: tests every alert of alerts.yml (untested: %s)"
              % (rel(tests), sorted(n for n in names - tested if n)))

    # compose: rule_files point at a mount of deploy/monitoring/alerts.yml
    cpath = os.path.join(DEPLOY, "compose", "docker-compose.yml")
    comp = (files.get(cpath) or [{}])[0]
    for n, svc in (comp.get("services") or {}).items():
        if "prometheus" not in str(svc.get("image")):
            continue
        mounts = {}
        for v in svc.get("volumes", []):
            src, dst = (str(v).split(":") + [""])[:2] if not isinstance(v, dict) else (
                v.get("source"), v.get("target"))
            if src and dst:
                mounts[dst] = os.path.normpath(os.path.join(os.path.dirname(cpath), src))
        cfg = mounts.get("/etc/prometheus/prometheus.yml")
        pc = (files.get(cfg) or [{}])[0]
        rf = pc.get("rule_files") or []
        if check(rf, "%s: loads rule files" % rel(cfg or cpath)):
            for r in rf:
                check(mounts.get(r) == alerts, "%s: rule file %s is deploy/monitoring/alerts.yml "
                      "mounted by %s service %s (got %s)" % (rel(cfg), r, rel(cpath), n,
                                                          mounts.get(r) and rel(mounts[r])))

    # Kubernetes: the Service of deploy/k8s and one of its named ports
    k8s_dir = os.path.join(DEPLOY, "k8s")
    services = [x for p, ds in files.items() if p.startswith(k8s_dir + os.sep) for x in ds
                if isinstance(x, dict) and x.get("kind") == "Service"]
    svc_ports = {(x["metadata"]["name"], pt.get("name")) for x in services
                 for pt in x.get("spec", {}).get("ports", [])}
    kp = os.path.join(mon, "prometheus-k8s.yml")
    pc = (files.get(kp) or [{}])[0]
    jobs = [j for j in pc.get("scrape_configs", []) if j.get("kubernetes_sd_configs")]
    if check(jobs, "%s: a scrape job with Kubernetes service discovery" % rel(kp)):
        for j in jobs:
            keep = [r for r in j.get("relabel_configs", []) if r.get("action") == "keep"]
            sel = {tuple(str(r.get("regex", "")).split(";")) for r in keep if r.get(
                "source_labels") == ["__meta_kubernetes_service_name",
                                     "__meta_kubernetes_endpoint_port_name"]}
            check(sel and sel <= svc_ports, "%s: job %s keeps a Service and port of deploy/k8s "
                  "(%s; the Services have %s)" % (rel(kp), j.get("job_name"), sorted(sel),
                                                  sorted(svc_ports)))
            check(j.get("metrics_path", "/metrics") in routes,
                  "%s: job %s metrics_path is a GET route" % (rel(kp), j.get("job_name")))
        check(pc.get("rule_files"), "%s: loads the alert rules" % rel(kp))
    sm_path = os.path.join(mon, "servicemonitor.yaml")
    for sm in files.get(sm_path) or []:
        want = sm.get("spec", {}).get("selector", {}).get("matchLabels", {})
        hits = [x for x in services
                if want and all(x["metadata"].get("labels", {}).get(k) == v for k, v in want.items())]
        if check(hits, "%s: selects a Service of deploy/k8s by its labels" % rel(sm_path)):
            for ep in sm.get("spec", {}).get("endpoints", []):
                check((hits[0]["metadata"]["name"], ep.get("port")) in svc_ports,
                      "%s: endpoint port %s is a named port of Service %s"
                      % (rel(sm_path), ep.get("port"), hits[0]["metadata"]["name"]))
                check(ep.get("path", "/metrics") in routes,
                      "%s: endpoint path %s is a GET route" % (rel(sm_path), ep.get("path")))

    gpath = os.path.join(mon, "grafana-dashboard.json")
    try:
        g = json.load(open(gpath, encoding="utf-8"))
    except (OSError, ValueError) as e:
        check(False, "%s is valid JSON: %s" % (rel(gpath), e))
        return
    panels = [p for p in g.get("panels", []) if p.get("type") != "row"]
    check(panels and all(any(t.get("expr") for t in p.get("targets", [])) for p in panels),
          "%s: every panel has a PromQL query" % rel(gpath))
    var_names = {v.get("name") for v in g.get("templating", {}).get("list", [])}
    used = set(re.findall(r"\$\{?(\w+)", json.dumps(panels)))
    check(used <= var_names, "%s: every variable used is defined (undefined: %s)"
          % (rel(gpath), sorted(used - var_names)))


# ---------------------------------------------------------------- systemd


def check_systemd(d, prefix):
    path = os.path.join(DEPLOY, "systemd", "dpbudgetd.service")
    if not check(os.path.isfile(path), "%s exists" % rel(path)):
        return
    W = rel(path)
    unit = {}
    section = None
    cur = ""
    for line in open(path, encoding="utf-8"):
        s = line.strip()
        if s.startswith(("#", ";")) or (not s and not cur):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        s, cur = cur + s, ""
        m = re.match(r"^\[(.+)\]$", s)
        if m:
            section = m.group(1)
            continue
        k, _, v = s.partition("=")
        unit.setdefault((section, k.strip()), []).append(v.strip())

    def get(key, section="Service"):
        return unit.get((section, key), [])

    def last(key):
        v = get(key)
        return v[-1] if v else None

    execs = get("ExecStart")
    if not check(len(execs) == 1, "%s: one ExecStart" % W):
        return
    argv = shlex.split(re.sub(r"^[-@:+!]+", "", execs[0])) or [""]
    check(argv[0] == prefix + "/bin/dpbudgetd", "%s: ExecStart runs %s/bin/dpbudgetd, where "
          "make install puts it (got %s)" % (W, prefix, argv[0]))
    args = parse_args(argv[1:], d, W + " ExecStart")
    env = {}
    for e in get("Environment"):
        for tok in shlex.split(e):
            k, _, v = tok.partition("=")
            env[k] = v
    s = effective(d, args, parse_env(env, d, W + " Environment"))

    states = " ".join(get("StateDirectory")).split()
    check(states and s.get("--data-dir") == "/var/lib/" + states[0],
          "%s: --data-dir is /var/lib/ + StateDirectory (got %s, %s)"
          % (W, s.get("--data-dir"), states))
    keys = s.get("--api-keys")
    listen = str(s.get("--listen"))
    if listen not in LOOPBACK and not listen.startswith("127."):
        check(keys, "%s: --api-keys is given (--listen %s is not loopback)" % (W, listen))
    if keys and str(keys).startswith("%d/"):
        creds = [c.split(":", 1)[0] for c in get("LoadCredential")]
        check(keys[3:] in creds, "%s: --api-keys %s is a LoadCredential (got %s)" % (W, keys, creds))
    check(last("DynamicUser") == "yes" or last("User") not in (None, "", "root", "0"),
          "%s: runs as DynamicUser=yes or a dedicated User=" % W)
    check(last("KillSignal") == "SIGTERM", "%s: KillSignal=SIGTERM" % W)
    check(last("TimeoutStopSec"), "%s: TimeoutStopSec is set" % W)
    want = {"ProtectSystem": ["strict"], "ProtectHome": ["yes", "true", "read-only", "tmpfs"],
            "PrivateTmp": ["yes", "true"], "NoNewPrivileges": ["yes", "true"],
            "MemoryDenyWriteExecute": ["yes", "true"]}
    for k, ok in want.items():
        check(last(k) in ok, "%s: %s=%s (got %s)" % (W, k, ok[0], last(k)))
    fams = set(" ".join(get("RestrictAddressFamilies")).split())
    check(fams == {"AF_INET", "AF_INET6", "AF_UNIX"},
          "%s: RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX (got %s)" % (W, sorted(fams)))
    check("@system-service" in " ".join(get("SystemCallFilter")).split(),
          "%s: SystemCallFilter=@system-service" % W)


# ---------------------------------------------------------------- main


def main(argv):
    global verbose
    if "-v" in argv:
        verbose = True
        argv = [a for a in argv if a != "-v"]
    if len(argv) != 2:
        print("usage: check_deploy.py [-v] PATH/TO/dpbudgetd", file=sys.stderr)
        check(False, "usage: one argument, the dpbudgetd binary")
    else:
        binary = os.path.abspath(argv[1])
        d = Daemon(binary)
        routes = get_routes()
        files = load_yaml_files()
        mk = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
        pm = re.search(r"^PREFIX\s*\??=\s*(\S+)", mk, re.M)
        prefix = pm.group(1) if pm else "/usr/local"
        image, cmd_flags, uid = check_dockerfile(d, routes, linked_packages(binary))
        check_image_start(d)
        if files:
            check_k8s(files, d, routes, image, uid)
            check_compose(files, d, routes, image, cmd_flags)
            check_compose_replicated(files, d, routes, image)
            check_k8s_replicated(files, d, routes, image, uid)
            check_monitoring(files, routes)
        check_systemd(d, prefix)
    print("deploy: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
