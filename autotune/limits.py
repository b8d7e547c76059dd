"""Work-group limits of compiled kernels, learned from builds, to skip candidates unbuilt.

A device allows work-groups up to its ``max_work_group_size`` (1,024 on NVIDIA GPUs), but each
compiled kernel has its own, lower limit (``CL_KERNEL_WORK_GROUP_SIZE``: 256 for the tuned
matmul variants on an H200, set by their register use), known only after a build. A
candidate above it was built only to be rejected: 7-15% of GPU trials. Once a kernel entry has
been built :data:`MIN_BUILDS` times, a candidate whose work-group for that entry exceeds every
limit those builds reported is skipped as invalid. A variant that uses fewer registers reports
a higher limit and so raises the bound.

Example:
    >>> limits = KernelLimits()
    >>> for _ in range(MIN_BUILDS):
    ...     limits.learn({"gemm": 256})
    >>> limits.exceeds({"gemm": 512})
    'work-group 512 of gemm is above its limit on this device (256, the most that 5 builds allowed)'
    >>> limits.exceeds({"gemm": 256}) is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping

#: Builds of an entry before its learned limit is trusted.
MIN_BUILDS = 5


class KernelLimits:
    """The largest work-group each kernel entry's builds have allowed, and how many builds."""

    def __init__(self) -> None:
        self._most: dict[str, int] = {}
        self._builds: dict[str, int] = {}

    def learn(self, limits: Mapping[str, int]) -> None:
        """Take one build's limits (entry -> CL_KERNEL_WORK_GROUP_SIZE)."""
        for entry, limit in limits.items():
            self._most[entry] = max(self._most.get(entry, 0), int(limit))
            self._builds[entry] = self._builds.get(entry, 0) + 1

    def exceeds(self, sizes: Mapping[str, int]) -> str | None:
        """Why a candidate with these work-group sizes (entry -> items) cannot launch, or None."""
        for entry, size in sizes.items():
            most, builds = self._most.get(entry), self._builds.get(entry, 0)
            if most is not None and builds >= MIN_BUILDS and size > most:
                return (f"work-group {size} of {entry} is above its limit on this device ({most}, the most "
                        f"that {builds} builds allowed)")
        return None
