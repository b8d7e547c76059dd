"""Time taken by the reference module (inputs(), reference(), error_bound()): a note while it
runs long, and an end where a run's --timeout is up; the note alone (:func:`noted`) for a
first-use candidate that runs long.

It runs before the first kernel is built (inputs() twice: to size the buffers, then for the
values) and says nothing while it runs; a slow one (a pure-Python loop over a large problem)
looked like a hang (trial 45), and --timeout did not end it. Example:

    >>> with watched("ref.py: inputs() and reference()", limit_s=60.0, faster="vectorise it, "):
    ...     pass
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from .errors import ProblemError, caller, warn

#: The note comes once the module has run this long.
NOTE_AFTER_S = 10.0
#: The longest alarm set (the limit given may be longer).
YEAR_S = 365 * 86400.0


class _Overtime(BaseException):
    """Raised into the reference module's code by the alarm (a BaseException, so that the
    wrapper that reports the module's own exceptions does not take it for one)."""


@contextmanager
def noted(said: str, after_s: float) -> Iterator[None]:
    """Run the block with a warning of ``said`` once it has run ``after_s`` seconds: given from a
    timer's thread, attributed to the caller's line (trial 100: said to come from threading.py);
    where the caller's filter makes it an error, printed to stderr when due and raised in the
    caller's thread once the block ends (raised in the timer's thread, it was a traceback there:
    trial 60)."""
    refused: list[Warning] = []
    at = caller()

    def say() -> None:
        try:
            warn(said, at)
        except Warning as exc:  # said now as well: the block may never end (trial 102: a hung kernel)
            refused.append(exc)
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    note = threading.Timer(after_s, say)
    note.daemon = True
    note.start()
    try:
        yield
    finally:
        note.cancel()
    if refused:
        raise refused[0]


@contextmanager
def watched(what: str, limit_s: float | None, faster: str = "") -> Iterator[None]:
    """Run the block with a note after :data:`NOTE_AFTER_S` and, where ``limit_s`` is given, this
    is the main thread (an alarm signal needs it) and no other alarm is pending, a ProblemError
    once it has run that long (the alarm is taken when Python code runs: a numpy call in
    progress finishes first). ``faster``: advice that goes before "choose a smaller size"."""
    started = time.perf_counter()
    counted = "" if limit_s is None else ", and a run's --timeout counts it"
    advice = f"{faster}or choose a smaller size" if faster else "a smaller size takes less"
    said = (f"{what} has run for {NOTE_AFTER_S:g} s so far; it runs before the first configuration is verified"
            f"{counted} ({advice})")
    # not where the application has an alarm of its own pending (trial 51: it was cancelled)
    alarm = (limit_s is not None and hasattr(signal, "setitimer")
             and threading.current_thread() is threading.main_thread()
             and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
    armed = [alarm]

    def overtime(signum: int, frame: FrameType | None) -> None:
        if armed[0]:  # not once the block is over: the alarm may come as it ends
            raise _Overtime

    previous = None
    if alarm:
        assert limit_s is not None
        previous = signal.signal(signal.SIGALRM, overtime)
        # setitimer takes at most time_t's range (trial 71: --timeout 1e10 was an OverflowError);
        # a year is as good as forever here
        signal.setitimer(signal.ITIMER_REAL, min(max(limit_s, 1e-3), YEAR_S))
    try:
        with noted(said, NOTE_AFTER_S):
            yield
    except _Overtime:
        assert limit_s is not None
        raise ProblemError(
            f"{what} had not finished " + (f"in the {limit_s:.3g} s the run's --timeout left it" if limit_s > 0 else
                                           "when the run's --timeout ran out") + " (it was stopped "
            f"after {time.perf_counter() - started:.3g} s, once Python code ran again): it runs before tuning "
            f"starts; {faster}choose a smaller --size, or give a longer --timeout") from None
    finally:
        armed[0] = False
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
