"""Whether a launch changed the arrays a kernel should only read, found and undone on the device.

A configuration that writes into an input (a missing ``const``, an input used as scratch)
passes its own verification when it reads before it writes, and every configuration measured
after it then reads what it wrote (trial 42). :class:`Pristine` keeps a device copy of each
input array, compares the array with it after a verification (a kernel per array: 4 bytes come
back, not the array) and copies it back where they differ. Where the device lacks the memory
for the copies, the arrays are read back and compared on the host instead: right, but slower
(matmul's two 64 MiB inputs at 4096 took 249 ms so on the H100 machine, the copies 0.3 ms).

Example:
    >>> Pristine.fits({"x": 2**30}, global_mem=8 * 2**30, used=2**30)
    True
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyopencl as cl

from .launch import build_quietly

#: Copies are kept only while every buffer and the copies stay within this share of the
#: device's memory (drivers allocate lazily: an allocation that does not fit fails later, at
#: a launch, where it would be taken for the configuration's fault).
SHARE = 0.8

_SOURCE = """
__kernel void autotune_differs(__global const uchar* a, __global const uchar* b, ulong n,
                               __global uint* out) {
    const ulong i = (ulong)get_global_id(0) * 16;
    if (i + 16 <= n) {
        if (any(vload16(0, a + i) != vload16(0, b + i))) *out = 1;
    } else {
        for (ulong k = i; k < n; ++k) if (a[k] != b[k]) *out = 1;
    }
}
"""


class Pristine:
    """Device copies of the input arrays ``arrays`` (name -> (the buffer the kernels get, the
    values it holds)), or, where they do not fit, those values alone to compare on the host."""

    def __init__(self, ctx: cl.Context, queue: cl.CommandQueue,
                 arrays: Mapping[str, tuple[cl.Buffer, np.ndarray]], used_bytes: int) -> None:
        self.queue, self.arrays = queue, dict(arrays)
        dev = ctx.devices[0]
        sizes = {name: host.nbytes for name, (_, host) in self.arrays.items() if host.nbytes}
        self.copies: dict[str, cl.Buffer] = {}
        if sizes and self.fits(sizes, dev.global_mem_size, used_bytes, dev.max_mem_alloc_size):
            self._differs = build_quietly(ctx, _SOURCE).autotune_differs
            self._flag = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4)
            for name, nbytes in sizes.items():
                self.copies[name] = cl.Buffer(ctx, cl.mem_flags.READ_ONLY, nbytes)
                cl.enqueue_copy(queue, self.copies[name], self.arrays[name][1])

    @staticmethod
    def fits(sizes: Mapping[str, int], global_mem: int, used: int, max_alloc: int = 0) -> bool:
        """Whether copies of arrays of ``sizes`` bytes fit beside ``used`` bytes of buffers."""
        biggest = max(sizes.values(), default=0)
        return (not max_alloc or biggest <= max_alloc) and used + sum(sizes.values()) <= SHARE * global_mem

    def changed(self) -> list[str]:
        """The arrays that differ from their values, each copied back."""
        out = []
        for name, (buf, host) in self.arrays.items():
            if host.nbytes and self._differ(name, buf, host):
                out.append(name)
                source = self.copies.get(name)
                cl.enqueue_copy(self.queue, buf, source if source is not None else host)
        return out

    def _differ(self, name: str, buf: cl.Buffer, host: np.ndarray) -> bool:
        copy = self.copies.get(name)
        if copy is None:  # no room for a copy on the device
            got = np.empty_like(host)
            cl.enqueue_copy(self.queue, got, buf)
            return not np.array_equal(got.view(np.uint8), host.view(np.uint8))
        flag = np.zeros(1, np.uint32)
        cl.enqueue_copy(self.queue, self._flag, flag)
        self._differs(self.queue, (-(-host.nbytes // 16),), None, buf, copy, np.uint64(host.nbytes), self._flag)
        cl.enqueue_copy(self.queue, flag, self._flag)
        return bool(flag[0])
