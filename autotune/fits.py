"""Whether a problem fits: its buffers on the device, its inputs and reference in the host's
free memory, judged from their sizes before anything is drawn (Linux kills a process that
over-commits rather than raising ``MemoryError``; see :mod:`autotune.hostmemory`).

Example:
    >>> from autotune import spec as S
    >>> from autotune.device import DeviceInfo
    >>> gpu = DeviceInfo(selector="0:0", platform="p", name="small", vendor="v", driver="", opencl="",
    ...                  device_type="GPU", compute_units=1, max_work_group_size=256,
    ...                  max_work_item_sizes=(256, 256, 256), local_mem_size=2**15, global_mem_size=2**20)
    >>> check_fits(S.load("reverse"), {"N": 1 << 20}, gpu)
    Traceback (most recent call last):
    ...
    autotune.errors.ProblemError: N=1048576 needs 2.0 MiB of buffers (the largest 1.0 MiB); small has 1.0 MiB ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import hostmemory
from .arguments import shaped_inputs
from .device import DeviceInfo
from .errors import ProblemError
from .spec import KernelSpec, problem_label


def check_fits(spec: KernelSpec, problem: Mapping[str, Any], info: DeviceInfo) -> None:
    """ProblemError where the problem's buffers cannot fit on the device, or its inputs and
    reference in the host's free memory: from their sizes, before anything is drawn."""
    if (why := no_room(spec, problem, info)) is not None:
        raise ProblemError(f"{why}; use a smaller --size")


def no_room(spec: KernelSpec, problem: Mapping[str, Any], info: DeviceInfo) -> str | None:
    """Why the problem's buffers, inputs and reference do not fit (see :func:`check_fits`);
    None when they do."""
    free = hostmemory.available()  # before the sizes are found: their casts may take some
    inputs = shaped_inputs(spec, problem)
    arrays = [a for a in inputs.values() if isinstance(a, np.ndarray)]
    total, largest = sum(a.nbytes for a in arrays), max((a.nbytes for a in arrays), default=0)
    most = info.max_mem_alloc_size or info.global_mem_size
    if total > info.global_mem_size or largest > most:
        return (f"{problem_label(problem)} needs {size(total)} of buffers (the largest {size(largest)}); "
                f"{info.name} has {size(info.global_mem_size)} and allocates at most {size(most)} at once")
    if free is not None and HOST_FACTOR * total > free:
        return (f"{problem_label(problem)} needs about {size(HOST_FACTOR * total)} of host memory for its "
                f"inputs and reference; this machine has {size(free)} free")
    return None


#: Host memory a workload may need, as a multiple of its inputs' bytes: float64 draws before
#: the cast, and the reference's own arrays (matmul's float64 product of float32 operands).
HOST_FACTOR = 4


def size(nbytes: float) -> str:
    """Bytes in GiB from 1 GiB, else in MiB: ``size(3 << 29)`` is ``'1.50 GiB'``."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"
