"""Host side of ``mul1``: signed redundant digits, an exact integer reference and a digit check.

A number is X = sum x[i]·B^i with B = 2^LOG_BASE and signed digits |x[i]| <= M = 2B-1; the
digit k has |k| <= B-1. The kernel writes the N+2 digits z of k·X by splitting each product
x[i]·k = lo + mid·B + hi·B^2 (lo, mid in [0, B-1], hi = floor(x[i]·k / B^2) in [-2, 1]) and
adding the components into positions i, i+1, i+2, so z[i] in [-2, 2B-1] ⊂ [-M, M].

Verification is twofold: ``reference`` computes the digits with numpy int64 (the same
algorithm) and asserts, in Python integers, that they are a valid representation of k·X;
``check`` then demands the kernel's digits equal those exactly, and on a mismatch says whether
the kernel's number is still k·X (different digits) or a wrong number.

Example:
    >>> x = np.array([2 ** 31 - 1, -1], np.int32)   # digits +M, -1 in base 2^30
    >>> z = digits(x, -(2 ** 30 - 1), 30)
    >>> to_int(z, 30) == -(2 ** 30 - 1) * to_int(x, 30)
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: Largest base exponent: digits up to M = 2^(L+1) - 1 must fit a signed 32-bit int.
MAX_LOG_BASE = 30


def bounds(log_base: int) -> tuple[int, int]:
    """(B, M): the base and the largest digit magnitude for ``log_base``."""
    if not 1 <= log_base <= MAX_LOG_BASE:
        raise ValueError(f"LOG_BASE={log_base}: must be 1..{MAX_LOG_BASE} (digits up to 2B-1 fit an int32)")
    base = 1 << log_base
    return base, 2 * base - 1


def extreme_digits(n: int, log_base: int, rng: np.random.Generator) -> np.ndarray:
    """Random digits in [-M, M] with runs of +M, of -M and of alternating ±M at both ends."""
    _, m = bounds(log_base)
    x = rng.integers(-m, m, size=n, endpoint=True, dtype=np.int64)
    run = max(1, min(256, n // 16))
    patterns = [np.full(run, m), np.full(run, -m), np.where(np.arange(run) % 2 == 0, m, -m)]
    at = 0
    for pattern in patterns:  # at the start, so the first outputs see extremes
        x[at:at + run] = pattern[: max(0, min(run, n - at))]
        at += run
    tail = min(n, 3)  # the last digits feed z[N] and z[N+1], the two extra outputs
    x[n - tail:] = np.where(np.arange(tail) % 2 == 0, -m, m)
    return x.astype(np.int32)


def inputs(problem: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """x: N digits with extremes; k: a large-magnitude digit of random sign; z: N+2 to fill."""
    n, log_base = int(problem["N"]), int(problem["LOG_BASE"])
    base, _ = bounds(log_base)
    # |k| near B-1 drives the products, and hence hi, across their whole range
    k = int(rng.integers(base // 2, base)) * (1 if rng.random() < 0.5 else -1)
    return {"x": extreme_digits(n, log_base, rng), "k": np.int32(k), "z": np.zeros(n + 2, np.int32)}


def digits(x: np.ndarray, k: int, log_base: int) -> np.ndarray:
    """The algorithm's N+2 output digits, in numpy int64 (>> is arithmetic, i.e. floor)."""
    mask = (1 << log_base) - 1
    p = x.astype(np.int64) * np.int64(k)
    z = np.zeros(x.size + 2, np.int64)
    z[:-2] += p & mask
    z[1:-1] += (p >> log_base) & mask
    z[2:] += p >> (2 * log_base)
    return z


def to_int(d: np.ndarray, log_base: int) -> int:
    """sum d[i]·B^i as a Python integer (signed digits; pairwise, so it is fast for 2^22 digits)."""
    v = np.asarray(d, np.int64)
    if v.size % 2:
        v = np.append(v, 0)
    # first level in int64: |d0 + d1·B| <= (2B-1)(B+1) < 2^62 for B <= 2^30
    parts: np.ndarray = (v[0::2] + (v[1::2] << log_base)).astype(object)
    width = 2 * log_base
    while parts.size > 1:
        if parts.size % 2:
            parts = np.append(parts, np.array([0], dtype=object))
        parts = parts[0::2] + (parts[1::2] << width)
        width *= 2
    return int(parts[0]) if parts.size else 0


def reference(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """z = digits of k·x, asserted (in Python integers) to be k·X with every |z_i| <= M."""
    log_base = int(problem["LOG_BASE"])
    base, m = bounds(log_base)
    x, k = np.asarray(arrays["x"]), int(arrays["k"])
    if np.abs(x.astype(np.int64)).max(initial=0) > m or abs(k) >= base:
        raise ValueError(f"mul1 inputs out of range for LOG_BASE={log_base}: need |x_i| <= {m}, |k| < {base}")
    z = digits(x, k, log_base)
    if not (z.min() >= -2 and z.max() <= m):
        raise AssertionError(f"mul1 reference: digits in [{z.min()}, {z.max()}] leave [-2, {m}]")
    # The big-integer identity costs O(N^1.6); the digit algorithm does not depend on N, so the
    # identity is asserted up to 2^22 digits (tests cover every variant there) and skipped above.
    if x.size <= 1 << 22 and to_int(z, log_base) != k * to_int(x, log_base):
        raise AssertionError("mul1 reference: sum z_i·B^i != k·sum x_i·B^i")
    return {"z": z.astype(np.int32)}


def check(name: str, got: np.ndarray, want: np.ndarray, problem: Mapping[str, Any]) -> str | None:
    """None if ``got`` equals the reference digits; else what is wrong, in digits and as a number."""
    log_base = int(problem["LOG_BASE"])
    _, m = bounds(log_base)
    got, want = np.asarray(got).ravel(), np.asarray(want).ravel()
    if got.shape != want.shape:
        return f"{name}: {got.size} digits, want {want.size} (N+2)"
    bad = np.flatnonzero(got != want)
    if not bad.size:
        return None
    i = int(bad[0])
    g64 = got.astype(np.int64)
    out = np.flatnonzero((g64 < -m) | (g64 > m))
    if out.size:
        what = f"{out.size} digits outside [-M, M] = [{-m}, {m}] (first z[{int(out[0])}] = {int(got[out[0]])})"
    elif to_int(got, log_base) == to_int(want, log_base):
        what = "the number is k·X but its digits differ from the algorithm's"
    else:
        what = "the number is not k·X"
    return (f"{name}: {bad.size} of {want.size} digits differ (first z[{i}]: got {int(got[i])}, "
            f"want {int(want[i])}; LOG_BASE={log_base}); {what}")
