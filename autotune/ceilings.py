"""Ceilings measured in the same run as a kernel: copy bandwidth, FP32 FMA rate, cuBLAS, numpy.

Example:
    >>> import pyopencl as cl
    >>> ctx = cl.create_some_context(interactive=False)
    >>> copy_bandwidth(ctx, nbytes=1 << 20).value > 0  # doctest: +SKIP
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from .launch import build_quietly

_FMA_SOURCE = """
__kernel void fma_peak(__global float* out, float b, float c) {
    float a0 = get_global_id(0), a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
    float a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
    for (int i = 0; i < ITERS; ++i) {
        a0 = a0 * b + c; a1 = a1 * b + c; a2 = a2 * b + c; a3 = a3 * b + c;
        a4 = a4 * b + c; a5 = a5 * b + c; a6 = a6 * b + c; a7 = a7 * b + c;
    }
    out[get_global_id(0)] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
"""


@dataclass(frozen=True)
class Ceiling:
    """A measured ceiling: value in ``unit`` (median of ``runs``) and how it was measured."""

    name: str
    value: float
    unit: str
    how: str


def _profiled_queue(ctx: cl.Context) -> cl.CommandQueue:
    return cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)


def _median_ms(events: list[cl.Event]) -> float:
    cl.wait_for_events(events)
    return statistics.median((e.profile.end - e.profile.start) * 1e-6 for e in events)


def copy_bandwidth(ctx: cl.Context, nbytes: int = 1 << 30, runs: int = 10) -> Ceiling:
    """Device-to-device clEnqueueCopyBuffer; GB/s counts bytes read plus bytes written."""
    queue = _profiled_queue(ctx)
    mf = cl.mem_flags
    src, dst = cl.Buffer(ctx, mf.READ_WRITE, nbytes), cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.uint8(7), 0, nbytes)
    cl.enqueue_copy(queue, dst, src).wait()  # warm-up
    ms = _median_ms([cl.enqueue_copy(queue, dst, src) for _ in range(runs)])
    return Ceiling("copy bandwidth", 2 * nbytes / (ms * 1e-3) / 1e9, "GB/s",
                   f"clEnqueueCopyBuffer of {nbytes / 2**20:.0f} MiB, read + write, median of {runs}")


def fp32_peak(ctx: cl.Context, runs: int = 5, iters: int = 4096) -> Ceiling:
    """FP32 rate of independent multiply-add chains (2 flops each, contracted to FMA)."""
    queue = _profiled_queue(ctx)
    dev = ctx.devices[0]
    work = dev.max_compute_units * 2048
    prg = build_quietly(ctx, _FMA_SOURCE, [f"-DITERS={iters}", "-cl-mad-enable"])
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, work * 4)
    kernel = prg.fma_peak
    kernel.set_args(out, np.float32(0.999), np.float32(0.001))
    local = min(256, dev.max_work_group_size)
    cl.enqueue_nd_range_kernel(queue, kernel, (work,), (local,)).wait()
    ms = _median_ms([cl.enqueue_nd_range_kernel(queue, kernel, (work,), (local,)) for _ in range(runs)])
    return Ceiling("fp32 FMA peak", 2 * 8 * iters * work / (ms * 1e-3) / 1e9, "GFLOP/s",
                   f"{work} work-items x 8 independent multiply-add chains x {iters}, median of {runs}")


def cublas_sgemm(m: int, n: int, k: int, runs: int = 20) -> Ceiling | None:
    """cuBLAS SGEMM through torch (TF32 off), row-major; None where torch/CUDA is missing."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(m, k, device="cuda") * 2 - 1
    b = torch.rand(k, n, device="cuda") * 2 - 1
    for _ in range(3):
        a @ b
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    return Ceiling("cuBLAS SGEMM", 2 * m * n * k / (ms * 1e-3) / 1e9, "GFLOP/s",
                   f"torch {torch.__version__} matmul, TF32 off, {m}x{n}x{k}, median of {runs}")


def numpy_sgemm(m: int, n: int, k: int, runs: int = 10) -> Ceiling:
    """numpy.matmul on float32 of the same shape: what a CPU user has without OpenCL."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    out = np.empty((m, n), np.float32)
    np.matmul(a, b, out=out)  # warm-up: threads started, pages touched
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - t0)
    seconds = statistics.median(times)
    return Ceiling("numpy matmul", 2 * m * n * k / seconds / 1e9, "GFLOP/s",
                   f"numpy {np.__version__} float32 matmul ({_blas_name()}), {m}x{n}x{k}, "
                   f"median of {runs}")


def _blas_name() -> str:
    try:
        config = np.show_config(mode="dicts")
        return str(config["Build Dependencies"]["blas"]["name"])
    except Exception:  # the layout of numpy's build record is not an API  # noqa: BLE001
        return "BLAS"
