"""How load_kernel chooses for a problem: exact entry, a configuration measured at first use
(and saved), the nearest, or the default / the valid configuration most like it (no device:
the timer is a fake)."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import loader, profiles, record
from autotune import spec as specs
from autotune.firstuse import Timed
from autotune.launch import ProgramCache
from autotune.result import Measurement, Status
from autotune.space import config_key
from autotune.spec import problem_label
from autotune.verify import TOO_TIGHT
from conftest import FAKE

MM = specs.load("matmul")
T128 = MM.complete({"ALGO": "tiled", "MDIMC": 16, "NDIMC": 16, "MWG": 128, "NWG": 128, "KWG": 16, "VW": 4})
T64 = dict(T128, MWG=64, NWG=64)
T32 = dict(T128, MWG=32, NWG=32, MDIMC=8, NDIMC=8)


class FakeTimer:
    """Times a tuned configuration as ``ms[MWG]``, the spec's baseline and default as
    ``fallback_ms`` (None: it fails to build; "wrong": it fails verification)."""

    def __init__(self, ms: Mapping[int, float | None], fallback_ms: Mapping[str, float] | None = None) -> None:
        self.ms, self.calls, self.fallbacks = ms, [], []
        self.fallback_ms = {config_key(MM.baseline_config): (fallback_ms or {}).get("baseline"),
                            config_key(MM.default_config): (fallback_ms or {}).get("default")}

    def __call__(self, candidates: Sequence[Mapping[str, Any]], fallbacks: Sequence[Mapping[str, Any]] = ()) -> Timed:
        self.calls.append([c["MWG"] for c in candidates])
        self.fallbacks.append([dict(c) for c in fallbacks])
        return Timed(tuple(self._one(dict(c)) for c in [*candidates, *fallbacks]), ProgramCache())

    def _one(self, c: dict[str, Any]) -> Measurement:
        key = config_key(c)
        ms = self.fallback_ms[key] if key in self.fallback_ms else self.ms.get(c["MWG"])
        if ms is None:
            return Measurement(Status.COMPILE_ERROR, "k.cl:1:1: error: no", params=c)
        if ms == "launch":
            return Measurement(Status.LAUNCH_ERROR, "OUT_OF_RESOURCES", params=c)
        if ms == "memory":  # perhaps first use's own: its copies and guard zones
            return Measurement(Status.LAUNCH_ERROR, "enqueue failed: MEM_OBJECT_ALLOCATION_FAILURE", params=c)
        if ms in ("wrong", "rounding"):
            why = "C: 3 of 9 elements differ" + (f"; the tolerance is {TOO_TIGHT}" if ms == "rounding" else "")
            return Measurement(Status.WRONG_RESULT, why, params=c)
        return Measurement(Status.OK, "", (ms, ms, ms), params=c)


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    """A user folder (empty) and a 'shipped' one holding tuned entries at 1024, 4096 and 256."""
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    for n, params, ms in [(4096, T128, 3.0), (1024, T64, 0.07), (256, T32, 0.01), (2048, T128, 0.4)]:
        problem = MM.resolve_problem({"M": n, "N": n, "K": n})
        m = Measurement(Status.OK, "", (ms,), params=params)
        profiles.save(record.entry(MM, problem, m, trials=50), "matmul", FAKE.profile_header(),
                      profiles.path_for(FAKE.slug, shipped))
    return [user, shipped]


def choose(folders: list[Path], timer: Any = None, **sizes: Any) -> loader.Choice:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.AutotuneWarning)
        return loader.choose(MM, FAKE, MM.resolve_problem(sizes), folders, timer)


def test_an_exact_entry_is_used_without_measuring(folders):
    timer = FakeTimer({})
    c = choose(folders, timer, M=1024, N=1024, K=1024)
    assert c.origin == "exact" and c.params == T64 and timer.calls == []


def test_an_exact_entry_of_a_stopped_run_is_used_with_a_warning_once(folders):
    """Trial 44: a run stopped after its naive baseline left a partial entry that load_kernel
    served, 40x slower than tuned, without a word."""
    problem = MM.resolve_problem({"M": 512, "N": 512, "K": 512})
    m = Measurement(Status.OK, "", (12.0,), params=MM.baseline_config)
    profiles.save(record.entry(MM, problem, m, trials=1, partial=True), "matmul", FAKE.profile_header(),
                  profiles.path_for(FAKE.slug, folders[0]))
    loader._warned.clear()
    with pytest.warns(loader.AutotuneWarning, match=r"the matmul entry for M=512,N=512,K=512,layout=row in .* is "
                      r"partial \(its run was stopped, or its leaders not timed again, after 1 trial\): it is used"):
        c = loader.choose(MM, FAKE, problem, folders, FakeTimer({}))
    assert c.origin == "exact" and c.params == MM.baseline_config
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader.choose(MM, FAKE, problem, folders, FakeTimer({}))  # once a process


def test_a_new_size_times_the_valid_tuned_configurations_once_and_keeps_the_fastest(folders):
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0})
    c = choose(folders, timer, M=3000, N=3000, K=3000)
    assert c.origin == "measured" and c.params == T64
    assert timer.calls == [[128, 64, 32]]  # each distinct configuration once, nearest problem first
    saved = profiles.entries(profiles.read(profiles.path_for(FAKE.slug, folders[0])), "matmul")
    assert [(e.picked, e.problem["M"], e.time_ms, e.trials) for e in saved] == [(True, 3000, 0.9, 5)]  # + 2 fallbacks
    again = choose(folders, timer, M=3000, N=3000, K=3000)  # a later process: the saved pick
    assert again.origin == "measured" and again.params == T64 and len(timer.calls) == 1


def test_a_baseline_that_lost_at_a_smaller_size_is_not_timed_at_first_use(folders):
    """Trial 62: first use of matmul at 3000³ on a CPU took 96 s, of a 20 s budget: the naive
    baseline's verifying launch, which cannot be cut short, started within it (its 62 ms at
    512³ scaled by the work predicts 13 s: a naive kernel's time grows faster than its work)."""
    problem = MM.resolve_problem({"M": 1500, "N": 1500, "K": 1500})
    timed = Measurement(Status.OK, "", (30.0,), params=T32)
    baseline = Measurement(Status.OK, "", (600.0,), params=MM.baseline_config)
    profiles.save(record.entry(MM, problem, timed, trials=50, baseline=baseline), "matmul", FAKE.profile_header(),
                  profiles.path_for(FAKE.slug, folders[0]))
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}, {"baseline": 0.5, "default": 5.0})
    loader._warned.clear()
    with pytest.warns(loader.AutotuneWarning, match=r"and the spec’s default there in .* s \(not the spec’s baseline: "
                      r"20x slower than the tuned configuration at M=1500,N=1500,K=1500,layout=row, about 4.8 s here "
                      r"by that timing\) and took the fastest \(0.9 ms"):
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders, timer)
    assert c.params == T64 and MM.baseline_config not in timer.fallbacks[0]
    small = choose(folders, timer, M=600, N=600, K=600)  # a smaller problem: timed, and faster there
    assert MM.baseline_config in timer.fallbacks[1] and small.params == MM.baseline_config
    slow = replace(baseline, times_ms=(60e3,))  # at a smaller size where it would take over 20 s: not timed
    nearer = MM.resolve_problem({"M": 1450, "N": 1450, "K": 1450})
    profiles.save(record.entry(MM, nearer, timed, trials=50, baseline=slow), "matmul", FAKE.profile_header(),
                  profiles.path_for(FAKE.slug, folders[0]))
    choose(folders, timer, M=1400, N=1400, K=1400)
    assert MM.baseline_config not in timer.fallbacks[2]
    wrong = FakeTimer({128: "wrong", 64: "wrong", 32: "wrong"}, {"baseline": 90.0, "default": "wrong"})
    loader._warned.clear()
    with pytest.warns(loader.AutotuneWarning, match=r"the spec’s default and baseline there"):  # trial 65: unsaid
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 2900, "N": 2900, "K": 2900}), folders, wrong)
    assert [cands for cands in wrong.calls] == [[128, 32, 64], [16]] and c.params == MM.baseline_config


def test_a_configuration_that_failed_at_first_use_is_said_to_have_failed(folders):
    """Trial 67: a default that cannot build was among those "verified and timed"."""
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}, {"baseline": 5.0, "default": None})
    loader._warned.clear()
    with pytest.warns(loader.AutotuneWarning, match=r"the spec’s baseline and default there in .* s \(1 failed there "
                      r"\(compile_error\) and was left out, e.g. ALGO=tiled"):
        loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders, timer)


def test_a_baseline_is_left_out_only_on_this_versions_timing_at_the_same_layout(folders):
    """Trial 65: an entry of the spec's old version, and one of the other layout, left out a
    baseline that was 100x faster than the pick."""
    problem = MM.resolve_problem({"M": 1500, "N": 1500, "K": 1500})
    timed = Measurement(Status.OK, "", (30.0,), params=T32)
    baseline = Measurement(Status.OK, "", (600.0,), params=MM.baseline_config)
    path = profiles.path_for(FAKE.slug, folders[0])
    old = replace(record.entry(MM, problem, timed, trials=50, baseline=baseline), spec_hash="0123456789abcdef")
    profiles.save(old, "matmul", FAKE.profile_header(), path)
    col = record.entry(MM, MM.resolve_problem({"M": 1500, "N": 1500, "K": 1500, "layout": "col"}), timed,
                       trials=50, baseline=baseline)
    profiles.save(col, "matmul", FAKE.profile_header(), path)
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}, {"baseline": 0.5, "default": 5.0})
    assert choose(folders, timer, M=3000, N=3000, K=3000).params == MM.baseline_config
    assert MM.baseline_config in timer.fallbacks[0]


def test_the_specs_baseline_and_default_are_timed_too_and_win_where_they_are_faster(folders):
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}, {"baseline": 0.5, "default": 0.7})
    c = choose(folders, timer, M=3000, N=3000, K=3000)
    assert timer.fallbacks == [[MM.baseline_config, MM.default_config]]
    assert c.origin == "measured" and c.params == MM.baseline_config  # tuned for other sizes, slower here
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}, {"baseline": 5.0, "default": 0.95})
    assert choose(folders, timer, M=3001, N=3000, K=3000).params == T64


def _tune_after_the_picks(folder: Path, n: int, params: dict[str, Any], ms: float) -> None:
    """A tuning run's entry for n x n x n, written after the picks in ``folder`` (dated back)."""
    path = profiles.path_for(FAKE.slug, folder)
    doc = yaml.safe_load(path.read_text())
    for raw in doc["kernels"]["matmul"]:
        raw["tuned_at"] = "2001-01-01T00:00:00Z"
    path.write_text(yaml.safe_dump(doc))
    m = Measurement(Status.OK, "", (ms,), params=params)
    entry = replace(record.entry(MM, MM.resolve_problem({"M": n, "N": n, "K": n}), m, trials=50),
                    tuned_at="2002-01-01T00:00:00Z")
    profiles.save(entry, "matmul", FAKE.profile_header(), path)


def test_a_first_use_pick_is_timed_again_once_a_later_run_tuned_a_nearby_size(folders, monkeypatch):
    """Trial 29: a size picked at first use kept its configuration (17.95 ms) after a tuning run
    at a nearby size found one that ran it in 1.15 ms."""
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0, 16: 0.3})
    assert choose(folders, timer, M=3000, N=3000, K=3000).params == T64
    t16 = dict(T32, MWG=16, NWG=16)
    _tune_after_the_picks(folders[0], 2900, t16, 0.25)  # a later run, at a nearby size
    monkeypatch.setattr(loader, "_warned", set())
    with pytest.warns(loader.AutotuneWarning, match=r"picked at first use for M=3000,N=3000,K=3000,layout=row "
                      r"\(2001-01-01T00:00:00Z\) predates the entry tuned for M=2900,N=2900,K=2900,layout=row "
                      r"\(2002-01-01T00:00:00Z\): verified and timed the earlier pick, 3 tuned configurations and "
                      r"the spec’s baseline and default there"):
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders, timer)
    assert c.params == t16 and c.origin == "measured"
    assert timer.calls[1][0] == 64 and 16 in timer.calls[1]  # the old pick, timed again beside it
    saved = [e for e in profiles.entries(profiles.read(profiles.path_for(FAKE.slug, folders[0])), "matmul")
             if e.problem["M"] == 3000]
    assert [(e.picked, e.params["MWG"], e.time_ms) for e in saved] == [(True, 16, 0.3)]  # one pick, replaced
    assert choose(folders, timer, M=3000, N=3000, K=3000).params == t16 and len(timer.calls) == 2  # once


def test_a_renewed_pick_replaces_the_earlier_one_even_when_timed_slower(folders):
    """Noise: the earlier pick's configuration, timed again slower, is still the newer pick;
    kept as it was, every later process would time the candidates again."""
    choose(folders, FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}), M=3000, N=3000, K=3000)
    _tune_after_the_picks(folders[0], 2900, T128, 5.0)  # a later run, slower here
    timer = FakeTimer({128: 1.0, 64: 0.95, 32: 2.0})
    assert choose(folders, timer, M=3000, N=3000, K=3000).params == T64 and len(timer.calls) == 1
    assert choose(folders, timer, M=3000, N=3000, K=3000).params == T64 and len(timer.calls) == 1


def test_an_earlier_pick_is_kept_as_it_is_where_measuring_is_off(folders, monkeypatch):
    choose(folders, FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}), M=3000, N=3000, K=3000)
    _tune_after_the_picks(folders[0], 2900, T32, 0.1)
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    timer = FakeTimer({})
    c = choose(folders, timer, M=3000, N=3000, K=3000)
    assert (c.origin, c.params, timer.calls) == ("measured", T64, [])  # verified there, unlike the nearest


def test_only_configurations_valid_for_the_size_are_candidates(folders):
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0})
    c = choose(folders, timer, M=100, N=100, K=100)  # 128 x 128 tiles do not fit in 100 rows
    assert timer.calls == [[32, 64]] and c.params == T64  # the 256 entry is nearest to 100


def test_candidates_that_fail_are_skipped(folders):
    assert choose(folders, FakeTimer({128: None, 64: 0.9, 32: 0.5}), M=3000, N=3000, K=3000).params == T32


def test_a_first_use_where_every_configuration_fails_says_how_and_uses_none_of_them(folders):
    """Trial 109: with every one failing, some to build and some to launch, it warned "using the
    configuration tuned for ..., not verified at this size" and the call then failed."""
    from autotune.errors import BuildError

    with pytest.raises(loader.AutotuneError, match=r"^no tuned matmul .* at M=5000,N=5000,K=5000,layout=row, and each "
                       r"configuration it could use failed there \(5 tried: 5 launch_error; .*MWG=128.*: "
                       r"OUT_OF_RESOURCES\); "
                       r"`autotune run .*` searches the whole space") as raised:
        choose(folders, _failing("launch"), M=5000, N=5000, K=5000)
    assert not isinstance(raised.value, BuildError)
    mixed = FakeTimer({128: None, 64: "launch", 32: "launch"}, {"baseline": "launch", "default": None})
    with pytest.raises(BuildError, match=r"failed there \(5 tried: 3 launch_error, 2 compile_error; .*MWG=128"):
        choose(folders, mixed, M=5000, N=5000, K=5000)


def test_where_each_configuration_fails_for_want_of_memory_the_nearest_is_used(folders):
    """First use's copies and guard zones take memory an application's call does not."""
    c = choose(folders, _failing("memory"), M=5000, N=5000, K=5000)
    assert c.origin == "nearest" and c.params == T128  # 4096 is nearest to 5000


def _failing(how: str | None) -> FakeTimer:
    """A timer for which every configuration fails: to launch ("launch", "memory"), or to build (None)."""
    return FakeTimer(dict.fromkeys((16, 32, 64, 128), how), {"baseline": how, "default": how})


def test_a_first_use_where_every_configuration_fails_to_build_says_so_as_a_run_does(folders, monkeypatch):
    """Trial 106: a broken template was "using the default configuration, not verified there",
    and then the default's build error, as a plain AutotuneError."""
    from autotune.errors import BuildError

    with pytest.raises(BuildError, match=r"^no tuned matmul for .* at M=5000,N=5000,K=5000,layout=row: every "
                       r"configuration fails to build on .* \(\d+ tried, same error\): matmul.cl:1: error: no"):
        choose(folders, _failing(None), M=5000, N=5000, K=5000)
    # trial 107: refused on purpose by the template's #error, it was told to fix that line
    refused = _failing(None)
    refused._one = lambda c: Measurement(Status.COMPILE_ERROR, 'matmul.cl:111:2: error: "VW must be 1, 2, 4 or 8"',
                                         params=c)
    with pytest.raises(BuildError, match=r"the template's #error refuses each configuration it could use here \(\d+ "
                       r"tried; .*add that condition to the spec's constraints"):
        choose(folders, refused, M=5000, N=5000, K=5000)
    # trial 111: where the #if reads problem keys only, a constraint would leave none valid
    # (trial 115: and an include guard's name, a #define of its own or a compiler macro beside them)
    monkeypatch.setattr(loader, "guarded_by", lambda message, template: {"M", "K", "LIMITS_H", "__OPENCL_VERSION__"})
    with pytest.raises(BuildError, match=r"that #if reads problem keys only, so no configuration builds at this "
                       r"problem: give the spec a requires entry that rules out what it tests"):
        choose(folders, refused, M=5000, N=5000, K=5000)
    monkeypatch.setattr(loader, "guarded_by", lambda message, template: {"M", "MWG"})  # a parameter: a constraint
    with pytest.raises(BuildError, match=r"add that condition to the spec's constraints"):
        choose(folders, refused, M=5000, N=5000, K=5000)
    monkeypatch.undo()
    # trial 111: refused by it in one branch and a mistake in the other was blamed on the #error
    mixed = _failing(None)
    mixed._one = lambda c: Measurement(Status.COMPILE_ERROR, 'matmul.cl:111:2: error: "VW must be 1, 2, 4 or 8"'
                                       if c["MWG"] == 128 else "matmul.cl:7:3: error: use of undeclared identifier 'q'",
                                       params=c)
    with pytest.raises(BuildError, match=r"\(\d+ tried, errors differ, one of them\): matmul.cl:7: error: use of "
                       r"undeclared identifier 'q'.*; fix matmul.cl at line 7$"):
        choose(folders, mixed, M=5000, N=5000, K=5000)


def test_measuring_can_be_turned_off(folders, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    timer = FakeTimer({128: 1.0})
    c = choose(folders, timer, M=3000, N=3000, K=3000)
    assert c.origin == "nearest" and c.params == T128 and timer.calls == []  # 4096 is nearest


def test_a_warning_made_an_error_is_raised_at_every_load_not_the_first_alone(folders, monkeypatch):
    """Trial 100: a warning was noted as given before it was, so under an error filter the first
    load raised it and later ones loaded without a word."""
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    loader._warned.clear()
    problem = MM.resolve_problem({"M": 3001, "N": 3001, "K": 3001})
    with warnings.catch_warnings():
        warnings.simplefilter("error", loader.AutotuneWarning)
        for _ in range(2):
            with pytest.raises(loader.AutotuneWarning, match="no tuned matmul"):
                loader.choose(MM, FAKE, problem, folders, FakeTimer({}))
    with pytest.warns(loader.AutotuneWarning, match="no tuned matmul"):  # given once, then not again
        loader.choose(MM, FAKE, problem, folders, FakeTimer({}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", loader.AutotuneWarning)
        assert loader.choose(MM, FAKE, problem, folders, FakeTimer({})).origin == "nearest"


def test_a_first_use_candidate_that_runs_long_is_said_to_with_the_way_out(monkeypatch):
    """Trial 98: a kernel that spun for ever at an odd size hung load_kernel without a word, and
    Ctrl-C did not reach it while the runtime waited: a note says so, at the application's line."""
    import time as clock

    from autotune import firstuse

    class SlowBench:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.cache = ProgramCache()

        def prefetch(self, params: Any) -> None:
            pass

        def measure(self, params: Any, cutoff_ms: Any = None) -> Measurement:
            clock.sleep(0.5)
            return Measurement(Status.OK, "", (1.0,), params=dict(params))

        def verify_strictly(self, params: Any) -> None:
            return None

    monkeypatch.setattr(firstuse, "STUCK_S", 0.1)
    monkeypatch.setattr(firstuse, "make_workload", lambda spec, problem: None)
    monkeypatch.setattr(firstuse, "Bench", SlowBench)
    problem = MM.resolve_problem({"M": 3001, "N": 3001, "K": 3001})
    with pytest.warns(loader.AutotuneWarning, match=r"first use of matmul at M=3001,N=3001,K=3001,layout=row: "
                      r"ALGO=tiled .* has been verified and timed for 0.1 s; a kernel that never ends at this size "
                      r"holds the process, and Ctrl-C does not reach it .*AUTOTUNE_MEASURE_UNTUNED=0") as said:
        assert firstuse.time_candidates(MM, problem, None, None, {}, [T64]).fastest is not None
    assert [w.filename for w in said] == [__file__]


def test_a_note_made_an_error_is_printed_when_due_since_its_block_may_never_end(capsys):
    """Trial 102: under an error filter the note was raised only once the block ended, which a
    kernel that never ends never does: the hang was silent again."""
    import time as clock

    from autotune import hosttime

    with warnings.catch_warnings():
        warnings.simplefilter("error", loader.AutotuneWarning)
        with pytest.raises(loader.AutotuneWarning, match="still at it"), hosttime.noted("still at it", 0.05):
            clock.sleep(0.4)
            assert "AutotuneWarning: still at it" in capsys.readouterr().err  # before the block ends


@pytest.mark.parametrize("edit", [{"M": -5}, {"Q": 1}])
def test_an_entry_whose_problem_the_spec_cannot_have_is_no_candidate(folders, monkeypatch, edit):
    """Trial 82: an entry edited to N=-5, which `show` said load_kernel skips, was used as the
    nearest size's configuration (and timed at first use)."""
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    path = profiles.path_for(FAKE.slug, folders[1])
    doc = yaml.safe_load(path.read_text())
    for e in doc["kernels"]["matmul"]:
        if e["problem"]["M"] == 4096:
            e["problem"].update(edit)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    c = choose(folders, _failing("launch"), M=5000, N=5000, K=5000)
    assert c.origin == "nearest" and c.entry.problem["M"] == 2048  # the 4096 entry, edited, is skipped


def test_the_nearest_problems_configuration_comes_with_a_warning_naming_the_command_and_device(folders,
                                                                                               monkeypatch):
    monkeypatch.setattr(loader, "_warned", set())
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "off")
    with pytest.warns(loader.AutotuneWarning, match=r"tuned for M=4096,N=4096,K=4096,layout=row, not verified at "
                      r"this size \(`autotune run matmul -s M=3000,N=3000,K=3000,layout=row "
                      r"-d fakecorp-fake-gpu-9000` tunes and "
                      r"verifies it\)"):
        loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders, FakeTimer({}))


def test_without_a_valid_tuned_configuration_the_default_or_the_one_most_like_it(folders):
    c = choose(folders, _failing("memory"), M=7, N=9, K=5)  # no tuned tile fits
    assert c.origin == "default"
    assert c.params != MM.complete({})  # not the first configuration in declaration order
    assert choose([folders[0]], _failing("memory"), M=512, N=512, K=512).params == MM.default_config


def test_with_nothing_tuned_valid_and_the_default_invalid_the_one_most_like_it_is_verified(folders, monkeypatch):
    """Trial 11: it was returned unverified, although measuring was on."""
    monkeypatch.setattr(loader, "_warned", set())
    problem = MM.resolve_problem({"M": 100, "N": 100, "K": 100})
    near = loader._closest_default(MM, problem, FAKE.facts())
    assert near is not None and near != MM.default_config  # its 128 x 128 tile does not fit in 100 rows
    timer = FakeTimer({near["MWG"]: 0.5})  # the baseline fails to build
    with pytest.warns(loader.AutotuneWarning, match="verified and timed the spec’s baseline and configuration "
                                                    "nearest its default there"):
        c = loader.choose(MM, FAKE, problem, [folders[0]], timer)
    assert c.origin == "measured" and c.params == near
    timer = FakeTimer({near["MWG"]: "wrong"})
    with pytest.raises(loader.ProblemError, match="each configuration it could use gives wrong results"):
        choose([folders[0] / "other"], timer, M=100, N=100, K=100)


def test_the_warning_names_the_command_that_tunes_the_size_with_the_spec_path(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "_warned", set())
    copy = tmp_path / "my specs" / "matmul.yaml"  # trial 34: a path with a space was not quoted
    copy.parent.mkdir()
    copy.write_text(MM.path.read_text().replace("template: matmul.cl", f"template: {MM.template}"))
    mine = specs.load(str(copy))
    with pytest.warns(loader.AutotuneWarning) as caught:
        loader.choose(mine, FAKE, mine.resolve_problem({"M": 1000}), [tmp_path / "none"])
    command = f"`autotune run '{copy}' -s M=1000,N=512,K=512,layout=row -d fakecorp-fake-gpu-9000`"
    assert f"{command} tunes and verifies it" in str(caught[0].message)
    with pytest.warns(loader.AutotuneWarning) as caught:
        loader.choose(MM, FAKE, MM.resolve_problem({"M": 1000}), [tmp_path / "none"])
    assert "`autotune run matmul -s M=1000,N=512,K=512,layout=row -d fakecorp-fake-gpu-9000`" in str(caught[0].message)
    assert caught[0].filename == __file__, "the warning points at the caller's line, not autotune's"


@pytest.mark.parametrize("edit", [{"ALGO": "blocked"}, dict(T64, BOGUS=1), dict(T64, MWG=48)])
def test_an_entry_outside_the_space_is_not_filled_in_and_the_pick_is_saved_beside_it(folders, edit):
    """A hand-edited entry naming only ALGO ran as ALGO plus every other parameter's first value,
    50x slower, as if tuned; the pick made instead was then kept out of the profile, while the
    warning said it was saved. Trial 99: the pick replaced such an entry, the edit left in the
    .bak only; it stays for a person to fix, as a malformed one does, the pick beside it."""
    loader._warned.clear()  # said once per process and size: other tests took this size
    problem = MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000})
    path = profiles.path_for(FAKE.slug, folders[0])
    edited = record.entry(MM, problem, Measurement(Status.OK, "", (0.5,), params=edit), trials=50)
    profiles.save(edited, "matmul", FAKE.profile_header(), path)
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0})
    with pytest.warns(loader.AutotuneWarning, match=rf"cannot be used \(.*took the fastest \(0.9 ms; saved to {path} "
                                                     r"beside that entry, which stays for you to fix\)"):
        c = loader.choose(MM, FAKE, problem, folders, timer)
    assert c.origin == "measured" and c.params == T64
    saved = profiles.entries(profiles.read(path), "matmul")
    assert [(e.picked, e.params, e.time_ms) for e in saved] == [(False, edited.params, 0.5),
                                                                 (True, MM.without_flags(T64), 0.9)]
    assert choose(folders, timer, M=3000, N=3000, K=3000).params == T64 and len(timer.calls) == 1  # not timed again
    profiles.save(replace(saved[1], tuned_at="2099-01-01T00:00:00Z", time_ms=2.0), "matmul", FAKE.profile_header(),
                  path, edited=lambda old: not MM.stores(old))  # a later pick: renewed, the edit left still
    assert [e.time_ms for e in profiles.entries(profiles.read(path), "matmul")] == [0.5, 2.0]


def test_a_pick_for_a_tuned_entry_this_device_cannot_run_is_saved_and_not_timed_again(folders):
    """Trial 48: a tuned entry whose work-group this device does not allow (a profile from a
    bigger one) kept out the pick timed instead, so every call timed the candidates again."""
    from dataclasses import replace

    small = replace(FAKE, max_work_group_size=128)  # T128 and T64 (16 x 16 work-items) do not fit; T32 does
    problem = MM.resolve_problem({"M": 4096, "N": 4096, "K": 4096})
    user = profiles.path_for(small.slug, folders[0])
    profiles.save(record.entry(MM, problem, Measurement(Status.OK, "", (3.0,), params=T128), trials=50), "matmul",
                  small.profile_header(), user)
    timer = FakeTimer({64: 0.9, 32: 2.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.AutotuneWarning)
        first = loader.choose(MM, small, problem, folders, timer)
        again = loader.choose(MM, small, problem, folders, timer)
    assert first.origin == again.origin == "measured" and again.params == first.params == T32
    assert len(timer.calls) == 1, timer.calls
    assert [(e.picked, e.params["MWG"]) for e in profiles.entries(profiles.read(user), "matmul")] == [(True, 32)]


def test_a_profile_written_for_another_device_is_used_with_a_warning_naming_both(folders):
    """A profile is named by vendor and model only: an H200's file copied under this device's
    name (or one from a machine of another size) was used as 'exact' without a word."""
    from dataclasses import replace

    loader._warned.clear()  # said once per process and profile
    bigger = replace(FAKE, compute_units=FAKE.compute_units * 2)
    problem = MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024})
    with pytest.warns(loader.AutotuneWarning) as caught:
        c = loader.choose(MM, bigger, problem, folders, FakeTimer({}))
    assert c.origin == "exact" and c.params == T64
    shipped = profiles.path_for(FAKE.slug, folders[1])
    assert [str(w.message) for w in caught] == [
        f"{shipped} holds matmul entries measured on {FAKE.name} (GPU, {FAKE.compute_units} compute units), "
        f"not this {FAKE.name} "
        f"(GPU, {bigger.compute_units} compute units): they are used, but may be slow here "
        f"(`autotune run matmul -s M=1024,N=1024,K=1024,layout=row -d {FAKE.slug}` tunes this device)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader.choose(MM, FAKE, problem, folders, FakeTimer({}))  # its own device: nothing to say


def _facts(info: Any) -> dict[str, Any]:
    return {k: info.profile_header()[k] for k in profiles.SAME_DEVICE}


def test_entries_measured_on_another_device_still_warn_after_a_pick_here_rewrote_the_device_block(folders):
    """Trial 20: a pick at an untuned size rewrote the copied profile's device block to this
    device's, and from then on the other device's entries loaded without the warning."""
    loader._warned.clear()
    bigger = replace(FAKE, compute_units=FAKE.compute_units * 2)
    user = profiles.path_for(FAKE.slug, folders[0])
    shipped = profiles.path_for(FAKE.slug, folders[1])
    user.parent.mkdir(parents=True)
    user.write_text(shipped.read_text())  # the other machine's profile, copied under this name
    with pytest.warns(loader.AutotuneWarning):  # an untuned size: picked and saved here
        c = loader.choose(MM, bigger, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders[:1],
                          FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}))
    assert c.origin == "measured"
    doc = profiles.read(user)
    assert doc["device"]["compute_units"] == bigger.compute_units  # the block is this device's now
    assert not re.search(r"[&*]id\d+", user.read_text()), "each entry's record written out (trial 23)"
    by_size = {e.problem["M"]: e.device for e in profiles.entries(doc, "matmul")}
    assert by_size == {256: _facts(FAKE), 1024: _facts(FAKE), 2048: _facts(FAKE), 3000: _facts(bigger),
                       4096: _facts(FAKE)}
    loader._warned.clear()  # another process
    with pytest.warns(loader.AutotuneWarning, match=rf"{user} holds matmul entries measured on {FAKE.name} "
                      rf"\(GPU, {FAKE.compute_units} compute units\), not this"):
        assert loader.choose(MM, bigger, MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024}),
                             folders[:1], FakeTimer({})).origin == "exact"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the pick was measured here: nothing to say
        loader.choose(MM, bigger, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders[:1], FakeTimer({}))
    # measuring a ceiling here rewrites the block too, and keeps the records
    profiles.save_ceilings({"copy bandwidth": {"value": 1.0, "unit": "GB/s"}}, bigger.profile_header(), user)
    assert [e.device for e in profiles.entries(profiles.read(user), "matmul")] == \
        [e.device for e in profiles.entries(doc, "matmul")]
    # back on the first device: its entries lose their records, the pick here gets one
    profiles.save(record.entry(MM, MM.resolve_problem({"M": 512, "N": 512, "K": 512}),
                               Measurement(Status.OK, "", (0.1,), params=T32), trials=5),
                  "matmul", FAKE.profile_header(), user)
    by_size = {e.problem["M"]: e.device for e in profiles.entries(profiles.read(user), "matmul")}
    assert by_size[1024] == by_size[512] == _facts(FAKE) and by_size[3000] == _facts(bigger)
    assert user.read_text().count("device:") == 2  # the block and the pick's record


def test_an_exact_entry_that_leaves_out_a_parameter_is_not_used_and_the_warning_says_why(folders):
    """An entry re-keyed after a parameter was added, without it, is not used as it is (a
    filled-in configuration would be one nobody measured): the warning names the parameter
    rather than saying the size was never tuned."""
    path = profiles.path_for(FAKE.slug, folders[1])
    path.write_text(path.read_text().replace(", KSPLIT: 1}", "}", 1))
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0})
    with pytest.warns(loader.AutotuneWarning) as caught:
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024}), folders, timer)
    assert c.origin == "measured" and timer.calls  # timed at first use like an untuned size
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"the matmul entry for M=1024,N=1024,K=1024,layout=row in {path} cannot be used "
                              "(it does not name KSPLIT, which its configuration uses)"), message


def test_an_entry_whose_problem_is_written_as_text_is_named_where_first_use_passes_it_over(folders, monkeypatch):
    """Trial 90: `M: "256"` by hand: load_kernel timed a pick 10x slower without a word, where
    `show` said the entry was skipped and why."""
    monkeypatch.setattr(loader, "_warned", set())
    path = profiles.path_for(FAKE.slug, folders[1])
    text = path.read_text()
    assert "M: 1024," in text
    path.write_text(text.replace("M: 1024,", "M: '1024',", 1))
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0})
    with pytest.warns(loader.AutotuneWarning) as caught:
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024}), folders, timer)
    assert c.origin == "measured"
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"the matmul entry for M=1024,N=1024,K=1024,layout=row in {path} cannot be used "
                              "(its problem is written {'M': '1024', "), message


def test_an_entry_of_another_spec_version_is_named_timed_first_and_the_pick_saved_beside_it(folders, monkeypatch):
    """After a template edit the tuned entry for a size is stale: first use says so (not "no
    tuned matmul"), times its configuration first, and keeps the tuning run's entry in the
    profile, so that reverting the edit makes it usable again. The pick is saved beside it, so
    the next process uses the pick instead of timing the candidates again."""
    monkeypatch.setattr(loader, "_warned", set())
    problem = MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000})
    user = profiles.path_for(FAKE.slug, folders[0])
    stale = replace(record.entry(MM, problem, Measurement(Status.OK, "", (0.5,), params=T32), trials=80),
                    spec_hash="before-the-edit", tuned_at="2026-11-20T10:00:00Z")
    profiles.save(stale, "matmul", FAKE.profile_header(), user)
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 0.6})
    # with measuring off, its configuration is used as the nearest, and the warning says so
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    with pytest.warns(loader.AutotuneWarning, match="for another version of the spec.*; using its configuration, "
                      "not verified with this version"):
        c = loader.choose(MM, FAKE, problem, folders, timer)
    assert c.origin == "nearest" and c.params == T32 and timer.calls == []
    monkeypatch.delenv("AUTOTUNE_MEASURE_UNTUNED")
    monkeypatch.setattr(loader, "_warned", set())
    with pytest.warns(loader.AutotuneWarning) as caught:
        c = loader.choose(MM, FAKE, problem, folders, timer)
    assert c.origin == "measured" and c.params == T32 and timer.calls == [[32, 128, 64]]
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"the matmul entry for {problem_label(problem)} in {user} was tuned "
                              "2026-11-20T10:00:00Z for another version of the spec"), message
    assert f"saved to {user} beside that entry, which the spec's old version still uses" in message
    stale = replace(stale, device=_facts(FAKE))  # as read back: the device it was measured on
    kept, pick = [e for e in profiles.entries(profiles.read(user), "matmul") if e.problem == problem]
    assert kept == stale  # the tuning run's entry, untouched
    assert pick.picked and pick.spec_hash == MM.spec_hash
    again = FakeTimer({128: 1.0, 64: 0.9, 32: 0.6})
    c = loader.choose(MM, FAKE, problem, folders, again)  # another process: the pick, untimed, unsaid
    assert c.origin == "measured" and c.params == T32 and again.calls == []
    # with the old version back (the edit reverted), its tuned entry is used as it was
    old_spec = replace(MM, spec_hash="before-the-edit")
    c = loader.choose(old_spec, FAKE, problem, folders, again)
    assert c.origin == "exact" and c.entry == stale and again.calls == []


def test_after_a_template_edit_an_untuned_size_times_the_configurations_tuned_with_the_old_one(folders):
    """Trial 10: after a comment-only edit every entry was stale, and a size nobody tuned was
    timed with only the baseline and default, whose pick (5x slower than before) was saved."""
    shipped = profiles.path_for(FAKE.slug, folders[1])
    shipped.write_text(shipped.read_text().replace(MM.spec_hash, "before-the-edit"))
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}, {"baseline": 5.0, "default": 5.0})
    c = choose(folders, timer, M=3000, N=3000, K=3000)
    assert c.origin == "measured" and c.params == T64
    assert timer.calls == [[128, 64, 32]]  # the nearest sizes' first (2048 and 4096: one configuration)
    loader._warned.clear()
    with pytest.warns(loader.AutotuneWarning, match=r"using the configuration tuned for M=2048,N=2048,K=2048,"
                      r"layout=row with another version of the spec \(or another spec file named matmul\), not "
                      r"verified at this size"):
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 2500, "N": 2500, "K": 2500}), folders, None)
    assert c.origin == "nearest" and c.params == T128


def test_a_candidate_that_gives_wrong_results_at_the_new_size_is_not_picked(folders, monkeypatch):
    monkeypatch.setattr(loader, "_warned", set())
    timer = FakeTimer({128: 1.0, 64: "wrong", 32: 2.0}, {"baseline": 5.0, "default": 5.0})
    with pytest.warns(loader.AutotuneWarning, match=r"\(1 gave wrong results there and was left out, e\.g\. "
                      r"ALGO=tiled MDIMC=16 NDIMC=16 MWG=64 "):
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders, timer)
    assert c.origin == "measured" and c.params == T128  # the fastest that verified
    saved = profiles.entries(profiles.read(profiles.path_for(FAKE.slug, folders[0])), "matmul")
    assert [e.params["MWG"] for e in saved] == [128]


def test_when_every_candidate_gives_wrong_results_load_kernel_refuses_rather_than_use_one(folders):
    timer = FakeTimer({128: "wrong", 64: "wrong", 32: "wrong"}, {"baseline": "wrong", "default": "wrong"})
    with pytest.raises(loader.ProblemError, match=r"each configuration it could use gives wrong results there "
                       r"\(5 failed verification; .*C: 3 of 9 elements differ\); `autotune run matmul -s "
                       r"M=3000,N=3000,K=3000,layout=row -d fakecorp-fake-gpu-9000` searches the whole space"):
        choose(folders, timer, M=3000, N=3000, K=3000)
    assert not profiles.path_for(FAKE.slug, folders[0]).exists()  # nothing saved
    # trial 114: the baseline's build error went unsaid
    timer = FakeTimer({128: "wrong", 64: "wrong", 32: "wrong"}, {"baseline": None, "default": "wrong"})
    with pytest.raises(loader.ProblemError, match=r"gives wrong results or fails there \(4 failed verification; .*\), "
                       r"and 1 failed otherwise \(ALGO=.*: "
                       r"compile_error: k.cl:1:1: error: no\); `autotune run"):
        choose(folders, timer, M=3000, N=3000, K=3000)


def test_when_every_candidate_is_off_by_rounding_alone_the_refusal_names_the_tolerance(folders):
    """Trial 24: a tolerance tighter than float32 was answered with "`autotune run` searches the
    whole space for one that verifies", which none could."""
    timer = FakeTimer({128: "rounding", 64: "rounding", 32: "rounding"},
                      {"baseline": "rounding", "default": "rounding"})
    with pytest.raises(loader.ProblemError, match=r"tighter than rounding allows\); the spec's tolerance must allow "
                                                  r"rounding$"):
        choose(folders, timer, M=3000, N=3000, K=3000)


def test_a_single_valid_tuned_configuration_is_verified_there_too(folders):
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}, {"baseline": 5.0, "default": 5.0})
    c = choose(folders, timer, M=40, N=40, K=40)  # only the 32 x 32 tiles fit
    assert timer.calls == [[32]] and c.origin == "measured" and c.params == T32


def test_a_malformed_entry_hides_only_itself(folders, monkeypatch):
    """One bad field (time_ms: fast) made load_kernel ignore the whole profile, so every tuned
    size got the default; now that entry alone is skipped, with a warning naming it."""
    monkeypatch.setattr(loader, "_warned", set())
    path = profiles.path_for(FAKE.slug, folders[1])
    text = path.read_text()
    path.write_text(text.replace("time_ms: 3.0", "time_ms: fast", 1))
    assert path.read_text() != text
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024}), folders, FakeTimer({}))
    assert c.origin == "exact" and c.params == T64
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"ignoring an entry: {path}: kernels.matmul[") and "malformed entry" in message


def test_an_entry_that_is_no_mapping_hides_only_itself_and_a_save_keeps_it(folders, monkeypatch):
    """Trial 82: a `- 5` among a kernel's entries made show, run and load_kernel refuse the whole
    profile ("kernels.saxpy[0]: expected a mapping"), every kernel's entries with it."""
    monkeypatch.setattr(loader, "_warned", set())
    path = profiles.path_for(FAKE.slug, folders[1])
    doc = yaml.safe_load(path.read_text())
    doc["kernels"]["matmul"].insert(0, 5)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024}), folders, FakeTimer({}))
    assert c.origin == "exact" and c.params == T64
    (message,) = [str(w.message) for w in caught]
    assert message == (f"ignoring an entry: {path}: kernels.matmul[0]: 5 is no entry (an entry is a mapping of "
                       "problem, params, time_ms, spec_hash and more); fix or delete that entry"), message
    entry = profiles.entries(profiles.read(path, check_entries=False), "matmul", on_error=lambda exc: None)[0]
    profiles.save(replace(entry, problem={**entry.problem, "M": 999}), "matmul", {"name": "x"}, path)
    assert yaml.safe_load(path.read_text())["kernels"]["matmul"][0] == 5, "a save leaves it for a person to fix"


def test_of_two_copies_of_an_entry_the_faster_is_used_whatever_their_order(folders):
    """A hand edit can leave two entries for one problem and spec version; the first in the
    file was used, though the next run keeps the faster one."""
    path = profiles.path_for(FAKE.slug, folders[1])
    doc = yaml.safe_load(path.read_text())
    entries = doc["kernels"]["matmul"]
    slow = next(e for e in entries if e["problem"]["M"] == 1024)
    fast = dict(slow, params=dict(slow["params"], MWG=32, NWG=32, MDIMC=8, NDIMC=8), time_ms=0.05)
    for order in ([slow, fast], [fast, slow]):
        doc["kernels"]["matmul"] = [e for e in entries if e is not slow] + order
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        c = choose(folders, FakeTimer({}), M=1024, N=1024, K=1024)
        assert c.origin == "exact" and c.params == T32 and c.entry.time_ms == 0.05


def test_a_pick_the_profile_cannot_take_is_kept_for_the_process_not_timed_at_every_call(folders, monkeypatch):
    """Trial 20: with the profile read-only, every load_kernel call timed the candidates again,
    silently after the first warning, and could return another configuration each time."""
    def refuse(*args, **kwargs):
        raise profiles.ProfileError("cannot write profile.yaml (Read-only file system)")

    monkeypatch.setattr(profiles, "save", refuse)
    monkeypatch.setattr(loader, "_warned", set())
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0})
    with pytest.warns(loader.AutotuneWarning, match=r"not saved: cannot write profile.yaml \(Read-only file "
                      r"system\); this process uses it again without timing\)"):
        first = loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders, timer)
    again = choose(folders, timer, M=3000, N=3000, K=3000)
    assert len(timer.calls) == 1 and again.params == first.params == T64 and again.origin == "measured"
    other = choose(folders, timer, M=2500, N=2500, K=2500)
    assert len(timer.calls) == 2 and other.origin == "measured", "another size is timed"


def test_profiles_shipped_beside_an_applications_own_spec_are_used_and_a_pick_goes_to_the_users_folder(tmp_path):
    """Trial 20: an application shipping its spec had no place for its tuned profiles but
    AUTOTUNE_HOME or autotune's own folder."""
    from autotune import settings
    from conftest import SCALE_YAML, write_spec

    loader._warned.clear()
    spec = specs.load(write_spec(tmp_path / "app", SCALE_YAML))
    shipped = profiles.path_for(FAKE.slug, tmp_path / "app" / "profiles")
    tuned = {"WPT": 4, "WG": 32, "MODE": 0, "mad": True}
    profiles.save(record.entry(spec, spec.resolve_problem({"N": 256}),
                               Measurement(Status.OK, "", (0.01,), params=tuned), trials=30),
                  "scale", FAKE.profile_header(), shipped)
    c = loader.choose(spec, FAKE, spec.resolve_problem({"N": 256}))
    assert (c.origin, c.params, c.profile) == ("exact", tuned, shipped)
    with pytest.warns(loader.AutotuneWarning, match="verified and timed"):
        c = loader.choose(spec, FAKE, spec.resolve_problem({"N": 512}), timer=lambda cands, own=(): Timed(
            tuple(Measurement(Status.OK, "", (1.0,), params=dict(p)) for p in [*cands, *own]), ProgramCache()))
    assert c.origin == "measured" and c.params == tuned
    assert c.profile == profiles.path_for(FAKE.slug, settings.profiles_dir())  # the application's stays as shipped
    assert [e.problem["N"] for e in profiles.entries(profiles.read(shipped), "scale")] == [256]


def test_a_pick_that_is_not_saved_names_no_profile_and_a_block_that_is_no_list_is_said_of_every_entry(tmp_path):
    """Trial 104: `scale: 5` under kernels: was "ignoring an entry", and the pick that could not
    be saved there still gave the profile's path as `.profile`."""
    from autotune import settings
    from conftest import SCALE_YAML, write_spec

    loader._warned.clear()
    spec = specs.load(write_spec(tmp_path / "app", SCALE_YAML))
    mine = profiles.path_for(FAKE.slug, settings.profiles_dir())
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("kernels:\n  scale: 5\n")
    timer = lambda cands, own=(): Timed(  # noqa: E731
        tuple(Measurement(Status.OK, "", (1.0,), params=dict(p)) for p in [*cands, *own]), ProgramCache())
    with pytest.warns(loader.AutotuneWarning) as said:
        c = loader.choose(spec, FAKE, spec.resolve_problem({"N": 512}), timer=timer)
    text = [str(w.message) for w in said]
    assert any(t.startswith("ignoring every entry of the kernel: ") and "kernels.scale is 5" in t for t in text), text
    assert any("not saved: " in t for t in text), text
    assert c.origin == "measured" and c.profile is None
    assert mine.read_text() == "kernels:\n  scale: 5\n"


def test_threads_loading_one_untuned_size_at_once_time_it_once_and_get_one_configuration(folders):
    """Trial 22: four threads loading one untuned size each timed the candidates, and one of
    them went on with another configuration than the one saved."""
    import threading
    import time

    class Slow(FakeTimer):
        def __call__(self, candidates, fallbacks=()):
            time.sleep(0.2)  # the others arrive while the first is timing
            self.ms = {128: 1.0, 64: 0.9, 32: 2.0} if not self.calls else {128: 0.5, 64: 0.9, 32: 2.0}
            return super().__call__(candidates, fallbacks)

    timer, got = Slow({}), []
    problem = MM.resolve_problem({"M": 777, "N": 777, "K": 777})

    def load():
        got.append(choose(folders, timer, **problem))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(timer.calls) == 1
    assert [c.params for c in got] == [T64] * 4


def test_a_stopped_runs_entry_in_the_users_profile_does_not_hide_a_finished_one_shipped(folders):
    """Trial 23: a run stopped after its baseline saved that as a partial entry in the user's
    profile, and load_kernel took it over the application's shipped, tuned entry."""
    problem = MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024})
    stopped = record.entry(MM, problem, Measurement(Status.OK, "", (0.5,), params=T32), trials=1, partial=True)
    profiles.save(stopped, "matmul", FAKE.profile_header(), profiles.path_for(FAKE.slug, folders[0]))
    c = choose(folders, FakeTimer({}), M=1024, N=1024, K=1024)
    assert c.origin == "exact" and c.params == T64 and c.profile == profiles.path_for(FAKE.slug, folders[1])
    finished = replace(stopped, partial=False, trials=40, time_ms=0.4)
    profiles.save(finished, "matmul", FAKE.profile_header(), profiles.path_for(FAKE.slug, folders[0]))
    assert choose(folders, FakeTimer({}), M=1024, N=1024, K=1024).params == T32, "a finished run here still wins"


def test_the_first_use_warning_says_which_timed_configuration_is_a_stopped_runs_best(folders):
    """Trial 21: the warning counted a stopped run's best among the "tuned configurations"."""
    problem = MM.resolve_problem({"M": 512, "N": 512, "K": 512})
    stopped = record.entry(MM, problem, Measurement(Status.OK, "", (0.5,), params=dict(T32, KWG=32)), trials=1,
                           partial=True)
    profiles.save(stopped, "matmul", FAKE.profile_header(), profiles.path_for(FAKE.slug, folders[1]))
    with pytest.warns(loader.AutotuneWarning, match=r"timed 4 tuned configurations \(1 from a run stopped early\)"):
        loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders,
                      FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}))


def test_a_size_whose_inputs_do_not_fit_the_hosts_memory_is_not_timed_but_takes_the_nearest(folders, monkeypatch):
    """Trial 29: first use at a size whose inputs and reference outgrow the host's free memory
    drew them anyway, and Linux's OOM killer ended the application; `autotune run` refuses
    that size, and the nearest problem's configuration runs there with the caller's buffers."""
    from autotune import hostmemory

    monkeypatch.setattr(hostmemory, "available", lambda: 2**30)  # 1 GiB free
    timer = FakeTimer({128: 1.0, 64: 0.9, 32: 2.0})
    with pytest.warns(loader.AutotuneWarning) as caught:
        c = loader.choose(MM, FAKE, MM.resolve_problem({"M": 8192, "N": 8192, "K": 8192}), folders, timer)
    assert timer.calls == [] and c.origin == "nearest" and c.params == T128
    (message,) = [str(w.message) for w in caught]
    assert "cannot be timed there" in message and "of host memory" in message, message


def test_a_device_that_cannot_build_at_all_is_named_before_any_warning(folders, monkeypatch):
    """Trial 29: a queue on a device whose compiler builds nothing (PoCL 3 on a newer CPU) got
    "using the valid configuration nearest the default … `autotune run … -d 1:0` tunes it",
    then "the chosen configuration does not build here"."""
    from autotune import device, health

    other = replace(FAKE, selector="0:1", name="other")
    monkeypatch.setattr(device, "list_devices", lambda: [(FAKE, None), (other, None)])
    monkeypatch.setattr(device, "build_checks", lambda found, recheck=False: {
        FAKE.selector: health.BuildCheck(False, "error: unknown target CPU 'generic'"),
        other.selector: health.BuildCheck(True)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(loader.AutotuneError, match=r"cannot run OpenCL kernels: error: unknown target CPU "
                           r"'generic'; load it on a queue of 0:1 \(other"):
            loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders, FakeTimer({}))
    assert not caught


def test_first_use_starts_no_candidate_once_its_time_is_up_and_one_has_verified(monkeypatch):
    """Trial 29: on a CPU, first use at correlate's default problem ran 149 s before the
    application saw anything; it now stops starting candidates after firstuse.BUDGET_S."""
    from autotune import firstuse

    clock = [0.0]

    class SlowBench:  # each measurement takes 15 s of the fake clock; the second fails to build
        def __init__(self, *args: Any) -> None:
            self.cache = ProgramCache()

        def prefetch(self, params: Any) -> None:
            pass

        def measure(self, params: Any, cutoff_ms: Any = None) -> Measurement:
            clock[0] += 15.0
            ok = params["MWG"] != 64
            return Measurement(Status.OK if ok else Status.COMPILE_ERROR, "", (1.0,) if ok else (), params=params)

        def verify_strictly(self, params: Any) -> None:
            return None

    monkeypatch.setattr(firstuse, "Bench", SlowBench)
    monkeypatch.setattr(firstuse, "make_workload", lambda spec, problem: None)
    monkeypatch.setattr(firstuse.time, "perf_counter", lambda: clock[0])
    problem = MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000})
    timed = firstuse.time_candidates(MM, problem, None, None, {}, [T64, T128, T32], [MM.default_config])
    assert [m.params["MWG"] for m in timed.measurements] == [64, 128] and timed.untimed == 2
    assert loader._untimed(0) == "" and "the last 2 not timed" in loader._untimed(2)


def test_where_another_spec_file_of_the_name_has_the_entry_first_use_says_to_rename_before_tuning(
        folders, monkeypatch, tmp_path):
    """Trial 110: it said the pick was saved beside the entry "the spec's old version" uses (the
    other file's), and that a run tunes the size, which refuses to while that entry is there."""
    monkeypatch.setattr(loader, "_warned", set())
    problem = MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000})
    other = tmp_path / "copy" / "matmul.yaml"
    other.parent.mkdir()
    other.write_text("kernel: matmul\n")
    theirs = replace(record.entry(MM, problem, Measurement(Status.OK, "", (0.5,), params=T32), trials=80),
                     spec_hash="the-copy", spec_file=str(other))
    profiles.save(theirs, "matmul", FAKE.profile_header(), profiles.path_for(FAKE.slug, folders[0]))
    with pytest.warns(loader.AutotuneWarning) as caught:
        loader.choose(MM, FAKE, problem, folders, FakeTimer({128: 1.0, 64: 0.9, 32: 0.6}))
    (message,) = [str(w.message) for w in caught]
    assert f"beside that entry, which {other} still uses" in message
    assert message.endswith(", once this spec has a `kernel:` name of its own, tunes this size"), message


def test_a_first_use_cut_short_says_how_many_of_its_candidates_it_timed(folders, monkeypatch):
    """Trial 110: "verified and timed 3 tuned configurations and the spec's default there ...
    (the last 2 of them not timed ...)"."""
    monkeypatch.setattr(loader, "_warned", set())

    class CutShort(FakeTimer):
        def __call__(self, candidates: Any, fallbacks: Any = ()) -> Timed:
            whole = super().__call__(candidates, fallbacks)
            return Timed(whole.measurements[:2], whole.cache, len(whole.measurements) - 2)

    with pytest.warns(loader.AutotuneWarning, match=r"verified and timed 2 of 5 candidates \(3 tuned configurations "
                      r"and the spec’s baseline and default\) there in .* \(the last 3 not timed: first use starts "
                      r"none after 20 s\)"):
        loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders,
                      CutShort({128: 1.0, 64: 0.9, 32: 2.0}))


def test_each_kernel_used_from_a_profile_measured_elsewhere_is_warned_of(tmp_path):
    """Trial 72: the warning was once per profile, so the second kernel loaded from a copied
    profile was used without it."""
    loader._warned.clear()
    bigger = replace(FAKE, compute_units=FAKE.compute_units * 2)
    said = []
    for spec in (MM, specs.load("reverse"), MM):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loader._measured_elsewhere(tmp_path / "copied.yaml", _facts(FAKE), spec, bigger, spec.default_problem())
        said.append([str(w.message) for w in caught])
    assert [len(s) for s in said] == [1, 1, 0], said  # once per kernel
    assert f"holds matmul entries measured on {FAKE.name}" in said[0][0]
    assert f"holds reverse entries measured on {FAKE.name}" in said[1][0]


def test_a_problem_whose_kernel_comes_another_way_later_is_warned_of_again(folders, monkeypatch):
    """Trial 75: with measuring off, a size given the default (warned of) got the nearest tuned
    configuration once a run had tuned another size, without a word."""
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    loader._warned.clear()
    problem = MM.resolve_problem({"M": 5000, "N": 5000, "K": 5000})
    said = []
    for where in ([folders[0]], folders):  # nothing tuned, then the shipped entries as well
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            origin = loader.choose(MM, FAKE, problem, where, None).origin
        said.append((origin, [str(w.message) for w in caught if issubclass(w.category, loader.AutotuneWarning)]))
    assert [(origin, len(messages)) for origin, messages in said] == [("default", 1), ("nearest", 1)], said


def test_first_use_says_how_long_it_timed_without_the_wait_to_save(folders, monkeypatch):
    """Trial 73: "verified and timed ... in 6.1 s" where 5 s of it was a wait for the profile's lock."""
    import time

    loader._warned.clear()
    save = profiles.save

    def slow_save(*args, **kwargs):
        time.sleep(1.0)  # another process's save holds the lock
        return save(*args, **kwargs)

    monkeypatch.setattr(profiles, "save", slow_save)
    with pytest.warns(loader.AutotuneWarning, match=r"verified and timed .* there in 0\.\d s"):
        loader.choose(MM, FAKE, MM.resolve_problem({"M": 3000, "N": 3000, "K": 3000}), folders,
                      FakeTimer({128: 1.0, 64: 0.9, 32: 2.0}))


def test_a_corrupt_profile_of_anothers_folder_is_said_to_be_its_owners(folders, tmp_path):
    """Trial 79: a site's corrupt profile told each user to fix it by hand, which they cannot."""
    from autotune import settings

    loader._warned.clear()
    site = tmp_path / "site"
    site.mkdir()
    profiles.path_for(FAKE.slug, site).write_text("kernels: [\n")
    own = profiles.path_for(FAKE.slug, settings.profiles_dir())
    own.parent.mkdir(parents=True, exist_ok=True)
    own.write_text("kernels: [\n")
    problem = MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader.choose(MM, FAKE, problem, [settings.profiles_dir(), site, folders[1]], FakeTimer({}))
    said = [str(w.message) for w in caught if "ignoring profile" in str(w.message)]
    assert [s.endswith("(not yours: tell its owner)") for s in said] == [False, True], said


def test_a_profile_of_the_users_own_that_cannot_be_read_is_not_said_to_be_anothers(folders, tmp_path, monkeypatch):
    """Trial 95: with AUTOTUNE_HOME a file, the message named that file, not the profiles
    folder, and was told as another's: "(not yours: tell its owner)"."""
    from autotune import settings

    loader._warned.clear()
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("AUTOTUNE_HOME", str(tmp_path / "afile"))
    problem = MM.resolve_problem({"M": 1024, "N": 1024, "K": 1024})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader.choose(MM, FAKE, problem, [settings.profiles_dir(), folders[1]], FakeTimer({}))
    (said,) = [str(w.message) for w in caught if "ignoring profile" in str(w.message)]
    assert "afile is not a folder" in said and "not yours" not in said, said


def test_a_corrupt_profile_beside_a_spec_in_a_site_folder_is_said_to_be_its_owners(tmp_path, monkeypatch):
    """Trial 97: the folder beside the spec counted as the user's even where it was a site's
    ($AUTOTUNE_SITE_PROFILES): "fix it by hand" instead of "tell its owner"."""
    import shutil

    from autotune import spec as specs
    from autotune.resources import data_dir

    site = tmp_path / "site"
    (site / "profiles").mkdir(parents=True)
    shutil.copy(data_dir("search_spaces") / "matmul.yaml", site / "mm.yaml")
    shutil.copy(data_dir("kernel_templates") / "matmul.cl", site / "matmul.cl")
    shutil.copy(data_dir("kernel_templates") / "autotune.h", site / "autotune.h")
    profiles.path_for(FAKE.slug, site / "profiles").write_text("kernels: [\n")
    monkeypatch.setenv("AUTOTUNE_SITE_PROFILES", str(site / "profiles"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the built-in's name
        spec = specs.load(site / "mm.yaml")
    assert loader._yours(spec) == {os.path.realpath(loader.settings.profiles_dir())}
    monkeypatch.delenv("AUTOTUNE_SITE_PROFILES")
    assert os.path.realpath(site / "profiles") in loader._yours(spec)  # the user's own, writable: theirs
