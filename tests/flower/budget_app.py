"""budget_app.py - one attempt of the Flower run of test_flower.py: a ServerApp (Flower's
DifferentialPrivacyClientSideFixedClipping around FedAvg, wrapped by dpbudget.flower.Budgeted)
and ClientApps (fixedclipping_mod on train; some always fail, some fail now and then) run through
Flower's simulation engine (inprocess.py: Flower's own LinkState, Grid and Fleet, ClientApps
on threads instead of Ray). Configured by the environment:
  FL_URL      the daemon        FL_RUN     run id           FL_NODES   nodes
  FL_ROUNDS   rounds            FL_K       clients a round  FL_Z       noise multiplier
  FL_LOG      where each ClientApp appends what it was sent (JSON lines)
  FL_ATTEMPT  this attempt's number (written in the log)
  FL_KILL     "before:R" or "after:R": SIGKILL this process while round R is still reserved,
              or just after the write that charged it was answered (see KillingClient)
  FL_LEDGER   0: the same run without the ledger (Budgeted left out: the speed baseline)
  FL_MODE     "dp" (default) or "fedavg": plain FedAvg, Budgeted charging GaussianDpEvent(Z)
              to each reporting client (as for updates noised on the clients)
  FL_STATS    where the ServerApp writes its rounds per second
The ClientApps log independently of the wrapper: the test's oracle is built from that log and
the kill schedule, never from what the wrapper says."""
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, HERE)

import inprocess  # noqa: E402

inprocess.install()

import numpy as np  # noqa: E402
from flwr.app import (ArrayRecord, ConfigRecord, Context, Message, MetricRecord,  # noqa: E402
                      RecordDict)
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.clientapp.mod import fixedclipping_mod  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import (DifferentialPrivacyClientSideFixedClipping,  # noqa: E402
                                     FedAvg, Strategy)
from flwr.simulation import run_simulation  # noqa: E402

import dpbudget  # noqa: E402
from dpbudget.flower import Budgeted, answer_ledger_id  # noqa: E402

ENV = os.environ
RUN = ENV.get("FL_RUN", "fl")
NODES = int(ENV.get("FL_NODES", "30"))
ROUNDS = int(ENV.get("FL_ROUNDS", "12"))
K = int(ENV.get("FL_K", "8"))
Z = float(ENV.get("FL_Z", "6.0"))
ATTEMPT = int(ENV.get("FL_ATTEMPT", "1"))
ALWAYS_DROP = {2, 3}


def flaky(pid: int, server_round: int) -> bool:
    """The clients that fail in a given round (besides the ones that always fail)."""
    return (pid * 7 + server_round * 3) % 6 == 0


def ledger_id(pid: int) -> str:
    return "%s-c%d" % (RUN, pid)


_log_lock = threading.Lock()


def log(rec: dict) -> None:
    if not ENV.get("FL_LOG"):
        return
    with _log_lock, open(ENV["FL_LOG"], "a") as f:
        f.write(json.dumps(rec) + "\n")


client = ClientApp()  # the clipping mod on train only: the id query carries no arrays
answer_ledger_id(client, lambda ctx: ledger_id(int(ctx.node_config["partition-id"])))


@client.train(mods=[fixedclipping_mod])
def train(msg: Message, ctx: Context) -> Message:
    pid = int(ctx.node_config["partition-id"])
    rnd = int(msg.content["config"]["server-round"])
    ok = pid not in ALWAYS_DROP and not flaky(pid, rnd)
    log({"attempt": ATTEMPT, "round": rnd, "pid": pid, "ok": ok})
    if not ok:
        raise RuntimeError("client %d drops out of round %d" % (pid, rnd))
    arrays = [a + 0.01 * (pid + 1) for a in msg.content["arrays"].to_numpy_ndarrays()]
    return Message(RecordDict({"arrays": ArrayRecord(arrays),
                               "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)


class KillingClient(dpbudget.Client):
    """The ledger client of the ServerApp, which dies around one round's end (FL_KILL):
    "before": at its first ledger write after the replies came (commit or release: the
    round is still reserved); "after": once the write that charges it (commit, or the
    charge of a weaker release, {round id}-m) was answered."""

    def _dies(self, round_id: str, now: str) -> None:
        when, _, rnd = ENV.get("FL_KILL", ":").partition(":")
        if when == now and round_id.split("-m")[0] == "%s-r%s" % (RUN, rnd):
            os.kill(os.getpid(), signal.SIGKILL)

    def commit(self, round_id, reported):  # type: ignore[override]
        self._dies(round_id, "before")
        r = super().commit(round_id, reported)
        self._dies(round_id, "after")
        return r

    def release(self, round_id):  # type: ignore[override]
        self._dies(round_id, "before")  # still reserved when it dies
        return super().release(round_id)

    def charge(self, participants, event=None, **kw):  # type: ignore[override]
        rid = kw.get("round_id") or ""
        self._dies(rid, "before")
        r = super().charge(participants, event, **kw)
        self._dies(rid, "after")
        return r


server = ServerApp()


@server.main()
def main(grid: Grid, ctx: Context) -> None:
    inner = FedAvg(fraction_train=1e-6, min_train_nodes=K, min_available_nodes=K,
                   fraction_evaluate=0.0)
    strategy: Strategy = inner
    event = None
    config = None
    if ENV.get("FL_MODE", "dp") == "dp":
        strategy = DifferentialPrivacyClientSideFixedClipping(inner, noise_multiplier=Z,
                                                              clipping_norm=1.0,
                                                              num_sampled_clients=K)
    else:
        event = dpbudget.events.gaussian(Z)
        config = ConfigRecord({"clipping_norm": 1.0})  # the clients' fixedclipping_mod
    if ENV.get("FL_LEDGER", "1") != "0":
        ledger = KillingClient(ENV["FL_URL"])
        strategy = Budgeted(strategy, ledger, run_id=RUN, event=event)
    while len(list(grid.get_node_ids())) < NODES:  # every node up: the same rounds each time
        time.sleep(0.05)
    t0 = time.perf_counter()
    strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(4)]), num_rounds=ROUNDS,
                   train_config=config)
    took = time.perf_counter() - t0
    if ENV.get("FL_STATS"):
        with open(ENV["FL_STATS"], "w") as f:
            json.dump({"rounds": ROUNDS, "seconds": took}, f)


if __name__ == "__main__":
    run_simulation(server, client, num_supernodes=NODES, backend_name="inprocess")
