"""Environment knobs, read in one place and only when asked (never at import time)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from .errors import warn

_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def home() -> Path:
    """The folder for studies and profiles: ``$AUTOTUNE_HOME`` or the user data folder."""
    env = os.environ.get("AUTOTUNE_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir("autotune"))


def profiles_dir() -> Path:
    """Where tuned profiles are written: ``<home>/profiles``."""
    return home() / "profiles"


def default_storage() -> str:
    """Optuna RDB URL of the default study database (SQLite under :func:`home`)."""
    return f"sqlite:///{home() / 'studies.db'}"


def default_device_selector() -> str | None:
    """``$AUTOTUNE_DEVICE``: the device selector used when ``--device`` is not given."""
    return os.environ.get("AUTOTUNE_DEVICE", "").strip() or None


def cache_dir() -> Path:
    """Derived files that can be rebuilt (ICD folders, build checks): ``$AUTOTUNE_CACHE`` or
    the user cache folder."""
    env = os.environ.get("AUTOTUNE_CACHE")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("autotune"))


def system_opencl_only(quiet: bool = False) -> bool:
    """``$AUTOTUNE_SYSTEM_OPENCL``: use only the system's OpenCL, register no bundled runtime.
    ``quiet``: no warning for a value that is neither on nor off (read at import, where the
    warning could only be Python's two-line form; the first platform query gives it)."""
    return _switch("AUTOTUNE_SYSTEM_OPENCL", default=False, quiet=quiet)


def measure_untuned() -> bool:
    """``$AUTOTUNE_MEASURE_UNTUNED`` (default on): ``load_kernel`` times the device's tuned
    configurations on a problem without an entry; ``0`` takes the nearest tuned problem's."""
    return _switch("AUTOTUNE_MEASURE_UNTUNED", default=True)


def _switch(name: str, default: bool, quiet: bool = False) -> bool:
    """An on/off variable; unset or empty is ``default``, and so is a value that is neither,
    with a warning (a typo must not silently mean the opposite of what was meant)."""
    text = os.environ.get(name, "").strip().lower()
    if text in _ON or text in _OFF:
        return text in _ON
    if text and not quiet:
        warn(f"${name}={os.environ[name]!r} is neither on ({', '.join(_ON)}) nor off ({', '.join(_OFF)}); "
             f"taking the default, {'on' if default else 'off'}")
    return default
