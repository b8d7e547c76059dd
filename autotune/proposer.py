"""What to measure next: valid configurations in order, drawn at random, or near another.

TPE (:mod:`autotune.parzen`) proposes configurations once it has a model; before that (its
start-up trials), and always for the ``random`` and ``grid`` samplers, configurations come from
the valid space here (:class:`~autotune.space.ValidSpace`, walked lazily, never listed), so invalid ones are
never drawn. Random draws are uniform over the valid configurations (by rejection from the
full product; on recorded GEMM spaces this found the optimum sooner than draws balanced per
parameter, which favour the small tiles that few constraints rule out); where valid
configurations are too sparse for rejection, the draw is balanced per parameter.
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


def startup_trials(valid: int, budget: int) -> int:
    """Random start-up trials before TPE models: ~√(valid space), 3 to 5 (on recorded GEMM
    spaces 5 reached the optimum sooner than 10, 10 sooner than 20 and 30; see
    benchmarks/replay_table.py). The baseline, earlier winners, default and hints come first."""
    return max(3, min(int(round(math.sqrt(valid))), 5, max(3, budget // 3)))


#: Random draws that all hit measured configurations before the grid walk takes over.
_REDRAWS = 64


class Proposer:
    """Draws configurations of the valid space that ``seen`` has not measured."""

    def __init__(self, sampler: Sampler, space: ValidSpace, seed: int | None) -> None:
        self.sampler, self.space = sampler, space
        self.rng = random.Random(seed)
        self._grid: Iterator[Config | None] | None = space.paused_walk() if sampler is Sampler.GRID else None
        self.upcoming: list[Config] = []  # drawn early, announced for compile ahead

    def _draw(self, seen: Callable[[Config], bool]) -> Config | None:
        from .space import WalkTimeout  # loaded with the space this proposer draws from

        if self._grid is None:  # random: draws while they find new configurations
            for _ in range(_REDRAWS):
                c = self.space.sample(self.rng)
                if c is None:
                    return None
                if not seen(c) and c not in self.upcoming:
                    return c
            self._grid = self.space.paused_walk()  # nearly all measured: walk to the ones left
        for c in self._grid:
            if c is None:  # the deadline passed: the walk goes on from here when asked again
                raise WalkTimeout
            if not seen(c) and c not in self.upcoming:
                return c
        return None

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
