"""`autotune bench`: the tuned (here: default) configuration, the baseline and a ceiling, one run."""

from __future__ import annotations

import time
import warnings
from types import SimpleNamespace

import pytest

from autotune import benchmark, firstuse
from autotune.errors import AutotuneWarning
from conftest import needs_opencl


@needs_opencl
def test_bench_times_the_choice_the_baseline_and_the_copy_ceiling() -> None:
    from autotune import device, loader
    from autotune import spec as specs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # without a profile: the default and baseline measured, with a warning
        r = benchmark.run("reverse", {"N": 1 << 20}, copy_bytes=1 << 22)
        spec = specs.load("reverse")
        chosen = loader.choose(spec, device.select(None)[0], spec.resolve_problem({"N": 1 << 20}))  # bench's pick
    assert (r.choice.params, r.choice.origin) == (chosen.params, chosen.origin) == (chosen.params, "measured")
    assert r.measurement.ok, "bench measures what load_kernel would use"
    assert r.baseline is not None and r.baseline.ok
    assert r.speedup == pytest.approx(r.baseline.median_ms / r.measurement.median_ms)
    (copy,) = r.ceilings
    assert copy.unit == "GB/s" and copy.value > 0
    ratios = r.ratios(copy)
    assert set(ratios) == {"GB/s"}
    assert ratios["GB/s"] == pytest.approx(r.metrics["GB/s"] / copy.value)


@needs_opencl
def test_bench_of_matmul_on_a_cpu_compares_with_numpy() -> None:
    from autotune import device

    if device.select(None)[0].is_gpu:
        pytest.skip("numpy is the ceiling of CPU devices; a GPU gets cuBLAS")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = benchmark.run("matmul", {"M": 64, "N": 64, "K": 64})
    assert r.measurement.ok
    numpy_ceiling = next(c for c in r.ceilings if c.name == "numpy matmul")
    assert numpy_ceiling.unit == "GFLOP/s" and numpy_ceiling.value > 0 and "64x64x64" in numpy_ceiling.how
    assert r.ratios(numpy_ceiling)["GFLOP/s"] == pytest.approx(r.metrics["GFLOP/s"] / numpy_ceiling.value)


@needs_opencl
def test_bench_says_why_a_baseline_that_cannot_run_the_problem_is_not_timed(tmp_path, capsys) -> None:
    from autotune import cli
    from conftest import SCALE_YAML, write_spec

    # a baseline of 32 work-items, one element each, cannot cover N = 48; WG 16 can
    path = write_spec(tmp_path, SCALE_YAML.replace("baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 1, WG: 32}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["bench", str(path), "-s", "48"]) == 0
    out = capsys.readouterr().out
    assert "baseline    not timed: the baseline variant cannot run this problem (" in out, out
    assert "(N // WPT) % WG == 0" in out, "the constraint it breaks is named"


@pytest.mark.parametrize("gbs, above", [(150.0, True), (80.0, False)])
def test_bench_explains_a_share_of_the_copy_ceiling_above_100_percent(monkeypatch, capsys, gbs, above) -> None:
    """Trial 16: a small problem that sits in a cache showed 150% of the copy bandwidth, unexplained."""
    from autotune import cli, loader
    from autotune import spec as specs
    from autotune.ceilings import Ceiling
    from autotune.result import Measurement, Status
    from conftest import FAKE

    spec = specs.load("reverse")
    problem = spec.resolve_problem({"N": 4096})
    m = Measurement(Status.OK, "", (0.01, 0.01), params=spec.default_config)
    copy = Ceiling("copy bandwidth", 100.0, "GB/s", "clEnqueueCopyBuffer of 1024 MiB")
    result = benchmark.BenchResult(spec, FAKE, problem, loader.Choice(spec.default_config, "exact"), m,
                                   {"GB/s": gbs}, (copy,))
    monkeypatch.setattr(benchmark, "run", lambda *a, **k: result)
    monkeypatch.setattr(benchmark, "keep_ceilings", lambda r: "nothing")
    assert cli.main(["bench", "reverse", "-s", "4096"]) == 0
    out = capsys.readouterr().out
    assert f"GB/s: {gbs:.1f}% of it" in out
    assert ("above the ceiling: this problem's data fits in a cache" in out) == above


def test_a_lower_ceiling_measured_later_does_not_replace_a_higher_one(monkeypatch, capsys, tmp_path) -> None:
    """Trial 44: a bench on a busy machine measured an FP32 peak of 24.9 GFLOP/s, replaced the
    111.7 kept, and kernels were drawn at 200% of it without a word."""
    from autotune import cli, loader, profiles
    from autotune import spec as specs
    from autotune.ceilings import Ceiling
    from autotune.result import Measurement, Status
    from conftest import FAKE

    path = tmp_path / "dev.yaml"
    for value in (111.7, 24.9):
        profiles.save_ceilings({"fp32": {"value": value, "unit": "GFLOP/s"}}, FAKE.profile_header(), path)
    assert profiles.read(path)["device"]["ceilings"]["fp32"]["value"] == 111.7
    profiles.save_ceilings({"fp32": {"value": 120.0, "unit": "GFLOP/s"}}, FAKE.profile_header(), path)
    assert profiles.read(path)["device"]["ceilings"]["fp32"]["value"] == 120.0
    spec = specs.load("matmul")
    problem = spec.resolve_problem({"M": 64, "N": 64, "K": 64})
    m = Measurement(Status.OK, "", (0.01, 0.01), params=spec.default_config)
    peak = Ceiling("fp32 FMA peak", 24.9, "GFLOP/s", "a chain of FMAs")
    numpy = Ceiling("numpy matmul", 30.0, "GFLOP/s", "numpy's matmul on the host")
    result = benchmark.BenchResult(spec, FAKE, problem, loader.Choice(spec.default_config, "exact"), m,
                                   {"GFLOP/s": 50.0}, (peak, numpy))
    monkeypatch.setattr(benchmark, "run", lambda *a, **k: result)
    monkeypatch.setattr(benchmark, "keep_ceilings", lambda r: "nothing")
    assert cli.main(["bench", "matmul", "-s", "64"]) == 0
    out = capsys.readouterr().out
    assert out.count("above the ceiling: it was measured low (a busy device?)") == 1, out
    # trial 59: numpy is a library to beat, timed now and never kept: no "the profile keeps it"
    assert "faster than numpy matmul (timed now, on this machine as it is: not kept)" in out, out


def test_bench_times_the_tuned_configuration_and_the_baseline_in_turn(monkeypatch):
    """Trial 59: one timing after the other gave speed-ups of 0.85x to 2.15x on one entry of a
    shared CPU; both are timed in more rounds, in turn, the baseline first every other round."""
    from autotune.result import Measurement, Status

    order: list[str] = []

    class Fake:
        spec, problem, slow_s = SimpleNamespace(name="scale"), {"N": 256}, 0.0

        def measure(self, params, verify=True):
            order.append(params["v"])
            time.sleep(self.slow_s if params["v"] == "base" else 0)
            return Measurement(Status.OK, "", (1.0,) if params["v"] == "tuned" else (2.0,), params=params)

    tuned = Measurement(Status.OK, "", (1.0,), params={"v": "tuned"})
    base = Measurement(Status.OK, "", (9.0,), params={"v": "base"})  # a slow spell on its first timing
    m, b = benchmark._in_turn(Fake(), tuned, base)
    assert order == ["base", "tuned", "tuned", "base"][:2 * benchmark.BENCH_ROUNDS]
    assert len(m.times_ms) == len(b.times_ms) == benchmark.BENCH_ROUNDS + 1 and b.median_ms == 2.0
    # trial 104: a baseline that never ended held bench without a word
    monkeypatch.setattr(firstuse, "STUCK_S", 0.1)
    Fake.slow_s = 0.4
    with pytest.warns(AutotuneWarning, match=r"^autotune bench of scale at N=256: v=base has been verified and timed "
                      r"for 0.1 s; a kernel that never ends .*kill \d+\), and fix that configuration in the spec or "
                      r"the profile .*--max-time-per-config\)$"):
        benchmark._in_turn(Fake(), tuned, base)
