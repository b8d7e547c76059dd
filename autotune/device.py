"""OpenCL platform/device discovery and selection, a stable key and file-name slug.

Selectors (``--device``): ``P:D`` indices as `autotune devices` prints them, a
case-insensitive substring of "platform vendor device-name" (e.g. ``nvidia``, ``pocl``,
``h200``), or the device's profile slug (``nvidia-corporation-nvidia-h200``). With no
selector, ``$AUTOTUNE_DEVICE``, then the first GPU whose compiler builds a trivial kernel
(:mod:`health`), then the first such CPU device. Several devices at once (:func:`select_many`):
``all`` (every GPU that builds, else every CPU device that builds) or selectors separated by
commas.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import pyopencl as cl

from . import clcontext, health, runtimes, scratch, settings
from .errors import DeviceError, warn


@dataclass(frozen=True)
class DeviceInfo:
    """Facts about a device that constraints, profiles and selection use."""

    selector: str
    platform: str
    name: str
    vendor: str
    driver: str
    opencl: str
    device_type: str
    compute_units: int
    max_work_group_size: int
    max_work_item_sizes: tuple[int, ...]
    local_mem_size: int
    global_mem_size: int
    max_mem_alloc_size: int = 0  # 0: unknown

    @property
    def slug(self) -> str:
        """File-name-safe, stable id: ``<vendor>-<name>`` (driver updates keep the profile)."""
        return slugify(f"{self.vendor} {self.name}")

    @property
    def key(self) -> str:
        """This device of this host, as a run's temporary folder names it (:func:`autotune.scratch.sharing`):
        every CPU runtime's device is the host's CPU, whose cores they share (trial 125: runs on Intel's
        runtime and on PoCL slowed each other's timings without a word)."""
        return scratch.CPU if self.device_type == "CPU" else f"{self.selector} {self.platform} {self.name}"

    @property
    def is_gpu(self) -> bool:
        return self.device_type == "GPU"

    def facts(self) -> dict[str, Any]:
        """Variables for constraint and launch expressions."""
        return {
            "max_work_group_size": self.max_work_group_size,
            "local_mem_size": self.local_mem_size,
            "compute_units": self.compute_units,
            "max_work_item_sizes": self.max_work_item_sizes,
            "global_mem_size": self.global_mem_size,
            "is_gpu": self.is_gpu,
            # not a name expressions may use (spec.DEVICE_FACTS): scratch sizes are checked against it
            "max_mem_alloc_size": self.max_mem_alloc_size,
        }

    def profile_header(self) -> dict[str, Any]:
        """The device block written at the top of a profile."""
        d = asdict(self)
        for k in ("selector", "max_work_item_sizes", "max_mem_alloc_size"):
            d.pop(k)
        return d


def slugify(text: str) -> str:
    """Lower-case, dash-separated ASCII; repeated words collapse (``NVIDIA NVIDIA H200``)."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    out: list[str] = []
    for w in words:
        if w not in out:
            out.append(w)
    return "-".join(out) or "device"


def _type_name(dev: cl.Device) -> str:
    t = dev.type
    for flag, name in ((cl.device_type.GPU, "GPU"), (cl.device_type.CPU, "CPU"),
                       (cl.device_type.ACCELERATOR, "ACCELERATOR")):
        if t & flag:
            return name
    return "OTHER"


def _platforms() -> list[cl.Platform]:
    settings.system_opencl_only()  # warns (once) where its value is neither on nor off
    return clcontext.platforms()


def info(dev: cl.Device, selector: str = "") -> DeviceInfo:
    """Facts of a pyopencl device."""
    return DeviceInfo(
        selector=selector,
        platform=dev.platform.name.strip(),
        name=dev.name.strip(),
        vendor=dev.vendor.strip(),
        driver=dev.driver_version.strip(),
        opencl=dev.version.strip(),
        device_type=_type_name(dev),
        compute_units=int(dev.max_compute_units),
        max_work_group_size=int(dev.max_work_group_size),
        max_work_item_sizes=tuple(int(x) for x in dev.max_work_item_sizes),
        local_mem_size=int(dev.local_mem_size),
        global_mem_size=int(dev.global_mem_size),
        max_mem_alloc_size=int(dev.max_mem_alloc_size),
    )


def list_devices() -> list[tuple[DeviceInfo, cl.Device]]:
    """Every device of every platform with its ``P:D`` selector."""
    found = []
    for pi, plat in enumerate(_platforms()):
        try:
            devices = plat.get_devices()
        except cl.Error:
            continue
        for di, dev in enumerate(devices):
            found.append((info(dev, f"{pi}:{di}"), dev))
    return found


def of(dev: cl.Device) -> DeviceInfo:
    """Facts of a pyopencl device (an application's queue's), with its ``P:D`` selector."""
    found = next((d for d, other in list_devices() if other == dev), None)
    return found if found is not None else info(dev)


def build_key(d: DeviceInfo) -> str:
    """What a build check is cached under: platform, device and driver version."""
    return f"{d.platform}|{d.vendor}|{d.name}|{d.driver}|{d.opencl}"


def build_checks(found: list[tuple[DeviceInfo, cl.Device]],
                 recheck: bool = False) -> dict[str, health.BuildCheck]:
    """Whether each device builds and runs the probe kernels, by selector (cached; see :mod:`health`)."""
    return health.checks({d.selector: build_key(d) for d, _ in found}, recheck)


def _default(found: list[tuple[DeviceInfo, cl.Device]]) -> tuple[DeviceInfo, cl.Device]:
    """The first GPU that builds, else the first CPU device that builds, else any that builds."""
    built = build_checks(found)
    for wanted in ("GPU", "CPU", None):
        for item in found:
            if built[item[0].selector].ok and wanted in (None, item[0].device_type):
                return item
    failed = [f"{d.selector} {d.name} ({d.platform}): {built[d.selector].message}" for d, _ in found]
    raise DeviceError("no OpenCL device can run kernels: " + "; ".join(failed) + fix_for(failed))


def fix_for(failures: list[str]) -> str:
    """What to add to build-check ``failures``: the advice to install a runtime, or where a full
    cache is among them, to make room (trial 83: "install a CPU OpenCL runtime" where one was
    installed; trial 86: `devices`, which lists the checks above, then gave no fix)."""
    if any(words in m for m in failures for words in health.FULL):
        return "; free space in the cache folder the build check names, or set AUTOTUNE_CACHE to a folder with room"
    return f"; {runtimes.cpu_fix()}"


def require_builds(item: tuple[DeviceInfo, cl.Device], found: list[tuple[DeviceInfo, cl.Device]],
                   use: str = "use --device") -> tuple[DeviceInfo, cl.Device]:
    """``item``, or DeviceError where its compiler cannot build a trivial kernel, naming the
    devices that can (``use`` leads them: the CLI's option, or an application's queue)."""
    d = item[0]
    check = build_checks([item])[d.selector]
    if check.ok:
        return item
    built = build_checks(found)  # one look (or probe) for all the others
    others = [f"{o.selector} ({o.name}, {o.platform})" for o, _ in found
              if o.selector != d.selector and built[o.selector].ok]
    fix = f"; {use} {' or '.join(others)}" if others else fix_for([check.message])
    raise DeviceError(f"{d.name} ({d.platform}, driver {d.driver}) cannot run OpenCL kernels: "
                      f"{check.message}{fix}")


def select(selector: str | None = None, require_build: bool = True) -> tuple[DeviceInfo, cl.Device]:
    """The device a selector names; see the module docstring for the rules.

    With ``require_build`` (the default) a device whose compiler cannot build a trivial kernel
    is refused with the compiler's message, and the default skips such devices.
    """
    named = " (from $AUTOTUNE_DEVICE; unset it or pass --device)" if not selector else ""
    selector = selector or settings.default_device_selector()
    if selector and "," in selector and not all(part.strip() for part in selector.split(",")):
        raise DeviceError(f"{selector!r}{named} has an empty selector; give one selector such as 0:0 "
                          "(see `autotune devices`)")
    if selector and several(selector) and named:
        # a site-wide setting for runs (trial 44: show, bench and probe refused it): the first
        # device it names, as a run's first worker takes (`all`: the default's choice), the
        # others not looked at (trial 54: one absent or not building failed the command)
        selector = "" if _is_all(selector) else selector.split(",")[0].strip()
    elif selector and several(selector):
        raise DeviceError(f"{selector!r} names several devices, and this command uses one; give a "
                          "single selector such as 0:0 (see `autotune devices`): only `run` takes several")
    found = list_devices()
    if not found:
        raise DeviceError(f"no OpenCL device found; {runtimes.cpu_fix()}")
    if not selector:
        return _default(found) if require_build else ([f for f in found if f[0].is_gpu] or found)[0]
    match = None
    if re.fullmatch(r"\d+:\d+", selector):
        match = next((item for item in found if item[0].selector == selector), None)
    else:
        needle = selector.lower()
        matches = [item for item in found if needle in " ".join(
            (item[0].platform, item[1].platform.vendor, item[0].vendor, item[0].name, item[0].device_type)).lower()]
        if require_build and len(matches) > 1:  # those that cannot build are no choice (trial 76)
            built = build_checks(matches)
            matches = [m for m in matches if built[m[0].selector].ok] or matches
        match = matches[0] if matches else None
        _warn_ambiguous(selector, named, [d for d, _ in matches])
        # a profile's file name (the slug `report -d` and `autotune devices` show) names it too
        match = match or next((item for item in found if item[0].slug == needle), None)
    if match is not None:
        try:
            return require_builds(match, found) if require_build else match
        except DeviceError as exc:  # trial 32: it did not say where the refused device came from
            raise DeviceError(f"{exc}{named}") from None
    listing = "; ".join(f"{d.selector} = {d.name} ({d.platform})" for d, _ in found)
    raise DeviceError(
        f"no OpenCL device matches {selector!r}{named}; use an index, a name substring or a profile slug: {listing}"
    )


_ambiguous_said: set[str] = set()


def _warn_ambiguous(selector: str, named: str, matches: list[DeviceInfo]) -> None:
    """Warn, once a process, where a name substring matches devices of more than one model
    (trial 71: `-d amd` took Intel's runtime over PoCL's without a word); several of one model
    (`-d nvidia` on a host of two H200s) take the first, as said in `autotune devices`."""
    if len({(d.name, d.platform) for d in matches}) > 1 and selector not in _ambiguous_said:
        _ambiguous_said.add(selector)
        warn(f"{selector!r}{named} matches {', '.join(f'{d.selector} ({d.name}, {d.platform})' for d in matches)}: "
             f"using {matches[0].selector}; give a selector such as {matches[-1].selector} to choose another")


def several(text: str) -> bool:
    """Whether a selector names several devices: ``all`` or a list (:func:`select_many`'s forms)."""
    return _is_all(text) or "," in text


def _is_all(text: str) -> bool:
    return text.strip().lower() == "all"


def select_many(text: str, given: str = "--device") -> list[DeviceInfo]:
    """The devices ``all`` or a comma-separated list of selectors names, in order (a device
    named twice gets two workers). ``given``: where ``text`` came from, for the errors (trial
    39: a bad $AUTOTUNE_DEVICE was called --device)."""
    if not _is_all(text):
        parts = [part.strip() for part in text.split(",")]
        if not all(parts):
            raise DeviceError(f"{given} {text!r} has an empty selector; separate selectors with single "
                              "commas, e.g. 0:0,0:1")
        if any(_is_all(part) for part in parts):  # trial 33: 'all' alone said run takes one device
            raise DeviceError(f"{given} {text!r}: 'all' stands alone (every GPU that builds, else every CPU "
                              "device); give either 'all' or a list of selectors such as 0:0,0:1")
        try:
            return [select(part)[0] for part in parts]
        except DeviceError as exc:  # trial 40: a part of $AUTOTUNE_DEVICE was not said to come from it
            raise DeviceError(f"{exc} (in {given} {text!r})") from None
    found = list_devices()
    if not found:
        raise DeviceError(f"no OpenCL device found; {runtimes.cpu_fix()}")
    built = build_checks(found)
    ok = [d for d, _ in found if built[d.selector].ok]
    if not ok:
        _default(found)  # raises, saying why each device cannot build
    return [d for d in ok if d.is_gpu] or ok
