"""The tuning loop: ask optuna → check → build → verify → time → tell, then save the best.

Only configurations that pass the constraint check are built; only verified ones can win.
``--trials`` counts new measurements: invalid and already-measured configurations do not
use it up. The study lives in optuna RDB storage keyed by kernel, device, problem and spec
hash, so running the same command again resumes it. The first candidates are the baseline,
the device's earlier winners (:func:`previous_winners`), the spec's default and its hints.

Example:
    >>> report = tune("matmul", TuneOptions(trials=5), problem={"M": 64, "N": 64, "K": 64})
    ... # doctest: +SKIP
    >>> report.best.params  # doctest: +SKIP
"""

from __future__ import annotations

import math
import random
import signal
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import optuna
from filelock import FileLock

from . import device as devices
from . import profiles, settings
from . import spec as specs
from .bench import Measurement, Status, TimingOptions, make_workload
from .device import DeviceInfo
from .diagnose import SameBuildError, explain
from .errors import BuildError, ProblemError, TuningInterrupted
from .space import check, config_key, enumerate_valid, space_size
from .spec import KernelSpec, Value
from .worker import Evaluator, InProcessEvaluator, IsolatedEvaluator, Setup, save_workload, workload_folder

SAMPLERS = ("tpe", "random", "grid")
_STUCK_AFTER = 8  # consecutive repeated/invalid proposals before we pick an unmeasured one


@dataclass(frozen=True)
class TuneOptions:
    """Options of one tuning run (the CLI's flags)."""

    trials: int = 40
    timeout_s: float | None = 150.0
    sampler: str = "tpe"
    seed: int | None = None
    storage: str | None = None
    device: str | None = None
    max_time_per_config: float | None = None
    isolate: bool = True
    timing: TimingOptions = field(default_factory=TimingOptions)
    save: bool = True
    compile_ahead: int | None = None  # candidates built ahead; None: 2 on GPUs, 0 on CPUs
    prune: float = 3.0  # time a candidate once when a launch takes over prune x the best; 0: never


@dataclass(frozen=True)
class TrialRecord:
    """One evaluated configuration as the tuner saw it."""

    number: int
    params: Mapping[str, Value]
    status: Status
    median_ms: float
    message: str = ""
    spread_ms: tuple[float, float] | None = None
    error: float | None = None
    wall_s: float = 0.0
    max_error: float | None = None
    pruned: bool = False  # timed once: over the cut-off (TuneOptions.prune) at its first launch

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class TuneReport:
    """What a run did and found; the CLI prints it, the API returns it."""

    spec: KernelSpec
    device: DeviceInfo
    problem: Mapping[str, Any]
    best: TrialRecord | None
    baseline: TrialRecord | None
    measured: int
    skipped_invalid: int
    repeats: int
    failures: Mapping[str, int]
    failure_examples: Mapping[str, str]
    study_trials: int
    valid_space: int
    full_space: int
    stopped_by: str
    wall_s: float
    study_name: str
    profile_path: Path | None = None
    profile_verdict: str | None = None
    pruned: int = 0

    def throughput(self, record: TrialRecord | None = None) -> dict[str, float]:
        """The spec's metrics for ``record`` (default: the best)."""
        record = record or self.best
        if record is None or not record.ok:
            return {}
        env = dict(self.problem, seconds=record.median_ms * 1e-3)
        return {name: float(e(env)) for name, e in self.spec.metrics}

    @property
    def speedup(self) -> float | None:
        if self.best and self.baseline and self.baseline.ok:
            return self.baseline.median_ms / self.best.median_ms
        return None


Progress = Callable[[str, TrialRecord | None, "RunState"], None]


@dataclass
class RunState:
    """Mutable counters of a run in progress (seen by the progress callback)."""

    budget: int
    measured: int = 0
    skipped_invalid: int = 0
    repeats: int = 0
    pruned: int = 0
    best: TrialRecord | None = None
    baseline: TrialRecord | None = None
    failures: Counter[str] = field(default_factory=Counter)
    failure_examples: dict[str, str] = field(default_factory=dict)


def problem_label(problem: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in problem.items())


def study_name(spec: KernelSpec, info: DeviceInfo, problem: Mapping[str, Any]) -> str:
    return f"{spec.name}|{info.slug}|{problem_label(problem)}|{spec.spec_hash}"


def _sampler(name: str, seed: int | None, n_startup: int) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(multivariate=True, group=True,
                                              n_startup_trials=n_startup, seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


def startup_trials(valid: int, budget: int) -> int:
    """Random start-up trials before TPE models: ~√(valid space), within a third of the budget."""
    return max(3, min(int(round(math.sqrt(valid))), 30, max(3, budget // 3)))


def balanced_index(configs: list[dict[str, Value]], names: tuple[str, ...], rng: random.Random) -> int:
    """Index of a random configuration, drawn parameter by parameter.

    Each parameter's value is chosen uniformly among the values that still have a valid
    completion, so a variant with few valid configurations (e.g. the naive kernel) is drawn
    as often as one with thousands; uniform sampling over the valid list would not.
    """
    idx = list(range(len(configs)))
    for name in names:
        values = sorted({repr(configs[i][name]) for i in idx})
        chosen = values[rng.randrange(len(values))]
        idx = [i for i in idx if repr(configs[i][name]) == chosen]
    return idx[rng.randrange(len(idx))]


def _record(trial: optuna.trial.FrozenTrial) -> TrialRecord | None:
    attrs = trial.user_attrs
    if "status" not in attrs:
        return None
    spread = attrs.get("spread_ms")
    return TrialRecord(trial.number, dict(trial.params), Status(attrs["status"]),
                       float(attrs.get("median_ms", math.inf)), attrs.get("message", ""),
                       tuple(spread) if spread else None, attrs.get("error"), attrs.get("wall_s", 0.0),
                       attrs.get("max_error"), bool(attrs.get("pruned", False)))


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def previous_winners(spec: KernelSpec, info: DeviceInfo, problem: Mapping[str, Any],
                     limit: int = 3) -> list[dict[str, Value]]:
    """Configurations that won on this device before, nearest problem first.

    Entries of an older spec version count too: re-tuning after a template edit then starts
    from the old winner. Stored values the space no longer has are dropped; the caller checks
    the rest against the problem.
    """
    found = profiles.collect(spec.name, info.slug, profiles.search_folders(settings.profiles_dir()),
                             lambda exc: None)  # a broken profile is reported when saving
    ranked = sorted((profiles.distance(dict(problem), dict(e.problem)), e.spec_hash != spec.spec_hash,
                     e.time_ms, i) for i, (e, _) in enumerate(found))
    out: list[dict[str, Value]] = []
    for dist, _, _, i in ranked:
        params = spec.from_stored(found[i][0].params, found[i][0].build_flags)
        if math.isfinite(dist) and params is not None and params not in out:
            out.append(params)
    return out[:limit]


def tune(kernel: str | KernelSpec, options: TuneOptions = TuneOptions(),
         problem: Mapping[str, Any] | None = None, progress: Progress | None = None,
         evaluator: Evaluator | None = None, info: DeviceInfo | None = None) -> TuneReport:
    """Tune ``kernel`` (a built-in name, a spec path or a loaded spec) and save its profile.

    ``evaluator`` and ``info`` replace the real device (tests use a fake one).
    Raises TuningInterrupted (carrying the report) on SIGINT/SIGTERM after saving the best.
    """
    t_start = time.perf_counter()
    spec = kernel if isinstance(kernel, KernelSpec) else specs.load(kernel)
    if options.sampler not in SAMPLERS:
        raise ProblemError(f"unknown sampler {options.sampler!r}; choose {', '.join(SAMPLERS)}")
    if options.trials < 1:
        raise ProblemError(f"--trials must be at least 1 (got {options.trials})")
    if options.prune < 0 or 0 < options.prune < 1:  # below the best: could prune the next winner
        raise ProblemError(f"--prune must be 0 (off) or at least 1 (got {options.prune:g})")
    if info is None:
        info = devices.select(options.device)[0]
    prob = spec.resolve_problem(problem)
    facts = info.facts()
    valid = enumerate_valid(spec, prob, facts)
    if not valid:
        raise ProblemError(
            f"no configuration of {spec.name} is valid for {problem_label(prob)} on {info.name}; "
            "use sizes the tile sizes divide (e.g. multiples of 64)")
    baseline = spec.complete(dict(spec.baseline))
    if check(spec, baseline, prob, facts) is not None:
        baseline = None  # the naive variant cannot run this problem; report without speed-up
    rng = random.Random(options.seed)
    state = RunState(budget=options.trials)
    say = progress or (lambda *a: None)

    name = study_name(spec, info, prob)
    n_startup = startup_trials(len(valid), options.trials)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=open_storage(options.storage),
                                direction="minimize", load_if_exists=True,
                                sampler=_sampler(options.sampler, options.seed, n_startup))
    distributions = {p.name: optuna.distributions.CategoricalDistribution(list(p.values))
                     for p in spec.parameters}
    _discard_waiting(study)

    seen: dict[str, TrialRecord] = {}
    for t in study.get_trials(deepcopy=False):
        rec = _record(t)
        if rec is not None and rec.status is not Status.INTERRUPTED:
            seen.setdefault(config_key(rec.params), rec)
            if rec.ok and (state.best is None or rec.median_ms < state.best.median_ms):
                state.best = rec
    # configurations measured (built and run, whatever the outcome) in this study so far
    measured_total = sum(1 for r in seen.values() if r.status is not Status.INVALID)
    if baseline is not None:
        state.baseline = seen.get(config_key(baseline))
    unmeasured = [c for c in valid if config_key(c) not in seen]
    valid_keys = {config_key(c) for c in valid}
    remaining = len(unmeasured)
    if options.sampler == "random":
        rng.shuffle(unmeasured)

    def draw() -> dict[str, Value] | None:
        while unmeasured:
            if options.sampler == "grid":
                c = unmeasured.pop(0)
            else:
                c = unmeasured.pop(balanced_index(unmeasured, spec.parameter_names, rng))
            if config_key(c) not in seen:
                return c
        return None

    # Compile ahead: where the next candidates are known in advance (grid, random, start-up),
    # they are drawn early and announced, so the worker builds them while it times this one.
    # Build threads compete with a CPU device's kernels, hence the GPU-only default.
    ahead = options.compile_ahead if options.compile_ahead is not None else (2 if info.is_gpu else 0)
    upcoming: list[dict[str, Value]] = []

    def pick_unmeasured() -> dict[str, Value] | None:
        while upcoming:
            c = upcoming.pop(0)
            if config_key(c) not in seen:
                return c
        return draw()

    def announce(next_forced: bool) -> None:
        prefetch = getattr(evaluator, "prefetch", None)
        if ahead <= 0 or prefetch is None:
            return
        while next_forced and len(upcoming) < ahead:
            c = draw()
            if c is None:
                break
            upcoming.append(c)
        prefetch(due + (upcoming if next_forced else []))

    def tell(trial: optuna.trial.Trial, rec: TrialRecord, repeat: bool = False) -> None:
        for key, value in (("status", rec.status.value), ("median_ms", rec.median_ms),
                           ("message", rec.message[:2000]), ("wall_s", rec.wall_s),
                           ("spread_ms", list(rec.spread_ms) if rec.spread_ms else None),
                           ("error", rec.error), ("max_error", rec.max_error), ("repeat", repeat),
                           ("pruned", rec.pruned or None)):
            if value is not None:
                trial.set_user_attr(key, value)
        study.tell(trial, rec.median_ms * 1e-3 if rec.ok else math.inf)

    close_evaluator = evaluator is None
    folder = workload_folder()
    stopped_by = "trials"
    limit = options.max_time_per_config
    in_flight: optuna.trial.Trial | None = None
    say("start", None, state)
    with folder, _sigterm_as_interrupt():
        try:
            if evaluator is None:
                workload = make_workload(spec, prob, seed=options.seed or 0)
                timing = replace(options.timing, compile_threads=max(ahead, 0))
                setup = Setup(str(spec.path), info.selector, dict(prob),
                              save_workload(workload, Path(folder.name)) if options.isolate else "",
                              timing)
                evaluator = IsolatedEvaluator(setup) if options.isolate else InProcessEvaluator(setup, workload)
            stuck = 0
            broken = SameBuildError()
            # the baseline first (for the speed-up), then earlier winners on this device, the
            # spec's default and hints: good incumbents from the start steer the search
            starts = [baseline, *previous_winners(spec, info, prob), spec.complete(dict(spec.default))]
            starts += [spec.complete(dict(h)) for h in spec.hints]
            due: list[dict[str, Value]] = []
            for c in starts:
                if (c is not None and config_key(c) not in seen and check(spec, c, prob, facts) is None
                        and all(config_key(c) != config_key(d) for d in due)):
                    due.append(c)
            while True:
                if state.measured >= options.trials:
                    stopped_by = "trials"
                    break
                if options.timeout_s is not None and time.perf_counter() - t_start > options.timeout_s:
                    stopped_by = "timeout"
                    break
                if remaining == 0:
                    stopped_by = "exhausted"
                    break
                forced = options.sampler != "tpe" or measured_total < n_startup or stuck >= _STUCK_AFTER
                if due:
                    study.enqueue_trial(due.pop(0))
                elif forced:
                    choice = pick_unmeasured()
                    if choice is None:
                        stopped_by = "exhausted"
                        break
                    study.enqueue_trial(choice)
                    stuck = 0
                trial = study.ask(distributions)
                in_flight = trial
                params = {n: trial.params[n] for n in spec.parameter_names}
                key = config_key(params)
                if key in seen:
                    tell(trial, seen[key], repeat=True)
                    in_flight = None
                    state.repeats += 1
                    stuck += 1
                    continue
                reason = check(spec, params, prob, facts)
                if reason:
                    rec = TrialRecord(trial.number, params, Status.INVALID, math.inf, reason)
                    tell(trial, rec)
                    in_flight = None
                    seen[key] = rec
                    state.skipped_invalid += 1
                    stuck += 1
                    continue
                stuck = 0
                is_baseline = baseline is not None and key == config_key(baseline)
                announce(options.sampler != "tpe" or measured_total + 1 < n_startup)
                # the baseline is timed in full for the speed-up; others only while they could win
                cutoff = (options.prune * state.best.median_ms
                          if options.prune > 0 and state.best is not None and not is_baseline else None)
                m = evaluator.evaluate(params, None if is_baseline and limit is None else limit, cutoff)
                rec = _from_measurement(trial.number, params, m)
                tell(trial, rec)
                in_flight = None
                seen[key] = rec
                remaining -= key in valid_keys
                state.measured += 1
                state.pruned += rec.pruned
                measured_total += 1
                if is_baseline:
                    state.baseline = rec
                if limit is None and is_baseline:
                    limit = default_time_limit(rec)
                if rec.ok:
                    if state.best is None or rec.median_ms < state.best.median_ms:
                        state.best = rec
                else:
                    state.failures[rec.status.value] += 1
                    state.failure_examples.setdefault(rec.status.value, rec.message)
                say("trial", rec, state)
                if broken.add(rec.status is Status.COMPILE_ERROR, rec.message) and state.best is None:
                    stopped_by = "broken"
                    break
        except KeyboardInterrupt:
            stopped_by = "interrupted"
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # finish saving before another Ctrl-C
            if in_flight is not None:
                in_flight.set_user_attr("status", Status.INTERRUPTED.value)
                study.tell(in_flight, state=optuna.trial.TrialState.FAIL)
        finally:
            if evaluator is not None and close_evaluator:
                evaluator.close()

    if stopped_by == "broken":  # nothing can build: say why instead of a summary of failures
        raise BuildError(explain(state.failure_examples["compile_error"], spec.source,
                                 spec.template.name, spec.macros(prob), f"{info.name} ({info.platform})",
                                 state.measured))
    report = TuneReport(
        spec=spec, device=info, problem=prob, best=state.best, baseline=state.baseline,
        measured=state.measured, skipped_invalid=state.skipped_invalid, repeats=state.repeats,
        failures=dict(state.failures), failure_examples=dict(state.failure_examples),
        study_trials=measured_total, pruned=state.pruned,
        valid_space=len(valid), full_space=space_size(spec), stopped_by=stopped_by,
        wall_s=time.perf_counter() - t_start, study_name=name)
    if options.save and report.best is not None:
        report = _save(report, partial=stopped_by == "interrupted")
    if stopped_by == "interrupted":
        signal.signal(signal.SIGINT, signal.default_int_handler)
        raise TuningInterrupted(report)
    return report


def _discard_waiting(study: optuna.Study) -> None:
    """Fail the trials a stopped run enqueued but never asked for.

    An interrupt between ``enqueue_trial`` and ``ask`` leaves a WAITING trial; the next run's
    ``ask`` would return it instead of the configuration just enqueued, and one configuration
    would never be measured.
    """
    for _ in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
        trial = study.ask()
        trial.set_user_attr("status", Status.INTERRUPTED.value)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)


def open_storage(url: str | None) -> optuna.storages.BaseStorage:
    """The optuna RDB storage; SQLite files are created under a lock (concurrent first runs)."""
    url = url or settings.default_storage()
    if not url.startswith("sqlite:///"):
        return optuna.storages.RDBStorage(url)
    path = Path(url[len("sqlite:///"):])
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=120):
        # a generous busy timeout: several runs may write to one study database at once
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})


def default_time_limit(baseline: TrialRecord) -> float:
    """Per-candidate limit once the baseline is known: generous for compiles, tight for hangs."""
    return max(30.0, 10.0 * baseline.wall_s)


def _from_measurement(number: int, params: Mapping[str, Value], m: Measurement) -> TrialRecord:
    return TrialRecord(number, dict(params), m.status, m.median_ms, m.message,
                       m.spread if m.ok else None, m.error, m.wall_s, m.max_error, m.pruned)


def _save(report: TuneReport, partial: bool) -> TuneReport:
    best = report.best
    assert best is not None and best.ok
    spec = report.spec
    entry = profiles.Entry(
        problem=dict(report.problem),
        params=spec.without_flags(best.params),
        build_flags=tuple(spec.enabled_flags(best.params)),
        time_ms=round(best.median_ms, 6),
        throughput={k: round(v, 3) for k, v in report.throughput().items()},
        trials=report.study_trials,
        tuned_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        spec_hash=spec.spec_hash,
        partial=partial,
        baseline_ms=round(report.baseline.median_ms, 6) if report.baseline and report.baseline.ok else None,
        spread_ms=tuple(round(x, 6) for x in best.spread_ms) if best.spread_ms else None,
        error=float(f"{best.error:.3g}") if best.error is not None else None,
        max_error=float(f"{best.max_error:.3g}") if best.max_error is not None else None,
    )
    path = profiles.path_for(report.device.slug, settings.profiles_dir())
    verdict = profiles.save(entry, spec.name, report.device.profile_header(), path)
    return replace(report, profile_path=path, profile_verdict=verdict)

