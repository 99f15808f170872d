"""dpbudget: a client for the dpbudget privacy-budget daemon (standard library only).

    import dpbudget
    c = dpbudget.Client("http://127.0.0.1:8080", token=None)
    c.epsilon(dpbudget.events.dp_sgd(0.01, 1.0, 1000), delta=1e-5, accountant="rdp").epsilon

See Client for the calls, dpbudget.errors for the exceptions, dpbudget.events for events
(and conversion from dp_accounting objects), dpbudget.flower for a Flower strategy that keeps
its clients' budgets in the ledger (it needs flwr; nothing else here does).
"""
from . import errors, events, models
from ._version import __version__
from .client import Client, Response, from_env, new_round_id
from .errors import *  # noqa: F401,F403  (the exception classes)
from .events import to_event
from .models import *  # noqa: F401,F403  (the result classes)

__all__ = ["errors", "events", "models", "__version__", "Client", "Response", "from_env",
           "new_round_id", "to_event"]
__all__ += errors.__all__
__all__ += models.__all__
