"""run_example.py - examples/flower_coordinator.py's ServerApp with budget_app.py's ClientApp
(ledger ids "{FL_RUN}-c{partition}"), through Flower's simulation engine without Ray
(inprocess.py). FL_NODES nodes; the example reads DPBUDGET_URL, DPBUDGET_RUN and ROUNDS."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples"))
sys.path.insert(0, HERE)

import budget_app  # noqa: E402  (installs the in-process backend)
import flower_coordinator  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

if __name__ == "__main__":
    run_simulation(flower_coordinator.app, budget_app.client,
                   num_supernodes=int(os.environ.get("FL_NODES", "20")),
                   backend_name="inprocess")
