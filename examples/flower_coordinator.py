"""A Flower ServerApp whose clients' privacy budgets live in dpbudget (examples/README.md)."""
import os

import numpy as np
from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg

import dpbudget
from dpbudget.flower import Budgeted

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    ledger = dpbudget.Client(os.environ.get("DPBUDGET_URL", "http://127.0.0.1:8080"))
    fedavg = FedAvg(fraction_train=0.01, min_train_nodes=10, min_available_nodes=10,
                    fraction_evaluate=0.0)  # 10 clients a round
    dp = DifferentialPrivacyClientSideFixedClipping(fedavg, noise_multiplier=4.0,
                                                    clipping_norm=1.0, num_sampled_clients=10)
    strategy = Budgeted(dp, ledger, run_id=os.environ.get("DPBUDGET_RUN", "example-1"))
    strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(10)]),
                   num_rounds=int(os.environ.get("ROUNDS", "5")))
    print("budget:", strategy.budget_state())
