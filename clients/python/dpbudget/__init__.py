"""dpbudget: a client for the dpbudget privacy-budget daemon (standard library only).

    import dpbudget
    c = dpbudget.Client("http://127.0.0.1:8080", token=None)
    c.epsilon(dpbudget.events.dp_sgd(0.01, 1.0, 1000), delta=1e-5, accountant="rdp").epsilon

See Client for the calls, dpbudget.errors for the exceptions, dpbudget.events for events
(and conversion from dp_accounting objects).
"""
from . import errors, events
from .client import Client, Response, from_env, new_round_id
from .errors import *  # noqa: F401,F403  (the exception classes)
from .events import to_event
from .models import *  # noqa: F401,F403  (the result classes)

__version__ = "0.3.0"
