"""``autotune report``: one self-contained HTML page (and its figures as PNG files) per kernel.

:mod:`.data` reads the studies and the profile into records, :mod:`.plots` draws the figures
(matplotlib, the ``report`` extra), :mod:`.page` writes the page; :func:`write` does all three.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import settings
from ..errors import ProblemError
from ..spec import KernelSpec
from ..study import shown_url
from . import page, plots
from .data import Section, find_sections

__all__ = ["Written", "write"]


@dataclass(frozen=True)
class Written:
    """What a report wrote: the page, the PNG files, and the studies it shows."""

    page: Path
    figures: tuple[Path, ...]
    sections: tuple[Section, ...]


def write(spec: KernelSpec, out: Path, storage: str | None = None, problem: Mapping[str, Any] | None = None,
          device: str | None = None) -> Written:
    """Write ``out/index.html`` and ``out/NN-PROBLEM-FIGURE.png`` for the studies of ``spec`` in
    ``storage`` (only ``problem``, only ``device``: see :func:`.data.find_sections`)."""
    plots.require_matplotlib()
    _check_folder(out)
    sections = find_sections(spec, storage, problem, device)
    figures = [_figures(s) for s in sections]
    files = {out / f"{i + 1:02d}-{_stem(s)}-{kind}.png": png
             for i, (s, figs) in enumerate(zip(sections, figures, strict=True)) for kind, png in figs.items()}
    source = shown_url(storage or settings.default_storage())
    files[out / "index.html"] = page.render(spec.name, sections, figures, source, [
        _notes(s, f) for s, f in zip(sections, figures, strict=True)]).encode("utf-8")
    try:
        out.mkdir(parents=True, exist_ok=True)
        _write_all(out, files)
    except OSError as exc:
        raise _unwritten(out, exc) from None
    return Written(out / "index.html", tuple(p for p in files if p.suffix == ".png"), tuple(sections))


def _unwritten(out: Path, exc: OSError) -> ProblemError:
    """The error for a report that could not be written: where one of its files is a folder,
    that file (trial 111: "(Is a directory); give -o a writable folder", of a writable one)."""
    name = next((Path(f) for f in (exc.filename2, exc.filename) if f and Path(f).parent == out), None)
    if exc.errno == errno.EISDIR and name is not None:
        return ProblemError(f"cannot write the report to {out}: {name} is a folder; move it away, or give -o "
                            "another folder")
    room = ", or make room there" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return ProblemError(f"cannot write the report to {out} ({exc.strerror}); give -o a writable folder{room}")


def _check_folder(out: Path) -> None:
    """ProblemError where ``out`` cannot be a folder: it, or a folder it would be made in, is a
    file (trial 103: "(File exists); give -o a writable folder"; trial 105: "(Not a directory)"),
    or a link to nothing (trial 105)."""
    said = "give -o a folder (the report is index.html and its figures)"
    for path in (out, *out.parents):
        if path.is_symlink() and not path.exists():  # (trial 107: or a folder above it)
            where = "it is" if path == out else f"{path} is"
            raise ProblemError(f"cannot write the report to {out}: {where} a link to {os.readlink(path)}, which does "
                               f"not exist; {said}, or make the folder it links to")
        if path.exists():
            if not path.is_dir():
                where = "it is a file" if path == out else f"{path} is a file"
                raise ProblemError(f"cannot write the report to {out}: {where}; {said}")
            return


def _write_all(out: Path, files: Mapping[Path, bytes]) -> None:
    """Write ``files`` beside their places first, then put them in place, so that a write that
    fails (a full disk) leaves no part of the new report and the earlier one whole (trial 83:
    a 0-byte PNG, and the earlier report's figures already removed)."""
    staged: list[Path] = []
    try:
        for path, data in files.items():
            staged.append(path.with_name(f".{path.name}.tmp"))
            staged[-1].write_bytes(data)
    except OSError:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    _clear(out)
    try:
        for path, tmp in zip(files, staged, strict=True):
            os.replace(tmp, path)
    finally:  # one that cannot take its place (trial 94: a folder named index.html) leaves none behind
        for tmp in staged:
            tmp.unlink(missing_ok=True)


#: The figures a report writes, by name: an earlier report's, left beside a new one in the same
#: folder, looked like part of it (trial 28).
FIGURE_NAME = re.compile(r"\d{2,}-.+-(convergence|importance|parameters|ceiling)\.png")


def _clear(out: Path) -> None:
    """Remove an earlier report's figures from ``out`` (only where its page is there too)."""
    if (out / "index.html").is_file():
        for old in out.iterdir():
            if FIGURE_NAME.fullmatch(old.name) and old.is_file():
                old.unlink()


def _figures(s: Section) -> dict[str, bytes]:
    drawn = {"convergence": plots.convergence(s), "importance": plots.importances(s),
             "parameters": plots.parameters(s), "ceiling": plots.ceiling_figure(s)}
    return {kind: png for kind, png in drawn.items() if png is not None}


def _notes(s: Section, figures: Mapping[str, bytes]) -> dict[str, str]:
    """Why a figure is missing, and how to get it."""
    size = f" -s {s.label}"
    notes = {
        "convergence": (f"No trial was measured in this study: its run stopped before the first "
                        f"(`autotune run {s.spec.argument}{size}` measures some)."),
        # (trial 124: said of 4 verified trials with 4 work-group sizes, each measured once)
        "importance": ("No parameter importances: they need at least 4 verified trials that differ, and at least two "
                       "more trials than a parameter has values among them (some value measured more than once, to "
                       "tell its effect from chance)."),
        "parameters": "No parameter varies among the verified trials.",
        "ceiling": (f"No ceiling known for {s.device_name}: run `autotune bench {s.spec.argument}{size}` on it "
                    "(it keeps the copy bandwidth and FP32 rate in the device's profile)."
                    if s.best is not None else "No configuration verified, so nothing to set against the ceilings."),
    }
    return {k: v for k, v in notes.items() if k not in figures}


def _stem(s: Section) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", s.label).strip("-")
