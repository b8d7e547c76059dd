"""Kernel specs: search-space YAML → frozen dataclasses, validated at the edge.

A spec names an OpenCL template, a host reference module, the problem (sizes and options),
the tunable parameters and build flags, constraints, launch geometry and metrics. Every
message raised here names the file, the key and how to fix it.

Example:
    >>> spec = load("matmul")
    >>> spec.name, "MWG" in spec.parameter_names
    ('matmul', True)
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib
import importlib.util
import itertools
import json
import math
import re
import shlex
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from .errors import AutotuneError, ConditionError, ExpressionError, ProblemError, SpecError, raised_in, warn_once
from .expr import Expr, is_truth
from .resources import data_dir
from .yamlload import AmbiguousBoolean, read_yaml, syntax_error, unquoted

Value = int | float | str | bool
#: KernelSpec.file_id of autotune's own specs, wherever autotune is installed.
BUILTIN_FILE = "builtin"

#: The largest problem size: far past any device's memory, small enough for every expression.
MAX_SIZE = 2**40
#: The longest kernel name: it names files (a report's) and profile keys.
MAX_NAME = 100

#: Names that constraints and launch expressions may use besides parameters and problem keys.
DEVICE_FACTS = (
    "max_work_group_size",
    "local_mem_size",
    "compute_units",
    "max_work_item_sizes",
    "global_mem_size",
    "is_gpu",
)

_TOP_KEYS = {
    "kernel": True,
    "description": False,
    "template": True,
    "reference": True,
    "problem": True,
    "parameters": True,
    "build_flags": False,
    "constraints": False,
    "local_memory": False,
    "scratch": False,
    "args": False,
    "outputs": True,
    "launch": True,
    "metrics": True,
    "tolerance": False,
    "baseline": False,
    "default": False,
    "ceiling": False,
    "inplace": False,
    "hints": False,
    "derived": False,
    "requires": False,
    "arguments": False,
}
#: Keys that do not change what a configuration computes or whether it is valid: editing them
#: keeps tuned entries (the spec hash leaves them out).
_UNHASHED = ("description", "baseline", "default", "hints", "ceiling", "arguments")
CEILINGS = ("copy", "fp32", "sgemm")
_STEP_KEYS = {"entry", "global", "local", "args", "when"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")  # \Z: "N\n" is not a name

#: Words of OpenCL C that a -D macro of the same name would break in every build (trial 30: a
#: parameter `float` failed inside the compiler's own header): keywords, qualifiers, scalar and
#: vector types, and the work-item functions every kernel calls.
OPENCL_WORDS = re.compile(
    r"(?:(?:u?char|u?short|u?int|u?long|float|double|half)(?:2|3|4|8|16)?|bool|void|size_t|ptrdiff_t|"
    r"u?intptr_t|(?:__)?(?:global|local|constant|private|kernel|read_only|write_only|read_write)|"
    r"auto|break|case|const|continue|default|do|else|enum|extern|for|goto|if|inline|register|restrict|"
    r"return|signed|sizeof|static|struct|switch|typedef|union|unsigned|volatile|while|true|false|"
    r"image[123]d_t|image[12]d_array_t|image1d_buffer_t|sampler_t|event_t|barrier|"
    r"get_(?:global|local)_(?:id|size)|get_group_id|get_num_groups|get_work_dim|get_global_offset)\Z")


@dataclass(frozen=True)
class ProblemKey:
    """One problem dimension: an integer size, or a string option with its choices."""

    name: str
    default: int | str
    choices: tuple[str, ...] = ()

    @property
    def is_size(self) -> bool:
        return isinstance(self.default, int)

    @property
    def values(self) -> tuple[int | str, ...]:
        """The values it can take that the spec names: its default, then its other choices."""
        return tuple(dict.fromkeys((self.default, *self.choices)))


@dataclass(frozen=True)
class Parameter:
    """A tunable parameter; build flags are boolean parameters with a ``flag``.

    A parameter with ``when`` applies only where that holds (its variant is chosen); elsewhere
    it keeps its first value, so each configuration has one canonical copy.
    """

    name: str
    values: tuple[Value, ...]
    flag: str | None = None
    when: Expr | None = None


@dataclass(frozen=True)
class LaunchStep:
    """One kernel enqueue: entry point, arguments, and NDRange expressions."""

    entry: str
    args: tuple[str, ...]
    global_size: tuple[Expr, ...]
    local_size: tuple[Expr, ...] | None
    when: Expr | None = None
    #: where its ``args`` are written: ``launch[i].args``, ``launch.args``, or the top-level ``args``
    args_key: str = "args"


def condition_source(p: Parameter) -> str:
    """A ``when`` as the constraint a spec holds it as: where it does not hold, ``p`` has its
    first value only (the one copy of configurations that differ only in what the kernel ignores)."""
    assert p.when is not None
    return f"({p.when.source}) or {p.name} == {p.values[0]!r}"


@dataclass(frozen=True)
class KernelSpec:
    """A validated search space for one kernel template."""

    name: str
    description: str
    path: Path
    template: Path
    reference: str
    problem: tuple[ProblemKey, ...]
    parameters: tuple[Parameter, ...]
    constraints: tuple[Expr, ...]
    local_memory: Expr | None
    scratch: tuple[tuple[str, Expr], ...]
    outputs: tuple[str, ...]
    launch: tuple[LaunchStep, ...]
    metrics: tuple[tuple[str, Expr], ...]
    rtol: Expr
    atol: Expr
    baseline: tuple[tuple[str, Value], ...]
    default: tuple[tuple[str, Value], ...]
    spec_hash: str
    ceiling: str = "fp32"
    inplace: tuple[str, ...] = ()
    hints: tuple[tuple[tuple[str, Value], ...], ...] = ()
    derived: tuple[tuple[str, Expr], ...] = ()  # named expressions, in definition order
    requires: tuple[Expr, ...] = ()  # what every problem must satisfy
    #: by integer argument, the values a call may pass (a condition over it and the problem keys),
    #: where the spec declares them; others are held to what inputs() gives (autotune.arguments)
    arguments: tuple[tuple[str, Expr], ...] = ()
    #: for each constraint, the parameters with a ``when`` that it names (through derived names
    #: too): where a configuration ignores one, any of its values may satisfy the constraint
    #: (see :func:`autotune.space.check`); none for the ``when``s' own conditions
    ignorable: tuple[tuple[str, ...], ...] = ()
    tolerance_given: bool = False  # the spec has a tolerance key (else rtol and atol are defaults)
    #: lints: settings of baseline, default or hints that their configuration's variant ignores
    ignored_settings: tuple[str, ...] = ()

    def env(self, problem: Mapping[str, Any], params: Mapping[str, Value] | None = None,
            facts: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """The variables of the spec's expressions: device facts, problem, parameters, ``extra``
        (e.g. ``seconds``), then every derived value that those determine."""
        env = {**(facts or {}), **problem, **(params or {}), **extra}
        for name, e in self.derived:
            if e.names <= env.keys():
                env[name] = e(env)
        return env

    def computed_with(self) -> set[str]:
        """The parameters and problem keys that the spec's expressions read (derived names
        replaced by what they are computed from)."""
        exprs = [*self.constraints, *self.requires, *(e for _, e in (*self.scratch, *self.metrics, *self.derived)),
                 *([self.local_memory] if self.local_memory is not None else []),
                 *(e for step in self.launch for e in (*step.global_size, *(step.local_size or ()),
                                                       *([step.when] if step.when else [])))]
        return self.behind(n for e in exprs for n in e.names)

    def allows(self, name: str, value: int, problem: Mapping[str, Any]) -> bool:
        """Whether the spec's ``arguments:`` lets a call pass ``value`` for integer argument
        ``name`` at ``problem`` (True where it declares nothing of it); ExpressionError where its
        condition cannot be evaluated there."""
        condition = dict(self.arguments).get(name)
        return condition is None or bool(condition(self.env({**problem, name: value})))

    def constraint_key(self, constraint: Expr) -> str:
        """The spec's key of ``constraint``, numbered as its file lists them (the ``when``s come
        first in :attr:`constraints`; trial 123: some messages said `constraints:` alone)."""
        own = (c for c in self.constraints if self.condition_of(c) is None)
        return next((f"constraints[{i}]" for i, c in enumerate(own) if c is constraint), "constraints")

    def condition_of(self, constraint: Expr) -> Parameter | None:
        """The parameter whose ``when`` ``constraint`` is (see :func:`condition_source`), if any."""
        return next((p for p in self.parameters if p.when is not None and constraint.source == condition_source(p)),
                    None)

    def inactive(self, params: Mapping[str, Value], problem: Mapping[str, Any],
                 facts: Mapping[str, Any] | None = None) -> set[str]:
        """The parameters whose ``when`` does not hold for ``params``: the kernel ignores their
        values. A condition that cannot be evaluated here counts as holding.

        Example: matmul's ``KWG`` (``when: ALGO == 'tiled'``) for a configuration of another ALGO.
        """
        out: set[str] = set()
        try:
            env = self.env(problem, params, facts)
        except (AutotuneError, ArithmeticError, TypeError):  # a derived value fails for these values
            return out
        for p in self.parameters:
            try:
                if p.when is not None and not p.when(env):
                    out.add(p.name)
            except ConditionError as exc:  # not true or false: the spec's fault, said (trial 45)
                raise ConditionError(f"{self.path}: parameters.{p.name}.when: {exc}") from None
            except (AutotuneError, TypeError):
                continue
        return out

    def active(self, params: Mapping[str, Value], problem: Mapping[str, Any]) -> dict[str, Value]:
        """``params`` less those the configuration ignores (:meth:`inactive`): a configuration as
        progress lines, summaries and the report show it."""
        ignored = self.inactive(params, problem)
        return {k: v for k, v in params.items() if k not in ignored}

    @property
    def variant_parameters(self) -> frozenset[str]:
        """The parameters that choose a variant: those a ``when`` of a parameter or launch step
        reads (through derived names too), and those whose values are names (``ALGO: [naive,
        tiled]``)."""
        whens = [p.when for p in self.parameters] + [step.when for step in self.launch]
        read = self.behind(n for w in whens if w is not None for n in w.names)
        named = {p.name for p in self.parameters if all(isinstance(v, str) for v in p.values)}
        return frozenset((read | named) & {p.name for p in self.parameters})

    def call_args(self, problem: Mapping[str, Any]) -> tuple[str, ...]:
        """The arguments a caller of the loaded kernel supplies, in order of first use over every
        launch step, whichever steps a configuration runs, so that the call is the same for
        every configuration (trial 50: a histogram's tuned variant swapped its two arguments):
        every kernel argument but scratch buffers and integer problem keys, which the kernel is
        given when it is loaded.

        Example: matmul's ``('A', 'B', 'C')``.
        """
        names: list[str] = []
        for step in self.launch:
            names.extend(a for a in step.args if a not in names and not (
                any(a == n for n, _ in self.scratch) or isinstance(problem.get(a), int)))
        return tuple(names)

    def behind(self, names: Iterable[str]) -> set[str]:
        """``names`` with every derived name replaced by the names it is computed from."""
        return _behind(self.derived, names)

    def derived_read(self, names: Iterable[str]) -> set[str]:
        """The derived names among ``names``, and those they are computed from, transitively."""
        return _walk(self.derived, names)[1]

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def baseline_config(self) -> dict[str, Value]:
        """The baseline variant, a full configuration (the speed-up is measured against it)."""
        return dict(self.baseline)

    @property
    def default_config(self) -> dict[str, Value]:
        """What the loader uses when nothing is tuned, a full configuration."""
        return dict(self.default)

    @property
    def hint_configs(self) -> list[dict[str, Value]]:
        """The expert starting points, full configurations."""
        return [dict(h) for h in self.hints]

    def baseline_overrides(self) -> dict[str, Value]:
        """The baseline's parameters as the summary shows them: those not at their first value,
        and those that choose a variant (named in a ``when``), which say what the baseline is."""
        first = {p.name: p.values[0] for p in self.parameters}
        selectors = {n for p in self.parameters if p.when is not None for n in p.when.names}
        return {k: v for k, v in self.baseline if v != first[k] or k in selectors}

    def throughput(self, problem: Mapping[str, Any], median_ms: float) -> dict[str, float]:
        """The spec's metrics for a run of ``median_ms`` on ``problem`` (headline first)."""
        env = self.env(problem, seconds=median_ms * 1e-3)
        return {name: float(e(env)) for name, e in self.metrics}

    def without_flags(self, params: Mapping[str, Value]) -> dict[str, Value]:
        """``params`` less the build-flag switches (those go to :meth:`enabled_flags`)."""
        flags = {p.name for p in self.parameters if p.flag is not None}
        return {k: v for k, v in params.items() if k not in flags}

    def default_problem(self) -> dict[str, int | str]:
        return {k.name: k.default for k in self.problem}

    def resolve_problem(self, overrides: Mapping[str, Any] | None = None) -> dict[str, int | str]:
        """The default problem with ``overrides`` applied; ProblemError names a bad key or value."""
        problem = self.default_problem()
        keys = {k.name: k for k in self.problem}
        for name, value in (overrides or {}).items():
            key = keys.get(name)
            if key is None:
                raise ProblemError(f"{self.name} has no problem key {name!r}; its keys: {', '.join(keys)}")
            if key.is_size:
                # text in decimal digits alone, as --size's bare form takes it (trial 105: `N=1_024`
                # was taken, and `N=0x10000` told only "must be a positive integer")
                text = isinstance(value, str)
                try:
                    size = 0 if isinstance(value, bool) or text and not re.fullmatch(r"\s*\+?[0-9]+\s*", value) \
                        else int(value)  # True is not a size
                except (TypeError, ValueError, OverflowError):  # past Python's 4,300 digits too (trial 82)
                    size = MAX_SIZE + 1 if str(value).strip().removeprefix("+").isdigit() else 0
                if not 0 < size <= MAX_SIZE or (isinstance(value, float) and value != size):
                    shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
                    # the bound only where it is what is wrong: a kernel's own `requires` may be
                    # tighter (matmul: < 2**31; trial 33)
                    hexadecimal = text and re.fullmatch(r"\s*0[xX][0-9a-fA-F]+\s*", value)
                    want = "at most 2**40" if size > MAX_SIZE else \
                        f"a positive integer in decimal ({int(value, 16)})" if hexadecimal else "a positive integer"
                    raise ProblemError(f"{name}={shown}: {self.name}'s {name} must be {want}")
                problem[name] = size
            elif str(value) in key.choices:
                problem[name] = str(value)
            else:
                raise ProblemError(f"{name}={value!r}: choose one of {', '.join(key.choices)}")
        env = self.env(problem)
        for rule in self.requires:
            if not rule(env):
                shown = ", ".join(f"{k}={problem[k]}" for k in sorted(rule.names & problem.keys()))
                raise ProblemError(f"{self.name} needs {rule.source} ({shown})")
        return problem

    def complete(self, partial: Mapping[str, Value]) -> dict[str, Value]:
        """A full configuration: ``partial`` plus the first value of every parameter it omits."""
        return {p.name: partial.get(p.name, p.values[0]) for p in self.parameters}

    def from_stored(self, params: Mapping[str, Value], build_flags: Iterable[str],
                    whole: bool = False) -> dict[str, Value] | None:
        """The full configuration a profile entry stored (parameters plus enabled flags).

        None when a stored parameter or value is no longer in this spec's space, e.g. an entry
        tuned with an older version of the spec. A parameter the entry omits takes its first
        value (an older version's winner as a start for the search), unless ``whole``: an entry
        to be used as it is must name every parameter its configuration uses (one edited by
        hand, filled in, would be a configuration nobody measured); it may leave out those whose
        ``when`` does not hold, which have their first value.
        """
        if not set(params) <= {p.name for p in self.parameters}:
            return None  # a parameter this spec does not have: the entry means something else
        enabled = set(build_flags)
        if not enabled <= {p.flag for p in self.parameters}:
            return None  # a flag the spec does not tune would be dropped silently (trial 33)
        if any(p.flag is not None and p.name in params for p in self.parameters):
            return None  # a flag's on/off is build_flags' to say: written here it was ignored (trial 40)
        full = self.complete(params)
        for p in self.parameters:
            if p.flag is not None:
                full[p.name] = p.flag in enabled
            elif not _among(full[p.name], p.values):
                return None
        if whole and self._unnamed(params, full):
            return None
        # a value its variant ignores is the configuration with the first (space.canonical); kept
        # as stored, the entry read as "not valid here" (trial 36)
        return _first_where_unused(self.parameters, full)

    def _outside(self, params: Mapping[str, Value], build_flags: Iterable[str] = ()) -> str:
        """What puts stored ``params`` and ``build_flags`` outside the space: a parameter or a
        flag it lacks, or a value."""
        known = {p.name: p for p in self.parameters}
        if extra := [n for n in params if n not in known]:
            return f"the spec has no parameter {extra[0]}"
        flags = [p.flag for p in self.parameters if p.flag is not None]
        if extra := [f for f in build_flags if f not in flags]:
            return f"{extra[0]} is not one of the spec's build flags ({', '.join(flags) or 'it has none'})"
        if flag := next((known[n] for n in params if known[n].flag is not None), None):
            return (f"{flag.name} is a build flag, on when build_flags lists {flag.flag}: "
                    f"remove {flag.name} from params")
        for name, value in params.items():
            p = known[name]
            if p.flag is None and not _among(value, p.values):
                # 'true' for a boolean too (trial 72: only a quoted number was told so)
                meant = next((v for v in p.values if isinstance(value, str) and not isinstance(v, str)
                              and value.lower() == str(v).lower()), None)
                if meant is not None:
                    shown = str(meant).lower() if isinstance(meant, bool) else meant
                    return f"{name}: {value!r} is text, not the value {shown} (remove its quotes in the YAML)"
                if why := _other_type(value, p.values):
                    return f"{name}: {why}"
                return f"{name}: {value!r} is not one of {', '.join(map(repr, p.values))}"
        return "a stored value is not in the space"

    def _unnamed(self, params: Mapping[str, Value], full: Mapping[str, Value]) -> list[str]:
        """The parameters ``full`` uses that the stored ``params`` leave out."""
        return [p.name for p in self.parameters if p.flag is None and p.name not in params and not _unused(p, full)]

    @property
    def builtin(self) -> bool:
        """Whether this is one of autotune's own specs (run and loaded by name)."""
        return self.path.resolve().parent == data_dir("search_spaces").resolve()

    @property
    def argument(self) -> str:
        """How a command names this spec: the built-in name, or the file's path (quoted for a
        shell). Example: ``autotune run {spec.argument}``."""
        return self.name if self.builtin else shlex.quote(str(self.path))

    @property
    def file_id(self) -> str:
        """Which spec file this is, to tell two specs of one kernel name apart: BUILTIN_FILE or
        the file's absolute path."""
        return BUILTIN_FILE if self.builtin else str(self.path.resolve())

    def namesake(self, spec_file: str | None) -> str | None:
        """Another spec of this kernel's name that a record (a profile entry's or a trial's
        ``spec_file``) names, where it is still there: "autotune's own NAME spec" or its path;
        None for this spec's own file, an unrecorded one, or one moved or renamed since."""
        if not spec_file or spec_file == self.file_id:
            return None
        if spec_file == BUILTIN_FILE:
            return f"autotune's own {self.name} spec"
        return spec_file if Path(spec_file).is_file() else None

    def stores(self, entry: Any) -> bool:
        """Whether a profile entry (:class:`autotune.profiles.Entry`) holds a configuration of
        this spec: its version, and parameters and values of its space."""
        return self.unusable(entry) is None

    def first_use_of(self, entry: Any) -> str:
        """What ``load_kernel`` does with an entry it cannot use as it is (:meth:`unusable`), for
        ``show`` and ``report`` (trial 89: a stale entry was said to be skipped, where first use
        times its configuration again and may pick it)."""
        # (a first-use pick of another version is not timed again: trial 94)
        return "load_kernel times its configuration again at first use, and may pick it" \
            if entry.spec_hash != self.spec_hash and not entry.picked else "load_kernel skips it"

    def unusable(self, entry: Any) -> str | None:
        """Why ``load_kernel`` cannot use a profile entry as it is, or None when it can.

        Example:
            >>> from types import SimpleNamespace as Entry
            >>> sp = load("reverse")
            >>> params = {k: v for k, v in sp.default_config.items() if k != "USE_RESTRICT"}
            >>> entry = Entry(spec_hash=sp.spec_hash, problem=sp.default_problem(), params=params, build_flags=())
            >>> sp.unusable(entry)
            'it does not name USE_RESTRICT, which its configuration uses'
        """
        if entry.spec_hash != self.spec_hash:
            return "stale: tuned with another version of this spec, or another spec of this name"
        try:  # load_kernel looks entries up by the problem as the spec resolves it
            resolved = self.resolve_problem(entry.problem)
        except ProblemError as exc:
            return f"its problem is not one of this spec's ({exc})"
        if resolved != dict(entry.problem):
            return (f"its problem is written {dict(entry.problem)}, which no lookup matches: "
                    f"load_kernel looks up {resolved}")
        full = self.from_stored(entry.params, entry.build_flags)
        if full is None:
            return f"its configuration is not in the spec's space ({self._outside(entry.params, entry.build_flags)})"
        missing = self._unnamed(entry.params, full)
        return f"it does not name {', '.join(missing)}, which its configuration uses" if missing else None

    def build_options(self, params: Mapping[str, Value], problem: Mapping[str, Any]) -> list[str]:
        """Compiler options for a configuration: ``-D`` macros, then the enabled build flags."""
        options = [f"-D{name}={value}" for name, value in self.macros(problem, params).items()]
        options.extend(p.flag for p in self.parameters if p.flag is not None and params[p.name])
        return options

    def macros(self, problem: Mapping[str, Any],
               params: Mapping[str, Value] | None = None) -> dict[str, Value]:
        """Names defined with ``-D`` for the problem (and a configuration), with their values."""
        out: dict[str, Value] = {}
        for name, value in list(problem.items()) + [
                (p.name, (params or {}).get(p.name, p.values[0])) for p in self.parameters if p.flag is None]:
            out.update(_macros(name, value))
        return out

    def enabled_flags(self, params: Mapping[str, Value]) -> list[str]:
        return [p.flag for p in self.parameters if p.flag is not None and params.get(p.name)]

    @cached_property
    def source(self) -> str:
        """The template with its ``#include "..."`` files inlined (:func:`expand_includes`)."""
        return expand_includes(self.template)

    def host_module(self) -> ModuleType:
        """Import the reference module (``inputs``, ``reference``, optional ``check``)."""
        return _import_reference(self.reference, self.path)


def lint(spec: KernelSpec) -> list[str]:
    """Warnings about parameters the template cannot see: it never mentions their macros.

    Example: ``ORDER: [contiguous, strided]`` defines ``ORDER``, ``ORDER_CONTIGUOUS`` and
    ``ORDER_STRIDED``; a template that tests ``ORDER_contiguous`` gets neither branch it meant.
    """
    # a name given only a default (#ifndef WPT / #define WPT 1) is not used (trial 42: a typo in
    # `#if USE_LOCL` left USE_LOCAL mentioned by its default alone, and no warning)
    stripped, defaulted = _DEFAULT_LINES.sub(" ", spec.source), set(_DEFAULT_LINES.findall(spec.source))
    words = set(re.findall(r"[A-Za-z_]\w*", stripped))
    # a near miss is a name the template uses, not a pragma's own word (`#pragma unroll`) or a
    # string's (trial 80: `_Pragma("unroll")` was named for UNROLL where `#if UNROL` was the typo)
    used = re.findall(r"[A-Za-z_]\w*", _STRINGS.sub(" ", _PRAGMA.sub(" ", stripped)))
    upper = {w.upper(): w for w in used}
    geometry = [e for step in spec.launch for e in (*step.global_size, *(step.local_size or ()),
                                                     *((step.when,) if step.when else ()))]
    geometry += [e for _, e in spec.scratch]
    shaped = {n for e in geometry for n in e.names}  # parameters that shape the launch count too
    # a typo is no other parameter's or problem key's macro, nor a derived name (trial 84:
    # BLOCK_SIZE_Y, used rightly, was named for BLOCK_SIZE_X where block_size_x was the slip)
    others = set(used) - set(_macro_owners(spec)) - {d for d, _ in spec.derived}
    out = []
    for p in spec.parameters:
        if p.flag is not None or p.name in shaped:
            continue
        names = [p.name, *(k for v in p.values for k in _macros(p.name, v) if k != p.name)]
        if any(n in words for n in names):
            continue
        near = [f"{close[0]} (the macro is {n})" for n in names if (close := _near(n, others))] or [
            f"{upper[n.upper()]} (the macro is {n})" for n in names if n.upper() in upper]
        hint = f"; it mentions {', '.join(near)}" if near else ""
        seen = "only gives it a default (#ifndef) and never uses" if p.name in defaulted else "never mentions"
        out.append(f"{spec.path}: parameters.{p.name} has no effect: {spec.template.name} {seen} "
                   f"{' or '.join(names)}{hint}")
    bound = {a for step in spec.launch for a in step.args}
    out += [f"{spec.path}: scratch.{name} is in no launch step's args: it is made and never given to a kernel"
            for name, _ in spec.scratch if name not in bound]  # trial 45: taken silently
    never = _never_applies(spec)
    ignored = [w for w in spec.ignored_settings if not any(f".{name} has no effect: " in w for name in never)]
    return (out + list(never.values()) + ignored + _misnamed_defaults(spec, words) + _overridden(spec)
            + _tested_for_definition(spec) + _unsized(spec) + _stepless(spec) + _failing(spec) + _quoted(spec))


def _quoted(spec: KernelSpec) -> list[str]:
    """Warnings for a parameter whose values are all numbers in quotes, which the spec's
    expressions read as text (trial 105: `WG: ["16", "32"]` failed every constraint `% WG`, with
    Python's words, and was told to choose another problem)."""
    return [f"{spec.path}: parameters.{p.name}: its values {list(p.values)!r} are numbers in quotes, which the "
            f"spec's expressions read as text ('16' is not 16, and {p.name} * 2 is '1616'); write them without quotes, "
            "unless they only name variants" for p in spec.parameters
            if p.values and all(isinstance(v, str) and _is_numeral(v) for v in p.values)]


def _never_applies(spec: KernelSpec, most: int = 2_000) -> dict[str, str]:
    """Warnings, by parameter, for a ``when`` that holds for no configuration: one that needs a
    parameter another variant's ``when`` switches off, which has its first value there (trial 80:
    ``ALGO == 'local' and VW > 2``, where VW applies only to ALGO vec, was never tuned, and the
    default's warning advised setting VW). Over at most ``most`` combinations; a condition that
    names a problem key is taken to hold somewhere."""
    by_name = {p.name: p for p in spec.parameters}
    out = {}
    for p in spec.parameters:
        if p.when is None or not p.when.names <= by_name.keys():
            continue
        named, todo = set(), set(p.when.names)
        while todo:  # the parameters it names, and those that say where they apply
            named |= todo
            todo = {n for m in todo if m in by_name and (w := by_name[m].when) is not None for n in w.names} - named
        # (trial 84: a chain that reached a problem key was a KeyError in every command)
        if not named <= by_name.keys() or (combinations := _combinations(spec, named, most)) is None:
            continue
        chain = [by_name[n] for n in sorted(named)]
        if all(_unused(p, _first_where_unused(chain, {q.name: c.get(q.name, q.values[0]) for q in chain}))
               for c in combinations):
            off = [f"{n} applies only where {w.source}" for n in sorted(p.when.names)
                   if (w := by_name[n].when) is not None]
            why = (f" ({'; '.join(off)}, and has its first value elsewhere), so {p.name} is never tuned; name only "
                   "parameters that apply where it should") if off else \
                f" (none of the values it names satisfies it), so {p.name} is never tuned; correct the condition"
            out[p.name] = f"{spec.path}: parameters.{p.name}.when {p.when.source!r} holds for no configuration{why}"
    return out


def _tested_for_definition(spec: KernelSpec) -> list[str]:
    """Warnings for ``#ifdef NAME`` (or an ``#if defined(NAME)``) of a parameter or problem key:
    autotune defines every one (a boolean as 0 or 1), so the test always holds
    (trial 80: `#ifdef CACHE_FILT` took the branch for false too, every such configuration wrong)."""
    values = {p.name: p.values for p in spec.parameters if p.flag is None}
    values |= {k.name: k.values for k in spec.problem}
    source = C_COMMENTS.sub(" ", spec.source)
    tested = dict.fromkeys(n for n in _DEFINED_TEST.findall(source) if n in values)
    return [f"{spec.path}: {spec.template.name} tests whether {name} is defined (#ifdef {name}, or defined({name})), "
            f"which it always is: autotune passes -D{name}=value for every configuration (0 or 1 for a boolean); "
            f"test its value instead ({_value_test(name, values[name])})" for name in tested]


def _value_test(name: str, values: tuple[Any, ...]) -> str:
    """How a template tests a value of ``name``: ``#if NAME``, or for a word such as ``vec`` its
    own macro, ``#if NAME_VEC`` (trial 84: `#if ALGO` is 0 whatever the word)."""
    own = [m for v in values for m in _macros(name, v) if m != name]
    return f"#if {own[0]}" if own else f"#if {name}"


def _misnamed_defaults(spec: KernelSpec, words: set[str]) -> list[str]:
    """Warnings for a template default (``#ifndef WPT``) of a macro autotune never defines that
    is a near miss of a parameter the template never mentions (``WPTS``): the default then
    applies to every configuration, and the parameter only shapes the launch."""
    defined = set(_macro_owners(spec))
    silent = [p.name for p in spec.parameters if p.flag is None and p.name not in words]
    out = []
    derived = {n for n, _ in spec.derived}
    for name in dict.fromkeys(m[0] or m[1] for m in _DEFAULTED.findall(spec.source)):
        if name in derived and name not in defined and not _computed(spec, name):  # trial 45: the default stood
            out.append(f"{spec.path}: {spec.template.name} gives {name} a default (#ifndef {name}), and {name} is a "
                       "derived value of the spec, which is not passed to the compiler (only problem keys and "
                       "parameters are): every configuration gets the default; compute it in the template instead")
            continue
        near = difflib.get_close_matches(name, silent, n=1, cutoff=0.75) if name not in defined else []
        if near:
            out.append(f"{spec.path}: {spec.template.name} gives {name} a default (#ifndef {name}), but no "
                       f"parameter or problem key is named {name}, and parameters.{near[0]} is never mentioned "
                       f"there: if they are one, use one name (every configuration gets the default now)")
    return out


def _macro_owners(spec: KernelSpec) -> dict[str, str]:
    """Each macro a value of a parameter (flags' too) or a problem key defines, and whose it is."""
    owners = {n: p.name for p in spec.parameters for v in p.values for n in _macros(p.name, v)}
    owners |= {n: k.name for k in spec.problem for v in k.values for n in _macros(k.name, v)}
    return owners


def _overridden(spec: KernelSpec) -> list[str]:
    """Warnings for a macro autotune passes (a parameter's, a problem key's) that the template
    defines with no guard (no ``#if``/``#ifndef`` before the ``#define`` that names it): the template's
    value replaces the one given (trial 63: a Kernel Tuner port's ``#define use_local 0`` ran the
    same code for both of use_local's values, and the run saved one of them as the winner)."""
    flags = {p.name for p in spec.parameters if p.flag is not None}
    given = {n: owner for n, owner in _macro_owners(spec).items() if owner not in flags}
    out = []
    source = C_COMMENTS.sub(lambda m: "\n" * m[0].count("\n"), spec.source)  # trial 65: one in a comment
    for define in _DEFINE.finditer(source):
        name = define.group(1)
        # a default: #ifndef NAME, or !defined(NAME) in an #if (matmul.cl's: of several names);
        # not any #if naming it (trial 65: `#if WG > 1024 ... #error` before `#define WG 16`)
        guard = re.compile(rf"^[ \t]*#[ \t]*(?:ifndef[ \t]+{name}\b|(?:el)?if\b.*!\s*defined\s*\(?\s*{name}\b)",
                           re.M)
        if name in given and not guard.search(source, 0, define.start()):
            what = f"parameters.{given[name]}" if any(p.name == given[name] for p in spec.parameters) \
                else f"problem key {given[name]}"
            out.append(f"{spec.path}: {spec.template.name} defines {name} (#define {name}) with no #ifndef "
                       f"{name} before it, so its value replaces the one autotune gives for {what}: every "
                       f"configuration gets the template's; guard it (#ifndef {name} ... #endif) or delete it")
    return out


def _unsized(spec: KernelSpec) -> list[str]:
    """Warnings for a launch step with no ``local:`` in a spec with Kernel Tuner's work-group
    parameters (``block_size_x``...): Kernel Tuner launches blocks of that size, OpenCL without
    ``local`` one of the runtime's choosing (trial 63: every configuration wrong or crashed,
    and nothing said why)."""
    blocks = [p.name for p in spec.parameters if p.name in ("block_size_x", "block_size_y", "block_size_z")]
    # a step with a local: the spec knows; a tail step's may be left to the runtime (trial 65)
    if not blocks or any(step.local_size is not None for step in spec.launch):
        return []
    return [f"{spec.path}: launch{'' if len(spec.launch) == 1 else f'[{i}]'} has no local: the work-group size is "
            f"the OpenCL runtime's choice, not {', '.join(blocks)} (which Kernel Tuner launches as the block); "
            f"give local: [{', '.join(blocks)}]"
            for i, step in enumerate(spec.launch) if step.local_size is None]


def _computed(spec: KernelSpec, name: str) -> bool:
    """Whether the template's ``#define name ...`` computes it from parameters or problem keys
    (``#define CHUNK (WPT * WG)``: as the spec's derived value does, trial 46), not a constant."""
    body = re.search(rf"#[ \t]*define[ \t]+{re.escape(name)}\b(.*)", spec.source)
    used = set(re.findall(r"[A-Za-z_]\w*", body.group(1))) if body else set()
    return bool(used & ({p.name for p in spec.parameters} | {k.name for k in spec.problem}))


def _stepless(spec: KernelSpec, most: int = 10_000) -> list[str]:
    """Warnings where the launch steps' ``when`` conditions leave some values of the parameters
    they name with no step to launch (a variant added to the values and given no step: its
    configurations are never valid), or where a step's ``when`` holds for none (the step never
    runs). Over at most ``most`` combinations of those parameters; a condition that names a
    problem key or a device fact is taken to hold."""
    # a condition on the problem (a tail step for sizes not a multiple) may hold at other sizes
    whens = [s.when if s.when is not None and spec.behind(s.when.names) <= set(spec.parameter_names) else None
             for s in spec.launch]
    combinations = _combinations(spec, spec.behind(n for w in whens if w is not None for n in w.names), most)
    if not any(whens) or combinations is None:
        return []
    problem = spec.default_problem()
    none: list[dict[str, Value]] = []
    ran = [w is None for w in whens]
    for chosen in combinations:
        try:
            env = spec.env(problem, spec.complete(chosen))
            holds = [w is None or bool(w(env)) for w in whens]
        except (AutotuneError, TypeError):
            return []
        ran = [a or b for a, b in zip(ran, holds, strict=True)]
        if not any(holds):
            none.append(chosen)
    out = [f"{spec.path}: launch[{i}] ({step.entry}): its when {step.when.source!r} holds for no configuration, "
           "so it never runs; widen the condition or drop the step"
           for i, (step, r) in enumerate(zip(spec.launch, ran, strict=True)) if not r and step.when]
    if none and len(none) < len(combinations):  # else: said of each step above
        where = ", ".join(f"{k}={v}" for k, v in none[0].items())
        names = ", ".join(none[0])
        more = f" (and {len(none) - 1} more combinations of {names})" if len(none) > 1 else ""
        out.append(f"{spec.path}: launch: no step applies where {where}{more}, so those configurations never run; "
                   "give a step a 'when' that holds there, or drop the value")
    return out


def _failing(spec: KernelSpec, most: int = 10_000) -> list[str]:
    """Warnings for a derived value that cannot be computed for some parameter values at the
    default problem (``TS // WPT`` with a WPT of 0): those configurations are invalid, which a
    run counts but does not explain. Over at most ``most`` combinations of the parameters
    behind the derived values; one computed from a device fact is not judged."""
    problem = spec.default_problem()
    judged = [(n, e) for n, e in spec.derived if spec.behind(e.names) <= {*spec.parameter_names, *problem}]
    combinations = _combinations(spec, spec.behind(n for _, e in judged for n in e.names), most)
    if combinations is None or combinations == [{}]:  # too many, or none depends on a parameter
        return []
    failed: dict[str, tuple[dict[str, Value], str, int]] = {}  # derived name: first example, why, count
    for chosen in combinations:
        env = {**problem, **spec.complete(chosen)}
        for name, e in judged:
            try:
                env[name] = e(env)
            except ExpressionError as exc:
                example, why, count = failed.get(name, (chosen, str(exc), 0))
                failed[name] = (example, why, count + 1)
                break
    return [f"{spec.path}: derived.{name} cannot be computed where {', '.join(f'{k}={v}' for k, v in example.items())}"
            f" ({why})" + (f" and in {count - 1} more combination{'s' * (count > 2)}" if count > 1 else "")
            + "; those configurations are invalid, and a run counts them without saying why: leave such values "
              "out, or guard the expression (with max(X, 1), or A if C else B)"
            for name, (example, why, count) in failed.items()]


def _not_a_flag(spec: KernelSpec, name: str, most: int = 2_000) -> tuple[dict[str, Value], Any] | None:
    """A combination of the parameters derived ``name`` reads, at the default problem, where it
    gives neither true or false nor 0 or 1, and what it gives there; None where there is none
    (or too many combinations to try, or it reads a device fact)."""
    combinations = _combinations(spec, spec.behind([name]), most) or []
    for combination in combinations:
        try:
            value = spec.env(spec.default_problem(), {**spec.default_config, **combination}).get(name)
        except (AutotuneError, ArithmeticError, TypeError, ValueError):
            continue
        if value is not None and not is_truth(value, name):  # as the condition will judge it
            return combination, value
    return None


def _combinations(spec: KernelSpec, names: Iterable[str], most: int) -> list[dict[str, Value]] | None:
    """Each combination of values of the parameters among ``names`` (lint judges a condition or
    an expression over them; the others stay at their first values; none named: one, empty);
    None where there are more than ``most``."""
    named = set(names)
    params = [p for p in spec.parameters if p.name in named]
    if math.prod(len(p.values) for p in params) > most:
        return None
    return [dict(zip((p.name for p in params), values, strict=True))
            for values in itertools.product(*(p.values for p in params))]


_PRAGMA = re.compile(r"#\s*pragma\s+\w+")
_STRINGS = re.compile(r'"(?:[^"\\\n]|\\.)*"')
#: ``#ifdef NAME``, or an ``#if``/``#elif`` whose whole condition is ``defined(NAME)``.
_DEFINED_TEST = re.compile(r"^[ \t]*#[ \t]*(?:ifdef[ \t]+|(?:el)?if[ \t]+defined[ \t]*\(?[ \t]*)(\w+)[ \t)]*$",
                           re.M)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)
#: OpenCL C comments, for the readers of a template's text (here and in signatures).
C_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEFAULTED = re.compile(r"#\s*ifndef\s+(\w+)|#\s*if\s+!\s*defined\s*\(?\s*(\w+)")
#: The lines of a template default: ``#ifndef WPT``, then ``#define WPT ...``.
_DEFAULT_LINES = re.compile(r"^[ \t]*#[ \t]*(?:ifndef|if[ \t]+!?[ \t]*defined)[ \t(]*(\w+).*\n"
                            r"[ \t]*#[ \t]*define[ \t]+\1\b", re.M)


def _near(name: str, words: set[str]) -> list[str]:
    """The one word of ``words`` that looks most like ``name``, if any is close (a typo)."""
    return difflib.get_close_matches(name, sorted(words), n=1, cutoff=0.85)


#: A number with an exponent that YAML 1.1 reads as text (``1e3``, ``2E-4``, ``1.5e3``: its floats
#: need a dot and a signed exponent), and Python as a number.
_EXPONENT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def _yaml_float(value: float) -> str:
    """``value`` written as YAML 1.1 reads a float: a dot, and a sign on the exponent (trial 115:
    "write it as 1e-06", which it reads as text again).

    >>> _yaml_float(1000.0), _yaml_float(1e-06), _yaml_float(2.5e20)
    ('1000.0', '1.0e-06', '2.5e+20')
    """
    mantissa, e, exponent = repr(value).partition("e")
    if not e:
        return mantissa
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent if exponent[0] in '+-' else '+' + exponent}"


def _is_numeral(text: str) -> bool:
    """Whether ``text`` is a number in quotes: unquoted, YAML would read it as a number (``"32"``,
    ``"0x4"``). ``1e-3`` unquoted is text to YAML 1.1 itself, and reaches the compiler as written
    (trial 109: refused as a quoted number, where it worked before)."""
    try:
        value = unquoted(text)
    except ValueError:  # an integer past Python's 4,300 digits: a number all the same
        return True
    # (an int of 400 digits is no float: isfinite would overflow)
    return isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and math.isfinite(value)


def _macros(name: str, value: Any) -> dict[str, Value]:
    """``NAME=value``; booleans as 0/1; an identifier string also as ``NAME_VALUE=1``, upper-cased."""
    if isinstance(value, bool):
        return {name: int(value)}
    if isinstance(value, str) and _IDENT.match(value):
        return {name: value, f"{name.upper()}_{value.upper()}": 1}
    return {name: value}


# --------------------------------------------------------------------------- loading


def problem_label(problem: Mapping[str, Any]) -> str:
    """A problem as ``--size`` takes it: ``M=64,N=64,K=64,layout=row``."""
    return ",".join(f"{k}={v}" for k, v in problem.items())


def config_label(params: Mapping[str, Any]) -> str:
    """A configuration as summaries and warnings show it: ``WPT=4 WG=64``."""
    return " ".join(f"{k}={v}" for k, v in params.items())


def parse_problem_label(label: str) -> dict[str, Any]:
    """A :func:`problem_label` back into a problem (sizes as integers).

    Example:
        >>> parse_problem_label("M=64,N=32,layout=row")
        {'M': 64, 'N': 32, 'layout': 'row'}
    """
    pairs = (part.partition("=") for part in label.split(",") if part)
    return {k: int(v) if v.isdigit() else v for k, _, v in pairs}


def builtin_names() -> list[str]:
    """Names of the kernels shipped in ``search_spaces/``."""
    return sorted(p.stem for p in data_dir("search_spaces").glob("*.yaml"))


def resolve(name_or_path: str) -> Path:
    """The YAML file for a built-in kernel name or a path ending in ``.yaml``/``.yml``."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        path = Path(name_or_path).expanduser()
        try:
            if path.is_dir():
                raise SpecError(f"{path} is a folder; give the spec's YAML file inside it")
        except (OSError, ValueError):
            pass  # a name the system cannot look up: it is no file either
        if not _is_file(path):
            what = "is not a regular file" if _exists(path) else "does not exist"  # /dev/null (trial 33)
            raise SpecError(f"spec file {str(path)[:200]!r} {what}; check the path")
        return path.resolve()
    path = data_dir("search_spaces") / f"{name_or_path}.yaml"
    if not _is_file(path):
        known = builtin_names()
        hint = difflib.get_close_matches(name_or_path, known, n=1)
        suggestion = f"did you mean {hint[0]!r}? " if hint else ""
        here = Path(name_or_path)
        if name_or_path and _exists(here):  # trial 71: a folder or file of this name was an unknown kernel
            what = "a folder" if here.is_dir() else "a file without .yaml or .yml"
            raise SpecError(f"unknown kernel {name_or_path!r}; {suggestion}./{name_or_path} is {what}: a spec is "
                            f"named by its path ending in .yaml (or .yml), or by a built-in's name: {', '.join(known)}")
        raise SpecError(
            f"unknown kernel {name_or_path!r}; {suggestion}known kernels: {', '.join(known)} "
            "(or give the path of your own spec YAML; `autotune list` shows them)"
        )
    return path


def load(name_or_path: str | Path) -> KernelSpec:
    """Load and validate a spec by built-in name or path."""
    path = resolve(str(name_or_path))
    try:
        raw = read_yaml(path, SpecError, plain_booleans=True)
    except yaml.YAMLError as exc:
        where, problem = syntax_error(exc, path)
        if isinstance(exc, AmbiguousBoolean):
            raise SpecError(f"{where}: {problem}") from None
        raise SpecError(f"{where}: invalid YAML ({problem}); fix the syntax there") from None
    spec = parse(raw, path)
    builtin = data_dir("search_spaces") / f"{spec.name}.yaml"
    if _is_file(builtin) and builtin.resolve() != path.resolve():  # once per file and process: a run loads
        warn_once(_named_like_builtin, path,  # its spec more than once
                  f"{path}: kernel {spec.name!r} is the name of a built-in kernel, so the two share profile "
                  f"entries (a run of one replaces the other's entry for its problem) and load_kernel({spec.name!r}) "
                  "loads the built-in; give yours a name of its own under `kernel:`")
    return spec


_named_like_builtin: set[Path] = set()


def parse(raw: Any, path: Path) -> KernelSpec:
    """Validate the YAML document ``raw`` read from ``path``."""
    return _Validator(path).spec(raw)


class _Validator:
    """Validation with messages that name the file and key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: every name the spec declares, with what it is, for the hint beside an unknown one
        self.declared: dict[str, str] = {}
        self.values: dict[str, tuple[Value, ...]] = {}  # each parameter's and string problem key's, once read
        self.problem_keys: tuple[str, ...] = ()  # once read, for the hint beside a Kernel Tuner name
        self.ignored: list[str] = []  # settings of baseline, default or hints their variant ignores (lint)

    def unknown_hint(self, name: str, known: set[str]) -> str:
        """Why ``name`` is not known where it was used, and the fix: declared further down, of
        the configuration where only the problem may be used, or a near miss."""
        what = self.declared.get(name)
        if what == "later":
            return f"{name} is derived further down: derived values are read in order, so move it above"
        if what == "itself":
            return f"{name} is the value being defined"
        if what == "own condition":
            return (f"{name} is the parameter this condition is for: a when says where {name} applies, so it names "
                    "only other parameters and problem keys")
        if what is not None:
            return (f"{name} is {what}, and this key may use only the problem's keys and derived values "
                    "of the problem alone")
        if name in _KERNEL_TUNER_NAMES and self.problem_keys:  # trial 63: "did you mean global_mem_size?"
            return _KERNEL_TUNER_NAMES[name].format(keys=", ".join(self.problem_keys))
        if owners := [p for p, values in self.values.items() if name in values and p in known]:
            return f"{name} is a value of {owners[0]}: quote it, as in {owners[0]} == '{name}'"
        close = difflib.get_close_matches(name, sorted(known), n=1)
        return f"did you mean {close[0]}?" if close else ""

    def fail(self, key: str, message: str) -> SpecError:
        # one line, whatever the YAML's keys and values hold
        return SpecError(f"{self.path}: {key}: {message}".replace("\n", "\\n").replace("\r", "\\r"))

    def expr(self, key: str, source: Any, known: set[str]) -> Expr:
        try:
            e = Expr.parse(source)
            e.check_names(known, f"{self.path}: {key}", lambda name: self.unknown_hint(name, known))
        except ExpressionError as exc:  # fail() puts the file and key first, on one line
            raise self.fail(key, str(exc).removeprefix(f"{self.path}: {key}: ")) from None
        # wherever a parameter is compared with a string (trial 80: a constraint's `ALGO != 'locl'`
        # always held, a derived value's `ALGO == 'vector'` never did, and nothing said so)
        self.possible(key, e)
        return e

    def mapping(self, key: str, raw: Any, allow_empty: bool = False) -> dict[str, Any]:
        if raw is None and allow_empty:
            return {}
        if isinstance(raw, dict) and not raw and not allow_empty:  # trial 30: "expected a mapping, got {}"
            raise self.fail(key, "is empty: give at least one name: value entry")
        if not isinstance(raw, dict):
            raise self.fail(key, f"expected a mapping of name: value, got {raw!r}")
        odd = [k for k in raw if not isinstance(k, str)]
        if odd:
            raise self.fail(key, f"{odd[0]!r} is not a name: keys must be text (quote them in YAML)")
        return raw

    def check_keys(self, where: str, raw: Mapping[str, Any], allowed: Any) -> None:
        for key in raw:
            if key not in allowed:
                ours = _KERNEL_TUNER.get(str(key))
                hint = difflib.get_close_matches(str(key), list(allowed), n=1)
                fix = (f"Kernel Tuner's {key} is {ours[1]} here" if ours and ours[0] in allowed else
                       f"did you mean {hint[0]!r}?" if hint else f"allowed: {', '.join(allowed)}")
                raise self.fail(where + str(key), f"unknown key; {fix}")

    def spec(self, raw: Any) -> KernelSpec:
        if not isinstance(raw, dict):
            raise SpecError(f"{self.path}: expected a YAML mapping with keys "
                            f"{', '.join(k for k, req in _TOP_KEYS.items() if req)}")
        self.check_keys("", raw, _TOP_KEYS)
        for key, required in _TOP_KEYS.items():
            if required and key not in raw:
                raise self.fail(key, "missing required key (see the spec format in README.md)")
        if not isinstance(raw["kernel"], str):  # trial 103: `kernel:` empty was tuned as None, `true` as True
            raise self.fail("kernel", f"{raw['kernel']!r} is no name: give the kernel's name, an identifier "
                                      "(letters, digits, _), as `kernel: my_kernel`")
        name = raw["kernel"]
        if len(name) > MAX_NAME:  # trial 82: 5,000 characters were saved, and `report` could not name its file
            raise self.fail("kernel", f"a name of {len(name)} characters: give one of at most {MAX_NAME}")
        if not _IDENT.match(name):
            raise self.fail("kernel", f"{name!r} must be an identifier (letters, digits, _)")
        template = self.template(raw["template"])
        problem = self.problem(raw["problem"])
        # a string key's choices, for the check of quoted values (trial 84: `layout == 'rwo'` passed)
        self.values = {k.name: k.values for k in problem if not k.is_size}
        qnames = {k.name for k in problem}
        self.problem_keys = tuple(k.name for k in problem)
        parameters = self.parameters(raw["parameters"], raw.get("build_flags"), qnames)
        derived = self.derived(raw.get("derived"), {p.name for p in parameters} | qnames | set(DEVICE_FACTS))
        known = {p.name for p in parameters} | qnames | set(DEVICE_FACTS) | {n for n, _ in derived}
        self.declared = {**{p.name: "a parameter" for p in parameters}, **{f: "a device fact" for f in DEVICE_FACTS},
                         **{n: "a derived value of the configuration" for n, _ in derived}}
        # derived values of the problem alone may appear in metrics, tolerances and requirements
        of_problem = qnames | {n for n, e in derived if _behind(derived, e.names) <= qnames}
        outputs = tuple(str(o) for o in self.sequence("outputs", raw["outputs"]))
        if not outputs:  # nothing would be compared with the reference (trial 36: "error 0")
            raise self.fail("outputs", "is empty, so no configuration would be verified; list the arguments "
                                       "the kernel writes, each compared with what reference() returns for it")
        if bad := [o for o in outputs if not _IDENT.match(o) or outputs.count(o) > 1]:  # trial 40: [y, y], [""]
            raise self.fail("outputs", f"{bad[0]!r} is not an argument name, or is listed twice; list each output "
                                       "once, by the name args gives it")
        metrics = tuple((str(k), self.expr(f"metrics.{k}", v, of_problem | {"seconds"}))
                        for k, v in self.mapping("metrics", raw["metrics"]).items())
        rtol, atol = self.tolerance(raw.get("tolerance"), of_problem)
        source = self.source(template)
        conditions = self.conditions(parameters)
        constraints = tuple(e.as_condition() for e in self.exprs("constraints", raw.get("constraints"), known))
        spec = KernelSpec(
            name=name, description=str(raw.get("description", "")).strip(), path=self.path,
            template=template, reference=self.reference(raw["reference"]), problem=problem,
            parameters=parameters,
            constraints=conditions + constraints,
            ignorable=((),) * len(conditions) + tuple(_ignorable(c, parameters, derived) for c in constraints),
            local_memory=(self.expr("local_memory", raw["local_memory"], known)
                          if raw.get("local_memory") is not None else None),
            scratch=tuple((str(k), self.expr(f"scratch.{k}", v, known)) for k, v in
                          self.mapping("scratch", raw.get("scratch"), allow_empty=True).items()),
            outputs=outputs,
            launch=self.launch(raw["launch"], name, tuple(str(a) for a in self.sequence("args", raw.get("args") or [])),
                               known, parameters),
            metrics=metrics, rtol=rtol, atol=atol,
            baseline=self.config("baseline", raw.get("baseline"), parameters),
            default=self.config("default", raw.get("default"), parameters),
            spec_hash="",  # below, once every key is known to be a name
            ceiling=self.ceiling(raw.get("ceiling"), metrics),
            inplace=self.inplace(raw.get("inplace"), outputs),
            hints=tuple(self.config(f"hints[{i}]", h, parameters)
                        for i, h in enumerate(self.sequence("hints", raw.get("hints") or []))),
            derived=derived,
            requires=self.exprs("requires", raw.get("requires"), of_problem),
            arguments=self.arguments(raw.get("arguments"), of_problem),
            tolerance_given=bool(raw.get("tolerance")),
        )
        self.exponents_as_text(spec)
        self.flags_of_0_or_1(spec)
        written = {a for step in spec.launch for a in step.args}
        self.arguments_checked(spec, written)
        if unused := [o for o in outputs if o not in written]:
            typo = difflib.get_close_matches(unused[0], sorted(written - set(outputs)), n=1)
            if typo:  # args: [x, outt]: the output is there, misspelt
                raise self.fail("outputs", f"{unused[0]} is not an argument of any launch step, but their args "
                                           f"have {typo[0]!r}: if that is {unused[0]}, spell it so in args")
            raise self.fail("outputs", f"{', '.join(unused)} is not an argument of any launch step, so "
                                       "no kernel can write it; add it to the 'args' of the kernel that "
                                       "writes it, in the kernel's order (or, if no kernel writes it, take "
                                       "it out of 'outputs')")
        return self.checked(replace(spec, spec_hash=_spec_hash(source + "\0" + _reference_text(spec.reference), raw),
                                    ignored_settings=tuple(self.ignored)))

    def exponents_as_text(self, spec: KernelSpec) -> None:
        """SpecError for a parameter whose whole numbers sit beside ``1e3``, which YAML 1.1 reads as
        text, where an expression computes with it (trial 111: [1, 1e3] ran, and 4 * R gave
        '1e31e31e31e3'). One the template alone reads takes it as written, a float literal (trial
        112: `EPS: [0, 1e-6]`, refused where it worked; trial 109)."""
        computed = spec.computed_with()
        for p in spec.parameters:
            texts = [v for v in p.values if isinstance(v, str) and _EXPONENT_TEXT.match(v)]
            numbers = [v for v in p.values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if p.name in computed and texts and numbers:  # (trial 114: beside floats too)
                value = float(texts[0])
                fix = (f"write the whole number ({int(value)})" if all(isinstance(v, int) for v in numbers)
                       and value.is_integer() and abs(value) < 1e18 else
                       f"write it as {_yaml_float(value)}" if any(isinstance(v, float) for v in numbers) else
                       "write them all as floats with a dot and a signed exponent (1.0, 1.0e-3)")
                raise self.fail(f"parameters.{p.name}", f"values {list(p.values)!r} mix numbers with {texts[0]}, "
                                f"which YAML reads as text, and the spec's expressions compute with {p.name}; {fix}")

    def flags_of_0_or_1(self, spec: KernelSpec) -> None:
        """SpecError for a parameter a condition takes as true or false by itself (`F or P == 1`)
        whose values are not all 0 and 1: it was refused at F=2 only, mid-run (trial 114)."""
        values = {p.name: p.values for p in spec.parameters}
        conditions = [*((spec.constraint_key(c), c) for c in spec.constraints if spec.condition_of(c) is None),
                      *((f"parameters.{p.name}.when", p.when) for p in spec.parameters if p.when is not None),
                      *((f"launch.{s.entry}.when", s.when) for s in spec.launch if s.when is not None)]
        for where, c in conditions:
            for name in sorted(c.flags & values.keys()):
                if not all(v in (0, 1) for v in values[name]):
                    raise self.fail(where, f"{c.source!r} takes {name} as true or false by itself, but its values "
                                    f"{list(values[name])!r} are not all 0 and 1 (false and true); compare it, as "
                                    f"{name} != 0 for {name} alone and {name} == 0 for not {name}")  # (trial 119)
            for name in sorted(c.flags & {n for n, _ in spec.derived}):  # (trial 115: `D: G`, G in [1, 2])
                if (gives := _not_a_flag(spec, name)) is not None:
                    raise self.fail(where, f"{c.source!r} takes the derived {name} as true or false by itself, but "
                                    f"it gives {gives[1]!r} where {config_label(gives[0])}; compare it")

    def checked(self, spec: KernelSpec) -> KernelSpec:
        """Evaluate what depends on the problem alone on the default problem, so a metric or a
        tolerance that cannot be computed (``N / 0``, a string) fails here, not after a run."""
        problem = spec.default_problem()
        env = spec.env(problem, seconds=1e-3)
        for i, rule in enumerate(spec.requires):
            if not self.value(f"requires[{i}]", rule, env):
                raise self.fail(f"requires[{i}]", f"{rule.source!r} does not hold for the default problem")
        for key, e in [*((f"metrics.{k}", e) for k, e in spec.metrics),
                       ("tolerance.rtol", spec.rtol), ("tolerance.atol", spec.atol)]:
            value = self.value(key, e, env)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value) or value < 0:
                raise self.fail(key, f"{e.source!r} gives {value!r} for the default problem; it must be a "
                                     "finite number, 0 or more")
        return spec

    def value(self, key: str, e: Expr, env: Mapping[str, Any]) -> Any:
        try:
            return e(env)
        except ExpressionError as exc:
            raise self.fail(key, f"{exc} (on the default problem)") from None

    def arguments(self, raw: Any, of_problem: set[str]) -> tuple[tuple[str, Expr], ...]:
        """``arguments:``: by integer argument of the kernels, the condition its values must meet
        in a call (over it and the problem keys), e.g. ``reps: "1 <= reps <= 1000"``."""
        out = []
        for name, source in self.mapping("arguments", raw, allow_empty=True).items():
            if not _IDENT.match(str(name)) or name in of_problem:
                raise self.fail(f"arguments.{name}", "must be the name of a kernel argument that inputs() gives as "
                                                     "an integer (not a problem key: those are fixed at load)")
            try:
                read = Expr.parse(source).names
            except ExpressionError:
                read = frozenset()  # said by self.expr below
            others = sorted(read - of_problem - {str(name)})
            if others and str(name) not in read:  # (trial 119: "did you mean iter?" of iters)
                raise self.fail(f"arguments.{name}", f"{source!r} reads {others[0]}, not {name}: a condition over the "
                                f"argument it is the key of; if the argument is {others[0]}, name the key so")
            out.append((str(name), self.expr(f"arguments.{name}", source, of_problem | {str(name)}).as_condition()))
        return tuple(out)

    def arguments_checked(self, spec: KernelSpec, written: set[str]) -> None:
        """SpecError where ``arguments:`` names no integer argument of the kernels (``written``:
        the launch steps' arguments; not a scratch buffer, nor a typo), or gives no true or false
        at the default problem (trial 118: `reps + 1`, and a scratch buffer, were found at a
        call, or never)."""
        for name, _ in spec.arguments:
            if name in dict(spec.scratch):
                raise self.fail(f"arguments.{name}", "is a scratch buffer, not an integer argument; arguments: "
                                                     "declares the values a call may pass for the kernels' integers")
            if name not in written:
                typo = difflib.get_close_matches(name, sorted(written), n=1)
                raise self.fail(f"arguments.{name}", "is not an argument of any launch step"
                                + (f" (did you mean {typo[0]}?)" if typo else "") + "; arguments: declares the values "
                                "a call may pass for the kernels' integer arguments")
            for probe in (1, 0):
                try:
                    spec.allows(name, probe, spec.default_problem())
                except ConditionError as exc:
                    raise self.fail(f"arguments.{name}", str(exc)) from None
                except ExpressionError:  # (`N // reps` at 0)
                    continue

    def exprs(self, key: str, raw: Any, known: set[str]) -> tuple[Expr, ...]:
        return tuple(self.expr(f"{key}[{i}]", c, known) for i, c in enumerate(self.sequence(key, raw or [])))

    def tolerance(self, raw: Any, known: set[str]) -> tuple[Expr, Expr]:
        tol = self.mapping("tolerance", raw, allow_empty=True)
        self.check_keys("tolerance.", tol, ["rtol", "atol"])
        return (self.expr("tolerance.rtol", tol.get("rtol", 1e-5), known),
                self.expr("tolerance.atol", tol.get("atol", 1e-6), known))

    def ceiling(self, raw: Any, metrics: tuple[tuple[str, Expr], ...]) -> str:
        first_metric = metrics[0][0] if metrics else ""
        ceiling = str(raw if raw is not None else ("copy" if "B/s" in first_metric else "fp32"))
        if ceiling not in CEILINGS:
            raise self.fail("ceiling", f"{ceiling!r}: choose one of {', '.join(CEILINGS)}")
        return ceiling

    def inplace(self, raw: Any, outputs: tuple[str, ...]) -> tuple[str, ...]:
        inplace = tuple(str(o) for o in self.sequence("inplace", raw or []))
        if stray := sorted(set(inplace) - set(outputs)):
            typo = difflib.get_close_matches(stray[0], outputs, n=1)
            hint = f" (did you mean {typo[0]}?)" if typo else ""
            raise self.fail("inplace", f"{', '.join(stray)} is not one of the outputs ({', '.join(outputs)}){hint}: "
                                       "inplace names the outputs the kernels also read, so list it in outputs too "
                                       "or leave it out of inplace")
        return inplace

    def conditions(self, parameters: tuple[Parameter, ...]) -> tuple[Expr, ...]:
        """Each ``when`` as a constraint: where it does not hold, the first value only."""
        return tuple(Expr.parse(condition_source(p)) for p in parameters if p.when is not None)

    def derived(self, raw: Any, known: set[str]) -> tuple[tuple[str, Expr], ...]:
        out: list[tuple[str, Expr]] = []
        items = self.mapping("derived", raw, allow_empty=True)
        self.declared = {str(n): "later" for n in items}
        for name, source in items.items():
            # seconds: the measured time in metrics, which a derived value would replace there
            if not _IDENT.match(str(name)) or name in known or name == "seconds":
                raise self.fail(f"derived.{name}", "must be an identifier that is not a parameter, "
                                                   "problem key, device fact, earlier derived name or 'seconds'")
            self.declared[str(name)] = "itself"
            out.append((str(name), self.expr(f"derived.{name}", source, known)))
            del self.declared[str(name)]
            known = known | {str(name)}
        return tuple(out)

    def sequence(self, key: str, raw: Any) -> list[Any]:
        if not isinstance(raw, list):
            raise self.fail(key, f"expected a list, got {raw!r}")
        return raw

    def source(self, template: Path) -> str:
        try:
            return expand_includes(template)
        except SpecError as exc:
            raise self.fail("template", str(exc)) from None

    def template(self, raw: Any) -> Path:
        for base in (self.path.parent, data_dir("kernel_templates")):
            candidate = base / str(raw)
            if _is_file(candidate):
                return candidate.resolve()
        if _exists(beside := self.path.parent / str(raw)):  # trial 71: a folder was "not found"
            raise self.fail("template", f"{beside} is {_not_a_file(beside)}; give the template's file")
        raise self.fail(
            "template",
            f"template file {raw!r} not found next to the spec or in kernel_templates/; "
            "give a path relative to the YAML file",
        )

    def reference(self, raw: Any) -> str:
        ref = str(raw)
        if ref.endswith(".py"):
            path = self.path.parent / ref
            if not _is_file(path) and _exists(path):
                raise self.fail("reference", f"{path} is {_not_a_file(path)}; give the reference module's file")
            if not _is_file(path):
                raise self.fail(
                    "reference", f"reference module {ref!r} not found (looked for {path})"
                )
            return str(path.resolve())
        if not _IDENT.match(ref):
            raise self.fail("reference", "give a .py file next to the spec, or a built-in name")
        return ref

    def free_name(self, where: str, name: str, macro: bool = True) -> None:
        """SpecError where ``name`` (that of a parameter, problem key or, not ``macro``, a build
        flag) is taken: by a device fact, which constraints would then no longer see (trial 30:
        a parameter local_mem_size stood in for the device's), or by OpenCL C."""
        if name in DEVICE_FACTS:
            raise self.fail(where, f"{name} is the name of a device fact, which constraints and launch "
                            "expressions read; under this name they would read this value instead: rename it")
        if macro and OPENCL_WORDS.match(name):
            raise self.fail(where, f"{name} is a word of OpenCL C, and autotune passes this name to the compiler "
                            f"as a macro (-D{name}=…), which would break every build: rename it")

    def problem(self, raw: Any) -> tuple[ProblemKey, ...]:
        keys = []
        for name, value in self.mapping("problem", raw).items():
            where = f"problem.{name}"
            if not _IDENT.match(str(name)):
                raise self.fail(where, "problem keys must be identifiers")
            self.free_name(where, str(name))
            if isinstance(value, dict):
                self.check_keys(where + ".", value, ["default", "choices"])
                choices = tuple(str(c) for c in self.sequence(where + ".choices", value.get("choices")))
                default = str(value.get("default", choices[0] if choices else ""))
                if not choices or default not in choices:
                    raise self.fail(where, "an option needs choices and a default among them")
                keys.append(ProblemKey(str(name), default, choices))
            elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
                keys.append(ProblemKey(str(name), value))
            else:
                raise self.fail(where, f"expected a positive integer size or "
                                       f"{{default: ..., choices: [...]}}, got {value!r}")
        return tuple(keys)

    def parameters(self, raw: Any, flags: Any, qnames: set[str]) -> tuple[Parameter, ...]:
        """Values (a list, or ``{values: [...], when: CONDITION}``), then the build flags."""
        params, conditions = [], {}
        for name, values in self.mapping("parameters", raw).items():
            where = f"parameters.{name}"
            if not _IDENT.match(str(name)):
                raise self.fail(where, "parameter names must be identifiers (they become -D macros)")
            self.free_name(where, str(name))
            if str(name) in qnames:
                raise self.fail(where, f"problem.{name} has that name too: both would be -D{name}, and the "
                                "parameter would take the problem's place in every expression; rename one")
            if isinstance(values, dict):
                self.check_keys(where + ".", values, ["values", "when"])
                conditions[str(name)] = values.get("when")
                values = values.get("values")
            if not isinstance(values, list) or not values:
                raise self.fail(where, "give a non-empty list of values, e.g. [16, 32, 64]")
            for v in values:
                if not isinstance(v, (int, float, str, bool)):
                    raise self.fail(where, f"value {v!r} must be a number, string or boolean")
                if isinstance(v, float) and not math.isfinite(v):  # trial 45: -DX=nan reached the compiler
                    raise self.fail(where, f"value {v!r} is not a finite number")
                if isinstance(v, str) and (not v or v.startswith("-") or any(c.isspace() or c in "\"'\\" for c in v)):
                    raise self.fail(where, f"value {v!r} reaches the compiler as -D{name}={v}: give a string "
                                    "that is not empty, does not start with '-' and has no spaces or quotes")
            if any(isinstance(v, bool) for v in values) and not all(isinstance(v, bool) for v in values):
                # true reaches the compiler as 1: [true, 1] is one value twice, [true, 2] a typo
                raise self.fail(where, f"values {values!r} mix true/false with other values; true reaches the "
                                "compiler as 1 and false as 0, so write those numbers (or a build flag for an "
                                "on/off option)")
            floats = [v for v in values if isinstance(v, float)]
            if floats and any(isinstance(v, int) and not isinstance(v, bool) for v in values):
                # trial 40: [1, 2.0, 4] was taken, then the spec's own baseline WPT: 2 was not in it
                raise self.fail(where, f"values {values!r} mix whole numbers with floats ({floats[0]!r}); write them "
                                "all alike (2, or 2.0 and 1.0 beside it), as they reach the compiler as written")
            numeric = [v for v in values if isinstance(v, str) and _is_numeral(v)]
            if numeric and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                # trial 103: [16, "32", 64] ran, and every configuration of WG=32 failed its constraint
                raise self.fail(where, f"values {values!r} mix numbers with text that reads as one ({numeric[0]!r}); "
                                "write it without quotes")
            if len(set(map(repr, values))) != len(values):
                raise self.fail(where, "values must not repeat")
            params.append(Parameter(str(name), tuple(values)))
        known = {p.name for p in params} | qnames
        self.values |= {p.name: p.values for p in params}  # for the quoted values of expressions
        # a condition must give true or false, as a constraint (trial 45: `when: "WG"` was taken)
        params = [replace(p, when=self.condition_of(p, conditions[p.name], known))
                  if conditions.get(p.name) is not None else p for p in params]
        values = {p.name: p.values for p in params}
        made = {m: p.name for p in params for v in p.values for m in _macros(p.name, v) if m != p.name}
        if clash := sorted(set(made) & (qnames | set(values))):  # trial 45: MODE: [n] and a problem key MODE_N
            raise self.fail(f"parameters.{made[clash[0]]}", f"a value defines the macro {clash[0]} (as 1), which is "
                            f"the name of a {'problem key' if clash[0] in qnames else 'parameter'} too; rename one")
        for name, flag in self.mapping("build_flags", flags, allow_empty=True).items():
            where = f"build_flags.{name}"
            if not _IDENT.match(str(name)):
                raise self.fail(where, "flag names must be identifiers")
            self.free_name(where, str(name), macro=False)
            if str(name) in values or str(name) in qnames:
                raise self.fail(where, f"{'a parameter' if str(name) in values else 'a problem key'} has that "
                                "name too; a flag is tuned on and off under its own name: rename one")
            if not isinstance(flag, str) or not flag.startswith("-"):
                raise self.fail(where, f"expected a compiler option such as -cl-mad-enable, got {flag!r}")
            for defined in re.findall(r"(?:^|\s)-D\s*(\w+)", flag):  # anywhere in it (trial 46)
                if defined in values or defined in qnames:
                    # trial 45: -DWPT=4 beside autotune's own -DWPT=... redefined it, and crashed the worker
                    raise self.fail(where, f"{flag} defines {defined}, which autotune defines as the "
                                    f"{'parameter' if defined in values else 'problem key'} it is; tune it as that "
                                    "instead")
            params.append(Parameter(str(name), (False, True), flag=flag))
        return tuple(params)

    def condition_of(self, p: Parameter, source: Any, known: set[str]) -> Expr:
        """``p``'s ``when``: a condition over the other parameters and the problem keys."""
        self.declared = {p.name: "own condition"}
        try:
            return self.expr(f"parameters.{p.name}.when", source, known - {p.name}).as_condition()
        finally:
            self.declared = {}

    def possible(self, key: str, e: Expr) -> None:
        """SpecError where ``e`` compares a parameter or string problem key (:attr:`values`, as read
        so far) with a string it never takes (a typo: the condition can never hold, or always does)."""
        if (missing := _foreign_literal(e.source, self.values)) is not None:
            name, literal = missing
            fix = ("it is a number: compare without quotes" if not any(isinstance(v, str) for v in self.values[name])
                   else "check the spelling")
            listed = ", ".join(map(str, self.values[name]))
            raise self.fail(key, f"{name} is never {literal!r} (its values: {listed}); {fix}")

    def launch(self, raw: Any, name: str, default_args: tuple[str, ...], known: set[str],
               parameters: tuple[Parameter, ...]) -> tuple[LaunchStep, ...]:
        steps_raw = raw if isinstance(raw, list) else [raw]
        if default_args and all(isinstance(s, Mapping) and "args" in s for s in steps_raw):
            raise self.fail("args", "every launch step lists its own 'args', so no step uses this list; "
                                    "remove it, or remove 'args' from the steps that take these arguments")
        steps = []
        for i, step in enumerate(steps_raw):
            where = f"launch[{i}]" if isinstance(raw, list) else "launch"
            step = self.mapping(where, step)
            self.check_keys(where + ".", step, sorted(_STEP_KEYS))
            if "global" not in step:
                raise self.fail(where, "missing 'global' (a list of 1 to 3 size expressions)")
            glob = self.dims(where + ".global", step["global"], known)
            local = None
            if step.get("local") is not None:
                local = self.dims(where + ".local", step["local"], known)
                if len(local) != len(glob):
                    raise self.fail(where + ".local", "must have as many dimensions as global")
            args = tuple(str(a) for a in self.sequence(where + ".args", step.get("args", list(default_args))))
            if not args:
                raise self.fail(where, "no kernel arguments: set 'args' at the top level or in the step")
            when = self.expr(where + ".when", step["when"], known).as_condition() if "when" in step else None
            steps.append(LaunchStep(str(step.get("entry", name)), args, glob, local, when,
                                    f"{where}.args" if "args" in step else "args"))
        return tuple(steps)

    def dims(self, key: str, raw: Any, known: set[str]) -> tuple[Expr, ...]:
        items = self.sequence(key, raw)
        if not 1 <= len(items) <= 3:
            raise self.fail(key, "give 1 to 3 dimensions")
        return tuple(self.expr(f"{key}[{i}]", d, known) for i, d in enumerate(items))

    def config(self, key: str, raw: Any, params: tuple[Parameter, ...]) -> tuple[tuple[str, Value], ...]:
        values = self.mapping(key, raw, allow_empty=True)
        by_name = {p.name: p for p in params}
        for name, value in values.items():
            if name not in by_name:
                raise self.fail(f"{key}.{name}", f"not a parameter; parameters: {', '.join(by_name)}")
            if not _among(value, by_name[name].values):
                raise self.fail(f"{key}.{name}", _other_type(value, by_name[name].values)
                                or f"{value!r} is not among its values {list(by_name[name].values)}")
        # a value its variant ignores is the configuration with the first (trial 36: a scalar
        # baseline's VW=8 was shown in the summary as if it applied)
        full = {p.name: values.get(p.name, p.values[0]) for p in params}
        # only where the variant was left to its first value: one chosen with the setting beside
        # it is meant (trial 12: a baseline of MODE 0 listing WG too), and a parameter's first
        # value, which an ignored one is set to, changes nothing
        self.ignored += [self.ignored_setting(key, p, values, full) for p in params
                         if p.name in values and values[p.name] != p.values[0] and p.flag is None and p.when
                         and not p.when.names & full.keys() <= values.keys() and _unused(p, full)]
        return tuple(_first_where_unused(params, full).items())

    def ignored_setting(self, key: str, p: Parameter, given: Mapping[str, Any], full: Mapping[str, Value]) -> str:
        """The lint for ``key``'s setting of ``p`` where ``p``'s ``when`` does not hold (trial 70: a
        default of TS and RPT without ALGO: tiled measured the naive variant, without a word)."""
        assert p.when is not None
        chosen = ", ".join(f"{n}={full[n]}" + ("" if n in given else f" (its first value: {key} does not set it)")
                           for n in sorted(p.when.names & full.keys()))
        return (f"{self.path}: {key}.{p.name} has no effect: {p.name} applies only where {p.when.source} "
                f"(parameters.{p.name}.when), and {key} has {chosen or 'another variant'}; set the variant's "
                f"parameter in {key} too, or leave {p.name} out")


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer past float's range
        return False


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False for a name the system cannot look up (too long, NUL)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _not_a_file(path: Path) -> str:
    """What ``path``, which exists and is no regular file, is: "a folder" or "not a regular file"."""
    return "a folder" if path.is_dir() else "not a regular file (a pipe or device, say)"


def _exists(path: Path) -> bool:
    """Whether anything is at ``path``; False for a name the system cannot look up."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


#: Kernel Tuner's names for what a spec key holds (trial 52: `restrictions` was answered "did you
#: mean 'description'?"): the key, and how to say it.
_KERNEL_TUNER = {
    "restrictions": ("constraints", "'constraints', one expression each"),
    "tune_params": ("parameters", "'parameters'"),
    "answer": ("reference", "'reference', the module whose reference() gives the expected outputs"),
    "compiler_options": ("build_flags", "'build_flags', each tuned on and off"),
    "atol": ("tolerance", "'tolerance: {atol: ..., rtol: ...}'"),
    # (trial 113: at the top, "did you mean 'problem'?" alone)
    "problem_size": ("problem", "'problem' (the sizes, by name), from which launch's 'global' (in work-items) is "
                                "computed"),
    "grid_div_x": ("global", "'global', in work-items (a multiple of 'local')"),
    "grid_div_y": ("global", "'global', in work-items (a multiple of 'local')"),
    "grid_div_z": ("global", "'global', in work-items (a multiple of 'local')"),
    "block_size_names": ("local", "'local', the work-group from parameters of any name"),
}


#: Names Kernel Tuner's expressions use that a spec's do not, and what to write instead.
_KERNEL_TUNER_NAMES = {
    name: f"Kernel Tuner's {name} is the problem's own keys here, by name: {{keys}}"
    for name in ("problem_size", "problem_size_x", "problem_size_y", "problem_size_z")
}


def _ignorable(constraint: Expr, parameters: tuple[Parameter, ...],
               derived: tuple[tuple[str, Expr], ...]) -> tuple[str, ...]:
    """The parameters with a ``when`` that ``constraint`` names, through derived names too."""
    named = _behind(derived, constraint.names)
    return tuple(p.name for p in parameters if p.name in named and p.when is not None)


def _behind(derived: tuple[tuple[str, Expr], ...], names: Iterable[str]) -> set[str]:
    """``names`` with each derived name replaced by what it is computed from (transitively)."""
    return _walk(derived, names)[0]


def _walk(derived: tuple[tuple[str, Expr], ...], names: Iterable[str]) -> tuple[set[str], set[str]]:
    """(what ``names`` are computed from, transitively, derived names replaced; the derived
    names on the way)."""
    table, leaves, through, todo = dict(derived), set(), set(), list(names)
    while todo:
        n = todo.pop()
        if n not in table:
            leaves.add(n)
        elif n not in through:
            through.add(n)
            todo.extend(table[n].names)
    return leaves, through


def _reference_text(reference: str) -> str:
    """The reference module's source (a .py path, or a built-in's module): it makes the inputs
    and decides what is correct, so a fix to it must not leave verdicts of the old one standing.
    Empty where it cannot be read (importing it says why)."""
    if not reference.endswith(".py"):
        found = importlib.util.find_spec(f"autotune.kernels.{reference}")
        reference = found.origin if found is not None and found.origin else ""
    try:
        return Path(reference).read_text(encoding="utf-8", errors="replace") if reference else ""
    except OSError:
        return ""


def _spec_hash(source: str, raw: Mapping[str, Any]) -> str:
    """The source the device compiles (and the reference module's), and what gives a
    configuration its meaning, parsed (not the YAML text): editing the description or the
    starting points must not orphan entries."""
    canonical = json.dumps({k: v for k, v in raw.items() if k not in _UNHASHED},
                           sort_keys=True, default=str).encode()
    return hashlib.sha256(source.encode() + b"\0" + canonical).hexdigest()[:16]


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"\s*(//.*|/\*.*)?$')  # a comment may follow
_ANY_INCLUDE = re.compile(r"^\s*#\s*include\b")
_IF_OPENS = re.compile(r"^\s*#\s*if(n?def)?\b")
_IF_CLOSES = re.compile(r"^\s*#\s*endif\b")
_COMMENT_MARKS = re.compile(r'//|/\*|"(?:\\.|[^"\\])*"')  # a string literal is skipped whole


def _ends_in_comment(line: str, inside: bool) -> bool:
    """Whether a ``/* ... */`` comment is still open after ``line``, given whether one was
    before it: a directive on a line that starts inside one is text, not a directive.

    Example:
        >>> _ends_in_comment('x = 1; /* #if', False), _ends_in_comment('#endif */ "/*"', True)
        (True, False)
    """
    pos = 0
    while True:
        if inside:
            end = line.find("*/", pos)
            if end < 0:
                return True
            inside, pos = False, end + 2
            continue
        m = _COMMENT_MARKS.search(line, pos)
        if m is None or m.group() == "//":
            return False
        inside, pos = m.group() == "/*", m.end()


def expand_includes(path: Path, within: tuple[Path, ...] = ()) -> str:
    """``path``'s text with each ``#include "file"`` (beside it, else a header of autotune's own
    such as ``autotune.h``) inlined, recursively.

    The device compiles one string, so the includes are resolved here; ``#line`` directives
    keep the compiler's messages pointing at the file and line they come from.

    Example:
        >>> expand_includes(data_dir("kernel_templates") / "matmul.cl").splitlines()[0]
        '#line 1 "matmul.cl"'
    """
    out = [f'#line 1 "{path.name}"']
    try:
        text = path.read_text(encoding="utf-8")  # not the locale's: it must hash alike everywhere (trial 34)
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
                        "save it as UTF-8") from None
    except OSError as exc:  # trial 71: a template without read permission was a traceback
        raise SpecError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if (nul := text.find("\0")) >= 0:  # trial 82: the compiler stopped there, "no kernel 'saxpy'" followed
        raise SpecError(f"{path}:{text.count(chr(10), 0, nul) + 1}: holds a NUL byte (offset {nul}), where the "
                        "compiler would stop reading; remove it")
    depth = 0  # of #if blocks around this line
    commented = False  # whether this line starts inside a /* */ comment (trial 40: its #if counted)
    for n, line in enumerate(text.splitlines(), 1):
        directive, commented = not commented, _ends_in_comment(line, commented)
        m = _INCLUDE.match(line) if directive else None
        if m is None and directive and depth == 0 and _ANY_INCLUDE.match(line):
            # <file> or a macro: the compiler would look it up from the working folder, and an
            # edit to it would not make the tuned entries stale (trial 45)
            raise SpecError(f'{path}:{n}: write the include as #include "FILE" (a file beside the template, '
                            f"which autotune inlines so that an edit to it makes tuned entries stale), not "
                            f"{line.strip()!r}")
        if m is None:
            if directive:
                depth += 1 if _IF_OPENS.match(line) else -1 if _IF_CLOSES.match(line) else 0
            out.append(line)
            continue
        included = (path.parent / m.group(1)).resolve()
        shared = data_dir("kernel_templates") / m.group(1)
        if not included.is_file() and m.group(1).endswith(".h") and shared.is_file():
            included = shared.resolve()  # autotune's own headers (autotune.h), for any template
        if _exists(included) and not included.is_file():  # trial 82: a FIFO or /dev/zero was "not found"
            raise SpecError(f"{path}:{n}: #include \"{m.group(1)}\" is {_not_a_file(included)}: include a file")
        if not included.is_file() and depth > 0:
            # in a branch the compiler may skip (#ifdef SOME_VENDOR): left for it, as a
            # preprocessor would (trial 36: the spec was refused); taken, its own error says so
            out.append(line)
            continue
        if not included.is_file():
            raise SpecError(f"{path}:{n}: #include \"{m.group(1)}\" not found beside it (nor among autotune's "
                            f"headers: {', '.join(h.name for h in sorted(data_dir('kernel_templates').glob('*.h')))})")
        if included in within or included == path.resolve():
            raise SpecError(f"{path}:{n}: #include \"{m.group(1)}\" includes itself (autotune inlines "
                            "includes, so an include guard does not stop it)")
        out.append(expand_includes(included, (*within, path.resolve())).rstrip("\n"))
        if commented:  # a /* comment after it runs on (trial 46: the next line was compiled as code)
            out.extend([f'#line {n} "{path.name}"', m.group(2)])
        else:
            out.append(f'#line {n + 1} "{path.name}"')
    return "\n".join(out) + "\n"


def _foreign_literal(source: str, values: Mapping[str, tuple[Value, ...]]) -> tuple[str, str] | None:
    """(name, text) of a comparison of a parameter with a string it never takes, if any
    (``VARIANT == 'tre'``: a condition that can never hold, or always does)."""
    for node in ast.walk(ast.parse(source.strip(), mode="eval")):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:], strict=False):  # each adjacent pair of a chain
            # equality, and membership in a list of values; not `'_db' in ALGO` or `ALGO < 'v'`,
            # which test a string's parts or order (trial 84: refused as typos)
            if isinstance(op, (ast.Eq, ast.NotEq)):
                pairs = [(a, b), (b, a)]
            elif isinstance(op, (ast.In, ast.NotIn)) and isinstance(b, (ast.Tuple, ast.List, ast.Set)):
                pairs = [(a, item) for item in b.elts]
            else:
                continue
            for name, const in pairs:
                if (isinstance(name, ast.Name) and name.id in values and isinstance(const, ast.Constant)
                        and isinstance(const.value, str) and const.value not in values[name.id]):
                    return name.id, const.value
    return None


#: One import of a reference module at a time: a module is in sys.modules while its code runs,
#: and a second thread (load_kernel from several threads) would take it half made (trial 20).
_IMPORTING = threading.Lock()


def _digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:10]


def _folder_state(reference: str, spec_path: Path) -> bytes:
    """The reference module's text and the size and time of each module beside it: an edit of
    either is imported again (trial 66), a helper's too (trial 69)."""
    try:
        text = Path(reference).read_bytes()
        beside = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in Path(reference).parent.glob("*.py"))
    except OSError as exc:
        raise SpecError(f"{spec_path}: reference: cannot read {reference} ({exc.strerror or exc})") from None
    return text + repr(beside).encode()


def _forget_helpers(folder: Path, loaded: set[str]) -> None:
    """Drop from ``sys.modules`` the modules a reference imported from its own folder (those not
    ``loaded`` before it): another spec's reference with a helper of the same name imports its
    own (trial 69: it got the first spec's, and was verified against it)."""
    for name in set(sys.modules) - loaded:
        where = getattr(sys.modules[name], "__file__", None)
        if where and not name.startswith("autotune_user_ref_") and Path(where).parent == folder:
            del sys.modules[name]


def _import_reference(reference: str, spec_path: Path) -> ModuleType:
    with _IMPORTING:
        return _import_reference_alone(reference, spec_path)


def _import_reference_alone(reference: str, spec_path: Path) -> ModuleType:
    if reference.endswith(".py"):
        # named by its text too: an edited module is imported again in a process that imported it
        # before (trial 66: a notebook kept the old reference, and saved a kernel the new one fails)
        mod_name = f"autotune_user_ref_{_digest(reference.encode())}_{_digest(_folder_state(reference, spec_path))}"
        if mod_name in sys.modules:
            return sys.modules[mod_name]
        loader_spec = importlib.util.spec_from_file_location(mod_name, reference)
        if loader_spec is None or loader_spec.loader is None:
            raise SpecError(f"{spec_path}: reference: cannot import {reference}")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module
        # a module beside it imports as it would from its own folder, from any working folder
        # (trial 66: `from helpers import X` worked only where the process started in that folder)
        folder, loaded = Path(reference).parent, set(sys.modules)
        sys.path.insert(0, str(folder))
        try:
            loader_spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # user code: report it as a spec problem, not a crash
            del sys.modules[mod_name]
            raise SpecError(f"{spec_path}: reference: importing {reference} failed: {raised_in(exc, reference)}") \
                from exc
        finally:
            sys.path.remove(str(folder))
            _forget_helpers(folder, loaded)
    else:
        try:
            module = importlib.import_module(f"autotune.kernels.{reference}")
        except ModuleNotFoundError:
            raise SpecError(
                f"{spec_path}: reference: no built-in host module {reference!r}; "
                "give a .py file next to the spec"
            ) from None
    for fn in ("inputs", "reference"):
        if not callable(getattr(module, fn, None)):
            sys.modules.pop(module.__name__, None)  # not kept: a later import checks it again
            raise SpecError(
                f"{spec_path}: reference: {reference} must define {fn}(problem, ...); "
                "see the spec format in README.md"
            )
    return module


def _among(value: Value, values: Sequence[Value]) -> bool:
    """Whether ``value`` is one of ``values`` as the same type: 8.0 is not 8 (it would be
    defined as -DVW=8.0, which the preprocessor refuses; trial 36), nor True 1.

    Example:
        >>> _among(8, (4, 8)), _among(8.0, (4, 8)), _among(True, (0, 1))
        (True, False, False)
    """
    return any(value == v and type(value) is type(v) for v in values)


def _other_type(value: Value, values: Sequence[Value]) -> str | None:
    """Where ``value`` equals one of ``values`` of another type, what to write instead."""
    same = next((v for v in values if v == value and type(v) is not type(value)), None)
    if same is None:
        return None
    return f"{value!r} is {_a(type(value).__name__)}, not the {type(same).__name__} {same!r}; write {same!r}"


def _a(word: str) -> str:
    """``word`` with its article: "an int", "a float"."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _first_where_unused(params: Sequence[Parameter], config: Mapping[str, Value]) -> dict[str, Value]:
    """``config`` with each parameter whose ``when`` does not hold there at its first value
    (the problem-free part of space.canonical: a problem key in a ``when`` counts as used)."""
    return {**config, **{p.name: p.values[0] for p in params if p.flag is None and _unused(p, config)}}


def _unused(p: Parameter, config: Mapping[str, Value]) -> bool:
    """Whether ``config`` does not use ``p`` (its ``when`` does not hold there)."""
    try:
        return p.when is not None and not p.when(config)
    except ExpressionError:  # names a problem key: taken as used
        return False
