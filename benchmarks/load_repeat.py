"""What a repeated ``load_kernel`` costs as the device's profile grows.

    python3 benchmarks/load_repeat.py [-d SELECTOR] [-n 25 400]

For each count, a profile of that many matmul entries (the first valid configuration, at M = N =
64 + 8 i, K = 64, tuned in January) is written to a temporary AUTOTUNE_HOME; one load_kernel of
M = N = K = 64 (an exact entry) warms up, then the median of 20 more is printed in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-d", "--device", default=None)
    ap.add_argument("-n", "--entries", type=int, nargs="+", default=[25, 400])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="load-repeat-") as home:
        os.environ["AUTOTUNE_HOME"] = home
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    import pyopencl as cl

    import autotune
    from autotune import device, profiles, record, settings
    from autotune import spec as specs
    from autotune.result import Measurement, Status
    from autotune.space import ValidSpace

    info, dev = device.select(args.device)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    mm = specs.load("matmul")
    path = profiles.path_for(info.slug, settings.profiles_dir())
    warnings.simplefilter("ignore")
    print(f"load_kernel('matmul', M=N=K=64) again, {info.name}: median of 20, ms", file=sys.stderr)
    for count in args.entries:
        path.unlink(missing_ok=True)
        for i in range(count):
            problem = mm.resolve_problem({"M": 64 + 8 * i, "N": 64 + 8 * i, "K": 64})
            first = ValidSpace(mm, problem, info.facts()).first()
            m = Measurement(Status.OK, "", (1.0,), params=first)
            entry = replace(record.entry(mm, problem, m, trials=9), tuned_at="2026-01-01T00:00:00Z")
            profiles.save(entry, "matmul", info.profile_header(), path)
        autotune.load_kernel("matmul", queue, M=64, N=64, K=64)
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            autotune.load_kernel("matmul", queue, M=64, N=64, K=64)
            times.append(1e3 * (time.perf_counter() - t0))
        print(f"  {count:4d} entries ({Path(path).stat().st_size // 1024} KiB): {statistics.median(times):7.1f}")


if __name__ == "__main__":
    main()
