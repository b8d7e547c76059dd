"""matmul at any size as an application meets it: ``load_kernel`` with only the shipped profile
(and the picks it saves), against cuBLAS (GPU, torch, TF32 off) or numpy (CPU) in the same run.

For each shape it prints how the configuration was chosen, what ``load_kernel`` cost the first
time and the second (the pick saved), the median time of a call (all its steps, profiling
events), TFLOP/s against the library's, and the result checked against a float64 reference
with matmul's error bound (autotune/kernels/matmul.py).

    python3 benchmarks/sizes.py [-d SELECTOR] [--runs 20] 1000 2048 4096x4096x512 1024:col ...

Use an empty AUTOTUNE_HOME to measure first calls (``load_kernel`` saves its picks there).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

import numpy as np
import pyopencl as cl

import autotune
from autotune import ceilings, device
from autotune.kernels import matmul as host


def parse(shape: str) -> dict[str, Any]:
    dims, _, layout = shape.partition(":")
    sizes = [int(x) for x in dims.split("x")]
    m, n, k = sizes if len(sizes) == 3 else sizes * 3
    return {"M": m, "N": n, "K": k, "layout": layout or "row"}


def load(queue: cl.CommandQueue, problem: dict[str, Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autotune.AutotuneWarning)
        mm = autotune.load_kernel("matmul", queue, **problem)
    return mm, time.perf_counter() - t0


def worst_share(problem: dict[str, Any], arrays: dict[str, np.ndarray], got: np.ndarray) -> float:
    """Largest |got - exact| / bound over C (at most 1 for a correct kernel)."""
    m, n, k = problem["M"], problem["N"], problem["K"]
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:  # the CPU: numpy in float64
        want = host.reference(problem, arrays)["C"].astype(np.float64)
        bound = host.error_bound(problem, arrays)["C"]
        return float(np.max(np.abs(got - want) / bound))
    order = "F" if problem["layout"] == "col" else "C"
    a = torch.from_numpy(arrays["A"].reshape((m, k), order=order).copy(order="C")).cuda().double()
    b = torch.from_numpy(arrays["B"].reshape((k, n), order=order).copy(order="C")).cuda().double()
    want = a @ b
    bound = host.gamma(k + 1) * (a.abs() @ b.abs())
    c = torch.from_numpy(got.reshape((m, n), order=order).copy(order="C")).cuda().double()
    return float(((c - want).abs() / bound).max())


def measure(queue: cl.CommandQueue, problem: dict[str, Any], runs: int, is_gpu: bool) -> str:
    mm, first_s = load(queue, problem)
    _, second_s = load(queue, problem)
    arrays = host.inputs(problem, np.random.default_rng(0))
    mf = cl.mem_flags
    bufs = [cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=arrays[x]) for x in "ABC"]
    for _ in range(3):
        mm(*bufs).wait()
    ms = statistics.median(mm(*bufs).seconds * 1e3 for _ in range(runs))
    got = np.empty_like(arrays["C"])
    cl.enqueue_copy(queue, got, bufs[2])
    share = worst_share(problem, arrays, got.astype(np.float64))
    m, n, k = problem["M"], problem["N"], problem["K"]
    lib = ceilings.cublas_sgemm(m, n, k) if is_gpu else ceilings.numpy_sgemm(m, n, k)
    tflops = 2 * m * n * k / (ms * 1e-3) / 1e12
    lib_t = lib.value / 1e3 if lib else float("nan")
    shape = f"{m}x{n}x{k} {problem['layout']}"
    return (f"{shape:<22} {mm.origin:<9} {first_s:7.2f} {second_s:7.2f} {ms:10.4f} {tflops:8.2f} "
            f"{lib_t:8.2f} {100 * tflops / lib_t:6.1f}% {share:9.2g}  {mm.params}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("-d", "--device")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    info, dev = device.select(args.device)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    lib = "cuBLAS" if info.is_gpu else "numpy"
    print(f"{info.name} ({info.platform}, driver {info.driver}); load = load_kernel seconds, 1st and 2nd; "
          f"error = worst element / its bound")
    print(f"{'shape':<22} {'origin':<9} {'load1':>7} {'load2':>7} {'ms':>10} {'TFLOP/s':>8} {lib:>8} "
          f"{'ratio':>7} {'error':>9}  config")
    for shape in args.shapes:
        print(measure(queue, parse(shape), args.runs, info.is_gpu), flush=True)


if __name__ == "__main__":
    main()
