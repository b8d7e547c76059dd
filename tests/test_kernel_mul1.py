"""The ``mul1`` kernel: every write-up variant computes k·X exactly, extremes and signs included."""

from __future__ import annotations

import random
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune import spec as specs
from autotune.kernels import mul1
from autotune.launch import Launch, ProgramCache
from autotune.measure import Bench, Workload, make_workload
from autotune.result import Status
from autotune.space import check, enumerate_valid, geometry
from conftest import FAKE, FAST, every_runtime, needs_opencl, verified

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

SPEC = specs.load("mul1")

# The write-up's variants as partial configurations (v1 is the baseline).
VARIANTS: dict[str, dict[str, Any]] = {
    "v1": {"VARIANT": "v1", "WG": 64},
    "v2_wg32": {"VARIANT": "v2", "WG": 32},
    "v2_wg128": {"VARIANT": "v2", "WG": 128},
    "v3_b2": {"VARIANT": "v3", "BLOCK_SIZE": 2, "WG": 32},
    "v3_b16": {"VARIANT": "v3", "BLOCK_SIZE": 16, "WG": 64},
    "v3_b64": {"VARIANT": "v3", "BLOCK_SIZE": 64, "WG": 32},
    "v4": {"VARIANT": "v4", "WG": 64},
    "default": dict(SPEC.default),
}
LOG_BASES = [int(c) for c in next(k for k in SPEC.problem if k.name == "LOG_BASE").choices]


def config(name: str) -> dict[str, Any]:
    return SPEC.complete(VARIANTS[name])


def problem(n: int, log_base: int) -> dict[str, Any]:
    return SPEC.resolve_problem({"N": n, "LOG_BASE": str(log_base)})


def cases(n: int, log_base: int) -> Iterator[tuple[str, np.ndarray, int]]:
    """(label, x, k): random and extreme digit arrays times the extreme and trivial digits."""
    base, m = mul1.bounds(log_base)
    rng = np.random.default_rng(n * 100 + log_base)
    arrays = {
        "random+extremes": mul1.extreme_digits(n, log_base, rng),
        "all +M": np.full(n, m, np.int32),
        "all -M": np.full(n, -m, np.int32),
        "alternating": np.where(np.arange(n) % 2 == 0, m, -m).astype(np.int32),
    }
    for label, x in arrays.items():
        for k in (base - 1, -(base - 1), 0, -1, int(rng.integers(-(base - 1), base))):
            yield f"{label}, k={k}", x, k


# --------------------------------------------------------------------------- no device


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_are_valid(name: str) -> None:
    assert check(SPEC, config(name), problem(17, 30), FAKE.facts()) is None


def test_baseline_is_v1_and_block_size_belongs_to_v3() -> None:
    assert SPEC.baseline_config["VARIANT"] == "v1"
    assert check(SPEC, SPEC.complete({"VARIANT": "v1", "BLOCK_SIZE": 4}), problem(64, 30), FAKE.facts())


def test_v4_is_two_kernels_with_scratch() -> None:
    geo = geometry(SPEC, config("v4"), problem(1000, 30), FAKE.facts())
    assert [s.entry for s in geo.steps] == ["mul1_split", "mul1_sum"]
    assert dict(geo.scratch) == {"lo": 4000, "mid": 4000, "hi": 4000}
    one = geometry(SPEC, config("v3_b16"), problem(1000, 30), FAKE.facts())
    assert [s.entry for s in one.steps] == ["mul1"] and one.steps[0].global_size == (64,)


@pytest.mark.parametrize("log_base", LOG_BASES)
def test_worst_case_digits_stay_in_bounds(log_base: int) -> None:
    """z_i in [-2, 2B-1] ⊂ [-M, M] for runs of ±M times k = ±(B-1): the output is an input again."""
    base, m = mul1.bounds(log_base)
    x = np.array([m, m, -m, -m, m, -m, 0, m, 1, -1, m], np.int32)
    for k in (base - 1, -(base - 1), 1, -1, 0):
        z = mul1.digits(x, k, log_base)
        assert -2 <= z.min() and z.max() <= 2 * base - 1 <= m
        assert mul1.to_int(z, log_base) == k * mul1.to_int(x, log_base)


def test_small_base_exhaustively() -> None:
    """B = 4, M = 7: every digit against every k, inside random numbers."""
    base, m = mul1.bounds(2)
    rng = np.random.default_rng(0)
    for k in range(-(base - 1), base):
        for d in range(-m, m + 1):
            x = np.concatenate([rng.integers(-m, m + 1, 5), [d, d], rng.integers(-m, m + 1, 3)]).astype(np.int32)
            z = mul1.digits(x, k, 2)
            assert z.min() >= -2 and z.max() <= m
            assert mul1.to_int(z, 2) == k * mul1.to_int(x, 2)


def test_check_says_what_is_wrong() -> None:
    prob = problem(40, 30)
    arrays = mul1.inputs(prob, np.random.default_rng(3))
    want = mul1.reference(prob, arrays)["z"]
    assert mul1.check("z", want.copy(), want, prob) is None
    off = want.copy()
    off[5] += 1 if off[5] < 0 else -1
    assert "not k·X" in mul1.check("z", off, want, prob)
    same = want.copy()  # move one B from digit 6 into digit 5: same number, other digits
    same[6] += 1
    same[5] -= 1 << 30
    assert "digits differ from the algorithm's" in mul1.check("z", same, want, prob)
    big = want.copy()
    big[3] = np.iinfo(np.int32).min
    assert "outside [-M, M]" in mul1.check("z", big, want, prob)


def test_reference_rejects_out_of_range_inputs() -> None:
    prob = problem(4, 24)
    with pytest.raises(ValueError, match="out of range"):
        mul1.reference(prob, {"x": np.full(4, 2**25, np.int32), "k": np.int32(3)})
    with pytest.raises(ValueError, match="out of range"):
        mul1.reference(prob, {"x": np.zeros(4, np.int32), "k": np.int32(2**24)})


# --------------------------------------------------------------------------- on a device


@needs_opencl
# N=1: only the edge paths (no interior block, two extra outputs); 4099: odd tail, smallest base
@pytest.mark.parametrize("n, log_base", [(1, 30), (1000, 30), (4099, 24)])
def test_variants_exact_on_random_and_extreme_inputs(device: tuple[Any, Any], n: int, log_base: int) -> None:
    import pyopencl as cl

    info, ctx = device
    queue = cl.CommandQueue(ctx)
    prob, cache = problem(n, log_base), ProgramCache()
    mf = cl.mem_flags
    x_buf = cl.Buffer(ctx, mf.READ_WRITE, 4 * n)
    z_buf = cl.Buffer(ctx, mf.READ_WRITE, 4 * (n + 2))
    launches = {name: Launch(ctx, SPEC, config(name), prob, info.facts(), cache) for name in VARIANTS}
    for label, x, k in cases(n, log_base):
        want = mul1.reference(prob, {"x": x, "k": np.int32(k)})["z"]
        cl.enqueue_copy(queue, x_buf, x)
        for name, launch in launches.items():
            cl.enqueue_fill_buffer(queue, z_buf, np.uint8(0xA5), 0, z_buf.size)
            launch.enqueue(queue, {"x": x_buf, "z": z_buf, "k": np.int32(k)})
            got = np.empty(n + 2, np.int32)
            cl.enqueue_copy(queue, got, z_buf)
            why = mul1.check("z", got, want, prob)
            assert why is None, f"{name} at N={n}, LOG_BASE={log_base}, {label}: {why}"


@needs_opencl
def test_random_valid_configs(device: tuple[Any, Any]) -> None:
    info, ctx = device
    prob = problem(3001, 28)
    b = Bench(SPEC, prob, ctx, make_workload(SPEC, prob, seed=5), info.facts(), FAST)
    valid = enumerate_valid(SPEC, prob, b.facts)
    assert sum(verified(b.measure(params), params) for params in random.Random(7).sample(valid, 5)) >= 3


@needs_opencl
def test_wrong_kernel_is_rejected_with_a_clear_message(device: tuple[Any, Any], tmp_path: Path) -> None:
    """hi taken with a logical shift (the write-up's unsigned digits) fails on negative products."""
    info, ctx = device
    root = Path(specs.__file__).resolve().parent.parent
    shutil.copy(root / "search_spaces" / "mul1.yaml", tmp_path / "mul1.yaml")
    source = (root / "kernel_templates" / "mul1.cl").read_text()
    broken = source.replace("#define HI(p) ((int)((p) >> (2 * LOG_BASE)))",
                            "#define HI(p) ((int)((ulong)(p) >> (2 * LOG_BASE)))")
    assert broken != source
    (tmp_path / "mul1.cl").write_text(broken)
    spec = specs.load(str(tmp_path / "mul1.yaml"))
    prob = spec.resolve_problem({"N": 500})
    b = Bench(spec, prob, ctx, make_workload(spec, prob, seed=1), info.facts(), FAST)
    m = b.measure(spec.complete({"VARIANT": "v1", "WG": 64}))
    assert m.status is Status.WRONG_RESULT
    assert "digits differ" in m.message and "not k·X" in m.message


@needs_opencl
def test_load_kernel_multiplies(device: tuple[Any, Any]) -> None:
    import pyopencl as cl

    import autotune

    _, ctx = device
    queue = cl.CommandQueue(ctx)
    n, log_base = 5003, 26
    base, _ = mul1.bounds(log_base)
    x = mul1.extreme_digits(n, log_base, np.random.default_rng(2))
    k = -(base - 1)
    mf = cl.mem_flags
    x_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    z_buf = cl.Buffer(ctx, mf.WRITE_ONLY, 4 * (n + 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autotune.AutotuneWarning)  # no profile: the default
        kern = autotune.load_kernel("mul1", queue, N=n, LOG_BASE=str(log_base))
    assert kern.arg_names == ("x", "z", "k"), "the same call whichever variant was chosen"
    kern(x=x_buf, z=z_buf, k=np.int32(k)).wait()
    got = np.empty(n + 2, np.int32)
    cl.enqueue_copy(queue, got, z_buf)
    assert mul1.to_int(got, log_base) == k * mul1.to_int(x, log_base)
    np.testing.assert_array_equal(got, mul1.digits(x, k, log_base))


def test_workload_of_custom_inputs_matches_reference() -> None:
    """inputs() draws digits within its own LOG_BASE's bound and reaches ±M; k is an int32 scalar."""
    for log_base in (24, 30):
        prob = problem(300, log_base)
        w = make_workload(SPEC, prob, seed=log_base)
        assert isinstance(w, Workload) and isinstance(w.inputs["k"], np.int32)
        _, m = mul1.bounds(log_base)
        assert np.abs(w.inputs["x"].astype(np.int64)).max() == m
        assert w.expected["z"].shape == (302,)
