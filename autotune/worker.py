"""Evaluators: measure configurations in this process, or isolated in a worker process.

The isolated evaluator keeps one persistent worker (spawned, so no OpenCL state is forked)
that holds the context, buffers and reference. A candidate that runs past its time limit
gets the worker killed and restarted (``timeout``); one that kills the worker (segfault,
abort in the compiler or driver) is recorded as ``crashed``. Either way the next candidate
runs in a fresh worker and the tuning run goes on.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from . import capture, scratch, stops
from .errors import AutotuneError, WorkerError, own_warnings
from .measure import Bench, TimingOptions, Workload
from .result import Measurement, Status
from .spec import KernelSpec, Value


class Evaluator(Protocol):
    """What the tuner needs: measure one configuration within a time limit."""

    def evaluate(self, params: Mapping[str, Value], limit_s: float | None,
                 cutoff_ms: float | None = None, verify: bool = True) -> Measurement: ...

    def recheck(self, params: Mapping[str, Value], limit_s: float | None) -> Measurement:
        """Verify and time again a configuration the search measured (the leaders' first
        round: a race passes a single check now and then), more strictly (Bench.measure's
        ``strict``: a read past an output or a scratch buffer shows)."""
        ...

    def prefetch(self, upcoming: list[dict[str, Value]]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Setup:
    """Everything a worker needs to rebuild the bench (all picklable: the spec travels whole)."""

    spec: KernelSpec
    device_selector: str
    problem: dict[str, Any]
    workload_file: str
    timing: TimingOptions
    stderr_file: str = ""  # the worker's stderr goes here (see autotune.capture)
    #: pyopencl's program cache for this run's workers only: a worker killed while it holds
    #: that cache's lock leaves the lock behind, and every later build (in any process using
    #: the folder) would wait for it for a minute and fail; the run can remove it safely
    program_cache: str = ""


def save_workload(workload: Workload, folder: Path) -> str:
    """Write inputs, expected outputs and bounds to an ``.npz`` the worker can load quickly."""
    path = folder / "workload.npz"
    # an entry of Python objects (None, a dict) is for reference() alone: no kernel takes it, and
    # an .npz cannot hold it without pickle (trial 53: the worker failed with a traceback)
    arrays = {f"in__{k}": a for k, v in workload.inputs.items() if (a := np.asarray(v)).dtype != object}
    arrays.update({f"ex__{k}": np.asarray(v) for k, v in workload.expected.items()})
    arrays.update({f"bd__{k}": np.asarray(v) for k, v in workload.bounds.items()})
    try:
        np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
    except OSError as exc:
        path.unlink(missing_ok=True)  # a part-written file would only hold the space
        raise scratch.no_room(path, exc, sum(a.nbytes for a in arrays.values())) from None
    return str(path)


def load_workload(path: str) -> Workload:
    with np.load(path) as data:
        inputs: dict[str, Any] = {}
        expected: dict[str, np.ndarray] = {}
        bounds: dict[str, np.ndarray] = {}
        for key in data.files:
            kind, name = key.split("__", 1)
            arr = data[key]
            if kind == "in":
                inputs[name] = arr[()] if arr.ndim == 0 else arr
            else:
                (expected if kind == "ex" else bounds)[name] = arr
    return Workload(inputs, expected, bounds)


def make_bench(setup: Setup, workload: Workload | None = None) -> Bench:
    """A Bench on the setup's device (used in-process and inside the worker)."""

    from . import device
    from .clcontext import context

    # the caller chose (and build-checked) the device; the worker only finds it again
    info, dev = device.select(setup.device_selector, require_build=False)
    return Bench(setup.spec, setup.problem, context(dev),
                 workload or load_workload(setup.workload_file), info.facts(), setup.timing,
                 program_cache=setup.program_cache or None)


def open_evaluator(setup: Setup, workload: Workload, isolate: bool, folder: Path) -> Evaluator:
    """The evaluator a tuning run measures with: a worker process, or this process."""
    if not isolate:
        return InProcessEvaluator(setup, workload)
    return IsolatedEvaluator(replace(setup, workload_file=save_workload(workload, folder),
                                     stderr_file=str(folder / "worker-stderr.log"),
                                     program_cache=str(folder / "programs")))


class InProcessEvaluator:
    """Measures in the calling process: no isolation, no time limit (``--no-isolation``).
    Until :meth:`close`, pyopencl's CompilerWarning is ignored, its build threads' included."""

    def __init__(self, setup: Setup, workload: Workload) -> None:
        import pyopencl as cl

        self._quiet = warnings.catch_warnings()
        self._quiet.__enter__()
        warnings.simplefilter("ignore", cl.CompilerWarning)
        try:
            self.bench = make_bench(setup, workload)
        except BaseException:
            self._quiet.__exit__(None, None, None)
            raise

    def evaluate(self, params: Mapping[str, Value], limit_s: float | None,
                 cutoff_ms: float | None = None, verify: bool = True) -> Measurement:
        return self.bench.measure(params, cutoff_ms, verify)

    def recheck(self, params: Mapping[str, Value], limit_s: float | None) -> Measurement:
        return self.bench.measure(params, strict=True)

    def prefetch(self, upcoming: list[dict[str, Value]]) -> None:
        for params in upcoming:
            self.bench.prefetch(params)

    def close(self) -> None:
        try:
            self.bench.cache.close()
        finally:
            self._quiet.__exit__(None, None, None)


def _worker_main(conn: Connection, setup: Setup) -> None:
    import pyopencl as cl

    # Ctrl-C, and SIGHUP from a closed terminal, go to the whole process group; the parent
    # decides what to do about them (the worker starts with them held back: see
    # IsolatedEvaluator._start)
    held = [s for s in stops.signals() if s != signal.SIGTERM]
    for s in held:
        signal.signal(s, signal.SIG_IGN)
    stops.unblock(*held)
    # a build log is normal for tuned variants; catch_warnings in build threads is not
    # thread-safe, so the worker (autotune's own process) ignores them for good
    warnings.simplefilter("ignore", cl.CompilerWarning)
    own_warnings()
    try:
        if setup.stderr_file:
            _redirect_stderr(Path(setup.stderr_file))
        bench = make_bench(setup)
        conn.send(("ready", None))
        while True:
            kind, payload = conn.recv()
            if kind == "stop":
                return
            if kind == "prefetch":  # no reply: builds start in the background
                for upcoming in payload:
                    bench.prefetch(upcoming)
                continue
            params, cutoff_ms, verify, strict = payload
            conn.send(("result", bench.measure(params, cutoff_ms, verify, strict)))
    except EOFError:
        return
    except AutotuneError as exc:  # the spec's or reference module's mistake, said in one line
        conn.send(("autotune_error", exc))
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass


def _redirect_stderr(path: Path) -> None:
    """The worker's stderr to ``path``; WorkerError where the run's folder cannot take it (trial
    74: a folder made immutable mid-run gave the new worker's traceback, then "died while
    starting (exit status unknown)")."""
    try:
        capture.redirect_stderr(path)
    except OSError as exc:
        raise WorkerError(f"the run's temporary folder {path.parent} cannot be written ({exc.strerror}): give the "
                          "run a TMPDIR it can write for as long as it runs") from None


@contextmanager
def main_left_out() -> Iterator[None]:
    """The caller's ``__main__`` hidden from multiprocessing while it spawns a process: autotune's
    processes run autotune's code only, and spawn would run the caller's script again in each
    (trial 39: a script without ``if __name__ == "__main__":`` failed with "the measuring worker
    died while starting" after running its top level twice; one read from stdin failed too)."""
    main = sys.modules.get("__main__")
    saved = {k: getattr(main, k) for k in ("__file__", "__spec__") if main is not None and hasattr(main, k)}
    try:
        if "__spec__" in saved:
            main.__spec__ = None  # type: ignore[union-attr]
        if "__file__" in saved:
            del main.__file__  # type: ignore[union-attr]
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


@contextmanager
def starting(*held: int) -> Iterator[None]:
    """Around a spawn of one of autotune's processes: the caller's ``__main__`` hidden
    (:func:`main_left_out`) and the signals ``held`` blocked (:func:`stops.blocked`), which the
    process inherits and takes on itself (:func:`stops.unblock`). multiprocessing's resource
    tracker is started first: starting it on the way (the first spawn) unblocks SIGINT and
    SIGTERM, so the process would start without them held; it ignores SIGHUP, and a SIGHUP
    ignored here (``nohup``) is ignored by the process too. The application's default start
    method is left unset where it was."""
    start_resource_tracker()
    stops.keep_ignored()
    method = mp.get_start_method(allow_none=True)
    try:
        with stops.blocked(*held), main_left_out():
            yield
    finally:
        # a spawn asks for the default start method, which fixes it for the application (trial
        # 75: its later set_start_method("spawn") raised "context has already been set")
        if method is None:
            mp.set_start_method(None, force=True)


def start_resource_tracker() -> None:
    """multiprocessing's resource tracker (which the first queue, lock or spawn starts), started
    with SIGHUP blocked, which it keeps: a closed terminal's SIGHUP to the group killed it, and
    each semaphore it then lost was a traceback in the log (trial 68)."""
    from multiprocessing import resource_tracker

    with stops.hangup_held():
        resource_tracker.ensure_running()


class IsolatedEvaluator:
    """Measures in a persistent worker process that is replaced after a hang or crash."""

    def __init__(self, setup: Setup, startup_timeout_s: float = 300.0) -> None:
        self.setup = setup
        self.startup_timeout_s = startup_timeout_s
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Connection | None = None
        self.restarts = 0

    def _start(self) -> None:
        if not threading.main_thread().is_alive():  # trial 48: a worker started while the
            # application exits found its folder gone, and printed a traceback
            raise WorkerError("the application is exiting: no measuring worker is started")
        self._check_folder()
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self.setup), daemon=True)
        # SIGINT held back while the worker starts (it inherits that), so that a Ctrl-C while
        # it imports is no KeyboardInterrupt traceback of its bootstrap, and reaches this
        # process once the start is done rather than being lost
        with starting(*(s for s in stops.signals() if s != signal.SIGTERM)):
            proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        if not parent.poll(self.startup_timeout_s):
            self._kill()
            raise WorkerError(f"the measuring worker did not start within {self.startup_timeout_s:.0f} s")
        try:
            kind, payload = parent.recv()
        except (EOFError, OSError):
            code = proc.exitcode
            self._kill()
            raise WorkerError(f"the measuring worker died while starting ({describe_exit(code)})") from None
        if kind == "autotune_error":
            self._kill()
            raise payload
        if kind != "ready":
            self._kill()
            raise WorkerError(f"the measuring worker failed to start:\n{payload}")

    def _check_folder(self) -> None:
        """WorkerError where the run's temporary folder is gone (a batch job's clean-up, a
        tmp cleaner): the worker can neither start nor build there (trial 68: the measurement
        in flight hung to its limit and was stored as a timeout, then a traceback)."""
        folder = Path(self.setup.workload_file).parent
        if not Path(self.setup.workload_file).exists():
            raise WorkerError(f"the run's temporary folder {folder} was deleted while it ran (a batch job's clean-up "
                              "or a tmp cleaner?): give the run a TMPDIR that lasts as long as it does")

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        if self.setup.program_cache:  # the dead worker's lock, if it held it (see Setup)
            (Path(self.setup.program_cache) / "lock").unlink(missing_ok=True)

    def recheck(self, params: Mapping[str, Value], limit_s: float | None) -> Measurement:
        return self.evaluate(params, limit_s, strict=True)

    def evaluate(self, params: Mapping[str, Value], limit_s: float | None,
                 cutoff_ms: float | None = None, verify: bool = True, strict: bool = False) -> Measurement:
        t0 = time.perf_counter()
        conn = self._send(("measure", (dict(params), cutoff_ms, verify, strict)))
        try:
            ready = poll_awake(conn, limit_s)
        except KeyboardInterrupt:
            self._kill()
            raise
        if not ready:
            self._kill()
            self.restarts += 1
            self._check_folder()  # not a timeout of the configuration's (trial 68)
            return Measurement(Status.TIMEOUT, f"no result within {limit_s:.3g} s; worker killed",
                               wall_s=time.perf_counter() - t0, params=dict(params), limit_s=limit_s)
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            if self._proc is not None:
                self._proc.join(5)
                code = self._proc.exitcode
            self._kill()
            self.restarts += 1
            said = capture.tail(Path(self.setup.stderr_file)) if self.setup.stderr_file else ""
            return Measurement(Status.CRASHED, died(code) + last_output(said),
                               wall_s=time.perf_counter() - t0, params=dict(params))
        if kind == "autotune_error":
            self._kill()
            raise payload
        if kind == "error":
            self._kill()
            raise WorkerError(f"unexpected error while measuring {dict(params)}:\n{payload}")
        if payload.context_lost:
            # a failed enqueue or run can leave the context unusable; start the next one clean
            # (a work-group too large for the built kernel is caught before enqueueing: no restart)
            self._kill()
            self.restarts += 1
        return payload

    def _send(self, message: tuple[str, Any]) -> Connection:
        """Send to the worker, starting it first; a worker that died since its last reply
        (killed between trials, say) is started again instead of ending the run."""
        for attempt in (1, 2):
            if self._conn is None:
                self._start()  # raises WorkerError unless the worker is ready
            assert self._conn is not None
            try:
                self._conn.send(message)
                return self._conn
            except (BrokenPipeError, ConnectionResetError):
                self._kill()
                self.restarts += 1
                if attempt == 2:
                    raise WorkerError("the measuring worker died twice before it could be sent "
                                      "a candidate; see the messages above") from None
        raise AssertionError("unreachable")

    def prefetch(self, upcoming: list[dict[str, Value]]) -> None:
        """Announce the next candidates so the worker builds them while it measures."""
        if self._conn is not None and upcoming:
            self._send(("prefetch", [dict(p) for p in upcoming]))

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(("stop", None))
            except OSError:
                pass
            if self._proc is not None:
                self._proc.join(2)
        self._kill()


def died(code: int | None) -> str:
    """A crashed measurement's reason: how its worker ended."""
    return f"worker died: {describe_exit(code)}"


def describe_exit(code: int | None) -> str:
    """How a child process ended, in words."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def poll_awake(conn: Any, limit_s: float | None) -> bool:
    """``conn.poll(limit_s)``, counting only the time this process was running: one stopped
    (Ctrl-Z, SIGSTOP, a paused VM) with its worker, and continued, waits on for the measurement,
    which was stopped as long (trial 64: a 25 s stop under --max-time-per-config 5 recorded a
    0.35 ms configuration as a timeout, never to be measured again at that limit). Waits in
    steps of :data:`POLL_STEP_S`; a step that took :data:`STOPPED_S` longer than asked counts as
    asked."""
    if limit_s is None:
        return bool(conn.poll(None))
    left = limit_s
    while left > 0:
        step = min(left, POLL_STEP_S)
        t0 = time.monotonic()
        if conn.poll(step):
            return True
        took = time.monotonic() - t0
        left -= step if took > step + STOPPED_S else took
    return False


#: How long :func:`poll_awake` waits at a time, and how much longer than that a wait must take
#: to count as a stop of the process (a loaded machine is late by milliseconds).
POLL_STEP_S = 1.0
STOPPED_S = 2.0


def last_output(said: str) -> str:
    """A dead worker's last output for its trial's reason ('' for none). LLVM's crash handler,
    which OpenCL runtimes built on LLVM install, asks for a compiler bug report on any crash in
    the process, a kernel's own write outside its buffers included (trial 17).

    Example:
        >>> last_output("PLEASE submit a bug report to https://llvm.org/ | Stack dump:")[:60]
        '; its last output: PLEASE submit a bug report to https://llv'
    """
    if not said:
        return ""
    llvm = (" (LLVM's crash handler in the OpenCL runtime prints this on any crash of the process, a kernel "
            "that reads or writes outside its buffers included: not only a compiler fault)"
            if "PLEASE submit a bug report" in said else "")
    return f"{LAST_OUTPUT}{said}{llvm}"


#: How a dead worker's reason introduces its last output (:func:`last_output`).
LAST_OUTPUT = "; its last output: "

