"""autotune: an OpenCL kernel autotuner.

Tune with ``autotune run matmul`` (or :func:`tune`), then use the result::

    import pyopencl as cl, autotune
    queue = cl.CommandQueue(ctx)
    mm = autotune.load_kernel("matmul", queue, M=2048, N=2048, K=2048)
    event = mm(a_buf, b_buf, c_buf)
"""

from __future__ import annotations

__version__ = "0.1.0"

from .runtimes import register as _register_runtimes

# before anything asks the ICD loader for platforms (see autotune.runtimes)
_register_runtimes()

from .errors import (  # noqa: E402
    AutotuneError,
    BuildError,
    DeviceError,
    ExpressionError,
    ProblemError,
    ProfileError,
    SpecError,
    TuningInterrupted,
    WorkerError,
)
from .loader import AutotuneWarning, TunedKernel, load_kernel  # noqa: E402
from .tuner import TuneOptions, TuneReport, tune  # noqa: E402

__all__ = [
    "AutotuneError",
    "AutotuneWarning",
    "BuildError",
    "DeviceError",
    "ExpressionError",
    "ProblemError",
    "ProfileError",
    "SpecError",
    "TuneOptions",
    "TuneReport",
    "TunedKernel",
    "TuningInterrupted",
    "WorkerError",
    "load_kernel",
    "tune",
]
