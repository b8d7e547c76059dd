"""Host side of ``matmul``: random fp32 operands and a float64 numpy reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np


def _order(problem: Mapping[str, Any]) -> Literal["C", "F"]:
    return "F" if problem.get("layout") == "col" else "C"


def inputs(problem: Mapping[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A (M×K), B (K×N) uniform in [-1, 1], stored row- or column-major; C to fill."""
    m, n, k, order = problem["M"], problem["N"], problem["K"], _order(problem)
    a = np.asarray(rng.uniform(-1, 1, (m, k)), dtype=np.float32, order=order)
    b = np.asarray(rng.uniform(-1, 1, (k, n)), dtype=np.float32, order=order)
    return {"A": _flat(a, order), "B": _flat(b, order), "C": np.zeros(m * n, np.float32)}


def reference(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """C = A·B accumulated in float64, flattened in the problem's storage order."""
    m, n, k, order = problem["M"], problem["N"], problem["K"], _order(problem)
    a = arrays["A"].reshape((m, k), order=order).astype(np.float64)
    b = arrays["B"].reshape((k, n), order=order).astype(np.float64)
    return {"C": _flat((a @ b).astype(np.float32), order)}


def _flat(x: np.ndarray, order: Literal["C", "F"]) -> np.ndarray:
    return np.ascontiguousarray(x.ravel(order=order))
