"""Ctrl-C, SIGTERM and SIGHUP: how a command and a run stop on them, and which one it was.

A stop raises KeyboardInterrupt in the main thread and is noted, so that the command exits
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP) wherever it
landed: while the command starts, inside a run, or in a worker that was starting up. SIGHUP
(a terminal closed, an ssh session dropped) stops a run as SIGTERM does, so that its best so
far is saved (it killed the run before, with nothing saved); where one is ignored, as SIGHUP
under ``nohup``, or SIGINT in a script's background job, it stays ignored.

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


class _Flag:
    """A flag a signal handler sets: a plain attribute, where a ``threading.Event``'s lock
    deadlocked a worker whose handler ran again, for a second SIGTERM, while its first held
    it (trial 68: a run on several devices hung until SIGKILL; the group's SIGTERM and the one
    passed on by the command reach each worker)."""

    value = False

    def set(self) -> None:
        self.value = True

    def clear(self) -> None:
        self.value = False

    def is_set(self) -> bool:
        return self.value


#: Set by a stop signal. The KeyboardInterrupt its handler raises lands wherever the main
#: thread is, and where that is a ``__del__`` or a weakref callback Python prints "Exception
#: ignored" and goes on; a run checks this too (see StopSignals), so it stops all the same.
_REQUESTED = _Flag()

#: How many :func:`stop_signals` the main thread is inside (the command's, then a run's).
_DEPTH = [0]

#: The signal of the first stop since the handlers were set (SIGINT, SIGTERM or SIGHUP): the
#: command exits 128 + its number.
_SIGNAL = [int(signal.SIGINT)]

#: SIGHUP, where the system has it (not on Windows).
_HANGUP: int | None = getattr(signal, "SIGHUP", None)


#: The signals that stop a run, where they are not ignored.
_STOPS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, *(() if _HANGUP is None else (_HANGUP,)))


def ignored() -> tuple[int, ...]:
    """The stop signals ignored now: SIGHUP under ``nohup``, SIGINT in a script's background job
    (``cmd &``), as the caller left them (autotune's own stops are noted, never ignored, but in
    a measuring worker, whose parent takes them, and as the command exits)."""
    return tuple(s for s in _STOPS if signal.getsignal(s) is signal.SIG_IGN)


def signals() -> tuple[int, ...]:
    """The signals that stop a run now: SIGINT, SIGTERM and SIGHUP, each where it is not ignored
    (trial 111: a run in a script's background job, which inherits SIGINT ignored, was stopped
    by the Ctrl-C meant for the script)."""
    return tuple(s for s in _STOPS if signal.getsignal(s) is not signal.SIG_IGN)


@contextmanager
def hangup_held() -> Iterator[None]:
    """SIGHUP blocked inside, for a process started there to inherit blocked (it never takes it),
    and delivered here after (trial 92: ignored instead, one sent meanwhile was lost, and the run
    went on to exit 0)."""
    if _HANGUP is None:
        yield
        return
    with blocked(_HANGUP):
        yield


def keep_ignored() -> None:
    """Ignore the stop signals again where Python was told they are ignored (``nohup``): Intel's OpenCL
    runtime sets a handler of its own over that, which a process started later does not
    inherit as ignored (trial 68: a run on several devices under nohup stopped on SIGHUP)."""
    if threading.current_thread() is threading.main_thread():
        for s in ignored():
            signal.signal(s, signal.SIG_IGN)


@dataclass(frozen=True)
class StopSignals:
    """What a run needs of the stop signals: ``hold()`` ignores further stops while saving;
    ``requested()`` says whether a stop came whose KeyboardInterrupt may have been lost (never,
    for a run in another thread, which installs no handler)."""

    hold: Callable[[], None]
    requested: Callable[[], bool]


@contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """Ctrl-C, SIGTERM and SIGHUP stop the run (main thread only). The caller's handlers are
    restored on the way out."""
    with handled(raise_interrupt, raise_interrupt) as main:
        if not main:
            yield StopSignals(lambda: None, lambda: False)
            return
        # a stop before a run's own (nested: the command's, then tune's) is the run's too (trial
        # 103: its KeyboardInterrupt lost while the command started, the run began afresh and
        # went on to exit 0); the outermost starts and ends clear
        outer = _DEPTH[0] == 0
        if outer:
            _REQUESTED.clear()
            _SIGNAL[0] = signal.SIGINT
        elif _REQUESTED.is_set():
            _ignore_stops()  # its KeyboardInterrupt was raised once already
        _DEPTH[0] += 1
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
            _DEPTH[0] -= 1
            if outer:
                _REQUESTED.clear()


@contextmanager
def handled(on_int: Any, on_term: Any) -> Iterator[bool]:
    """SIGINT handled by ``on_int`` inside, SIGTERM and SIGHUP (:func:`signals`) by
    ``on_term``, the caller's handlers restored after; yields whether they were set (False in
    a thread other than the main one, which cannot set them: its caller owns the signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    # None: a handler set outside Python (Intel's runtime sets its own), which it cannot put back
    previous = {s: signal.signal(s, on_int if s == signal.SIGINT else on_term) for s in signals()}
    try:
        yield True
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


@contextmanager
def blocked(*signums: int) -> Iterator[None]:
    """``signums`` held back in this thread while inside, and delivered after: a process started
    inside inherits them blocked, so it can start up (imports, a second or so) before it takes
    them, and one sent meanwhile is neither lost nor a traceback of its bootstrap (ignoring them
    instead lost a Ctrl-C sent then: trial 44). The process must unblock them itself
    (:func:`unblock`) once its handlers are set. Where signals cannot be held (no
    ``pthread_sigmask``: Windows), nothing is."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
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
    """A signal handler: the stop noted (:func:`last_stop_signal`), KeyboardInterrupt raised,
    once: later stops are noted only, until the handlers are set again (a second SIGTERM, or a
    second Ctrl-C, landing while the first one's KeyboardInterrupt was being handled cut the
    saving short with a traceback, trial 68)."""
    _note_stop(signum, frame)
    _ignore_stops()  # handlers run in the main thread, which may set them
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
    """Ctrl-C, SIGTERM and SIGHUP ignored, noted only (what is left is saving the run)."""
    for s in signals():
        signal.signal(s, _note_stop)


def stop_count() -> int:
    """How many stop signals were noted so far: a wait that sees it grow was told to stop
    (:func:`stop_requested` stays set from the stop that ended the search)."""
    return _COUNT[0]


#: Stop signals noted in this process (see :func:`stop_count`).
_COUNT = [0]


def _note_stop(signum: int, frame: Any) -> None:
    _COUNT[0] += 1
    if not _REQUESTED.is_set():  # the stop that stopped the run names the status (trial 69: the last did)
        _SIGNAL[0] = signum
    _REQUESTED.set()
