"""Where a tuning trial's time goes on a real device: the tuner's loop, the worker's build,
verification and timing.

    python3 benchmarks/trial_breakdown.py [-d nvidia] [-s 4096] [-t 60] [--compile-ahead N]

Runs ``tune()`` for ``-t`` seconds (study in memory, nothing saved) and prints trials per
minute, medians of the wall time between trials, of the worker's wall time, of the build
time the worker waited for, the share of work-group rejections, and the host-side
check of one output against the reference (what verification costs the host per candidate).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import Counter

import numpy as np

from autotune import spec as specs
from autotune.cli import parse_size
from autotune.result import Measurement
from autotune.tuner import RunState, TuneOptions, tune
from autotune.verify import Expected


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-d", "--device", default=None)
    ap.add_argument("-k", "--kernel", default="matmul")
    ap.add_argument("-s", "--size", default="4096")
    ap.add_argument("-t", "--timeout", type=float, default=60.0)
    ap.add_argument("--compile-ahead", type=int, default=None)
    args = ap.parse_args()
    spec = specs.load(args.kernel)
    problem = spec.resolve_problem(parse_size(args.size, [k.name for k in spec.problem if k.is_size]))
    stamps: list[float] = []
    done: list[Measurement] = []

    def progress(event: str, m: Measurement | None, state: RunState) -> None:
        if event == "trial" and m is not None:
            stamps.append(time.perf_counter())
            done.append(m)

    options = TuneOptions(trials=100_000, timeout_s=args.timeout, storage=":memory:", device=args.device,
                          save=False, compile_ahead=args.compile_ahead, seed=1)
    report = tune(spec, options, problem, progress=progress)
    gaps = np.diff(stamps)
    statuses = Counter(m.status.value for m in done)
    wg = sum("work-group" in m.message for m in done)
    best = report.best.median_ms if report.best else math.inf
    print(f"{spec.name} {args.size} on {report.device.name}: {report.measured} trials in {report.wall_s:.1f} s "
          f"= {60 * report.measured / report.wall_s:.1f} trials/min; best {best:.4f} ms")
    print(f"  between trials: median {1e3 * float(np.median(gaps)):.0f} ms, mean {1e3 * float(np.mean(gaps)):.0f} ms")
    print(f"  worker wall   : median {1e3 * statistics.median(m.wall_s for m in done):.0f} ms")
    print(f"  build waited  : median {1e3 * statistics.median(m.build_s for m in done):.0f} ms, "
          f"sum {sum(m.build_s for m in done):.1f} s")
    print(f"  timed launches: median {statistics.median(len(m.times_ms) for m in done)}, "
          f"pruned {sum(m.pruned for m in done)}")
    print(f"  statuses {dict(statuses)}; work-group rejections {wg} ({100 * wg / max(len(done), 1):.0f}%)")
    want = np.random.default_rng(0).standard_normal((problem.get("M", 1024), problem.get("N", 1024))).astype(np.float32)
    got = want + np.float32(1e-6)
    t0 = time.perf_counter()
    expected = Expected.prepare(spec, spec.outputs[0], want, problem)
    t1 = time.perf_counter()
    for _ in range(3):
        expected.check(got)
    t2 = time.perf_counter()
    print(f"  host check of one {want.shape} output: {1e3 * (t2 - t1) / 3:.0f} ms a candidate "
          f"(prepared once per workload in {1e3 * (t1 - t0):.0f} ms)")

if __name__ == "__main__":
    main()
