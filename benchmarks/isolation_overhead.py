"""Per-trial cost of measuring in an isolated worker process vs in the tuning process.

Evaluates the same matmul configurations with both evaluators, interleaved, after one warm
pass that fills the OpenCL compiler caches, and prints the median wall time per trial of each,
their difference, and the worker's start-up time.

    python3 benchmarks/isolation_overhead.py [--size 64] [--configs 20] [--device SELECTOR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from autotune import device, spec
from autotune.measure import TimingOptions, make_workload
from autotune.space import enumerate_valid
from autotune.worker import InProcessEvaluator, IsolatedEvaluator, Setup, save_workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--configs", type=int, default=20)
    ap.add_argument("--device")
    args = ap.parse_args()

    sp = spec.load("matmul")
    problem = sp.resolve_problem({"M": args.size, "N": args.size, "K": args.size})
    info, _ = device.select(args.device)
    configs = random.Random(0).sample(enumerate_valid(sp, problem, info.facts()), args.configs)
    workload = make_workload(sp, problem)
    timing = TimingOptions(warmup=1, min_repeats=5, max_repeats=5, min_time_s=0.0)
    with tempfile.TemporaryDirectory() as tmp:
        setup = Setup(sp, info.selector, dict(problem), save_workload(workload, Path(tmp)), timing)
        t0 = time.perf_counter()
        isolated = IsolatedEvaluator(setup)
        isolated.evaluate(sp.baseline_config, None)  # starts the worker
        startup = time.perf_counter() - t0
        inproc = InProcessEvaluator(setup, workload)
        # warm pass: both see cached compiler output afterwards; keep configurations that run here
        configs = [c for c in configs if inproc.evaluate(c, None).ok]
        inproc = InProcessEvaluator(setup, workload)  # fresh in-memory program cache
        walls: dict[str, list[float]] = {"in-process": [], "isolated": []}
        for c in configs:
            for name, ev in (("isolated", isolated), ("in-process", inproc)):
                t = time.perf_counter()
                m = ev.evaluate(c, 60.0)
                walls[name].append(time.perf_counter() - t)
                assert m.ok, (name, m)
        isolated.close()
    med = {k: statistics.median(v) * 1e3 for k, v in walls.items()}
    print(f"device {info.name}; matmul {args.size}^3; {len(configs)} configurations, each measured "
          f"by both (build from cache + verify + 6 launches)")
    for k, v in med.items():
        print(f"  {k:<11} median {v:8.2f} ms per trial")
    print(f"  overhead    {med['isolated'] - med['in-process']:8.2f} ms per trial "
          f"({med['isolated'] / med['in-process']:.2f}x); worker start-up {startup:.2f} s once")


if __name__ == "__main__":
    main()
