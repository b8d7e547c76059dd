"""Build one configuration of a kernel and enqueue it: shared by the tuner and the loader.

Example:
    >>> import pyopencl as cl
    >>> from autotune import spec as S
    >>> ctx = cl.create_some_context(interactive=False)
    >>> sp = S.load("matmul")
    >>> run = Launch(ctx, sp, sp.default_config, {"M": 64, "N": 64, "K": 64, "layout": "row"},
    ...              {"max_work_group_size": 256})  # doctest: +SKIP
    >>> run.arg_names  # doctest: +SKIP
    ('A', 'B', 'C')
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

from . import capture
from .errors import ProblemError, SpecError
from .signatures import by_value_types, cast
from .space import Geometry, geometry
from .spec import KernelSpec, Value

#: Error codes that mean "this candidate cannot build" (not a bug in autotune).
BUILD_ERRORS = frozenset({
    cl.status_code.BUILD_PROGRAM_FAILURE,
    cl.status_code.INVALID_BUILD_OPTIONS,
    cl.status_code.COMPILER_NOT_AVAILABLE,
    cl.status_code.INVALID_KERNEL_NAME,
    cl.status_code.INVALID_KERNEL_DEFINITION,
})
#: Error codes that mean "this candidate cannot run here".
LAUNCH_ERRORS = frozenset({
    cl.status_code.OUT_OF_RESOURCES,
    cl.status_code.OUT_OF_HOST_MEMORY,
    cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE,
    cl.status_code.INVALID_WORK_GROUP_SIZE,
    cl.status_code.INVALID_WORK_ITEM_SIZE,
    cl.status_code.INVALID_GLOBAL_WORK_SIZE,
    cl.status_code.EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
    cl.status_code.INVALID_COMMAND_QUEUE,
})


class CandidateError(Exception):
    """A candidate failed to build or launch; ``status`` says which. Internal to measuring."""

    def __init__(self, status: str, message: str, context_lost: bool = False,
                 wg_limits: Mapping[str, int] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.context_lost = context_lost  # the failure may have broken the OpenCL context
        self.wg_limits = dict(wg_limits or {})  # what the build's kernels allow (autotune.limits)


def error_code(exc: cl.Error) -> int | None:
    """The OpenCL status code of a pyopencl error, if it carries one."""
    code = getattr(exc, "code", None)
    if code is None and exc.args and hasattr(exc.args[0], "code"):
        code = exc.args[0].code
    return code() if callable(code) else code


def short(text: str, limit: int = 400) -> str:
    """First meaningful lines of a compiler log, on one line."""
    lines = [ln.strip() for ln in str(text).splitlines()
             if ln.strip() and not re.fullmatch(r"\d+ errors? generated\.?", ln.strip())]
    # errors, and the notes that say a -D macro was expanded there (a name clash; see diagnose)
    errors = [ln for ln in lines if "error" in ln.lower() or "expanded from macro" in ln]
    joined = " | ".join(errors or lines)
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def _kernel_names(program: cl.Program) -> list[str]:
    """The kernels a built program holds (none known where the runtime will not say)."""
    try:
        return sorted(n for n in str(program.get_info(cl.program_info.KERNEL_NAMES)).split(";") if n)
    except cl.Error:
        return []


# pyopencl 2026.1 reads this variable without a default when a build fails with another
# error than BUILD_PROGRAM_FAILURE (a build option the compiler rejects: INVALID_BUILD_OPTIONS),
# so that error became a KeyError. Unset, it means "not fatal": pyopencl then builds without
# its cache, and the compiler's own error reaches us.
os.environ.setdefault("PYOPENCL_CACHE_FAILURE_FATAL", "")


def build_quietly(ctx: cl.Context, source: str, options: Sequence[str] = (),
                  cache_dir: str | None = None) -> cl.Program:
    """Build ``source``; raises pyopencl's error on failure, prints nothing on success.
    ``cache_dir``: pyopencl's on-disk program cache (None: its default, shared by all users).

    A non-empty build log (pyopencl's CompilerWarning) is normal for tuned variants: ignored
    here, or on a build thread (:class:`ProgramCache`) by its owner, which holds the filter for
    the threads' lifetime: catch_warnings saves and restores the process's filters, so threads
    that each use it can restore one another's, and a build that outlived its owner's filter
    printed the warning (after a run's last line, in trial 21). Other threads build one at a
    time here (trial 23: six application threads loading a kernel at once let one through)."""
    # -w: tuned variants warn by the hundred (unused macros, unrolled loops); some
    # compilers (PoCL's clang) print that to the terminal, burying the progress lines
    try:
        if threading.current_thread().name.startswith(_BUILD_THREAD):
            return cl.Program(ctx, source).build(options=[*options, "-w"], cache_dir=cache_dir)
        with quiet_builds():
            return cl.Program(ctx, source).build(options=[*options, "-w"], cache_dir=cache_dir)
    except cl.Error as exc:
        _remove_saved_source(exc)
        raise


#: pyopencl keeps the source of each failed build in a temporary file, named at the end of its
#: error (the compiler's log before it may echo the source, and so any such text: trial 61).
_SAVED_SOURCE = re.compile(r"\n\(source saved as (.+\.cl)\)\Z")


def _remove_saved_source(exc: cl.Error) -> None:
    """Delete the file pyopencl saved a failed build's source in, where it is one of its making
    (``tmp*.cl`` in the temporary folder): failed builds are routine in tuning, and each left
    one there (trial 60); the template and the -D options in the message say what was built."""
    found = _SAVED_SOURCE.search(str(exc))
    if found is None:
        return
    path = Path(found[1])
    if path.parent == Path(tempfile.gettempdir()) and path.name.startswith("tmp"):
        with contextlib.suppress(OSError):
            path.unlink()


def without_saved_source(message: str) -> str:
    """``message`` without pyopencl's note of the file :func:`_remove_saved_source` deleted."""
    return _SAVED_SOURCE.sub("", message)


_BUILD_THREAD = "autotune-build"
_QUIET_BUILDS = threading.RLock()


@contextmanager
def quiet_builds() -> Iterator[None]:
    """No build log said (pyopencl's CompilerWarning) for the builds of this thread and of the
    build threads it waits for; one thread at a time in a process, since what it changes is the
    process's: pyopencl's ``compiler_output``, which its builds look up at each log. Neither
    the warning filters (a change makes Python forget which warnings it has shown, so an
    application's own, and autotune's, were shown again on every call in a loop that loaded a
    kernel: trial 47) nor ``warnings.showwarning`` (a warning dropped there counts as shown,
    and the application's own builds' logs were never shown after: trial 48)."""
    with _QUIET_BUILDS:
        said = cl.compiler_output
        cl.compiler_output = _no_log
        try:
            yield
        finally:
            cl.compiler_output = said


def _no_log(text: str) -> None:
    """A build log not said (see :func:`quiet_builds`)."""


def _build(ctx: cl.Context, source: str, options: tuple[str, ...], cache_dir: str | None) -> cl.Program:
    start = capture.mark()
    try:
        return build_quietly(ctx, source, options, cache_dir)
    except cl.Error as exc:
        code = error_code(exc)
        if code == cl.status_code.INVALID_BUILD_OPTIONS:  # the driver says only that, not which
            flags = " ".join(o for o in options if not o.startswith("-D")) or "none but -D macros"
            raise CandidateError("compile_error", "this device's compiler refuses the build options "
                                 f"(INVALID_BUILD_OPTIONS; flags: {flags}); check the spec's build_flags "
                                 "and the -D values") from None
        if code in BUILD_ERRORS:
            # the diagnostics of compilers that print them rather than log them (see capture)
            raise CandidateError("compile_error", short(f"{without_saved_source(str(exc))}\n{capture.since(start)}")
                                 ) from None
        raise


class ProgramCache:
    """Built programs of one context, keyed by (source, options).

    ``prefetch`` starts builds on background threads (compile ahead: the next candidates build
    on the host while the device times the current one); ``get`` waits for such a build or
    builds in the calling thread. Whoever makes one with threads ignores pyopencl's
    CompilerWarning until :meth:`close` (see :func:`build_quietly`).
    """

    def __init__(self, threads: int = 0, cache_dir: str | None = None) -> None:
        self._programs: dict[tuple[str, tuple[str, ...]], Future[cl.Program]] = {}
        self.cache_dir = cache_dir
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=_BUILD_THREAD) if threads else None

    def prefetch(self, ctx: cl.Context, source: str, options: list[str]) -> None:
        key = (source, tuple(options))
        if self._pool is not None and key not in self._programs:
            self._programs[key] = self._pool.submit(_build, ctx, source, key[1], self.cache_dir)

    def close(self) -> None:
        """Stop building ahead: builds not started are dropped, the one under way finishes (a
        build outliving its owner would warn, or build for nobody). Built programs stay."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._programs = {k: f for k, f in self._programs.items() if not f.cancelled()}

    def get(self, ctx: cl.Context, source: str, options: list[str]) -> cl.Program:
        key = (source, tuple(options))
        future = self._programs.get(key)
        if future is None:
            future = Future()
            try:
                future.set_result(_build(ctx, source, key[1], self.cache_dir))
            except CandidateError as exc:
                future.set_exception(exc)
            self._programs[key] = future
        return future.result()


#: Finds :func:`no_kernel`'s message in a build error (:mod:`autotune.diagnose` blames the spec).
NO_KERNEL = re.compile(r"no kernel '(\w+)' in ")


def _scratch_buffer(ctx: cl.Context, name: str, nbytes: int) -> cl.Buffer:
    """A scratch buffer; a launch_error where the runtime cannot allocate it (trial 82: 10 GiB,
    within the device's largest allocation but not the host's memory, was a traceback that ended
    the run)."""
    try:
        return cl.Buffer(ctx, cl.mem_flags.READ_WRITE, nbytes)
    except (cl.Error, MemoryError) as exc:
        raise CandidateError("launch_error", f"scratch.{name}: {nbytes / 2**20:.0f} MiB could not be allocated "
                                             f"({short(str(exc), 120)})") from None


def no_kernel(entry: str, template: str, found: str) -> str:
    """The message for a launch step whose ``entry`` the built program does not hold."""
    return f"no kernel {entry!r} in {template} for this configuration (its kernels: {found})"


class Launch:
    """One configuration bound to a context: kernels built, geometry resolved, scratch allocated.

    The one place a configuration becomes something to enqueue, for the tuner and the loader
    alike: it needs the device's facts, since launch expressions may use them.
    """

    def __init__(self, ctx: cl.Context, spec: KernelSpec, params: Mapping[str, Value],
                 problem: Mapping[str, Any], facts: Mapping[str, Any],
                 cache: ProgramCache | None = None, guard: Callable[[int], int] | None = None) -> None:
        """``guard``: the bytes of a guard zone after each scratch buffer of ``nbytes`` (the
        tuner checks it, see :mod:`autotune.measure`); none where not given."""
        self.spec = spec
        self.params = dict(params)
        self.problem = dict(problem)
        self.geometry: Geometry = geometry(spec, params, problem, facts)
        self.options = spec.build_options(params, problem)
        program = (cache or ProgramCache()).get(ctx, spec.source, self.options)
        self.wg_limits: dict[str, int] = {}  # entry -> CL_KERNEL_WORK_GROUP_SIZE, for autotune.limits
        self.kernels = [self._kernel(program, step, ctx.devices[0]) for step in self.geometry.steps]
        self._numbers = [self._bound_numbers(kernel, step) for kernel, step in zip(self.kernels, self.geometry.steps,
                                                                                     strict=True)]
        extra = guard or (lambda nbytes: 0)
        self.scratch = {name: _scratch_buffer(ctx, name, max(nbytes + extra(nbytes), 4))
                        for name, nbytes in self.geometry.scratch}
        # A call binds arguments to shared kernel objects and then enqueues them: from several
        # threads, one call's arguments could be bound under another's enqueue.
        self._lock = threading.Lock()
        self._last: cl.Event | None = None  # the last step of the previous call (scratch in use until then)

    def _bound_numbers(self, kernel: cl.Kernel, step: Any) -> dict[str, Any]:
        """Each integer problem key ``step`` passes, as the numpy scalar the kernel takes: of
        its type (:func:`signatures.by_value_types`; int where it is not read), and where its
        definitions under ``#if`` disagree, the one this build takes, found by setting it
        (trial 46: the last definition's, an int64 for the variant that takes an int, failed
        every configuration of that variant). Bound once here, not at each call; a key no
        type holds is the name of the type it does not fit (its call raises)."""
        kinds = by_value_types(self.spec.source, step.entry, len(step.args))
        bound: dict[str, Any] = {}
        for position, (name, types) in enumerate(zip(step.args, kinds, strict=True)):
            if not isinstance(value := self.problem.get(name), int):
                continue
            fits = [t(value) for t in types or (np.int32,) if cast(value, np.dtype(t)) is not None]
            for number in fits[:-1]:
                try:
                    kernel.set_arg(position, number)
                    break
                except cl.Error:  # INVALID_ARG_SIZE: another width
                    continue
            else:
                number = fits[-1] if fits else np.dtype((types or (np.int32,))[0]).name
            bound[name] = number
        return bound

    def _kernel(self, program: cl.Program, step: Any, device: cl.Device) -> cl.Kernel:
        try:
            kernel = cl.Kernel(program, step.entry)
        except cl.Error as exc:
            if error_code(exc) in BUILD_ERRORS:
                found = ", ".join(_kernel_names(program)) or "none"
                raise CandidateError("compile_error", no_kernel(step.entry, self.spec.template.name, found)) from None
            raise
        self._check_local_memory(kernel, step.entry, device)
        if step.local_size is not None:
            limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
            self.wg_limits[step.entry] = min(limit, self.wg_limits.get(step.entry, limit))
            size = int(np.prod(step.local_size))
            if size > limit:
                raise CandidateError(
                    "launch_error",
                    f"{step.entry}: work-group {size} > {limit} allowed for this kernel "
                    "(registers or local memory)", wg_limits=self.wg_limits)
        return kernel

    def _check_local_memory(self, kernel: cl.Kernel, entry: str, device: cl.Device) -> None:
        """A launch error, before any launch, where the build's ``__local`` arrays need more than
        the device has (trial 56: a bare OUT_OF_RESOURCES from the launch, with no word of
        local memory or of the spec's key that rules such configurations out)."""
        try:
            used = int(kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, device))
        except cl.Error:  # a driver that does not say: the launch will
            return
        have = int(device.local_mem_size)
        if used > have:
            fix = "make the spec's local_memory: count every __local array" if self.spec.local_memory is not None \
                else "give the spec a local_memory: key (bytes, an expression of the parameters) to rule such " \
                "configurations out before they are built"
            raise CandidateError("launch_error", f"{entry}: its __local arrays need {used} B of local memory, and the "
                                 f"device has {have} B; {fix}")

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The arguments a caller supplies, in order (:meth:`KernelSpec.call_args`)."""
        return self.spec.call_args(self.problem)

    def enqueue(self, queue: cl.CommandQueue, named: Mapping[str, Any],
                wait_for: list[cl.Event] | None = None) -> list[cl.Event]:
        """Enqueue every step; ``named`` maps the :attr:`arg_names` to buffers or scalars.

        Each step waits for the one before it on an out-of-order queue (an in-order queue
        orders them already); the first waits for ``wait_for`` and, where the steps share
        scratch buffers, for the previous call's last step, since both calls use the same
        scratch. Calls from several threads are enqueued one at a time.
        """
        events: list[cl.Event] = []
        in_order = not queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
        with self._lock:
            first = [*(wait_for or []), *([self._last] if self.scratch and self._last is not None else [])]
            for kernel, step, numbers in zip(self.kernels, self.geometry.steps, self._numbers, strict=True):
                args = [self._arg(name, named, numbers) for name in step.args]
                try:
                    kernel.set_args(*args)
                except cl.Error as exc:  # an argument of another size than the build's: this configuration's
                    raise CandidateError("launch_error", f"{step.entry}: its arguments ({', '.join(step.args)}) "
                                         f"could not be set: {exc}") from None
                after = (first or None) if not events else None if in_order else events[-1:]
                try:
                    events.append(cl.enqueue_nd_range_kernel(
                        queue, kernel, step.global_size, step.local_size, wait_for=after))
                except cl.Error as exc:
                    if error_code(exc) in LAUNCH_ERRORS:
                        raise CandidateError("launch_error", f"{step.entry}: {exc}", context_lost=True) from None
                    raise
            self._last = events[-1] if events else None
        return events

    def _arg(self, name: str, named: Mapping[str, Any], numbers: Mapping[str, Any]) -> Any:
        """The value of argument ``name``; ``numbers``: the step's problem keys (:meth:`_bound_numbers`)."""
        if name in self.scratch:
            return self.scratch[name]
        if name in named:
            return named[name]
        if isinstance(bound := numbers.get(name), str):  # the type it does not fit
            raise ProblemError(f"{name}={self.problem[name]} does not fit the {bound} the kernel takes it as; "
                               "declare it long in the kernel")
        if bound is not None:
            return bound
        raise unknown_argument(self.spec, name)


def number_arguments(problem: Mapping[str, Any]) -> set[str]:
    """The problem keys a launch step may pass as a kernel argument: the integers (see :meth:`Launch._arg`)."""
    return {k for k, v in problem.items() if isinstance(v, int)}


def check_arguments(spec: KernelSpec, problem: Mapping[str, Any], inputs: Mapping[str, Any]) -> None:
    """SpecError, before a run starts, where the launch steps name an argument nothing supplies,
    or a scratch buffer has an input's name (:meth:`Launch._arg` would bind the scratch buffer)."""
    scratch = {n for n, _ in spec.scratch}
    known = set(inputs) | scratch | number_arguments(problem)
    if unknown := sorted({a for step in spec.launch for a in step.args} - known):
        raise unknown_argument(spec, unknown[0])
    if clash := sorted(set(inputs) & scratch):
        raise SpecError(f"{spec.path}: scratch.{clash[0]}: an input of the reference module has that name "
                        "too, and a scratch buffer would take its place in the kernel; rename one")


def unknown_argument(spec: KernelSpec, name: str) -> SpecError:
    # the step's own args or the top-level list (trials 50 and 51: each was named for the other)
    where = next((step.args_key for step in spec.launch if name in step.args), "args")
    why = (f"{spec.path}: {where}: {name!r} is neither an input of the reference module, a scratch buffer "
           "nor an integer problem key")
    if name in spec.parameter_names:
        return SpecError(f"{why}; a parameter reaches the template as a macro (-D{name}=...), so use {name} "
                         "there and leave it out of args")
    if name in {n for n, _ in spec.derived}:
        return SpecError(f"{why}; a derived value serves constraints, launch sizes and scratch sizes only: compute "
                         "it in the kernel from the problem keys and parameters, which the template has as "
                         "macros, and leave it out of args")
    return SpecError(f"{why}; return it from inputs() or declare it under scratch:")
