"""Search efficiency on recorded spaces: `autotune replay` over many seeds, as one table.

    python3 benchmarks/replay_table.py [--seeds 20] [--samplers tpe,random] [--jobs N] CACHE_FILE...

For each space and sampler: the median number of measured configurations until the best is
within 5% of the recorded optimum, and the share of seeds that get there within 100 and 400.
The cache files are Kernel Tuner's (e.g. the AutoTuningAssociation benchmark_hub's). With
``--jobs N`` the seeds are replayed in N processes (a replay is deterministic per seed, so the
table is the same as with one).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from functools import cache

from autotune import replay
from autotune.proposer import Sampler


@cache
def _recording(path: str) -> replay.Recorded:
    return replay.load(path)  # once per process


def _one(path: str, trials: int, sampler: Sampler, seed: int, ahead: int | None) -> replay.ReplayResult:
    return replay.replay(_recording(path), trials, sampler, seed, ahead=ahead)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cache", nargs="+")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--samplers", default="tpe,random")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=1, help="processes replaying seeds at once (default 1)")
    ap.add_argument("--compile-ahead", type=int, default=None,
                    help="as for run (default: as on a GPU, the next candidate chosen before this one is measured)")
    args = ap.parse_args()
    samplers = [Sampler(s) for s in args.samplers.split(",")]
    print("| space | valid | " + " | ".join(f"{s.value}: median n to 5% / within 100 / within {args.trials}"
                                         for s in samplers) + " |")
    print("|---|---|" + "---|" * len(samplers))
    with ProcessPoolExecutor(args.jobs) as pool:
        for path in args.cache:
            rec = _recording(path)
            cells = []
            for s in samplers:
                t0 = time.perf_counter()
                n = args.seeds
                results = pool.map(_one, [path] * n, [args.trials] * n, [s] * n, range(n),
                                   [args.compile_ahead] * n)
                summary = replay.Summary(tuple(results), 0.05)
                med = summary.median_within()
                shares = f"{summary.share_within(100):.0%} / {summary.share_within(args.trials):.0%}"
                cells.append(f"{med:g} / {shares} ({time.perf_counter() - t0:.0f} s)" if med != float("inf")
                             else f"> {args.trials} / {shares}")
            print(f"| {rec.name} ({rec.device}) | {rec.valid} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
