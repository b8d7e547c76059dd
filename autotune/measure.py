"""Measure one configuration: build, verify against the reference, time with profiling events.

``Bench`` owns one context, queue, input set and reference result; ``measure(params)``
returns a :class:`~autotune.result.Measurement` and never raises for a bad candidate. Build
failures and enqueue failures are classified by OpenCL error code (:mod:`autotune.launch`);
any error reported while a kernel runs is a ``launch_error`` whatever its code; a wrong
answer is a ``wrong_result``. Anything else propagates: it is a bug.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import pyopencl as cl

from . import guards
from .errors import OptionError, SpecError, raised_in, warn
from .hosttime import watched
from .launch import CandidateError, Launch, ProgramCache, check_arguments, number_arguments
from .pristine import Pristine
from .result import Measurement, Status
from .signatures import (
    as_kernel_scalars,
    check_declared,
    check_inputs,
    check_launch,
    check_local_pointers,
    check_outputs,
)
from .space import check as check_config
from .spec import KernelSpec, Value, problem_label
from .verify import POISON_BYTE, Expected, reachable, vacuous, without_unwritten_advice

#: The bytes the leaders' check again (measure's ``strict``) fills the zones and the outputs'
#: and scratch buffers' elements with, one verification each: NaN (-1 in an integer array), then
#: the largest and a very negative finite value (3.4e38 and -1.7e38 as floats, 2139062143 and
#: -16843010 as int32). A read outside an array that fmax(), max() or min() hides when it is NaN or
#: -1 shows with one of the others, and an output element the kernel leaves unwritten shows
#: though its wanted value is -1 (trial 45: both verified and were saved).
STRICT_BYTES = (POISON_BYTE, 0x7F, 0xFE)


def _as_values(byte: int) -> str:
    """``byte`` repeated, as floats and ints read it.

        >>> _as_values(0x7F)
        '0x7f bytes (3.4e+38 as a float, 2139062143 as an int)'
    """
    word = bytes([byte] * 4)
    return (f"{byte:#04x} bytes ({np.frombuffer(word, np.float32)[0]:.3g} as a float, "
            f"{np.frombuffer(word, np.int32)[0]} as an int)")


_K = TypeVar("_K")  # a place verification fills with NaN: a guard zone's key, a scratch buffer's name


@dataclass(frozen=True)
class TimingOptions:
    """How many launches to time: at least ``min_repeats`` and ``min_time_s`` of device time."""

    warmup: int = 1
    min_repeats: int = 5
    max_repeats: int = 50
    min_time_s: float = 0.05
    compile_threads: int = 0  # > 0: candidates announced with prefetch() build in the background

    def __post_init__(self) -> None:
        """OptionError for a value that cannot time anything (trial 60: max_repeats=0 saved a
        time of inf to the profile; min_time_s="x" failed inside the worker)."""
        # max_repeats below min_repeats caps them (trial 61: refusing it refused what worked)
        for name, least in (("warmup", 0), ("min_repeats", 1), ("max_repeats", 1), ("compile_threads", 0)):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < least:
                raise OptionError(f"TimingOptions.{name} must be a whole number of at least {least} (got {value!r})")
        if not isinstance(self.min_time_s, numbers.Real) or isinstance(self.min_time_s, bool) \
                or not 0 <= self.min_time_s < math.inf:
            raise OptionError(f"TimingOptions.min_time_s must be a finite number of seconds, 0 or more "
                              f"(got {self.min_time_s!r})")


@dataclass(frozen=True)
class Workload:
    """Host inputs (arrays and scalars by argument name), the expected outputs and, where the
    reference module derives them, per-element error bounds of the outputs."""

    inputs: Mapping[str, Any]
    expected: Mapping[str, np.ndarray]
    bounds: Mapping[str, np.ndarray] = field(default_factory=dict)


def make_workload(spec: KernelSpec, problem: Mapping[str, Any], seed: int = 0) -> Workload:
    """:func:`compute_workload`, with a note while that takes long (:func:`reference_watch`)."""
    with reference_watch(spec, problem):
        return compute_workload(spec, problem, seed)


def reference_watch(spec: KernelSpec, problem: Mapping[str, Any],
                    limit_s: float | None = None) -> AbstractContextManager[None]:
    """A note while the reference module runs long, and ProblemError after ``limit_s`` (see
    :mod:`autotune.hosttime`); the advice to make it faster is for a spec of the user's own."""
    faster = "" if spec.builtin else "make it faster (vectorise it with numpy), "
    return watched(f"{spec.reference}: inputs() and reference() for {problem_label(problem)}", limit_s, faster)


def compute_workload(spec: KernelSpec, problem: Mapping[str, Any], seed: int = 0) -> Workload:
    """Inputs from the reference module, and the reference result computed once.

    What the module returns is checked here, so a mistake in it is one SpecError naming the
    module rather than a failure deep inside a measurement.
    """
    host = spec.host_module()
    inputs = host_inputs(spec, problem, np.random.default_rng(seed))
    check_local_pointers(spec)  # first: named as such, not as an argument nothing gives (trial 113)
    check_arguments(spec, problem, inputs)
    check_launch(spec)
    check_outputs(spec)
    check_inputs(spec, inputs, number_arguments(problem))
    check_declared(spec, problem, inputs)
    _check_memory_order(spec, inputs)
    with _read_only(spec, inputs):
        expected = _mapping(spec, "reference", _call(spec, host.reference, dict(problem), dict(inputs)))
    # None for an array the kernel does not write is Kernel Tuner's `answer` form (trial 52)
    if extra := sorted(str(k) for k, v in expected.items() if k not in spec.outputs and v is not None):
        warn(f"{spec.reference}: reference() also returns {', '.join(extra)}, which the spec does not list "
             "under outputs, so it is not verified; list it there if the kernel writes it")  # trial 45: silently
    expected = {k: v for k, v in expected.items() if k in spec.outputs}
    missing = [o for o in spec.outputs if o not in expected or o not in inputs]
    if missing:
        raise SpecError(
            f"{spec.path}: outputs: {', '.join(missing)} must be returned by both inputs() "
            "(as a buffer to fill) and reference() (the expected values)"
        )
    for name in spec.outputs:
        if expected[name] is None or isinstance(expected[name], (str, bytes)):
            raise SpecError(f"{spec.reference}: reference() gives the output {name} as {expected[name]!r}; return "
                            "a numpy array of the values the kernel should write there")
        got, want = inputs[name], np.asarray(expected[name])
        if not isinstance(got, np.ndarray):
            raise SpecError(f"{spec.reference}: inputs() gives the output {name} as a {type(got).__name__}; "
                            "return a numpy array for the kernel to fill, e.g. np.zeros(n, np.float32)")
        if got.size != want.size:
            raise SpecError(f"{spec.reference}: reference() gives {name} {_elements(want)}, inputs() a buffer of "
                            f"{_elements(got)}; they must match")
        if _transposed(got.shape, want.shape):  # trial 56: laid over the buffer in memory order
            raise SpecError(f"{spec.reference}: reference() gives {name} the shape {want.shape}, inputs() a buffer "
                            f"of shape {got.shape}: the same sizes in another order (a transpose?), and elements "
                            f"are compared in memory order; return {name} in the buffer's shape")
        expected[name] = want.reshape(got.shape)  # compared element by element: a scalar for a 1-element buffer is fine
        _check_type(spec, host, name, got, expected[name])
        _check_finite(spec, host, name, expected[name])
    bounds = _bounds(spec, problem, inputs, expected)
    _check_tolerance_used(spec, host, inputs)
    for name in spec.outputs:
        if (why := reachable(spec, problem, name, expected[name], inputs[name].dtype, bounds.get(name))) is not None:
            warn(f"{spec.path}: {why}")
        if not vacuous(spec, problem, expected[name], bounds.get(name)):
            continue
        if spec.builtin:
            # not the user's to tighten (trial 47): float32 rounding over this many terms is as
            # large as the values, so the check says little here
            warn(f"at {problem_label(problem)}, the rounding error {spec.name}'s reference allows for each element "
                 f"of {name} is at least its expected value, so verification there cannot tell a wrong result "
                 "from a right one (a configuration verified at a smaller size is the safer pick)")
        else:
            warn(f"{spec.path}: the error allowed for each element of {name} (the tolerance"
                 f"{' plus error_bound()' if name in bounds else ''}) is at least its expected value, so an "
                 f"output of zeros would pass verification: tighten {'error_bound() or ' if name in bounds else ''}"
                 "the tolerance")
    return Workload(inputs, expected, bounds)


def _check_tolerance_used(spec: KernelSpec, host: Any, inputs: Mapping[str, Any]) -> None:
    """A warning where the spec's tolerance applies to no output (trial 45: ignored silently):
    the module's own check() decides, or every output is an integer, compared exactly."""
    if not spec.tolerance_given:
        return
    if getattr(host, "check", None) is not None:
        warn(f"{spec.path}: tolerance is not used: the reference module's check() decides what passes "
             f"({spec.reference}); take tolerance out of the spec, or apply it in check()")
    elif not any(np.issubdtype(inputs[o].dtype, np.inexact) for o in spec.outputs):
        warn(f"{spec.path}: tolerance is not used: {', '.join(spec.outputs)} "
             f"{'is an integer output' if len(spec.outputs) == 1 else 'are integer outputs'}, compared exactly; "
             "take tolerance out of the spec, or write a check() in the reference module to allow a difference")


def _elements(a: np.ndarray) -> str:
    return f"{a.size} element{'s' * (a.size != 1)}" + (f" (shape {a.shape})" if a.ndim > 1 else "")


def _transposed(got: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """Whether ``want`` holds ``got``'s sizes in another order (a transpose), sizes of 1 aside:
    a reshape in memory order ((1, n) for (n, 1), (32, 128) for (64, 64), a flat array) lays
    each element where the buffer has it, and is fine (trial 58)."""
    g, w = tuple(d for d in got if d != 1), tuple(d for d in want if d != 1)
    return g != w and sorted(g) == sorted(w)


def _check_memory_order(spec: KernelSpec, inputs: Mapping[str, Any]) -> None:
    """SpecError for an array of inputs() whose memory is not in its index order (a transpose,
    order='F', a strided view): the kernel gets the memory as it lies, so every configuration
    would fail verification against a reference computed from the indexes."""
    for name, value in inputs.items():
        if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
            what = "column-major (a transpose, or order='F')" if value.flags.f_contiguous else "a strided view"
            raise SpecError(
                f"{spec.reference}: inputs() gives {name} as {what}, and the kernel reads its buffer in "
                f"memory order, not in the order of its indexes; return np.ascontiguousarray({name}), or, where "
                f"the kernel expects column-major data, {name}.ravel(order='F')")


def _check_type(spec: KernelSpec, host: Any, name: str, got: np.ndarray, want: np.ndarray) -> None:
    """SpecError for expected values of another kind than the output (integers for a float
    output, or the reverse) or of a coarser float: every configuration would fail verification
    against them, exactly where it should be within the tolerance (want 90, got 0.0903), or
    within a tolerance around rounded values; a module with its own check() compares its way."""
    if getattr(host, "check", None) is not None:
        return
    out_float, ref_float = np.issubdtype(got.dtype, np.floating), np.issubdtype(want.dtype, np.floating)
    coarser = out_float and ref_float and want.dtype.itemsize < got.dtype.itemsize
    if out_float != ref_float or coarser:
        fix = (f"compute it in {' or '.join(dict.fromkeys([str(got.dtype), 'float64']))}" if out_float
               else f"return it as {got.dtype}, the type inputs() gives the output")
        raise SpecError(f"{spec.reference}: reference() gives {name} as {want.dtype}, but the kernel writes "
                        f"{got.dtype} (as inputs() gives it); {fix}")
    if not out_float and np.issubdtype(got.dtype, np.integer) and np.issubdtype(want.dtype, np.integer) and want.size:
        limits, low, high = np.iinfo(got.dtype), want.min(), want.max()
        if low < limits.min or high > limits.max:  # trial 45: int64 values past int32, or uint32 for int32
            bad = int(low) if low < limits.min else int(high)
            raise SpecError(f"{spec.reference}: reference() gives {name} a value of {bad}, which the kernel's "
                            f"{got.dtype} cannot hold, so every configuration would fail; compute what the kernel "
                            f"computes (its {got.dtype} wraps around: .astype(np.{got.dtype}))")


def _check_finite(spec: KernelSpec, host: Any, name: str, want: np.ndarray) -> None:
    """SpecError for a NaN or inf the tolerance would be asked to check: a tolerance around
    one passes anything (NaN) or nothing it can say (inf), unless the module's check() compares."""
    if getattr(host, "check", None) is not None or not np.issubdtype(want.dtype, np.floating):
        return
    if (bad := np.flatnonzero(~np.isfinite(want.ravel()))).size:
        i = int(bad[0])
        raise SpecError(
            f"{spec.reference}: reference() gives {name} with {bad.size} of {want.size} elements not finite "
            f"(first at {i}: {want.flat[i]}); the tolerance cannot check them: fix the reference, or "
            "define check(name, got, want, problem) to compare them your way")


def _bounds(spec: KernelSpec, problem: Mapping[str, Any], inputs: Mapping[str, Any],
            expected: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The module's ``error_bound(problem, arrays)``, if it has one: for some outputs, the
    largest |error| a correct kernel can make in each element (added to the spec's tolerance)."""
    fn = getattr(spec.host_module(), "error_bound", None)
    if fn is None:
        return {}
    bounds = _mapping(spec, "error_bound", _call(spec, fn, dict(problem), dict(inputs)))
    for name, bound in list(bounds.items()):
        bound = np.asarray(bound, dtype=np.float64)
        if name not in expected or bound.size != expected[name].size:
            raise SpecError(f"{spec.reference}: error_bound() must give outputs of reference() with one "
                            f"bound per element; {name!r} does not")
        if not (bound >= 0).all():  # NaN too: a bound no error is within
            raise SpecError(f"{spec.reference}: error_bound() gave {name!r} a negative or NaN bound; "
                            "a bound is the largest |error| allowed, 0 or more")
        bounds[name] = bound.reshape(expected[name].shape)
    return bounds


def host_inputs(spec: KernelSpec, problem: Mapping[str, Any], rng: Any) -> dict[str, Any]:
    """The reference module's ``inputs(problem, rng)``, checked to be a dict (SpecError if not,
    or if it raises), its numbers of the types the kernels take (``float c``: np.float32)."""
    return as_kernel_scalars(spec, _mapping(spec, "inputs", _call(spec, spec.host_module().inputs, dict(problem), rng)))


#: The parameters of the reference module's functions, as :func:`_call` passes them.
_PARAMETERS = {"inputs": ("problem", "rng"), "reference": ("problem", "arrays"), "error_bound": ("problem", "arrays")}


def _call(spec: KernelSpec, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except MemoryError:
        raise
    except Exception as exc:  # the user's module: report it, with its file  # noqa: BLE001
        # raised by the call itself, not inside: its parameters are not (problem, arrays) or (problem, rng)
        form = f"; define it as {fn.__name__}({', '.join(_PARAMETERS[fn.__name__])})" \
            if isinstance(exc, TypeError) and exc.__traceback__ is not None and exc.__traceback__.tb_next is None \
            and fn.__name__ in _PARAMETERS else ""  # trial 89: `def inputs(problem)` got Python's words alone
        raise SpecError(f"{spec.reference}: {fn.__name__}() raised {raised_in(exc, spec.reference)}{form}") \
            from exc
    except SystemExit as exc:  # trial 45: sys.exit(3) there ended autotune with status 3 and no word
        raise SpecError(f"{spec.reference}: {fn.__name__}() called sys.exit({exc.code!r}); return its "
                        "result instead") from None


@contextmanager
def _read_only(spec: KernelSpec, inputs: Mapping[str, Any]) -> Iterator[None]:
    """The arrays the kernel reads (every input but a pure output) read-only while reference()
    runs: one it changed in place was uploaded changed, and every configuration "failed" (trial
    36: `y += a * x` in a saxpy reference)."""
    read = [a for name, a in inputs.items() if isinstance(a, np.ndarray) and a.flags.writeable
            and (name not in spec.outputs or name in spec.inplace)]
    for a in read:
        a.flags.writeable = False
    try:
        yield
    except SpecError as exc:
        if isinstance(exc.__cause__, ValueError) and "read-only" in str(exc.__cause__):
            raise SpecError(f"{spec.reference}: reference() changes its input arrays in place (numpy: "
                            f"{exc.__cause__}), "
                            "but they are what the kernel is given: work on a copy (y = arrays['y'].copy())") from None
        raise
    finally:
        for a in read:
            a.flags.writeable = True


def _mapping(spec: KernelSpec, what: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(f"{spec.reference}: {what}() must return a dict of arrays by argument name, "
                        f"got {type(value).__name__}")
    return dict(value)


class Bench:
    """Measures configurations of one kernel and problem on one device."""

    def __init__(self, spec: KernelSpec, problem: Mapping[str, Any], ctx: cl.Context,
                 workload: Workload, facts: Mapping[str, Any],
                 timing: TimingOptions = TimingOptions(), device: cl.Device | None = None,
                 program_cache: str | None = None) -> None:
        self.spec, self.problem, self.ctx = spec, dict(problem), ctx
        self.facts, self.timing, self.workload = dict(facts), timing, workload
        self._expected: dict[str, Expected] = {}  # prepared at the first verification
        self.queue = cl.CommandQueue(ctx, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.cache = ProgramCache(timing.compile_threads, program_cache)
        self.args: dict[str, Any] = {}
        self._zones: dict[str, guards.Zone] = {}  # each array's allocation, with its guard zones
        self._fill: int | None = None  # the strict check's byte (see measure()); None: the search's
        for name, value in workload.inputs.items():
            if isinstance(value, np.ndarray):
                byte = guards.GUARD_BYTE if name in spec.outputs else guards.READ_GUARD_BYTE
                self._zones[name], self.args[name] = guards.allocate(
                    ctx, name, value.nbytes, byte, "the kernel's bounds or the launch's global size")
                cl.enqueue_copy(self.queue, self.args[name], value)
            else:
                self.args[name] = value
        read_only = {name: (self.args[name], value) for name, value in workload.inputs.items()
                     if name not in spec.outputs and isinstance(value, np.ndarray)}
        self._inputs = Pristine(ctx, self.queue, read_only, sum(z.whole.size for z in self._zones.values()))

    def prefetch(self, params: Mapping[str, Value]) -> None:
        """Start building ``params`` in the background, if it is valid (compile ahead)."""
        if check_config(self.spec, params, self.problem, self.facts) is None:
            self.cache.prefetch(self.ctx, self.spec.source, self.spec.build_options(params, self.problem))

    def measure(self, params: Mapping[str, Value], cutoff_ms: float | None = None,
                verify: bool = True, strict: bool = False) -> Measurement:
        """Build, verify and time ``params``; failures become a non-OK Measurement.

        A launch (warm-up or timed) slower than ``cutoff_ms`` ends the timing there: that one
        time is the result, marked ``pruned`` (a candidate that far behind cannot win).
        ``verify=False`` only times (a workload without expected outputs). ``strict`` (the
        leaders' check again): verified once per byte of :data:`STRICT_BYTES`, which fills every
        zone (those of outputs and scratch buffers too, so that a read past their end shows;
        trial 38: an in-place output's y[n] read 0xA5's bytes, a float near 0, and passed; a
        write there was looked for when the search verified the configuration with 0xA5) and
        poisons the outputs and scratch buffers.
        """
        t0 = time.perf_counter()
        params = dict(params)
        reason = check_config(self.spec, params, self.problem, self.facts)
        if reason:
            return Measurement(Status.INVALID, reason, params=params)
        try:
            launch = Launch(self.ctx, self.spec, params, self.problem, self.facts, self.cache,
                            guard=guards.guard_size)
            build_s = time.perf_counter() - t0
            errors = (self._verify_strictly(launch) if strict else self._verify(launch)) if verify else (None, None)
            if isinstance(errors, Measurement):
                return replace(errors, params=params, build_s=build_s,
                               wall_s=time.perf_counter() - t0, wg_limits=launch.wg_limits)
            times, pruned = self._time(launch, cutoff_ms)
        except CandidateError as exc:
            return Measurement(Status(exc.status), str(exc), wall_s=time.perf_counter() - t0,
                               context_lost=exc.context_lost, params=params, wg_limits=exc.wg_limits)
        return Measurement(Status.OK, "", tuple(times), errors[0], errors[1], build_s,
                           time.perf_counter() - t0, pruned=pruned, params=params, wg_limits=launch.wg_limits)

    def verify_strictly(self, params: Mapping[str, Value]) -> Measurement | None:
        """The failure of a verification of ``params`` (built before) with NaN past the ends of
        its outputs and scratch buffers too (see measure()'s ``strict``), or None where it
        verifies: for load_kernel's first use, whose pick is saved after one measure() (trial
        40: it picked a configuration that read past an in-place output's end)."""
        try:
            launch = Launch(self.ctx, self.spec, dict(params), self.problem, self.facts, self.cache,
                            guard=guards.guard_size)
            failed = self._verify_strictly(launch)
        except CandidateError as exc:
            return Measurement(Status(exc.status), str(exc), params=dict(params))
        return replace(failed, params=dict(params)) if isinstance(failed, Measurement) else None

    def _finish(self, events: list[cl.Event]) -> None:
        try:
            cl.wait_for_events(events)
        except cl.Error as exc:
            raise CandidateError("launch_error", f"while running: {exc}", context_lost=True) from None

    def _verify_strictly(self, launch: Launch) -> tuple[float | None, float | None] | Measurement:
        """:meth:`_verify` with each of :data:`STRICT_BYTES` in every zone and unwritten element;
        the first failure, saying which byte showed it, else the first pass's errors."""
        verdicts = []
        try:
            for byte in STRICT_BYTES:
                self._fill = byte
                verdicts.append(self._verify(launch))
                if isinstance(failed := verdicts[-1], Measurement):
                    return failed if byte == POISON_BYTE else replace(failed, message=(
                        f"verified again with {_as_values(byte)} where the search had NaN (-1 in integers), "
                        f"around each array and in each element before it is written: {failed.message}"))
        finally:
            self._fill = None
        return verdicts[0]

    def _verify(self, launch: Launch) -> tuple[float | None, float | None] | Measurement:
        verdict = self._verify_outputs(launch)
        changed = self._restore_inputs()
        if not changed:
            return verdict
        listed = " and ".join(changed)
        why = (f"it changed its input{'s' if len(changed) > 1 else ''} {listed}, which the spec does not list among "
               "its outputs: a second call would read what it wrote, and an application's data would be lost "
               f"(declare {listed} `const` in the kernel; a workspace the kernels need is a `scratch:` buffer, not "
               "an input; an array they update on purpose is listed under outputs and `inplace`)")
        if isinstance(verdict, Measurement):  # the outputs' failure first: it may say why (args in another order)
            return replace(verdict, message=f"{verdict.message}; also, {why}")
        return Measurement(Status.WRONG_RESULT, why)

    def _restore_inputs(self) -> list[str]:
        """The input arrays the launches changed (a kernel that writes what it should only read),
        each copied back: else every configuration measured after it reads what it wrote and
        fails (trial 42). See :mod:`autotune.pristine`."""
        return self._inputs.changed()

    def _verify_outputs(self, launch: Launch) -> tuple[float | None, float | None] | Measurement:
        if overrun := self._run(launch):
            return Measurement(Status.WRONG_RESULT, overrun)
        checked = self._check_outputs()
        if isinstance(checked, Measurement) and (
                why := self._unreproducible(launch, checked.message) or self._read_outside(launch, checked.message)
                or self._read_unwritten(launch, checked.message)):
            return replace(checked, message=why)
        return checked

    def _unreproducible(self, launch: Launch, failure: str) -> str | None:
        """The reason for ``failure`` where a second launch as verified leaves other outputs
        (:meth:`_outputs_marks`): the result depends on timing, and the zones' diagnosis, which
        compares launches, would blame a read outside an array (trial 27's racy histogram)."""
        first = self._outputs_marks()
        if self._run(launch) is not None or self._outputs_marks() == first:
            return None
        return (f"{guards.RACE}: a race between work-items (an element or a "
                "local array updated by several without an atomic, or read before a barrier makes others' writes "
                f"visible); the first launch: {failure}")

    def _run(self, launch: Launch, zeroed: Collection[guards.ZoneKey] = (), clear: Collection[str] = ()) -> str | None:
        """Launch once on poisoned outputs and scratch buffers (``clear``: those scratch buffers
        at 0) and filled guard zones (``zeroed`` with 0 instead); what it wrote outside a buffer,
        if anything."""
        for name in self.spec.outputs:
            buf = self.args[name]
            if name in self.spec.inplace:  # read and written: start from the inputs' values
                cl.enqueue_copy(self.queue, buf, self.workload.inputs[name])
            else:  # poisoned, so an element the kernel never writes cannot pass
                cl.enqueue_fill_buffer(self.queue, buf, np.uint8(self._poison), 0, self._zones[name].size)
        # a scratch buffer starts undefined (load_kernel's holds the previous call's values): poisoned
        # too, so that a kernel that reads an element before writing it (partial[g] += t) cannot pass
        for name, nbytes in launch.geometry.scratch:
            if nbytes:
                cl.enqueue_fill_buffer(self.queue, launch.scratch[name], np.uint8(0 if name in clear else self._poison),
                                       0, nbytes)
        zones = self._guarded(launch)
        guards.fill(self.queue, zones, zeroed)
        self._finish(launch.enqueue(self.queue, self.args))
        return guards.written(self.queue, zones, zeroed)

    def _read_outside(self, launch: Launch, failure: str) -> str | None:
        """The reason for ``failure`` where the kernels read outside an array they only read (see
        :meth:`_culprits`; a read whose value does not reach the outputs is not seen)."""
        zones = self._guarded(launch)
        read = guards.READ_GUARD_BYTE if self._fill is None else self._fill
        keys = [(z.what, side) for z in zones if z.byte == read for side, _, _ in z.sides()]
        found, rest = self._culprits(keys, lambda zeroed: self._run(launch, zeroed=zeroed))
        if not found:
            return None
        strict = self._poison != POISON_BYTE
        fill = f"{self._poison:#04x} bytes" if strict else "NaN"
        reason = guards.read_outside(found, {z.what: z.size for z in zones}, fill if strict else None)
        also = f"; with 0 there, still: {rest.message}" if isinstance(rest, Measurement) else ""
        return f"{reason}; with {fill} there: {without_unwritten_advice(failure)}{also}"

    def _read_unwritten(self, launch: Launch, failure: str) -> str | None:
        """The reason for ``failure`` where the kernels read a scratch buffer before writing it
        (see :meth:`_culprits`)."""
        names = [name for name, nbytes in launch.geometry.scratch if nbytes]
        if not names:
            return None
        self._run(launch)  # as verified: _read_outside may have launched with zones at 0 since
        found, rest = self._culprits(names, lambda clear: self._run(launch, clear=clear))
        if not found:
            return None
        still = f"; with 0 there, still: {rest.message}" if isinstance(rest, Measurement) else \
            " (with 0 there it verifies)"
        listed = ", ".join(f"scratch.{n}" for n in found)
        return (f"{listed}: {guards.UNWRITTEN} (a scratch buffer starts undefined, and in load_kernel holds "
                f"the previous call's values: write each element before reading it, e.g. = not +=); with NaN "
                f"there: {without_unwritten_advice(failure)}{still}")

    def _culprits(self, keys: Sequence[_K], run_with_zero: Callable[[Sequence[_K]], str | None]
                  ) -> tuple[list[_K], tuple[float | None, float | None] | Measurement | None]:
        """Of ``keys`` (places that hold NaN when verifying), those whose NaN, set to 0 by
        ``run_with_zero``, changes which output elements are not finite: one launch more per key,
        only for a configuration that failed, compared with the outputs as the last launch left
        them. Then the outputs' check with all of those at 0, to say what else is wrong."""
        if not keys:
            return [], None
        with_nan = self._outputs_marks()
        found = [k for k in keys if run_with_zero([k]) is None and self._outputs_marks() != with_nan]
        if not found:
            return [], None
        run_with_zero(found)
        return found, self._check_outputs()

    def _outputs_marks(self) -> list[bytes]:
        """Each output's non-finite elements (floats) or its values (integers), to compare runs:
        which elements are NaN does not depend on the order of a float reduction. With a finite
        fill (:data:`STRICT_BYTES`), elements of half its size or more count as non-finite: the
        fill's value that reached them."""
        marks = []
        for name in self.spec.outputs:
            got = self._output(name)
            if not np.issubdtype(got.dtype, np.inexact):
                marks.append(got.tobytes())
                continue
            bad = ~np.isfinite(got)
            if self._fill is not None:
                fill = abs(np.frombuffer(bytes([self._fill]) * got.itemsize, got.dtype)[0])
                bad |= np.abs(got) >= fill / 2 if np.isfinite(fill) else False
            marks.append(bad.tobytes())
        return marks

    def _output(self, name: str) -> np.ndarray:
        """Output ``name`` as the last launch left it, on the host."""
        got = np.empty_like(self.workload.inputs[name])
        cl.enqueue_copy(self.queue, got, self.args[name])
        return got

    def _check_outputs(self) -> tuple[float | None, float | None] | Measurement:
        """The worst error and tolerance used over the outputs (None where no output's check
        measures it: see verify.Verdict), or the failed verification."""
        worst: list[float] = []
        worst_used: list[float] = []
        for name in self.spec.outputs:
            got = self._output(name)
            why, err, used = self.expected(name).check(got)
            if why:
                return Measurement(Status.WRONG_RESULT, self._unless_inplace(why, name, got), error=err,
                                   tolerance_used=used)
            worst += [err] if err is not None else []
            worst_used += [used] if used is not None else []
        return max(worst, default=None), max(worst_used, default=None)

    def _guarded(self, launch: Launch) -> list[guards.Zone]:
        """The arrays and this launch's scratch buffers, with their guard zones (all at NaN
        where ``strict``: see measure())."""
        zones = [*self._zones.values(), *(
            guards.Zone(f"scratch.{name}", launch.scratch[name], 0, nbytes,
                        f"the spec's scratch.{name} size, or the kernel's bounds", guards.GUARD_BYTE)
            for name, nbytes in launch.geometry.scratch)]
        return zones if self._fill is None else [replace(z, byte=self._fill) for z in zones]

    @property
    def _poison(self) -> int:
        """The byte outputs and scratch buffers start the launch with."""
        return POISON_BYTE if self._fill is None else self._fill

    def _unless_inplace(self, why: str, name: str, got: np.ndarray) -> str:
        """``why`` with the advice to declare ``name`` inplace where it applies. Then a poison in
        every element does not mean none was written: ``y += a * x`` over NaN writes NaN (trial 122
        was told "no element was written")."""
        hint = self._inplace_hint(name, got)
        if not hint:
            return why
        stripped = without_unwritten_advice(why)
        also = ("; if it does not, check that 'args' lists the kernel's arguments in the order of its signature"
                if stripped != why else "")
        return stripped + hint + also

    def _inplace_hint(self, name: str, got: np.ndarray) -> str:
        """Advice where ``name`` came back with NaNs and inputs() gives it values: a kernel that
        reads the output it writes (``y += a * x``) starts from the poison unless the spec
        declares it ``inplace``."""
        given = self.workload.inputs[name]
        if (name in self.spec.inplace or not np.issubdtype(got.dtype, np.floating)
                or np.isfinite(got).all() or not np.any(given)):
            return ""
        return (f"; if the kernel reads {name} as well as writing it, declare `inplace: [{name}]` in the "
                "spec: an output starts poisoned (NaN), an inplace one from the values inputs() gives")

    def expected(self, name: str) -> Expected:
        """Output ``name``'s expected values, prepared once for every candidate."""
        if name not in self._expected:
            self._expected[name] = Expected.prepare(self.spec, name, self.workload.expected[name],
                                                    self.problem, self.workload.bounds.get(name))
        return self._expected[name]

    def _time(self, launch: Launch, cutoff_ms: float | None) -> tuple[list[float], bool]:
        """Launch times in ms, and whether ``cutoff_ms`` cut the timing short.

        Only timed launches count against the cut-off, never the warm-up (a first launch can be
        slow for reasons of its own), and two of them: when both are over it, the candidate
        cannot win and those two times are its result.
        """
        t = self.timing
        times: list[float] = []
        total = 0.0
        n = 0
        while n < t.warmup or (len(times) < t.max_repeats
                               and (len(times) < t.min_repeats or total < t.min_time_s)):
            events = launch.enqueue(self.queue, self.args)
            self._finish(events)
            ms = (events[-1].profile.end - events[0].profile.start) * 1e-6
            n += 1
            if n > t.warmup:
                times.append(ms)
                total += ms * 1e-3
                if cutoff_ms is not None and len(times) == 2 and min(times) > cutoff_ms:
                    return times, True
        return times, False
