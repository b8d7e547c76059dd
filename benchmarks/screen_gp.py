"""Screen: Bayesian optimisation with a Gaussian process on recorded spaces, outside the loop.

    python3 benchmarks/screen_gp.py [--seeds 40] [--first 0] [--local-every 0] [--jobs 2] CACHE_FILE...

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
parameters beats).

Prints, per space, the median number of measured configurations until the best is within 5% of
the recorded optimum, and the share of seeds that get there within the budget.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from functools import cache

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per process: the processes are the parallelism

import numpy as np  # noqa: E402

from autotune import replay  # noqa: E402

NOISE, CAP, START, FIT_EVERY = 1e-2, 3.0, 5, 5


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


def _kernel(a: np.ndarray, b: np.ndarray, theta: np.ndarray) -> np.ndarray:
    return np.exp(-sum(theta[p] * (a[:, p][:, None] != b[:, p][None, :]) for p in range(a.shape[1])))


def _fit_theta(x: np.ndarray, z: np.ndarray, theta: np.ndarray, steps: int = 30) -> np.ndarray:
    """Length-scales by normalised gradient ascent on the log marginal likelihood, with a
    log-normal prior around 0.3 per parameter."""
    differ = [(x[:, p][:, None] != x[:, p][None, :]).astype(float) for p in range(x.shape[1])]
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


def one(path: str, seed: int, budget: int, local_every: int, basins: int = 0) -> int | None:
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
    for _ in range(START):
        if measure(int(rng.choice(np.flatnonzero(free)))):
            return len(measured)
    theta = np.full(rows.shape[1], 0.3)
    while len(measured) < budget:
        m = np.array(measured)
        y = times[m]
        y = np.log(np.where(np.isfinite(y), y, 2 * y[np.isfinite(y)].max()))
        y = np.minimum(y, y.min() + math.log(CAP))
        z = (y - y.mean()) / (y.std() + 1e-9)
        if len(measured) % FIT_EVERY == 0:
            theta = _fit_theta(rows[m], z, theta)
        chol = np.linalg.cholesky(_kernel(rows[m], rows[m], theta) + NOISE * np.eye(len(m)))
        candidates = np.flatnonzero(free)
        if local_every and len(measured) % local_every == 0:
            centres = rows[_basins(rows[m], y, basins)] if basins else rows[m[np.argmin(y)]][None, :]
            near = candidates[((rows[candidates][:, None, :] != centres[None, :, :]).sum(2) <= 2).any(1)]
            candidates = near if len(near) else candidates
        cross = _kernel(rows[candidates], rows[m], theta)
        mean = cross @ np.linalg.solve(chol.T, np.linalg.solve(chol, z))
        v = np.linalg.solve(chol, cross.T)
        sd = np.sqrt(np.maximum(1.0 - (v * v).sum(0), 1e-12))
        if measure(int(candidates[np.argmax(_expected_improvement(mean, sd, z.min()))])):
            return len(measured)
    return None


def _one(args: tuple[str, int, int, int, int]) -> int | None:
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
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with ProcessPoolExecutor(args.jobs) as pool:
        for path in args.cache:
            t0 = time.perf_counter()
            work = [(path, s, args.budget, args.local_every, args.basins)
                    for s in range(args.first, args.first + args.seeds)]
            found = [math.inf if n is None else n for n in pool.map(_one, work)]
            share = sum(math.isfinite(n) for n in found) / len(found)
            print(f"{os.path.basename(path):40s} median {np.median(found):6.1f}  within {args.budget}: "
                  f"{share:4.0%}  ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
