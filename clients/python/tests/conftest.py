"""pytest's set-up for clients/python/tests: the package and support.py importable, and
support.DAEMON from $DPBUDGETD (run_tests.py sets both)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import support  # noqa: E402

if support.DAEMON is None and os.environ.get("DPBUDGETD"):
    support.DAEMON = os.path.abspath(os.environ["DPBUDGETD"])
