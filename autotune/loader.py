"""``load_kernel``: the tuned configuration of a kernel for a queue's device, ready to call.

Lookup order: the exact problem in the user's profile, then in the shipped profiles; else the
nearest tuned problem whose parameters are valid for the requested one; else the kernel's
default configuration, with one warning. It never fails for lack of a profile.

Example:
    >>> import pyopencl as cl, numpy as np, autotune
    >>> ctx = cl.create_some_context(interactive=False)
    >>> queue = cl.CommandQueue(ctx)
    >>> mm = autotune.load_kernel("matmul", queue, M=64, N=64, K=64)  # doctest: +SKIP
    >>> event = mm(a_buf, b_buf, c_buf)  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyopencl as cl

from . import device as devices
from . import profiles, settings
from . import spec as specs
from .arguments import Arguments
from .errors import AutotuneError, ProblemError
from .launch import CandidateError, Launch
from .space import check, enumerate_valid
from .spec import KernelSpec, Value

_warned: set[tuple[str, str]] = set()


class AutotuneWarning(UserWarning):
    """autotune fell back to something less than a tuned configuration."""


@dataclass(frozen=True)
class Choice:
    """Which configuration the loader picked and how: ``origin`` is exact, nearest or default."""

    params: Mapping[str, Value]
    origin: str
    entry: profiles.Entry | None = None
    profile: Path | None = None


class TunedKernel:
    """A built, tuned kernel: call it with its buffers to enqueue it.

    Attributes:
        params: the configuration in use (parameters and build-flag switches).
        origin: ``exact``, ``nearest`` or ``default`` (how it was chosen).
        global_size, local_size: the NDRange of the (first) launch step.
        arg_names: the arguments ``__call__`` takes, in order.
    """

    def __init__(self, spec: KernelSpec, queue: cl.CommandQueue, problem: Mapping[str, Any],
                 choice: Choice, facts: Mapping[str, Any]) -> None:
        self.spec, self.queue, self.problem = spec, queue, dict(problem)
        self.choice = choice
        self.params = dict(choice.params)
        self.origin = choice.origin
        self.entry = choice.entry
        self._context = _context(queue)
        try:
            self._launch = Launch(self._context, spec, self.params, self.problem, facts)
        except CandidateError as exc:
            raise AutotuneError(f"{spec.name}: the chosen configuration does not build here: {exc}") from None
        first = self._launch.geometry.steps[0]
        self.global_size, self.local_size = first.global_size, first.local_size
        self.build_options = self._launch.options
        self.arg_names = self._launch.arg_names
        self._arguments = Arguments(spec, self.problem, self.arg_names, self._context, queue.device)

    def __call__(self, *args: Any, wait_for: list[cl.Event] | None = None, **named: Any) -> cl.Event:
        """Enqueue with buffers (and scalars) in ``arg_names`` order; returns the last event.

        Buffers are ``pyopencl.Buffer`` (sub-buffers too) or contiguous ``pyopencl.array.Array``
        of at least the bytes the problem needs. A missing, unknown or repeated argument or one of
        the wrong kind raises TypeError, a buffer too small ValueError; nothing is enqueued then.
        """
        return self._launch.enqueue(self.queue, self._arguments.bind(args, named), wait_for)[-1]

    def __repr__(self) -> str:
        return f"TunedKernel({self.spec.name!r}, {self.origin}, params={self.params})"


def _context(queue: cl.CommandQueue) -> cl.Context:
    try:
        return queue.context
    except cl.LogicError as exc:
        raise AutotuneError(
            f"the queue's context is no longer valid ({exc}); keep a reference to the "
            "cl.Context for as long as its queues are used (some runtimes, Intel's among them, "
            "end a context its creator released even while a queue holds it)") from None


def choose(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
           folders: list[Path] | None = None) -> Choice:
    """Pick the configuration for ``problem`` on ``info`` (see the module docstring)."""
    facts = info.facts()

    def usable(e: profiles.Entry) -> bool:
        params = spec.from_stored(e.params, e.build_flags)
        try:
            return params is not None and check(spec, params, problem, facts) is None
        except AutotuneError:
            return False

    found = profiles.collect(
        spec.name, info.slug, folders or profiles.search_folders(settings.profiles_dir()),
        lambda exc: warnings.warn(AutotuneWarning(f"ignoring profile: {exc}"), stacklevel=5))
    best = profiles.nearest([e for e, _ in found], problem, spec.spec_hash, usable)
    if best is not None:
        path = next(p for e, p in found if e is best)
        origin = "exact" if dict(best.problem) == dict(problem) else "nearest"
        params = spec.from_stored(best.params, best.build_flags)
        assert params is not None  # usable() checked it
        return Choice(params, origin, best, path)

    key = (spec.name, info.slug)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(AutotuneWarning(
            f"no tuned {spec.name} for {info.name} at {problem}; using the default configuration "
            f"(run `autotune run {spec.name}` to tune it)"), stacklevel=3)
    for candidate in (spec.default_config, spec.baseline_config):
        if check(spec, candidate, problem, facts) is None:
            return Choice(candidate, "default")
    valid = enumerate_valid(spec, problem, facts, limit=1)
    if not valid:
        raise ProblemError(f"no configuration of {spec.name} is valid for {problem} on {info.name}; "
                           "use sizes the kernel's tiles divide")
    return Choice(valid[0], "default")


def load_kernel(name: str, queue: cl.CommandQueue, **problem: Any) -> TunedKernel:
    """The tuned ``name`` kernel (built-in name or spec path) for ``queue``'s device.

    Problem keys not given take the spec's defaults. Raises AutotuneError only for bad input
    (unknown kernel, bad size) — never for a missing profile.
    """
    spec = specs.load(name)
    prob = spec.resolve_problem(problem)
    info = devices.info(queue.device)
    return TunedKernel(spec, queue, prob, choose(spec, info, prob), info.facts())
