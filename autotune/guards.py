"""Guard zones around the buffers the kernels get while tuning, so that a configuration that
reads or writes outside an array fails verification instead of being saved.

Each array lies in an allocation with a zone before it and one after it; the kernels get the
array (and the zone after it) as a sub-buffer, so ``x[-1]`` is the last byte of the zone
before and ``x[n]`` the first of the zone after. Scratch buffers have a zone after them only
(:class:`autotune.launch.Launch` makes them). The zones of an output or scratch buffer hold
:data:`GUARD_BYTE` and are checked after each verification: a configuration that writes into
one (a last work-group that runs over, a scratch size expression too small for it) would write
outside the application's arrays, or the scratch buffers load_kernel makes. The zones of an
array the kernels only read hold :data:`READ_GUARD_BYTE` (NaN in every float type, -1 or the
largest value in an integer one), so that a read outside it (a stencil's ``x[i + 1]`` at the
last item, ``x[i - 1]`` at the first) gives a wrong result; 0xA5's bytes are a float near 0
(-2.9e-16), which such a read adds unnoticed, and in an application the bytes there are
another array's. When the leaders are checked again (``Bench.measure(strict=True)``), every
zone holds NaN, so that a read past an output or a scratch buffer shows too.

Example:
    >>> guard_size(1 << 20), guard_size(100)
    (131072, 4096)
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyopencl as cl

from .verify import POISON_BYTE

#: The zones of outputs and scratch buffers; their size: an eighth of the array, 4 KiB to 4 MiB.
GUARD_BYTE, GUARD_MIN, GUARD_MAX = 0xA5, 4096, 1 << 22
READ_GUARD_BYTE = POISON_BYTE

Side = Literal["before", "after"]
#: A zone of one buffer: (what, side), as :meth:`Zone.sides` names them.
ZoneKey = tuple[str, Side]


def guard_size(nbytes: int) -> int:
    """The guard zone's bytes beside an array or scratch buffer of ``nbytes``."""
    return min(max(GUARD_MIN, nbytes // 8), GUARD_MAX)


@dataclass(frozen=True)
class Zone:
    """A buffer and its guard zones: ``whole`` holds ``front`` bytes of zone, the ``size``
    bytes the kernels use, then the zone after them to its end."""

    what: str  # the array's name, or scratch.NAME
    whole: cl.Buffer
    front: int
    size: int
    fix: str  # what to check when a zone is written
    byte: int  # what the zones hold
    read_only: bool = False  # the kernels only read the buffer

    def sides(self) -> list[tuple[Side, int, int]]:
        """(side, first byte, bytes) of each zone."""
        after = self.front + self.size
        zones: list[tuple[Side, int, int]] = [("before", 0, self.front)] if self.front else []
        return [*zones, ("after", after, self.whole.size - after)]


def allocate(ctx: cl.Context, what: str, nbytes: int, byte: int, fix: str) -> tuple[Zone, cl.Buffer]:
    """An array of ``nbytes`` with a zone on each side, and the sub-buffer the kernels get (the
    array and the zone after it: a sub-buffer starts at a multiple of the device's base address
    alignment, so the zone before is at least that long)."""
    align = max(dev.mem_base_addr_align // 8 for dev in ctx.devices)
    front = -(-guard_size(nbytes) // align) * align
    whole = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, front + nbytes + guard_size(nbytes))
    zone = Zone(what, whole, front, nbytes, fix, byte, read_only=byte == READ_GUARD_BYTE)
    return zone, whole.get_sub_region(front, whole.size - front)


def fill(queue: cl.CommandQueue, zones: Collection[Zone], zeroed: Collection[ZoneKey] = ()) -> None:
    """Set every zone to its byte (those in ``zeroed`` to 0): an earlier launch may have written there."""
    for z in zones:
        for side, start, count in z.sides():
            value = 0 if (z.what, side) in zeroed else z.byte
            cl.enqueue_fill_buffer(queue, z.whole, np.uint8(value), start, count)


def written(queue: cl.CommandQueue, zones: Collection[Zone], zeroed: Collection[ZoneKey] = ()) -> str | None:
    """What the last launch wrote outside a buffer (into a zone :func:`fill` set), if anything.

    A write past an array the kernels write is named before one found in a zone of an array
    they only read: buffers can lie next to each other, so one that runs far past its end
    lands in the next one's zone."""
    hits = []
    for z in zones:
        for side, start, count in z.sides():
            got = np.empty(count, np.uint8)
            cl.enqueue_copy(queue, got, z.whole, src_offset=start)
            changed = np.flatnonzero(got != (0 if (z.what, side) in zeroed else z.byte))
            if changed.size:
                hits.append((z.read_only, side == "before", z, _where(side, changed, count)))
    if not hits:
        return None
    hits.sort(key=lambda h: h[:2])
    _, _, z, where = hits[0]
    why = f"{z.what}: written {where} ({z.size} bytes)"
    if z.read_only:
        why += (f", though the kernels only read {z.what}: a write outside another buffer reached it, or a "
                f"kernel writes {z.what}")
    also = "; ".join(f"{h[2].what} {h[3]}" for h in hits[1:])
    return (f"{why}{f'; also written: {also}' if also else ''}; work-items must not write outside it "
            f"(check {z.fix})")


def _where(side: Side, changed: np.ndarray, count: int) -> str:
    """Where in a zone of ``count`` bytes the ``changed`` bytes lie, from the array's edge."""
    if side == "after":
        edge = " (the whole zone: it may go further)" if changed[-1] + 1 == count else ""
        return f"past its end, up to byte {changed[-1] + 1} after its last byte{edge}"
    edge = " (the whole zone: it may start further before)" if changed[0] == 0 else ""
    return f"before its start, from byte {count - changed[0]} before its first byte{edge}"


#: How measure.Bench's reasons begin where a second launch pins a wrong result on the kernel:
#: a result that differs between two launches, and a scratch element read before it is written.
RACE = "the result changes from one launch to the next"
UNWRITTEN = "read before written"


def is_kernels_fault(message: str) -> bool:
    """Whether a failure's reason pins it on the kernel, whatever the reference says: a read or
    write outside an array (this module's messages), a race, a scratch buffer read before it
    is written (trial 38: the last two counted towards "the reference is likelier at fault")."""
    return _KERNELS.match(message) is not None


_KERNELS = re.compile(rf"[\w.]+: (?:written|read) (?:past its end|before its start)|{RACE}|"
                      rf"scratch\.\w+(?:, scratch\.\w+)*: {UNWRITTEN}")


def read_outside(zones: Collection[ZoneKey], sizes: dict[str, int], there: str | None = None) -> str:
    """The reason for reads found in ``zones`` of arrays of ``sizes`` bytes (see
    Bench._read_outside), whose bytes were ``there`` (None: :data:`READ_GUARD_BYTE`'s)."""
    there = there or "every bit set: NaN, or -1 or the largest integer"
    parts = []
    for what in dict.fromkeys(w for w, _ in zones):
        sides = {s for w, s in zones if w == what}
        where = " and ".join((["before its start"] if "before" in sides else [])
                             + ([f"past its end ({sizes[what]} bytes)"] if "after" in sides else []))
        parts.append(f"{what}: read {where}")
    found = {s for _, s in zones}
    examples = (["x[i - 1] at the first item"] if "before" in found else []) + (
        ["x[i + 1] at the last item"] if "after" in found else [])
    return (f"{'; '.join(parts)}, so the result depends on the bytes there (here {there}; "
            f"in an application another array's); work-items must not read outside an array "
            f"(check the kernel's bounds, such as {' or '.join(examples)})")
