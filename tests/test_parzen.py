"""TPE over valid configurations (autotune.parzen): what it proposes and how it learns (no device)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autotune import parzen
from autotune import spec as specs
from autotune.parzen import ParzenSearch
from autotune.space import ValidSpace, canonical, config_key
from conftest import FAKE

GPU = FAKE.facts()


@pytest.fixture(autouse=True)
def _small_pool(monkeypatch):
    """matmul's pool starts smaller than in a run: the draws are most of these tests' time."""
    monkeypatch.setattr(parzen, "POOL_START", 256)


def _matmul() -> ValidSpace:
    sp = specs.load("matmul")
    return ValidSpace(sp, sp.default_problem(), GPU)


def _draw(space: ValidSpace, rng: random.Random) -> dict:
    c = space.sample(rng)
    assert c is not None
    return c


def _distance(c, target) -> float:
    """A smooth time: how far each tile size is from the target's, in list positions."""
    params = {p.name: p.values for p in _matmul().spec.parameters}
    return 1.0 + sum(abs(params[n].index(c[n]) - params[n].index(target[n])) for n in ("MWG", "NWG", "MDIMC"))


def test_proposals_are_valid_canonical_unmeasured_and_run_out(tmp_path):
    sp = specs.load("reverse")
    space = ValidSpace(sp, sp.default_problem(), {"max_work_group_size": 256})
    model = ParzenSearch(space, seed=1)
    assert model.propose(seen=lambda c: False) is None  # nothing measured: no model yet
    measured: set[str] = set()
    every = {config_key(c) for c in space}
    first = space.first()
    assert first is not None
    model.observe(first, 1.0)
    measured.add(config_key(first))
    while (c := model.propose(seen=lambda c: config_key(c) in measured)) is not None:
        assert space.valid(c) and c == canonical(sp, c, space.problem, space.facts)
        assert config_key(c) not in measured
        measured.add(config_key(c))
        model.observe(c, random.Random(config_key(c)).random() if c["VW"] != 8 else math.inf)
    assert measured == every  # every valid configuration once, failures included, then None


def test_a_configuration_in_flight_is_not_proposed_again():
    space = _matmul()
    model = ParzenSearch(space, seed=0)
    draws = random.Random(0)
    for _ in range(10):
        c = _draw(space, draws)
        model.observe(c, 1.0)
    first = model.propose(seen=lambda c: False)
    second = model.propose(seen=lambda c: c == first)
    assert first is not None and second is not None and second != first


def test_it_proposes_near_the_fast_configurations(monkeypatch):
    """After 30 random measurements, TPE's next proposals are much nearer the fast region than
    uniform draws are (the model learned which values make a configuration fast)."""
    monkeypatch.setattr(parzen, "POOL_START", 1024)  # as in a run: a pool that holds near ones
    space = _matmul()
    draws = random.Random(3)
    target = {"MWG": 128, "NWG": 128, "MDIMC": 16}
    model = ParzenSearch(space, seed=3)
    measured: set[str] = set()
    for _ in range(30):
        c = _draw(space, draws)
        model.observe(c, _distance(c, target))
        measured.add(config_key(c))
    proposed = []
    for _ in range(20):
        c = model.propose(seen=lambda c: config_key(c) in measured)
        measured.add(config_key(c))
        model.observe(c, _distance(c, target))
        proposed.append(_distance(c, target))
    uniform = [_distance(_draw(space, draws), target) for _ in range(200)]
    assert sorted(proposed)[10] < 0.6 * sorted(uniform)[100]  # medians


def test_a_large_space_is_sampled_into_a_bounded_pool(monkeypatch):
    """matmul's space (~780,000 valid) is not listed: the pool starts at POOL_START draws, grows
    by POOL_GROWTH every POOL_GROWTH proposals and stops at POOL_MAX."""
    monkeypatch.setattr(parzen, "POOL_ALL", 2000)
    monkeypatch.setattr(parzen, "POOL_START", 100)
    monkeypatch.setattr(parzen, "POOL_GROWTH", 2)
    monkeypatch.setattr(parzen, "POOL_MAX", 104)
    space = _matmul()
    model = ParzenSearch(space, seed=0)
    model.observe(_draw(space, random.Random(0)), 1.0)
    sizes = []
    for _ in range(8):
        c = model.propose(seen=lambda c: False)
        assert c is not None and space.valid(c)
        model.observe(c, 2.0)
        sizes.append(model.pool_size)
    assert sizes[:4] == [100, 102, 102, 104] and max(sizes) == 104


@pytest.mark.parametrize("seed", [0, 1])
def test_the_same_seed_proposes_the_same(seed):
    space = _matmul()

    def run() -> list[dict]:
        model, draws, out = ParzenSearch(space, seed=seed), random.Random(seed), []
        for _ in range(6):
            c = _draw(space, draws)
            model.observe(c, _distance(c, {"MWG": 64, "NWG": 64, "MDIMC": 8}))
        for _ in range(4):
            c = model.propose(seen=lambda c: False)
            model.observe(c, 1.0)
            out.append(c)
        return out

    assert run() == run()


def test_a_two_parameter_move_of_the_best_until_there_is_none():
    sp = specs.load("reverse")
    space = ValidSpace(sp, sp.default_problem(), {"max_work_group_size": 256})
    centre = sp.default_config
    model = ParzenSearch(space, seed=0)
    model.observe(centre, 1.0)
    measured = {config_key(centre)}
    moves = []
    while (c := model.propose_near(centre, seen=lambda c: config_key(c) in measured)) is not None:
        assert sum(c[n] != centre[n] for n in sp.parameter_names) == 2 and space.valid(c)
        measured.add(config_key(c))
        model.observe(c, 2.0)
        moves.append(c)
    two_away = [c for c in space if sum(c[n] != centre[n] for n in sp.parameter_names) == 2]
    assert len(moves) == len(two_away) > 0


def test_after_a_stall_it_models_the_region_beside_the_best():
    """Every configuration near the best measured (a basin), a second good region elsewhere:
    away_from=best makes TPE propose in the second region instead of around the basin."""
    sp = specs.load("reverse")
    space = ValidSpace(sp, sp.default_problem(), {"max_work_group_size": 256})
    names = sp.parameter_names
    a = sp.default_config
    b = next(c for c in space if sum(c[n] != a[n] for n in names) == len(names) - 1)

    def apart(c, d) -> int:
        return sum(c[n] != d[n] for n in names)

    def time(c) -> float:
        return 1.0 + apart(c, a) if apart(c, a) <= parzen.BASIN else 2.0 + apart(c, b)

    def proposals(away: bool) -> list[int]:
        model, draws = ParzenSearch(space, seed=2), random.Random(2)
        measured = {config_key(c) for c in space if apart(c, a) <= parzen.BASIN}
        measured |= {config_key(_draw(space, draws)) for _ in range(30)}
        for c in space:
            if config_key(c) in measured:
                model.observe(c, time(c))
        out = []
        for _ in range(6):
            c = model.propose(seen=lambda c: config_key(c) in measured, away_from=a if away else None)
            measured.add(config_key(c))
            model.observe(c, time(c))
            out.append(apart(c, b))
        return sorted(out)

    assert proposals(away=True)[3] < proposals(away=False)[3]  # medians: nearer the second region


def test_the_pairs_model_caps_a_slow_outlier_and_the_step_model_does_not():
    """A configuration 1000x slower says only that it is not fast: the pairs model learns it as
    PAIRS_CAP times the best, so it does not weigh on the values it shares with fast ones."""
    space, draws = _matmul(), random.Random(4)
    model = ParzenSearch(space, seed=4)
    fast = [_draw(space, draws) for _ in range(12)]
    for c in fast:
        model.observe(c, 1.0)
    slow = _draw(space, draws)
    model.observe(slow, 1000.0)
    row = np.array([model._encode(slow)])
    capped, full = model.fitted(pairs=True), model.fitted(pairs=False)
    assert capped is not None and full is not None
    assert float(capped.predict(row)[0]) <= math.log(parzen.PAIRS_CAP)
    assert float(full.predict(row)[0]) > 2 * math.log(parzen.PAIRS_CAP)
