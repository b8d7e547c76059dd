#!/usr/bin/env python3
# ruff: noqa: UP031, E501
"""Baseline: Kernel Tuner search strategies on recorded (brute-forced) tuning spaces.

Runs kernel_tuner.tune_kernel in simulation mode against Kernel Tuner cache files
(gzipped JSON) and measures, per strategy and seed, how many evaluations it takes
until the best valid time found so far is within 5% of the cache's best time.

Run with the Kernel Tuner venv, e.g.:

    python -m venv kt && kt/bin/pip install kernel_tuner==1.5.0
    kt/bin/python benchmarks/kt_baseline.py --cache-dir DIR --out kt_runs.jsonl

DIR holds the cache files named as in SPACES, taken from the AutoTuningAssociation
benchmark_hub repository (see README, "Search efficiency on recorded spaces").

Each finished run is appended as one JSON line to --out, so an interrupted
benchmark can be resumed (already-done runs are skipped) and reported with
--report-only.

Definitions
-----------
* Search space: only the configurations whose key is in the cache (a callable
  restriction ``key in cache``).  Entries whose ``time`` is an error string
  (CompilationFailedConfig / RuntimeFailedConfig) are part of the space and count
  as evaluations, but never as a valid time.
* Evaluation count: Kernel Tuner's own budget counts *unique* configurations
  (a revisit is served again but does not consume max_fevals).  ``n_to_5`` counts
  unique configurations in the returned results list, in evaluation order.
  ``n_to_5_raw`` (position in the raw results list, revisits included) is
  recorded in the JSONL as well.
"""

import argparse
import gzip
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings

import kernel_tuner
import numpy as np
from kernel_tuner import tune_kernel

SPACES = [
    "kt_gemm__RTX_2080_Ti",
    "kt_gemm__RTX_3060_laptop",
    "kt_gemm__RTX_3090",
    "kt_gemm__RTX_Titan",
    "convolution_milo__A100",
    "convolution__RTX_3090",
    "dedispersion_milo__MI250X",
    "dedispersion_milo__A100",
    "pnpoly__RTX_3090",
]
STRATEGIES = [
    "genetic_algorithm",
    "dual_annealing",
    "bayes_opt",
    "greedy_ils",
    "simulated_annealing",
    "pso",
    "random_sample",
]
MAX_FEVALS = 400
TOL = 0.05


def is_num(t):
    return isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)


class Space:
    """A decompressed cache file plus what the benchmark needs from it."""

    def __init__(self, name, cache_dir, tmp_dir):
        self.name = name
        with gzip.open(os.path.join(cache_dir, name + ".json.gz"), "rt") as fh:
            data = json.load(fh)
        self.kernel_name = data["kernel_name"]
        self.problem_size = data.get("problem_size")
        self.keys = list(data["tune_params_keys"])
        # keep the tune_params order identical to tune_params_keys (cache key order)
        self.tune_params = {k: data["tune_params"][k] for k in self.keys}
        cache = data["cache"]
        self.cache_keys = frozenset(cache.keys())
        times = [e["time"] for e in cache.values() if is_num(e.get("time"))]
        self.best = min(times)
        self.n_entries = len(cache)
        self.n_valid = len(times)
        # Drop the per-repetition 'times' lists: Kernel Tuner does not use them in
        # simulation mode, and it makes the (re-)parsing in every tune_kernel call cheaper.
        for e in cache.values():
            e.pop("times", None)
        self.path = os.path.join(tmp_dir, name + ".json")
        with open(self.path, "w") as fh:
            json.dump(data, fh)

    def restriction(self):
        keys = self.keys
        cache_keys = self.cache_keys

        def in_cache(p):
            return ",".join(str(p[k]) for k in keys) in cache_keys

        return in_cache


def dummy_kernel(kernel_name):
    return f"__global__ void {kernel_name}(float *a) {{ }}\n"


def n_to_tol(results, keys, best, tol=TOL):
    """Return (n_unique, n_raw) evaluations until best-so-far <= (1+tol)*best, None if never."""
    target = best * (1.0 + tol)
    seen = set()
    best_so_far = math.inf
    for raw_i, r in enumerate(results, start=1):
        key = ",".join(str(r[k]) for k in keys)
        seen.add(key)
        t = r.get("time")
        if "__error__" not in r and is_num(t):
            best_so_far = min(best_so_far, t)
        if best_so_far <= target:
            return len(seen), raw_i
    return None, None


def run_one(space, strategy, seed):
    random.seed(seed)
    np.random.seed(seed)
    strategy_options = {"max_fevals": MAX_FEVALS}  # no KT 1.5.0 strategy here accepts a 'seed' option
    args = [np.zeros(1, dtype=np.float32)]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, env = tune_kernel(
            space.kernel_name,
            dummy_kernel(space.kernel_name),
            space.problem_size,
            args,
            space.tune_params,
            restrictions=space.restriction(),
            strategy=strategy,
            strategy_options=strategy_options,
            cache=space.path,
            simulation_mode=True,
            verbose=False,
            quiet=True,
            seed=seed,  # tune_kernel's seed (only pymoo strategies read it); globals seeded above
        )
    wall = time.perf_counter() - t0
    keys = space.keys
    uniq = []
    seen = set()
    for r in results:
        k = ",".join(str(r[p]) for p in keys)
        if k not in seen:
            seen.add(k)
            uniq.append(r)
    n_err = sum(1 for r in uniq if "__error__" in r or not is_num(r.get("time")))
    not_in_cache = sum(1 for k in seen if k not in space.cache_keys)
    n5, n5_raw = n_to_tol(results, keys, space.best)
    valid_times = [r["time"] for r in uniq if "__error__" not in r and is_num(r.get("time"))]
    return {
        "space": space.name,
        "strategy": strategy,
        "seed": seed,
        "n_to_5": n5,
        "n_to_5_raw": n5_raw,
        "len_results": len(results),
        "n_unique": len(uniq),
        "n_error_evals": n_err,
        "n_not_in_cache": not_in_cache,
        "best_found": min(valid_times) if valid_times else None,
        "cache_best": space.best,
        "wall_s": wall,
    }


# ----------------------------------------------------------------------------- reporting


def median_str(ns, cap=MAX_FEVALS):
    vals = sorted(math.inf if n is None else n for n in ns)
    if not vals:
        return "-", math.inf
    m = statistics.median(vals)  # mean of middle two for even counts
    if math.isinf(m) or (isinstance(m, float) and math.isnan(m)):
        return ">%d" % cap, math.inf
    return (f"{m:g}"), m


def frac(ns, limit):
    return sum(1 for n in ns if n is not None and n <= limit) / len(ns) if ns else 0.0


def report(rows, spaces_info=None):
    out = []
    by = {}
    for r in rows:
        by.setdefault(r["space"], {}).setdefault(r["strategy"], []).append(r)
    winners = []
    for sp in SPACES:
        if sp not in by:
            continue
        info = spaces_info.get(sp) if spaces_info else None
        out.append(f"### {sp}")
        if info:
            out.append("")
            out.append("cache entries: %d (valid times: %d), best time: %.6g ms, 5%% target: %.6g ms"
                       % (info["n_entries"], info["n_valid"], info["best"], info["best"] * (1 + TOL)))
        out.append("")
        out.append("| strategy | seeds | median n to 5% | within 100 | within 400 | mean len(results) | mean unique evals | mean error evals | mean s/run |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        cands = []
        for st in STRATEGIES:
            rs = sorted(by[sp].get(st, []), key=lambda r: r["seed"])
            if not rs:
                out.append(f"| {st} | 0 | not run | - | - | - | - | - | - |")
                continue
            ns = [r["n_to_5"] for r in rs]
            ms, mv = median_str(ns)
            f100, f400 = frac(ns, 100), frac(ns, 400)
            out.append("| %s | %d | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
                st, len(rs), ms, f100, f400,
                statistics.mean(r["len_results"] for r in rs),
                statistics.mean(r["n_unique"] for r in rs),
                statistics.mean(r["n_error_evals"] for r in rs),
                statistics.mean(r["wall_s"] for r in rs)))
            cands.append((mv, -f100, -f400, st, ms, f100, f400, len(rs)))
        out.append("")
        if cands:
            cands.sort()
            best = cands[0]
            ties = [c[3] for c in cands if c[:3] == best[:3]]
            winners.append((sp, best, ties))
    out.append("### Best strategy per space (lowest median n to 5%, ties broken by fraction within 100)")
    out.append("")
    out.append("| space | best strategy | median n to 5% | within 100 | within 400 | seeds |")
    out.append("|---|---|---|---|---|---|")
    for sp, b, ties in winners:
        name = b[3] if len(ties) == 1 else " = ".join(ties) + " (tie)"
        out.append("| %s | %s | %s | %.1f | %.1f | %d |" % (sp, name, b[4], b[5], b[6], b[7]))
    out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", default="/work/cache")
    ap.add_argument("--out", default="kt_baseline_runs.jsonl")
    ap.add_argument("--spaces", nargs="*", default=SPACES)
    ap.add_argument("--strategies", nargs="*", default=STRATEGIES)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--reduced-seeds", type=int, default=5,
                    help="seeds used for a (space, strategy) whose first run exceeded --slow-s")
    ap.add_argument("--slow-s", type=float, default=180.0)
    ap.add_argument("--deadline-s", type=float, default=3600.0, help="stop starting new runs after this")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--report-file", default=None)
    args = ap.parse_args()

    rows = []
    if os.path.exists(args.out):
        with open(args.out) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    done = {(r["space"], r["strategy"], r["seed"]) for r in rows}
    spaces_info = {}
    info_path = args.out + ".spaces.json"
    if os.path.exists(info_path):
        with open(info_path) as fh:
            spaces_info = json.load(fh)

    print("kernel_tuner {}, python {}".format(kernel_tuner.__version__ if hasattr(kernel_tuner, "__version__") else "?",
                                          sys.version.split()[0]), flush=True)
    t_start = time.perf_counter()
    cut = []
    if not args.report_only:
        with tempfile.TemporaryDirectory() as tmp:
            for sp in args.spaces:
                if time.perf_counter() - t_start > args.deadline_s:
                    print(f"deadline reached, stopping before space {sp}", flush=True)
                    break
                space = Space(sp, args.cache_dir, tmp)
                spaces_info[sp] = {"n_entries": space.n_entries, "n_valid": space.n_valid, "best": space.best}
                with open(info_path, "w") as fh:
                    json.dump(spaces_info, fh)
                for st in args.strategies:
                    n_seeds = args.seeds
                    for seed in range(args.seeds):
                        if seed >= n_seeds:
                            break
                        if time.perf_counter() - t_start > args.deadline_s:
                            break
                        if (sp, st, seed) in done:
                            continue
                        try:
                            row = run_one(space, st, seed)
                        except Exception as e:  # record and go on
                            print("ERROR %s %s seed %d: %r" % (sp, st, seed, e), flush=True)
                            continue
                        rows.append(row)
                        with open(args.out, "a") as fh:
                            fh.write(json.dumps(row) + "\n")
                        print("%s %s seed=%d n_to_5=%s len=%d uniq=%d err=%d %.1fs" % (
                            sp, st, seed, row["n_to_5"], row["len_results"], row["n_unique"],
                            row["n_error_evals"], row["wall_s"]), flush=True)
                        if row["wall_s"] > args.slow_s and n_seeds > args.reduced_seeds:
                            n_seeds = args.reduced_seeds
                            cut.append((sp, st, row["wall_s"]))
                            print("  -> slow (%.0fs > %.0fs): reducing %s on %s to %d seeds" % (
                                row["wall_s"], args.slow_s, st, sp, n_seeds), flush=True)
    for sp, st, w in cut:
        print("CUT: %s on %s reduced to %d seeds (first run %.0fs)" % (st, sp, args.reduced_seeds, w))
    text = report(rows, spaces_info)
    print()
    print(text)
    if args.report_file:
        with open(args.report_file, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
