"""The ``mathpath`` kernel: accurate formulations verify, the accuracy bound rejects sloppy ones."""

from __future__ import annotations

import math
import random
import warnings
from typing import Any

import numpy as np

from autotune import spec as specs
from autotune.kernels import mathpath
from autotune.measure import Bench, make_workload
from autotune.result import Status
from autotune.space import check, enumerate_valid, geometry
from conftest import FAKE, FAST, every_runtime, needs_opencl, verified

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

SPEC = specs.load("mathpath")
# Formulations accurate by construction on any conforming device: correctly rounded-ish
# power functions, IEEE division or its reciprocal, no relaxed math.
ACCURATE = {"FORMULA": ("pow", "powr", "pown"), "DIVISION": ("div", "recip"), "fast_math": (False,)}


def problem(n: int, p: int = 8) -> dict[str, Any]:
    return SPEC.resolve_problem({"N": n, "P": p})


def config(**partial: Any) -> dict[str, Any]:
    base = dict(SPEC.baseline)
    base.update(partial)
    return SPEC.complete(base)


# --------------------------------------------------------------------------- no device


def test_baseline_default_and_tolerance() -> None:
    prob = problem(2**22)
    baseline, default = SPEC.baseline_config, SPEC.default_config
    assert (baseline["FORMULA"], baseline["DIVISION"], baseline["EXPR"]) == ("pow", "div", "long")
    assert not any(baseline[p.name] for p in SPEC.parameters if p.flag)
    for c in (baseline, default):
        assert check(SPEC, c, prob, FAKE.facts()) is None
    assert float(SPEC.atol(prob)) == 0.0 and 0 < float(SPEC.rtol(prob)) < 1e-5
    assert SPEC.metrics[0][0] == "Gelem/s"


def test_fast_math_keeps_one_copy_of_what_it_implies() -> None:
    prob = problem(4096)
    assert check(SPEC, config(fast_math=True), prob, FAKE.facts()) is None
    assert check(SPEC, config(fast_math=True, mad=True), prob, FAKE.facts())
    assert check(SPEC, config(fast_math=True, no_signed_zeros=True), prob, FAKE.facts())


def test_ragged_sizes_round_the_grid_up() -> None:
    geo = geometry(SPEC, config(WG=64, IPT=4), problem(1000), FAKE.facts())
    assert geo.steps[0].global_size == (256,) and geo.steps[0].local_size == (64,)


def test_reference_is_the_documented_formula() -> None:
    x = np.array([0.5, 1.0, 2.0], np.float32)
    want = [0.5**8 / 1.5 + 2.5 / 3.25, 1 / 2 + 3 / 4, 256 / 3 + 4 / 7]
    np.testing.assert_allclose(mathpath.reference(problem(3), {"x": x})["y"], want, rtol=1e-15)


# --------------------------------------------------------------------------- OpenCL


def _bench(prob: dict[str, Any]) -> Bench:
    import pyopencl as cl

    from autotune import device

    info, dev = device.select(None)
    return Bench(SPEC, prob, cl.Context([dev]), make_workload(SPEC, prob), info.facts(), FAST)


def _output(bench: Bench) -> np.ndarray:
    import pyopencl as cl

    got = np.empty(bench.problem["N"], np.float32)
    cl.enqueue_copy(bench.queue, got, bench.args["y"])
    return got


@needs_opencl
def test_default_and_random_accurate_configs_verify() -> None:
    prob = problem(10007, p=5)  # a prime size: every configuration takes the bounds-checked path
    bench = _bench(prob)
    valid = [c for c in enumerate_valid(SPEC, prob, bench.facts)
             if all(c[k] in v for k, v in ACCURATE.items())]
    picks = random.Random(7).sample(valid, 5)
    checked = 0
    for c in [SPEC.default_config] + picks:
        if verified(bench.measure(c), c):
            assert mathpath.max_rel_error(_output(bench), bench.workload.expected["y"]) <= 4e-7
            checked += 1
    assert checked >= 3


@needs_opencl
def test_accuracy_bound_rejects_exp_log_and_reports_max_error() -> None:
    # 2^20 elements: enough that the worst element of exp(P·log x) shows up.
    bench = _bench(problem(2**20))
    want = bench.workload.expected["y"]
    rtol = float(SPEC.rtol(bench.problem))

    base = bench.measure(config(WG=64, IPT=8))
    assert base.status is Status.OK, base.message
    worst = mathpath.max_rel_error(_output(bench), want)
    assert 0 < worst <= rtol and 0 < base.error <= worst  # norm error ≤ max error

    results = {
        name: bench.measure(config(WG=64, IPT=8, **partial)).status
        for name, partial in {
            "mul": {"FORMULA": "mul"},
            "exp_log": {"FORMULA": "exp_log"},
            "native_exp_log": {"FORMULA": "native_exp_log", "DIVISION": "native"},
            "mul_fast": {"FORMULA": "mul", "fast_math": True},
            "pow_fast_native": {"FORMULA": "pow", "DIVISION": "native", "fast_math": True},
        }.items()
    }
    if "Portable Computing Language" in bench.ctx.devices[0].platform.name:
        # On PoCL: the P-1 multiplications stay inside 4e-7, exp(8·log x) and the products
        # reassociated by -cl-fast-relaxed-math do not; its pow and native_divide are exact enough.
        assert results == {"mul": Status.OK, "exp_log": Status.WRONG_RESULT,
                           "native_exp_log": Status.WRONG_RESULT, "mul_fast": Status.WRONG_RESULT,
                           "pow_fast_native": Status.OK}
    else:
        assert set(results.values()) <= {Status.OK, Status.WRONG_RESULT}


@needs_opencl
def test_template_compiles_alone() -> None:
    import pyopencl as cl

    from autotune import device

    _, dev = device.select(None)
    ctx = cl.Context([dev])
    cl.Program(ctx, SPEC.source).build()


@needs_opencl
def test_load_kernel_computes_the_formula() -> None:
    import pyopencl as cl

    import autotune
    from autotune import device

    _, dev = device.select(None)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autotune.AutotuneWarning)  # no profile: default config
        k = autotune.load_kernel("mathpath", queue, N=1000, P=3)
    x = np.random.default_rng(1).uniform(0.5, 2.0, 1000).astype(np.float32)
    mf = cl.mem_flags
    xb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(ctx, mf.WRITE_ONLY, x.nbytes)
    k(xb, yb).wait()
    y = np.empty_like(x)
    cl.enqueue_copy(queue, y, yb)
    assert mathpath.max_rel_error(y, mathpath.formula(x, 3)) <= 4e-7


@needs_opencl
def test_tune_finds_a_verified_winner() -> None:
    import autotune

    report = autotune.tune("mathpath", autotune.TuneOptions(
        trials=3, sampler="random", seed=3, save=False, isolate=False, timing=FAST),
        problem={"N": 4096})
    assert report.best is not None and report.best.ok
    assert report.baseline is not None and report.baseline.ok
    assert math.isfinite(report.throughput()["Gelem/s"])
