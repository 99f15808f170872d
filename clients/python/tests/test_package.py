"""The package as Python developers get it: a wheel built and installed offline into a fresh
venv (no build dependency fetched), `pip install ./clients/python` offline, one version
source, py.typed, and `mypy --strict` on the package and on programs that use it (mypy is in
the venv of scripts/deps.sh; without it those tests fail, they do not skip, unless
DPB_NO_MYPY=1 says so on purpose)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import dpbudget

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
ROOT = os.path.dirname(os.path.dirname(PKG))
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PIP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9"}  # any fetch would fail


def sh(args, cwd=None, env=None):
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    e.update(env or {})
    p = subprocess.run(args, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=300)
    return p.returncode, p.stdout


def base_python():
    """The interpreter a developer would make a venv with (not this venv's)."""
    return getattr(sys, "_base_executable", None) or shutil.which("python3") or sys.executable


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dpb-pkg-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def fresh_venv(self, name):
        """A new venv of the system's python, nothing installed in it (this venv's pip
        installs into it: `pip --python`)."""
        v = os.path.join(self.tmp, name)
        rc, out = sh([base_python(), "-m", "venv", "--without-pip", v])
        self.assertEqual(rc, 0, out)
        return os.path.join(v, "bin", "python")

    def pip(self, target, *args):
        return sh([sys.executable, "-m", "pip", "--python", target] + list(args), env=OFFLINE)

    def check_installed(self, py):
        rc, out = sh([py, "-c", "import dpbudget, dpbudget.client, os; "
                      "print(dpbudget.__version__, os.path.exists(os.path.join("
                      "os.path.dirname(dpbudget.__file__), 'py.typed')))"], cwd=self.tmp)
        self.assertEqual((rc, out.split()), (0, [dpbudget.__version__, "True"]), out)
        rc, out = sh([os.path.join(os.path.dirname(py), "dpbudget"), "--help"])
        self.assertEqual(rc, 0, out)
        self.assertIn("usage:", out)

    def test_wheel_builds_and_installs_offline(self):
        dist = os.path.join(self.tmp, "dist")
        rc, out = sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, PKG],
                     env=OFFLINE)  # in an isolated build environment: nothing in it
        self.assertEqual(rc, 0, out)
        wheels = glob.glob(os.path.join(dist, "dpbudget-%s-py3-none-any.whl" %
                                        dpbudget.__version__))
        self.assertEqual(len(wheels), 1, os.listdir(dist))
        py = self.fresh_venv("wheel")
        rc, out = self.pip(py, "install", wheels[0])
        self.assertEqual(rc, 0, out)
        self.check_installed(py)

    def test_install_from_source_offline(self):
        py = self.fresh_venv("source")
        rc, out = self.pip(py, "install", PKG)
        self.assertEqual(rc, 0, out)
        self.check_installed(py)

    def test_one_version_source(self):
        """The version is written in dpbudget/_version.py only; pyproject.toml declares it
        dynamic; the User-Agent says it."""
        hits = []
        for path in glob.glob(os.path.join(PKG, "dpbudget", "*.py")) + [
                os.path.join(PKG, "pyproject.toml")]:
            with open(path) as f:
                for line in f:
                    if re.search(r'\b%s\b' % re.escape(dpbudget.__version__), line):
                        hits.append(os.path.relpath(path, PKG))
        self.assertEqual(hits, [os.path.join("dpbudget", "_version.py")])
        with open(os.path.join(PKG, "pyproject.toml")) as f:
            self.assertIn('dynamic = ["version"]', f.read())
        self.assertTrue(dpbudget.Client()._ua.endswith("/" + dpbudget.__version__))


USER_PROGRAM = '''
import dpbudget
from dpbudget import events


def spend(c: dpbudget.Client, ids: list[str]) -> float:
    el: dpbudget.Eligibility = c.eligibility(ids, event=events.gaussian(1.0), max_rounds=1)
    r: dpbudget.Round = c.reserve(el.eligible_ids, events.gaussian(1.0), round_id="r-1")
    done = c.commit("r-1", reported=[a.client for a in r.admitted])
    total: float = sum(x.spent_after for x in done.admitted)
    rec = c.get_client(el.clients[0].client)
    return total + rec.spent.epsilon


try:
    spend(dpbudget.Client("http://127.0.0.1:1"), ["a"])
except dpbudget.TransportError as e:
    print(e.round_id)
'''

BAD_PROGRAM = '''
import dpbudget
c = dpbudget.Client("http://127.0.0.1:1")
n: int = c.get_client("a").spent.epsilon
'''


@unittest.skipIf(os.environ.get("DPB_NO_MYPY") == "1", "DPB_NO_MYPY=1")
class Types(unittest.TestCase):
    def mypy(self, *args, cwd=PKG):
        # mypy's cache lives in the venv (flwr and numpy analysed once, not every run)
        cache = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "mypy-cache")
        rc, out = sh([sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache] +
                     list(args), cwd=cwd, env={"MYPYPATH": PKG})
        return rc, out

    def test_package_strict(self):
        rc, out = self.mypy("dpbudget")  # pyproject.toml's [tool.mypy]: strict
        self.assertEqual(rc, 0, out)

    def test_user_programs_strict(self):
        tmp = tempfile.mkdtemp(prefix="dpb-mypy-")
        try:
            good = os.path.join(tmp, "good.py")
            bad = os.path.join(tmp, "bad.py")
            with open(good, "w") as f:
                f.write(USER_PROGRAM)
            with open(bad, "w") as f:
                f.write(BAD_PROGRAM)
            example = os.path.join(ROOT, "examples", "flower_coordinator.py")
            rc, out = self.mypy(good, example, cwd=tmp)
            self.assertEqual(rc, 0, out)
            # the annotations say something: a float is not an int
            rc, out = self.mypy(bad, cwd=tmp)
            self.assertNotEqual(rc, 0, out)
            self.assertIn("bad.py:4", out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
