"""The one place a measurement becomes a profile entry: a tuning run's best configuration, or
the configuration ``load_kernel`` picked at first use of an untuned problem.

Example:
    >>> from autotune import spec as S
    >>> from autotune.result import Measurement, Status
    >>> sp = S.load("matmul")
    >>> p = sp.resolve_problem({"M": 64, "N": 64, "K": 64})
    >>> m = Measurement(Status.OK, "", (0.5, 0.6, 0.7), params=sp.default_config)
    >>> e = entry(sp, p, m, trials=3, picked=True)
    >>> e.time_ms, e.picked, round(e.throughput["GFLOP/s"], 3)
    (0.6, True, 0.874)
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from .errors import AutotuneError
from .profiles import Entry
from .result import Measurement
from .spec import KernelSpec


def entry(spec: KernelSpec, problem: Mapping[str, Any], best: Measurement, trials: int, *,
          partial: bool = False, baseline: Measurement | None = None, picked: bool = False,
          study: str | None = None) -> Entry:
    """The profile entry for ``best`` (a verified or, when ``picked``, a timed measurement);
    ``study``: :func:`study_key` of the study it came from."""
    assert best.ok and best.params is not None
    base = baseline if baseline is not None and baseline.ok else None
    return Entry(
        problem=dict(problem),
        params=spec.without_flags(best.params),
        build_flags=tuple(spec.enabled_flags(best.params)),
        time_ms=round(best.median_ms, 6),
        throughput={k: round(v, 3) for k, v in _throughput(spec, problem, best.median_ms).items()},
        trials=trials,
        tuned_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        spec_hash=spec.spec_hash,
        spec_file=spec.file_id,
        partial=partial,
        baseline_ms=round(base.median_ms, 6) if base else None,
        spread_ms=(round(best.spread[0], 6), round(best.spread[1], 6)),
        error=float(f"{best.error:.3g}") if best.error is not None else None,
        tolerance_used=float(f"{best.tolerance_used:.3g}") if best.tolerance_used is not None else None,
        picked=picked,
        study=study,
    )


def _throughput(spec: KernelSpec, problem: Mapping[str, Any], median_ms: float) -> dict[str, float]:
    """The metrics to store; none when they cannot be computed, which must not lose the result."""
    try:
        return spec.throughput(problem, median_ms)
    except AutotuneError:
        return {}
