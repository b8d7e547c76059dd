"""The constraint evaluator, launch-geometry checks and valid-space enumeration (no device)."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter

import pytest

from autotune import space
from autotune import spec as specs
from autotune.errors import SpecError
from autotune.space import (
    ValidSpace,
    check,
    closest_valid,
    config_key,
    enumerate_valid,
    geometry,
    none_valid,
    space_size,
)
from conftest import FAKE, SCALE_YAML, write_spec


@pytest.fixture
def scale(tmp_path):
    return specs.load(write_spec(tmp_path, SCALE_YAML))


def test_enumeration_matches_brute_force(scale):
    facts = FAKE.facts()
    problem = {"N": 256}
    valid = enumerate_valid(scale, problem, facts)
    brute = []
    for values in itertools.product(*(p.values for p in scale.parameters)):
        params = dict(zip(scale.parameter_names, values, strict=True))
        if check(scale, params, problem, facts) is None:
            brute.append(params)
    assert [config_key(c) for c in valid] == [config_key(c) for c in brute]
    assert 0 < len(valid) < space_size(scale)


def test_the_lazy_space_counts_draws_and_walks_exactly_the_valid_configurations(scale):
    facts = FAKE.facts()
    space = ValidSpace(scale, {"N": 256}, facts)
    valid = [config_key(c) for c in enumerate_valid(scale, {"N": 256}, facts)]
    assert [config_key(c) for c in space] == valid and space.count() == (len(valid), True)
    rng = random.Random(0)
    drawn = {config_key(space.draw(rng)) for _ in range(400)}
    assert drawn == set(valid)  # every valid configuration is reachable, nothing else


def test_draws_are_balanced_per_variant_and_reach_every_one():
    """correlate's swept variant has ~half the valid space, direct few: each is drawn ~1/3 of
    the time (the list capped at 500,000 held no swept configuration at all)."""
    sp = specs.load("correlate")
    space = ValidSpace(sp, sp.default_problem(), FAKE.facts())
    rng = random.Random(1)
    variants = Counter(space.draw(rng)["VARIANT"] for _ in range(150))
    assert set(variants) == {"direct", "local", "swept"} and min(variants.values()) >= 30


def _sum_spec(tmp_path, condition="P0 + P1 + P2 + P3 + P4 + P5 + P6 + P7 < 30"):
    """8 parameters of 10 values (10⁸ combinations), valid where ``condition`` holds (by
    default, where they sum to less than 30)."""
    params = "".join(f"  P{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" for i in range(8))
    text = SCALE_YAML.replace("  MODE: [0]\n", params).replace(
        'constraints:\n  - "(N // WPT) % WG == 0"',
        f'constraints:\n  - "(N // WPT) % WG == 0"\n  - "{condition}"')
    return specs.load(write_spec(tmp_path, text))


def test_a_space_too_large_to_count_is_estimated_and_marked(tmp_path):
    sp = _sum_spec(tmp_path)
    ways = [1]  # ways[s]: 8-tuples of digits summing to s, by dynamic programming
    for _ in range(8):
        ways = [sum(ways[s - d] for d in range(10) if 0 <= s - d < len(ways)) for s in range(len(ways) + 9)]
    base = len(enumerate_valid(specs.load(write_spec(tmp_path / "scale", SCALE_YAML)), {"N": 256}, FAKE.facts()))
    truth = base * sum(ways[:30])  # (WPT, WG) pairs times digit tuples
    estimate, exact = ValidSpace(sp, {"N": 256}, FAKE.facts()).count(budget_s=0.01)
    assert not exact and abs(estimate - truth) / truth < 0.25
    space = ValidSpace(sp, {"N": 256}, FAKE.facts())
    rng = random.Random(0)
    draws = [space.draw(rng) for _ in range(50)]
    assert all(c is not None and sum(c[f"P{i}"] for i in range(8)) < 30 for c in draws)


def test_a_sparse_or_empty_space_is_bounded_in_time_and_said(tmp_path):
    """Trial 82: with a constraint on every parameter that none of 10^8 combinations met, `run`
    walked the space in silence for 400 s, past its --timeout, before saying so."""
    import time

    from autotune.errors import ProblemError

    empty = _sum_spec(tmp_path, "P0 + P1 + P2 + P3 + P4 + P5 + P6 + P7 == 73")
    t0 = time.perf_counter()
    with pytest.raises(ProblemError, match=r"^scale: no valid configuration found in 0.3 s of walking its "
                                           r"5,000,000,000 combinations: its constraints leave few or none"):
        ValidSpace(empty, {"N": 256}, FAKE.facts()).first(0.3)
    count, exact = ValidSpace(empty, {"N": 256}, FAKE.facts()).count(budget_s=0.2)
    assert time.perf_counter() - t0 < 3 and (count, exact) == (0, False)


def test_a_paused_walk_goes_on_where_it_stopped_whatever_was_drawn_meanwhile(tmp_path):
    """Trial 88: a grid walk cut short by a draw's time limit began again from the start each
    time. Paused instead, it goes on from there, and draws between its steps (which bind other
    values) must not change what it yields."""
    sp = _sum_spec(tmp_path)
    plain = list(itertools.islice(ValidSpace(sp, {"N": 256}, FAKE.facts()), 3000))
    space = ValidSpace(sp, {"N": 256}, FAKE.facts())
    walk, rng, got, paused = space.paused_walk(), random.Random(0), [], 0
    while len(got) < 3000:
        space.deadline = 0.0 if not paused else float("inf")  # passed: it pauses at its next look
        c = next(walk)
        if c is None:
            paused += 1
            continue
        got.append(c)
        space.deadline = float("inf")
        if len(got) % 10 == 0:
            space.draw(rng)  # binds values of its own in the same space
    assert paused == 1 and got == plain


def test_a_parameter_with_very_many_values_is_estimated_within_its_budget(tmp_path):
    """Trial 82: 200,000 values of one parameter took 35 s to estimate (200 paths at least, each
    binding every value), past a 5 s --timeout."""
    import time

    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [0]\n  M: [" + ", ".join(map(str, range(200_000))) + "]")
    sp = specs.load(write_spec(tmp_path, text))
    t0 = time.perf_counter()
    count, exact = ValidSpace(sp, {"N": 256}, FAKE.facts()).count(budget_s=0.2)
    assert time.perf_counter() - t0 < 3 and not exact and count > 0


def test_device_limits_reject_before_building(scale):
    facts = FAKE.facts()  # max work-group 256
    assert "work-group 512 > device max 256" in check(scale, scale.complete({"WG": 512}), {"N": 1024}, facts)
    assert "constraint" in check(scale, scale.complete({"WPT": 16, "WG": 32}), {"N": 256}, facts)
    assert check(scale, scale.complete({"WPT": 2, "WG": 64}), {"N": 256}, facts) is None


def test_geometry_must_be_integral(tmp_path):
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["N / 3"]')))
    with pytest.raises(SpecError, match=r"launch\[0\].global: 'N / 3' gave 85.33.*use //"):
        geometry(sp, sp.complete({}), {"N": 256}, FAKE.facts())
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["G"]')
                               + 'derived:\n  G: "(N + 3) / 4 * 4"\n'))  # trial 98: the `/` in a derived value
    with pytest.raises(SpecError, match=r"'G' gave 259.0, not an integer; / is true division"):
        geometry(sp, sp.complete({}), {"N": 256}, FAKE.facts())
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["E if D > 0 else N"]')
                               + 'derived:\n  D: "N / 2"\n  E: "N * 1.0"\n'))  # trial 102: the `/` alone blamed
    with pytest.raises(SpecError, match=r"gave 256.0, not an integer; / is true division .*, and keep its other terms "
                                        r"integers"):
        geometry(sp, sp.complete({}), {"N": 256}, FAKE.facts())
    # trial 104: a value that is a float as it reads one made by `/` is no other float term
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["D2"]')
                               + 'derived:\n  D1: "N / WPT"\n  D2: "D1 + 0"\n'))
    with pytest.raises(SpecError, match=r"'D2' gave 256.0, not an integer; / is true division and gives a float: use "
                                        r"// for integer division$"):
        geometry(sp, sp.complete({"WPT": 1}), {"N": 256}, FAKE.facts())
    # trial 105: one that reads such a value and has a float term of its own is told of both
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["L + 0.5"]')
                               + 'derived:\n  L: "N / 2"\n'))
    with pytest.raises(SpecError, match=r"'L \+ 0.5' gave 128.5, not an integer; / is true division and gives a "
                                        r"float: use // for integer division, and keep its other terms integers$"):
        geometry(sp, sp.complete({}), {"N": 256}, FAKE.facts())
    # trial 101: a float term is no `/`
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["N * 1.0"]')))
    with pytest.raises(SpecError, match=r"'N \* 1.0' gave 256.0, not an integer; a float term makes it a float"):
        geometry(sp, sp.complete({}), {"N": 256}, FAKE.facts())
    # trial 98: a whole float is a `/` too, and may be the wrong whole number: (1024 + 4 - 1) / 4 * 4
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["(N + 3) / 4 * 4"]')))
    with pytest.raises(SpecError, match=r"launch\[0\].global: '\(N \+ 3\) / 4 \* 4' gave 259.0, not an integer; / is "
                                        r"true division and gives a float: use // for integer division"):
        geometry(sp, sp.complete({}), {"N": 256}, FAKE.facts())


@pytest.mark.parametrize("extra, reason", [
    ('scratch:\n  tmp: "N / 2"\n', r"scratch.tmp: 'N / 2' gave 128.0, not an integer; / is true division"),
    ('local_memory: "WG * 4 / 3"\n', r"local_memory: 'WG \* 4 / 3' gave 21.3+\d*, not a number of bytes; / is true "
                                     r"division"),
])
def test_a_size_expression_that_gives_no_size_is_the_spec_s_to_fix(tmp_path, extra, reason):
    """Trial 104: a scratch size's `/` was answered with the launch sizes' rules, and local
    memory's with "choose a problem the spec allows"."""
    sp = specs.load(write_spec(tmp_path, SCALE_YAML + extra))
    error = str(none_valid(sp, {"N": 256}, FAKE.facts(), "a CPU"))
    assert re.search(reason + r".*\); every configuration is ruled out for this problem: fix that expression in the "
                     r"spec$", error), error


def test_arithmetic_on_numbers_in_quotes_is_the_spec_s_to_fix(tmp_path):
    """Trial 105: `WG: ["16", "32"]` failed every constraint `% WG` with Python's words, and was
    told to choose a problem the spec allows."""
    text = SCALE_YAML.replace("WG: [16, 32, 64, 128, 512]", 'WG: ["16", "32"]')
    sp = specs.load(write_spec(tmp_path, text.replace("baseline: {WPT: 1, WG: 16}", 'baseline: {WPT: 1, WG: "16"}')))
    error = str(none_valid(sp, {"N": 256}, FAKE.facts(), "a CPU"))
    assert error.endswith("unsupported operand type(s) for %: 'int' and 'str'); every configuration is ruled out for "
                          "this problem: fix that expression in the spec: it computes with text and numbers (a number "
                          "in quotes among a parameter's values?)"), error


def test_a_when_that_has_no_value_is_named_by_its_own_key(tmp_path):
    """Trial 111: `when: "WG / 0"` was "constraints: '(WG / 0) or R == 1'", a constraint the spec
    does not have, and told to choose a problem the spec allows."""
    text = SCALE_YAML.replace("  WG: [16, 32, 64, 128, 512]\n", "  WG: [16, 32, 64, 128, 512]\n"
                                                                 "  R: {values: [1, 2], when: 'WG / 0'}\n")
    sp = specs.load(write_spec(tmp_path, text))
    error = str(none_valid(sp, {"N": 256}, FAKE.facts(), "a CPU"))
    assert error.endswith(": parameters.R.when: 'WG / 0': division by zero); every configuration is ruled out for "
                          "this problem: fix that expression in the spec: it has no value here"), error


def test_matmul_edge_rules():
    """Tiles need not divide the matrix, but must fit in it."""
    sp = specs.load("matmul")
    facts = FAKE.facts()
    tiled = sp.complete({"ALGO": "tiled", "MDIMC": 16, "NDIMC": 16, "MWG": 64, "NWG": 64, "KWG": 16, "VW": 4})
    assert check(sp, tiled, sp.resolve_problem({"M": 96, "N": 68, "K": 36}), facts) is None
    assert "constraint" in check(sp, tiled, sp.resolve_problem({"M": 63, "N": 64, "K": 64}), facts)
    assert "constraint" in check(sp, tiled, sp.resolve_problem({"M": 96, "N": 63, "K": 64}), facts)
    assert check(sp, tiled, sp.resolve_problem({"M": 96, "N": 65, "K": 65}), facts) is None


def test_closest_valid_changes_as_little_as_it_can():
    sp = specs.load("matmul")
    facts = FAKE.facts()
    default = sp.default_config  # 128 x 128 tiles, float4 loads
    assert closest_valid(sp, default, sp.resolve_problem({"M": 4097, "N": 4097, "K": 4097}), facts) == default
    small = sp.resolve_problem({"M": 100, "N": 100, "K": 100})
    near = closest_valid(sp, default, small, facts)
    assert near is not None and check(sp, near, small, facts) is None
    assert {k for k in default if near[k] != default[k]} == {"MWG", "NWG"}
    assert near["MWG"] == near["NWG"] == 64  # the nearest values that fit, not the first ones


@pytest.mark.parametrize("n", [37, 1])
def test_closest_valid_is_the_nearest_of_all_valid_configurations(n):
    """Trial 106: at 50^3 matmul's default is four parameters off any valid configuration, and
    finding the nearest took 4 s of listing the valid ones, in every process that loaded it (a
    search now: benchmarks/load_repeat.py times it)."""
    sp, facts = specs.load("matmul"), FAKE.facts()
    problem = sp.resolve_problem({"M": n, "N": n, "K": n})
    index = {p.name: {v: i for i, v in enumerate(p.values)} for p in sp.parameters}

    def cost(c):
        moves = [abs(index[k][c[k]] - index[k][sp.default_config[k]]) for k in index]
        return sum(1 for m in moves if m), sum(moves)

    near = closest_valid(sp, sp.default_config, problem, facts)
    every = enumerate_valid(sp, problem, facts, limit=10**7)
    assert near is not None and check(sp, near, problem, facts) is None
    assert cost(near) == min(map(cost, every))


def test_closest_valid_finds_one_change_where_a_constraint_settles_only_at_the_last_parameters(tmp_path):
    """Trial 107: eight parameters and a constraint naming them all: the search walked the whole
    subtree of the default's first value for 10 s, and load_kernel called every configuration
    invalid, where one change (A = 1) was valid."""
    params = "".join(f"  {n}: [1, 2, 3, 4, 5, 6, 7, 8]\n" for n in "ABCDEFGH")
    rule = '  - "A * WG <= 16 or B + C + D + E + F + G + H <= 6"'
    text = SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n" + params).replace(
        '  - "(N // WPT) % WG == 0"', '  - "(N // WPT) % WG == 0"\n' + rule)
    sp = specs.load(write_spec(tmp_path, text))
    default = sp.complete({n: 2 for n in "ABCDEFGH"} | {"WPT": 1, "WG": 16})
    assert check(sp, default, {"N": 256}, FAKE.facts()) is not None
    near = closest_valid(sp, default, {"N": 256}, FAKE.facts())
    assert near == {**default, "A": 1}


def test_local_memory_limit(tmp_path):
    text = SCALE_YAML.replace("args: [x, y]", "local_memory: \"WG * 1024\"\nargs: [x, y]")
    sp = specs.load(write_spec(tmp_path, text))
    assert "local memory" in check(sp, sp.complete({"WG": 64}), {"N": 256}, FAKE.facts())


def test_a_scratch_buffer_larger_than_the_device_allocates_rules_the_configuration_out(tmp_path):
    """Trial 45: `scratch: {t: "2**36"}` ended the run with pyopencl's INVALID_BUFFER_SIZE and a
    traceback; it is a configuration the device cannot run, as a work-group too large is."""
    from dataclasses import replace

    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [0]\n  BIG: [0, 1]").replace(
        "args: [x, y]", "args: [x, y]\nscratch: {t: \"4 * N + BIG * 2**36\"}")
    sp = specs.load(write_spec(tmp_path, text))
    facts = replace(FAKE, max_mem_alloc_size=2**34).facts()
    params = {**sp.default_config, "BIG": 1}
    assert check(sp, params, {"N": 256}, facts) == \
        f"scratch.t: {4 * 256 + 2**36} bytes > the device's largest allocation ({2**34} bytes)"
    assert check(sp, {**params, "BIG": 0}, {"N": 256}, facts) is None
    # trial 46: within the limit, but not with the guard zone measuring puts after it
    just = replace(FAKE, max_mem_alloc_size=4 * 256 + 2**36).facts()
    assert check(sp, params, {"N": 256}, just).startswith("scratch.t: ")


def test_a_parameter_a_configuration_ignores_does_not_rule_it_out_by_its_first_value(tmp_path):
    """Trial 45: a constraint on a parameter that only one variant uses was checked against
    that parameter's first value in the other variant too, which then had no valid
    configuration at all (only the baseline said so). A parameter a configuration ignores
    means nothing there, so a constraint naming it (or a derived name computed from it) holds
    where some value of it satisfies it; where the parameter is used, its own value must."""
    vectors = '  MODE: [0]\n  VEC: [0, 1]\n  VW: {values: [3, 2, 4], when: "VEC == 1"}\n'
    text = SCALE_YAML.replace("  MODE: [0]\n", vectors).replace('constraints:\n  - "(N // WPT) % WG == 0"',
                                        'derived:\n  LANES: VW * 1\nconstraints:\n  - "(N // WPT) % WG == 0"\n'
                                        '  - "WPT % LANES == 0"')
    sp = specs.load(write_spec(tmp_path, text))
    facts, problem = FAKE.facts(), {"N": 256}
    space = ValidSpace(sp, problem, facts)
    valid = list(space)
    assert {c["VEC"] for c in valid} == {0, 1}, "the variant without vectors is there"
    assert {c["VW"] for c in valid if c["VEC"] == 0} == {3}, "one copy of each: VW at its first value"
    assert all(c["WPT"] % c["VW"] == 0 for c in valid if c["VEC"] == 1), "checked where VW is used"
    assert check(sp, sp.complete({"VEC": 0, "WPT": 2, "WG": 16}), problem, facts) is None
    assert "WPT % LANES" in check(sp, sp.complete({"VEC": 1, "VW": 4, "WPT": 2, "WG": 16}), problem, facts)
    assert space.count() == (len(valid), True)
    rng = random.Random(0)
    drawn = {config_key(space.draw(rng)) for _ in range(1000)}
    assert drawn == {config_key(c) for c in valid}


def test_a_constraint_that_does_not_depend_on_an_ignored_parameter_there_is_as_strict_as_ever(tmp_path):
    """Trial 51: skipping every constraint that named an ignored parameter let through the
    configurations a derived ``VW if VEC == 1 else 1`` was written to rule out (they failed
    verification, and load_kernel's unverified choices trust the constraints)."""
    vectors = '  MODE: [0]\n  VEC: [0, 1]\n  VW: {values: [2, 4], when: "VEC == 1"}\n'
    text = SCALE_YAML.replace("  MODE: [0]\n", vectors).replace(
        'constraints:\n  - "(N // WPT) % WG == 0"',
        'derived:\n  EVW: "VW if VEC == 1 else 1"\nconstraints:\n  - "(N // WPT) % WG == 0"\n'
        '  - "WPT * EVW <= 8"')
    sp = specs.load(write_spec(tmp_path, text))
    facts, problem = FAKE.facts(), {"N": 256}
    valid = list(ValidSpace(sp, problem, facts))
    assert {c["VEC"] for c in valid} == {0, 1}
    assert all(c["WPT"] * (c["VW"] if c["VEC"] else 1) <= 8 for c in valid), valid
    assert "WPT * EVW <= 8" in check(sp, sp.complete({"VEC": 0, "WPT": 16, "WG": 16}), problem, facts)


def test_an_ignored_parameters_many_values_are_searched_once_per_case(tmp_path, monkeypatch):
    """Trial 53: past 4,096 combinations of the ignored parameters' values the search gave up
    and ruled the configuration out (the baseline and default then called invalid), and each
    check of such a configuration took 23 ms."""
    tiles = "".join(f'  T{i}: {{values: [64, 32, 16, 8, 4, 2, 3, 5, 1], when: "MODE == 1"}}\n' for i in range(4))
    text = SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0, 1]\n" + tiles).replace(
        'constraints:\n  - "(N // WPT) % WG == 0"', 'constraints:\n  - "(N // WPT) % WG == 0"\n'
        '  - "T0 * T1 * T2 * T3 <= WG // 16"')
    sp = specs.load(write_spec(tmp_path, text))
    facts, problem = FAKE.facts(), {"N": 256}
    assert check(sp, sp.complete({"MODE": 0, "WG": 16}), problem, facts) is None  # 1 * 1 * 1 * 1 <= 1
    searched = []
    real = space._some_value
    monkeypatch.setattr(space, "_some_value", lambda *a: searched.append(a[1].source) or real(*a))
    for wpt in (1, 2, 4, 8):
        for wg in (32, 64, 128):
            check(sp, sp.complete({"MODE": 0, "WG": wg, "WPT": wpt}), problem, facts)
    assert len(searched) == 3, "once per value of what the constraint reads besides them (WG), not per WPT"


def _variant_spec(tmp_path):
    """``_sum_spec`` with a variant declared first, whose value ``b`` only a sum of 73 admits
    (none does): checked once every P is bound, so a walk of b's 10⁸ completions takes minutes."""
    text = SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  ALGO: [a, b]\n" + "".join(
        f"  P{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" for i in range(8))).replace(
        'constraints:\n  - "(N // WPT) % WG == 0"',
        'constraints:\n  - "(N // WPT) % WG == 0"\n  - "ALGO == \'a\' or P0 + P1 + P2 + P3 + P4 + P5 + P6 + P7 == 73"')
    return specs.load(write_spec(tmp_path, text))


def test_an_estimated_space_names_a_variant_none_of_whose_configurations_was_found_valid(tmp_path):
    """Trial 123: a variant that the constraints rule out, in a space too large to count, went
    unsaid (the values in no valid configuration were known only where the count was exact),
    and the run tuned the other variant alone without a word."""
    space = ValidSpace(_variant_spec(tmp_path), {"N": 256}, FAKE.facts())
    count, exact = space.count(budget_s=0.05)
    assert not exact and count > 0
    assert space.none_found == (("ALGO", "b"),), space.none_found
    assert space.unvalued() == (*(space.never_valid or ()), ("ALGO", "b"))
    # a value ruled out at its own level is searched to the end: known, not just unfound
    assert ("WG", 512) in (space.never_valid or ()) and ("WG", 512) not in space.none_found
    # trial 124: a draw that took b first walked its 10^8 completions to the run's deadline;
    # such values are tried last, so each draw finds one of a's at once
    import time

    space.deadline = time.perf_counter() + 5.0
    rng = random.Random(0)
    assert {space.draw(rng)["ALGO"] for _ in range(40)} == {"a"}
