"""Host side of ``matmul``: random fp32 operands, a float64 numpy reference and the error bound.

The bound is the standard forward-error bound of a float32 dot product of length K, for any
order of summation, fused or not (Higham, *Accuracy and Stability of Numerical Algorithms*,
§3.1): |fl(a·b) − a·b| ≤ γ_K · |a|·|b| with γ_K = K·u / (1 − K·u), u = 2⁻²⁴. The reference is
exact to float64 and then rounded once (another u·|a·b| ≤ u·|a|·|b|), so a correct kernel is
within γ_(K+1) · (|A|·|B|)_ij of it in every element, at any K: no correct kernel is rejected.
A wrong one still is: at K = 512 the bound is about 4e-3 per element, while one dropped K-tile
of 16 products moves an element by about 1.3.

Example:
    >>> p = {"M": 2, "N": 2, "K": 3, "layout": "row"}
    >>> arrays = {"A": np.ones(6, np.float32), "B": np.ones(6, np.float32)}
    >>> float(error_bound(p, arrays)["C"][0]) == gamma(4) * 3
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np


def _order(problem: Mapping[str, Any]) -> Literal["C", "F"]:
    return "F" if problem.get("layout") == "col" else "C"


def inputs(problem: Mapping[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A (M×K), B (K×N) uniform in [-1, 1], stored row- or column-major; C to fill."""
    m, n, k, order = problem["M"], problem["N"], problem["K"], _order(problem)
    # cast with astype, which load_kernel's stand-in draws keep unmapped (trial 106: np.asarray's
    # copy of them took 2.9 GB and 7 s to learn the sizes at 16384^3)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32, order=order)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32, order=order)
    return {"A": _flat(a, order), "B": _flat(b, order), "C": np.zeros(m * n, np.float32)}


def reference(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """C = A·B accumulated in float64, flattened in the problem's storage order."""
    m, n, k, order = problem["M"], problem["N"], problem["K"], _order(problem)
    a = arrays["A"].reshape((m, k), order=order).astype(np.float64)
    b = arrays["B"].reshape((k, n), order=order).astype(np.float64)
    return {"C": _flat((a @ b).astype(np.float32), order)}


def error_bound(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """γ_(K+1) · (|A|·|B|) per element of C (see the module docstring)."""
    m, n, k, order = problem["M"], problem["N"], problem["K"], _order(problem)
    a = np.abs(arrays["A"].reshape((m, k), order=order).astype(np.float64))
    b = np.abs(arrays["B"].reshape((k, n), order=order).astype(np.float64))
    return {"C": _flat(gamma(k + 1) * (a @ b), order)}


def gamma(n: int) -> float:
    """γ_n = n·u / (1 − n·u) for float32 (u = 2⁻²⁴); infinite where n·u ≥ 1 (no bound)."""
    nu = n * 2.0 ** -24
    return nu / (1 - nu) if nu < 1 else float("inf")


def _flat(x: np.ndarray, order: Literal["C", "F"]) -> np.ndarray:
    return np.ascontiguousarray(x.ravel(order=order))
