"""The ``autotune`` command's first code, outside the package so that it runs before the package loads.

Importing ``autotune`` takes about 45 ms on a 2-core machine (it registers the OpenCL runtimes
and pins its folders as it loads, for library users too); a Ctrl-C then gave Python's
KeyboardInterrupt traceback. The handlers set here hold until :func:`autotune._entry.main` sets
its own, which it does first.
"""

from __future__ import annotations

import signal
import sys


class _Stopped(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:  # (no typing import: it takes 5 ms)
    raise _Stopped(signum)


def main() -> int:
    """The ``autotune`` console script."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        s = getattr(signal, name, None)
        if s is not None and signal.getsignal(s) is not signal.SIG_IGN:  # (SIGHUP under nohup: kept ignored)
            signal.signal(s, _stop)
    try:
        from autotune._entry import main as command

        return command()  # which sets its own handlers before anything else can stop
    except _Stopped as exc:
        if sys.stderr is not None:
            print("autotune: interrupted", file=sys.stderr)
        return 128 + exc.signum
