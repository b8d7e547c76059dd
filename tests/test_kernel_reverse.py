"""The ``reverse`` kernel: every write-up variant is reachable and reverses any N exactly."""

from __future__ import annotations

import random
import warnings
from typing import Any

import numpy as np
import pytest

from autotune import spec as specs
from autotune.measure import Bench, make_workload
from autotune.space import check, enumerate_valid, geometry
from conftest import FAKE, FAST, every_runtime, needs_opencl, verified

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

SPEC = specs.load("reverse")

# The write-up's variants (and the byte-swap formulations added here) as partial configurations.
VARIANTS: dict[str, dict[str, Any]] = {
    "char": {"ELEM": "char", "VW": 1, "ITEMS": 1, "WG": 64},
    "char16": {"ELEM": "char", "VW": 16, "ITEMS": 1, "WG": 64},
    "uint16_char4": {"ELEM": "uint", "VW": 64, "BSWAP": "char4", "ITEMS": 1, "WG": 32},
    "uint16_shift_items": {"ELEM": "uint", "VW": 64, "BSWAP": "shift", "ITEMS": 4, "COALESCE": 1, "WG": 32},
    "uint4_rotate_items": {"ELEM": "uint", "VW": 16, "BSWAP": "rotate", "ITEMS": 2, "WG": 128, "restrict": True},
    "char4_items": {"ELEM": "char", "VW": 4, "ITEMS": 8, "WG": 32},
    "default": dict(SPEC.default),
}


def config(name: str) -> dict[str, Any]:
    return SPEC.complete(VARIANTS[name])


# --------------------------------------------------------------------------- no device


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_are_valid(name: str) -> None:
    assert check(SPEC, config(name), {"N": 17}, FAKE.facts()) is None


def test_baseline_is_one_char_per_work_item() -> None:
    base = SPEC.baseline_config
    assert (base["ELEM"], base["VW"], base["ITEMS"]) == ("char", 1, 1)


@pytest.mark.parametrize("n, entries", [
    (1, ["reverse_tail"]),                          # smaller than one chunk: tail only
    (64 * 16 * 4 * 32, ["reverse"]),                # whole chunks: no tail
    (64 * 16 * 4 * 32 + 5, ["reverse", "reverse_tail"]),
])
def test_tail_step_only_when_needed(n: int, entries: list[str]) -> None:
    geo = geometry(SPEC, config("uint16_shift_items"), {"N": n}, FAKE.facts())
    assert [s.entry for s in geo.steps] == entries
    covered = sum(s.global_size[0] * (64 * 4 if s.entry == "reverse" else 1) for s in geo.steps)
    assert covered == n


# --------------------------------------------------------------------------- on a device


def bench(device: tuple[Any, Any], n: int) -> Bench:
    info, ctx = device
    problem = SPEC.resolve_problem({"N": n})
    return Bench(SPEC, problem, ctx, make_workload(SPEC, problem, seed=n), info.facts(), FAST)


@needs_opencl
@pytest.mark.parametrize("n", [1, 17, 1000003, 65536])
def test_variants_reverse_exactly(device: tuple[Any, Any], n: int) -> None:
    b = bench(device, n)
    for name in VARIANTS:
        m = b.measure(config(name))
        assert m.ok, f"{name} at N={n}: {m.status.value}: {m.message}"


@needs_opencl
@pytest.mark.parametrize("n", [70001, 131072])   # odd (uint stores as bytes) and uint-aligned
def test_random_valid_configs(device: tuple[Any, Any], n: int) -> None:
    b = bench(device, n)
    valid = enumerate_valid(SPEC, b.problem, b.facts)
    assert sum(verified(b.measure(p), f"{p} at N={n}") for p in random.Random(n).sample(valid, 8)) >= 3


@needs_opencl
def test_load_kernel_reverses(device: tuple[Any, Any]) -> None:
    import pyopencl as cl

    import autotune

    _, ctx = device
    queue = cl.CommandQueue(ctx)
    n = 4099
    src = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
    mf = cl.mem_flags
    src_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=src)
    dst_buf = cl.Buffer(ctx, mf.WRITE_ONLY, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autotune.AutotuneWarning)  # no profile: the default
        rev = autotune.load_kernel("reverse", queue, N=n)
    assert rev.arg_names == ("src", "dst")
    rev(src_buf, dst_buf).wait()
    got = np.empty_like(src)
    cl.enqueue_copy(queue, got, dst_buf)
    np.testing.assert_array_equal(got, src[::-1])
