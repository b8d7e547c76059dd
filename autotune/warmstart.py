"""Where a search starts: configurations that won before, on this device and on others.

A tuned configuration is a good first guess for a nearby problem on the same device, and often
for the same problem on a device of the same kind (the tiling that suits one NVIDIA GPU's
registers and local memory tends to suit its siblings). The tuner measures these first, so the
search steers from a good incumbent instead of finding one by chance.

Example (an A100 with no profile, the shipped H100 and H200 profiles tuning matmul):
    >>> from autotune import spec
    >>> from autotune.device import DeviceInfo
    >>> a100 = DeviceInfo("0:0", "NVIDIA CUDA", "NVIDIA A100", "NVIDIA Corporation", "", "", "GPU",
    ...                   108, 1024, (1024, 1024, 64), 49152, 2**35)
    >>> problem = {"M": 2048, "N": 2048, "K": 2048, "layout": "row"}
    >>> [name for name, _ in other_devices(spec.load("matmul"), a100, problem)]  # doctest: +SKIP
    ['NVIDIA H100 80GB HBM3', 'NVIDIA H200']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import profiles, settings
from .device import DeviceInfo
from .spec import KernelSpec, Value

#: At most this many winners of this device (nearest problem first) and of other devices (one
#: each) are measured first: a handful costs little and is enough to start from.
OWN_LIMIT = 3
OTHERS_LIMIT = 3


def previous_winners(spec: KernelSpec, info: DeviceInfo, problem: Mapping[str, Any],
                     limit: int = OWN_LIMIT) -> list[dict[str, Value]]:
    """Configurations that won on this device before, nearest problem first.

    Entries of an older spec version count too: re-tuning after a template edit then starts
    from the old winner. Stored values the space no longer has are dropped; the caller checks
    the rest against the problem.
    """
    found = profiles.collect(spec.name, info.slug, _folders(spec), lambda exc: None)  # reported when saving
    out: list[dict[str, Value]] = []
    for entry in profiles.ranked([e for e, _ in found], problem, spec.spec_hash):
        params = spec.from_stored(entry.params, entry.build_flags)
        if params is not None and params not in out:
            out.append(params)
    return out[:limit]


def other_devices(spec: KernelSpec, info: DeviceInfo, problem: Mapping[str, Any],
                  limit: int = OTHERS_LIMIT) -> list[tuple[str, dict[str, Value]]]:
    """(device name, its winner) for other devices of the same type (GPU, CPU, ...) whose
    profiles tune this kernel: each device's entry nearest the problem, devices of the same
    vendor first. Another type's winner says little here (a CPU's work-group sizes on a GPU)."""
    ranked: list[tuple[bool, str, dict[str, Value]]] = []
    seen: set[str] = set()
    for header, entries in _other_profiles(spec, info.slug):
        name = str(header.get("name", ""))
        if header.get("device_type") != info.device_type or name in seen:
            continue
        for entry in profiles.ranked(entries, problem, spec.spec_hash)[:1]:
            params = spec.from_stored(entry.params, entry.build_flags)
            if params is not None:
                seen.add(name)
                ranked.append((header.get("vendor") != info.vendor, name, params))
    ranked.sort(key=lambda r: r[:2])
    return [(name, params) for _, name, params in ranked[:limit]]


def _other_profiles(spec: KernelSpec, slug: str) -> Iterable[tuple[Mapping[str, Any], list[profiles.Entry]]]:
    """(device block, ``spec``'s entries) of every readable profile not of ``slug``; someone
    else's broken file must not stop this run."""
    paths = (path for folder in _folders(spec) if folder.is_dir() for path in sorted(folder.glob("*.yaml"))
             if path != profiles.path_for(slug, folder))
    for path, doc in profiles.readable(paths, lambda exc: None):
        found = profiles.entries(doc, spec.name, str(path), lambda exc: None)
        header = doc.get("device")
        if found:  # a device block edited into something else names no device
            yield header if isinstance(header, Mapping) else {}, found


def _folders(spec: KernelSpec) -> list[Path]:
    return profiles.search_folders(settings.profiles_dir(), spec.path)
