"""Host side of ``mathpath``: x uniform in [0.5, 2) and a float64 numpy reference.

The formula ``y = x^P / (1 + x) + (2 + x) / (3 + x*x)`` is positive (y > 0.7), so the spec's
tolerance (rtol, atol 0) bounds the maximum relative error of every element. No custom
``check``: the default comparison then reports a real error for the winner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

X_LOW, X_HIGH = 0.5, 2.0


def inputs(problem: Mapping[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """x uniform in [0.5, 2) (fp32); y to fill."""
    n = problem["N"]
    x = rng.uniform(X_LOW, X_HIGH, n).astype(np.float32)
    return {"x": x, "y": np.zeros(n, np.float32)}


def formula(x: np.ndarray, p: int) -> np.ndarray:
    """The kernel's formula evaluated in float64."""
    x = np.asarray(x, dtype=np.float64)
    return x**p / (1.0 + x) + (2.0 + x) / (3.0 + x * x)


def reference(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """y in float64 (not rounded to fp32, so the error measured is the kernel's own)."""
    return {"y": formula(arrays["x"], int(problem["P"]))}


def max_rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / |want| over all elements (what the spec's rtol bounds)."""
    w = np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(np.asarray(got, dtype=np.float64) - w) / np.abs(w)))
