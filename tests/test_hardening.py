"""Faults injected into a tuning run, and what the user must see: the run goes on, or one line."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import optuna
import pytest

from autotune import cli, profiles, settings, space
from autotune import spec as specs
from autotune.errors import AutotuneError, AutotuneWarning, ProblemError, ProfileError, SpecError
from autotune.measure import compute_workload, make_workload, reference_watch
from autotune.result import Measurement, Status
from autotune.study import open_storage
from autotune.tuner import TuneOptions, study_name, tune
from conftest import FAKE, REF_PY, SCALE_YAML, TEMPLATE_CL, QuietEvaluator, needs_opencl, write_spec


class Fast(QuietEvaluator):
    """Every configuration verifies in 1 ms / (WPT * WG)."""

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        t = 1.0 / (params["WPT"] * params["WG"])
        return Measurement(Status.OK, times_ms=(t, t, t), error=0.0)



def run(spec, **kw):
    return tune(spec, TuneOptions(**{"timeout_s": None, "trials": 6, **kw}), evaluator=Fast(), info=FAKE)


def test_trials_a_killed_run_left_open_are_failed(scale):
    problem = scale.resolve_problem({})
    name = study_name(scale, FAKE, problem)
    study = optuna.create_study(study_name=name, storage=open_storage(None), load_if_exists=True)
    study.ask()  # a run killed mid-trial leaves it RUNNING
    run(scale)
    states = {t.state for t in optuna.load_study(study_name=name, storage=open_storage(None)).trials}
    assert optuna.trial.TrialState.RUNNING not in states


@pytest.mark.parametrize("url, message", [
    ("mysql://user@localhost/db", "cannot be opened"),
    ("postgresql://user@localhost/db", "cannot reach the database"),  # the driver is found
    ("sqlite:///", "names no database file"),
    ("sqlite://", "names no database file.*or :memory: for a study this run keeps"),
    ("sqlite:///:memory:", "names no database file"),
    ("not a url", "cannot be opened"),
])
def test_a_bad_storage_is_one_line(scale, url, message):
    if url.startswith("postgresql") and importlib.util.find_spec("psycopg2") is None:
        message = r"cannot be opened .*pip install \"autotune\[postgres\]\""  # the test extra installs it
    with pytest.raises(ProblemError, match=message) as caught:
        run(scale, storage=url)
    assert "\n" not in str(caught.value)


def test_a_storage_error_does_not_print_the_password(scale):
    with pytest.raises(ProblemError) as caught:
        run(scale, storage="mysql://tuner:s3cret@localhost/db")
    assert "s3cret" not in str(caught.value) and "mysql://tuner:***@localhost/db" in str(caught.value)


def test_a_sqlite_database_is_locked_by_the_name_sqlite_opens(scale, tmp_path):
    """Trial 35: `pct%20x.db` was locked as `pct%20x.db.lock` while SQLite opened `pct x.db`, so
    two spellings of one database took two locks."""
    run(scale, storage=f"sqlite:///{tmp_path}/pct%20x.db")
    names = {p.name for p in tmp_path.iterdir()}
    assert {"pct x.db", "pct x.db.lock"} <= names and not any("%" in n for n in names), names


def test_a_storage_in_a_folder_that_does_not_exist_is_refused_not_made(scale, tmp_path):
    """A typo in --storage's folder made the folders and a study nobody would find again."""
    missing = tmp_path / "stdies" / "deeper"
    with pytest.raises(ProblemError, match=r"the folder .*stdies/deeper does not exist; create it") as caught:
        run(scale, storage=f"sqlite:///{missing}/x.db")
    assert "\n" not in str(caught.value) and not (tmp_path / "stdies").exists()


def test_an_argument_nothing_supplies_is_refused_before_the_run_starts(tmp_path, home, capsys):
    path = write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y, z]"))
    assert cli.main(["run", str(path), "-n", "3"]) == 1
    out, err = capsys.readouterr()
    assert "scale.yaml: args: 'z' is neither an input of the reference module" in err and err.count("\n") == 1, err
    own = write_spec(tmp_path / "own", SCALE_YAML.replace("args: [x, y]\n", "").replace(
        "  entry: scale\n", "  entry: scale\n  args: [x, y, z]\n"))
    assert cli.main(["run", str(own), "-n", "3"]) == 1
    assert "scale.yaml: launch.args: 'z' is neither an input" in capsys.readouterr().err  # trial 50
    assert out == "" and not (home / "studies.db").exists(), "no run started, no empty study left"


@pytest.mark.parametrize("edit, fix", [
    (("args: [x, y]", "args: [x, y, WG]"), "a parameter reaches the template as a macro (-DWG=...)"),
    (("args: [x, y]", "derived: {G: N // WG}\nargs: [x, y, G]"), "a derived value serves constraints, launch sizes"),
])
def test_a_parameter_or_derived_value_as_an_argument_says_how_the_kernel_gets_it(tmp_path, capsys, edit, fix):
    path = write_spec(tmp_path, SCALE_YAML.replace(*edit))
    assert cli.main(["run", str(path), "-n", "3", "--storage", ":memory:"]) == 1
    err = capsys.readouterr().err
    assert fix in err and err.count("\n") == 1, err


@needs_opencl
def test_arguments_in_another_order_than_the_kernels_say_that_nothing_was_written(tmp_path):
    """args: [y, x] binds y to the kernel's const input: every configuration left y as poisoned,
    and the reason said only that its elements were not finite. The const is seen first now;
    where the kernel's types say nothing, the unwritten output says it."""
    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [y, x]")))
    with pytest.raises(SpecError, match=r"outputs: y is read-only in kernel scale \(__global const float\* x\), so "
                       r"no launch step writes it; args binds y to x: check that args lists the kernel's "
                       r"arguments in the order of its signature"):
        tune(spec, TuneOptions(trials=3, timeout_s=None, save=False, storage=":memory:"))
    spec = specs.load(write_spec(tmp_path / "b", SCALE_YAML.replace("args: [x, y]", "args: [y, x]"),
                                 template=TEMPLATE_CL.replace("const ", "")))
    report = tune(spec, TuneOptions(trials=3, timeout_s=None, save=False, storage=":memory:"))
    why = report.failure_examples["wrong_result"]
    assert why.startswith("y: 256 of 256 elements are not finite") and "no element was written" in why
    assert "'args' lists the kernel's arguments in the order of its signature" in why, why


def test_a_file_that_is_not_a_study_database_says_to_move_it_aside(scale, tmp_path):
    """... and leaves no lock file beside it (trial 35: `notes.txt.lock` stayed next to the
    user's own file after the refusal)."""
    (tmp_path / "own").mkdir()
    db = tmp_path / "own" / "studies.db"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ProblemError, match=r"studies.db is not a usable study database "
                                           r"\(DatabaseError: file is not a database\).*move it aside"):
        run(scale, storage=f"sqlite:///{db}")
    assert sorted(p.name for p in db.parent.iterdir()) == ["studies.db"]
    assert db.read_bytes() == b"this is not sqlite" * 100


def test_a_full_disk_under_the_study_database_is_named_not_a_driver(tmp_path):
    """Trial 44: "disk I/O error" at start-up advised installing a PostgreSQL driver."""
    import sqlite3

    from autotune.study import _storage_problem

    for error in ("disk I/O error", "database or disk is full"):
        why = _storage_problem(f"sqlite:///{tmp_path}/studies.db", sqlite3.OperationalError(error))
        assert why == (f"cannot write {tmp_path}/studies.db (OperationalError: {error}): is its disk full? free "
                       f"some space (`df {tmp_path}`), or give --storage a database elsewhere"), why


def test_a_study_database_that_cannot_be_read_is_not_called_read_only(tmp_path, monkeypatch):
    """Trial 71: `report` on a mode-000 studies.db was told it is read-only and to make it writable."""
    import os
    import sqlite3

    from autotune.study import _storage_problem

    db = tmp_path / "studies.db"
    db.write_bytes(b"")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(db) else real(p, mode))  # as root, too
    for reading in (True, False):
        why = _storage_problem(f"sqlite:///{db}", sqlite3.OperationalError("unable to open database file"), reading)
        assert why.startswith(f"{db} cannot be read (OperationalError: unable to open database file): make it "
                              "readable to you"), why


def test_a_study_database_another_process_keeps_locked_is_named_so_within_the_busy_timeout(scale, tmp_path,
                                                                                          monkeypatch):
    """Trial 26: a database held locked by another process was called a bad URL and a missing
    driver after 62 s (the busy timeout was 60 s, and a run held 250 s past -t 20)."""
    import sqlite3
    import time as clock

    from autotune import study

    db = tmp_path / "studies.db"
    run(scale, storage=f"sqlite:///{db}")
    monkeypatch.setattr(study, "BUSY_TIMEOUT_S", 0.5)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        start = clock.monotonic()
        with pytest.raises(ProblemError, match=rf"^{db} is locked: another process held it for over 0.5 s "
                                               r"\(OperationalError: database is locked\); let that process finish"):
            run(scale, storage=f"sqlite:///{db}")
        assert clock.monotonic() - start < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run(scale, storage=f"sqlite:///{db}").study_trials >= 6, "it opens once the lock is let go"


def test_a_study_database_with_a_damaged_page_is_one_line_not_a_traceback(scale, tmp_path):
    """Trial 26: random bytes over one page past the header raised optuna's StorageInternalError
    with 80 lines of traceback from the start of the run."""
    import random

    db = tmp_path / "studies.db"
    run(scale, storage=f"sqlite:///{db}", trials=12)
    data = bytearray(db.read_bytes())
    page = 4096
    rng = random.Random(0)
    for start in range(2 * page, len(data), page):  # every page but the first (the schema's)
        data[start:start + page] = bytes(rng.randrange(256) for _ in range(page))
    db.write_bytes(bytes(data))
    with pytest.raises(ProblemError, match=r"studies.db is not a usable study database \(DatabaseError: "):
        run(scale, storage=f"sqlite:///{db}")


def test_a_study_database_another_worker_is_creating_is_not_taken_for_another_applications(tmp_path):
    """A CI run: of two workers starting at once, one saw the other's `studies` table made and
    its `version_info` not yet, and refused the database as another application's. The check
    waits for the lock the creating worker holds."""
    import sqlite3
    import threading

    from filelock import FileLock

    db = tmp_path / "shared.db"
    opened: list[object] = []
    with FileLock(f"{db}.lock"):  # the first worker, creating the tables
        with sqlite3.connect(db) as con:
            con.execute("CREATE TABLE studies (study_id INTEGER)")  # made first; version_info not yet
        second = threading.Thread(target=lambda: opened.append(_opened_or_error(f"sqlite:///{db}")))
        second.start()
        time.sleep(0.5)
        db.unlink()  # the first worker's tables, complete: here, a database made anew
        optuna.storages.RDBStorage(f"sqlite:///{db}")
    second.join(30)
    assert len(opened) == 1 and not isinstance(opened[0], ProblemError), opened


def _opened_or_error(url: str) -> object:
    try:
        return open_storage(url)
    except ProblemError as exc:
        return exc


def test_an_sqlite_file_of_another_application_is_refused_and_left_as_it_was(scale, tmp_path):
    """Trial 91: `run` and `report` added optuna's 14 tables to another application's database
    without a word (report is only meant to read), and `report` did so to an empty file."""
    import sqlite3

    other, empty, named = tmp_path / "app.db", tmp_path / "empty.db", tmp_path / "named.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE foo (x)")
    with sqlite3.connect(named) as db:  # trial 94: a table of optuna's name was taken for optuna's
        db.execute("CREATE TABLE studies (id, title)")
    empty.touch()
    with pytest.raises(ProblemError, match=r"named.db is an SQLite database of other tables \(studies\)"):
        run(scale, storage=f"sqlite:///{named}")
    before = other.read_bytes()
    with pytest.raises(ProblemError, match=r"app.db is an SQLite database of other tables \(foo\), not a study "
                                           r"database; give --storage a new file, or a study database$"):
        run(scale, storage=f"sqlite:///{other}")
    with pytest.raises(ProblemError, match=r"app.db is an SQLite database of other tables \(foo\), not a study "
                                           r"database; give --storage the database a run wrote$"):
        open_storage(f"sqlite:///{other}", reading=True)
    with pytest.raises(ProblemError, match=r"empty.db is an empty database, not a study database"):
        open_storage(f"sqlite:///{empty}", reading=True)
    assert other.read_bytes() == before and empty.stat().st_size == 0
    run(scale, storage=f"sqlite:///{empty}", trials=2)  # an empty file may become one
    open_storage(f"sqlite:///{empty}", reading=True)


def test_storage_naming_a_folder_or_a_file_as_its_folder_says_which(scale, tmp_path):
    with pytest.raises(ProblemError, match=rf"names a folder; give a file in it, e.g. sqlite:///{tmp_path}/studies.db"):
        run(scale, storage=f"sqlite:///{tmp_path}")
    assert not Path(f"{tmp_path}.lock").exists(), "trial 40: a lock file was left beside the folder"
    (tmp_path / "afile").write_text("")
    with pytest.raises(ProblemError, match=rf"{tmp_path}/afile is a file, not a folder"):
        run(scale, storage=f"sqlite:///{tmp_path}/afile/x.db")


def test_a_read_only_study_database_is_named_as_such(scale, tmp_path, monkeypatch):
    """optuna reports a read-only SQLite file as "invalid data in the commit"; the message
    blamed the URL and the driver. (The fault is injected: root writes read-only files.)"""
    import optuna

    from autotune import study

    db = tmp_path / "studies.db"
    run(scale, storage=f"sqlite:///{db}")
    db.chmod(0o444)

    class Refused(optuna.storages.RDBStorage):
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit. This "
                                                         "typically happens due to invalid data in the commit")
    monkeypatch.setattr(optuna.storages, "RDBStorage", Refused)
    # readable, not writable (as root, whom chmod does not stop)
    monkeypatch.setattr(study.os, "access", lambda path, mode: str(path) != str(db) or mode == os.R_OK)
    with pytest.raises(ProblemError, match=rf"^{db} is read-only \(.*\); a run stores every trial in it: make it "
                                           "writable, or copy it"):
        run(scale, storage=f"sqlite:///{db}")


def test_an_unwritable_home_is_one_line(scale, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the home folder must go: unwritable even for root
    monkeypatch.setenv("AUTOTUNE_HOME", str(blocker / "home"))
    with pytest.raises(AutotuneError, match="writable") as caught:
        run(scale)
    assert str(blocker) in str(caught.value), "it says where it tried to write"


def test_a_profiles_folder_that_cannot_be_written_stops_the_run_before_it_measures(scale, home):
    home.mkdir(parents=True)
    (home / "profiles").write_text("")  # a file where the folder must go: unwritable even for root
    measured = []

    class Counted(Fast):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            measured.append(params)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    with pytest.raises(ProfileError, match=r"profiles is not a folder, and profiles are kept in it; move it aside"):
        tune(scale, TuneOptions(timeout_s=None, trials=6), evaluator=Counted(), info=FAKE)
    assert not measured


def test_a_read_only_profile_stops_the_run_before_it_measures_and_is_left_as_it_was(scale, home):
    """A profile made read-only (chmod a-w) to keep it was replaced by the save's rename; an
    immutable one was found only at the end of the run."""
    from autotune import settings

    tune(scale, TuneOptions(timeout_s=None, trials=2), evaluator=Fast(), info=FAKE)
    path = profiles.path_for(FAKE.slug, settings.profiles_dir())
    before = path.read_bytes()
    path.chmod(0o444)
    measured = []

    class Counted(Fast):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            measured.append(params)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    with pytest.raises(ProfileError, match=r"\.yaml is read-only, so results cannot be saved to it; make it "
                                           r"writable .* or pass --no-save$"):
        tune(scale, TuneOptions(timeout_s=None, trials=2, seed=1), evaluator=Counted(), info=FAKE)
    assert not measured
    # nor does a save made another way (bench, load_kernel's picks) write it; they have no --no-save (trial 33)
    with pytest.raises(ProfileError, match="is read-only.* or set AUTOTUNE_HOME to another folder$"):
        profiles.save(profiles.Entry(problem={"N": 64}, params={"WPT": 1}, build_flags=(), time_ms=0.1,
                                     throughput={}, trials=1, tuned_at="", spec_hash="h"), "scale", {}, path)
    assert path.read_bytes() == before and path.stat().st_mode & 0o777 == 0o444
    # trial 44: another user's profile was answered "chmod u+w", which only its owner can do
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profiles.os, "geteuid", lambda: path.stat().st_uid + 1)
        with pytest.raises(ProfileError, match=r"is read-only, so results cannot be saved to it; make it writable "
                                               r"\(it belongs to \w+, who can make it writable to you"):
            profiles.refuse_read_only(path)
    path.chmod(0o644)
    tune(scale, TuneOptions(timeout_s=None, trials=2, seed=1), evaluator=Counted(), info=FAKE)
    assert measured


def test_a_run_that_measures_nothing_and_times_no_leaders_leaves_the_confirmed_entry(scale, home):
    """Trial 35: a run past its study's --study-timeout measured nothing, timed no leaders again,
    and replaced the confirmed winner with the search's fastest single timing (one that the
    confirmation had overturned)."""
    import time as clock

    from autotune import settings

    class Lucky(Fast):  # the search's fastest is a lucky first timing; timed again it is slow
        seen: set = set()

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            key = (params["WPT"], params["WG"])
            first = key not in self.seen
            self.seen.add(key)
            return replace(m, times_ms=(1e-6,) * 3) if first and params["WPT"] == 1 and params["WG"] == 32 else m

    first = tune(scale, TuneOptions(timeout_s=None, trials=40, sampler="grid", study_timeout_s=30), evaluator=Lucky(),
                 info=FAKE)
    assert first.confirmed and first.overturned is not None, "the lucky timing was overturned"
    path = profiles.path_for(FAKE.slug, settings.profiles_dir())
    before = path.read_bytes()
    clock.sleep(0.1)
    class Slow(Lucky):  # its leaders' rounds outlast the confirmation's reserve (a tenth of 0.05 s)
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            clock.sleep(0.02)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

        def recheck(self, params, limit_s):
            clock.sleep(0.02)
            return super().recheck(params, limit_s)

    late = tune(scale, TuneOptions(timeout_s=None, trials=40, sampler="grid", study_timeout_s=0.05), evaluator=Slow(),
                info=FAKE)
    assert late.measured == 0 and not late.confirmed
    from autotune.cli import format_report
    assert "\n  confirmed   no: the run's time was up before the fastest could be timed again" in format_report(late)
    assert late.profile_verdict == "left as it was: this run measured nothing and timed no leaders again"
    assert path.read_bytes() == before
    path.unlink()  # with no entry to keep, its best is saved, marked as not timed again
    tune(scale, TuneOptions(timeout_s=None, trials=40, sampler="grid", study_timeout_s=0.05), evaluator=Slow(),
         info=FAKE)
    (entry,) = profiles.entries(profiles.read(path), "scale")
    assert entry.partial


def test_a_profile_that_cannot_be_saved_at_the_end_says_how_to_keep_the_trials(scale, home, monkeypatch):
    def refuse(*args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(profiles, "update", refuse)  # writable at the start, not at the end
    with pytest.raises(ProfileError, match=r"Permission denied\); make it and its folder writable to you, or set "
                                           r"AUTOTUNE_HOME to another folder; the trials are kept in the study: once "
                                           r"\S+\.yaml and its folder can be written, run the same command again"):
        run(scale)
    with pytest.raises(ProfileError, match=r"Permission denied\); make it and its folder writable to you, or set "
                                           r"AUTOTUNE_HOME to another folder; the study was in memory$"):
        run(scale, storage=":memory:")


def test_a_run_whose_profile_cannot_be_written_prints_its_summary_then_the_error(scale, home, monkeypatch, capsys):
    """Trial 22: with the profile file made immutable the run printed only the error: its
    best, times and counts were not shown."""
    from autotune import tuner

    real = tuner.tune
    monkeypatch.setattr(tuner, "tune", lambda spec, options, problem=None, progress=None: real(
        spec, options, problem, progress, evaluator=Fast(), info=FAKE))
    monkeypatch.setattr(profiles, "update", lambda *a: (_ for _ in ()).throw(PermissionError(1, "Operation not "
                                                                                            "permitted")))
    assert cli.main(["run", str(scale.path), "-n", "3", "-q"]) == 1
    out, err = capsys.readouterr()
    assert "  best " in out and "  profile     not saved: see the error below" in out
    assert out.startswith("scale on "), "-q prints the summary alone, with no blank line first (trial 25)"
    assert err.startswith("autotune: error: cannot write ") and "(Operation not permitted)" in err


def test_a_profile_that_cannot_be_replaced_keeps_its_backup(tmp_path, monkeypatch):
    """Trial 22: an immutable profile was not replaced, but its .bak was, by a copy of it."""
    path = tmp_path / "dev.yaml"
    for t in (3.0, 2.0):
        profiles.save(profiles.Entry(problem={"N": 64}, params={"WPT": 1}, build_flags=(), time_ms=t, throughput={},
                                     trials=1, tuned_at="", spec_hash="h"), "scale", {"name": "Dev"}, path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith(".lock")}
    real = profiles.os.replace

    def immutable(src, dst):
        if str(dst) == str(path):
            raise PermissionError(1, "Operation not permitted")
        real(src, dst)

    monkeypatch.setattr(profiles.os, "replace", immutable)
    with pytest.raises(ProfileError, match=r"cannot write .*dev.yaml \(Operation not permitted\)"):
        profiles.save(profiles.Entry(problem={"N": 64}, params={"WPT": 1}, build_flags=(), time_ms=1.0,
                                     throughput={}, trials=1, tuned_at="", spec_hash="h"), "scale", {"name": "Dev"},
                      path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith(".lock")} == before


@pytest.mark.parametrize("options, message", [
    ({"seed": -1}, r"--seed must be 0 to 2\*\*32 - 1"),
    ({"seed": 2**32}, r"--seed must be 0 to 2\*\*32 - 1"),
    ({"prune": float("nan")}, "--prune must be 0"),
    ({"compile_ahead": -3}, "--compile-ahead must be 0 or more"),
    ({"isolate": False, "max_time_per_config": 0.001}, "--max-time-per-config needs the measuring worker process"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ProblemError, match=message):
        TuneOptions(**options)


def test_a_problem_too_large_stops_before_the_study(tmp_path):
    # numpy refuses 15 TiB at once, or (where memory is overcommitted) the device check does
    with pytest.raises(ProblemError, match=r"(more memory than this machine can give|needs [\d.]+ [GM]iB of buffers)"):
        tune("matmul", TuneOptions(timeout_s=None), problem={"M": 2_000_000, "N": 2_000_000, "K": 8}, info=FAKE)
    small = replace(FAKE, global_mem_size=2**28)
    with pytest.raises(ProblemError, match=r"needs 768\.0 MiB of buffers.*has 256\.0 MiB"):
        tune("matmul", TuneOptions(timeout_s=None), problem={"M": 8192, "N": 8192, "K": 8192}, info=small)
    assert not (tmp_path / "home" / "studies.db").exists(), "no empty study is left behind"


def test_a_metric_that_fails_for_this_problem_does_not_lose_the_result(tmp_path):
    text = SCALE_YAML.replace('GB/s: "8 * N / seconds / 1e9"', 'GB/s: "8 * N / (N - 512) ** 2 / seconds / 1e9"')
    spec = specs.load(write_spec(tmp_path, text))
    report = tune(spec, TuneOptions(timeout_s=None, trials=4), problem={"N": 512}, evaluator=Fast(), info=FAKE)
    (entry,) = profiles.entries(profiles.read(report.profile_path), "scale")
    assert entry.throughput == {} and entry.time_ms > 0


def test_a_geometry_that_fails_for_one_value_makes_that_configuration_invalid(tmp_path):
    # WPT == 2 divides by zero in the launch geometry: those configurations are invalid, the rest run
    text = SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["N // WPT + 0 // (WPT - 2)"]').replace(
        "WPT: [1, 2, 4, 8, 16]", "WPT: [1, 2, 4]")
    spec = specs.load(write_spec(tmp_path, text))
    report = tune(spec, TuneOptions(timeout_s=None, trials=100, sampler="grid"), evaluator=Fast(), info=FAKE)
    assert report.stopped_by == "exhausted" and report.best is not None and report.best.params["WPT"] != 2
    assert report.measured == report.valid_space and report.valid_space > 0


@pytest.mark.parametrize("body, message", [
    ("def inputs(problem, rng):\n    return None\n", "inputs() must return a dict"),
    ("def inputs(problem, rng):\n    return [1, 2]\n", "inputs() must return a dict"),
    # trial 70: at the line of the user's code, not as a repr
    ("def inputs(problem, rng):\n    raise RuntimeError('no data')\n", "scale_ref.py:3: RuntimeError: no data"),
    # trial 45: autotune ended with the module's status and no word
    ("import sys\ndef inputs(problem, rng):\n    sys.exit(3)\n", "inputs() called sys.exit(3); return its result"),
    ("import sys\nsys.exit(0)\ndef inputs(problem, rng):\n    return {}\n", "scale_ref.py:3: SystemExit: 0"),
    # trial 89: Python's words alone, without the form autotune calls it in
    ("def inputs(problem):\n    return {}\n", "takes 1 positional argument but 2 were given; define it as "
                                               "inputs(problem, rng)"),
    ("import no_such_helper\n", "failed: {folder}/scale_ref.py:2: ModuleNotFoundError: No module named "
                                "'no_such_helper'"),
    ("def inputs(problem, rng:\n", "failed: {folder}/scale_ref.py:2: SyntaxError: "),
])
def test_a_broken_reference_module_is_one_spec_error(tmp_path, body, message):
    ref = "import numpy as np\n" + body + "def reference(problem, arrays):\n    return {'y': arrays['x']}\n"
    with pytest.raises(SpecError, match=re.escape(message.format(folder=tmp_path.resolve()))):
        spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
        make_workload(spec, spec.resolve_problem({}))


def test_a_reference_of_the_wrong_size_is_one_spec_error(tmp_path):
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': np.zeros(n, np.float32), 'y': np.zeros(n, np.float32)}\n"
           "def reference(problem, arrays):\n    return {'y': np.zeros(7, np.float32)}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.raises(SpecError, match="reference\\(\\) gives y 7 elements, inputs\\(\\) a buffer of 256"):
        make_workload(spec, spec.resolve_problem({}))


def test_a_reference_that_changes_an_input_in_place_is_named_so(tmp_path):
    """Trial 36: `x *= 2` in reference() changed the input uploaded after it, so every
    configuration "failed" with a message that did not say why. A pure output stays
    writable (a reference may fill the buffer inputs() gave for it), and the arrays are
    writable again after."""
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': np.ones(n, np.float32), 'y': np.zeros(n, np.float32)}\n"
           "def reference(problem, arrays):\n    x = arrays['x']\n    x *= 2\n    return {'y': x}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.raises(SpecError, match=r"reference\(\) changes its input arrays in place \(.*read-only.*\), but "
                                        r"they are what the kernel is given: work on a copy"):
        make_workload(spec, spec.resolve_problem({}))
    (tmp_path / "fills").mkdir()
    fills = ref.replace("    x = arrays['x']\n    x *= 2\n    return {'y': x}\n",
                        "    y = arrays['y']\n    y[:] = 2 * arrays['x']\n    return {'y': y}\n")
    spec = specs.load(write_spec(tmp_path / "fills", SCALE_YAML, ref=fills))
    work = make_workload(spec, spec.resolve_problem({}))
    assert (work.expected["y"] == 2).all() and (work.inputs["x"] == 1).all() and work.inputs["x"].flags.writeable


def test_a_scalar_reference_for_a_one_element_output_is_verified_as_that_element(tmp_path):
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    return {'x': np.ones(problem['N'], np.float32),"
           " 'y': np.zeros(1, np.float32)}\ndef reference(problem, arrays):\n    return {'y': np.float32(3)}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    work = make_workload(spec, spec.resolve_problem({}))
    assert work.expected["y"].shape == (1,) and work.expected["y"][0] == 3


@pytest.mark.parametrize("x, what", [("np.ones((16, 16), np.float32).T", "column-major"),
                                     ("np.ones((16, 32), np.float32)[:, ::2]", "a strided view"),
                                     ("np.ones(512, np.float32)[::2]", "a strided view")])
def test_an_input_whose_memory_is_not_in_index_order_is_a_spec_error(tmp_path, x, what):
    # the kernel would read the transpose's memory as it lies: every configuration wrong, no hint why
    ref = (f"import numpy as np\ndef inputs(problem, rng):\n    return {{'x': {x}, 'y': np.zeros(256, np.float32)}}\n"
           "def reference(problem, arrays):\n    return {'y': 2 * arrays['x'].ravel()}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.raises(SpecError, match=rf"inputs\(\) gives x as {what}.*np.ascontiguousarray\(x\)"):
        make_workload(spec, spec.resolve_problem({}))


@pytest.mark.parametrize("bad", ["np.nan", "np.inf"])
def test_a_reference_with_nan_or_inf_is_a_spec_error_not_a_check_that_passes_anything(tmp_path, bad):
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': np.ones(n, np.float32), 'y': np.zeros(n, np.float32)}\n"
           f"def reference(problem, arrays):\n    y = 2 * arrays['x']\n    y[3] = {bad}\n    return {{'y': y}}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.raises(SpecError, match=r"reference\(\) gives y with 1 of 256 elements not finite \(first at 3"):
        make_workload(spec, spec.resolve_problem({}))
    _accepted_with_a_check_of_its_own(tmp_path, ref)


def _accepted_with_a_check_of_its_own(tmp_path, ref):
    """A reference module that defines check() compares its way: make_workload takes ``ref`` then."""
    (tmp_path / "own").mkdir()
    own = specs.load(write_spec(tmp_path / "own", SCALE_YAML, ref=ref + "def check(name, got, want, problem):\n"
                                                                      "    return None\n"))
    make_workload(own, own.resolve_problem({}))


@pytest.mark.parametrize("given, message", [
    ("(2000 * arrays['x']).astype(np.int32)", "gives y as int32, but the kernel writes float32.*compute it in float32"),
    ("(2 * arrays['x']).astype(np.float16)", "gives y as float16, but the kernel writes float32"),
    ("(2 * arrays['x']).astype(np.float64)", None),  # a finer reference is checked within the tolerance
])
def test_a_reference_of_another_type_than_the_output_is_a_spec_error(tmp_path, given, message):
    # every configuration failed verification (got 0.0903, want 90) with no hint at the type
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': rng.uniform(0, 1, n).astype(np.float32), 'y': np.zeros(n, np.float32)}\n"
           f"def reference(problem, arrays):\n    return {{'y': {given}}}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    if message is None:
        make_workload(spec, spec.resolve_problem({}))
        return
    with pytest.raises(SpecError, match=message):
        make_workload(spec, spec.resolve_problem({}))
    _accepted_with_a_check_of_its_own(tmp_path, ref)


@pytest.mark.parametrize("given, message", [
    ("arrays['x'].astype(np.int64) * 2**40", r"gives y a value of \d+, which the kernel's int32 cannot hold"),
    ("arrays['x'].astype(np.uint32) + np.uint32(2**31)", r"gives y a value of \d+, which the kernel's int32"),
    ("arrays['x'].astype(np.int64) - 5", None),  # int64 values int32 holds: fine
])
def test_an_integer_reference_past_the_outputs_range_is_a_spec_error(tmp_path, given, message):
    """Trial 45: every configuration failed, the reference never named."""
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': rng.integers(0, 100, n).astype(np.int32), 'y': np.zeros(n, np.int32)}\n"
           f"def reference(problem, arrays):\n    return {{'y': {given}}}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))  # int bits in a float kernel: never run here
    if message is None:
        make_workload(spec, spec.resolve_problem({}))
        return
    with pytest.raises(SpecError, match=message):
        make_workload(spec, spec.resolve_problem({}))


def test_a_reference_result_that_is_no_output_is_warned_of(tmp_path):
    """Trial 45: reference() returning an input's name as well was ignored silently."""
    from conftest import REF_PY

    ref = REF_PY.replace('return {"y": ', 'return {"x": arrays["x"], "y": ')
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.warns(AutotuneWarning, match=r"reference\(\) also returns x, which the spec does not list under "
                                             r"outputs, so it is not verified"):
        make_workload(spec, spec.resolve_problem({}))


def test_verification_fails_where_the_comparison_cannot_be_made():
    from autotune.verify import compare
    spec = specs.load("matmul")
    why, _, used = compare(spec, "C", np.ones(4, np.float32), np.array([1, 1, np.nan, 1], np.float32), {"K": 4})
    assert why is not None and not used <= 1.0


@pytest.mark.parametrize("rtol, message", [
    (0, "got 2.00099993, want 2, which must be exact; rtol=0, atol=0)"),
    (1e-5, "allowed ±2.1e-05; rtol=1e-05, atol=1e-06; worst element 47.6x its tolerance)"),
])
def test_an_element_off_says_what_was_allowed(rtol, message):
    from autotune.expr import Expr
    from autotune.verify import compare
    spec = replace(specs.load("reverse"), rtol=Expr.parse(rtol), atol=Expr.parse(1e-6 if rtol else 0))
    want = np.arange(4, dtype=np.float32)
    why, _, _ = compare(spec, "out", want + np.float32([0, 0, 1e-3, 0]), want, spec.default_problem())
    assert why is not None and why.endswith(message), why


def test_a_double_output_off_shows_got_and_want_to_enough_digits_to_differ():
    """Trial 27: `got 0.59790207, want 0.59790207` for a double output 1e-12 off."""
    import re as regex

    from autotune.expr import Expr
    from autotune.verify import compare
    spec = replace(specs.load("reverse"), rtol=Expr.parse(1e-14), atol=Expr.parse(0))
    want = np.array([0.59790207, 1.0])
    why, _, _ = compare(spec, "out", want + 1e-12, want, spec.default_problem())
    got_text, want_text = regex.search(r"got (\S+), want (\S+),", why).groups()
    assert got_text != want_text and float(want_text) == 0.59790207, why


@pytest.mark.parametrize("off, rounding", [(1, True), (12, True), (5000, False), ("nan", False)])
def test_an_output_off_by_rounding_alone_blames_the_tolerance(off, rounding):
    """Trial 24: with rtol 1e-12 on a float32 output, every element 1 ulp off, the run said the
    reference or the spec's args were likelier at fault, and load_kernel advised a tuning run."""
    from autotune.expr import Expr
    from autotune.verify import compare, too_tight
    spec = replace(specs.load("reverse"), rtol=Expr.parse(1e-12), atol=Expr.parse(0))
    want = np.linspace(-3, 3, 64, dtype=np.float32)
    got = want.copy()
    if off == "nan":
        got[5] = np.nan
    else:
        got[::2] = want[::2] + np.spacing(want[::2]) * off
    why, _, _ = compare(spec, "out", got, want, spec.default_problem())
    assert why is not None and too_tight(why) == rounding, why
    if rounding:
        assert f"each element off is within {off} ulp of the reference" in why and "widen tolerance.rtol" in why


@pytest.mark.parametrize("edit, message", [
    (("args: [x, y]", "args: [x, y]\nscratch: {x: '16'}"), "scratch.x: an input of the reference module has that name"),
    (("args: [x, y]", "args: [x, y]\nscratch: {t: '-4'}"), "scratch.t: '-4' gave -4 bytes"),
    (("args: [x, y]", "args: [x, y]\nlocal_memory: '-4'"), "local_memory: '-4' gave -4, not a number of bytes"),
    (("outputs: [y]", "outputs: [q]"), "outputs: q is not an argument of any launch step"),
    # trial 36: a constraint that is no condition ruled nothing out, silently
    (('"(N // WPT) % WG == 0"', '"(N // WPT) % WG"'), "constraints[0]: '(N // WPT) % WG' gives 0, not true or false; "
                                                      "write a condition, such as a comparison"),
    # trial 40: a number as an operand of and/or still ruled nothing out
    (('"(N // WPT) % WG == 0"', '"(N // WPT) % WG == 0 and WG"'), "constraints[0]: '(N // WPT) % WG == 0 and WG' takes "
                                                                  "WG as true or false by itself, but its values"),
    # trial 36: nothing was verified, and the summary said "error 0 relative to the reference"
    (("outputs: [y]", "outputs: []"), "outputs: is empty, so no configuration would be verified; list the arguments"),
    (("outputs: [y]", "outputs: [y, y]"), "outputs: 'y' is not an argument name, or is listed twice"),  # trial 40
    (("outputs: [y]", 'outputs: [""]'), "outputs: '' is not an argument name, or is listed twice"),
    # the kernel's output left out of args: the fix is in args, not in outputs
    (("args: [x, y]", "args: [x]"), "add it to the 'args' of the kernel that writes it"),
    # misspelt in args (trial 10): the message named the output, never the typo
    (("args: [x, y]", "args: [x, yy]"), "outputs: y is not an argument of any launch step, but their args have "
                                        "'yy': if that is y, spell it so in args"),
    (("  entry: scale", "  entry: scale\n  args: [x, y]"), "args: every launch step lists its own 'args'"),
    # trial 52: Kernel Tuner's names and C's operators
    (("constraints:", "restrictions:"), "restrictions: unknown key; Kernel Tuner's restrictions is 'constraints', "
                                        "one expression each here"),
    (("  local: [WG]", "  local: [WG]\n  grid_div_x: [WG]"), "Kernel Tuner's grid_div_x is 'global', in work-items"),
    (("problem: {N: 256}", "problem: {N: 256}\nproblem_size: [256]"),  # trial 113: "did you mean 'problem'?"
     "problem_size: unknown key; Kernel Tuner's problem_size is 'problem' (the sizes, by name), from which launch's"),
    (('  - "(N // WPT) % WG == 0"', '  - "(N // WPT) % WG == 0 && WPT > 0"'), r"invalid syntax; write and, or, not"),
    (("  MODE: [0]", "  MODE: {values: [0, 1], when: MODE == 1}"),
     "parameters.MODE.when: 'MODE == 1' uses unknown name(s) MODE (MODE is the parameter this condition is for"),
    (("  MODE: [0]", "  MODE: [0]\n  WG: [16]"), "scale.yaml:11: invalid YAML (key 'WG' given twice (first on line 9)"),
])
def test_spec_mistakes_that_ran_silently_wrong_are_one_line(tmp_path, capsys, edit, message):
    path = write_spec(tmp_path, SCALE_YAML.replace(*edit))
    assert cli.main(["run", str(path), "-n", "2", "--storage", ":memory:", "--no-save"]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if not line.startswith("autotune: warning:")]  # lint's
    assert message in err and len(errors) == 1 and "Traceback" not in err, err


def test_a_constraint_is_named_by_its_place_in_the_file_beside_a_parameters_when(tmp_path, capsys):
    """Trial 123: `constraints: 'N % WG' gives 0` here, `constraints[2]:` in other messages; a
    `when` (a constraint of its own inside) must not shift the number."""
    text = SCALE_YAML.replace("  MODE: [0]", '  MODE: [0, 1]\n  PAD: {values: [0, 1], when: "MODE == 1"}').replace(
        '  - "(N // WPT) % WG == 0"', '  - "(N // WPT) % WG == 0"\n  - "N % WG"')
    assert cli.main(["run", str(write_spec(tmp_path, text)), "-n", "2", "--storage", ":memory:", "--no-save"]) == 1
    assert "constraints[1]: 'N % WG' gives 0, not true or false" in capsys.readouterr().err


def test_an_error_bound_below_zero_is_a_spec_error(tmp_path):
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': np.ones(n, np.float32), 'y': np.zeros(n, np.float32)}\n"
           "def reference(problem, arrays):\n    return {'y': 2 * arrays['x']}\n"
           "def error_bound(problem, arrays):\n    return {'y': np.full(problem['N'], -1.0)}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.raises(SpecError, match=r"error_bound\(\) gave 'y' a negative or NaN bound"):
        make_workload(spec, spec.resolve_problem({}))


def test_a_broken_pipe_that_is_not_stdout_is_not_swallowed(monkeypatch):
    def broken(args):
        raise BrokenPipeError("a worker's pipe")

    monkeypatch.setitem(cli._COMMANDS, "list", broken)
    with pytest.raises(BrokenPipeError):
        cli.main(["list"])


def test_the_reader_leaving_a_pipe_is_not_an_error():
    # `autotune list | head -0`: the reader is gone before autotune writes (it imports first)
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == b""


class _FailingOutput:
    """Standard output whose writes fail with ``error`` after ``good`` of them; its descriptor is
    our own /dev/null, which the CLI points at /dev/null again."""

    def __init__(self, error: OSError, good: int = 1) -> None:
        self.error, self.good, self.written = error, good, []
        self.fd = os.open(os.devnull, os.O_WRONLY)

    def write(self, text):
        if len(self.written) >= self.good:
            raise self.error
        self.written.append(text)
        return len(text)

    def flush(self):
        pass

    def fileno(self):
        return self.fd


@pytest.mark.parametrize("error, status, said", [
    (BrokenPipeError(32, "Broken pipe"), 0, "its reader left"),
    (OSError(28, "No space left on device"), 1, "cannot write it: No space left on device"),
])
def test_a_run_whose_output_fails_goes_on_to_its_end_and_saves(scale, home, monkeypatch, capsys, error, status, said):
    """Trial 33: `autotune run ... | head -3` ended the run at its first line after head left,
    with exit status 0 and nothing saved; `> /dev/full` gave a traceback."""
    from autotune import settings, tuner

    real = tuner.tune
    monkeypatch.setattr(tuner, "tune", lambda spec, options, problem=None, progress=None: real(
        spec, options, problem, progress, evaluator=Fast(), info=FAKE))
    out = _FailingOutput(error)
    monkeypatch.setattr(sys, "stdout", out)
    assert cli.main(["run", str(scale.path), "-n", "5"]) == status
    assert len(out.written) == 1
    assert capsys.readouterr().err == (f"autotune: warning: standard output stopped ({said}); `run` went on to its end "
                                       "without printing\n")
    entry = profiles.entries(profiles.read(profiles.path_for(FAKE.slug, settings.profiles_dir())), "scale", "")[0]
    assert entry.trials == 5 and not entry.partial


def test_a_run_whose_reader_left_both_its_outputs_still_ends_well(scale, home, monkeypatch):
    """Trial 52: `autotune run ... 2>&1 | head -1` exited 1: the warning that standard output
    stopped failed on stderr, the same pipe."""
    from autotune import settings, tuner

    real = tuner.tune
    monkeypatch.setattr(tuner, "tune", lambda spec, options, problem=None, progress=None: real(
        spec, options, problem, progress, evaluator=Fast(), info=FAKE))
    monkeypatch.setattr(sys, "stdout", _FailingOutput(BrokenPipeError(32, "Broken pipe")))
    monkeypatch.setattr(sys, "stderr", _FailingOutput(BrokenPipeError(32, "Broken pipe"), good=0))
    assert cli.main(["run", str(scale.path), "-n", "5"]) == 0
    entry = profiles.entries(profiles.read(profiles.path_for(FAKE.slug, settings.profiles_dir())), "scale", "")[0]
    assert entry.trials == 5 and not entry.partial


@pytest.mark.parametrize("error, status, err", [
    (BrokenPipeError(32, "Broken pipe"), 0, ""),
    (OSError(28, "No space left on device"), 1, "autotune: error: cannot write standard output (No space left on "
                                               "device)\n"),
])
def test_a_listing_whose_output_fails_stops_in_one_line(monkeypatch, capsys, error, status, err):
    monkeypatch.setattr(sys, "stdout", _FailingOutput(error, good=0))
    assert cli.main(["list"]) == status
    assert capsys.readouterr().err == err


def test_a_closed_standard_output_is_a_failed_output_and_its_interface_is_the_streams(scale, home, monkeypatch,
                                                                                     capsys):
    """Trial 39: started with `>&-` (sys.stdout None) a command ended in a traceback and `run`
    measured nothing; and sys.stdout.isatty() raised AttributeError in a reference module."""
    from autotune import tuner

    real = tuner.tune
    seen = []
    monkeypatch.setattr(tuner, "tune", lambda spec, options, problem=None, progress=None: (
        seen.append(sys.stdout.isatty()), real(spec, options, problem, progress, evaluator=Fast(), info=FAKE))[1])
    monkeypatch.setattr(sys, "stdout", None)
    assert cli.main(["run", str(scale.path), "-n", "5"]) == 1
    assert capsys.readouterr().err == ("autotune: warning: standard output stopped (cannot write it: standard output "
                                       "is closed); `run` went on to its end without printing\n")
    entry = profiles.entries(profiles.read(profiles.path_for(FAKE.slug, settings.profiles_dir())), "scale", "")[0]
    assert entry.trials == 5 and seen == [False]
    monkeypatch.setattr(sys, "stdout", None)
    assert cli.main(["list"]) == 1
    assert capsys.readouterr().err == "autotune: error: cannot write standard output (standard output is closed)\n"


def _kill_worker_between(scale, folder, first, second, dying=lambda: None):
    """Measure ``first`` in a worker, kill it (after ``dying()``), measure ``second``:
    (first, second, the evaluator, seconds the second took)."""
    from autotune.measure import TimingOptions
    from autotune.worker import Setup, open_evaluator

    problem = scale.resolve_problem({})
    setup = Setup(scale, os.environ["AUTOTUNE_DEVICE"], problem, "", TimingOptions())
    ev = open_evaluator(setup, make_workload(scale, problem), True, folder)
    try:
        a = ev.evaluate(scale.complete(first), 60)
        dying()
        os.kill(ev._proc.pid, signal.SIGKILL)
        ev._proc.join(10)
        t0 = time.monotonic()
        b = ev.evaluate(scale.complete(second), 50)
        return a, b, ev, time.monotonic() - t0
    finally:
        ev.close()


@needs_opencl
def test_a_ctrl_c_while_the_worker_starts_up_neither_ends_it_nor_prints_a_traceback(scale, tmp_path, capfd,
                                                                                     monkeypatch):
    """Trial 10: Ctrl-C a second after `autotune run` started printed a KeyboardInterrupt
    traceback from the worker's bootstrap (importing numpy), which ignored SIGINT only later."""
    from autotune.measure import TimingOptions
    from autotune.worker import Setup, open_evaluator

    problem = scale.resolve_problem({})
    setup = Setup(scale, os.environ["AUTOTUNE_DEVICE"], problem, "", TimingOptions())
    ev = open_evaluator(setup, make_workload(scale, problem), True, tmp_path)
    started = ev._ctx.Process.start

    def start_and_interrupt(proc):  # a SIGINT for each worker the moment it exists
        started(proc)
        os.kill(proc.pid, signal.SIGINT)

    monkeypatch.setattr(ev._ctx.Process, "start", start_and_interrupt)
    try:
        m = ev.evaluate(scale.complete({"WPT": 1, "WG": 16}), 60)
    finally:
        ev.close()
    assert m.ok and ev.restarts == 0, m.message
    assert "Traceback" not in capfd.readouterr().err


@needs_opencl
def test_a_ctrl_c_to_this_process_while_a_worker_starts_is_not_lost(scale, tmp_path, monkeypatch):
    """Trial 44: SIGINT was ignored here while a worker started, so a Ctrl-C then was lost."""
    from autotune.measure import TimingOptions
    from autotune.worker import Setup, open_evaluator

    problem = scale.resolve_problem({})
    setup = Setup(scale, os.environ["AUTOTUNE_DEVICE"], problem, "", TimingOptions())
    got: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    ev = open_evaluator(setup, make_workload(scale, problem), True, tmp_path)
    started = ev._ctx.Process.start

    def start_and_interrupt(proc):
        os.kill(os.getpid(), signal.SIGINT)
        started(proc)

    monkeypatch.setattr(ev._ctx.Process, "start", start_and_interrupt)
    try:
        m = ev.evaluate(scale.complete({"WPT": 1, "WG": 16}), 60)
    finally:
        ev.close()
        signal.signal(signal.SIGINT, previous)
    assert m.ok and got == [signal.SIGINT], (m.message, got)


@needs_opencl
def test_a_worker_killed_between_trials_is_restarted_and_the_run_goes_on(scale, tmp_path):
    first, second, ev, _ = _kill_worker_between(scale, tmp_path, {"WPT": 1, "WG": 16}, {"WPT": 2, "WG": 16})
    assert first.ok and second.ok and ev.restarts == 1


@needs_opencl
def test_a_hanging_baseline_is_stopped_by_the_timeout(tmp_path):
    text = SCALE_YAML.replace("MODE: [0]", "MODE: [1, 0]")  # the baseline takes MODE 1: it hangs
    spec = specs.load(write_spec(tmp_path, text))
    t0 = time.monotonic()
    report = tune(spec, TuneOptions(timeout_s=6, trials=10))
    assert time.monotonic() - t0 < 30, "the timeout bounds the whole run"
    assert report.stopped_by == "timeout" and report.measured == 0
    study = optuna.load_study(study_name=report.study_name, storage=f"sqlite:///{settings.home() / 'studies.db'}")
    assert [t.user_attrs.get("status") for t in study.trials] == ["interrupted"], \
        "cut off by the run's end, it is measured again next time rather than recorded as a timeout"


@needs_opencl
def test_a_check_function_that_raises_is_a_spec_error_not_a_worker_crash(tmp_path):
    from conftest import REF_PY

    ref = REF_PY + "\ndef check(name, got, want, problem):\n    raise KeyError('tolerance')\n"
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.raises(SpecError, match=r"check\(\) raised \S+scale_ref.py:\d+: KeyError: 'tolerance'"):
        tune(spec, TuneOptions(timeout_s=None, trials=3))


def test_a_check_function_returning_an_empty_message_fails_the_configuration(tmp_path):
    """Trial 45: `return "" if wrong else None` passed every configuration, "" being false."""
    from autotune.verify import Expected
    from conftest import REF_PY

    ref = REF_PY + "\ndef check(name, got, want, problem):\n    return '' if (got != want).any() else None\n"
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    problem = spec.resolve_problem({})
    want = make_workload(spec, problem).expected["y"]
    expected = Expected.prepare(spec, "y", want, problem)
    assert expected.check(want)[0] is None
    assert expected.check(want + 1)[0] == "y: check() returned an empty message, which is a failure (None is a pass)"


def test_a_corrupt_profile_stops_the_run_before_any_trial(scale, tmp_path):
    settings.profiles_dir().mkdir(parents=True)
    prof = profiles.path_for(FAKE.slug, settings.profiles_dir())
    prof.write_text("kernels:\n  scale: [\n")
    calls = []

    class Counting(Fast):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            calls.append(params)
            return super().evaluate(params, limit_s, cutoff_ms)

    with pytest.raises(profiles.ProfileError, match="corrupt profile"):
        tune(scale, TuneOptions(timeout_s=None), evaluator=Counting(), info=FAKE)
    assert calls == [] and prof.read_text() == "kernels:\n  scale: [\n"


@pytest.mark.parametrize("edit, verdict", [
    ((r"WG: \d+", "WG: 48"), "replaced an entry whose configuration is not in the spec's space"),
    # trial 33: show listed the flag, and load_kernel used the entry without it
    ((r"build_flags: \[[^\]]*\]", "build_flags: [-bogus-flag]"), "replaced an entry whose configuration is not in "
                                                                  "the spec's space"),
    # trial 40: show listed mad=1 among the params, and load_kernel built without the flag
    ((r"params: \{", "params: {mad: 1, "), "replaced an entry whose configuration is not in the spec's space"),
    # trial 31: a time that is not a positive number is a malformed field, as show and load_kernel see it
    ((r"time_ms: ", "time_ms: -"), "added; removed a malformed entry for its problem (kernels.scale[0] (N=256): "
                                   "malformed entry (time_ms is -"),
])
def test_a_hand_edited_entry_load_kernel_cannot_use_is_marked_and_replaced(scale, capsys, edit, verdict):
    first = run(scale, storage=":memory:")
    first.profile_path.write_text(re.sub(*edit, first.profile_path.read_text(), count=1))
    from autotune.cli import _show_entries, _ShowBlock
    broken: list[profiles.ProfileError] = []
    entries = profiles.entries(profiles.read(first.profile_path, check_entries=False), "scale", on_error=broken.append)
    _show_entries("scale", _ShowBlock("scale", None, entries, (), scale, None, True))
    shown = capsys.readouterr().out
    assert ("load_kernel skips it: its configuration is not in the spec's space" in shown) == \
        ("time_ms" not in edit[0]), shown
    assert len(broken) == ("time_ms: -" in edit[1])
    again = run(scale, storage=":memory:")  # as good as the first: only the edit lets it in
    assert again.profile_verdict.startswith(verdict), again.profile_verdict
    (entry,) = profiles.entries(profiles.read(first.profile_path), "scale")
    assert scale.stores(entry) and entry.time_ms > 0


@pytest.mark.parametrize("moved", [False, True])
def test_a_finished_run_replaces_its_own_studys_entry_wherever_the_home_moved(scale, tmp_path, monkeypatch, moved):
    """Trial 95: the entry named its study by a digest of the database's path, so after the
    home was moved a resumed run of the very same study kept an entry "faster on paper"."""
    import shutil

    first = run(scale)
    if moved:
        shutil.copytree(settings.home(), tmp_path / "moved")
        monkeypatch.setenv("AUTOTUNE_HOME", str(tmp_path / "moved"))
    path = profiles.path_for(FAKE.slug, settings.profiles_dir())
    path.write_text(re.sub(r"time_ms: [0-9.e-]+", "time_ms: 1.0e-06", path.read_text(), count=1))
    again = run(scale, trials=first.study_trials + 2)  # resumes the study
    assert again.study_key == first.study_key is not None
    assert again.profile_verdict.startswith("replaced"), again.profile_verdict


def test_an_entry_of_another_study_that_this_run_found_slower_is_replaced(scale, tmp_path):
    """Trials 96, 97: a run of another study measured the entry's configuration (in its leaders'
    rounds, or only in its search, 4x slower) and kept the entry as "faster than this run's
    best": one time of another moment against this run's. An entry it did not measure stays."""
    from autotune.tuner import _seen

    first = run(scale)
    old = dict(first.best.params)
    path = first.profile_path
    (stale,) = profiles.entries(profiles.read(path), "scale")  # its configuration, flags as stored

    class Slowed(Fast):  # the device now: the entry's configuration 4x slower than another
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            return replace(m, times_ms=tuple(4 * t for t in m.times_ms)) if dict(params) == old else m

    path.write_text(re.sub(r"time_ms: [0-9.e-]+", "time_ms: 1.0e-06", path.read_text(), count=1))
    again = tune(scale, TuneOptions(timeout_s=None, trials=6, storage=f"sqlite:///{tmp_path / 'other.db'}"),
                 evaluator=Slowed(), info=FAKE)
    assert again.best.params != old and again.profile_verdict.startswith("replaced"), again.profile_verdict
    # measured in the search only, not in the rounds: its measurement says as much
    search_only = replace(again, retimed=frozenset())
    slow = Measurement(Status.OK, times_ms=(1.0,) * 3, error=0.0)
    assert _seen(search_only, lambda c: slow if dict(c) == old else None).beaten(stale)
    assert not _seen(search_only, lambda c: None).beaten(stale)  # not measured: its time is all there is
    path.write_text(re.sub(r"time_ms: [0-9.e-]+", "time_ms: 1.0e-06", path.read_text(), count=1))
    untimed = run(scale, storage=f"sqlite:///{tmp_path / 'third.db'}", trials=1, warm_start=False)
    assert untimed.profile_verdict.startswith("kept"), untimed.profile_verdict


@pytest.mark.parametrize("stored", ["left out", "another value"])
def test_an_entry_of_the_runs_best_configuration_written_another_way_is_not_beaten_by_it(stored):
    """Trial 99: of one configuration's two times the faster stays, but an entry that left out a
    parameter whose `when` does not hold (or gave it another value) was taken for another
    configuration, which the run had measured slower than its best: itself."""
    import types

    from autotune.tuner import _seen

    mul1 = specs.load("mul1")
    best = next(c for c in space.enumerate_valid(mul1, mul1.default_problem(), FAKE.facts(), limit=2000)
                if c["VARIANT"] != "v3")  # BLOCK_SIZE is v3's alone
    params = mul1.without_flags(best)
    params = {k: v for k, v in params.items() if k != "BLOCK_SIZE"} if stored == "left out" else \
        dict(params, BLOCK_SIZE=4 if params["BLOCK_SIZE"] != 4 else 8)
    entry = profiles.Entry(problem=mul1.default_problem(), params=params, build_flags=tuple(mul1.enabled_flags(best)),
                           time_ms=1e-6, throughput={}, trials=1, tuned_at="2026-11-28T00:00:00Z",
                           spec_hash=mul1.spec_hash, study="another")
    slower = Measurement(Status.OK, times_ms=(2.0,) * 3, params=best)
    report = types.SimpleNamespace(spec=mul1, best=replace(slower, times_ms=(1.0,) * 3), retimed=frozenset())
    assert not _seen(report, lambda c: slower).beaten(entry)
    other = dict(best, WG=next(w for p in mul1.parameters if p.name == "WG" for w in p.values if w != best["WG"]))
    assert _seen(report, lambda c: slower).beaten(replace(entry, params=mul1.without_flags(other)))


def test_a_run_on_several_devices_replaces_an_entry_its_study_measured_slower(scale, tmp_path):
    """Trial 99: the workers' parent saved the best knowing only the leaders' rounds, so an entry
    the study had measured slower than the best in its search was kept as faster than it."""
    from autotune import fleet

    first = run(scale)
    old = dict(first.best.params)
    path = first.profile_path

    class Slowed(Fast):  # the device now: the entry's configuration 4x slower than another
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            return replace(m, times_ms=tuple(4 * t for t in m.times_ms)) if dict(params) == old else m

    storage = f"sqlite:///{tmp_path / 'other.db'}"
    again = tune(scale, TuneOptions(timeout_s=None, trials=6, storage=storage, save=False), evaluator=Slowed(),
                 info=FAKE)
    assert again.best.params != old
    search_only = replace(again, retimed=frozenset())  # measured in the search, not in the rounds
    path.write_text(re.sub(r"time_ms: [0-9.e-]+", "time_ms: 1.0e-06", path.read_text(), count=1))
    unread = replace(search_only, study_name="no such study")  # nothing read: the rounds alone tell
    assert fleet._save_best(unread, storage).profile_verdict.startswith("kept")
    assert fleet._save_best(search_only, storage).profile_verdict.startswith("replaced")


def test_a_new_study_of_the_same_name_is_not_the_old_one(scale, tmp_path, monkeypatch):
    """A study database moved aside and begun again holds a study of the same name that is
    another study: its entry must not pass for the earlier one's."""
    first = run(scale)
    monkeypatch.setenv("AUTOTUNE_HOME", str(tmp_path / "fresh"))
    assert run(scale).study_key not in (None, first.study_key)
    assert run(scale, storage=":memory:").study_key is None


def test_an_entry_that_breaks_a_constraint_here_is_marked_by_show(scale, capsys):
    """Trial 47: an entry edited to break a constraint was listed as usable; load_kernel skipped it."""
    import json

    from autotune.cli import _show_entries, _ShowBlock

    first = run(scale, storage=":memory:")
    first.profile_path.write_text(re.sub(r"WG: \d+", "WG: 512", first.profile_path.read_text(), count=1))
    entries = profiles.entries(profiles.read(first.profile_path), "scale")
    _show_entries("scale", _ShowBlock("scale", None, entries, (), scale, None, True, FAKE.facts()))
    assert ("load_kernel skips it: its configuration is not valid for its problem on this device (constraint "
            "'(N // WPT) % WG == 0')") in capsys.readouterr().out
    block = _ShowBlock("scale", first.profile_path, entries, (), scale, None, True, FAKE.facts())
    (entry,) = json.loads(json.dumps(block.to_json(None)))["entries"]
    assert entry["usable"] is False and entry["skipped_because"].startswith("its configuration is not valid")


def test_a_malformed_entry_or_a_copy_of_one_blocks_nothing_and_the_next_run_of_its_problem_removes_it(
        scale, capsys, monkeypatch):
    """Trial 15: an entry without its time (of any kernel) stopped `show` and every `run` on
    the device; a quoted value was called "not in the spec's space" though it was; a copied
    entry stayed beside the run's result."""
    import yaml

    from autotune import cli

    first = run(scale, storage=":memory:")
    doc = yaml.safe_load(first.profile_path.read_text())
    (good,) = doc["kernels"]["scale"]
    wg = good["params"]["WG"]
    doc["kernels"]["other"] = [{k: v for k, v in good.items() if k != "time_ms"}]
    doc["kernels"]["scale"] = [{**good, "params": {**good["params"], "WG": str(wg)}}, dict(good, trials=1)]
    first.profile_path.write_text(yaml.safe_dump(doc))
    from autotune import device
    monkeypatch.setattr(device, "select", lambda *a, **k: (FAKE, None))
    cli._cmd_show(cli.build_parser().parse_args(["show"]))
    cli._cmd_show(cli.build_parser().parse_args(["show", str(scale.path)]))
    shown = capsys.readouterr().out
    assert "kernels.other[0] (N=256): entry lacks time_ms; fix or delete that entry (load_kernel skips it; the " \
           "next run of its problem replaces it)" in shown, shown
    from autotune.cli import _remedy  # trial 31: said of a shipped profile's entry, which no run replaces
    assert _remedy("", ours=False).endswith("whose entry for this size is used first")
    assert f"WG: '{wg}' is text, not the value {wg} (remove its quotes in the YAML)" in shown, shown
    again = run(scale, storage=":memory:")
    assert again.profile_verdict == ("replaced an entry whose configuration is not in the spec's space; removed 1 more "
                                     "entry of its problem"), again.profile_verdict
    after = yaml.safe_load(first.profile_path.read_text())
    assert len(after["kernels"]["scale"]) == 1 and after["kernels"]["other"] == doc["kernels"]["other"]
    # the other kernel's malformed entry goes once a result for its problem is saved
    other = profiles.Entry.from_yaml(dict(good, time_ms=1.0), "x")
    _, verdict = profiles.merge(after, "other", other)
    assert verdict == "added; removed a malformed entry for its problem (kernels.other[0] (N=256): entry lacks time_ms)"


@needs_opencl
def test_a_worker_killed_holding_the_program_cache_lock_does_not_stall_later_builds(scale, tmp_path):
    # pyopencl locks its on-disk program cache with a file; a worker killed (timeout, crash)
    # while it holds it leaves the file behind, and every later build waited a minute for it
    # and then failed. The run's workers have a cache of their own, so the run removes it.
    from pyopencl.characterize import has_src_build_cache

    from autotune import device

    if has_src_build_cache(device.select(os.environ["AUTOTUNE_DEVICE"])[1]):
        pytest.skip("pyopencl leaves caching to this driver (NVIDIA's): it keeps no cache nor lock of its own")
    first, second, _, took = _kill_worker_between(
        scale, tmp_path, {"WPT": 1, "WG": 16}, {"WPT": 4, "WG": 32},  # a new program: a build
        dying=lambda: (tmp_path / "programs" / "lock").touch())  # held as it dies
    assert first.ok and second.ok, second.message
    assert took < 30, "the dead worker's lock was not waited for"
    assert any((tmp_path / "programs").iterdir()), "the run's own program cache is used"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_storage_where_no_lock_file_can_be_made_is_one_line_at_once(scale, monkeypatch):
    """/proc takes no new file: the run says so at once, not after waiting for the lock (which
    cannot be made either, and the lock library waits its whole timeout on that)."""
    from autotune import study
    monkeypatch.setattr(study, "LOCK_WAIT_S", 5.0)
    start = time.monotonic()
    with pytest.raises(ProblemError, match=r"cannot write the study database") as caught:
        run(scale, storage=f"sqlite:////proc/autotune-{os.getpid()}.db")
    assert time.monotonic() - start < 4 and "\n" not in str(caught.value)


def test_a_lock_held_by_another_process_too_long_is_said(tmp_path, monkeypatch):
    import fcntl

    from autotune import study
    monkeypatch.setattr(study, "LOCK_WAIT_S", 0.2)
    db = tmp_path / "studies.db"
    with open(str(db) + ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a stuck run creating the database would hold it
        with pytest.raises(ProblemError, match=r"waited 0.2 s for .*studies.db.lock, which another process"):
            open_storage(f"sqlite:///{db}")


def test_a_problem_the_hosts_free_memory_cannot_hold_is_refused_before_drawing(monkeypatch):
    """Linux does not refuse a large allocation: it kills the process once the pages are
    touched (a 40000³ matmul on a 23 GiB machine: no MemoryError, exit 137). The sizes are
    checked against the free memory before any input is drawn."""
    from autotune import hostmemory, measure
    monkeypatch.setattr(hostmemory, "available", lambda: 2**30)
    monkeypatch.setattr(measure, "make_workload", lambda *a, **k: pytest.fail("inputs drawn"))
    with pytest.raises(ProblemError, match=r"M=8192,N=8192,K=8192.* needs about 3\.00 GiB of host memory.*"
                                           r"has 1\.00 GiB free; use a smaller --size"):
        tune("matmul", TuneOptions(timeout_s=None), problem={"M": 8192, "N": 8192, "K": 8192}, info=FAKE)


def test_the_size_pass_itself_stops_at_the_hosts_free_memory(monkeypatch):
    """The size pass's arrays cost nothing until inputs() casts them (matmul casts its draws to
    float32): on a 128 GiB host, -s 200000 was killed inside it. Draws past the free memory are
    refused before the cast."""
    from autotune import hostmemory
    from autotune.arguments import shaped_inputs
    monkeypatch.setattr(hostmemory, "available", lambda: 100 * 2**20)
    with pytest.raises(ProblemError, match="its arguments need more memory than this machine can give"):
        shaped_inputs(specs.load("matmul"), {"M": 8192, "N": 8192, "K": 8192, "layout": "row"})
    assert shaped_inputs(specs.load("matmul"), {"M": 64, "N": 64, "K": 64, "layout": "row"})["A"].nbytes == 4 * 64 * 64


@needs_opencl
def test_a_build_flag_the_compiler_rejects_is_a_compile_error_of_those_configurations(tmp_path, ocl_device):
    """INVALID_BUILD_OPTIONS went through pyopencl's cache code, which read an unset variable
    and raised KeyError: the run ended with a traceback. Now the flag's configurations fail
    to build and the others are tuned."""
    path = write_spec(tmp_path, SCALE_YAML.replace("-cl-mad-enable", "-cl-no-such-flag"))
    report = tune(str(path), TuneOptions(trials=8, seed=0, timeout_s=None, storage=":memory:", save=False,
                                         device=ocl_device))
    assert report.failures.get("compile_error", 0) > 0 and set(report.failures) == {"compile_error"}
    assert report.best is not None and report.best.params["mad"] is False
    # Intel's and PoCL's drivers do not say which option they refuse (the spec's flags are
    # named then); NVIDIA's does ("Don't understand command line argument ...")
    assert "-cl-no-such-flag" in report.failure_examples["compile_error"]


def test_a_baseline_not_valid_for_the_problem_is_named_in_a_warning(tmp_path):
    """It was dropped without a word: the summary just had no baseline line."""
    path = write_spec(tmp_path, SCALE_YAML.replace('  - "(N // WPT) % WG == 0"',
                                                   '  - "(N // WPT) % WG == 0"\n  - "WG > 16 or WPT > 1"'))
    said = r"scale's baseline is not valid for N=256 on .*: the run reports no speed-up"
    with pytest.warns(AutotuneWarning, match=said):
        report = tune(str(path), TuneOptions(trials=3, seed=0, timeout_s=None, storage=":memory:", save=False),
                      evaluator=Fast(), info=FAKE)
    assert report.baseline is None


def test_a_default_not_valid_for_the_default_problem_is_named_in_a_warning(tmp_path):
    """Trial 15: the spec's own default, invalid at its own default problem, was replaced by a
    neighbour without a word; at another size an invalid default is expected, and not said."""
    path = write_spec(tmp_path, SCALE_YAML.replace('  - "(N // WPT) % WG == 0"',
                                                   '  - "(N // WPT) % WG == 0"\n  - "N > 1000 or WPT < 16"')
                      + "default: {WPT: 16, WG: 16}\n")
    options = TuneOptions(trials=3, seed=0, timeout_s=None, storage=":memory:", save=False)
    with pytest.warns(AutotuneWarning, match=r"scale's default is not valid for its own default problem on .* "
                      r"\(constraint 'N > 1000 or WPT < 16'\): the run measures a valid configuration one parameter "
                      r"away instead, where there is one; load_kernel without a profile uses the nearest valid one; "
                      r"fix the spec's default"):
        tune(str(path), options, evaluator=Fast(), info=FAKE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tune(str(path), options, problem={"N": 128}, evaluator=Fast(), info=FAKE)


def test_a_hint_not_valid_for_the_default_problem_is_named_in_a_warning(tmp_path):
    """Trial 17: a hint that breaks a constraint was swapped for a neighbour without a word,
    unlike the default."""
    path = write_spec(tmp_path, SCALE_YAML + "hints:\n  - {WPT: 2, WG: 64}\n  - {WPT: 16, WG: 32}\n")
    options = TuneOptions(trials=3, seed=0, timeout_s=None, storage=":memory:", save=False)
    with pytest.warns(AutotuneWarning, match=r"^scale's hints\[1\] is not valid for its own default problem on "
                      r".* \(constraint '\(N // WPT\) % WG == 0'\): the run measures a valid configuration one "
                      r"parameter away instead, where there is one; fix the spec's hints\[1\]$") as caught:
        tune(str(path), options, evaluator=Fast(), info=FAKE)
    assert len([w for w in caught if "hints" in str(w.message)]) == 1, "hints[0] is valid"


def test_a_baseline_may_name_a_parameter_its_variant_ignores(tmp_path):
    """Trial 12: WG given for the variant that ignores it made the baseline 'not valid' (by a
    constraint made from the when, which the user never wrote), so the run had no speed-up."""
    yaml_text = (SCALE_YAML.replace("  WG: [16, 32, 64, 128, 512]\n  MODE: [0]",
                                    "  MODE: [0, 1]\n  WG: {values: [16, 32, 64, 128, 512], when: MODE == 1}")
                 .replace("baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 1, MODE: 0, WG: 64}"))
    path = write_spec(tmp_path, yaml_text)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutotuneWarning)
        report = tune(str(path), TuneOptions(trials=4, seed=0, timeout_s=None, storage=":memory:", save=False),
                      evaluator=Fast(), info=FAKE)
    assert report.baseline is not None and report.baseline.params == {"WPT": 1, "MODE": 0, "WG": 16, "mad": False}


def test_lines_leave_out_the_parameters_a_configuration_ignores(tmp_path, capsys):
    """Trial 12: progress lines and the summary showed MODE=0 WG=16, as if WG were chosen."""
    class ModeZeroFast(QuietEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            t = 1.0 / params["WPT"] if params["MODE"] == 0 else 10.0
            return Measurement(Status.OK, times_ms=(t, t, t), error=0.0)

    yaml_text = SCALE_YAML.replace("  WG: [16, 32, 64, 128, 512]\n  MODE: [0]",
                                   "  MODE: [0, 1]\n  WG: {values: [16, 32, 64, 128, 512], when: MODE == 1}")
    spec = specs.load(write_spec(tmp_path, yaml_text))
    report = tune(spec, TuneOptions(trials=12, sampler="grid", timeout_s=None, storage=":memory:", save=False),
                  evaluator=ModeZeroFast(), info=FAKE, progress=cli._progress(spec))
    lines = capsys.readouterr().out.splitlines()
    assert report.best is not None and report.best.params["MODE"] == 0
    # (its runner-up, the same with -cl-mad-enable, marks it "flags: none")
    assert re.search(r"^  best        WPT=\d+ MODE=0(  flags: none)?$", cli.format_report(report), re.M), \
        cli.format_report(report)
    # trial 13: it said nothing; trial 91: the API's caller is told the option it used too
    assert re.search(r"^  profile     not saved: --no-save \(TuneOptions\(save=False\)\)$", cli.format_report(report),
                     re.M)
    assert any("MODE=0 mad=" in line for line in lines) and any("MODE=1 WG=" in line for line in lines)
    assert not any("MODE=0 WG=" in line for line in lines), lines


def test_a_second_spec_file_with_the_same_kernel_name_is_refused_before_it_replaces_the_firsts_entries(tmp_path):
    """Trial 24: a copy of a spec with another tolerance and the same `kernel:` replaced the
    first's tuned entry, its start line calling it an edit of the template."""
    first = write_spec(tmp_path / "a", SCALE_YAML)
    options = TuneOptions(trials=3, seed=0, timeout_s=None)
    done = tune(str(first), options, evaluator=Fast(), info=FAKE)
    copy = write_spec(tmp_path / "b", SCALE_YAML.replace("kernel: scale", "kernel: scale\ntolerance: {rtol: 1e-4}"))
    with pytest.raises(ProblemError, match=rf"^{copy} names its kernel 'scale', as {first} does, whose 3 trials at "
                                           r"this size on this device are in the study database: the two would "
                                           r"replace each other's profile entries; give this spec another `kernel:` "
                                           rf"name \(or, if it replaces {first}, move that file away\)$"):
        tune(str(copy), replace(options, save=False), evaluator=Fast(), info=FAKE)
    # trial 42: a run whose study database holds none of the first's trials replaced its entry
    for storage in (None, ":memory:"):
        with pytest.raises(ProblemError, match=rf"^{copy} names its kernel 'scale', as {first} does, whose tuned "
                                               rf"entry for this size is in {done.profile_path}: the two would "):
            tune(str(copy), replace(options, storage=storage), evaluator=Fast(), info=FAKE)
    assert tune(str(copy), replace(options, storage=":memory:", save=False), evaluator=Fast(), info=FAKE).measured
    kept = profiles.entries(profiles.read(done.profile_path), "scale")
    assert [e.spec_hash for e in kept] == [specs.load(first).spec_hash], "the first's entry is untouched"
    assert kept[0].spec_file == str(first.resolve())
    first.rename(first.with_name("old.yaml"))  # the copy replaces it: the run goes ahead
    assert tune(str(copy), options, evaluator=Fast(), info=FAKE).measured == 3


def test_a_new_study_after_a_spec_edit_says_that_the_earlier_ones_trials_are_kept_apart(tmp_path, capsys):
    """Trial 10: after a template edit the run started from nothing without a word."""
    path = write_spec(tmp_path, SCALE_YAML)
    options = TuneOptions(trials=3, seed=0, timeout_s=None, save=False)
    first = tune(str(path), options, evaluator=Fast(), info=FAKE)
    # a stop leaves a trial unfinished, which is not counted (trial 22: "its 53 trials" of 51)
    optuna.load_study(study_name=first.study_name, storage=open_storage(None)).ask()
    (tmp_path / "scale.cl").write_text((tmp_path / "scale.cl").read_text() + "\n// edited\n")
    edited = specs.load(str(path))
    tune(edited, options, evaluator=Fast(), info=FAKE, progress=cli._progress(edited))
    tune(edited, options, evaluator=Fast(), info=FAKE, progress=cli._progress(edited))  # resumed: no line
    said = [line for line in capsys.readouterr().out.splitlines() if "a new study" in line]
    assert said == ["a new study: the spec's template, reference or space has changed since its 3 trials at this "
                    "size on this device, which are kept apart (reverting the edit resumes them)"]
    tune(edited, replace(options, trials=2), problem={"N": 512}, evaluator=Fast(), info=FAKE,
         progress=cli._progress(edited))
    assert "a new study" not in capsys.readouterr().out, "a new size is not another version"


def test_a_space_that_no_launch_size_fits_points_at_the_launch_not_the_problem(tmp_path):
    """Trial 13: global N // WPT + 1 is never a multiple of the work-group, and the fix offered
    was to choose another problem or widen the space."""
    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["N // WPT + 1"]')))
    with pytest.raises(ProblemError, match=r"global size \(257,\) not divisible by local \(16,\)\); every "
                       r"configuration is ruled out for this problem: check the spec's launch sizes"):
        run(spec)


def test_a_run_that_measured_nothing_says_so_not_that_nothing_passed_verification(scale):
    from autotune.cli import format_report

    report = run(scale, timeout_s=0.001)
    assert (report.stopped_by, report.best, report.study_trials) == ("timeout", None, 0)
    text = format_report(report)
    assert "nothing was measured before the run stopped" in text and "verification" not in text
    assert "--timeout reached" in text  # and why


@pytest.mark.parametrize("edit, why", [
    ((r"N: 256", "N: '256'"), "load_kernel skips it: "
     "its problem is written {'N': '256'}, which no lookup matches: load_kernel looks up {'N': 256}"),
    ((r"N: 256", "N: 256, R: 3"), "load_kernel skips it: its problem is not one of this spec's (scale has no "
                                  "problem key 'R'"),
    # trial 89: said to be skipped, where first use times its configuration again and may pick it
    ((r"spec_hash: \w+", "spec_hash: 0123456789abcdef"), "load_kernel times its configuration again at first use, "
                                                          "and may pick it: stale: tuned with another version"),
    # trial 94: but not a stale first-use pick, which first use does not time again
    ((r"spec_hash: \w+", "spec_hash: 0123456789abcdef\n    picked: true"), "load_kernel skips it: stale: tuned "
                                                                           "with another version"),
])
def test_an_entry_whose_problem_no_lookup_matches_is_marked_by_show(scale, capsys, edit, why):
    """A hand-edited problem (a quoted size, a key the spec lacks) is never matched by
    load_kernel, and a stale entry not used as it is: show says so rather than list it as usable."""
    first = run(scale, storage=":memory:")
    first.profile_path.write_text(re.sub(*edit, first.profile_path.read_text(), count=1))
    from autotune.cli import _show_entries, _ShowBlock
    (entry,) = profiles.entries(profiles.read(first.profile_path), "scale")
    _show_entries("scale", _ShowBlock("scale", None, [entry], (), scale, None, True))
    shown = capsys.readouterr().out
    assert f"({why}" in shown
    # trial 31: "the next run of this size replaces it", though a run adds its own entry beside it
    assert shown.rstrip().endswith("; write its problem as the spec has it, or delete the entry)"
                                   if "problem" in why else "the next run of its problem replaces it)"), shown


def test_a_crash_whose_last_output_is_llvms_banner_says_it_need_not_be_the_compilers_fault():
    """Trial 17: a kernel's write outside its buffers crashed the worker, and the reason read as
    LLVM asking for a compiler bug report."""
    from autotune.worker import last_output

    banner = "PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ | Stack dump:"
    assert last_output(banner).endswith("a kernel that reads or writes outside its buffers included: not only a "
                                        "compiler fault)")
    assert last_output("double free or corruption") == "; its last output: double free or corruption"
    assert last_output("") == ""


def test_a_namesake_of_autotunes_own_spec_is_refused_and_unrecorded_or_moved_files_are_not(scale, tmp_path):
    from autotune.tuner import _refuse_a_namesake, _studied_namesakes

    with pytest.raises(ProblemError, match=r"as autotune's own scale spec does, whose 1 trial at .*`kernel:` name$"):
        _refuse_a_namesake(scale, _studied_namesakes({"builtin": 1}))
    _refuse_a_namesake(scale, _studied_namesakes({"": 7, str(tmp_path / "moved.yaml"): 7, scale.file_id: 7}))


def test_a_result_that_changes_between_two_launches_is_called_a_race_not_a_read_outside():
    """Trial 27: a histogram merged without atomics failed verification as "data: read past its
    end", since the zones' diagnosis compares launches whose results the race changed."""
    from types import SimpleNamespace

    from autotune.measure import Bench

    marks = iter([[b"4047"], [b"4102"]])
    racy = SimpleNamespace(_run=lambda launch: None, _outputs_marks=lambda: next(marks))
    why = Bench._unreproducible(racy, None, "hist: 256 of 256 elements differ")  # type: ignore[arg-type]
    assert why is not None and why.startswith("the result changes from one launch to the next: a race")
    assert why.endswith("; the first launch: hist: 256 of 256 elements differ")
    steady = SimpleNamespace(_run=lambda launch: None, _outputs_marks=lambda: [b"4047"])
    assert Bench._unreproducible(steady, None, "hist: 256 of 256 elements differ") is None  # type: ignore[arg-type]


def test_an_autotune_home_whose_name_is_not_utf8_is_one_line(monkeypatch, capsys):
    """Trial 44: a UnicodeEncodeError traceback from the URL's escaping."""
    from autotune import cli

    monkeypatch.setenv("AUTOTUNE_HOME", os.fsdecode(b"/tmp/h_\xff\xfe"))
    with pytest.raises(ProblemError, match=r"AUTOTUNE_HOME \(/tmp/h_\\xff\\xfe\) holds bytes that are not UTF-8"):
        settings.default_storage()
    assert cli.main(["report", "reverse"]) == 1 and "not UTF-8 text" in capsys.readouterr().err


def test_autotune_home_may_hold_percent_and_question_marks_and_is_made_absolute(scale, tmp_path, monkeypatch):
    """Trial 39: the default database URL was the path as it is, so a Jenkins workspace's `%2F`
    was decoded (exit 1, blaming --storage, never given) and `?` put the database in a file `h`
    of the parent folder; a relative AUTOTUNE_CACHE became a relative OCL_ICD_VENDORS; a blank
    AUTOTUNE_HOME made a folder named " "."""
    import platformdirs

    for name in ("job%2Flogin", "h?mode=ro"):
        home = tmp_path / name / ".autotune"
        home.mkdir(parents=True)
        monkeypatch.setenv("AUTOTUNE_HOME", str(home))
        report = run(scale)
        assert (home / "studies.db").is_file() and report.profile_path.parent == home / "profiles"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("h", "job"))) == ["h?mode=ro", "job%2Flogin"]
    monkeypatch.chdir(tmp_path)
    for variable, where in (("AUTOTUNE_HOME", settings.home), ("AUTOTUNE_CACHE", settings.cache_dir)):
        monkeypatch.setenv(variable, "relative")
        assert where() == tmp_path / "relative"
        settings.pin_folders()  # as import autotune does: a chdir since keeps the folder (trial 40)
        monkeypatch.chdir(tmp_path / "job%2Flogin")
        assert where() == tmp_path / "relative" and os.environ[variable] == str(tmp_path / "relative")
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv(variable, "  ")
        assert where() == Path({"AUTOTUNE_HOME": platformdirs.user_data_dir,
                                "AUTOTUNE_CACHE": platformdirs.user_cache_dir}[variable]("autotune"))


@needs_opencl
def test_tune_from_a_script_without_a_main_guard_or_from_stdin_runs_its_top_level_once(scale, tmp_path):
    """Trial 39: spawn ran the caller's script again in the measuring worker, so a script
    without `if __name__ == "__main__":` (and one read from stdin) failed with "the measuring
    worker died while starting", its top level having run twice."""
    script = tmp_path / "noguard.py"
    script.write_text("import autotune\nprint('top level ran')\n"
                      f"r = autotune.tune({str(scale.path)!r}, autotune.TuneOptions(trials=2, storage=':memory:', "
                      "save=False, timeout_s=120))\nprint('measured', r.measured)\n")
    for how in ([str(script)], ["-"]):
        done = subprocess.run([sys.executable, *how], input=script.read_text() if how == ["-"] else None,
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines() == ["top level ran", "measured 2"], (how, done.stdout, done.stderr[-2000:])


def test_a_tolerance_that_passes_an_output_of_zeros_is_warned_of(tmp_path):
    """Trial 38: a worst-case error_bound larger than the answer passed a kernel 100% wrong, shown
    as "error 1 relative to the reference, worst element at 29% of its tolerance"."""
    loose = specs.load(write_spec(tmp_path, SCALE_YAML.replace("outputs: [y]", "outputs: [y]\ntolerance: {rtol: 1}")))
    with pytest.warns(AutotuneWarning, match=r"the error allowed for each element of y \(the tolerance\) is at least "
                                             r"its expected value, so an output of zeros would pass verification"):
        make_workload(loose, loose.resolve_problem({}))
    (tmp_path / "tight").mkdir()
    tight = specs.load(write_spec(tmp_path / "tight", SCALE_YAML))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_workload(tight, tight.resolve_problem({}))
    # trial 47: at K of 2**17, autotune's own matmul told the application to tighten its tolerance
    mm = specs.load("matmul")
    with pytest.warns(AutotuneWarning, match=r"^at M=4,N=4,K=131072,layout=row, the rounding error matmul's reference "
                                             r"allows for each element of C is at least its expected value, so "
                                             r"verification there cannot tell a wrong result from a right one"):
        make_workload(mm, mm.resolve_problem({"M": 4, "N": 4, "K": 2**17}))


@needs_opencl
def test_warnings_in_a_loop_that_loads_a_kernel_are_shown_once(tmp_path):
    """Trial 47: each build reset Python's warning filters, which made it forget what it had
    shown: an application's own warning, and autotune's "ignoring profile", printed on every
    iteration (200 times in 200 calls)."""
    app = """
import os, warnings, pyopencl as cl, autotune
from autotune import device
info, dev = device.select(os.environ["AUTOTUNE_DEVICE"])
(autotune.settings.profiles_dir() / f"{info.slug}.yaml").write_text("kernels: [\\n")
ctx = cl.Context([dev])
q = cl.CommandQueue(ctx)
for n in (4096, 4096, 8192, 8192):
    autotune.load_kernel("reverse", q, N=n)
    warnings.warn("solver: residual stagnated")
"""
    (tmp_path / "home" / "profiles").mkdir(parents=True, exist_ok=True)
    out = subprocess.run([sys.executable, "-c", app], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "AUTOTUNE_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("UserWarning: solver: residual stagnated") == 1, out.stderr
    assert out.stderr.count("AutotuneWarning: ignoring profile:") == 1, out.stderr


@needs_opencl
def test_an_applications_own_build_log_is_still_shown_after_autotunes_builds():
    """Trial 48: a build log autotune kept quiet counted as shown, so the application's own
    builds' CompilerWarning (one text, one pyopencl line) never showed in that process."""
    setup = ("import os, pyopencl as cl\nfrom autotune import device, launch\n"
             "ctx = cl.Context([device.select(os.environ['AUTOTUNE_DEVICE'])[1]])\n")
    ours = "launch.build_quietly(ctx, '__kernel void k(__global float* x) { x[0] = 1; }')\n"
    # each run's kernel its own text: NVIDIA's driver logs nothing for a kernel it has cached
    theirs = "cl.Program(ctx, '__kernel void u(__global float* x) {{ int unused; x[0] = {}; }}').build()\n"
    said = [subprocess.run([sys.executable, "-c", setup + first + theirs.format(f"{time.time_ns()}.0f")],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "PYOPENCL_NO_CACHE": "1"})
            for first in ("", ours)]
    assert all(out.returncode == 0 for out in said), [out.stderr[-2000:] for out in said]
    if "CompilerWarning" not in said[0].stderr:  # NVIDIA's logs nothing for it: nothing to show either way
        pytest.skip("this runtime's build log of the kernel is empty")
    assert "CompilerWarning" in said[1].stderr, said[1].stderr[-2000:]


def test_no_measuring_worker_is_started_once_the_application_exits(monkeypatch):
    """Trial 48: tune() in a daemon thread, its worker killed as the application exited, started
    another, which found its folder gone and printed a traceback."""
    from types import SimpleNamespace

    from autotune import worker
    from autotune.errors import WorkerError

    ev = worker.IsolatedEvaluator.__new__(worker.IsolatedEvaluator)
    monkeypatch.setattr(worker.threading, "main_thread", lambda: SimpleNamespace(is_alive=lambda: False))
    with pytest.raises(WorkerError, match="the application is exiting"):
        ev._start()


SLOW_REF = ("import time\nimport numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
            "    return {'x': np.ones(n, np.float32), 'y': np.zeros(n, np.float32)}\n"
            "def reference(problem, arrays):\n    t = time.time()\n    while time.time() < t + 60:\n        pass\n"
            "    return {'y': 2 * arrays['x']}\n")


def test_a_slow_reference_is_noted_and_ended_when_the_time_is_up(tmp_path, monkeypatch):
    """Trial 45: a reference() that took minutes printed nothing, and --timeout did not end it.
    A note comes once it has run a while, and the run's time ends it with what to do; the
    alarm that ends it is put back as it was."""
    from autotune import hosttime

    monkeypatch.setattr(hosttime, "NOTE_AFTER_S", 0.2)
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=SLOW_REF))
    before = signal.getsignal(signal.SIGALRM)
    started = time.perf_counter()
    with pytest.warns(AutotuneWarning, match=r"inputs\(\) and reference\(\) for N=256 has run for 0.2 s so far; it "
                                             r"runs before the first configuration is verified, and a run's "
                                             r"--timeout counts it \(make it faster \(vectorise it with numpy\), or "
                                             r"choose a smaller size\)") as noted, \
            pytest.raises(ProblemError, match=r"had not finished in the 1 s the run's --timeout left it .* "
                                              r"make it faster .* or give a longer --timeout"), \
            reference_watch(spec, spec.resolve_problem({}), 1.0):
        compute_workload(spec, spec.resolve_problem({}))
    assert time.perf_counter() - started < 10
    # where the application called (trial 100: the timer's thread, threading.py), as every warning is
    assert {w.filename for w in noted} == {__file__}, [(w.filename, w.lineno) for w in noted]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == before


@needs_opencl
@pytest.mark.parametrize("ref", [SLOW_REF, "import time\ntime.sleep(60)\n" + REF_PY])  # trial 51: the import too
def test_a_run_whose_reference_outlasts_its_timeout_ends_with_what_to_do(tmp_path, capsys, ref):
    path = write_spec(tmp_path, SCALE_YAML, ref=ref)
    started = time.perf_counter()
    assert cli.main(["run", str(path), "-n", "3", "--timeout", "2", "--storage", ":memory:"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"had not finished in the [\d.]+ s the run's --timeout left it", err), err
    assert "Traceback" not in err
    assert time.perf_counter() - started < 30


INT_REF = ("import numpy as np\ndef inputs(problem, rng):\n    n = problem['N']\n"
           "    return {'x': np.ones(n, np.float32), 'y': np.zeros(n, np.int32)}\n"
           "def reference(problem, arrays):\n    return {'y': np.full(problem['N'], 5, np.int32)}\n")
REF_PY_CHECKED = REF_PY + "def check(name, got, want, problem):\n    return None\n"


@pytest.mark.parametrize("ref, tolerance, message", [
    (INT_REF, "tolerance: {atol: 1}\n", r"tolerance is not used: y is an integer output, compared exactly; take "
                                        r"tolerance out of the spec, or write a check\(\)"),
    (REF_PY_CHECKED, "tolerance: {rtol: 0.1}\n", r"tolerance is not used: the reference module's check\(\) "
                                                  r"decides what passes"),
    (INT_REF, "", None),
    (REF_PY, "tolerance: {rtol: 0.1}\n", None),
])
def test_a_tolerance_that_applies_to_no_output_is_warned_of(tmp_path, ref, tolerance, message):
    """Trial 45: a tolerance for integer outputs (compared exactly), or beside a check() of the
    module's own, was ignored without a word."""
    spec = specs.load(write_spec(tmp_path, SCALE_YAML + tolerance, ref=ref))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        make_workload(spec, spec.resolve_problem({}))
    said = [str(w.message) for w in seen if "tolerance is not used" in str(w.message)]
    assert (said == []) if message is None else (len(said) == 1 and re.search(message, said[0])), said


@pytest.mark.parametrize("shape, returned, message", [
    ((16, 64), "y.T", r"gives y the shape \(64, 16\), inputs\(\) a buffer of shape \(16, 64\): the same sizes "
                      r"in another order \(a transpose\?\)"),
    ((4, 16, 16), "y.transpose(1, 0, 2)", r"gives y the shape \(16, 4, 16\)"),
    # trial 58: a reshape in memory order lays each element where the buffer has it
    ((1, 1024), "y.reshape(1024, 1)", None),
    ((32, 32), "y.reshape(16, 64)", None),
    ((1, 1), "y.ravel()[:0]", r"gives y 0 elements, inputs\(\) a buffer of 1 element \(shape \(1, 1\)\)"),
    ((32, 32), "y[1:-1, 1:-1]", r"gives y 900 elements \(shape \(30, 30\)\), inputs\(\) a buffer of 1024 "
                                r"elements \(shape \(32, 32\)\)"),
    ((32, 32), "y.ravel()", None),  # flat, in memory order: as the buffer lies
])
def test_a_reference_in_another_shape_is_refused_naming_both(tmp_path, shape, returned, message):
    """Trial 56: a transposed reference of the right size was laid over the buffer in memory
    order, and every configuration failed as a wrong result."""
    ref = (f"import numpy as np\n\ndef inputs(problem, rng):\n"
           f"    x = rng.uniform(-1, 1, {shape}).astype(np.float32)\n"
           f"    return {{'x': x, 'y': np.zeros_like(x)}}\n\n"
           f"def reference(problem, arrays):\n    y = 2 * arrays['x']\n    return {{'y': {returned}}}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    if message is None:
        make_workload(spec, spec.resolve_problem({"N": 1024}))
    else:
        with pytest.raises(SpecError, match=message):
            make_workload(spec, spec.resolve_problem({"N": 1024}))


def test_how_an_output_was_checked_is_what_the_summary_says(tmp_path):
    """Trial 45: a check() of the module's own was summarised as "error 0 ..., worst element at
    0% of its tolerance", and an exact integer output the same way; an integer output that is
    all -1 (the fill's bits) was said to be unwritten, though a kernel may write -1."""
    from autotune.cli import _describe_error
    from autotune.verify import compare

    spec = specs.load(write_spec(tmp_path / "int", SCALE_YAML, ref=INT_REF))
    want = np.full(4, 5, np.int32)
    assert compare(spec, "y", want.copy(), want, {"N": 4}) == (None, 0.0, None)
    why, _, _ = compare(spec, "y", np.full(4, -1, np.int32), want, {"N": 4})
    assert "every element is -1, the value y is filled with before it is verified: if the kernels did not " \
           "write it" in why and "no element was written" not in why, why
    assert _describe_error(Measurement(Status.OK, times_ms=(1.0,), error=0.0)) == "0: every element as the reference's"
    custom = specs.load(write_spec(tmp_path / "own", SCALE_YAML, ref=REF_PY_CHECKED))
    assert compare(custom, "y", want.copy(), want, {"N": 4}) == (None, None, None)


@pytest.mark.parametrize("attrs", [
    {"status": "ok", "times_ms": ["fast"]},  # trial 43: a traceback
    {"status": "sort of", "times_ms": [1.0]},
    {"status": "ok", "times_ms": 3},
    {"status": "ok"},
    # trial 51: tracebacks in the tuner and the summary
    {"status": "crashed", "message": 5},
    {"status": "timeout", "limit_s": "soon"},
    {"status": "ok", "times_ms": [1, 1, 1], "error": "tiny"},
    # trial 53: a forged -5 ms became the best, and pruned a real configuration against it
    {"status": "ok", "times_ms": [-5.0, -4.0]},
    {"status": "ok", "times_ms": [float("nan")]},
])
def test_a_trial_autotune_did_not_write_is_left_out_with_a_warning(scale, attrs):
    problem = scale.resolve_problem({})
    name = study_name(scale, FAKE, problem)
    run(scale)
    study = optuna.load_study(study_name=name, storage=open_storage(None))
    dist = {n: optuna.distributions.CategoricalDistribution(list(p.values)) for n, p in
            ((p.name, p) for p in scale.parameters)}
    study.add_trial(optuna.trial.create_trial(params={"WPT": 2, "WG": 32, "MODE": 0, "mad": True},
                                              distributions=dist, value=1.0, user_attrs=attrs))
    with pytest.warns(AutotuneWarning, match=r"trial \d+ of the study is not a measurement autotune wrote \(.*\); "
                                             "it is left out"):
        report = run(scale)
    assert report.measured > 0
    from autotune.report.data import _trials  # the report reads the trials the same way

    with pytest.warns(AutotuneWarning, match="is not a measurement autotune wrote"):
        listed = _trials(optuna.load_study(study_name=name, storage=open_storage(None)).trials)
    assert listed and all(t.m.status.value in ("ok", "wrong_result", "compile_error") for t in listed)


def test_an_applications_own_alarm_is_left_as_it_was(tmp_path):
    """Trial 51: tune() cancelled an application's pending ITIMER_REAL."""
    spec = specs.load(write_spec(tmp_path, SCALE_YAML))
    fired: list[int] = []
    before = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with reference_watch(spec, spec.resolve_problem({}), 5.0):
            compute_workload(spec, spec.resolve_problem({}))
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 20.0 < left <= 30.0 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


@pytest.mark.parametrize("given, message", [
    ("None", r"inputs\(\) gives the kernel argument c as None; give a numpy array for a buffer, or a number"),
    ("'2'", r"as '2'"),
    ("b'2'", r"as b'2'"),
    ("True", r"as True; .*OpenCL kernels take no bool: use np.int32\(1\)"),
    ("np.array([None])", r"as an array of Python objects \(object\)"),
    ("[2.0]", r"as a list; give a numpy array for a buffer, or a number"),
])
def test_a_kernel_argument_that_is_neither_an_array_nor_a_number_is_one_spec_error(tmp_path, given, message):
    """Trial 52: None gave a traceback from the measuring worker; a string was passed as its
    bytes (every configuration a wrong result), True as one byte (INVALID_ARG_SIZE)."""
    template = TEMPLATE_CL.replace("__global float* y)", "__global float* y, const float c)")
    ref = REF_PY.replace('"y": np.zeros(n, np.float32)}', f'"y": np.zeros(n, np.float32), "c": {given}}}')
    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y, c]"), template=template,
                                 ref=ref))
    with pytest.raises(SpecError, match=message):
        make_workload(spec, spec.resolve_problem({}))


def test_a_list_for_a_buffer_names_the_array_to_return(tmp_path):
    """The last session's review: the generic message for a value that is neither an array nor
    a number came first, and a list for a buffer lost the specific one."""
    ref = REF_PY.replace('.astype(np.float32), "y"', '.astype(np.float32).tolist(), "y"')
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with pytest.raises(SpecError, match=r"takes x as a buffer, but inputs\(\) gives a list; return a numpy array, "
                                        r"e.g. np.asarray\(x, np.float32\)"):
        make_workload(spec, spec.resolve_problem({}))


def test_an_int_past_a_float_arguments_range_is_one_spec_error(tmp_path):
    """Trial 53: 10**400 for a `float c` gave an OverflowError traceback."""
    template = TEMPLATE_CL.replace("__global float* y)", "__global float* y, const float c)")
    ref = REF_PY.replace('"y": np.zeros(n, np.float32)}', '"y": np.zeros(n, np.float32), "c": 10 ** 400}')
    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y, c]"), template=template,
                                 ref=ref))
    with pytest.raises(SpecError, match=r"takes c as float, which cannot hold 1000"):
        make_workload(spec, spec.resolve_problem({}))


def test_an_entry_of_inputs_no_kernel_takes_may_hold_any_object(tmp_path):
    """Trial 53: None or a dict for an entry only reference() reads made the measuring worker
    fail to start, with a traceback (an .npz cannot hold it)."""
    from autotune.worker import load_workload, save_workload

    ref = REF_PY.replace('"y": np.zeros(n, np.float32)}', '"y": np.zeros(n, np.float32), "note": None, '
                                                          '"cfg": {"k": 1}}')
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    work = make_workload(spec, spec.resolve_problem({}))
    again = load_workload(save_workload(work, tmp_path))
    assert set(again.inputs) == {"x", "y"} and (again.expected["y"] == work.expected["y"]).all()


def test_kernel_tuners_none_for_an_array_the_kernel_does_not_write_is_taken(tmp_path):
    """Trial 52: Kernel Tuner's `answer = [out, None]` as {"y": ..., "x": None} gave a traceback."""
    ref = REF_PY.replace('return {"y": (2.0 * arrays["x"].astype(np.float64)).astype(np.float32)}',
                         'return {"y": (2.0 * arrays["x"].astype(np.float64)).astype(np.float32), "x": None}')
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        work = make_workload(spec, spec.resolve_problem({}))
    assert set(work.expected) == {"y"}
    none_out = REF_PY.replace('return {"y": (2.0 * arrays["x"].astype(np.float64)).astype(np.float32)}',
                              'return {"y": None}')
    spec = specs.load(write_spec(tmp_path / "none", SCALE_YAML, ref=none_out))
    with pytest.raises(SpecError, match=r"reference\(\) gives the output y as None; return a numpy array"):
        make_workload(spec, spec.resolve_problem({}))


@needs_opencl
def test_local_arrays_larger_than_the_devices_local_memory_are_refused_before_launch(tmp_path, device):
    """Trial 56: a tile larger than local memory gave a bare OUT_OF_RESOURCES from the launch,
    with no word of local memory or of the spec's key that rules such tiles out."""
    from autotune.measure import Bench
    from conftest import FAST

    info, ctx = device
    floats = info.local_mem_size // 4 + 1024
    template = TEMPLATE_CL.replace(
        "    const int base = get_global_id(0) * WPT;",
        f"    __local float tile[{floats}];\n    tile[get_local_id(0)] = 0.0f;\n    barrier(CLK_LOCAL_MEM_FENCE);\n"
        "    const int base = get_global_id(0) * WPT + (int)tile[0];")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, template=template))
    problem = spec.resolve_problem({})
    bench = Bench(spec, problem, ctx, make_workload(spec, problem), info.facts(), FAST)
    m = bench.measure({"WPT": 1, "WG": 16, "MODE": 0, "mad": False})
    if m.status.value == "compile_error":  # NVIDIA's compiler refuses such a tile itself
        pytest.skip(f"this runtime refuses the build: {m.message[:200]}")
    assert m.status.value == "launch_error", m.message
    said = re.search(r"its __local arrays need (\d+) B of local memory, and the device has (\d+) B; give the spec a "
                     r"local_memory: key", m.message)
    assert said, m.message  # NVIDIA's count is a few bytes over the array's own
    assert int(said[1]) >= 4 * floats and int(said[2]) == info.local_mem_size, m.message


@needs_opencl
def test_a_failed_build_leaves_no_source_file_behind(tmp_path, monkeypatch, device):
    """Trial 60: pyopencl saves each failed build's source in a tmpXXXX.cl it names in its
    error, and tuning fails builds routinely: the files piled up in the temporary folder."""
    import tempfile

    from autotune.launch import CandidateError, _build

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _, ctx = device
    with pytest.raises(CandidateError) as caught:
        _build(ctx, "__kernel void k(__global float* x) { x[0] = ; }", (), None)
    assert list(tmp_path.glob("*.cl")) == [] and "source saved as" not in str(caught.value), str(caught.value)


def test_a_note_the_warning_filter_makes_an_error_is_raised_in_the_callers_thread(monkeypatch, capfd):
    """Trial 60: with warnings as errors, the slow-reference note was raised in its timer's
    thread, which printed a traceback, and the caller never saw it."""
    from autotune import hosttime

    monkeypatch.setattr(hosttime, "NOTE_AFTER_S", 0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutotuneWarning)
        with pytest.raises(AutotuneWarning, match="has run for 0.05 s so far"), hosttime.watched("ref.py", None):
            time.sleep(0.3)
    assert "Traceback" not in capfd.readouterr().err


def test_only_the_file_pyopencl_saved_is_deleted(tmp_path, monkeypatch):
    """Trial 61: the compiler's log echoes the source, so a template line "(source saved as
    PATH.cl)" had that user file deleted with the one pyopencl made."""
    import tempfile

    from autotune.launch import _remove_saved_source

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    victim, theirs, elsewhere = tmp_path / "victim.cl", tmp_path / "tmpab12.cl", tmp_path / "sub" / "tmpcd34.cl"
    elsewhere.parent.mkdir()
    for path in (victim, theirs, elsewhere):
        path.write_text("x")
    _remove_saved_source(RuntimeError(f"k.cl:3: error: see\n(source saved as {victim})\n#endif\n"
                                      f"(options: -w)\n(source saved as {theirs})"))
    _remove_saved_source(RuntimeError(f"log\n(source saved as {elsewhere})"))
    assert victim.exists() and not theirs.exists() and elsewhere.exists()


def test_rounding_where_atol_0_allows_a_zero_no_error_names_the_tolerance(tmp_path):
    """Trial 61: expected zeros that came out 1.5e-8 under atol 0 were blamed on the reference,
    nothing naming the tolerance; a gross error there is not called rounding."""
    from autotune.verify import TOO_TIGHT, compare

    spec = specs.load(write_spec(tmp_path, SCALE_YAML + "tolerance: {rtol: 1e-5, atol: 0}\n"))
    want = np.array([0.0, 0.5, -0.7, 0.0, 1.0, 0.3], np.float32)
    got = want + np.array([1.5e-8, 0, 0, -2e-8, 0, 0], np.float32)
    why, _, _ = compare(spec, "y", got, want, {"N": 6})
    assert TOO_TIGHT in why and "expected to be 0 and is within rounding" in why and "give tolerance.atol" in why, why
    why, _, _ = compare(spec, "y", want + np.array([0.04, 0, 0, 0, 0, 0], np.float32), want, {"N": 6})
    assert TOO_TIGHT not in why, why


def test_rounding_of_a_float32_output_against_a_float64_reference_names_the_tolerance(tmp_path, recwarn):
    """Trial 89: rtol 1e-9 for a float32 stencil, checked against float64 expected values: every
    configuration failed, and the summary blamed the reference. Rounding was judged by the
    reference's float64 precision. Elements near 0, where the terms cancel, are off by rounding at
    the output's scale, which is said as a possibility only (trial 94: values of 1e-6 written as
    0 were called rounding, and the atol advised would have passed them)."""
    from autotune.verify import TOO_TIGHT, compare

    spec = specs.load(write_spec(tmp_path, SCALE_YAML + "tolerance: {rtol: 1e-9, atol: 0}\n"))
    terms = np.random.default_rng(0).uniform(0.5, 1, (4, 64))
    want = terms.sum(axis=0) / 4  # float64, as a reference gives it; no sum near 0
    got = np.float32(0.25) * (terms.astype(np.float32).sum(axis=0, dtype=np.float32))
    why, _, _ = compare(spec, "y", got, want, {"N": 64})
    assert TOO_TIGHT in why and "widen tolerance.rtol in the spec to 2e-06 or more" in why, why
    spec = specs.load(write_spec(tmp_path, SCALE_YAML + "tolerance: {rtol: 1e-5, atol: 0}\n"))
    want = np.where(np.arange(64) % 20 == 0, 1e-6, 1.0)
    for got in (want.astype(np.float32) * np.where(np.arange(64) % 20 == 0, 0, 1).astype(np.float32),  # wrong
                (want + np.where(np.arange(64) % 20 == 0, 3e-8, 0)).astype(np.float32)):  # or a cancelling sum
        why, _, _ = compare(spec, "y", got, want, {"N": 64})
        assert TOO_TIGHT not in why and "if those elements are sums that cancel, give tolerance.atol a value at " \
            "that scale, e.g. 2e-06; if they are values that small, the kernel is wrong there" in why, why
    # and when the run starts, before any configuration fails
    ref = ("import numpy as np\ndef inputs(problem, rng):\n    return {'x': np.ones(problem['N'], np.float32), "
           "'y': np.zeros(problem['N'], np.float32)}\n"
           "def reference(problem, arrays):\n    return {'y': 2.0 * arrays['x']}\n")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML + "tolerance: {rtol: 1e-9, atol: 0}\n", ref=ref))
    make_workload(spec, spec.resolve_problem({}))
    assert any("the tolerance (rtol 1e-09, atol 0) allows 100% of y's elements less than half an ulp of float32 "
               "(its precision is 1.19e-07)" in str(w.message) for w in recwarn), [str(w.message) for w in recwarn]
    for enough in ("{rtol: 1e-6, atol: 0}", "{rtol: 1e-9, atol: 1e-2}"):  # trial 94: a wide atol was warned of
        recwarn.clear()
        spec = specs.load(write_spec(tmp_path, SCALE_YAML + f"tolerance: {enough}\n", ref=ref))
        make_workload(spec, spec.resolve_problem({}))
        assert not any("half an ulp" in str(w.message) for w in recwarn), enough
    # trial 94: a float16 output under the default tolerance failed every configuration unsaid
    from autotune.verify import reachable

    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    why = reachable(spec, {"N": 256}, "y", np.linspace(1, 2, 256), np.dtype(np.float16))
    assert why is not None and "less than half an ulp of float16" in why and "give tolerance.rtol 2e-02 or more" in why
    assert reachable(spec, {"N": 256}, "y", np.linspace(1, 2, 256), np.dtype(np.float32)) is None


def test_a_timeout_past_what_an_alarm_can_hold_is_taken_as_no_sooner_than_a_year():
    """Trial 71: --timeout 1e10 was an OverflowError traceback from setitimer."""
    import signal

    from autotune import hosttime

    for limit in (1e10, 1e308):
        with hosttime.watched("the reference module", limit):
            assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= hosttime.YEAR_S
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
