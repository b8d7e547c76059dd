"""correlate: the FFT reference against the definition, the metrics, and every variant on a device."""

from __future__ import annotations

import random
import warnings
from typing import Any

import numpy as np
import pytest

from autotune import spec as specs
from autotune.errors import ProblemError
from autotune.kernels import correlate as host
from autotune.measure import make_workload
from autotune.result import Status
from autotune.space import check, geometry
from autotune.verify import compare
from conftest import FAST, every_runtime, needs_opencl

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

SMALL = {"W": 40, "H": 40, "OW": 20, "OH": 20}
ODD = {"W": 33, "H": 31, "OW": 17, "OH": 9}  # nothing divides anything

# One of each variant the write-up compares, plus odd shapes, so a fixed set covers the template.
VARIANTS: list[dict[str, Any]] = [
    {"WGX": 64, "WGY": 1},                                     # naive, 1D work-groups (baseline)
    {"WGX": 8, "WGY": 8, "ACC": "vec", "mad": True},           # naive, 2D work-groups
    {"WGX": 16, "WGY": 4, "OPX": 2, "OPY": 2, "UNROLL": 4},    # 2×2 blocking (the write-up's winner)
    {"WGX": 4, "WGY": 2, "OPX": 4, "OPY": 1, "UNROLL": 8, "fast_math": True},
    {"VARIANT": "local", "WGX": 8, "WGY": 4, "OPX": 2, "OPY": 2, "TX": 16, "TY": 4, "ACC": "vec"},
    {"VARIANT": "local", "WGX": 2, "WGY": 8, "OPX": 1, "OPY": 4, "TX": 8, "TY": 2, "UNROLL": 2},
    # swept: one slice, slices in the work-group, slices across work-groups, and both
    {"VARIANT": "swept", "WGX": 8, "WGY": 2, "OPX": 2, "OPY": 4, "UNROLL": 2},
    {"VARIANT": "swept", "WGX": 4, "WGY": 1, "OPX": 4, "OPY": 2, "KSL": 4, "ACC": "vec"},
    {"VARIANT": "swept", "WGX": 16, "WGY": 1, "OPX": 1, "OPY": 8, "KSG": 8, "UNROLL": 4},
    {"VARIANT": "swept", "WGX": 4, "WGY": 2, "OPX": 8, "OPY": 1, "KSL": 2, "KSG": 32, "fast_math": True},
    {"VARIANT": "swept", "WGX": 4, "WGY": 1, "OPX": 8, "OPY": 8, "KSL": 2, "KSG": 4, "ACC": "chain"},
    {"VARIANT": "swept", "WGX": 4, "WGY": 2, "OPX": 16, "OPY": 2, "UNROLL": 2, "KSL": 2, "ACC": "chain"},
    {"WGX": 8, "WGY": 2, "OPX": 2, "OPY": 4, "ACC": "chain", "UNROLL": 2},
]


def _problem(sizes: dict[str, int]) -> dict[str, Any]:
    return specs.load("correlate").resolve_problem(sizes)


@pytest.mark.parametrize("sizes", [SMALL, ODD, {"W": 7, "H": 5, "OW": 7, "OH": 5}])
def test_fft_reference_matches_the_definition(sizes: dict[str, int]) -> None:
    problem = _problem(sizes)
    arrays = host.inputs(problem, np.random.default_rng(3))
    got = host.reference(problem, arrays)["out"].astype(np.float64)
    want = host.direct(problem, arrays).ravel()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


def test_terms_and_metrics_count_the_overlaps() -> None:
    spec = specs.load("correlate")
    problem = _problem(ODD)
    w, h, ow, oh = 33, 31, 17, 9
    terms = sum((w - dx) * (h - dy) for dx in range(ow) for dy in range(oh))
    assert host.terms(problem) == terms
    metrics = spec.throughput(problem, 1000.0)  # one second
    assert list(metrics) == ["GFLOP/s", "GB/s"]
    assert metrics["GFLOP/s"] == pytest.approx(8 * terms / 1e9)
    assert metrics["GB/s"] == pytest.approx(32 * terms / 1e9)


def test_default_size_with_16x16_groups_is_valid(fake_device: Any) -> None:
    # 250 is divisible by neither 16 nor 32: the global size rounds up and the kernel guards.
    spec = specs.load("correlate")
    problem = spec.default_problem()
    params = spec.complete({"WGX": 16, "WGY": 16, "OPX": 2, "OPY": 2})
    assert check(spec, params, problem, fake_device.facts()) is None
    step = geometry(spec, params, problem, fake_device.facts()).steps[0]
    assert step.global_size == (128, 128, 1) and step.local_size == (16, 16, 1)
    for sizes in ({"W": 512, "H": 512, "OW": 256, "OH": 256}, {"W": 640, "H": 640, "OW": 320, "OH": 320}):
        assert check(spec, params, spec.resolve_problem(sizes), fake_device.facts()) is None
    with pytest.raises(ProblemError, match=r"correlate needs OW <= W and OH <= H \(H=8, OH=4, OW=9, W=8\)"):
        spec.resolve_problem({"W": 8, "H": 8, "OW": 9, "OH": 4})  # offsets larger than the image


def test_swept_slices_across_work_groups_add_up_in_a_second_kernel(fake_device: Any) -> None:
    spec = specs.load("correlate")
    problem = spec.default_problem()
    one = spec.complete({"VARIANT": "swept", "WGX": 32, "OPX": 4, "OPY": 4, "KSL": 8})
    (step,) = geometry(spec, one, problem, fake_device.facts()).steps
    assert step.entry == "correlate" and step.global_size == (64, 63, 8) and step.local_size == (32, 1, 8)
    split = dict(one, KSG=4)
    first, second = geometry(spec, split, problem, fake_device.facts()).steps
    assert first.global_size == (64, 63, 32) and first.args == ("imgA", "imgB", "part")
    assert second.entry == "correlate_sum" and second.args == ("part", "out")
    assert check(spec, split, problem, fake_device.facts()) is None
    # the variants that do not slice keep one canonical copy of KSL and KSG
    assert check(spec, dict(one, VARIANT="direct"), problem, fake_device.facts()) is not None


@pytest.fixture(scope="module")
def benches(ocl_device: str) -> dict[str, Any]:
    from autotune.worker import Setup, make_bench

    spec = specs.load("correlate")
    out = {}
    for label, sizes in (("small", SMALL), ("odd", ODD)):
        problem = spec.resolve_problem(sizes)
        setup = Setup(spec, ocl_device, problem, "", FAST)
        out[label] = make_bench(setup, make_workload(spec, problem, seed=1))
    return out


@needs_opencl
@pytest.mark.parametrize("label", ["small", "odd"])
def test_variants_default_and_random_configs_verify(benches: dict[str, Any], label: str) -> None:
    bench = benches[label]
    spec = bench.spec
    if label == "small":
        configs = [spec.default_config, spec.baseline_config,
                   spec.complete(VARIANTS[4])]
    else:  # the odd size exercises every edge guard: run each variant there
        configs = [spec.complete(v) for v in VARIANTS[1:]]
    # plus a random valid one (drawn and checked: enumerating the space takes seconds); small
    # work-groups, since PoCL runs a work-group's items in turn
    rng = random.Random(label)
    while True:
        pick = {p.name: rng.choice(p.values) for p in spec.parameters}
        if pick["WGX"] * pick["WGY"] <= 64 and check(spec, pick, bench.problem, bench.facts) is None:
            break
    configs.append(pick)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PoCL's compiler chatter
        for params in configs:
            m = bench.measure(params)
            assert m.status is Status.OK, (params, m.message)


@needs_opencl
def test_swept_rounds_and_their_tails_verify() -> None:
    # Rows long enough for whole rounds of OPX steps (unrolled or not) plus a tail of 1..OPX-1
    # steps (up to 15 here), in both column groups; the odd size above has no whole rounds of 16.
    from autotune.worker import Setup, make_bench

    spec = specs.load("correlate")
    problem = spec.resolve_problem({"W": 124, "H": 9, "OW": 70, "OH": 5})
    bench = make_bench(Setup(spec, "", problem, "", FAST), make_workload(spec, problem, seed=2))
    for params in ({"OPX": 16, "OPY": 2, "UNROLL": 2, "ACC": "chain", "KSG": 2},
                   {"OPX": 16, "OPY": 1, "UNROLL": 1, "ACC": "vec", "KSL": 4},
                   {"OPX": 20, "OPY": 2, "UNROLL": 1, "ACC": "chain", "KSG": 2},
                   {"OPX": 8, "OPY": 4, "UNROLL": 4, "ACC": "dot", "WGY": 2}):
        config = spec.complete({"VARIANT": "swept", "WGX": 4, **params})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = bench.measure(config)
        assert m.status is Status.OK, (config, m.message)


def test_a_dropped_row_is_caught() -> None:
    # The tolerance must be tight enough to notice a kernel that misses one row of A.
    spec = specs.load("correlate")
    problem = _problem(ODD)
    arrays = host.inputs(problem, np.random.default_rng(1))
    want = host.reference(problem, arrays)["out"]
    a = arrays["imgA"].reshape(problem["H"], problem["W"], 4).copy()
    a[0] = 0.0
    wrong = host.reference(problem, dict(arrays, imgA=a.ravel()))["out"]
    assert compare(spec, "out", want, want, problem)[0] is None
    assert compare(spec, "out", wrong, want, problem)[0] is not None


@needs_opencl
def test_load_kernel_computes_the_correlation() -> None:
    import pyopencl as cl

    import autotune

    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx)
    problem = _problem(ODD)
    arrays = host.inputs(problem, np.random.default_rng(5))
    mf = cl.mem_flags
    a = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=arrays["imgA"])
    b = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=arrays["imgB"])
    out = cl.Buffer(ctx, mf.WRITE_ONLY, arrays["out"].nbytes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no profile here: the default configuration, with a warning
        kernel = autotune.load_kernel("correlate", queue, **ODD)
    assert kernel.arg_names == ("imgA", "imgB", "out")
    kernel(a, b, out).wait()
    got = np.empty_like(arrays["out"])
    cl.enqueue_copy(queue, got, out)
    want = host.direct(problem, arrays).ravel()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@needs_opencl
def test_load_kernel_runs_a_tuned_two_kernel_configuration() -> None:
    # a swept entry with slices across work-groups, as the H200 profile ships: load_kernel must
    # allocate the partial-sum planes and enqueue both kernels
    import pyopencl as cl

    import autotune
    from autotune import device, profiles, settings

    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx)
    spec = specs.load("correlate")
    problem = _problem(ODD)
    # TX and TY left out: only VARIANT == 'local' uses them
    params = {"VARIANT": "swept", "WGX": 4, "WGY": 2, "OPX": 4, "OPY": 2, "UNROLL": 1, "ACC": "dot", "KSL": 2, "KSG": 4}
    info = device.info(queue.device)
    entry = profiles.Entry(problem=problem, params=params, build_flags=(), time_ms=1.0,
                           throughput={}, trials=1, tuned_at="2026-11-21T00:00:00Z",
                           spec_hash=spec.spec_hash)
    profiles.save(entry, "correlate", info.profile_header(),
                  profiles.path_for(info.slug, settings.profiles_dir()))
    kernel = autotune.load_kernel("correlate", queue, **ODD)
    assert kernel.origin == "exact" and kernel.params["KSG"] == 4
    arrays = host.inputs(problem, np.random.default_rng(7))
    mf = cl.mem_flags
    a = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=arrays["imgA"])
    b = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=arrays["imgB"])
    out = cl.Buffer(ctx, mf.WRITE_ONLY, arrays["out"].nbytes)
    kernel(a, b, out).wait()
    got = np.empty_like(arrays["out"])
    cl.enqueue_copy(queue, got, out)
    np.testing.assert_allclose(got, host.direct(problem, arrays).ravel(), rtol=1e-4, atol=1e-3)

