"""Host side of ``reverse``: random bytes and the reversed buffer (compared exactly)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def inputs(problem: Mapping[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """src: N random bytes in [0, 254]; dst: N bytes to fill.

    The bench fills outputs with 0xFF before the verifying launch; keeping 0xFF out of src
    means a byte the kernel fails to write can never match by chance.
    """
    n = problem["N"]
    return {"src": rng.integers(0, 255, n, dtype=np.uint8), "dst": np.zeros(n, np.uint8)}


def reference(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """dst[N - 1 - i] = src[i]."""
    return {"dst": np.ascontiguousarray(arrays["src"][::-1])}
