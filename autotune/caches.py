"""Where pyopencl and pytools keep their caches (built programs, kernel invokers).

Both write under the user cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``) and fail when
it cannot be written: a read-only home (a container, systemd's ``ProtectHome=read-only``) gave
"install a CPU OpenCL runtime" from ``run``'s build check and a raw ``OSError`` from
``load_kernel`` (trial 39), although ``$AUTOTUNE_CACHE`` named a writable folder. There, their
caches go under ``$AUTOTUNE_CACHE/xdg`` instead, as they do where it is full. Call before pyopencl is imported.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from . import settings


def redirect() -> Path | None:
    """Point ``XDG_CACHE_HOME`` under autotune's cache folder where the user cache folder (the
    variable's, where it is set: trial 77, one naming a folder the user cannot write gave a
    crashed build check and a PermissionError traceback) cannot be written or is full (trial
    83); returns the folder, or None where nothing changed."""
    if settings.usable(Path(platformdirs.user_cache_dir())):
        return None
    folder = settings.cache_dir() / "xdg"
    if not settings.usable(folder):
        return None  # no better place: pyopencl's own error says where it failed
    os.environ["XDG_CACHE_HOME"] = str(folder)
    return folder
