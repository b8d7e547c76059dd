"""The study log: a tuning run's trials in optuna storage, and what was measured so far.

One study per kernel, device, problem and spec hash, so running the same command again
resumes it. Every trial carries its :class:`~autotune.result.Measurement` as user attributes
(:meth:`Measurement.attrs`), so ``seen`` (configuration → measurement) is rebuilt from any
storage, and nothing is measured twice.

Example:
    >>> log = StudyLog.open("k|dev|N=8|abc", ":memory:", optuna.samplers.RandomSampler(0))
    >>> trial = log.ask({"TS": 8}, {"TS": optuna.distributions.CategoricalDistribution([4, 8])})
    >>> recorded = log.tell(trial, Measurement(Status.OK, times_ms=(1.0,), params={"TS": 8}))
    >>> log.measured_total, log.best.params, recorded.number
    (1, {'TS': 8}, 0)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import optuna
from filelock import FileLock, Timeout

from . import settings
from .errors import ProblemError
from .result import Measurement, Status
from .space import config_key
from .spec import Value

#: ``--storage`` value for a study kept in memory only (tests, throw-away experiments).
IN_MEMORY = ":memory:"


def open_storage(url: str | None) -> optuna.storages.BaseStorage:
    """The optuna storage; SQLite files are created under a lock (concurrent first runs).

    Raises ProblemError, in one line, for a URL that names no usable database: a bad URL, a
    driver that is not installed, a file that is not a study database, a folder not writable.
    """
    if url == IN_MEMORY:
        return optuna.storages.InMemoryStorage()
    url = url or settings.default_storage()
    try:
        if not url.startswith("sqlite:///"):
            return optuna.storages.RDBStorage(url)
        path = Path(url[len("sqlite:///"):])
        if not path.name:
            raise ProblemError(f"--storage {url!r} names no file; use sqlite:///PATH/studies.db")
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=120):
            # a generous busy timeout: several runs may write to one study database at once
            return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
    except ProblemError:
        raise
    except OSError as exc:
        raise ProblemError(f"cannot write the study database for {url!r} ({exc.strerror}: {exc.filename}); "
                           "set AUTOTUNE_HOME or --storage to a writable place") from None
    except Exception as exc:  # SQLAlchemy's URL, driver and database errors  # noqa: BLE001
        raise ProblemError(_storage_problem(url, exc)) from None


def _storage_problem(url: str, exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "not a database" in first or "malformed" in first:
        path = url[len("sqlite:///"):]
        return (f"{path} is not a usable study database ({first}); move it aside to start afresh "
                "(its studies are lost), or give another --storage")
    return (f"--storage {url!r} cannot be opened ({type(exc).__name__}: {first}); give an optuna "
            "storage URL such as sqlite:///PATH/studies.db whose database driver is installed")


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """optuna's per-trial INFO lines off while tuning; the caller's level restored after."""
    previous = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(previous)


class StudyLog:
    """The trials of one study, and the measurements they hold, by configuration."""

    def __init__(self, study: optuna.Study) -> None:
        self.study = study
        self.seen: dict[str, Measurement] = {}
        self.best: Measurement | None = None
        #: configurations built and run in this study, whatever the outcome (counted as noted,
        #: since the loop asks for it every iteration)
        self.measured_total = 0
        _discard_orphans(study)
        for t in study.get_trials(deepcopy=False):
            if "status" in t.user_attrs and t.user_attrs["status"] != Status.INTERRUPTED.value:
                self._note(Measurement.from_attrs(t.user_attrs, t.params, t.number))

    @classmethod
    def open(cls, name: str, storage: str | None, sampler: optuna.samplers.BaseSampler) -> StudyLog:
        opened = open_storage(storage)
        try:
            study = optuna.create_study(study_name=name, storage=opened, direction="minimize",
                                        load_if_exists=True, sampler=sampler)
        except Exception as exc:  # a database that opened but cannot hold studies  # noqa: BLE001
            raise ProblemError(_storage_problem(storage or settings.default_storage(), exc)) from None
        return cls(study)

    def get(self, params: Mapping[str, Value]) -> Measurement | None:
        return self.seen.get(config_key(params))

    def ask(self, fixed: Mapping[str, Value] | None,
            distributions: Mapping[str, optuna.distributions.BaseDistribution]) -> optuna.Trial:
        """A new trial: ``fixed`` parameters, or the sampler's proposal when None."""
        if fixed is not None:
            self.study.enqueue_trial(dict(fixed))
        return self.study.ask(dict(distributions))

    def leaders(self, count: int) -> list[Measurement]:
        """The ``count`` fastest verified configurations timed in full (not pruned), fastest first."""
        timed = [m for m in self.seen.values() if m.ok and not m.pruned]
        return sorted(timed, key=lambda m: m.median_ms)[:count]

    def tell(self, trial: optuna.Trial, m: Measurement, repeat: bool = False) -> Measurement:
        """Store ``m`` as the trial's outcome (``repeat``: an earlier trial's measurement)."""
        for key, value in m.attrs().items():
            trial.set_user_attr(key, value)
        if repeat:
            trial.set_user_attr("repeat", True)
        self.study.tell(trial, m.median_ms * 1e-3 if m.ok else math.inf)
        recorded = replace(m, number=trial.number)
        if not repeat:
            self._note(recorded)
        return recorded

    def tell_interrupted(self, trial: optuna.Trial) -> None:
        """The trial in flight when the run was stopped: failed, measured again next time."""
        trial.set_user_attr("status", Status.INTERRUPTED.value)
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _note(self, m: Measurement) -> None:
        key = config_key(m.params)
        if key not in self.seen:
            self.seen[key] = m
            self.measured_total += m.status is not Status.INVALID
        if m.ok and (self.best is None or m.median_ms < self.best.median_ms):
            self.best = m


def _discard_orphans(study: optuna.Study) -> None:
    """Fail the trials a stopped run left open (the caller holds the study's lock, so no live
    run owns them).

    An interrupt between ``enqueue_trial`` and ``ask`` leaves a WAITING trial; the next run's
    ``ask`` would return it instead of the configuration just enqueued, and one configuration
    would never be measured. A run killed mid-trial leaves it RUNNING.
    """
    for _ in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
        trial = study.ask()
        trial.set_user_attr("status", Status.INTERRUPTED.value)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)  # no status: not a result


@contextmanager
def exclusive(name: str, storage: str | None) -> Iterator[None]:
    """Hold the study for this run: a second run of the same study on this host is refused
    (two would measure some configurations twice)."""
    if storage == IN_MEMORY:
        yield
        return
    key = hashlib.sha256(f"{storage or settings.default_storage()}|{name}".encode()).hexdigest()[:24]
    folder = settings.home() / "locks"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(folder / f"{key}.lock"), timeout=0)
        lock.acquire()
    except Timeout:
        raise ProblemError("another autotune run is tuning this study (kernel, device, problem) now; "
                           "wait for it to finish, or stop it first") from None
    except OSError as exc:
        raise ProblemError(f"cannot write {folder} ({exc.strerror}); set AUTOTUNE_HOME to a writable "
                           "folder") from None
    try:
        yield
    finally:
        lock.release()
