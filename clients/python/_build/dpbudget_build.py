"""dpbudget_build: the package's own PEP 517 build backend, standard library only, so that
`pip install ./clients/python` and `pip wheel ./clients/python` work offline in any venv
(no setuptools or wheel fetched into an isolated build environment).

It reads pyproject.toml's [project] table (a subset of TOML: the forms that file uses),
takes the version from dpbudget/_version.py (the one place it is written), and writes a
pure-Python wheel (dpbudget/*.py, py.typed; the console script) or an sdist. Hooks:
build_wheel, build_sdist, build_editable (a .pth file pointing at this folder), and the
get_requires_* hooks, which need nothing.
"""
import ast
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
PKG = "dpbudget"
TAG = "py3-none-any"


def _value(text):
    text = text.strip()
    if text.startswith("{"):  # an inline table of strings: {text = "..."}
        return dict(re.findall(r'(\w[\w-]*)\s*=\s*"([^"]*)"', text))
    if text in ("true", "false"):
        return text == "true"
    return ast.literal_eval(text)


def _pyproject():
    """pyproject.toml as nested dicts: tables, `key = value` with strings, lists of strings,
    booleans and inline tables of strings (a value may span lines until its brackets close)."""
    out, cur, pending = {}, None, ""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.split(" #")[0].rstrip() if not pending else line.rstrip()
            if pending:
                pending += " " + line.strip()
                if pending.count("[") == pending.count("]"):
                    k, _, v = pending.partition("=")
                    cur[k.strip().strip('"')] = _value(v)
                    pending = ""
                continue
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = re.match(r"^\[([\w.\-]+)\]$", line.strip())
            if m:
                cur = out
                for part in m.group(1).split("."):
                    cur = cur.setdefault(part, {})
                continue
            k, _, v = line.partition("=")
            v = v.strip()
            if v.startswith("[") and v.count("[") != v.count("]"):
                pending = line
                continue
            cur[k.strip().strip('"')] = _value(v)
    return out


def _version():
    with open(os.path.join(HERE, PKG, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("dpbudget/_version.py has no __version__")
    return m.group(1)


def _metadata():
    p = _pyproject()["project"]
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + _version(),
             "Summary: " + p["description"]]
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    lic = p.get("license")
    if isinstance(lic, dict) and "text" in lic:
        lines.append("License: " + lic["text"])
    for c in p.get("classifiers", []):
        lines.append("Classifier: " + c)
    for d in p.get("dependencies", []):
        lines.append("Requires-Dist: " + d)
    for extra, deps in sorted(p.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: " + extra)
        for d in deps:
            lines.append('Requires-Dist: %s; extra == "%s"' % (d, extra))
    body = ""
    if "readme" in p:
        with open(os.path.join(HERE, p["readme"]), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + body, p


def _files():
    """The package's files (relative paths), sorted: the wheel is the same every build."""
    d = os.path.join(HERE, PKG)
    return sorted(PKG + "/" + n for n in os.listdir(d)
                  if n.endswith(".py") or n == "py.typed")


def _name_version():
    p = _pyproject()["project"]
    return p["name"].replace("-", "_"), _version()


def _record_line(name, data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, h, len(data))


def _write_wheel(wheel_directory, extra):
    """Write the wheel: `extra` maps names to the contents to add (the package's files, or
    an editable install's .pth)."""
    name, version = _name_version()
    meta, p = _metadata()
    dist = "%s-%s.dist-info" % (name, version)
    entries = dict(extra)
    entries[dist + "/METADATA"] = meta.encode()
    entries[dist + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: dpbudget_build\n"
                                "Root-Is-Purelib: true\nTag: %s\n" % TAG).encode()
    scripts = p.get("scripts", {})
    if scripts:
        entries[dist + "/entry_points.txt"] = ("[console_scripts]\n" + "".join(
            "%s = %s\n" % kv for kv in sorted(scripts.items()))).encode()
    record = [_record_line(n, d) for n, d in entries.items()]
    record.append(dist + "/RECORD,,")
    entries[dist + "/RECORD"] = ("\n".join(record) + "\n").encode()
    fname = "%s-%s-%s.whl" % (name, version, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, fname), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for n, d in entries.items():
            zi = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, d)
    return fname


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for n in _files():
        with open(os.path.join(HERE, n), "rb") as f:
            files[n] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name, _ = _name_version()
    return _write_wheel(wheel_directory, {"_%s_editable.pth" % name: (HERE + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    name, version = _name_version()
    base = "%s-%s" % (name, version)
    fname = base + ".tar.gz"
    meta, p = _metadata()
    names = ["pyproject.toml", "_build/dpbudget_build.py"] + _files()
    if "readme" in p:
        names.append(p["readme"])
    with tarfile.open(os.path.join(sdist_directory, fname), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for n in names:
            ti = t.gettarinfo(os.path.join(HERE, n), base + "/" + n)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            ti.mtime = 0
            with open(os.path.join(HERE, n), "rb") as f:
                t.addfile(ti, f)
        data = meta.encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return fname


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []
