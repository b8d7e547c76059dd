"""Can a device build OpenCL C at all? A probe built and launched once per device and driver.

A runtime whose compiler cannot target this machine (PoCL 3.0 on a CPU newer than its
LLVM 14) fails every build, or aborts the process on ordinary vector code; knowing that
before tuning picks a device that works and spares a run of identical compile errors (or an
application taken down at its first load_kernel). The probe runs in a child process per
device (a compiler that crashes takes only that down), and the result, a crash included, is
cached per device, driver version and probe in ``<cache>/build-checks.json``, so it costs
nothing the second time (``autotune devices --recheck`` probes again).

Example:
    >>> checks({"0:0": "Portable Computing Language|pthread-cpu|3.0"})  # doctest: +SKIP
    {'0:0': BuildCheck(ok=False, message="error: unknown target CPU 'generic'")}
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import platformdirs

from . import settings
from .errors import own_warnings

#: A trivial kernel, and a 16-wide shuffle launched once (PoCL compiles a kernel for the device
#: at its first launch). On an AMD Zen 4, PoCL 3.0 (the ``cpu`` extra; LLVM 14) builds the first
#: and aborts the whole process on the second ("LLVM ERROR: Do not know how to scalarize this
#: operator's operand!"), as on the shipped reverse kernel's uint16 variants, which took the test
#: suite down with it. That case is refused before any launch (:func:`mismatched_target`); the
#: launch is there for the runtimes no rule names.
PROBE_SOURCE = """__kernel void autotune_probe(__global float* x) { x[get_global_id(0)] *= 2.0f; }
__kernel void autotune_probe_wide(__global uint* x) { vstore16(vload16(0, x).sFEDCBA9876543210, 0, x); }
"""
#: Part of every cached result's key: a device checked by an earlier probe is checked again.
PROBE_ID = hashlib.sha256(PROBE_SOURCE.encode()).hexdigest()[:8]
_CHILD_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class BuildCheck:
    """Whether the probe built and ran; ``message`` says why not (the compiler's line, say)."""

    ok: bool
    message: str = ""


def cache_path() -> Path:
    return settings.cache_dir() / "build-checks.json"


def _read_cache() -> dict[str, BuildCheck]:
    try:
        raw = json.loads(cache_path().read_text(encoding="utf-8"))
        return {k: BuildCheck(bool(v["ok"]), str(v.get("message", ""))) for k, v in raw.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}  # absent or damaged: probe again


def _write_cache(entries: Mapping[str, BuildCheck]) -> None:
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    except OSError:
        return  # a read-only cache only costs a probe next time
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({k: asdict(v) for k, v in entries.items()}, f, indent=1)
        os.replace(tmp, path)
    except OSError:  # a full disk: no part-written file left behind (trial 83)
        Path(tmp).unlink(missing_ok=True)


def checks(devices: Mapping[str, str], recheck: bool = False) -> dict[str, BuildCheck]:
    """Build check per ``P:D`` selector; ``devices`` maps each selector to its cache key.

    Keys name the platform, device and driver version, so a driver update probes again.
    """
    keys = {sel: f"{key}|probe {PROBE_ID}" for sel, key in devices.items()}
    cached = {} if recheck else _read_cache()
    todo = [sel for sel, key in keys.items() if key not in cached]
    if todo:
        stored = _read_cache()
        for sel in todo:
            cached[keys[sel]], lasting = _probe(sel)
            if lasting:
                stored[keys[sel]] = cached[keys[sel]]
        _write_cache(stored)
    return {sel: cached[key] for sel, key in keys.items()}


def _probe(selector: str) -> tuple[BuildCheck, bool]:
    """Run the probe on one device in a child: (its result, whether to cache it). A child killed
    by a signal (a compiler that aborts does so again) is that device's lasting result; one that
    hung or raised (a device busy or out of memory for now) is not cached."""
    cmd = [sys.executable, "-m", "autotune.health", selector]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=_CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return BuildCheck(False, f"the build check did not finish in {_CHILD_TIMEOUT_S:.0f} s"), False
    for line in out.stdout.splitlines():
        try:
            sel, ok, message = json.loads(line)
        except (ValueError, TypeError):
            continue
        if sel == selector:
            return BuildCheck(bool(ok), str(message)), True
    last = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
    if any(words in last for words in FULL):  # trial 83: "install a CPU OpenCL runtime" followed
        where = platformdirs.user_cache_dir()
        return BuildCheck(False, f"the build check could not write pyopencl's caches in {where} ({last[:200]}): "
                                 "free space there, or set AUTOTUNE_CACHE to a folder with room"), False
    return BuildCheck(False, f"the build check (a trivial kernel, then a 16-wide vector shuffle) crashed: "
                             f"{last[:300]}"), out.returncode < 0


#: What a write to a full disk or quota ends with (sqlite's words, and the system's).
FULL = ("database or disk is full", "No space left on device", "Disk quota exceeded")


def build_once(selector: str) -> BuildCheck:
    """Build the probe on the device ``P:D`` and launch its shuffle (in this process)."""
    import pyopencl as cl

    from .clcontext import context
    from .launch import BUILD_ERRORS, build_quietly, error_code, short

    p, d = (int(x) for x in selector.split(":"))
    device = cl.get_platforms()[p].get_devices()[d]
    if (mismatch := mismatched_target(device.version, cpu_flags())) is not None:
        return BuildCheck(False, mismatch)  # launching the shuffle would take a minute to abort
    ctx = context(device)  # the stop signals' handlers kept
    try:
        program = build_quietly(ctx, PROBE_SOURCE)
    except cl.Error as exc:
        if error_code(exc) not in BUILD_ERRORS:
            raise
        return BuildCheck(False, short(str(exc), 300))
    return _shuffles(ctx, program)


def mismatched_target(version: str, flags: Collection[str]) -> str | None:
    """Why PoCL cannot be used where its LLVM names this CPU after an older one without AVX-512
    (LLVM 14 calls an AMD Zen 4 ``znver3``) while the CPU has it; None otherwise.

    PoCL then links its AVX-512 kernel library into code for a target without it, and LLVM
    aborts the process on 16-wide vector code after thrashing memory for 20 s to several minutes.

    >>> mismatched_target("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3", {"avx512f"})[:34]
    'PoCL targets this CPU as znver3 (w'
    >>> mismatched_target("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3", {"avx2"}) is None
    True
    """
    found = re.search(r"HSTR: \S*-(znver[123])\b", version)
    if found is None or "avx512f" not in flags:
        return None
    return (f"PoCL targets this CPU as {found.group(1)} (without AVX-512; its LLVM predates the CPU) but links its "
            "AVX-512 kernel library, so 16-wide vector code aborts the process (LLVM ERROR: Do not know how to "
            "scalarize this operator's operand!)")


@cache
def cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags (Linux; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return next((frozenset(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")),
                        frozenset())
    except OSError:
        return frozenset()


def _shuffles(ctx: Any, program: Any) -> BuildCheck:
    """Launch the probe's 16-wide shuffle once and check that it reversed its vector."""
    import numpy as np
    import pyopencl as cl

    data = np.arange(16, dtype=np.uint32)
    queue = cl.CommandQueue(ctx)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=data)
    program.autotune_probe_wide(queue, (1,), None, buf)
    out = np.empty_like(data)
    cl.enqueue_copy(queue, out, buf)
    queue.finish()
    if (out != data[::-1]).any():
        return BuildCheck(False, f"a 16-wide vector shuffle (uint16 .sFEDCBA9876543210) gave {out.tolist()}")
    return BuildCheck(True)


def _main(selectors: list[str]) -> None:
    own_warnings()
    for sel in selectors:
        result = build_once(sel)
        print(json.dumps([sel, result.ok, result.message]), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
