"""Tell a broken device or template from a bad configuration, from the compiler's messages.

When the first trials of a run all fail to build with the same message, the error does not
depend on the parameters: the template has a syntax error, a problem key or parameter clashes
with a name in the source (each is a ``-D`` macro), or the compiler cannot build for this
device at all. Tuning on would only repeat it, so :class:`SameBuildError` spots it and
:func:`explain` says where it is and what to do. When the first trials of a new study, the
baseline first, all give the same wrong result, :class:`SameWrongResult` stops the run: the
reference or the spec's arguments are the likelier fault.

Example:
    >>> errors("k.cl:2:40: error: expected ')' | <command line>:1:12: note: expanded from macro 'N'")
    (Located(file='k.cl', line=2, text="expected ')'"),)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import runtimes
from .guards import is_kernels_fault
from .launch import NO_KERNEL
from .result import Status
from .spec import expand_includes

#: After this many measured trials fail to build with one message, the run stops.
WINDOW = 3
#: After this many measured trials of a new study give the same wrong result, the run stops
#: (more than WINDOW: a wrong result costs a build and a launch, and several configurations of
#: a real kernel can share one bug where a build error of all of them is the template's).
WRONG_WINDOW = 5

# "file:12:5: error: text" (clang, NVIDIA, Intel) or "error: file:12:5: text" (PoCL 5, which
# may add " <Spelling=...>" after the location)
_LOCATED = re.compile(r"(?:^|[\s|])([^\s|:]*):(\d+):\d+: (?:fatal )?error: ([^|\n]+)"
                      r"|(?:^|[\s|])error: ([^\s|:]*):(\d+):\d+(?: <Spelling=[^|\n]*?>)?: ([^|\n]+)")
_MACRO = re.compile(r"expanded from macro '(\w+)'")
_NOISE = re.compile(r"0x[0-9a-f]+|/\S+")  # object addresses and temporary file names
_NUMBERS = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|\b(?:nan|inf)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Located:
    """A compiler error at a line of a file (the template, or a file it includes)."""

    file: str
    line: int
    text: str


def errors(message: str) -> tuple[Located, ...]:
    """The located errors in a build message. autotune's sources carry ``#line`` directives,
    so the file is the template's name or an included file's; a bare number or ``<kernel>``
    is what compilers print for a source without them."""
    return tuple(Located(m[0] or m[3], int(m[1] or m[4]), (m[2] or m[5]).strip())
                 for m in _LOCATED.findall(message))


def signature(message: str) -> str:
    """What two builds must share to have failed the same way, whatever the run-specific noise."""
    located = errors(message)
    if located:
        return "\n".join(f"{e.line}: {e.text}" for e in located)
    return _NOISE.sub("", message).strip()


class _SameFailure:
    """Watches a run's first measured trials for one failure repeated ``window`` times: true
    of every configuration tried, it is not the configurations' fault."""

    #: Outcomes that say nothing either way: not counted, and the watch goes on.
    _passed_over: frozenset[Status] = frozenset()

    def __init__(self, window: int) -> None:
        self.window = window
        self._seen: list[str] = []
        self._open = True

    def add(self, status: Status, message: str) -> bool:
        """Record a measured trial; True once the first ``window`` all failed the same way."""
        if not self._open or status in self._passed_over:
            return False
        key = self._signature(status, message)
        if key is None:
            self._open = False  # something verified, or failed another way (or as told)
            return False
        self._seen.append(key)
        if len(set(self._seen)) > 1:
            self._open = False
            return False
        return len(self._seen) >= self.window

    def _signature(self, status: Status, message: str) -> str | None:
        raise NotImplementedError


class SameBuildError(_SameFailure):
    """The first :data:`WINDOW` trials fail to build with one message. An ``#error`` directive
    of the template is not one: it rejects configurations on purpose."""

    def __init__(self, window: int = WINDOW, template: Path | None = None) -> None:
        super().__init__(window)
        self._template = template
        self._messages: list[str] = []  # the failed builds' messages, for places()

    def _signature(self, status: Status, message: str) -> str | None:
        if status is not Status.COMPILE_ERROR or self._deliberate(message):
            return None
        self._messages.append(message)
        located = errors(message)
        if located and all(0 < e.line <= len(self._lines(e.file)) for e in located):
            # the template's mistake (or a header's beside it), wherever it is: the same one in
            # each variant's branch failed each at its own line, and the run went on (trials
            # 103, 105); a line past the file's end is the compiler's own, compared with its line
            return "\n".join(dict.fromkeys(e.text for e in located))
        return signature(message)

    def places(self) -> list[tuple[str, int]]:
        """Where the builds watched failed: (file, line) of each error, each once, in order."""
        return list(dict.fromkeys((e.file, e.line) for m in self._messages for e in errors(m)))

    def _lines(self, file: str) -> list[str]:
        return [] if self._template is None else source_lines(self._template, file)

    def _deliberate(self, message: str) -> bool:
        return self._template is not None and deliberate(message, self._template)


def source_lines(template: Path, file: str) -> list[str]:
    """The lines of ``file`` as the compiler names it: ``template``, or a header beside it."""
    path = template if file == template.name else template.parent / file
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
    except OSError:
        return []


def deliberate(message: str, template: Path) -> bool:
    """Whether a build stopped at an ``#error`` line of ``template`` or a header of it: a
    configuration it refuses on purpose."""
    return any(_at_error(source_lines(template, e.file), e.line) for e in errors(message))


def _at_error(lines: list[str], line: int) -> bool:
    """Whether ``line`` (from 1) of ``lines`` is an ``#error`` directive."""
    return 0 < line <= len(lines) and re.match(r"\s*#\s*error\b", lines[line - 1]) is not None


def guarded_by(message: str, template: Path) -> set[str]:
    """The names that the ``#if``s (and their ``#elif``s) around the ``#error`` a build stopped
    at read, the enclosing ones too (trial 112), those around the ``#include`` of a header it is
    in, and a directive's continued lines (trial 114), comments left out; empty where there is
    none (:func:`deliberate`).

    >>> import tempfile; t = Path(tempfile.mkdtemp()) / "k.cl"
    >>> _ = t.write_text("#if BIG /* big ones */\\n#if N > 4096 && \\\\\\n  defined(X)\\n"
    ...                  "#error too big\\n#endif\\n#endif\\n")
    >>> sorted(guarded_by("k.cl:4:2: error: too big", t))
    ['BIG', 'N', 'X']
    """
    for e in errors(message):
        lines = _directives(source_lines(template, e.file))
        if not _at_error(lines, e.line):
            continue
        names = _enclosing(lines, e.line - 1)
        if e.file == template.name:
            return _defined_from(names, lines)
        # a header: and the #ifs around its #include in the template
        top = _directives(source_lines(template, template.name))
        included = re.compile(rf"\s*#\s*include\s*[\"<]{re.escape(e.file)}[\">]")
        names |= set().union(*(_enclosing(top, i) for i, line in enumerate(top) if included.match(line)))
        return _defined_from(names, lines + top)
    return set()


def _defined_from(names: set[str], lines: list[str]) -> set[str]:
    """``names`` with the names each of them is ``#define``d from in ``lines``, transitively
    (trial 117: `#define TILE (WG * 2)` read a parameter that `#if N % TILE` hid)."""
    defines: dict[str, set[str]] = {}
    for line in lines:
        if (m := re.match(r"\s*#\s*define\s+(\w+)(\([^)]*\))?\s*(.*)", line)) is not None:
            defines.setdefault(m.group(1), set()).update(re.findall(r"[A-Za-z_]\w*", m.group(3)))
    out, todo = set(names), list(names)
    while todo:
        for name in defines.get(todo.pop(), set()) - out:
            out.add(name)
            todo.append(name)
    return out


def _directives(lines: list[str]) -> list[str]:
    """``lines`` with comments blanked and each directive's continued lines joined onto its
    last (the others left empty), so that line numbers still index them."""
    text = re.sub(r"/\*.*?\*/", lambda m: " " + "\n" * m.group().count("\n"), "\n".join(lines), flags=re.S)
    out = [re.sub(r"//.*", "", line) for line in text.split("\n")]
    for i in range(len(out) - 1):
        if out[i].rstrip().endswith("\\"):
            out[i + 1], out[i] = out[i].rstrip()[:-1] + " " + out[i + 1], ""
    return out


def _enclosing(lines: list[str], index: int) -> set[str]:
    """The names read by the conditions of the ``#if`` blocks around line ``index``."""
    names: set[str] = set()
    depth = 0
    for line in reversed(lines[:index]):
        directive = re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", line)
        if directive is None:
            continue
        word, rest = directive.groups()
        if word == "endif":
            depth += 1
        elif depth and word.startswith("if"):
            depth -= 1
        elif not depth:  # a branch of the block around it, or that block's #if, then the next out
            names |= set(re.findall(r"[A-Za-z_]\w*", rest)) - {"defined"}
    return names


class SameWrongResult(_SameFailure):
    """The first :data:`WRONG_WINDOW` trials of a new study, the baseline first, all give wrong
    results that differ only in their numbers (which elements, what values): the reference or
    the spec's arguments are more likely wrong than every configuration of the kernel. A read
    or write outside an array, a race or a scratch buffer read before written is not one:
    that is the kernel's, and its reason says so."""

    # a configuration that timed out or did not build or launch gave no result to compare
    # (trial 22: one hanging hint among the first five hid a wrong reference for the whole run)
    _passed_over = frozenset({Status.TIMEOUT, Status.COMPILE_ERROR, Status.LAUNCH_ERROR})

    def __init__(self, window: int = WRONG_WINDOW) -> None:
        super().__init__(window)

    def _signature(self, status: Status, message: str) -> str | None:
        if status is not Status.WRONG_RESULT or is_kernels_fault(message):  # pinned on the kernel already
            return None
        return _NUMBERS.sub("#", message)


def explain(message: str, template: Path, macros: Mapping[str, object], device: str,
            trials: int, derived: Collection[str] = (), same: bool = True,
            places: Sequence[tuple[str, int]] = ()) -> str:
    """One line: the device, the compiler's message with the template line, and the fix.

    ``macros`` maps each name autotune defines with ``-D`` (problem keys and parameters) to
    its value, so a name in the source that clashes with one can be named; ``derived``: the
    spec's derived names, which a template may expect as macros too; ``same``: whether the
    builds all failed with this error (else it is one of theirs); ``places``: the (file, line)
    where they failed (:meth:`SameBuildError.places`).
    """
    which = "same error" if same else "errors differ, one of them"
    head = f"every configuration fails to build on {device} ({trials} tried, {which})"
    missing = NO_KERNEL.search(message)
    if missing:  # the spec's fault, not the compiler's
        return (f"{head}: {message.strip()}; fix the `entry` of the spec's launch step, or the "
                f"template's #if around kernel {missing[1]}")
    located = errors(message)
    if not located:
        return (f"{head}: {message.strip()}; the compiler cannot build for this device: choose "
                f"another with --device (`autotune devices` shows which build), or {runtimes.cpu_fix()}")
    first = located[0]
    file = template.parent / first.file
    if not file.is_file():  # a name the compiler made up: the template itself, or its own header
        file = template
    lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    code = lines[first.line - 1].strip() if 0 < first.line <= len(lines) else ""
    where = f"{file.name}:{first.line}: error: {first.text}" + (f" in `{code}`" if code else "")
    if not code and file == template:  # trial 30: saxpy.cl:115 named in an 8-line template
        where = f"{first.file}:{first.line} (the compiler's, not {template.name}): error: {first.text}"
    clash = _clash(message, expand_includes(template), macros)
    undeclared = next((n for n in derived if re.search(_UNDECLARED.format(n=re.escape(n)), first.text)), None)
    if clash is not None:
        fix = (f"`{clash}` is defined by autotune as a macro (-D{clash}={macros[clash]}), since "
               "every problem key and parameter is; rename it in the template, or the key or parameter in the spec")
    elif undeclared is not None:
        fix = (f"`{undeclared}` is a derived value of the spec, and those are not passed to the compiler "
               "(only problem keys and parameters are, as macros): compute it in the template from those")
    else:
        fix = f"fix {file.name} at line {first.line}"
        # the same mistake elsewhere, in another variant's branch (trial 103: named one at a time)
        others = [f"{f}:{line}" for f, line in places if (f, line) != (first.file, first.line)]
        how = "the same way" if same else "too"  # (trial 111: "the same way" of another error)
        fix += f" (other configurations fail {how} at {', '.join(others)})" if others else ""
    return f"{head}: {where}; {fix}"


#: An undeclared name, as clang (Intel, PoCL) and NVIDIA's compiler say it.
_UNDECLARED = r"""undeclared identifier ['"]{n}['"]|['"]{n}['"] is undefined"""
_DECLARED = r"\b(?:int|uint|long|ulong|float|double|char|uchar|short|ushort|size_t|bool)\s*\*?\s*{}\b"


def _clash(message: str, source: str, macros: Mapping[str, object]) -> str | None:
    """The autotune macro that broke the build: named by the compiler's note, or declared as
    a variable or argument in the source (``int N``, which the macro turns into ``int 2048``;
    not every compiler's message points at that line)."""
    named = [m for m in _MACRO.findall(message) if m in macros]
    if named:
        return named[0]
    return next((m for m in macros if re.search(_DECLARED.format(re.escape(m)), source)), None)
