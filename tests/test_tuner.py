"""The search loop against a fake evaluator: budget accounting, skipping, resume, never a wrong winner."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from autotune import profiles, settings, stops, study, tuner
from autotune import spec as specs
from autotune.cli import format_report
from autotune.diagnose import WRONG_WINDOW
from autotune.errors import AutotuneWarning, ProblemError, TuningInterrupted
from autotune.result import Measurement, Status
from autotune.space import config_key, enumerate_valid
from autotune.spec import config_label
from autotune.tuner import (
    BASELINE_LIMIT_S,
    CONFIRM_LEADERS,
    CONFIRM_ROUNDS,
    RunState,
    TuneOptions,
    default_time_limit,
    tune,
)
from conftest import FAKE, SCALE_YAML, QuietEvaluator, save_winner, write_spec


class FakeEvaluator(QuietEvaluator):
    """Time = 1 / (WPT * WG); WPT == 8 gives a wrong answer (and would otherwise be fastest)."""

    def __init__(self):
        self.calls: list[dict] = []  # measurements of the search (verified)
        self.cutoffs: list[float | None] = []
        self.confirms: list[dict] = []  # the leaders timed again after it

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        if verify:
            self.calls.append(dict(params))
            self.cutoffs.append(cutoff_ms)
        else:
            self.confirms.append(dict(params))
        if params["WPT"] == 8:
            return Measurement(Status.WRONG_RESULT, "y: 3 of 256 elements off")
        if params["WPT"] == 16 and params["WG"] == 16:
            return Measurement(Status.COMPILE_ERROR, "error: too many registers")
        t = 100.0 / (params["WPT"] * params["WG"]) + (0.01 if params["mad"] else 0.0)
        return Measurement(Status.OK, "", (t, t * 1.1, t * 0.9), 0.0, 0.0, 0.01)



def run(spec, ev, progress=None, **kw):
    """Tune against ``ev`` on the fake device, the study in memory unless ``storage`` is given."""
    return tune(spec, TuneOptions(**{"timeout_s": None, "storage": ":memory:", **kw}), evaluator=ev, info=FAKE,
                progress=progress)


def test_the_summary_says_a_gap_in_the_valid_space_of_a_conditional_space_may_be_copies(scale, tmp_path):
    """Trial 98: "valid space 96 of 128" read as 32 configurations ruled out, where they differed
    only in a parameter their variant ignores."""
    report = run(scale, FakeEvaluator(), trials=2)
    assert "combinations (those that differ only" not in format_report(report)
    text = SCALE_YAML.replace("MODE: [0]", 'MODE: [0, 1]\n  PAD: {values: [0, 1], when: "MODE == 1"}')
    conditional = specs.load(write_spec(tmp_path, text))
    summary = format_report(run(conditional, FakeEvaluator(), trials=2))
    assert re.search(r"valid space \d+ of \d+ combinations \(those that differ only in a parameter their variant "
                     r"ignores are one configuration\)", summary), summary


def test_grid_measures_every_valid_config_once_and_wrong_never_wins(scale):
    ev = FakeEvaluator()
    report = run(scale, ev, sampler="grid", trials=1000)
    valid = enumerate_valid(scale, scale.default_problem(), FAKE.facts())
    assert report.stopped_by == "exhausted"
    assert sorted(map(config_key, ev.calls)) == sorted(map(config_key, valid))
    assert report.best.params["WPT"] != 8
    best = report.best.params
    assert best["WPT"] * best["WG"] == 256 and not best["mad"]  # WPT=16 only fits WG=16: broken
    assert report.failures == {"wrong_result": 4, "compile_error": 2}
    assert report.baseline.params == {"WPT": 1, "WG": 16, "MODE": 0, "mad": False}
    assert ev.calls[0] == report.baseline.params, "the baseline is measured first"
    assert report.speedup == pytest.approx((100 / 16) / (100 / 256))


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_budget_counts_only_new_measurements(scale, sampler):
    ev = FakeEvaluator()
    report = run(scale, ev, sampler=sampler, trials=7, seed=3)
    assert report.measured == 7 == len(ev.calls)
    assert len({config_key(c) for c in ev.calls}) == 7, "nothing is measured twice"


def test_resume_adds_trials_without_remeasuring(scale):
    first, second = FakeEvaluator(), FakeEvaluator()
    run(scale, first, trials=5, seed=1, storage=None)  # the default SQLite file: it must persist
    report = run(scale, second, trials=5, seed=2, storage=None)
    seen_before = {config_key(c) for c in first.calls}
    assert not seen_before & {config_key(c) for c in second.calls}
    assert report.study_trials == 10


def test_a_resumed_run_keeps_the_default_time_limit_the_studys_baseline_sets(scale):
    """Trial 17: a resumed study measured every candidate under the 300 s limit meant for the
    baseline alone, so a hanging one took a whole run's --timeout, run after run."""
    class Limits(FakeEvaluator):
        def __init__(self):
            super().__init__()
            self.limits: list[float | None] = []

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            self.limits.append(limit_s)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    first, second = Limits(), Limits()
    run(scale, first, trials=3, seed=1, storage=None)
    run(scale, second, trials=3, seed=2, storage=None)
    base = default_time_limit(Measurement(Status.OK, "", (1.0,), wall_s=0.01))
    assert first.limits[0] == BASELINE_LIMIT_S and set(first.limits[1:]) == {base}
    assert second.calls and set(second.limits) == {base}, "the baseline is the study's, measured before"


def test_a_candidate_cut_off_by_the_runs_timeout_is_named_and_measured_first_next_time(scale):
    """Trial 17: a run that --timeout stopped while a hanging candidate was measured said
    nothing of it, and the next run spent its time on it again without a word."""
    class Hangs(FakeEvaluator):
        def __init__(self, hung=None):
            super().__init__()
            self.limits: list[float | None] = []
            self.hung = hung  # the configuration that hangs; None: the third measured

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            self.limits.append(limit_s)
            if params == self.hung if self.hung is not None else len(self.calls) == 2:
                self.hung = dict(params)
                self.calls.append(dict(params))
                return Measurement(Status.TIMEOUT, f"no result within {limit_s:.0f} s; worker killed")
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    first = Hangs()
    report = run(scale, first, sampler="grid", trials=50, timeout_s=20.0, storage=None)
    assert report.stopped_by == "timeout" and report.measured == 2
    assert report.cut_off is not None and dict(report.cut_off.params) == first.hung and report.cut_off.limit_s == 30.0
    assert first.limits[2] < 30.0, "it was given what was left of the run, not its own limit"
    text = format_report(report)
    assert (f"{config_label(first.hung)} was being measured: the next run of the study measures it first, for up "
            "to its limit per configuration (30 s in this run), so give that run a --timeout of at least 39 s for "
            "that limit (it had run ") in text and " s when the time was up; one that ends sooner needs less)" in text
    # 39 s less a tenth for the re-timing leaves 35: 30 and start-up; trial 89: how long it ran, since
    # the limit is a bound ("at least 320 s" for a configuration that needed a few)
    # trial 87: a study in memory has no next run to promise
    kept = run(scale, Hangs(), sampler="grid", trials=50, timeout_s=20.0, storage=":memory:")
    assert "the study was in memory, so a run that should measure it needs a --timeout of at least 39 s" in \
        format_report(kept) and "next run of the study" not in format_report(kept)
    second = Hangs(first.hung)
    again = run(scale, second, sampler="grid", trials=3, storage=None)
    assert second.calls[0] == first.hung and second.limits[0] == 30.0
    assert again.failures == {"timeout": 1} and again.cut_off is None


def test_a_candidate_cut_off_by_the_study_timeout_is_blamed_on_it(scale):
    """Trial 28: a run that --study-timeout stopped mid-measurement said "--timeout reached" and
    advised a longer --timeout, which the run had plenty of."""
    class Hangs(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if len(self.calls) == 2:
                self.calls.append(dict(params))
                return Measurement(Status.TIMEOUT, f"no result within {limit_s:.0f} s; worker killed")
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    report = run(scale, Hangs(), sampler="grid", trials=50, timeout_s=600.0, study_timeout_s=20.0, storage=None)
    assert report.stopped_by == "study timeout" and report.cut_off is not None
    text = format_report(report)
    assert "--timeout reached" not in text and "give that run a --timeout" not in text, text
    assert "the study's --study-timeout passed" in text
    assert "a later run of the study measures it first, once its --study-timeout" in text, text


def test_a_study_timeout_holds_for_a_study_in_memory(scale):
    """Trial 71: with --storage :memory: the study had no start time, and --study-timeout 1 let a
    30-trial run go on to its end."""
    import time

    class Slow(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            time.sleep(0.05)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    started = time.perf_counter()
    report = run(scale, Slow(), sampler="grid", trials=1000, study_timeout_s=1.0)
    assert report.stopped_by == "study timeout" and report.measured < 40
    assert time.perf_counter() - started < 5


def test_profile_written_with_best_and_flags(scale):
    report = run(scale, FakeEvaluator(), sampler="grid", trials=1000)
    doc = profiles.read(report.profile_path)
    (e,) = profiles.entries(doc, "scale")
    assert e.params["WPT"] * e.params["WG"] == 256 and e.build_flags == ()
    assert e.baseline_ms == pytest.approx(100 / 16) and not e.partial
    assert report.profile_path.parent == settings.profiles_dir()
    assert doc["device"]["name"] == "Fake GPU 9000"


def test_a_run_whose_best_is_slower_than_the_profiles_entry_says_which_entry_stays(scale):
    # the summary's best was taken for what the profile now holds, although the entry kept
    # had other build flags: the profile line names the kept entry, its time and its flags
    run(scale, FakeEvaluator(), sampler="grid", trials=1000)
    (fast,) = profiles.entries(profiles.read(profiles.path_for(FAKE.slug, settings.profiles_dir())), "scale")

    class Slower(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            return replace(m, times_ms=tuple(3 * t for t in m.times_ms)) if m.ok else m

    report = run(scale, Slower(), sampler="grid", trials=1000)
    assert report.profile_verdict == "kept" and report.profile_kept == fast
    line = next(x for x in format_report(report).splitlines() if x.strip().startswith("profile"))
    assert f"its entry of {fast.time_ms:.4f} ms tuned {fast.tuned_at}" in line and (
        "is this run's best configuration, timed faster before, and stays" in line), line
    assert config_label(fast.params) in line, line


def test_the_summarys_baseline_line_says_the_parameters_it_leaves_out_are_at_their_first_values(scale):
    # a user read the baseline's one shown parameter as the others having been dropped
    report = run(scale, FakeEvaluator(), sampler="grid", trials=3)
    line = next(x for x in format_report(report).splitlines() if x.strip().startswith("baseline"))
    assert "(every parameter at its first value)" in line, line
    reverse = format_report(replace(report, spec=specs.load("reverse"))).splitlines()
    line = next(x for x in reverse if x.strip().startswith("baseline"))
    assert "(WG=64; the others at their first values)" in line, line


def test_proposals_skipped_for_claims_do_not_blame_a_worker_that_may_not_exist(scale):
    """Trial 33: after a crashed run its claims were said to be another worker's."""
    report = replace(run(scale, FakeEvaluator(), sampler="grid", trials=2), elsewhere=2)
    assert ("2 proposals skipped as claimed by another worker (or by a run that ended without giving them back, "
            "until the claims expire)") in format_report(report)


def test_no_valid_configuration_is_a_clear_error_from_run_and_load_kernel_alike(scale, tmp_path):
    """Trial 24: bench and load_kernel said only "the spec's constraints exclude every one"
    where run named the default's reason and the fix."""
    from autotune import loader

    said = (r"^no configuration of scale is valid for N=3 on Fake GPU 9000 \(the default's reason: constraint "
            r"'\(N // WPT\) % WG == 0'.*\); every configuration is ruled out for this problem: choose a problem "
            r"the spec allows, or widen its space$")
    with pytest.raises(ProblemError, match=said):
        tune(scale, TuneOptions(), problem={"N": 3}, evaluator=FakeEvaluator(), info=FAKE)
    with pytest.raises(ProblemError, match=said):
        loader.choose(scale, FAKE, scale.resolve_problem({"N": 3}), [tmp_path / "none"], None)


DEVICE_FIX = r"the default is over this device's limits whatever the problem: give the spec's parameters"
PROBLEM_FIX = r"choose a problem the spec allows, or widen its space$"


@pytest.mark.parametrize("added, reason, fix", [
    ('constraints:\n  - "WG * WPT <= max_work_group_size // 1000"', r"constraint 'WG \* WPT <= max_work_group_size // "
                                                                   r"1000'", DEVICE_FIX),
    (None, r"work-group \d+ > device max 8", DEVICE_FIX),
    ('local_memory: "WG * 10000"', r"local memory \d+ B > device 49152 B", DEVICE_FIX),
    # trial 58: what a problem key sizes, a smaller problem may fit
    ('constraints:\n  - "N * 4 <= local_mem_size // 1000"', r"constraint 'N \* 4 <= local_mem_size // 1000'",
     PROBLEM_FIX),
    ('local_memory: "N * 1000"', r"local memory \d+ B > device 49152 B", PROBLEM_FIX),
])
def test_no_valid_configuration_for_the_devices_limits_says_so(tmp_path, added, reason, fix):
    """Trial 56: every configuration over the device's work-group limit was answered "choose a
    problem the spec allows", which no problem can fix."""
    text = SCALE_YAML
    if added and added.startswith("constraints:"):
        given = '  - "(N // WPT) % WG == 0"\n'
        text = text.replace(given, f"{given}{added.split(chr(10))[1]}\n")
    elif added:
        text += added + "\n"
    spec = specs.load(write_spec(tmp_path, text))
    info = FAKE if added else replace(FAKE, max_work_group_size=8, max_work_item_sizes=(8, 8, 8))
    with pytest.raises(ProblemError, match=reason + ".*" + fix):
        tune(spec, TuneOptions(), evaluator=FakeEvaluator(), info=info)


def test_all_failing_saves_nothing(scale):
    class Broken(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            return Measurement(Status.WRONG_RESULT, "bad")
    report = run(scale, Broken(), trials=5)
    assert report.best is None and report.profile_path is None
    assert not (settings.profiles_dir() / f"{FAKE.slug}.yaml").exists()


class Wrong(FakeEvaluator):
    """Every configuration gives the same wrong result, its numbers varying (a wrong reference);
    those in ``right`` verify."""

    def __init__(self, right=()):
        super().__init__()
        self.right = right

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        if config_key(params) in self.right:
            return super().evaluate(params, limit_s, cutoff_ms, verify)
        self.calls.append(dict(params))
        n = params["WG"] * params["WPT"]
        return Measurement(Status.WRONG_RESULT, f"y: {n} of 4096 elements off (first at {n - 1}: got {n}.5, "
                                                f"want 9e-{n % 7}, allowed ±1e-05)")


def test_a_new_study_whose_first_configurations_all_give_the_same_wrong_result_stops(scale, capsys):
    # trial 9's user ran a whole budget of trials that all failed as their reference was wrong
    ev = Wrong()
    report = run(scale, ev, trials=30, storage=None)
    assert report.stopped_by == "same wrong result" and report.measured == len(ev.calls) == WRONG_WINDOW
    assert ev.calls[0] == report.baseline.params and report.best is None
    summary = format_report(report)
    assert (f"the first {WRONG_WINDOW} configurations that ran to a result, the baseline first, all gave the same "
            "wrong result") in summary
    assert "run the same command again to search on" in summary
    again = run(scale, Wrong(), trials=8, storage=None)  # the user's call: the search goes on
    assert again.stopped_by == "trials" and again.measured == 8
    assert "`global:` counts work-items" not in summary
    # trial 70: a study in memory starts anew, so the same command would stop the same way
    in_memory = format_report(run(scale, Wrong(), trials=30))
    assert "run again without --storage :memory:, and once more to search on" in in_memory
    assert "autotune report" not in in_memory  # no study to show


def test_the_same_elements_left_unwritten_suggest_a_launch_too_small(scale):
    """Trial 52: a Kernel Tuner user wrote the number of work-groups as `global:`, and every
    configuration left most of the output unwritten; the summary blamed the reference."""
    class Unwritten(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            self.calls.append(dict(params))
            return Measurement(Status.WRONG_RESULT, "y: 4032 of 4096 elements are not finite (unwritten or overflow)")

    summary = format_report(run(scale, Unwritten(), trials=30))
    assert "`global:` counts work-items (a CUDA grid times its block; Kernel Tuner's problem_size)" in summary


def test_the_same_wrong_result_off_by_rounding_alone_blames_the_tolerance_not_the_reference(scale):
    """Trial 24: a tolerance below float32's precision read as a wrong reference."""
    from autotune.verify import TOO_TIGHT

    class Rounding(Wrong):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            return replace(m, message=m.message + f"; each element off is within 1 ulp: the tolerance is {TOO_TIGHT}")

    report = run(scale, Rounding(), trials=30, storage=None)
    summary = format_report(report)
    assert report.stopped_by == "same wrong result" and "the spec's tolerance is at fault" in summary
    assert "likelier at fault" not in summary, summary


@pytest.mark.parametrize("message, named", [
    ("y: 4095 of 4096 elements off (first at 1: got 0.24227142, want 0.24227143079042435, which must be exact; "
     "rtol=0, atol=0)", True),
    # trial 58: an element off by 0.04 where atol is 0 is a wrong result, not a tolerance too tight
    ("y: 100 of 4096 elements off (first at 1: got 0.0416141599, want 0, which must be exact; rtol=1e-05, atol=0)",
     False),
])
def test_the_same_wrong_result_under_rtol_and_atol_0_names_the_tolerance_too(scale, message, named):
    """Trial 56: with rtol = atol = 0, every configuration failed and only the reference was blamed."""
    class Exact(Wrong):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            return replace(super().evaluate(params, limit_s, cutoff_ms, verify), message=message)

    summary = format_report(run(scale, Exact(), trials=30, storage=None))
    assert ("or the tolerance: rtol and atol 0 ask each element to match exactly" in summary) == named, summary


def test_a_timeout_or_build_error_among_the_first_configurations_does_not_hide_a_wrong_reference(scale):
    """Trial 22: a hint that hangs, measured fourth, kept the check from firing, and the run spent
    its whole budget on wrong results."""
    class WrongAndHangs(Wrong):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            n = len(self.calls)
            return (Measurement(Status.TIMEOUT, "no result within 5 s; worker killed", params=params) if n == 3 else
                    Measurement(Status.COMPILE_ERROR, "k.cl:1: error: too many registers") if n == 5 else m)

    ev = WrongAndHangs()
    report = run(scale, ev, trials=30, storage=None)
    assert report.stopped_by == "same wrong result" and report.measured == WRONG_WINDOW + 2


# the kernel's fault, said by each trial: not the reference's (trial 11; trial 38: the last two)
PINNED = {"reads outside x": "x: read before its start, so the result depends on the bytes there; ",
          "a race": "the result changes from one launch to the next: a race between work-items; the first launch: ",
          "scratch read first": "scratch.t: read before written (a scratch buffer starts undefined); with NaN there: "}


@pytest.mark.parametrize("case", ["another failure among them", "the baseline verifies", *PINNED])
def test_wrong_results_that_are_not_all_alike_from_the_baseline_on_do_not_stop_the_run(scale, case):
    if case == "the baseline verifies":
        ev = Wrong(right={config_key(scale.baseline_config)})
    elif case in PINNED:
        class Pinned(Wrong):
            def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
                m = super().evaluate(params, limit_s, cutoff_ms, verify)
                return replace(m, message=PINNED[case] + m.message)
        ev = Pinned()
    else:
        class Mixed(Wrong):
            def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
                m = super().evaluate(params, limit_s, cutoff_ms, verify)
                return replace(m, message="y: 3 of 4096 elements are not finite") if len(self.calls) == 3 else m
        ev = Mixed()
    report = run(scale, ev, trials=12)
    assert report.stopped_by == "trials" and report.measured == 12


def test_candidates_far_behind_the_best_are_timed_once_and_the_baseline_in_full(scale):
    class Pruning(FakeEvaluator):
        """Honours the cut-off as Bench does: one launch over it ends the timing."""

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            if m.ok and cutoff_ms is not None and m.times_ms[0] > cutoff_ms:
                return Measurement(Status.OK, "", m.times_ms[:1], 0.0, 0.0, 0.01, pruned=True)
            return m

    ev = Pruning()
    report = run(scale, ev, sampler="grid", trials=1000, prune=2.0)
    assert ev.cutoffs[0] is None, "the baseline is timed in full: the speed-up is measured on it"
    best = float("inf")
    for params, cutoff in zip(ev.calls, ev.cutoffs, strict=True):
        if best < float("inf"):
            assert cutoff == pytest.approx(2.0 * best), params  # twice the best measured before it
        m = FakeEvaluator().evaluate(params, None)
        if m.ok:
            best = min(best, m.median_ms)
    assert report.pruned > 0 and not report.best.pruned
    assert report.best.params["WPT"] * report.best.params["WG"] == 256


class Noisy(FakeEvaluator):
    """The search's first measurement of B (WPT 4, WG 64) is lucky: 0.5 ms against its true 2 ms;
    A (WPT 2, WG 128) is a steady 1 ms; -cl-mad-enable adds 0.1. Every later timing is the true one."""

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        super().evaluate(params, limit_s, cutoff_ms, verify)
        true = {(1, 16): 20.0, (2, 128): 1.0, (4, 64): 2.0}.get((params["WPT"], params["WG"]), 50.0)
        true += 0.1 * params["mad"]
        lucky = verify and (params["WPT"], params["WG"], params["mad"]) == (4, 64, False)
        t = 0.5 if lucky else true
        return Measurement(Status.OK, "", (t, t, t), 0.0, 0.0, 0.01)


def test_the_leaders_are_timed_again_and_a_lucky_measurement_does_not_win(scale):
    ev = Noisy()
    report = run(scale, ev, sampler="grid", trials=1000)
    assert {(c["WPT"], c["WG"]) for c in ev.confirms} >= {(2, 128), (4, 64)}
    assert len(ev.confirms) == 3 * 5  # the 5 fastest (the baseline among them), 3 rounds, timing only
    assert (report.best.params["WPT"], report.best.params["WG"]) == (2, 128)
    assert report.best.median_ms == 1.0 and report.runner_up.median_ms == 1.1  # B is 2.0 when re-timed
    assert report.confirmed == 5 and not report.close_call
    # trial 32: the progress lines' best (B's lucky 0.5 ms) was not what was saved, and nothing said why
    first, again = report.overturned
    assert first == 0.5 and (again.params["WPT"], again.params["WG"], again.median_ms) == (4, 64, 2.0)
    assert ("  overturned  the search's fastest, 0.5000 ms as the study had it (WPT=4 WG=64 MODE=0), took 2.0000 ms "
            "timed again (min 2.0000, max 2.0000): the best above is the fastest over all rounds") \
        in format_report(report).splitlines(), format_report(report)
    # trial 62: the runner-up was given by its time alone
    assert "runner-up 1.1000 ms (min 1.1000, max 1.1000; WPT=2 WG=128 MODE=0  flags: -cl-mad-enable)" \
        in format_report(report), format_report(report)
    rounds = [ev.confirms[i:i + 5] for i in range(0, 15, 5)]
    assert rounds[0] != rounds[1] and sorted(map(config_key, rounds[0])) == sorted(map(config_key, rounds[1]))
    # trial 63: a runner-up that differs from the best in its flags alone says it has none
    flagged = replace(report, best=report.runner_up, runner_up=report.best)
    assert "; WPT=2 WG=128 MODE=0  flags: none)" in format_report(flagged), format_report(flagged)
    # trial 64: and a best without flags beside one that differs only in having them says so too
    assert "\n  best        WPT=2 WG=128 MODE=0  flags: none\n" in format_report(report)
    other = replace(report, runner_up=report.overturned[1], overturned=None)  # WPT=4 WG=64: told apart already
    assert "\n  best        WPT=2 WG=128 MODE=0\n" in format_report(other), format_report(other)


def test_a_stopped_run_does_not_save_a_best_an_earlier_confirmation_overturned(scale):
    """Trial 37: a finished run's rounds found B's lucky 0.5 ms to be 2 ms and saved A (1 ms);
    a Ctrl-C in the next run of the study then saved B's single timing as the best so far,
    replacing A's confirmed entry, and the summary showed B. The rounds' timings stand for the
    search's in the study, so the stopped run's best is A and the entry stays."""
    first = run(scale, Noisy(), sampler="grid", trials=1000, storage=None)
    assert first.overturned is not None and (first.best.params["WPT"], first.best.params["WG"]) == (2, 128)

    class StopsInTheRounds(Noisy):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if not verify:
                raise KeyboardInterrupt
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    with pytest.raises(TuningInterrupted) as stopped:  # the space is measured: it goes to the rounds
        run(scale, StopsInTheRounds(), sampler="grid", trials=5, storage=None)
    best = stopped.value.args[0].best
    assert (best.params["WPT"], best.params["WG"], best.median_ms) == (2, 128, 1.0)
    [entry] = profiles.entries(profiles.read(first.profile_path), "scale")
    assert (entry.params["WPT"], entry.params["WG"], entry.time_ms, entry.partial) == (2, 128, 1.0, False)


def test_a_configuration_the_check_again_rejected_is_not_a_later_stopped_runs_best(scale):
    """Trial 40: the leaders' check again rejected B (it read past an output's end), yet a
    Ctrl-C in the next run of the study saved B by its search timing over the confirmed A."""
    class RejectsB(Noisy):
        def recheck(self, params, limit_s):
            if (params["WPT"], params["WG"]) == (4, 64):
                return Measurement(Status.WRONG_RESULT, "y: read past its end (1024 bytes), so the result ...")
            return super().recheck(params, limit_s)

    first = run(scale, RejectsB(), sampler="grid", trials=1000, storage=None)
    assert {(m.params["WPT"], m.params["WG"]) for m in first.unsteady} == {(4, 64)}

    class StopsInTheRounds(Noisy):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if not verify:
                raise KeyboardInterrupt
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    with pytest.raises(TuningInterrupted) as stopped:
        run(scale, StopsInTheRounds(), sampler="grid", trials=5, storage=None)
    best = stopped.value.args[0].best
    assert (best.params["WPT"], best.params["WG"]) == (2, 128)
    [entry] = profiles.entries(profiles.read(first.profile_path), "scale")
    assert (entry.params["WPT"], entry.params["WG"], entry.partial) == (2, 128, False)


def test_prune_0_times_every_candidate_in_full(scale):
    ev = FakeEvaluator()
    report = run(scale, ev, sampler="grid", trials=1000, prune=0)
    assert set(ev.cutoffs) == {None} and report.pruned == 0


def test_a_cut_off_below_the_best_is_refused(scale):
    with pytest.raises(ProblemError, match="--prune must be 0"):
        run(scale, FakeEvaluator(), prune=0.5)


def test_default_and_hints_are_measured_right_after_the_baseline(tmp_path):
    text = SCALE_YAML.replace("baseline: {WPT: 1, WG: 16}",
                              "baseline: {WPT: 1, WG: 16}\ndefault: {WPT: 2, WG: 64}\n"
                              "hints: [{WPT: 4, WG: 32}, {WPT: 2, WG: 64}]")
    sp = specs.load(write_spec(tmp_path, text))
    ev = FakeEvaluator()
    run(sp, ev, trials=5, seed=0)
    assert [(c["WPT"], c["WG"]) for c in ev.calls[:3]] == [(1, 16), (2, 64), (4, 32)]


def test_a_retune_starts_from_the_previous_winners_even_of_an_older_spec(tmp_path):
    text = SCALE_YAML.replace("baseline: {WPT: 1, WG: 16}",
                              "baseline: {WPT: 1, WG: 16}\ndefault: {WPT: 2, WG: 64}")
    sp = specs.load(write_spec(tmp_path, text))
    save_winner(FAKE, {"N": 256}, {"WPT": 4, "WG": 16}, ("-cl-mad-enable",), spec_hash="older-spec")  # this size
    save_winner(FAKE, {"N": 1024}, {"WPT": 2, "WG": 32}, spec_hash="older-spec")  # a neighbouring size
    save_winner(FAKE, {"N": 512}, {"WPT": 3, "WG": 32}, spec_hash="older-spec")   # a value the space lost
    ev = FakeEvaluator()
    run(sp, ev, trials=6, seed=0)
    first = [(c["WPT"], c["WG"], c["mad"]) for c in ev.calls[:4]]
    assert first == [(1, 16, False), (4, 16, True), (2, 32, False), (2, 64, False)]


def test_a_device_with_no_winner_yet_starts_from_other_devices_winners(scale):
    save_winner(replace(FAKE, name="Fake GPU 8000"), {"N": 256}, {"WPT": 2, "WG": 128})  # not the default (4, 64)
    ev, starts = FakeEvaluator(), []
    warm = run(scale, ev, trials=4, seed=0, save=False,
               progress=lambda event, rec, state: starts.append(state.warm_from))
    assert ev.calls[1] == {"WPT": 2, "WG": 128, "MODE": 0, "mad": False}, "measured right after the baseline"
    assert starts[0] == ("Fake GPU 8000",)
    # trial 18: with -q only the summary told what the run did, and it did not say this
    assert ("  started     from the winners on Fake GPU 8000 (no tuned entry on this device; --no-warm-start "
            "starts without them)") in format_report(warm).splitlines()
    ev = FakeEvaluator()
    cold = run(scale, ev, trials=4, seed=0, save=False, warm_start=False)  # --no-warm-start
    assert "  started     " not in format_report(cold)
    assert {"WPT": 2, "WG": 128, "MODE": 0, "mad": False} not in ev.calls[:3]
    # once this device has a winner of its own, the others' are not measured first
    save_winner(FAKE, {"N": 256}, {"WPT": 2, "WG": 16})
    ev, starts = FakeEvaluator(), []
    run(scale, ev, trials=4, seed=0, progress=lambda event, rec, state: starts.append(state.warm_from))
    assert ev.calls[1] == {"WPT": 2, "WG": 16, "MODE": 0, "mad": False} and starts[0] == ()
    assert {"WPT": 2, "WG": 128, "MODE": 0, "mad": False} not in ev.calls[:3]


def test_a_winner_not_valid_here_gives_way_to_a_valid_configuration_one_parameter_away(scale):
    save_winner(replace(FAKE, name="Fake GPU 8000"), {"N": 256}, {"WPT": 16, "WG": 32})  # (256 // 16) % 32 != 0
    ev = FakeEvaluator()
    run(scale, ev, trials=3, seed=0)
    start = ev.calls[1]
    assert (256 // start["WPT"]) % start["WG"] == 0
    assert sum(start[k] != v for k, v in {"WPT": 16, "WG": 32, "MODE": 0, "mad": False}.items()) == 1


def test_a_trial_enqueued_by_an_interrupted_run_does_not_hide_a_configuration(scale):
    # An interrupt between enqueue_trial and ask leaves a WAITING trial in the study; the resumed
    # run must still measure every valid configuration exactly once.
    import optuna

    from autotune.study import open_storage
    from autotune.tuner import study_name

    problem = scale.resolve_problem({})
    study = optuna.create_study(study_name=study_name(scale, FAKE, problem), storage=open_storage(None))
    study.enqueue_trial({"WPT": 2, "WG": 32, "MODE": 0, "mad": True})
    ev = FakeEvaluator()
    report = run(scale, ev, sampler="grid", trials=1000)
    valid = enumerate_valid(scale, problem, FAKE.facts())
    assert report.stopped_by == "exhausted"
    assert sorted(map(config_key, ev.calls)) == sorted(map(config_key, valid))
    assert report.study_trials == len(valid)


def test_a_slow_warm_up_does_not_prune_the_winner():
    # A device whose first launch of a kernel is slow (lazy code generation, say): the warm-up
    # must not count against --prune, and one slow timed launch alone must not either.
    from autotune.measure import Bench, TimingOptions

    class Event:
        def __init__(self, ms):
            self.profile = type("P", (), {"start": 0, "end": int(ms * 1e6)})()

    class Launch:
        def __init__(self, times):
            self.times = iter(times)

        def enqueue(self, queue, args):
            return [Event(next(self.times))]

    bench = Bench.__new__(Bench)
    bench.timing, bench.queue, bench.args = TimingOptions(warmup=1, min_repeats=5, min_time_s=0.0), None, {}
    bench._finish = lambda events: None
    cutoff = 3 * 0.040  # the best so far is 0.040 ms
    times, pruned = bench._time(Launch([0.500, 0.038, 0.039, 0.037, 0.038, 0.038]), cutoff)
    assert not pruned and len(times) == 5 and min(times) == 0.037, "a slow warm-up pruned the winner"
    times, pruned = bench._time(Launch([0.5, 0.200, 0.038, 0.037, 0.038, 0.038]), cutoff)
    assert not pruned and len(times) == 5, "one slow timed launch is not enough to prune"
    times, pruned = bench._time(Launch([0.5, 0.200, 0.190, 9, 9, 9]), cutoff)
    assert pruned and times == pytest.approx([0.200, 0.190])



def test_the_stored_study_holds_each_measured_configuration_once_and_no_invalid_proposal(scale):
    import optuna

    ev = FakeEvaluator()
    report = run(scale, ev, trials=8, seed=4, storage=None)
    stored = optuna.load_study(study_name=report.study_name, storage=f"sqlite:///{settings.home() / 'studies.db'}")
    configs = [config_key(t.params) for t in stored.trials]
    assert sorted(configs) == sorted(map(config_key, ev.calls)), "every measurement, nothing else"
    assert all(t.user_attrs["status"] != "invalid" and "repeat" not in t.user_attrs for t in stored.trials)


def test_a_study_that_cannot_be_written_is_said_after_the_profile_is_saved(scale, monkeypatch):
    import optuna
    from sqlalchemy.exc import OperationalError

    def full_disk(self, study_id, template_trial=None):
        raise OperationalError("INSERT INTO trials", {}, Exception("database or disk is full"))

    # optuna's cache in front of the database calls this one (create_new_trial calls it too)
    monkeypatch.setattr(optuna.storages.RDBStorage, "_create_new_trial", full_disk)
    with pytest.raises(ProblemError, match=r"^4 trials could not be stored in the study .*disk is full.*profile "
                                           r"was saved"):
        run(scale, FakeEvaluator(), trials=4, storage=None)
    (entry,) = profiles.entries(profiles.read(settings.profiles_dir() / f"{FAKE.slug}.yaml"), "scale")
    assert entry.params


def test_a_proposal_differing_only_in_ignored_parameters_is_that_configuration(tmp_path):
    from test_spec import WHEN_YAML

    from autotune.space import canonical, check

    sp = specs.load(write_spec(tmp_path, WHEN_YAML))
    problem = sp.resolve_problem({"N": 256})
    proposal = {"WPT": 1, "WG": 16, "MODE": 0, "TILE": 4, "mad": False}
    assert check(sp, proposal, problem, FAKE.facts()) is not None, "TILE is ignored at WPT 1: one copy only"
    assert canonical(sp, proposal, problem, FAKE.facts()) == {**proposal, "TILE": 1}
    assert canonical(sp, {**proposal, "WPT": 2}, problem, FAKE.facts())["TILE"] == 4, "active: kept"


def test_neighbours_are_one_parameter_away_nearest_first_valid_and_unmeasured(scale):
    from autotune.proposer import Proposer, Sampler
    from autotune.space import ValidSpace

    space = ValidSpace(scale, scale.default_problem(), FAKE.facts())
    prop = Proposer(Sampler.TPE, space, seed=0)
    centre = {"WPT": 2, "WG": 32, "MODE": 0, "mad": False}
    seen: set[str] = set()
    found = []
    while (n := prop.neighbour(centre, lambda c: config_key(c) in seen)) is not None:
        found.append(n)
        seen.add(config_key(n))
    moved = [sum(n[k] != centre[k] for k in centre) for n in found]
    assert found and set(moved) == {1} and all(space.valid(n) for n in found)
    assert len(found) == len({config_key(n) for n in found})
    # the nearest moves first: WPT 1/4 and WG 16/64 and mad before WPT 8 or 16
    first_steps = {(k, n[k]) for n in found[:5] for k in centre if n[k] != centre[k]}
    assert first_steps <= {("WPT", 1), ("WPT", 4), ("WG", 16), ("WG", 64), ("mad", True)}
    # all of them at once (for the model to rank), less those measured
    every = prop.neighbours(centre, lambda c: False)
    assert sorted(map(config_key, every)) == sorted(map(config_key, found))
    assert prop.neighbours(centre, lambda c: config_key(c) != config_key(found[0])) == [found[0]]


def test_a_long_study_keeps_the_samplers_copy_small_and_measures_nothing_twice(scale, monkeypatch):
    monkeypatch.setattr(study, "MODEL_WINDOW", 6)
    ev = FakeEvaluator()
    seen_sizes = []
    real_tell = study.StudyLog.tell

    def tell(self, trial, m, repeat=False, then=None):
        out = real_tell(self, trial, m, repeat, then)
        seen_sizes.append(len(self.study.get_trials(deepcopy=False)))
        best_kept = min((t.value for t in self.study.get_trials(deepcopy=False) if t.value is not None),
                        default=None)
        assert self.best is None or best_kept is None or best_kept <= self.best.median_ms * 1e-3 + 1e-12, \
            "the fastest trial stays in the model"
        return out

    monkeypatch.setattr(study.StudyLog, "tell", tell)
    report = run(scale, ev, trials=40, seed=5, storage=None)
    assert max(seen_sizes) < 2 * 6 + 1 and report.measured == len(ev.calls)
    assert len({config_key(c) for c in ev.calls}) == len(ev.calls), "nothing measured twice"
    assert report.study_trials == len(ev.calls), "the stored study keeps every trial"


def test_a_stop_signal_whose_interrupt_is_swallowed_still_stops_the_run(scale):
    """A Ctrl-C whose KeyboardInterrupt lands in a __del__ (Python prints "Exception ignored"
    and goes on) still stops the run: at the next trial, as interrupted, the best kept."""
    class SwallowsTheThird(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            if len(self.calls) == 3:
                try:
                    signal.raise_signal(signal.SIGINT)  # the handler runs here, at once
                except KeyboardInterrupt:
                    pass  # as in a __del__
            return m

    ev, before = SwallowsTheThird(), signal.getsignal(signal.SIGINT)
    with pytest.raises(TuningInterrupted) as stopped:
        run(scale, ev, sampler="grid", trials=1000)
    assert len(ev.calls) == 3 and stopped.value.args[0].measured == 3
    assert signal.getsignal(signal.SIGINT) == before  # the caller's handler is given back
    later: list = []  # the stop is over: a run in a thread (which installs no handler) is not stopped
    worker = threading.Thread(target=lambda: later.append(run(scale, FakeEvaluator(), sampler="grid", trials=2)))
    worker.start()
    worker.join()
    assert later and later[0].measured == 2


def test_a_stop_while_the_finished_run_closes_still_saves_the_result(scale, monkeypatch):
    """Ctrl-C just after the last trial, while the run shuts down its worker and its study:
    the finished run is saved (its leaders timed again), not lost to a KeyboardInterrupt there."""
    close = study.StudyLog.close

    def stopped_in_close(self):
        signal.raise_signal(signal.SIGINT)
        close(self)

    monkeypatch.setattr(study.StudyLog, "close", stopped_in_close)
    try:
        report = run(scale, FakeEvaluator(), sampler="grid", trials=6, save=True)
    except KeyboardInterrupt:
        pytest.fail("the stop escaped the finished run, which saved nothing")
    [entry] = profiles.entries(profiles.read(report.profile_path), "scale")
    assert report.stopped_by == "trials" and not entry.partial and entry.time_ms == report.best.median_ms


def test_a_local_step_that_finds_a_new_best_is_followed_by_local_steps(monkeypatch):
    """On a smooth space the step beside the best keeps finding faster ones: after each such
    find the next two candidates are steps beside the new best too, not the turns' next."""
    from autotune import tuner
    from autotune.replay import Recorded, RecordedEvaluator, device_for, spec_for
    values = tuple(range(6))
    rec = Recorded("smooth", "Toy GPU", (("A", values), ("B", values), ("C", values)),
                   {(a, b, c): float(1 + (5 - a) + 0.5 * (5 - b) ** 2 + 0.3 * c)
                    for a in values for b in values for c in values})
    kinds: list[tuple[str, float]] = []
    measure = tuner._Run.measure

    def spy(self, evaluator, cand):
        m = measure(self, evaluator, cand)
        kinds.append((cand.kind, m.median_ms))
        return m

    monkeypatch.setattr(tuner._Run, "measure", spy)
    tune(spec_for(rec), TuneOptions(trials=60, timeout_s=None, storage=":memory:", seed=1, save=False,
                                    prune=0, compile_ahead=0), evaluator=RecordedEvaluator(rec), info=device_for(rec))
    best, finds = float("inf"), 0
    for i, (kind, t) in enumerate(kinds[:-2]):
        if t < best and kind == "local":
            finds += 1
            assert [k for k, _ in kinds[i + 1:i + 3]] == ["local", "local"], kinds
        best = min(best, t)
    assert finds >= 2


def test_the_candidate_in_flight_at_a_stop_is_measured_first_by_the_next_run(scale):
    """Ctrl-C during the fourth measurement: that configuration is not measured, and the
    resumed run measures it first (after nothing: the baseline is measured already)."""
    class StopsInTheFourth(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if verify and len(self.calls) == 3:
                self.stopped_at = dict(params)
                raise KeyboardInterrupt
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    first = StopsInTheFourth()
    with pytest.raises(TuningInterrupted):
        run(scale, first, sampler="random", seed=3, trials=20, storage=None)
    assert len(first.calls) == 3
    then = FakeEvaluator()
    run(scale, then, sampler="random", seed=4, trials=2, storage=None)
    assert then.calls[0] == first.stopped_at
    assert first.stopped_at not in first.calls


def test_a_best_that_is_the_baseline_has_a_speed_up_of_1(scale):
    """The baseline's configuration wins and is timed again faster: the summary must not
    show it a speed-up over its own first timing."""
    class BaselineWins(QuietEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            base = params["WPT"] == 1 and params["WG"] == 16
            t = (1.0 if verify else 0.6) if base else 2.0 + 0.01 * params["WPT"]
            return Measurement(Status.OK, "", (t, t, t), 0.0, 0.0, 0.01)

    report = run(scale, BaselineWins(), sampler="grid", trials=8)
    assert report.best.params["WPT"] == 1 and report.best.params["WG"] == 16
    assert report.best.median_ms == 0.6 and report.speedup == 1.0


def test_a_timeout_under_a_shorter_limit_is_measured_again_by_a_later_run(scale):
    """A run with a tiny --max-time-per-config records timeouts; a later run with a longer
    limit measures those first, and one of them can win. The same short limit again does not."""
    class SlowWide(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if params["WPT"] == 4 and params["WG"] == 64:  # 2 s of build and run, then fastest
                if verify:
                    self.calls.append(dict(params))
                if limit_s is not None and limit_s < 2.0:
                    return Measurement(Status.TIMEOUT, "no result", wall_s=limit_s, limit_s=limit_s)
                return Measurement(Status.OK, "", (0.01, 0.01, 0.01), 0.0, 0.0, 2.0)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    first = run(scale, SlowWide(), sampler="grid", trials=100, storage=None, max_time_per_config=0.5)
    assert first.failures.get("timeout") == 2  # WPT=4, WG=64 with and without mad
    assert first.best.params["WG"] != 64 or first.best.params["WPT"] != 4
    again, said, counts, numbers = SlowWide(), [], [], []

    def progress(event, m, state):
        said.append(state.retrying)
        counts.append(state.study_measured)
        if event == "trial":
            numbers.append((state.study_number, dict(m.params)))

    second = tune(scale, TuneOptions(sampler="random", seed=1, trials=2, timeout_s=None, max_time_per_config=5.0),
                  evaluator=again, info=FAKE, progress=progress)
    assert said[0] == 2
    # trial 17: each timeout measured again was counted as a new trial of the study in the lines
    assert counts[-1] == second.study_trials == first.study_trials, counts
    assert [(c["WPT"], c["WG"]) for c in again.calls] == [(4, 64), (4, 64)]
    # trial 96: each line said the study's size; a configuration measured again keeps its number
    import optuna

    log = optuna.load_study(study_name=second.study_name, storage=study.open_storage(None))
    first_numbers = {}
    for t in log.get_trials(deepcopy=False):
        if "status" in t.user_attrs:
            first_numbers.setdefault(config_key(t.params), len(first_numbers) + 1)
    assert [n for n, _ in numbers] == [first_numbers[config_key(p)] for _, p in numbers], numbers
    assert len({n for n, _ in numbers}) == 2
    assert second.best.median_ms == 0.01 and not second.failures
    same = SlowWide()
    run(scale, same, sampler="random", seed=2, trials=1, storage=None, max_time_per_config=0.5)
    assert all((c["WPT"], c["WG"]) != (4, 64) for c in same.calls)


def test_the_baseline_is_timed_again_with_the_leaders_for_the_speed_up(scale):
    """Measured first, on a device still idle, the baseline times 2x slow; the speed-up must
    come from its timing beside the winner's, not from that first one."""
    class ColdStart(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            if m.ok and not self.calls[1:] and verify:  # the first measurement of the run
                return replace(m, times_ms=tuple(2 * t for t in m.times_ms))
            return m

    ev = ColdStart()
    report = run(scale, ev, sampler="grid", trials=12)
    assert ev.calls[0] == {"WPT": 1, "WG": 16, "MODE": 0, "mad": False}  # the baseline comes first
    assert report.baseline.median_ms == pytest.approx(100.0 / 16)
    assert report.speedup == pytest.approx(report.baseline.median_ms / report.best.median_ms)
    assert sum(c["WPT"] == 1 and c["WG"] == 16 and not c["mad"] for c in ev.confirms) == 3
    assert report.confirmed == 5 and report.baseline_timed == "beside", "five leaders, and the baseline beside them"
    assert "the 5 fastest timed again with the baseline, interleaved" in format_report(report)
    assert "the baseline was not timed again" not in format_report(report)
    cut = replace(report, baseline_timed="")  # trial 35: the rounds ended before the baseline's turn
    assert ("; the baseline was not timed again (the time was up), so the speed-up is from its first timing"
            in format_report(cut))
    among = ColdStart()  # three measured: the baseline is one of the leaders timed again
    report = run(scale, among, sampler="grid", trials=3)
    assert report.baseline.median_ms == pytest.approx(100.0 / 16) and report.confirmed == 3
    # trial 23: the line did not say the baseline was timed again as one of them
    assert report.baseline_timed == "among"
    assert "the 3 fastest timed again, the baseline among them, interleaved" in format_report(report)


def test_a_baseline_timed_cold_that_is_the_fastest_when_timed_again_wins(scale):
    """Timed first on an idle device, the baseline looked slower than leaders that are not: the
    run saved one of those and reported a speed-up of 0.72x. The baseline is verified, and the
    rounds that time it beside the leaders decide."""
    class BaselineFastest(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            if not m.ok:
                return m
            base = params["WPT"] == 1 and params["WG"] == 16 and not params["mad"]
            t = 1.0 if base else 2.0 - params["WPT"] * params["WG"] / 10_000  # others: 1.7-2 ms
            return replace(m, times_ms=(50.0 if base and verify else t,) * 3)  # the baseline: cold at first

    report = run(scale, BaselineFastest(), sampler="grid", trials=12)
    assert report.best.params == {"WPT": 1, "WG": 16, "MODE": 0, "mad": False}
    assert report.speedup == pytest.approx(1.0)


def test_compile_ahead_builds_no_more_than_the_run_can_measure_on_no_more_threads_than_cores(scale, monkeypatch):
    """--compile-ahead 200 started 200 build threads on 2 cores: the candidate waited for
    was built so slowly that it timed out, and most builds were for trials never run."""
    import os

    from autotune import tuner

    announced: list[dict] = []
    setups = []

    class Recording(QuietEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
            t = 1.0 / (params["WPT"] * params["WG"])
            return Measurement(Status.OK, times_ms=(t, t, t), error=0.0)

        def prefetch(self, upcoming):  # type: ignore[no-untyped-def]
            announced.extend(upcoming)

    def opened(setup, workload, isolate, folder):  # type: ignore[no-untyped-def]
        setups.append(setup)
        return Recording()

    monkeypatch.setattr(tuner, "open_evaluator", opened)
    tune(scale, TuneOptions(trials=6, sampler="random", compile_ahead=200, timeout_s=None, storage=":memory:",
                            save=False), info=FAKE)
    assert setups[0].timing.compile_threads == min(200, os.cpu_count() or 1)
    assert len({config_key(c) for c in announced}) <= 5  # after the first, at most the 5 trials left


def test_a_configuration_with_a_build_flag_reads_the_same_in_the_summary_show_and_bench(scale, capsys):
    """Trial 18: one configuration was written three ways (flags: -cl-..., fast_math=True, and
    the bare flag)."""
    from autotune import cli

    class MadWins(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            return replace(m, times_ms=tuple(t / 2 for t in m.times_ms)) if m.ok and params["mad"] else m

    report = run(scale, MadWins(), sampler="grid", trials=1000)
    shown = cli._fmt_full(report.best.params, scale, report.problem)
    assert shown.endswith("  flags: -cl-mad-enable") and "mad=" not in shown, shown
    assert f"  best        {shown}\n" in format_report(report)
    cli._show_entries("profile", cli._ShowBlock("scale", None, profiles.entries(profiles.read(report.profile_path),
                                                                       "scale"), (), scale, None, True))
    assert capsys.readouterr().out.rstrip().endswith(f"  {shown}")


@pytest.mark.parametrize("measured, whose", [(0, "the study's best so far"), (3, "best so far")])
def test_the_interrupted_line_says_whose_best_was_saved_and_what_the_profile_did(scale, capsys, monkeypatch,
                                                                                measured, whose):
    """Trial 18: a run stopped before measuring anything said 'best so far saved', as if it had
    found something; the study's best from earlier runs was what was saved."""
    from autotune import cli

    report = replace(run(scale, FakeEvaluator(), trials=3), measured=measured)

    def stopped(args):
        raise TuningInterrupted(report)

    monkeypatch.setitem(cli._COMMANDS, "run", stopped)
    assert cli.main(["run", "scale"]) == 128 + signal.SIGINT
    err = capsys.readouterr().err
    assert err == (f"autotune: interrupted after {measured} trials; {whose} saved to {report.profile_path} "
                   f"(partial; {report.profile_verdict}); the study keeps its trials: run the same command "
                   "again to resume\n")


@pytest.mark.parametrize("argv, measured, said", [
    (["--no-save"], 1, "after 1 trial; profile not written (--no-save); the study keeps its trials: run the same "
                       "command again to resume"),
    (["--no-save", "--storage", ":memory:"], 1, "after 1 trial; profile not written (--no-save); the study was in "
                                                "memory (--storage :memory:): not kept"),
    ([], 1, "after 1 trial; no verified configuration to save; the study keeps its trials"),
    ([], 0, "after 0 trials; no verified configuration to save; the study has no trials yet: the same command "
            "starts it"),
])
def test_the_interrupted_line_says_what_was_not_saved_and_whether_the_study_resumes(scale, capsys, monkeypatch,
                                                                                    argv, measured, said):
    """Trial 21: "nothing saved; run the same command again to resume" after --no-save (the
    trials were in the study) and with --storage :memory: (nothing to resume)."""
    from autotune import cli

    report = replace(run(scale, FakeEvaluator(), trials=3, save=False), measured=measured, study_trials=measured)

    def stopped(args):
        raise TuningInterrupted(report)

    monkeypatch.setitem(cli._COMMANDS, "run", stopped)
    assert cli.main(["run", "scale", *argv]) == 128 + signal.SIGINT
    assert said in capsys.readouterr().err


def test_a_timeout_measured_again_and_cut_off_by_timeout_is_measured_again_by_the_next_run(scale):
    """Trial 19: a timeout measured again under a longer limit, then stopped by --timeout, lost
    its claim; every later run skipped it as 'another worker had them', with no other worker."""
    class Hangs(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if params["WPT"] == 4 and params["WG"] == 64 and not params["mad"]:
                self.calls.append(dict(params))
                return Measurement(Status.TIMEOUT, "no result", wall_s=limit_s, limit_s=limit_s)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    hang = {"WPT": 4, "WG": 64, "MODE": 0, "mad": False}
    run(scale, Hangs(), sampler="grid", trials=100, storage=None, max_time_per_config=0.5)
    cut = Hangs()
    stopped = run(scale, cut, sampler="grid", trials=5, storage=None, max_time_per_config=5.0, timeout_s=3.0)
    assert cut.calls[0] == hang and stopped.stopped_by == "timeout" and dict(stopped.cut_off.params) == hang
    assert (f"{config_label(hang)} was being measured again (it timed out under 0.5 s before): a later run whose "
            "limit per configuration is over 0.5 s measures it first; give that run a --timeout of at least 12 s for a "
            "limit of 5 s") in format_report(stopped)
    again = Hangs()
    report = run(scale, again, sampler="random", seed=1, trials=1, storage=None, max_time_per_config=5.0)
    assert again.calls[0] == hang and report.failures == {"timeout": 1} and report.elsewhere == 0


def test_the_leaders_re_timing_ends_by_the_runs_timeout_with_a_slow_leader_among_them(scale, monkeypatch):
    """Trial 19: with a leader of seconds per launch, the re-timing gave each timing the limit
    per configuration, and a run with -t 20 took 29 s."""
    import types

    clock = [0.0]
    monkeypatch.setattr(tuner, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], time=time.time))

    class Slow(FakeEvaluator):
        def __init__(self):
            super().__init__()
            self.limits, self.slow = [], None

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            if verify and len(self.calls) == 2:
                self.slow = dict(params)
            slow = params == self.slow  # the fastest on paper, 6 s per timing
            clock[0] += 6.0 if slow else 0.5
            if verify:
                return replace(m, times_ms=(0.001,) * 3) if slow else m
            self.limits.append(limit_s)
            if slow and limit_s < 6.0:
                clock[0] += limit_s - 6.0
                return Measurement(Status.TIMEOUT, f"no result within {limit_s:.0f} s; worker killed")
            return m

    ev = Slow()
    report = run(scale, ev, sampler="grid", trials=6, timeout_s=20.0, prune=0, storage=None)
    assert report.stopped_by in ("trials", "timeout") and ev.confirms, "the leaders were timed again"
    assert clock[0] <= 20.0 + 1.0, f"the run took {clock[0]} s of its 20"
    assert all(lim <= 20.0 for lim in ev.limits)


def test_near_the_runs_end_a_limit_under_a_second_is_kept_and_its_timeout_is_the_configurations(scale,
                                                                                                monkeypatch):
    """With --max-time-per-config 0.5 and 0.3 s of the run left, a candidate was given 1 s,
    twice its limit, and its timeout was taken for the run's end (measured again next run),
    while the leaders' re-timing gave the same candidate 0.5 s."""
    import types

    clock = [0.0]
    monkeypatch.setattr(tuner, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], time=time.time))

    class Late(FakeEvaluator):
        def __init__(self):
            super().__init__()
            self.limits = []

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            self.limits.append(limit_s)
            clock[0] += 4.35 if len(self.limits) < 3 else limit_s  # the third starts 0.3 s before the end
            if len(self.limits) == 3:
                self.calls.append(dict(params))
                return Measurement(Status.TIMEOUT, f"no result within {limit_s} s; worker killed")
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    ev = Late()
    report = run(scale, ev, sampler="grid", trials=10, timeout_s=10.0, max_time_per_config=0.5, storage=None)
    assert ev.limits[:3] == [0.5, 0.5, 0.5]
    assert report.failures == {"timeout": 1} and report.cut_off is None


def test_a_stop_that_lands_in_a_finalizer_prints_no_traceback_and_is_still_seen(monkeypatch):
    """Trial 21: one early Ctrl-C in about 16 printed Python's "Exception ignored in: ...
    WeakKeyDictionary ... KeyboardInterrupt" traceback before the one-line message."""
    import gc
    import os
    import signal as signals

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    class StoppedWhileCollected:
        def __del__(self):
            os.kill(os.getpid(), signals.SIGINT)  # the handler runs here, inside the finalizer

    class Faulty:
        def __del__(self):
            raise ValueError("a fault of its own")

    with stops.stop_signals() as stopping:
        StoppedWhileCollected()
        gc.collect()
        assert stopping.requested(), "the run still stops at its next trial"
        Faulty()
    assert [type(u.exc_value) for u in seen] == [ValueError], "only other exceptions are reported"
    assert sys.unraisablehook == seen.append


def test_a_second_stop_while_the_first_is_handled_is_noted_not_raised():
    """Trial 68: a second SIGTERM (a group's and the one the command passed on, or two
    scancels) landing while the first one's KeyboardInterrupt was handled cut the saving short
    with a traceback; and a threading.Event set in the handler deadlocked when the second
    handler ran inside the first's set()."""
    import os

    with stops.stop_signals() as stopping:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode: not reached
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        # the stop that stopped the run names the exit status, not the last (trial 69)
        assert stopping.requested() and stops.last_stop_signal() == signal.SIGTERM
    with stops.stop_signals(), pytest.raises(KeyboardInterrupt):  # a new run takes stops again
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)


def test_a_stop_whose_interrupt_was_lost_before_the_run_stops_the_run(scale):
    """Trial 103: a Ctrl-C while the command started, its KeyboardInterrupt caught on the way,
    was cleared when the run set its handlers again, and the run went on to exit 0."""
    import os

    with stops.stop_signals():  # the command's
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:  # caught by code on the way (or dropped in a finalizer)
            pass
        with pytest.raises(TuningInterrupted) as stopped:
            run(scale, FakeEvaluator(), sampler="random", trials=5)
        assert stopped.value.report.measured <= 1 and stopped.value.signum == signal.SIGINT
    with stops.stop_signals() as stopping:  # the next command starts clear
        assert not stopping.requested()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_before_the_run_started_exits_with_its_signals_status(monkeypatch, capsys, signum):
    """Trial 23: a SIGTERM in the run's first second (the study opening) exited 130, as a Ctrl-C."""
    from autotune import cli

    def starting(args):
        with stops.stop_signals():
            stops.raise_interrupt(signum, None)  # as the handler does while the study opens

    monkeypatch.setitem(cli._COMMANDS, "run", starting)
    assert cli.main(["run", "scale"]) == 128 + signum
    assert capsys.readouterr().err == "autotune: interrupted\n"


@pytest.mark.parametrize("status, line", [
    (Status.TIMEOUT, "no configuration ran to a result to verify (failures below)"),
    (Status.WRONG_RESULT, "no configuration passed verification")])
def test_a_run_with_nothing_verified_says_whether_anything_was_verified_at_all(scale, status, line):
    """Trial 25: three timeouts under --max-time-per-config 0.01 were summed up as "no
    configuration passed verification", sending the user to the reference."""
    class Fails(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            self.calls.append(dict(params))
            return Measurement(status, f"failed {len(self.calls)}", params=params)

    report = run(scale, Fails(), sampler="random", trials=3)
    assert report.best is None and f"\n{line}\n" in format_report(report), format_report(report)


def _slow(monkeypatch, seconds: float) -> type[FakeEvaluator]:
    """A FakeEvaluator whose every measurement moves the run's clock on by ``seconds``."""
    import types

    clock = [0.0]
    monkeypatch.setattr(tuner, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], time=time.time))

    class Slow(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            clock[0] += seconds
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    return Slow


def test_a_run_whose_time_was_up_before_the_leaders_were_timed_again_says_so(scale, monkeypatch):
    """Trial 25: `-t 5` ended with no `confirmed` line and a speed-up from the baseline's cold
    first timing, and nothing said the confirmation had been skipped."""
    report = run(scale, _slow(monkeypatch, 3.0)(), sampler="grid", trials=20, timeout_s=10.0, prune=0)
    assert report.stopped_by == "timeout" and report.measured == 3 and report.confirmed == 0
    assert "\n  confirmed   no: the run's time was up before the fastest could be timed again" in format_report(report)
    # trial 125: a Ctrl-C in the rounds was said as the time, with the advice of a longer --timeout
    stopped = format_report(replace(report, stopped_by="interrupted"))
    assert "\n  confirmed   no: the run was stopped (Ctrl-C or a signal) before the fastest were timed again" in \
        stopped and "--timeout" not in stopped.split("confirmed")[1].split("\n")[0], stopped
    done = run(scale, FakeEvaluator(), sampler="grid", trials=3, prune=0)
    assert "confirmed   no" not in format_report(done)


def test_a_run_cut_short_after_the_baseline_alone_saves_nothing_load_kernel_would_take_as_tuned(scale, monkeypatch):
    """Trial 59: a 2 s run measured only the naive baseline and saved it as an ordinary entry,
    which load_kernel then used as the size's tuned kernel, 20x slower than its first-use pick."""
    Slow = _slow(monkeypatch, 6.0)
    cut = run(scale, Slow(), sampler="grid", trials=20, timeout_s=5.0, prune=0)
    assert cut.stopped_by == "timeout" and cut.measured == 1 and cut.best == cut.baseline
    then = "load_kernel picks among other sizes' tuned configurations instead"
    assert cut.profile_path is None and cut.profile_verdict == f"{tuner.BASELINE_ONLY}: {then}"
    assert f"\n  profile     not saved: {tuner.BASELINE_ONLY}: {then}" in format_report(cut)
    assert not profiles.path_for(FAKE.slug, settings.profiles_dir()).exists()
    asked = run(scale, FakeEvaluator(), sampler="grid", trials=1, prune=0)  # one trial asked for: saved
    assert asked.best == asked.baseline and asked.profile_verdict == "added"
    # trial 65: where the size has an entry, that entry stays (load_kernel picks nothing)
    again = run(scale, Slow(), sampler="grid", trials=20, timeout_s=5.0, prune=0)
    assert again.profile_verdict == f"{tuner.BASELINE_ONLY}: the profile's entry for this size stays"

    class Pruned(Slow):  # trial 65: a second configuration, pruned, let the baseline be saved
        pruned = True

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            m = super().evaluate(params, limit_s, cutoff_ms, verify)
            return m if params == scale.baseline_config else replace(m, times_ms=(99.0,), pruned=self.pruned)

    profiles.path_for(FAKE.slug, settings.profiles_dir()).unlink()
    two = run(scale, Pruned(), sampler="grid", trials=20, timeout_s=13.0, prune=0)
    assert two.measured == 2 and two.best.params == scale.baseline_config and two.profile_path is None
    Pruned.pruned = False  # timed in full and slower: the baseline is the run's finding, and saved
    timed = run(scale, Pruned(), sampler="grid", trials=20, timeout_s=13.0, prune=0)
    assert timed.best.params == scale.baseline_config and timed.profile_verdict == "added"


def test_leaders_that_ran_past_the_limit_per_configuration_when_timed_again_name_it(scale):
    """Trial 63: with --max-time-per-config 0.01 every leader's timing again ran past it, and
    the summary said the run's time was up, to be fixed by a longer --timeout."""
    class Overruns(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            return super().evaluate(params, limit_s, cutoff_ms, verify) if verify else \
                Measurement(Status.TIMEOUT, f"over {limit_s} s")

        def recheck(self, params, limit_s):
            return self.evaluate(params, limit_s, verify=False)

    report = run(scale, Overruns(), sampler="grid", trials=6, prune=0, max_time_per_config=0.01)
    assert report.unconfirmed and report.retime_limit == 0.01
    assert ("\n  confirmed   no: the fastest ran past the limit per configuration (0.01 s) when timed again, so their "
            "search timings decided") in format_report(report)
    assert "--max-time-per-config lets them" in format_report(report)
    assert "time was up" not in format_report(report)


def test_a_run_whose_spec_file_changed_while_it_ran_saves_nothing(tmp_path):
    """Trial 64: a worker of a spec's old version, still running after the template was edited,
    replaced the entry a run of the edited version had just saved: load_kernel had only a stale
    entry left."""
    path = write_spec(tmp_path, SCALE_YAML)
    template = path.parent / "scale.cl"

    class Edits(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if len(self.calls) == 2:
                template.write_text(template.read_text() + "// edited\n")
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    old = run(specs.load(path), Edits(), sampler="grid", trials=4)
    assert old.profile_path is None and old.profile_verdict == tuner.SPEC_CHANGED.format(path=path)  # :memory:
    assert f"\n  profile     not saved: {path} (or its template or reference) changed while this run tuned it" \
        in format_report(old)
    assert not profiles.path_for(FAKE.slug, settings.profiles_dir()).exists()
    new = run(specs.load(path), FakeEvaluator(), sampler="grid", trials=4)
    assert new.profile_verdict == "added"


def test_a_leader_whose_output_is_wrong_when_checked_again_is_left_out_and_named(scale):
    """Trial 27: a histogram with a race passed its one check in the search, won, and gave wrong
    results in 14 of 1,000 calls in the application."""
    class Racy(FakeEvaluator):
        racy = {"WPT": 2, "WG": 128, "mad": False}

        def recheck(self, params, limit_s):
            if all(params[k] == v for k, v in self.racy.items()):
                return Measurement(Status.WRONG_RESULT, "hist: 2 of 256 elements differ", params=dict(params))
            return super().recheck(params, limit_s)

    ev = Racy()
    report = run(scale, ev, sampler="grid", trials=1000)
    fastest = min((c for c in ev.calls if c["WPT"] != 8 and not (c["WPT"] == 16 and c["WG"] == 16)),
                  key=lambda c: 100.0 / (c["WPT"] * c["WG"]) + 0.01 * c["mad"])
    assert {k: fastest[k] for k in Racy.racy} == Racy.racy, "the racy one is the fastest on paper"
    assert report.best is not None and {k: report.best.params[k] for k in Racy.racy} != Racy.racy
    assert [m.params for m in report.unsteady] == [fastest]
    summary = format_report(report)
    assert "\n  unsteady    WPT=2 WG=128 " in summary and "failed when checked again, so it was left out" in summary
    (entry,) = profiles.entries(profiles.read(report.profile_path), "scale")
    assert (entry.params["WPT"], entry.params["WG"], entry.build_flags) != (2, 128, ()), "not saved"


def test_a_study_of_the_same_name_that_never_measured_the_saved_winner_does_not_replace_it(scale, tmp_path):
    """Trial 26: with studies.db moved aside (as its corrupt-database message advises), a run of
    one trial measured the baseline, and its 'resumed study' replaced a tuned entry 19x faster."""
    db = tmp_path / "s.db"
    first = run(scale, FakeEvaluator(), sampler="random", seed=0, trials=12, storage=f"sqlite:///{db}")
    db.rename(tmp_path / "aside.db")
    again = run(scale, FakeEvaluator(), sampler="random", seed=0, trials=1, storage=f"sqlite:///{db}")
    assert again.best.median_ms > first.best.median_ms and again.profile_verdict.startswith("kept"), \
        again.profile_verdict
    (entry,) = profiles.entries(profiles.read(first.profile_path), "scale")
    assert entry.time_ms == first.best.median_ms


def test_the_interrupted_line_does_not_say_saved_where_the_profile_kept_its_entry(scale, capsys, monkeypatch):
    """Trial 28: "best so far saved to …yaml (partial; kept …)" where nothing was written; and a
    kept entry of this run's own best configuration was called faster than it."""
    from autotune import cli

    run(scale, FakeEvaluator(), sampler="grid", trials=1000)  # the profile's entry: the best there is
    again = run(scale, FakeEvaluator(), sampler="grid", trials=3, storage=None)
    assert again.profile_verdict.startswith("kept")
    monkeypatch.setitem(cli._COMMANDS, "run", lambda args: (_ for _ in ()).throw(TuningInterrupted(again)))
    assert cli.main(["run", "scale"]) == 128 + signal.SIGINT
    err = capsys.readouterr().err
    assert " saved to " not in err and f"best so far not saved: {again.profile_path} kept" in err, err
    same = run(scale, FakeEvaluator(), sampler="grid", trials=1000, storage=None)
    assert same.profile_verdict.startswith("kept")
    assert "is this run's best configuration, at the same time, and stays" in format_report(same)
    # trial 64: a time the profile's 6 decimals round to the entry's is the same, not "faster"
    later = replace(same, best=replace(same.best, times_ms=tuple(t + 4e-7 for t in same.best.times_ms)),
                    stopped_by="interrupted")
    assert "is this run's best configuration, at the same time, and stays" in format_report(later)
    slower = replace(later, best=replace(same.best, times_ms=tuple(t + 0.001 for t in same.best.times_ms)))
    assert "is this run's best configuration, timed faster before, and stays" in format_report(slower)


def test_the_run_says_from_its_first_line_which_device_it_tunes_on(scale):
    """Trial 32: the quick start named its device only in the closing summary."""
    from autotune import cli

    printer = cli._progress(scale)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        run(scale, FakeEvaluator(), trials=2, seed=0, save=False, progress=printer)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"tuning scale on {FAKE.name} ({FAKE.platform}, {FAKE.selector}): up to 2 new "), lines


@pytest.mark.parametrize("fields, message", [
    ({"trials": 2.5}, "TuneOptions.trials must be a whole number (got 2.5)"),
    ({"trials": "5"}, "TuneOptions.trials must be a whole number (got '5')"),
    ({"trials": True}, "TuneOptions.trials must be a whole number (got True)"),
    ({"seed": 1.5}, "TuneOptions.seed must be a whole number (got 1.5)"),
    ({"isolate": "no"}, "TuneOptions.isolate must be True or False (got 'no')"),
    ({"timeout_s": "60"}, "TuneOptions.timeout_s must be a number (got '60')"),
])
def test_options_of_the_wrong_type_are_refused_by_name(fields, message):
    """Trial 39: trials=2.5 ran 3 configurations, seed=1.5 failed inside numpy, isolate="no"
    isolated, trials="5" was a TypeError from a comparison."""
    from autotune.errors import OptionError

    with pytest.raises(OptionError, match=re.escape(message)):
        TuneOptions(**fields)
    TuneOptions(trials=np.int64(5), seed=np.uint32(3), timeout_s=None, prune=0)  # numpy's numbers are numbers


def test_tune_says_what_it_takes_for_options_and_problem(scale):
    with pytest.raises(TypeError, match=r"tune\(\) takes its options as a TuneOptions, not a dict"):
        tune(scale, {"trials": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tune\(\)'s problem is a mapping of size keys"):
        tune(scale, TuneOptions(trials=1), problem="N=256")  # type: ignore[arg-type]


def test_a_stop_while_a_candidate_chosen_ahead_is_dropped_ends_as_an_interrupted_run(scale, monkeypatch):
    """Trial 40: a stop landing in the drop of the candidate chosen ahead (after a new best) was
    followed by a second drop of it in the loop's finally: "Cannot tell a FAIL trial", two
    tracebacks, exit 1."""
    skip, calls = study.StudyLog.skip, []

    def stopped_after_the_first(self, trial):
        skip(self, trial)
        calls.append(trial)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(study.StudyLog, "skip", stopped_after_the_first)
    with pytest.raises(TuningInterrupted):
        run(scale, FakeEvaluator(), trials=40, seed=3, compile_ahead=2)
    assert len(calls) == 1


@pytest.mark.parametrize("killed_again", [False, True])
def test_a_worker_killed_from_outside_is_measured_again_by_the_next_run_once(scale, killed_again):
    """Trial 44: a measuring worker killed by the OOM killer or an admin (SIGKILL, which no
    kernel sends) was recorded `crashed` for good. The next run measures it again; killed
    again, it is left as it is."""
    target = (4, 64)

    class Killed(FakeEvaluator):
        def __init__(self, kill: bool) -> None:
            super().__init__()
            self.kill = kill

        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if (params["WPT"], params["WG"]) == target:
                if verify:
                    self.calls.append(dict(params))
                if self.kill:
                    return Measurement(Status.CRASHED, "worker died: killed by SIGKILL", params=dict(params))
                return Measurement(Status.OK, "", (0.01, 0.01, 0.01), 0.0, 0.0, 0.1)
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    first = run(scale, Killed(kill=True), sampler="grid", trials=100, storage=None)
    assert first.failure_examples["crashed"].startswith("worker died: killed by SIGKILL from outside (the OOM killer")
    again = Killed(kill=killed_again)
    second = run(scale, again, sampler="random", seed=1, trials=2, storage=None)
    assert [(c["WPT"], c["WG"]) for c in again.calls] == [target, target], "with and without mad, first"
    if not killed_again:
        assert second.best.median_ms == 0.01
        return
    assert second.failure_examples["crashed"].startswith("worker died: killed by SIGKILL from outside again, so it "
                                                         "is not measured again")
    third = Killed(kill=False)
    run(scale, third, sampler="random", seed=2, trials=5, storage=None)
    assert third.calls == []


def test_a_study_deleted_and_made_anew_is_measured_again(scale):
    """Trial 53: optuna.delete_study left the study's claims, and a run of the study made anew
    skipped every proposal as measured until --timeout, measuring nothing."""
    import optuna

    from autotune.study import open_storage
    from autotune.tuner import study_name

    first = run(scale, FakeEvaluator(), sampler="grid", trials=1000, storage=None)
    assert first.stopped_by == "exhausted"  # every configuration claimed and measured
    optuna.delete_study(study_name=study_name(scale, FAKE, scale.default_problem()), storage=open_storage(None))
    again = FakeEvaluator()
    second = run(scale, again, trials=6, storage=None, timeout_s=20)
    assert second.measured == 6 and len(again.calls) == 6 and second.stopped_by == "trials"


def test_a_variant_that_never_ran_correctly_is_named_in_the_summary(tmp_path):
    """Trial 56: every configuration of the tiled variant failed to build, and the run ended as a
    success with the plain variant's winner, its summary saying only "5 compile_error"."""
    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  ALGO: [plain, tiled]\n")
                                 .replace("#define MODE 0", "#define MODE 0\n#define ALGO_PLAIN 1")))

    class TiledBroken(FakeEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if params["ALGO"] == "tiled":
                self.calls.append(dict(params))
                return Measurement(Status.COMPILE_ERROR, "scale.cl:3:1: error: use of undeclared identifier 'TXX'")
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    report = run(spec, TiledBroken(), trials=30, seed=1)
    summary = format_report(report)
    assert re.search(r"no configuration with ALGO = tiled ran correctly \(\d+ compile_error\): the best is among "
                     r"the other ALGO values", summary), summary
    assert "ALGO = plain" not in summary
    fine = format_report(run(spec, FakeEvaluator(), trials=30, seed=1))
    assert "ran correctly" not in fine, fine

    class TiledSlow(FakeEvaluator):  # trial 58: slower than the limit is no fault to fix
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            if params["ALGO"] == "tiled":
                self.calls.append(dict(params))
                return Measurement(Status.TIMEOUT, "no result within 0.3 s; worker killed")
            return super().evaluate(params, limit_s, cutoff_ms, verify)

    slow = format_report(run(spec, TiledSlow(), trials=30, seed=2))
    assert "timeout" in slow and "ran correctly" not in slow, slow


def test_a_variant_chosen_through_a_derived_name_is_a_variant_parameter(tmp_path):
    """Trial 58: `when: "TILED"` with TILED derived from VARIANT named no variant."""
    steps = ('launch:\n  - {entry: scale, global: ["N // WPT"], local: [WG], when: "not TILED"}\n'
             '  - {entry: scale, global: ["N // WPT"], local: [WG], when: TILED}\n')
    one = 'launch:\n  entry: scale\n  global: ["N // WPT"]\n  local: [WG]\n'
    text = SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  VARIANT: [1, 2]\n").replace(one, steps) \
        + 'derived:\n  TILED: "VARIANT == 2"\n'
    spec = specs.load(write_spec(tmp_path, text))
    assert spec.variant_parameters == {"VARIANT"}


def test_an_entry_saved_as_partial_is_said_to_be_partial(scale):
    """Trial 57: a run whose time was up before its leaders were timed again saved its best as
    partial, and the summary said only "(added)"."""
    report = run(scale, FakeEvaluator(), trials=5)
    assert report.profile_verdict == "added" and "(added)" in format_report(report)
    assert f"  profile     {report.profile_path} (partial; added)" in format_report(replace(report, unconfirmed=True))


@pytest.mark.parametrize("fields, message", [
    ({"max_repeats": 0, "min_repeats": 0}, "TimingOptions.min_repeats must be a whole number of at least 1 (got 0)"),
    ({"max_repeats": 0}, "TimingOptions.max_repeats must be a whole number of at least 1 (got 0)"),
    ({"warmup": -1}, "TimingOptions.warmup must be a whole number of at least 0 (got -1)"),
    ({"compile_threads": -3}, "TimingOptions.compile_threads must be a whole number of at least 0 (got -3)"),
    ({"min_time_s": -1}, "TimingOptions.min_time_s must be a finite number of seconds, 0 or more (got -1)"),
    ({"min_time_s": "x"}, "TimingOptions.min_time_s must be a finite number of seconds, 0 or more (got 'x')"),
])
def test_timing_options_that_cannot_time_anything_are_refused_by_name(fields, message):
    """Trial 60: max_repeats=0 saved a time of inf to the profile, min_time_s="x" failed inside
    the measuring worker with a traceback."""
    from autotune.errors import OptionError
    from autotune.measure import TimingOptions

    with pytest.raises(OptionError, match=re.escape(message)):
        TimingOptions(**fields)
    TimingOptions(warmup=0, min_repeats=1, max_repeats=1, min_time_s=0)
    TimingOptions(max_repeats=3), TimingOptions(min_repeats=100)  # trial 61: a cap below the minimum caps


def test_tune_given_a_spec_file_gives_the_same_lint_warnings_as_run(tmp_path):
    """Trial 60: a parameter the template never mentions was warned of by `autotune run` only."""
    path = write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  USE_LOCL: [0, 1]\n"))
    with pytest.warns(AutotuneWarning, match="parameters.USE_LOCL has no effect: scale.cl never mentions USE_LOCL"):
        tune(str(path), TuneOptions(trials=2, timeout_s=None, storage=":memory:", save=False),
             evaluator=FakeEvaluator(), info=FAKE)


def test_a_stop_while_the_study_opens_is_tuning_interrupted_with_its_signal(scale, monkeypatch):
    """Trial 60: SIGTERM a second into tune() (the study opening) escaped as a bare
    KeyboardInterrupt; TuningInterrupted says it in one line, and keeps its signal pickled."""
    import os
    import pickle

    opened = tuner._Run.__init__

    def opening(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        opened(self, *args, **kwargs)

    monkeypatch.setattr(tuner._Run, "__init__", opening)
    with pytest.raises(TuningInterrupted) as caught:
        run(scale, FakeEvaluator(), trials=5)
    assert caught.value.signum == signal.SIGTERM and caught.value.report.measured == 0
    assert str(caught.value) == "tuning stopped by SIGTERM after 0 measured configurations; the study was in " \
                                "memory: not kept"
    assert pickle.loads(pickle.dumps(caught.value)).signum == signal.SIGTERM


def test_a_report_and_a_stop_read_in_one_line_in_a_notebook(scale):
    """Trial 66: a cell ending with the report printed 19 KB, the TuningInterrupted repr 11 KB; a
    progress callback's KeyboardInterrupt (the way to stop a tune() in a thread) was called a
    SIGINT; the summary `autotune run` prints was not to be had from Python."""
    import pickle

    import autotune
    from autotune import cli

    report = run(scale, FakeEvaluator(), sampler="grid", trials=4)
    assert repr(report) == (f"<TuneReport scale on Fake GPU 9000, N=256: best {report.best.median_ms:.4g} ms "
                            f"({config_label(report.best.params)}); 4 measured, stopped: trials>")
    assert autotune.format_report(report) == cli.format_report(report)

    def stop(event, m, state):
        if state.measured == 2:
            raise KeyboardInterrupt

    with pytest.raises(TuningInterrupted) as caught:
        run(scale, FakeEvaluator(), progress=stop, trials=5)
    assert str(caught.value) == ("tuning stopped by a KeyboardInterrupt raised in the run after 2 measured "
                                 "configurations; the study was in memory: not kept")  # trial 73
    with pytest.raises(TuningInterrupted, match="; the finished trials were kept$"):
        run(scale, FakeEvaluator(), progress=stop, trials=5, storage=None)
    assert caught.value.signum == signal.SIGINT  # no earlier run's signal (trial 69)

    def at_start(event, m, state):
        raise KeyboardInterrupt

    with pytest.raises(TuningInterrupted):  # trial 69: a bare KeyboardInterrupt at "start"
        run(scale, FakeEvaluator(), progress=at_start, trials=5)
    assert repr(caught.value) == f"TuningInterrupted({str(caught.value)!r})"
    assert str(pickle.loads(pickle.dumps(caught.value))) == str(caught.value)


def test_a_stop_while_the_study_fails_to_open_is_said_as_the_stop(scale, monkeypatch):
    """Trial 61: a SIGTERM while the study's database was locked gave the lock's error and exit
    status 1, the stop thrown away."""
    import os

    from autotune import stops

    def locked(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        raise ProblemError("studies.db is locked: another process held it for over 10 s")

    monkeypatch.setattr(tuner._Run, "__init__", locked)
    with pytest.raises(KeyboardInterrupt):
        run(scale, FakeEvaluator(), trials=5)
    assert stops.last_stop_signal() == signal.SIGTERM


def test_a_finished_runs_entry_kept_over_a_stopped_runs_faster_best_is_said_so(scale):
    """Trial 61: the summary called the kept entry, 7x slower, "as fast as this run's best"."""
    report = run(scale, FakeEvaluator(), trials=5)
    kept = profiles.Entry(problem=dict(report.problem), params={"WPT": 1, "WG": 16, "MODE": 0}, build_flags=(),
                          time_ms=report.best.median_ms * 7, throughput={}, trials=3, tuned_at="2026-11-28T00:00:00Z",
                          spec_hash=scale.spec_hash)
    stopped = replace(report, stopped_by="interrupted", profile_kept=kept, profile_verdict="kept")
    line = next(x for x in format_report(stopped).splitlines() if x.startswith("  profile"))
    assert "which a finished run of this study saved, stays" in line and "as fast" not in line, line


def test_progress_says_when_the_leaders_are_timed_again_and_a_stop_there_keeps_the_best(scale, capsys):
    """Trial 70: after the last trial's line, half a minute without a word at 8192²."""
    from autotune import cli

    events = []
    report = run(scale, FakeEvaluator(), progress=lambda e, m, s: events.append((e, s.confirming)), trials=8, seed=0)
    assert events[0][0] == "start" and events[-1] == ("confirm", min(CONFIRM_LEADERS, report.measured))
    assert [e for e, _ in events].count("trial") == report.measured
    cli._progress(scale)("confirm", None, RunState(budget=8, confirming=5))
    assert capsys.readouterr().out == f"timing the 5 fastest again, in {CONFIRM_ROUNDS} interleaved rounds\n"

    def stop(event, m, state):
        if event == "confirm":
            raise KeyboardInterrupt

    with pytest.raises(TuningInterrupted) as caught:
        run(scale, FakeEvaluator(), progress=stop, trials=8, seed=0)
    assert caught.value.args[0].best is not None


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_finished_run_keeps_no_database_connection_open(scale):
    """Trial 75: each tune() kept four descriptors (the SQLite study and its WAL) until a garbage
    collection, which a library calling it again and again with gc off never ran."""
    import gc

    gc.collect()
    gc.disable()
    try:
        run(scale, FakeEvaluator(), trials=2, storage=None)  # the first opens what stays (libraries)
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(3):
            run(scale, FakeEvaluator(), trials=2, storage=None)
        assert len(os.listdir("/proc/self/fd")) <= before
    finally:
        gc.enable()


def test_a_run_cut_short_says_what_it_saved_and_not_a_save_the_profile_refused(scale):
    """Trial 74: "the best so far was saved to ... (partial)" where the profile kept its entry."""
    report = run(scale, FakeEvaluator(), trials=3)
    assert tuner.what_was_saved(replace(report, profile_path=None)) == "nothing was saved"
    assert tuner.what_was_saved(replace(report, profile_verdict="added")) == \
        f"the best so far was saved to {report.profile_path} (partial)"
    kept = replace(report, profile_verdict="kept (trial count updated)")
    assert tuner.what_was_saved(kept) == f"nothing was saved: {report.profile_path} keeps its entry for this problem " \
                                         "(its trial count updated)"


def test_a_stop_while_the_save_waits_for_another_processs_lock_stops_the_run(scale):
    """Trial 83: Ctrl-C while a finished run waited for another process's save was ignored for
    the rest of the minute, and the command exited 0."""
    import fcntl
    import threading

    from autotune import stops

    path = profiles.path_for(FAKE.slug, settings.profiles_dir())
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        threading.Timer(1.5, stops._note_stop, (signal.SIGTERM, None)).start()
        with pytest.warns(AutotuneWarning, match="waiting up to 60 s"), pytest.raises(TuningInterrupted) as raised:
            run(scale, FakeEvaluator(), sampler="grid", trials=3)
    assert raised.value.signum == signal.SIGTERM and raised.value.signalled
    assert raised.value.report.profile_path is None and not path.exists()
    assert raised.value.report.profile_verdict == f"stopped while another process held {path.name}'s lock " \
                                                  f"({path.name}.lock)"


def test_an_estimated_valid_space_is_at_least_the_valid_configurations_measured(scale, monkeypatch):
    """Trial 82: a sparse space's one valid configuration was measured, and the summary said
    "valid space ~0 (estimated)"."""
    from autotune import space

    monkeypatch.setattr(space.ValidSpace, "count", lambda self, budget_s=0.5, seed=0: (0, False))
    report = run(scale, FakeEvaluator(), sampler="random", trials=4)
    assert report.measured == 4 and not report.valid_space_exact and report.valid_space == 4


def test_several_devices_stopped_while_a_save_waits_for_the_lock_end_as_stopped_with_their_reports(scale):
    """Trial 84: with `-d 0:0,0:0` a stop during that wait exited 1 with a bare error, every
    summary lost."""
    import fcntl
    import threading

    from autotune import fleet, stops

    report = run(scale, FakeEvaluator(), sampler="grid", trials=3, save=False)
    path = profiles.path_for(FAKE.slug, settings.profiles_dir())
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        threading.Timer(1.5, stops._note_stop, (signal.SIGINT, None)).start()
        with pytest.warns(AutotuneWarning, match="waiting up to 60 s"):
            (result,) = fleet._saved([fleet.WorkerResult("0:0", FAKE, report)], TuneOptions(storage=":memory:"))
    stops._REQUESTED.clear()
    assert result.signum == signal.SIGINT and result.error is None and result.report.profile_path is None
    assert result.report.profile_verdict == f"stopped while another process held {path.name}'s lock ({path.name}.lock)"


def _sparse(tmp_path, names, sizes, constraint):
    """A spec of three parameters of ``sizes`` values (``names``, from ``first``) valid where
    ``constraint`` holds, and an evaluator whose time grows with the first parameter."""
    params = "\n".join(f"  {n}: [" + ", ".join(map(str, range(first, first + size))) + "]"
                       for n, (first, size) in zip(names, sizes, strict=True))
    text = SCALE_YAML.replace("  WPT: [1, 2, 4, 8, 16]\n  WG: [16, 32, 64, 128, 512]\n  MODE: [0]", params)
    text = text.replace('"(N // WPT) % WG == 0"', f'"{constraint}"').replace(
        'global: ["N // WPT"]', 'global: ["N"]').replace("local: [WG]", "local: [16]").replace(
        "build_flags:\n  mad: -cl-mad-enable\n", "").replace("baseline: {WPT: 1, WG: 16}\n", "")

    class Flat(QuietEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            t = 1.0 + params[names[0]] / 1000
            return Measurement(Status.OK, "", (t, t, t), 0.0, 0.0, 0.01)

    return specs.load(write_spec(tmp_path, text)), Flat()


@pytest.mark.parametrize("sampler", ["random", "grid", "tpe"])
def test_a_space_sparse_after_its_first_valid_configuration_ends_at_the_timeout(tmp_path, sampler):
    """Trial 86: with (0, 0, 0) valid and then nothing until late in 16 million combinations,
    a run of -t 30 ran 131 s: only the search for the first configuration had a deadline."""
    import time

    sp, flat = _sparse(tmp_path, "ABC", [(0, 400), (0, 400), (0, 100)], "A + B + C == 0 or A + B + C == 897")
    t0 = time.perf_counter()
    report = run(sp, flat, sampler=sampler, trials=10, timeout_s=6.0, prune=0)
    assert time.perf_counter() - t0 < 12 and report.stopped_by == "timeout", report.stopped_by
    assert report.measured >= 1
    # trial 87: runs of "0 measured" with no word why
    assert report.walked_out and "the time went on looking for an unmeasured valid configuration" in \
        format_report(report)


def test_tpe_on_a_sparse_space_draws_its_pool_where_listing_it_would_take_the_run(tmp_path):
    """Trial 88: 789 valid configurations scattered in 16 million: the estimate (~3) let TPE
    list the space, a 69 s walk that each run's deadline cut short and the next began again, so
    resumed runs measured nothing while random and grid measured 20."""
    import time

    sp, flat = _sparse(tmp_path, "PQR", [(1, 400), (1, 400), (1, 100)],
                       "(P * 1000003 + Q * 7919 + R * 104729) % 20011 == 0")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    first = run(sp, flat, trials=6, timeout_s=20.0, storage=storage, prune=0)
    t0 = time.perf_counter()
    again = run(sp, flat, trials=4, timeout_s=20.0, storage=storage, prune=0)
    assert first.measured >= 3 and again.measured >= 2, (first.measured, again.measured, again.stopped_by)
    assert time.perf_counter() - t0 < 25


def test_the_summary_says_why_most_of_the_space_is_invalid_and_which_values_are_in_no_valid_configuration(tmp_path):
    """Trial 89: "valid space 6 of 800" at a size that rules most out, and a variant a constraint
    ruled out entirely, were said without a word why; the summary names the commonest reasons
    and the values no valid configuration has (WG 512 is over N=256 whatever WPT is)."""
    text = SCALE_YAML.replace('  - "(N // WPT) % WG == 0"', '  - "(N // WPT) % WG == 0"\n  - "WPT != 4"')
    spec = specs.load(write_spec(tmp_path, text))
    report = run(spec, FakeEvaluator(), sampler="grid", trials=1000, save=False)
    assert [(n.name, n.value) for n in report.never_valid] == [("WPT", 4), ("WG", 512)]
    summary = format_report(report)
    assert ("valid in no configuration here: WPT=4 (mostly: constraint 'WPT != 4'); WG=512 (mostly: constraint "
            "'(N // WPT) % WG == 0')") in summary, summary
    assert "ruled out here" not in summary, "the valid space is no small share of the whole"
    few = tune(spec, TuneOptions(timeout_s=None, storage=":memory:", sampler="grid", trials=1000, save=False),
               problem={"N": 32}, evaluator=FakeEvaluator(), info=FAKE)
    assert few.valid_space < few.full_space / 4
    summary = format_report(few)
    assert re.search(r"about \d+% of the space is ruled out here by: constraint '\(N // WPT\) % WG == 0'", summary)
    assert "WG=64" in summary.split("valid in no configuration here: ")[1]
    plain = run(specs.load(write_spec(tmp_path / "plain", SCALE_YAML)), FakeEvaluator(), sampler="grid", trials=1000,
                save=False)
    assert [(n.name, n.value) for n in plain.never_valid] == [("WG", 512)]


def test_a_parameter_whose_when_holds_at_no_configuration_of_the_problem_is_said_not_tuned(tmp_path, capsys):
    """Trial 103: a `when` that names a problem key and holds nowhere at this size: the progress
    lines showed the ignored parameter, which the summary dropped, and its values read as
    invalid ("valid in no configuration here: UNROLL=4") without a word why."""
    from autotune.cli import _progress

    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [0]\n  UNROLL: {values: [2, 4], when: \"WPT > 1 and N > 1000\"}")
    spec = specs.load(write_spec(tmp_path, text))
    report = run(spec, FakeEvaluator(), progress=_progress(spec), sampler="grid", trials=1000, save=False)
    lines = capsys.readouterr().out
    assert "WPT=2" in lines and "UNROLL" not in lines, lines
    why = {(n.name, n.value): n.why for n in report.never_valid}
    assert why[("UNROLL", 4)] == ("UNROLL applies only where WPT > 1 and N > 1000, which holds in no configuration "
                                  "here, so it is not tuned"), why


def test_a_value_in_no_valid_configuration_is_given_its_own_reason(tmp_path):
    """Trial 94: every value was given the constraint that failed first in random draws
    (`SCALE == 1` for a work-group that `WG <= 64` rules out)."""
    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [0]\n  SCALE: [1, 2, 3]").replace(
        '  - "(N // WPT) % WG == 0"', '  - "SCALE == 1"\n  - "(N // WPT) % WG == 0"\n  - "WG <= 64"')
    report = run(specs.load(write_spec(tmp_path, text)), FakeEvaluator(), sampler="grid", trials=1000, save=False)
    why = {(n.name, n.value): n.why for n in report.never_valid}
    assert why == {("WG", 128): "constraint 'WG <= 64'", ("WG", 512): "constraint '(N // WPT) % WG == 0'",
                   ("SCALE", 2): "constraint 'SCALE == 1'", ("SCALE", 3): "constraint 'SCALE == 1'"}, why


def test_the_summary_of_an_estimated_space_names_a_variant_found_valid_nowhere_with_its_reason(tmp_path):
    """Trial 123: `valid space ~101 (estimated)` and nothing else, where a constraint left one of
    two variants without a valid configuration; the run measured the other alone."""
    from test_space import _variant_spec

    report = run(_variant_spec(tmp_path), FakeEvaluator(), trials=2, save=False)
    assert not report.valid_space_exact
    summary = format_report(report)
    assert ("no valid configuration found (the count is an estimate) with: ALGO=b (mostly: constraint "
            "\"ALGO == 'a' or P0 + P1 + P2 + P3 + P4 + P5 + P6 + P7 == 73\")") in summary, summary
