"""OpenCL platforms and contexts that leave Python's handlers of Ctrl-C, SIGTERM, SIGHUP and
SIGQUIT (Ctrl-backslash) in place.

Intel's CPU runtime installs SIGINT and SIGTERM handlers of its own when it is loaded (the
first platform query) and when it makes a context; a Ctrl-C that then landed inside the
runtime could end the process with status 130 and nothing said or saved (trial 35, ``run
--no-isolation``). Python's handlers are put back right after each, and the signals are held
back until then, so that one sent meanwhile reaches them.

Example:
    >>> ctx = context(platforms()[0].get_devices()[0])  # doctest: +SKIP
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pyopencl as cl

from . import stops


def platforms() -> list[cl.Platform]:
    """``cl.get_platforms()`` (empty where the loader finds none), handlers as they were."""
    with _handlers_kept():
        try:
            return cl.get_platforms()
        except cl.Error:  # the ICD loader reports "no platforms" as PLATFORM_NOT_FOUND_KHR
            return []


def context(device: cl.Device) -> cl.Context:
    """``cl.Context([device])``, with the handlers of the stop signals as they were."""
    with _handlers_kept():
        return cl.Context([device])


@contextmanager
def _handlers_kept() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # only the main thread has them
        yield
        return
    # SIGQUIT too: under Intel's handler Ctrl-backslash was swallowed and the run went on (trial 71);
    # and any the application handles or ignores (trial 75: a host's SIGUSR1 handler was never
    # called again); the crash signals' defaults are left to the runtime
    quit_ = (signal.SIGQUIT,) if hasattr(signal, "SIGQUIT") else ()
    before = {s: signal.getsignal(s) for s in (*stops.signals(), *quit_)}
    # (SIGKILL and SIGSTOP read as SIG_DFL: never taken)
    before.update({s: h for s in signal.valid_signals() if callable(h := signal.getsignal(s)) or h is signal.SIG_IGN})
    before.update({s: signal.SIG_IGN for s in stops.ignored()})  # Intel's runtime sets a handler over it
    # held back until Python's handlers are back, then taken by them (trial 103: a Ctrl-C in the
    # runtime's 26 ms with its handler was swallowed, and the run went on to exit 0)
    with stops.blocked(*before):
        try:
            yield
        finally:
            for s, handler in before.items():
                if handler is not None:  # None: installed outside Python, which cannot put it back
                    signal.signal(s, handler)

