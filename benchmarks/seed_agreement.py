"""How often two tuning runs with different seeds save winners that differ by more than 10%,
re-measured side by side: the winner of the search alone (the best single measurement, what
was saved before the confirm step) and the winner after the confirm step.

    python3 benchmarks/seed_agreement.py [--kernel matmul] [--size 256] [--pairs 6] [--trials 20] [--load 1]

``--load N`` keeps N busy processes running meanwhile (a shared, noisy machine). Each pair's
winners are timed again in 5 interleaved rounds in one worker; a pair disagrees when the two
medians differ by more than 10%.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
from pathlib import Path

import optuna


def _busy() -> None:
    while True:
        pass


def _winners(report, storage: str) -> tuple[dict, dict]:  # type: ignore[no-untyped-def]
    """(the search's own best, the saved best after the confirm step)."""
    study = optuna.load_study(study_name=report.study_name, storage=storage)
    ok = [t for t in study.trials if t.user_attrs.get("status") == "ok" and not t.user_attrs.get("pruned")]
    first = min(ok, key=lambda t: statistics.median(t.user_attrs["times_ms"]))
    return dict(first.params), dict(report.best.params)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="matmul")
    ap.add_argument("--size", default="256")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--load", type=int, default=1)
    args = ap.parse_args()
    from autotune import spec as specs
    from autotune.cli import parse_size
    from autotune.device import select
    from autotune.measure import TimingOptions, make_workload
    from autotune.tuner import TuneOptions, tune
    from autotune.worker import Setup, open_evaluator

    spec = specs.load(args.kernel)
    problem = spec.resolve_problem(parse_size(args.size, [k.name for k in spec.problem if k.is_size]))
    info = select(None)[0]
    hogs = [mp.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for h in hogs:
        h.start()
    before = after = 0
    with tempfile.TemporaryDirectory() as home:
        os.environ["AUTOTUNE_HOME"] = home
        ev = open_evaluator(Setup(spec, info.selector, problem, "", TimingOptions()), make_workload(spec, problem),
                            True, Path(home))
        try:
            for pair in range(args.pairs):
                wins = []
                for seed in (2 * pair, 2 * pair + 1):
                    storage = f"sqlite:///{home}/studies-{seed}.db"
                    report = tune(spec, TuneOptions(trials=args.trials, timeout_s=None, seed=seed, save=False,
                                                    storage=storage), problem=problem)
                    wins.append(_winners(report, storage))
                cells = []
                for k in (0, 1):  # 0: the search's own best, 1: after the confirm step
                    a, b = wins[0][k], wins[1][k]
                    times: dict[int, list[float]] = {0: [], 1: []}
                    for r in range(5):
                        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                            m = ev.evaluate((a, b)[i], 120, None, verify=False)
                            times[i].extend(m.times_ms)
                    ta, tb = statistics.median(times[0]), statistics.median(times[1])
                    apart = max(ta, tb) / min(ta, tb) - 1
                    cells.append(f"{ta:.3f} vs {tb:.3f} ms ({100 * apart:.0f}% apart)")
                    if apart > 0.10:
                        if k == 0:
                            before += 1
                        else:
                            after += 1
                print(f"pair {pair}: search's best {cells[0]}; confirmed {cells[1]}", flush=True)
        finally:
            ev.close()
    print(f"{info.name}, {args.kernel} {args.size}, {args.trials} trials, {args.load} busy process(es): "
          f"pairs > 10% apart: search's best {before}/{args.pairs}, after confirming {after}/{args.pairs}")


if __name__ == "__main__":
    main()
