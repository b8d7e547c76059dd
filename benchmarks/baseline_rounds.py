"""The spec's baseline variant timed first on an idle device, then again in later rounds.

    python3 benchmarks/baseline_rounds.py KERNEL [-s SIZE] [-d SELECTOR] [--rounds 3] [--launches N]

Why the tuner times the baseline again in its confirmation rounds: measured first, straight
after the host computed the reference, a CPU device's launches can run slow. Each round builds
nothing new (the program is cached) and times the baseline alone; the medians are printed in
ms, one line per round. ``--launches N`` times exactly N launches per round with no warm-up
(``--launches 1 --rounds 1``: what one naive launch costs, for a problem too slow to tune).
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel")
    ap.add_argument("-s", "--size", default=None)
    ap.add_argument("-d", "--device", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--launches", type=int, default=None, help="exactly this many timed launches, no warm-up")
    args = ap.parse_args()

    from autotune import device, measure
    from autotune import spec as specs
    from autotune.clcontext import context
    from autotune.cli import parse_size
    from autotune.space import canonical

    spec = specs.load(args.kernel)
    keys = [k.name for k in spec.problem if k.is_size]
    problem = spec.resolve_problem(parse_size(args.size, keys) if args.size else None)
    info, dev = device.select(args.device)
    timing = measure.TimingOptions() if args.launches is None else measure.TimingOptions(
        warmup=0, min_repeats=args.launches, max_repeats=args.launches, min_time_s=0)
    t0 = time.perf_counter()
    bench = measure.Bench(spec, problem, context(dev), measure.make_workload(spec, problem), info.facts(), timing)
    print(f"{spec.name} {problem} on {info.name} ({info.platform}); workload ready in "
          f"{time.perf_counter() - t0:.1f} s")
    config = canonical(spec, spec.baseline_config, problem, info.facts())
    for round_ in range(args.rounds):
        m = bench.measure(config, verify=round_ == 0)
        if not m.ok:
            raise SystemExit(f"the baseline failed: {m.message}")
        times = ", ".join(f"{t:.3f}" for t in m.times_ms[:8])
        print(f"round {round_ + 1}: median {statistics.median(m.times_ms):.4f} ms over {len(m.times_ms)} "
              f"launches (first ones: {times})")


if __name__ == "__main__":
    main()
