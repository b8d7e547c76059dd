"""matmul: every variant, vector width, padding and ownership verifies on a device, both layouts."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from autotune import spec as specs
from autotune.measure import make_workload
from autotune.result import Status
from autotune.space import check
from conftest import FAST, needs_opencl

SIZES = {"M": 64, "N": 128, "K": 32}

# Covers the template's branches: the aligned vector loads and stores of the tiled variant
# (VW 2 and 4 with PAD 0 or 4), the scalar-store path (PAD 1), every ownership scheme, and
# double buffering.
CONFIGS: list[dict[str, Any]] = [
    {"ALGO": "naive", "MDIMC": 8, "NDIMC": 8, "MWG": 8, "NWG": 8},
    {"ALGO": "blocked", "MDIMC": 8, "NDIMC": 8, "MWG": 16, "NWG": 64, "VW": 8},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 32, "KWG": 8, "VW": 1, "PAD": 1},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 32, "KWG": 8, "VW": 2, "PAD": 1,
     "SM": 1, "SN": 1, "DB": 1},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 64, "KWG": 16, "VW": 4, "PAD": 4,
     "SM": 2, "SN": 2, "DB": 1, "UNROLL": 8},
    {"ALGO": "tiled", "MDIMC": 16, "NDIMC": 8, "MWG": 64, "NWG": 32, "KWG": 8, "VW": 2,
     "SN": 2, "UNROLL": 4, "fast_math": True},
]


@pytest.fixture(scope="module", params=["row", "col"])
def bench(request: pytest.FixtureRequest, ocl_device: str) -> Any:
    from autotune.worker import Setup, make_bench

    spec = specs.load("matmul")
    problem = spec.resolve_problem(dict(SIZES, layout=request.param))
    return make_bench(Setup(spec, ocl_device, problem, "", FAST), make_workload(spec, problem, seed=2))


@needs_opencl
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c['ALGO']}-VW{c.get('VW', 1)}-PAD{c.get('PAD', 0)}")
def test_config_verifies(bench: Any, config: dict[str, Any]) -> None:
    params = bench.spec.complete(config)
    assert check(bench.spec, params, bench.problem, bench.facts) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PoCL's compiler chatter
        m = bench.measure(params)
    assert m.status is Status.OK, m.message
