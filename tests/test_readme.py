"""The README's own-kernel example works as written: spec, template and reference."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyopencl as cl

import autotune
from autotune import device
from autotune.tuner import TuneOptions, tune
from conftest import every_runtime, needs_opencl

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_example(folder: Path) -> Path:
    text = README.read_text()
    yaml_src = re.search(r"```yaml\n(kernel: saxpy.*?)```", text, flags=re.DOTALL).group(1)
    c_src = re.search(r"```c\n(// saxpy.cl.*?)```", text, flags=re.DOTALL).group(1)
    py_src = re.search(r"```python\n(# saxpy_ref.py.*?)```", text, flags=re.DOTALL).group(1)
    (folder / "saxpy.cl").write_text(c_src)
    (folder / "saxpy_ref.py").write_text(py_src)
    (folder / "saxpy.yaml").write_text(yaml_src)
    return folder / "saxpy.yaml"


@needs_opencl
def test_readme_spec_tunes_and_loads(tmp_path):
    path = readme_example(tmp_path)
    report = tune(str(path), TuneOptions(trials=4, seed=0, timeout_s=None), problem={"N": 65536})
    assert report.best is not None and report.best.ok and not report.failures
    _, dev = device.select(None)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    x = np.linspace(-1, 1, 65536, dtype=np.float32)
    y = np.ones(65536, np.float32)
    mf = cl.mem_flags
    xb = cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=y)
    k = autotune.load_kernel(str(path), queue, N=65536)
    assert k.origin == "exact" and k.arg_names == ("x", "y")
    k(xb, yb).wait()
    out = np.empty_like(y)
    cl.enqueue_copy(queue, out, yb)
    np.testing.assert_allclose(out, 2.5 * x.astype(np.float64) + 1, rtol=1e-6, atol=1e-6)
