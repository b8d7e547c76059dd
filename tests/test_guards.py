"""Guard zones: which buffer a write outside an array is blamed on, and how far it is said to go."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest

from autotune import guards
from conftest import every_runtime, needs_opencl

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime


def _zones(ctx: cl.Context) -> tuple[guards.Zone, guards.Zone]:
    x, _ = guards.allocate(ctx, "x", 4096, guards.READ_GUARD_BYTE, "the kernel's bounds")
    y, _ = guards.allocate(ctx, "y", 4096, guards.GUARD_BYTE, "the kernel's bounds")
    return x, y


def _scribble(queue: cl.CommandQueue, z: guards.Zone, side: str, first: int, count: int) -> None:
    start = {s: at for s, at, _ in z.sides()}[side]
    cl.enqueue_fill_buffer(queue, z.whole, np.uint8(1), start + first, count)


@needs_opencl
def test_a_write_far_past_an_output_is_blamed_on_it_not_on_the_input_whose_zone_it_reached(device):
    """Trial 17: y's overrun landed in the zone before x (a const input) as well, and x was
    blamed; its size was given as the zone's, 'up to byte 4096', though it went further."""
    _, ctx = device
    queue = cl.CommandQueue(ctx)
    x, y = _zones(ctx)
    guards.fill(queue, [x, y])
    (_, _, after), = [s for s in y.sides() if s[0] == "after"]
    _scribble(queue, y, "after", 0, after)  # all of y's zone after it
    _scribble(queue, x, "before", 0, 64)  # and the far start of x's zone before it
    why = guards.written(queue, [x, y])
    assert why is not None and why.startswith(
        f"y: written past its end, up to byte {after} after its last byte (the whole zone: it may go further) "
        f"(4096 bytes); also written: x before its start, from byte {x.front} before its first byte (the whole "
        "zone: it may start further before); work-items must not write outside it"), why


@needs_opencl
def test_a_write_found_only_in_an_inputs_zone_says_the_kernels_only_read_it(device):
    _, ctx = device
    queue = cl.CommandQueue(ctx)
    x, y = _zones(ctx)
    guards.fill(queue, [x, y])
    assert guards.written(queue, [x, y]) is None
    _scribble(queue, x, "after", 8, 4)
    why = guards.written(queue, [x, y])
    assert why is not None and why.startswith(
        "x: written past its end, up to byte 12 after its last byte (4096 bytes), though the kernels only read x: "
        "a write outside another buffer reached it, or a kernel writes x; work-items"), why


@needs_opencl
@pytest.mark.parametrize("room", [True, False], ids=["device-copy", "host-compare"])
def test_an_input_a_launch_changed_is_named_and_put_back(device, monkeypatch, room):
    """Trial 42: a kernel that wrote its input left it changed for every later configuration."""
    from autotune import pristine

    _, ctx = device
    queue = cl.CommandQueue(ctx)
    monkeypatch.setattr(pristine, "SHARE", 0.8 if room else 0.0)
    values = {n: np.arange(n, dtype=np.float32) for n in (1, 37, 4099)}  # whole and partial 16-byte blocks
    bufs = {f"x{n}": cl.Buffer(ctx, cl.mem_flags.READ_WRITE, v.nbytes) for n, v in values.items()}
    arrays = {f"x{n}": (bufs[f"x{n}"], v) for n, v in values.items()}
    for buf, v in arrays.values():
        cl.enqueue_copy(queue, buf, v)
    kept = pristine.Pristine(ctx, queue, arrays, used_bytes=0)
    assert bool(kept.copies) == room and kept.changed() == []
    for buf, v in arrays.values():  # the last element of each, then the first of the last
        cl.enqueue_copy(queue, buf, np.float32(-1), dst_offset=v.nbytes - 4)
    cl.enqueue_copy(queue, bufs["x4099"], np.float32(-1))
    assert kept.changed() == ["x1", "x37", "x4099"]
    for name, (buf, v) in arrays.items():
        back = np.empty_like(v)
        cl.enqueue_copy(queue, back, buf)
        assert np.array_equal(back, v), name
    assert kept.changed() == []
