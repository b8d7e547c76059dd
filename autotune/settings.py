"""Environment knobs, read in one place and only when asked (never at import time, except
:func:`pin_folders`, which ``import autotune`` calls)."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import urllib.parse
from pathlib import Path

import platformdirs

from .errors import ProblemError, warn_once

_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def home() -> Path:
    """The folder for studies and profiles: ``$AUTOTUNE_HOME`` or the user data folder."""
    return _folder("AUTOTUNE_HOME") or Path(platformdirs.user_data_dir("autotune"))


def profiles_dir() -> Path:
    """Where tuned profiles are written: ``<home>/profiles``."""
    return home() / "profiles"


def default_storage() -> str:
    """Optuna RDB URL of the default study database (SQLite under :func:`home`)."""
    # a path is not a URL: its % and ? are escaped (trial 39: a Jenkins workspace's %2F was
    # decoded to a folder that does not exist, and a ? put the database in the parent folder)
    try:
        return sqlite_url(home() / "studies.db")
    except UnicodeEncodeError:  # bytes that are no UTF-8 text (trial 44: a traceback)
        raw = os.fsencode(home())
        try:  # trial 83: UTF-8 text, read under an ASCII locale without Python's UTF-8 mode
            raise ProblemError(f"AUTOTUNE_HOME ({raw.decode('utf-8')}) is not ASCII, and this process reads file "
                               f"names as {sys.getfilesystemencoding()} (its locale), so a database URL cannot "
                               "name it; use a UTF-8 locale (LC_ALL=C.UTF-8) or set PYTHONUTF8=1") from None
        except UnicodeDecodeError:
            pass
        raise ProblemError(f"AUTOTUNE_HOME ({raw.decode('utf-8', 'backslashreplace')}) holds bytes "
                           "that are not UTF-8 text, which a database URL cannot name; choose a folder whose "
                           "name is text, or give --storage a database elsewhere") from None


def sqlite_url(path: str | Path) -> str:
    """The SQLite URL of the file ``path`` (made absolute), its ``%`` and ``?`` escaped: a path is
    not a URL (study.sqlite_path reads it back).

        >>> sqlite_url("/tmp/w d%?/s.db")
        'sqlite:////tmp/w%20d%25%3F/s.db'
    """
    return "sqlite:///" + urllib.parse.quote(os.path.abspath(path), safe="/")


def default_device_selector() -> str | None:
    """``$AUTOTUNE_DEVICE``: the device selector used when ``--device`` is not given."""
    return os.environ.get("AUTOTUNE_DEVICE", "").strip() or None


def cache_dir() -> Path:
    """Derived files that can be rebuilt (ICD folders, build checks): ``$AUTOTUNE_CACHE`` or
    the user cache folder (where that cannot be written, ``import autotune`` sets
    ``$AUTOTUNE_CACHE`` to a folder of the user's own in the temporary folder: see
    :func:`pin_folders`)."""
    return _folder("AUTOTUNE_CACHE") or Path(platformdirs.user_cache_dir("autotune"))


def pin_folders() -> None:
    """Make a relative ``$AUTOTUNE_HOME`` or ``$AUTOTUNE_CACHE`` absolute in the environment, from
    the folder the process is in (``import autotune`` calls this): a later chdir, and the
    processes autotune starts, then use the same folders (trial 40: one process wrote
    profiles into two folders). Where ``$AUTOTUNE_CACHE`` is unset and the user cache folder
    cannot be written (a read-only home) or is full, it is set to :func:`private_temp` (trial 55: the
    bundled runtime was not registered, and pyopencl waited a minute on its cache lock for each
    build)."""
    for variable in ("AUTOTUNE_HOME", "AUTOTUNE_CACHE"):
        try:
            folder = _folder(variable)
        except OSError:  # the working folder is gone: left to each use
            continue
        if folder is not None:
            os.environ[variable] = str(folder)
    try:
        unset = _folder("AUTOTUNE_CACHE") is None
    except OSError:  # relative, and the working folder is gone (trial 58): left to each use
        return
    if unset and not usable(cache_dir()) and (temp := private_temp()) is not None:
        os.environ["AUTOTUNE_CACHE"] = str(temp)


def passed_over() -> list[str]:
    """Warnings for folders the environment names that are not used: an ``$AUTOTUNE_CACHE`` that
    is no folder (nothing is cached), a ``$TMPDIR`` that this process cannot write in (Python
    uses /tmp instead: trial 83, where 1.5 GB of a run at 8192^3 would go without a word)."""
    out = []
    cache = _folder("AUTOTUNE_CACHE")
    if cache is not None and cache.exists() and not cache.is_dir():
        out.append(f"AUTOTUNE_CACHE ({cache}) is not a folder, so nothing is cached there (each command checks "
                   "the devices' builds again); set it to a folder")
    given = os.environ.get("TMPDIR", "").strip()
    if given and os.path.realpath(tempfile.gettempdir()) != os.path.realpath(given):
        out.append(f"TMPDIR ({given}) cannot be written (not a folder, read-only, or full): temporary files (a "
                   f"run's inputs and expected outputs) go to {tempfile.gettempdir()} instead; set it to a writable "
                   "folder with room")
    return out


def writable(path: Path) -> bool:
    """Whether ``path``, or the nearest folder above it that exists, can be written."""
    folder = _nearest(path)
    return folder is not None and os.access(folder, os.W_OK)


#: Free space below which a cache folder is passed over: pyopencl's and pytools' caches, and the
#: build check's, fail there with "database or disk is full" (trial 83: a full ~/.cache broke
#: every command with tracebacks and "install a CPU OpenCL runtime").
ROOM_BYTES = 32 << 20


def usable(path: Path) -> bool:
    """Whether ``path`` is :func:`writable` and its file system has :data:`ROOM_BYTES` free for
    this user (a quota that is used up is not seen)."""
    if not writable(path) or (folder := _nearest(path)) is None:
        return False
    try:
        info = os.statvfs(folder)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize >= ROOM_BYTES


def _nearest(path: Path) -> Path | None:
    """``path``, or the nearest folder above it that exists."""
    return next((folder for folder in (path, *path.parents) if folder.exists()), None)


def private_temp() -> Path | None:
    """``autotune-cache-<uid>`` in the temporary folder, made if need be, where it is a folder
    of this user's that no one else can write (not a link another user planted); None where
    there is no such folder to be had."""
    folder = Path(tempfile.gettempdir()) / f"autotune-cache-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    ours = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022
    return folder if ours and os.access(folder, os.W_OK) else None


def _folder(variable: str) -> Path | None:
    """The folder ``$variable`` names, made absolute (trial 39: a relative AUTOTUNE_CACHE became
    a relative OCL_ICD_VENDORS, which a chdir or a child process elsewhere lost); None where it
    is unset, empty or only spaces (which made a folder named " ")."""
    env = os.environ.get(variable, "")
    return Path(env).expanduser().absolute() if env.strip() else None


def system_opencl_only(quiet: bool = False) -> bool:
    """``$AUTOTUNE_SYSTEM_OPENCL``: use only the system's OpenCL, register no bundled runtime.
    ``quiet``: no warning for a value that is neither on nor off (read at import, where the
    warning could only be Python's two-line form; the first platform query gives it)."""
    return _switch("AUTOTUNE_SYSTEM_OPENCL", default=False, quiet=quiet)


def site_profiles() -> list[Path]:
    """``$AUTOTUNE_SITE_PROFILES``: folders of profiles an administrator publishes for every
    user (``:``-separated, as PATH), looked up after the user's own and before autotune's
    shipped ones; read only (trial 77: a centre had no documented way to publish tuned
    entries of the built-in kernels). Relative or empty parts are left out."""
    given = os.environ.get("AUTOTUNE_SITE_PROFILES", "")
    parts = [part for part in given.split(os.pathsep) if part.strip()]
    left = [part for part in parts if not Path(part).is_absolute()]
    if left:  # trial 79: dropped unsaid
        warn_once(_WARNED, ("AUTOTUNE_SITE_PROFILES", left[0]), f"$AUTOTUNE_SITE_PROFILES: {left[0]!r} is not an "
                  "absolute path (a site's folder is the same wherever a process runs): left out")
    return [Path(part) for part in parts if Path(part).is_absolute()]


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
    if text and not quiet:  # once a process (trial 57: on every load_kernel call)
        warn_once(_WARNED, (name, text), f"${name}={os.environ[name]!r} is neither on ({', '.join(_ON)}) nor off "
                  f"({', '.join(_OFF)}); taking the default, {'on' if default else 'off'}")
    return default


_WARNED: set[tuple[str, str]] = set()  # the switches' values warned of
