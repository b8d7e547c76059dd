"""What to measure next: the valid list, drawn in order, at random, or balanced per parameter.

optuna's TPE proposes configurations once it has a model; before that (its start-up trials),
and always for the ``random`` and ``grid`` samplers, configurations come from the valid list
here, so invalid ones are never drawn and a variant with few valid configurations is drawn as
often as one with thousands (:func:`balanced_index`). Configurations known in advance are
drawn early and announced (compile ahead), so the worker builds them while it times another.

Example:
    >>> p = Proposer(Sampler.GRID, [{"TS": 4}, {"TS": 8}], ("TS",), seed=0)
    >>> p.next(seen=lambda c: False), p.next(seen=lambda c: False), p.next(seen=lambda c: False)
    ({'TS': 4}, {'TS': 8}, None)
"""

from __future__ import annotations

import enum
import math
import random
import warnings
from collections.abc import Callable

import optuna

from .spec import Value

Config = dict[str, Value]


class Sampler(str, enum.Enum):
    """How candidates are chosen (``--sampler``)."""

    TPE = "tpe"  # multivariate, grouped TPE after random start-up trials
    RANDOM = "random"  # balanced random draws from the valid list
    GRID = "grid"  # every valid configuration, in order

    def optuna(self, seed: int | None, n_startup: int) -> optuna.samplers.BaseSampler:
        """The optuna sampler behind ``ask`` (only TPE's proposals are used; see module doc)."""
        if self is Sampler.TPE:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.samplers.TPESampler(multivariate=True, group=True,
                                                  n_startup_trials=n_startup, seed=seed)
        return optuna.samplers.RandomSampler(seed=seed)


def startup_trials(valid: int, budget: int) -> int:
    """Random start-up trials before TPE models: ~√(valid space), within a third of the budget."""
    return max(3, min(int(round(math.sqrt(valid))), 30, max(3, budget // 3)))


def balanced_index(configs: list[Config], names: tuple[str, ...], rng: random.Random) -> int:
    """Index of a random configuration, drawn parameter by parameter.

    Each parameter's value is chosen uniformly among the values that still have a valid
    completion, so a variant with few valid configurations (e.g. the naive kernel) is drawn
    as often as one with thousands; uniform sampling over the valid list would not.
    """
    idx = list(range(len(configs)))
    for name in names:
        values = sorted({repr(configs[i][name]) for i in idx})
        chosen = values[rng.randrange(len(values))]
        idx = [i for i in idx if repr(configs[i][name]) == chosen]
    return idx[rng.randrange(len(idx))]


class Proposer:
    """Draws unmeasured configurations from the valid list (``unmeasured``, in order)."""

    def __init__(self, sampler: Sampler, unmeasured: list[Config], names: tuple[str, ...],
                 seed: int | None) -> None:
        self.sampler, self.names = sampler, names
        self.rng = random.Random(seed)
        self.pool = list(unmeasured)
        if sampler is Sampler.RANDOM:
            self.rng.shuffle(self.pool)
        self.upcoming: list[Config] = []  # drawn early, announced for compile ahead

    def _draw(self, seen: Callable[[Config], bool]) -> Config | None:
        while self.pool:
            at = 0 if self.sampler is Sampler.GRID else balanced_index(self.pool, self.names, self.rng)
            c = self.pool.pop(at)
            if not seen(c):
                return c
        return None

    def next(self, seen: Callable[[Config], bool]) -> Config | None:
        """The next unmeasured configuration, or None when every valid one was measured."""
        while self.upcoming:
            c = self.upcoming.pop(0)
            if not seen(c):
                return c
        return self._draw(seen)

    def ahead(self, count: int, seen: Callable[[Config], bool]) -> list[Config]:
        """The next ``count`` configurations :meth:`next` will return, drawn now."""
        while len(self.upcoming) < count:
            c = self._draw(seen)
            if c is None:
                break
            self.upcoming.append(c)
        return list(self.upcoming)
