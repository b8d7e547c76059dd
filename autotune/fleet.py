"""Several devices of this host on one study: a worker process per device, one merged progress.

Each worker is an ordinary run (:func:`~autotune.tuner.tune`) in a process of its own, with
its own device; workers on devices of one model (one slug) share that model's study in the
storage and so cooperate through its claims (:mod:`autotune.claims`); devices of other
models get studies of their own, since their timings differ. The trial budget is the
study's: each study gets ``trials`` new measurements in all, whichever worker makes them.

Example:
    >>> results = tune_together("matmul", TuneOptions(trials=40), {}, select_many("all"),
    ...                         progress=print)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from . import stops
from .device import DeviceInfo
from .errors import (
    AutotuneError,
    AutotuneWarning,
    ProblemError,
    ProfileNotSaved,
    SaveStopped,
    TuningInterrupted,
    own_warnings,
    warn,
)
from .processes import WORKER_PREFIX
from .result import Measurement
from .space import config_key
from .spec import KernelSpec
from .study import IN_MEMORY, measured_count, require_file, stored_measurements
from .tuner import RunState, TuneOptions, TuneReport, check_saveable, save_best, study_name, tune
from .worker import describe_exit, start_resource_tracker, starting

#: (worker label, event, measurement, the worker's counters) as the tuner's progress gives them
FleetProgress = Callable[[str, str, Measurement | None, RunState], None]


@dataclass(frozen=True)
class WorkerResult:
    """How one worker ended: its report, or why it has none."""

    label: str
    info: DeviceInfo
    report: TuneReport | None = None
    error: str | None = None
    signum: int | None = None  # the signal that interrupted it (it kept its best)


def labels(infos: list[DeviceInfo]) -> list[str]:
    """Each worker's name in the progress: its selector, numbered when a device has several."""
    count = Counter(d.selector for d in infos)
    seen: Counter[str] = Counter()
    out = []
    for d in infos:
        seen[d.selector] += 1
        out.append(d.selector if count[d.selector] == 1 else f"{d.selector}#{seen[d.selector]}")
    return out


def groups(infos: list[DeviceInfo]) -> dict[str, list[str]]:
    """Device slug -> the workers that share its study."""
    out: dict[str, list[str]] = {}
    for d, label in zip(infos, labels(infos), strict=True):
        out.setdefault(d.slug, []).append(label)
    return out


def require_shared(options: TuneOptions, infos: list[DeviceInfo]) -> None:
    """ProblemError unless the workers that share a study (devices of one model) can share its
    storage, and the storage names a database file; devices of other models each tune a study
    of their own, which :memory: can hold (trial 96: refused as though shared)."""
    shared = [slug for slug, members in groups(infos).items() if len(members) > 1]
    if options.storage == IN_MEMORY and shared:
        raise ProblemError(f"the devices of {shared[0]} share a study, which --storage :memory: cannot hold (it is one "
                           "process's own): leave --storage out (SQLite in $AUTOTUNE_HOME) or give a database URL")
    if options.storage not in (None, IN_MEMORY):
        require_file(options.storage)  # before the run's first lines (trial 97)


def tune_together(spec: KernelSpec, options: TuneOptions, problem: Mapping[str, Any],
                  infos: list[DeviceInfo], progress: FleetProgress) -> list[WorkerResult]:
    """Tune ``spec`` with one worker process per device; returns each worker's outcome.

    Ctrl-C reaches every worker (one process group), and a SIGTERM to this process is passed
    on to them: each stops, and this waits for them. A worker whose parent is gone (killed)
    stops the same way rather than tune on alone, and saves its best itself. Otherwise this
    saves each study's best once, the fastest of its workers' (trial 35: each worker saved its
    own, so the profile kept whichever finished last, and the summary showed another).
    """
    require_shared(options, infos)
    problem = spec.resolve_problem(problem)
    if options.save:  # a profile that cannot take the result stops the run now, not at its end
        for d in {d.slug: d for d in infos}.values():
            check_saveable(spec, d, problem)  # trial 46: a namesake's entry was replaced here
    budgets = {d.slug: measured_count(study_name(spec, d, problem), options.storage) + options.trials
               for d in infos}
    ctx = mp.get_context("spawn")  # a forked child would share the parent's OpenCL state
    start_resource_tracker()  # before the queue, whose semaphores start it otherwise
    events: Any = ctx.Queue()
    stop: Any = ctx.Value("i", 0, lock=False)  # the stop signal this command got (0: none yet)
    procs = {}
    for i, (d, label) in enumerate(zip(infos, labels(infos), strict=True)):
        study_budget = min(options.study_trials or budgets[d.slug], budgets[d.slug])
        mine = replace(options, device=d.selector, study_trials=study_budget, save=False,
                       seed=None if options.seed is None else options.seed + i)
        procs[label] = (d, ctx.Process(target=_work, args=(spec, mine, problem, label, events, stop, options.save),
                                       name=f"{WORKER_PREFIX}{label}"))
    with _stops_passed_on(procs, stop):
        with starting(*stops.signals()):  # inherited: a worker's start-up is not cut short
            for _, p in procs.values():
                p.start()
        results = _collect(procs, events, progress)
    if stop.value:  # the command's own stop names the exit status: a SIGHUP reached the workers as SIGTERM
        results = [replace(r, signum=stop.value) if r.signum is not None else r for r in results]
    with stops.held():  # the studies' bests are saved now: a stop must not cut that short
        return _saved(results, options) if options.save else results


def _save_best(report: TuneReport, storage: str | None) -> TuneReport:
    """save_best, knowing what the study's workers measured, as a run on one device knows its
    own (trial 99: an entry they measured slower than the best was kept as faster than it)."""
    if not (seen := stored_measurements(report.study_name, storage)):  # in memory, or not read: the rounds tell
        return save_best(report, storage)
    return save_best(report, storage, measured=lambda config: seen.get(config_key(config)))


def _saved(results: list[WorkerResult], options: TuneOptions) -> list[WorkerResult]:
    """``results`` with each study's best saved from the report of the worker that found it
    (its ``error`` says why, where the profile could not take it)."""
    out = list(results)
    stopped: str | None = None  # why saving stopped: a stop while a save waited for the profile's lock
    for slug in dict.fromkeys(r.info.slug for r in results):
        found = [(r.report.best.median_ms, i, r.report) for i, r in enumerate(out)
                 if r.info.slug == slug and r.report is not None and r.report.best is not None]
        if not found:
            continue
        _, i, report = min(found, key=lambda f: f[:2])
        try:
            if stopped is not None:
                raise SaveStopped(stopped)
            out[i] = replace(out[i], report=_save_best(report, options.storage))
        except SaveStopped as exc:  # as a run on one device (trial 84: exit 1, every summary lost)
            stopped = stopped or f"the command was stopped before it saved this study's best ({exc})"
            out[i] = replace(out[i], report=replace(report, profile_verdict=str(exc)),
                             signum=out[i].signum or stops.last_stop_signal())
        except ProfileNotSaved as exc:
            assert isinstance(exc.report, TuneReport)
            out[i] = replace(out[i], report=exc.report, error=str(exc))
    return out


@contextmanager
def _stops_passed_on(procs: Mapping[str, tuple[DeviceInfo, Any]], stop: Any) -> Iterator[None]:
    """SIGTERM to this process goes on to the workers (a ``kill`` names one process; without
    this the workers would tune on, orphaned, and hang on their last message), and so does
    SIGINT: a terminal's Ctrl-C reaches them itself (one process group), but `kill -INT` or
    `timeout -s INT` names this process alone (trial 125: a worker in its confirmation rounds
    finished them and saved a full entry); a worker's second stop is noted only
    (:func:`stops.raise_interrupt`). Either is noted in ``stop`` for the workers still starting
    up, which hold both back until they can stop cleanly (trial 33: tracebacks, exit status 1)."""
    def pass_on(signum: int, frame: Any) -> None:
        stop.value = stop.value or signum  # the first names the exit status
        for _, p in procs.values():
            if p.pid is not None and p.is_alive():
                # SIGTERM (or SIGINT): the worker stops, and its report comes back to be saved
                with contextlib.suppress(ProcessLookupError):  # (it ended since is_alive looked)
                    os.kill(p.pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    with stops.handled(pass_on, pass_on):
        yield


def _collect(procs: dict[str, tuple[DeviceInfo, Any]], events: Any,
             progress: FleetProgress) -> list[WorkerResult]:
    """Pass the workers' progress on until each has reported or died."""
    results: dict[str, WorkerResult] = {}
    quiet_polls: Counter[str] = Counter()
    while len(results) < len(procs):
        try:
            kind, label, *rest = events.get(timeout=0.5)
        except queue.Empty:
            for label, (d, p) in procs.items():  # dead with nothing more to say (after a last look)
                if label not in results and not p.is_alive():
                    quiet_polls[label] += 1
                    if quiet_polls[label] > 2:
                        results[label] = WorkerResult(label, d, error=f"ended without a summary "
                                                      f"({describe_exit(p.exitcode)})")
            continue
        except KeyboardInterrupt:  # the workers got it too: wait for them to save and stop
            continue
        d = procs[label][0]
        if kind == "progress":
            progress(label, *rest)
        elif kind == "done":
            results[label] = WorkerResult(label, d, report=rest[0])
        elif kind == "interrupted":
            results[label] = WorkerResult(label, d, report=rest[0], signum=rest[1])
        elif kind == "warning":  # said here, as a run on one device says it (once, where workers repeat it)
            warn(rest[0])
        elif kind == "stopped":
            results[label] = WorkerResult(label, d, error="stopped before it started tuning", signum=rest[0])
        else:
            results[label] = WorkerResult(label, d, error=rest[0])
    for _, p in procs.values():
        p.join(10)
    return [results[label] for label in procs]


def _work(spec: KernelSpec, options: TuneOptions, problem: dict[str, Any], label: str, events: Any,
          stop: Any, save: bool) -> None:
    """One worker: an ordinary run whose progress and outcome go to the parent, which saves the
    study's best; where the parent is gone, the worker saves its own (``save``: the command's
    choice). It starts with Ctrl-C and SIGTERM held back (:func:`worker.starting`); a stop the
    command got meanwhile is in ``stop``, and is taken as this worker's own."""
    parent = mp.parent_process()

    def progress(event: str, m: Measurement | None, state: RunState) -> None:
        if parent is not None and not parent.is_alive():  # nobody reads on: stop as on SIGTERM
            events.cancel_join_thread()  # what is left in the queue must not keep this process
            os.kill(os.getpid(), signal.SIGTERM)
        elif stop.value and not stops.stop_requested():  # it came before this worker could take it
            os.kill(os.getpid(), stop.value)
        events.put(("progress", label, event, m, state))

    shown = warnings.showwarning

    def to_parent(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
        # trial 51: printed here in Python's form (a source line of multiprocessing), once per worker
        if issubclass(category, AutotuneWarning):
            events.put(("warning", label, str(message)))
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = to_parent
    own_warnings()
    try:
        for s in stops.signals():
            signal.signal(s, stops.raise_interrupt)
        # held since its start (worker.starting), so that a stop then is neither lost (trial 44:
        # ignored instead, a Ctrl-C during slow starts left both workers tuning) nor a traceback
        stops.unblock(*stops.signals())
        if stop.value:
            os.kill(os.getpid(), stop.value)
        report = tune(spec, options, problem, progress)
        # from here, on every way out, stops are noted only: this worker's last message is on its
        # way, and a KeyboardInterrupt as it exits was a traceback (trial 69)
        stops.hold()
        events.put(("done", label, report))
    except TuningInterrupted as exc:
        stops.hold()
        report = exc.args[0]
        if save and parent is not None and not parent.is_alive():  # nobody else will save it
            try:
                report = _save_best(report, options.storage)
            except AutotuneError:
                pass  # nobody to tell: the study keeps the trials
        events.put(("interrupted", label, report, exc.signum))
    except AutotuneError as exc:
        stops.hold()
        events.put(("error", label, str(exc)))
    except KeyboardInterrupt:  # before the run had started
        stops.hold()
        events.put(("stopped", label, stops.last_stop_signal()))



