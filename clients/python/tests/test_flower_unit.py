"""dpbudget.flower without a run: the event derived from each of Flower's DP wrappers (the
end-to-end run is tests/flower/test_flower.py). Needs flwr (clients/python/.venv)."""
import math
import unittest

from flwr.serverapp.strategy import (DifferentialPrivacyClientSideAdaptiveClipping,
                                     DifferentialPrivacyClientSideFixedClipping,
                                     DifferentialPrivacyServerSideAdaptiveClipping,
                                     DifferentialPrivacyServerSideFixedClipping, FedAvg,
                                     Strategy)

import dpbudget
from dpbudget import events
from dpbudget.flower import Budgeted, dp_event_of


class DpEvent(unittest.TestCase):
    def test_fixed_clipping(self):
        for cls in (DifferentialPrivacyServerSideFixedClipping,
                    DifferentialPrivacyClientSideFixedClipping):
            dp = cls(FedAvg(), noise_multiplier=1.2, clipping_norm=1.0, num_sampled_clients=10)
            # noise 1.2*C/10 on the average of 10 updates: sensitivity 2C/10 when a client's
            # update is removed or replaced, C/10 when it is zeroed
            self.assertEqual(dp_event_of(dp), events.gaussian(0.6))
            self.assertEqual(dp_event_of(dp, 10), events.gaussian(0.6))
            self.assertEqual(dp_event_of(dp, 10, "zero_out"), events.gaussian(1.2))
            # 5 of 10 replied: the average of 5 moves by up to 2C/5
            self.assertEqual(dp_event_of(dp, 5), events.gaussian(0.3))
            self.assertEqual(dp_event_of(dp, 5, "zero_out"), events.gaussian(0.6))
            with self.assertRaises(ValueError):
                dp_event_of(dp, 5, "replace_special")

    def test_adaptive_clipping(self):
        for cls in (DifferentialPrivacyServerSideAdaptiveClipping,
                    DifferentialPrivacyClientSideAdaptiveClipping):
            dp = cls(FedAvg(), noise_multiplier=1.0, num_sampled_clients=40)
            # Flower: count noise 40/20 = 2, the update's multiplier (1 - 1/16)^-1/2
            ev = dp_event_of(dp, None, "zero_out")
            self.assertEqual(ev["class_name"], "ComposedDpEvent")
            upd, cnt = ev["events"]
            self.assertAlmostEqual(upd["noise_multiplier"], (1 - 1 / 16.0) ** -0.5, places=12)
            self.assertEqual(cnt, events.gaussian(2.0))  # sensitivity 1, not 1/2
            upd, cnt = dp_event_of(dp)["events"]
            self.assertAlmostEqual(upd["noise_multiplier"], (1 - 1 / 16.0) ** -0.5 / 2,
                                   places=12)
            self.assertEqual(cnt, events.gaussian(2.0))

    def test_needs_an_event(self):
        c = dpbudget.Client("http://127.0.0.1:1")
        with self.assertRaises(ValueError):
            Budgeted(FedAvg(), c, run_id="x")
        # a DP wrapper around a strategy that weighs its replies in no known way
        with self.assertRaises(ValueError):
            Budgeted(DifferentialPrivacyServerSideFixedClipping(_NoWeights(), 1.0, 1.0, 5), c,
                     run_id="x")
        s = Budgeted(FedAvg(), c, run_id="x", event=events.gaussian(2.0))
        self.assertEqual(s.event, events.gaussian(2.0))
        self.assertEqual(s.round_id(3), "x-r3")
        self.assertTrue(math.isfinite(s.event["noise_multiplier"]))


class _NoWeights(Strategy):  # neither FedAvg nor derived from it
    def configure_train(self, *a):
        return []

    def aggregate_train(self, *a):
        return None, None

    def configure_evaluate(self, *a):
        return []

    def aggregate_evaluate(self, *a):
        return None

    def summary(self):
        pass


if __name__ == "__main__":
    unittest.main()
