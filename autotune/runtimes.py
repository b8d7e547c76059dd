"""Register the CPU OpenCL runtimes installed from PyPI with the OpenCL ICD loader.

The ``cpu`` extra installs Intel's OpenCL CPU runtime (``intel-opencl-rt``), which builds on
current CPUs of any vendor, where the PoCL that pyopencl bundles (LLVM 14) cannot target the
newest ones. That wheel puts ``libintelocl.so`` in ``<prefix>/lib`` and registers nothing the
loader can read (its ``.icd`` names a placeholder path), so autotune registers it itself:

it writes a vendors folder holding a copy of every ICD file the loader would have read (the
folder ``$OCL_ICD_VENDORS`` names, else ``/etc/OpenCL/vendors``) plus one for each runtime
found, and points ``OCL_ICD_VENDORS`` at it. A GPU driver registered on the system is still
found; a runtime the system already registers is not added twice. The loader reads the
variable at the first platform query, so :func:`register` runs when ``autotune`` is imported;
worker processes import it too, and inherit the variable anyway.

``AUTOTUNE_SYSTEM_OPENCL=1`` turns this off: only the system's OpenCL set-up is used.

Example:
    >>> register()  # doctest: +SKIP
    [Runtime(name='intel-cpu', library=PosixPath('/venv/lib/libintelocl.so'))]
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from . import settings

SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")
_ENV = "OCL_ICD_VENDORS"
#: Why :func:`register` left installed runtimes unregistered (None: it did not).
_hidden: str | None = None


@dataclass(frozen=True)
class Runtime:
    """An OpenCL runtime installed as a Python package: its ICD name and library."""

    name: str
    library: Path


#: (ICD name, distribution, library file, platform name) of the runtimes the ``cpu`` extra can install.
KNOWN = (("intel-cpu", "intel-opencl-rt", "libintelocl.so", "Intel(R) OpenCL"),)


def installed() -> list[Runtime]:
    """The known runtimes whose library is installed in this Python environment."""
    found = []
    for name, dist, library, _ in KNOWN:
        try:
            distribution = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        for entry in distribution.files or []:
            path = Path(str(distribution.locate_file(entry))).resolve()
            if entry.name == library and path.is_file():
                found.append(Runtime(name, path))
                break
    return found


def _icd_files(source: str | None) -> dict[str, str]:
    """ICD file name → content, of what the loader would read with ``OCL_ICD_VENDORS=source``."""
    if source and not Path(source).is_dir():
        # a single ICD file, or a library named directly (both meanings ocl-icd gives it)
        path = Path(source)
        if path.suffix == ".icd":
            return {path.name: _read(path)} if path.is_file() else {}
        return {"user.icd": source + "\n"}
    folder = Path(source) if source else SYSTEM_VENDORS
    if not folder.is_dir():
        return {}
    return {p.name: _read(p) for p in sorted(folder.glob("*.icd")) if p.is_file()}


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape")  # paths are bytes
    except OSError:  # unreadable: the loader would skip it too
        return ""


def _libraries(icds: dict[str, str]) -> set[str]:
    """File names of the libraries the ICD files load (``libintelocl.so``, ...)."""
    return {Path(text.strip()).name for text in icds.values() if text.strip()}


def vendors_folder(runtimes: list[Runtime], source: str | None) -> Path | None:
    """A folder with the ICDs of ``source`` plus those of ``runtimes`` that it lacks.

    None when ``source`` already registers every runtime (nothing to change). The folder is
    named after its content, so concurrent processes write the same one.
    """
    icds = _icd_files(source)
    present = _libraries(icds)
    missing = [r for r in runtimes if r.library.name not in present]
    if not missing:
        return None
    for r in missing:
        icds[f"autotune-{r.name}.icd"] = f"{r.library}\n"
    digest = hashlib.sha256(repr(sorted(icds.items())).encode()).hexdigest()[:16]
    # the loader loads every library an ICD file there names, so the folder must be one that no
    # other user can change, up to the root (trial 77: a planted .icd in a group-shared
    # AUTOTUNE_CACHE; trial 79: a check of the folder alone let its shared parent be swapped)
    failed: OSError | None = None
    # the private folder made only where the cache's is no good (trial 87: made at every import)
    for where in (lambda: settings.cache_dir() / "icd", _private_base):
        if (base := where()) is None:
            continue
        try:
            folder = _written(base / digest, icds)
        except OSError as exc:  # another user's icd/ here, say: the private one next
            failed = failed or exc
            continue
        if _safe(folder) and {p.name for p in folder.glob("*.icd")} == set(icds):
            return folder
    raise failed or OSError(errno.EACCES, "no folder that only this user can write")


def _written(folder: Path, icds: dict[str, str]) -> Path:
    """``folder`` with ``icds`` in it; this user's own folders there made writable by it alone
    (an older version made them under the umask: 0775 under umask 002)."""
    if not folder.is_dir():
        _write_atomically(folder, icds)
    elif _ours(folder):  # a cache cleaner may remove files and leave their folder (trial 39)
        _fill_in(folder, icds)
    for path in (folder, folder.parent):
        info = path.lstat()
        if _ours(path) and info.st_mode & 0o022:
            path.chmod(stat.S_IMODE(info.st_mode) & ~0o022)
    return folder


def _ours(path: Path) -> bool:
    try:
        return path.lstat().st_uid == os.getuid()
    except OSError:
        return False


def _safe(folder: Path) -> bool:
    """Whether only this user (or root) can change ``folder``: it and every folder above it
    (links resolved) are theirs and writable by no one else, except a folder with the sticky
    bit above it (as /tmp), whose entries only their owners can move."""
    try:
        path = folder.resolve(strict=True)
        for i, step in enumerate((path, *path.parents)):
            info = step.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (os.getuid(), 0):
                return False
            others = info.st_mode & 0o002 or (info.st_mode & 0o020 and not _own_group(info.st_gid))
            if others and not (i > 0 and info.st_mode & stat.S_ISVTX):
                return False
    except OSError:
        return False
    return True


def _own_group(gid: int) -> bool:
    """Whether ``gid`` is this user's private group (named as the user, no other member), as a
    umask of 002 goes with: its write bit lets no one else in."""
    try:
        import grp
        import pwd

        group, me = grp.getgrgid(gid), pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return False
    return group.gr_name == me and set(group.gr_mem) <= {me}


def _private_base() -> Path | None:
    """``icd`` in this user's private cache in the temporary folder (``autotune-cache-<uid>``,
    0700, checked to be theirs), where the cache's own cannot be trusted: one folder for all of
    this user's processes, not one each."""
    private = settings.private_temp()
    return private / "icd" if private is not None else None


def _fill_in(folder: Path, icds: dict[str, str]) -> None:
    """Write the ICD files ``folder`` lacks or holds otherwise, each by an atomic rename, and
    remove those it should not hold (one planted while an older version left it writable)."""
    for extra in set(p.name for p in folder.glob("*.icd")) - set(icds):
        (folder / extra).unlink(missing_ok=True)
    for name, text in icds.items():
        path = folder / name
        try:
            if path.read_text(encoding="utf-8", errors="surrogateescape") == text:
                continue
        except OSError:
            pass
        staging = folder / f".{name}.{os.getpid()}.tmp"
        try:
            staging.write_text(text, encoding="utf-8", errors="surrogateescape")
            os.replace(staging, path)
        except OSError:  # a full disk: no part-written file left behind (trial 83)
            staging.unlink(missing_ok=True)
            raise


def _write_atomically(folder: Path, icds: dict[str, str]) -> None:
    folder.parent.mkdir(mode=0o755, parents=True, exist_ok=True)  # writable by this user alone (_safe)
    staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        for name, text in icds.items():
            (staging / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        staging.rename(folder)
    except OSError:  # another process wrote the same folder first, or the disk is full (trial 83)
        shutil.rmtree(staging, ignore_errors=True)
        if not folder.is_dir():
            raise


def register() -> list[Runtime]:
    """Make the installed runtimes visible to the ICD loader; returns those added.

    Call before the first platform query. Does nothing with ``AUTOTUNE_SYSTEM_OPENCL=1``,
    when no runtime is installed, or when the loader already sees them all.
    """
    if settings.system_opencl_only(quiet=True):
        return []
    runtimes = installed()
    if not runtimes:
        return []
    source = os.environ.get(_ENV) or None
    try:
        folder = vendors_folder(runtimes, source)
    except OSError as e:  # no writable cache folder: keep the system's set-up, say why (hidden())
        global _hidden
        names = ", ".join(r.name for r in runtimes)
        try:
            where = f"under {settings.cache_dir()}"
        except OSError:  # a relative AUTOTUNE_CACHE in a working folder that is gone (trial 61)
            where = f"under $AUTOTUNE_CACHE ({os.environ.get('AUTOTUNE_CACHE', '')!r}, relative to a folder " \
                "that is gone)"
        _hidden = (f"the installed runtime {names} is not visible to OpenCL: its ICD folder "
                   f"cannot be written {where} ({e.strerror or e}); set AUTOTUNE_CACHE to a writable folder")
        return []
    if folder is None:
        return []
    os.environ[_ENV] = str(folder)
    present = _libraries(_icd_files(source))
    return [r for r in runtimes if r.library.name not in present]


def cpu_fix() -> str:
    """The advice when no device can build: make the installed CPU runtime visible, or install one."""
    return hidden() or _listed_too_early() or (
        "install a CPU OpenCL runtime that builds on this machine: pip install "
        "'autotune[cpu]' (Intel's OpenCL CPU runtime), or a GPU driver")


def _listed_too_early() -> str | None:
    """The advice where an installed runtime is registered but not among this process's
    platforms: the process listed them before ``import autotune`` registered it (trial 32: a
    context made first was on PoCL alone, and the advice was to install what was installed)."""
    import pyopencl as cl

    try:
        listed = {p.name for p in cl.get_platforms()}
    except cl.Error:  # no platform at all (the loader says so with an error)
        listed = set()
    missing = [r for _, _, library, platform in KNOWN for r in installed()
               if platform not in listed and r.library.name == library]
    if not missing:
        return None
    return (f"the installed runtime {', '.join(r.name for r in missing)} is not among this process's OpenCL "
            "platforms: import autotune before anything lists them (pyopencl.get_platforms, "
            "create_some_context), since the ICD loader reads its list once per process; where autotune "
            f"came first, the runtime failed to load ({', '.join(str(r.library) for r in missing)}){_limited()}")


def _limited() -> str:
    """Where the process's address space is limited, that as a likely cause of a runtime that did
    not load (trial 83: under `ulimit -v 400000` the advice was only about import order)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return ""
    if soft == resource.RLIM_INFINITY:
        return ""
    return (f": this process's address space is limited to {soft / 2**30:.1f} GiB (ulimit -v), which a runtime "
            "mapping its libraries may exceed; raise the limit")


def hidden() -> str | None:
    """Why the installed runtimes are not visible to OpenCL, with the fix; None when they are
    (or none is installed)."""
    if settings.system_opencl_only() and (runtimes := installed()):
        value = os.environ.get("AUTOTUNE_SYSTEM_OPENCL", "").strip()
        return (f"AUTOTUNE_SYSTEM_OPENCL={value} hides the installed runtime {', '.join(r.name for r in runtimes)}; "
                "unset it to use it")
    return _hidden
