"""Shared fixtures: an isolated AUTOTUNE_HOME, a fake device, small spec folders."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autotune.device import DeviceInfo

FAKE = DeviceInfo(selector="fake", platform="Fake Platform", name="Fake GPU 9000", vendor="FakeCorp",
                  driver="1.0", opencl="OpenCL 3.0", device_type="GPU", compute_units=8,
                  max_work_group_size=256, max_work_item_sizes=(256, 256, 64),
                  local_mem_size=49152, global_mem_size=2**32)


def _has_opencl() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:  # no ICD loader or no platform: the OpenCL tier is skipped
        return False


HAS_OPENCL = _has_opencl()
needs_opencl = pytest.mark.skipif(not HAS_OPENCL, reason="no OpenCL device (install pocl-binary-distribution)")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own AUTOTUNE_HOME, so no test sees another's studies or profiles."""
    h = tmp_path / "home"
    monkeypatch.setenv("AUTOTUNE_HOME", str(h))
    monkeypatch.delenv("AUTOTUNE_DEVICE", raising=False)
    return h


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
