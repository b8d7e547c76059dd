"""A tuning run's records for the report: studies found in a storage, their trials, the profile.

Pure reading, no plotting: :func:`find_sections` turns a kernel, an optional problem and an
optional device into one :class:`Section` per study (device and problem), each holding the
study's measurements in trial order, the profile's entry and the device's known ceilings.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import optuna

from .. import profiles, settings
from ..ceilings import Ceiling
from ..errors import AutotuneError, ProblemError, clipped, warn
from ..result import Measurement, Status
from ..space import canonical, config_key
from ..spec import KernelSpec, Value, parse_problem_label, problem_label
from ..study import (
    RUN,
    StudyId,
    confirmed,
    measurement_of,
    open_storage,
    quiet_optuna,
    shown_url,
    spec_file,
    sqlite_path,
    stored_key,
    supersedes,
    verdicts,
)

#: A pause this long between two stored trials starts a new session (a resumed run).
SESSION_GAP = timedelta(minutes=10)
#: The ceilings a roofline is drawn with: the profile's device block keeps them by these names.
COPY, FP32 = "copy bandwidth", "fp32 FMA peak"


@dataclass(frozen=True)
class Trial:
    """One stored trial: its number in the study (from 1, as the run's progress lines count
    configurations: see :func:`_trials`), its measurement and when it was stored."""

    number: int
    m: Measurement
    stored_at: datetime | None
    run: str | None = None  # the run that measured it (studies from before 2026-11-27: None)
    retimed: bool = False  # its times are the rounds' that timed the leaders again after a search


@dataclass(frozen=True)
class Section:
    """One study (kernel, device, problem) and what the page shows of it."""

    spec: KernelSpec
    study_name: str
    slug: str
    problem: Mapping[str, Any]
    spec_hash: str
    trials: tuple[Trial, ...]
    device_name: str = ""
    entry: profiles.Entry | None = None
    entry_ours: bool = True  # the entry was saved by this study (not another one of this problem)
    ceilings: tuple[Ceiling, ...] = ()
    importances: Mapping[str, float] = field(default_factory=dict)
    importance_method: str = ""
    importance_where: Mapping[str, str] = field(default_factory=dict)  # a conditional one's `when`

    @property
    def label(self) -> str:
        return problem_label(self.problem)

    @property
    def stale(self) -> bool:
        """Tuned with an earlier version of the spec (template or space changed since)."""
        return self.spec_hash != self.spec.spec_hash

    @property
    def ok(self) -> list[Trial]:
        return [t for t in self.trials if t.m.ok]

    @property
    def full(self) -> list[Trial]:
        """The verified trials timed in full (not cut short by --prune)."""
        return [t for t in self.ok if not t.m.pruned]

    @property
    def best(self) -> Trial | None:
        """The fastest verified trial timed in full (a pruned one only when there is no other)."""
        return min(self.full or self.ok, key=lambda t: t.m.median_ms, default=None)

    def find(self, config: Mapping[str, Value]) -> Trial | None:
        """The trial that measured ``config`` (compared in its canonical form), if any."""
        try:
            key = config_key(canonical(self.spec, config, self.problem, {}))
        except AutotuneError:
            return None
        return next((t for t in self.trials if config_key(t.m.params) == key), None)

    @property
    def baseline(self) -> Trial | None:
        return self.find(self.spec.baseline_config)

    @property
    def default(self) -> Trial | None:
        return self.find(self.spec.default_config)

    def best_so_far(self) -> list[tuple[int, float]]:
        """(trial number, best verified time in ms up to it) at every trial after the first success."""
        out, best = [], math.inf
        for t in self.trials:
            if t.m.ok and not t.m.pruned:
                best = min(best, t.m.median_ms)
            if math.isfinite(best):
                out.append((t.number, best))
        return out

    def top(self, count: int = 10) -> list[Trial]:
        """The ``count`` fastest verified trials timed in full, fastest first."""
        return sorted(self.full, key=lambda t: t.m.median_ms)[:count]

    def failures(self) -> dict[str, int]:
        """Trials by outcome other than ok; ``timed once`` counts the pruned ones."""
        counts = Counter(t.m.status.value for t in self.trials if not t.m.ok)
        counts.update("timed once" for t in self.ok if t.m.pruned)
        return dict(sorted(counts.items()))

    def wall_s(self) -> float:
        """Seconds of tuning: the time the runs spent on their trials, from the start of each
        run's first (its stored time less its own measuring time) to its last one stored; runs
        at the same time (workers) count once. Trials of studies from before trials named their
        run: the time between them, where a pause of SESSION_GAP or more is time between runs
        and the trial after it counts its own measuring time."""
        spans: dict[str, tuple[float, float]] = {}
        legacy, previous = 0.0, None
        for t in sorted((t for t in self.trials if t.stored_at is not None), key=lambda t: t.stored_at or 0):
            assert t.stored_at is not None
            end = t.stored_at.timestamp()
            if t.run is not None:
                start, last = spans.get(t.run, (end - t.m.wall_s, end))
                spans[t.run] = (min(start, end - t.m.wall_s), max(last, end))
                continue
            gap = t.stored_at - previous if previous is not None else None
            legacy += gap.total_seconds() if gap is not None and gap < SESSION_GAP else t.m.wall_s
            previous = t.stored_at
        return legacy + _union_s(spans.values())

    def trials_per_minute(self) -> float | None:
        wall = self.wall_s()
        return 60 * len(self.trials) / wall if wall > 0 else None

    def metrics(self, ms: float) -> dict[str, float]:
        """The spec's metrics for a run of ``ms`` on this problem ({} when they cannot be computed)."""
        try:
            return self.spec.throughput(self.problem, ms)
        except (AutotuneError, ArithmeticError, TypeError):
            return {}

    def applying(self, name: str) -> list[Trial]:
        """The verified trials whose configuration uses parameter ``name`` (its ``when`` holds)."""
        return [t for t in self.ok if name not in self.spec.inactive(t.m.params, self.problem)]

    def variant_first(self) -> list[str]:
        """The parameters the trials vary, the variant parameter first, then by importance."""
        varied = [n for n in self.spec.parameter_names if len({t.m.params.get(n) for t in self.applying(n)}) > 1]
        variant = variant_parameter(self.spec)
        return sorted(varied, key=lambda n: (n != variant, -self.importances.get(n, 0.0)))


def variant_parameter(spec: KernelSpec) -> str | None:
    """The parameter other parameters' ``when`` conditions name (ALGO, VARIANT), if any."""
    named = {n for p in spec.parameters if p.when is not None for n in spec.behind(p.when.names)}
    return next((p.name for p in spec.parameters if p.name in named), None)


def open_existing(url: str | None) -> tuple[str, optuna.storages.BaseStorage]:
    """The storage URL and the storage, which must exist already (a report creates nothing)."""
    url = url or settings.default_storage()
    if url.startswith("sqlite:///") and not sqlite_path(url).is_file():
        raise ProblemError(f"no study database at {url[len('sqlite:///'):]}; tune first (`autotune run "
                           "KERNEL`), or give the --storage the run used")
    return url, open_storage(url, reading=True)


def find_sections(spec: KernelSpec, storage: str | None, problem: Mapping[str, Any] | None = None,
                  device: str | None = None) -> list[Section]:
    """A section per study of ``spec`` in ``storage``, by device then problem size.

    ``problem``: only that problem. ``device``: a device slug as the study names hold it, a part
    of one (``h200``), or a selector of a device present here. Studies of an earlier version of
    the spec are shown only for problems with no study of the current one.
    """
    url, opened = open_existing(storage)
    every = studies(url, opened)
    named = [s for s in every if s.kernel == spec.name]
    # another spec file of this kernel name is not an earlier version of this one (trial 36)
    ids = [s for s in named if s.spec_hash == spec.spec_hash or spec_file(opened, s.name) in ("", spec.file_id)]
    if not ids:
        kernels = sorted({s.kernel for s in every})
        held = (f"its studies of {spec.name} tune another spec file of that kernel name" if named else
                f"it has studies of {', '.join(kernels)}" if kernels else "it has no autotune studies")
        raise ProblemError(f"no study of {spec.name} in {shown_url(url)} ({held}); tune first (`autotune run "
                           f"{spec.argument}`), or give the --storage the run used")
    if device is not None:
        keep = match_devices(device, sorted({s.slug for s in ids}))
        ids = [s for s in ids if s.slug in keep]
    if problem is not None:
        # by device, then size as numbers (trial 28: N=1024 listed before N=256)
        labels = [f"{s.label} on {s.slug}" for s in sorted(
            {(s.slug, s.label): s for s in ids}.values(),
            key=lambda s: (s.slug, _sizes(parse_problem_label(s.label))))]
        ids = [s for s in ids if s.label == problem_label(problem)]
        if not ids:
            raise ProblemError(f"no study of {spec.name} for {problem_label(problem)} in {shown_url(url)}; "
                               f"its studies: {'; '.join(labels)}")
    return sorted((_section(spec, s, opened) for s in _current_first(spec, ids)), key=_order)


def match_devices(selector: str, slugs: Sequence[str]) -> set[str]:
    """The slug ``selector`` names: equal, contained (in one only, or in the slug of the device it
    selects here, as show takes it), else the slug of the device it selects here."""
    wanted = profiles.slug_named(selector.strip()).lower()  # a profile's file name too, as show's -d takes it
    found = {s for s in slugs if s == wanted} or {s for s in slugs if wanted and wanted in s}
    if len(found) == 1:
        return found
    here = _selected_here(selector)
    if here is not None and (here in found or (not found and here in slugs)):  # trial 101: `-d xeon` was refused,
        # where show takes the first device it names
        return {here}
    if found:  # trial 99: both reported
        raise ProblemError(f"{selector!r} is a part of several devices' names: -d {' | -d '.join(sorted(found))}")
    from ..device import several

    # trial 91: `-d all` was "no study on a device matching 'all'"
    takes = "; report takes one device, and without -d shows every device's studies" if several(selector) else ""
    raise ProblemError(f"no study on a device matching {selector!r}{takes}; devices with studies of this "
                       f"kernel: {', '.join(slugs)} (give one of these, or a part of it, to -d)")


def _selected_here(selector: str) -> str | None:
    """The slug of the device ``selector`` selects on this machine (it warns where it names
    several), or None."""
    try:
        from ..device import select

        return select(selector, require_build=False)[0].slug
    except Exception:  # no OpenCL here, or no such device: the slugs are the answer  # noqa: BLE001
        return None


def studies(url: str, opened: optuna.storages.BaseStorage) -> list[StudyId]:
    """The studies autotune made in a storage."""
    try:
        names = [s.study_name for s in opened.get_all_studies()]
    except Exception as exc:  # a database that opened but holds no optuna tables  # noqa: BLE001
        raise ProblemError(f"{shown_url(url)} holds no optuna studies ({type(exc).__name__}); give the --storage "
                           "the run used") from None
    return [s for n in names if (s := StudyId.parse(n)) is not None]


def _current_first(spec: KernelSpec, ids: list[StudyId]) -> list[StudyId]:
    """Per device and problem, the current spec's study, else every earlier one."""
    current = {(s.slug, s.label) for s in ids if s.spec_hash == spec.spec_hash}
    return [s for s in ids if s.spec_hash == spec.spec_hash or (s.slug, s.label) not in current]


def _order(s: Section) -> tuple[Any, ...]:
    return (s.slug, _sizes(s.problem), s.stale)


def _sizes(problem: Mapping[str, Any]) -> tuple[tuple[int, int, str], ...]:
    """A problem's order: sizes as numbers, then options by name."""
    return tuple((0, v, "") if isinstance(v, int) else (1, 0, str(v)) for v in problem.values())


def _section(spec: KernelSpec, sid: StudyId, opened: optuna.storages.BaseStorage) -> Section:
    study = optuna.load_study(study_name=sid.name, storage=opened)
    trials = tuple(_confirmed(_trials(study.get_trials(deepcopy=False)), study))
    problem = parse_problem_label(sid.label)
    device_name, entry, found = _profile(spec.name, sid.slug, problem)
    method, importances, scopes = importance(spec, trials, problem)
    # an entry from before entries named their study is taken as this one's, as it was
    ours = entry is None or entry.study is None or entry.study == stored_key(study)
    return Section(spec, sid.name, sid.slug, problem, sid.spec_hash, trials, device_name or sid.slug, entry,
                   ours, found, importances, method, scopes)


def _confirmed(trials: list[Trial], study: optuna.Study) -> list[Trial]:
    """``trials`` as the runs' confirmations left them: at the rounds' times, or wrong where the
    check again rejected them (trial 40: the page's best was a configuration the rounds had
    overturned, at its one search timing)."""
    retimed, rejected = verdicts(study)
    out = []
    for t in trials:
        m = confirmed(t.m, config_key(t.m.params), retimed, rejected)
        out.append(replace(t, m=m, retimed=m.ok and m.times_ms != t.m.times_ms))
    return out


def _union_s(spans: Iterable[tuple[float, float]]) -> float:
    """The seconds covered by the (start, end) spans, overlaps counted once.

    Example:
        >>> _union_s([(0, 2), (1, 3), (5, 6)])
        4.0
    """
    total, reach = 0.0, -math.inf
    for start, end in sorted(spans):
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


def _trials(stored: Sequence[optuna.trial.FrozenTrial]) -> list[Trial]:
    """The measured trials, one per configuration: a timeout measured again later gives way to
    that measurement, as in the run.

    Numbered as the run's progress lines count (``study N``): by configuration, in the order each
    was first measured. A re-measured timeout keeps its number, and a trial a stopped run left
    unfinished measured nothing and takes none (optuna's numbers count both, which put the
    report one ahead of the lines after a stop: trial 28)."""
    out: dict[str, Trial] = {}
    numbers: dict[str, int] = {}
    for t in sorted(stored, key=lambda t: t.number):
        status = t.user_attrs.get("status")
        if status is None or status == Status.INTERRUPTED.value or (m := measurement_of(t)) is None:
            continue
        key = config_key(m.params)
        number = numbers.setdefault(key, len(numbers) + 1)
        if key not in out or supersedes(m, out[key].m):  # in place: the list stays in number order
            out[key] = Trial(number, m, t.datetime_complete, t.user_attrs.get(RUN))
    return list(out.values())


def _profile(kernel: str, slug: str, problem: Mapping[str, Any]
             ) -> tuple[str, profiles.Entry | None, tuple[Ceiling, ...]]:
    """The device's name, the profile entry for ``problem`` and the ceilings its device block keeps.
    A profile that cannot be read, or a malformed entry, is a warning: the study still reports
    (trial 95: one hand-broken entry of another kernel stopped every report)."""
    found: tuple[Ceiling, ...]
    name, entry, found = "", None, ()
    def said(exc: Exception) -> None:
        warn(f"{exc}; the report leaves it out")

    folders = profiles.search_folders(settings.profiles_dir())
    docs = list(profiles.readable((profiles.path_for(slug, f) for f in folders), said))
    for path, doc in docs:
        header = doc.get("device") or {}
        name = name or str(header.get("name", ""))
        found = found or ceilings_of(header, str(path))
    # by label: the study's name gives every value as text or a number, the profile as the spec
    # types it (trial 97: mul1's LOG_BASE '30' against 30, so its entry was never found)
    entry = next((e for e, _ in profiles.entries_in(docs, kernel, said)
                  if problem_label(e.problem) == problem_label(problem)), None)
    return name, entry, found


def ceilings_of(header: Mapping[str, Any], where: str = "profile") -> tuple[Ceiling, ...]:
    """The ceilings a profile's device block keeps under ``ceilings`` (see ``autotune bench``);
    a hand-edited one that is not a ceiling is left out with a warning naming it."""
    raw = header.get("ceilings") or {}
    if not isinstance(raw, dict):
        warn(f"{where}: device.ceilings: {clipped(repr(raw), 60)} is no mapping of ceiling names to ceilings; the "
             "report leaves them out: fix it, or delete it and run `autotune bench` again")
        raw = {}
    out = []
    for name, c in raw.items():
        try:
            value = c["value"]
            # trial 97: 0 divided the figures by zero; trial 99: 400 digits, `true` and '7' were read
            if not (profiles.is_number(value) and value > 0):
                raise ValueError(value)
            out.append(Ceiling(str(name), float(value), str(c["unit"]), str(c.get("how", ""))))
        except (KeyError, TypeError, ValueError, OverflowError):
            warn(f"{where}: device.ceilings.{name}: {clipped(repr(c), 60)} is no ceiling (a mapping of a positive "
                 "number `value`, a `unit` and `how`); the report leaves it out: fix it, or delete it and run "
                 "`autotune bench` again")
    return tuple(out)


def importance(spec: KernelSpec, trials: Sequence[Trial], problem: Mapping[str, Any]
               ) -> tuple[str, dict[str, float], dict[str, str]]:
    """Parameter importances for the log of the time over the verified trials timed in full:
    optuna's fANOVA where scikit-learn is installed, else :func:`main_effects` (no dependency).
    A parameter with a ``when`` is judged over the trials where it applies, against the others
    that apply in all of them, and the third mapping gives its condition: the value that a
    configuration ignores says nothing of its time. ("", {}, {}) with fewer than 4 such trials
    or nothing varied."""
    done = [(t, spec.inactive(t.m.params, problem)) for t in trials if t.m.ok and not t.m.pruned]
    method, out, where = "", {}, {}
    for condition in dict.fromkeys(p.when.source if p.when else "" for p in spec.parameters):
        judged = {p.name for p in spec.parameters if (p.when.source if p.when else "") == condition}
        subset = [(t, off) for t, off in done if not judged & off]
        # over every trial, the parameters that apply to all; else those that apply to all of the subset
        names = judged if not condition else set(spec.parameter_names).difference(*(off for _, off in subset))
        found, shares = _importances(spec, [t for t, _ in subset], names)
        method = method or found
        out.update({n: v for n, v in shares.items() if n in judged})
        where.update({n: condition for n in shares if n in judged and condition})
    return method, out, where


def _importances(spec: KernelSpec, done: Sequence[Trial], names: set[str]) -> tuple[str, dict[str, float]]:
    """Importances of ``names`` over ``done``; ("", {}) with fewer than 4 trials or none varied."""
    dists: dict[str, optuna.distributions.BaseDistribution] = {}
    for p in spec.parameters:
        seen = {t.m.params.get(p.name) for t in done}
        if p.name in names and len(seen) > 1 and seen <= set(p.values):
            dists[p.name] = optuna.distributions.CategoricalDistribution([v for v in p.values if v in seen])
    if len(done) < 4 or not dists:
        return "", {}
    if not _has_sklearn():
        return MAIN_EFFECTS, main_effects([{n: t.m.params[n] for n in dists} for t in done],
                                          [math.log(t.m.median_ms) for t in done])
    with quiet_optuna(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(direction="minimize")
        study.add_trials([optuna.trial.create_trial(params={n: t.m.params[n] for n in dists}, distributions=dists,
                                                    value=math.log(t.m.median_ms)) for t in done])
        try:
            return "fANOVA", optuna.importance.get_param_importances(
                study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0), normalize=False)
        except (ValueError, RuntimeError, ZeroDivisionError):
            return "", {}  # too few distinct results to tell the parameters apart


#: The importance method without scikit-learn (see :func:`main_effects`).
MAIN_EFFECTS = "main effects, ω²"


def main_effects(configs: Sequence[Mapping[str, Any]], values: Sequence[float]) -> dict[str, float]:
    """Each parameter's share of the variance of ``values`` that its values explain alone, less
    what chance explains (ω², the unbiased one-way ANOVA effect size, 0 at least; not
    normalized: trial 70's lone variant parameter explaining 2.5% was drawn at 100%); a
    parameter with nearly as many values as trials is left out (not judged). Optuna's PED-ANOVA, used before,
    gave a parameter with no effect at all 34% (trial 59); interactions are fANOVA's.

        >>> c = [{"A": a, "B": b} for a in (1, 2, 4, 8) for b in (1, 2) for _ in range(3)]
        >>> shares = main_effects(c, [math.log(x["A"]) + 0.01 * (i % 3) for i, x in enumerate(c)])
        >>> round(shares["A"], 2), round(shares["B"], 2)
        (1.0, 0.0)
    """
    y = np.asarray(values, dtype=float)
    total = float(((y - y.mean()) ** 2).sum())
    out: dict[str, float] = {}
    for name in configs[0] if configs else ():
        groups: dict[Any, list[float]] = {}
        for c, v in zip(configs, y, strict=True):
            groups.setdefault(c[name], []).append(float(v))
        k, n = len(groups), len(y)
        if n - k < 2:  # no repeat to tell chance from effect (trial 61: one trial per value read as 1)
            continue
        between = sum(len(g) * (np.mean(g) - y.mean()) ** 2 for g in groups.values())
        within = (total - between) / (n - k)
        out[name] = float(max(0.0, (between - (k - 1) * within) / (total + within))) if total > 0 else 0.0
    return out


def _has_sklearn() -> bool:
    """Whether scikit-learn, which fANOVA's random forest needs, is installed."""
    return importlib.util.find_spec("sklearn") is not None
