"""`autotune report`: studies made with a fake evaluator (no device) read back, drawn and written."""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autotune import benchmark, profiles, report, settings
from autotune import spec as specs
from autotune.ceilings import Ceiling
from autotune.cli import format_report, main
from autotune.report import data, page, plots
from autotune.result import Measurement, Status
from autotune.space import config_key
from autotune.tuner import TuneOptions, tune
from conftest import FAKE, SCALE_YAML, QuietEvaluator, needs_opencl, write_spec

pytest.importorskip("matplotlib")

SLUG = FAKE.slug


class Evaluator(QuietEvaluator):
    """Time = 100 / (WPT * WG); WPT 8 is wrong, WPT 16 with WG 16 does not build, WG 32 is cut short."""

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        if params["WPT"] == 8:
            return Measurement(Status.WRONG_RESULT, "y: 3 of 256 elements off")
        if params["WPT"] == 16 and params["WG"] == 16:
            return Measurement(Status.COMPILE_ERROR, "error: too many registers")
        t = 100.0 / (params["WPT"] * params["WG"]) + (0.01 if params["mad"] else 0.0)
        return Measurement(Status.OK, "", (t, t * 1.1, t * 0.9), 0.0, 0.0, 0.01, pruned=params["WG"] == 32)


def tune_fake(spec, n=4096, storage=None, trials=1000, progress=None):
    """Every valid configuration of ``spec`` for N=n on the fake device, stored in ``storage``."""
    return tune(spec, TuneOptions(sampler="grid", trials=trials, timeout_s=None, storage=storage),
                problem={"N": n}, evaluator=Evaluator(), info=FAKE, progress=progress)


def non_white(path: Path) -> float:
    """The share of a PNG's pixels that are not (nearly) white."""
    from matplotlib.image import imread

    rgb = imread(path)[..., :3]
    return float((rgb.min(axis=-1) < 0.9).mean())


def test_report_writes_one_page_with_figures_and_the_same_pngs(scale, tmp_path, capsys):
    tune_fake(scale)
    out = tmp_path / "out"
    assert main(["report", str(scale.path), "-o", str(out)]) == 0
    page = (out / "index.html").read_text()
    pngs = sorted(out.glob("*.png"))
    kinds = {p.stem.rsplit("-", 1)[1] for p in pngs}
    assert kinds == {"convergence", "parameters", "importance"}, "no ceiling is known for the fake device"
    assert len(re.findall(r'<img alt="\w+" src="data:image/png;base64,', page)) == len(pngs)
    assert not re.search(r"(src|href)=\"(https?:|//)|<script|<link", page), "the page needs no network"
    for png in pngs:
        assert non_white(png) > 0.02, f"{png.name} is blank"
    # the spec's path, since it is no built-in (trial 40: `autotune bench scale` is an unknown kernel)
    assert f"<code>autotune bench {scale.path} -s N=4096</code>" in page, "how to get the missing roofline"
    assert "`" not in page.split("<body>")[1], "trial 28: a note's backticks showed as they are"
    assert "Top 10 configurations timed in full</h3><p>8 timed once (cut short by --prune) are not ranked." in page
    assert "wrong result" in page and "compile error" in page
    assert f"wrote {out / 'index.html'}" in capsys.readouterr().out


def test_a_report_that_cannot_be_written_in_full_leaves_the_earlier_one_whole(scale, tmp_path, capsys,
                                                                              monkeypatch):
    """Trial 83: on a full disk the error came, but after a 0-byte PNG was left in the folder and
    the earlier report's figures were removed."""
    tune_fake(scale)
    out = tmp_path / "out"
    assert main(["report", str(scale.path), "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real, writes = Path.write_bytes, []

    def full_disk(self, data):
        writes.append(self)
        if len(writes) == 2:  # the first file is written, the second finds the disk full
            self.touch()
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    assert main(["report", str(scale.path), "-o", str(out)]) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    err = capsys.readouterr().err
    assert f"cannot write the report to {out} (No space left on device)" in err and "Traceback" not in err
    assert "or make room there" in err
    # trial 94: a file that cannot take its place left the staged files behind, and "make room"
    monkeypatch.setattr(Path, "write_bytes", real)
    blocked = tmp_path / "blocked"
    (blocked / "index.html").mkdir(parents=True)
    assert main(["report", str(scale.path), "-o", str(blocked)]) == 1
    assert [p.name for p in blocked.iterdir() if p.name.endswith(".tmp")] == []
    err = capsys.readouterr().err
    assert "cannot write the report to" in err and "make room" not in err, err
    # trial 111: and it was told to give -o a writable folder, which it was
    assert f"{blocked / 'index.html'} is a folder; move it away, or give -o another folder" in err, err
    # trial 103: a file given as -o was "(File exists); give -o a writable folder"
    (tmp_path / "f").write_text("mine")
    assert main(["report", str(scale.path), "-o", str(tmp_path / "f")]) == 1
    assert capsys.readouterr().err == (f"autotune: error: cannot write the report to {tmp_path / 'f'}: it is a file; "
                                       "give -o a folder (the report is index.html and its figures)\n")
    assert (tmp_path / "f").read_text() == "mine"
    # trial 105: a folder inside that file, and a link to nothing
    assert main(["report", str(scale.path), "-o", str(tmp_path / "f" / "sub")]) == 1
    assert capsys.readouterr().err == (f"autotune: error: cannot write the report to {tmp_path / 'f' / 'sub'}: "
                                       f"{tmp_path / 'f'} is a file; give -o a folder (the report is index.html and "
                                       "its figures)\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert main(["report", str(scale.path), "-o", str(tmp_path / "dangling")]) == 1
    assert f"it is a link to {tmp_path / 'nowhere'}, which does not exist" in capsys.readouterr().err
    assert main(["report", str(scale.path), "-o", str(tmp_path / "dangling" / "sub")]) == 1  # trial 107
    assert f"{tmp_path / 'dangling'} is a link to {tmp_path / 'nowhere'}, which does not exist" in \
        capsys.readouterr().err


def test_section_records_what_the_study_holds(scale):
    counted = {}  # configuration → its number in the run's progress lines ([  7/40])
    run = tune_fake(scale, progress=lambda event, rec, state: event != "trial" or counted.setdefault(
        config_key(rec.params), state.measured))
    (s,) = data.find_sections(scale, None)
    assert (s.slug, s.label, s.stale, s.device_name) == (SLUG, "N=4096", False, FAKE.name)
    assert len(s.trials) == run.study_trials
    assert s.failures() == {"compile_error": 2, "timed once": 8, "wrong_result": 8}
    assert s.baseline is not None and s.baseline.number == 1 and s.baseline.m.params["WG"] == 16
    assert {config_key(t.m.params): t.number for t in s.trials} == counted, "the run's numbers, not optuna's"
    times = [ms for _, ms in s.best_so_far()]
    assert times == sorted(times, reverse=True) and times[-1] == s.best.m.median_ms
    assert s.best.m.params == run.best.params and s.best.m.params["WPT"] * s.best.m.params["WG"] == 2048
    top = s.top(10)
    assert len(top) == 10 and [t.m.median_ms for t in top] == sorted(t.m.median_ms for t in top)
    assert not any(t.m.pruned for t in top), "a time cut short is not ranked"
    assert s.wall_s() >= 0 and s.entry is not None and s.entry.time_ms == pytest.approx(run.best.median_ms, rel=1e-4)
    assert s.importance_method and set(s.importances) <= {"WPT", "WG", "mad"}
    assert s.variant_first()[0] in s.importances
    judged = len(s.ok) - 8  # the ones timed once are not judged
    assert plots.importance_title(s) == f"parameter importances ({s.importance_method}, {judged} trials timed in full)"
    # trial 15: importances over 8 trials were shown as if they were as sure as over hundreds
    few = replace(s, trials=tuple(s.top(6)))
    assert plots.importance_title(few).endswith(", 6 trials timed in full)\nfew, so a rough guide (steadier from 20)")


def test_every_problem_gets_a_section_smallest_first_unless_one_is_asked_for(scale, tmp_path):
    tune_fake(scale, 4096)
    tune_fake(scale, 1024)
    assert [s.label for s in data.find_sections(scale, None)] == ["N=1024", "N=4096"]
    assert [s.label for s in data.find_sections(scale, None, {"N": 4096})] == ["N=4096"]
    out = tmp_path / "out"
    assert main(["report", str(scale.path), "-o", str(out)]) == 0
    assert (out / "index.html").read_text().count("<section") == 2
    (out / "notes.png").write_bytes(b"mine")  # not a report's figure: left alone
    assert main(["report", str(scale.path), "-o", str(out), "-s", "4096"]) == 0
    figures = [p.name for p in out.glob("??-*.png")]
    assert figures and all("4096" in f for f in figures), "trial 28: the earlier report's N=1024 figures stayed"
    assert "notes.png" in os.listdir(out)


def test_studies_of_two_devices_are_grouped_by_device_and_d_picks_one(scale):
    other = replace(FAKE, name="Other GPU 1")
    tune_fake(scale)
    tune(scale, TuneOptions(sampler="grid", trials=1000, timeout_s=None), problem={"N": 1024},
         evaluator=Evaluator(), info=other)
    assert [(s.slug, s.label) for s in data.find_sections(scale, None)] == [
        (SLUG, "N=4096"), (other.slug, "N=1024")]
    assert [s.slug for s in data.find_sections(scale, None, device="other")] == [other.slug]


def test_the_pages_best_is_the_confirmations_not_an_overturned_or_rejected_search_timing(scale):
    """Trial 40: the page's best (and its top 10's first row) was the configuration the rounds
    had overturned, at its one lucky search timing."""
    class Lucky(Evaluator):  # WPT 4, WG 64 times 0.001 ms once in the search, 5 ms after; 16 x 128 is rejected
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            if (params["WPT"], params["WG"]) == (4, 64):
                t = 0.001 if verify else 5.0
                return Measurement(Status.OK, "", (t, t, t), 0.0, 0.0, 0.01)
            return m

        def recheck(self, params, limit_s):
            if (params["WPT"], params["WG"]) == (16, 128):
                return Measurement(Status.WRONG_RESULT, "y: read past its end (1024 bytes)")
            return super().recheck(params, limit_s)

    report = tune(scale, TuneOptions(sampler="grid", trials=1000, timeout_s=None), problem={"N": 4096},
                  evaluator=Lucky(), info=FAKE)
    assert report.overturned is not None
    (s,) = data.find_sections(scale, None)
    assert s.best.m.params == report.best.params, (s.best.m.params, report.best.params)
    assert report.unsteady and all((t.m.params["WPT"], t.m.params["WG"]) != (16, 128) for t in s.top(10))


def test_a_study_database_is_read_without_its_lock(scale, monkeypatch):
    """Trial 40: `report` on a read-only mount said it "cannot write the study database": it made
    the lock file that runs take to create the database."""
    from autotune import settings, study

    tune_fake(scale, trials=3)
    db = study.sqlite_path(settings.default_storage())
    Path(f"{db}.lock").unlink()

    class Refused:
        def __init__(self, *a, **k):
            raise OSError(30, "Read-only file system")

    monkeypatch.setattr(study, "FileLock", Refused)
    (s,) = data.find_sections(scale, None)
    assert len(s.trials) == 3 and not Path(f"{db}.lock").exists()
    # trial 44: where the file or its folder cannot be written (a read-only mount, another user's
    # database), opening it in write-ahead-log mode writes its -shm file: it is read as it stands
    import os
    import sqlite3
    with sqlite3.connect(db) as done:  # as a finished run leaves it
        done.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    opened: list[str] = []
    real_access, real_rdb = os.access, study.optuna.storages.RDBStorage
    monkeypatch.setattr(study.os, "access", lambda p, mode: mode != os.W_OK and real_access(p, mode))


    class Spy(real_rdb):  # type: ignore[misc,valid-type]
        def __init__(self, url: str, *args, **kwargs):
            opened.append(url)
            super().__init__(url, *args, **kwargs)

    monkeypatch.setattr(study.optuna.storages, "RDBStorage", Spy)
    (s,) = data.find_sections(scale, None)
    assert len(s.trials) == 3 and opened and all("immutable=1" in u for u in opened), opened


def test_the_search_time_leaves_out_the_time_between_runs(scale):
    """Trial 37: a pause under 10 minutes between two runs counted as search time (6.4 s against
    the runs' own 4.3 s)."""
    import time

    tune_fake(scale, trials=4)
    time.sleep(1.5)
    tune_fake(scale, trials=4)
    (s,) = data.find_sections(scale, None)
    assert len(s.trials) == 8 and len({t.run for t in s.trials}) == 2
    assert 0 < s.wall_s() < 1.0, s.wall_s()


def test_a_study_of_an_earlier_spec_is_shown_marked_until_the_current_one_has_one(scale, tmp_path):
    tune_fake(scale)
    edited = scale.template.read_text() + "\n/* edited */\n"
    scale.template.write_text(edited)
    now = specs.load(scale.path)
    assert now.spec_hash != scale.spec_hash
    (old,) = data.find_sections(now, None)
    assert old.stale and old.spec_hash == scale.spec_hash
    assert "earlier version of the spec" in report.write(now, tmp_path / "out").page.read_text()
    tune_fake(now)
    assert [s.stale for s in data.find_sections(now, None)] == [False]


def test_a_study_of_another_spec_file_of_the_kernels_name_is_not_shown_as_an_earlier_version(scale, tmp_path):
    """Trial 36: a copy of the spec in another folder, with another tolerance, was tuned; the
    report of the first file showed that study as "Tuned with an earlier version of the spec"."""
    import shutil

    copy_dir = tmp_path / "copy"
    shutil.copytree(scale.path.parent, copy_dir, ignore=shutil.ignore_patterns("home", "out"))
    copy_path = copy_dir / scale.path.name
    copy_path.write_text(copy_path.read_text().replace("outputs: [y]", "outputs: [y]\ntolerance: {rtol: 1e-3}"))
    copy = specs.load(copy_path)
    assert copy.spec_hash != scale.spec_hash
    tune_fake(copy, n=1024)
    with pytest.raises(data.ProblemError, match=r"no study of scale in .* \(its studies of scale tune another "
                                                r"spec file of that kernel name\)"):
        data.find_sections(scale, None)
    tune_fake(scale)
    assert [(s.label, s.stale) for s in data.find_sections(scale, None)] == [("N=4096", False)]
    assert [(s.label, s.stale) for s in data.find_sections(copy, None)] == [("N=1024", False)]


def test_variant_parameter_is_the_one_conditions_name_and_comes_first():
    matmul = specs.load("matmul")
    assert data.variant_parameter(matmul) == "ALGO"
    assert data.variant_parameter(specs.load("reverse")) is None


class Modes(QuietEvaluator):
    """MODE 0 (which ignores WG) takes 10 ms / WPT; MODE 1 takes 1 ms * 16 / WG, whatever WPT."""

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        t = 10.0 / params["WPT"] if params["MODE"] == 0 else 16.0 / params["WG"]
        return Measurement(Status.OK, "", (t, t, t), 0.0, 0.0, 0.01)


def test_a_parameter_a_variant_ignores_is_judged_only_where_it_applies(tmp_path):
    """Trial 12: every trial of the variant that ignores WG was drawn and weighed as WG=16 (its
    first value), so WG took the importance that belongs to the variant."""
    yaml_text = SCALE_YAML.replace("  WG: [16, 32, 64, 128, 512]\n  MODE: [0]",
                                   "  MODE: [0, 1]\n  WG: {values: [16, 32, 64, 128, 512], when: MODE == 1}")
    spec = specs.load(write_spec(tmp_path, yaml_text))
    tune(spec, TuneOptions(sampler="grid", trials=1000, timeout_s=None), problem={"N": 4096}, evaluator=Modes(),
         info=FAKE)
    (s,) = data.find_sections(spec, None)
    assert {t.m.params["MODE"] for t in s.applying("WG")} == {1} and len(s.applying("MODE")) == len(s.ok)
    assert s.importance_where == {"WG": "MODE == 1"} and {"WPT", "MODE", "WG"} <= set(s.importances)
    assert s.importances["WG"] == pytest.approx(1.0, abs=0.05), "among MODE 1's trials only WG matters"
    assert s.variant_first()[0] == "MODE"
    assert plots.importance_label(s).endswith("(one with a condition: over the trials where it applies)")
    # each a share of the variance, not normalized (trial 70: a lone variant parameter explaining
    # 2.5% of it was drawn at 100%); a grid tries every combination, so its shares do not overlap
    unconditional = [v for k, v in s.importances.items() if k not in s.importance_where]
    assert all(0 <= v <= 1 for v in unconditional) and sum(unconditional) <= 1.0 + 1e-9
    assert "not judged" not in plots.importance_label(s)
    # trial 30: a parameter too rarely applied to judge was left out of the figure unsaid
    mode1 = [t for t in s.trials if t.m.params["MODE"] == 1]
    two = [next(t for t in mode1 if t.m.params["WG"] == wg) for wg in (16, 32)]
    trials = tuple(t for t in s.trials if t.m.params["MODE"] == 0 or t in two)
    _, shares, where = data.importance(s.spec, trials, s.problem)
    assert "WG" not in shares
    few = replace(s, trials=trials, importances=shares, importance_where=where)
    assert plots.importance_label(few).endswith("\nnot judged, too few trials timed in full where it applies: WG")
    # the top table shows a configuration as the run's lines do: without the parameters it ignores
    assert re.search(r"<code>WPT=\d+ MODE=1 WG=\d+</code>", page._top(s))
    mode0 = page._top(replace(s, trials=[t for t in s.trials if t.m.params["MODE"] == 0]))
    assert re.search(r"<code>WPT=\d+ MODE=0</code>", mode0) and "WG=" not in mode0, mode0


def test_device_is_a_slug_a_part_of_one_or_an_error_listing_them(scale, monkeypatch):
    tune_fake(scale)
    assert data.match_devices(SLUG, [SLUG, "other-gpu"]) == {SLUG}
    assert data.match_devices("FAKE", [SLUG, "other-gpu"]) == {SLUG}
    assert data.match_devices(f"{SLUG}.yaml", [SLUG, "other-gpu"]) == {SLUG}  # the file name, as show takes it
    with pytest.raises(data.ProblemError, match=f"'GPU.YAML' is a part of several devices' names: -d {SLUG} | "
                                                "-d other-gpu$"):  # trial 99: both reported, as show refuses
        data.match_devices("GPU.YAML", [SLUG, "other-gpu"])
    with pytest.raises(data.ProblemError, match=f"devices with studies of this kernel: {SLUG}"):
        data.find_sections(scale, None, device="h200")
    for several in ("all", "0:0,1:0"):  # trial 91: said as though a device were called that
        with pytest.raises(data.ProblemError, match="; report takes one device, and without -d shows every "
                                                    "device's studies; devices with studies"):
            data.find_sections(scale, None, device=several)
    monkeypatch.setattr(data, "_selected_here", lambda selector: SLUG)  # trial 101: as show takes a part naming two
    assert data.match_devices("gpu", [SLUG, "other-gpu"]) == {SLUG}  # devices here: the one it selects


def test_the_run_summary_ends_with_the_report_command_that_works(scale, tmp_path, monkeypatch):
    run = tune_fake(scale)
    line = format_report(run).splitlines()[-1]
    assert line == f"  report      autotune report {scale.path} -s N=4096 -d {SLUG}"
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(line.split(None, 1)[1])[1:]) == 0
    assert (tmp_path / "autotune-report-scale" / "index.html").is_file()
    # the report's own storage (trial 70: tune()'s caller was given the default study's command)
    url = f"sqlite:///{tmp_path / 'other.db'}"
    (tmp_path / "other.db").touch()
    (tmp_path / "rel.db").touch()
    assert format_report(replace(run, storage=url)).endswith(f"-d {SLUG} --storage {url}")
    assert "autotune report" not in format_report(replace(run, storage=":memory:"))
    assert format_report(replace(run, storage="sqlite:///rel.db")).endswith(
        f"--storage sqlite:///{tmp_path / 'rel.db'}"), \
        "a relative path is made absolute: the command works from another folder (trial 28)"
    odd = tmp_path / "w d%?" / "p%41"  # trial 43: the printed URL named another database, or none
    odd.mkdir(parents=True)
    (odd / "rel.db").touch()
    monkeypatch.chdir(odd)
    from autotune.study import sqlite_path
    shown = format_report(replace(run, storage="sqlite:///rel.db?timeout=5")).rsplit("--storage ", 1)[1]
    assert sqlite_path(shlex.split(shown)[0]) == odd / "rel.db" and shown.endswith("?timeout=5'"), shown
    assert format_report(replace(run, storage="postgresql://tuner:s3cret@db.lan/studies")).endswith(
        "--storage 'postgresql://tuner:***@db.lan/studies'"), "a summary is shared: no password (trial 33)"
    # trial 106: AUTOTUNE_HOME removed mid-run; the command named a study that was gone
    (odd / "rel.db").unlink()
    assert format_report(replace(run, storage="sqlite:///rel.db")).endswith(
        f"  report      none: the study database {odd / 'rel.db'} was removed during the run, and its trials with it "
        "(the profile keeps the best; a new run starts a new study)")


def test_the_report_page_does_not_show_the_databases_password(scale, tmp_path, monkeypatch):
    """Trial 33: the page, meant to be shared, quoted --storage with its password."""
    tune_fake(scale)
    sections = data.find_sections(scale, None)
    monkeypatch.setattr(report, "find_sections", lambda *a: sections)  # as if read from that server
    written = report.write(scale, tmp_path / "out", "postgresql://tuner:s3cret@db.lan/studies")
    html = written.page.read_text()
    assert "s3cret" not in html and "postgresql://tuner:***@db.lan/studies" in html


def test_without_matplotlib_the_report_command_says_what_to_install(scale, monkeypatch):
    import importlib.util
    run = tune_fake(scale)
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else find(name, *a))
    line = format_report(run).splitlines()[-1]
    assert line == (f"  report      autotune report {scale.path} -s N=4096 -d {SLUG}"
                    '  (after pip install -e ".[report]" from the checkout, or matplotlib into this environment)')


def test_bench_ceilings_kept_in_the_profile_give_the_ceiling_figure(scale, tmp_path):
    tune_fake(scale)
    path = profiles.path_for(SLUG, settings.profiles_dir())
    copy = {"copy bandwidth": {"value": 40.0, "unit": "GB/s", "how": "test"}}
    profiles.save_ceilings(copy, FAKE.profile_header(), path)
    tune_fake(scale, 1024)  # a later run rewrites the device block: the ceilings stay
    (s,) = data.find_sections(scale, None, {"N": 4096})
    assert [(c.name, c.value) for c in s.ceilings] == [("copy bandwidth", 40.0)]
    written = report.write(scale, tmp_path / "out", problem={"N": 4096})
    (ceiling,) = [p for p in written.figures if p.name.endswith("-ceiling.png")]
    assert non_white(ceiling) > 0.02


def test_bench_keeps_only_the_ceilings_that_hold_for_any_problem(scale):
    found = (Ceiling("copy bandwidth", 41.0, "GB/s", "copy"), Ceiling("numpy matmul", 9.0, "GFLOP/s", "np"))
    r = benchmark.BenchResult(scale, FAKE, {"N": 64}, None, Measurement(Status.OK), {}, found)
    assert benchmark.keep_ceilings(r).startswith("copy bandwidth kept in ")
    doc = profiles.read(profiles.path_for(SLUG, settings.profiles_dir()))
    assert [c.name for c in data.ceilings_of(doc["device"])] == ["copy bandwidth"]
    assert doc["device"]["name"] == FAKE.name


@needs_opencl
def test_device_selector_of_this_machine_names_its_studies(scale, device):
    info, _ = device
    tune(scale, TuneOptions(sampler="grid", trials=1000, timeout_s=None), evaluator=Evaluator(), info=info)
    assert [s.slug for s in data.find_sections(scale, None, device=info.selector)] == [info.slug]


def test_roofline_when_the_spec_counts_flops_and_bytes(tmp_path):
    yaml_text = SCALE_YAML.replace('  GB/s: "8 * N / seconds / 1e9"',
                                   '  GFLOP/s: "N / seconds / 1e9"\n  GB/s: "8 * N / seconds / 1e9"')
    spec = specs.load(write_spec(tmp_path / "roof", yaml_text))
    tune_fake(spec)
    (s,) = data.find_sections(spec, None)
    assert plots.headline_metrics(s) == ("GFLOP/s", "GB/s")
    png = plots.ceiling_figure(s)
    assert png is not None and png.startswith(b"\x89PNG")


class Wrong(QuietEvaluator):
    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        return Measurement(Status.WRONG_RESULT, "y: every element off")


def test_a_study_where_nothing_verified_still_gets_its_page(scale, tmp_path):
    tune(scale, TuneOptions(trials=5, timeout_s=None), evaluator=Wrong(), info=FAKE)
    written = report.write(scale, tmp_path / "out")
    assert [p.name.rsplit("-", 1)[1] for p in written.figures] == ["convergence.png"]
    # trial 15: the failure marks were drawn outside an axis that autoscaling left at -0.04..0.04
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread

    image = imread(written.figures[0])
    axes = image[: int(0.85 * image.shape[0]), :, :3]  # above the legend, which has one mark too
    marks = (abs(axes - to_rgb(plots.MARKS["wrong_result"][2])).max(axis=-1) < 0.1).sum()
    assert marks > 100, marks
    page = written.page.read_text()
    assert "No configuration verified" in page and "wrong result" in page


def test_a_study_stopped_before_its_first_trial_gets_a_page_without_empty_figures(scale, tmp_path):
    """Not an empty convergence plot: a line that says why there is none, and how to get one."""
    class Unused(QuietEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            raise AssertionError("nothing is measured after the time is up")

    report_ = tune(scale, TuneOptions(trials=5, timeout_s=1e-6), evaluator=Unused(), info=FAKE)
    assert (report_.stopped_by, report_.measured) == ("timeout", 0)
    assert "autotune report" not in format_report(report_), "trial 35: the summary offered an empty page"
    written = report.write(scale, tmp_path / "out")
    assert written.figures == ()
    assert "No trial was measured in this study" in written.page.read_text()


def error_of(capsys, *argv: str) -> str:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err
    assert err.startswith("autotune: error: ") and err.count("\n") == 1, err
    return err


def test_no_study_database_says_where_it_looked(capsys):
    err = error_of(capsys, "report", "matmul")
    assert f"no study database at {settings.home() / 'studies.db'}" in err and "autotune run" in err


def test_no_study_of_the_kernel_names_the_kernels_there(scale, capsys):
    tune_fake(scale)
    err = error_of(capsys, "report", "matmul")
    assert "no study of matmul in sqlite:///" in err and "it has studies of scale" in err


def test_no_study_of_the_problem_lists_the_studies(scale, capsys):
    tune_fake(scale)
    tune_fake(scale, 256)
    err = error_of(capsys, "report", str(scale.path), "-s", "1024")
    assert "no study of scale for N=1024" in err
    assert f"its studies: N=256 on {SLUG}; N=4096 on {SLUG}" in err, "trial 28: in string order, 4096 first"


def test_unknown_kernel_and_bad_storage_are_one_line_errors(capsys, tmp_path):
    assert "nosuchkernel" in error_of(capsys, "report", "nosuchkernel")
    assert "cannot be opened" in error_of(capsys, "report", "matmul", "--storage", "nosuchdb://x/y")
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    err = error_of(capsys, "report", "matmul", "--storage", f"sqlite:///{bad}")
    assert "is not a usable study database" in err and "give --storage the database the runs used" in err
    assert "move it aside" not in err, "trial 28: a report only reads; it has nothing to start afresh"


def test_without_matplotlib_it_says_how_to_install_it(scale, capsys, monkeypatch):
    tune_fake(scale)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert 'pip install -e ".[report]" from the checkout' in error_of(capsys, "report", str(scale.path))


def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    out = capsys.readouterr().out
    for option in ("-s SIZE", "-d DEVICE", "-o DIR", "--storage URL", 'pip install -e ".[report]"'):
        assert option in out


class SlowWide(Evaluator):
    """As Evaluator, but WPT 4 with WG 64 takes 2 s to build and run, and is then the fastest."""

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        if params["WPT"] == 4 and params["WG"] == 64:
            if limit_s is not None and limit_s < 2.0:
                return Measurement(Status.TIMEOUT, "no result", wall_s=limit_s, limit_s=limit_s)
            return Measurement(Status.OK, "", (0.01, 0.01, 0.01), 0.0, 0.0, 2.0)
        return super().evaluate(params, limit_s, cutoff_ms, verify)


def test_a_timeout_measured_again_is_one_trial_and_the_profile_row_names_its_trial(scale, tmp_path):
    options = TuneOptions(sampler="grid", trials=1000, timeout_s=None, max_time_per_config=0.5)
    first = tune(scale, options, problem={"N": 4096}, evaluator=SlowWide(), info=FAKE)
    assert first.failures.get("timeout") == 2
    second = tune(scale, replace(options, sampler="random", trials=2, max_time_per_config=5.0),
                  problem={"N": 4096}, evaluator=SlowWide(), info=FAKE)
    (s,) = data.find_sections(scale, None)
    assert len(s.trials) == first.study_trials == second.study_trials, "as many trials as the run counts"
    assert "timeout" not in s.failures()
    first_number = next(t.number for t in s.trials if t.m.params == s.best.m.params)
    assert s.best is not None and s.best.m.median_ms == 0.01 and s.best.number == first_number
    assert [t.number for t in s.trials] == list(range(1, len(s.trials) + 1)), "measured again, it keeps its number"
    assert main(["report", str(scale.path), "-o", str(tmp_path / "out")]) == 0
    written = (tmp_path / "out" / "index.html").read_text()
    assert re.search(rf"tuned [^;<]*; trial {s.best.number}</td>", written)


def test_the_profile_row_says_when_the_leaders_re_timing_picked_another_trial(scale):
    tune_fake(scale)
    (s,) = data.find_sections(scale, None)
    runner_up = s.top(2)[1]
    entry = replace(s.entry, params=s.spec.without_flags(runner_up.m.params),
                    build_flags=tuple(s.spec.enabled_flags(runner_up.m.params)))
    text = page._profile(replace(s, entry=entry), s.best)
    assert f"trial {runner_up.number}, picked over the fastest single measurement (trial {s.best.number})" in text


def test_the_baseline_row_gives_the_speed_up_the_run_reported_not_the_first_timings(scale):
    """The run times the baseline again beside the winner (its first timing can read slow on an
    idle device); the report gives that speed-up, from the profile, as the summary did."""
    report = tune_fake(scale)
    (s,) = data.find_sections(scale, None)
    assert s.entry is not None and s.baseline is not None and s.best is not None
    slow_first = replace(s.baseline, m=replace(s.baseline.m, times_ms=(40.0, 40.0, 40.0)))
    text = page._baseline(s, s.best, slow_first)
    assert f"timed again beside the saved configuration: {s.entry.baseline_ms:.4g} ms (the speed-up the run " \
           f"reported: {report.speedup:.2f}x)" in text
    assert "40 ms (trial 1)" in text
    # trial 15: with nothing to time it beside (one trial), it was said to be timed again
    untimed = page._baseline(replace(s, entry=replace(s.entry, baseline_ms=round(s.baseline.m.median_ms, 6))),
                             s.best, s.baseline)
    assert "timed again" not in untimed and untimed.endswith("; the speed-up the run reported: "
                                                             f"{s.baseline.m.median_ms / s.entry.time_ms:.2f}x")
    unsaved = page._baseline(replace(s, entry=None), s.best, slow_first)
    assert f"best is {40.0 / s.best.m.median_ms:.2f}x faster (the best and the baseline as the rounds after the " \
           "search timed them again)" in unsaved


def test_a_profile_entry_of_another_study_or_a_stopped_run_is_not_reported_as_this_studys_result(scale, tmp_path):
    """Two studies of one problem (another --storage, or two copies of a spec): the report
    credited each with the profile's entry and the speed-up the other's run reported."""
    tune_fake(scale)  # the default database: its entry is saved
    other = f"sqlite:///{tmp_path / 'other.db'}"
    tune_fake(scale, storage=other)  # no faster: the profile keeps the first study's entry
    (mine,) = data.find_sections(scale, None)
    (theirs,) = data.find_sections(scale, other)
    assert mine.entry == theirs.entry and mine.entry_ours and not theirs.entry_ours
    assert page._profile(theirs, theirs.best).endswith("; saved by another study of this problem (another "
                                                       "version of the spec, another --storage, or another copy of "
                                                       "the spec)")
    assert "load_kernel skips it" not in page._profile(theirs, theirs.best)
    # trial 34: an entry a run of an edited template saved, read after the edit was undone
    stale = replace(theirs, entry=replace(theirs.entry, spec_hash="0123456789abcdef"))
    assert " (load_kernel times its configuration again at first use, and may pick it: stale: tuned with another " \
           "version of this spec" in page._profile(stale, None)
    assert "the speed-up the run reported" not in page._baseline(theirs, theirs.best, theirs.baseline)
    assert "the speed-up the run reported" in page._baseline(mine, mine.best, mine.baseline)
    stopped = replace(mine, entry=replace(mine.entry, partial=True))
    assert ", partial (the run was stopped before its leaders were timed again)" in page._profile(stopped, mine.best)
    assert "x faster (the best and the baseline as the rounds after the search timed them again)" in \
        page._baseline(stopped, mine.best, mine.baseline)


def test_trial_numbers_are_the_progress_lines_after_a_run_stopped_in_its_first_trial(scale):
    """Trial 28: a run interrupted while its baseline was measured left a trial that measured
    nothing; the next run's lines looked like a new study's (``[  1/3]``), and the report
    called that baseline trial 2."""
    from autotune.errors import TuningInterrupted

    class StopsAtOnce(Evaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            raise KeyboardInterrupt

    options = TuneOptions(sampler="random", trials=4, timeout_s=None)
    with pytest.raises(TuningInterrupted):
        tune(scale, options, problem={"N": 4096}, evaluator=StopsAtOnce(), info=FAKE)
    lines = {}  # configuration → the count its progress line shows
    tune(scale, options, problem={"N": 4096}, evaluator=Evaluator(), info=FAKE,
         progress=lambda event, rec, state: event != "trial" or lines.setdefault(
             config_key(rec.params), state.study_measured))
    (s,) = data.find_sections(scale, None)
    assert {config_key(t.m.params): t.number for t in s.trials} == lines
    assert s.baseline is not None and s.baseline.number == 1


def test_a_parameter_without_effect_gets_little_importance():
    """Trial 59: with PED-ANOVA (no scikit-learn), two parameters that cancel out in the kernel
    got 34% and 29% over 30 trials, beside the one that set the time (37%)."""
    import random

    rng = random.Random(3)
    configs = [{"A": rng.choice([1, 2, 4, 8]), "B": rng.choice([1, 2, 3, 4]), "C": rng.choice([1, 2, 3, 4])}
               for _ in range(30)]
    shares = data.main_effects(configs, [math.log(0.3 * c["A"]) + rng.gauss(0, 0.1) for c in configs])
    assert shares["A"] > 0.8 and shares["B"] < 0.1 and shares["C"] < 0.1, shares
    assert data.main_effects(configs, [1.0] * len(configs)) == {"A": 0.0, "B": 0.0, "C": 0.0}
    # trial 61: one trial per value left no repeat to judge it by, and it read as 0.61
    unique = data.main_effects([{"A": i, "B": i % 2} for i in range(8)], [rng.gauss(0, 0.1) + i % 2 for i in range(8)])
    assert "A" not in unique and unique["B"] > 0.9, unique
    # a parameter alone, explaining little, is drawn as little (trial 70: 2.5% was drawn at 100%)
    weak = data.main_effects(configs, [0.2 * (c["A"] > 4) + rng.gauss(0, 1) for c in configs])
    assert weak["A"] < 0.3, weak


def test_trials_timed_again_after_the_search_are_marked_as_such(scale):
    """Trial 59: the page called the rounds' times "their first timings", and the convergence
    plot drew them as the search's own (a best the run had shown was gone from the figure)."""
    tune_fake(scale)
    (s,) = data.find_sections(scale, None)
    again = [t for t in s.trials if t.retimed]
    assert again and all(t.m.ok for t in again), "the run's leaders were timed again in rounds"
    assert all(not t.retimed for t in s.trials if t not in again)
    best, base = again[0], next(t for t in s.trials if t.m.ok and not t.retimed)
    said = page._baseline(replace(s, entry=None), best, base)
    assert said.endswith("faster (the best as the rounds after the search timed it again)"), said
    assert page._baseline(replace(s, entry=None), base, base).endswith("(their first timings)")


def test_an_entry_kept_over_a_faster_trial_never_timed_again_is_not_said_picked_over_it(scale):
    """Trial 61: the page said the entry was "picked over the fastest single measurement when the
    leaders were timed again" of a stopped run's best that was never timed again."""
    tune_fake(scale)
    (s,) = data.find_sections(scale, None)
    other = next(t for t in s.ok if t.number != s.best.number)
    entry = replace(s.entry, params=scale.without_flags(other.m.params), build_flags=tuple(
        scale.enabled_flags(other.m.params)))
    said = page._profile(replace(s, entry=entry), replace(s.best, retimed=False))
    assert f"; trial {other.number}; trial {s.best.number} is faster in its one timing but was not timed again" \
        in said and "picked over" not in said and "(not among the leaders a run timed again, or its run was " \
        "stopped first)" in said, said
    assert "picked over the fastest single measurement" in page._profile(replace(s, entry=entry),
                                                                          replace(s.best, retimed=True))


def test_a_malformed_profile_entry_or_ceiling_is_a_warning_and_the_report_is_written(scale, tmp_path, capsys):
    """Trial 95: one hand-broken entry, even another kernel's, stopped every report; a broken
    ceiling was dropped unsaid, and the page told to run `autotune bench` for a missing one."""
    tune_fake(scale)
    import yaml

    path = profiles.path_for(SLUG, settings.profiles_dir())
    doc = yaml.safe_load(path.read_text())
    doc["kernels"]["scale"][0]["time_ms"] = -3
    doc["kernels"]["other"] = ["hello"]
    doc["device"]["ceilings"] = {"copy bandwidth": {"value": "fast", "unit": "GB/s"},
                                 "fp32 FMA peak": {"value": 0, "unit": "GFLOP/s"},  # trial 97: a ZeroDivisionError
                                 "huge": {"value": 10**400, "unit": "x"},  # trial 99: an OverflowError
                                 "yes": {"value": True, "unit": "x"}, "text": {"value": "7", "unit": "x"}}
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["report", str(scale.path), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"kernels.scale\[0\] \(N=4096\): malformed entry \(time_ms is -3, .*; the report leaves it out",
                     err), err
    assert re.search(r"device.ceilings.copy bandwidth: \{.*'fast'.*\} is no ceiling .*; the report leaves it out",
                     err), err
    for name in ("fp32 FMA peak", "huge", "yes", "text"):
        assert re.search(rf"device.ceilings.{name}: \{{.* is no ceiling", err), err
    assert (out / "index.html").is_file()


def test_a_study_database_on_a_full_disk_is_read_as_it_stands(scale, tmp_path, capsys, monkeypatch):
    """Trial 95: `report` only reads, yet on a full disk it failed: opening a write-ahead-log
    database writes its -shm file, so the read falls back to the file as it stands."""
    import optuna
    import sqlalchemy

    tune_fake(scale)

    class Full(optuna.storages.RDBStorage):
        def __init__(self, url, *args, **kwargs):
            if "immutable=1" not in url:
                raise sqlalchemy.exc.OperationalError("PRAGMA", {}, Exception("disk I/O error"))
            super().__init__(url, *args, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", Full)
    out = tmp_path / "out"
    assert main(["report", str(scale.path), "-o", str(out)]) == 0
    assert re.search(r"studies.db cannot be opened for writing \(OperationalError: .*disk I/O error.*is its disk "
                     r"full\?\); read as it stands", capsys.readouterr().err)
    assert "N=4096" in (out / "index.html").read_text()


def test_the_profile_entry_of_a_problem_with_an_option_is_found(tmp_path):
    """Trial 97: the study's name gives mul1's LOG_BASE as 30, the profile as '30': the report
    never found mul1's entry."""
    from conftest import save_winner

    save_winner(FAKE, {"N": 4096, "LOG_BASE": "30"}, {"WG": 64}, kernel="mul1")
    _, entry, _ = data._profile("mul1", SLUG, data.parse_problem_label("N=4096,LOG_BASE=30"))
    assert entry is not None and entry.params == {"WG": 64}
