"""The exception hierarchy: every error autotune raises on purpose derives from AutotuneError.

The CLI prints ``str(error)`` of these as one line and exits non-zero; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
import warnings
from pathlib import Path
from types import FrameType
from typing import Any


class AutotuneError(Exception):
    """Root of all autotune errors; the message says what is wrong and how to fix it."""


class AutotuneWarning(UserWarning):
    """autotune fell back to something less than a tuned configuration (the CLI prints it as
    one line)."""


_PACKAGE = os.path.dirname(__file__) + os.sep


def warn(message: str, at: FrameType | None = None) -> None:
    """An AutotuneWarning attributed to the first caller outside this package (the
    application's call), however deep in autotune it was raised; ``at``: that caller's frame,
    for a warning given from another thread (:func:`caller`)."""
    if (at := at or _outside(sys._getframe(1))) is None:  # called from autotune's own thread
        warnings.warn(AutotuneWarning(message), stacklevel=2)
        return
    # (not the caller's globals: with them Python 3.12 asks their loader for the source line, and
    # the loader of `python -c` code raises ImportError)
    registry = at.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(AutotuneWarning(message), AutotuneWarning, at.f_code.co_filename, at.f_lineno,
                           at.f_globals.get("__name__"), registry)


def warn_once(given: set[Any], key: Any, message: str) -> None:
    """:func:`warn`, unless ``key`` is in ``given``: noted there once given, so that a filter that
    makes it an error raises it at every call (trial 100: noted first, only the first raised)."""
    if key not in given:
        warn(message)  # (attributed past this frame too: it is autotune's)
        given.add(key)


def caller() -> FrameType | None:
    """The frame of the first caller outside this package, as :func:`warn` attributes a warning."""
    return _outside(sys._getframe(1))


def _outside(frame: FrameType | None) -> FrameType | None:
    # contextlib's: autotune's context managers are entered there, from the caller's `with`
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE)
                                 or frame.f_code.co_filename == contextlib.__file__):
        frame = frame.f_back
    return frame


def own_warnings() -> None:
    """autotune's warnings printed whatever ``-W`` or ``PYTHONWARNINGS`` say, in a process or
    ``warnings.catch_warnings()`` block of autotune's own: its warnings are messages of the
    command (trial 83: under PYTHONWARNINGS=error each was a traceback; trial 84: the measuring
    worker inherited the filter and failed to start)."""
    warnings.filterwarnings("default", category=AutotuneWarning)


class SpecError(AutotuneError):
    """A kernel spec (search-space YAML) or its template/reference is missing or malformed."""


class ExpressionError(SpecError):
    """A constraint, launch or metric expression is not a valid restricted expression."""


class ConditionError(ExpressionError):
    """A constraint gave something other than true or false: the spec is wrong for every
    configuration, so it ends the run rather than ruling one out."""


class DeviceError(AutotuneError):
    """No OpenCL device matches, or none is available."""


class ProblemError(AutotuneError):
    """A problem size or option is invalid for the kernel (e.g. bad ``--size``)."""


class OptionError(ProblemError):
    """An option's value is out of its range (``--trials 0``): a usage error, exit status 2."""


class ProfileError(AutotuneError):
    """A profile YAML cannot be read or written (corrupt file, bad entry)."""


class ProfileNotSaved(ProfileError):
    """A run finished but its profile could not be written; ``report`` is the run's report (the
    CLI prints its summary before the error)."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class SaveStopped(ProfileError):
    """A stop signal came while a save waited for another process's lock on the profile."""


class StorageError(AutotuneError):
    """The study's database stopped answering during a run (a lost server, a broken file)."""

    @classmethod
    def lost(cls, exc: BaseException) -> StorageError:
        """The error for a database error ``exc``, in one line."""
        return cls(f"the study database stopped answering ({type(exc).__name__}: {first_line(exc)})")


class BuildError(AutotuneError):
    """Every configuration fails to build the same way: a broken template or device compiler."""


class ScratchError(AutotuneError):
    """The temporary folder cannot take a run's files (it is full, or cannot be written)."""


class WorkerError(AutotuneError):
    """The measuring worker failed in a way that is not a property of one candidate."""


class TuningInterrupted(AutotuneError):
    """SIGINT, SIGTERM or SIGHUP stopped a tuning run; finished trials were kept. ``report`` (also
    ``args[0]``) is the run's report; ``signum`` the signal that stopped it (the command exits
    128 + signum)."""

    def __init__(self, report: object, signum: int = signal.SIGINT, signalled: bool = True) -> None:
        super().__init__(report)
        self.report = report
        self.signum = int(signum)
        self.signalled = signalled  # False: a KeyboardInterrupt raised in the run (a progress callback's)

    def __reduce__(self) -> tuple[type, tuple[object, int, bool]]:  # the signal too, across processes
        return type(self), (self.report, self.signum, self.signalled)

    def __str__(self) -> str:
        """One line (trial 60: the report's whole repr, 12 KB, in a notebook's traceback)."""
        measured = getattr(self.report, "measured", None)
        after = f" after {measured} measured configuration{'s' * (measured != 1)}" if measured is not None else ""
        # trial 66: a progress callback's KeyboardInterrupt was called a SIGINT
        by = signal.Signals(self.signum).name if self.signalled else "a KeyboardInterrupt raised in the run"
        # trial 73: "were kept" of a study in memory, which ends with the run
        kept = "the study was in memory: not kept" if getattr(self.report, "storage", None) == ":memory:" \
            else "the finished trials were kept"
        return f"tuning stopped by {by}{after}; {kept}"

    def __repr__(self) -> str:
        return f"TuningInterrupted({str(self)!r})"  # trial 66: the report's 11 KB repr


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): driver
    errors run to many lines, and autotune says what went wrong in one."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def raised_in(exc: BaseException, module: str | Path) -> str:
    """``exc`` in one line, at the line of the user's code that raised it: in ``module`` (a
    reference module's file) or beside it (trial 70: a reference's ModuleNotFoundError came
    without a line, a SyntaxError as Python's tuple).

    >>> try:
    ...     compile("x = [", "ref.py", "exec")
    ... except SyntaxError as e:
    ...     raised_in(e, "ref.py")
    "ref.py:1: SyntaxError: '[' was never closed"
    """
    folder = Path(module).parent
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).parent == folder:
        return f"{exc.filename}:{exc.lineno}: {type(exc).__name__}: {exc.msg}"
    mine = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).parent == folder]
    where = f"{mine[-1].filename}:{mine[-1].lineno}: " if mine else ""
    said = first_line(exc) if str(exc).strip() else ""  # one line; none where it has no message
    return f"{where}{type(exc).__name__}" + (f": {said}" if said else "")


def clipped(text: str, width: int, cut: bool = False) -> str:
    """``text`` cut to ``width`` characters, with a mark where it was cut (a message of a 21 KB
    list, trial 53; a line cut silently mid-sentence loses the fix it ended with); ``cut``:
    mark it as cut even where it fits (the rest of a message left out). The cut falls between
    words where one ends in the last third (trial 56: "(unwritten o…").

        >>> clipped("0123456789", 5), clipped("are not finite (unwritten or overflow)", 30)
        ('0123…', 'are not finite (unwritten or…')
        >>> clipped("abcdefghij klm nop", 15)
        'abcdefghij klm…'
    """
    if len(text) <= width and not cut:
        return text
    kept = text[:width - 1]
    if text[width - 1:width] not in ("", " ") and (space := kept.rfind(" ")) >= 2 * width // 3:
        kept = kept[:space]  # the cut falls inside a word: before it
    return kept.rstrip() + "…"
