"""matmul: every variant, vector width, padding and ownership verifies on a device, both layouts."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from autotune import spec as specs
from autotune.measure import make_workload
from autotune.result import Status
from autotune.space import check
from conftest import FAST, every_runtime, needs_opencl

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

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
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 32, "KWG": 8, "VW": 4, "DB": 1, "KSPLIT": 2},
]


@pytest.fixture(scope="module", params=["row", "col"])
def bench(request: pytest.FixtureRequest, ocl_device: str) -> Any:
    from autotune.worker import Setup, make_bench

    spec = specs.load("matmul")
    problem = spec.resolve_problem(dict(SIZES, layout=request.param))
    return make_bench(Setup(spec, ocl_device, problem, "", FAST), make_workload(spec, problem, seed=2))


@needs_opencl
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c['ALGO']}-VW{c.get('VW', 1)}-PAD{c.get('PAD', 0)}"
                         f"-KSPLIT{c.get('KSPLIT', 1)}")
def test_config_verifies(bench: Any, config: dict[str, Any]) -> None:
    params = bench.spec.complete(config)
    assert check(bench.spec, params, bench.problem, bench.facts) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PoCL's compiler chatter
        m = bench.measure(params)
    assert m.status is Status.OK, m.message


# Every awkward size appears in some dimension; the other dimensions stay small so the
# reference is quick. Each shape takes the edge code of every variant that is valid there.
ODD_SHAPES = [(1, 7, 1001), (7, 1, 3000), (4097, 7, 8), (33, 1001, 40), (100, 68, 36), (8, 8, 1),
              (70, 66, 41), (130, 65, 34)]
EDGE_CONFIGS: list[dict[str, Any]] = [
    {"ALGO": "naive", "MDIMC": 8, "NDIMC": 8, "MWG": 8, "NWG": 8},
    {"ALGO": "blocked", "MDIMC": 8, "NDIMC": 8, "MWG": 16, "NWG": 64, "VW": 8},
    {"ALGO": "blocked", "MDIMC": 8, "NDIMC": 8, "MWG": 8, "NWG": 8, "VW": 1},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 32, "KWG": 8, "VW": 1, "PAD": 1},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 64, "KWG": 16, "VW": 4, "PAD": 4,
     "SM": 2, "SN": 2, "DB": 1, "UNROLL": 8},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 8, "NWG": 8, "KWG": 32, "VW": 1, "DB": 1},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 32, "KWG": 8, "VW": 4, "KSPLIT": 4},
    {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 8, "NWG": 8, "KWG": 16, "VW": 1, "DB": 1, "KSPLIT": 16},
]


def _bench(ocl_device: str, spec: Any, sizes: dict[str, Any], seed: int = 2) -> Any:
    from autotune.worker import Setup, make_bench

    problem = spec.resolve_problem(sizes)
    return make_bench(Setup(spec, ocl_device, problem, "", FAST), make_workload(spec, problem, seed=seed))


@needs_opencl
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("shape", ODD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_any_size_verifies(ocl_device: str, shape: tuple[int, int, int], layout: str) -> None:
    spec = specs.load("matmul")
    bench = _bench(ocl_device, spec, {"M": shape[0], "N": shape[1], "K": shape[2], "layout": layout})
    ran = 0
    for config in EDGE_CONFIGS:
        params = spec.complete(config)
        if check(spec, params, bench.problem, bench.facts) is None:
            m = bench.measure(params)
            assert m.status is Status.OK, f"{config}: {m.message}"
            ran += 1
    assert ran >= 2  # the naive variant and at least one tiled or blocked one


@needs_opencl
def test_long_dot_products_pass_the_derived_bound(ocl_device: str) -> None:
    """K = 65536: float32 rounding is far above the old sqrt(K) tolerance, yet within γ_K."""
    spec = specs.load("matmul")
    bench = _bench(ocl_device, spec, {"M": 16, "N": 16, "K": 65536})
    tiled = spec.complete({"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 16, "NWG": 16, "KWG": 32,
                           "VW": 4, "DB": 1})
    for params in (spec.baseline_config, tiled):
        m = bench.measure(params)
        assert m.status is Status.OK, m.message
        assert m.tolerance_used is not None and 0 < m.tolerance_used < 1


# Wrong kernels, made by editing one line of the template: each must fail verification.
TILED_8 = {"ALGO": "tiled", "MDIMC": 8, "NDIMC": 8, "MWG": 32, "NWG": 32, "KWG": 8, "VW": 1}
MUTANTS = {
    "drops-one-K-tile": (
        "    for (int k0 = K_BEGIN; k0 < K_END; k0 += KWG) {\n        fetch(",
        "    for (int k0 = K_BEGIN + KWG; k0 < K_END; k0 += KWG) {\n        fetch(",
        TILED_8, (64, 64, 512)),
    "swaps-two-outputs": (
        "    C[(size_t)row * NR + col] = acc;",
        "    C[(size_t)row * NR + (row == 0 && col < 2 ? 1 - col : col)] = acc;",
        {"ALGO": "naive", "MDIMC": 8, "NDIMC": 8, "MWG": 8, "NWG": 8}, (64, 64, 512)),
    "skips-the-edge-tile": (
        "#if NR % NWG || MR % MWG  // the last tiles shift back",
        "if (get_group_id(1) + 1 == get_num_groups(1)) return;\n#if NR % NWG || MR % MWG  // the last tiles shift back",
        TILED_8, (70, 64, 64)),
}


@needs_opencl
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_wrong_kernels_fail_verification(ocl_device: str, tmp_path: Any, mutant: str) -> None:
    from autotune.resources import data_dir

    old, new, config, (m, n, k) = MUTANTS[mutant]
    source = (data_dir("kernel_templates") / "matmul.cl").read_text()
    assert source.count(old) == 1, "the mutation no longer applies: update MUTANTS"
    (tmp_path / "matmul.cl").write_text(source.replace(old, new))
    (tmp_path / "autotune.h").write_text((data_dir("kernel_templates") / "autotune.h").read_text())
    yaml_path = tmp_path / "matmul.yaml"
    yaml_path.write_text((data_dir("search_spaces") / "matmul.yaml").read_text())
    spec = specs.load(str(yaml_path))
    bench = _bench(ocl_device, spec, {"M": m, "N": n, "K": k})
    result = bench.measure(spec.complete(config))
    assert result.status is Status.WRONG_RESULT, result.message


def test_sizes_past_the_kernels_int_indexes_are_refused_up_front():
    """Trial 29: M = 2**31 reached the compiler as a long literal, and the kernel failed to build
    ("call to 'min' is ambiguous"); its indexes are ints, so such sizes cannot run."""
    from autotune import spec as specs
    from autotune.errors import ProblemError

    mm = specs.load("matmul")
    mm.resolve_problem({"M": 2**31 - 1, "N": 1, "K": 1})
    for key in ("M", "N", "K"):
        with pytest.raises(ProblemError, match="2 \\*\\* 31"):
            mm.resolve_problem({"M": 1, "N": 1, "K": 1, key: 2**31})
