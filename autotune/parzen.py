"""TPE over valid configurations: the next candidate from Parzen estimators of the good and
the other measured configurations, chosen among valid, unmeasured ones. The same pool and
measurements serve the ridge models' proposals (:mod:`autotune.ridge`): the configuration
predicted fastest, and the moves of the best ranked by an optimistic prediction
(:data:`OPTIMISM`).

optuna's TPE draws each parameter from its own estimate of the good region and keeps the best
of 24 draws by the ratio l(x)/g(x) of the good to the other trials' densities. Its draws come
from the full product of parameter values, so in a constrained space most are invalid or
measured already, and each of those is a wasted ask (on recorded GEMM spaces about two in
three). Here the draws come from a pool of valid configurations instead: every valid one when
the space is small enough to list (:data:`POOL_ALL`), otherwise a uniform sample that grows as
the search goes. The model is multivariate (one product kernel per measured configuration,
over each parameter's position in its list of values), as in optuna's ``multivariate=True``.

The settings come from replays of recorded spaces (README, "Search efficiency"); in a numpy
prototype of the loop on the four GEMM spaces (20 seeds), a quarter of the trials as the good
set (at most :data:`GOOD_MAX`) and :data:`CANDIDATES` draws from l(x) gave a sum of the median
measurements to within 5% of 170.5, against 309 with 15% and optuna's 24 draws.

Example:
    >>> from autotune import spec as S
    >>> from autotune.space import ValidSpace
    >>> sp = S.load("reverse")
    >>> space = ValidSpace(sp, sp.default_problem(), {"max_work_group_size": 256})
    >>> model = ParzenSearch(space, seed=0)
    >>> for c in space:
    ...     model.observe(c, 1.0 / c["VW"])  # wider vectors are faster
    ...     if model.observed == 8:
    ...         break
    >>> c = model.propose(seen=lambda c: False)
    >>> space.valid(c)
    True
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping

import numpy as np

from . import ridge
from .space import ValidSpace, canonical, config_key
from .spec import Value

Config = dict[str, Value]

#: List every valid configuration as the pool when there are at most this many.
POOL_ALL = 32_768
#: Otherwise: a uniform sample of POOL_START, and POOL_GROWTH more every POOL_GROWTH proposals
#: up to POOL_MAX. A draw costs 0.3 ms (matmul on an H200) to 3 ms (a device with small
#: work-groups, where most draws are rejected), so growth is one draw per proposal on average,
#: and in batches, since each batch extends every cached kernel column.
POOL_START, POOL_GROWTH, POOL_MAX = 1024, 64, 8192
#: The good set: GAMMA of the measured configurations, at most GOOD_MAX.
GAMMA, GOOD_MAX = 0.25, 25
#: The other set's estimator keeps the most recent OTHERS_MAX (bounds the time per proposal).
OTHERS_MAX = 200
#: ``propose(away_from=...)`` leaves out of the good set what is this many parameters or fewer
#: from the given configuration. On the recorded RTX 2080 Ti GEMM space 16 of 60 replays
#: stalled 11% above the optimum, with every good configuration in one basin four parameters
#: from the optimum's; with a model without that basin on every other TPE turn after a stall
#: (tuner.STALL), 10 of 60 did.
BASIN = 2
#: Draws from l(x) per proposal; the one with the best l(x)/g(x) is proposed.
CANDIDATES = 100
#: Kernel: a Gaussian over positions in the value list (width in positions), mixed with the
#: uniform distribution (weight PRIOR_MIX) so that no value's density is ever zero.
BANDWIDTH, PRIOR_MIX = 1.0, 0.1
#: The ridge models (:mod:`autotune.ridge`) learn from at most this many measured
#: configurations: the fastest half of them and the most recent others (bounds their cost).
RIDGE_MAX = 300
#: The main-effects model (the step beside the best) also fits a line over each parameter's
#: value positions, with this prior weight (ridge.fit's ``trend``): the step then reaches an
#: unmeasured value at the end of a list (point-in-polygon's fastest tile size is its largest).
#: With a weight of 4 in the pairs model as well, the GEMM spaces gained 3-6 points within 100
#: but convolution A100's median rose from 153 to 166 (400 replays per recorded space).
TREND = 1.0
#: The step beside the best ranks its moves by the main-effects model's lower confidence bound,
#: this many standard deviations below the prediction (ridge.Ridge.optimistic), so that a value
#: rarely measured next to good ones gets its try: by the prediction alone, a value that was
#: slow with poor company looks slow (point-in-polygon's fastest ``use_method`` is the last of
#: three, and the middle one is slow). Over 400 replays per recorded space, against the
#: prediction alone with TREND 4: point-in-polygon's median 23 to 20, convolution A100's 158 to
#: 148, the others within their noise; 1 or 0.5 deviations, or TREND 4, did no better.
OPTIMISM = 2.0
#: The pairs model learns from log time capped at this many times the best measured time: it
#: is asked which configuration is fastest, and a configuration 10x slower says only that it is
#: not, while its full log time would weigh on every value it shares with fast ones (on the RTX
#: 2080 Ti GEMM space the runs that stall measured the optimum's tile size only with thread
#: counts 7-13x slower). Over 160 replays per recorded space against no cap: GEMM within 100
#: 61 / 76 / 81 / 82% to 68 / 80 / 86 / 81%, convolution A100's median 166 to 142; a cap at 1.5x,
#: 5x or the median time did no better. The main-effects model (the step) keeps full times.
PAIRS_CAP = 3.0


class _LogKernel:
    """One parameter's K[:, b] = log P(value a | a measured configuration has value b), a column
    computed when first asked for: all k² at once took 75 GiB for a replayed parameter of
    100,000 values (trial 37). Columns of a parameter of at most CACHED_VALUES values are kept."""

    CACHED_VALUES = 4096

    def __init__(self, values: int) -> None:
        self.values = values
        self._columns: dict[int, np.ndarray] = {}

    def column(self, b: int) -> np.ndarray:
        col = self._columns.get(b)
        if col is None:
            g = np.exp(-0.5 * ((np.arange(self.values) - b) / BANDWIDTH) ** 2)
            col = np.log((1 - PRIOR_MIX) * g / g.sum() + PRIOR_MIX / self.values)
            if self.values <= self.CACHED_VALUES:
                self._columns[b] = col
        return col


#: How long the pool may take to list a small valid space before it is drawn instead, and to
#: draw the configurations it adds at a time.
LIST_LIMIT_S = 2.0


class ParzenSearch:
    """Proposes valid configurations by TPE's rule; learns from every measured configuration."""

    def __init__(self, space: ValidSpace, seed: int | None, listable: bool = True) -> None:
        """``listable``: whether the space may hold at most POOL_ALL valid configurations (a
        space known to be larger is sampled without trying to list it first)."""
        self.space = space
        self.rng = np.random.default_rng(seed)
        self._draw_rng = random.Random(seed)
        params = space.spec.parameters
        self._names = [p.name for p in params]
        self._index = [{v: i for i, v in enumerate(p.values)} for p in params]
        self._sizes = [len(p.values) for p in params]
        self._kernels = [_LogKernel(k) for k in self._sizes]
        self._log_prior = -float(sum(math.log(len(p.values)) for p in params))
        self._pool = np.zeros((0, len(params)), dtype=np.int32)
        self._pool_keys: dict[str, int] = {}
        self._free = np.zeros(0, dtype=bool)  # pool rows not measured
        self._complete = False  # the pool holds every valid configuration
        self._listable = listable
        self._proposals = 0
        self._obs: list[tuple[np.ndarray, float]] = []  # (positions, value), in measuring order
        self._columns: dict[int, np.ndarray] = {}  # observation -> its kernel at each pool row
        self._last_used: set[int] = set()  # the observations of the last _split
        self._keys: dict[str, int] = {}  # configuration -> its observation

    @property
    def observed(self) -> int:
        return len(self._obs)

    @property
    def pool_size(self) -> int:
        return len(self._pool)

    def _encode(self, c: Mapping[str, Value]) -> np.ndarray:
        return np.array([idx[c[n]] for idx, n in zip(self._index, self._names, strict=True)], dtype=np.int32)

    def _column(self, positions: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The product kernel of one measured configuration at these rows (float64: with every
        factor at least PRIOR_MIX / values, it stays far above underflow)."""
        return np.exp(sum((k.column(int(positions[p]))[rows[:, p]] for p, k in enumerate(self._kernels)),
                          np.zeros(len(rows))))

    def _add_to_pool(self, configs: list[Config]) -> None:
        fresh: list[np.ndarray] = []
        free: list[bool] = []
        for c in configs:
            c = canonical(self.space.spec, c, self.space.problem, self.space.facts)
            key = config_key(c)
            if key not in self._pool_keys:
                self._pool_keys[key] = len(self._pool) + len(fresh)
                fresh.append(self._encode(c))
                free.append(key not in self._keys)
        if not fresh:
            return
        rows = np.array(fresh, dtype=np.int32)
        self._pool = np.concatenate([self._pool, rows])
        self._free = np.concatenate([self._free, free])
        for i, col in self._columns.items():  # extend the cached columns to the new rows
            self._columns[i] = np.concatenate([col, self._column(self._obs[i][0], rows)])

    def _fill_pool(self) -> None:
        self._proposals += 1
        if len(self._pool) == 0:
            listed: list[Config] = []
            complete = False
            with self.space.within(LIST_LIMIT_S):
                for c in self.space if self._listable else ():
                    listed.append(c)
                    if len(listed) > POOL_ALL:
                        break
                complete = True
            if not complete:  # a sparse space: drawn instead (trial 88: its listing took 69 s, cut
                self._listable = False  # short at the run's deadline and begun again by each run)
            if self._listable and len(listed) <= POOL_ALL:
                self._complete = True
                self._add_to_pool(listed)
                return
            self._add_to_pool(self._draws(POOL_START))
        elif not self._complete and len(self._pool) < POOL_MAX and self._proposals % POOL_GROWTH == 0:
            self._add_to_pool(self._draws(POOL_GROWTH))

    def _draws(self, count: int) -> list[Config]:
        """Up to ``count`` valid configurations drawn at random, as many as :data:`LIST_LIMIT_S`
        allows (in a sparse space a draw can take a second: the pool grows as the search goes)."""
        out: list[Config] = []
        with self.space.within(LIST_LIMIT_S):
            for _ in range(count):
                c = self.space.sample(self._draw_rng)
                if c is None:
                    break
                out.append(c)
        return out

    def observe(self, config: Mapping[str, Value], value: float) -> None:
        """A measured configuration and its time (``math.inf`` for a failure); a configuration
        observed again (a timeout measured under a longer limit) takes its new time."""
        key = config_key(config)
        if key in self._keys:
            self._obs[self._keys[key]] = (self._obs[self._keys[key]][0], value)
            return
        self._keys[key] = len(self._obs)
        self._obs.append((self._encode(config), value))
        if (row := self._pool_keys.get(key)) is not None:
            self._free[row] = False

    def _density(self, members: list[int]) -> np.ndarray:
        """log of the estimator over these observations, at every pool row."""
        total = np.full(len(self._pool), math.exp(self._log_prior))
        for i in members:
            if i not in self._columns:
                self._columns[i] = self._column(self._obs[i][0], self._pool)
            total += self._columns[i]
        return np.log(total) - math.log(len(members) + 1)

    def _split(self, away_from: Mapping[str, Value] | None) -> tuple[list[int], list[int]]:
        """(good, others): the fastest GAMMA (at most GOOD_MAX) of the measured configurations
        (of those more than BASIN parameters from ``away_from``, when given and there are
        any), and the most recent others."""
        order = self._by_time()
        eligible = order
        if away_from is not None:
            centre = self._encode(away_from)
            eligible = [i for i in order if (self._obs[i][0] != centre).sum() > BASIN] or order
        good = eligible[:max(1, min(math.ceil(GAMMA * len(eligible)), GOOD_MAX))]
        chosen = set(good)
        others = self._recent(chosen, OTHERS_MAX)
        # columns of neither set are dropped, except the last split's: after a stall the
        # good set alternates between two (see propose), and each would be computed again
        used = chosen | set(others)
        for i in set(self._columns) - used - self._last_used:
            del self._columns[i]
        self._last_used = used
        return good, others

    def _by_time(self) -> list[int]:
        """The observations, fastest first."""
        return sorted(range(len(self._obs)), key=lambda i: self._obs[i][1])

    def _recent(self, excluded: set[int], count: int) -> list[int]:
        """The ``count`` most recent observations not in ``excluded``, in measuring order."""
        return [i for i in range(len(self._obs)) if i not in excluded][-count:]

    def _model(self, away_from: Mapping[str, Value] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(log l(x), log l(x)/g(x)) at every pool row (call _fill_pool first)."""
        good, others = self._split(away_from)
        low = self._density(good)
        return low, low - (self._density(others) if others else self._log_prior)

    def propose(self, seen: Callable[[Config], bool],
                away_from: Mapping[str, Value] | None = None) -> Config | None:
        """The unmeasured configuration TPE's rule picks (``seen``: also those in flight);
        None when the pool is used up or nothing has been measured yet.

        ``away_from`` (the best, when the search has stalled): the good set leaves out the
        configurations within BASIN parameters of it, so TPE models the next-best region.
        """
        if not self._obs:
            return None
        self._fill_pool()
        low, ratio = self._model(away_from)
        free = self._free.copy()
        while (rows := np.flatnonzero(free)).size:
            weights = np.exp(low[rows] - low[rows].max())
            picks = rows if len(rows) <= CANDIDATES else self.rng.choice(
                rows, size=CANDIDATES, replace=False, p=weights / weights.sum())
            row = int(picks[np.argmax(ratio[picks])])
            config = self._config(row)
            if not seen(config):
                return config
            free[row] = False  # in flight, or measured and not yet observed
        return None

    def fitted(self, pairs: bool) -> ridge.Ridge | None:
        """The ridge model of log time (failures as twice the slowest time; with ``pairs``,
        every time capped at :data:`PAIRS_CAP` times the best), or None before anything has
        been timed."""
        finite = [v for _, v in self._obs if math.isfinite(v)]
        if not finite:
            return None
        order = self._by_time()
        if len(order) > RIDGE_MAX:
            fast = order[:RIDGE_MAX // 2]
            order = fast + self._recent(set(fast), RIDGE_MAX - len(fast))
        failed = math.log(2 * max(finite))
        times = np.array([math.log(self._obs[i][1]) if math.isfinite(self._obs[i][1]) else failed
                          for i in order])
        if pairs:
            times = np.minimum(times, math.log(PAIRS_CAP * min(finite)))
        rows = np.array([self._obs[i][0] for i in order])
        return ridge.fit(rows, times, self._sizes, pairs, trend=0.0 if pairs else TREND)

    def ranked(self, configs: list[Config]) -> list[Config]:
        """``configs``, most promising first: by the main-effects model's lower confidence bound
        (:data:`OPTIMISM`); as given when it cannot fit."""
        model = self.fitted(pairs=False) if len(configs) > 1 else None
        if model is None:
            return configs
        score = model.optimistic(np.array([self._encode(c) for c in configs]), OPTIMISM)
        return [configs[i] for i in np.argsort(score, kind="stable")]

    def propose_near(self, centre: Mapping[str, Value], seen: Callable[[Config], bool],
                     moved: int = 2) -> Config | None:
        """The unmeasured pool configuration that differs from ``centre`` in exactly ``moved``
        parameters and that ranks first as in :meth:`ranked`; None if there is none.
        (On recorded convolution spaces the optimum lies two parameters from the runner-up,
        which one-parameter steps cannot cross.)"""
        if not self._obs:
            return None
        self._fill_pool()
        rows = np.flatnonzero(self._free & ((self._pool != self._encode(centre)).sum(1) == moved))
        if not rows.size:  # in a sampled pool, usually: no model needed
            return None
        return self._first_unseen(rows, self.fitted(pairs=False), seen, OPTIMISM)

    def propose_fitted(self, seen: Callable[[Config], bool]) -> Config | None:
        """The unmeasured pool configuration that the pairs model predicts fastest; None when
        the pool is used up or nothing has been timed yet."""
        if not self._obs:
            return None
        self._fill_pool()
        model = self.fitted(pairs=True)
        return None if model is None else self._first_unseen(np.flatnonzero(self._free), model, seen)

    def _first_unseen(self, rows: np.ndarray, model: ridge.Ridge | None,
                      seen: Callable[[Config], bool], sds: float = 0.0) -> Config | None:
        """The first of ``rows`` by predicted time less ``sds`` standard deviations (pool order
        without a model) not ``seen``."""
        if model is not None:
            rows = rows[np.argsort(model.optimistic(self._pool[rows], sds), kind="stable")]
        for row in rows:
            config = self._config(int(row))
            if not seen(config):
                return config
        return None

    def _config(self, row: int) -> Config:
        return {n: self.space.spec.parameters[p].values[int(v)]
                for p, (n, v) in enumerate(zip(self._names, self._pool[row], strict=True))}
