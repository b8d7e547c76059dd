"""How much memory the host can give now: refuse a problem before Linux kills the process.

Linux overcommits: a large allocation succeeds and the process is killed (no ``MemoryError``)
once its pages are touched. So sizes are checked against the free memory first.
"""

from __future__ import annotations


def available() -> int | None:
    """Bytes the host can give now (Linux's MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
