"""The tuning loop: ask → check → measure → tell, then save the best verified configuration.

Only configurations that pass the constraint check are built; only verified ones can win.
``--trials`` counts new measurements: invalid and already-measured configurations do not use
it up. The parts: options checked in :class:`TuneOptions`, candidates from
:class:`~autotune.proposer.Proposer` and TPE's :class:`~autotune.parzen.ParzenSearch`, the study in
:class:`~autotune.study.StudyLog`, measuring behind :class:`~autotune.worker.Evaluator`, the
counters in :class:`RunState`. The first candidates are the baseline, the device's earlier
winners (or, where it has none, other devices' winners: :mod:`~autotune.warmstart`), the spec's
default and its hints.

Example:
    >>> report = tune("matmul", TuneOptions(trials=5), problem={"M": 64, "N": 64, "K": 64})
    ... # doctest: +SKIP
    >>> report.best.params  # doctest: +SKIP
"""

from __future__ import annotations

import math
import numbers
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import optuna

from . import device as devices
from . import profiles, record, scratch, settings, stops
from . import spec as specs
from .claims import GRACE_S, Claims
from .device import DeviceInfo
from .diagnose import SameBuildError, SameWrongResult, explain
from .errors import (
    AutotuneError,
    BuildError,
    OptionError,
    ProblemError,
    ProfileError,
    ProfileNotSaved,
    SaveStopped,
    StorageError,
    TuningInterrupted,
    WorkerError,
    first_line,
    warn,
)
from .fits import check_fits
from .limits import KernelLimits
from .measure import TimingOptions, Workload, compute_workload, reference_watch
from .parzen import POOL_ALL, ParzenSearch
from .proposer import Proposer, Sampler, startup_trials
from .result import Measurement, Status
from .ruledout import NeverValid, commonest, never_valid
from .signatures import check_numbers
from .space import ValidSpace, WalkTimeout, canonical, check, config_key, geometry, none_valid, space_size
from .spec import BUILTIN_FILE, KernelSpec, Value, config_label, problem_label
from .study import IN_MEMORY, StudyId, StudyLog, quiet_optuna
from .warmstart import other_devices, previous_winners
from .worker import LAST_OUTPUT, Evaluator, Setup, died, open_evaluator

_STUCK_AFTER = 8  # consecutive repeated/invalid proposals before we pick an unmeasured one
#: The baseline's time limit when --max-time-per-config is not given (the others' limit is
#: derived from the baseline's time): generous, but a hanging baseline must not run forever.
BASELINE_LIMIT_S = 300.0
#: After the search the leaders are timed again, interleaved (see _Run.confirm).
CONFIRM_LEADERS, CONFIRM_ROUNDS = 5, 3
#: The baseline is timed again with them when its median is at most this (a round of it takes
#: about a second at most).
BASELINE_RETIME_MS = 200.0
#: A variant measured this many times in a run and never correctly is named in the summary.
UNVERIFIED = 3
#: After the start-up draws, how candidates are chosen, in turn: by TPE (which models where
#: the fast configurations are), as a neighbour of the best so far ("local": the one-parameter
#: move the main-effects ridge model ranks first, parzen.OPTIMISM; once those are all
#: measured, its first two-parameter move), by TPE, and as the pool's configuration the pairs
#: ridge model predicts fastest ("fit"; autotune.ridge). TPE alone stalled a few percent above
#: the optimum on recorded GEMM spaces, where a local step finds the last few percent. Ranking
#: the local steps by the model and the "fit" turn took the median number of measurements to
#: within 5% of the optimum from 191 to 153 on the recorded convolution A100 space and from 83
#: to 76.5 on the RTX 2080 Ti GEMM space (60 seeds; README, "Search efficiency").
TURNS = ("tpe", "local", "tpe", "fit")
#: Measurements without a new best after which every other TPE proposal models the region
#: beside the best's (parzen.BASIN). On every TPE turn instead of every other, a prototype
#: over recorded spaces lost convolution A100's optimum (median 298-378 against 200), whose
#: runner-up lies two parameters from it.
STALL = 15
#: A local step that finds a new best is followed by local steps while at most this many more
#: configurations have been measured (with compile ahead, one more is chosen before the last is
#: measured): a step that paid off is tried again in its neighbourhood, as a hill climber does.
#: Over 400 replays per recorded space: point-in-polygon's median 20 to 17, the GEMM spaces
#: and convolution RTX 3090 within their noise, but convolution A100's 148 to 155 and
#: dedispersion MI250X's 24 to 27; following every kind of turn that found a best the same way
#: lost more there (165, 30 in a prototype).
LOCAL_RUN = 1


class _OutOfTime(Exception):
    """A deadline ended a measurement: ``args[0]`` is its name, as :meth:`_Run._stop` gives it
    ("timeout" or "study timeout")."""


class _TakenOver(Exception):
    """The configuration just measured was taken over by another worker while this one was
    stopped past its claim (:meth:`autotune.claims.Claims.lost`): not stored a second time."""


class _Exhausted(Exception):
    """Every valid configuration was measured."""


@dataclass(frozen=True)
class TuneOptions:
    """Options of one tuning run (the CLI's flags), checked here and nowhere else."""

    trials: int = 40
    timeout_s: float | None = 150.0
    sampler: Sampler | str = Sampler.TPE  # "tpe", "random" or "grid"; a Sampler once made
    seed: int | None = None
    storage: str | None = None  # optuna URL; ":memory:" keeps the study in memory
    device: str | None = None
    max_time_per_config: float | None = None
    isolate: bool = True
    timing: TimingOptions = field(default_factory=TimingOptions)
    save: bool = True
    compile_ahead: int | None = None  # candidates built ahead; None: 2 on GPUs, 0 on CPUs
    prune: float = 3.0  # time a candidate once when a launch takes over prune x the best; 0: never
    study_trials: int | None = None  # stop when the study (all its workers) has measured this many
    study_timeout_s: float | None = None  # stop this long after the study's first worker started
    warm_start: bool = True  # no winner on this device: start from other devices' (warmstart)
    # the report says why configurations are invalid (ruledout; a replay, which prints no
    # report, leaves it out: 0.3 s of a 1.5 s replay)
    explain: bool = True

    def __post_init__(self) -> None:
        self._check_types()
        try:
            object.__setattr__(self, "sampler", Sampler(self.sampler))
        except ValueError:
            raise OptionError(f"unknown sampler {self.sampler!r}; choose "
                               f"{', '.join(s.value for s in Sampler)}") from None
        if self.trials < 1:
            raise OptionError(f"--trials must be at least 1 (got {self.trials})")
        if not self.prune >= 0 or 0 < self.prune < 1 or math.isinf(self.prune):  # NaN fails >= 0
            raise OptionError(f"--prune must be 0 (off) or a finite number of at least 1 (got {self.prune:g})")
        if self.study_trials is not None and self.study_trials < 1:
            raise OptionError(f"--study-trials must be at least 1 (got {self.study_trials})")
        for name, value in (("--timeout", self.timeout_s), ("--max-time-per-config", self.max_time_per_config),
                            ("--study-timeout", self.study_timeout_s)):
            if value is not None and not 0 < value < math.inf:
                default = "for no deadline" if name == "--study-timeout" else "for the default"
                raise OptionError(f"{name} must be a positive, finite number of seconds (got {value}); "
                                  f"leave it out {default}")
        if self.seed is not None and not 0 <= self.seed < 2**32:
            raise OptionError(f"--seed must be 0 to 2**32 - 1 (got {self.seed})")
        if not self.isolate and self.max_time_per_config is not None:
            raise OptionError("--max-time-per-config needs the measuring worker process, which "
                              "--no-isolation turns off (a kernel measured in this process cannot be stopped); "
                              "drop one of them")
        if self.compile_ahead is not None and self.compile_ahead < 0:
            raise OptionError(f"--compile-ahead must be 0 or more (got {self.compile_ahead})")

    def _check_types(self) -> None:
        """OptionError for a field of the wrong type, given through the API (trial 39: trials=2.5
        ran 3, seed=1.5 failed inside numpy, isolate="no" isolated)."""
        kinds: tuple[tuple[str, tuple[type, ...], str], ...] = (
            ("trials study_trials compile_ahead seed", (numbers.Integral,), "a whole number"),
            ("timeout_s max_time_per_config study_timeout_s prune", (numbers.Real,), "a number"),
            ("isolate save warm_start explain", (bool,), "True or False"),
            ("storage device", (str,), "a string"),
            ("timing", (TimingOptions,), "a TimingOptions"))
        may_be_none = {"study_trials", "compile_ahead", "seed", "timeout_s", "max_time_per_config",
                       "study_timeout_s", "storage", "device"}
        for names, types, what in kinds:
            for name in names.split():
                value = getattr(self, name)
                if value is None and name in may_be_none:
                    continue
                if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                    raise OptionError(f"TuneOptions.{name} must be {what} (got {value!r})")


@dataclass(frozen=True)
class CutOff:
    """The configuration in flight when --timeout (or --study-timeout) stopped a run."""

    params: Mapping[str, Value]
    limit_s: float  # this run's limit per configuration
    earlier_limit_s: float | None  # the limit of the timeout the study held for it already (None: none)
    ran_s: float  # how long it had been measured


@dataclass(frozen=True, repr=False)
class TuneReport:
    """What a run did and found; the CLI prints it (``autotune.format_report(report)`` gives
    that summary), the API returns it."""

    spec: KernelSpec
    device: DeviceInfo
    problem: Mapping[str, Any]
    best: Measurement | None
    baseline: Measurement | None
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
    study_key: str | None = None  # the study's identity in a profile (study.study_key); None: in memory
    profile_path: Path | None = None
    profile_verdict: str | None = None
    profile_kept: profiles.Entry | None = None  # the profile's entry that this run's best did not displace
    profile_error: bool = False  # saving was asked for and failed (ProfileNotSaved says why)
    pruned: int = 0
    valid_space_exact: bool = True  # False: valid_space is an estimate (space.ValidSpace.count)
    valid_space_error: float | None = None  # the estimate's standard error, relative to it
    runner_up: Measurement | None = None  # second best when the leaders were timed again
    retimed: frozenset[str] = frozenset()  # the configurations (config_key) timed in the leaders' rounds
    confirmed: int = 0  # how many leaders were timed again (0: the best is the search's own)
    unconfirmed: bool = False  # there were leaders to time again, and the run's time was up first
    # the search's fastest where the leaders' rounds ranked another first: its search time (ms),
    # and it as timed in the rounds
    overturned: tuple[float, Measurement] | None = None
    # the baseline was timed in the same rounds: "beside" the leaders, "among" them, or "" not
    baseline_timed: str = ""
    # leaders whose output, checked again before the re-timing, was wrong (left out): a race
    unsteady: tuple[Measurement, ...] = ()
    # the limit per configuration (s) that a leader timed again ran past, at its full length (not
    # cut by the run's end): where the leaders were not timed again, that limit is why (trial 63)
    retime_limit: float | None = None
    elsewhere: int = 0  # proposals another worker of the study was measuring, or had
    cut_off: CutOff | None = None  # in flight at --timeout
    # values of parameters in no valid configuration (or none found, where the count was estimated), and where 3 of
    # 4 configurations drawn at random are invalid, the commonest reasons (example, share): ruledout
    never_valid: tuple[NeverValid, ...] = ()
    ruled_out: tuple[tuple[str, float], ...] = ()
    invalid_drawn: float = 0.0  # the share of ruled_out's draws that were invalid (trial 126: unsaid)
    warm_from: tuple[str, ...] = ()  # other devices whose winners were measured first
    # at a stop by --study-trials: the study's count held configurations claimed, not stored
    # (another worker measuring, or a run killed mid-trial), and how long such a claim lasts (s)
    claimed: int = 0
    claim_s: float = 0.0
    # variants that never ran correctly in this run: (parameter, value, failures by status)
    unverified: tuple[tuple[str, Value, Mapping[str, int]], ...] = ()
    fully_timed: int = 0  # the study's verified configurations timed in full (not pruned)
    walked_out: bool = False  # the search's time ran out looking for an unmeasured valid configuration
    storage: str | None = None  # the run's --storage (None: the default), for the report command

    def __repr__(self) -> str:
        """One line (trial 66: the dataclass's, 19 KB, ended a notebook cell)."""
        if self.best is None:
            best = "no verified configuration"
        else:  # the parameters its configuration uses, as the summary shows them (trial 69)
            used = config_label(self.spec.active(self.best.params or {}, self.problem))
            best = f"best {self.best.median_ms:.4g} ms ({used})"
        return (f"<TuneReport {self.spec.name} on {self.device.name}, {problem_label(self.problem)}: {best}; "
                f"{self.measured} measured, stopped: {self.stopped_by}>")

    @property
    def close_call(self) -> bool:
        """The best two's spreads overlap: another run might rank them the other way."""
        return (self.best is not None and self.runner_up is not None
                and self.runner_up.spread[0] <= self.best.spread[1])

    def throughput(self) -> dict[str, float]:
        """The spec's metrics for the best configuration ({} without one)."""
        return self.spec.throughput(self.problem, self.best.median_ms) if self.best else {}

    @property
    def speedup(self) -> float | None:
        return self.best.speedup_over(self.baseline) if self.best else None

    @property
    def partial(self) -> bool:
        """Its best is saved as ``partial``: the run was stopped, or its leaders were not timed
        again before its time was up."""
        return self.stopped_by in STOPPED or self.unconfirmed


Progress = Callable[[str, Measurement | None, "RunState"], None]


@dataclass
class RunState:
    """Counters of a run in progress (seen by the progress callback)."""

    budget: int
    device: str = ""  # what is tuned on: "AMD EPYC (Intel(R) OpenCL, 0:0)"
    measured: int = 0
    skipped_invalid: int = 0
    repeats: int = 0
    pruned: int = 0
    elsewhere: int = 0  # proposals another worker of the study held
    study_measured: int = 0  # the study's measured configurations, every worker's
    # the study's number of the configuration just measured (as `autotune report` numbers it):
    # study_measured, but for one measured again, its first measurement's (trial 96)
    study_number: int = 0
    study_budget: int | None = None  # --study-trials
    retrying: int = 0  # the study's timeouts under a shorter limit, measured again first
    warm_from: tuple[str, ...] = ()  # other devices whose winners are measured first
    other_versions: int = 0  # a new study's trials made with earlier versions of the spec
    cut_off: CutOff | None = None  # as TuneReport.cut_off
    best: Measurement | None = None
    baseline: Measurement | None = None
    runner_up: Measurement | None = None  # second after the leaders were timed again
    retimed: frozenset[str] = frozenset()  # the configurations (config_key) the leaders' rounds timed
    overturned: tuple[float, Measurement] | None = None  # as TuneReport.overturned
    confirmed: int = 0  # leaders timed again after the search
    confirming: int = 0  # leaders being timed again after the search (the "confirm" event)
    baseline_timed: str = ""  # as TuneReport.baseline_timed
    unconfirmed: bool = False  # there were leaders to time again, and fewer than two were
    unsteady: tuple[Measurement, ...] = ()  # as TuneReport.unsteady
    retime_limit: float | None = None  # as TuneReport.retime_limit
    failures: Counter[str] = field(default_factory=Counter)
    failure_examples: dict[str, str] = field(default_factory=dict)
    variants: frozenset[str] = frozenset()  # the parameters that choose a variant (see unverified)
    problem: dict[str, Any] = field(default_factory=dict)  # the run's, for the configurations' labels
    build_places: tuple[tuple[str, int], ...] = ()  # where every build failed, once the run stops so
    # per (variant parameter, value): measurements that ran correctly, and failures by status
    _choices: dict[tuple[str, Value], Counter[str]] = field(default_factory=dict)

    def add(self, m: Measurement, is_baseline: bool) -> None:
        """Count a new measurement."""
        self.measured += 1
        self.pruned += m.pruned
        if is_baseline:
            self.baseline = m
        if m.ok:
            if self.best is None or m.median_ms < self.best.median_ms:
                self.best = m
        else:
            self.failures[m.status.value] += 1
            self.failure_examples.setdefault(m.status.value, m.message)
        for name in self.variants & m.params.keys():
            self._choices.setdefault((name, m.params[name]), Counter())["ok" if m.ok else m.status.value] += 1

    def unverified(self) -> tuple[tuple[str, Value, Mapping[str, int]], ...]:
        """The variants this run measured at least UNVERIFIED times and never correctly, while
        another value of the same parameter ran correctly, with their failures by status
        (trial 56: a variant whose every build failed looked like a variant that lost). A
        timeout is no fault to fix (trial 58: a variant slower than the limit), so it is not
        counted."""
        works = {name for (name, _), seen in self._choices.items() if seen["ok"]}
        faults = {choice: {k: n for k, n in seen.items() if k != Status.TIMEOUT.value}
                  for choice, seen in self._choices.items()}
        return tuple((name, value, faults[name, value]) for (name, value), seen in self._choices.items()
                     if name in works and not seen["ok"] and sum(faults[name, value].values()) >= UNVERIFIED)


def study_name(spec: KernelSpec, info: DeviceInfo, problem: Mapping[str, Any]) -> str:
    return StudyId(spec.name, info.slug, problem_label(problem), spec.spec_hash).name


@dataclass(frozen=True)
class _Candidate:
    """A configuration to measure, its trial in the sampler's copy, and how it was chosen."""

    trial: optuna.Trial
    params: dict[str, Value]
    kind: str = "fixed"  # one of TURNS (how the search chose it) or "fixed" (from a list)

    @property
    def follows_the_search(self) -> bool:
        """Chosen from the search's state (its model, its best) rather than from a list."""
        return self.kind != "fixed"


class _Run:
    """One tuning run's parts, wired together; :meth:`loop` is the search."""

    def __init__(self, spec: KernelSpec, info: DeviceInfo, problem: dict[str, Any],
                 options: TuneOptions, valid: ValidSpace, say: Progress, t_start: float) -> None:
        self.spec, self.info, self.problem, self.options, self.say = spec, info, problem, options, say
        self.t_start = t_start
        self.confirm_from: float | None = None  # when the confirmation started
        self.facts = info.facts()
        self.valid_count, self.valid_exact = valid.count()
        self.log = StudyLog.open(study_name(spec, info, problem), options.storage,
                                 optuna.samplers.RandomSampler(options.seed), spec.file_id)
        others = self.log.other_versions() if not self.log.seen else {}
        try:
            _refuse_a_namesake(spec, _studied_namesakes(others))
        except ProblemError:
            self.log.close()  # its writer thread
            raise
        self.claims = Claims.open(self.log.engine, self.log.study.study_name)
        if not self.log.seen:  # a study made anew: what its name's claims say was measured is not
            self.claims.forget_measured()
        # a parameter the baseline's variant ignores is at its first value in what is measured
        baseline = canonical(spec, spec.baseline_config, problem, self.facts)
        self.baseline = baseline if (why := check(spec, baseline, problem, self.facts)) is None else None
        if why is not None:
            warn(f"{spec.name}'s baseline is not valid for {problem_label(problem)} on "
                 f"{info.name} ({why}): the run reports no speed-up")
        if dict(problem) == spec.default_problem():
            self._check_suggestions()
        self.state = RunState(budget=options.trials, device=f"{info.name} ({info.platform}, {info.selector})",
                              study_budget=options.study_trials, other_versions=sum(others.values()),
                              variants=spec.variant_parameters, problem=dict(problem))
        self.limits = KernelLimits()
        self.limit = options.max_time_per_config  # before the study's baseline sets the default
        self._take_in(list(self.log.seen.values()))
        self.valid = valid
        self.walked_out = False  # see TuneReport.walked_out
        self.proposer = Proposer(Sampler(options.sampler), valid, options.seed)
        self.model = ParzenSearch(valid, options.seed, listable=self.valid_count <= POOL_ALL) \
            if options.sampler is Sampler.TPE else None
        self._taught = 0  # how many of the study's measurements the model has seen
        self._best_params: Mapping[str, Value] | None = None  # the best, when _best_since was taken
        self._best_since, self._tpe_turns = 0, 0
        self._local_best_at: int | None = None  # when a local step of this run last found a best
        self.distributions = {p.name: optuna.distributions.CategoricalDistribution(list(p.values))
                              for p in spec.parameters}
        self.ahead = options.compile_ahead if options.compile_ahead is not None else (2 if info.is_gpu else 0)
        self.in_flight: _Candidate | None = None
        self.turns, self.stuck = 0, 0
        self.near: dict[str, Value] | None = None  # a proposal another worker claimed first
        self.retried = self._measured_again()
        self.state.retrying = len(self.retried)
        self.due = self.starts()
        self.n_startup = self._startup_trials()

    def _startup_trials(self) -> int:
        """How many measurements the study holds before TPE models (see startup_trials); the
        draws among them cover pairs of values where the search starts cold. Where hints or
        earlier winners start it, the draws are uniform and √(valid space), at most 5, as
        covering draws after other devices' winners cost more than they found (replays of the
        GEMM spaces warm-started: medians 17, 44 and 17 against 11, 22 and 10)."""
        varied = sum(len(p.values) > 1 for p in self.spec.parameters) if not self.guided else 0
        n = startup_trials(self.valid_count, self.options.trials, varied)
        if self.options.sampler is Sampler.TPE and not self.guided:
            # the proposer's next n draws cover: the default and baseline among the n leave one
            # or two, which a draw ahead or a stuck search's next draw takes (as in the table)
            self.proposer.covering = max(0, n - self.log.measured_total)
        return n

    def _check_suggestions(self) -> None:
        """Warn about a default or hint not valid at the spec's own default problem: at another
        size it may well be; at its own, the spec is likelier wrong (trials 15 and 17)."""
        spec = self.spec
        named = [("default", spec.default_config), *((f"hints[{i}]", h) for i, h in enumerate(spec.hint_configs))]
        for what, config in named:
            why = check(spec, canonical(spec, config, self.problem, self.facts), self.problem, self.facts)
            if why is None:
                continue
            # (trial 88: said where none was, and the suggestion was dropped)
            also = "; load_kernel without a profile uses the nearest valid one" if what == "default" else ""
            warn(f"{spec.name}'s {what} is not valid for its own default problem on {self.info.name} ({why}): "
                 f"the run measures a valid configuration one parameter away instead, where there is one{also}; "
                 f"fix the spec's {what}")

    def _take_in(self, found: list[Measurement]) -> None:
        """Measurements from the study (earlier runs, other workers): the best, the baseline,
        the learned work-group limits and the study's count."""
        for m in found:
            self.limits.learn(m.wg_limits)
        best = self.log.best  # the study's, kept as measurements are noted
        mine = self.state.best
        if best is not None and (mine is None or self.log.get(mine.params) is not mine
                                 or best.median_ms < mine.median_ms):
            self.state.best = best  # faster, or this run's best was overturned or rejected since
        if self.state.baseline is None and self.baseline is not None:
            self.state.baseline = self.log.get(self.baseline)
            # a baseline that timed out says nothing of how long the others take (measured again)
            if (self.state.baseline is not None and self.state.baseline.status is not Status.TIMEOUT
                    and self.options.max_time_per_config is None):
                self.limit = default_time_limit(self.state.baseline)
        self.state.study_measured = self.study_total()

    def _measured_again(self) -> dict[str, dict[str, Value]]:
        """The study's timeouts under a shorter limit than this run's (a tiny
        --max-time-per-config once must not rule them out for good), and its configurations
        whose worker was killed from outside, once (trial 44: by the OOM killer or an admin, and
        recorded `crashed` for good), by key: measured again."""
        limit = self.limit if self.limit is not None else BASELINE_LIMIT_S
        return {config_key(m.params): dict(m.params) for m in self.log.seen.values()
                if (m.status is Status.TIMEOUT and m.limit_s is not None and m.limit_s < limit)
                or (m.status is Status.CRASHED and m.message.startswith(KILLED) and KILLED_AGAIN not in m.message)}

    def _earlier(self, c: Mapping[str, Value]) -> Measurement | None:
        """The study's measurement of ``c``, unless this run measures it again."""
        m = self.log.get(c)
        # almost always none is retried; and a retried one is in the study as a timeout
        return None if m is not None and self.retried and config_key(c) in self.retried else m

    def starts(self) -> list[dict[str, Value]]:
        """The baseline (for the speed-up), the candidates a stopped run of this study was
        measuring, those that timed out under a shorter limit, earlier winners on this device
        (other devices' where it has none), the default and the hints: good incumbents from the
        start steer the search. A suggestion not valid here (another device's limits, another
        problem's sizes) gives way to a valid configuration one parameter away."""
        own = previous_winners(self.spec, self.info, self.problem)
        others = [] if own or not self.options.warm_start else other_devices(self.spec, self.info, self.problem)
        self.state.warm_from = tuple(name for name, _ in others)
        self.guided = bool(own or others or self.spec.hint_configs)  # see _startup_trials
        due: list[dict[str, Value]] = []
        exact = [self.baseline, *self.log.interrupted, *self.retried.values()]
        suggested = [*own, *(c for _, c in others), self.spec.default_config, *self.spec.hint_configs]
        for c in [*exact, *(self._valid_near(canonical(self.spec, c, self.problem, self.facts)) for c in suggested)]:
            if (c is not None and self._earlier(c) is None and c not in due
                    and check(self.spec, c, self.problem, self.facts) is None):
                due.append(c)
        return due

    def _valid_near(self, c: dict[str, Value]) -> dict[str, Value] | None:
        """``c``, or where it is not valid here, an unmeasured valid configuration one parameter away."""
        if check(self.spec, c, self.problem, self.facts) is None:
            return c
        return self.proposer.neighbour(c, self._seen)

    def _seen(self, c: Mapping[str, Value]) -> bool:
        """Measured, or being measured now."""
        return self._earlier(c) is not None or (self.in_flight is not None and c == self.in_flight.params)

    def _forced(self) -> bool:
        """Whether the next candidate comes from the valid list rather than from TPE."""
        return (self.options.sampler is not Sampler.TPE or self.log.measured_total < self.n_startup
                or self.stuck >= _STUCK_AFTER)

    def _turn(self) -> str:
        """How this search-phase candidate is chosen (see TURNS and LOCAL_RUN)."""
        self.turns += 1
        if self._local_best_at is not None and self.log.measured_total - self._local_best_at <= LOCAL_RUN:
            return "local"
        return TURNS[(self.turns - 1) % len(TURNS)]

    def _deadlines(self, for_search: bool) -> dict[str, float]:
        """Seconds left of --timeout ("timeout") and --study-timeout ("study timeout"); the
        search leaves a tenth of each (at most 15 s) to confirm, and the confirmation has that
        reserve however late the search stopped (a run started after the study's time was up
        still confirms what the study found)."""
        started, now = self.log.started_at, time.perf_counter()
        confirming = now - (self.confirm_from if self.confirm_from is not None else now)
        out = {}
        for name, limit, elapsed in (
                ("timeout", self.options.timeout_s, now - self.t_start),
                ("study timeout", self.options.study_timeout_s,
                 time.time() - started if started is not None else None)):
            if limit is not None and elapsed is not None:
                reserve = min(0.1 * limit, 15.0)
                out[name] = limit - elapsed - reserve if for_search else max(limit - elapsed, reserve - confirming)
        return out

    def _nearer_deadline(self, for_search: bool = True) -> tuple[str, float] | None:
        """The nearer deadline's name (as :meth:`_deadlines`) and seconds left (None: no deadline)."""
        return min(self._deadlines(for_search).items(), key=lambda item: item[1], default=None)

    def _time_left(self, for_search: bool = True) -> float | None:
        """Seconds left before the nearer deadline (None: no deadline)."""
        nearer = self._nearer_deadline(for_search)
        return nearer[1] if nearer is not None else None

    def _stop(self) -> str | None:
        if self.state.measured >= self.options.trials:
            return "trials"
        if self.options.study_trials is not None and self._study_count() >= self.options.study_trials:
            return "study trials"
        for name, left in self._deadlines(for_search=True).items():
            if left <= 0:
                return name
        if self.valid_exact and self.log.measured_total - len(self.retried) >= self.valid_count:
            return "exhausted"  # only valid configurations are measured
        return None

    def study_total(self) -> int:
        """The study's measured configurations, every worker's, as up to date as the claims
        (as this worker knows them when the database stopped answering)."""
        return max(self.log.measured_total, self._done(others_only=False))

    def _done(self, others_only: bool) -> int:
        """Trials the claims say are finished: every worker's, or only other workers' (and
        earlier runs'); 0 in memory or when the database stopped answering."""
        try:
            return self.claims.count(done_only=True, others_only=others_only) or 0
        except StorageError:
            return 0

    def _study_count(self) -> int:
        """The study's measurements, with those other workers are making (claimed, not yet
        stored): workers that check at the same moment may each start one more."""
        claimed = self.claims.count()
        return max(self.log.measured_total, claimed or 0)

    def _unstored(self, stored: int) -> int:
        """Claims the study's count holds that no stored trial answers yet (``stored``: :meth:`study_total`)."""
        return max(0, self._study_count() - stored)

    def _ttl(self) -> float:
        """How long a claim lasts: longer than any measurement this worker lets run."""
        return (self.limit if self.limit is not None else BASELINE_LIMIT_S) + GRACE_S

    def _claim(self, params: Mapping[str, Value]) -> bool:
        """Take ``params`` for this worker to measure (see :mod:`autotune.claims`)."""
        key = config_key(params)
        if key not in self.retried:
            return self.claims.take(params, self._ttl())
        # a claim an older autotune deleted when --timeout cut the measurement off: taken anew
        if self.claims.reopen(params, self._ttl()) or self.claims.take(params, self._ttl()):
            return True
        del self.retried[key]  # another worker measures it again
        return False

    def _over_limit(self, params: Mapping[str, Value]) -> str | None:
        steps = geometry(self.spec, params, self.problem, self.facts).steps
        return self.limits.exceeds({s.entry: math.prod(s.local_size) for s in steps if s.local_size})

    def _pick(self) -> tuple[dict[str, Value], str]:
        """The next configuration and how it was chosen (see _Candidate.kind); _Exhausted
        when none is left."""
        fixed = self.due.pop(0) if self.due else None
        if fixed is None and self._forced():
            fixed, self.stuck = self.proposer.next(self._seen), 0
            if fixed is None:
                raise _Exhausted
        if fixed is None and self.near is not None:  # where the search wanted to go
            fixed = self.proposer.neighbour(self.near, self._seen) or self.proposer.next(self._seen)
            self.near = None
        kind = "fixed" if fixed is not None else self._turn() if self.state.best is not None else "tpe"
        if kind == "local" and self.state.best is not None:
            fixed = self._local_step(self.state.best.params)
        elif kind == "fit":
            fixed = self._taught_model().propose_fitted(self._seen)
        if fixed is None:
            kind = "tpe"
            fixed = self._taught_model().propose(self._seen, self._stalled_best()) or self.proposer.next(self._seen)
        if fixed is None:
            raise _Exhausted
        return fixed, kind

    def _local_step(self, best: Mapping[str, Value]) -> dict[str, Value] | None:
        """The one-parameter move of the best that the model ranks first, else its first
        two-parameter move; None when neither is left."""
        model = self._taught_model()
        moves = model.ranked(self.proposer.neighbours(best, self._seen))
        return moves[0] if moves else model.propose_near(best, self._seen)

    def _stalled_best(self) -> Mapping[str, Value] | None:
        """The best's configuration on every other TPE turn once STALL measurements have found
        nothing faster (TPE then models the region beside the best's; see parzen.BASIN)."""
        best = self.state.best
        if best is None:
            return None
        if best.params != self._best_params:
            self._best_params, self._best_since = best.params, self.log.measured_total
        self._tpe_turns += 1
        stalled = self.log.measured_total - self._best_since >= STALL
        return best.params if stalled and self._tpe_turns % 2 == 0 else None

    def _taught_model(self) -> ParzenSearch:
        """TPE's model, taught the study's measurements it has not seen yet."""
        assert self.model is not None  # _forced() for every other sampler
        found = list(self.log.seen.values())[self._taught:]
        self._taught += len(found)
        for m in found:
            self.model.observe(m.params, m.median_ms if m.ok else math.inf)
        return self.model

    def propose(self) -> _Candidate | None:
        """The next configuration to measure; None when none is left.

        Proposals that are invalid (over a work-group limit learned while tuning) or measured
        before (another worker's) cost no budget: each is told to the sampler's copy (not
        stored) and the next is chosen.
        """
        while True:
            try:
                fixed, kind = self._pick()
            except _Exhausted:
                return None
            trial = self.log.ask(fixed, self.distributions)
            # a configuration that differs from another only in parameters its variant ignores
            # is that one (a hint or an earlier winner may name them all)
            params = canonical(self.spec, {n: trial.params[n] for n in self.spec.parameter_names},
                               self.problem, self.facts)
            earlier = self._earlier(params)
            reason = None if earlier else check(self.spec, params, self.problem, self.facts) or self._over_limit(params)
            if earlier is None and reason is None:
                if not self._seen(params):
                    self.stuck = 0
                    return _Candidate(trial, params, kind)
                self.log.skip(trial)  # the one being measured now
            else:
                self.log.tell(trial, earlier or Measurement(Status.INVALID, reason or "", params=params),
                              repeat=earlier is not None)
                self.state.repeats += earlier is not None
                self.state.skipped_invalid += earlier is None
            self.stuck += 1

    def drop(self, c: _Candidate | None) -> None:
        """Give back a candidate that will not be measured."""
        if c is not None:
            self.log.skip(c.trial)

    def loop(self, evaluator: Evaluator, stop_requested: Callable[[], bool]) -> str:
        """Measure candidates until the budget, the time or the valid space runs out.

        On a device that builds ahead, the next candidate is chosen before this one is
        measured, so that it builds while this one is timed; when this one becomes the new
        best, that choice (made around the old best) is dropped and made again.
        """
        broken, upcoming = SameBuildError(template=self.spec.template), None
        failed: list[Mapping[str, Value]] = []  # the configurations that failed to build, while all did
        contrast: dict[str, Value] | None = None
        # from a new study's baseline only (another worker's first trials are not its first); run
        # again, the search goes on past a wrong result that all share so far
        fresh = self.log.measured_total == 0 and self.due[:1] == [self.baseline]
        wrong = SameWrongResult() if fresh else None
        if (nearer := self._nearer_deadline()) is not None:  # a sparse space's draws end there too
            self.valid.deadline = time.perf_counter() + nearer[1]
        try:
            while True:
                if stop_requested():  # a stop signal whose KeyboardInterrupt was lost
                    raise KeyboardInterrupt
                found = self.log.refresh()  # other workers' trials, before the budget is checked
                if found is not None:  # a look was due: and what dead workers left unmeasured
                    self._take_in(found)
                    self.due[:0] = [c for c in self.claims.expired() if not self._seen(c) and c not in self.due]
                if (stop := self._stop()) is not None:
                    return stop
                cand, upcoming = upcoming or self.propose(), None
                if cand is None:
                    return "exhausted"
                # in flight from before the claim: a stop landing just after it (interrupted())
                # gives the claim back; held by no one alive, it would be skipped until it expired
                self.in_flight = cand
                taken = self._claim(cand.params)
                self.log.flush()  # the last trial's write, now that it cannot hold up the claim
                if not taken:  # another worker has it
                    self.in_flight = None
                    self.drop(cand)
                    self.state.elsewhere += 1
                    self.near = cand.params  # look next to it instead
                    continue
                if self.ahead > 0 and self.state.measured + 1 < self.options.trials:
                    upcoming = self._ahead()
                self._prefetch(evaluator, upcoming)
                best = self.state.best
                try:
                    m = self.measure(evaluator, cand)
                except _OutOfTime as ended:
                    return str(ended.args[0])
                except _TakenOver:  # its trial stands, not this one (trial 64: measured twice)
                    self.in_flight = None
                    self.drop(cand)
                    self.state.elsewhere += 1
                    continue
                if upcoming is not None and upcoming.follows_the_search and self.state.best is not best:
                    # chosen around the old best (and a model without this result): choose again
                    self.turns -= upcoming.kind in TURNS  # its turn is taken again
                    # cleared first: a stop landing in the drop must not drop it again in the
                    # finally below (trial 40: "Cannot tell a FAIL trial", two tracebacks)
                    dropped, upcoming = upcoming, None
                    self.drop(dropped)
                self.say("trial", m, self.state)
                if m.status is Status.COMPILE_ERROR and m.params is not None:
                    failed.append(m.params)
                if broken.add(m.status, m.message) and self.state.best is None:
                    # one more, sharing the fewest values with them: the first few can share the
                    # value that breaks the build (trial 42: baseline, default and hint had PY=4)
                    if contrast is None and (contrast := self._contrast(failed)) is not None:
                        self.due.insert(0, contrast)
                        if upcoming is not None:  # next, before the one chosen ahead
                            self.turns -= upcoming.kind in TURNS
                            dropped, upcoming = upcoming, None
                            self.drop(dropped)
                    elif contrast is None or config_key(m.params or {}) == config_key(contrast):
                        self.state.build_places = tuple(broken.places())
                        return "broken"
                if wrong is not None and wrong.add(m.status, m.message) and self.state.best is None:
                    return "same wrong result"
        except WalkTimeout:  # no configuration found in the time left (trial 86: 4x past -t)
            self.walked_out = True
            return nearer[0] if nearer is not None else "timeout"
        finally:
            left, upcoming = upcoming, None
            self.drop(left)

    def _ahead(self) -> _Candidate | None:
        """The next candidate, chosen while this one builds, within :data:`AHEAD_LIMIT_S` (in a
        sparse space a draw can take the search's time left, and the candidate in hand went
        unmeasured), else None: it is then chosen after this one is measured."""
        with self.valid.within(AHEAD_LIMIT_S):
            return self.propose()
        return None  # the draws took too long

    def _contrast(self, failed: Sequence[Mapping[str, Value]], draws: int = 200) -> dict[str, Value] | None:
        """Of ``draws`` unmeasured valid configurations, one with the most parameters at a value
        none of ``failed`` has; None where every one shares all its values with them."""
        rng = random.Random(self.options.seed)
        had = {p.name: {(type(v), v) for c in failed if (v := c.get(p.name)) is not None} for p in self.spec.parameters}

        def new_values(c: Mapping[str, Value]) -> int:  # typed: 1 is not True
            return sum((type(c[name]), c[name]) not in values for name, values in had.items())

        drawn = [c for c in (self.valid.sample(rng) for _ in range(draws)) if c is not None and not self._seen(c)]
        best = max(drawn, key=new_values, default=None)
        return canonical(self.spec, best, self.problem, self.facts) if best and new_values(best) else None

    def _prefetch(self, evaluator: Evaluator, upcoming: _Candidate | None) -> None:
        """Announce what comes next, so the worker builds it while it times this one."""
        if self.ahead <= 0:
            return
        later = [upcoming.params] if upcoming is not None else []
        startup = self.options.sampler is not Sampler.TPE or self.log.measured_total + 1 < self.n_startup
        left = self.options.trials - self.state.measured - 1  # what this run can still measure after this one
        ahead: list[dict[str, Value]] = []
        if startup:
            with self.valid.within(AHEAD_LIMIT_S):
                ahead = self.proposer.ahead(min(self.ahead, left), self._seen)
        evaluator.prefetch((later + self.due + ahead)[:max(left, 0)])

    def measure(self, evaluator: Evaluator, cand: _Candidate) -> Measurement:
        """Measure one new configuration (the one in flight), record it, count it."""
        params = cand.params
        is_baseline = params == self.baseline
        best = self.state.best
        # the baseline is timed in full for the speed-up; others only while they could win
        cutoff = self.options.prune * best.median_ms if self.options.prune and best and not is_baseline else None
        limit = self.limit if self.limit is not None else BASELINE_LIMIT_S
        nearer = self._nearer_deadline()
        given = _capped(limit, nearer[1] if nearer is not None else None)
        at_deadline = nearer is not None and given < limit  # --timeout (or --study-timeout) bounds the whole run
        t0 = time.perf_counter()
        m = evaluator.evaluate(params, given, cutoff)
        if time.perf_counter() - t0 > self._ttl() and self.claims.lost(params):
            raise _TakenOver  # stopped (Ctrl-Z) past its claim, which another worker took and measured
        if at_deadline and m.status is Status.TIMEOUT:
            # stopped by the run's end, not by its own slowness: measured again next time
            earlier = self.log.get(params) if config_key(params) in self.retried else None
            self.state.cut_off = CutOff(dict(params), limit, earlier.limit_s if earlier is not None else None,
                                        time.perf_counter() - t0)
            self.interrupted()
            assert nearer is not None  # at_deadline
            raise _OutOfTime(nearer[0])
        if m.status in (Status.CRASHED, Status.LAUNCH_ERROR):  # a CPU's segfault, a GPU's illegal address
            # before the worker's last output, which may be long and is cut in the summary (trial 50)
            cause, said, output = m.message.partition(LAST_OUTPUT)
            m = replace(m, message=cause + self._killed_hint(params, cause) + self._crash_hint(params) + said + output)
        if m.ok and self.log.store is not None and (self.state.best is None or m.median_ms < self.state.best.median_ms):
            # a new best as far as this worker knows: first what the others stored since its last
            # look (at most a second ago), so that its line's "*" is the study's (trial 37: two
            # "new bests" slower than another worker's stored trial)
            self._take_in(self.log.refresh(every_s=0.0) or [])
        # the claim is finished once the trial is stored: a worker that dies before that
        # leaves it to expire, and the configuration is measured again
        m = self.log.tell(cand.trial, replace(m, params=params), then=lambda: self.claims.finish(params))
        self.in_flight = None
        again = self.retried.pop(config_key(params), None) is not None  # a timeout the study counts already
        if again and self.model is not None:
            self.model.observe(params, m.median_ms if m.ok else math.inf)  # its timeout was taught
        self.limits.learn(m.wg_limits)
        self.state.add(m, is_baseline)
        if cand.kind == "local" and self.state.best is m:
            self._local_best_at = self.log.measured_total
        # the others' finished trials too: this run's own claims are finished only once stored,
        # so they are counted here, and a worker's progress is current between its looks
        others = self._done(others_only=True)
        self.state.study_measured = max(self.state.study_measured + (not again), others + self.state.measured)
        self.state.study_number = self.log.number_of(params) if again else self.state.study_measured
        if is_baseline and self.limit is None:
            self.limit = default_time_limit(m)
        return m

    def _killed_hint(self, params: Mapping[str, Value], cause: str) -> str:
        """What a worker killed by SIGKILL means: nothing it ran can send that, so something
        outside did (the OOM killer, an admin); the next run measures it again, once."""
        if cause != KILLED:
            return ""
        if config_key(params) in self.retried:
            return f" from outside again, {KILLED_AGAIN}"
        return (" from outside (the OOM killer or a `kill -9`: a kernel cannot send SIGKILL); the next run "
                "measures it again")

    def _crash_hint(self, params: Mapping[str, Value]) -> str:
        """What in the spec may have killed the worker: a scratch buffer too small for what a
        kernel writes there (sizes are in bytes: one given in elements is a quarter of a float
        array), which a CPU device does not catch beyond the guard zone."""
        geo, sources = geometry(self.spec, params, self.problem, self.facts), dict(self.spec.scratch)
        bound = {name for step in geo.steps for name in step.args}
        listed = ", ".join(f"scratch.{name} {nbytes:,} bytes ({sources[name].source!r})"
                           for name, nbytes in geo.scratch if name in bound)
        if not listed:
            return ""
        return (f"; its scratch buffers here: {listed}; a kernel that writes past one writes outside any buffer "
                "(sizes are in bytes, not elements, and each must hold what every variant writes there)")  # trial 127

    def catch_up(self) -> None:
        """Everything the study holds now (other workers' last trials, the baseline): for the
        leaders timed again and the summary."""
        self.log.flush()
        self._take_in(self.log.refresh(every_s=0.0) or [])

    def interrupted(self, storage_lost: bool = False) -> None:
        """The candidate in flight when the run was stopped: measured again next time (its
        claim, where the database is gone, expires instead of waiting on it)."""
        if self.in_flight is not None:
            self.log.tell_interrupted(self.in_flight.trial)
            params = self.in_flight.params
            if storage_lost:
                self.in_flight = None
                return
            try:
                if config_key(params) in self.retried:  # measured before (a timeout): it stays so
                    self.claims.finish(params)
                else:
                    self.claims.release(params)
            except StorageError:
                pass  # the database is gone: the claim expires instead
            self.in_flight = None

    def confirm(self, evaluator: Evaluator) -> None:
        """Time the leaders again in interleaved rounds (timing only: they were verified) and
        make the best median over those rounds the winner, with their spread: one lucky or
        unlucky measurement on a noisy device does not decide what is saved. The baseline is
        timed in the same rounds (when a round of it is short), so that the speed-up compares
        two timings of one warm device: measured first, on a device still idle, the baseline
        ran 2x slow (a 160^3 matmul on Intel's CPU runtime: 0.94 ms in the search's first
        50 ms of launches, 0.48 ms after). Timed so, it wins where it is the fastest."""
        self.confirm_from = time.perf_counter()
        leaders = self.log.leaders(CONFIRM_LEADERS)
        if len(leaders) < 2:
            return
        self.state.unconfirmed = True  # until two of them are timed again (time may be up)
        base = self.state.baseline
        extra = [base] if (base is not None and base.ok and base.median_ms <= BASELINE_RETIME_MS
                           and all(m.params != base.params for m in leaders)) else []
        self.state.confirming = len(leaders)
        self.say("confirm", None, self.state)  # trial 70: half a minute without a line at 8192²
        found, wrong = self._interleaved(evaluator, leaders + extra)
        times = {k: t for k, t in found.items() if t}
        self.state.unsteady = tuple(replace(m, status=Status.WRONG_RESULT, message=wrong[config_key(m.params)])
                                    for m in leaders + extra if config_key(m.params) in wrong)
        # the baseline is verified too, and may win here: timed cold first, it can look slower
        # than leaders that are not (a memory-bound kernel on a CPU: a tuned 0.72x "speed-up")
        timed = [replace(m, times_ms=tuple(times[config_key(m.params)])) for m in leaders + extra
                 if config_key(m.params) in times]
        if self.state.best is not None and config_key(self.state.best.params) in wrong:
            rest = [m for m in leaders if config_key(m.params) not in wrong]
            self.state.best = min(timed, key=lambda m: m.median_ms) if timed else rest[0] if rest else None
        # a later run, stopped or not, starts from these verdicts (trial 40: one rejected here was
        # saved by the next run's Ctrl-C)
        self.log.note_confirmed(timed if len(timed) >= 2 else [], wrong)
        if len(timed) >= 2:
            timed.sort(key=lambda m: m.median_ms)
            before = self.state.best
            if before is not None and timed[0].params != before.params:
                retimed = next((m for m in timed if m.params == before.params), None)
                self.state.overturned = (before.median_ms, retimed) if retimed is not None else None
            self.state.best, self.state.runner_up = timed[0], timed[1]
            self.state.retimed = frozenset(config_key(m.params) for m in timed)
            # timed in these rounds as one of the leaders, or beside them
            if base is not None and (again := times.get(config_key(base.params))):
                self.state.baseline = replace(base, times_ms=tuple(again))
            if base is not None and config_key(base.params) in times:
                self.state.baseline_timed = "beside" if extra else "among"
            self.state.confirmed = len(timed) - (self.state.baseline_timed == "beside")
            self.state.unconfirmed = False

    def _interleaved(self, evaluator: Evaluator, those: list[Measurement]
                     ) -> tuple[dict[str, list[float]], dict[str, str]]:
        """Each configuration's launch times over CONFIRM_ROUNDS rounds, another order each
        round; when the run's time is up, fewer, and a timing is given at most what is left (a
        leader of seconds per launch overran --timeout by half of it, timed at its own limit).
        The first round checks each one's output again: a race that fails now and then passed
        once in the search and was saved (trial 27); one that fails now is left out, with why
        (the second dict)."""
        times: dict[str, list[float]] = {config_key(m.params): [] for m in those}
        wrong: dict[str, str] = {}
        limit = self.limit if self.limit is not None else BASELINE_LIMIT_S
        for round_ in range(CONFIRM_ROUNDS):
            for m in those[round_:] + those[:round_]:
                key = config_key(m.params)
                left = self._time_left(for_search=False)
                if left is not None and left <= 0:
                    return times, wrong
                if key in wrong:
                    continue
                given = _capped(limit, left)
                again = evaluator.recheck(m.params, given) if round_ == 0 else \
                    evaluator.evaluate(m.params, given, None, verify=False)
                if again.status is Status.WRONG_RESULT:
                    wrong[key], times[key] = again.message, []
                elif again.status is Status.TIMEOUT and given >= limit:
                    self.state.retime_limit = limit
                elif again.ok:
                    times[key].extend(again.times_ms)
        return times, wrong

    def report(self, stopped_by: str, wall_s: float, full_space: int) -> TuneReport:
        s = self.state
        # the best is the baseline's configuration: its speed-up is 1, not its timing again
        # over its first timing
        same = s.best is not None and s.baseline is not None and s.best.params == s.baseline.params
        stored = self.study_total()  # a query of the claims: once
        return TuneReport(
            spec=self.spec, device=self.info, problem=self.problem, best=s.best, storage=self.options.storage,
            baseline=s.best if same else s.baseline,
            measured=s.measured, skipped_invalid=s.skipped_invalid, repeats=s.repeats,
            failures=dict(s.failures), failure_examples=dict(s.failure_examples), unverified=s.unverified(),
            study_trials=stored, pruned=s.pruned, valid_space=self._valid_space(),
            runner_up=s.runner_up, retimed=s.retimed, confirmed=s.confirmed, unconfirmed=s.unconfirmed,
            overturned=s.overturned, baseline_timed=s.baseline_timed, unsteady=s.unsteady, retime_limit=s.retime_limit,
            elsewhere=s.elsewhere, cut_off=s.cut_off,
            warm_from=s.warm_from, claimed=self._unstored(stored) if stopped_by == "study trials" else 0,
            claim_s=self._ttl(), full_space=full_space, valid_space_exact=self.valid_exact,
            valid_space_error=self.valid.estimate_error, stopped_by=stopped_by,
            fully_timed=sum(m.ok and not m.pruned for m in self.log.seen.values()), walked_out=self.walked_out,
            wall_s=wall_s, study_name=self.log.study.study_name, study_key=self.log.key,
            never_valid=self._never_valid() if self.options.explain else (),
            **(self._ruled_out() if self.options.explain else {}))

    def _never_valid(self) -> tuple[NeverValid, ...]:
        """The values of parameters in no valid configuration, with their reasons (see ruledout)."""
        try:
            with self.valid.within(1.0):  # a WalkTimeout of its own second ends the block here
                return never_valid(self.valid, self.valid.unvalued())
        except WalkTimeout:  # the run's time was up (a replay has no deadline)
            pass
        return ()

    def _ruled_out(self) -> dict[str, Any]:
        """The report's commonest reasons configurations are invalid here, where 3 of 4 drawn are,
        and the share of the draws that are invalid."""
        reasons, invalid = commonest(self.spec, self.problem, self.facts)
        return {"ruled_out": tuple(reasons), "invalid_drawn": invalid} if invalid >= 0.75 else {}

    def _valid_space(self) -> int:
        """The valid configurations' count; an estimate at least as large as the valid ones the
        study measured (trial 82: "~0 (estimated)" of a space whose one valid one was measured)."""
        if self.valid_exact:
            return self.valid_count
        return max(self.valid_count, sum(m.status is not Status.INVALID for m in self.log.seen.values()))


def _refuse_a_namesake(spec: KernelSpec, others: Mapping[str, str]) -> None:
    """ProblemError where another spec file that still exists gives its kernel this spec's name
    and has work at this problem and device (``others``: by spec file, what it has, in words):
    each run's entries would replace the other's in the profile, as one spec's newer version
    replaces the older (trial 24)."""
    for other, work in others.items():
        if (what := spec.namesake(other)) is None:  # this file's own edits, or gone since
            continue
        raise ProblemError(
            f"{spec.path} names its kernel {spec.name!r}, as {what} does, whose {work}: the two would "
            "replace each other's profile entries; give this spec another `kernel:` name"
            + ("" if other == BUILTIN_FILE else f" (or, if it replaces {other}, move that file away)"))


def _studied_namesakes(others: Mapping[str, int]) -> dict[str, str]:
    """:func:`_refuse_a_namesake`'s ``others`` from a study database's trials by spec file."""
    return {f: f"{n} trial{'s' if n != 1 else ''} at this size on this device are in the study database"
            for f, n in others.items()}


def check_saveable(spec: KernelSpec, info: DeviceInfo, problem: Mapping[str, Any]) -> None:
    """Before a run that saves: ProfileError where the device's profile cannot take the result,
    ProblemError where another spec file of this kernel name has a tuned entry for the problem
    there (both before anything is measured; a run on several devices asks for each)."""
    path = profiles.path_for(info.slug, settings.profiles_dir())
    profiles.check_writable(path)
    profiles.kernel_block(profiles.read(path, check_entries=False), spec.name, str(path))
    _refuse_a_namesake(spec, _profiled_namesakes(spec, info, problem))


def _profiled_namesakes(spec: KernelSpec, info: DeviceInfo, problem: Mapping[str, Any]) -> dict[str, str]:
    """:func:`_refuse_a_namesake`'s ``others`` from the profile's entries of this problem that
    another version of a spec tuned, by the file that says it tuned them (trial 42: a run with
    ``--storage :memory:`` saw no study of the other file's and replaced its tuned entry)."""
    path = profiles.path_for(info.slug, settings.profiles_dir())
    entries = profiles.entries(profiles.read(path, check_entries=False), spec.name, str(path), lambda _: None)
    return {e.spec_file: f"tuned entry for this size is in {path}" for e in entries
            if e.spec_file and dict(e.problem) == dict(problem) and e.spec_hash != spec.spec_hash and not e.picked}


def _capped(limit: float, left: float | None) -> float:
    """A configuration's time limit within the ``left`` seconds of the run (None: no end), but
    not under a second unless the limit itself is: a build and a launch need that to have a chance.

        >>> _capped(10.0, None), _capped(10.0, 4.0), _capped(10.0, 0.2), _capped(0.5, 0.2)
        (10.0, 4.0, 1.0, 0.5)
    """
    return limit if left is None else min(limit, max(left, 1.0))


def tune(kernel: str | KernelSpec, options: TuneOptions = TuneOptions(),
         problem: Mapping[str, Any] | None = None, progress: Progress | None = None,
         evaluator: Evaluator | None = None, info: DeviceInfo | None = None) -> TuneReport:
    """Tune ``kernel`` (a built-in name, a spec path or a loaded spec) and save its profile.

    ``progress`` is called with each event (``"start"``, ``"trial"`` after each measured
    configuration, ``"confirm"`` before the fastest are timed again) as the command line's
    progress lines are; ``evaluator`` and ``info`` replace the real
    device (tests use a fake one). The report's ``best`` is None where no configuration was
    verified (``stopped_by`` and ``failures`` say why; the command exits 1 then). Raises
    TuningInterrupted (carrying the report) on SIGINT/SIGTERM/SIGHUP after saving the best, BuildError
    when every configuration fails to build the same way, StorageError when the study's
    database stops answering, ProfileNotSaved (carrying the report) when the profile cannot be
    written, and other AutotuneErrors for bad input.
    """
    t_start = time.perf_counter()
    if not isinstance(options, TuneOptions):  # trial 39: a dict gave "'dict' object has no attribute 'device'"
        raise TypeError(f"tune() takes its options as a TuneOptions, not a {type(options).__name__}: "
                        "tune(kernel, TuneOptions(trials=20), problem={...})")
    if problem is not None and not isinstance(problem, Mapping):
        raise TypeError(f"tune()'s problem is a mapping of size keys, such as {{'N': 4096}}, not {problem!r}")
    if isinstance(kernel, KernelSpec):
        spec = kernel
    else:  # loaded here: its lint warnings here too, as `autotune run` gives them (trial 60)
        spec = specs.load(kernel)
        for lint in specs.lint(spec):
            warn(lint)
    info = info or devices.select(options.device)[0]
    prob = spec.resolve_problem(problem)
    valid = ValidSpace(spec, prob, info.facts())
    if valid.first(min(FIRST_LIMIT_S, options.timeout_s or math.inf)) is None:
        raise none_valid(spec, prob, info.facts(), info.name)
    if options.save:  # a profile that cannot take the result stops the run now, not at its end
        check_saveable(spec, info, prob)
    measures = evaluator is None  # on the device (not a replay's or a test's evaluator)
    if measures:  # a size its kernel's int cannot hold fails every launch: said before any input
        check_numbers(spec, prob)
    workload = _workload(spec, prob, info, options, t_start) if measures else None
    say = progress or (lambda *a: None)
    with quiet_optuna(), stops.stop_signals() as signals, \
            scratch.run_folder(info.key if measures else None) as folder, ExitStack() as done:
        if measures:
            scratch.warn_sharing(info.key, f"{info.name} ({info.selector})")
        try:  # a stop while the study opens is the run's, when it starts (trial 60: a bare
            with stops.held():  # KeyboardInterrupt, for SIGTERM too)
                run = _Run(spec, info, prob, options, valid, say, t_start)
        except AutotuneError:
            if signals.requested():  # the stop is said, not the failure it cut short (trial 61)
                raise KeyboardInterrupt from None
            raise
        done.callback(run.log.release)  # last: the report and the saving read the study too
        lost: StorageError | WorkerError | None = None
        try:
            say("start", None, run.state)  # a callback's KeyboardInterrupt stops the run (trial 69)
            evaluator = evaluator or _evaluator(run, workload, folder)
            try:
                stopped_by = run.loop(evaluator, signals.requested)
                run.catch_up()
            except StorageError as exc:  # save what was measured; say so after
                stopped_by, lost = "storage lost", exc
                run.log.abandon(first_line(exc))
                run.interrupted(storage_lost=True)
            except WorkerError as exc:  # no worker can measure on (trial 68: its folder deleted): the same
                stopped_by, lost = "worker failed", exc
                run.interrupted()
            if stopped_by not in ("broken", "worker failed"):
                run.confirm(evaluator)
            signals.hold()  # the run is done: a stop now must not lose it while closing and saving
            if signals.requested():  # during the confirmation, and lost there
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            stopped_by, signalled = "interrupted", signals.requested()  # or raised by a progress callback
            signals.hold()  # finish saving before another Ctrl-C
            run.interrupted()
        finally:
            if measures and evaluator is not None:
                evaluator.close()
            run.log.close()
        if stopped_by == "broken":  # nothing can build: say why instead of a summary of failures
            raise BuildError(explain(run.state.failure_examples["compile_error"], spec.template,
                                     spec.macros(prob), f"{info.name} ({info.platform})",
                                     run.state.measured, [n for n, _ in spec.derived],
                                     places=run.state.build_places))
        report = run.report(stopped_by, time.perf_counter() - t_start, space_size(spec))
        if options.save:
            try:
                report = save_best(report, options.storage, measured=run.log.get)
            except SaveStopped as exc:  # a stop while it waited for another process's save
                report, stopped_by, signalled = replace(report, profile_verdict=str(exc)), "interrupted", True
        if lost is not None:
            saved = what_was_saved(report)
            if isinstance(lost, WorkerError):  # trial 76: "resumes" of a study kept in memory
                again = "the study was in memory: not kept" if options.storage == IN_MEMORY else \
                    "the same command resumes the study"
                raise WorkerError(f"{lost}; {saved}; {again}") from None
            raise StorageError(f"{lost} after {report.measured} trial{'s' * (report.measured != 1)}; {saved}; the "
                               "same command resumes "
                               "the study once its database answers again")
        if stopped_by != "interrupted":  # a stop is said first (trial 61: exit 1, not 130)
            run.log.check_stored()
    if stopped_by == "interrupted":
        # a callback's stop has no signal: not an earlier run's (trial 69)
        raise TuningInterrupted(report, stops.last_stop_signal() if signalled else signal.SIGINT, signalled)
    return report


#: How long the next candidate may take to choose while the current one builds (compile ahead).
AHEAD_LIMIT_S = 2.0

#: How long a run looks for a first valid configuration (at most its --timeout) before it calls
#: the space too sparse to search (trial 82: a space of 10^8 with none valid ran 400 s unsaid).
FIRST_LIMIT_S = 20.0


def _workload(spec: KernelSpec, problem: dict[str, Any], info: DeviceInfo, options: TuneOptions,
              t_start: float) -> Workload:
    """The inputs and expected outputs, made once within --timeout (the reference module's
    import and the check that its inputs fit included: trial 51); ProblemError when they cannot
    fit or take longer."""
    left = None if options.timeout_s is None else options.timeout_s - (time.perf_counter() - t_start)
    try:
        with reference_watch(spec, problem, left):
            check_fits(spec, problem, info)
            return compute_workload(spec, problem, seed=options.seed or 0)
    except MemoryError:  # numpy's _ArrayMemoryError too
        raise ProblemError(f"{problem_label(problem)} needs more memory than this machine can give for "
                           f"{spec.name}'s inputs; use a smaller --size") from None


def _evaluator(run: _Run, workload: Workload | None, folder: Path) -> Evaluator:
    """The real evaluator: the run's device, inputs made once, compile threads as asked."""
    assert workload is not None
    # builds are CPU work: N threads on fewer cores slow the one being waited for as much as
    # the others (200 at once on 2 cores timed a 1-second build out); the queue is first in, first out
    timing = replace(run.options.timing, compile_threads=min(max(run.ahead, 0), os.cpu_count() or 1))
    setup = Setup(run.spec, run.info.selector, dict(run.problem), "", timing)
    return open_evaluator(setup, workload, run.options.isolate, folder)


#: How a worker killed by SIGKILL is recorded (worker.describe_exit), and what marks one that
#: was measured again and killed again (:meth:`_Run._killed_hint`).
KILLED = died(-signal.SIGKILL)
KILLED_AGAIN = "so it is not measured again"


def kept_entry(verdict: str | None) -> str:
    """A ``kept`` save verdict in words, after the profile's path (trial 116: "not saved: ….yaml
    kept (trial count updated)")."""
    counted = " (its trial count updated)" if "trial count" in str(verdict) else ""
    return f"keeps its entry for this problem{counted}"


def what_was_saved(report: TuneReport) -> str:
    """What a run cut short by its database or worker saved, in words (trial 74: "was saved"
    where the profile kept its finished entry)."""
    if report.profile_path is None:
        return "nothing was saved"
    if (report.profile_verdict or "").startswith("kept"):
        return f"nothing was saved: {report.profile_path} {kept_entry(report.profile_verdict)}"
    return f"the best so far was saved to {report.profile_path} (partial)"


def default_time_limit(baseline: Measurement) -> float:
    """Per-candidate limit once the baseline is known: generous for compiles, tight for hangs."""
    return max(30.0, 10.0 * baseline.wall_s)


def profile_entry(report: TuneReport, partial: bool, study: str | None = None) -> profiles.Entry:
    """The profile entry of a run's best configuration (see :mod:`autotune.record`)."""
    assert report.best is not None
    return record.entry(report.spec, report.problem, report.best, report.study_trials,
                        partial=partial, baseline=report.baseline, study=study)


def save_best(report: TuneReport, storage: str | None,
              measured: Callable[[Mapping[str, Value]], Measurement | None] | None = None) -> TuneReport:
    """``report`` with its best saved in the device's profile (see :func:`_save`), as partial
    where the run stopped or its leaders were not timed again; a run that measured nothing and
    timed nothing again leaves an entry of its problem as it was (trial 35: a run past its
    --study-timeout replaced the confirmed winner with the search's fastest single timing,
    which that confirmation had overturned). ``measured``: the run's measurement of a
    configuration (None: not measured), where the run can tell (see :func:`_seen`)."""
    if report.best is None:
        return report
    if baseline_only(report):  # trial 65: "picks among other sizes'" where this size had an entry
        then = "the profile's entry for this size stays" if _entry_of(report) else \
            "load_kernel picks among other sizes' tuned configurations instead"
        return replace(report, profile_verdict=f"{BASELINE_ONLY}: {then}")
    if (now := _current_hash(report.spec)) is not None and now != report.spec.spec_hash:
        kept = "" if storage == ":memory:" else " (its study keeps the trials)"  # trial 65: said of :memory: too
        return replace(report, profile_verdict=SPEC_CHANGED.format(path=report.spec.path) + kept)
    if report.measured == 0 and report.unconfirmed and _entry_of(report):
        return replace(report, profile_path=profiles.path_for(report.device.slug, settings.profiles_dir()),
                       profile_verdict=NOTHING_NEW)
    return _save(report, partial=report.partial, study=report.study_key, seen=_seen(report, measured))


def _seen(report: TuneReport, measured: Callable[[Mapping[str, Value]], Measurement | None] | None
          ) -> profiles.Seen:
    """What the run of ``report`` knows of a profile entry's configuration (profiles.merge): its
    study measured it, and this run found it slower than its best: timed in the leaders' rounds
    beside it, or measured slower in the search (trial 96, trial 97: an entry of another study so
    measured, 4x slower, was kept as "faster than this run's best", its one time of another
    moment against this run's)."""
    def config(old: profiles.Entry) -> Mapping[str, Value] | None:
        return report.spec.from_stored(old.params, old.build_flags)

    def studied(old: profiles.Entry) -> bool:
        return measured is None or ((c := config(old)) is not None and measured(c) is not None)

    def beaten(old: profiles.Entry) -> bool:
        # of one configuration's two times the faster stays: compared as configurations, since an
        # entry may leave out a parameter whose `when` does not hold (trial 99)
        if (c := config(old)) is None or report.best is None or config_key(c) == config_key(report.best.params):
            return False
        m = measured(c) if measured is not None else None
        return config_key(c) in report.retimed or (m is not None and m.ok and m.median_ms > report.best.median_ms)

    return profiles.Seen(studied, beaten)


#: Why a stopped run that timed only the baseline in full saves nothing (trial 59: a 2 s run
#: saved the naive baseline, which load_kernel then used as the size's tuned kernel, 20x slower
#: than the configuration it picks at first use from other sizes' entries).
BASELINE_ONLY = ("the run stopped before it timed in full any configuration but the baseline, which is no tuning "
                 "result")

#: Why a run whose spec file changed while it ran saves nothing (trial 64: a worker of the old
#: version replaced the entry a run of the edited spec had just saved, so load_kernel had only
#: a stale one).
SPEC_CHANGED = ("{path} (or its template or reference) changed while this run tuned it: an entry of the version "
                "it tuned would be stale at once, and would replace the current version's")


def _current_hash(spec: KernelSpec) -> str | None:
    """The spec hash of ``spec``'s file as it is now (None where it no longer loads: saved as
    before, since no version could use an entry then)."""
    try:
        return specs.load(spec.path).spec_hash
    except AutotuneError:
        return None


#: How a run can stop other than at its own end or deadline: a signal, a lost database, a
#: worker that cannot go on (its best is saved as partial).
STOPPED = ("interrupted", "storage lost", "worker failed")

#: How a run can stop before its search ends: a deadline, or one of :data:`STOPPED`.
CUT_SHORT = ("timeout", "study timeout", *STOPPED)


def baseline_only(report: TuneReport) -> bool:
    """The run was cut short with the baseline its best and the study's one configuration timed
    in full (trial 65: a second configuration, pruned, let a 1 s run save the baseline)."""
    return (report.stopped_by in CUT_SHORT and report.fully_timed <= 1 and report.best is not None
            and report.baseline is not None and report.best.params == report.baseline.params)


#: The profile verdict of a run that measured nothing and timed no leaders again, where the
#: profile holds an entry of its problem: it has nothing the entry lacks.
NOTHING_NEW = "left as it was: this run measured nothing and timed no leaders again"


def _entry_of(report: TuneReport) -> profiles.Entry | None:
    """The entry of the run's problem and spec version in the device's profile, if usable."""
    path = profiles.path_for(report.device.slug, settings.profiles_dir())
    return next((e for e in profiles.entries(profiles.read(path, check_entries=False), report.spec.name, str(path),
                                             lambda _: None)
                 if dict(e.problem) == dict(report.problem) and report.spec.stores(e)), None)


def _save(report: TuneReport, partial: bool, study: str | None, seen: profiles.Seen | None = None) -> TuneReport:
    """Save the best in the device's profile (``seen``: what the run knows of an entry's
    configuration; see profiles.merge); a failure says whether the study (None: in memory)
    keeps the trials."""
    path = profiles.path_for(report.device.slug, settings.profiles_dir())
    try:
        verdict = profiles.save(profile_entry(report, partial, study), report.spec.name,
                                report.device.profile_header(), path, usable=report.spec.stores, seen=seen)
    except SaveStopped:
        raise
    except ProfileError as exc:
        if study is None:
            then = "the study was in memory"
        elif report.stopped_by == "storage lost":  # trial 44: "the trials are kept", though some were not
            then = (f"the study keeps the trials stored before its database stopped answering, not those after; "
                    f"once {path.name}, the database and their folders can be written (a full disk?), run the "
                    "same command again, which resumes the study, measures again what it lacks, and saves its best")
        else:
            then = (f"the trials are kept in the study: once {path.name} and its folder can be written, run the "
                    "same command again, which resumes the study and saves its best")
        raise ProfileNotSaved(f"{exc}; {then}", replace(report, profile_error=True)) from None
    kept = None
    if verdict.startswith("kept"):  # the summary says which entry stays, and why: its best is not it
        kept = next((e for e in profiles.entries(profiles.read(path), report.spec.name, str(path), lambda _: None)
                     if dict(e.problem) == dict(report.problem) and e.spec_hash == report.spec.spec_hash), None)
    return replace(report, profile_path=path, profile_verdict=verdict, profile_kept=kept)
