"""The cost of an empty kernel launch on a device ("Benchmark Leak": what a launch costs).

Two numbers bound every tuned kernel from below: the device time of a kernel that does
nothing (from profiling events) and the host's cost to enqueue one (launches per second
enqueued back to back, and the wall time per launch once the queue has drained).

Example:
    >>> import pyopencl as cl
    >>> cost = launch_overhead(cl.create_some_context(interactive=False), repeats=200)
    >>> cost.device_us > 0 and cost.enqueue_per_s > 0
    True
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import pyopencl as cl

from .clcontext import context
from .launch import build_quietly

EMPTY_KERNEL = "__kernel void empty(void) {}"


@dataclass(frozen=True)
class LaunchCost:
    """What one empty launch costs.

    Attributes:
        device_us: median device time of one launch, profiling end − start (µs).
        device_min_us: the fastest launch seen (µs).
        enqueue_per_s: launches enqueued per second, back to back without waiting.
        host_us: wall time per launch for the same batch including the final ``finish`` (µs).
        repeats: launches in each measurement.
    """

    device_us: float
    device_min_us: float
    enqueue_per_s: float
    host_us: float
    repeats: int

    def describe(self) -> str:
        """One line for the CLI."""
        return (f"empty launch: {self.device_us:.2f} µs on the device (median, min "
                f"{self.device_min_us:.2f}); host enqueues {self.enqueue_per_s:,.0f} launches/s (the enqueues "
                f"alone), {self.host_us:.2f} µs per launch with the wait for them all to finish "
                f"({self.repeats} launch{'es' * (self.repeats != 1)})")  # (trial 126: the two read as one)


#: The most launches in a batch: every launch's profiling event is held until the batch has
#: run, about 2.3 KB each on Intel's CPU runtime (3,000,000 took 7 GB, and 10^8 all memory).
MAX_REPEATS = 100_000


def launch_overhead(ctx_or_device: cl.Context | cl.Device, repeats: int = 1000,
                    warmup: int = 20) -> LaunchCost:
    """Measure ``__kernel void empty() {}`` on a 1-work-item NDRange.

    ``ctx_or_device`` is a context (its first device is used) or a device (a context is
    made for it). The device time comes from one batch of launches with profiling events;
    the host rate from a second batch enqueued back to back, so waiting on events does not
    slow the enqueue loop.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1 (got {repeats})")
    if isinstance(ctx_or_device, cl.Context):
        ctx, device = ctx_or_device, ctx_or_device.devices[0]
    else:
        device = ctx_or_device
        ctx = context(device)
    queue = cl.CommandQueue(ctx, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    kernel = cl.Kernel(build_quietly(ctx, EMPTY_KERNEL), "empty")
    one = (1,)

    # Warm up: the first launches pay for lazy work (code generation, thread start-up).
    for _ in range(warmup):
        cl.enqueue_nd_range_kernel(queue, kernel, one, one)
    queue.finish()

    events = [cl.enqueue_nd_range_kernel(queue, kernel, one, one) for _ in range(repeats)]
    queue.finish()
    device_us = [(e.profile.end - e.profile.start) * 1e-3 for e in events]
    del events

    t0 = time.perf_counter()
    for _ in range(repeats):
        cl.enqueue_nd_range_kernel(queue, kernel, one, one)
    t_enqueued = time.perf_counter()
    queue.finish()
    t_done = time.perf_counter()

    return LaunchCost(
        device_us=statistics.median(device_us),
        device_min_us=min(device_us),
        enqueue_per_s=repeats / max(t_enqueued - t0, 1e-9),
        host_us=(t_done - t0) / repeats * 1e6,
        repeats=repeats,
    )
