"""How long load_kernel takes to find the valid configuration nearest a spec's default where
the default is not valid (a small or odd size, no profile, AUTOTUNE_MEASURE_UNTUNED=0).

    python3 benchmarks/closest_valid.py [KERNEL] [-s 37 50 63 100]

Prints, per size (every size key at it), the median of 5 searches in ms and how many
parameters the nearest changes; device limits are a 2-core CPU's (Intel's runtime).
"""

from __future__ import annotations

import argparse
import statistics
import time

from autotune import space
from autotune import spec as specs

FACTS = {"max_work_group_size": 8192, "local_mem_size": 32768, "compute_units": 2,
         "max_work_item_sizes": (8192, 8192, 8192), "global_mem_size": 2**34, "max_mem_alloc_size": 2**33}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel", nargs="?", default="matmul")
    ap.add_argument("-s", "--sizes", type=int, nargs="+", default=[37, 50, 63, 100])
    args = ap.parse_args()
    sp = specs.load(args.kernel)
    for n in args.sizes:
        problem = sp.resolve_problem({k.name: n for k in sp.problem if k.is_size})
        default = space.canonical(sp, sp.default_config, problem, FACTS)
        times, near = [], None
        for _ in range(5):
            t0 = time.perf_counter()
            near = space.closest_valid(sp, default, problem, FACTS)
            times.append((time.perf_counter() - t0) * 1e3)
        changed = "none valid" if near is None else sum(near[k] != default[k] for k in default)
        print(f"{args.kernel} at {n}: {statistics.median(times):.1f} ms, {changed} parameters changed")


if __name__ == "__main__":
    main()
