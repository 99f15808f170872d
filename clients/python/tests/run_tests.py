#!/usr/bin/env python3
"""run_tests.py DPBUDGETD [pytest args...] - the Python client's tests (clients/python/tests:
those that need no daemon, those against real daemons, each started on an ephemeral port
with a data directory of its own, the package and its types). Run by pytest when it is
importable (make test: clients/python/.venv, scripts/deps.sh), else by unittest. Prints one
closing line "sdk: N passed, M failed"; exits 1 on any failure. `pytest clients/python/tests`
works too, with DPBUDGETD=path/to/dpbudgetd in the environment."""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # clients/python: the package
sys.path.insert(0, HERE)

import support  # noqa: E402

DEADLINE_S = 180


class _Count:
    """A pytest plugin counting tests: passed, failed (in any phase), skipped."""

    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed += 1
        elif report.skipped:
            self.skipped += 1
        elif report.when == "call" and report.passed:
            self.passed += 1

    def pytest_collectreport(self, report):
        if report.failed:
            self.failed += 1


def run_pytest(pytest, names):
    count = _Count()
    args = ["-q", "-p", "no:cacheprovider", "--rootdir", HERE]
    for n in names:  # a test named as run_tests.py's folder sees it (test_x.py::Class)
        here = os.path.join(HERE, n)
        args.append(here if not n.startswith("-") and not os.path.exists(n.split("::")[0])
                    else n)
    if not any(not n.startswith("-") for n in names):  # options only: the whole folder
        args.append(HERE)
    rc = pytest.main(args, plugins=[count])
    if rc not in (0, 1) and not count.failed:  # usage error, nothing collected, interrupted
        count.failed += 1
    return count.passed, count.failed


def run_unittest(names):
    loader = unittest.TestLoader()
    if names:
        suite = loader.loadTestsFromNames(names)
    else:
        suite = unittest.TestSuite()
        for name in sorted(os.listdir(HERE)):
            if name.startswith("test_") and name.endswith(".py"):
                suite.addTests(loader.loadTestsFromName(name[:-3]))
    res = unittest.TextTestRunner(stream=sys.stdout, verbosity=1).run(suite)
    failed = len(res.failures) + len(res.errors)
    return res.testsRun - failed - len(res.skipped), failed


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: run_tests.py DPBUDGETD [TEST...]")
    support.DAEMON = os.path.abspath(sys.argv[1])
    os.environ["DPBUDGETD"] = support.DAEMON
    names = sys.argv[2:]
    t0 = time.time()
    try:
        import pytest
    except ImportError:
        pytest = None
    if pytest is not None:
        passed, failed = run_pytest(pytest, names)
    else:
        print("(pytest is not installed: unittest runs the tests; scripts/deps.sh installs "
              "pytest into clients/python/.venv)")
        passed, failed = run_unittest(names)
    took = time.time() - t0
    if took > DEADLINE_S:
        print("FAIL the suite took %.0f s (more than %d s)" % (took, DEADLINE_S))
        failed += 1
    print("sdk: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
