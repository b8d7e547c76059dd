"""``autotune bench``: measure a kernel's tuned configuration and the device ceilings in one run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import ceilings, firstuse, profiles, scratch, settings
from . import device as devices
from . import spec as specs
from .ceilings import Ceiling
from .clcontext import context
from .errors import ProfileError
from .fits import check_fits
from .loader import Choice, choose
from .measure import Bench, TimingOptions, make_workload
from .result import Measurement
from .space import canonical, check
from .spec import Value

#: Launches until 0.5 s of device time (20 at least): on a 2-core CPU device, launches in the
#: first tens of milliseconds after the host's numpy work ran 2x slow (Intel's runtime, OpenBLAS
#: with 2 threads: a tuned 160^3 matmul at 0.12 ms against 0.06 ms), and a cap of 200 launches
#: kept small kernels' whole timing inside that window.
BENCH_TIMING = TimingOptions(warmup=3, min_repeats=20, max_repeats=100_000, min_time_s=0.5)


@dataclass(frozen=True)
class BenchResult:
    """The tuned kernel's measurement, its metrics, and the ceilings measured beside it."""

    spec: specs.KernelSpec
    device: devices.DeviceInfo
    problem: Mapping[str, Any]
    choice: Choice
    measurement: Measurement
    metrics: Mapping[str, float]
    ceilings: tuple[Ceiling, ...]
    baseline: Measurement | None = None  # the spec's baseline variant, timed in the same run
    baseline_invalid: str | None = None  # why the baseline variant cannot run this problem

    @property
    def speedup(self) -> float | None:
        """Baseline time / tuned time, both from this run; None without a valid baseline."""
        return self.measurement.speedup_over(self.baseline)

    def ratios(self, ceiling: Ceiling) -> dict[str, float]:
        """metric / ceiling for every metric in the ceiling's unit (``GB/s``, ``GB/s r+w``, ...)."""
        return {name: value / ceiling.value for name, value in self.metrics.items()
                if name.split()[0] == ceiling.unit}


def run(kernel: str | specs.KernelSpec, problem: Mapping[str, Any] | None = None,
        selector: str | None = None, copy_bytes: int = 1 << 30) -> BenchResult:
    """Verify and time the configuration ``load_kernel`` would use (chosen the same way) and the spec's baseline
    variant (the write-up's starting point); then measure the ceilings."""
    spec = kernel if isinstance(kernel, specs.KernelSpec) else specs.load(kernel)
    prob = spec.resolve_problem(problem)
    info, dev = devices.select(selector)
    check_fits(spec, prob, info)  # before the first-use timer draws the inputs
    with scratch.run_folder(info.key):  # a run on this device is warned of bench's timings, and bench of a run's
        scratch.warn_sharing(info.key, f"{info.name} ({info.selector})")
        return _measured(spec, prob, info, dev, copy_bytes)


def _measured(spec: specs.KernelSpec, prob: dict[str, Any], info: devices.DeviceInfo, dev: Any,
              copy_bytes: int) -> BenchResult:
    """:func:`run`'s timings, on ``dev``."""
    ctx = context(dev)
    choice = choose(spec, info, prob, timer=firstuse.timer(spec, prob, ctx, dev, info.facts()))
    bench = Bench(spec, prob, ctx, make_workload(spec, prob), info.facts(), BENCH_TIMING)
    m = _measure(bench, choice.params)
    baseline = canonical(spec, spec.baseline_config, prob, info.facts())
    invalid = None
    if baseline == dict(choice.params):
        base: Measurement | None = m  # the tuned configuration is the baseline: time it once
    elif (invalid := check(spec, baseline, prob, info.facts())) is None:
        base = _measure(bench, baseline)
        if m.ok and base.ok:
            m, base = _in_turn(bench, m, base)
    else:
        base = None
    metrics = spec.throughput(prob, m.median_ms) if m.ok else {}
    found: list[Ceiling] = []
    if spec.ceiling == "copy":
        found.append(ceilings.copy_bandwidth(ctx, min(copy_bytes, dev.max_mem_alloc_size // 2)))
    else:
        found.append(ceilings.fp32_peak(ctx))
        if spec.ceiling == "sgemm" and {"M", "N", "K"} <= prob.keys():
            shape = (int(prob["M"]), int(prob["N"]), int(prob["K"]))
            sgemm = ceilings.cublas_sgemm(*shape) if info.is_gpu else ceilings.numpy_sgemm(*shape)
            if sgemm is not None:
                found.append(sgemm)
    return BenchResult(spec, info, prob, choice, m, metrics, tuple(found), base, invalid)


def _measure(bench: Bench, params: Mapping[str, Value], verify: bool = True) -> Measurement:
    """``bench.measure``, said once it has run :data:`firstuse.STUCK_S` (trial 104: a baseline
    that never ends held `autotune bench` without a word)."""
    with firstuse.stuck_noted(f"autotune bench of {bench.spec.name} at {specs.problem_label(bench.problem)}",
                              params, "fix that configuration in the spec or the profile (bench times the "
                              "profile's and the spec's baseline; `autotune run` stops one at --max-time-per-config)"):
        return bench.measure(params, verify=verify)


#: After the first timing of each, the tuned configuration and the baseline are timed again in
#: this many more rounds, in turn: one timing after the other gave speed-ups of 0.85x to 2.15x
#: on one entry of a shared 2-core CPU (trial 59).
BENCH_ROUNDS = 2


def _in_turn(bench: Bench, m: Measurement, base: Measurement) -> tuple[Measurement, Measurement]:
    """``m`` and ``base`` with the launches of :data:`BENCH_ROUNDS` more rounds added, the
    baseline first in every other round, so that a slow spell of the device falls on both."""
    times = [list(m.times_ms), list(base.times_ms)]
    for round_ in range(BENCH_ROUNDS):
        for i in (1, 0) if round_ % 2 == 0 else (0, 1):
            again = _measure(bench, (m, base)[i].params, verify=False)
            if not again.ok:  # it verified and ran a moment ago: keep the timings so far
                return m, base
            times[i] += again.times_ms
    return replace(m, times_ms=tuple(times[0])), replace(base, times_ms=tuple(times[1]))


#: The ceilings that hold for the device, whatever the problem: kept for `autotune report`.
DEVICE_CEILINGS = ("copy bandwidth", "fp32 FMA peak")


def keep_ceilings(r: BenchResult) -> str:
    """Keep the device's measured ceilings in its profile (the roofline of `autotune report`);
    says where, or why not."""
    kept = {c.name: {"value": round(c.value, 3), "unit": c.unit, "how": c.how}
            for c in r.ceilings if c.name in DEVICE_CEILINGS}
    if not kept:
        return "no device ceiling to keep"
    path = profiles.path_for(r.device.slug, settings.profiles_dir())
    try:
        profiles.save_ceilings(kept, r.device.profile_header(), path)
    except ProfileError as exc:
        return f"not kept: {exc}"
    return f"{', '.join(kept)} kept in {path} (each the highest measured, for autotune report)"
