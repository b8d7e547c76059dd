"""FP32 rate of multiply-add chains written three ways, on every device that builds.

    python3 benchmarks/mad_vs_contract.py [-d SELECTOR ...]

The chains of `autotune bench`'s FP32 ceiling (8 independent chains per work-item), written as
``a * b + c`` built with ``-cl-mad-enable`` (the compiler may contract it), as ``mad(a, b, c)``
and as ``fma(a, b, c)``: why the built-in templates' CPU-side variants write ``acc += a * b``.
Prints GFLOP/s (median of 5 launches) per device and form.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

SOURCE = """
__kernel void chains(__global float* out, float b, float c) {
    float a0 = get_global_id(0), a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
    float a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
    for (int i = 0; i < ITERS; ++i) {
        a0 = OP(a0, b, c); a1 = OP(a1, b, c); a2 = OP(a2, b, c); a3 = OP(a3, b, c);
        a4 = OP(a4, b, c); a5 = OP(a5, b, c); a6 = OP(a6, b, c); a7 = OP(a7, b, c);
    }
    out[get_global_id(0)] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
"""

FORMS = {"a * b + c": "-DOP(x,y,z)=((x)*(y)+(z))", "mad(a, b, c)": "-DOP(x,y,z)=mad(x,y,z)",
         "fma(a, b, c)": "-DOP(x,y,z)=fma(x,y,z)"}


def rate(ctx: object, option: str, iters: int = 4096, runs: int = 5) -> float:
    """GFLOP/s of the chains with OP defined by ``option``."""
    import pyopencl as cl

    from autotune.launch import build_quietly

    dev = ctx.devices[0]  # type: ignore[attr-defined]
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    work = dev.max_compute_units * 2048
    kernel = build_quietly(ctx, SOURCE, [f"-DITERS={iters}", "-cl-mad-enable", option]).chains
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, work * 4)
    kernel.set_args(out, np.float32(0.999), np.float32(0.001))
    local = min(256, dev.max_work_group_size)
    cl.enqueue_nd_range_kernel(queue, kernel, (work,), (local,)).wait()
    events = [cl.enqueue_nd_range_kernel(queue, kernel, (work,), (local,)) for _ in range(runs)]
    cl.wait_for_events(events)
    ms = statistics.median((e.profile.end - e.profile.start) * 1e-6 for e in events)
    return 2 * 8 * iters * work / (ms * 1e-3) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-d", "--device", nargs="*", default=None, help="selectors (default: every device that builds)")
    args = ap.parse_args()

    from autotune import device
    from autotune.clcontext import context

    found = device.list_devices()
    built = device.build_checks(found)
    chosen = args.device or [d.selector for d, _ in found if built[d.selector].ok]
    for selector in chosen:
        info, dev = device.select(selector)
        ctx = context(dev)
        rates = "  ".join(f"{form}: {rate(ctx, option):9.1f}" for form, option in FORMS.items())
        print(f"{info.name} ({info.platform}, {info.selector})  GFLOP/s  {rates}")


if __name__ == "__main__":
    main()
