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
    [('reverse: work-group 512 > device max 64', 0.315)]
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .space import Facts, canonical, check
from .spec import KernelSpec, Value

#: Configurations drawn from the whole product to tally the reasons by; with one value held.
DRAWS, VALUE_DRAWS = 400, 50
#: Numbers in a reason: taken out to group reasons that differ only in sizes.
_NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")


@dataclass(frozen=True)
class NeverValid:
    """A parameter's value that no valid configuration has, and the commonest reason that
    configurations with it are invalid (None where drawn with it, the parameter never applies)."""

    name: str
    value: Value
    why: str | None


def commonest(spec: KernelSpec, problem: Mapping[str, Any], facts: Facts, most: int = 2, draws: int = DRAWS,
              fixed: Mapping[str, Value] | None = None, seed: int = 0) -> list[tuple[str, float]]:
    """The ``most`` commonest reasons that configurations drawn uniformly from every parameter's
    values (those in ``fixed`` held) are invalid, each as one example and its share of the draws."""
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    for _ in range(draws):
        drawn = {p.name: rng.choice(p.values) for p in spec.parameters} | dict(fixed or {})
        config = canonical(spec, drawn, problem, facts)
        if any(config[n] != v for n, v in (fixed or {}).items()):
            continue  # the parameter does not apply to this draw's variant
        why = check(spec, config, problem, facts)
        if why is not None:
            key = _NUMBER.sub("N", why)
            counts[key] += 1
            example.setdefault(key, why)
    return [(example[key], n / draws) for key, n in counts.most_common(most)]


def never_valid(spec: KernelSpec, problem: Mapping[str, Any], facts: Facts,
                values: tuple[tuple[str, Value], ...]) -> tuple[NeverValid, ...]:
    """``values`` (ValidSpace.never_valid), each with the commonest reason configurations with it
    are invalid."""
    out = []
    for name, value in values:
        why = commonest(spec, problem, facts, most=1, draws=VALUE_DRAWS, fixed={name: value})
        out.append(NeverValid(name, value, why[0][0] if why else None))
    return tuple(out)
