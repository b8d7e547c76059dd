"""Ctrl-C and SIGTERM: how a command and a run stop on them, and which one it was.

A stop raises KeyboardInterrupt in the main thread and is noted, so that the command exits
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM) wherever it landed: while the
command starts, inside a run, or in a worker that was starting up.

Example:
    >>> with stop_signals() as signals:
    ...     signals.requested()
    False
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

#: Set by a stop signal. The KeyboardInterrupt its handler raises lands wherever the main
#: thread is, and where that is a ``__del__`` or a weakref callback Python prints "Exception
#: ignored" and goes on; a run checks this too (see StopSignals), so it stops all the same.
_REQUESTED = threading.Event()

#: The signal of the last stop (SIGINT or SIGTERM): the command exits 128 + its number.
_SIGNAL = [int(signal.SIGINT)]


@dataclass(frozen=True)
class StopSignals:
    """What a run needs of the stop signals: ``hold()`` ignores further stops while saving;
    ``requested()`` says whether a stop came whose KeyboardInterrupt may have been lost (never,
    for a run in another thread, which installs no handler)."""

    hold: Callable[[], None]
    requested: Callable[[], bool]


@contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """Ctrl-C and SIGTERM stop the run (main thread only). The caller's handlers are restored
    on the way out."""
    with handled(raise_interrupt, raise_interrupt) as main:
        if not main:
            yield StopSignals(lambda: None, lambda: False)
            return
        _REQUESTED.clear()
        _SIGNAL[0] = signal.SIGINT
        hook = sys.unraisablehook

        def unraisable(u: Any) -> None:
            # a stop's KeyboardInterrupt dropped in a finalizer: the run stops at the next trial
            # (_REQUESTED), so Python's "Exception ignored" traceback would only alarm
            if not (isinstance(u.exc_value, KeyboardInterrupt) and _REQUESTED.is_set()):
                hook(u)

        sys.unraisablehook = unraisable
        try:
            yield StopSignals(_ignore_stops, _REQUESTED.is_set)
        finally:
            sys.unraisablehook = hook
            _REQUESTED.clear()


@contextmanager
def handled(on_int: Any, on_term: Any) -> Iterator[bool]:
    """SIGINT and SIGTERM handled by ``on_int`` and ``on_term`` inside, the caller's handlers
    restored after; yields whether they were set (False in a thread other than the main one,
    which cannot set them: its caller owns the signals)."""
    try:
        previous = signal.signal(signal.SIGINT, on_int), signal.signal(signal.SIGTERM, on_term)
    except ValueError:
        yield False
        return
    try:
        yield True
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


@contextmanager
def blocked(*signums: int) -> Iterator[None]:
    """``signums`` held back in this thread while inside, and delivered after: a process started
    inside inherits them blocked, so it can start up (imports, a second or so) before it takes
    them, and one sent meanwhile is neither lost nor a traceback of its bootstrap (ignoring them
    instead lost a Ctrl-C sent then: trial 44). The process must unblock them itself
    (:func:`unblock`) once its handlers are set."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signums)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def unblock(*signums: int) -> None:
    """Take ``signums`` again in a process started inside :func:`blocked`: one sent while it
    started is delivered now, to the handlers just set."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signums)


def last_stop_signal() -> int:
    """The signal of the last stop, SIGINT where there was none."""
    return _SIGNAL[0]


def stop_requested() -> bool:
    """Whether the run in progress was told to stop."""
    return _REQUESTED.is_set()


def raise_interrupt(signum: int, frame: Any) -> None:
    """A signal handler: the stop noted (:func:`last_stop_signal`), KeyboardInterrupt raised."""
    _note_stop(signum, frame)
    raise KeyboardInterrupt


def hold() -> None:
    """Ctrl-C and SIGTERM noted only, from now until the enclosing :func:`stop_signals` ends:
    what is left (saving the run, printing its summary) is not cut short."""
    _ignore_stops()


def held() -> AbstractContextManager[bool]:
    """Ctrl-C and SIGTERM noted only while inside (main thread only), the caller's handlers
    restored after: work that must not be cut short, outside a run's :func:`stop_signals`."""
    return handled(_note_stop, _note_stop)


def _ignore_stops() -> None:
    """Ctrl-C and SIGTERM ignored, noted only (what is left is saving the run)."""
    signal.signal(signal.SIGINT, _note_stop)
    signal.signal(signal.SIGTERM, _note_stop)


def _note_stop(signum: int, frame: Any) -> None:
    _REQUESTED.set()
    _SIGNAL[0] = signum
