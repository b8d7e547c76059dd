"""The ridge models of log time (autotune.ridge) and the proposals made with them (no device)."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from autotune import parzen, ridge
from autotune import spec as specs
from autotune.parzen import ParzenSearch
from autotune.space import ValidSpace, config_key
from conftest import FAKE


@pytest.fixture(autouse=True)
def _small_pool(monkeypatch):
    monkeypatch.setattr(parzen, "POOL_START", 256)


def _grid(sizes: list[int]) -> np.ndarray:
    return np.array(list(itertools.product(*(range(k) for k in sizes))))


def test_an_additive_log_time_is_learned_from_a_few_configurations():
    """Each value adds to log time: from 12 of 64 configurations the model ranks all 64
    nearly as they are (a Spearman correlation above 0.9)."""
    sizes = [4, 4, 4]
    rows = _grid(sizes)
    effect = np.array([[0.0, 0.3, 0.9, 0.2], [0.5, 0.0, 0.1, 0.7], [0.0, 0.05, 0.4, 1.0]])
    truth = sum(effect[p][rows[:, p]] for p in range(3))
    train = np.random.default_rng(0).choice(len(rows), 12, replace=False)
    predicted = ridge.fit(rows[train], truth[train], sizes, pairs=False, lam=0.1).predict(rows)
    rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
    assert np.corrcoef(rank(predicted), rank(truth))[0, 1] > 0.9


def test_only_the_pairs_model_learns_that_two_values_must_match():
    """Fast exactly when a == b (a tile that must fit another): no value of a or b is fast on
    its own, so the main-effects model cannot tell; the pairs model's fastest guess among
    unmeasured configurations is a match."""
    sizes = [3, 3, 4]
    rows = _grid(sizes)
    times = np.where(rows[:, 0] == rows[:, 1], 0.0, 1.0) + 0.1 * rows[:, 2]
    train = np.random.default_rng(0).random(len(rows)) < 0.6
    held = np.flatnonzero(~train)
    for pairs in (True, False):
        predicted = ridge.fit(rows[train], times[train], sizes, pairs=pairs, lam=0.1).predict(rows[held])
        best = held[np.argmin(predicted)]
        assert bool(rows[best, 0] == rows[best, 1]) == pairs


def test_a_parameter_with_one_value_adds_nothing():
    rows = np.array([[0, 0], [1, 0], [2, 0]])
    model = ridge.fit(rows, np.log([1.0, 2.0, 4.0]), sizes=[3, 1], pairs=True)
    assert model.varied == (0,) and model.pairs == ()
    assert np.all(np.diff(model.predict(rows)) > 0)


def _reverse() -> ValidSpace:
    sp = specs.load("reverse")
    return ValidSpace(sp, sp.default_problem(), {"max_work_group_size": 256})


def _time(c) -> float:
    """Faster with wider vectors and larger work-groups, each on its own."""
    return 10.0 / c["VW"] + 100.0 / c["WG"]


def test_the_fitted_proposal_is_the_fastest_predicted_and_runs_out():
    space = _reverse()
    model = ParzenSearch(space, seed=0)
    assert model.propose_fitted(seen=lambda c: False) is None  # nothing measured: no model
    configs = list(space)
    rng = np.random.default_rng(0)
    measured: set[str] = set()
    for i in rng.choice(len(configs), 12, replace=False):
        model.observe(configs[i], _time(configs[i]))
        measured.add(config_key(configs[i]))
    c = model.propose_fitted(seen=lambda c: config_key(c) in measured)
    unmeasured = sorted(_time(d) for d in configs if config_key(d) not in measured)
    assert c is not None and space.valid(c) and config_key(c) not in measured
    assert _time(c) <= unmeasured[len(unmeasured) // 10]  # among the fastest tenth
    while (c := model.propose_fitted(seen=lambda c: config_key(c) in measured)) is not None:
        measured.add(config_key(c))
        model.observe(c, math.inf)  # failures are learned as slow, and counted as measured
    assert measured == {config_key(d) for d in configs}


def test_a_trend_reaches_a_value_never_measured_at_the_end_of_a_list():
    """Time falls with each larger value of the first parameter, and its largest value was
    never measured: with a trend the step's ranking (optimistic) puts that value first; as one
    weight per value only, the model predicts it as the mean, which measured values beat,
    however optimistic the ranking."""
    sizes = [6, 3]
    rows = _grid(sizes)
    times = -0.3 * rows[:, 0] + 0.1 * rows[:, 1]
    train = rows[:, 0] < 5
    for trend in (parzen.TREND, 0.0):
        model = ridge.fit(rows[train], times[train], sizes, pairs=False, trend=trend)
        first = rows[np.argmin(model.optimistic(rows, parzen.OPTIMISM))]
        assert (first[0] == 5) == (trend > 0)


def test_the_step_beside_the_best_tries_the_next_value_along_the_trend():
    """Measured wider vectors were faster: of the best's untried moves, the widest (never
    measured) comes first."""
    space = _reverse()
    model = ParzenSearch(space, seed=0)
    widths = next(p.values for p in space.spec.parameters if p.name == "VW")
    widest = max(widths)
    for c in space:
        if c["VW"] != widest:
            model.observe(c, _time(c))
    best = min((c for c in space if c["VW"] != widest), key=_time)
    moves = [{**best, "VW": v} for v in widths if v != best["VW"] and space.valid({**best, "VW": v})]
    assert model.ranked(moves)[0]["VW"] == widest


def test_moves_are_ranked_by_predicted_time():
    space = _reverse()
    model = ParzenSearch(space, seed=0)
    assert model.ranked([{"a": 1}, {"a": 2}]) == [{"a": 1}, {"a": 2}]  # no model: as given
    for c in list(space)[::7]:
        model.observe(c, _time(c))
    centre = space.spec.default_config
    moves = [{**centre, "VW": v} for v in (1, 2, 4, 8) if v != centre["VW"] and space.valid({**centre, "VW": v})]
    assert [c["VW"] for c in model.ranked(moves)] == sorted((c["VW"] for c in moves), reverse=True)


def test_the_two_parameter_move_predicted_fastest_comes_first():
    space = _reverse()
    sp = space.spec
    centre = sp.default_config
    model = ParzenSearch(space, seed=0)
    for c in list(space)[::5]:
        model.observe(c, _time(c))
    first = model.propose_near(centre, seen=lambda c: False)
    assert first is not None
    two_away = [c for c in space if sum(c[n] != centre[n] for n in sp.parameter_names) == 2]
    fitted = model.fitted(pairs=False)
    assert fitted is not None
    predicted = fitted.predict(np.array([model._encode(c) for c in two_away]))
    assert math.isclose(fitted.predict(np.array([model._encode(first)]))[0], predicted.min())


def test_the_fit_learns_from_a_bounded_set(monkeypatch):
    """Past RIDGE_MAX measured configurations the fit keeps the fastest half and the most
    recent others: the best ones stay in, so the model still finds the fast region."""
    monkeypatch.setattr(parzen, "RIDGE_MAX", 20)
    space = _reverse()
    configs = list(space)
    np.random.default_rng(1).shuffle(configs)
    model = ParzenSearch(space, seed=0)
    for c in configs[:60]:
        model.observe(c, _time(c))
    seen = {config_key(c) for c in configs[:60]}
    c = model.propose_fitted(seen=lambda c: config_key(c) in seen)
    rest = sorted(_time(d) for d in configs[60:])
    assert c is not None and _time(c) <= rest[len(rest) // 10]


def test_matmul_pool_proposals_are_valid():
    sp = specs.load("matmul")
    space = ValidSpace(sp, sp.default_problem(), FAKE.facts())
    model = ParzenSearch(space, seed=2, listable=False)
    rng = np.random.default_rng(2)
    draws = random.Random(2)
    seen: set[str] = set()
    for _ in range(15):
        c = space.sample(draws)
        assert c is not None
        model.observe(c, float(rng.random()))
        seen.add(config_key(c))
    c = model.propose_fitted(seen=lambda c: config_key(c) in seen)
    assert c is not None and space.valid(c) and config_key(c) not in seen


def test_a_value_never_measured_is_tried_before_a_measured_move_predicted_a_little_faster():
    """A's first value is fast, its second slow, its third never measured; B slows by a
    quarter per step. Of the best's moves, the prediction puts B's next value first (A's last
    is predicted slow, from the trend); the step ranks A's last first, as its spread is the
    widest: by the prediction alone a value measured only with poor company is never tried."""
    from autotune.replay import Recorded, device_for, spec_for
    rec = Recorded("toy", "Toy GPU", (("A", (0, 1, 2)), ("B", tuple(range(6)))),
                   {(a, b): 1.0 for a in range(3) for b in range(6)})
    sp = spec_for(rec)
    model = ParzenSearch(ValidSpace(sp, {}, device_for(rec).facts()), seed=0)
    for a in (0, 1):
        for b in range(6):
            model.observe({"A": a, "B": b}, math.exp(0.5 * a + 0.25 * b))
    moves = [{"A": 2, "B": 0}, {"A": 0, "B": 1}, {"A": 1, "B": 0}]
    fitted = model.fitted(pairs=False)
    assert fitted is not None
    rows = np.array([model._encode(c) for c in moves])
    assert np.argmin(fitted.predict(rows)) == 1
    spread = fitted.spread(rows)
    assert spread[0] > 2 * max(spread[1], spread[2])
    assert model.ranked(moves)[0] == {"A": 2, "B": 0}
    np.testing.assert_allclose(fitted.optimistic(rows, 0.0), fitted.predict(rows))


def test_the_spread_is_a_gaussian_processs_posterior_deviation():
    """With the penalty as the noise, the spread is the textbook posterior deviation of a
    Gaussian process whose covariance is the fit's kernel, scaled by the fit's estimate."""
    sizes = [3, 4]
    rows = _grid(sizes)
    rng = np.random.default_rng(3)
    train = rng.choice(len(rows), 7, replace=False)
    y = rng.normal(size=7)
    model = ridge.fit(rows[train], y, sizes, pairs=True, trend=0.5)

    def kernel(a, b):
        same = (a[:, None, :] == b[None, :, :]).sum(2).astype(float)
        lines = [np.linspace(-1, 1, k) for k in sizes]
        along = lambda r: np.stack([lines[p][r[:, p]] for p in range(len(sizes))], 1)  # noqa: E731
        return same + same * (same - 1) / 2 + 0.5 * along(a) @ along(b).T

    k = kernel(rows[train], rows[train]) + ridge.LAMBDA * np.eye(7)
    yc = y - y.mean()
    scale = yc @ np.linalg.solve(k, yc) / 7
    cross = kernel(rows, rows[train])
    var = np.diag(kernel(rows, rows)) - np.einsum("ij,ji->i", cross, np.linalg.solve(k, cross.T))
    np.testing.assert_allclose(model.spread(rows), np.sqrt(scale * var), rtol=1e-6, atol=1e-9)


def test_parameters_of_very_many_values_are_compared_by_position_with_the_same_fit(monkeypatch):
    """Trial 40: one-hot codes of 8,192 rows by a parameter of 100,000 values took 74.5 GiB;
    past ONE_HOT_MAX values the kernel counts shared values by position, to the same numbers."""
    import numpy as np

    from autotune import ridge

    rng = np.random.default_rng(0)
    sizes = [3, 4, 5]
    rows = np.stack([rng.integers(0, k, 60) for k in sizes], 1)
    y = rng.normal(size=60)
    one_hot = ridge.fit(rows, y, sizes=sizes, pairs=True).predict(rows)
    monkeypatch.setattr(ridge, "ONE_HOT_MAX", 0)
    assert np.allclose(ridge.fit(rows, y, sizes=sizes, pairs=True).predict(rows), one_hot, rtol=0, atol=1e-12)
