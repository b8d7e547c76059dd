"""A run's temporary folder (its workload file, its worker's programs and output), and the
removal of those that killed runs left behind.

A run holds a lock on a file in its folder for as long as its process lives; the kernel lets
go of it when the process ends, by SIGKILL too, where the folder's own removal never runs. The
next run removes every such folder whose lock it can take and whose process, named in the file,
is gone from this host: a killed matmul run at 8192³ would
otherwise leave 1.5 GB of inputs, expected output and error bounds in the temporary folder (memory, where that
is a tmpfs) until a reboot. The empty temporary files PoCL 3 leaves in its cache each time a
process loads it go at the same time.

A run that measures on a device names it in its folder, so that a second run on that device
can be warned: each slows the other's timings (:func:`sharing`).

Example:
    >>> with run_folder() as folder:
    ...     (folder / "workload.npz").write_bytes(b"")
    0
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ScratchError, warn
from .processes import command_name, gone, owner_name

try:
    import fcntl
except ImportError:  # no flock (Windows): folders are removed by their own run only
    fcntl = None  # type: ignore[assignment]

#: How a run's folder is named in the temporary folder (then mkdtemp's random part).
PREFIX = "autotune-run-"

#: The file in a run's folder whose lock its run holds.
OWNER = ".owner"

#: The file in a run's folder that names its command and the device it measures on.
DEVICE = ".device"

#: A folder younger than this is left alone: its run may be between creating the lock file and
#: taking its lock.
MIN_AGE_S = 60.0


@contextmanager
def run_folder(device: str | None = None) -> Iterator[Path]:
    """A new folder in the temporary folder, removed on the way out; folders of runs that were
    killed are removed first (:func:`sweep`). ``device``: what the run measures on, for
    :func:`sharing`."""
    sweep()
    try:
        folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    except OSError as exc:
        raise no_room(Path(tempfile.gettempdir()), exc) from None
    fd = -1
    try:
        try:
            fd = _hold(folder, device)
        except OSError as exc:
            raise no_room(folder, exc) from None
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if fd >= 0:
            os.close(fd)


def _hold(folder: Path, device: str | None) -> int:
    """Write the lock file in ``folder`` and take its lock (and name ``device``); its descriptor."""
    fd = os.open(folder / OWNER, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.write(fd, owner_name().encode())
        if fcntl is not None:
            try:  # not contested: the folder is new, and too young to sweep
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # no locks there (NFS without lockd): no sweep can take it either
                pass  # (trial 65: every run failed with a traceback)
        if device is not None:  # after the lock: a folder that names a device is held while its run lives
            (folder / DEVICE).write_text(f"{command_name()}\n{device}\n")
    except BaseException:
        os.close(fd)
        raise
    return fd


def no_room(path: Path, exc: OSError, needed: int | None = None) -> ScratchError:
    """The error for a write to a run's folder that failed (trial 83: a full TMPDIR was three
    chained tracebacks ending in "No space left on device", naming no folder and no fix)."""
    size = f" (this run's files take {needed / 2**20:.0f} MiB)" if needed else ""
    return ScratchError(f"cannot write {path} in the temporary folder: {exc.strerror or exc}{size}; free space "
                        "there, or point TMPDIR at a folder with room")


def sweep(where: str | Path | None = None) -> list[Path]:
    """Remove the run folders in ``where`` (the temporary folder) that no live process holds:
    this user's, older than :data:`MIN_AGE_S`, whose lock can be taken. Returns them."""
    if fcntl is None:
        return []
    try:
        candidates = list(Path(where or tempfile.gettempdir()).glob(PREFIX + "*"))
    except OSError:
        return []
    abandoned = [folder for folder in candidates if _abandoned(folder)]
    for folder in abandoned:
        shutil.rmtree(folder, ignore_errors=True)
    _remove_pocl_tempfiles()
    return abandoned


#: The device key (DeviceInfo.key) of every CPU runtime's device: they share the host's cores.
CPU = "CPU"


def sharing(device: str, where: str | Path | None = None) -> list[str]:
    """The other commands (host:pid) of this host whose live runs measure on ``device``, as
    their folders in ``where`` (the temporary folder) name it: this user's runs with the same
    temporary folder; a command's own workers on one device are not counted."""
    if fcntl is None:
        return []
    try:
        named = list(Path(where or tempfile.gettempdir()).glob(f"{PREFIX}*/{DEVICE}"))
    except OSError:
        return []
    mine = command_name()
    found = []
    for path in named:
        command, _, on = _small_text(path).partition("\n")
        if (on.strip() == device and command != mine and (state := _lock_state(path.parent)) is not None
                and state[1] and not gone(command)):
            found.append(command)
    return sorted(set(found))


def warn_sharing(device: str, shown: str) -> None:
    """Warn where another command of this host measures on ``device`` now (``shown``: it in
    words); trial 64: two shells on one device each slowed the other's timings without a word."""
    others = sharing(device)
    if others:
        pids = ", ".join(o.rpartition(":")[2] for o in others)
        cores = " (on this machine's CPU cores, which every CPU runtime shares)" if device == CPU else ""
        warn(f"another autotune command (process {pids}) is measuring on {shown}{cores} now: each slows the other's "
             "timings, so a run may save a slower configuration as its best; let one finish first, or give each "
             "its own device (-d, or -d all in one command)")


def _small_text(path: Path) -> str:
    """The first 300 bytes of ``path`` as text where it is a regular file of this user's, else
    "" (trial 73: a FIFO there hung every run, a link to /dev/zero ran out of memory, a byte
    that is not UTF-8 was a traceback; on a shared /tmp anyone may put one there)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return ""
        return os.read(fd, 300).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def pocl_cache() -> Path:
    """PoCL's kernel cache folder, as PoCL 3 chooses it."""
    if os.environ.get("POCL_CACHE_DIR"):
        return Path(os.environ["POCL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pocl" / "kcache"


def _remove_pocl_tempfiles() -> None:
    """Remove the empty ``tempfile_*`` files PoCL 3 leaves in its cache, one each time a
    process loads it (trial 63: 141 after an hour's use; this machine held 8,446): the user's,
    empty and over :data:`MIN_AGE_S` old, so none PoCL is writing."""
    try:
        leftovers = list(pocl_cache().glob("tempfile_*"))
    except OSError:
        return
    for path in leftovers:
        try:
            info = path.lstat()
            if info.st_size == 0 and _ours_and_old(info, stat.S_ISREG):
                path.unlink()
        except OSError:
            continue


def _abandoned(folder: Path) -> bool:
    """``folder`` is this user's, old enough, and its run, a process of this host, has ended:
    its lock can be taken and its process is gone. Another host's run (a temporary folder on
    NFS, whose locks may not reach across hosts) is left to that host's runs."""
    try:
        if not _ours_and_old(folder.lstat()):
            return False
    except OSError:
        return False
    state = _lock_state(folder)
    return state is not None and not state[1] and gone(state[0])


def _lock_state(folder: Path) -> tuple[str, bool] | None:
    """(the owner ``folder``'s lock file names, whether its lock is held: its run lives, or
    there are no locks to tell), or None without a lock file (another program's folder, or one
    being made)."""
    try:
        fd = os.open(folder / OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not hang it
    except OSError:
        return None
    try:
        owner = os.read(fd, 300).decode(errors="replace")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return owner, False
    except OSError:
        return "", True
    finally:
        os.close(fd)  # lets go of the lock, if taken


def _ours_and_old(info: os.stat_result, kind: Callable[[int], bool] = stat.S_ISDIR) -> bool:
    return kind(info.st_mode) and info.st_uid == os.getuid() and time.time() - info.st_mtime > MIN_AGE_S
