"""Events: the JSON of dp_accounting's DpEvent vocabulary, built here or converted from
dp_accounting objects without importing dp_accounting.

to_event(x) accepts
- a dict with "class_name" (nested events inside it may be objects),
- a dp_accounting DpEvent (an attrs class: its fields are read from __attrs_attrs__),
- its to_named_tuple() form (fields `module_name`, `class_name`, ...),
- any object whose class is named like a dp_accounting event and has that event's
  attributes (the table FIELDS below),
and returns the JSON object the daemon takes. Nothing is guessed: an object that is none of
these is a TypeError, a missing field a ValueError, NaN or -inf a ValueError (JSON has
neither; +inf is written "infinite", as the daemon spells it), and None fields are left out (the daemon then applies its default or
names the missing field). Events the daemon does not account (UnsupportedDpEvent) are
converted all the same; the daemon answers them 422 unsupported.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

#: An event as the daemon takes it: a JSON object with "class_name" (see to_event).
Event = Dict[str, Any]
#: What to_event accepts: an Event, a dp_accounting DpEvent, its to_named_tuple() form, or an
#: object named like one.
EventLike = Union[Mapping[str, Any], Any]

__all__ = ["Event", "EventLike", "to_event", "FIELDS", "gaussian", "laplace", "epsilon_delta", "poisson_sampled",
           "self_composed", "composed", "no_op", "non_private", "shuffled_epoch", "dp_sgd"]

# dp_accounting's classes (dp_event.py) and their fields, for objects without attrs metadata.
FIELDS: Dict[str, Tuple[str, ...]] = {
    "NoOpDpEvent": (),
    "NonPrivateDpEvent": (),
    "UnsupportedDpEvent": (),
    "RandomizedResponseDpEvent": ("noise_parameter", "num_buckets"),
    "EpsilonDeltaDpEvent": ("epsilon", "delta"),
    "GaussianDpEvent": ("noise_multiplier",),
    "LaplaceDpEvent": ("noise_multiplier",),
    "DiscreteLaplaceDpEvent": ("noise_parameter", "sensitivity"),
    "DiscreteGaussianDpEvent": ("sigma", "sensitivity", "dimension"),
    "SelfComposedDpEvent": ("event", "count"),
    "ComposedDpEvent": ("events",),
    "PoissonSampledDpEvent": ("sampling_probability", "event"),
    "SampledWithReplacementDpEvent": ("source_dataset_size", "sample_size", "event"),
    "SampledWithoutReplacementDpEvent": ("source_dataset_size", "sample_size", "event"),
    "SingleEpochTreeAggregationDpEvent": ("noise_multiplier", "step_counts"),
    "RepeatAndSelectDpEvent": ("event", "mean", "shape"),
    "MixtureOfGaussiansDpEvent": ("standard_deviation", "sensitivities", "sampling_probs"),
    "ZCDpEvent": ("rho", "xi"),
    "ExponentialMechanismDpEvent": ("epsilon",),
    "PermuteAndFlipDpEvent": ("epsilon",),
    "TruncatedSubsampledGaussianDpEvent": ("dataset_size", "sampling_probability",
                                           "truncated_batch_size", "noise_multiplier"),
    # dpbudget's own events (dicts are the usual way to write them)
    "ShuffledDpSgdEpochDpEvent": ("noise_multiplier", "rounds"),
}

_MAX_DEPTH = 32  # the daemon's nesting limit


def to_event(obj: EventLike) -> Event:
    """The JSON object (a new dict) of an event given as a dict or a DpEvent-like object."""
    return _event(obj, "event", 0)


def _is_event_like(v: Any) -> bool:
    if isinstance(v, dict):
        return "class_name" in v
    if _named_tuple_class(v) is not None:
        return True
    name = type(v).__name__
    return hasattr(type(v), "__attrs_attrs__") or name in FIELDS or name.endswith("DpEvent")


def _named_tuple_class(v: Any) -> Optional[str]:
    """class_name of dp_accounting's to_named_tuple() form, else None."""
    if isinstance(v, tuple) and hasattr(v, "_fields") and "class_name" in v._fields:
        cn = getattr(v, "class_name")
        return cn.decode() if isinstance(cn, bytes) else str(cn)
    return None


def _event(obj: Any, path: str, depth: int) -> Event:
    if depth > _MAX_DEPTH:
        raise ValueError("%s: events nest deeper than %d" % (path, _MAX_DEPTH))
    if isinstance(obj, dict):
        cn = obj.get("class_name")
        if not isinstance(cn, str):
            raise ValueError("%s: an event needs a string class_name" % path)
        out: Event = {"class_name": cn}
        for k, v in obj.items():
            if k != "class_name" and v is not None:
                out[k] = _value(v, "%s.%s" % (path, k), depth)
        return out
    names: List[str]
    cn = _named_tuple_class(obj)
    if cn is not None:
        names = [f for f in obj._fields if f not in ("module_name", "class_name")]
    else:
        cls = type(obj)
        cn = cls.__name__
        attrs = getattr(cls, "__attrs_attrs__", None)
        if attrs is not None:
            names = [a.name for a in attrs]
        elif cn in FIELDS:
            names = list(FIELDS[cn])
        elif hasattr(cls, "__dataclass_fields__"):
            names = list(cls.__dataclass_fields__)
        else:
            raise TypeError("%s: %r is not an event (a dict with class_name, or a dp_accounting "
                            "DpEvent)" % (path, cls.__name__))
    out = {"class_name": cn}
    for n in names:
        if not hasattr(obj, n):
            raise ValueError("%s: %s has no attribute %r" % (path, cn, n))
        v = getattr(obj, n)
        if v is not None:
            out[n] = _value(v, "%s.%s" % (path, n), depth)
    return out


def _value(v: Any, path: str, depth: int) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        if f == math.inf:
            return "infinite"  # the daemon's spelling (RepeatAndSelectDpEvent's Poisson shape)
        if not math.isfinite(f):
            raise ValueError("%s: %r is not a finite number" % (path, v))
        return f
    if hasattr(v, "item") and callable(v.item) and getattr(v, "shape", None) == ():
        return _value(v.item(), path, depth)  # a numpy scalar
    if _is_event_like(v):
        return _event(v, path, depth + 1)
    if isinstance(v, dict):
        return {str(k): _value(x, "%s.%s" % (path, k), depth) for k, x in v.items()}
    if isinstance(v, (list, tuple)) or (hasattr(v, "__iter__") and hasattr(v, "__len__")):
        return [_value(x, "%s[%d]" % (path, i), depth) for i, x in enumerate(v)]
    raise TypeError("%s: cannot write %r as JSON" % (path, type(v).__name__))


# ---------------------------------------------------------------- builders


def gaussian(noise_multiplier: float) -> Event:
    return {"class_name": "GaussianDpEvent", "noise_multiplier": noise_multiplier}


def laplace(noise_multiplier: float) -> Event:
    return {"class_name": "LaplaceDpEvent", "noise_multiplier": noise_multiplier}


def epsilon_delta(epsilon: float, delta: float) -> Event:
    return {"class_name": "EpsilonDeltaDpEvent", "epsilon": epsilon, "delta": delta}


def poisson_sampled(sampling_probability: float, event: EventLike) -> Event:
    return {"class_name": "PoissonSampledDpEvent", "sampling_probability": sampling_probability,
            "event": to_event(event)}


def self_composed(event: EventLike, count: int) -> Event:
    return {"class_name": "SelfComposedDpEvent", "event": to_event(event), "count": count}


def composed(events: List[EventLike]) -> Event:
    return {"class_name": "ComposedDpEvent", "events": [to_event(e) for e in events]}


def no_op() -> Event:
    return {"class_name": "NoOpDpEvent"}


def non_private() -> Event:
    return {"class_name": "NonPrivateDpEvent"}


def shuffled_epoch(noise_multiplier: float, rounds: int) -> Event:
    """One epoch of DP-SGD with random shuffling in `rounds` batches (dpbudget's own event)."""
    return {"class_name": "ShuffledDpSgdEpochDpEvent", "noise_multiplier": noise_multiplier,
            "rounds": rounds}


def dp_sgd(sampling_probability: float, noise_multiplier: float, steps: int) -> Event:
    """`steps` steps of Poisson-sampled Gaussian noise: DP-SGD as dp_accounting writes it."""
    return self_composed(poisson_sampled(sampling_probability, gaussian(noise_multiplier)), steps)
