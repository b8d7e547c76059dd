"""Tell a broken device or template from a bad configuration, from the compiler's messages.

When the first trials of a run all fail to build with the same message, the error does not
depend on the parameters: the template has a syntax error, a problem key or parameter clashes
with a name in the source (each is a ``-D`` macro), or the compiler cannot build for this
device at all. Tuning on would only repeat it, so :class:`SameBuildError` spots it and
:func:`explain` says where it is and what to do.

Example:
    >>> errors("1:2:40: error: expected ')' | <command line>:1:12: note: expanded from macro 'N'")
    (Located(line=2, text="expected ')'"),)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: After this many measured trials fail to build with one message, the run stops.
WINDOW = 3

_LOCATED = re.compile(r"(?:^|[\s|])[^\s|:]*:(\d+):\d+: (?:fatal )?error: ([^|\n]+)")
_MACRO = re.compile(r"expanded from macro '(\w+)'")
_NOISE = re.compile(r"0x[0-9a-f]+|/\S+")  # object addresses and temporary file names


@dataclass(frozen=True)
class Located:
    """A compiler error at a line of the source."""

    line: int
    text: str


def errors(message: str) -> tuple[Located, ...]:
    """The located errors in a build message (line numbers of the template)."""
    return tuple(Located(int(n), text.strip()) for n, text in _LOCATED.findall(message))


def signature(message: str) -> str:
    """What two builds must share to have failed the same way, whatever the run-specific noise."""
    located = errors(message)
    if located:
        return "\n".join(f"{e.line}: {e.text}" for e in located)
    return _NOISE.sub("", message).strip()


class SameBuildError:
    """Watches a run's first measured trials for one build error repeated :data:`WINDOW` times."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self._seen: list[str] = []
        self._open = True

    def add(self, compile_error: bool, message: str) -> bool:
        """Record a measured trial; True once the first ``window`` all failed the same way."""
        if not self._open:
            return False
        if not compile_error:
            self._open = False  # something built (or failed otherwise): the device works
            return False
        self._seen.append(signature(message))
        if len(set(self._seen)) > 1:
            self._open = False
            return False
        return len(self._seen) >= self.window


def explain(message: str, source: str, template: str, macros: Mapping[str, object],
            device: str, trials: int) -> str:
    """One line: the device, the compiler's message with the template line, and the fix.

    ``macros`` maps each name autotune defines with ``-D`` (problem keys and parameters) to
    its value, so a name in the source that clashes with one can be named.
    """
    head = f"every configuration fails to build on {device} ({trials} tried, same error)"
    located = errors(message)
    if not located:
        return (f"{head}: {message.strip()}; the compiler cannot build for this device: choose "
                "another with --device (`autotune devices` shows which build), or "
                "pip install 'autotune[cpu]' for Intel's CPU runtime")
    first = located[0]
    lines = source.splitlines()
    code = lines[first.line - 1].strip() if 0 < first.line <= len(lines) else ""
    where = f"{template}:{first.line}: error: {first.text}" + (f" in `{code}`" if code else "")
    clash = _clash(message, code, macros)
    if clash is not None:
        fix = (f"`{clash}` is defined by autotune as a macro (-D{clash}={macros[clash]}), since "
               "every problem key and parameter is; rename it in the template")
    else:
        fix = f"fix the template at line {first.line}"
    return f"{head}: {where}; {fix}"


def _clash(message: str, code: str, macros: Mapping[str, object]) -> str | None:
    """The autotune macro that broke the build, when the message or the line names one."""
    named = [m for m in _MACRO.findall(message) if m in macros]
    if named:
        return named[0]
    words = set(re.findall(r"\b[A-Za-z_]\w*\b", code))
    # a declaration such as `int N` that the macro turned into `int 2048`
    declared = [m for m in macros if re.search(rf"\b(?:int|uint|long|float|double|char|short|size_t)\s+{m}\b", code)]
    return declared[0] if declared and declared[0] in words else None
