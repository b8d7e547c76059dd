"""Shared fixtures: an isolated AUTOTUNE_HOME, a fake device, small spec folders."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune.device import DeviceInfo
from autotune.measure import TimingOptions

FAKE = DeviceInfo(selector="fake", platform="Fake Platform", name="Fake GPU 9000", vendor="FakeCorp",
                  driver="1.0", opencl="OpenCL 3.0", device_type="GPU", compute_units=8,
                  max_work_group_size=256, max_work_item_sizes=(256, 256, 64),
                  local_mem_size=49152, global_mem_size=2**32)


def _own_temporary_folder(worker: str) -> None:
    """Give this pytest-xdist worker a temporary folder of its own (as TMPDIR, for the commands
    its tests start too). A run names the device it measures on in its folder there, and a run of
    another worker on the same CPU device would rightly be warned of it: a warning that tests
    reading a command's exact output do not expect, and that no run outside the suite gets."""
    folder = tempfile.mkdtemp(prefix=f"autotune-tests-{worker}-")
    os.chmod(folder, 0o1777)  # as /tmp: the PostgreSQL server the worker tests start runs as its own user
    os.environ["TMPDIR"] = os.environ[_OWN_TMP] = folder
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


#: Set once a worker has its folder: a process a test spawns imports this module again, and
#: keeps the TMPDIR the test gave it.
_OWN_TMP = "AUTOTUNE_TESTS_OWN_TMPDIR"
if "PYTEST_XDIST_WORKER" in os.environ and _OWN_TMP not in os.environ:  # before any device is loaded
    _own_temporary_folder(os.environ["PYTEST_XDIST_WORKER"])


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI job's time limit, `timeout`'s default) ends the suite as Ctrl-C does, so
    that the fixtures' teardown stops the PostgreSQL server the worker tests start and each
    worker's temporary folder goes (trial 120: the server ran on, and the folders stayed). The
    processes the tests start are spawned, so none inherits this handler."""
    import signal

    signal.signal(signal.SIGTERM, signal.default_int_handler)


def _buildable() -> tuple[list[str], list[str]]:
    """(selectors of the devices whose compiler builds a trivial kernel, the default device's
    first (a GPU before a CPU, as `autotune run` picks); lines describing all)."""
    from autotune import device

    found = device.list_devices()
    checks = device.build_checks(found)
    lines = [f"{d.selector} {d.name} ({d.platform}, driver {d.driver}): "
             + ("builds" if checks[d.selector].ok else f"cannot run kernels: {checks[d.selector].message}")
             for d, _ in found]
    builds = sorted((d for d, _ in found if checks[d.selector].ok), key=lambda d: d.device_type != "GPU")
    return [d.selector for d in builds], lines


#: The devices that build, the default device first.
DEVICES, DEVICE_LINES = _buildable()
#: Every OpenCL test on every device that builds, not only the runtime's own (see every_runtime).
EVERY_DEVICE = os.environ.get("AUTOTUNE_TEST_EVERY_DEVICE", "") not in ("", "0")
#: Marks a test that needs an OpenCL device; it runs on the default device (the first of DEVICES).
needs_opencl = pytest.mark.opencl
#: Marks a test or module whose outcome is the OpenCL runtime's own (what its compiler builds and
#: reports, what its launches compute, what it does with a fault): with needs_opencl, it runs on
#: each device that builds (Intel's CPU runtime, PoCL, a GPU). The other OpenCL tests (the command
#: line, profiles, stopping and saving) take the same paths on any runtime, and run on the default
#: device only, unless AUTOTUNE_TEST_EVERY_DEVICE=1: on a machine where PoCL builds too, running
#: them twice took the suite past its 10 minutes.
every_runtime = pytest.mark.every_runtime


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Which devices the OpenCL tests ran on (printed with -q too, unlike the header)."""
    if not DEVICES:
        terminalreporter.write_line("OpenCL tests ran on: none: no device builds, so the suite fails")
    else:
        others = f"; the runtime's own tests on {', '.join(DEVICES[1:])} too" if DEVICES[1:] and not EVERY_DEVICE \
            else f"; all of them on {', '.join(DEVICES[1:])} too" if DEVICES[1:] else ""
        terminalreporter.write_line(f"OpenCL tests ran on: {DEVICES[0]}{others}")
    for line in DEVICE_LINES:
        terminalreporter.write_line(f"  {line}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("opencl") is None:
        return
    if "ocl_device" not in metafunc.fixturenames:
        metafunc.fixturenames.append("ocl_device")
    every = EVERY_DEVICE or metafunc.definition.get_closest_marker("every_runtime") is not None
    chosen = DEVICES if every else DEVICES[:1]
    # session scope: module fixtures that build on the device are made once per device
    metafunc.parametrize("ocl_device", chosen, indirect=True, scope="session",
                         ids=[f"dev{sel}" for sel in chosen])


@pytest.fixture(scope="session")
def ocl_device(request: pytest.FixtureRequest) -> str:
    """The ``P:D`` selector of the device this test runs on."""
    return request.param


@pytest.fixture(scope="module")
def device(ocl_device: str) -> Iterator[tuple[DeviceInfo, Any]]:
    """(facts, context) of the device under test, one context per module."""
    import pyopencl as cl

    from autotune import device as devices

    info, dev = devices.select(ocl_device)
    yield info, cl.Context([dev])


def verified(m: Any, what: Any) -> bool:
    """True when measurement ``m`` verified; False when the device refused the work-group for
    the built kernel, which is legal (NVIDIA allows most of these kernels 256 work-items, fewer
    than its device limit); any other failure fails the test."""
    if m.status.value == "launch_error" and "allowed for this kernel" in m.message:
        return False
    assert m.ok, f"{what}: {m.status.value}: {m.message}"
    return True


class QuietEvaluator:
    """The Evaluator protocol's housekeeping for fake evaluators; they define evaluate(), and
    its verify=False calls are the confirmation's, rechecks included."""

    def recheck(self, params: Any, limit_s: float | None) -> Any:
        return self.evaluate(params, limit_s, None, verify=False)

    def prefetch(self, upcoming: list[dict[str, Any]]) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def scale(tmp_path: Path) -> Any:
    """The small scale spec (y = 2x) of SCALE_YAML, loaded."""
    from autotune import spec as specs

    return specs.load(write_spec(tmp_path, SCALE_YAML))


#: One launch, no warm-up: for tests that check results, not speed.
FAST = TimingOptions(warmup=0, min_repeats=1, max_repeats=1, min_time_s=0.0)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    """Every test gets its own AUTOTUNE_HOME, so no test sees another's studies or profiles
    (nor the picks another kept in memory when its profile could not take them)."""
    from autotune import loader

    h = tmp_path / "home"
    monkeypatch.setenv("AUTOTUNE_HOME", str(h))
    monkeypatch.setattr(loader, "_unsaved", {})
    callspec = getattr(request.node, "callspec", None)
    selector = callspec.params.get("ocl_device") if callspec is not None else None
    if selector:  # the default device of this test (and of the CLI it runs) is the one under test
        monkeypatch.setenv("AUTOTUNE_DEVICE", selector)
    else:
        monkeypatch.delenv("AUTOTUNE_DEVICE", raising=False)
    return h


@pytest.fixture(autouse=True)
def stop_handlers_as_they_were() -> Iterator[None]:
    """A test (an application calling autotune, or a command run in-process) leaves the stop
    signals' handlers as it found them: one left ignored was inherited by every process the
    suite started after it (a CI run: a later test's Ctrl-C went unseen)."""
    import signal

    watched = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    before = {s: signal.getsignal(s) for s in watched}
    yield
    changed = {signal.Signals(s).name: h for s in watched if (h := signal.getsignal(s)) is not before[s]}
    for s, handler in before.items():
        signal.signal(s, handler)
    assert not changed, f"the test left these signals' handlers changed: {changed}"


@pytest.fixture
def fake_device() -> DeviceInfo:
    return FAKE


REF_PY = """
import numpy as np

def inputs(problem, rng):
    n = problem["N"]
    return {"x": rng.uniform(-1, 1, n).astype(np.float32), "y": np.zeros(n, np.float32)}

def reference(problem, arrays):
    return {"y": (2.0 * arrays["x"].astype(np.float64)).astype(np.float32)}
"""

TEMPLATE_CL = """
#ifndef WPT
#define WPT 1
#endif
#ifndef MODE
#define MODE 0
#endif
__kernel void scale(__global const float* x, __global float* y) {
    const int base = get_global_id(0) * WPT;
    for (int i = 0; i < WPT; ++i) {
#if MODE == 1
        if (base + i == 3) { while (1) { } }     /* hangs */
#elif MODE == 2
        if (base + i == 0) { __global volatile int* p = (__global volatile int*)0; p[base] = 1; p[1 << 28] = 2; }
#elif MODE == 3
        y[base + i] = 3.0f * x[base + i];          /* wrong answer */
        continue;
#endif
        y[base + i] = 2.0f * x[base + i];
    }
}
"""


def save_winner(device: DeviceInfo, problem: dict[str, Any], params: dict[str, Any], flags: tuple[str, ...] = (),
                kernel: str = "scale", spec_hash: str = "any") -> None:
    """A tuned entry for ``kernel`` in ``device``'s profile in the user's folder (AUTOTUNE_HOME)."""
    from autotune import profiles, settings

    entry = profiles.Entry(problem=problem, params=params, build_flags=flags, time_ms=1.0, throughput={},
                           trials=9, tuned_at="2026-11-21T00:00:00Z", spec_hash=spec_hash)
    profiles.save(entry, kernel, device.profile_header(), profiles.path_for(device.slug, settings.profiles_dir()))


def write_spec(folder: Path, yaml_text: str, template: str = TEMPLATE_CL, ref: str = REF_PY,
               name: str = "scale.yaml") -> Path:
    """A spec folder with a template, a reference module and the YAML; returns the YAML path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scale.cl").write_text(textwrap.dedent(template))
    (folder / "scale_ref.py").write_text(textwrap.dedent(ref))
    path = folder / name
    path.write_text(textwrap.dedent(yaml_text))
    return path


SCALE_YAML = """
kernel: scale
description: y = 2x
template: scale.cl
reference: scale_ref.py
problem: {N: 256}
parameters:
  WPT: [1, 2, 4, 8, 16]
  WG: [16, 32, 64, 128, 512]
  MODE: [0]
build_flags:
  mad: -cl-mad-enable
constraints:
  - "(N // WPT) % WG == 0"
args: [x, y]
outputs: [y]
launch:
  entry: scale
  global: ["N // WPT"]
  local: [WG]
metrics:
  GB/s: "8 * N / seconds / 1e9"
baseline: {WPT: 1, WG: 16}
"""
