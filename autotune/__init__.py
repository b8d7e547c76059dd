"""autotune: an OpenCL kernel autotuner.

Tune with ``autotune run matmul`` (or :func:`tune`), then use the result::

    import pyopencl as cl, autotune
    ctx = cl.create_some_context()
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    mm = autotune.load_kernel("matmul", queue, M=2048, N=2048, K=2048)
    run = mm(a_buf, b_buf, c_buf)   # a Run: its events, run.wait(), run.seconds
"""

from __future__ import annotations

import importlib
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .caches import redirect as _redirect_caches
from .runtimes import register as _register_runtimes
from .settings import pin_folders as _pin_folders

_pin_folders()  # before anything uses them, and before any process is started

# before anything asks the ICD loader for platforms (see autotune.runtimes), and before
# pyopencl picks its cache folders (see autotune.caches)
_register_runtimes()
_redirect_caches()

from .errors import (  # noqa: E402
    AutotuneError,
    AutotuneWarning,
    BuildError,
    DeviceError,
    ExpressionError,
    OptionError,
    ProblemError,
    ProfileError,
    ProfileNotSaved,
    SpecError,
    StorageError,
    TuningInterrupted,
    WorkerError,
)

if TYPE_CHECKING:
    from .cli import format_report
    from .loader import Run, TunedKernel, load_kernel
    from .result import Measurement
    from .tuner import TuneOptions, TuneReport, tune

#: The API's parts that need pyopencl and optuna, imported on first use: the command line
#: answers --help, and a Ctrl-C, without loading them.
_LAZY = {"Run": "loader", "TunedKernel": "loader", "load_kernel": "loader", "TuneOptions": "tuner",
         "TuneReport": "tuner", "tune": "tuner",
         "Measurement": "result",  # what TuneReport's best and baseline are
         "format_report": "cli"}  # a TuneReport as `autotune run` prints it


#: Held while a lazy part is imported: a thread that found the module in sys.modules while
#: another was still importing it got "partially initialized module" (trial 72: 6 or 7 of 8
#: threads' first load_kernel calls failed). Reentrant: an import may read another lazy name.
_importing = threading.RLock()


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = f"{__name__}.{_LAZY[name]}"
    with _importing:
        loaded = sys.modules.get(module)
        # one another thread's `import autotune.tuner` is still running (trial 73) is imported
        # below: the import system waits for it to finish
        if loaded is not None and not getattr(loaded.__spec__, "_initializing", False):
            value = getattr(loaded, name)  # no filter change: that shows a warning a loop gave once again
        else:
            with warnings.catch_warnings():
                # optuna imports tqdm.auto, which in a notebook without ipywidgets warns of a
                # progress bar autotune never shows (trial 66)
                warnings.filterwarnings("ignore", message="IProgress not found")
                value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found at once from now on
    return value


__all__ = [
    "AutotuneError",
    "AutotuneWarning",
    "BuildError",
    "DeviceError",
    "ExpressionError",
    "Measurement",
    "OptionError",
    "ProblemError",
    "ProfileError",
    "ProfileNotSaved",
    "Run",
    "SpecError",
    "StorageError",
    "TuneOptions",
    "TuneReport",
    "TunedKernel",
    "TuningInterrupted",
    "WorkerError",
    "format_report",
    "load_kernel",
    "tune",
]
