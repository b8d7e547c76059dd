"""The valid search space: constraint checks, launch geometry, enumeration of configurations.

A configuration is valid when every constraint holds, its local memory fits the device,
and its launch geometry is legal (integers, global divisible by local, work-group within
the device limits). Invalid configurations are never compiled.

Example:
    >>> from autotune import spec as S
    >>> sp = S.load("matmul")
    >>> facts = {"max_work_group_size": 256, "local_mem_size": 49152, "compute_units": 8,
    ...          "max_work_item_sizes": (1024, 1024, 64), "global_mem_size": 2**33, "is_gpu": True}
    >>> configs = enumerate_valid(sp, sp.default_problem(), facts)
    >>> all(check(sp, c, sp.default_problem(), facts) is None for c in configs[:5])
    True
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import AutotuneError, ExpressionError, SpecError
from .expr import Expr
from .spec import KernelSpec, Value

Facts = Mapping[str, Any]


def config_key(params: Mapping[str, Value]) -> str:
    """Canonical string of a configuration (stable across runs; used for de-duplication)."""
    return json.dumps(dict(sorted(params.items())), separators=(",", ":"))


@dataclass(frozen=True)
class StepGeometry:
    """A resolved enqueue: entry point, argument names, NDRange."""

    entry: str
    args: tuple[str, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None


@dataclass(frozen=True)
class Geometry:
    """All enqueues of one configuration and the scratch buffers they need (bytes)."""

    steps: tuple[StepGeometry, ...]
    scratch: tuple[tuple[str, int], ...]


def _as_int(spec: KernelSpec, key: str, e: Expr, env: Mapping[str, Any]) -> int:
    try:
        value = e(env)
    except ExpressionError as exc:
        raise SpecError(f"{spec.path}: {key}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _integral(value):
        raise SpecError(
            f"{spec.path}: {key}: {e.source!r} gave {value!r}, not an integer; "
            "use // for integer division and keep sizes divisible"
        )
    return int(value)


def _integral(value: int | float) -> bool:
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


def geometry(spec: KernelSpec, params: Mapping[str, Value], problem: Mapping[str, Any],
             facts: Facts) -> Geometry:
    """Resolve the launch steps active for ``params`` (their ``when`` holds)."""
    env = spec.env(problem, params, facts)
    steps = []
    for i, step in enumerate(spec.launch):
        if step.when is not None and not step.when(env):
            continue
        where = f"launch[{i}]"
        glob = tuple(_as_int(spec, f"{where}.global", e, env) for e in step.global_size)
        local = (
            tuple(_as_int(spec, f"{where}.local", e, env) for e in step.local_size)
            if step.local_size is not None
            else None
        )
        steps.append(StepGeometry(step.entry, step.args, glob, local))
    if not steps:
        raise SpecError(f"{spec.path}: launch: no step is active for {params}; check the 'when' conditions")
    scratch = tuple((name, _as_int(spec, f"scratch.{name}", e, env)) for name, e in spec.scratch)
    return Geometry(tuple(steps), scratch)


def check_geometry(geo: Geometry, facts: Facts) -> str | None:
    """Why a geometry cannot launch on a device, or None."""
    max_wg = facts.get("max_work_group_size")
    max_items = facts.get("max_work_item_sizes")
    for step in geo.steps:
        if any(g <= 0 for g in step.global_size):
            return f"{step.entry}: global size {step.global_size} must be positive"
        if step.local_size is None:
            continue
        if any(w <= 0 for w in step.local_size):
            return f"{step.entry}: local size {step.local_size} must be positive"
        for g, w in zip(step.global_size, step.local_size, strict=True):
            if g % w:
                return f"{step.entry}: global size {step.global_size} not divisible by local {step.local_size}"
        if max_wg is not None and math.prod(step.local_size) > max_wg:
            return f"{step.entry}: work-group {math.prod(step.local_size)} > device max {max_wg}"
        if max_items is not None:
            for w, m in zip(step.local_size, max_items, strict=False):  # the device may list more
                if w > m:
                    return f"{step.entry}: local size {step.local_size} exceeds device limits {tuple(max_items)}"
    return None


def check(spec: KernelSpec, params: Mapping[str, Value], problem: Mapping[str, Any],
          facts: Facts) -> str | None:
    """Why a configuration is invalid for this problem and device, or None if it is valid.

    An expression that fails for these values (a division by zero, a size that is not an
    integer) makes this configuration invalid, with the file and key in the reason; it does
    not end the run.
    """
    try:
        env = spec.env(problem, params, facts)
        for c in spec.constraints:
            if not _holds(spec, c, env):
                return f"constraint {c.source!r}"
        return _fits_device(spec, env, params, problem, facts)
    except AutotuneError as exc:
        return str(exc)


def _fits_device(spec: KernelSpec, env: Mapping[str, Any], params: Mapping[str, Value],
                 problem: Mapping[str, Any], facts: Facts) -> str | None:
    """Why the configuration's local memory or launch does not fit the device, or None."""
    return _local_memory(spec, env, facts) or check_geometry(geometry(spec, params, problem, facts), facts)


def _holds(spec: KernelSpec, c: Expr, env: Mapping[str, Any]) -> bool:
    try:
        return bool(c(env))
    except ExpressionError as exc:
        raise SpecError(f"{spec.path}: constraints: {exc}") from None


def _local_memory(spec: KernelSpec, env: Mapping[str, Any], facts: Facts) -> str | None:
    if spec.local_memory is None or "local_mem_size" not in facts:
        return None
    try:
        need = spec.local_memory(env)
    except ExpressionError as exc:
        raise SpecError(f"{spec.path}: local_memory: {exc}") from None
    if isinstance(need, bool) or not isinstance(need, (int, float)) or not _integral(need):
        raise SpecError(f"{spec.path}: local_memory: {spec.local_memory.source!r} gave {need!r}, not a number of bytes")
    if need > facts["local_mem_size"]:
        return f"local memory {need} B > device {facts['local_mem_size']} B"
    return None


def enumerate_valid(spec: KernelSpec, problem: Mapping[str, Any], facts: Facts,
                    limit: int = 500_000) -> list[dict[str, Value]]:
    """Every valid configuration (in parameter-value order), up to ``limit``.

    Each constraint is checked as soon as the parameters it names are bound, so large
    products with restrictive constraints are pruned early.
    """
    return list(_iter_valid(spec, problem, facts, limit))


def _iter_valid(spec: KernelSpec, problem: Mapping[str, Any], facts: Facts,
                limit: int) -> Iterator[dict[str, Value]]:
    names = spec.parameter_names
    position = {n: i for i, n in enumerate(names)}

    def depth(e: Expr) -> int:  # the parameter after which an expression can be evaluated
        return max((position[n] for n in spec.behind(e.names) if n in position), default=-1)

    at_depth: list[list[Expr]] = [[] for _ in names]
    for c in spec.constraints:
        at_depth[max(depth(c), 0)].append(c)
    derived_at: list[list[tuple[str, Expr]]] = [[] for _ in names]
    for name, e in spec.derived:
        if depth(e) >= 0:
            derived_at[depth(e)].append((name, e))
    env = spec.env(problem, facts=facts)  # with the derived values of the problem alone
    count = 0

    def walk(level: int) -> Iterator[dict[str, Value]]:
        nonlocal count
        param = spec.parameters[level]
        for value in param.values:
            env[param.name] = value
            try:
                for name, e in derived_at[level]:
                    env[name] = e(env)
                if not all(_holds(spec, c, env) for c in at_depth[level]):
                    continue
            except AutotuneError:  # fails for these values: invalid (check() says why)
                continue
            if level + 1 < len(names):
                yield from walk(level + 1)
            else:
                params = {n: env[n] for n in names}
                try:
                    if _fits_device(spec, env, params, problem, facts):
                        continue
                except AutotuneError:
                    continue
                count += 1
                yield params
            if count >= limit:
                return

    if names:
        yield from walk(0)


def closest_valid(spec: KernelSpec, target: Mapping[str, Value], problem: Mapping[str, Any],
                  facts: Facts, budget: int = 20_000) -> dict[str, Value] | None:
    """The valid configuration most like ``target``: the fewest parameters changed, then the
    values nearest (in each parameter's list) to the target's. None when nothing is valid.

    It tries one changed parameter, then two, and so on; after ``budget`` checks it ranks the
    enumerated valid configurations the same way instead.

    Example: the matmul default (128x128 tiles) at M = N = 100 keeps all but the tile sizes.
    """
    names = spec.parameter_names
    index = [{v: i for i, v in enumerate(p.values)} for p in spec.parameters]
    start = [index[i].get(target[n], 0) if n in target else 0 for i, n in enumerate(names)]

    def cost(config: Mapping[str, Value]) -> tuple[int, int]:
        moves = [abs(index[i][config[n]] - start[i]) for i, n in enumerate(names)]
        return sum(1 for m in moves if m), sum(moves)

    def others(i: int) -> list[Value]:  # the other values, nearest first
        values = spec.parameters[i].values
        return sorted((v for j, v in enumerate(values) if j != start[i]), key=lambda v: abs(index[i][v] - start[i]))

    base = {n: spec.parameters[i].values[start[i]] for i, n in enumerate(names)}
    checks = 0
    for changed in range(len(names) + 1):
        found: list[dict[str, Value]] = []
        for subset in itertools.combinations(range(len(names)), changed):
            for values in itertools.product(*(others(i) for i in subset)):
                config = dict(base, **{names[i]: v for i, v in zip(subset, values, strict=True)})
                checks += 1
                if check(spec, config, problem, facts) is None:
                    found.append(config)
                if checks >= budget:
                    valid = enumerate_valid(spec, problem, facts, limit=budget * 10)
                    return min(found + valid, key=cost, default=None)
        if found:
            return min(found, key=cost)
    return None


def space_size(spec: KernelSpec) -> int:
    """Size of the full Cartesian product of parameter values (before constraints)."""
    return math.prod(len(p.values) for p in spec.parameters)
