"""Profile merge, atomic save, corruption handling and ranking by problem (no device)."""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import replace
from pathlib import Path

import pytest

from autotune import profiles
from autotune.errors import AutotuneWarning, ProfileError


def entry(problem, t, spec_hash="h1", params=None, partial=False, study="s1"):
    return profiles.Entry(problem=problem, params=params or {"TS": 16}, build_flags=(), time_ms=t,
                          throughput={"GFLOP/s": 1.0 / t}, trials=10, tuned_at="2026-11-21T00:00:00Z",
                          spec_hash=spec_hash, partial=partial, study=study)


def test_merge_better_replaces_worse_keeps_others():
    doc, v = profiles.merge({}, "mm", entry({"N": 64}, 2.0))
    doc, v2 = profiles.merge(doc, "other", entry({"N": 8}, 1.0))
    assert (v, v2) == ("added", "added")
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 3.0, study="s2"))
    assert v == "kept" and doc["kernels"]["mm"][0]["time_ms"] == 2.0
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 1.5))
    assert v == "replaced" and doc["kernels"]["mm"][0]["time_ms"] == 1.5
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 9.0, spec_hash="h2"))
    assert v == ("replaced an entry tuned 2026-11-21T00:00:00Z with another version of the spec, 1.5 ms after 10 "
                 "trials, faster than this one: the profile's .bak keeps it until the next save"), \
        "an entry for a changed template/space is stale and is replaced, and the summary says so (trial 110: and " \
        "that the one a short check run after a comment edit replaced was faster)"
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 1.0, spec_hash="h3"))
    assert v == "replaced an entry tuned 2026-11-21T00:00:00Z with another version of the spec"
    doc, v = profiles.merge(doc, "mm", entry({"N": 128}, 5.0))
    assert len(doc["kernels"]["mm"]) == 2 and len(doc["kernels"]["other"]) == 1


def test_a_finished_runs_entry_replaces_a_stopped_runs_even_if_slower():
    """The stopped run's best was timed once; the finished run resumed its study and timed the
    leaders again: its winner, slower on paper, is the one to keep, and no longer partial."""
    doc, _ = profiles.merge({}, "mm", entry({"N": 64}, 1.00, partial=True))
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 1.01, params={"TS": 32}))
    (kept,) = profiles.entries(doc, "mm")
    assert v == "replaced" and not kept.partial and kept.params == {"TS": 32}
    # trial 57: a CI job's SIGTERM replaced the confirmed winner with the stopped run's lucky time;
    # the next finished run of the study times both again
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 0.9, partial=True))
    assert v == "kept" and profiles.entries(doc, "mm")[0].params == {"TS": 32}
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 0.9, partial=True, study="s2"))
    assert v == "replaced", "another study's stopped run that found better is kept, as partial"
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 1.2, partial=True))
    assert v == "kept"


def test_a_finished_runs_entry_replaces_an_earlier_finished_run_of_its_study_even_if_slower():
    """Trial 11: a re-run timed the kept configuration again among its leaders and found it slower
    than its own winner, yet the profile kept the first run's lucky 0.0333 ms, so the summary's
    best was not what load_kernel returned. Another study's slower winner still does not win."""
    doc, _ = profiles.merge({}, "mm", entry({"N": 64}, 0.0333, params={"TS": 4}))
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 0.0630, params={"TS": 8}))
    assert v == "replaced" and profiles.entries(doc, "mm")[0].params == {"TS": 8}
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 0.09, params={"TS": 2}, study="s2"))
    assert v == "kept" and profiles.entries(doc, "mm")[0].params == {"TS": 8}


@pytest.mark.parametrize("study", [None, "s2"])
def test_a_finished_run_of_another_study_replaces_a_stopped_one_only_if_faster(study):
    """A run in memory, or of another storage, did not resume the stopped run's study: its
    slower winner (a naive baseline, say) must not displace the stopped run's best."""
    doc, _ = profiles.merge({}, "mm", entry({"N": 64}, 0.14, partial=True))
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 2.01, params={"TS": 1}, study=study))
    (kept,) = profiles.entries(doc, "mm")
    assert v == "kept" and kept.params == {"TS": 16} and kept.study == "s1"
    doc, v = profiles.merge(doc, "mm", entry({"N": 64}, 0.10, params={"TS": 32}, study=study))
    assert v == "replaced" and profiles.entries(doc, "mm")[0].study == study


def test_save_roundtrip_backup_and_device_header(tmp_path):
    path = tmp_path / "dev.yaml"
    assert profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path) == "added"
    assert profiles.save(entry({"N": 64}, 1.0), "mm", {"name": "Dev"}, path) == "replaced"
    doc = profiles.read(path)
    assert doc["device"]["name"] == "Dev"
    assert profiles.entries(doc, "mm")[0].time_ms == 1.0
    assert profiles.entries(profiles.read(tmp_path / "dev.yaml.bak"), "mm")[0].time_ms == 2.0


def test_corrupt_profile_is_reported_and_never_overwritten(tmp_path):
    path = tmp_path / "dev.yaml"
    path.write_text("device: {name: x}\nkernels:\n  mm: [\n")
    with pytest.raises(ProfileError, match=r"dev.yaml:\d+: corrupt profile"):
        profiles.save(entry({"N": 64}, 1.0), "mm", {}, path)
    assert path.read_text() == "device: {name: x}\nkernels:\n  mm: [\n"
    path.write_text("kernels:\n  mm:\n    - {problem: {N: 1}}\n")
    with pytest.raises(ProfileError, match=r"kernels.mm\[0\] \(N=1\): entry lacks params"):
        profiles.read(path)


@pytest.mark.parametrize("block, message", [
    ("AMD EPYC", r"dev.yaml: device: expected a mapping of the device's facts .*got 'AMD EPYC'"),
    ("5", r"dev.yaml: device: expected a mapping .*got 5"),
])
def test_a_device_block_that_is_not_a_mapping_is_a_profile_error_and_never_overwritten(tmp_path, block, message):
    """Trial 31: a hand-edited `device: AMD EPYC` crashed run, bench and load_kernel with a
    ValueError when they saved."""
    path = tmp_path / "dev.yaml"
    text = (f"device: {block}\nkernels:\n  mm:\n"
            "    - {problem: {N: 1}, params: {TS: 8}, time_ms: 1.0, spec_hash: h1}\n")
    path.write_text(text)
    with pytest.raises(ProfileError, match=message):
        profiles.read(path)
    with pytest.raises(ProfileError, match=message):
        profiles.save(entry({"N": 64}, 1.0), "mm", {"name": "x"}, path)
    with pytest.raises(ProfileError, match=message):
        profiles.save_ceilings({"copy": {"value": 1.0, "unit": "GB/s"}}, {"name": "x"}, path)
    assert path.read_text() == text


def test_a_misspelt_kernels_key_is_a_profile_error_and_other_keys_are_kept(tmp_path):
    """Trial 111: `kernel:` for `kernels:` hid every entry under it, and `show` said the profile
    had none."""
    path = tmp_path / "dev.yaml"
    text = "device: {name: x}\nkernel:\n  mm:\n    - {problem: {N: 1}, params: {TS: 8}, time_ms: 1.0, spec_hash: h1}\n"
    path.write_text(text)
    with pytest.raises(ProfileError, match=r"dev.yaml: 'kernel' is no profile key: did you mean 'kernels'\?"):
        profiles.read(path)
    with pytest.raises(ProfileError, match="did you mean 'kernels'"):
        profiles.save(entry({"N": 64}, 1.0), "mm", {"name": "x"}, path)
    assert path.read_text() == text
    # trial 114: in capitals, beside a kernels block, and a block of the user's own kept
    path.write_text("KERNELS: {}\n")
    with pytest.raises(ProfileError, match="'KERNELS' is no profile key: did you mean 'kernels'"):
        profiles.read(path)
    path.write_text("kernels: {}\ndevices: [A100, H200]\n")  # trial 117: a list is no device block, and kept
    assert profiles.read(path)["devices"] == ["A100", "H200"]
    # trial 115: keys of the user's own beside the real ones made the whole profile ignored
    path.write_text("kernels_old: {}\ndevices: [A100]\nkernel: {}\nnotes: tuned on the lab machine\nkernels: {}\n"
                    "device: {name: x}\n")
    profiles.save(entry({"N": 64}, 1.0), "mm", {"name": "x"}, path)
    assert profiles.read(path)["notes"] == "tuned on the lab machine"


def test_ceilings_that_are_no_mapping_hide_no_entry_and_are_never_overwritten(tmp_path):
    """Trial 97: `ceilings: [1, 2]` made the whole profile unreadable, so load_kernel ignored
    every tuned entry in it; only `autotune bench`, which merges ceilings into them, refuses."""
    path = tmp_path / "dev.yaml"
    text = ("device: {name: x, ceilings: none}\nkernels:\n  mm:\n"
            "    - {problem: {N: 1}, params: {TS: 8}, time_ms: 1.0, spec_hash: h1}\n")
    path.write_text(text)
    assert len(profiles.entries(profiles.read(path), "mm")) == 1
    message = r"dev.yaml: device.ceilings: expected a mapping of ceiling names .*got 'none'"
    with pytest.raises(ProfileError, match=message):
        profiles.save_ceilings({"copy": {"value": 1.0, "unit": "GB/s"}}, {"name": "x"}, path)
    assert path.read_text() == text
    profiles.save(entry({"N": 64}, 1.0), "mm", {"name": "x"}, path)  # an entry's save keeps them as they are
    assert profiles.read(path)["device"]["ceilings"] == "none"


@pytest.mark.parametrize("block", ["", "5", "{}", "{a: 1}"])
def test_a_kernel_with_no_list_of_entries_hides_only_its_own(tmp_path, block):
    """Trial 99: `mul1:` left with nothing under it (its entries deleted), or `mul1: 5`, made
    the whole profile unreadable, so load_kernel ignored every other kernel's tuned entries."""
    path = tmp_path / "dev.yaml"
    text = (f"device: {{name: x}}\nkernels:\n  other: {block}\n  mm:\n"
            "    - {problem: {N: 1}, params: {TS: 8}, time_ms: 1.0, spec_hash: h1}\n")
    path.write_text(text)
    doc = profiles.read(path)
    assert len(profiles.entries(doc, "mm")) == 1
    profiles.save(entry({"N": 64}, 1.0), "mm", {"name": "x"}, path)
    assert len(profiles.entries(profiles.read(path), "mm")) == 2
    if not block:  # no entries, as `kernels:` with nothing under it is no kernels
        assert profiles.entries(doc, "other") == []
        profiles.save(entry({"N": 64}, 1.0), "other", {"name": "x"}, path)
        assert len(profiles.entries(profiles.read(path), "other")) == 1
        return
    message = r"dev.yaml: kernels.other is \S+( 1})?, not a list of entries; write each entry under it as a list item"
    with pytest.raises(ProfileError, match=message):
        profiles.entries(doc, "other", str(path))
    skipped: list[ProfileError] = []
    assert profiles.entries(doc, "other", str(path), on_error=skipped.append) == [] and len(skipped) == 1
    before = path.read_bytes()
    with pytest.raises(ProfileError, match=message):  # never overwritten: a person's to fix
        profiles.save(entry({"N": 64}, 1.0), "other", {"name": "x"}, path)
    assert path.read_bytes() == before


def test_a_run_here_replaces_an_entry_measured_on_another_device_even_if_slower(tmp_path):
    """Trial 31: a copied profile's entry, faster on its own machine, was kept over every run
    here, though load_kernel's warning named that run as the fix."""
    path = tmp_path / "dev.yaml"
    other = {"name": "AMD EPYC 9999", "device_type": "CPU", "compute_units": 64}
    mine = {"name": "AMD EPYC", "device_type": "CPU", "compute_units": 2}
    profiles.save(entry({"N": 64}, 0.002), "mm", other, path)
    verdict = profiles.save(entry({"N": 64}, 0.01, study="s2"), "mm", mine, path)
    assert verdict == "replaced an entry measured on AMD EPYC 9999 (CPU, 64 compute units)"
    (kept,) = profiles.entries(profiles.read(path), "mm")
    assert kept.time_ms == 0.01 and profiles.written_for_another(kept.device, mine) is None
    pick = replace(entry({"N": 64}, 0.5, study=None), picked=True)
    assert profiles.save(pick, "mm", other, path) == "kept", "a pick never displaces a tuned entry"
    assert profiles.save(entry({"N": 64}, 0.02, study="s3"), "mm", mine, path) == "kept", "measured here: by time"


@pytest.mark.parametrize("field, message", [
    ("time_ms: .nan", "time_ms is nan, not a positive number of ms"),
    ("time_ms: .inf", "time_ms is inf, not a positive number of ms"),
    ("time_ms: 0", "time_ms is 0, not a positive number of ms"),
    ("time_ms: -5", "time_ms is -5, not a positive number of ms"),
    ("time_ms: 1.0, trials: -3", "trials is -3, not a whole number of 0 or more"),
    # trial 95: Python's words, and no field named
    ("time_ms: 1.0, params: [1, 2]", "params is \\[1, 2\\], not a mapping of parameter names to values"),
    ("time_ms: 1.0, trials: five", "trials is 'five', not a whole number of 0 or more"),
    # trial 97: each read as something else
    ("time_ms: 1.0, build_flags: -O2", "build_flags is '-O2', not a list of flags as text"),
    ("time_ms: true", "time_ms is True, not a positive number of ms"),
    ("time_ms: 1.0, trials: 1.7", "trials is 1.7, not a whole number of 0 or more"),
    ("time_ms: 1.0, partial: 'no'", "partial is 'no', not true or false"),
    ("time_ms: 1.0, spread_ms: abc", "spread_ms is 'abc', not a list of two positive numbers of ms, the least first"),
    ("time_ms: 1.0, spread_ms: [1]", "spread_ms is \\[1\\], not a list of two positive numbers of ms, the least first"),
    ("time_ms: 1.0, baseline_ms: fast", "baseline_ms is 'fast', not a positive number of ms"),
    # trial 99: read, and show --json wrote NaN
    ("time_ms: 1.0, spread_ms: [.nan, .inf]", "spread_ms is \\[nan, inf\\], not a list of two positive numbers of "
                                              "ms, the least first"),
    ("time_ms: 1.0, error: .nan", "error is nan, not a finite number of 0 or more"),
    ("time_ms: 1.0, baseline_ms: -5", "baseline_ms is -5, not a positive number of ms"),
    (f"time_ms: 1.0, trials: {'9' * 400}", "trials is 9999.*, not a whole number of 0 or more"),
    ("time_ms: 1.0e+400", "time_ms is inf, not a positive number of ms"),
    # trial 101: read
    ("time_ms: 1.0, spread_ms: [2.0, 1.0]", "spread_ms is \\[2.0, 1.0\\], not a list of two positive numbers of ms, "
                                            "the least first"),
    ("time_ms: 1.0, throughput: {GB/s: .nan}", "throughput is \\{'GB/s': nan\\}, not a mapping of metric names to "
                                               "finite numbers of 0 or more"),
    ("time_ms: 1.0e308", "time_ms is '1.0e308', not a positive number of ms \\(YAML reads it as text: write it "
                         "with a point and a signed exponent, such as 1.0e\\+3\\)"),
    ("time_ms: '12'", "time_ms is '12', not a positive number of ms \\(text, in quotes: write it without them\\)"),
    ("time_ms: nan", "time_ms is 'nan', not a positive number of ms"),  # trial 102: told to write an exponent
    # trial 104: told to unquote the unquoted, and to unquote a number the field refuses as well
    ("time_ms: '1.5e+3'", "time_ms is '1.5e\\+3', not a positive number of ms \\(text, in quotes: write it "
                          "without them\\)"),
    ("time_ms: \uff11\uff12", "time_ms is '\uff11\uff12', not a positive number of ms \\(it holds a digit that is "
                                "not ASCII, U\\+FF11: write the number with 0-9 alone\\)"),
    ("time_ms: '12\u00a0'", "time_ms is '12\\\\xa0', not a positive number of ms \\(it holds a space that is not "
                            "ASCII, U\\+00A0: write the number with 0-9 alone\\)"),  # trial 105
    ("time_ms: '-5'", "time_ms is '-5', not a positive number of ms \\(text, in quotes; and without them, -5 is not "
                      "that either\\)"),
    ("time_ms: 1.0, device: [[name, Other CPU]]", "device is \\[\\['name', 'Other CPU'\\]\\], not a mapping of the "
                                                  "device's facts"),  # trial 105: the header's taken instead
    ("time_ms: 1.0, params: [[TS, 8]]", "params is \\[\\['TS', 8\\]\\], not a mapping of parameter names to values"),
])
def test_an_entry_whose_time_is_not_a_positive_number_is_malformed(tmp_path, field, message):
    """Trial 31: show listed such entries as times, and load_kernel used them as tuned."""
    path = tmp_path / "dev.yaml"
    fields = f"{field}, params: {{TS: 8}}" if "params" not in field else field
    path.write_text(f"kernels:\n  mm:\n    - {{problem: {{N: 1}}, {fields}, spec_hash: h1}}\n")
    with pytest.raises(ProfileError, match=rf"kernels.mm\[0\] \(N=1\): malformed entry \({message}\)"):
        profiles.read(path)


def test_an_entry_whose_problem_is_a_list_of_pairs_is_malformed(tmp_path):
    """Trial 104: dict() read [[N, 4096]] as {N: 4096}, and show listed the entry as usable."""
    path = tmp_path / "dev.yaml"
    path.write_text("kernels:\n  mm:\n    - {problem: [[N, 1]], params: {TS: 8}, time_ms: 1.0, spec_hash: h1}\n")
    with pytest.raises(ProfileError, match=r"kernels.mm\[0\]: malformed entry \(problem is \[\['N', 1\]\], not a "
                       r"mapping of problem keys to values\)"):
        profiles.read(path)
    assert profiles.entries_in([(path, profiles.read(path, check_entries=False))], "mm", lambda exc: None) == []


def _save_many(path, kernel, n):
    for i in range(n):
        profiles.save(entry({"N": 2 ** (i + 1)}, 1.0), kernel, {"name": "Dev"}, path)


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "dev.yaml"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_save_many, args=(path, f"k{i}", 15)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    doc = profiles.read(path)
    assert {k: len(v) for k, v in doc["kernels"].items()} == {"k0": 15, "k1": 15, "k2": 15}


def test_ranked_puts_the_nearest_problem_first_and_drops_other_layouts():
    es = [entry({"N": 64, "layout": "row"}, 1.0, params={"TS": 64}),
          entry({"N": 1024, "layout": "row"}, 1.0, params={"TS": 128}),
          entry({"N": 512, "layout": "col"}, 1.0),
          entry({"N": 700, "layout": "row"}, 1.0, spec_hash="old", params={"TS": 8})]
    ranked = profiles.ranked(es, {"N": 700, "layout": "row"}, "h1")
    assert [e.params["TS"] for e in ranked] == [8, 128, 64]  # exact (even if stale), then by distance
    assert profiles.ranked(es, {"N": 512, "layout": "diag"}, "h1") == []


def test_a_pick_never_displaces_a_tuned_entry_and_a_tuned_one_always_displaces_a_pick():
    tuned, picked = entry({"N": 64}, 2.0), replace(entry({"N": 64}, 1.0), picked=True)
    doc, verdict = profiles.merge({}, "k", tuned)
    assert profiles.merge(doc, "k", picked)[1] == "kept"  # faster, but only picked
    # a pick of another version of the spec goes beside it: each version uses its own, so
    # reverting the edit brings the tuned one back, and until then the pick is not re-timed
    beside, verdict = profiles.merge(doc, "k", replace(picked, spec_hash="h2"))
    assert verdict == "added beside the entry tuned for another version of the spec"
    assert [(e.spec_hash, e.picked) for e in profiles.entries(beside, "k")] == [("h1", False), ("h2", True)]
    assert profiles.merge(beside, "k", replace(picked, spec_hash="h2", time_ms=0.5))[1] == "replaced"
    # a tuning run of either version replaces both: its own, and the other version's
    for version in ("h1", "h2", "h3"):
        after, verdict = profiles.merge(beside, "k", replace(tuned, spec_hash=version, time_ms=9.0))
        assert [(e.spec_hash, e.picked) for e in profiles.entries(after, "k")] == [(version, False)], verdict
    doc, _ = profiles.merge({}, "k", picked)
    doc, verdict = profiles.merge(doc, "k", replace(tuned, time_ms=3.0))
    assert verdict == "replaced" and not profiles.entries(doc, "k")[0].picked
    assert profiles.entries(profiles.merge({}, "k", picked)[0], "k")[0].picked  # survives YAML


def test_an_emptied_profile_is_reported_with_its_backup_and_never_overwritten(tmp_path):
    path = tmp_path / "dev.yaml"
    profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path)
    profiles.save(entry({"N": 128}, 2.0), "mm", {"name": "Dev"}, path)  # .bak holds N=64
    path.write_text("")  # truncated, say by a full disk
    with pytest.raises(ProfileError, match=r"dev.yaml is empty, but dev.yaml.bak holds the profile .*restore it"):
        profiles.save(entry({"N": 256}, 2.0), "mm", {"name": "Dev"}, path)
    assert path.read_text() == ""
    backup = profiles.entries(profiles.read(tmp_path / "dev.yaml.bak"), "mm")
    assert [dict(e.problem) for e in backup] == [{"N": 64}], "the good backup survived"
    (tmp_path / "dev.yaml.bak").unlink()  # an empty file with no backup is an empty profile
    assert profiles.save(entry({"N": 256}, 2.0), "mm", {"name": "Dev"}, path) == "added"


def test_a_nan_time_is_replaced_and_a_kept_entry_counts_the_new_trials():
    doc, _ = profiles.merge({}, "mm", entry({"N": 64}, float("nan")))
    doc, verdict = profiles.merge(doc, "mm", entry({"N": 64}, 5.0))
    assert verdict == ("added; removed a malformed entry for its problem (kernels.mm[0] (N=64): malformed entry "
                       "(time_ms is nan, not a positive number of ms))") and doc["kernels"]["mm"][0]["time_ms"] == 5.0
    more = profiles.Entry(**{**entry({"N": 64}, 9.0, partial=True).__dict__, "trials": 25})  # a stopped run
    doc, verdict = profiles.merge(doc, "mm", more)
    assert verdict == "kept (trial count updated)"
    assert doc["kernels"]["mm"][0]["time_ms"] == 5.0 and doc["kernels"]["mm"][0]["trials"] == 25


def test_every_malformed_entry_a_save_removes_is_named():
    """Trial 86: of two malformed entries of one problem, both were removed and one was named."""
    doc, _ = profiles.merge({}, "mm", entry({"N": 64}, float("nan")))
    doc["kernels"]["mm"].append({**doc["kernels"]["mm"][0], "time_ms": "fast"})
    doc, verdict = profiles.merge(doc, "mm", entry({"N": 64}, 5.0))
    assert verdict.count("removed a malformed entry for its problem") == 2 and "fast" in verdict, verdict
    assert [e["time_ms"] for e in doc["kernels"]["mm"]] == [5.0]


def test_a_first_use_pick_leaves_a_malformed_entry_of_its_problem_for_a_person_to_fix():
    """Trial 72: a tuned entry with a mistyped time (``time_ms: 0,0015``) was replaced by the pick
    load_kernel made without it, 4.4x slower, while the warning said to fix that entry."""
    doc, _ = profiles.merge({}, "mm", entry({"N": 64}, 1.0))
    doc["kernels"]["mm"][0]["time_ms"] = "0,0015"
    pick = profiles.Entry(**{**entry({"N": 64}, 3.0).__dict__, "picked": True})
    doc, verdict = profiles.merge(doc, "mm", pick)
    assert verdict == "added" and [e.get("time_ms") for e in doc["kernels"]["mm"]] == ["0,0015", 3.0]
    doc, verdict = profiles.merge(doc, "mm", entry({"N": 64}, 2.0))  # a tuning run's result replaces it
    assert verdict.startswith("replaced") and "removed a malformed entry" in verdict
    assert [e["time_ms"] for e in doc["kernels"]["mm"]] == [2.0]


def test_a_profile_is_parsed_from_the_bytes_its_cache_compares(tmp_path, monkeypatch):
    """Trial 48: read() compared the file's bytes, then parsed the file again: one replaced in
    between was cached as the other version's document, and served when the file went back."""
    path = tmp_path / "dev.yaml"
    entry = profiles.Entry(problem={"N": 64}, params={"TS": 8}, build_flags=(), time_ms=1.0, throughput={},
                           trials=3, tuned_at="2026-11-21T00:00:00Z", spec_hash="x")
    profiles.save(entry, "k", {"name": "dev"}, path)
    first = path.read_bytes()
    swapped = first.replace(b"time_ms: 1.0", b"time_ms: 9.0")
    real = Path.read_bytes

    def replaced_after_reading(self: Path) -> bytes:  # the file is swapped the moment it was read
        data = real(self)
        if self == path:
            path.write_bytes(swapped)
        return data

    monkeypatch.setattr(Path, "read_bytes", replaced_after_reading)
    assert profiles.read(path)["kernels"]["k"][0]["time_ms"] == 1.0, "the document of the bytes compared"
    monkeypatch.setattr(Path, "read_bytes", real)
    path.write_bytes(first)
    assert profiles.read(path)["kernels"]["k"][0]["time_ms"] == 1.0
    path.write_bytes(swapped)
    assert profiles.read(path)["kernels"]["k"][0]["time_ms"] == 9.0


def test_the_study_database_is_made_with_the_umask(tmp_path):
    """Trial 44: SQLite made studies.db 0644 whatever the umask, so a group's shared
    AUTOTUNE_HOME (umask 002) refused its other members."""
    import os
    import stat

    from autotune.study import open_storage

    old = os.umask(0o002)
    try:
        open_storage(f"sqlite:///{tmp_path / 'studies.db'}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "studies.db").stat().st_mode) == 0o664


def test_profiles_are_written_with_the_umask_and_reject_text_throughput(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, tmp_path / "dev.yaml")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "dev.yaml").stat().st_mode) == 0o644
    bad = tmp_path / "bad.yaml"
    bad.write_text("kernels:\n  mm:\n  - {problem: {N: 1}, params: {}, time_ms: 1, spec_hash: h,"
                   " throughput: {GFLOP/s: fast}}\n")
    with pytest.raises(ProfileError, match="malformed entry"):
        profiles.read(bad)


def test_a_profile_that_cannot_be_read_is_a_profile_error_not_a_traceback(tmp_path, monkeypatch):
    """A folder where the profile should be (or a file without read permission) is named, with
    the fix; load_kernel then ignores the profile with a warning (tests/test_choose.py)."""
    import warnings

    from autotune import loader
    from autotune import spec as specs
    from conftest import FAKE

    path = profiles.path_for(FAKE.slug, tmp_path)
    path.mkdir()
    with pytest.raises(ProfileError, match=r"cannot read .*fakecorp-fake-gpu-9000\.yaml \(it is a folder\); "
                                           r"move it away or make it a readable file"):
        profiles.read(path)
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    mm = specs.load("matmul")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen = loader.choose(mm, FAKE, mm.resolve_problem({"M": 512}), [tmp_path])
    assert chosen.origin == "default"
    assert any("ignoring profile: cannot read" in str(w.message) for w in caught)


def test_a_value_shared_by_entries_is_written_out_in_each_so_deleting_one_by_hand_breaks_nothing(tmp_path):
    """Trial 23: entries sharing one device record were written as an anchor and aliases; the
    entry holding the anchor deleted by hand made the whole profile unreadable."""
    path, shared = tmp_path / "dev.yaml", {"name": "Other", "compute_units": 64}
    profiles.update(path, lambda doc: ({"device": {"name": "Dev"}, "kernels": {"mm": [
        {**entry({"N": n}, 1.0).to_yaml(), "device": shared} for n in (64, 128)]}}, "added"))
    text = path.read_text()
    assert "&" not in text and "*" not in text
    first = text.index("- problem")
    path.write_text(text[:first] + text[text.index("- problem", first + 1):])  # the first entry deleted
    assert [e.device for e in profiles.entries(profiles.read(path), "mm")] == [shared]


def test_a_profile_that_is_a_link_is_written_through_and_a_link_to_no_file_is_named(tmp_path):
    """Trial 26: a profile linked to a shared file became a file of its own at the next save
    (the shared one unchanged); one linked to /dev/null was "empty, restore the .bak with cp",
    which wrote into /dev/null."""
    shared = tmp_path / "shared" / "p.yaml"
    shared.parent.mkdir()
    profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, shared)
    link = tmp_path / "dev.yaml"
    link.symlink_to(shared)
    assert profiles.save(entry({"N": 128}, 1.0), "mm", {"name": "Dev"}, link) == "added"
    assert link.is_symlink()
    assert sorted(e.problem["N"] for e in profiles.entries(profiles.read(shared), "mm")) == [64, 128]
    dangling = tmp_path / "new.yaml"  # trial 33: the link to a profile not made yet became a file
    dangling.symlink_to(tmp_path / "shared" / "later" / "q.yaml")
    assert profiles.save(entry({"N": 32}, 1.0), "mm", {"name": "Dev"}, dangling) == "added"
    made = profiles.read(tmp_path / "shared" / "later" / "q.yaml")
    assert dangling.is_symlink() and [e.problem["N"] for e in profiles.entries(made, "mm")] == [32]
    null = tmp_path / "null.yaml"
    null.symlink_to("/dev/null")
    for call in (lambda: profiles.read(null), lambda: profiles.save(entry({"N": 8}, 1.0), "mm", {}, null)):
        with pytest.raises(ProfileError, match=rf"^{null} is a link to /dev/null, not to a file; remove the link"):
            call()
    assert null.is_symlink()


def test_a_profile_written_in_place_while_a_save_merges_is_read_again(tmp_path, monkeypatch):
    """Trial 39: an editor that saves in place (truncate, then write) takes no lock; a pick saved
    between its two writes merged into the half-written file, the rest of the person's save went
    to the file the rename unlinked, and a tuned entry was lost, .bak included."""
    path, edited = tmp_path / "dev.yaml", tmp_path / "edited.yaml"
    profiles.save(entry({"N": 1}, 2.0), "mm", {"name": "Dev"}, path)
    profiles.save(entry({"N": 1}, 2.0), "mm", {"name": "Dev"}, edited)
    profiles.save(entry({"N": 2}, 2.0), "mm", {"name": "Dev"}, edited)  # the person's save adds N=2
    head, whole = path.read_text(), edited.read_text()
    assert whole.startswith(head)
    real_read, reads = profiles.read, []

    def read_during_the_edit(p, **kw):
        doc = real_read(p, **kw)
        if not reads:  # the editor's second write lands while the save merges
            with open(p, "a", encoding="utf-8") as f:
                f.write(whole[len(head):])
        reads.append(p)
        return doc

    monkeypatch.setattr(profiles, "read", read_during_the_edit)
    assert profiles.save(entry({"N": 3}, 2.0), "mm", {"name": "Dev"}, path) == "added"
    monkeypatch.setattr(profiles, "read", real_read)
    assert len(reads) == 2
    assert sorted(e.problem["N"] for e in profiles.entries(profiles.read(path), "mm")) == [1, 2, 3]


def test_a_profile_on_a_read_only_mount_is_named_so(tmp_path, monkeypatch):
    """Trial 39: the advice was chmod u+w or chattr -i, which a read-only mount ignores."""
    import os
    from types import SimpleNamespace

    path = tmp_path / "dev.yaml"
    profiles.save(entry({"N": 1}, 2.0), "mm", {"name": "Dev"}, path)
    monkeypatch.setattr(os, "statvfs", lambda p: SimpleNamespace(f_flag=os.ST_RDONLY))
    with pytest.raises(ProfileError, match=r"dev.yaml is on a read-only file system, so results cannot be saved to "
                                           r"it; set AUTOTUNE_HOME to a folder on a writable one, or pass --no-save "
                                           r"--storage :memory:"):
        profiles.check_writable(path)


def test_a_profile_with_git_conflict_markers_is_named_as_such_with_the_line(tmp_path):
    """Trial 72: a pull's conflict was called a corrupt profile, with advice to restore the .bak."""
    path = tmp_path / "dev.yaml"
    profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path)
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "time_ms" in line)
    lines[at:at + 1] = ["<<<<<<< HEAD", lines[at], "=======", lines[at].replace("2.0", "1.5"), ">>>>>>> 1a2b3c"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ProfileError, match=rf"dev.yaml:{at + 1}: an unresolved merge conflict .*merge_profile.py"):
        profiles.read(path)


def test_a_profile_whose_lock_another_process_holds_is_said_so(tmp_path):
    """Trial 72: "cannot write dev.yaml (None)": the file was writable, its lock held."""
    import fcntl

    path = tmp_path / "dev.yaml"
    with open(str(path) + ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as another process's save, or a stuck one, holds it
        with pytest.raises(ProfileError, match=r"cannot write .*dev.yaml \(another process has held its lock, "
                                               r"dev.yaml.lock, for 0.2 s"):
            profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path, wait_s=0.2)
        # a longer wait is said as it starts (trial 73: a run waited a minute at its end unsaid)
        with pytest.warns(AutotuneWarning, match=r"dev.yaml: another process holds its lock \(dev.yaml.lock\); "
                                                 r"waiting up to 1.3 s"):
            with pytest.raises(ProfileError, match=r"for 1.3 s"):
                profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path, wait_s=1.3)
    assert profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path, wait_s=0.2) == "added"


def test_a_stop_while_a_save_waits_for_the_lock_ends_the_wait_and_a_run_exits_as_stopped(tmp_path, monkeypatch):
    """Trial 83: Ctrl-C or SIGTERM while a run waited for another process's save was noted only:
    the run waited out the minute, saved, and exited 0."""
    import fcntl
    import signal
    import threading
    import time

    from autotune import stops
    from autotune.errors import SaveStopped

    path = tmp_path / "dev.yaml"
    with open(str(path) + ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        stops._note_stop(signal.SIGINT, None)  # the stop that ended the search: the save still waits for it
        threading.Timer(1.5, stops._note_stop, (signal.SIGTERM, None)).start()  # a stop during the wait
        t0 = time.monotonic()
        with pytest.warns(AutotuneWarning, match="waiting up to 60 s"), pytest.raises(
                SaveStopped, match=r"^stopped while another process held dev.yaml's lock \(dev.yaml.lock\)$"):
            profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path)
        assert 1.5 <= time.monotonic() - t0 < 3, "ended at the stop, not the minute"
    stops._REQUESTED.clear()
    assert not path.exists()


def test_a_profile_that_cannot_be_read_is_not_called_read_only(tmp_path, monkeypatch):
    """Trial 71: bench on a mode-000 profile said its ceilings were not kept as it is read-only."""
    import os

    path = tmp_path / "dev.yaml"
    profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.R_OK and real(p, mode) if str(p) == str(path)
                        else real(p, mode))  # as a user without read permission (root has it)
    with pytest.raises(ProfileError, match=r"dev.yaml cannot be read, so results cannot be merged into it; make it "
                                           r"readable and writable to you"):
        profiles.save_ceilings({"copy bandwidth": {"value": 1.0, "unit": "GB/s"}}, {"name": "Dev"}, path)


def test_a_save_the_system_refuses_says_the_fix(tmp_path, monkeypatch):
    """Trial 72: load_kernel's "not saved: cannot write X (Permission denied)" named no fix."""
    import errno

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(profiles, "update", refused)
    with pytest.raises(ProfileError, match=r"cannot write .*dev.yaml \(Permission denied\); make it and its folder "
                                           r"writable to you, or set AUTOTUNE_HOME to another folder"):
        profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, tmp_path / "dev.yaml")


def test_a_top_level_key_a_person_added_survives_a_save(tmp_path):
    """Trial 72: `notes: {owner: perf-team}` at the top of a profile was dropped by the next run."""
    import yaml

    path = tmp_path / "dev.yaml"
    profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path)
    path.write_text("notes: {owner: perf-team}\n" + path.read_text())
    profiles.save(entry({"N": 128}, 2.0), "mm", {"name": "Dev"}, path)
    doc = yaml.safe_load(path.read_text())
    assert doc["notes"] == {"owner": "perf-team"} and len(doc["kernels"]["mm"]) == 2


def test_a_save_keeps_the_profiles_mode(tmp_path):
    """Trial 77: in a group's AUTOTUNE_HOME (mode 664 profiles), one member's save under umask
    022 made the profile 644 and locked the other members out."""
    import os
    import stat

    path = tmp_path / "dev.yaml"
    profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path)
    path.chmod(0o664)
    (tmp_path / "dev.yaml.lock").unlink()
    previous = os.umask(0o022)
    try:
        profiles.save(entry({"N": 128}, 2.0), "mm", {"name": "Dev"}, path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o664
    # its lock file and backup too (trial 79: a 0644 lock refused the group's other members)
    assert stat.S_IMODE((tmp_path / "dev.yaml.lock").stat().st_mode) == 0o664
    assert stat.S_IMODE((tmp_path / "dev.yaml.bak").stat().st_mode) == 0o664


def test_site_profile_folders_are_looked_up_after_the_users_and_before_the_shipped(tmp_path, monkeypatch):
    """Trial 77: an HPC centre had no documented way to publish tuned entries of the built-in
    kernels for every user; $AUTOTUNE_SITE_PROFILES names such folders."""
    import os

    from autotune import settings
    from autotune.resources import data_dir

    monkeypatch.setattr(settings, "_WARNED", set())  # once a process: this test's own
    user, site, other = tmp_path / "me", tmp_path / "site", tmp_path / "site2"
    monkeypatch.setenv("AUTOTUNE_SITE_PROFILES", os.pathsep.join([str(site), "relative/ignored", "", str(other)]))
    with pytest.warns(AutotuneWarning, match=r"'relative/ignored' is not an absolute path .*: left out"):
        assert profiles.search_folders(user) == [user, site, other, data_dir("profiles")]
    spec_file = tmp_path / "app" / "k.yaml"
    assert profiles.search_folders(user, spec_file) == [user, spec_file.parent / "profiles", site, other,
                                                        data_dir("profiles")]
    monkeypatch.setenv("AUTOTUNE_SITE_PROFILES", str(tmp_path / "elsewhere" / ".." / "me"))  # the user's, as named
    assert profiles.search_folders(user) == [user, data_dir("profiles")]  # once (trial 79)
    monkeypatch.delenv("AUTOTUNE_SITE_PROFILES")
    assert profiles.search_folders(user) == [user, data_dir("profiles")]


def test_a_profile_in_a_folder_closed_to_the_user_is_a_profile_error(tmp_path, monkeypatch):
    """Trial 79: a site profile folder of mode 0700 (root's) gave a PermissionError traceback in
    show, run, bench and load_kernel; as a ProfileError the readers skip it, saying so."""
    from pathlib import Path

    path = tmp_path / "site" / "dev.yaml"
    real = Path.exists

    def closed(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", closed)
    with pytest.raises(ProfileError, match=r"dev.yaml cannot be read \(Permission denied\): its folder is closed"):
        profiles.read(path)
    broken = []
    assert profiles.collect("mm", "dev", [tmp_path / "site"], broken.append) == [] and len(broken) == 1


def test_a_save_removes_what_a_save_killed_mid_way_left_and_only_that(tmp_path, monkeypatch):
    """Trial 92: each SIGKILL during a save left its temporary profile or backup beside the
    profile for good; a save under way in another process (its files seconds old) is left be."""
    import os
    import time

    path = tmp_path / "dev.yaml"
    profiles.save(entry({"N": 64}, 2.0), "mm", {"name": "Dev"}, path)
    killed = [tmp_path / ".dev.yaml.abcd1234", tmp_path / ".dev.yaml.efgh5678.bak"]
    for stray in killed:
        stray.write_text("kernels: {}\n")
    other = tmp_path / ".other.yaml.abcd1234"
    other.write_text("x")
    profiles.save(entry({"N": 128}, 2.0), "mm", {"name": "Dev"}, path)
    assert all(stray.exists() for stray in killed), "as new as a save under way: left be"
    monkeypatch.setattr(time, "time", lambda: os.stat(path).st_ctime + profiles.STRAY_S + 1)
    profiles.save(entry({"N": 256}, 2.0), "mm", {"name": "Dev"}, path)
    assert not any(stray.exists() for stray in killed) and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.yaml.abcd1234", "dev.yaml", "dev.yaml.bak",
                                                          "dev.yaml.lock"]
    assert len(profiles.entries(profiles.read(path), "mm")) == 3


@pytest.mark.parametrize("text", ["kernels:\n\tmm: []\n", "device: {name: x}\nkernels:\n  mm:\n\t- {problem: {}}\n"])
def test_a_tab_in_the_indentation_is_named_as_one(tmp_path, text):
    """Trial 95: a tab was "found character that cannot start any token"."""
    path = tmp_path / "dev.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=r"dev.yaml:\d: corrupt profile \(a tab character: YAML indents with "
                                           r"spaces only; replace the tabs with spaces\)"):
        profiles.read(path)


def test_a_lock_this_user_cannot_open_in_its_own_folder_is_said_to_be_immutable(tmp_path, monkeypatch):
    """Trial 106: under `chattr +i` the owner was told to ask the owner to make it writable."""
    import os

    def refused(lock, path, wait_s):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(profiles, "_acquire", refused)
    path = tmp_path / "dev.yaml"
    with pytest.raises(ProfileError, match=rf"lock file, dev.yaml.lock, cannot be opened by you \(Permission denied\); "
                       rf"it or {tmp_path} is yours, so it is likely immutable \(lsattr shows an i\): chattr -i "
                       r"it\)"):
        profiles.save(entry({"N": 1}, 1.0), "mm", {"name": "dev"}, path)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # another user's folder
    with pytest.raises(ProfileError, match="its owner can make it writable to you .*, or remove it while no save runs"):
        profiles.save(entry({"N": 1}, 1.0), "mm", {"name": "dev"}, path)


def test_a_replaced_entry_is_named_for_what_it_was_and_which_spec_file_made_it():
    """Trial 122: another spec file's first-use pick, replaced by a run, was "an entry tuned …
    with another version of the spec"."""
    theirs = replace(entry({"N": 64}, 1.0, spec_hash="h1"), picked=True, spec_file="/specs/b/saxpy.yaml")
    mine = replace(entry({"N": 64}, 2.0, spec_hash="h2"), spec_file="/specs/a/saxpy.yaml")
    doc, _ = profiles.merge({}, "saxpy", theirs)
    assert profiles.merge(doc, "saxpy", mine)[1].startswith(
        "replaced a first-use pick made 2026-11-21T00:00:00Z with another spec of this kernel's name "
        "(/specs/b/saxpy.yaml), ")
    doc, _ = profiles.merge({}, "saxpy", replace(theirs, picked=False, spec_file="builtin"))
    assert profiles.merge(doc, "saxpy", mine)[1].startswith(
        "replaced an entry tuned 2026-11-21T00:00:00Z with another spec of this kernel's name (autotune's own spec), ")
    # the same file, edited: another version of it; an entry that recorded no file is said so too
    doc, _ = profiles.merge({}, "saxpy", replace(theirs, spec_file=mine.spec_file))
    verdict = profiles.merge(doc, "saxpy", mine)[1]
    assert "a first-use pick made 2026-11-21T00:00:00Z with another version of the spec, " in verdict
    doc, _ = profiles.merge({}, "saxpy", replace(theirs, picked=False, spec_file=None))
    assert profiles.merge(doc, "saxpy", mine)[1].startswith("replaced an entry tuned 2026-11-21T00:00:00Z with "
                                                            "another version of the spec, ")
