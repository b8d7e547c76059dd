"""``autotune.probe``: the empty-launch cost is positive, finite and quick to measure."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest

from autotune.probe import LaunchCost, launch_overhead
from conftest import every_runtime, needs_opencl

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime


@needs_opencl
def test_launch_overhead_on_context_and_device() -> None:
    import pyopencl as cl

    from autotune import device

    _, dev = device.select(None)
    t0 = time.perf_counter()
    for target in (cl.Context([dev]), dev):
        cost = launch_overhead(target, repeats=200)
        assert isinstance(cost, LaunchCost) and cost.repeats == 200
        for value in (cost.device_us, cost.device_min_us, cost.enqueue_per_s, cost.host_us):
            assert math.isfinite(value) and value > 0
        assert cost.device_min_us <= cost.device_us
        assert "launches/s" in cost.describe()
    assert time.perf_counter() - t0 < 20
    with pytest.raises(dataclasses.FrozenInstanceError):
        cost.device_us = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        launch_overhead(dev, repeats=0)
