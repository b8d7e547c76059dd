"""The record of one measured configuration, and its one serialisation to an optuna study.

:class:`Measurement` is what measuring a configuration returns (in the worker or in this
process), what the tuner keeps per trial, what the study stores (:meth:`Measurement.attrs`,
read back by :meth:`Measurement.from_trial`) and what the best one is saved from.

Example:
    >>> m = Measurement(Status.OK, times_ms=(2.0, 1.0, 3.0), params={"TS": 8})
    >>> m.median_ms, m.spread
    (2.0, (1.0, 3.0))
    >>> from dataclasses import replace
    >>> Measurement.from_attrs(m.attrs(), m.params, number=4) == replace(m, number=4)
    True
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .spec import Value


class Status(str, enum.Enum):
    """Outcome of one trial."""

    OK = "ok"
    INVALID = "invalid"
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class Measurement:
    """A configuration's outcome: status, device times (ms) and the verification error.

    ``error`` is ‖got − want‖ / ‖want‖ over every output; ``tolerance_used`` is the largest
    |got − want| / (atol + rtol·|want|) over the elements, so a verified result has it ≤ 1.
    ``number`` is the trial's number in its study (-1 until the tuner records it).
    """

    status: Status
    message: str = ""
    times_ms: tuple[float, ...] = ()
    error: float | None = None
    tolerance_used: float | None = None
    build_s: float = 0.0
    wall_s: float = 0.0
    context_lost: bool = False  # a failed enqueue or run: measure the next one in a fresh context
    pruned: bool = False  # timing cut short: two timed launches were slower than the cut-off
    params: Mapping[str, Value] = field(default_factory=dict)
    number: int = -1
    wg_limits: Mapping[str, int] = field(default_factory=dict)  # entry -> the build's CL_KERNEL_WORK_GROUP_SIZE
    limit_s: float | None = None  # a timeout's limit: a later run with a longer one measures it again

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.times_ms)) if self.times_ms else math.inf

    @property
    def spread(self) -> tuple[float, float]:
        """(min, max) of the timed launches in ms."""
        return (min(self.times_ms), max(self.times_ms)) if self.times_ms else (math.inf, math.inf)

    def attrs(self) -> dict[str, Any]:
        """The study's user attributes for this measurement (None values left out)."""
        raw = {"status": self.status.value, "message": self.message[:2000],
               "times_ms": list(self.times_ms) or None, "error": self.error,
               "tolerance_used": self.tolerance_used, "build_s": self.build_s,
               "wall_s": self.wall_s, "pruned": self.pruned or None, "wg_limits": dict(self.wg_limits) or None,
               "limit_s": self.limit_s}
        return {k: v for k, v in raw.items() if v is not None}

    def speedup_over(self, baseline: Measurement | None) -> float | None:
        """baseline time / this time, when both verified; else None."""
        if baseline is None or not baseline.ok or not self.ok:
            return None
        return baseline.median_ms / self.median_ms

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], params: Mapping[str, Value],
                   number: int = -1) -> Measurement:
        """The measurement :meth:`attrs` stored (studies from before ``times_ms`` keep their
        median and spread as three times); ValueError where the record is not one it writes (a
        trial added by hand: trials 43 and 51)."""
        _check_record(attrs)
        times = attrs.get("times_ms")
        if times is None and "median_ms" in attrs and math.isfinite(attrs["median_ms"]):
            lo, hi = attrs.get("spread_ms") or (attrs["median_ms"],) * 2
            times = [lo, attrs["median_ms"], hi]
        return cls(Status(attrs["status"]), attrs.get("message", ""), tuple(times or ()),
                   attrs.get("error"), attrs.get("tolerance_used"), attrs.get("build_s", 0.0),
                   attrs.get("wall_s", 0.0), pruned=bool(attrs.get("pruned", False)),
                   params=dict(params), number=number, wg_limits=dict(attrs.get("wg_limits") or {}),
                   limit_s=attrs.get("limit_s"))


def is_real(v: Any) -> bool:
    """Whether ``v`` is an int or float read from a file (inf and nan too), not a bool.

    Example:
        >>> [is_real(v) for v in (3, float("inf"), True, "3")]
        [True, True, False, False]
    """
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_record(attrs: Mapping[str, Any]) -> None:
    """ValueError naming the first field of a stored record that :meth:`Measurement.attrs` would
    not have written so."""
    for key in ("error", "tolerance_used", "build_s", "wall_s", "limit_s", "median_ms"):
        if attrs.get(key) is not None and not is_real(attrs[key]):
            raise ValueError(f"{key} {attrs[key]!r} is not a number")
    if attrs.get("median_ms") is not None and not 0 < attrs["median_ms"] <= math.inf:
        raise ValueError(f"median_ms {attrs['median_ms']!r} is not a positive time")
    if not isinstance(attrs.get("message", ""), str):
        raise ValueError(f"message {attrs['message']!r} is not text")
    for key in ("times_ms", "spread_ms"):
        value = attrs.get(key)
        # a time is positive and finite (trial 53: a forged -5 ms became the best)
        if value is not None and not (isinstance(value, list) and all(is_real(t) and 0 < t < math.inf
                                                                      for t in value)):
            raise ValueError(f"{key} {value!r} are not all positive, finite numbers")
    if attrs.get("status") == Status.OK.value and not attrs.get("times_ms") and attrs.get("median_ms") is None:
        raise ValueError("a verified record without times")
    limits = attrs.get("wg_limits")
    if limits is not None and not (isinstance(limits, dict) and all(isinstance(v, int) for v in limits.values())):
        raise ValueError(f"wg_limits {limits!r} is not a mapping of entries to work-group sizes")

