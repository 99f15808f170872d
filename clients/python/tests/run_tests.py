#!/usr/bin/env python3
"""run_tests.py DPBUDGETD - the Python client's tests: those that need no daemon, then
those against real daemons (each started on an ephemeral port with a data directory of its
own). Prints one closing line "sdk: N passed, M failed"; exits 1 on any failure."""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # clients/python: the package
sys.path.insert(0, HERE)

import support  # noqa: E402

DEADLINE_S = 120


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: run_tests.py DPBUDGETD [TEST_NAME...]")
    support.DAEMON = os.path.abspath(sys.argv[1])
    names = sys.argv[2:]
    loader = unittest.TestLoader()
    if names:
        suite = loader.loadTestsFromNames(names)
    else:
        suite = unittest.TestSuite()
        for name in sorted(os.listdir(HERE)):
            if name.startswith("test_") and name.endswith(".py"):
                suite.addTests(loader.loadTestsFromName(name[:-3]))
    t0 = time.time()
    res = unittest.TextTestRunner(stream=sys.stdout, verbosity=1).run(suite)
    failed = len(res.failures) + len(res.errors)
    passed = res.testsRun - failed - len(res.skipped)
    took = time.time() - t0
    if took > DEADLINE_S:
        print("FAIL the suite took %.0f s (more than %d s)" % (took, DEADLINE_S))
        failed += 1
    print("sdk: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
