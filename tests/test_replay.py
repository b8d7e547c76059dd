"""`autotune replay`: the real tuning loop against a recorded Kernel Tuner cache, no device."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import signal
import warnings
from pathlib import Path

import pytest

from autotune import cli, replay
from autotune.errors import AutotuneWarning, ProblemError
from autotune.proposer import Sampler
from autotune.space import ValidSpace


def _cache(folder: Path, gz: bool = False) -> Path:
    """A 12x12 space: X*Y > 100 is restricted (absent), X == 5 failed to build, the optimum is
    at X = 9, Y = 4 and time grows with the distance from it."""
    xs, ys = list(range(1, 13)), list(range(1, 13))
    cache = {}
    for x in xs:
        for y in ys:
            if x * y > 100:
                continue
            t: float | str = "CompilationFailedConfig" if x == 5 else 1.0 + abs(x - 9) + 0.5 * abs(y - 4)
            cache[f"{x},{y}"] = {"X": x, "Y": y, "time": t}
    doc = {"device_name": "Toy GPU", "tune_params_keys": ["X", "Y"], "tune_params": {"X": xs, "Y": ys},
           "cache": cache}
    path = folder / ("toy.json.gz" if gz else "toy.json")
    path.write_bytes(gzip.compress(json.dumps(doc).encode()) if gz else json.dumps(doc).encode())
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_a_cache_file_becomes_a_space_of_exactly_its_configurations(tmp_path, gz):
    rec = replay.load(_cache(tmp_path, gz))
    assert rec.device == "Toy GPU" and rec.optimum_ms == 1.0
    recorded = {c for c in rec.outcomes}
    spec = replay.spec_for(rec)
    walked = {tuple(c.values()) for c in ValidSpace(spec, {}, replay.device_for(rec).facts())}
    assert walked == recorded and rec.valid == len(recorded)


def test_a_cache_left_open_by_kernel_tuner_and_an_upper_case_gz_name_are_read(tmp_path):
    text = _cache(tmp_path).read_text()
    left_open = tmp_path / "open.json"  # Kernel Tuner's appending form: the closing "}\n}" comes at the end
    left_open.write_text(text.rstrip()[:-2] + ",\n")
    shouting = tmp_path / "TOY.JSON.GZ"
    shouting.write_bytes(gzip.compress(text.encode()))
    whole = replay.load(tmp_path / "toy.json")
    # trial 16: a cache cut short after an entry's comma read as complete, without a word
    with pytest.warns(AutotuneWarning, match=rf"the cache was left open, .*: {len(whole.outcomes)} entries read; if "
                      "that run did not finish, the optimum replays aim at is only the best it had measured"):
        rec = replay.load(left_open)
    assert rec.outcomes == whole.outcomes and rec.parameters == whole.parameters
    rec = replay.load(shouting)
    assert rec.outcomes == whole.outcomes and rec.parameters == whole.parameters
    assert replay.load(shouting).name == "TOY"


def test_the_loop_measures_only_recorded_configurations_and_counts_failures(tmp_path):
    rec = replay.load(_cache(tmp_path))
    ev = replay.RecordedEvaluator(rec)
    from autotune.tuner import TuneOptions, tune

    report = tune(replay.spec_for(rec), TuneOptions(trials=10_000, timeout_s=None, sampler="grid",
                                                    storage=":memory:", save=False),
                  evaluator=ev, info=replay.device_for(rec))
    assert report.stopped_by == "exhausted"
    assert len(ev.order) == rec.valid, "every recorded configuration once, nothing outside the recording"
    assert report.failures == {"compile_error": sum(1 for t in rec.outcomes.values() if isinstance(t, str))}
    assert report.best.params == {"X": 9, "Y": 4}


@pytest.mark.parametrize("sampler", list(Sampler))
def test_a_replay_reports_when_it_came_within_the_target(tmp_path, sampler):
    rec = replay.load(_cache(tmp_path))
    r = replay.replay(rec, trials=rec.valid, sampler=sampler, seed=1)
    assert r.within is not None and r.within == r.measured, "it stops as soon as the target is reached"
    assert r.best_ms <= 1.05 * rec.optimum_ms
    short = replay.replay(rec, trials=1, sampler=sampler, seed=1, target=0.0)
    assert short.measured == 1 and (short.within is None) == (short.best_ms > rec.optimum_ms)


def test_one_seed_is_replayed_alone_with_seed(tmp_path, capsys):
    """Trial 37: --seed was refused, and seed 9 was had only with seeds 0-8 before it."""
    assert cli.main(["replay", str(_cache(tmp_path)), "--seeds", "10", "-n", "60"]) == 0
    ninth = [line for line in capsys.readouterr().out.splitlines() if "seed 9:" in line]
    assert cli.main(["replay", str(_cache(tmp_path)), "--seed", "9", "-n", "60"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if "seed " in line] == ninth
    assert cli.main(["replay", str(_cache(tmp_path)), "--seed", "-1"]) == 2
    assert "--seed must be 0 or more" in capsys.readouterr().err


def test_the_cli_summarizes_seeds(tmp_path, capsys):
    assert cli.main(["replay", str(_cache(tmp_path)), "--seeds", "3", "-n", "60"]) == 0
    out = capsys.readouterr().out
    assert "toy (Toy GPU):" in out and out.count("seed ") == 3
    assert "tpe, 3 seeds: median" in out and "within 60:" in out
    assert "within 100" not in out  # a share within more than the budget would say nothing


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_replay_says_what_is_complete_and_promises_no_resume(tmp_path, capsys, monkeypatch, signum):
    """... and exits 128 + the signal's number, as every command (trial 37: 130 for a SIGTERM)."""
    evaluate = replay.RecordedEvaluator.evaluate

    def stop_in_the_second_seed(self, params, *args, **kw):
        if seeds_done := capsys.readouterr().out.count("seed "):  # the first seed has printed
            assert seeds_done == 1
            signal.raise_signal(signum)
        return evaluate(self, params, *args, **kw)

    monkeypatch.setattr(replay.RecordedEvaluator, "evaluate", stop_in_the_second_seed)
    assert cli.main(["replay", str(_cache(tmp_path)), "--seeds", "3", "-n", "60"]) == 128 + signum
    err = capsys.readouterr().err
    assert "replay interrupted; the seeds printed above are complete" in err and "resume" not in err
    assert err.count("\n") == 1


def test_a_missing_cache_file_says_how_to_get_the_recorded_spaces(tmp_path):
    """Trial 13: the README's command without the fetched files said only 'cannot read'."""
    with pytest.raises(ProblemError, match=r"\(No such file or directory\); give a Kernel Tuner cache file "
                       r"\(.json or .json.gz\): `bash benchmarks/fetch_recorded_spaces.sh DIR` downloads the README's "
                       r"recorded spaces from GitHub \(it needs internet access\)"):
        replay.load(tmp_path / "kt_gemm__RTX_3090.json.gz")


def test_a_cache_file_in_another_encoding_or_gzipped_twice_says_so(tmp_path):
    """Trial 93: both were Python's codec message, with no fix."""
    text = '{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1.0}}}'
    (tmp_path / "utf16.json").write_bytes(text.encode("utf-16"))
    (tmp_path / "twice.json.gz").write_bytes(gzip.compress(gzip.compress(text.encode())))
    with pytest.raises(ProblemError, match=r"utf16.json is not a JSON cache file: it is not UTF-8 text \(.*\), which "
                                           r"Kernel Tuner writes; save it as UTF-8$"):
        replay.load(tmp_path / "utf16.json")
    with pytest.raises(ProblemError, match=r"twice.json.gz is not a JSON cache file: it is gzip data compressed "
                                           r"twice; decompress it once \(gunzip\)$"):
        replay.load(tmp_path / "twice.json.gz")


@pytest.mark.parametrize("name, content, message", [
    ("empty.json", "", "is not a JSON cache file (Expecting value: line 1 column 1 (char 0)): it is empty; copy or "
                       "download it again"),
    ("plain.json.gz", "this is not gzip", "its name ends in .gz, but it is not gzip data"),
    ("hello.json", "hello", ": give a Kernel Tuner cache file (.json or .json.gz)"),
    ("cut.json", '{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": 1.0}, "2": {"X": 2, "ti',
     "it ends before its JSON does (cut short?); copy or download it again"),
    # trial 94: cut in a number or a word, it was called broken
    ("cut1.json", '{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": 1.',
     "it ends before its JSON does (cut short?); copy or download it again"),
    ("cut2.json", '{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "ok": tru',
     "it ends before its JSON does (cut short?); copy or download it again"),
    # trial 93: each of these was called cut short, or (the long integer) given Python's own advice
    ("comma.json", '{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1.0,}}}',
     "the JSON is broken at line 1 column 65 (a comma or brace too many or too few?); fix it there"),
    ("brace.json", '{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1.0}}}}',
     "more follows the end of its JSON, from line 1 column 67 (a brace too many, or two files joined?); remove it"),
    # trial 96: both were called cut short
    ("after.json", '{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1.0}}} trailing',
     "more follows the end of its JSON, from line 1 column 68 (a brace too many, or two files joined?); remove it"),
    ("early1.json", "{notjson",
     "the JSON is broken at line 1 column 2 (a comma or brace too many or too few?); fix it there"),
    ("early.json", "{not json",
     "the JSON is broken at line 1 column 2 (a comma or brace too many or too few?); fix it there"),
    # trial 99: no JSON number starts with 01
    ("zero.json", '{"a": 01', "the JSON is broken at line 1 column 8 (a number that starts with 0, which JSON does "
                              "not allow?); fix it there"),
    ("true.json", '{"a": true', "it ends before its JSON does (cut short?); copy or download it again"),
    ("minus.json", '{"a": [1, -', "it ends before its JSON does (cut short?); copy or download it again"),
    ("escape.json", '{"a": {"ti\\u00',
     "it ends before its JSON does (cut short?); copy or download it again"),
    ("bad-escape.json", '{"a": "\\u00zz", "b": 1}',  # trial 104
     "the JSON is broken at line 1 column 9 (a backslash escape JSON does not allow, as \\u with fewer than 4 hex "
     "digits?); fix it there"),
    ("long.json", '{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1.0, "n": ' + "1" * 5000 + "}}}",
     "is not a JSON cache file: it holds a number longer than Python's JSON reader takes (an integer of over "
     "4,300 digits); remove it"),
    ("deep.json", '{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1.0, "n": ' + "[" * 5000 + "]" * 5000
     + "}}}", "its JSON nests deeper than Python's reader can follow (about 1,000 levels; a Kernel Tuner cache nests "
     "3): remove the deeply nested field"),
])
def test_an_empty_cut_or_misnamed_cache_file_says_what_it_is(tmp_path, name, content, message):
    """Trial 85: each was "is not a JSON cache file (Expecting value ...)", with no fix; trial 93:
    the deeply nested one a RecursionError traceback."""
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ProblemError) as raised:
        replay.load(path)
    assert str(raised.value).endswith(message), raised.value


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "is not a JSON cache file"),
    ('{"cache": {}}', "has no 'tune_params' object: not a Kernel Tuner"),  # trial 113: "and 'cache'" too
    ('[]', "has no 'tune_params' and no 'cache' objects: not a Kernel Tuner"),
    ('{"tune_params": {"X": [1]}, "cache": {"1": {"time": 1.0}}}', "lacks a value of X"),
    ('{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": "RuntimeFailedConfig"}}}', "no successful time"),
    ('{"tune_params": {}, "cache": {}}', "names no parameter"),
    ('{"tune_params": {"X": 5}, "cache": {"5": {"X": 5, "time": 1.0}}}', "give a list of its values"),
    ('{"tune_params": {"X": []}, "cache": {"1": {"X": 1, "time": 1.0}}}', "give a list of its values"),
    ('{"tune_params": {"X": [1, 1]}, "cache": {"1": {"X": 1, "time": 1.0}}}', "lists the value 1 of X twice"),
    # trial 37: true and 1 were "a value twice"; a parameter tune_params_keys left out was dropped
    ('{"tune_params": {"X": [true, 1]}, "cache": {"1": {"X": 1, "time": 1.0}}}',
     "lists true and 1 for X, which are one value here"),
    ('{"tune_params_keys": ["X"], "tune_params": {"X": [1], "U": [1, 2]}, "cache": {}}',
     "'tune_params' lists U, which 'tune_params_keys' leaves out; name every parameter there"),
    ('{"tune_params_keys": ["X", "Y"], "tune_params": {"X": [1]}, "cache": {}}', "which 'tune_params' lacks"),
    ('{"tune_params_keys": "X", "tune_params": {"X": [1]}, "cache": {}}', "give a list of the parameters' names"),
    ('{"tune_params": {"X": [1, 2]}, "cache": {"3": {"X": 3, "time": 1.0}}}', "not one of the values"),
    ('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": null, "time": 1.0}}}', "not a number, string or boolean"),
    ('{"tune_params": {"X": [1, 1%s]}, "cache": {"1": {"X": 1, "time": 1}}}' % ("0" * 400),
     "X has the value 1000000000000000000000000000000000000000, not a number a parameter can take"),
    ('{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1%s}}}' % ("0" * 400), "no successful time"),
    ('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": "1.5"}}}', 'has time "1.5": give a number of ms'),
    ('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": true}}}', "has time true: give a number of ms"),
    ('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1}}}', "has no 'time': give a number of ms"),
    ('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": null}}}', "has time null: give a number of ms"),
    # trial 16: one parameter missing was reported as every parameter
    ('{"tune_params": {"X": [1], "Y": [2]}, "cache": {"1,2": {"X": 1, "time": 1.0}}}',
     "entry '1,2' lacks a value of Y"),
    ('{"tune_params_keys": ["X", "X"], "tune_params": {"X": [1]}, "cache": {}}', "names X more than once"),
    # trial 30: a wrong type was called missing, and an entry that is no object said it lacked values
    ('{"tune_params": [16, 32], "cache": {}}', "'tune_params' is \\[16, 32\\], not an object of each parameter's list"),
    ('{"tune_params": {"X": [1]}, "cache": []}', "'cache' is \\[\\], not an object of entries by key"),
    ('{"tune_params": {"X": [1]}, "cache": {"1": 5}}', "cache entry '1' is 5, not an object of the parameters' "
                                                        "values and a 'time'"),
    ('{"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1.0}, "2":', "is not a JSON cache file"),
    ('{"tune_params": {"bx": [16]', "is not a JSON cache file"),  # trial 33: it warned "left open" first
    # trial 52: Kernel Tuner's T4 results (benchmark_hub ships them beside the cache files)
    ('{"schema_version": "1.0.0", "results": [], "metadata": {}}', "it is in Kernel Tuner's T4 results format, "
                                                                    "which replay does not read"),
])
def test_a_bad_cache_file_is_one_line_and_exit_1(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ProblemError, match=message):
        replay.load(path)
    assert cli.main(["replay", str(path)]) == 1
    err = capsys.readouterr().err
    assert message.split("'")[0].strip() in err and "Traceback" not in err and err.count("\n") == 1
    assert "bad.json" in err


@pytest.mark.parametrize("flags, message", [
    (["--seeds", "0"], "--seeds must be at least 1 (got 0)"),
    (["-n", "0"], "-n/--trials must be at least 1 (got 0)"),
    (["--target", "-5"], "--target must be a finite percentage of 0 or more (got -5)"),
    (["--target", "nan"], "--target must be a finite percentage of 0 or more (got nan)"),
    (["--target", "inf"], "--target must be a finite percentage of 0 or more (got inf)"),
    # trial 96: said of --seed, left at its default
    (["--seeds", "4294967297"], "the seeds --seed 0 .. 0 + --seeds 4294967297 - 1 must be below 2**32"),
    (["--seed", "-1"], "--seed must be 0 or more (got -1)"),
])
def test_a_bad_replay_option_is_named_in_one_line(tmp_path, capsys, flags, message):
    assert cli.main(["replay", str(_cache(tmp_path)), *flags]) == 2  # a usage error
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def _recording(folder: Path, name: str, device: str, optimum: tuple[int, int], params=("X", "Y")) -> Path:
    """A full 12x12 recording of ``params`` whose time grows with the distance from ``optimum``."""
    cache = {f"{x},{y}": {params[0]: x, params[1]: y, "time": 1.0 + abs(x - optimum[0]) + abs(y - optimum[1])}
             for x in range(1, 13) for y in range(1, 13)}
    doc = {"device_name": device, "tune_params": {p: list(range(1, 13)) for p in params}, "cache": cache}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_warm_start_measures_other_devices_winners_first(tmp_path, capsys):
    target = _recording(tmp_path, "here", "GPU A", (11, 2))
    near = _recording(tmp_path, "sibling", "GPU B", (11, 2))        # another device, same optimum
    same = _recording(tmp_path, "here_again", "GPU A", (3, 3))      # this device's own: left out
    other = _recording(tmp_path, "other_kernel", "GPU C", (11, 2), params=("X", "Z"))  # another kernel
    starts, used = replay.warm_starts(replay.load(target), [replay.load(p) for p in (same, other, near)])
    assert starts == [{"X": 11, "Y": 2}] and [o.name for o in used] == ["sibling"]
    cold = replay.replay(replay.load(target), trials=144, seed=0, target=0.0)
    warm = replay.replay(replay.load(target), trials=144, seed=0, target=0.0, starts=starts)
    assert warm.within == 2 < cold.within, "the baseline, then the sibling's winner"
    assert cli.main(["replay", str(target), "--warm-start", str(same), str(other), str(near)]) == 0
    out = capsys.readouterr().out
    assert "starting from the winners of sibling (1 of 3 used)" in out
    assert "not here_again: a recording of the same device, whose winner would be the answer" in out
    assert "not other_kernel: it tunes other parameters" in out
    assert "within 5% after 2 measured" in out
    # trial 71: given twice, the first list was dropped; given first, it took the cache file too
    assert cli.main(["replay", str(target), "--warm-start", str(same), "--warm-start", str(other), str(near)]) == 0
    assert "starting from the winners of sibling (1 of 3 used)" in capsys.readouterr().out
    assert cli.main(["replay", "--warm-start", str(near), str(target)]) == 2
    assert f"give at least one CACHE_FILE to replay (--warm-start took {near}, {target}: it takes every file " \
           "after it); write the CACHE_FILEs first" in capsys.readouterr().err
    # trial 37: another kernel of this device was "a recording of the same device"; a file of this
    # name in another folder was left out as this one; a device name of spaces was an IndexError
    mine = _recording(tmp_path, "my_kernel", "GPU A", (11, 2), params=("X", "Z"))
    (tmp_path / "elsewhere").mkdir()
    namesake = _recording(tmp_path / "elsewhere", "here", "GPU B", (11, 2))
    blank = _recording(tmp_path / "elsewhere", "blank", "   ", (3, 3))
    assert cli.main(["replay", str(target), "--warm-start", str(mine), str(target), str(namesake), str(blank)]) == 0
    out = capsys.readouterr().out
    assert "not my_kernel: it tunes other parameters" in out, out
    # two files named here: each by its path (trial 40: both were "here")
    assert f"not {target.resolve()}: the recording being replayed" in out, out
    assert f"starting from the winners of {namesake.resolve()}, blank (2 of 4 used)" in out, out
    assert cli.main(["replay", str(blank), "-n", "5"]) == 0
    assert "blank (unknown device)" in capsys.readouterr().out
    # trial 43: a winner not recorded here gave way to a neighbour, warning "fix the spec's hints[0]"
    doc = json.loads(target.read_text())
    del doc["cache"]["11,2"]
    target.write_text(json.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cli.main(["replay", str(target), "--warm-start", str(near)]) == 0
    assert "    sibling: its winner is not recorded here (it did not build, or was not measured); a recorded " \
           "configuration one parameter away is measured instead" in capsys.readouterr().out
    # trial 85: with no recorded configuration one parameter away either, the start is dropped: said
    lonely = tmp_path / "lonely.json"
    lonely.write_text(json.dumps({**doc, "cache": {k: v for k, v in doc["cache"].items()
                                                   if not (k.startswith("11,") or k.endswith(",2"))}}))
    assert cli.main(["replay", str(lonely), "--warm-start", str(near)]) == 0
    out = capsys.readouterr().out
    assert "starting from the winners of none of the --warm-start recordings (0 of 1 used)" in out, out
    assert "    not sibling: its winner is not recorded here (it did not build, or was not measured), nor is any " \
           "configuration one parameter away" in out, out
    # trial 85: a copy of a recording of an unnamed device handed over the answer
    copy = tmp_path / "elsewhere" / "blank_copy.json"
    copy.write_text(blank.read_text())
    assert cli.main(["replay", str(blank), "-n", "5", "--warm-start", str(copy)]) == 0
    assert "not blank_copy: the same recording as the one replayed (a copy)" in capsys.readouterr().out
    # trial 43: one warm-start file that cannot be read (a glob's) ended the replay
    failed = tmp_path / "failed.json"
    failed.write_text('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": "InvalidConfig"}}}')
    assert cli.main(["replay", str(target), "--warm-start", str(failed), str(near)]) == 0
    out = capsys.readouterr().out
    assert "starting from the winners of sibling (1 of 2 used)" in out, out
    assert f"    not {failed}: it records no successful time: nothing to tune against" in out, out


def test_one_configuration_under_two_keys_is_read_once_with_a_warning_where_they_differ(tmp_path):
    from autotune.errors import AutotuneWarning

    path = tmp_path / "twice.json"
    path.write_text('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": 3.0}, '
                    '"1.0": {"X": 1, "time": 2.0}, "2": {"X": 2, "time": 4.0}, "2.0": {"X": 2, "time": 4.0}}}')
    with pytest.warns(AutotuneWarning, match=r"entries '1' and '1.0' record the same configuration, "
                                             r"as 3.0 and 2.0; replaying the first") as caught:
        rec = replay.load(path)
    assert len(caught) == 1, "the same outcome twice is no conflict"
    assert rec.outcomes == {(1,): 3.0, (2,): 4.0} and rec.valid == 2


def test_a_time_of_1e20_is_an_old_kernel_tuners_failed_launch():
    text = '{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": 2.0}, "2": {"X": 2, "time": 1e20}}}'
    outcomes = replay._outcomes(json.loads(text), (("X", (1, 2)),))
    assert outcomes[(1,)] == 2.0 and isinstance(outcomes[(2,)], str), outcomes


def test_a_time_of_zero_is_replayed_as_a_failure_with_one_warning(tmp_path):
    """One entry with a time of 0 refused the whole recording; now it is a failure there."""
    cache = {f"{x}": {"X": x, "time": float(x)} for x in range(1, 7)}
    cache["2"]["time"], cache["5"]["time"] = 0, -1.0
    path = tmp_path / "zero.json"
    path.write_text(json.dumps({"tune_params": {"X": list(range(1, 7))}, "cache": cache}))
    cache["3"]["time"] = math.inf  # trial 104: replayed as a failure without a word
    path.write_text(json.dumps({"tune_params": {"X": list(range(1, 7))}, "cache": cache}))
    with pytest.warns(AutotuneWarning, match=r"^3 cache entries record a time that is not a positive, finite number "
                      r"\('2': 0, '3': Infinity, '5': -1.0\); replayed as failures$"):  # trial 101: the keys alone
        rec = replay.load(path)
    assert rec.outcomes[(2,)] == "0" and rec.outcomes[(5,)] == "-1.0" and rec.outcomes[(1,)] == 1.0


def test_a_time_faster_than_any_launch_is_warned_of(tmp_path, capsys):
    """Trial 104: 1e-300 ms became the optimum without a word, and each seed printed a ratio
    of 300 digits."""
    cache = {f"{x}": {"X": x, "time": float(x)} for x in range(1, 7)}
    cache["4"]["time"] = 1e-300
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"tune_params": {"X": list(range(1, 7))}, "cache": cache}))
    cache["5"]["time"] = 10**400  # trial 105: over Kernel Tuner's 1e20, a failure without a word
    path.write_text(json.dumps({"tune_params": {"X": list(range(1, 7))}, "cache": cache}))
    with pytest.warns(AutotuneWarning) as caught:
        rec = replay.load(path)
    said = [str(w.message) for w in caught]  # one warning each (trial 123: one for both, "under ... or over")
    assert any(re.fullmatch(r"1 cache entry records a time under 0.0001 ms, faster than any kernel launch "
                            r"\('4': 1e-300\): .*in ms \(Kernel Tuner's are\)", m) for m in said), said
    assert any(re.fullmatch(r"1 cache entry records a time over Kernel Tuner's 1e20 for a failure \('5': "
                            r"1.00e\+400 \(an integer\)\): replayed as failures; .*in ms \(Kernel Tuner's are\)", m)
               for m in said), said
    assert isinstance(rec.outcomes[(5,)], str)
    assert cli.main(["replay", str(path), "-n", "2", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"x the optimum", out) and len(max(out.splitlines(), key=len)) < 200, out
    path.write_text(json.dumps({"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": 1e25}}}))
    with pytest.raises(ProblemError, match=r"it records no successful time \(1 of its times is a number taken as "
                       r"failures \(not positive, not finite, or 1e20 or more: Kernel Tuner's for one\)\): nothing to "
                       r"tune against$"):
        replay.load(path)  # said once, not warned of as well


def test_a_cache_tuned_for_another_objective_is_replayed_by_time_with_a_warning(tmp_path):
    """Trial 63: a cache whose objective was GFLOP/s was replayed by time without a word."""
    cache = {f"{x}": {"X": x, "time": float(x), "GFLOP/s": 1.0 / x} for x in range(1, 4)}
    path = tmp_path / "flops.json"
    path.write_text(json.dumps({"tune_params": {"X": [1, 2, 3]}, "cache": cache, "objective": "GFLOP/s"}))
    with pytest.warns(AutotuneWarning, match=r"flops.json: the cache's objective is 'GFLOP/s'; replay minimises "
                      r"each entry's recorded 'time'"):
        replay.load(path)
    path.write_text(json.dumps({"tune_params": {"X": [1, 2, 3]}, "cache": cache, "objective": "time"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replay.load(path)


def test_a_key_that_does_not_spell_its_values_and_an_unknown_error_name_are_warned_of(tmp_path):
    """Trial 30: both were replayed without a word ("time": "fast" as a failure)."""
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"tune_params": {"bx": [16, 32], "u": [1, 2]}, "cache": {
        "16,1": {"bx": 32, "u": 2, "time": 1.0}, "16,2": {"bx": 16, "u": 2, "time": "fast"},
        "32,1": {"bx": 32, "u": 1, "time": "InvalidConfig"}, "16.0,1": {"bx": 16, "u": 1, "time": 2.0}}}))
    with pytest.warns(AutotuneWarning) as caught:
        rec = replay.load(path)
    said = sorted(str(w.message) for w in caught)
    assert len(said) == 2, said
    assert said[0].startswith("1 cache entry ('16,1' holds bx=32, u=2): its key does not spell the values")
    assert said[1].startswith("1 cache entry ('16,2': 'fast'): not a time nor an error Kernel Tuner records")
    assert rec.outcomes[(32, 2)] == 1.0 and rec.outcomes[(16, 2)] == "fast" and rec.outcomes[(16, 1)] == 2.0
    # trial 43: a message that is no identifier stopped the replay; a value's comma was "misspelt"
    path.write_text(json.dumps({"tune_params": {"s": ["a,b", "c"], "u": [1]}, "cache": {
        "a,b,1": {"s": "a,b", "u": 1, "time": 1.0}, "c,1": {"s": "c", "u": 1, "time": "error: out of resources"}}}))
    with pytest.warns(AutotuneWarning) as caught:
        rec = replay.load(path)
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and "('c,1': 'error: out of resources'): not a time nor an error" in said[0], said
    assert rec.outcomes[("c", 1)] == "error: out of resources"


def test_a_parameter_of_very_many_values_is_replayed_in_bounded_memory(tmp_path):
    """Trial 37: TPE's kernel held every pair of a parameter's values, 75 GiB for a cache listing
    100,000 (a traceback); it is computed per measured value now."""
    import tracemalloc

    xs = list(range(5_000))  # the old kernel: 200 MB an array, for one parameter
    cache = {str(x): {"X": x, "time": 1.0 + abs(x - 3_700) / 1000} for x in range(0, 5_000, 50)}
    path = tmp_path / "wide.json"
    path.write_text(json.dumps({"tune_params": {"X": xs}, "cache": cache}))
    rec = replay.load(path)
    tracemalloc.start()
    try:
        r = replay.replay(rec, trials=20, sampler=Sampler.TPE, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.measured == 20 and peak < 300e6, peak


def test_a_byte_order_mark_a_damaged_gzip_and_a_key_given_twice(tmp_path, capsys):
    """Trial 37: a BOM got Python's own hint, a gzip with bytes after its end "cannot read" and
    advice to download, and an entry given twice was read as its last, silently."""
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + _cache(tmp_path).read_bytes())
    assert replay.load(bom).optimum_ms == 1.0
    damaged = tmp_path / "damaged.json.gz"
    damaged.write_bytes(gzip.compress(_cache(tmp_path).read_bytes()) + b"garbage")
    with pytest.raises(ProblemError, match=r"damaged.json.gz: its gzip data is damaged \(.*\); copy or download it "):
        replay.load(damaged)
    packed = gzip.compress(_cache(tmp_path).read_bytes())  # trial 40: corrupt data and a cut gave other errors
    for name, data in (("cut.json.gz", packed[:len(packed) // 2]),
                       ("garbled.json.gz", packed[:20] + bytes(b ^ 0x5A for b in packed[20:60]) + packed[60:])):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ProblemError, match=rf"{name}: its gzip data is damaged \(.*\); copy or download it"):
            replay.load(tmp_path / name)
    twice = tmp_path / "twice.json"
    twice.write_text('{"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": 1.0}, '
                     '"1": {"X": 1, "time": 5.0}, "2": {"X": 2, "time": 2.0}}}')
    with pytest.warns(AutotuneWarning, match=r"twice.json: 1 key given twice in one object, with other values: "
                                             r"'1' \(.*1\.0.*, then .*5\.0.*\); the first is read"):
        rec = replay.load(twice)
    assert rec.optimum_ms == 1.0


def test_replay_runs_numpy_with_one_blas_thread_unless_told_otherwise(monkeypatch):
    """Trial 93: `autotune replay` took 1.7x as long as the benchmark script, which sets this."""
    from autotune import _entry

    for name in _entry.BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)
    _entry.one_blas_thread(["run", "matmul"])
    assert not any(name in os.environ for name in _entry.BLAS_THREADS)
    _entry.one_blas_thread(["replay", "x.json"])
    assert all(os.environ[name] == "1" for name in _entry.BLAS_THREADS)
    for name in _entry.BLAS_THREADS:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # trial 94: OpenBLAS read its own variable, set to 1, first
    _entry.one_blas_thread(["replay", "x.json"])
    assert os.environ["OMP_NUM_THREADS"] == "4" and "OPENBLAS_NUM_THREADS" not in os.environ


def _many(folder: Path, count: int, values: list[int], kept=None) -> tuple[replay.Recorded, list[str]]:
    """A recording of ``count`` parameters P0, P1, ... of ``values`` each (every combination, or
    those of ``kept``), time growing with their sum; and the parameters' names."""
    import itertools

    names = [f"P{i}" for i in range(count)]
    combos = kept if kept is not None else list(itertools.product(values, repeat=count))
    cache = {",".join(map(str, c)): {**dict(zip(names, c, strict=True)), "time": 1.0 + sum(c)} for c in combos}
    path = folder / f"many{count}.json"
    path.write_text(json.dumps({"device_name": "Toy GPU", "tune_params": {n: values for n in names}, "cache": cache}))
    return replay.load(path), names


def test_tpes_start_up_draws_cover_more_pairs_of_values_than_uniform_draws(tmp_path):
    """Issue 14: the start-up draws each hold the most pairs of values no earlier draw held, so
    that the models see each value beside each other (a large tile with few threads and with many)."""
    import itertools

    from autotune.proposer import startup_trials
    from autotune.tuner import TuneOptions, tune

    rec, names = _many(tmp_path, 7, [1, 2, 3])
    n = startup_trials(rec.valid, 100, varied=7)
    assert n == 10, "one draw per two pairs of parameters (21 pairs)"

    def pairs(sampler: Sampler, seed: int) -> int:
        ev = replay.RecordedEvaluator(rec)
        options = TuneOptions(trials=100, timeout_s=None, sampler=sampler.value, seed=seed, storage=":memory:",
                              save=False)
        tune(replay.spec_for(rec), options, evaluator=ev, info=replay.device_for(rec))
        first = [m.params for m in ev.order[:n]]  # the default, then the start-up draws
        assert len({tuple(c.values()) for c in first}) == n
        return len({(a, c[a], b, c[b]) for c in first for a, b in itertools.combinations(names, 2)})

    for seed in range(3):
        covering, uniform = pairs(Sampler.TPE, seed), pairs(Sampler.RANDOM, seed)
        assert covering >= uniform + 20, (covering, uniform)  # of 189; 10 uniform draws hold ~131


def test_a_search_started_from_other_devices_winners_keeps_its_few_uniform_start_up_draws(tmp_path, monkeypatch):
    """Covering draws after other devices' winners cost more than they found (warm-started GEMM
    replays: medians 17, 44 and 17 against 11, 22 and 10): only a cold search makes them."""
    from autotune.proposer import Proposer

    rec = replay.load(_cache(tmp_path))
    calls: list[int] = []
    real = Proposer._covering_draw

    def spy(self, seen):
        calls.append(1)
        return real(self, seen)

    monkeypatch.setattr(Proposer, "_covering_draw", spy)
    replay.replay(rec, trials=30, seed=0, target=0.0, ahead=0)  # (no draws for compile ahead)
    assert len(calls) == 4, "cold: the default, then √(valid space) = 5 in all, each covering"
    calls.clear()
    replay.replay(rec, trials=30, seed=0, target=0.0, ahead=0, starts=[{"X": 1, "Y": 1}])
    assert calls == [], "warm: uniform draws"


def test_covering_draws_go_on_where_one_combination_in_a_hundred_is_valid(tmp_path):
    """Trial 120: the first draw by rejection that found nothing valid ended the covering draws
    (at 1% valid, 8% of such draws do), so a sparse space got uniform draws without a word."""
    import itertools
    import random

    from autotune.proposer import Proposer

    kept = random.Random(0).sample(list(itertools.product([1, 2, 3, 4], repeat=6)), 48)  # 48 of 4,096
    rec, _ = _many(tmp_path, 6, [1, 2, 3, 4], kept)
    space = ValidSpace(replay.spec_for(rec), {}, replay.device_for(rec).facts())
    prop = Proposer(Sampler.TPE, space, seed=0)
    prop.covering = 12
    drawn: list[dict] = []
    for left in range(11, -1, -1):
        drawn.append(prop.next(lambda c: c in drawn))
        assert prop.covering == left, "each draw covers, none cut short"
    assert len({tuple(c.values()) for c in drawn}) == 12 and all(tuple(c.values()) in kept for c in drawn)


def test_a_folder_or_a_bad_file_among_several_is_said_as_such(tmp_path, capsys):
    """Trial 123: a folder was sent to the download script ("cannot read spaces (Is a
    directory)"), and one bad file among several ended the command without a word of the others."""
    with pytest.raises(ProblemError, match=rf"^{re.escape(str(tmp_path))} is a folder; give the cache files in it, "
                       rf"e.g. {re.escape(str(tmp_path))}/\*.json.gz$"):
        replay.load(tmp_path)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"tune_params": {"X": [1, 2]}, "cache": {"1": {"X": 1, "time": 1.0},
                                                                        "2": {"X": 2, "time": 2.0}}}))
    bad.write_text(json.dumps({"tune_params": {"X": [1]}, "cache": {"1": {"X": 1, "time": "1.5"}}}))
    assert cli.main(["replay", str(good), str(bad), "-n", "1"]) == 1
    err = capsys.readouterr().err
    assert "; nothing was replayed, as every CACHE_FILE is read before the first replay: fix that file, or leave " \
           "it out" in err and str(bad) in err, err
    assert cli.main(["replay", str(bad), "-n", "1"]) == 1
    assert "nothing was replayed" not in capsys.readouterr().err  # one file: its error alone
