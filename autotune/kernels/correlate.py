"""Host side of ``correlate``: two random float4 images and an exact FFT reference.

Definition (matched by kernel_templates/correlate.cl): imgA and imgB are W×H images of
float4, row-major (pixel (x, y) at float4 index y*W + x), passed as float arrays of 4*W*H;
out is OW×OH floats, row-major (offset (dx, dy) at index dy*OW + dx), with

    out(dx, dy) = Σ_{y < H-dy} Σ_{x < W-dx} dot(A(x, y), B(x+dx, y+dy))

for 0 ≤ dx < OW ≤ W and 0 ≤ dy < OH ≤ H. The term count is
``Σ_dx (W-dx) · Σ_dy (H-dy)`` (see :func:`terms`); each term is 8 flops and 32 bytes read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def inputs(problem: Mapping[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """imgA, imgB uniform in [-1, 1) (zero-mean, so sums stay ~sqrt(W·H)); out to fill."""
    w, h, ow, oh = _sizes(problem)
    a = rng.uniform(-1, 1, 4 * w * h).astype(np.float32)
    b = rng.uniform(-1, 1, 4 * w * h).astype(np.float32)
    return {"imgA": a, "imgB": b, "out": np.zeros(ow * oh, np.float32)}


def reference(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The correlation in float64 via FFT: ~1e-12 relative, and O(W·H·log) rather than O(n²).

    Both images are zero-padded to (H+OH)×(W+OW), so the circular correlation at offsets
    below (OW, OH) never wraps onto B's pixels and equals the overlap sum; the four channels
    are summed in the frequency domain, so one inverse transform suffices.
    """
    w, h, ow, oh = _sizes(problem)
    a = arrays["imgA"].astype(np.float64).reshape(h, w, 4)
    b = arrays["imgB"].astype(np.float64).reshape(h, w, 4)
    shape = (h + oh, w + ow)
    fa = np.fft.rfft2(a, s=shape, axes=(0, 1))
    fb = np.fft.rfft2(b, s=shape, axes=(0, 1))
    # Σ_y,x A(y, x)·B(y+dy, x+dx) ↔ conj(F[A])·F[B]
    corr = np.fft.irfft2((np.conj(fa) * fb).sum(axis=2), s=shape)
    return {"out": np.ascontiguousarray(corr[:oh, :ow].astype(np.float32).ravel())}


def direct(problem: Mapping[str, Any], arrays: Mapping[str, Any]) -> np.ndarray:
    """The definition summed term by term in float64 (OH×OW); for tests at small sizes."""
    w, h, ow, oh = _sizes(problem)
    a = arrays["imgA"].astype(np.float64).reshape(h, w, 4)
    b = arrays["imgB"].astype(np.float64).reshape(h, w, 4)
    out = np.empty((oh, ow))
    for dy in range(oh):
        for dx in range(ow):
            out[dy, dx] = np.sum(a[: h - dy, : w - dx] * b[dy:, dx:])
    return out


def terms(problem: Mapping[str, Any]) -> int:
    """Number of float4 dot products: Σ_dx (W-dx) · Σ_dy (H-dy)."""
    w, h, ow, oh = _sizes(problem)
    return (ow * w - ow * (ow - 1) // 2) * (oh * h - oh * (oh - 1) // 2)


def _sizes(problem: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """W, H, OW, OH (OW <= W and OH <= H: the spec's `requires` checked that)."""
    w, h, ow, oh = (int(problem[k]) for k in ("W", "H", "OW", "OH"))
    return w, h, ow, oh
