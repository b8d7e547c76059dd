"""Screen: Bayesian optimisation with a Gaussian process on recorded spaces, outside the loop.

    python3 benchmarks/screen_gp.py [--seeds 40] [--first 0] [--local-every 0] [--trust-region 0]
                                    [--ordinal 0] [--start 5] [--jobs 2] CACHE_FILE...

Not autotune's search: a standalone numpy prototype, to judge whether a Gaussian-process model
is worth a turn in the real loop (README, "Search efficiency"). Like a replay it measures the
recording's mid-range default first, then 5 uniform draws over the recorded configurations,
then each time the unmeasured configuration of largest expected improvement under a Gaussian
process of log time (capped at 3x the best, as parzen.PAIRS_CAP; failures as twice the slowest)
with the kernel exp(-sum_p theta_p [x_p != y_p]) over the parameters' values (one
length-scale per parameter, fitted to the marginal likelihood every 5 measurements: the
model can learn that MDIMC matters and STRM does not, and a product kernel holds interactions
of every order, where the pairs ridge model holds pairs). With ``--local-every K``, every K-th
proposal is chosen only among the configurations within two parameters of the best (with
``--basins B``: of any of the B fastest measured configurations that no faster one within two
parameters beats). With ``--trust-region R`` every proposal is chosen among the configurations
within R parameters of the best (CASMOPOLITAN's trust region for categorical spaces, Wan et al.
2021): the radius grows by one after a new best, up to R, and shrinks by one after
``--region-fails`` proposals in a row that found none; once it reaches 0, one proposal is
chosen over the whole space and the radius starts again at R. With ``--ordinal W``, two values
of a parameter k places apart in its list differ by 1 + W (k - 1) instead of 1, so the model
can learn that neighbouring tile sizes are alike.

Prints, per space, the median number of measured configurations until the best is within 5% of
the recorded optimum, and the share of seeds that get there within the budget.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per process: the processes are the parallelism

import numpy as np  # noqa: E402

from autotune import replay  # noqa: E402

NOISE, CAP, FIT_EVERY = 1e-2, 3.0, 5


@dataclass(frozen=True)
class Variant:
    """What a screened search does besides plain expected improvement (see the docstring)."""

    start: int = 5
    local_every: int = 0
    basins: int = 0
    # the trust region's widest radius (0: none), and the proposals without a gain that shrink it
    region: int = 0
    region_fails: int = 3
    ordinal: float = 0.0

    def distances(self, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
        """Per parameter, how far apart the value positions of ``a``'s and ``b``'s rows are."""
        steps = [np.abs(a[:, p][:, None].astype(float) - b[:, p][None, :]) for p in range(a.shape[1])]
        return [np.where(d > 0, 1 + self.ordinal * (d - 1), 0.0) for d in steps]


@cache
def _space(path: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(value positions of every recorded configuration, its time or inf, the default's row)."""
    rec = replay.load(path)
    configs = rec.buildable
    index = [{v: i for i, v in enumerate(vs)} for _, vs in rec.parameters]
    varied = [p for p, (_, vs) in enumerate(rec.parameters) if len(vs) > 1]
    rows = np.array([[index[p][c[p]] for p in varied] for c in configs], dtype=np.int16)
    times = np.array([t if isinstance(t := rec.outcomes[c], float) else math.inf for c in configs])
    middle = replay._middle(rec, configs)
    return rows, times, configs.index(tuple(middle[n] for n in rec.names))


def _kernel(a: np.ndarray, b: np.ndarray, theta: np.ndarray, v: Variant) -> np.ndarray:
    return np.exp(-sum(t * d for t, d in zip(theta, v.distances(a, b), strict=True)))


def _fit_theta(x: np.ndarray, z: np.ndarray, theta: np.ndarray, v: Variant, steps: int = 30) -> np.ndarray:
    """Length-scales by normalised gradient ascent on the log marginal likelihood, with a
    log-normal prior around 0.3 per parameter."""
    differ = v.distances(x, x)
    log_t = np.log(np.maximum(theta, 1e-3))
    for _ in range(steps):
        t = np.exp(log_t)
        k = np.exp(-sum(t[p] * differ[p] for p in range(len(differ))))
        inv = np.linalg.inv(k + NOISE * np.eye(len(x)))
        alpha = inv @ z
        outer = np.outer(alpha, alpha) - inv
        grad = np.array([0.5 * np.sum(outer * (-differ[p] * k)) * t[p] for p in range(len(differ))])
        grad -= 0.5 * (log_t - math.log(0.3))
        log_t = np.clip(log_t + 0.1 * grad / (np.abs(grad).max() + 1e-9), math.log(1e-3), math.log(5.0))
    return np.exp(log_t)


def _expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    g = (best - mean) / sd
    cdf = 0.5 * (1 + np.vectorize(math.erf)(g / math.sqrt(2)))
    return sd * (g * cdf + np.exp(-0.5 * g * g) / math.sqrt(2 * math.pi))


def _basins(x: np.ndarray, y: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` fastest measured configurations that no faster measured one within two
    parameters beats (the bottoms of distinct basins), as indexes into ``x``."""
    order = np.argsort(y, kind="stable")
    bottoms: list[int] = []
    for i in order:
        faster = order[:np.flatnonzero(order == i)[0]]
        if not ((x[faster] != x[i]).sum(1) <= 2).any():
            bottoms.append(int(i))
            if len(bottoms) == count:
                break
    return np.array(bottoms)


def one(path: str, seed: int, budget: int, v: Variant) -> int | None:
    """Measured configurations until within 5% of the optimum (None: not within ``budget``)."""
    rows, times, start = _space(path)
    rng = np.random.default_rng(seed)
    target = times.min() * 1.05
    free = np.ones(len(rows), bool)
    measured: list[int] = []

    def measure(i: int) -> bool:
        measured.append(i)
        free[i] = False
        return bool(times[i] <= target)

    if measure(start):
        return 1
    for _ in range(v.start):
        if measure(int(rng.choice(np.flatnonzero(free)))):
            return len(measured)
    theta = np.full(rows.shape[1], 0.3)
    radius, fails = v.region, 0
    while len(measured) < budget:
        m = np.array(measured)
        y = times[m]
        y = np.log(np.where(np.isfinite(y), y, 2 * y[np.isfinite(y)].max()))
        y = np.minimum(y, y.min() + math.log(CAP))
        z = (y - y.mean()) / (y.std() + 1e-9)
        if len(measured) % FIT_EVERY == 0:
            theta = _fit_theta(rows[m], z, theta, v)
        chol = np.linalg.cholesky(_kernel(rows[m], rows[m], theta, v) + NOISE * np.eye(len(m)))
        candidates = np.flatnonzero(free)
        if v.local_every and len(measured) % v.local_every == 0:
            centres = rows[_basins(rows[m], y, v.basins)] if v.basins else rows[m[np.argmin(y)]][None, :]
            near = candidates[((rows[candidates][:, None, :] != centres[None, :, :]).sum(2) <= 2).any(1)]
            candidates = near if len(near) else candidates
        if v.region and radius < 1:  # the region collapsed: one proposal over the whole space
            radius, fails = v.region, 0
        elif v.region:
            near = candidates[(rows[candidates] != rows[m[np.argmin(y)]]).sum(1) <= radius]
            candidates = near if len(near) else candidates
        cross = _kernel(rows[candidates], rows[m], theta, v)
        mean = cross @ np.linalg.solve(chol.T, np.linalg.solve(chol, z))
        w = np.linalg.solve(chol, cross.T)
        sd = np.sqrt(np.maximum(1.0 - (w * w).sum(0), 1e-12))
        before = times[m].min()
        if measure(int(candidates[np.argmax(_expected_improvement(mean, sd, z.min()))])):
            return len(measured)
        if times[measured[-1]] < before:
            radius, fails = min(radius + 1, v.region), 0
        elif (fails := fails + 1) == v.region_fails:
            radius, fails = radius - 1, 0
    return None


def _one(args: tuple[str, int, int, Variant]) -> int | None:
    return one(*args)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cache", nargs="+")
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--local-every", type=int, default=0)
    ap.add_argument("--basins", type=int, default=0,
                    help="with --local-every: near any of the bottoms of this many basins, not only the best")
    ap.add_argument("--trust-region", type=int, default=0, metavar="R",
                    help="propose within R parameters of the best, R adapted (see the docstring)")
    ap.add_argument("--region-fails", type=int, default=3,
                    help="with --trust-region: proposals without a new best before the radius shrinks")
    ap.add_argument("--ordinal", type=float, default=0.0, metavar="W",
                    help="values k places apart differ by 1 + W (k - 1)")
    ap.add_argument("--start", type=int, default=5, help="uniform draws after the default (default 5)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    variant = Variant(args.start, args.local_every, args.basins, args.trust_region, args.region_fails,
                      args.ordinal)
    with ProcessPoolExecutor(args.jobs) as pool:
        for path in args.cache:
            t0 = time.perf_counter()
            work = [(path, s, args.budget, variant)
                    for s in range(args.first, args.first + args.seeds)]
            found = [math.inf if n is None else n for n in pool.map(_one, work)]
            share = sum(math.isfinite(n) for n in found) / len(found)
            print(f"{os.path.basename(path):40s} median {np.median(found):6.1f}  within {args.budget}: "
                  f"{share:4.0%}  ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
