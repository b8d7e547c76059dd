"""First use of a problem without a tuned entry: time the device's tuned configurations there.

Triton's way (``@autotune(configs, key=...)`` benchmarks its candidates the first time it sees
a key), with the candidates a tuning run already chose for other problems on this device:
each is built (several at once), verified against the spec's reference at this problem, as a
tuning run verifies a candidate (a configuration right where it was tuned can be wrong at
another size when the spec's constraints miss a case), and timed on the reference's inputs in
buffers of its own, so the caller's buffers are never written. The spec's baseline and default
are timed after them, so that a pick is never one that those beat there (a tuned configuration
for large problems can lose to the naive kernel on a tiny one). The fastest that verified is
the pick.

Costs of the first call: the reference's inputs and result at this size (computed once), one
build per candidate (the drivers' own caches make repeats cheap) and a few launches each; the
buffers are freed on return.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pyopencl as cl

from .hosttime import noted
from .launch import ProgramCache, quiet_builds
from .measure import Bench, TimingOptions, make_workload
from .result import Measurement
from .spec import KernelSpec, Value, config_label, problem_label

_TIMING_ONE_AT_A_TIME = threading.Lock()

#: At most this many candidates are timed, those tuned for the nearest problems first.
MAX_CANDIDATES = 12
#: Once one candidate has verified, no more are started after this many seconds of first use:
#: on a CPU a large problem's candidates take tens of seconds each (trial 29: correlate's
#: default problem took 149 s for its default and baseline, with nothing printed meanwhile).
BUDGET_S = 20.0
#: A candidate still running after this long is said to be (it may never end: :func:`_stuck`).
STUCK_S = 60.0
#: One warm-up, then at least 3 launches and 20 ms of device time, at most 10 launches.
TIMING = TimingOptions(warmup=1, min_repeats=3, max_repeats=10, min_time_s=0.02, compile_threads=4)


@dataclass(frozen=True)
class Timed:
    """The candidates' measurements (verified and timed), in the order given."""

    measurements: tuple[Measurement, ...]
    cache: ProgramCache  # the programs built for them, for the caller to reuse
    untimed: int = 0  # the last candidates given, not timed: BUDGET_S was up

    @property
    def fastest(self) -> Measurement | None:
        ok = [m for m in self.measurements if m.ok]
        return min(ok, key=lambda m: m.median_ms) if ok else None


def time_candidates(spec: KernelSpec, problem: Mapping[str, Any], ctx: cl.Context, device: cl.Device,
                    facts: Mapping[str, Any], candidates: Sequence[Mapping[str, Value]],
                    fallbacks: Sequence[Mapping[str, Value]] = ()) -> Timed:
    """Build, verify and time each of ``candidates`` at ``problem``, then each of
    ``fallbacks``, cut short once two launches are slower than the fastest candidate (a naive
    baseline on a large problem costs a few launches, not a full timing); none is started
    once :data:`BUDGET_S` has passed and one has verified.

    A configuration that fails to build, launch or verify comes back as a failed Measurement.
    """
    workload = make_workload(spec, problem)
    # one timing at a time in a process: threads timing at once would time each other's load
    with _TIMING_ONE_AT_A_TIME, quiet_builds():  # a build log is normal for tuned variants
        bench = Bench(spec, problem, ctx, workload, facts, TIMING, device)
        try:
            for params in [*candidates, *fallbacks]:  # built in the background, on TIMING.compile_threads
                bench.prefetch(params)
            timed: list[Measurement] = []
            end, untimed = time.perf_counter() + BUDGET_S, 0
            what = f"first use of {spec.name} at {problem_label(problem)}"
            for i, params in enumerate([*candidates, *fallbacks]):
                fastest = Timed(tuple(timed), bench.cache).fastest
                if fastest is not None and time.perf_counter() > end:
                    untimed = len(candidates) + len(fallbacks) - i
                    break
                cutoff = fastest.median_ms if fastest is not None and i >= len(candidates) else None
                with stuck_noted(what, params, FIRST_USE_WAY_OUT):
                    timed.append(bench.measure(params, cutoff_ms=cutoff))
            return Timed(tuple(_pick_checked(bench, timed, what)), bench.cache, untimed)
        finally:
            bench.cache.close()  # no build outlives the filter


#: What a first use's hung candidate leaves to do, beside ending the process.
FIRST_USE_WAY_OUT = ("tune this size with `autotune run` (it stops a configuration at --max-time-per-config), "
                     "or set AUTOTUNE_MEASURE_UNTUNED=0")


def stuck_noted(what: str, params: Mapping[str, Value], way_out: str) -> AbstractContextManager[None]:
    """A note once the measurement of ``params`` in the block has run :data:`STUCK_S` (trial 98:
    one that spun for ever at an odd size hung the application without a word, Ctrl-C
    included; trial 104: `autotune bench` on a baseline that does so). ``what``: the work, as
    "first use of matmul at M=64"; ``way_out``: what to do instead."""
    return noted(f"{what}: {config_label(params)} has been verified and timed for {STUCK_S:g} s; a kernel that "
                 "never ends at this size holds the process, and Ctrl-C does not reach it while the runtime waits "
                 f"for it: if so, end the process (kill {os.getpid()}), and {way_out}", STUCK_S)


def _pick_checked(bench: Bench, timed: list[Measurement], what: str) -> list[Measurement]:
    """``timed`` with its fastest verified again strictly (Bench.verify_strictly: other bytes in
    the zones and unwritten elements), and the next where that one fails: the pick is saved at
    once, with no leaders' check again (trial 40). Only the pick: checking every candidate made
    a first use a third slower (trial 46)."""
    out = list(timed)
    while (best := Timed(tuple(out), bench.cache).fastest) is not None:
        with stuck_noted(what, best.params or {}, FIRST_USE_WAY_OUT):
            failed = bench.verify_strictly(best.params or {})
        if failed is None:
            break
        out[next(i for i, m in enumerate(out) if m is best)] = failed
    return out


#: Times candidate configurations of one problem, then fallbacks (what :func:`timer` makes).
Timer = Callable[[Sequence[Mapping[str, Value]], Sequence[Mapping[str, Value]]], Timed]


def timer(spec: KernelSpec, problem: Mapping[str, Any], ctx: cl.Context, device: cl.Device,
          facts: Mapping[str, Any]) -> Timer:
    """:func:`time_candidates` bound to one problem and device, for ``loader.choose``."""
    def run(candidates: Sequence[Mapping[str, Value]], fallbacks: Sequence[Mapping[str, Value]] = ()) -> Timed:
        return time_candidates(spec, problem, ctx, device, facts, candidates, fallbacks)
    return run
