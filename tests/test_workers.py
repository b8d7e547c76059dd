"""Several workers on one study: claims, shared budgets, `run -d A,B`, and a real PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa

import pgserver
from autotune import cli, profiles, settings, study
from autotune import device as devices
from autotune import spec as specs
from autotune.claims import Claims
from autotune.errors import ProblemError, ProfileError, ProfileNotSaved, StorageError
from autotune.limits import MIN_BUILDS
from autotune.result import Measurement, Status
from autotune.space import config_key, enumerate_valid
from autotune.tuner import TuneOptions, study_name, tune
from conftest import DEVICES, FAKE, SCALE_YAML, TEMPLATE_CL, QuietEvaluator, write_spec

SIZE = "N=262144"


class Slow(QuietEvaluator):
    """Answers after a little while (so that workers interleave); records what it measured."""

    def __init__(self, calls: list[dict[str, Any]], lock: threading.Lock,
                 together: tuple[threading.Event, threading.Event] | None = None) -> None:
        """``together`` (this worker's event, the other's): measure only once both workers
        have started, so that on a loaded machine one does not use the budget before the
        other has set up."""
        self.calls, self.lock, self.together = calls, lock, together

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
        if self.together is not None:
            self.together[0].set()
            self.together[1].wait(60)
        time.sleep(0.005)
        if verify:
            with self.lock:
                self.calls.append(dict(params))
        t = 1.0 / (params["WPT"] * params["WG"])
        return Measurement(Status.OK, times_ms=(t, t, t), error=0.0)


def _stored_keys(name: str, storage: str) -> list[str]:
    study = optuna.load_study(study_name=name, storage=storage)
    return [config_key(t.params) for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
            if "status" in t.user_attrs]


# ---- claims -------------------------------------------------------------------------------

def test_a_claim_is_refused_while_held_or_measured_and_taken_over_once_expired(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path}/c.db")
    a, b = Claims.open(engine, "s"), Claims(engine, "s", "host:2")
    assert a.take({"X": 1}, ttl_s=60)
    assert not b.take({"X": 1}, ttl_s=60)  # held
    a.finish({"X": 1})
    assert not b.take({"X": 1}, ttl_s=60)  # measured
    assert a.take({"X": 2}, ttl_s=0.05)
    time.sleep(0.1)
    assert b.take({"X": 2}, ttl_s=60)  # a died: its claim expired
    assert not a.take({"X": 2}, ttl_s=60)
    b.release({"X": 2})
    assert a.take({"X": 2}, ttl_s=60)  # given back unmeasured
    assert Claims(engine, "other study", "host:3").take({"X": 1}, ttl_s=60)
    assert {(str(c.params), c.done) for c in a.held()} == {("{'X': 1}", True), ("{'X': 2}", False)}


def test_a_claim_of_a_process_of_this_host_that_is_gone_is_taken_over_before_it_expires(tmp_path):
    """Trial 35: after a killed run, its claim on the baseline kept the next run from measuring
    it for the claim's 5 minutes; a process of this host can be seen to be gone."""
    import socket

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    engine = sa.create_engine(f"sqlite:///{tmp_path}/c.db")
    dead = Claims(engine, "s", f"{socket.gethostname()}:{int(gone.stdout)}")
    elsewhere = Claims(engine, "s", "another-host:1")
    me = Claims.open(engine, "s")
    assert dead.take({"X": 1}, ttl_s=300) and elsewhere.take({"X": 2}, ttl_s=300)
    assert me.take({"X": 1}, ttl_s=60), "its owner is gone"
    assert not me.take({"X": 2}, ttl_s=60), "another host's process cannot be seen: its claim expires first"
    assert not Claims(engine, "s", f"{socket.gethostname()}:1").take({"X": 1}, ttl_s=60), "its owner runs"
    # trial 44: the next run was not given the gone process's claims until they expired
    assert dead.take({"X": 3}, ttl_s=300)
    assert me.expired() == [{"X": 3}], "not X=2: another host's, nor X=1: mine now"


def test_a_measured_configuration_is_reopened_by_one_worker_only(tmp_path):
    """Measuring a timeout again under a longer limit: one worker wins the reopened claim."""
    engine = sa.create_engine(f"sqlite:///{tmp_path}/c.db")
    a, b = Claims.open(engine, "s"), Claims(engine, "s", "host:2")
    assert a.take({"X": 1}, ttl_s=60)
    assert not b.reopen({"X": 1}, ttl_s=60)  # held, not measured yet
    a.finish({"X": 1})
    assert b.reopen({"X": 1}, ttl_s=60) and not a.reopen({"X": 1}, ttl_s=60)
    assert not a.take({"X": 1}, ttl_s=60)  # b measures it again
    b.finish({"X": 1})
    assert [c.done for c in a.held()] == [True]


def test_two_workers_in_one_process_share_the_study_and_its_budget(scale, home):
    calls: list[dict[str, Any]] = []
    lock = threading.Lock()
    storage = f"sqlite:///{home}/shared.db"
    reports: list[Any] = []
    started = (threading.Event(), threading.Event())

    def work(seed: int) -> None:
        try:
            reports.append(tune(scale, TuneOptions(trials=40, timeout_s=None, storage=storage, seed=seed,
                                                   study_trials=20, save=False),
                                evaluator=Slow(calls, lock, (started[seed - 1], started[2 - seed])), info=FAKE))
        finally:  # a worker that failed to start must not hold the other 60 s a trial (a CI run hung)
            started[seed - 1].set()

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    keys = [config_key(c) for c in calls]
    assert len(keys) == len(set(keys)), "a configuration was measured twice"
    assert all(r.measured > 0 for r in reports) and sum(r.measured for r in reports) == len(keys)
    assert 20 <= len(keys) <= 21  # the study's budget: at most one over, by the worker last to start one
    assert {r.stopped_by for r in reports} == {"study trials"}
    assert max(r.study_trials for r in reports) == len(keys)  # the summary's "study total"
    name = study_name(scale, FAKE, scale.resolve_problem({}))
    assert sorted(_stored_keys(name, storage)) == sorted(keys)


def test_a_run_on_a_study_at_its_budget_says_it_has_nothing_to_measure(scale, capsys):
    """Trial 14: it said `up to 5 new configurations (the study holds 16)` and measured none."""
    from autotune.tuner import RunState

    cli._progress(scale)("start", None, RunState(budget=5, study_budget=16, study_measured=16))
    assert capsys.readouterr().out == ("tuning scale: up to 5 new configurations (the study holds 16); none: that "
                                       "is its --study-trials budget\n")
    cli._progress(scale)("start", None, RunState(budget=5, study_budget=20, study_measured=16))
    assert capsys.readouterr().out == "tuning scale: up to 5 new configurations (the study holds 16)\n"
    cli._progress(scale)("start", None, RunState(budget=5, device="AMD EPYC (Intel(R) OpenCL, 0:0)"))
    assert capsys.readouterr().out == "tuning scale on AMD EPYC (Intel(R) OpenCL, 0:0): up to 5 new configurations\n"


def test_a_workers_progress_counts_the_trials_others_finished_while_it_measured(scale, home):
    """Another worker finishes two trials during this worker's third: the progress after it
    says the study holds 5, not this worker's 3."""
    storage = f"sqlite:///{home}/shared.db"
    other = Claims(sa.create_engine(storage), study_name(scale, FAKE, scale.resolve_problem({})), "host:2")
    said: list[int] = []

    class Busy(Slow):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
            if verify and len(self.calls) == 2:  # the other worker's trials, taken and finished
                for wpt in (64, 128):
                    assert other.take({"elsewhere": wpt}, ttl_s=60)
                    other.finish({"elsewhere": wpt})
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    tune(scale, TuneOptions(trials=4, timeout_s=None, storage=storage, seed=1, save=False),
         evaluator=Busy([], threading.Lock()), info=FAKE,
         progress=lambda event, rec, state: event != "trial" or said.append(state.study_measured))
    assert said == [1, 2, 5, 6]


def test_a_new_best_is_one_no_other_worker_has_stored_a_faster_one_than(scale, home):
    """Trial 37: a worker marked two trials "*" (a new best) although another worker had stored a
    faster one before them, within the second between its looks at the study."""
    storage = f"sqlite:///{home}/shared.db"
    name = study_name(scale, FAKE, scale.resolve_problem({}))
    marks: list[bool] = []
    elsewhere = {"WPT": 16, "WG": 16, "MODE": 0, "mad": False}  # faster than the grid's first few

    class Busy(Slow):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
            if verify and len(self.calls) == 1:  # another worker stores a faster trial meanwhile
                study = optuna.load_study(study_name=name, storage=storage)
                t = 0.5 / (16 * 16)
                study.add_trial(optuna.trial.create_trial(
                    params=elsewhere, value=t * 1e-3, user_attrs=Measurement(Status.OK, times_ms=(t, t, t)).attrs(),
                    distributions={p.name: optuna.distributions.CategoricalDistribution(list(p.values))
                                   for p in scale.parameters}))
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    report = tune(scale, TuneOptions(trials=4, timeout_s=None, storage=storage, sampler="grid", save=False),
                  evaluator=Busy([], threading.Lock()), info=FAKE,
                  progress=lambda event, rec, state: event != "trial" or marks.append(state.best is rec))
    assert marks == [True, False, False, False] and report.best.params == elsewhere


def test_a_late_worker_joins_the_study_and_measures_only_new_configurations(scale, home):
    calls: list[dict[str, Any]] = []
    lock = threading.Lock()
    storage = f"sqlite:///{home}/shared.db"
    first = tune(scale, TuneOptions(trials=10, timeout_s=None, storage=storage, seed=1, save=False),
                 evaluator=Slow(calls, lock), info=FAKE)
    late = tune(scale, TuneOptions(trials=10, timeout_s=None, storage=storage, seed=2, save=False,
                                   study_trials=15), evaluator=Slow(calls, lock), info=FAKE)
    keys = [config_key(c) for c in calls]
    assert len(keys) == len(set(keys)) == 15
    assert (first.measured, late.measured, late.study_trials) == (10, 5, 15)
    assert late.baseline is not None and late.baseline.number >= 0  # the first worker's baseline


def test_the_study_timeout_counts_from_the_studys_first_worker(scale, home):
    storage = f"sqlite:///{home}/shared.db"
    tune(scale, TuneOptions(trials=2, timeout_s=None, storage=storage, save=False),
         evaluator=Slow([], threading.Lock()), info=FAKE)
    time.sleep(1.2)
    late = tune(scale, TuneOptions(trials=20, timeout_s=None, storage=storage, save=False, study_timeout_s=1.0),
                evaluator=Slow([], threading.Lock()), info=FAKE)
    assert (late.stopped_by, late.measured) == ("study timeout", 0)
    assert late.confirmed == 2  # the study's leaders timed again, not its raw first timings


def _died_mid_trial(scale: Any, storage: str, calls: list[dict[str, Any]], measured: int, ttl_s: float
                    ) -> tuple[Claims, dict[str, Any]]:
    """A study of ``measured`` trials and a worker that died measuring another configuration,
    its claim lasting ``ttl_s``: that worker's claims, and the configuration."""
    tune(scale, TuneOptions(trials=measured, timeout_s=None, storage=storage, seed=1, save=False),
         evaluator=Slow(calls, threading.Lock()), info=FAKE)
    name = study_name(scale, FAKE, scale.resolve_problem({}))
    left = next(c for c in enumerate_valid(scale, scale.resolve_problem({}), FAKE.facts()) if c not in calls)
    dead = Claims(sa.create_engine(storage), name, "gone:1")
    assert dead.take(left, ttl_s=ttl_s)
    return dead, left


def test_a_dead_workers_expired_claim_is_measured_by_the_next_worker(scale, home):
    storage = f"sqlite:///{home}/shared.db"
    calls: list[dict[str, Any]] = []
    dead, left = _died_mid_trial(scale, storage, calls, 3, ttl_s=0.01)
    time.sleep(0.05)
    tune(scale, TuneOptions(trials=3, timeout_s=None, storage=storage, seed=2, save=False),
         evaluator=Slow(calls, threading.Lock()), info=FAKE)
    assert left in calls[3:]
    assert next(c for c in dead.held() if c.params == left).done


def test_a_stop_by_the_study_budget_says_how_many_of_its_count_are_claims_not_stored(scale, home):
    """Trial 28: after a run was killed mid-trial, the next stopped under its --study-trials
    budget without saying why (the dead run's claim counted until it lapsed)."""
    storage = f"sqlite:///{home}/shared.db"
    calls: list[dict[str, Any]] = []
    _died_mid_trial(scale, storage, calls, 2, ttl_s=60)
    late = tune(scale, TuneOptions(trials=5, timeout_s=None, storage=storage, seed=2, save=False, study_trials=3),
                evaluator=Slow(calls, threading.Lock()), info=FAKE)
    assert (late.stopped_by, late.measured, late.study_trials, late.claimed) == ("study trials", 0, 2, 1)
    assert ("1 of them claimed, not stored yet: being measured by another worker, or left by a run that ended "
            "mid-trial (a claim lapses") in cli.format_report(late)
    done = tune(scale, TuneOptions(trials=1, timeout_s=None, storage=storage, seed=3, save=False),
                evaluator=Slow(calls, threading.Lock()), info=FAKE)
    assert done.claimed == 0 and "claimed, not stored" not in cli.format_report(done)


class Sabotage(Slow):
    """Breaks the study's database after a few measurements (a lost server, as far as the
    run can tell: its claims table is gone)."""

    def __init__(self, path: Path) -> None:
        super().__init__([], threading.Lock())
        self.path = path

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
        if len(self.calls) == 4:
            with sqlite3.connect(self.path) as db:
                db.execute("DROP TABLE autotune_claims")
        return super().evaluate(params, limit_s, cutoff_ms, verify)


def test_a_database_lost_mid_run_stops_it_saving_the_best(scale, home, monkeypatch):
    report_path = home / "shared.db"
    with pytest.raises(StorageError, match="stopped answering .* after 5 trials; the best so far was saved"):
        tune(scale, TuneOptions(trials=20, timeout_s=None, storage=f"sqlite:///{report_path}"),
             evaluator=Sabotage(report_path), info=FAKE)
    entry = profiles.read(next((home / "profiles").glob("*.yaml")))["kernels"]["scale"][0]
    assert entry["partial"] is True
    # trial 44 (a full disk under both): the profile's failure said "the trials are kept in the study"
    def full(*args, **kwargs):
        raise ProfileError("cannot write the profile (No space left on device)")

    monkeypatch.setattr(profiles, "save", full)
    with pytest.raises(ProfileNotSaved, match=r"the study keeps the trials stored before its database stopped "
                                              r"answering, not those after; once .*\(a full disk\?\), run the same"):
        tune(scale, TuneOptions(trials=20, timeout_s=None, storage=f"sqlite:///{home / 'again.db'}"),
             evaluator=Sabotage(home / "again.db"), info=FAKE)


# ---- learned work-group limits --------------------------------------------------------------

class Limited(QuietEvaluator):
    """A device whose compiled kernel allows 64 work-items, as a build reports it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
        if verify:  # not the leaders' timing again at the end
            self.calls.append(dict(params))
        if params["WG"] > 64:
            return Measurement(Status.LAUNCH_ERROR, f"scale: work-group {params['WG']} > 64 allowed",
                               wg_limits={"scale": 64})
        t = 1.0 / (params["WPT"] * params["WG"])
        return Measurement(Status.OK, times_ms=(t, t, t), error=0.0, wg_limits={"scale": 64})


def test_candidates_above_the_learned_work_group_limit_are_skipped_unbuilt(scale):
    ev = Limited()
    report = tune(scale, TuneOptions(trials=1000, timeout_s=None, sampler="grid", storage=":memory:", save=False),
                  evaluator=ev, info=FAKE)
    assert report.stopped_by == "exhausted"
    valid_above = [c for c in enumerate_valid(scale, scale.resolve_problem({}), FAKE.facts()) if c["WG"] > 64]
    built_above = [i for i, c in enumerate(ev.calls) if c["WG"] > 64]
    assert valid_above and all(i < MIN_BUILDS for i in built_above)  # only while the limit was learned
    assert len(ev.calls) == report.measured and report.skipped_invalid >= len(valid_above) - len(built_above)


# ---- several devices from one command ------------------------------------------------------

needs_cpu = pytest.mark.skipif(not DEVICES, reason="no OpenCL device builds here")


@needs_cpu
def test_run_on_a_list_of_devices_merges_progress_and_measures_nothing_twice(home, capsys):
    sel = DEVICES[0]
    code = cli.main(["run", "reverse", "-d", f"{sel},{sel}", "-s", SIZE, "-n", "6", "-t", "120",
                     "--seed", "3"])
    out, err = capsys.readouterr()
    assert code == 0, out
    assert f"device {sel} is named more than once" in err, "timings on a shared device are skewed: say so"
    assert f"2 workers ({sel}#1, {sel}#2)" in out
    assert f"{sel}#1 [" in out and f"{sel}#2 [" in out and "together" in out
    assert re.search(rf"trials +\d+ measured by worker {re.escape(sel)}#[12] ", out), \
        "the summary shown is one worker's: its count must not read as the run's"
    assert "measured this run" not in out
    spec = specs.load("reverse")
    info = devices.select(sel)[0]
    keys = _stored_keys(study_name(spec, info, spec.resolve_problem({"N": 262144})), settings.default_storage())
    assert len(keys) == len(set(keys)) and 6 <= len(keys) <= 7


@needs_cpu
def test_a_run_on_several_devices_refuses_a_namesake_specs_entry_too(home, capsys, tmp_path):
    """Trial 46: a run on several devices replaced another spec file's tuned entry of the kernel
    name, which one on one device refuses (its workers save nothing; the check was theirs)."""
    sel = DEVICES[0]
    info = devices.select(sel)[0]
    other = tmp_path / "my_reverse.yaml"
    other.write_text("kernel: reverse\n")
    problem = specs.load("reverse").resolve_problem({"N": 262144})
    entry = profiles.Entry(problem=problem, params={"WG": 64}, build_flags=(), time_ms=1.0, throughput={}, trials=9,
                           tuned_at="2026-11-27T00:00:00Z", spec_hash="another", spec_file=str(other))
    path = profiles.path_for(info.slug, settings.profiles_dir())
    profiles.save(entry, "reverse", info.profile_header(), path)
    assert cli.main(["run", "reverse", "-d", f"{sel},{sel}", "-s", SIZE, "-n", "2"]) == 1
    assert f"names its kernel 'reverse', as {other} does, whose tuned entry for this size is in {path}" \
        in capsys.readouterr().err
    assert [e.spec_file for e in profiles.entries(profiles.read(path), "reverse")] == [str(other)]


@needs_cpu
@pytest.mark.parametrize("device, message, status", [
    ("{0},{0}", "share a study, which --storage :memory: cannot hold", 1),
    ("{0},,{0}", "has an empty selector between its commas", 2),  # trial 91: a usage error, as -d "" is
    ("all,{0}", "'all' stands alone", 2)])  # trial 33; trial 108: a usage error too, as the empty one is
def test_bad_device_lists_are_one_line(capsys, device, message, status):
    try:
        code = cli.main(["run", "reverse", "-d", device.format(DEVICES[0]), "--storage", ":memory:"])
    except SystemExit as exc:  # argparse's usage error
        code = exc.code
    assert code == status
    out, err = capsys.readouterr()
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1 and not out


def test_two_runtimes_of_one_cpu_tuned_at_once_are_warned_of(capsys, monkeypatch):
    """Trial 110: `-d all` on a host without a GPU started Intel's runtime and PoCL together on
    the same cores without a word."""
    from dataclasses import replace

    from autotune import fleet
    from conftest import FAKE

    cpus = [replace(FAKE, selector=sel, platform=platform, name=name, device_type="CPU")
            for sel, platform, name in (("0:0", "Intel(R) OpenCL", "Xeon"),
                                        ("1:0", "Portable Computing Language", "pthread-Xeon"))]
    monkeypatch.setattr(devices, "select_many", lambda text, given="--device": cpus)
    monkeypatch.setattr(fleet, "tune_together", lambda *args, **kw: [])
    cli.main(["run", "reverse", "-d", "all", "--storage", ":memory:", "-q"])
    assert ("autotune: warning: devices 0:0 and 1:0 are OpenCL runtimes of this host's CPU, whose cores they share: "
            "their workers time kernels at the same time") in capsys.readouterr().err


@needs_cpu
def test_a_bad_device_list_in_autotune_device_is_named_as_that(capsys, monkeypatch):
    """Trial 39: `AUTOTUNE_DEVICE="0:0,"` was reported as --device."""
    monkeypatch.setenv("AUTOTUNE_DEVICE", f"{DEVICES[0]},")
    assert cli.main(["run", "reverse", "--storage", ":memory:", "-n", "2", "-s", SIZE]) == 1
    assert f"$AUTOTUNE_DEVICE '{DEVICES[0]},' has an empty selector" in capsys.readouterr().err
    monkeypatch.setenv("AUTOTUNE_DEVICE", f"{DEVICES[0]},nosuchdevice")  # trial 40: not said where it came from
    assert cli.main(["run", "reverse", "--storage", ":memory:", "-n", "2", "-s", SIZE]) == 1
    assert f"(in $AUTOTUNE_DEVICE '{DEVICES[0]},nosuchdevice')" in capsys.readouterr().err


@needs_cpu
@pytest.mark.parametrize("value", ["all", "{0},{0}"])
def test_autotune_device_may_name_several_devices_as_device_does(capsys, monkeypatch, value):
    monkeypatch.setenv("AUTOTUNE_DEVICE", value.format(DEVICES[0]))
    code = cli.main(["run", "reverse", "--storage", ":memory:", "-n", "2", "-s", SIZE])
    err = capsys.readouterr().err
    named = devices.select_many(value.format(DEVICES[0]))
    if len({d.slug for d in named}) == len(named):  # one device, or each a study of its own (trial 96)
        assert code == 0, err
    else:
        assert code == 1 and "share a study, which --storage :memory: cannot hold" in err, err


@needs_cpu
def test_a_bad_autotune_device_for_one_device_still_says_where_it_came_from(capsys, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_DEVICE", "bogus")
    assert cli.main(["run", "reverse", "--storage", ":memory:", "-n", "1"]) == 1
    assert "matches 'bogus' (from $AUTOTUNE_DEVICE; unset it or pass --device)" in capsys.readouterr().err


# ---- a real PostgreSQL ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def postgres() -> Any:
    try:
        with pgserver.server() as url:
            yield url
    except pgserver.Unavailable as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")


def _worker(url: str, seed: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autotune", "run", "reverse", "-d", DEVICES[0], "-s", SIZE, "--storage", url,
         "--seed", str(seed), "-t", "240", "-q", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _study(url: str) -> tuple[str, Claims]:
    spec = specs.load("reverse")
    name = study_name(spec, devices.select(DEVICES[0])[0], spec.resolve_problem({"N": 262144}))
    engine = sa.create_engine(url)
    Claims.open(engine, name)  # its table made now: polled before a worker started, it was missing (under load)
    return name, Claims(engine, name, "tests:0")


@needs_cpu
def test_three_workers_on_postgresql_share_one_study(postgres, home):
    # one as `run --help` spells the URL, with no driver: SQLAlchemy 2.1 reads that as psycopg 3,
    # which the postgres extra does not install
    bare = postgres.replace("postgresql+psycopg2://", "postgresql://")
    procs = [_worker(url, seed, "-n", "14", "--study-trials", "24")
             for seed, url in enumerate((postgres, bare, postgres))]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-500:] for o in outs]
    name, claims = _study(postgres)
    keys = _stored_keys(name, postgres)
    assert len(keys) == len(set(keys)), "a configuration was measured twice"
    measured = [int(re.search(r"(\d+) measured this run", o[0]).group(1)) for o in outs]  # type: ignore[union-attr]
    assert sum(measured) == len(keys) and 24 <= len(keys) <= 26
    assert sorted(config_key(c.params) for c in claims.held() if c.done) == sorted(keys)
    profile = profiles.read(next((home / "profiles").glob("*.yaml")))
    assert [e["problem"] for e in profile["kernels"]["reverse"]] == [{"N": 262144}]


@needs_cpu
def test_a_worker_killed_mid_trial_leaves_a_claim_that_expires(postgres, home):
    name, claims = _study(postgres)
    procs = [_worker(postgres, seed, "-n", "30", "--study-trials", "30", "--max-time-per-config", "3")
             for seed in (10, 11, 12)]
    victim = procs[0]
    held = None
    deadline = time.time() + 120
    while held is None and time.time() < deadline:
        held = next((c for c in claims.held() if c.owner.endswith(f":{victim.pid}") and not c.done), None)
        time.sleep(0.02)
    assert held is not None, "the worker never claimed a configuration"
    os.killpg(victim.pid, signal.SIGKILL)  # the worker and its measuring process, mid-trial
    victim.wait()
    for p in procs[1:]:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-500:]
    keys = _stored_keys(name, postgres)
    assert len(keys) == len(set(keys))
    time.sleep(max(0.0, held.expires - time.time()) + 0.1)
    again = {config_key(c.params): c for c in claims.held()}[config_key(held.params)]
    # measured by a survivor after the claim expired, or free for any worker to take now
    assert (again.done and again.owner != held.owner) or claims.take(held.params, ttl_s=60)


def test_a_stop_right_after_a_claim_gives_the_claim_back(scale, home, monkeypatch):
    """Ctrl-C that lands just after a candidate was claimed (between trials, where a run
    spends most of its time on a slow device's host) must not leave the claim held: the next
    run would take the configuration for another worker's, skip it and never measure it."""
    from autotune.tuner import TuningInterrupted

    storage = f"sqlite:///{home}/shared.db"
    taken: list[dict[str, Any]] = []
    real_take = Claims.take

    def take_then_stop(self, params, ttl_s):  # type: ignore[no-untyped-def]
        ok = real_take(self, params, ttl_s)
        taken.append(dict(params))
        if len(taken) == 4:
            raise KeyboardInterrupt
        return ok

    monkeypatch.setattr(Claims, "take", take_then_stop)
    calls: list[dict[str, Any]] = []
    options = TuneOptions(sampler="grid", trials=1000, timeout_s=None, storage=storage, save=False)
    with pytest.raises(TuningInterrupted):
        tune(scale, options, evaluator=Slow(calls, threading.Lock()), info=FAKE)
    monkeypatch.setattr(Claims, "take", real_take)
    name = study_name(scale, FAKE, scale.resolve_problem({}))
    held = Claims(sa.create_engine(storage), name, "someone else").held()
    assert all(c.done for c in held) and len(held) == 3  # the fourth was given back
    report = tune(scale, options, evaluator=Slow(calls, threading.Lock()), info=FAKE)
    assert report.stopped_by == "exhausted" and report.study_trials == report.valid_space
    assert taken[3] in calls[3:]


def _stat(path: Path) -> list[str] | None:
    """A /proc/PID/stat's fields after the command's name (state, parent, ...); None: gone."""
    try:
        return path.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc), zombies left out."""
    return [int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat")
            if (fields := _stat(stat)) is not None and int(fields[1]) == pid and fields[0] != "Z"]


def _alive(pid: int) -> bool:
    return (fields := _stat(Path(f"/proc/{pid}/stat"))) is not None and fields[0] != "Z"


@needs_cpu
def test_a_run_on_several_devices_saves_the_best_its_summary_shows(home):
    """Trial 35: each worker saved its own best, so the profile held whichever finished last
    (the summary showed the other's), and a new entry could be said to be "replaced"."""
    sel = DEVICES[0]
    for seed in (4, 5):
        for prof in settings.profiles_dir().glob("*.yaml*"):
            prof.unlink()
        done = subprocess.run([sys.executable, "-m", "autotune", "run", "reverse", "-s", SIZE, "-d", f"{sel},{sel}",
                               "-n", "8", "--seed", str(seed), "--storage", f"sqlite:///{home / f's{seed}.db'}"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        shown = float(re.search(r"\n  time +([\d.]+) ms median", done.stdout).group(1))
        assert re.search(r"\n  profile +\S+ \(added\)\n", done.stdout), done.stdout
        (prof,) = settings.profiles_dir().glob("*.yaml")
        (entry,) = profiles.entries(profiles.read(prof), "reverse")
        # the summary gives 4 decimals of the median, the profile 6: 0.0068499.. is "0.0068" and 0.00685
        assert abs(entry.time_ms - shown) <= 0.5e-4 + 1e-12, (entry.time_ms, done.stdout)


def test_each_workers_candidate_cut_off_by_the_timeout_is_named(scale, monkeypatch, capsys):
    """Trial 35: with several workers, --timeout named the configuration it stopped for the
    worker whose summary was shown only."""
    from dataclasses import replace as changed

    from autotune import fleet
    from autotune.tuner import CutOff, TuneReport

    report = tune(scale, TuneOptions(timeout_s=None, trials=2, storage=":memory:", save=False),
                  evaluator=Slow([], threading.Lock()), info=FAKE)
    slow = changed(report, best=changed(report.best, times_ms=(9.0,) * 3), stopped_by="timeout",
                   cut_off=CutOff(dict(report.best.params, WG=999), 30.0, None, 2.0), storage=None)  # shared
    two = changed(FAKE, selector="1:0")
    results = [fleet.WorkerResult(FAKE.selector, FAKE, report=report), fleet.WorkerResult("1:0", two, report=slow)]
    monkeypatch.setattr(fleet, "tune_together", lambda *a: results)
    monkeypatch.setattr(devices, "select_many", lambda text, given="--device": [FAKE, two])
    assert isinstance(slow, TuneReport)
    cli.main(["run", str(scale.path), "-d", f"{FAKE.selector},1:0", "-n", "2", "--no-save"])
    out = capsys.readouterr().out
    assert f"\n  worker      {FAKE.selector} " in out, "the summary shown is the other worker's"
    worker = out[out.index("  worker      1:0 "):]
    assert re.search(r"\n +\S.* WG=999 .*was being measured: the next run of the study", worker), out


def test_memory_storage_serves_devices_of_other_models_and_q_prints_the_summary_only(scale, monkeypatch, capsys):
    """Trial 96: --storage :memory: was refused for two devices of other models, whose studies
    are each one worker's; and -q printed the lines naming each study's workers."""
    from dataclasses import replace as changed

    from autotune import fleet

    other = changed(FAKE, selector="1:0", name="Other GPU 1")
    same = changed(FAKE, selector="0:1")
    fleet.require_shared(TuneOptions(storage=":memory:"), [FAKE, other])
    with pytest.raises(ProblemError, match=r"the devices of fakecorp-fake-gpu-9000 share a study, which --storage "
                                           r":memory: cannot hold"):
        fleet.require_shared(TuneOptions(storage=":memory:"), [FAKE, same])
    with pytest.raises(ProblemError, match=r"--storage 'sqlite://' names no database file"):  # trial 97: after
        fleet.require_shared(TuneOptions(storage="sqlite://"), [FAKE, other])  # the lines naming each study
    report = tune(scale, TuneOptions(timeout_s=None, trials=2, storage=":memory:", save=False),
                  evaluator=Slow([], threading.Lock()), info=FAKE)
    results = [fleet.WorkerResult(FAKE.selector, FAKE, report=report), fleet.WorkerResult("1:0", other, report=report)]
    monkeypatch.setattr(fleet, "tune_together", lambda *a: results)
    monkeypatch.setattr(devices, "select_many", lambda text, given="--device": [FAKE, other])
    assert cli.main(["run", str(scale.path), "-d", "fake,1:0", "-n", "2", "--no-save", "--storage", ":memory:"]) == 0
    assert "study for " in capsys.readouterr().out
    assert cli.main(["run", str(scale.path), "-d", "fake,1:0", "-n", "2", "--no-save", "--storage", ":memory:",
                     "-q"]) == 0
    assert "study for " not in capsys.readouterr().out


@needs_cpu
def test_a_stop_after_the_summary_does_not_make_a_finished_run_interrupted(home):
    """Trial 33: a Ctrl-C that landed after a complete run's summary (while Python shut down,
    waiting for the measuring worker) exited 130 with no message, as if the run had stopped."""
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "autotune", "run", "reverse", "-s", SIZE, "-n", "2",
                                 "-d", DEVICES[0], "--storage", ":memory:"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        for line in proc.stdout:
            if line.startswith("  profile"):  # saved; the rest of the summary follows
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "interrupted" not in err, (proc.returncode, err)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_stop_while_workers_are_started_is_kept_for_this_process_and_them(tmp_path):
    """Trial 44: a Ctrl-C while the workers were being started (slow on a busy machine) was
    ignored by this process and by them, and both tuned on for their 1,000 trials. In a fresh
    process, as a command's: its first spawn starts multiprocessing's resource tracker, which
    unblocked the signals on the way."""
    (tmp_path / "helper.py").write_text("def status(conn):\n    conn.send(open('/proc/self/status').read())\n")
    script = f"""
import multiprocessing as mp, os, signal, sys
from types import SimpleNamespace
sys.path.insert(0, {str(tmp_path)!r})
import helper
from autotune import fleet, worker

stop = SimpleNamespace(value=0)
ctx = mp.get_context("spawn")
mine, theirs = ctx.Pipe()
with fleet._stops_passed_on({{}}, stop):
    with worker.starting(signal.SIGINT, signal.SIGTERM):
        os.kill(os.getpid(), signal.SIGINT)
        ctx.Process(target=helper.status, args=(theirs,)).start()
    print(stop.value)  # taken once the starts are done
print(next(line for line in mine.recv().splitlines() if line.startswith("SigBlk:")).split()[1])
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    taken, mask = out.stdout.split()
    assert int(taken) == signal.SIGINT, "not lost"
    blocked = int(mask, 16)
    assert blocked & (1 << (signal.SIGINT - 1)) and blocked & (1 << (signal.SIGTERM - 1)), "a worker inherits it"


@needs_cpu
@pytest.mark.parametrize("sig, delay", [(signal.SIGTERM, 0.0), (signal.SIGTERM, 0.5), (signal.SIGINT, 0.5)])
def test_a_stop_while_the_workers_start_up_ends_the_run_as_one_later_does(home, sig, delay):
    """Trial 33: a stop in the first seconds of a run on several devices, while its workers were
    starting up (Python, imports), gave KeyboardInterrupt tracebacks, "ended without a
    summary (killed by SIGTERM)" and exit status 1. The command is its own process group here,
    as in a terminal, so that SIGINT reaches the workers as Ctrl-C would."""
    sel = DEVICES[0]
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "run", "matmul", "-s", "64", "-d", f"{sel},{sel}",
                             "-n", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    while not proc.stdout.readline().startswith("study for "):  # the workers are starting now
        assert proc.poll() is None, proc.stderr.read()
    time.sleep(delay)
    os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "without a summary" not in out, err + out
    # before the workers were started (the study being opened) as a run on one device says it
    assert err.splitlines()[-1] in ("autotune: interrupted", "autotune: interrupted; the studies keep every finished "
                                    "trial: run the same command again to resume"), err
    assert out.count("  worker      ") == (2 if "studies keep" in err else 0), out


@needs_cpu
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGHUP])
def test_killing_a_run_on_several_devices_stops_its_workers_too(home, sig):
    """`kill PID` names the parent only: its workers must not tune on, orphaned (they did, and
    then hung on their last message). SIGTERM is passed on, and the run exits 143 with each
    worker's best saved; after SIGKILL the workers notice and stop by themselves."""
    sel = DEVICES[0]
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "run", "matmul", "-s", "64", "-d", f"{sel},{sel}",
                             "-n", "1000", "-t", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started: set[str] = set()
    timed = 0  # configurations timed in full: a stop with the baseline the only one saves nothing
    while len(started) < 2 or timed < 2:  # each worker has finished a trial
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        if re.match(rf"{re.escape(sel)}#\d \[", line):
            started.add(line.split()[0])
            timed += bool(re.search(r"\]\s+(study\s+\d+/\d+\s+)?[\d.]+ ms", line)) and "(pruned)" not in line
    workers = _children(proc.pid)
    assert len(workers) >= 2
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    deadline = time.monotonic() + 60
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers), "the workers outlived the run"
    (prof,) = list(settings.profiles_dir().glob("*.yaml"))
    (entry,) = profiles.entries(profiles.read(prof), "matmul")
    assert entry.partial, "the best so far is saved, marked partial"
    if sig != signal.SIGKILL:  # SIGHUP as SIGTERM: passed on, the workers' bests saved
        assert proc.returncode == 128 + sig, err
        assert out.count("stopped: interrupted,") == 2 and "(interrupted)" not in out, out[-1500:]


@needs_cpu
def test_a_workers_warning_is_said_once_as_a_run_on_one_device_says_it(tmp_path):
    """Trial 51: on several devices each worker printed autotune's warnings in Python's form
    (a line of multiprocessing's source with them), once per worker."""
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': np.ones(n, np.float32), 'y': np.zeros(n, np.int32)}\n"
           "def reference(problem, arrays):\n    return {'y': np.full(problem['N'], 2, np.int32)}\n")
    path = write_spec(tmp_path, SCALE_YAML + "tolerance: {atol: 1}\n", template=TEMPLATE_CL.replace(
        "__global float* y", "__global int* y").replace("2.0f * x[base + i]", "(int)(2.0f * x[base + i])"), ref=ref)
    sel = DEVICES[0]
    out = subprocess.run([sys.executable, "-m", "autotune", "run", str(path), "-d", f"{sel},{sel}", "-n", "2",
                          "--no-save"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if "tolerance is not used" in line]
    assert len(said) == 1 and said[0].startswith("autotune: warning: "), out.stderr
    assert "AutotuneWarning" not in out.stderr, out.stderr


class Locker(Slow):
    """Another process's exclusive lock on the study's database, taken after a few measurements
    and held past the run (trial 57: a CI job's --timeout was overrun by minutes)."""

    def __init__(self, path: Path, held: threading.Event) -> None:
        super().__init__([], threading.Lock())
        self.path, self.held, self.db = path, held, None

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
        if len(self.calls) == 4 and self.db is None:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute("BEGIN EXCLUSIVE")
            self.held.set()
        return super().evaluate(params, limit_s, cutoff_ms, verify)


def test_a_database_locked_mid_run_ends_it_after_one_busy_timeout(scale, home, monkeypatch):
    """Trial 57: after the lock was declared lost, the run still wrote its confirmation, its
    claims and its queued trials to the database, each waiting the busy timeout again."""
    monkeypatch.setattr(study, "BUSY_TIMEOUT_S", 1)
    ev = Locker(home / "locked.db", threading.Event())
    t0 = time.perf_counter()
    with _released(ev), pytest.raises(StorageError, match="stopped answering .*locked.*; the best so far was saved"):
        _tune_on(scale, ev)
    took = time.perf_counter() - t0
    assert ev.held.is_set() and took < 3 * study.BUSY_TIMEOUT_S + 2, took


@contextlib.contextmanager
def _released(ev: Locker) -> Iterator[None]:
    """``ev``'s lock released on the way out."""
    try:
        yield
    finally:
        if ev.db is not None:
            ev.db.execute("ROLLBACK")
            ev.db.close()


def _tune_on(scale, ev: Locker) -> None:  # type: ignore[no-untyped-def]
    tune(scale, TuneOptions(trials=40, timeout_s=None, storage=f"sqlite:///{ev.path}"), evaluator=ev, info=FAKE)


def test_a_stop_while_the_database_is_locked_ends_the_run_within_a_few_busy_timeouts(scale, home, monkeypatch):
    """Trial 61: a Ctrl-C under another process's lock took two minutes to end the run (each
    queued trial's write waited the busy timeout, one add_trial six of them), and it exited 1
    for the unstored trials instead of 130."""
    from autotune.errors import TuningInterrupted

    monkeypatch.setattr(study, "BUSY_TIMEOUT_S", 1)

    class LockThenStop(Locker):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            if self.held.is_set() and not getattr(self, "stopped", False):
                self.stopped = True
                os.kill(os.getpid(), signal.SIGINT)
            return m

    ev = LockThenStop(home / "locked.db", threading.Event())
    t0 = time.perf_counter()
    with _released(ev), pytest.raises(TuningInterrupted):
        _tune_on(scale, ev)
    took = time.perf_counter() - t0
    assert took < 5 * study.BUSY_TIMEOUT_S + 2, took


def test_a_worker_stopped_past_its_claim_does_not_store_what_another_took_over(scale, home, monkeypatch):
    """Trial 64: a worker stopped (Ctrl-Z) past its claim's expiry finished the configuration
    another worker had taken over and measured, and stored it a second time."""
    import types

    from autotune import tuner

    storage = f"sqlite:///{home}/shared.db"
    name = study_name(scale, FAKE, scale.resolve_problem({}))
    other = Claims(sa.create_engine(storage), name, "another-host:2")
    clock = [0.0]
    monkeypatch.setattr(tuner, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], time=time.time))
    stopped: list[dict[str, Any]] = []

    class StoppedOnce(Slow):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
            if verify and len(self.calls) == 2 and not stopped:  # the third: stopped for an hour
                stopped.append(dict(params))
                clock[0] += 3600.0
                with sa.create_engine(storage).begin() as c:  # its claim lapsed, and the other took it
                    c.execute(sa.text("UPDATE autotune_claims SET expires = 0"))
                assert other.take(params, ttl_s=60)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    report = tune(scale, TuneOptions(trials=5, timeout_s=None, storage=storage, seed=1, save=False),
                  evaluator=StoppedOnce([], threading.Lock()), info=FAKE)
    assert report.elsewhere == 1 and config_key(stopped[0]) not in _stored_keys(name, storage)
    assert len(_stored_keys(name, storage)) == report.measured


@needs_cpu
@pytest.mark.parametrize("nohup", [False, True])
def test_a_hangup_of_a_run_on_several_devices_stops_it_cleanly_unless_ignored(home, nohup):
    """Trial 68: SIGHUP to the group (a closed terminal) killed multiprocessing's resource
    tracker, three tracebacks in the log; and under nohup it stopped the run all the same, a
    handler Intel's runtime sets over the ignored SIGHUP leaving the workers without it ignored."""
    sel = DEVICES[0]
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "run", "matmul", "-s", "64", "-d", f"{sel},{sel}",
                             "-n", "12" if nohup else "1000", "-t", "300"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if nohup else None)
    started: set[str] = set()
    while len(started) < 2:  # each worker has finished a trial
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        if re.match(rf"{re.escape(sel)}#\d \[", line):
            started.add(line.split()[0])
    os.killpg(proc.pid, signal.SIGHUP)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err and "resource_tracker" not in err, err
    if nohup:
        assert proc.returncode == 0 and "interrupted" not in out + err, err
    else:
        assert proc.returncode == 128 + signal.SIGHUP and out.count("stopped: interrupted,") == 2, out[-1500:]


def test_tune_leaves_the_applications_default_start_method_unset():
    """Trial 75: a spawn asks multiprocessing for its default start method, which fixed it: the
    application's later set_start_method("spawn") raised "context has already been set"."""
    import subprocess
    import sys

    code = """
import multiprocessing as mp
from autotune.worker import starting
assert mp.get_start_method(allow_none=True) is None
with starting():
    p = mp.get_context("spawn").Process(target=print)
    p.start()
p.join()
assert mp.get_start_method(allow_none=True) is None, mp.get_start_method(allow_none=True)
mp.set_start_method("spawn")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_worker_that_ends_without_a_summary_fails_the_command(scale, monkeypatch, capsys):
    """Trial 74: one of two workers killed by SIGKILL (the OOM killer, say), and the command
    exited 0: a batch job could not tell."""
    from dataclasses import replace as changed

    from autotune import fleet

    report = tune(scale, TuneOptions(timeout_s=None, trials=2, storage=":memory:", save=False),
                  evaluator=Slow([], threading.Lock()), info=FAKE)
    two = changed(FAKE, selector="1:0")
    results = [fleet.WorkerResult(FAKE.selector, FAKE, report=report),
               fleet.WorkerResult("1:0", two, error="ended without a summary (killed by SIGKILL)")]
    monkeypatch.setattr(fleet, "tune_together", lambda *a: results)
    monkeypatch.setattr(devices, "select_many", lambda text, given="--device": [FAKE, two])
    assert cli.main(["run", str(scale.path), "-d", f"{FAKE.selector},1:0", "-n", "2", "--no-save"]) == 1
    # --no-save: nothing was saved, so nothing is said to be (trial 76)
    assert capsys.readouterr().err.endswith(f"autotune: error: worker 1:0 ({two.name}) ended without a summary "
                                            "(killed by SIGKILL)\n")


def test_a_hangup_while_the_resource_tracker_starts_is_delivered_after_and_the_tracker_never_takes_it():
    """Trial 92: SIGHUP was ignored while the tracker started, so one sent then was lost and the
    run exited 0 as if never stopped; blocked instead, it reaches the run once the tracker is up,
    and the tracker (started with it blocked) keeps it blocked."""
    from autotune import stops

    got: list[int] = []
    previous = signal.signal(signal.SIGHUP, lambda signum, frame: got.append(signum))
    try:
        with stops.hangup_held():
            signal.raise_signal(signal.SIGHUP)
            assert got == [], "held while inside"
            child = subprocess.Popen(["sleep", "5"])
        assert got == [signal.SIGHUP], "delivered once outside"
        blocked = next(line for line in Path(f"/proc/{child.pid}/status").read_text().splitlines()
                       if line.startswith("SigBlk:"))
        assert int(blocked.split()[1], 16) & (1 << (signal.SIGHUP - 1)), blocked
        child.kill()
        child.wait()
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_stop_while_finished_trials_are_queued_stores_each_once(tmp_path):
    """Trial 92: a SIGTERM while the held trials were queued for writing queued them all again at
    close: the study held the baseline twice."""
    log = study.StudyLog.open("twice", f"sqlite:///{tmp_path / 'studies.db'}", optuna.samplers.RandomSampler(0))
    dist = {"X": optuna.distributions.CategoricalDistribution([1, 2, 3])}
    for x in (1, 2, 3):
        trial = log.study.ask(dist)
        log._store(trial, {"X": x}, {"status": "ok"}, float(x))
    writer, put, calls = log._writer, log._writer.put, []

    def stopped_after_the_first(trial, then=None):
        put(trial, then)
        calls.append(trial)
        if len(calls) == 1:
            raise KeyboardInterrupt

    writer.put = stopped_after_the_first
    with pytest.raises(KeyboardInterrupt):
        log.flush()
    log.close()
    stored = optuna.load_study(study_name="twice", storage=f"sqlite:///{tmp_path / 'studies.db'}").get_trials()
    assert sorted(t.params["X"] for t in stored) == [1, 2, 3]


@needs_cpu
def test_an_interrupt_sent_to_a_run_on_several_devices_alone_stops_a_worker_in_its_confirmation(home):
    """Trial 125: `kill -INT PID` (as `timeout -s INT` sends it) names the parent alone, and a
    worker timing its leaders again finished every round and saved a full entry, 10 s later;
    the parent passes SIGINT on, as it does SIGTERM."""
    sel = DEVICES[0]
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "run", "matmul", "-s", "384", "-d", f"{sel},{sel}",
                             "-n", "4", "-t", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while "timing the" not in (line := proc.stdout.readline()):
        assert line, proc.stderr.read()
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and time.monotonic() - t0 < 5, (time.monotonic() - t0, err)
    assert "trial budget reached" not in out and "stopped: interrupted" in out, out[-1500:]
