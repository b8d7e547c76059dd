"""The measuring worker's standard error, kept in a file instead of the terminal.

Some OpenCL compilers print their diagnostics to the process's stderr instead of the build
log (PoCL 5 prints all of them; NVIDIA's adds "1 error generated."), and a driver that
crashes says why there. In the worker, stderr goes to a file: failed builds take their share
of it into their message (:func:`since`), and the tuner reads its tail when a worker dies.

Example:
    >>> start = mark()  # -1 outside the worker: nothing is captured
    >>> since(start)
    ''
"""

from __future__ import annotations

import os
from pathlib import Path

_file: Path | None = None


def redirect_stderr(path: Path) -> None:
    """Send this process's file descriptor 2 (native code's stderr too) to ``path``."""
    global _file
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    _file = path


def mark() -> int:
    """Where the captured output ends now (-1 when nothing is captured)."""
    try:
        return _file.stat().st_size if _file is not None else -1
    except OSError:
        return -1


def since(start: int, limit: int = 4000) -> str:
    """What was written after :func:`mark` returned ``start`` (at most ``limit`` characters)."""
    if _file is None or start < 0:
        return ""
    try:
        with open(_file, "rb") as f:
            f.seek(start)
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


def tail(path: Path, limit: int = 300) -> str:
    """The last ``limit`` characters of a capture file, on one line ('' if there is none)."""
    try:
        data = path.read_bytes()[-limit:].decode(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in data.splitlines() if line.strip())
