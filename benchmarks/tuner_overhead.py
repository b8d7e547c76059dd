"""The tuner's own time per trial (ask, check, tell, storage), without a device: matmul's space
on a fake GPU, an evaluator that answers at once, the study in SQLite as a real run keeps it.

    python3 benchmarks/tuner_overhead.py [--trials 1000] [--sampler tpe] [--storage URL] [--device-ms 500]

Prints the wall time per measured trial, less the device's share (``--device-ms``, slept: on
a GPU a trial takes 0.5–1 s, during which the study is written), over windows ending at trial
50, 200, 500 and 1000.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from autotune import spec as specs  # noqa: E402
from autotune.result import Measurement, Status  # noqa: E402
from autotune.tuner import TuneOptions, tune  # noqa: E402
from conftest import FAKE  # noqa: E402


class Instant:
    """Answers at once: time = a smooth function of the tile sizes; records when it was called."""

    def __init__(self, device_s: float) -> None:
        self.stamps: list[float] = []
        self.device_s = device_s

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):  # type: ignore[no-untyped-def]
        if verify:
            self.stamps.append(time.perf_counter())
            time.sleep(self.device_s)  # the device's share of a trial, outside the tuner's
        t = 1.0 + abs(params["MWG"] - 64) / 64 + abs(params["NWG"] - 64) / 64 + 0.1 * params["KSPLIT"]
        return Measurement(Status.OK, "", (t, t, t), 0.0, 0.0, 0.0)

    def prefetch(self, upcoming):  # type: ignore[no-untyped-def]
        pass

    def close(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--sampler", default="tpe")
    ap.add_argument("--storage")
    ap.add_argument("--device-ms", type=float, default=0.0,
                    help="time each trial spends on the device (slept; default 0). Per-trial "
                    "figures are printed without it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        storage = args.storage or f"sqlite:///{home}/studies.db"
        ev = Instant(args.device_ms / 1e3)
        t0 = time.perf_counter()
        report = tune(specs.load("matmul"), TuneOptions(trials=args.trials, timeout_s=None, seed=0, save=False,
                                                        sampler=args.sampler, storage=storage),
                      problem={"M": 1024, "N": 1024, "K": 1024}, evaluator=ev, info=FAKE)
        total = time.perf_counter() - t0
    s = ev.stamps
    print(f"matmul 1024³ on a fake GPU, {args.sampler}, {storage.split(':')[0]}: {report.measured} measured, "
          f"{report.skipped_invalid} invalid proposals, {report.repeats} repeats, {total:.1f} s in all")
    for lo, hi in [(0, 50), (150, 200), (450, 500), (950, 1000)]:
        if hi <= len(s):
            per = 1e3 * (s[hi - 1] - s[lo]) / (hi - lo - 1) - args.device_ms
            print(f"  trials {lo + 1:>4}-{hi:<4}: {per:7.1f} ms per trial outside the device")


if __name__ == "__main__":
    main()
