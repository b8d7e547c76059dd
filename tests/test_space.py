"""The constraint evaluator, launch-geometry checks and valid-space enumeration (no device)."""

from __future__ import annotations

import itertools

import pytest

from autotune import spec as specs
from autotune.errors import SpecError
from autotune.space import check, closest_valid, config_key, enumerate_valid, geometry, space_size
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


def test_device_limits_reject_before_building(scale):
    facts = FAKE.facts()  # max work-group 256
    assert "work-group 512 > device max 256" in check(scale, scale.complete({"WG": 512}), {"N": 1024}, facts)
    assert "constraint" in check(scale, scale.complete({"WPT": 16, "WG": 32}), {"N": 256}, facts)
    assert check(scale, scale.complete({"WPT": 2, "WG": 64}), {"N": 256}, facts) is None


def test_geometry_must_be_integral(tmp_path):
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace('global: ["N // WPT"]', 'global: ["N / 3"]')))
    with pytest.raises(SpecError, match=r"launch\[0\].global: 'N / 3' gave 85.33.*use //"):
        geometry(sp, sp.complete({}), {"N": 256}, FAKE.facts())


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


def test_local_memory_limit(tmp_path):
    text = SCALE_YAML.replace("args: [x, y]", "local_memory: \"WG * 1024\"\nargs: [x, y]")
    sp = specs.load(write_spec(tmp_path, text))
    assert "local memory" in check(sp, sp.complete({"WG": 64}), {"N": 256}, FAKE.facts())
