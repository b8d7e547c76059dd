"""The ``autotune`` command's code before its modules load: a stop then ends it as one later does.

Loading the command takes about 0.2 s on a 2-core machine; a Ctrl-C then gave Python's
KeyboardInterrupt traceback from deep inside an import, and exit status 1. The handlers here
hold until :func:`autotune.cli.main` sets its own. (The console script's own first code,
``_autotune_entry``, covers the package's import before this module.)
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


class _Stopped(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: Whether the command has set its own handlers: from then on it decides its exit status, and a
#: stop that reaches these handlers again (as the command returns, once it has put them back)
#: comes after its outcome (trial 86 suite: a finished run exited 130, "interrupted").
_COMMAND_STARTED = [False]


def command_started() -> None:
    """Called by the command as it sets its own stop handlers (see :data:`_COMMAND_STARTED`)."""
    _COMMAND_STARTED[0] = True


def _stop(signum: int, frame: Any) -> None:
    if not _COMMAND_STARTED[0]:
        raise _Stopped(signum)


#: numpy's BLAS threads: read once, as numpy loads (after this module), so set here.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread(argv: list[str]) -> None:
    """One BLAS thread for ``replay``, unless the caller set otherwise: its regressions are small,
    and a thread pool per call made a replay 1.7x as slow on 2 cores (trial 93). Other commands
    keep the pool: a reference's large matrix product needs it."""
    if argv[:1] == ["replay"] and not any(name in os.environ for name in BLAS_THREADS):
        for name in BLAS_THREADS:  # (one the caller set is theirs: trial 94, OMP_NUM_THREADS=2)
            os.environ[name] = "1"


def threads_without_stops(signals: set[int]) -> None:
    """Load numpy with ``signals`` held back, so that the threads its BLAS starts never take them
    and each reaches the main thread, which holds them back while an OpenCL runtime loads
    (:mod:`autotune.clcontext`): taken by a BLAS thread then, a Ctrl-C ran Intel's handler,
    which swallowed it, and the run went on to exit 0 (trial 103)."""
    from .stops import blocked

    with blocked(*signals):
        import numpy  # noqa: F401


def main() -> int:
    """The ``autotune`` command."""
    one_blas_thread(sys.argv[1:])
    hangup = getattr(signal, "SIGHUP", None)
    stops = {s for s in (signal.SIGINT, signal.SIGTERM, hangup) if s is not None}
    for s in stops:  # SIGHUP only where not ignored (nohup)
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _stop)
    try:
        if not {"-h", "--help", "--version"} & set(sys.argv[1:]):  # (help: 0.1 s, numpy's load 0.15 s more)
            threads_without_stops(stops | ({signal.SIGQUIT} if hasattr(signal, "SIGQUIT") else set()))
        from .cli import console

        return console()
    except _Stopped as exc:  # before the command's own handlers were set
        if sys.stderr is not None:  # closed (2>&-): not into stdout
            print("autotune: interrupted", file=sys.stderr)
        return 128 + exc.signum
