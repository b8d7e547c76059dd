"""Search efficiency on recorded spaces: `autotune replay` over many seeds, as one table.

    python3 benchmarks/replay_table.py [--seeds 20] [--samplers tpe,random] [--jobs N]
        [--warm-start CACHE_FILE...] CACHE_FILE...

For each space and sampler: the median number of measured configurations until the best is
within 5% of the recorded optimum, and the share of seeds that get there within 100 and 400.
The cache files are Kernel Tuner's (e.g. the AutoTuningAssociation benchmark_hub's). With
``--jobs N`` the seeds are replayed in N processes (a replay is deterministic per seed, so the
table is the same as with one). With ``--warm-start``, each space's search first measures the
winners of up to three other devices' recordings of the same kernel among those files (see
``autotune replay --warm-start``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import cache

# One BLAS thread per process: the processes are the parallelism. With a BLAS pool in each,
# 16 processes on a 16-core host finished 8 convolution A100 seeds in 570 s; one process with
# one thread replays such a seed in about 2 s.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from autotune import replay  # noqa: E402  (numpy reads the settings above when it loads)
from autotune.errors import AutotuneError  # noqa: E402
from autotune.proposer import Sampler  # noqa: E402


@cache
def _recording(path: str) -> replay.Recorded:
    return replay.load(path)  # once per process


def _readable(paths: list[str]) -> tuple[str, ...]:
    """The warm-start recordings that can be read; the others said and left out, as
    `autotune replay` does (one unreadable file in a glob ended the table)."""
    out = []
    for path in paths:
        try:
            _recording(path)
            out.append(path)
        except AutotuneError as exc:
            print(f"warm start: not {path}: {exc}", file=sys.stderr)
    return tuple(out)


def _one(path: str, trials: int, sampler: Sampler, seed: int, ahead: int | None,
         warm: tuple[str, ...]) -> replay.ReplayResult:
    rec = _recording(path)
    starts, _ = replay.warm_starts(rec, [_recording(w) for w in warm])
    return replay.replay(rec, trials, sampler, seed, ahead=ahead, starts=starts)


def _quiet_worker() -> None:
    """A worker that Ctrl-C reaches ends at once, without a traceback of its own."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))


def main() -> None:
    printed: list[str] = []
    try:
        _table(printed)
    except KeyboardInterrupt:  # (trial 123: tracebacks from every worker, and a half-written row)
        done = ("no row was complete" if not printed else "the row printed above is complete" if len(printed) == 1
                else "the rows printed above are complete")  # (trial 124: said with none printed)
        print(f"\nreplay_table.py: interrupted; {done}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        for worker in multiprocessing.active_children():  # those the signal did not reach
            worker.kill()  # (autotune's handler takes SIGTERM as a request to stop, after the seed)
        os._exit(130)  # not the pool's exit, which waits for every seed in flight


def _table(printed: list[str]) -> None:
    """Print the table, each row's space's name into ``printed`` once its row is."""
    ap = argparse.ArgumentParser()
    ap.add_argument("cache", nargs="+")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--samplers", default="tpe,random")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=1, help="processes replaying seeds at once (default 1)")
    ap.add_argument("--compile-ahead", type=int, default=None,
                    help="as for run (default: as on a GPU, the next candidate chosen before this one is measured)")
    ap.add_argument("--warm-start", nargs="+", default=[], metavar="CACHE_FILE",
                    help="other devices' recordings whose winners each search measures first")
    args = ap.parse_args()
    for name, least in (("seeds", 1), ("trials", 1), ("jobs", 1)):
        if getattr(args, name) < least:
            ap.error(f"--{name} must be at least {least} (got {getattr(args, name)})")
    try:
        samplers = [Sampler(s.strip()) for s in args.samplers.split(",")]
    except ValueError as exc:
        ap.error(f"--samplers: {exc}; choose among {', '.join(s.value for s in Sampler)}")
    try:
        for path in args.cache:
            _recording(path)
    except AutotuneError as exc:
        raise SystemExit(f"replay_table.py: error: {exc}") from None
    warm = _readable(args.warm_start)
    budgets = sorted({min(100, args.trials), args.trials})  # no share past the budget (trial 85)
    within = " / ".join(f"within {n}" for n in budgets)
    print("| space | valid | " + " | ".join(f"{s.value}: median n to 5% / {within}" for s in samplers) + " |")
    print("|---|---|" + "---|" * len(samplers))
    # no `with`: its exit would wait for every seed in flight before Ctrl-C is said
    pool = ProcessPoolExecutor(args.jobs, initializer=_quiet_worker)
    for path in args.cache:
        rec = _recording(path)
        _, used = replay.warm_starts(rec, [_recording(w) for w in warm])
        cells = []
        for s in samplers:
            t0 = time.perf_counter()
            n = args.seeds
            results = pool.map(_one, [path] * n, [args.trials] * n, [s] * n, range(n),
                               [args.compile_ahead] * n, [warm] * n)
            summary = replay.Summary(tuple(results), 0.05)
            med = summary.median_within()
            shares = " / ".join(f"{summary.share_within(n):.0%}" for n in budgets)
            cells.append(f"{med:g} / {shares} ({time.perf_counter() - t0:.0f} s)" if med != float("inf")
                         else f"> {args.trials} / {shares}")
        start = f" from {', '.join(o.name for o in used)}" if warm else ""
        print(f"| {rec.name} ({rec.device}){start} | {rec.valid} | " + " | ".join(cells) + " |", flush=True)
        printed.append(rec.name)
    pool.shutdown()


if __name__ == "__main__":
    main()
