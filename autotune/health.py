"""Can a device build OpenCL C at all? A trivial kernel, built once per device and driver.

A runtime whose compiler cannot target this machine (PoCL 3.0 on a CPU newer than its
LLVM 14) fails every build; knowing that before tuning picks a device that works and spares
a run of identical compile errors. The build runs in a child process (a compiler that
crashes takes only that down), and the result is cached per device and driver version in
``<cache>/build-checks.json``, so it costs nothing the second time.

Example:
    >>> checks({"0:0": "Portable Computing Language|pthread-cpu|3.0"})  # doctest: +SKIP
    {'0:0': BuildCheck(ok=False, message="error: unknown target CPU 'generic'")}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from . import settings

PROBE_SOURCE = "__kernel void autotune_probe(__global float* x) { x[get_global_id(0)] *= 2.0f; }"
_CHILD_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class BuildCheck:
    """Whether the probe kernel built; ``message`` is the compiler's one line when it did not."""

    ok: bool
    message: str = ""


def cache_path() -> Path:
    return settings.cache_dir() / "build-checks.json"


def _read_cache() -> dict[str, BuildCheck]:
    try:
        raw = json.loads(cache_path().read_text())
        return {k: BuildCheck(bool(v["ok"]), str(v.get("message", ""))) for k, v in raw.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}  # absent or damaged: probe again


def _write_cache(entries: Mapping[str, BuildCheck]) -> None:
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump({k: asdict(v) for k, v in entries.items()}, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs a probe next time


def checks(devices: Mapping[str, str], recheck: bool = False) -> dict[str, BuildCheck]:
    """Build check per ``P:D`` selector; ``devices`` maps each selector to its cache key.

    Keys name the platform, device and driver version, so a driver update probes again.
    """
    cached = {} if recheck else _read_cache()
    todo = [sel for sel, key in devices.items() if key not in cached]
    if todo:
        found = _probe(todo)
        stored = _read_cache()
        for sel in todo:
            if sel in found:
                cached[devices[sel]] = stored[devices[sel]] = found[sel]
        _write_cache(stored)
        for sel in todo:  # not answered: the child crashed or hung on it (not cached)
            if sel not in found:
                cached[devices[sel]] = BuildCheck(False, found.get("", BuildCheck(False)).message)
    return {sel: cached[key] for sel, key in devices.items()}


def _probe(selectors: list[str]) -> dict[str, BuildCheck]:
    """Run the probe in a child; a device it did not answer for maps to nothing ("" says why)."""
    cmd = [sys.executable, "-m", "autotune.health", *selectors]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=_CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"": BuildCheck(False, f"the build check did not finish in {_CHILD_TIMEOUT_S:.0f} s")}
    found: dict[str, BuildCheck] = {}
    for line in out.stdout.splitlines():
        try:
            sel, ok, message = json.loads(line)
        except (ValueError, TypeError):
            continue
        found[sel] = BuildCheck(bool(ok), str(message))
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        found[""] = BuildCheck(False, f"the build check crashed: {last[:300]}")
    return found


def build_once(selector: str) -> BuildCheck:
    """Build the probe kernel on the device ``P:D`` (in this process)."""
    import pyopencl as cl

    from .launch import BUILD_ERRORS, build_quietly, error_code, short

    p, d = (int(x) for x in selector.split(":"))
    device = cl.get_platforms()[p].get_devices()[d]
    try:
        build_quietly(cl.Context([device]), PROBE_SOURCE)
    except cl.Error as exc:
        if error_code(exc) not in BUILD_ERRORS:
            raise
        return BuildCheck(False, short(str(exc), 300))
    return BuildCheck(True)


def _main(selectors: list[str]) -> None:
    for sel in selectors:
        result = build_once(sel)
        print(json.dumps([sel, result.ok, result.message]), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
