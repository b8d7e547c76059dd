"""A ridge regression of log time on parameter values (and pairs of them), to rank
configurations by predicted time.

TPE (:mod:`autotune.parzen`) says where good configurations are dense; it does not predict
a time, so it cannot tell which of two untried neighbours of the best is likely faster. This
model can: log time as a sum of one weight per parameter value (``pairs=False``) or also one
per pair of values of two parameters (``pairs=True``), fitted by ridge regression on the
measured configurations. On the recorded RTX 2080 Ti GEMM space, trained on 120 random
configurations, the pairs model put a configuration within 5% of the optimum at a median rank of
17 among 17,956; and on convolution A100 the main-effects model ranked the optimum 27.5th (median
of 8 replays) among the unmeasured two-parameter moves of its runner-up, where TPE's ratio
ranked it 113th.

Configurations are rows of positions in each parameter's list of values. The fit is solved in
its dual form: the kernel of two configurations is m (+ m(m-1)/2 with pairs), m the number of
parameters they share, so its cost depends on the number of measured configurations, not on the
number of weights (matmul's space has 1,066 with pairs).

Example:
    >>> rows = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    >>> model = fit(rows, np.log([4.0, 2.0, 2.0, 1.0]), sizes=[2, 2], pairs=False)
    >>> [round(float(t), 2) for t in np.exp(model.predict(rows))]
    [3.17, 2.0, 2.0, 1.26]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The ridge penalty: the features are 0/1 codes, so it shrinks every weight alike towards 0.
#: In a prototype of the loop over recorded spaces, 0.3 and 3 gave no better medians than 1.
LAMBDA = 1.0


#: One-hot codes up to this many values over all parameters (see _Kernel.one_hot).
ONE_HOT_MAX = 4096


def _shared(a: np.ndarray, b: np.ndarray, block: int = 256) -> np.ndarray:
    """How many value positions each row of ``a`` shares with each row of ``b``, in blocks of
    ``block`` rows of ``a`` (bounded memory)."""
    out = np.empty((len(a), len(b)))
    for start in range(0, len(a), block):
        out[start:start + block] = (a[start:start + block, None, :] == b[None, :, :]).sum(-1)
    return out


@dataclass(frozen=True)
class _Kernel:
    """The fit's kernel: shared parameter values (and pairs of them), and the trend lines."""

    sizes: tuple[int, ...]
    pairs: bool
    trend: float

    @property
    def varied(self) -> tuple[int, ...]:
        """The parameters with more than one value (the others add nothing)."""
        return tuple(p for p, k in enumerate(self.sizes) if k > 1)

    def lines(self) -> list[np.ndarray]:
        """Per varied parameter: each value position's place on its trend line."""
        return [np.linspace(-1.0, 1.0, self.sizes[p]) for p in self.varied]

    @property
    def one_hot(self) -> bool:
        """Whether rows are coded one-hot (a product of codes counts the shared values fast), or,
        for parameters of very many values, by value positions compared in blocks (trial 40: the
        one-hot codes of 8,192 rows by 100,000 values took 74.5 GiB)."""
        return sum(self.sizes[p] for p in self.varied) <= ONE_HOT_MAX

    def features(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes: one-hot or value positions, places on the lines) of each row."""
        varied = self.varied
        x = rows[:, list(varied)]
        if self.one_hot:
            offsets = np.cumsum([0] + [self.sizes[p] for p in varied[:-1]], dtype=np.int64)
            codes = np.zeros((len(rows), sum(self.sizes[p] for p in varied)))
            codes[np.arange(len(rows))[:, None], x + offsets] = 1.0
        else:
            codes = x
        along = np.zeros((len(rows), len(varied)))
        for i, line in enumerate(self.lines()):
            along[:, i] = line[x[:, i]]
        return codes, along

    def __call__(self, a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """The kernel between the rows of two feature sets."""
        same = a[0] @ b[0].T if self.one_hot else _shared(a[0], b[0])  # shared parameters (exact counts)
        gram = same + same * (same - 1) / 2 if self.pairs else same
        return gram + self.trend * (a[1] @ b[1].T) if self.trend else gram

    def self_similarity(self, along: np.ndarray) -> np.ndarray:
        """The kernel of each row with itself."""
        m = len(self.varied)
        return m + (m * (m - 1) / 2 if self.pairs else 0.0) + self.trend * (along ** 2).sum(1)


@dataclass(frozen=True)
class Ridge:
    """A fitted model: predicted log time = mean + value weights (+ pair weights)."""

    mean: float
    varied: tuple[int, ...]  # the parameters with more than one value (the others add nothing)
    main: tuple[np.ndarray, ...]  # per varied parameter: a weight per value position
    pairs: tuple[tuple[int, int, np.ndarray], ...]  # (a, b, weights[position a, position b])
    kernel: _Kernel
    training: tuple[np.ndarray, np.ndarray]  # the measured rows' features
    system: np.ndarray  # the kernel of the measured rows, plus the penalty
    scale: float  # the weights' prior variance, estimated from the fit

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """Predicted log time of each row (positions in each parameter's list of values)."""
        out = np.full(len(rows), self.mean)
        for p, w in zip(self.varied, self.main, strict=True):
            out += w[rows[:, p]]
        for a, b, w in self.pairs:
            out += w[rows[:, a], rows[:, b]]
        return out

    def spread(self, rows: np.ndarray) -> np.ndarray:
        """The standard deviation of each prediction, as a Gaussian process with the fit's
        kernel reads it: large for values rarely or never measured with the others."""
        features = self.kernel.features(rows)
        cross = self.kernel(features, self.training)
        explained = (cross * np.linalg.solve(self.system, cross.T).T).sum(1)
        return np.sqrt(np.maximum(self.scale * (self.kernel.self_similarity(features[1]) - explained), 0.0))

    def optimistic(self, rows: np.ndarray, sds: float) -> np.ndarray:
        """Predicted log time less ``sds`` standard deviations (a lower confidence bound)."""
        return self.predict(rows) - sds * self.spread(rows) if sds else self.predict(rows)


def fit(rows: np.ndarray, log_times: np.ndarray, sizes: Sequence[int], pairs: bool,
        lam: float = LAMBDA, trend: float = 0.0) -> Ridge:
    """The ridge fit of ``log_times`` (finite) on the one-hot codes of ``rows``.

    ``trend`` > 0 adds a straight line over each parameter's value positions (its slope's prior
    variance, relative to a value weight's), so that a value never measured is predicted from
    the direction of its measured neighbours rather than as the mean.
    """
    kernel = _Kernel(tuple(sizes), pairs, trend)
    varied = kernel.varied
    x = rows[:, list(varied)]
    training = kernel.features(rows)
    system = kernel(training, training) + lam * np.eye(len(rows))
    mean = float(log_times.mean())
    alpha = np.linalg.solve(system, log_times - mean)
    # the primal weights: each measured configuration adds its alpha to the weights it uses;
    # a parameter's line is folded into its value weights
    lines = kernel.lines()
    slopes = trend * (training[1].T @ alpha)
    main = tuple(np.bincount(x[:, i], alpha, minlength=sizes[p]) + slopes[i] * lines[i]
                 for i, p in enumerate(varied))
    pair_weights = []
    if pairs:
        for i, a in enumerate(varied):
            for j in range(i + 1, len(varied)):
                b = varied[j]
                code = x[:, i] * sizes[b] + x[:, j]
                w = np.bincount(code, alpha, minlength=sizes[a] * sizes[b]).reshape(sizes[a], sizes[b])
                pair_weights.append((a, b, w))
    scale = float((log_times - mean) @ alpha) / len(rows)
    return Ridge(mean, varied, main, tuple(pair_weights), kernel, training, system, scale)
