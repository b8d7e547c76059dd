"""`autotune bench`: the tuned (here: default) configuration, the baseline and a ceiling, one run."""

from __future__ import annotations

import warnings

import pytest
from conftest import needs_opencl

from autotune import benchmark


@needs_opencl
def test_bench_times_the_choice_the_baseline_and_the_copy_ceiling() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no profile for this device: the default, with a warning
        r = benchmark.run("reverse", {"N": 1 << 20}, copy_bytes=1 << 22)
    assert r.choice.source == "default" and r.measurement.ok
    assert r.baseline is not None and r.baseline.ok
    assert r.speedup == pytest.approx(r.baseline.median_ms / r.measurement.median_ms)
    (copy,) = r.ceilings
    assert copy.unit == "GB/s" and copy.value > 0
    ratios = r.ratios(copy)
    assert set(ratios) == {"GB/s"}
    assert ratios["GB/s"] == pytest.approx(r.metrics["GB/s"] / copy.value)
