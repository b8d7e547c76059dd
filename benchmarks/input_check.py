"""What the check that a configuration left its inputs unchanged costs per verification.

    python3 benchmarks/input_check.py [-d nvidia] [-k matmul] [-s 1024 4096 8192]

For each size: the median over 5 of the inputs' read-back and comparison
(``Bench._restore_inputs``), of one whole verification of the default configuration
(launch, outputs read back and checked, inputs checked), and of one launch, in ms.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import pyopencl as cl

from autotune import device as devices
from autotune import spec as specs
from autotune.cli import parse_size
from autotune.launch import Launch
from autotune.measure import Bench, TimingOptions, make_workload
from autotune.space import canonical


def _median_ms(fn, repeats: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def _launch(bench: Bench, launch: Launch) -> None:
    bench._finish(launch.enqueue(bench.queue, bench.args))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-d", "--device", default=None)
    ap.add_argument("-k", "--kernel", default="matmul")
    ap.add_argument("-s", "--sizes", nargs="+", default=["1024", "4096", "8192"])
    args = ap.parse_args()
    info, dev = devices.select(args.device)
    spec, ctx = specs.load(args.kernel), cl.Context([dev])
    print(f"{spec.name} on {info.name}: ms, median of 5")
    for size in args.sizes:
        problem = spec.resolve_problem(parse_size(size, [k.name for k in spec.problem if k.is_size]))
        bench = Bench(spec, problem, ctx, make_workload(spec, problem), info.facts(), TimingOptions())
        params = canonical(spec, spec.default_config, problem, info.facts())
        launch = Launch(ctx, spec, params, problem, info.facts(), bench.cache)
        inputs_mb = sum(getattr(v, "nbytes", 0) for k, v in bench.workload.inputs.items()
                        if k not in spec.outputs) / 2**20
        check = _median_ms(bench._restore_inputs)
        verify = _median_ms(partial(bench._verify, launch))
        run = _median_ms(partial(_launch, bench, launch))
        print(f"  {size:>6}: inputs {inputs_mb:7.1f} MiB  input check {check:8.2f}  whole verification "
              f"{verify:8.2f} ({100 * check / verify:4.1f}% of it)  one launch {run:8.2f}")


if __name__ == "__main__":
    main()
