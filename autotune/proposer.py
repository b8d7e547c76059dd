"""What to measure next: valid configurations in order, drawn at random, or near another.

TPE (:mod:`autotune.parzen`) proposes configurations once it has a model; before that (its
start-up trials), and always for the ``random`` and ``grid`` samplers, configurations come from
the valid space here (:class:`~autotune.space.ValidSpace`, walked lazily, never listed), so invalid ones are
never drawn. Random draws are uniform over the valid configurations (by rejection from the
full product; on recorded GEMM spaces this found the optimum sooner than draws balanced per
parameter, which favour the small tiles that few constraints rule out); where valid
configurations are too sparse for rejection, the draw is balanced per parameter. TPE's
start-up draws cover pairs: each is, of a pool of random valid configurations, the one that
holds the most pairs of values (of two parameters) that no earlier draw held, so that a model
fitted to them has seen large tiles with few threads and with many, not one of the two alone.
:meth:`Proposer.neighbour` gives the local steps. Configurations known in advance are drawn
early and announced (compile ahead), so the worker builds them while it times another.

Example:
    >>> from autotune import spec as S
    >>> from autotune.space import ValidSpace
    >>> sp = S.load("reverse")
    >>> space = ValidSpace(sp, sp.default_problem(), {"max_work_group_size": 256})
    >>> p = Proposer(Sampler.GRID, space, seed=0)
    >>> p.next(seen=lambda c: False) == space.first()
    True
"""

from __future__ import annotations

import enum
import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotations only: the command line reads Sampler before numpy is needed
    from .space import ValidSpace
    from .spec import Value

    Config = dict[str, Value]


class Sampler(str, enum.Enum):
    """How candidates are chosen (``--sampler``)."""

    TPE = "tpe"  # TPE over valid configurations (autotune.parzen) after random start-up draws
    RANDOM = "random"  # uniform random draws from the valid space
    GRID = "grid"  # every valid configuration, in order


def startup_trials(valid: int, budget: int, varied: int) -> int:
    """Random start-up trials before TPE models: ~√(valid space), 3 to 5, or where ``varied``
    parameters (those of more than one value) make many pairs, one per two pairs up to
    COVERING_MAX, so that the draws can cover the pairs of values (see :class:`Proposer`);
    at most a third of the budget. The baseline, earlier winners, default and hints come first
    and count. On the recorded GEMM spaces (10 parameters: 12 draws) this came within 5% of the
    optimum in 100 configurations in 2–8 points more of 400 seeds than 5 uniform draws did, and
    20 draws did less well than 12; point-in-polygon (4 parameters) keeps its 5, since more only
    cost there (docs/search-screens.md).

    >>> startup_trials(17_956, 400, varied=10), startup_trials(4_092, 400, varied=4)
    (12, 5)
    """
    uniform = min(int(round(math.sqrt(valid))), 5)
    covering = min(varied * (varied - 1) // 4, COVERING_MAX)
    return max(3, min(max(uniform, covering), max(3, budget // 3)))


#: Start-up draws at most, however many pairs of parameters there are.
COVERING_MAX = 12
#: Random configurations a covering draw chooses among, at most (kept and topped up between
#: draws; correlate's first 256 take about half a second on a 2-core CPU), and the draws of
#: those that may find none (in a space where 1% of the combinations are valid, 8% of them do)
#: before it chooses among those it has.
COVERING_POOL = 256
COVERING_MISSES = 32
#: Random draws that all hit measured configurations before the grid walk takes over.
_REDRAWS = 64


class Proposer:
    """Draws configurations of the valid space that ``seen`` has not measured."""

    def __init__(self, sampler: Sampler, space: ValidSpace, seed: int | None) -> None:
        self.sampler, self.space = sampler, space
        self.rng = random.Random(seed)
        self._grid: Iterator[Config | None] | None = space.paused_walk() if sampler is Sampler.GRID else None
        self.upcoming: list[Config] = []  # drawn early, announced for compile ahead
        self.covering = 0  # draws left that cover pairs (TPE's start-up draws; the tuner sets it)
        self._pool: list[Config] = []  # the covering draws' candidates
        self._pairs: set[tuple[str, Value, str, Value]] = set()  # held by the covering draws so far

    def _draw(self, seen: Callable[[Config], bool]) -> Config | None:
        from .space import WalkTimeout  # loaded with the space this proposer draws from

        if self.covering > 0:
            self.covering -= 1
            c = self._covering_draw(seen)
            if c is not None:
                return c
        if self._grid is None:  # random: draws while they find new configurations
            for _ in range(_REDRAWS):
                c = self.space.sample(self.rng)
                if c is None:
                    return None
                if self._new(c, seen):
                    return c
            self._grid = self.space.paused_walk()  # nearly all measured: walk to the ones left
        for c in self._grid:
            if c is None:  # the deadline passed: the walk goes on from here when asked again
                raise WalkTimeout
            if self._new(c, seen):
                return c
        return None

    def _new(self, c: Config, seen: Callable[[Config], bool]) -> bool:
        """Whether ``c`` is neither measured (nor in flight) nor drawn already for compile ahead."""
        return not seen(c) and c not in self.upcoming

    def _covering_draw(self, seen: Callable[[Config], bool]) -> Config | None:
        """The pool's configuration holding the most pairs of values no covering draw held
        (the first drawn of those tied); None when no unmeasured one was drawn."""
        self._pool = [c for c in self._pool if self._new(c, seen)]
        misses = 0  # draws that found no valid configuration (each of up to 256 tries)
        for _ in range(COVERING_POOL - len(self._pool)):
            c = self.space.draw_uniform(self.rng)
            if c is None:
                misses += 1
                if misses == COVERING_MISSES:
                    break
            elif self._new(c, seen) and c not in self._pool:
                self._pool.append(c)
        if not self._pool:  # too sparse for rejection: the balanced draws of _draw instead
            self.covering = 0
            return None
        best = max(self._pool, key=lambda c: len(_pairs(c) - self._pairs))
        self._pool.remove(best)
        self._pairs |= _pairs(best)
        return best

    def next(self, seen: Callable[[Config], bool]) -> Config | None:
        """The next unmeasured configuration, or None when every valid one was measured."""
        while self.upcoming:
            c = self.upcoming.pop(0)
            if not seen(c):
                return c
        return self._draw(seen)

    def neighbour(self, centre: Mapping[str, Value], seen: Callable[[Config], bool]) -> Config | None:
        """An unmeasured valid configuration one parameter away from ``centre``: the nearest
        values in each parameter's list first, in random order among equally near ones."""
        params = self.space.spec.parameters
        for step in range(1, max(len(p.values) for p in params)):
            moves = []
            for p in params:
                i = p.values.index(centre[p.name])
                moves += [(p.name, p.values[j]) for j in (i - step, i + step) if 0 <= j < len(p.values)]
            self.rng.shuffle(moves)
            for name, value in moves:
                c = {**centre, name: value}
                if not seen(c) and self.space.valid(c):
                    return c
        return None

    def neighbours(self, centre: Mapping[str, Value], seen: Callable[[Config], bool]) -> list[Config]:
        """Every unmeasured valid configuration one parameter away from ``centre``."""
        moves = ({**centre, p.name: v} for p in self.space.spec.parameters for v in p.values
                 if v != centre[p.name])
        return [c for c in moves if not seen(c) and self.space.valid(c)]

    def ahead(self, count: int, seen: Callable[[Config], bool]) -> list[Config]:
        """The next ``count`` configurations :meth:`next` will return, drawn now."""
        while len(self.upcoming) < count:
            c = self._draw(seen)
            if c is None:
                break
            self.upcoming.append(c)
        return list(self.upcoming)


def _pairs(c: Mapping[str, Value]) -> set[tuple[str, Value, str, Value]]:
    """Every pair of values of two parameters that ``c`` holds."""
    return {(a, c[a], b, c[b]) for a, b in itertools.combinations(sorted(c), 2)}
