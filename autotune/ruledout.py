"""Why a problem rules out configurations: the commonest reasons, and values valid in none.

A run's summary says "valid space 6 of 800"; where that is a small share, or a value of a
parameter (a whole variant) is in no valid configuration, it also says why (trial 89: a global
size that was no integer at most sizes, and a constraint that ruled out one variant, were
found only by reading the spec again).

Example:
    >>> from autotune import spec as S
    >>> sp = S.load("reverse")
    >>> facts = {"max_work_group_size": 64, "local_mem_size": 65536, "max_work_item_sizes": (64, 64, 64)}
    >>> commonest(sp, sp.default_problem(), facts, most=1)   # a tenth of a second
    ([('reverse: work-group 512 > device max 64', 0.315)], 0.8575)
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .space import Facts, ValidSpace, WalkTimeout, canonical, check, reasons
from .spec import KernelSpec, Value

#: Configurations drawn from the whole product to tally the reasons by; with one value held.
DRAWS, VALUE_DRAWS = 400, 50
#: The values never valid that are given a reason: at most so many, in at most so many seconds.
REASONS_MOST, REASONS_S = 12, 0.5
#: Numbers in a reason: taken out to group reasons that differ only in sizes.
_NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")


@dataclass(frozen=True)
class NeverValid:
    """A parameter's value that no valid configuration has (or, ``certain`` False, none found
    to have), and the commonest reason valid configurations are invalid with it (None where it
    applies to none drawn)."""

    name: str
    value: Value
    why: str | None
    #: False: the count was estimated and none was found, in the time a search of its own had
    certain: bool = True
    #: False: past REASONS_MOST or REASONS_S, no reason was looked for
    looked: bool = True


def commonest(spec: KernelSpec, problem: Mapping[str, Any], facts: Facts, most: int = 2, draws: int = DRAWS,
              seed: int = 0) -> tuple[list[tuple[str, float]], float]:
    """The ``most`` commonest reasons that configurations drawn uniformly from every parameter's
    values are invalid, each as one example and its share of the draws, and the share of the
    draws that are invalid at all (trial 94: against the product's size, which counts the copies
    that differ in parameters a variant ignores, the valid share looked far smaller)."""
    rng, tally = random.Random(seed), _Tally()
    for _ in range(draws):
        config = canonical(spec, {p.name: rng.choice(p.values) for p in spec.parameters}, problem, facts)
        if (why := check(spec, config, problem, facts)) is not None:
            tally.add(why)
    return [(why, n / draws) for why, n in tally.commonest(most)], tally.total() / draws


def never_valid(space: ValidSpace, values: tuple[tuple[str, Value], ...], draws: int = VALUE_DRAWS,
                seed: int = 0) -> tuple[NeverValid, ...]:
    """``values`` (ValidSpace.never_valid), each with the reason that valid configurations drawn
    from ``space`` are invalid with it instead: the value's own, not the first of several that
    fail at random (trial 94: `SCALE == 2.0` was given for a work-group over `WG <= 128`), and of
    its own the one that rules out most of them (one that rules out all, where there is one)."""
    spec, problem, facts = space.spec, space.problem, space.facts
    rng = random.Random(seed)
    out: list[NeverValid] = []
    # a recorded space leaves thousands of values unrecorded: reasons for the first few, within
    # a budget (trial 94 suite: 4,900 values of one parameter took minutes a replay)
    deadline = time.perf_counter() + REASONS_S
    for name, value in values:
        certain = (name, value) not in space.none_found
        if len(out) >= REASONS_MOST or time.perf_counter() > deadline:
            out.append(NeverValid(name, value, None, certain, looked=False))
            continue
        tally, ignored = _Tally(), 0
        try:
            for _ in range(draws):
                # uniform where it can be: a balanced draw first walks each variant's subtree,
                # a dead one's to its end (trial 123: 10^8 combinations, the block's second up)
                drawn = space.sample(rng)
                if drawn is None:
                    break
                config = canonical(spec, {**drawn, name: value}, problem, facts)
                if config[name] == value:
                    for why in reasons(spec, config, problem, facts):
                        tally.add(why)
                else:
                    ignored += 1
        except WalkTimeout:  # the caller's time: what was tallied, and the rest unlooked
            deadline = 0.0
        looked = tally.total() > 0 or ignored > 0 or deadline > 0
        out.append(NeverValid(name, value, next((why for why, _ in tally.commonest(1)), None)
                              or _ignored_here(spec, name, ignored), certain, looked))
    return tuple(out)


def _ignored_here(spec: KernelSpec, name: str, ignored: int) -> str | None:
    """The reason for a value that every configuration drawn ignores (its parameter's ``when``
    holds in none: trial 103, a ``when`` that names a problem key, whose values read as invalid)."""
    when = next((p.when for p in spec.parameters if p.name == name), None)
    if not ignored or when is None:
        return None
    return f"{name} applies only where {when.source}, which holds in no configuration here, so it is not tuned"


class _Tally:
    """Reasons counted alike where they differ only in numbers, each kept as its first example."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._example: dict[str, str] = {}

    def add(self, why: str) -> None:
        key = _NUMBER.sub("N", why)
        self._counts[key] += 1
        self._example.setdefault(key, why)

    def commonest(self, most: int) -> list[tuple[str, int]]:
        """The ``most`` commonest reasons, as (example, count)."""
        return [(self._example[key], n) for key, n in self._counts.most_common(most)]

    def total(self) -> int:
        return sum(self._counts.values())
