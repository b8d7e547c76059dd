"""The valid search space: constraint checks, launch geometry, enumeration of configurations.

A configuration is valid when every constraint holds, its local memory fits the device,
and its launch geometry is legal (integers, global divisible by local, work-group within
the device limits). Invalid configurations are never compiled.

Example:
    >>> from autotune import spec as S
    >>> sp = S.load("matmul")
    >>> facts = {"max_work_group_size": 256, "local_mem_size": 49152, "compute_units": 8,
    ...          "max_work_item_sizes": (1024, 1024, 64), "global_mem_size": 2**33, "is_gpu": True}
    >>> configs = enumerate_valid(sp, sp.default_problem(), facts, limit=5)
    >>> all(check(sp, c, sp.default_problem(), facts) is None for c in configs)
    True
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from .errors import AutotuneError, ConditionError, ExpressionError, ProblemError, SpecError, warn
from .expr import Expr
from .spec import KernelSpec, LaunchStep, Parameter, Value, problem_label

Facts = Mapping[str, Any]

#: A parameter's value by its level: a step of a path down the tree of bindings (ValidSpace).
Step = tuple[int, Value]


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
    if isinstance(value, bool) or not isinstance(value, int):
        # a float that is whole too (trial 98: `(H + WG - 1) / WG * WG` gave 1027.0 for 1028)
        raise SpecError(
            f"{spec.path}: {key}: {e.source!r} gave {value!r}, not an integer"
            + (_float_fix(spec, e, env) if isinstance(value, float) else "")
        )
    return value


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
    for (name, e), (_, nbytes) in zip(spec.scratch, scratch, strict=True):
        if nbytes < 0:  # a buffer of its size would be made too small: kernels write past it
            raise SpecError(f"{spec.path}: scratch.{name}: {e.source!r} gave {nbytes} "
                            f"bytes for {params}; a size is 0 or more")
    return Geometry(tuple(steps), scratch)


def check_geometry(geo: Geometry, facts: Facts) -> str | None:
    """Why a geometry cannot launch on a device, or None."""
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
        over = _over_work_group_limits(step.local_size, facts)
        if over:
            return f"{step.entry}: {over}"
    most = facts.get("max_mem_alloc_size") or facts.get("global_mem_size")  # 0: unknown
    if most and geo.scratch:
        from .guards import guard_size  # measuring puts a guard zone after each (trial 46)

        for name, nbytes in geo.scratch:
            if nbytes + guard_size(nbytes) > most:  # trial 45: the allocation's error was a traceback
                return f"scratch.{name}: {nbytes} bytes > the device's largest allocation ({most} bytes)"
    return None


def is_launch_reason(reason: str) -> bool:
    """Whether a reason from :func:`check_geometry` faults the launch sizes themselves (a global
    size not a multiple of its local size, not positive, or not an integer), not the device's
    limits."""
    return _LAUNCH_SIZES.search(reason) is not None


_LAUNCH_SIZES = re.compile(r"(global|local) size .* (not divisible|must be positive)|gave \S+, not an integer")


#: A reason that is an expression of the spec's giving no size at all (trial 104: a scratch
#: size's `/` was answered with the launch sizes' rules, local memory's with "choose a problem").
_NOT_A_SIZE = re.compile(r"gave \S+, not (an integer|a number of bytes)")


#: Python's words for arithmetic or a comparison of text with a number (trial 105: answered
#: "choose a problem the spec allows").
_TEXT_AND_NUMBERS = re.compile(r"unsupported operand type\(s\)|not supported between instances of")


#: Python's words for arithmetic that has no value (trial 111: a `when` of `WG / 0` was answered
#: "choose a problem the spec allows").
_NO_VALUE = re.compile(r"division by zero|division or modulo by zero|math domain error|overflow")


def none_valid(spec: KernelSpec, problem: Mapping[str, Any], facts: Facts, device: str) -> ProblemError:
    """The error for a problem that rules out every configuration on ``device``: the default's
    reason, and the fix (``run``, ``bench`` and ``load_kernel`` say the same)."""
    why = check(spec, canonical(spec, spec.default_config, problem, facts), problem, facts)
    return ProblemError(
        f"no configuration of {spec.name} is valid for {problem_label(problem)} on {device} "
        f"(the default's reason: {why}); every configuration is ruled out for this problem: "
        + ("fix that expression in the spec" if why and _NOT_A_SIZE.search(why) else
           "fix that expression in the spec: it has no value here" if why and _NO_VALUE.search(why) else
           "fix that expression in the spec: it computes with text and numbers (a number in quotes among a "
           "parameter's values?)" if why and _TEXT_AND_NUMBERS.search(why) else
           "check the spec's launch sizes (each global size a multiple of its local size, at most the "
           "device's work-group size)" if why and is_launch_reason(why) else
           "the default is over this device's limits whatever the problem: give the spec's parameters "
           "smaller values (work-group sizes, tiles) this device allows, or choose a problem another "
           "configuration fits"
           if why and _of_device(spec, why, problem, facts)
           else "choose a problem the spec allows, or widen its space"))


def _of_device(spec: KernelSpec, reason: str, problem: Mapping[str, Any], facts: Facts) -> bool:
    """Whether a reason from :func:`check` is a limit of the device's that no problem changes:
    its work-group, local-memory or allocation sizes, or a constraint that names one of its
    facts, where what is checked reads no problem key (trial 56: a work-group over the limit
    was answered "choose a problem the spec allows"; trial 58: a local_memory of 4 * N was
    said to fit no problem)."""
    if reason.startswith("constraint "):
        exprs = [c for c, _ in _constraints(spec) if reason == f"constraint {c.source!r}"]
    elif reason.startswith("local memory "):
        exprs = [spec.local_memory] if spec.local_memory is not None else []
    elif reason.startswith("scratch."):
        exprs = [e for n, e in spec.scratch if reason.startswith(f"scratch.{n}:")]
    elif re.search(r"> device max|exceeds device limits", reason):
        exprs = [e for step in spec.launch for e in step.local_size or ()]
    else:
        return False
    reads = spec.behind(n for e in exprs for n in e.names)
    named = bool(reads & facts.keys()) or not reason.startswith("constraint ")
    return bool(exprs) and named and not reads & problem.keys()


def _over_work_group_limits(local: tuple[int, ...], facts: Facts) -> str | None:
    """Why a work-group of ``local`` exceeds the device's limits, or None."""
    max_wg, max_items = facts.get("max_work_group_size"), facts.get("max_work_item_sizes")
    if max_wg is not None and math.prod(local) > max_wg:
        return f"work-group {math.prod(local)} > device max {max_wg}"
    if max_items is not None and any(w > m for w, m in zip(local, max_items, strict=False)):  # it may list more
        return f"local size {local} exceeds device limits {tuple(max_items)}"
    return None


def check(spec: KernelSpec, params: Mapping[str, Value], problem: Mapping[str, Any],
          facts: Facts) -> str | None:
    """Why a configuration is invalid for this problem and device, or None if it is valid.

    An expression that fails for these values (a division by zero, a size that is not an
    integer) makes this configuration invalid, with the file and key in the reason; it does
    not end the run.
    """
    return next(iter(reasons(spec, params, problem, facts, first=True)), None)


def reasons(spec: KernelSpec, params: Mapping[str, Value], problem: Mapping[str, Any], facts: Facts,
            first: bool = False) -> list[str]:
    """Every reason a configuration is invalid (the constraints it fails, in the spec's order,
    then the device's limits it passes), or only the first (:func:`check`); [] if it is valid."""
    try:
        env = spec.env(problem, params, facts)
        out = []
        for c, ignorable in _constraints(spec):
            if not _satisfied(spec, c, ignorable, env):
                out.append(f"constraint {c.source!r}")
                if first:
                    return out
        fits = _fits_device(spec, env, params, problem, facts)
        return out + [fits] if fits is not None else out
    except ConditionError:
        raise
    except AutotuneError as exc:
        return [str(exc)]


def canonical(spec: KernelSpec, params: Mapping[str, Value], problem: Mapping[str, Any],
              facts: Facts) -> dict[str, Value]:
    """``params`` with every parameter whose ``when`` does not hold set to its first value: the
    one copy of the configuration that is measured (the others differ only in values the
    kernel ignores).

    Example: a blocked-variant proposal with the naive variant's parameters left as drawn
    becomes the naive configuration itself.
    """
    ignored = spec.inactive(params, problem, facts)  # a broken condition is left to check()
    return {**params, **{p.name: p.values[0] for p in spec.parameters if p.name in ignored}}


def _fits_device(spec: KernelSpec, env: Mapping[str, Any], params: Mapping[str, Value],
                 problem: Mapping[str, Any], facts: Facts) -> str | None:
    """Why the configuration's local memory or launch does not fit the device, or None."""
    return _local_memory(spec, env, facts) or check_geometry(geometry(spec, params, problem, facts), facts)


def _constraints(spec: KernelSpec) -> Iterator[tuple[Expr, tuple[Parameter, ...]]]:
    """Each constraint with the parameters it names that a ``when`` may make ignored."""
    by_name = {p.name: p for p in spec.parameters}
    names = spec.ignorable or ((),) * len(spec.constraints)
    return ((c, tuple(by_name[n] for n in ignorable)) for c, ignorable in zip(spec.constraints, names, strict=True))


#: A constraint's ignored parameters have at most this many combinations of values to try
#: (see _satisfied); past it, the constraint is taken to hold, with a warning.
MAX_ALTERNATIVES = 100_000
#: _satisfied's verdicts, by what decides them: one search per constraint and values of what it
#: reads besides the ignored parameters, not one per configuration (trial 53: 23 ms a check).
_VERDICTS: dict[tuple[Any, ...], bool] = {}
_TOO_MANY: set[tuple[str, str]] = set()  # (spec, constraint) warned of


def _satisfied(spec: KernelSpec, c: Expr, ignorable: tuple[Parameter, ...], env: Mapping[str, Any]) -> bool:
    """Whether ``c`` holds here, or for some value of the parameters it names that this
    configuration ignores (their ``when`` does not hold). Such a parameter keeps its first
    value, which means nothing: by that value alone a constraint ruled out a whole variant
    (trial 45); one whose value here does not depend on it is as strict as ever (trial 51: a
    derived ``VW if ALGO == 'vec' else 1``)."""
    if _holds(spec, c, env):
        return True
    ignored = [p for p in ignorable if _ignored(spec, p, env)]
    if not ignored:
        return False
    names = {p.name for p in ignored}
    key = (spec.spec_hash, str(spec.path), c.source, tuple(sorted(names)),
           tuple((n, repr(env.get(n))) for n in sorted(spec.behind(c.names) - names)))
    verdict = _VERDICTS.get(key)
    if verdict is None:
        if len(_VERDICTS) > 100_000:  # bounded: a long-lived application tunes many spaces
            _VERDICTS.clear()
        verdict = _VERDICTS[key] = _some_value(spec, c, ignored, env)
    return verdict


def _some_value(spec: KernelSpec, c: Expr, ignored: list[Parameter], env: Mapping[str, Any]) -> bool:
    """Whether ``c`` holds for some values of the ``ignored`` parameters, the rest of ``env``
    as it is."""
    if math.prod(len(p.values) for p in ignored) > MAX_ALTERNATIVES:
        if (str(spec.path), c.source) not in _TOO_MANY:
            _TOO_MANY.add((str(spec.path), c.source))
            warn(f"{spec.path}: {spec.constraint_key(c)}: {c.source!r} names parameters a configuration may ignore "
                 f"({', '.join(p.name for p in ignored)}) with more than {MAX_ALTERNATIVES:,} combinations of "
                 "values to try; where they are ignored, it is taken to hold")
        return True
    needed = spec.derived_read(c.names)
    for values in itertools.product(*(p.values for p in ignored)):
        alt = {**env, **{p.name: v for p, v in zip(ignored, values, strict=True)}}
        try:
            for name, e in spec.derived:
                if name in needed:
                    alt[name] = e(alt)
            if _holds(spec, c, alt):
                return True
        except ConditionError:
            raise
        except (AutotuneError, ArithmeticError, TypeError):  # fails for these values: not these
            continue
    return False


def _ignored(spec: KernelSpec, p: Parameter, env: Mapping[str, Any]) -> bool:
    """Whether the configuration in ``env`` ignores ``p`` (its ``when`` does not hold); a
    condition that cannot be evaluated counts as holding, as in KernelSpec.inactive."""
    assert p.when is not None
    try:
        return not p.when(env)
    except ConditionError as exc:
        raise ConditionError(f"{spec.path}: parameters.{p.name}.when: {exc}") from None
    except (AutotuneError, TypeError):
        return False


def _holds(spec: KernelSpec, c: Expr, env: Mapping[str, Any]) -> bool:
    try:
        return bool(c(env))
    except ConditionError as exc:
        raise ConditionError(f"{spec.path}: {_failed(spec, c, env, exc)}") from None
    except ExpressionError as exc:
        raise SpecError(f"{spec.path}: {_failed(spec, c, env, exc)}") from None


def _failed(spec: KernelSpec, c: Expr, env: Mapping[str, Any], exc: ExpressionError) -> str:
    """Where constraint ``c`` failed and why: a ``when`` by its own key and expression (trial 111:
    "constraints: '(WG / 0) or R == 1'", a constraint the spec does not have)."""
    p = spec.condition_of(c)
    if p is None or p.when is None:
        return f"{spec.constraint_key(c)}: {exc}"
    try:
        p.when(env)
    except ExpressionError as own:
        exc = own
    return f"parameters.{p.name}.when: {exc}"


#: A float written in an expression (``0.5``, ``.5``, ``1e3``), not a part of a name.
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*|\.\d+|\d+[eE][-+]?\d+)")


def _float_fix(spec: KernelSpec, e: Expr, env: Mapping[str, Any]) -> str:
    """The fix for a size that came out a float: its `/` (in it or in a derived value it reads
    that is a float, trial 98: `GY` from `(H + WGY - 1) / WGY * WGY`), else its float terms
    (trials 101, 102: `N * 1.0` was blamed on a `/` it did not have, or one another value had).
    A term that is a float only as it reads such a value is no other float term (trial 104:
    `D1 + 0`, with `D1` from `N / WPT`, was told to keep its other terms integers)."""
    read = spec.derived_read(e.names)
    floats = {name for name, _ in spec.derived if name in read and isinstance(env.get(name), float)}
    exprs = [e, *(d for name, d in spec.derived if name in floats)]
    divides = ["/" in x.source.replace("//", "") for x in exprs]
    if not any(divides):
        return "; a float term makes it a float: keep a size's terms integers"
    # one with a float term of its own too (trial 105: `L + 0.5`, L from `N / 2`, was told only of the /)
    own = [not floats & set(x.names) or _FLOAT_LITERAL.search(x.source) is not None
           for x, d in zip(exprs, divides, strict=True) if not d]
    return ("; / is true division and gives a float: use // for integer division"
            + (", and keep its other terms integers" if any(own) else ""))


def _integral(value: int | float) -> bool:
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


def _local_memory(spec: KernelSpec, env: Mapping[str, Any], facts: Facts) -> str | None:
    if spec.local_memory is None or "local_mem_size" not in facts:
        return None
    try:
        need = spec.local_memory(env)
    except ExpressionError as exc:
        raise SpecError(f"{spec.path}: local_memory: {exc}") from None
    if isinstance(need, bool) or not isinstance(need, (int, float)) or not _integral(need) or need < 0:
        # the `/` named, as for a launch size (trial 104: "choose a problem the spec allows")
        fix = _float_fix(spec, spec.local_memory, env) if isinstance(need, float) and not _integral(need) else ""
        raise SpecError(f"{spec.path}: local_memory: {spec.local_memory.source!r} gave {need!r}, not a number of "
                        f"bytes{fix}")
    if need > facts["local_mem_size"]:
        return f"local memory {need} B > device {facts['local_mem_size']} B"
    return None


def _work_group_fits(step: LaunchStep, facts: Facts, env: Mapping[str, Any]) -> bool:
    """Whether an active step's work-group is within the device's limits (the rest of the
    geometry is checked on the whole configuration)."""
    if step.when is not None and not step.when(env):
        return True
    return _over_work_group_limits(tuple(e(env) for e in step.local_size or ()), facts) is None


def enumerate_valid(spec: KernelSpec, problem: Mapping[str, Any], facts: Facts,
                    limit: int = 500_000, limit_s: float = math.inf) -> list[dict[str, Value]]:
    """The first ``limit`` valid configurations, in parameter-value order (see :class:`ValidSpace`),
    or those the walk found in ``limit_s`` seconds."""
    space, found = ValidSpace(spec, problem, facts), []
    space.deadline = time.perf_counter() + limit_s
    try:
        for c in itertools.islice(space, limit):
            found.append(c)
    except WalkTimeout:
        pass
    return found


class ValidSpace:
    """The valid configurations of one problem on one device, walked lazily, never listed.

    Parameters are bound in declaration order and each constraint is checked as soon as the
    parameters it names are bound, so a subtree that cannot hold a valid configuration is
    never entered. So it can walk them in order (``iter``), draw one at random balanced per
    parameter (:meth:`draw`) and count them, exactly or, when that would take longer than a
    second, by an estimate marked as one (:meth:`count`).

    Example:
        >>> from autotune import spec as S
        >>> sp = S.load("matmul")
        >>> facts = {"max_work_group_size": 256, "local_mem_size": 49152, "compute_units": 8,
        ...          "max_work_item_sizes": (1024, 1024, 64), "global_mem_size": 2**33}
        >>> space = ValidSpace(sp, sp.default_problem(), facts)
        >>> import random; c = space.draw(random.Random(0))
        >>> check(sp, c, sp.default_problem(), facts) is None
        True
    """

    def __init__(self, spec: KernelSpec, problem: Mapping[str, Any], facts: Facts) -> None:
        self.spec, self.problem, self.facts = spec, dict(problem), facts
        self.names = spec.parameter_names
        position = {n: i for i, n in enumerate(self.names)}

        def depth(e: Expr) -> int:  # the parameter after which an expression can be evaluated
            return max((position[n] for n in spec.behind(e.names) if n in position), default=-1)

        self._checks: list[list[tuple[Expr, tuple[Parameter, ...]]]] = [[] for _ in self.names]
        for c, ignorable in _constraints(spec):  # checked once the ignorables' whens can be evaluated too
            level = max(depth(c), *(depth(p.when) for p in ignorable if p.when is not None), 0)
            self._checks[level].append((c, ignorable))
        self._derived: list[list[tuple[str, Expr]]] = [[] for _ in self.names]
        for name, e in spec.derived:
            if depth(e) >= 0:
                self._derived[depth(e)].append((name, e))
        # the device's limits on work-groups and local memory, checked as early as the
        # constraints (a work-group over the limit rules out every configuration below it)
        self._limits: list[list[Callable[[dict[str, Any]], bool]]] = [[] for _ in self.names]
        for step in spec.launch:
            if step.local_size is not None:
                exprs = [*step.local_size, *((step.when,) if step.when else ())]
                self._limits[max(max(depth(e) for e in exprs), 0)].append(partial(_work_group_fits, step, facts))
        if spec.local_memory is not None:
            self._limits[max(depth(spec.local_memory), 0)].append(
                lambda env: _local_memory(spec, env, facts) is None)
        self._env = spec.env(problem, facts=facts)  # with the derived values of the problem alone
        self._dead: set[tuple[Value, ...]] = set()  # prefixes of values with no valid completion
        self._bound_by: object | None = None  # the walk whose values _env holds (see _walk)
        #: When (``time.perf_counter()``) walks and draws give up with WalkTimeout: a run's search
        #: deadline (trial 86: a space sparse after its first valid configuration ran 4x past -t)
        self.deadline = math.inf
        #: After :meth:`count`: the parameters' values no valid configuration has, in the spec's
        #: order (None: not known); after an estimate, those found so by a search of their own
        self.never_valid: tuple[tuple[str, Value], ...] | None = None
        #: After an estimate: values with which no valid configuration was found, by the estimate's
        #: paths nor in :data:`DEAD_S` of a search of their own (trial 123: a variant that the
        #: constraints rule out in a space of 10^8 went unsaid, and its draws found nothing)
        self.none_found: tuple[tuple[str, Value], ...] = ()
        #: After an estimate: its standard error, relative to it (None: exact, or no valid one found)
        self.estimate_error: float | None = None
        self._last: set[Step] = set()  # never_valid and none_found by level: drawn last

    def unvalued(self) -> tuple[tuple[str, Value], ...]:
        """:attr:`never_valid` and :attr:`none_found` in the spec's order, a variant before its
        own parameters' values."""
        found = {*(self.never_valid or ()), *self.none_found}
        return tuple((p.name, v) for p in self.spec.parameters for v in p.values if (p.name, v) in found)

    def _bind(self, level: int, value: Value) -> bool:
        """Bind parameter ``level`` to ``value``: whether the constraints known by now hold."""
        self._bound_by = None  # (a walk marks the values its own: see _walk)
        env = self._env
        env[self.names[level]] = value
        try:
            for name, e in self._derived[level]:
                env[name] = e(env)
            return (all(_satisfied(self.spec, c, ignorable, env) for c, ignorable in self._checks[level])
                    and all(fits(env) for fits in self._limits[level]))
        except (AutotuneError, TypeError):  # fails for these values: invalid (check() says why)
            return False

    def _leaf(self) -> dict[str, Value] | None:
        """The fully bound configuration if it also fits the device."""
        params = {n: self._env[n] for n in self.names}
        try:
            return None if _fits_device(self.spec, self._env, params, self.problem, self.facts) else params
        except AutotuneError:
            return None

    def __iter__(self) -> Iterator[dict[str, Value]]:
        return self._walk(None)

    def paused_walk(self) -> Iterator[dict[str, Value] | None]:
        """The valid configurations in order, with None where :attr:`deadline` passed: the walk
        goes on from there when asked again (a grid's, whose restart walked the same stretch
        again each time a draw for compile ahead was cut short: trial 88)."""
        return self._walk(None, pause=True)

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Where the space has a :attr:`deadline` (a run's --timeout), walks and draws inside
        give up (WalkTimeout, caught here) after ``seconds``, or at that deadline if sooner (that
        one's WalkTimeout is let through). Without one nothing is cut short: a replay gives the
        same result for a seed however busy the machine."""
        deadline = self.deadline
        if math.isinf(deadline):
            yield
            return
        self.deadline = min(deadline, time.perf_counter() + seconds)
        try:
            yield
        except WalkTimeout:
            if time.perf_counter() > deadline:
                raise
        finally:
            self.deadline = deadline

    def _walk(self, deadline: float | None, pause: bool = False,
              only: tuple[int, Value] | None = None) -> Iterator[Any]:
        """The valid configurations in order; :class:`WalkTimeout` (or with ``pause`` a None,
        after which it goes on) once ``deadline`` (a ``time.perf_counter()``; None: :attr:`deadline`
        as it is then) has passed, looked at every 4,096 values bound: in a sparse space (a
        constraint that names every parameter is checked only at the leaves) a walk can go on
        for minutes between two valid configurations (trial 82). ``only``: those with this value
        at this level."""
        binds, mine = 0, object()

        def walk(level: int, prefix: tuple[Value, ...]) -> Iterator[Any]:
            nonlocal binds
            values = (only[1],) if only is not None and only[0] == level else self.spec.parameters[level].values
            for value in values:
                binds += 1
                if _late(binds, self.deadline if deadline is None else deadline):
                    if not pause:
                        raise WalkTimeout
                    yield None
                if self._bound_by is not mine:  # a draw or another walk bound values since it yielded
                    for i, v in enumerate(prefix):
                        self._bind(i, v)
                fits = self._bind(level, value)
                self._bound_by = mine
                if not fits:
                    continue
                if level + 1 < len(self.names):
                    yield from walk(level + 1, (*prefix, value))
                elif (leaf := self._leaf()) is not None:
                    yield leaf

        return walk(0, ()) if self.names else iter(())

    def first(self, limit_s: float = math.inf) -> dict[str, Value] | None:
        """The first valid configuration, or None where there is none; ProblemError where none
        was found in ``limit_s`` seconds (the walk had not finished)."""
        try:
            return next(self._walk(time.perf_counter() + limit_s), None)
        except WalkTimeout:
            raise ProblemError(
                f"{self.spec.name}: no valid configuration found in {limit_s:g} s of walking its "
                f"{space_size(self.spec):,} combinations: its constraints leave few or none, and one that names "
                "the last parameters can rule a configuration out only once all of those are chosen; relax the "
                "constraints, or declare the parameters a constraint names first") from None

    def valid(self, config: Mapping[str, Value]) -> bool:
        return check(self.spec, config, self.problem, self.facts) is None

    def nearest(self, start: Sequence[int], limit_s: float = math.inf,
                known: tuple[tuple[int, int], dict[str, Value]] | None = None) -> dict[str, Value] | None:
        """The valid configuration nearest the one whose values are at ``start`` (an index into
        each parameter's values): the fewest parameters changed, then the smallest sum of the
        moves along the lists; by branch and bound, each parameter's values nearest first, a
        subtree left as soon as its changes so far cost as much as the best found (trial 106:
        matmul's default at 50^3, four parameters off, took 4 s of listing the valid ones).
        After ``limit_s`` the best found so far (None: none yet); ``known``: a valid one and its
        cost (changes, moves), which bounds the search from the start."""
        best: list[Any] = list(known) if known is not None else [(math.inf, math.inf), None]
        deadline, binds = time.perf_counter() + limit_s, 0

        def walk(level: int, changed: int, moved: int) -> None:
            nonlocal binds
            values = self.spec.parameters[level].values
            for i in sorted(range(len(values)), key=lambda i: abs(i - start[level])):
                cost = (changed + (i != start[level]), moved + abs(i - start[level]))
                if cost >= best[0]:
                    break  # the values after it, further from the start, cost more still
                binds += 1
                if _late(binds, deadline):
                    raise WalkTimeout
                if not self._bind(level, values[i]):
                    continue
                if level + 1 < len(self.names):
                    walk(level + 1, *cost)  # (binds only the levels below: this one's values stand)
                elif (leaf := self._leaf()) is not None:
                    best[:] = [cost, leaf]

        self._bound_by = None
        try:
            if self.names:
                walk(0, 0, 0)
        except WalkTimeout:
            pass
        return best[1]

    def draw(self, rng: random.Random) -> dict[str, Value] | None:
        """A random valid configuration, drawn parameter by parameter: each value uniformly
        among those that still have a valid completion, so a variant with few configurations
        (the naive kernel) is drawn as often as one with thousands. None if there is none."""
        binds = 0

        def walk(level: int, prefix: tuple[Value, ...]) -> dict[str, Value] | None:
            nonlocal binds
            values = list(self.spec.parameters[level].values)
            rng.shuffle(values)  # the first value with a completion is uniform among those that have one
            if self._last:  # tried after the others (trial 124: half the draws walked a dead variant's
                values.sort(key=lambda v: (level, v) in self._last)  # 10^7 configurations, to the deadline)
            for value in values:
                binds += 1
                if _late(binds, self.deadline):
                    raise WalkTimeout
                here = (*prefix, value)
                if here in self._dead or not self._bind(level, value):
                    continue
                found = walk(level + 1, here) if level + 1 < len(self.names) else self._leaf()
                if found is not None:
                    return found
                self._dead.add(here)  # searched through: the next draws skip it
            return None

        return walk(0, ()) if self.names else None

    def draw_uniform(self, rng: random.Random, tries: int = 256) -> dict[str, Value] | None:
        """A configuration drawn uniformly from the valid ones (by rejection from the full
        product), or None when ``tries`` draws found none valid (a sparse space)."""
        params = self.spec.parameters
        for _ in range(tries):
            c = {p.name: rng.choice(p.values) for p in params}
            if self.valid(c):
                return c
        return None

    def sample(self, rng: random.Random) -> dict[str, Value] | None:
        """A valid configuration drawn uniformly (:meth:`draw_uniform`), or balanced per
        parameter (:meth:`draw`) where valid ones are too sparse for rejection; None if there
        is none."""
        return self.draw_uniform(rng) or self.draw(rng)

    def count(self, budget_s: float = 0.5, seed: int = 0) -> tuple[int, bool]:
        """(number of valid configurations, whether exact). Counting stops after ``budget_s``
        (the estimate takes half as long again);
        then the number is Knuth's estimate: the mean over random paths down the pruned tree of
        the product of the branching factors (unbiased; each leaf is checked against the device)."""
        deadline = time.perf_counter() + budget_s
        unseen = {(n, v) for n, p in zip(self.names, self.spec.parameters, strict=True) for v in p.values}
        n = 0
        try:
            for c in self._walk(deadline):
                n += 1
                if unseen:  # (most values are seen in the first few configurations)
                    unseen.difference_update(c.items())
        except WalkTimeout:
            estimate, (refused, unreached) = self._estimate(random.Random(seed), deadline + budget_s / 2)
            self._search_unreached(refused, unreached)
            return estimate, False
        self.never_valid = tuple((name, v) for name, p in zip(self.names, self.spec.parameters, strict=True)
                                 for v in p.values if (name, v) in unseen)
        return n, True

    def _estimate(self, rng: random.Random, deadline: float) -> tuple[int, tuple[list[Step], list[Step]]]:
        """Knuth's estimate: the mean weight of random paths, as many as fit before ``deadline``,
        200 at least where they fit in a second more (trial 82: 200 at any cost took 35 s where
        one parameter had 200,000 values, each path binding every one of them), 20,000 at most.
        With it, the (level, value)s worth a search of their own (:meth:`_search_unreached`)."""
        probes, total, squares = 0, 0.0, 0.0
        offered: list[set[Value]] = [set() for _ in self.names]  # the values each level's binding let through
        took: Counter[Step] = Counter()
        failed: list[list[Step]] = []
        while probes == 0 or probes < 20_000 and (
                (now := time.perf_counter()) < deadline or probes < 200 and now < deadline + 1.0):
            probes += 1
            weight, path = 1.0, []
            for level, param in enumerate(self.spec.parameters):
                ok = [v for v in param.values if self._bind(level, v)]
                if not ok:
                    weight = 0.0
                    break
                weight *= len(ok)
                if len(offered[level]) < len(param.values):
                    offered[level].update(ok)
                path.append((level, rng.choice(ok)))
                self._bind(*path[-1])
            took.update(path)
            if weight and self._leaf() is not None:
                total, squares = total + weight, squares + weight * weight
            else:
                failed.append(path)
        mean = total / probes
        # the paths' weights vary as much as the subtrees they pass over differ in size
        self.estimate_error = math.sqrt(max(squares / probes - mean * mean, 0.0) / probes) / mean if mean else None
        return round(mean), _unreached(self.spec, offered, took, failed, probes)

    def _search_unreached(self, refused: list[Step], unreached: list[Step]) -> None:
        """Search the configurations with each value the estimate's paths were refused or did not
        end valid through (:func:`_unreached`), in :data:`DEAD_S` in all: :attr:`never_valid`
        where none is valid, :attr:`none_found` where an unreached one's search ran out of time
        before it found one (a refused one's says nothing: other paths may let it through)."""
        dead: list[Step] = []
        unfound: list[Step] = []
        deadline = time.perf_counter() + DEAD_S
        wanted = {*refused, *unreached}
        steps = [(level, v) for level, p in enumerate(self.spec.parameters) for v in p.values if (level, v) in wanted]
        unreached_set = set(unreached)
        for i, step in enumerate(steps):
            share = (deadline - time.perf_counter()) / (len(steps) - i)
            try:
                if share <= 0:  # (a walk looks at the clock only every 4,096 values it binds)
                    raise WalkTimeout
                found = next(self._walk(time.perf_counter() + share, only=step), None)
            except WalkTimeout:
                if step in unreached_set:
                    unfound.append(step)
                continue
            if found is None:
                dead.append(step)
        self.never_valid = tuple((self.names[level], v) for level, v in dead)
        self.none_found = tuple((self.names[level], v) for level, v in unfound)
        self._last = {*dead, *unfound}

def _unreached(spec: KernelSpec, offered: list[set[Value]], took: Counter[Step], failed: list[list[Step]],
                probes: int) -> tuple[list[Step], list[Step]]:
    """Of an estimate's ``probes`` random paths (``failed`` of them not valid): the values their
    level's constraints refused wherever a path came (not ``offered``: a work-group over the
    device's limit, say), and those no path ended valid through although many should have were
    the value as good as the rest (:data:`EXPECTED`), less those behind another such (a dead
    variant's own parameters)."""
    rate = 1 - len(failed) / probes
    if not rate:  # no path ended valid: nothing tells a refused value from the rest (trial 86's space)
        return [], []
    failures = Counter(step for path in failed for step in path)
    flagged = {step for step, n in took.items() if failures[step] == n and n * rate >= EXPECTED}
    leading = set()  # flagged, and the first flagged value of some path through it
    for path in failed:
        if (first := next((step for step in path if step in flagged), None)) is not None:
            leading.add(first)
    order = [(level, v) for level, p in enumerate(spec.parameters) for v in p.values]
    return [step for step in order if step[1] not in offered[step[0]]], [step for step in order if step in leading]


#: How many valid ends of random paths through a value make none at all a finding.
EXPECTED = 20
#: After an estimated count, the seconds that searching the values its paths were refused or
#: found nothing valid through may take, all of them (ValidSpace._search_unreached).
DEAD_S = 0.25


def _late(binds: int, deadline: float) -> bool:
    """Whether ``deadline`` (a ``time.perf_counter()``) has passed, looked at once every 4,096
    values a walk binds (a clock read at each would cost more than the binding)."""
    return binds % 4096 == 0 and time.perf_counter() > deadline


class WalkTimeout(Exception):
    """A walk of the valid space passed its deadline (:attr:`ValidSpace.deadline`, or one of its
    own): a space too sparse to find a configuration in the time left."""


#: How long closest_valid searches the valid configurations.
CLOSEST_LIMIT_S = 10.0


def closest_valid(spec: KernelSpec, target: Mapping[str, Value], problem: Mapping[str, Any],
                  facts: Facts) -> dict[str, Value] | None:
    """The valid configuration most like ``target``: the fewest parameters changed, then the
    values nearest (in each parameter's list) to the target's. None when nothing is valid.

    A search of the valid space (:meth:`ValidSpace.nearest`), the best found in
    :data:`CLOSEST_LIMIT_S` where it takes longer.

    Example: the matmul default (128x128 tiles) at M = N = 100 keeps all but the tile sizes.
    """
    names = spec.parameter_names
    index = [{v: i for i, v in enumerate(p.values)} for p in spec.parameters]
    start = [index[i].get(target[n], 0) if n in target else 0 for i, n in enumerate(names)]
    # first one or two parameters changed, checked whole: a constraint that only the last
    # parameters settle hides these from the search below until it has walked whole subtrees
    # (trial 107: one change away, it ran 10 s and found none)
    base = {n: spec.parameters[i].values[start[i]] for i, n in enumerate(names)}
    found, checks = None, 0
    for changed in (0, 1, 2):
        for subset in itertools.combinations(range(len(names)), changed):
            for values in itertools.product(*(_others(spec.parameters[i].values, start[i]) for i in subset)):
                config = dict(base, **{names[i]: v for i, v in zip(subset, values, strict=True)})
                checks += 1
                if checks > NEAR_CHECKS:
                    return ValidSpace(spec, problem, facts).nearest(start, CLOSEST_LIMIT_S, found)
                if check(spec, config, problem, facts) is None:
                    cost = _cost(config, names, index, start)
                    found = min(found or (cost, config), (cost, config), key=lambda f: f[0])
        if found is not None:  # none with fewer changes, and every one with these was checked
            return found[1]
    return ValidSpace(spec, problem, facts).nearest(start, CLOSEST_LIMIT_S)


#: Configurations closest_valid checks whole (one or two parameters changed) before its search.
NEAR_CHECKS = 2_000


def _others(values: Sequence[Value], start: int) -> list[Value]:
    """The values other than the one at ``start``, nearest first."""
    return [values[i] for i in sorted(range(len(values)), key=lambda i: abs(i - start)) if i != start]


def _cost(config: Mapping[str, Value], names: Sequence[str], index: Sequence[Mapping[Value, int]],
          start: Sequence[int]) -> tuple[int, int]:
    moves = [abs(index[i][config[n]] - start[i]) for i, n in enumerate(names)]
    return sum(1 for m in moves if m), sum(moves)


def space_size(spec: KernelSpec) -> int:
    """Size of the full Cartesian product of parameter values (before constraints)."""
    return math.prod(len(p.values) for p in spec.parameters)
